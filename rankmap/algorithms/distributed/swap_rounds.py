"""Swap refinement in rounds, written for tasks spread over many owners.

ParHIPMap-style label propagation adapted to one-to-one mapping: a task may
only move by swapping PEs with another task, so every move is a pair agreed by
both ends.  Nothing here imports MPI: the protocol talks through an
``exchange`` object (``owner(tasks)``, ``exchange(dest, records)``,
``allreduce(values)``); ``LocalExchange`` runs it in one process and
``rankmap.reorder.exchange.MPIExchange`` runs it across MPI ranks.  The result
does not depend on how tasks are spread over owners: every decision is a
function of the global state, computed by the owner of the task it concerns,
and every receive is sorted by key before use.

A PE is known only through its *label*: its id, the ids of its ancestors from
the root down and their distances (the implicit labelled tree of ParHIPMap),
so D(p, q) = distance of the deepest common ancestor needs two labels, no
topology and no k x k matrix.

One round, for tasks u with PE labels l(u) and symmetric traffic S = B + B^T:
  1. every task sends its label to its neighbours (fresh 1-hop labels);
  2. every task forwards its ``fanout`` heaviest neighbours with labels to its
     neighbours (2-hop candidates, the N_C^2 neighbourhood of Schulz & Traff);
     plus, through a directory per tree group, the tasks on PEs in the two
     smallest groups around its heaviest neighbours' PEs (where u would like
     to be: a swap partner there need not talk to u at all);
  3. u computes its half gain h_u(v) = sum_{w in N(u), w != v} S[u,w] *
     (D(l(u), l(w)) - D(l(v), l(w))) for every candidate v and proposes to the
     ``proposals`` best with h_u(v) > 0;
  4. v completes the gain g = h_u(v) + h_v(u) (exact change of J) and replies;
  5. each task prefers its best incident pair (g, then a seeded hash); pairs
     that prefer each other are matched;
  6. a matched pair is dropped when a neighbour of either end belongs to a
     matched pair of higher priority, so committed swaps never touch each
     other's neighbourhoods and their gains add up exactly;
  7. both ends confirm, and swap labels.
J falls by exactly the committed gains every round.  A round that gains less
than ``min_improvement`` * J does not end the search by itself: the next
round is a *check round* with a wide reach (every neighbour forwarded, every
positive half gain proposed, up to ``check_cap`` members per group shown
instead of ``group_cap`` rotating ones).  On a tree machine an improving swap
has a positive half gain at one end, whose partner's PE then lies in a small
group around one of its neighbours' PEs, so a check round that finds nothing
means no improving swap is left (up to the cap).  Rounds stop when a check
round also gains less, or after ``max_rounds``.

The local optimum reached depends on the path (the centralised refinement's
J varies up to 1.39x over seeds from one start), so every owner runs
``replicas`` independent copies of its tasks in the same rounds (``replicate``:
the same collectives carry all copies, each copy breaks ties by its own hash)
and the copy with the lowest J is returned.  Optional ``kicks`` then perturb
each copy (a round of random swaps), descend again and keep the result only
where J fell (iterated local search).  Never worse than the start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ...deadline import Deadline
from .protocol import OwnerProtocol

if TYPE_CHECKING:  # an MPI rank of the rounds needs neither (nor scipy, which CommGraph loads)
    from ...graph import CommGraph
    from ...topology import Topology

# ------------------------------------------------------------------ PE labels


def pe_labels(topology: Topology, pes) -> tuple[np.ndarray, np.ndarray]:
    """Ancestor ids (root first, padded with ids unique to the PE) and their
    distances for each PE in ``pes``: the label a task carries."""
    pes = np.asarray(pes, dtype=np.int64)
    anc = topology._paths[:, pes].T.copy()
    return anc, topology._dist_ext[anc]


def label_distance(anc_a, dist_a, anc_b) -> np.ndarray:
    """D between rows of labels: distance of the deepest common ancestor.
    Ancestor ids of two paths agree on a prefix only (a tree), so the depth
    of the LCA is the number of equal entries minus one."""
    depth = (anc_a == anc_b).sum(axis=1) - 1
    return dist_a[np.arange(len(depth)), depth]


def enclosing_group(labels: "Labels", up: int = 0) -> np.ndarray:
    """Node id of the smallest group around each PE with a non-zero distance
    (its core group or socket on a hierarchy), or ``up`` levels above it."""
    positive = labels.dist > 0
    last = labels.dist.shape[1] - 1 - np.argmax(positive[:, ::-1], axis=1)
    last = np.where(positive.any(axis=1), last, labels.dist.shape[1] - 1)
    return labels.anc[np.arange(len(last)), np.maximum(last - up, 0)]


@dataclass
class Labels:
    """Labels of a set of tasks: PE id, ancestor ids, ancestor distances."""

    pe: np.ndarray
    anc: np.ndarray
    dist: np.ndarray

    @classmethod
    def of(cls, topology: Topology, pes) -> "Labels":
        pes = np.array(pes, dtype=np.int64)  # a copy: swaps update labels in place
        return cls(pes, *pe_labels(topology, pes))

    def pack(self, idx=None) -> np.ndarray:
        """As float64 columns [pe, anc..., dist...] (ids are exact below 2^53)."""
        sl = slice(None) if idx is None else idx
        return np.column_stack([self.pe[sl].astype(np.float64), self.anc[sl].astype(np.float64),
                                self.dist[sl]])

    @classmethod
    def unpack(cls, cols: np.ndarray, levels: int) -> "Labels":
        cols = np.asarray(cols, dtype=np.float64).reshape(-1, 1 + 2 * levels)
        return cls(cols[:, 0].astype(np.int64), cols[:, 1:1 + levels].astype(np.int64),
                   cols[:, 1 + levels:].copy())

    def take(self, idx) -> "Labels":
        return Labels(self.pe[idx], self.anc[idx], self.dist[idx])


# ------------------------------------------------------------ the exchanges


class LocalExchange:
    """The protocol's transport in one process: one owner holds every task."""

    size = 1
    rank = 0

    def __init__(self, n_tasks: int):
        self.n_tasks = n_tasks

    def owner(self, tasks) -> np.ndarray:
        return np.zeros(len(tasks), dtype=np.int64)

    def exchange(self, dest, records: np.ndarray) -> np.ndarray:
        return records

    def allreduce(self, values) -> np.ndarray:
        return np.asarray(values, dtype=np.float64)

    def first_error(self, message: str | None) -> str | None:
        return message

    def central(self, records, fn):
        """Run ``fn`` on everything the owners send (here: one owner); it
        returns (a result for all, one result per owner)."""
        shared, per_owner = fn(records)
        return shared, per_owner[0]


