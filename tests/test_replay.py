"""The replay of an event log on the machine's links: hand-timed programs
on 50mbit node links, collectives, truncated logs, the sweep whose orders the
link time cannot tell apart, and the max-min fair rates themselves."""

import numpy as np
import pytest

from rankmap.cost import all_link_loads
from rankmap.deadline import Deadline
from rankmap.replay import Replay, replay_time
from rankmap._kernels import fair_rates
from rankmap.topology import MeshTopology, Topology, TreeNode
from rankmap.topology.bandwidth import link_bandwidths
from rankmap.topology.hierarchy import hierarchy_topology
from rankmap.trace import EVENT_COLL, EVENT_CSEND, EVENT_RECV, EVENT_SEND, EVENT_WAIT, EventLog

C = 50e6 / 8  # a 50mbit node link, bytes/s
S = 1 << 20


def log(*ranks, comms=()) -> EventLog:
    """The log of ranks given as lists of (op, peer, bytes)."""
    ev = [e for r in ranks for e in r]
    return EventLog.from_members(np.cumsum([0] + [len(r) for r in ranks]), [e[0] for e in ev], [e[1] for e in ev],
                                 [e[2] for e in ev], comms, np.zeros(len(ranks), dtype=bool))


def send(peer, nbytes=S):
    return (EVENT_SEND, peer, nbytes)


def recv(peer, nbytes=S):
    return (EVENT_RECV, peer, nbytes)


def wait(event):
    return (EVENT_WAIT, event, 0)


def cluster(arities=(4, 4), distances=(1, 100), rate=C, latency=0.0):
    """Nodes of ``arities[0]`` PEs whose links into the switch carry
    ``rate``; a message between nodes takes ``latency`` more, inside a node
    none (hand-timed: the bytes alone unless a test gives one)."""
    t = hierarchy_topology(list(arities), list(distances))
    t.node_uplink = np.where(t.parent == 0, rate, np.nan)
    t.node_latency = np.where(t.node_depth == 0, latency, np.where(t.node_depth < t.max_depth, 0.0, np.nan))
    return t


def test_one_message_over_a_node_link():
    r = replay_time(log([send(1), wait(0)], [recv(0), wait(0)]), [0, 4], cluster())
    assert r == Replay(pytest.approx(S / C), 4, 4, 0)


def test_flows_share_a_node_uplink_but_not_separate_nodes():
    shared = log([send(2), wait(0)], [send(3), wait(0)], [recv(0), wait(0)], [recv(1), wait(0)])
    assert replay_time(shared, [0, 1, 4, 8], cluster()).seconds == pytest.approx(2 * S / C)
    assert replay_time(shared, [0, 4, 8, 12], cluster()).seconds == pytest.approx(S / C)


def test_a_forwarded_message_takes_the_sum():
    chain = log([send(1, S), wait(0)], [recv(0, S), wait(0), send(2, 3 * S), wait(2)], [recv(1, 3 * S), wait(0)])
    assert replay_time(chain, [0, 4, 8], cluster()).seconds == pytest.approx(4 * S / C)


def test_each_message_lands_its_levels_latency_after_its_bytes():
    alpha = 80e-6
    pingpong = log([send(1, 0), wait(0), recv(1, 0), wait(2)], [recv(0, 0), wait(0), send(0, 0), wait(2)])
    across, inside = [0, 4], [0, 1]
    assert replay_time(pingpong, across, cluster(latency=alpha)).seconds == pytest.approx(2 * alpha)
    assert replay_time(pingpong, inside, cluster(latency=alpha)).seconds == pytest.approx(0.0)
    # bytes and latency add up along a chain; a thousand small messages pay a thousand latencies
    chain = log([send(1, S), wait(0)], [recv(0, S), wait(0), send(2, S), wait(2)], [recv(1, S), wait(0)])
    assert replay_time(chain, [0, 4, 8], cluster(latency=alpha)).seconds == pytest.approx(2 * (S / C + alpha))
    many = log(*[[e if e[0] != EVENT_WAIT else wait(i - 1) for i, e in enumerate(r)]
                 for r in ([send(1, 8), wait(0)] * 1000, [recv(0, 8), wait(0)] * 1000)])
    assert replay_time(many, across, cluster(latency=alpha)).seconds == pytest.approx(1000 * (8 / C + alpha))
    # machines without bandwidths replay in relative units: no latency
    relative = hierarchy_topology([4, 4], [1, 100])
    assert replay_time(pingpong, across, relative).seconds == 0.0


