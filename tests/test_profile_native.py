"""Recording compiled programs (``python -m rankmap.profile ./app``) under
mpiexec with real ranks: C and Fortran call forms recorded to the byte and
message, the event log (the message order: equal to the mpi4py twin's on
every rank, capped, shown, replayed by map), crash safety, exit codes and
signals, the library built once per MPI, one-line refusals.  The programs
are compiled with the MPI beside the ``mpiexec`` the tests use (the mpich
wheel's, or the site's Open MPI in CI's Open MPI lane)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from rankmap.profile.collectives import OPS
from rankmap.profile.native import build, calls, counts, events
from rankmap.trace import EVENT_CSEND, EVENT_RECV, EVENT_SEND, EVENT_WAIT, read_trace
from tests.mpi_util import ROOT, check_killed_run, launch_options, mpi_kind, mpiexec_path, run_mpi
from tests.test_profile_events import logged

PROGRAMS = Path(__file__).parent / "mpi_programs"
SCRIPTS = Path(__file__).parent / "mpi_scripts"


def mpi_tool(*names: str) -> str | None:
    """A compiler wrapper of the MPI the tests launch with: beside its mpiexec."""
    exe = mpiexec_path()
    return next((str(Path(exe).parent / name) for name in names
                 if exe and (Path(exe).parent / name).exists()), None)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """``compiled(source)``: the program built once with the MPI's compiler wrapper."""
    out = tmp_path_factory.mktemp("programs")
    done = {}

    def make(source: str, wrapper: str = "mpicc") -> Path:
        if (source, wrapper) not in done:
            path = PROGRAMS / source if (PROGRAMS / source).exists() else ROOT / "examples" / source
            fortran = source.endswith(".f90")
            cc = mpi_tool("mpifort", "mpif90") if fortran else mpi_tool(wrapper)
            if cc is None or (fortran and shutil.which("gfortran") is None):
                pytest.skip("no Fortran MPI compiler wrapper (mpifort/mpif90) or gfortran here: the mpich "
                            "wheel has no Fortran bindings; CI's Open MPI lane with gfortran runs this"
                            if fortran else f"no {wrapper} beside mpiexec")
            exe = out / f"{Path(source).stem}_{'f' if fortran else wrapper}"
            proc = subprocess.run([cc, "-O1", "-o", str(exe), str(path)],
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr
            done[source, wrapper] = exe
        return done[source, wrapper]

    return make


def profile(n, tmp_path, program, *args, options=(), check=True, timeout=120):
    out = tmp_path / "run.rmtrace.npz"
    proc = run_mpi(n, ["-m", "rankmap.profile", "-o", str(out), *options, str(program), *args],
                   timeout=timeout, cwd=tmp_path, check=check)
    return out, proc


def expected_rows(prefix: Path) -> dict:
    """(phase, kind, src, dst) -> [bytes, messages] the program wrote it sent."""
    want = defaultdict(lambda: [0.0, 0])
    for path in prefix.parent.glob(prefix.name + ".*"):
        for line in path.read_text().splitlines():
            phase, kind, src, dst, nbytes, msgs = line.split()
            row = want[(phase, kind, int(src), int(dst))]
            row[0] += float(nbytes)
            row[1] += int(msgs)
    return dict(want)


def recorded_rows(trace) -> dict:
    got = defaultdict(lambda: [0.0, 0])
    for kind, e in trace.edges.items():
        for s, d, p, b, m in zip(e["src"], e["dst"], e["phase"], e["bytes"], e["msgs"]):
            if s != d:
                row = got[(trace.phases[p], kind, int(s), int(d))]
                row[0] += float(b)
                row[1] += int(m)
    return dict(got)


def check_log_against_counters(trace):
    """The event log says what the counters say: per pair, its SEND posts are
    the point-to-point sends and its CSEND flows the collective sends (bytes
    and messages); every WAIT waits for one earlier post, once."""
    e = trace.events
    assert e is not None and not e.truncated.any()
    logged_rows, counted_rows = defaultdict(lambda: [0.0, 0]), defaultdict(lambda: [0.0, 0])
    for r in range(trace.nranks):
        op, peer, nbytes = e.rank_events(r)
        for kind, code in (("p2p", EVENT_SEND), ("collective", EVENT_CSEND)):
            for dst, b in zip(peer[op == code].tolist(), nbytes[op == code].tolist()):
                logged_rows[(kind, r, dst)][0] += b
                logged_rows[(kind, r, dst)][1] += 1
        at = np.flatnonzero(op == EVENT_WAIT)
        posts = peer[at]
        assert np.unique(posts).size == posts.size and (posts < at).all(), f"rank {r}: waits {posts}"
        assert np.isin(op[posts], (EVENT_SEND, EVENT_RECV)).all(), f"rank {r}"
    for kind in ("p2p", "collective"):
        c = trace.edges[kind]
        for s, d, b, m in zip(c["src"].tolist(), c["dst"].tolist(), c["bytes"].tolist(), c["msgs"].tolist()):
            counted_rows[(kind, s, d)][0] += b
            counted_rows[(kind, s, d)][1] += m
    wrong = {k: (logged_rows.get(k), counted_rows.get(k)) for k in logged_rows.keys() | counted_rows.keys()
             if logged_rows.get(k) != counted_rows.get(k)}
    assert not wrong, f"(kind, src, dst): (logged, counted) {sorted(wrong.items())[:10]}"


def check_call_forms(n, tmp_path, program, min_phases):
    out, proc = profile(n, tmp_path, program, str(tmp_path / "expected"), options=["--collectives", "root"])
    assert proc.stdout.count(": ok") == n
    trace = read_trace(out)
    assert trace.nranks == n and trace.status == ["complete"] * n
    assert not Path(str(out) + ".parts").exists(), "parts are removed once merged"
    want, got = expected_rows(tmp_path / "expected"), recorded_rows(trace)
    assert len({k[0] for k in want}) >= min_phases
    # every byte and message the program sent, in its phase and kind, and nothing else
    # (the paused exchange, the communicators' set-up and the barriers record nothing)
    wrong = {k: (want.get(k), got.get(k)) for k in want.keys() | got.keys() if want.get(k) != got.get(k)}
    assert not wrong, f"(phase, kind, src, dst): (sent, recorded) {sorted(wrong.items())[:10]}"
    # where each rank ran, and the host's machine tree: `rankmap map` needs no machine options
    assert all(h is not None for h in trace.hosts) and all(trace.bindings)
    assert set(trace.host_topology_xml) == set(trace.hosts) and trace.topology() is not None
    assert trace.meta["program"] == str(program) and trace.meta["mpi"]["library"]
    check_log_against_counters(trace)
    return trace


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4, 8])
def test_c_call_forms_record_exact_bytes(n, tmp_path, compiled):
    trace = check_call_forms(n, tmp_path, compiled("callforms.c"), min_phases=28)
    if trace.meta["mpi"]["standard"] >= "4":  # partitioned, persistent collective, Isendrecv, large count
        assert {"pcontrol-25", "pcontrol-26", "pcontrol-27", "pcontrol-30"} <= set(trace.phases)


