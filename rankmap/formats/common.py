"""What every graph reader shares: the error type and number parsing."""

from __future__ import annotations

import re

import numpy as np


class FormatError(ValueError):
    """Malformed input; the message names the file and line."""


def _err(path, line_no, msg) -> FormatError:
    where = f"{path}:{line_no}" if line_no else str(path)
    return FormatError(f"{where}: {msg}")


def _numbers(path, line_no, text, cast=float) -> list:
    try:
        return [cast(t) for t in re.split(r"[,\s]+", text.strip()) if t]
    except ValueError:
        raise _err(path, line_no, f"expected numbers, got {text.strip()[:60]!r}") from None


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
