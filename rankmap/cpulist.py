"""Linux CPU lists (``0-3,8,10-11``), the form sysfs, taskset and Slurm use.

Standard library only: the binding wrapper (``rankmap.bind``) runs before
every rank of a job and must start fast.
"""

from __future__ import annotations

#: CPU numbers are below this (hwloc's PU indices are too): a range such as
#: ``0-99999999999`` is refused before a set of its members is made
MAX_CPU = 1 << 24


def parse_cpulist(text: str) -> set[int]:
    """Linux CPU list ``"0-3,8,10-11"`` -> set of CPU numbers (each below
    ``MAX_CPU``)."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                first, last = int(lo), int(hi)
                if first < 0 or last < first or last >= MAX_CPU:
                    raise ValueError
                out.update(range(first, last + 1))
            else:
                if not 0 <= int(lo) < MAX_CPU:
                    raise ValueError
                out.add(int(lo))
        except ValueError:
            raise ValueError(f"bad CPU list {text.strip()!r} (expected e.g. 0-3,8)") from None
    return out


def format_cpulist(cpus) -> str:
    """CPU numbers -> the shortest Linux CPU list: ``[0, 1, 2, 3, 8]`` ->
    ``"0-3,8"``."""
    ordered = sorted(set(int(c) for c in cpus))
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(runs)
