"""Edge lists: ``src dst bytes [messages]`` per line, 0-based decimal ranks,
CSV or spaces.

A first row of words (``src,dst,bytes``) is a header and skipped; a rank
written another way (``0x1f``, ``1e3``, ``1.0``) is refused, never read as
something else.  ``names_edge_columns`` tells a header that names the
columns of an edge list from the header of some other table.

Large plain files (numbers only, the same 3 or 4 columns on every line) are
read by whole-file scanning (``columns.py``); the line loop reads the rest
and names the line of every error.
"""

from __future__ import annotations

import os
import re

import numpy as np

from ..graph import CommGraph
from .columns import FAST_MIN_BYTES, one_text_line, scan_numbers
from .common import MAX_TASKS, FormatError, _err, _num, check_number

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.()\-]*")
#: how tools name the sender and receiver columns (lower case, first letters)
_SOURCE_NAMES = ("src", "source", "from", "send", "rank", "sender", "origin", "u", "i")
_DEST_NAMES = ("dst", "dest", "target", "to", "recv", "receiv", "peer", "v", "j")


def split_fields(text: str) -> list[str]:
    """The fields of a data line: commas or white space between them."""
    return [t for t in re.split(r"[,\s]+", text.strip()) if t]


def is_header(fields: list[str]) -> bool:
    """A row of words only (none of them a number such as ``nan``)."""
    def number(t):
        try:
            float(t)
        except ValueError:
            return False
        return True

    return bool(fields) and all(_WORD.fullmatch(t) and not number(t) for t in fields)


def names_edge_columns(fields: list[str]) -> bool:
    """A header whose first two words name a sender and a receiver column
    and that has 3 or 4 columns (``src,dst,bytes[,messages]``)."""
    if not 3 <= len(fields) <= 4:
        return False
    first, second = (re.sub(r"[^a-z]", "", t.lower()) for t in fields[:2])
    return first.startswith(_SOURCE_NAMES) and second.startswith(_DEST_NAMES)


def _rank(path, no, text: str) -> int:
    if not re.fullmatch(r"\+?[0-9]+", text):
        raise _err(path, no, f"rank {text[:30]!r} is not a decimal integer (edge lists give "
                             "0-based ranks in decimal)")
    value = int(text)
    if value >= MAX_TASKS:
        raise _err(path, no, f"rank {value} is beyond the {MAX_TASKS} tasks rankmap handles")
    return value


def read_edge_list(path: str) -> CommGraph:
    scanned = _read_scanned(path) if os.path.getsize(path) >= FAST_MIN_BYTES else None
    if scanned is not None:
        return scanned
    src, dst, nbytes, msgs = [], [], [], []
    first = True
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            fields = split_fields(text)
            if first and is_header(fields):
                first = False
                continue  # a header row such as "src,dst,bytes,count"
            first = False
            if len(fields) not in (3, 4):
                raise _err(path, no, f"expected 'src dst bytes [messages]', got {len(fields)} fields")
            if fields[0].startswith("-") or fields[1].startswith("-"):
                raise _err(path, no, "ranks must be >= 0 (edge lists are 0-based)")
            s, d = _rank(path, no, fields[0]), _rank(path, no, fields[1])
            try:
                b = check_number(path, no, float(fields[2]), "byte count")
                c = check_number(path, no, float(fields[3]), "message count") if len(fields) == 4 \
                    else np.nan
            except ValueError as exc:
                if isinstance(exc, FormatError):
                    raise
                raise _err(path, no, f"expected integer ranks and numeric bytes: {text[:60]!r}") from None
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
    ``write_edge_list`` puts there) are skipped if they are UTF-8 text."""
    offset = 0
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip() and not line.lstrip().startswith(b"#"):
                break
            if not one_text_line(line):
                return None
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