@pytest.mark.mpi
def test_c_call_forms_under_the_standard_abi(tmp_path, compiled):
    """A program built against MPICH's standard ABI (``mpicc_abi``, pointer
    handles, no Fortran) gets a library built with ``mpicc_abi``."""
    check_call_forms(4, tmp_path, compiled("callforms.c", "mpicc_abi"), min_phases=28)


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_fortran_call_forms_record_exact_bytes(n, tmp_path, compiled):
    check_call_forms(n, tmp_path, compiled("callforms.f90"), min_phases=22)


@pytest.fixture(scope="module")
def event_order(tmp_path_factory, compiled):
    """``event_order(n, language)``: the trace of tests/mpi_programs/event_order.c
    (``"c"``), its Fortran version (``"f90"``) or its mpi4py twin
    (``"py"``, tests/mpi_scripts/event_order.py; ``args``: its own) on n
    ranks, recorded once."""
    done = {}

    def record(n: int, language: str, options=(), args=()):
        key = (n, language, tuple(options), tuple(args))
        if key not in done:
            tmp = tmp_path_factory.mktemp(f"event_order_{language}_{n}")
            target = SCRIPTS / "event_order.py" if language == "py" else compiled(f"event_order.{language}")
            out, proc = profile(n, tmp, target, *args, options=options)
            assert proc.stdout.count(": ok") == n, proc.stdout + proc.stderr
            done[key] = out
        return done[key]

    return record