def test_same_node_messages_cross_the_links_inside_the_node():
    one = log([send(1), wait(0)], [recv(0), wait(0)])
    assert replay_time(one, [0, 1], cluster(distances=(0, 100))) == Replay(0.0, 4, 4, 0)
    # inside the node: 100 times the node link's bandwidth (distance 1 against 100)
    assert replay_time(one, [0, 1], cluster()).seconds == pytest.approx(S / (100 * C))
    assert replay_time(one, [0, 0], cluster()).seconds == 0.0  # one PE


def test_a_message_takes_its_slowest_link_on_any_tree():
    """One message's time is its link time: the paths follow ``all_link_loads``' links."""
    def pes(k):
        return [TreeNode("pe") for _ in range(k)]
    racked = [TreeNode("node", 1, pes(2), uplink=2e6), TreeNode("node", 3, pes(3))]
    t = Topology(TreeNode("switch", 1000, [
        TreeNode("node", 10, [TreeNode("socket", 1, pes(2)), TreeNode("socket", 1, pes(2), uplink=3e8)], uplink=1e6),
        TreeNode("rack", 100, racked, uplink=5e5), TreeNode("pe")]))
    t.node_latency = np.zeros(t.n_nodes)  # the bytes alone
    inverse = link_bandwidths(t).inverse
    for p in range(t.n_pes):
        for q in range(t.n_pes):
            expect = (all_link_loads(t, np.array([p]), np.array([q]), np.array([float(S)])) * inverse).max()
            got = replay_time(log([send(1), wait(0)], [recv(0), wait(0)]), [p, q], t).seconds
            assert got == pytest.approx(expect, rel=1e-12, abs=0), (p, q)


def test_the_kth_send_of_a_pair_meets_its_kth_receive():
    # the small message (sent first) arrives at 2S/C, sharing the link; rank 1 forwards it
    # meanwhile (S/C), and the large one ends at 5S/C: 6S/C had the receives met the other way
    prog = log([send(1, S), send(1, 4 * S), wait(0), wait(1)],
               [recv(0, S), recv(0, 4 * S), wait(0), send(2), wait(3), wait(1)],
               [recv(1), wait(0)])
    assert replay_time(prog, [0, 4, 8], cluster()).seconds == pytest.approx(5 * S / C)


def test_a_collective_waits_for_its_last_member():
    # rank 2 reaches the collective at S/C (its receive); then the collective's flow 0 -> 1
    # (S/C); then rank 1 sends to rank 3 (S/C)
    prog = log([(EVENT_COLL, 0, 0), (EVENT_CSEND, 1, S)],
               [(EVENT_COLL, 0, 0), send(3), wait(1)],
               [recv(3), wait(0), (EVENT_COLL, 0, 0)],
               [send(2), wait(0), recv(1), wait(2)], comms=[[0, 1, 2]])
    r = replay_time(prog, [0, 4, 8, 12], cluster())
    assert r == Replay(pytest.approx(3 * S / C), 12, 12, 0)
    # a collective without flows releases its members when the last arrives
    bare = log([(EVENT_COLL, 0, 0)], [recv(2), wait(0), (EVENT_COLL, 0, 0)], [send(1), wait(0)], comms=[[0, 1]])
    assert replay_time(bare, [0, 4, 8], cluster()).seconds == pytest.approx(S / C)


def test_a_truncated_log_stalls_without_hanging():
    # rank 0's log stopped after one send: rank 1's second receive never completes
    prog = log([send(1)], [recv(0), recv(0), wait(0), wait(1), send(0)])
    prog.truncated[0] = True
    assert replay_time(prog, [0, 4], cluster()) == Replay(pytest.approx(S / C), 4, 6, 1)
    # a member that never reaches the collective holds the others there
    coll = log([(EVENT_COLL, 0, 0), (EVENT_CSEND, 1, S)], [(EVENT_COLL, 0, 0)], [], comms=[[0, 1, 2]])
    assert replay_time(coll, [0, 4, 8], cluster()) == Replay(0.0, 0, 3, 2)
    assert replay_time(log(), [], cluster()) == Replay(0.0, 0, 0, 0)


CORNERS = ((1, 1), (-1, 1), (1, -1), (-1, -1))


def sweep(iters=4, blocks=8, nbytes=128 * 1024) -> EventLog:
    """benchmarks/cluster/programs/sweep.py on a 4x4 grid (rank 4i + j): per
    block, receive from the upstream neighbours, wait, send downstream, wait."""
    ranks = []
    for r in range(16):
        i, j = divmod(r, 4)
        ev = []
        for _ in range(iters):
            for w in CORNERS:
                up = [a * 4 + b for a, b in ((i - w[0], j), (i, j - w[1])) if 0 <= a < 4 and 0 <= b < 4]
                down = [a * 4 + b for a, b in ((i + w[0], j), (i, j + w[1])) if 0 <= a < 4 and 0 <= b < 4]
                for _ in range(blocks):
                    for peers, post in ((up, recv), (down, send)):
                        base = len(ev)
                        ev += [post(p, nbytes) for p in peers] + [wait(base + k) for k in range(len(peers))]
        ranks.append(ev)
    return log(*ranks)


