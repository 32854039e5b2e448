"""The event log in the trace format: merge of rank parts (program order per
rank, communicators merged by content), round trip, traces without a log,
refused damage; and the profiler's per-rank recorder of it and its cap option."""

from __future__ import annotations

import numpy as np
import pytest

from rankmap.profile.eventlog import EventRecorder
from rankmap.trace import (EVENT_COLL, EVENT_CSEND, EVENT_RECV, EVENT_SEND, EVENT_WAIT, EventLog, RankInfo,
                           Trace, merge_traces, read_trace)

S, R, W, C, CS = EVENT_SEND, EVENT_RECV, EVENT_WAIT, EVENT_COLL, EVENT_CSEND


def _part(rank, n, events, comms, truncated=False):
    """A one-rank trace whose log is ``events`` = [(op, peer, bytes)]."""
    empty = {f: np.zeros(0, dtype=np.int64) for f in ("src", "dst", "phase", "msgs")}
    empty["bytes"] = np.zeros(0)
    edges = {k: dict(empty) for k in ("p2p", "collective", "rma")}
    op, peer, nbytes = (list(c) for c in zip(*events)) if events else ([], [], [])
    log = EventLog.of_rank(n, rank, op, peer, nbytes, comms, truncated)
    return Trace(n, edges, ["main"], {rank: RankInfo("h", [rank], "complete", 1.0, 2.0)}, {"h": None},
                 {"collectives": "tree"}, f"part{rank}", log)


def _events(trace, rank):
    e = trace.events
    op, peer, nbytes = e.rank_events(rank)
    return [(int(o), tuple(e.members(p).tolist()) if o == C else int(p), int(b))
            for o, p, b in zip(op, peer, nbytes)]


PARTS = {  # rank -> (events, local communicator table)
    0: ([(S, 1, 8), (W, 0, 0), (C, 1, 0), (CS, 1, 4), (C, 0, 0)], [(0, 1, 2, 3), (0, 1)]),
    1: ([(R, 0, 8), (W, 0, 0), (C, 0, 0), (C, 1, 0)], [(0, 1), (0, 1, 2, 3)]),
    2: ([(C, 0, 0), (CS, 3, 16)], [(0, 1, 2, 3)]),
    3: ([], []),
}


def test_merge_keeps_program_order_and_merges_communicators_by_content():
    parts = {r: _part(r, 4, ev, comms) for r, (ev, comms) in PARTS.items()}
    # parts in any order, and through merged pieces over interleaved ranks
    for groups in ([[3], [1], [0], [2]], [[0, 2], [3, 1]]):
        pieces = [merge_traces([parts[r] for r in g]) for g in groups]
        t = merge_traces(pieces)
        assert t.events.nranks == 4 and t.events.ncomms == 2
        assert sorted(tuple(t.events.members(c).tolist()) for c in range(2)) == [(0, 1), (0, 1, 2, 3)]
        for r, (ev, comms) in PARTS.items():
            want = [(o, comms[p], b) if o == C else (o, p, b) for o, p, b in ev]
            assert _events(t, r) == want
        assert list(np.diff(t.events.ptr)) == [5, 4, 2, 0]


def test_round_trip_truncation_and_traces_without_a_log(tmp_path, capsys):
    parts = [_part(r, 4, ev, comms, truncated=(r == 2)) for r, (ev, comms) in PARTS.items()]
    t = merge_traces(parts)
    back = read_trace(t.write(tmp_path / "t.rmtrace.npz"))
    assert list(back.events.truncated) == [False, False, True, False]
    from rankmap.cli import main as cli

    assert cli(["show", str(tmp_path / "t.rmtrace.npz")]) == 0
    assert (f"events    {t.events.op.size} in program order, what map replays; 1 rank(s) reached "
            "--max-events") in capsys.readouterr().out
    for f in ("ptr", "op", "peer", "nbytes", "comm_ptr", "comm_runs"):
        assert np.array_equal(getattr(back.events, f), getattr(t.events, f)), f
    assert back.events.op.dtype == np.int8
    # a part: the log of its one rank; a parts directory merges them
    part = read_trace(parts[1].write(tmp_path / "d" / "rank000001.rmtrace.npz"), warn_missing=False)
    assert _events(part, 1) == [(R, 0, 8), (W, 0, 0), (C, (0, 1), 0), (C, (0, 1, 2, 3), 0)]
    parts[0].write(tmp_path / "d" / "rank000000.rmtrace.npz")
    assert read_trace(tmp_path / "d", warn_missing=False).events.ncomms == 2

    # no log: written without the members, read with events None; merged with one: None
    plain = _part(0, 4, [], [])
    plain.events = None
    assert read_trace(plain.write(tmp_path / "plain.rmtrace.npz"), warn_missing=False).events is None
    with np.load(tmp_path / "plain.rmtrace.npz") as z:
        assert not any(k.startswith("events_") for k in z.files)
    assert merge_traces([plain, parts[1]]).events is None


