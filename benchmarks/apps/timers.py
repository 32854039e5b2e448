"""The applications' own timers, read from what each one writes.

Each reader takes a run's directory and its standard output and returns
``{"time_s": ..., **details}``: ``time_s`` is the number the application
itself reports as its time (the one the benchmark compares), the details
are the further timers it prints.  A run whose report lacks the timer is an
error naming the file: the application failed or its output changed.

- HPCG (``xhpcg``): its report ``HPCG-Benchmark_3.1_*.txt`` in the working
  directory: ``Benchmark Time Summary::Total`` (the timed CG sets), DDOT,
  SpMV and MG times, the GFLOP/s rating, the largest MPI_Allreduce time of
  DDOT.
- LAMMPS (``lmp``): ``Loop time of T on P procs`` and the ``Comm`` row of
  its timing breakdown (average seconds over ranks and percent of the loop).
- Quantum ESPRESSO (``pw.x``): its clocks' wall times: ``PWSCF`` (the whole
  run), ``electrons`` (the SCF loop), ``cdiaghg`` (the subspace
  diagonalisation, ScaLAPACK inside a pool) and ``fft_scatt_xy`` +
  ``fft_scatt_yz`` (the FFTs' all-to-all inside a pool).
"""

from __future__ import annotations

import re
from pathlib import Path


class TimerError(RuntimeError):
    """An application's output lacks the timer the benchmark reads."""


def _number(pattern: str, text: str, where: str) -> float:
    m = re.search(pattern, text, re.MULTILINE)
    if m is None:
        raise TimerError(f"{where}: no match for {pattern!r}")
    return float(m.group(1))


def hpcg(run_dir: Path, stdout: str) -> dict:
    reports = sorted(run_dir.glob("HPCG-Benchmark_*.txt"), key=lambda p: p.stat().st_mtime)
    if not reports:
        raise TimerError(f"{run_dir}: no HPCG-Benchmark_*.txt report")
    text = reports[-1].read_text(errors="replace")
    where = str(reports[-1])
    out = {"time_s": _number(r"^Benchmark Time Summary::Total=(\S+)", text, where)}
    for key, pattern in [("ddot_s", r"^Benchmark Time Summary::DDOT=(\S+)"),
                         ("spmv_s", r"^Benchmark Time Summary::SpMV=(\S+)"),
                         ("mg_s", r"^Benchmark Time Summary::MG=(\S+)"),
                         ("ddot_allreduce_max_s", r"^DDOT Timing Variations::Max DDOT MPI_Allreduce time=(\S+)"),
                         ("gflops", r"^Final Summary::HPCG result is \w+ with a GFLOP/s rating of=(\S+)")]:
        out[key] = _number(pattern, text, where)
    return out


def lammps(run_dir: Path, stdout: str) -> dict:
    where = f"{run_dir} (LAMMPS standard output)"
    out = {"time_s": _number(r"^Loop time of (\S+) on \d+ procs", stdout, where)}
    m = re.search(r"^Comm\s*\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*(\S+)", stdout, re.MULTILINE)
    if m is None:
        raise TimerError(f"{where}: no Comm row in the timing breakdown")
    out["comm_s"], out["comm_pct"] = float(m.group(2)), float(m.group(5))
    return out


_QE_CLOCK = r"^\s*{name}\s*:\s*(?P<cpu>.+?)CPU\s+(?P<wall>.+?)\s*WALL"  # one clock's line


def _qe_seconds(clock: str) -> float:
    """A Quantum ESPRESSO clock reading: ``26.02s``, ``1m 7.26s``, ``1h 2m``."""
    parts = re.findall(r"(\d+(?:\.\d*)?)\s*([hms])", clock)
    if not parts:
        raise TimerError(f"unreadable clock {clock!r}")
    return sum(float(v) * {"h": 3600, "m": 60, "s": 1}[u] for v, u in parts)


def pwscf(run_dir: Path, stdout: str) -> dict:
    where = f"{run_dir} (pw.x standard output)"

    def wall(name: str) -> float:
        m = re.search(_QE_CLOCK.format(name=re.escape(name)), stdout, re.MULTILINE)
        if m is None:
            raise TimerError(f"{where}: no {name} clock")
        return _qe_seconds(m.group("wall"))

    if "JOB DONE." not in stdout:
        raise TimerError(f"{where}: no 'JOB DONE.'")
    return {"time_s": wall("PWSCF"), "electrons_s": wall("electrons"), "cdiaghg_s": wall("cdiaghg"),
            "fft_scatter_s": wall("fft_scatt_xy") + wall("fft_scatt_yz")}


READERS = {"xhpcg": hpcg, "lmp": lammps, "pw.x": pwscf}


def reader_for(program: str):
    """The reader of the program ``program`` (its file name; ``lmp_serial``
    and other LAMMPS builds named ``lmp_*`` are LAMMPS)."""
    name = Path(program).name
    if name.startswith("lmp_"):
        name = "lmp"
    if name not in READERS:
        raise SystemExit(f"no timer reader for {name!r}: known programs {', '.join(sorted(READERS))}")
    return READERS[name]
