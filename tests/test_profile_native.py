"""Recording compiled programs (``python -m rankmap.profile ./app``) under
mpiexec with real ranks: C and Fortran call forms recorded to the byte and
message, crash safety, exit codes and signals, the library built once per
MPI, one-line refusals.  The programs are compiled with the MPI beside the
``mpiexec`` the tests use (the mpich wheel's, or the site's Open MPI in
CI's Open MPI lane)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from rankmap.profile.native import build, calls, counts
from rankmap.trace import read_trace
from tests.mpi_util import ROOT, check_killed_run, launch_options, mpi_kind, mpiexec_path, run_mpi

PROGRAMS = Path(__file__).parent / "mpi_programs"


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


@pytest.mark.mpi
@pytest.mark.parametrize("victim", [0, 2])
def test_killed_rank_loses_at_most_the_last_flush_interval(victim, tmp_path, compiled):
    """Rank ``victim`` of a C ring SIGKILLs itself 3 flush intervals after
    its first 10 x 1000 B (``check_killed_run``)."""
    n, interval = 4, 0.2
    out, proc = profile(n, tmp_path, compiled("ring_kill.c"), str(victim), str(interval),
                        options=["--no-topology", "--flush-interval", str(interval)], check=False)
    assert proc.returncode != 0
    check_killed_run(out, victim, tmp_path)


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
    path.write_bytes(b"RMCOUNTS" + b"\x01\x00\x00\x00\x01\x00\x00\x00" + b"\x00" * 10)
    with pytest.raises(ValueError, match="truncated"):
        counts.read_snapshot(path)
    path.write_bytes(b"garbage!" * 4)
    with pytest.raises(ValueError, match="not a rankmap counters snapshot"):
        counts.read_snapshot(path)