@pytest.mark.parametrize("damage, message", [
    (lambda a: a.pop("events_nbytes"), "lacks member 'events_nbytes'"),
    (lambda a: a["events_op"].__setitem__(0, 7), "outside"),
    (lambda a: a["events_peer"].__setitem__(1, 1), "names 1, out of its range"),  # a wait on itself
    (lambda a: a["events_peer"].__setitem__(1, 5), "out of its range"),
    (lambda a: a["events_peer"].__setitem__(2, 9), "out of its range"),  # no communicator 9
    (lambda a: a["events_ptr"].__setitem__(1, 9), "not an index"),
    (lambda a: a["events_comm_runs"].__setitem__(0, 4), "outside 0..3"),  # a run from rank 4
    (lambda a: a["events_comm_runs"].__setitem__(1, 3), "outside 0..3"),  # 0, 3, 6: past rank 3
    (lambda a: a.__setitem__("events_comm_runs", a["events_comm_runs"][:-1]), "start, step, count"),
])
def test_damaged_logs_are_refused_by_name(tmp_path, damage, message):
    path = _part(0, 4, PARTS[0][0], PARTS[0][1]).write(tmp_path / "t.rmtrace.npz")
    with np.load(path) as z:
        arrays = {k: z[k].copy() for k in z.files}
    damage(arrays)
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=message):
        read_trace(path)


def test_a_wait_must_name_a_send_or_receive(tmp_path):
    bad = _part(0, 4, [(C, 0, 0), (W, 0, 0)], [(0, 1)])
    with pytest.raises(ValueError, match="event 1 of rank 0"):
        read_trace(bad.write(tmp_path / "t.rmtrace.npz"))


def test_events_of_a_rank_the_trace_does_not_cover_are_refused(tmp_path):
    t = _part(0, 4, [(S, 1, 8)], [])
    t.events.ptr[:] = [0, 0, 1, 1, 1]  # rank 1's, in rank 0's part
    with pytest.raises(ValueError, match="does not cover"):
        read_trace(t.write(tmp_path / "t.rmtrace.npz"))


def test_recorder_caps_fixes_and_converts_what_is_new():
    log = EventRecorder(6)
    assert log.post_wait(S, 3, 100) == 0
    r = log.add(R, -1, 40)
    op, peer, nbytes = log.arrays()
    assert list(op) == [S, W, R] and list(peer) == [3, 0, -1]
    log.fix(r, 2, 32)  # the ANY_SOURCE receive completed: rewritten over the converted part
    log.collective(log.comm((0, 2)), [(2, 0.5, 1)], 17)  # one message of 8.5 bytes: 9
    assert log.comm((0, 2)) == 0 and log.comm((1, 3)) == 1
    first = (op.copy(), peer.copy(), nbytes.copy())
    op, peer, nbytes = log.arrays()
    assert list(peer) == [3, 0, 2, 0, 2] and list(nbytes) == [100, 0, 32, 0, 9]
    assert np.array_equal(first[1], [3, 0, -1]), "a log handed out earlier is not rewritten"
    assert not log.truncated
    assert log.post_wait(S, 1, 5) == 5  # one slot left: the post fits, its wait does not
    assert log.truncated and len(log) == 6 and log.add(S, 1, 5) == -1
    e = log.event_log(4, 2)
    assert list(np.diff(e.ptr)) == [0, 0, 6, 0] and list(e.truncated) == [False, False, True, False]
    assert e.members(1).tolist() == [1, 3]


@pytest.mark.parametrize("text", ["-1", "1.5", "many"])
def test_max_events_option_must_be_a_count(text):
    from rankmap.profile.__main__ import parse

    assert parse(["--max-events", "7", "app.py"])[0]["max_events"] == 7
    with pytest.raises(SystemExit, match="--max-events must be an integer >= 0"):
        parse([f"--max-events={text}", "app.py"])


def test_the_default_log_stays_within_what_the_replay_takes():
    from rankmap.trace import DEFAULT_MAX_EVENTS, JOB_MAX_EVENTS, default_max_events

    assert default_max_events(4) == default_max_events(16) == DEFAULT_MAX_EVENTS
    assert default_max_events(1024) * 1024 == JOB_MAX_EVENTS
    assert default_max_events(4096) == 1024 and default_max_events(4097) == 0


def test_communicators_are_runs_that_merge_by_content():
    """COMM_WORLD, a row and a column of a grid are one run each, whatever
    the ranks; any list comes back as given, and the same list is the same runs."""
    from rankmap.trace import EventLog, member_runs

    assert member_runs(range(10 ** 6)).tolist() == [0, 1, 10 ** 6]
    assert member_runs(range(3, 4096, 64)).tolist() == [3, 64, 64]
    rng = np.random.default_rng(1)
    lists = [[5], [2, 0], list(rng.permutation(9)), [0, 2, 4, 5, 6, 9, 9, 1], list(range(0, 12, 3)) + [1]]
    log = EventLog.from_members([0], [], [], [], lists, [])
    assert [log.members(c).tolist() for c in range(len(lists))] == [list(map(int, m)) for m in lists]
    assert log.sizes().tolist() == [len(m) for m in lists]
