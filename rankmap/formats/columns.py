"""Whole-file scanning of large numeric text (METIS graphs, edge lists).

The numbers of a file and how many stand on each line, by numpy over
blocks of the file instead of a Python loop per line: a 2^20-vertex METIS
file (29 MB) in about 0.5 s where the line loop took 11 s.  The file is
read in blocks of BLOCK bytes cut at a line end, so memory stays the
numbers plus a few blocks whatever the file's size (large files: one
block per core scanned at once).

Only plain text qualifies: digits, the characters a reader allows inside a
number, separators.  Anything else (a comment, a word, a sign where the
reader forbids one, a number the parser cannot read to its end) gives
None, and the reader's line-by-line path reads the file instead: that path
alone decides what is an error and names its file and line, so a broken
file gets the same message whichever path saw it first.
"""

from __future__ import annotations

import os

import numpy as np

BLOCK = 1 << 24  # bytes of text per step (16 MiB)
FAST_MIN_BYTES = 1 << 20  # smaller files: the line loop is as quick and reads them alone
COMPILED_MIN_BYTES = FAST_MIN_BYTES  # from here plain blocks take one compiled pass (``_columns``)
SEPARATORS = b" \t\r\n,"
_SATURATED = np.iinfo(np.int64).max  # what numpy reads an integer past int64 as (-1 - it below)


def _table(chars: bytes) -> np.ndarray:
    lut = np.zeros(256, dtype=bool)
    lut[np.frombuffer(chars, dtype=np.uint8)] = True
    return lut


def one_text_line(line: bytes) -> bool:
    """Whether a line a reader skips or reads before the scan (a comment,
    a header) is one line of UTF-8 text to its line loop too: a carriage
    return inside it starts another line there, and a byte that is not
    UTF-8 is an error the line loop names."""
    if b"\r" in line.rstrip(b"\r\n"):
        return False
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class Scan:
    """Numbers of a text file from ``offset`` on: ``values`` (one array) and
    ``per_line`` (how many numbers on each line, blank lines included);
    ``flagged``: the columns (0 = a line's first number) where a number
    holds one of the ``flag`` characters (e.g. a decimal point in a column
    that must hold integers)."""

    __slots__ = ("values", "per_line", "flagged")

    def __init__(self, values: np.ndarray, per_line: np.ndarray, flagged: np.ndarray):
        self.values, self.per_line, self.flagged = values, per_line, flagged


def scan_numbers(path: str, offset: int, *, dtype, inside: bytes = b"", flag: bytes = b"",
                 separators: bytes = SEPARATORS) -> Scan | None:
    """Every number of ``path`` after byte ``offset``, parsed as ``dtype``
    (int64 or float64), or None where the text holds a character that is
    neither a digit, one of ``inside`` nor a separator, or a number that
    does not parse to its end.  Columns whose numbers hold a ``flag``
    character are reported (``Scan.flagged``) so that a reader can send
    such files to its line loop."""
    allowed = _table(b"0123456789" + inside + separators)
    is_sep = _table(separators)
    flags = _table(flag) if flag else None
    spaces = bytes.maketrans(separators, b" " * len(separators))
    values, per_line, flagged = [], [], []
    compiled, threads = None, 1
    if os.path.getsize(path) - offset >= COMPILED_MIN_BYTES:
        from ..cores import default_workers
        from ._columns import scan_digits as compiled

        threads = default_workers()

    def scan(text: bytes):
        got = _scan_plain(compiled, text, is_sep, dtype) if compiled is not None else None
        return got or _scan_block(text, allowed, is_sep, flags, spaces, dtype)

    with open(path, "rb") as fh:
        fh.seek(offset)
        scanned = _in_order(scan, _line_blocks(fh), threads)
        try:
            for got in scanned:
                if got is None:
                    return None
                vals, counts, columns = got
                values.append(vals)
                per_line.append(counts)
                flagged.append(columns)
        finally:
            scanned.close()  # the blocks still being scanned are waited for here, not at collection
    empty = np.zeros(0, dtype=dtype)
    return Scan(np.concatenate(values) if values else empty,
                np.concatenate(per_line) if per_line else np.zeros(0, dtype=np.int64),
                np.unique(np.concatenate(flagged)) if flagged else np.zeros(0, dtype=np.int64))


