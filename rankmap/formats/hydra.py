"""MPICH hydra: how a placement of ranks on hosts reaches hydra whole, and
what MPICH's ranks then believe about it.

hydra starts one proxy per line of a machinefile: a host on several lines
gets several proxies, and MPICH takes each for a node of its own (ranks of
one host talk through the network module, node-aware collectives split).
A placement whose hosts each hold one run of consecutive ranks is a
machinefile of one ``host:count`` line per host.  Any other placement goes
as a machinefile naming each host once plus ``-rankmap`` (MPICH 4.1 and
later): the host line of every rank (``rankmap_argument``).

hydra hands the placement on to the ranks as ``PMI_process_mapping``, a
string it encodes itself (``MPL_rankmap_array_to_str``, the same in MPICH
4.1 through 5.0), from which MPICH builds its node map: shared memory,
``MPI_COMM_TYPE_SHARED``, node-aware collectives.  Two defects of that
encoding decide whether a placement can be launched by hydra at all:

- a string over 1024 bytes (``PMI_MAXVALLEN``) is dropped and hydra's
  ``mpiexec`` then crashes (a segmentation fault before any rank starts);
- repeated patterns are compressed into ``[...]xN`` groups, and the
  ranks read back a wrong map when a group is followed by more than one
  further group's worth of placement (a second group read again), when the
  rank after a group continues the host before it (that rank is lost), or
  when a block after a group starts at the group's count minus one (the
  encoder compares a field it never set).  A 2-D grid cut into blocks of
  at least three block rows is such a placement.

``hydra_node_map`` models the string and the map MPICH reads back from
it, ``hydra_form`` picks the machinefile's form, ``hydra_note`` says what
a user of the hydra line must know, and ``mend_for_hydra`` swaps a few
ranks, where that costs little J, so that hydra keeps every host whole.
"""

from __future__ import annotations

import numpy as np

#: the longest ``PMI_process_mapping`` hydra sends (``PMI_MAXVALLEN``); longer: mpiexec crashes
PMI_MAXVALLEN = 1024
#: the longest ``-rankmap`` argument written: one command-line argument (Linux MAX_ARG_STRLEN
#: is 128 KiB); hydra's own limit above is far below it, so this only guards the file
RANKMAP_ARG_MAX = 1 << 16
#: the comment that opens a machinefile whose ranks ``-rankmap`` places
HYDRA_RANKMAP_COMMENT = ('# hydra machinefile: each host once; the hosts of the ranks come from '
                         '-rankmap "$(cat THIS_FILE.rankmap)"')
#: J ``mend_for_hydra`` may add (a fraction) to keep hosts whole under hydra ...
MEND_J_SLACK = 0.01
#: ... in at most this many swaps (each moves two ranks between hosts), each of a rank this
#: close to where MPICH first misreads or of one of the ranks that talk least, ...
MAX_MEND_SWAPS = 64
MEND_WINDOW = 4
MEND_QUIET = 8
#: ... in jobs of at most this many ranks (a swap's search is O(ranks x its candidates))
MEND_MAX_RANKS = 4096


def host_ids(pe_of_task, topology) -> tuple[list[str], np.ndarray]:
    """The hosts in order of their first rank, and each rank's index among them."""
    names = topology.hosts()
    code = {h: i for i, h in enumerate(names)}
    pe_code = np.fromiter((code[h] for h in topology.pe_host.tolist()), dtype=np.int64,
                          count=topology.n_pes)
    ranks = pe_code[np.asarray(pe_of_task, dtype=np.int64)]
    used, first = np.unique(ranks, return_index=True)
    order = used[np.argsort(first, kind="stable")]
    renumber = np.empty(len(names), dtype=np.int64)
    renumber[order] = np.arange(order.size)
    return [names[h] for h in order.tolist()], renumber[ranks]