def with_twin(event_order, n, language):
    """The compiled program's trace and its mpi4py twin's (with Isendrecv
    where the C program has it: an MPI-4 library)."""
    program = read_trace(event_order(n, language))
    isendrecv = language == "c" and program.meta["mpi"]["standard"] >= "4"
    return program, read_trace(event_order(n, "py", args=["isendrecv"] if isendrecv else []))


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_c_event_log_equals_its_mpi4py_twins(n, event_order):
    """Every rank of the C program logs exactly what its mpi4py twin logs:
    posts, peers, bytes, which post each wait waits for (Waitall, Waitany,
    Waitsome, Test, Testall, Testany, persistent requests, requests that
    share a handle), ANY_SOURCE receives resolved, collectives and their
    modelled or exact flows, communicators by their world ranks."""
    c, py = with_twin(event_order, n, "c")
    assert c.events is not None and not c.events.truncated.any()
    for me in range(n):
        log = logged(c, me)
        assert log == logged(py, me), f"rank {me}"
        across = (me + n // 2) % n
        assert (EVENT_RECV, across, 32) in log and (EVENT_RECV, across, 24) in log   # from ANY_SOURCE
        assert all(peer >= 0 for op, peer, _b in log if op == EVENT_RECV)
        assert not any(b == 1000 for _op, _peer, b in log)   # the paused exchange
    check_log_against_counters(c)


@pytest.mark.mpi
def test_fortran_event_log_equals_its_mpi4py_twins(event_order):
    """The Fortran version (use mpi) logs what the twin logs: integer handles
    and statuses, MPI_STATUS(ES)_IGNORE, indices from 1."""
    f, py = with_twin(event_order, 4, "f90")
    for me in range(4):
        assert logged(f, me) == logged(py, me), f"rank {me}"
    check_log_against_counters(f)


@pytest.mark.mpi
def test_c_event_log_cap_and_none(tmp_path, event_order):
    """``--max-events K`` keeps each rank's first K events (cut here inside a
    collective's flows on rank 0) and says so; 0 logs nothing; the counters
    are the same either way."""
    full = read_trace(event_order(4, "c"))
    log0 = logged(full, 0)
    cut = next(i for i in range(len(log0) - 2) if log0[i + 1][0] == log0[i + 2][0] == EVENT_CSEND) + 2
    capped = read_trace(event_order(4, "c", ["--max-events", str(cut)]))
    for me in range(4):
        assert logged(capped, me) == logged(full, me)[:cut], f"rank {me}"
    assert capped.events.truncated.tolist() == [len(logged(full, me)) > cut for me in range(4)]
    none = read_trace(event_order(4, "c", ["--max-events", "0"]))
    assert none.events is None
    for trace in (capped, none):
        assert np.array_equal(trace.graph("all").bytes.toarray(), full.graph("all").bytes.toarray())


@pytest.mark.mpi
def test_c_event_log_is_shown_and_replayed(tmp_path, event_order):
    """``rankmap show`` counts the compiled program's events; ``rankmap map``
    replays them to judge the given order and the mapping."""
    out = event_order(4, "c")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = subprocess.run([sys.executable, "-m", "rankmap", "show", str(out)], capture_output=True, text=True,
                           timeout=120, env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"events    {read_trace(out).events.op.size} in program order" in shown.stdout
    mapped = subprocess.run([sys.executable, "-m", "rankmap", "map", str(out), "--method", "greedy", "--json"],
                            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert mapped.returncode == 0, mapped.stderr
    result = json.loads(mapped.stdout)
    assert result["replay_time"] > 0 and result["replay_time_before"] > 0


@pytest.mark.mpi
@pytest.mark.parametrize("victim", [0, 2])
def test_killed_rank_loses_at_most_the_last_flush_interval(victim, tmp_path, compiled):
    """Rank ``victim`` of a C ring SIGKILLs itself 3 flush intervals after
    its first 10 x 1000 B (``check_killed_run``); the event log the flushes
    appended holds every rank's first 10 Sendrecv (posts, then both waits)."""
    n, interval = 4, 0.2
    out, proc = profile(n, tmp_path, compiled("ring_kill.c"), str(victim), str(interval),
                        options=["--no-topology", "--flush-interval", str(interval)], check=False)
    assert proc.returncode != 0
    check_killed_run(out, victim, tmp_path)
    trace = read_trace(out, warn_missing=False)
    for me in range(n):
        log = logged(trace, me)
        assert len(log) >= 40
        for k in range(10):
            assert log[4 * k:4 * k + 4] == [(EVENT_SEND, (me + 1) % n, 1000), (EVENT_RECV, (me - 1) % n, 1000),
                                            (EVENT_WAIT, 4 * k, 0), (EVENT_WAIT, 4 * k + 1, 0)], f"rank {me}"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_supervisor_dies_of_its_programs_signal(sig):
    """A rank's supervisor ends as its program did: killed by the same
    signal, SIGKILL included (whose action cannot be set)."""
    code = f"from rankmap.profile.native.run import _end_like; _end_like(-{int(sig)})"
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -sig, proc.stderr


@pytest.mark.mpi
def test_exit_code_passes_through(tmp_path, compiled):
    out, proc = profile(2, tmp_path, compiled("exit_code.c"), "3", check=False)
    assert proc.returncode == 3, proc.stderr
    trace = read_trace(Path(str(out) + ".parts"), warn_missing=False)
    assert trace.status == ["exit", "exit"]   # finalized, then exit(3): not merged, parts kept
    assert trace.graph("p2p").total_bytes == 2 * 24


@pytest.mark.mpi
def test_phase_and_paused_options(tmp_path, compiled):
    out, _ = profile(2, tmp_path, compiled("exit_code.c"), "0", options=["--phase", "setup", "--paused"])
    trace = read_trace(out)
    assert trace.phases == ["main", "setup"] and trace.graph("all").total_bytes == 0
    out, _ = profile(2, tmp_path, compiled("exit_code.c"), "0", options=["--phase", "setup"])
    assert read_trace(out).graph("p2p", phase="setup").total_bytes == 2 * 24


@pytest.mark.mpi
def test_sigterm_reaches_the_program_after_its_counters_are_written(tmp_path, compiled):
    """A signal to a rank's supervisor goes to the program once the program
    wrote its counters: with no periodic flush the part still holds every
    byte sent before the signal, status ``signal``; the supervisor dies of it."""
    out = tmp_path / "sig.rmtrace.npz"
    opts, launch_env = launch_options(1)
    proc = subprocess.Popen([mpiexec_path(), *opts, "-n", "1", sys.executable, "-m", "rankmap.profile",
                             "--no-topology", "--flush-interval", "0", "-o", str(out),
                             str(compiled("exit_code.c")), "wait"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, **launch_env, "PYTHONPATH": str(ROOT)})
    try:
        line = proc.stdout.readline().split()
        assert line[:1] == ["waiting"], proc.stderr.read()
        os.kill(int(line[1]), signal.SIGTERM)
        assert proc.wait(timeout=60) != 0
    finally:
        proc.kill()
        proc.communicate()
    trace = read_trace(Path(str(out) + ".parts"), warn_missing=False)
    assert trace.status == ["signal"]
    assert trace.edges["p2p"]["bytes"].sum() == 24   # to itself, before the signal


@pytest.mark.mpi
def test_c_program_record_map_relaunch(tmp_path, compiled):
    """The README's path for a C program: record, map with no machine
    options, relaunch with the printed command (no python in it)."""
    kind = mpi_kind()
    if kind not in ("mpich", "openmpi"):
        pytest.skip(f"no MPICH or Open MPI mpiexec here ({kind})")
    program = compiled("halo2d.c")
    out, _ = profile(4, tmp_path, program, "20")
    fmt = "openmpi" if kind == "openmpi" else "hydra"
    launch = tmp_path / "launch"
    proc = subprocess.run([sys.executable, "-m", "rankmap", "map", str(out), "-o", str(launch), "--as", fmt,
                           "--method", "greedy"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = "mpirun -n" if fmt == "openmpi" else "mpiexec -f"
    printed = next(x.strip() for x in proc.stdout.splitlines() if x.strip().startswith(first))
    args = printed.split("#", 1)[0].split()
    assert args[-2:] == [str(program), "20"] and "python" not in args
    opts, env = launch_options(4, binding="none")
    if kind == "openmpi":
        opts = ["--oversubscribe"]
    ran = subprocess.run([mpiexec_path(), *opts, *args[1:]], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env}, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.count("halo2d: rank") == 4, ran.stdout + ran.stderr


# --------------------------------------------------------- without mpiexec
def test_library_is_built_once_per_mpi_library(tmp_path, compiled, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    program = compiled("exit_code.c")
    lib = build.library_for(program)
    built = lib.stat().st_mtime_ns
    assert build.library_for(program) == lib and lib.stat().st_mtime_ns == built
    assert (lib.parent / "calls.c").exists() and (lib.parent / "build.log").exists()
    assert build.resolved_mpi(lib) == build.linked_mpi(program)   # the program's own MPI library
    other = [c for c in (shutil.which("mpicc"), mpi_tool("mpicc")) if c]
    if len({Path(c).resolve() for c in other}) == 2:   # two MPIs here: two libraries
        exe = tmp_path / "other"
        subprocess.run([next(c for c in other if Path(c).resolve() != Path(mpi_tool("mpicc")).resolve()),
                        "-o", str(exe), str(PROGRAMS / "exit_code.c")], check=True, timeout=300)
        assert build.library_for(exe).parent != lib.parent


def test_refusals_are_one_line(tmp_path, compiled):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RANKMAP_MPICC": str(tmp_path / "no-mpicc")}
    cmd = [sys.executable, "-m", "rankmap.profile", "-o", str(tmp_path / "x.rmtrace.npz")]
    proc = subprocess.run([*cmd, str(compiled("exit_code.c")), "0"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 2 and "no MPI C compiler wrapper" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    static = tmp_path / "static"
    (tmp_path / "static.c").write_text("int main(void) { return 0; }\n")
    if subprocess.run(["cc", "-static", "-o", str(static), str(tmp_path / "static.c")],
                      capture_output=True).returncode == 0:
        proc = subprocess.run([*cmd, str(static)], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 2 and "linked statically" in proc.stderr, proc.stderr
    proc = subprocess.run([*cmd[:-2], "-o", str(tmp_path), str(compiled("exit_code.c"))], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 2 and "is a directory" in proc.stderr


def test_wrappers_cover_every_form_in_c_and_fortran():
    names = {c.name for c in calls.all_calls()}
    p2p = {f"{i}{m}send{s}" for m in ("", "b", "s", "r") for i, s in (("", ""), ("I", ""), ("", "_init"))}
    p2p = {n[0].upper() + n[1:] for n in p2p} | {"Sendrecv", "Sendrecv_replace", "Isendrecv",
                                                 "Isendrecv_replace", "Psend_init", "Start", "Startall"}
    assert p2p <= names and {n + "_c" for n in p2p - {"Psend_init", "Start", "Startall"}} <= names
    for op in ("Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather",
               "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Reduce_scatter_block",
               "Reduce_scatter", "Scan", "Exscan", "Neighbor_allgather", "Neighbor_alltoallw"):
        assert {op, "I" + op[0].lower() + op[1:], op + "_init"} <= names, op
    assert "void mpi_send_(" not in calls.generate({f"PMPI_{n}" for n in names})   # no Fortran handles
    text = calls.generate({f"PMPI_{n}" for n in names} | {"MPI_Fint"})
    for symbol in ("mpi_send", "mpi_send_", "mpi_send__", "MPI_SEND", "mpi_startall_", "MPI_ALLTOALLW"):
        assert re.search(rf"^void {symbol}\(", text, re.M), symbol
    assert re.search(r"^void mpi_pcontrol_\(MPI_Fint \*level_f\)$", text, re.M)   # MPI_PCONTROL has no IERROR
    assert "void mpi_send_c_(" not in text   # large counts: C (and mpi_f08) only
    assert calls.generate({"PMPI_Send"}).count("\nint MPI_") == 1   # only what the header declares


def test_damaged_snapshot_is_one_error(tmp_path, compiled):
    path = tmp_path / "snap"
    path.write_bytes(b"RMCOUNTS" + np.array([counts.VERSION, 1], dtype=np.uint32).tobytes() + b"\x00" * 10)
    with pytest.raises(ValueError, match="truncated"):
        counts.read_snapshot(path)
    path.write_bytes(b"garbage!" * 4)
    with pytest.raises(ValueError, match="not a rankmap counters snapshot"):
        counts.read_snapshot(path)


def test_damaged_event_log_is_one_error(tmp_path):
    """A damaged events file is one error naming it; the log read so far stays."""
    snap = counts.Snapshot("flushed", 0, 2, True, 1, 0.0, 1.0, "h", "mpi", "4.0", [0], list(OPS), ["main"])
    path = tmp_path / "counts.events"
    record = np.zeros(1, dtype=events.RECORD)
    record[0] = (EVENT_SEND, 0, 0, 1, 0, 0, 8)
    good = events.CHUNK + np.array([0, 1, 0], dtype=np.int64).tobytes() + record.tobytes()
    log = events.NativeEvents(path, 2, 0, 100, "tree")
    for data, message in ((good + b"garbage!" * 4, "not an event log chunk"),
                          (good + good, "does not follow"),
                          (good[:-8], "is cut short")):
        path.write_bytes(data)
        log = events.NativeEvents(path, 2, 0, 100, "tree")
        snap.log = {"cap": 100, "truncated": 0, "file_bytes": len(data), "file_records": 1}
        with pytest.raises(ValueError, match=message) as err:
            log.update(snap)
        assert str(path) in str(err.value)
    assert log.event_log(snap).op.size == 0   # the damaged chunk is the first: nothing read
    record[0] = (EVENT_SEND, 0, 0, 5, 0, 0, 8)   # a rank the job does not have
    path.write_bytes(events.CHUNK + np.array([0, 1, 0], dtype=np.int64).tobytes() + record.tobytes())
    snap.log["file_bytes"] = len(good)
    with pytest.raises(ValueError, match="names an event, rank"):
        events.NativeEvents(path, 2, 0, 100, "tree").update(snap)