def _line_blocks(fh):
    """The text of ``fh`` from where it stands, in blocks of about BLOCK
    bytes that end at a line end (a line longer than a block is one block;
    the last may end without one)."""
    tail, long_line = b"", []  # the blocks of a line longer than a block, joined once at its end
    while True:
        block = fh.read(BLOCK)
        cut = block.rfind(b"\n") + 1
        if block and cut == 0:  # one line longer than a block: keep reading
            long_line.append(block)
            continue
        text = b"".join([tail, *long_line, block[:cut]])
        tail, long_line = block[cut:], []
        if text:
            yield text
        if not block:
            return


def _in_order(scan, blocks, threads: int):
    """``scan(block)`` for every block, in order; with several ``threads``
    that many blocks are scanned at once (the compiled pass releases the
    GIL: the 560 MB file of a 2^24-task stencil in 34 blocks), and no more
    than one block per thread is read ahead, so memory stays a few blocks."""
    if threads <= 1:
        yield from map(scan, blocks)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads) as pool:
        pending = deque()
        for block in blocks:
            pending.append(pool.submit(scan, block))
            if len(pending) >= threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _scan_plain(scan_digits, text: bytes, is_sep, dtype):
    """What ``_scan_block`` gives for text of digits and separators alone,
    by the compiled pass; None where the text holds anything else."""
    data = np.frombuffer(text, dtype=np.uint8)
    values = np.empty(data.size // 2 + 1, dtype=np.int64)
    counts = np.empty(data.size + 1, dtype=np.int64)
    got, lines = scan_digits(data, is_sep, values, counts)
    if got <= 0:  # declined, or no number at all (the numpy passes' rule for that)
        return None
    return values[:got].astype(dtype, copy=False), counts[:lines], np.zeros(0, dtype=np.int64)


def _scan_block(text: bytes, allowed, is_sep, flags, spaces: bytes, dtype):
    """(numbers, numbers per line, flagged columns) of whole lines of
    text, or None (see ``scan_numbers``)."""
    data = np.frombuffer(text, dtype=np.uint8)
    if not allowed[data].all():
        return None
    cr = np.flatnonzero(data == 13)  # a carriage return ends a line unless "\r\n" (universal newlines)
    if cr.size and (cr[-1] + 1 == data.size or (data[np.minimum(cr + 1, data.size - 1)] != 10).any()):
        return None
    sep = is_sep[data]
    start = ~sep  # a number starts at a non-separator after a separator
    start[1:] &= sep[:-1]
    line_end = np.flatnonzero(data == 10)
    if line_end.size == 0 or line_end[-1] != data.size - 1:  # the file's last line has no newline
        line_end = np.append(line_end, data.size - 1)
    numbers_by = np.cumsum(start, dtype=np.int32)  # numbers up to each byte (a block holds < 2^31)
    counts = np.diff(numbers_by[line_end], prepend=0).astype(np.int64)
    at = np.flatnonzero(flags[data]) if flags is not None else np.zeros(0, dtype=np.int64)
    # integers parse 5x faster than floats, and convert exactly as strtod rounds
    parse = np.int64 if at.size == 0 else dtype
    try:
        vals = np.fromstring(text.translate(spaces), dtype=parse, sep=" ")
        if parse is np.int64 and vals.size and (vals.max() == _SATURATED or vals.min() < -_SATURATED):
            if dtype is np.int64:  # past int64: numpy saturates where the line loop reads it exactly
                return None
            vals = np.fromstring(text.translate(spaces), dtype=dtype, sep=" ")
    except ValueError:  # a number it cannot read to its end ("1.5" as an integer, "0x1f")
        return None
    if vals.size != int(counts.sum()):
        return None
    columns = np.zeros(0, dtype=np.int64)
    if at.size:  # the column of the number each flagged character belongs to
        line = np.searchsorted(line_end, at)
        first = np.concatenate(([0], np.cumsum(counts)[:-1]))
        columns = np.unique(numbers_by[at].astype(np.int64) - 1 - first[line])
    return vals.astype(dtype, copy=False), counts, columns