LAYOUTS = {"rows": [r for r in range(16)],
           "columns": [(r % 4) * 4 + r // 4 for r in range(16)],
           "blocks": [((r // 8) * 2 + r % 4 // 2) * 4 + (r // 4) % 2 * 2 + r % 2 for r in range(16)]}


def test_the_sweep_ranks_its_layouts_as_the_emulated_cluster():
    prog = sweep()
    t = {k: replay_time(prog, pe, cluster()).seconds for k, pe in LAYOUTS.items()}
    assert t["rows"] > 1.05 * t["columns"]
    assert t["blocks"] == pytest.approx(t["columns"], rel=0.02)
    # with free links inside the nodes: the dataflow model's 13.42, 12.08, 12.08 s
    free = {k: replay_time(prog, pe, cluster(distances=(0, 100))).seconds for k, pe in LAYOUTS.items()}
    assert free == pytest.approx({"rows": 13.42, "columns": 12.08, "blocks": 12.08}, abs=0.005)


def random_program(rng, nranks, rounds):
    """Rounds of random messages (each rank posts its receives and sends,
    then waits for all) and collectives on random groups: never deadlocks."""
    ranks = [[] for _ in range(nranks)]
    comms = []
    for _ in range(rounds):
        if rng.random() < 0.25:
            members = sorted(rng.choice(nranks, size=int(rng.integers(2, nranks + 1)), replace=False).tolist())
            comms.append(members)
            for m in members:
                ranks[m].append((EVENT_COLL, len(comms) - 1, 0))
                ranks[m] += [(EVENT_CSEND, int(d), int(rng.integers(1, 4 * S))) for d in rng.choice(members, 2)]
            continue
        pairs = rng.integers(0, nranks, size=(int(rng.integers(1, 2 * nranks)), 2))
        sizes = rng.integers(1, 4 * S, size=len(pairs))
        posted = [[] for _ in range(nranks)]
        for (a, b), size in zip(pairs.tolist(), sizes.tolist()):
            posted[b].append(recv(a, size))
            posted[a].append(send(b, size))
        for r in range(nranks):
            base = len(ranks[r])
            rng.shuffle(posted[r])
            ranks[r] += posted[r] + [wait(base + k) for k in range(len(posted[r]))]
    return log(*ranks, comms=comms)


@pytest.mark.parametrize("seed", range(6))
def test_twice_the_bandwidth_takes_half_the_time(seed):
    rng = np.random.default_rng(seed)
    prog = random_program(rng, 8, 6)
    pe = rng.choice(16, size=8, replace=seed % 2 == 0)
    slow = replay_time(prog, pe, cluster())
    fast = replay_time(prog, pe, cluster(rate=2 * C))
    assert slow.stalled == 0 and slow.replayed == slow.total > 0 and slow.seconds > 0
    assert fast.seconds * 2 == slow.seconds


def reference_rates(paths, capacity):
    """Progressive filling, one flow's path a list of link ids."""
    rate, left, todo = [0.0] * len(paths), list(capacity), set(range(len(paths)))
    while todo:
        users = {}
        for f in todo:
            for m in paths[f]:
                users.setdefault(m, []).append(f)
        share, m = min((left[m] / len(fs), m) for m, fs in users.items())
        for f in users[m]:
            rate[f] = share
            todo.discard(f)
            for o in paths[f]:
                left[o] -= share
    return rate


@pytest.mark.parametrize("seed", range(5))
def test_fair_rates_are_max_min_fair(seed):
    rng = np.random.default_rng(seed)
    nlinks, width = 12, 4
    capacity = np.r_[rng.choice([1.0, 2.0, 3.0, 10.0], size=nlinks), np.inf]
    paths = [rng.choice(nlinks, size=int(rng.integers(1, width + 1)), replace=False).tolist() for _ in range(40)]
    links = np.full((len(paths) + 3, width), nlinks, dtype=np.int64)
    for f, p in enumerate(paths):
        links[f + 3, :len(p)] = p
    got = fair_rates(links, np.arange(3, len(paths) + 3), capacity)
    assert got == pytest.approx(reference_rates(paths, capacity.tolist()), rel=1e-12)
    for m in range(nlinks):  # no link over its capacity
        assert sum(r for r, p in zip(got, paths) if m in p) <= capacity[m] * (1 + 1e-12)


def test_a_mesh_and_a_deadline_send_the_caller_to_the_link_time():
    one = log([send(1), wait(0)], [recv(0), wait(0)])
    with pytest.raises(ValueError, match="tree"):
        replay_time(one, [0, 1], MeshTopology((2, 2)))
    with pytest.raises(ValueError, match="pe_of_rank"):
        replay_time(one, [0], cluster())
    gone = Deadline(0.0)
    assert replay_time(sweep(), LAYOUTS["rows"], cluster(), deadline=gone) is None and gone.hit
    assert replay_time(one, [0, 4], cluster(), deadline=Deadline(60.0)).seconds == pytest.approx(S / C)


def sweep_trace(path, node_of_rank):
    """The sweep as a recorded trace: its event log, its traffic, rank r on
    host node{node_of_rank[r]}."""
    from rankmap.trace import RankInfo, Trace

    prog = sweep(iters=1, blocks=4)
    rank = np.repeat(np.arange(16), np.diff(prog.ptr))
    s = prog.op == EVENT_SEND
    empty = {f: np.zeros(0, dtype=np.int64) for f in ("src", "dst", "phase", "msgs")} | {"bytes": np.zeros(0)}
    edges = {k: dict(empty) for k in ("collective", "rma")}
    edges["p2p"] = {"src": rank[s], "dst": prog.peer[s], "phase": np.zeros(s.sum(), dtype=np.int64),
                    "bytes": prog.nbytes[s].astype(float), "msgs": np.ones(s.sum(), dtype=np.int64)}
    info = {r: RankInfo(f"node{node_of_rank[r]}", [], "complete", 1.0, 2.0) for r in range(16)}
    hosts = {f"node{k}": None for k in range(4)}
    Trace(16, edges, ["main"], info, hosts, {"collectives": "tree", "argv": ["sweep.py"]}, "", prog).write(path)
    return path


@pytest.mark.parametrize("recorded, faster", [("columns", False), ("rows", True)])
def test_map_moves_the_ranks_where_the_replay_or_its_tie_and_j_say_it_pays(capsys, tmp_path, monkeypatch,
                                                                             recorded, faster):
    """Recorded with rows on the nodes, the sweep's lowest-J blocks replay
    8 % faster: the ranks move.  Recorded with columns on the nodes, the
    blocks replay no faster (a tie) but lower J by a third: the ranks move
    too, and stay where J would have to fall further than it does."""
    import json

    from rankmap.cli import main, map_cmd

    node = [pe // 4 for pe in LAYOUTS[recorded]]
    trace = sweep_trace(tmp_path / f"{recorded}.rmtrace.npz", node)
    topo = tmp_path / "c.topo"
    topo.write_text("cluster\nhierarchy 4 distances 1\nnodes node[0-3]\nnetwork 4 distances 100 bandwidths 50mbit\n")
    assert main(["map", str(trace), "--topology", str(topo), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["before"] == "recorded" and not out["kept_given_order"]
    assert (out["replay_time"] < 0.99 * out["replay_time_before"]) is faster
    assert out["replay_time"] <= 1.01 * out["replay_time_before"]
    assert out["J"] < (1 - map_cmd.TIE_J_GAIN) * out["J_before"]
    monkeypatch.setattr(map_cmd, "TIE_J_GAIN", 0.5)  # J 0.67 x no longer breaks the tie
    assert main(["map", str(trace), "--topology", str(topo)]) == 0
    text = capsys.readouterr().out
    assert "message order replayed" in text and ("kept the recorded order" in text) is not faster
    # J alone: the search's mapping whatever the replay says
    assert main(["map", str(trace), "--topology", str(topo), "--objective", "sum", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert not out["kept_given_order"] and out["J"] < out["J_before"]


def test_eval_prints_the_replay_of_both_orders(capsys, tmp_path):
    """eval beside identity: the mapping map wrote replays faster; the identity itself replays alike."""
    from rankmap.cli import main

    trace = sweep_trace(tmp_path / "rows.rmtrace.npz", [pe // 4 for pe in LAYOUTS["rows"]])
    topo = tmp_path / "c.topo"
    topo.write_text("cluster\nhierarchy 4 distances 1\nnodes node[0-3]\nnetwork 4 distances 100 bandwidths 50mbit\n")
    assert main(["map", str(trace), "--topology", str(topo), "-o", str(tmp_path / "m.txt"), "--as", "perm"]) == 0
    (tmp_path / "id.txt").write_text("".join(f"{r}\n" for r in range(16)))
    capsys.readouterr()
    rows = {}
    for name in ("m.txt", "id.txt"):
        assert main(["eval", str(trace), "--topology", str(topo), "--mapping", str(tmp_path / name)]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines() if "message order replayed" in x)
        rows[name] = [float(v) for v in line.split()[-4::2]]
    assert rows["m.txt"][1] < 0.99 * rows["m.txt"][0] and rows["id.txt"][0] == rows["id.txt"][1]
