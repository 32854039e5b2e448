"""mpiP reports (``*.mpiP``).

Stock mpiP only reports per-rank and per-callsite totals, which say how
much each rank sent but not to whom; such a report is refused with one
line instead of a guess.  The communication-matrix variant ("mpiP_cm")
appends ``Source Target TotalAmount TotalCount`` rows between ``Start
Communication Matrix`` and ``End Communication Matrix``: those rows are the
point-to-point pairs.  ``@ MPI Task Assignment : RANK HOST`` lines give the
host of every rank (the recorded "before" placement).  Collectives are not
in the matrix, so a report's graph is point-to-point only.
"""

from __future__ import annotations

import re

from ..trace import Trace
from .common import MAX_INT, FormatError, _err, check_number
from .traffic_table import PairTable

_TASK = re.compile(r"^@ MPI Task Assignment\s*:\s*(\d+)\s+(\S+)")
_COMMAND = re.compile(r"^@ Command\s*:\s*(.*)$")
_START = "Start Communication Matrix"
_END = "End Communication Matrix"


def is_mpip(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.readline(4096).strip() == "@ mpiP"  # bounded: a sniff of any file
    except (OSError, IsADirectoryError):
        return False


def read_mpip(path: str) -> Trace:
    hosts: dict[int, str] = {}
    argv: list[str] = []
    table = PairTable()
    state = "head"  # head -> matrix -> done
    n = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        first = fh.readline()
        if first.strip() != "@ mpiP":
            raise _err(path, 1, "not an mpiP report (the first line is not '@ mpiP')")
        no = 1
        for no, line in enumerate(fh, 2):
            if state == "head":
                m = _TASK.match(line)
                if m:
                    hosts[int(m.group(1))] = m.group(2)
                elif _COMMAND.match(line):
                    argv = _COMMAND.match(line).group(1).split()
                elif _START in line:
                    state = "matrix"
                    n = _rank_count(path, hosts)
                continue
            if state == "matrix":
                text = line.strip()
                if _END in text:
                    state = "done"
                    break
                if not text or text.startswith(("Statistics of rank", "Source")):
                    continue
                fields = text.split()
                if len(fields) != 4:
                    raise _err(path, no, f"matrix row must be 'Source Target TotalAmount "
                                         f"TotalCount', got {text[:60]!r}")
                try:
                    src, dst = int(fields[0]), int(fields[1])
                    nbytes = check_number(path, no, float(fields[2]), "byte count")
                    count = check_number(path, no, float(fields[3]), "message count")
                except ValueError as exc:
                    if isinstance(exc, FormatError):
                        raise
                    raise _err(path, no, f"matrix row is not numbers: {text[:60]!r}") from None
                if min(src, dst) < 0 or nbytes < 0 or count < 0:
                    raise _err(path, no, "negative rank, byte or message count")
                if count > MAX_INT:
                    raise _err(path, no, f"message count {fields[3]!r} is too large")
                if max(src, dst) >= n:
                    raise _err(path, no, f"rank {max(src, dst)} outside the report's {n} ranks")
                table.add("p2p", src, dst, nbytes, count)
    if state == "head":
        raise FormatError(f"{path}: this mpiP report has only per-rank totals (no 'Start "
                          "Communication Matrix' section), which do not say who sent to whom; "
                          "record it with the communication-matrix mpiP (mpiP_cm) or another tracer")
    if state == "matrix":
        raise _err(path, no, f"truncated: the communication matrix has no '{_END}' line")
    return table.to_trace(n, [hosts[r] for r in range(n)], path, "mpiP", None, argv=argv)


def _rank_count(path: str, hosts: dict) -> int:
    if not hosts:
        raise FormatError(f"{path}: no '@ MPI Task Assignment' lines before the matrix: the "
                          "report lacks its rank list")
    n = max(hosts) + 1
    if n != len(hosts):  # the first rank without its line (found among as many as there are lines)
        missing = next(r for r in range(len(hosts) + 1) if r not in hosts)
        raise FormatError(f"{path}: no '@ MPI Task Assignment' line for rank {missing}")
    return n
