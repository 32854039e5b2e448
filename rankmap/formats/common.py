"""What every graph reader shares: the error type, number parsing and the
checks of what a file declares.

Hostile or broken input gives one ``FormatError`` naming the file and line:
numbers must be finite (no NaN, Inf or 1e400), integers must fit int64, and a
size a header declares (vertices, entries, ranks) must be at most
``MAX_TASKS`` and at most what the file's length can hold, checked before
anything of that size is allocated.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np

from ..limits import MAX_INT, MAX_TASKS, check_readable

__all__ = ["MAX_INT", "MAX_TASKS", "FormatError", "check_number", "declared_size", "check_ids",
           "check_readable"]


class FormatError(ValueError):
    """Malformed input; the message names the file and line."""


def _err(path, line_no, msg) -> FormatError:
    where = f"{path}:{line_no}" if line_no else str(path)
    return FormatError(f"{where}: {msg}")


def _numbers(path, line_no, text, cast=float, spaces_only: bool = False) -> list:
    """The numbers on a line: finite floats (``cast=float``) or integers
    within int64 (``cast=int``), separated by commas or white space
    (``spaces_only``: white space only, as Matrix Market writes them)."""
    try:
        values = [cast(t) for t in (text.split() if spaces_only else re.split(r"[,\s]+", text.strip()))
                  if t]
    except ValueError:
        kind = "numbers (integers)" if cast is int else "numbers"
        sep = " separated by spaces" if spaces_only else ""
        raise _err(path, line_no, f"expected {kind}{sep}, got {text.strip()[:60]!r}") from None
    for v in values:
        check_number(path, line_no, v)
    return values


def check_number(path, line_no, value, what: str = "value"):
    """``value`` if it is finite (and, for an integer, within int64)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise _err(path, line_no, f"{what} {value!r} is not a finite number")
    if isinstance(value, int) and abs(value) > MAX_INT:
        raise _err(path, line_no, f"{what} {value} is too large")
    return value


def declared_size(path, line_no, what: str, value: int, *, bytes_each: int = 1,
                  most: int = MAX_TASKS) -> int:
    """A count a file declares, checked against ``most`` and against what
    the file can hold (each item takes at least ``bytes_each`` bytes; 0: no
    room needed)."""
    if value < 0:
        raise _err(path, line_no, f"{what} {value} is negative")
    if value > most:
        raise _err(path, line_no, f"{what} {value} is more than rankmap handles ({most})")
    if bytes_each and os.path.isfile(path) and value > os.path.getsize(path) // bytes_each + 1:
        raise _err(path, line_no, f"{what} {value} cannot fit in a file of {os.path.getsize(path)} "
                                  "bytes")
    return value


def check_ids(path, ids, what: str = "rank") -> None:
    """Task ids a file names: at most ``MAX_TASKS - 1``."""
    if len(ids) and max(ids) >= MAX_TASKS:
        raise FormatError(f"{path}: {what} {max(ids)} is beyond the {MAX_TASKS} tasks rankmap "
                          "handles")




def _apply_weights(values: np.ndarray, weights: str, path) -> np.ndarray:
    if weights == "unit":
        return np.ones_like(values, dtype=np.float64)
    if weights == "abs":
        return np.abs(values)
    if weights != "values":
        raise ValueError(f"weights must be values, abs or unit, not {weights!r}")
    if values.size and values.min() < 0:
        raise FormatError(f"{path}: negative values are not byte counts; read with weights "
                          "'abs' or 'unit' (CLI: --weights abs|unit) to use the matrix structure")
    return values


def _data_lines(fh):
    """(line number, text) of lines that are not comments; blank lines are
    kept because a METIS vertex without neighbours is a blank line."""
    for no, line in enumerate(fh, 1):
        if line.startswith("%"):
            continue
        yield no, line


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))
