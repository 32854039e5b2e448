# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled halves of the construction methods: greedy growing
(``growing.py``) and the iterated local search of its splits (below),
two-way FM on matched pairs of blocks
(``pair_fm.py``), the chain repair of block sizes (``rebalance.py``) and
heavy-edge matching (``coarsen.py``).  The modules named say what each
search does and why; here are their loops.

Every entry point releases the GIL: the growing and the pair FM run their
independent sub-problems on threads.
"""

from libc.stdint cimport int64_t, uint64_t
from libcpp cimport bool as cbool
from libcpp.vector cimport vector

import numpy as np

from rankmap._heap cimport pop, push

ctypedef unsigned char flag  # a true/false array the code takes a pointer to (std::vector<bool> has none)

cdef double INF = float("inf")


# ---------------------------------------------------------------------------
# Iterated local search of one small split into children of fixed sizes.
#
# Greedy growing (``growing.py``) fills the children of a sub-problem one
# after the other, and the last ones take what is left: ragged shapes that
# no single swap repairs.  On the 16384 nodes of 64 tasks of a 2^20-task
# stencil (KaMinPar's top cut) growing left 44 % of the weight between the
# groups of 4; swaps until none gains took it to 42 %, the iterated local
# search below to 40 % (KaHIP strong, best of five seeds, on a sample of
# those nodes: 40 %), where every group cut costs 10 and a node cut 100.
#
# The search: pairwise swaps between children (a task and the best partner
# in a child it has traffic to), first gain taken, until none gains; then
# rounds of a kick (a few random swaps of a task with a task it talks to)
# followed by the swaps again, kept when the cut is not higher (plateaus
# are walked), else undone from the round's log.  The work (swap
# evaluations, swaps and kicks) is bounded per task, so the cost grows with
# the sub-problem, not with its shape; the random stream is seeded per
# sub-problem, so the result does not depend on the threads.

cdef enum:
    # random swaps of one kick, at most (and at most a quarter of the tasks): on the nodes of the 2^20-task
    # stencil, in the same 1.5-1.7 s on two threads, 2 swaps left J 7.92e7, 4 7.90e7, 12 7.897e7
    KICK_SWAPS = 12


cdef inline uint64_t next_random(uint64_t* state) noexcept nogil:
    """The next number of a splitmix64 stream kept in ``state``."""
    cdef uint64_t z
    state[0] += <uint64_t>0x9e3779b97f4a7c15ULL
    z = state[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xbf58476d1ce4e5b9ULL
    z = (z ^ (z >> 27)) * <uint64_t>0x94d049bb133111ebULL
    return z ^ (z >> 31)


cdef struct Split:
    # a local CSR of k tasks split into m children, and the search's state
    const int64_t* ptr
    const int64_t* nbr
    const double* wt
    int64_t k, m, cap
    int64_t* mine       # the child of every task
    double* conn        # k x m: the weight of every task to every child
    int64_t* members    # m x cap: each child's tasks
    int64_t* slot       # a task's place in its child's list
    int64_t* fill       # each child's size
    int64_t* log        # (4 k) x 2: a round's swaps
    int64_t log_rows
    int64_t* seen       # per child: the stamp of the task that last looked at it
    int64_t stamp
    double* to_a        # the traffic of the task being looked at to each task


cdef void rebuild(Split* s) noexcept nogil:
    """The weight of every task to every child (``conn``) and the children's
    member lists, from ``mine``."""
    cdef int64_t a, j, e
    for a in range(s.k * s.m):
        s.conn[a] = 0.0
    for j in range(s.m):
        s.fill[j] = 0
    for a in range(s.k):
        j = s.mine[a]
        s.members[j * s.cap + s.fill[j]] = a
        s.slot[a] = s.fill[j]
        s.fill[j] += 1
        for e in range(s.ptr[a], s.ptr[a + 1]):
            s.conn[s.nbr[e] * s.m + j] += s.wt[e]


cdef inline double swap_gain(Split* s, int64_t a, int64_t c) noexcept nogil:
    """The cut removed by swapping tasks ``a`` and ``c`` (different children)."""
    cdef int64_t big_a = s.mine[a], big_c = s.mine[c], e
    cdef double g = s.conn[a * s.m + big_c] - s.conn[a * s.m + big_a] + s.conn[c * s.m + big_a] \
        - s.conn[c * s.m + big_c]
    for e in range(s.ptr[a], s.ptr[a + 1]):
        if s.nbr[e] == c:
            g -= 2.0 * s.wt[e]
    return g


cdef inline void swap(Split* s, int64_t a, int64_t c) noexcept nogil:
    cdef int64_t big_a = s.mine[a], big_c = s.mine[c], e, t
    for e in range(s.ptr[a], s.ptr[a + 1]):
        s.conn[s.nbr[e] * s.m + big_a] -= s.wt[e]
        s.conn[s.nbr[e] * s.m + big_c] += s.wt[e]
    for e in range(s.ptr[c], s.ptr[c + 1]):
        s.conn[s.nbr[e] * s.m + big_c] -= s.wt[e]
        s.conn[s.nbr[e] * s.m + big_a] += s.wt[e]
    s.members[big_a * s.cap + s.slot[a]] = c
    s.members[big_c * s.cap + s.slot[c]] = a
    t = s.slot[a]
    s.slot[a] = s.slot[c]
    s.slot[c] = t
    s.mine[a] = big_c
    s.mine[c] = big_a


cdef inline int64_t logged(Split* s, int64_t n_log, int64_t a, int64_t c) noexcept nogil:
    if 0 <= n_log < s.log_rows:
        s.log[2 * n_log] = a
        s.log[2 * n_log + 1] = c
    return n_log + 1


cdef double descend(Split* s, int64_t* evaluations, int64_t* n_log) noexcept nogil:
    """Swaps until none gains: each task in turn with its best partner in
    the children it has traffic to (each child once), passes over all tasks
    until one swaps none.  On the nodes of 64 tasks this beat a queue of
    the tasks next to the last swaps: it found more per evaluation but
    took 2.5 times as long per evaluation.  Swaps are written to the log
    from ``n_log`` and stop when it is full (a negative ``n_log``: not
    written, no end).  Returns the cut removed; adds to ``evaluations``."""
    cdef double removed = 0.0, best_gain, out, g
    cdef bint improved = True
    cdef int64_t a, big_a, big_c, best, e, i, c
    while improved:
        improved = False
        for a in range(s.k):
            big_a = s.mine[a]
            s.stamp += 1
            best, best_gain = -1, 1e-9
            for e in range(s.ptr[a], s.ptr[a + 1]):
                s.to_a[s.nbr[e]] += s.wt[e]
            for e in range(s.ptr[a], s.ptr[a + 1]):
                big_c = s.mine[s.nbr[e]]
                if big_c == big_a or s.seen[big_c] == s.stamp:
                    continue
                s.seen[big_c] = s.stamp
                out = s.conn[a * s.m + big_c] - s.conn[a * s.m + big_a]  # swap_gain, with a's side at hand
                for i in range(s.fill[big_c]):
                    c = s.members[big_c * s.cap + i]
                    g = out + s.conn[c * s.m + big_a] - s.conn[c * s.m + big_c] - 2.0 * s.to_a[c]
                    evaluations[0] += 1
                    if g > best_gain:
                        best, best_gain = c, g
            for e in range(s.ptr[a], s.ptr[a + 1]):
                s.to_a[s.nbr[e]] = 0.0
            if best >= 0 and n_log[0] < s.log_rows:
                swap(s, a, best)
                n_log[0] = logged(s, n_log[0], a, best)
                removed += best_gain
                improved = True
    return removed


cdef double search_split(const int64_t* ptr, const int64_t* nbr, const double* wt, int64_t k, int64_t* mine,
                          int64_t m, double max_work, int64_t seed) noexcept nogil:
    """``mine`` (the child, 0..m-1, of each of the ``k`` tasks of a local
    CSR ``ptr``/``nbr``/``wt``) improved in place by the search above
    within ``max_work`` evaluations; the children keep their sizes.
    Returns the cut weight removed."""
    cdef Split s
    cdef int64_t cap = 1, a, c, j, n_log, i, kick, evaluations = 0, work
    cdef vector[int64_t] fill = vector[int64_t](m, 0)
    for a in range(k):
        fill[mine[a]] += 1
    for j in range(m):
        cap = cap if cap >= fill[j] else fill[j]
    cdef vector[double] conn = vector[double](k * m, 0.0)
    cdef vector[int64_t] members = vector[int64_t](m * cap)
    cdef vector[int64_t] slot = vector[int64_t](k)
    cdef vector[int64_t] seen = vector[int64_t](m, -1)
    cdef vector[double] to_a = vector[double](k, 0.0)
    cdef vector[int64_t] log = vector[int64_t](2 * 4 * k)  # a round's swaps, undone in reverse when it is not kept
    s.ptr, s.nbr, s.wt, s.k, s.m, s.cap = ptr, nbr, wt, k, m, cap
    s.mine, s.conn, s.members, s.slot, s.fill = mine, conn.data(), members.data(), slot.data(), fill.data()
    s.log, s.log_rows, s.seen, s.stamp, s.to_a = log.data(), 4 * k, seen.data(), 0, to_a.data()
    rebuild(&s)
    n_log = -(<int64_t>1 << 62)  # the first descent is never undone: not logged
    cdef double removed = descend(&s, &evaluations, &n_log), total, kept
    work = evaluations + k * m
    cdef uint64_t state = <uint64_t>seed
    total, kept = removed, removed  # the cut removed now, and by the best split
    kick = KICK_SWAPS if KICK_SWAPS < k // 4 else k // 4
    kick = kick if kick > 1 else 1
    while work < max_work:
        n_log = 0
        for i in range(kick):
            a = <int64_t>(next_random(&state) % <uint64_t>k)
            if ptr[a + 1] == ptr[a]:
                continue
            c = nbr[ptr[a] + <int64_t>(next_random(&state) % <uint64_t>(ptr[a + 1] - ptr[a]))]
            if mine[a] != mine[c]:
                total += swap_gain(&s, a, c)
                swap(&s, a, c)
                n_log = logged(&s, n_log, a, c)
        evaluations = 0
        removed = descend(&s, &evaluations, &n_log)
        total += removed
        work += evaluations + n_log + kick  # the kick's draws count: no task may have a partner
        if total >= kept - 1e-9:  # not worse: kept (a plateau is walked)
            kept = total
        else:  # back to the best split: the round's swaps undone
            total = kept
            for i in range(n_log - 1, -1, -1):
                swap(&s, log[2 * i], log[2 * i + 1])
    return kept


def improve_split(const int64_t[::1] ptr, const int64_t[::1] nbr, const double[::1] wt, int64_t k,
                  int64_t[::1] mine, int64_t m, double max_work, int64_t seed):
    """The search above on one local CSR of ``k`` tasks split into ``m``
    children (``mine`` changed in place, the children keep their sizes),
    within ``max_work`` evaluations, its random stream seeded by ``seed``;
    returns the cut weight removed."""
    cdef double kept
    with nogil:
        kept = search_split(&ptr[0], &nbr[0] if nbr.shape[0] else NULL, &wt[0] if wt.shape[0] else NULL, k,
                             &mine[0] if mine.shape[0] else NULL, m, max_work, seed)
    return kept


# ---------------------------------------------------------------------------
# Greedy growing of many small sub-problems (``growing.grow_split``)

def grow(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w, const int64_t[::1] tasks,
         const int64_t[::1] sub_ptr, const int64_t[::1] sizes, const int64_t[::1] size_ptr, const int64_t[::1] at,
         int64_t[::1] child, double search_work):
    """For each sub-problem i: its tasks ``tasks[sub_ptr[i]:sub_ptr[i + 1]]``
    into children of the sizes ``sizes[size_ptr[i]:size_ptr[i + 1]]``
    (summing to the task count); ``child[t]`` gets the child's index, and
    ``at[t]`` is where task t stands in ``tasks`` (-1: in none).  A
    sub-problem is first copied into a small CSR of its own (local ids in
    task order): with scrambled ids every look-up in an array of n tasks
    is a cache miss, so the scans for the best task run on the copy; then
    its split is searched with ``search_work`` evaluations per task."""
    cdef int64_t most = 0, entries = 0, here, i, a, lo, hi, k, fill, t, x, e, m, j, best, r
    cdef double s, best_gain
    cdef vector[int64_t] ptr, nbr, mine
    cdef vector[double] wt, to_child, to_free
    with nogil:
        for i in range(sub_ptr.shape[0] - 1):  # the most tasks and adjacency entries of one sub-problem
            most = most if most >= sub_ptr[i + 1] - sub_ptr[i] else sub_ptr[i + 1] - sub_ptr[i]
            here = 0
            for a in range(sub_ptr[i], sub_ptr[i + 1]):
                here += indptr[tasks[a] + 1] - indptr[tasks[a]]
            entries = entries if entries >= here else here
        ptr.assign(most + 1, 0)
        nbr.resize(entries)
        wt.resize(entries)
        mine.resize(most)
        to_child.resize(most)
        to_free.resize(most)
        for i in range(sub_ptr.shape[0] - 1):
            lo, hi = sub_ptr[i], sub_ptr[i + 1]
            k = hi - lo
            fill = 0
            for a in range(k):
                t = tasks[lo + a]
                s = 0.0
                for e in range(indptr[t], indptr[t + 1]):
                    x = at[indices[e]] - lo
                    if x < 0 or x >= k:
                        continue  # a task of another sub-problem
                    nbr[fill] = x
                    wt[fill] = w[e]
                    fill += 1
                    s += w[e]
                ptr[a + 1] = fill
                to_free[a] = s
                mine[a] = -1
            m = size_ptr[i + 1] - size_ptr[i]
            for j in range(m):
                if j == m - 1:  # the last child takes what is left
                    for a in range(k):
                        if mine[a] < 0:
                            mine[a] = j
                    break
                for a in range(k):
                    to_child[a] = 0.0
                for r in range(sizes[size_ptr[i] + j]):
                    best, best_gain = -1, -INF
                    for a in range(k):
                        if mine[a] < 0 and to_child[a] - to_free[a] > best_gain:
                            best, best_gain = a, to_child[a] - to_free[a]
                    mine[best] = j
                    for e in range(ptr[best], ptr[best + 1]):
                        x = nbr[e]
                        if mine[x] < 0:
                            to_free[x] -= wt[e]
                            to_child[x] += wt[e]
            if search_work > 0 and m > 1:
                search_split(ptr.data(), nbr.data(), wt.data(), k, mine.data(), m, search_work * k, tasks[lo])
            for a in range(k):
                child[tasks[lo + a]] = mine[a]


cdef uint64_t MIX = 0x9e3779b97f4a7c15ULL    # odd: x -> x * MIX is a bijection of the 64-bit integers ...
cdef uint64_t UNMIX = 0xf1de83e19937733dULL  # ... and this its inverse (x * MIX * UNMIX == x, mod 2^64)


cdef inline int64_t gcd(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t t
    while b:
        t = a % b
        a = b
        b = t
    return a


cdef class BlockGrowth:
    """Blocks grown one after the other over the whole graph, a run of
    blocks per call (``grow``): the growing's state is kept between calls,
    so that one call's blocks can be split on another core while the next
    call grows, and any runs give what one call for all the blocks gives.
    What the growing reads of a neighbour (its traffic to the placed tasks
    and to the block, its degree, whether it is placed) shares one row of
    ``state``: with scrambled ids each neighbour is a cache miss, one
    instead of four.  A block starts from the next free task of a fixed
    stride through the ids (a scattered start, whatever the numbering);
    ties among equal gains go in a scrambled order (a task's id times an
    odd constant: in row-major order they grew 1 x 64 strips)."""
    cdef const int64_t[::1] indptr
    cdef const int64_t[::1] indices
    cdef const double[::1] w
    cdef vector[double] state  # to the placed tasks, to the block; degree; placed
    cdef vector[double] keys  # (-gain, scrambled task) of the free tasks next to the block
    cdef vector[uint64_t] vals
    cdef vector[int64_t] touched
    cdef int64_t n, stride, scan, placed, blocks

    def __cinit__(self, const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w):
        cdef int64_t t, e
        self.indptr, self.indices, self.w = indptr, indices, w
        self.n = indptr.shape[0] - 1
        self.state.assign(4 * self.n, 0.0)
        self.keys.resize(1024)
        self.vals.resize(1024)
        self.touched.resize(self.n)
        self.scan = self.placed = self.blocks = 0
        with nogil:
            for t in range(self.n):
                for e in range(indptr[t], indptr[t + 1]):
                    self.state[4 * t + 2] += w[e]
            self.stride = (<int64_t>(0.6180339887 * self.n)) | 1  # coprime to n: i * stride % n visits every task
            while gcd(self.stride, self.n) != 1:
                self.stride += 2

    def grow(self, const int64_t[::1] sizes, int64_t[::1] block, int64_t[::1] order):
        """The next blocks, of ``sizes[b]`` tasks (at most the tasks still
        free): ``block[t]`` gets the block of each of their tasks (numbered
        on from the last call) and ``order`` the tasks in the order they
        were placed (from where the last call stopped)."""
        cdef const int64_t[::1] indptr = self.indptr
        cdef const int64_t[::1] indices = self.indices
        cdef const double[::1] w = self.w
        cdef double* state = self.state.data()
        cdef int64_t* touched = self.touched.data()
        cdef int64_t n = self.n, t, e, n_touched, x, i, r
        cdef Py_ssize_t n_heap = 0, b
        cdef double key
        cdef uint64_t v
        with nogil:
            for b in range(sizes.shape[0]):
                n_touched = 0
                for r in range(sizes[b]):
                    t = -1
                    while n_heap:
                        n_heap = pop(self.keys.data(), self.vals.data(), n_heap, &key, &v)
                        x = <int64_t>(v * UNMIX)
                        if state[4 * x + 3] == 0.0 and -key == 2.0 * state[4 * x + 1] + state[4 * x] - state[4 * x + 2]:
                            t = x
                            break
                    while t < 0:  # nothing free touches the block: a new start
                        x = self.scan * self.stride % n
                        if state[4 * x + 3] == 0.0:
                            t = x
                        self.scan += 1
                    block[t] = self.blocks
                    order[self.placed] = t
                    self.placed += 1
                    state[4 * t + 3] = 1.0
                    for e in range(indptr[t], indptr[t + 1]):
                        x = indices[e]
                        if state[4 * x + 3] != 0.0:
                            continue
                        state[4 * x] += w[e]
                        if state[4 * x + 1] == 0.0:
                            touched[n_touched] = x
                            n_touched += 1
                        state[4 * x + 1] += w[e]
                        # the gain: traffic into the block minus traffic to the tasks still free
                        if n_heap == <Py_ssize_t>self.keys.size():
                            self.keys.resize(2 * self.keys.size())
                            self.vals.resize(2 * self.vals.size())
                        n_heap = push(self.keys.data(), self.vals.data(), n_heap,
                                      -(2.0 * state[4 * x + 1] + state[4 * x] - state[4 * x + 2]), <uint64_t>x * MIX)
                for i in range(n_touched):
                    state[4 * touched[i] + 1] = 0.0
                n_heap = 0
                self.blocks += 1


def grow_blocks(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                const int64_t[::1] sizes, int64_t[::1] block, int64_t[::1] order):
    """Blocks 0, 1, ... of ``sizes[b]`` tasks grown one after the other over
    the whole graph (``BlockGrowth`` in one call); ``block[t]`` gets the
    block of every task and ``order`` the tasks in the order they were
    placed."""
    BlockGrowth(indptr, indices, w).grow(sizes, block, order)


# ---------------------------------------------------------------------------
# Two-way FM on each pair of a matching (``pair_fm.py``)

cdef inline int64_t top(double* keys, int64_t* vals, Py_ssize_t* size, const double* gain, const flag* locked,
                        double* top_gain) noexcept nogil:
    """The valid top of one side's heap (-gain, task), stale entries dropped:
    the task or -1, its gain into ``top_gain``."""
    cdef double key
    cdef int64_t val
    while size[0]:
        if not locked[vals[0]] and keys[0] == -gain[vals[0]]:
            top_gain[0] = gain[vals[0]]
            return vals[0]
        size[0] = pop(keys, vals, size[0], &key, &val)
    top_gain[0] = -INF
    return -1


cdef double fm(const int64_t* ptr, const int64_t* nbr, const double* wt, int64_t k, int64_t* side,
               int64_t max_passes, double* gain, flag* locked, int64_t* moved, double* keys, int64_t* vals,
               Py_ssize_t half) noexcept nogil:
    """FM passes on the local CSR of ``k`` tasks split by ``side`` (0/1, sizes
    kept); ``side`` is changed in place.  The tasks of each side wait in a
    heap by gain (``keys``/``vals``: two halves of ``half`` entries, stale
    entries skipped).  Returns the cut weight removed."""
    cdef int64_t ones = 0, a, e, i, made, count, pick0, pick1, pick, was, x, j, best_at, h, p
    cdef Py_ssize_t sizes[2]
    cdef double removed = 0.0, g, now, best, gain0, gain1, pick_gain
    for a in range(k):
        ones += side[a]
    for p in range(max_passes):
        sizes[0] = 0
        sizes[1] = 0
        for a in range(k):
            g = 0.0
            for e in range(ptr[a], ptr[a + 1]):
                g += wt[e] if side[nbr[e]] != side[a] else -wt[e]
            gain[a] = g
            locked[a] = False
            h = side[a] * half
            sizes[side[a]] = push(keys + h, vals + h, sizes[side[a]], -g, a)
        now, best, best_at, made, count = 0.0, 0.0, 0, 0, ones
        for i in range(k):
            pick0 = top(keys, vals, &sizes[0], gain, locked, &gain0)
            pick1 = top(keys + half, vals + half, &sizes[1], gain, locked, &gain1)
            if count > ones or (count == ones and pick1 >= 0 and (gain1 > gain0 or (gain1 == gain0 and pick1 < pick0))):
                pick, pick_gain = pick1, gain1  # the larger side gives; at equal sizes the better task
            else:
                pick, pick_gain = pick0, gain0
            if pick < 0:
                break
            locked[pick] = True
            moved[i] = pick
            made = i + 1
            now += pick_gain
            was = side[pick]
            side[pick] = 1 - was
            count += 1 if was == 0 else -1
            gain[pick] = -gain[pick]
            for e in range(ptr[pick], ptr[pick + 1]):
                x = nbr[e]
                if locked[x]:
                    continue
                gain[x] += 2.0 * wt[e] if side[x] == was else -2.0 * wt[e]
                h = side[x] * half
                sizes[side[x]] = push(keys + h, vals + h, sizes[side[x]], -gain[x], x)
            if count == ones and now > best + 1e-9:
                best, best_at = now, made
        for j in range(made - 1, best_at - 1, -1):  # back to the best balanced prefix
            side[moved[j]] = 1 - side[moved[j]]
        removed += best
        if best <= 1e-9:
            break
    return removed


def refine_matched(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w, int64_t[::1] block,
                   const int64_t[::1] first, const int64_t[::1] second, const int64_t[::1] members,
                   const int64_t[::1] member_ptr, int64_t[::1] at, int64_t max_passes):
    """FM on each pair (``first[p]``, ``second[p]``) of blocks, whose tasks are
    ``members[member_ptr[b]:member_ptr[b + 1]]``; ``block`` is updated for
    the tasks that change sides, ``at`` is scratch (a task's place in its
    pair's copy).  Returns the cut weight removed."""
    cdef int64_t most = 0, p, k, which, b, i, fill, a, t, e, x, size
    cdef double removed = 0.0
    with nogil:
        for p in range(first.shape[0]):
            size = member_ptr[first[p] + 1] - member_ptr[first[p]] + member_ptr[second[p] + 1] - member_ptr[second[p]]
            most = most if most >= size else size
    cdef vector[int64_t] tasks = vector[int64_t](most), ptr = vector[int64_t](most + 1, 0)
    cdef vector[int64_t] nbr = vector[int64_t](8 * most), side = vector[int64_t](most)
    cdef vector[double] wt = vector[double](8 * most), gain = vector[double](most)
    cdef vector[flag] locked = vector[flag](most)
    cdef vector[int64_t] moved = vector[int64_t](most), vals
    cdef vector[double] keys
    with nogil:
        for p in range(first.shape[0]):
            k = 0
            for which in range(2):
                b = first[p] if which == 0 else second[p]
                for i in range(member_ptr[b], member_ptr[b + 1]):
                    tasks[k] = members[i]
                    side[k] = which
                    at[members[i]] = k
                    k += 1
            fill = 0
            for a in range(k):
                t = tasks[a]
                for e in range(indptr[t], indptr[t + 1]):
                    b = block[indices[e]]  # another thread's pairs write ``at`` and ``block`` of other blocks only
                    if b != first[p] and b != second[p]:
                        continue
                    x = at[indices[e]]
                    if fill == <int64_t>nbr.size():
                        nbr.resize(2 * nbr.size())
                        wt.resize(2 * wt.size())
                    nbr[fill] = x
                    wt[fill] = w[e]
                    fill += 1
                ptr[a + 1] = fill
            if <int64_t>keys.size() < 2 * (k + fill):
                keys.resize(2 * (k + fill))
                vals.resize(2 * (k + fill))
            removed += fm(ptr.data(), nbr.data(), wt.data(), k, side.data(), max_passes, gain.data(), locked.data(),
                          moved.data(), keys.data(), vals.data(), keys.size() // 2)
            for a in range(k):
                block[tasks[a]] = first[p] if side[a] == 0 else second[p]
    return removed


def greedy_matching(const int64_t[::1] qa, const int64_t[::1] qb, const int64_t[::1] order, int64_t k):
    """The pairs (qa[i], qb[i]) taken in ``order`` when both blocks are still free."""
    cdef vector[cbool] used = vector[cbool](k, False)
    first_arr, second_arr = np.empty(k // 2, dtype=np.int64), np.empty(k // 2, dtype=np.int64)
    cdef int64_t[::1] first = first_arr, second = second_arr
    cdef int64_t made = 0, i, x, y
    cdef Py_ssize_t j
    with nogil:
        for j in range(order.shape[0]):
            i = order[j]
            x, y = qa[i], qb[i]
            if not used[x] and not used[y]:
                used[x] = used[y] = True
                first[made], second[made] = x, y
                made += 1
    return first_arr[:made], second_arr[:made]


# ---------------------------------------------------------------------------
# Heavy-edge matching (``coarsen.heavy_edge_matching``)

def heavy_edge_mates(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] w,
                     const double[::1] vw, const int64_t[::1] group, const int64_t[::1] order, double max_weight):
    """Every vertex's mate (-1: none): the vertices in ``order`` each take
    the unmatched neighbour of heaviest edge (the first on ties) in the
    same ``group`` whose pair stays within ``max_weight``."""
    cdef Py_ssize_t n = indptr.shape[0] - 1, j
    mate_arr = np.full(n, -1, dtype=np.int64)
    cdef int64_t[::1] mate = mate_arr
    cdef int64_t u, best, e, v
    cdef double best_w
    with nogil:
        for j in range(order.shape[0]):
            u = order[j]
            if mate[u] >= 0:
                continue
            best, best_w = -1, 0.0
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if v == u or mate[v] >= 0 or group[v] != group[u] or vw[u] + vw[v] > max_weight:
                    continue
                if w[e] > best_w:
                    best, best_w = v, w[e]
            if best >= 0:
                mate[u] = best
                mate[best] = u
    return mate_arr


# ---------------------------------------------------------------------------
# The chain repair of block sizes (``rebalance.py``)

cdef struct Blocks:
    # the graph (renumbered block by block) and its blocks
    const int64_t* indptr
    const int64_t* indices
    const double* data
    int64_t* block
    int64_t k
    int64_t width
    int64_t* members     # k x width: each block's tasks
    int64_t* count       # each block's size
    int64_t* position    # a task's place in its block's list
    const int64_t* capacity
    # a block's best moves into its neighbours, kept while none of its tasks or their neighbours moves
    int64_t known_width
    int64_t* known       # per block: how many kept (-1: none)
    int64_t* known_block
    double* known_gain
    int64_t* known_vertex
    # scratch of ``best_moves``
    int64_t* touched_by
    int64_t* listed
    double* conn
    int64_t* local


cdef struct Moves:
    # the best move of a task of one block into each neighbour: seen[:ns], gain and task per neighbour
    int64_t* seen
    double* gain
    int64_t* vertex


cdef int64_t best_moves(Blocks* g, int64_t i, Moves* out, int64_t* cheapest) noexcept nogil:
    """The best move of a task of block ``i`` into each adjacent block
    (``out``; their count returned), and the task that loses least when
    moved anywhere (``cheapest``)."""
    cdef int64_t ns = 0, mi, u, nl, e, c, t
    cdef double inside, gain, cheapest_loss = INF
    cheapest[0] = -1
    for mi in range(g.count[i]):
        u = g.members[i * g.width + mi]
        inside = 0.0
        nl = 0
        for e in range(g.indptr[u], g.indptr[u + 1]):
            c = g.block[g.indices[e]]
            if c == i:
                inside += g.data[e]
            elif g.touched_by[c] != u:
                g.touched_by[c] = u
                g.conn[c] = g.data[e]
                g.local[nl] = c
                nl += 1
            else:
                g.conn[c] += g.data[e]
        if inside < cheapest_loss:
            cheapest[0], cheapest_loss = u, inside
        for t in range(nl):
            c = g.local[t]
            gain = g.conn[c] - inside
            if g.listed[c] != i:
                g.listed[c] = i
                out.seen[ns] = c
                ns += 1
                out.gain[c], out.vertex[c] = gain, u
            elif gain > out.gain[c]:
                out.gain[c], out.vertex[c] = gain, u
    for t in range(ns):
        g.touched_by[out.seen[t]] = -1
        g.listed[out.seen[t]] = -1
    return ns


cdef void relocate(Blocks* g, int64_t u, int64_t source, int64_t target) noexcept nogil:
    """Task ``u`` moved from block ``source`` to ``target``."""
    cdef int64_t p = g.position[u], last = g.members[source * g.width + g.count[source] - 1]
    g.members[source * g.width + p] = last
    g.position[last] = p
    g.count[source] -= 1
    g.members[target * g.width + g.count[target]] = u
    g.position[u] = g.count[target]
    g.count[target] += 1
    g.block[u] = target


cdef int64_t expand(Blocks* g, int64_t i, Moves* out) noexcept nogil:
    """The best moves from block ``i`` into its neighbours (``out``, their
    count returned): kept from an earlier expansion while no task of or
    next to the block has moved since, else found anew."""
    cdef int64_t ns, t, c, cheapest
    cdef int64_t base = i * g.known_width
    if g.known[i] >= 0:
        ns = g.known[i]
        for t in range(ns):
            c = g.known_block[base + t]
            out.seen[t], out.gain[c], out.vertex[c] = c, g.known_gain[base + t], g.known_vertex[base + t]
        return ns
    ns = best_moves(g, i, out, &cheapest)
    if ns <= g.known_width:
        g.known[i] = ns
        for t in range(ns):
            c = out.seen[t]
            g.known_block[base + t], g.known_gain[base + t], g.known_vertex[base + t] = c, out.gain[c], out.vertex[c]
    return ns


cdef void moved(Blocks* g, int64_t u, int64_t source, int64_t target) noexcept nogil:
    """Task ``u`` moved from ``source`` to ``target``; the moves kept for
    both blocks and for the blocks around ``u`` are forgotten."""
    cdef int64_t e
    relocate(g, u, source, target)
    g.known[source] = -1
    g.known[target] = -1
    for e in range(g.indptr[u], g.indptr[u + 1]):
        g.known[g.block[g.indices[e]]] = -1


cdef double gain_into(Blocks* g, int64_t i, int64_t c, Moves* out) noexcept nogil:
    """What the best move of a task of block ``i`` into block ``c`` gains
    (-inf where they are not adjacent), from the kept moves where it can."""
    cdef int64_t t, ns
    if g.known[i] >= 0:
        for t in range(g.known[i]):
            if g.known_block[i * g.known_width + t] == c:
                return g.known_gain[i * g.known_width + t]
        return -INF
    ns = expand(g, i, out)
    for t in range(ns):
        if out.seen[t] == c:
            return out.gain[c]
    return -INF


cdef inline double lost(double gain) noexcept nogil:
    """A step's lost cut weight: max(-gain, 0)."""
    return -gain if -gain > 0.0 else 0.0


cdef void costs_to_room(Blocks* g, double hop, Moves* near, Moves* far, const flag* stale, double* dist,
                        int64_t* toward, flag* settled, vector[double]& keys, vector[int64_t]& vals) noexcept nogil:
    """The cheapest chain from every ``stale`` block to a block with room
    (``dist``, and ``toward``: the block it hands a task to), by Dijkstra
    back from the rooms; the other blocks keep theirs and start the
    stale ones next to them."""
    cdef int64_t b, c, ns, nc, t, i
    cdef Py_ssize_t size = 0
    cdef double cost, d, gain
    for b in range(g.k):
        if not stale[b]:
            continue
        settled[b] = False
        dist[b], toward[b] = INF, -1
        if g.count[b] < g.capacity[b]:
            dist[b] = 0.0
        else:
            ns = expand(g, b, far)
            for t in range(ns):
                c = far.seen[t]
                if not stale[c] and dist[c] < INF:
                    cost = dist[c] + lost(far.gain[c]) + hop
                    if cost < dist[b]:
                        dist[b], toward[b] = cost, c
        if dist[b] < INF:
            room_for(keys, vals, size, 1)
            size = push(keys.data(), vals.data(), size, dist[b], b)
    while size > 0:
        size = pop(keys.data(), vals.data(), size, &d, &c)
        if settled[c] or d > dist[c]:
            continue
        settled[c] = True
        nc = expand(g, c, near)
        for t in range(nc):
            i = near.seen[t]
            if settled[i] or not stale[i]:
                continue
            gain = gain_into(g, i, c, far)
            cost = d + lost(gain) + hop
            if cost < dist[i]:
                dist[i], toward[i] = cost, c
                room_for(keys, vals, size, 1)
                size = push(keys.data(), vals.data(), size, cost, i)


cdef inline void room_for(vector[double]& keys, vector[int64_t]& vals, Py_ssize_t size, Py_ssize_t extra) noexcept nogil:
    """The heap's arrays with room for ``extra`` more entries."""
    if size + extra > <Py_ssize_t>keys.size():
        keys.resize(2 * (size + extra))
        vals.resize(2 * (size + extra))


cdef void rooms(const int64_t* toward, const double* dist, int64_t* room, int64_t k) noexcept nogil:
    """``room``: the block with room each block's chain ends in (-1: none)."""
    cdef int64_t b, x, end
    for b in range(k):
        room[b] = -2  # not yet known; -3: on the path being followed
    for b in range(k):
        x = b
        while room[x] == -2:
            if toward[x] < 0:
                room[x] = x if dist[x] == 0.0 else -1
                break
            room[x] = -3
            x = toward[x]
        end = room[x] if room[x] != -3 else -1
        x = b
        while room[x] == -3:
            room[x] = end
            x = toward[x]


cdef void plant(Blocks* g, int64_t x, Moves* out) noexcept nogil:
    """The task of block ``x`` that loses least moved to an empty block
    with room (else any block with room): the empty block, which no chain
    reaches, now lies next to ``x``."""
    cdef int64_t target = -1, b, cheapest
    for b in range(g.k):
        if g.count[b] < g.capacity[b] and (target < 0 or g.count[b] == 0):
            target = b
            if g.count[b] == 0:
                break
    best_moves(g, x, out, &cheapest)
    moved(g, cheapest, x, target)


cdef void chains_to_room(Blocks* g, const int64_t* left, int64_t n_left, double hop, int64_t max_work) noexcept nogil:
    """The tasks too many of the blocks in ``left`` handed along the
    cheapest chains to any block with room, found back from the rooms at
    once and found again only for the blocks whose chains have changed: a
    room that filled, a step that no longer exists.  Stops when the
    searches have visited ``max_work`` blocks (a scan of all blocks counts
    a sixteenth)."""
    cdef int64_t k = g.k, work = g.k, j, a, x, y, ns, t, b
    cdef bint searched, adjacent
    cdef vector[double] dist = vector[double](k)
    cdef vector[int64_t] toward = vector[int64_t](k), room = vector[int64_t](k)
    cdef vector[flag] settled = vector[flag](k, False), stale = vector[flag](k, True)
    cdef vector[double] keys = vector[double](64)
    cdef vector[int64_t] vals = vector[int64_t](64)
    cdef vector[int64_t] near_seen = vector[int64_t](k), near_vertex = vector[int64_t](k, -1)
    cdef vector[int64_t] far_seen = vector[int64_t](k), far_vertex = vector[int64_t](k, -1)
    cdef vector[double] near_gain = vector[double](k, 0.0), far_gain = vector[double](k, 0.0)
    cdef Moves near, far
    near.seen, near.gain, near.vertex = near_seen.data(), near_gain.data(), near_vertex.data()
    far.seen, far.gain, far.vertex = far_seen.data(), far_gain.data(), far_vertex.data()
    costs_to_room(g, hop, &near, &far, stale.data(), dist.data(), toward.data(), settled.data(), keys, vals)
    for j in range(n_left):
        a = left[j]
        while g.count[a] > g.capacity[a] and work < max_work:
            x, searched = a, False
            while x == a or g.count[x] > g.capacity[x]:
                y = toward[x]
                if y >= 0:
                    ns = expand(g, x, &near)
                    adjacent = False
                    for t in range(ns):
                        adjacent = adjacent or near.seen[t] == y
                    if not adjacent:
                        y = -1
                if y < 0 and searched:  # no room within reach (the only ones left are empty): one is planted here
                    plant(g, x, &near)
                    break
                if y < 0 or (dist[y] == 0.0 and g.count[y] >= g.capacity[y]):
                    # x's step is gone, or the room it led to has filled: the blocks whose chains
                    # end there, or pass through x, search again
                    if y < 0:
                        toward[x], dist[x] = -1, INF
                    rooms(toward.data(), dist.data(), room.data(), k)
                    for b in range(k):
                        stale[b] = room[b] == -1 or (y >= 0 and room[b] == y)
                        work += stale[b]
                    work += k // 16
                    costs_to_room(g, hop, &near, &far, stale.data(), dist.data(), toward.data(), settled.data(),
                                  keys, vals)
                    searched = True
                    continue
                moved(g, near.vertex[y], x, y)
                searched = False
                x = y


def move_along_chains(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] data,
                      int64_t[::1] block, const int64_t[::1] capacity, const int64_t[::1] order, double hop,
                      int64_t max_expand, int64_t known_width, int64_t max_work):
    """Every block of ``block`` (changed in place) within its ``capacity``:
    one search per task too many, the blocks taken in ``order``; a step
    costs its lost cut weight plus ``hop``; a search expands at most
    ``max_expand`` blocks; blocks of at most ``known_width`` neighbours keep
    their moves between searches.  The tasks of the blocks whose searches
    found no room then go along chains searched back from every room
    (``chains_to_room``, up to ``max_work`` blocks visited)."""
    cdef int64_t n = block.shape[0], k = capacity.shape[0], v, b, width = 0, max_degree = 1, j, a
    cdef int64_t n_reached, expanded, goal, i, ns, t, c, n_left = 0, room_at = 0, cheapest
    cdef Py_ssize_t size
    cdef double goal_cost, d, cost
    cdef Blocks g
    cdef Moves out
    cdef vector[int64_t] count = vector[int64_t](k, 0), filled = vector[int64_t](k, 0)
    cdef vector[int64_t] members, position = vector[int64_t](n)
    cdef vector[int64_t] touched_by = vector[int64_t](k, -1), listed = vector[int64_t](k, -1), local
    cdef vector[double] conn = vector[double](k, 0.0)
    cdef vector[int64_t] seen = vector[int64_t](k), best_vertex = vector[int64_t](k, -1)
    cdef vector[double] best_gain = vector[double](k, 0.0)
    cdef vector[int64_t] known = vector[int64_t](k, -1), known_block = vector[int64_t](k * known_width)
    cdef vector[double] known_gain = vector[double](k * known_width)
    cdef vector[int64_t] known_vertex = vector[int64_t](k * known_width)
    cdef vector[double] dist = vector[double](k, INF)
    cdef vector[int64_t] prev = vector[int64_t](k, -1)  # the block a chain comes from ...
    cdef vector[int64_t] via = vector[int64_t](k, -1)   # ... and the task it hands on
    cdef vector[cbool] done = vector[cbool](k, False)
    cdef vector[int64_t] reached = vector[int64_t](k)
    cdef vector[double] keys = vector[double](64)
    cdef vector[int64_t] vals = vector[int64_t](64)
    cdef vector[int64_t] left = vector[int64_t](k)  # blocks whose own searches found no chain
    with nogil:
        for v in range(n):
            count[block[v]] += 1
        for b in range(k):
            width = width if width >= count[b] else count[b]
            width = width if width >= capacity[b] else capacity[b]
        width += 1
        members.resize(k * width)
        for v in range(n):
            b = block[v]
            members[b * width + filled[b]] = v
            position[v] = filled[b]
            filled[b] += 1
        for v in range(n):
            max_degree = max_degree if max_degree >= indptr[v + 1] - indptr[v] else indptr[v + 1] - indptr[v]
        local.resize(max_degree)
        g.indptr, g.indices, g.data, g.block, g.k, g.width = &indptr[0], &indices[0] if indices.shape[0] else NULL, \
            &data[0] if data.shape[0] else NULL, &block[0] if n else NULL, k, width
        g.members, g.count, g.position, g.capacity = members.data(), count.data(), position.data(), &capacity[0]
        g.known_width, g.known, g.known_block, g.known_gain, g.known_vertex = known_width, known.data(), \
            known_block.data(), known_gain.data(), known_vertex.data()
        g.touched_by, g.listed, g.conn, g.local = touched_by.data(), listed.data(), conn.data(), local.data()
        out.seen, out.gain, out.vertex = seen.data(), best_gain.data(), best_vertex.data()
        # each block's tasks too many, one search each
        for j in range(order.shape[0]):
            a = order[j]
            while count[a] > capacity[a]:
                n_reached, size, expanded = 1, 0, 0
                reached[0], dist[a] = a, 0.0
                size = push(keys.data(), vals.data(), size, 0.0, a)
                goal, goal_cost = -1, INF
                while size > 0 and expanded < max_expand:
                    size = pop(keys.data(), vals.data(), size, &d, &i)
                    if done[i] or d > dist[i]:
                        continue
                    if d >= goal_cost:
                        break
                    done[i] = True
                    expanded += 1
                    ns = expand(&g, i, &out)
                    room_for(keys, vals, size, ns)
                    for t in range(ns):
                        c = seen[t]
                        cost = d + lost(best_gain[c]) + hop
                        if done[c] or cost >= dist[c]:
                            continue
                        if dist[c] == INF:
                            reached[n_reached] = c
                            n_reached += 1
                        dist[c], prev[c], via[c] = cost, i, best_vertex[c]
                        size = push(keys.data(), vals.data(), size, cost, c)
                        if count[c] < capacity[c] and cost < goal_cost:
                            goal, goal_cost = c, cost
                if goal >= 0:  # the chain's moves, the last first: no block but the goal ever holds more
                    c = goal
                    while c != a:
                        moved(&g, via[c], prev[c], c)
                        c = prev[c]
                for t in range(n_reached):
                    c = reached[t]
                    dist[c], prev[c], via[c], done[c] = INF, -1, -1, False
                if goal < 0:
                    left[n_left] = a
                    n_left += 1
                    break
        if n_left > 0 and max_work > 0:
            chains_to_room(&g, left.data(), n_left, hop, max_work)
        # what is still too many: the task that loses least, to the first block with room
        for a in range(k):
            while count[a] > capacity[a]:
                while count[room_at] >= capacity[room_at]:
                    room_at += 1
                best_moves(&g, a, &out, &cheapest)
                relocate(&g, cheapest, a, room_at)
