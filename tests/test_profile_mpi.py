"""The profiler under mpiexec with real ranks: exact bytes on every call path,
rank translation on derived communicators, phases, crash safety, exit codes,
and an unchanged program."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from rankmap.trace import read_trace
from tests.mpi_util import run_mpi

pytestmark = pytest.mark.mpi
SCRIPTS = Path(__file__).parent / "mpi_scripts"


def profile(n, tmp_path, script, *args, options=(), check=True, timeout=120):
    out = tmp_path / "run.rmtrace.npz"
    proc = run_mpi(n, ["-m", "rankmap.profile", "-o", str(out), *options, str(SCRIPTS / script), *args],
                   timeout=timeout, cwd=tmp_path, check=check)
    return out, proc


@pytest.mark.parametrize("n", [2, 4, 8])
def test_every_call_form_records_exact_bytes(n, tmp_path):
    expected_file = tmp_path / "expected.json"
    out, proc = profile(n, tmp_path, "profile_callforms.py", str(expected_file),
                        options=["--collectives", "root"], timeout=240)
    assert proc.stdout.count(": ok") == n
    trace = read_trace(out)
    assert trace.nranks == n and list(trace.ranks) == list(range(n))
    assert trace.status == ["complete"] * n
    assert not (Path(str(out) + ".parts")).exists(), "parts are removed once merged"
    want = defaultdict(lambda: defaultdict(float))  # (phase, kind) -> (src, dst) -> bytes
    for phase, kind, src, dst, nbytes in json.loads(expected_file.read_text()):
        want[(phase, kind)][(src, dst)] += nbytes
    checked = 0
    for (phase, kind), pairs in sorted(want.items()):
        g = trace.graph(kind, phase=phase).bytes.tocoo()
        got = {(int(s), int(d)): float(b) for s, d, b in zip(g.row, g.col, g.data)}
        exp = {k: float(v) for k, v in pairs.items() if k[0] != k[1]}
        assert got == exp, f"phase {phase!r} kind {kind}: recorded {got}, sent {exp}"
        checked += 1
    assert checked >= 30
    # phases the script ran with no traffic of a kind recorded nothing of it
    for phase in trace.phases:
        for kind in ("p2p", "collective", "rma"):
            covered = [(phase, kind)] + ([(phase, "rma")] if kind == "p2p" else [])  # p2p view includes rma
            if not any(k in want for k in covered) and phase != "main":
                assert trace.graph(kind, phase=phase).total_bytes == 0, (phase, kind)
    # the whole-run graph is the sum of the phases
    total = sum(trace.graph("all", phase=p).total_bytes for p in trace.phases)
    assert trace.graph("all").total_bytes == pytest.approx(total)


def test_rank_that_raises_aborts_and_leaves_part_files(tmp_path):
    out, proc = profile(4, tmp_path, "profile_crash.py", options=["--flush-interval", "0"],
                        check=False, timeout=90)
    assert proc.returncode != 0
    assert "ZeroDivisionError" in proc.stderr
    parts = Path(str(out) + ".parts")
    assert sorted(p.name for p in parts.iterdir()) == [f"rank{r:06d}.rmtrace.npz" for r in range(4)]
    assert not out.exists()
    trace = read_trace(parts)
    assert trace.status[2] == "error"
    assert trace.status[0] == trace.status[1] == trace.status[3] == "started"  # killed by the abort
    # the failing rank wrote what it sent before it raised
    assert trace.graph("p2p").bytes[2, 3] == 800


def test_exit_code_propagates_and_output_unchanged(tmp_path):
    plain = run_mpi(2, [str(SCRIPTS / "profile_exit.py"), "0"], timeout=60, cwd=tmp_path)
    out, profiled = profile(2, tmp_path, "profile_exit.py", "0")
    assert sorted(profiled.stdout.splitlines()) == sorted(plain.stdout.splitlines())
    assert read_trace(out).graph().total_bytes == 2 * 8 * 1000
    _, failed = profile(2, tmp_path, "profile_exit.py", "3", check=False, timeout=60)
    assert failed.returncode == 3


def test_start_inside_program_and_recorded_row(tmp_path):
    out = tmp_path / "inprog.rmtrace.npz"
    proc = run_mpi(4, [str(SCRIPTS / "profile_inprogram.py"), str(out)], timeout=90, cwd=tmp_path)
    assert proc.stdout.count(": ok") == 4
    t = read_trace(out)  # written at exit
    assert t.graph("p2p", phase="main").total_bytes == 4 * 240
    assert t.graph("p2p", phase="pkl5").total_bytes > 4 * 800
    assert t.graph("collective").total_bytes == 3 * 32


def test_spawned_child_records_through_get_parent(tmp_path):
    child = tmp_path / "child.rmtrace.npz"
    out, proc = profile(1, tmp_path, "profile_spawn.py", str(child), options=["--no-topology"], timeout=90)
    assert "parent: ok" in proc.stdout
    assert read_trace(out).external_bytes() == 24  # Spawn's intercommunicator records
    assert read_trace(child).external_bytes() == 40  # so does MPI.Comm.Get_parent()'s


def test_corpus_traces_are_readable():
    corpus = Path(__file__).resolve().parents[1] / "profiling" / "traces"
    files = sorted(corpus.glob("*.rmtrace.npz"))
    assert len(files) >= 14
    for f in files:
        t = read_trace(f)
        assert t.status == ["complete"] * t.nranks, f
        assert t.graph("all").total_bytes > 0, f
