"""Waiting for one rank's work without taking the core it needs.

MPI's blocking collectives poll: a rank that waits in ``bcast`` while the
root maps for a second burns a core all that second.  Where ranks outnumber
cores (oversubscribed jobs, hyperthreads, shared nodes) the waiting ranks
take the CPU the root needs, and the call runs several times over its
budget.  So a rank that waits for one rank's result waits in a non-blocking
barrier polled with ``Test``, sleeping between polls, the sleep doubling
from ``FIRST_SLEEP`` up to ``LONGEST_SLEEP``: a short wait stays short, a
long one wakes a few hundred times a second.  The collective that hands out
the result comes after the barrier and finds every rank ready.  (Not for
collectives where every rank works, like the distributed rounds': there
each wake-up would add to every collective.)

(mpi4py's own back-off, in ``mpi4py.util.sync``, is private; it has no
object ``ibcast`` either, hence the barrier before the blocking one.)
"""

from __future__ import annotations

import time

#: polls without sleeping first (seconds): a collective that completes at
#: once (every rank ready, a core each) pays no sleep
SPIN = 50e-6
#: the first sleep between two polls (seconds)
FIRST_SLEEP = 50e-6
#: the longest: the delay a waiting rank adds after the wait ends, per
#: round of the barrier
LONGEST_SLEEP = 5e-3


def wait(request) -> None:
    """Complete ``request`` (an ``MPI.Request``), sleeping between polls
    once ``SPIN`` seconds have passed."""
    spin_until = time.perf_counter() + SPIN
    delay = FIRST_SLEEP
    while not request.Test():
        if time.perf_counter() < spin_until:
            continue
        time.sleep(delay)
        delay = min(2 * delay, LONGEST_SLEEP)


def barrier(comm) -> None:
    """Collective: ``comm.Barrier()`` whose waiting ranks sleep.  Every rank
    calls it right after the one rank's work and before the collective that
    shares its result."""
    wait(comm.Ibarrier())
