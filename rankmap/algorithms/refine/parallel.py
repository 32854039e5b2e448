"""Swap refinement on several cores, the same result for any thread count.

On a tree machine, if PEs p and p' lie in one group A of sibling subtrees
and q lies in another such group B, then D(p, q) = D(p', q): the two PEs'
lowest common ancestor with q is the same node.  So swaps and moves among
the tasks of A (both tasks on PEs of A) never change the gain of a pair
whose two tasks sit in B: their neighbours in A are equidistant from every
PE of B, whichever PE of A they occupy.  The pairs inside each group can
then run in parallel, one group per thread at a time, each group's pairs in
a fixed order, and give bit for bit the J changes of running the groups one
after the other; the pairs across groups follow, sequentially.

The groups come from the tree and the task count alone (``tree_groups``),
never from the thread count; the J changes are summed per group and then in
group order, so the floating-point total repeats too.  The threads call the
compiled pass (``kernel.swap_pass``, which releases the GIL) on their
groups: no kernel of its own, so nothing more to compile or cache.
"""

from __future__ import annotations

import numpy as np

from ... import cores
from ...deadline import Deadline

GROUP_TASKS = 4096    # about this many tasks per group: a fixed rule, never the thread count
SLICE_PAIRS = 1 << 20  # pairs gathered from a pass's stream before they are split by group
STEP_PAIRS = 1 << 16   # pairs of all groups between two checks of the deadline and work limit
MIN_STEP = 1024        # ... but at least this many per group


def thread_count(threads: int | None) -> int:
    """``threads`` if given, else 1 in a rank of an MPI job of several ranks
    (they own the cores), else the cores available (``rankmap.cores``)."""
    if threads is None:
        threads = cores.default_workers()
    threads = int(threads)
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return threads


def tree_groups(topology, max_pes: int) -> np.ndarray:
    """First PE of every group, ascending (a group runs to the next one's
    first PE).  A group is one subtree of at most ``max_pes`` PEs or a run
    of consecutive siblings, each that small, of at most ``max_pes`` in all;
    larger subtrees are split below.  Two PEs of a group are then equidistant
    from every PE outside it (see the module docstring)."""
    starts = []
    stack = [topology.root]
    while stack:
        node = stack.pop()
        lo, hi = topology.leaf_range(node)
        if hi - lo <= max_pes:
            starts.append(lo)
            continue
        run = None
        for child in topology.children(node).tolist():
            a, b = topology.leaf_range(child)
            if b - a > max_pes:
                stack.append(child)
                run = None
            elif run is None or b - run > max_pes:
                starts.append(a)
                run = a
    return np.unique(np.asarray(starts, dtype=np.int64))


def group_of_pe(topology, n_tasks: int) -> np.ndarray | None:
    """The group of every PE for ``n_tasks`` tasks (about GROUP_TASKS tasks
    per group), or None when there would be one group only."""
    k = topology.n_pes
    if n_tasks < 2 * GROUP_TASKS:
        return None
    starts = tree_groups(topology, max(1, GROUP_TASKS * k // n_tasks))
    if starts.size < 2:
        return None
    return np.searchsorted(starts, np.arange(k), side="right") - 1


class GroupedPasses:
    """Runs slices of a pass's pairs: the pairs inside each group in
    parallel, then the pairs across groups in order."""

    def __init__(self, group, threads: int):
        self.group = group
        self.n_groups = int(group.max()) + 1
        self.threads = threads
        self.pool = None
        if threads > 1:
            from concurrent.futures import ThreadPoolExecutor  # only where several groups run

            self.pool = ThreadPoolExecutor(threads)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()

    def run_slice(self, run, pos, U, V, stats, max_evaluations, deadline: Deadline, seq_slice: int):
        """Apply ``run(U, V) -> (evaluated, applied, change)`` to the pairs
        (U, V): per group in steps, groups in parallel, then the pairs
        across groups ``seq_slice`` at a time; the deadline and the work
        limit are checked between steps.  Returns (change, applied, stop)."""
        key = self.group[pos[U]]
        key = np.where(key == self.group[pos[V]], key, self.n_groups)  # across groups: last
        if self.n_groups < np.iinfo(np.int16).max:
            key = key.astype(np.int16)  # numpy sorts 16-bit keys stably by radix sort
        order = np.argsort(key, kind="stable")
        U, V, key = U[order], V[order], key[order]
        bounds = np.searchsorted(key, np.arange(self.n_groups + 2))
        lo, hi = bounds[:-2], bounds[1:-1]
        live = np.flatnonzero(hi > lo)
        lo, hi = lo[live], hi[live]
        change, applied = 0.0, 0
        for results, grouped in self._steps(run, U, V, lo, hi, int(bounds[-2]), seq_slice):
            for ev, ap, delta in results:  # in group order: the sum repeats
                stats.evaluated += ev
                stats.in_groups += ev if grouped else 0
                stats.swaps += ap
                applied += ap
                change += delta
            if (max_evaluations is not None and stats.evaluated >= max_evaluations) or deadline.expired():
                return change, applied, True
        return change, applied, False

    def _steps(self, run, U, V, lo, hi, across: int, seq_slice: int):
        """The results of ``run``, one list per step, and whether the step
        ran in groups: the groups' pairs ``lo[g] .. hi[g]`` a step at a time
        (all groups at once), then the pairs from ``across`` on in order."""
        step = max(MIN_STEP, STEP_PAIRS // max(lo.size, 1))
        for s in range(0, int((hi - lo).max(initial=0)), step):
            a, b = np.minimum(lo + s, hi), np.minimum(lo + s + step, hi)
            yield self._map(run, U, V, [(int(x), int(y)) for x, y in zip(a.tolist(), b.tolist()) if y > x]), True
        for s in range(across, U.size, seq_slice):
            yield [run(U[s:s + seq_slice], V[s:s + seq_slice])], False

    def ordered(self, make, items, deadline: Deadline):
        """Yield ``make(item, space)`` for the items in order, as many made
        at once as there are threads (``space``: a dict of work arrays, one
        per thread); stops when the deadline passes."""
        spaces = [{} for _ in range(self.threads)]
        for b in range(0, len(items), self.threads):
            if deadline.expired():
                return
            batch = items[b:b + self.threads]
            if self.pool is None or len(batch) < 2:
                yield from (make(x, spaces[0]) for x in batch)
            else:
                yield from self.pool.map(make, batch, spaces[:len(batch)])

    def _map(self, run, U, V, parts):
        """``run`` on every part, the results in part order; each thread
        takes the next part when it is done (a thread the machine holds
        back does not hold the others up)."""
        if self.pool is None or len(parts) < 2:
            return [run(U[a:b], V[a:b]) for a, b in parts]
        return list(self.pool.map(lambda ab: run(U[ab[0]:ab[1]], V[ab[0]:ab[1]]), parts))
