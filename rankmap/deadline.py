"""A wall-clock bound on one mapping call, checked by every stage that searches.

What a search does is decided by counted work (auto's work model prices its
starts; the refinements count pairs and task scans), so a run that this
deadline does not cut is repeatable bit for bit.  The deadline is the guard
that turns that target into a limit when the machine is slower than the
model (a loaded or smaller machine, an instance the model misjudges): every
loop asks ``expired()`` between bounded chunks of work and returns the best
mapping it holds.  ``hit`` then records that the result depends on the clock.

One object is passed down the call (never a global), so nested stages share
one end time; it pickles, so worker processes check the same end (the
monotonic clock is system-wide).

A command's deadline counts from the start of its process
(``process_start``): the interpreter's start and the imports are part of
the wall time a user waits for, so they are part of what the limit bounds.
"""

from __future__ import annotations

import math
import os
import time


class Deadline:
    """The end of a call's time, or none (``seconds=None``).  ``pace``: how
    many times its price a whole-graph pass takes on this machine now
    (``rankmap.algorithms.pass_seconds``), set by a caller that timed such
    passes (the CLI's report of the given order), else None (the price
    holds): what the passes that follow a search, which no deadline cuts,
    are reserved by."""

    __slots__ = ("end", "hit", "pace")

    def __init__(self, seconds: float | None = None, *, start: float | None = None):
        now = time.monotonic() if start is None else float(start)
        self.end = None if seconds is None else now + float(seconds)
        self.hit = False
        self.pace: float | None = None

    @classmethod
    def of(cls, deadline: Deadline | None) -> Deadline:
        """``deadline``, or one that never expires."""
        return cls() if deadline is None else deadline

    def expired(self) -> bool:
        """True once the end has passed (and from then on: ``hit``).  A step
        that ``allows`` refused sets ``hit`` too, but the time left still
        goes to the steps that fit in it."""
        if self.end is not None and time.monotonic() >= self.end:
            self.hit = True
            return True
        return False

    def allows(self, seconds: float) -> bool:
        """Whether a step expected to take ``seconds`` (and that cannot be
        interrupted) ends before the deadline.  A step refused changes the
        result, so it counts as a cut (``hit``)."""
        if self.end is None or time.monotonic() + seconds <= self.end:
            return True
        self.hit = True
        return False

    def sooner(self, seconds: float) -> Deadline:
        """A deadline ``seconds`` before this one (none without an end): the
        one a stage gets when work that cannot be cut follows it.  Its
        ``hit`` is its own; the caller carries it back."""
        inner = Deadline()
        inner.end = None if self.end is None else self.end - max(float(seconds), 0.0)
        inner.hit, inner.pace = self.hit, self.pace
        return inner

    def remaining(self) -> float:
        """Seconds left (inf without an end)."""
        return math.inf if self.end is None else max(self.end - time.monotonic(), 0.0)

    def __getstate__(self):
        return self.end, self.hit, self.pace

    def __setstate__(self, state):
        self.end, self.hit, self.pace = state

    def __repr__(self) -> str:
        return f"Deadline(remaining={self.remaining():.3f}s, hit={self.hit})"


def slowness(began: float, spent: float) -> float:
    """How many times slower than its price a run has been (wall seconds
    since ``began`` over the priced seconds ``spent`` since then), at least
    1: what turns a price into wall time on a loaded machine.  Callers
    start measuring after the process's one-off costs, or price them."""
    if spent < 1e-3:
        return 1.0
    return max(1.0, (time.monotonic() - began) / spent)


def process_start() -> float | None:
    """When this process started, on the ``time.monotonic`` clock, or None
    where that cannot be read (then a command counts from its entry point).

    Linux keeps the start in ``/proc/self/stat`` (field 22, clock ticks since
    boot, 10 ms resolution), counted on ``CLOCK_BOOTTIME``."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        # field 2 (the command name) may hold spaces and parentheses: split after its last ")"
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])
        since = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    now = time.monotonic()
    return now - since if 0.0 <= since <= now else None
