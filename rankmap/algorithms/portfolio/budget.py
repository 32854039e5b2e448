"""The budget both portfolios plan with (``auto`` one-to-one and many-to-one).

A time limit becomes a budget in the work model's seconds, MARGIN below the
limit: the fits hold on the models they came from; a stencil of 2^11-2^16
tasks ran up to 2x slower, and the same machine 30% slower an hour later.
"""

from __future__ import annotations

DEFAULT_TIME_LIMIT = 10.0  # seconds: the most auto plans without a time_limit
MARGIN = 1.5


def budget_seconds(time_limit: float | None) -> float:
    """``time_limit`` (None: DEFAULT_TIME_LIMIT) in the work model's
    seconds: MARGIN below it, so a slower instance or machine stays near the
    limit."""
    return (DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)) / MARGIN


def first_use(opts: dict) -> float:
    """Seconds a start pays once per process before it partitions anything:
    Mt-KaHyPar's import and thread pool (uninterruptible, so priced before
    a deadline lets the start run)."""
    from ..construct.partition import first_call_seconds

    return first_call_seconds(opts.get("backend", ""))
