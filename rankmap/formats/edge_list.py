"""Edge lists: ``src dst bytes [messages]`` per line, 0-based, CSV or spaces.

Large plain files (numbers only, the same 3 or 4 columns on every line) are
read by whole-file scanning (``columns.py``); the line loop reads the rest
and names the line of every error.
"""

from __future__ import annotations

import os
import re

import numpy as np

from ..graph import CommGraph
from .columns import FAST_MIN_BYTES, scan_numbers
from .common import MAX_TASKS, FormatError, _err, _num, check_number


def read_edge_list(path: str) -> CommGraph:
    scanned = _read_scanned(path) if os.path.getsize(path) >= FAST_MIN_BYTES else None
    if scanned is not None:
        return scanned
    src, dst, nbytes, msgs = [], [], [], []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            fields = [t for t in re.split(r"[,\s]+", text) if t]
            if not src and not re.fullmatch(r"[-+0-9.eE]+", fields[0]):
                continue  # a header row such as "src,dst,bytes,count"
            if len(fields) not in (3, 4):
                raise _err(path, no, f"expected 'src dst bytes [messages]', got {len(fields)} fields")
            try:
                s, d = int(fields[0]), int(fields[1])
                b = check_number(path, no, float(fields[2]), "byte count")
                c = check_number(path, no, float(fields[3]), "message count") if len(fields) == 4 \
                    else np.nan
            except ValueError as exc:
                if isinstance(exc, FormatError):
                    raise
                raise _err(path, no, f"expected integer ranks and numeric bytes: {text[:60]!r}") from None
            if s < 0 or d < 0:
                raise _err(path, no, "ranks must be >= 0 (edge lists are 0-based)")
            if max(s, d) >= MAX_TASKS:
                raise _err(path, no, f"rank {max(s, d)} is beyond the {MAX_TASKS} tasks rankmap handles")
            if b < 0:
                raise _err(path, no, "negative byte count")
            if len(fields) == 4 and (c < 0 or not c.is_integer()):
                raise _err(path, no, f"message count {fields[3]!r} is not a whole number >= 0")
            src.append(s), dst.append(d), nbytes.append(b), msgs.append(c)
    if not src:
        raise _err(path, 0, "no edges")
    m = np.asarray(msgs)
    messages = None if np.isnan(m).any() else m
    return CommGraph.from_edges(src, dst, nbytes, messages=messages)


def _read_scanned(path: str) -> CommGraph | None:
    """The graph by whole-file scanning, or None where the line loop must
    read it: a header row, comments after the first edge, signs, words,
    ranks not written as plain decimals, lines of different lengths,
    anything out of range.  Comment lines before the first edge (the one
    ``write_edge_list`` puts there) are skipped."""
    offset = 0
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip() and not line.lstrip().startswith(b"#"):
                break
            offset += len(line)
    scan = scan_numbers(path, offset, dtype=np.float64, inside=b".eE+", flag=b".eE+")
    if scan is None:
        return None
    fields = np.unique(scan.per_line[scan.per_line > 0])
    if fields.size != 1 or int(fields[0]) not in (3, 4) or (scan.flagged < 2).any():
        return None  # mixed lengths, or a rank such as 1.0, 1e3, +5
    table = scan.values.reshape(-1, int(fields[0]))
    ranks = table[:, :2]
    if not np.isfinite(table).all() or ranks.max() >= MAX_TASKS:
        return None
    messages = None
    if table.shape[1] == 4:
        messages = table[:, 3]
        if (messages != np.floor(messages)).any():
            return None
    src, dst = ranks[:, 0].astype(np.int64), ranks[:, 1].astype(np.int64)
    return CommGraph.from_edges(src, dst, table[:, 2], messages=messages)


def write_edge_list(graph: CommGraph, path: str) -> None:
    src, dst, w = graph.coo()
    msgs = None
    if graph.messages is not None:
        msgs = np.asarray(graph.messages[src, dst]).ravel()
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("# src dst bytes" + (" messages" if msgs is not None else "") + "  (0-based ranks)\n")
        for i in range(w.size):
            tail = f" {_num(msgs[i])}" if msgs is not None else ""
            fh.write(f"{src[i]} {dst[i]} {_num(w[i])}{tail}\n")