def block_owner(tasks, n_tasks: int, n_owners: int) -> np.ndarray:
    """Owner of each task under the block distribution used everywhere:
    task t belongs to owner t * P // n (task r to rank r when n == P)."""
    return np.asarray(tasks, dtype=np.int64) * n_owners // max(n_tasks, 1)


def block_tasks(owner: int, n_tasks: int, n_owners: int) -> np.ndarray:
    """The tasks ``block_owner`` gives to ``owner``, ascending."""
    first = -(-owner * n_tasks // n_owners)
    stop = -(-(owner + 1) * n_tasks // n_owners)
    return np.arange(first, stop, dtype=np.int64)


# --------------------------------------------------------------- local rows


@dataclass
class Rows:
    """Symmetric traffic rows S[u, :] of the tasks one owner holds: CSR with
    global column ids, sorted per row; ``tasks`` ascending."""

    tasks: np.ndarray
    indptr: np.ndarray
    cols: np.ndarray
    weights: np.ndarray
    n_tasks: int

    def __post_init__(self):
        self.row_of_entry = np.repeat(np.arange(len(self.tasks)), np.diff(self.indptr))

    def local_index(self, tasks) -> np.ndarray:
        idx = np.searchsorted(self.tasks, tasks)
        idx = np.minimum(idx, max(len(self.tasks) - 1, 0))
        if len(tasks) and (len(self.tasks) == 0 or np.any(self.tasks[idx] != tasks)):
            raise ValueError("a message reached an owner that does not hold its task")
        return idx

    def entry_of(self, rows, cols) -> np.ndarray:
        """CSR entry of (local row, global column) pairs, -1 where absent."""
        keys = self.row_of_entry * self.n_tasks + self.cols
        want = np.asarray(rows, dtype=np.int64) * self.n_tasks + np.asarray(cols, dtype=np.int64)
        pos = np.searchsorted(keys, want)
        pos_c = np.minimum(pos, max(len(keys) - 1, 0))
        hit = (pos < len(keys)) & (keys[pos_c] == want) if len(keys) else np.zeros(len(want), bool)
        return np.where(hit, pos_c, -1)


def check_out_rows(out_cols, out_bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The out-rows' destinations and byte counts, checked (no communication:
    an MPI caller runs this as an agreed step before ``symmetric_rows``, whose
    exchange a rank raising alone would leave the others waiting in)."""
    dst = np.asarray(out_cols, dtype=np.int64)
    w = np.asarray(out_bytes, dtype=np.float64)
    if dst.size and (dst.min() < 0 or dst.max() >= n):
        raise ValueError(f"destination ranks must lie in 0..{n - 1}")
    if w.size and (not np.all(np.isfinite(w)) or w.min() < 0):
        raise ValueError("byte counts must be finite and non-negative")
    return dst, w


def symmetric_rows(tasks, out_indptr, out_cols, out_bytes, exchange) -> Rows:
    """S = B + B^T rows for the owned ``tasks`` from their out-rows B[u, :]:
    every byte count is also sent to the owner of its destination.  Self
    traffic and zero counts are dropped, repeats summed."""
    tasks = np.asarray(tasks, dtype=np.int64)
    n = exchange.n_tasks
    src = np.repeat(tasks, np.diff(out_indptr))
    dst, w = check_out_rows(out_cols, out_bytes, n)
    keep = (src != dst) & (w > 0)
    src, dst, w = src[keep], dst[keep], w[keep]
    recv = exchange.exchange(exchange.owner(dst), np.column_stack([dst, src, w]).astype(np.float64))
    # entries (row task, column task, bytes): own out-traffic, then what others sent us
    r = np.concatenate([src, recv[:, 0].astype(np.int64)])
    c = np.concatenate([dst, recv[:, 1].astype(np.int64)])
    return rows_from_entries(tasks, r, c, np.concatenate([w, recv[:, 2]]), n)


def rows_from_entries(tasks, r, c, v, n: int) -> Rows:
    """``Rows`` of the tasks ``tasks`` (ascending) from entries (row task,
    column task, bytes): repeats summed in a fixed order (sorted by row,
    column and value), so the sums do not depend on the order received."""
    order = np.lexsort((v, c, r))
    r, c, v = r[order], c[order], v[order]
    first = np.ones(len(r), dtype=bool)
    first[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
    group = np.cumsum(first) - 1
    weights = np.bincount(group, weights=v) if len(v) else np.zeros(0)
    r, c = r[first], c[first]
    row = np.searchsorted(tasks, r)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=len(tasks)))])
    return Rows(np.asarray(tasks, dtype=np.int64), indptr.astype(np.int64), c.astype(np.int64),
                weights, n)


def rows_of_graph(graph: CommGraph, tasks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Out-rows B[u, :] of ``tasks`` as (indptr, cols, bytes)."""
    sub = graph.bytes[np.asarray(tasks, dtype=np.int64)]
    return sub.indptr.astype(np.int64), sub.indices.astype(np.int64), sub.data.astype(np.float64)


# ---------------------------------------------------------------- the rounds


@dataclass
class RoundsResult:
    labels: Labels
    J_before: float
    J_after: float
    rounds: int
    swaps: int
    history: list = field(default_factory=list)
    deadline_hit: bool = False  # owner 0's deadline ended the rounds (the same on every owner)


def expand_rows(indptr, local_rows) -> tuple[np.ndarray, np.ndarray]:
    """(index into ``local_rows``, CSR entry) for every entry of those rows."""
    local_rows = np.asarray(local_rows, dtype=np.int64)
    sz = indptr[local_rows + 1] - indptr[local_rows]
    pair = np.repeat(np.arange(len(local_rows)), sz)
    ent = np.repeat(indptr[local_rows] - (np.cumsum(sz) - sz), sz) + np.arange(len(pair))
    return pair, ent


def _hash_pairs(a, b, seed: int) -> np.ndarray:
    """Seeded tie-break priority of unordered pairs (splitmix64 of both ids)."""
    lo = np.minimum(a, b).astype(np.uint64)
    hi = np.maximum(a, b).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = lo * np.uint64(0x9E3779B97F4A7C15) ^ (hi + np.uint64(seed) * np.uint64(0xBF58476D1CE4E5B9))
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64)  # 53 bits: exact as float64


def _best_per_group(group, keys_desc) -> np.ndarray:
    """Index of the first element of each group after sorting by group, then
    by ``keys_desc`` (a list of arrays, most significant first) descending."""
    order = np.lexsort(tuple(-k for k in reversed(keys_desc)) + (group,))
    g = group[order]
    first = np.ones(len(g), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    return order[first]


#: defaults: rounds per descent (random starts at n = 256 needed more than
#: 50), and independent copies of the problem run in lockstep (the best of
#: REPLICAS local optima for the collectives of one run; benchmark runs within
#: 2% of the centralised refinement: 34/36 with 8 copies, 28/36 with 1)
MAX_ROUNDS = 100
REPLICAS = 8

#: ancestor ids of replica r are shifted by r * REPLICA_OFFSET (exact in float64)
REPLICA_OFFSET = 1 << 40


def rounds_options(replicas, kicks) -> tuple[int, int]:
    """``replicas`` (>= 1) and ``kicks`` (>= 0) as ints, or ``ValueError``:
    the entry points check them before any rank starts a round."""
    def count(name, value, least, what):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or value < least:
            raise ValueError(f"{name} ({what}) must be an integer >= {least}, not {value!r}")
        return int(value)

    return (count("replicas", replicas, 1, "copies of the problem per round"),
            count("kicks", kicks, 0, "perturb-and-descend restarts"))


def replicate(rows: Rows, labels: Labels, replicas: int) -> tuple[Rows, Labels]:
    """``replicas`` independent copies of one owner's problem: task t of copy
    r is task r * n + t, on a copy of the machine (ancestor ids shifted), so
    no swap, candidate or group crosses copies, while every round serves all
    copies with the same collectives.  The seeded tie-breaks hash task ids,
    so each copy follows its own path to its own local optimum."""
    n, m = rows.n_tasks, len(rows.cols)
    shift = np.arange(replicas, dtype=np.int64)
    tasks = (rows.tasks[None, :] + n * shift[:, None]).ravel()
    indptr = np.concatenate([[0], (rows.indptr[1:][None, :] + m * shift[:, None]).ravel()])
    cols = (rows.cols[None, :] + n * shift[:, None]).ravel()
    out = Rows(tasks, indptr, cols, np.tile(rows.weights, replicas), n * replicas)
    anc = (labels.anc[None] + REPLICA_OFFSET * shift[:, None, None]).reshape(-1, labels.anc.shape[1])
    return out, Labels(np.tile(labels.pe, replicas), anc, np.tile(labels.dist, (replicas, 1)))


class SwapRounds(OwnerProtocol):
    """One owner's part of the protocol (see the module docstring)."""

    def __init__(self, rows: Rows, labels: Labels, exchange, *, seed: int = 0, fanout: int = 8,
                 proposals: int = 8, group_cap: int = 16, group_levels: int = 2,
                 check_cap: int = 256, chunk: int = 1 << 21, replicas: int = REPLICAS):
        self.n_base, self.replicas = rows.n_tasks, max(int(replicas), 1)
        if self.replicas > 1:
            rows, labels = replicate(rows, labels, self.replicas)
        super().__init__(exchange)
        self.replica_of_row = rows.tasks // self.n_base
        self.rows, self.labels = rows, labels
        self.seed, self.fanout, self.proposals, self.chunk = seed, fanout, proposals, chunk
        self.group_cap, self.group_levels, self.check_cap = group_cap, group_levels, check_cap
        self.wide = False  # this round is a check round (see the module docstring)
        self.turn = 0  # rounds done
        self.levels = labels.anc.shape[1]
        self.deadline, self.stopped = Deadline(), False  # set by run()

    def _owner(self, tasks) -> np.ndarray:
        """Owner of (replicated) task ids: a task's copies stay with it."""
        return self.ex.owner(np.asarray(tasks, dtype=np.int64) % self.n_base)

    # ------------------------------------------------------------ gain math
    def contributions(self, nb: Labels) -> np.ndarray:
        """S[u, w] * D(l(u), l(w)) for every entry of the local rows."""
        r = self.rows.row_of_entry
        lab = self.labels
        return self.rows.weights * label_distance(lab.anc[r], lab.dist[r], nb.anc)

    def half_gains(self, local_row, partner, partner_lab: Labels, nb: Labels, contrib) -> np.ndarray:
        """h_u(v) for pairs (local row of u, task v, label of v's PE): what u
        saves by moving to v's PE while v takes u's (the u-v edge keeps its
        length, so it is left out)."""
        rows = self.rows
        cur = np.bincount(rows.row_of_entry, weights=contrib, minlength=len(rows.tasks))
        out = np.empty(len(local_row))
        # chunks of pairs so that pairs x row entries stays bounded
        ends = np.cumsum(np.diff(rows.indptr)[local_row])
        cuts = np.searchsorted(ends, np.arange(self.chunk, ends[-1] if len(ends) else 0, self.chunk))
        start = 0
        for stop in np.unique(np.concatenate([cuts + 1, [len(local_row)]])):
            if stop <= start:
                continue
            sl = slice(start, stop)
            lr = local_row[sl]
            pair, ent = expand_rows(rows.indptr, lr)
            d_new = label_distance(partner_lab.anc[sl][pair], partner_lab.dist[sl][pair], nb.anc[ent])
            new = np.bincount(pair, weights=rows.weights[ent] * d_new, minlength=stop - start)
            out[sl] = cur[lr] - new
            start = stop
        e = rows.entry_of(local_row, partner)
        out -= np.where(e >= 0, contrib[np.maximum(e, 0)], 0.0)
        return out

    # ---------------------------------------------------------------- phases
    def _neighbour_labels(self) -> Labels:
        got = self.neighbour_values(self.rows, self.labels.pack())
        return self._local(lambda: Labels.unpack(got, self.levels))

    def _two_hop(self, nb: Labels) -> tuple[np.ndarray, np.ndarray]:
        """Destinations and records (u, x, label of x) for the fanout
        heaviest neighbours x of each neighbour of u."""
        rows = self.rows
        r = rows.row_of_entry
        top = self._top_entries()
        tcount = np.bincount(r[top], minlength=len(rows.tasks))
        tstart = np.concatenate([[0], np.cumsum(tcount)])[:-1]
        reps = tcount[r]
        dest_e = np.repeat(np.arange(len(r)), reps)
        k = np.arange(len(dest_e)) - np.repeat(np.cumsum(reps) - reps, reps)
        src_e = top[tstart[r[dest_e]] + k]
        keep = rows.cols[src_e] != rows.cols[dest_e]
        dest_e, src_e = dest_e[keep], src_e[keep]
        rec = np.column_stack([rows.cols[dest_e], rows.cols[src_e], nb.pack(src_e)])
        return self._owner(rows.cols[dest_e]), rec

    def _top_entries(self) -> np.ndarray:
        """The ``fanout`` heaviest entries of every local row, grouped by row."""
        rows = self.rows
        r = rows.row_of_entry
        order = np.lexsort((rows.cols, -rows.weights, r))
        pos = np.arange(len(order)) - rows.indptr[r[order]]
        return np.sort(order if self.wide else order[pos < self.fanout])

    def _candidates(self, nb: Labels):
        """Candidate records (u, x, label of x): the 2-hop ones (``_two_hop``)
        and the tasks x whose PEs share the smallest groups (``group_levels``
        of them) around the PE of one of u's heaviest neighbours: the places
        u would like to move to.  A directory per group (spread over the
        owners by group id) collects its members and answers the asks; the
        2-hop records ride along with the registrations and asks (kind 2),
        so the round spends one exchange less."""
        rows, lab, n = self.rows, self.labels, self.rows.n_tasks
        width = 3 + 1 + 2 * self.levels  # group, kind, task, label
        hop2 = {}

        def ask():
            top = self._top_entries()
            asker = np.tile(rows.tasks[rows.row_of_entry[top]], self.group_levels)
            group = np.concatenate([enclosing_group(nb.take(top), up)
                                    for up in range(self.group_levels)])
            pairs = np.unique(np.column_stack([group, asker]), axis=0)
            mine = np.concatenate([enclosing_group(lab, up) for up in range(self.group_levels)])
            reg = np.column_stack([mine, np.zeros(len(mine)), np.tile(rows.tasks, self.group_levels),
                                   np.tile(lab.pack(), (self.group_levels, 1))])
            asks = np.zeros((len(pairs), width))
            asks[:, 0], asks[:, 1], asks[:, 2] = pairs[:, 0], 1.0, pairs[:, 1]
            hop_dest, hop = self._two_hop(nb)
            hop = np.column_stack([hop[:, 0], np.full(len(hop), 2.0), hop[:, 1:]])
            rec = np.vstack([reg, asks])
            return np.concatenate([self._owner(rec[:, 0].astype(np.int64) % n), hop_dest]), \
                np.vstack([rec, hop])

        got = self._send(ask)

        def answer():
            kind = got[:, 1]
            hop2["records"] = np.delete(got[kind == 2], 1, axis=1)
            reg, asks = got[kind == 0], got[kind == 1]
            # members in a seeded order that changes every round, so a large
            # group shows different members to an asker over the rounds
            turn = _hash_pairs(reg[:, 2].astype(np.int64), np.full(len(reg), self.turn), self.seed)
            reg = reg[np.lexsort((reg[:, 2], turn, reg[:, 0]))]
            lo = np.searchsorted(reg[:, 0], asks[:, 0], side="left")
            hi = np.searchsorted(reg[:, 0], asks[:, 0], side="right")
            cnt = np.minimum(hi - lo, self.check_cap if self.wide else self.group_cap)
            a = np.repeat(np.arange(len(asks)), cnt)
            member = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(len(a))
            keep = reg[member, 2] != asks[a, 2]
            a, member = a[keep], member[keep]
            rec = np.column_stack([asks[a, 2], reg[member, 2], reg[member, 3:]])
            return self._owner(rec[:, 0].astype(np.int64)), rec

        near = self._send(answer)
        return hop2.get("records"), near

    def round(self, gain_floor: float, wide: bool = False, kick: float = 0.0) -> tuple[int, float]:
        """Run one round (a check round when ``wide``; a kick when ``kick`` >
        0: that fraction of the tasks, drawn by seed and turn, each proposes
        to one random candidate whatever the gain, pairs are matched by the
        seeded hash alone); returns (tasks swapped here, gain counted here,
        negative for a kick)."""
        rows, lab = self.rows, self.labels
        self.turn += 1
        self.wide = wide
        nb = self._neighbour_labels()
        hop2, near = self._candidates(nb)
        state = {}

        def proposals():
            contrib = self.contributions(nb)
            r = rows.row_of_entry
            # candidates: neighbours (from their entries) and 2-hop tasks
            more = np.vstack([hop2, near])
            cand_task = np.concatenate([rows.tasks[r], more[:, 0].astype(np.int64)])
            cand_part = np.concatenate([rows.cols, more[:, 1].astype(np.int64)])
            cand_lab = np.concatenate([nb.pack(), more[:, 2:]])
            keep = cand_task != cand_part
            cand_task, cand_part, cand_lab = cand_task[keep], cand_part[keep], cand_lab[keep]
            o = np.lexsort((cand_part, cand_task))
            cand_task, cand_part, cand_lab = cand_task[o], cand_part[o], cand_lab[o]
            first = np.ones(len(o), dtype=bool)
            first[1:] = (cand_task[1:] != cand_task[:-1]) | (cand_part[1:] != cand_part[:-1])
            cand_task, cand_part = cand_task[first], cand_part[first]
            plab = Labels.unpack(cand_lab[first], self.levels)
            lr = rows.local_index(cand_task)
            h = self.half_gains(lr, cand_part, plab, nb, contrib)
            pos = h > 0
            if kick:
                drawn = _hash_pairs(rows.tasks[lr], np.full(len(lr), self.turn), self.seed + 0x7F4A)
                pos = drawn < kick * 2.0 ** 53
            lr, cand_part, h = lr[pos], cand_part[pos], h[pos]
            # equal half gains are common (every PE of a far group looks the
            # same to u): which of them get the proposals changes every round
            tb = _hash_pairs(rows.tasks[lr], cand_part, self.seed + 0x9E37 * self.turn)
            o = np.lexsort((cand_part, -tb, -h, lr)) if not kick else np.lexsort((cand_part, -tb, lr))
            rank_in_row = np.arange(len(o)) - np.searchsorted(lr[o], lr[o])
            sel = o if self.wide else o[rank_in_row < (1 if kick else self.proposals)]
            state.update(contrib=contrib)
            rec = np.column_stack([cand_part[sel], rows.tasks[lr[sel]], h[sel], lab.pack(lr[sel])])
            return self._owner(cand_part[sel]), rec

        props = self._send(proposals)

        def replies():
            v = props[:, 0].astype(np.int64)
            u = props[:, 1].astype(np.int64)
            ulab = Labels.unpack(props[:, 3:], self.levels)
            lr = rows.local_index(v)
            g = props[:, 2] + self.half_gains(lr, u, ulab, nb, state["contrib"])
            state.update(in_u=u, in_v=v, in_g=g)
            return self._owner(u), np.column_stack([u, v, g])

        reps = self._send(replies)

        def preferences():
            # incident pairs: replies to our proposals and proposals we received
            me = np.concatenate([reps[:, 0].astype(np.int64), state["in_v"]])
            other = np.concatenate([reps[:, 1].astype(np.int64), state["in_u"]])
            g = np.concatenate([reps[:, 2], state["in_g"]])
            ok = np.ones(len(g), dtype=bool) if kick else g > gain_floor
            me, other, g = me[ok], other[ok], g[ok]
            tb = _hash_pairs(me, other, self.seed + (0x51ED * self.turn if kick else 0))
            # priority of a pair: its gain, or nothing but the hash in a kick
            pri = np.zeros(len(g)) if kick else g
            best = _best_per_group(me, [pri, tb, -other.astype(np.float64)])
            me, other, g, tb, pri = me[best], other[best], g[best], tb[best], pri[best]
            lr = rows.local_index(me)
            state.update(pref_me=me, pref_other=other, pref_g=g, pref_tb=tb, pref_pri=pri)
            return self._owner(other), np.column_stack([other, me, lab.pack(lr)])

        prefs = self._send(preferences)

        def matches():
            # matched: the task that preferred us is the one we prefer
            to = prefs[:, 0].astype(np.int64)
            frm = prefs[:, 1].astype(np.int64)
            key_have = state["pref_me"] * rows.n_tasks + state["pref_other"]
            key_got = to * rows.n_tasks + frm
            hit = np.isin(key_got, key_have)
            me, partner = to[hit], frm[hit]
            o = np.argsort(me)
            me, partner = me[o], partner[o]
            plab = Labels.unpack(prefs[hit][o, 2:], self.levels)
            idx = np.searchsorted(state["pref_me"], me)
            g, tb, pri = state["pref_g"][idx], state["pref_tb"][idx], state["pref_pri"][idx]
            state.update(m_me=me, m_partner=partner, m_lab=plab, m_g=g, m_tb=tb, m_pri=pri)
            src, ent = expand_rows(rows.indptr, rows.local_index(me))
            rec = np.column_stack([rows.cols[ent], me[src], partner[src], pri[src], tb[src]])
            return self._owner(rows.cols[ent]), rec

        pri = self._send(matches)

        def verdicts():
            me, partner, g, tb = state["m_me"], state["m_partner"], state["m_pri"], state["m_tb"]
            if len(me) == 0:
                state.update(m_ok=np.zeros(0, dtype=bool))
                return np.zeros(0, dtype=np.int64), np.zeros((0, 3))
            w = pri[:, 0].astype(np.int64)
            u = pri[:, 1].astype(np.int64)
            at = np.searchsorted(me, w)
            at_c = np.minimum(at, max(len(me) - 1, 0))
            mine = (at < len(me)) & (me[at_c] == w)
            # a neighbour in another matched pair with a higher priority blocks us
            other_pair = mine & (u != partner[at_c])
            higher = (pri[:, 3] > g[at_c]) | ((pri[:, 3] == g[at_c]) & (pri[:, 4] > tb[at_c])) | \
                     ((pri[:, 3] == g[at_c]) & (pri[:, 4] == tb[at_c]) &
                      (np.minimum(u, pri[:, 2]) > np.minimum(w, partner[at_c])))
            blocked = np.zeros(len(me), dtype=bool)
            blocked[at_c[other_pair & higher]] = True
            state.update(m_ok=~blocked)
            return self._owner(partner), np.column_stack([partner, me, (~blocked).astype(np.float64)])

        ver = self._send(verdicts)

        def commit():
            me, n = state["m_me"], rows.n_tasks
            confirmed = ver[ver[:, 2] > 0]
            key_ok = confirmed[:, 0].astype(np.int64) * n + confirmed[:, 1].astype(np.int64)
            both = state["m_ok"] & np.isin(me * n + state["m_partner"], key_ok)
            lr = rows.local_index(me[both])
            new = state["m_lab"].take(both)
            lab.pe[lr], lab.anc[lr], lab.dist[lr] = new.pe, new.anc, new.dist
            gains = np.bincount(self.replica_of_row[lr], weights=state["m_g"][both],
                                minlength=self.replicas) / 2.0
            return int(both.sum()), gains

        out = self._local(commit)
        return out if out is not None else (0, np.zeros(self.replicas))

    def cost(self) -> np.ndarray:
        """This owner's share of J (half of its rows' S x D), per replica."""
        nb = self._neighbour_labels()
        out = self._local(lambda: np.bincount(self.replica_of_row[self.rows.row_of_entry],
                                              weights=self.contributions(nb),
                                              minlength=self.replicas) / 2.0)
        return np.zeros(self.replicas) if out is None else out

    def run(self, *, max_rounds: int = MAX_ROUNDS, min_improvement: float = 1e-4, kicks: int = 0,
            kick_fraction: float = 0.1, deadline: Deadline | None = None) -> RoundsResult:
        """Rounds until a check round gains too little (a swap local optimum
        in every replica), then ``kicks`` times: a kick round (random swaps
        of about ``kick_fraction`` of the tasks), rounds again, and each
        replica keeps the result when its J fell, else restores its labels
        (iterated local search).  Returns the replica with the lowest J (its
        labels for this owner's tasks): never worse than the start.  Owner
        0's ``deadline`` (the others' is ignored) rides on every round's
        allreduce, so all owners stop after the same round."""
        self.deadline = Deadline.of(deadline)
        self.stopped = False
        got = self.ex.allreduce([*self.cost(), self.error is not None])
        self._raise_if(got[-1])
        j0 = got[:-1]
        self.history = []
        best = self._descend(j0.copy(), max_rounds, min_improvement)
        saved = self._saved()
        for _ in range(kicks):
            if best.sum() <= 0 or self.stopped:
                break
            _swaps, gains = self._collective_round(1e-12 * best.sum(), kick=kick_fraction)
            j = self._descend(best - gains, max_rounds, min_improvement)
            better = j < best * (1 - 1e-9)  # the same on every owner: allreduce results
            keep = better[self.replica_of_row]
            for new, old in zip(self._saved(), saved):
                old[keep] = new[keep]
            self.labels.pe[:], self.labels.anc[:], self.labels.dist[:] = saved
            best = np.where(better, j, best)
        chosen = int(np.argmin(best))
        mine = self.replica_of_row == chosen
        labels = Labels(self.labels.pe[mine], self.labels.anc[mine] - chosen * REPLICA_OFFSET,
                        self.labels.dist[mine])
        swaps = sum(h["swaps"] for h in self.history)
        return RoundsResult(labels, float(j0[0]), float(best[chosen]), len(self.history), swaps,
                            self.history, self.stopped)

    def _saved(self):
        return self.labels.pe.copy(), self.labels.anc.copy(), self.labels.dist.copy()

    def _collective_round(self, floor: float, wide: bool = False, kick: float = 0.0):
        """One round on every owner; returns the swaps (all replicas) and the
        gain of each replica."""
        n_swapped, gains = self.round(floor, wide=wide, kick=kick)
        expired = self.ex.rank == 0 and self.deadline.expired()
        got = self.ex.allreduce([n_swapped, *gains, expired, self.error is not None])
        self._raise_if(got[-1])
        swaps, gains = int(round(got[0])) // 2, got[1:-2]
        self.stopped = self.stopped or bool(got[-2])
        self.history.append({"round": len(self.history) + 1, "swaps": swaps,
                             "gain": float(gains.sum()), "check": wide, "kick": bool(kick)})
        return swaps, gains

    def _descend(self, j: np.ndarray, max_rounds: int, min_improvement: float) -> np.ndarray:
        """Improving rounds from J = ``j`` per replica (see the module
        docstring); returns J per replica."""
        floor = 1e-12 * j.max()
        check = False
        for _ in range(max_rounds):
            if j.sum() <= 0 or self.stopped:
                break
            swaps, gains = self._collective_round(floor, wide=check)
            j = j - gains
            self.history[-1]["J"] = float(j.min())
            small = swaps == 0 or gains.sum() < min_improvement * j.sum()
            if small and check:
                break
            check = small
        return j


def refine_rounds(graph: CommGraph, topology: Topology, pe_of_task, *, seed: int = 0,
                  fanout: int = 8, proposals: int = 8, max_rounds: int = MAX_ROUNDS, group_cap: int = 16,
                  min_improvement: float = 1e-4, kicks: int = 0, kick_fraction: float = 0.1,
                  replicas: int = REPLICAS, deadline: Deadline | None = None) -> tuple[np.ndarray, RoundsResult]:
    """The distributed swap refinement run in one process (same decisions as
    under MPI with any number of ranks).  One-to-one mappings only."""
    replicas, kicks = rounds_options(replicas, kicks)
    pe = np.asarray(pe_of_task, dtype=np.int64)
    if len(np.unique(pe)) != len(pe):
        raise ValueError("swap refinement needs a one-to-one mapping")
    ex = LocalExchange(graph.n)
    tasks = np.arange(graph.n, dtype=np.int64)
    rows = symmetric_rows(tasks, *rows_of_graph(graph, tasks), ex)
    sr = SwapRounds(rows, Labels.of(topology, pe), ex, seed=seed, fanout=fanout, proposals=proposals,
                    group_cap=group_cap, replicas=replicas)
    res = sr.run(max_rounds=max_rounds, min_improvement=min_improvement, kicks=kicks,
                 kick_fraction=kick_fraction, deadline=deadline)
    return res.labels.pe.copy(), res