def line_runs(ids) -> tuple[np.ndarray, np.ndarray]:
    """(host, ranks) of each run of consecutive ranks on one host."""
    ids = np.asarray(ids, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if ids.size else ids
    return ids[starts], np.diff(np.r_[starts, ids.size])


def contiguous(ids) -> bool:
    """Whether every host holds one run of consecutive ranks."""
    hosts, _ = line_runs(ids)
    return np.unique(hosts).size == hosts.size


def runs(ids) -> list[tuple[int, int, int]]:
    """(first host, hosts, ranks per host) of the runs of consecutive ranks
    on one host, runs of equal length on consecutive hosts joined (hydra's
    block syntax)."""
    out: list[list[int]] = []
    for host, count in zip(*(a.tolist() for a in line_runs(ids))):
        if out and out[-1][2] == count and out[-1][0] + out[-1][1] == host:
            out[-1][1] += 1
        else:
            out.append([host, 1, count])
    return [tuple(r) for r in out]


def hydra_form(pe_of_task, topology) -> tuple[str, list[str], np.ndarray]:
    """How the hydra machinefile places ``pe_of_task`` (with its hosts in
    order and each rank's host number): ``"machinefile"`` (each host one run
    of ranks: one line per host), ``"rankmap"`` (each host once, and
    ``-rankmap``: MPICH reads it back right) or ``"split"`` (a line per run
    of ranks: hydra starts a proxy per line and MPICH takes each line for a
    node)."""
    hosts, ids = host_ids(pe_of_task, topology)
    if contiguous(ids):
        return "machinefile", hosts, ids
    if node_map_survives(ids) and len(rankmap_argument(ids)) <= RANKMAP_ARG_MAX:
        return "rankmap", hosts, ids
    return "split", hosts, ids


def hydra_note(pe_of_task, topology) -> str | None:
    """What a user of the hydra line must know about ``pe_of_task``: None
    where hydra starts it with every host whole, else why not."""
    form, hosts, ids = hydra_form(pe_of_task, topology)
    run_hosts, counts = line_runs(ids)
    lines = ids if form == "rankmap" else np.repeat(np.arange(counts.size), counts)  # hydra's node of each rank
    length = hydra_node_map(lines)[0]
    if length > PMI_MAXVALLEN:
        return (f"hydra cannot start this placement: MPICH's process-mapping string would take "
                f"{length} bytes, more than the {PMI_MAXVALLEN} hydra passes on (its mpiexec "
                "crashes); use the Slurm or Open MPI line, or rankmap.reorder_comm inside the program")
    if form == "split":
        split = int(np.count_nonzero(np.bincount(run_hosts) > 1))
        return (f"hydra: {split} of {len(hosts)} hosts take several machinefile lines (MPICH "
                "would read a -rankmap of this placement back wrong, see docs/launchers.md): "
                "hydra starts a proxy per line and MPICH takes each line for a node, so ranks "
                "of one host on different lines do not share memory; the Slurm and Open MPI "
                "lines keep every host whole")
    return None


def rankmap_argument(ids) -> str:
    """hydra's ``-rankmap`` for host line ``ids[r]`` of rank r: a run of
    ``c`` ranks on one host is ``(id,1,c)``, ``k`` such runs on hosts
    ``id .. id+k-1`` are ``(id,k,c)``, a lone rank is its host's number."""
    return ",".join(str(start) if nodes == count == 1 else f"({start},{nodes},{count})"
                    for start, nodes, count in runs(ids))


def parse_rankmap(text: str, n: int) -> np.ndarray:
    """The host line of each of ``n`` ranks from a ``-rankmap`` argument
    (numbers and ``(id,nodes,count)`` blocks; ValueError if malformed)."""
    body = text.strip()
    if body.startswith("(vector,") and body.endswith(")"):
        body = body[len("(vector,"):-1]
    out: list[int] = []
    i = 0
    while i < len(body):
        if body[i] == "(":
            close = body.find(")", i)
            fields = body[i + 1:close].split(",") if close > 0 else []
            if len(fields) != 3 or not all(f.strip().isdigit() for f in fields):
                raise ValueError(f"expected (id,nodes,count) at character {i + 1}")
            first, nodes, count = (int(f) for f in fields)
            if len(out) + nodes * count > n:
                raise ValueError(f"places more than the job's {n} ranks")
            out.extend(first + k for k in range(nodes) for _ in range(count))
            i = close + 1
        else:
            end = body.find(",", i)
            end = len(body) if end < 0 else end
            token = body[i:end].strip()
            if not token.isdigit():
                raise ValueError(f"expected a host number at character {i + 1}, got {token[:20]!r}")
            out.append(int(token))
            if len(out) > n:
                raise ValueError(f"places more than the job's {n} ranks")
            i = end
        if i < len(body):
            if body[i] != ",":
                raise ValueError(f"expected ',' at character {i + 1}")
            i += 1
    if len(out) != n:
        raise ValueError(f"places {len(out)} ranks for a job of {n}")
    return np.asarray(out, dtype=np.int64)


# ------------------------------------------------- what MPICH reads back
def hydra_node_map(ids) -> tuple[int, np.ndarray, bool]:
    """What hydra and MPICH make of host lines ``ids``: the length of
    ``PMI_process_mapping``, the node of each rank as the ranks read it
    back (-1 past what can be read), and whether the encoding stayed where
    its result is defined."""
    blocks, defined = _encode(np.asarray(ids, dtype=np.int64).tolist())
    length = len("(vector)") + sum(_block_length(b) for b in blocks)
    return length, _decode(blocks, len(ids)), defined


def node_map_survives(ids) -> bool:
    """Whether hydra launches host lines ``ids`` and MPICH's ranks then
    know every rank's host: the mapping string fits ``PMI_MAXVALLEN`` and
    reads back as ``ids`` (up to the nodes' numbers)."""
    ids = np.asarray(ids, dtype=np.int64)
    length, nodes, defined = hydra_node_map(ids)
    return length <= PMI_MAXVALLEN and defined and _first_wrong(ids, nodes) == ids.size


def _first_wrong(ids: np.ndarray, nodes: np.ndarray) -> int:
    """The first rank whose node, as read back, disagrees with the ranks
    before it (``ids.size`` when none does)."""
    seen: dict[int, int] = {}
    back: dict[int, int] = {}
    for r, (a, b) in enumerate(zip(ids.tolist(), nodes.tolist())):
        if b < 0 or seen.setdefault(a, b) != b or back.setdefault(b, a) != a:
            return r
    return ids.size


def _encode(ids: list[int]) -> tuple[list[list], bool]:
    """The blocks hydra writes for ``ids``, as MPICH's encoder makes them:
    ``["run", first host, hosts, ranks each, opens a group, first rank]``
    and ``["times", k]`` closing a group repeated k times, the rank lost
    after a group included; False with the blocks so far where the encoder
    would next compare a field it never set."""
    sz = len(ids)
    blocks: list[list] = []
    last_start: dict[int, int] = {}  # host -> its last block's index since the last group
    skip_to = -1
    written, counted = 0, 0  # characters of the first ``counted`` blocks, which later joins leave alone
    for rank in range(sz + 1):
        if rank < skip_to:
            continue
        if written > PMI_MAXVALLEN:  # too long for hydra whatever follows: no need to go on
            return blocks, True
        if 0 < rank < sz and ids[rank] == ids[rank - 1]:
            if blocks[-1][0] == "run":
                blocks[-1][3] += 1
            continue  # after a group: the rank is lost
        if len(blocks) > 1:  # equal runs on consecutive hosts join
            p0, p1 = blocks[-2], blocks[-1]
            if p0[0] == "times" and p1[0] == "run" and p0[1] - 1 == p1[1]:
                return blocks, False
            if p0[0] == p1[0] == "run" and p0[3] == p1[3] and p0[1] + p0[2] == p1[1]:
                p0[2] += 1
                last_start.pop(p1[1], None)
                blocks.pop()
        if rank == sz:
            break
        mark = last_start.get(ids[rank])
        if mark is not None:
            first = blocks[mark][5]
            span = rank - first
            times, cur = 1, rank
            while cur + span <= sz and ids[first:first + span] == ids[cur:cur + span]:
                times, cur = times + 1, cur + span
            if times > 1:
                blocks[mark][4] = True
                blocks.append(["times", times])
                last_start.clear()
                skip_to = first + span * times
                continue
        blocks.append(["run", ids[rank], 1, 1, False, rank])
        last_start[ids[rank]] = len(blocks) - 1
        while counted < len(blocks) - 2:  # a join takes only the last two blocks
            written += _block_length(blocks[counted])
            counted += 1
    return blocks, True


def _block_length(block) -> int:
    """Characters of one block in the mapping string."""
    if block[0] == "times":
        return len(f"]x{block[1]}")
    _, first, nodes, count, opens, _ = block
    return 1 + opens + len(str(first) if nodes == count == 1 else f"({first},{nodes},{count})")


def _decode(blocks, sz: int) -> np.ndarray:
    """The node map MPICH's reader makes of ``blocks`` for ``sz`` ranks: a
    group repeats from its opening; the reader does not reset its count of
    repeats after a group, so every later group is read once more than
    written."""
    out: list[int] = []
    group_start = 0
    left = -1  # repeats still to read, as the reader counts them
    i = 0
    while i < len(blocks) and len(out) < sz:
        b = blocks[i]
        if b[0] == "times":
            if left == -1:
                left = b[1]
            left -= 1
            i = i + 1 if left == 0 else group_start
            continue
        if b[4]:
            group_start = i
        out.extend(b[1] + k for k in range(b[2]) for _ in range(b[3]))
        i += 1
    out = out[:sz]
    return np.asarray(out + [-1] * (sz - len(out)), dtype=np.int64)


# --------------------------------------------------- the nearest mapping
def mend_for_hydra(graph, topology, pe_of_task) -> tuple[np.ndarray, int, float]:
    """``pe_of_task`` after the cheapest swaps of ranks between hosts that
    let hydra start it with every host whole and MPICH knowing each rank's
    host (``hydra_form`` "rankmap"), with the number of swaps and J's rise
    (a fraction); unchanged (0 swaps) where hydra keeps the hosts whole
    already, or where that would take more than ``MEND_J_SLACK`` of J or
    ``MAX_MEND_SWAPS`` swaps, or the job has more than ``MEND_MAX_RANKS``
    ranks (the machinefile then splits hosts)."""
    from ..cost import mapping_cost

    given = np.asarray(pe_of_task, dtype=np.int64)
    if given.size > MEND_MAX_RANKS or hydra_form(given, topology)[0] != "split":
        return given, 0, 0.0
    budget = MEND_J_SLACK * mapping_cost(graph, topology, given)
    pe, spent = given.copy(), 0.0
    for swaps in range(1, MAX_MEND_SWAPS + 1):
        _, ids = host_ids(pe, topology)
        length, nodes, _ = hydra_node_map(ids)
        if length > PMI_MAXVALLEN:
            break
        step = _mend(graph, topology, pe, ids, _first_wrong(ids, nodes), budget - spent)
        if step is None:
            break
        pe, delta = step
        spent += delta
        if hydra_form(pe, topology)[0] != "split":
            return pe, swaps, spent / budget * MEND_J_SLACK if budget else 0.0
    return given, 0, 0.0


def _mend(graph, topology, pe, ids, wrong: int, budget: float):
    """The cheapest swap, by J and costing at most ``budget``, of a rank
    next to ``wrong`` (the first rank read back wrongly) or of one of the
    ranks that talk least with a rank of another host, after which the
    read-back goes wrong later or not at all: (the mapping, J's change),
    None if no swap does."""
    sym = graph.symmetric
    near = range(max(wrong - MEND_WINDOW, 0), min(wrong + MEND_WINDOW + 1, ids.size))
    quiet = np.argsort(graph.volume(), kind="stable")[:MEND_QUIET].tolist()
    best = None
    for a in sorted(set(near) | set(quiet)):
        others = np.flatnonzero(ids != ids[a])
        deltas = _swap_deltas(sym.indptr, sym.indices, sym.data, topology, pe, a, others)
        for k in np.argsort(deltas, kind="stable").tolist():
            if deltas[k] > budget or (best is not None and deltas[k] >= best[0]):
                break
            b = int(others[k])
            trial = ids.copy()
            trial[a], trial[b] = ids[b], ids[a]
            length, nodes, defined = hydra_node_map(trial)
            if length <= PMI_MAXVALLEN and (_first_wrong(trial, nodes) > wrong
                                            or defined and _first_wrong(trial, nodes) == trial.size):
                best = (deltas[k], a, b)
                break
    if best is None:
        return None
    delta, a, b = best
    out = pe.copy()
    out[a], out[b] = pe[b], pe[a]
    return out, float(delta)


def _swap_deltas(indptr, indices, w, topology, pe, a: int, others: np.ndarray) -> np.ndarray:
    """J's change when task ``a`` swaps PEs with each task of ``others``
    (``indptr, indices, w``: the graph plus its transpose, CSR): ``a``'s
    pairs priced from each other PE, and each other task's pairs from
    ``a``'s PE, the pair (a, b) itself unchanged."""
    pa = pe[a]
    na, wa = indices[indptr[a]:indptr[a + 1]], w[indptr[a]:indptr[a + 1]]
    pb = pe[others]
    # a moves to each b's PE: its pairs (b itself counted here and taken out below)
    d_a = np.zeros(pb.size)
    if na.size:
        there = topology.distance(np.repeat(pb, na.size), np.tile(pe[na], pb.size)).reshape(pb.size, na.size)
        d_a = (wa * (there - topology.distance(np.full(na.size, pa), pe[na]))).sum(axis=1)
    # each b moves to a's PE
    starts, ends = indptr[others], indptr[others + 1]
    counts = ends - starts
    flat = np.concatenate([np.arange(s0, e0) for s0, e0 in zip(starts.tolist(), ends.tolist())]) \
        if others.size else np.zeros(0, dtype=np.int64)
    nb, wb = indices[flat], w[flat]
    owner = np.repeat(np.arange(others.size), counts)
    moved = wb * (topology.distance(np.full(nb.size, pa), pe[nb]) - topology.distance(pb[owner], pe[nb]))
    d_b = np.bincount(owner, weights=moved, minlength=others.size)
    # the pair (a, b): counted in both as if the other stayed; it keeps its distance
    w_ab = np.zeros(others.size)
    where = {int(v): k for k, v in enumerate(na.tolist())}
    for k, b in enumerate(others.tolist()):
        if b in where:
            wk = wa[where[b]]
            w_ab[k] = wk * (topology.distance(pb[k], pb[k]) - topology.distance(pa, pb[k])) \
                + wk * (topology.distance(pa, pa) - topology.distance(pb[k], pa))
    return d_a + d_b - w_ab
