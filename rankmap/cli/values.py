"""argparse types for option values: a bad value is one line naming the
option (argparse's own ``error: argument --eps: ...``, exit 2), never a
traceback or a value the algorithms later choke on (NaN, Inf, a negative
count, a seed numpy cannot take)."""

from __future__ import annotations

import argparse
import math

from ..limits import MAX_SEED

#: imbalance beyond this is meaningless (every task fits on one PE long before)
MAX_EPS = 1e6


def count(least: int):
    """An integer >= ``least``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < least:
            raise argparse.ArgumentTypeError(f"expected an integer >= {least}, got {text!r}")
        return value

    parse.__name__ = f"integer >= {least}"
    return parse


def number(low: float, high: float = math.inf, *, above: bool = False):
    """A finite number in ``low..high`` (``above``: strictly more than ``low``)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (value > low if above else value >= low) and value <= high
        if not ok:
            bound = f"{'>' if above else '>='} {low:g}" + (f" and <= {high:g}" if high < math.inf else "")
            raise argparse.ArgumentTypeError(f"expected a finite number {bound}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def seed(text: str) -> int:
    """A seed in 0..2^63 - 1."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected an integer seed in 0..{MAX_SEED}, got {text!r}")
    return value


#: ``--eps``: a finite imbalance >= 0
eps = number(0.0, MAX_EPS)
#: ``--time-limit``: finite seconds > 0
seconds = number(0.0, above=True)
