"""The profiler's event log under mpiexec with real ranks: every rank's log
exactly (posts, peers, bytes, which post each wait waits for, collectives
and their flows), communicators merged by content, the cap, no log, and
part files that carry the log when a rank is killed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from rankmap.trace import EVENT_COLL, EVENT_CSEND, EVENT_RECV, EVENT_SEND, EVENT_WAIT, read_trace
from tests.mpi_util import run_mpi

pytestmark = pytest.mark.mpi
SCRIPTS = Path(__file__).parent / "mpi_scripts"
S, R, W, C, CS = EVENT_SEND, EVENT_RECV, EVENT_WAIT, EVENT_COLL, EVENT_CSEND


def profile(n, tmp_path, script, *args, options=(), check=True):
    out = tmp_path / "run.rmtrace.npz"
    proc = run_mpi(n, ["-m", "rankmap.profile", "-o", str(out), "--no-topology", *options,
                       str(SCRIPTS / script), *args], timeout=120, cwd=tmp_path, check=check)
    return out, proc


class Log:
    """A rank's expected events: ``post`` returns the event's index."""

    def __init__(self):
        self.events = []

    def post(self, op, peer, nbytes=0):
        self.events.append((op, peer, nbytes))
        return len(self.events) - 1

    def wait(self, *posts):
        for i in posts:
            self.post(W, i)


def logged(trace, rank):
    """Rank ``rank``'s events, a COLL naming its communicator's world ranks."""
    e = trace.events
    op, peer, nbytes = e.rank_events(rank)
    return [(int(o), tuple(e.members(p).tolist()) if o == C else int(p), int(b))
            for o, p, b in zip(op, peer, nbytes)]


def expected_program_log(me, pickled, isendrecv):
    """What tests/mpi_scripts/profile_events.py logs on rank ``me`` of 4."""
    right, left, across = (me + 1) % 4, (me - 1) % 4, (me + 2) % 4
    x = Log()
    r, s = x.post(R, left, 80), x.post(S, right, 80)   # Irecv, Isend, Waitall([r, s])
    x.wait(r, s)
    x.wait(x.post(S, me + 1, 24) if me % 2 == 0 else x.post(R, me - 1, 24))   # Send / Recv
    s, r = x.post(S, left, 16), x.post(R, right, 16)  # Sendrecv
    x.wait(s, r)
    r = x.post(R, across, 32)  # ANY_SOURCE Irecv of 40 bytes, matched by 32 from `across`
    x.wait(x.post(S, across, 32))
    x.wait(r)
    x.wait(x.post(R, me + 1, 8) if me % 2 == 0 else x.post(S, me - 1, 8))  # blocking ANY_SOURCE Recv
    s, r = x.post(S, right, pickled), x.post(R, left, pickled)  # isend, irecv, waitall([rr, sr])
    x.wait(r, s)
    r, s = x.post(R, left, 8), x.post(S, right, 8)  # Startall([recv, send]), Waitall([send, recv])
    x.wait(s, r)
    if isendrecv:
        s, r = x.post(S, right, 16), x.post(R, left, 16)
        x.wait(s, r)
    # paused: a Sendrecv and a Barrier leave nothing
    sub = (0, 2) if me % 2 == 0 else (1, 3)
    other = sub[1] if me == sub[0] else sub[0]
    x.post(C, sub)  # Allreduce of 8 bytes on 2 ranks (recursive doubling): one flow to the other
    x.post(CS, other, 8)
    x.post(C, sub)  # Barrier (dissemination): one message without bytes to the other
    x.post(CS, other, 0)
    x.post(C, (0, 1, 2, 3))  # Bcast of 64 bytes from 0 (binomial tree: 0 -> 1, 2; 2 -> 3)
    for child in {0: (1, 2), 2: (3,)}.get(me, ()):
        x.post(CS, child, 64)
    return x.events


def test_every_ranks_log_is_exact(tmp_path):
    out, proc = profile(4, tmp_path, "profile_events.py")
    assert proc.stdout.count(": ok") == 4
    found = re.search(r"pickled (\d+) isendrecv (True|False)", proc.stdout)
    pickled, isendrecv = int(found.group(1)), found.group(2) == "True"
    trace = read_trace(out)
    e = trace.events
    assert e is not None and e.nranks == 4 and not e.truncated.any()
    for me in range(4):
        assert logged(trace, me) == expected_program_log(me, pickled, isendrecv), f"rank {me}"
    # one index per distinct group of world ranks, whichever rank named it
    assert sorted(tuple(e.members(c).tolist()) for c in range(e.ncomms)) == [(0, 1, 2, 3), (0, 2), (1, 3)]
    # the counters are unchanged by the log: the pause kept the 1000-byte Sendrecv out of both
    assert trace.graph("p2p").bytes.max() < 1000
    # written and read back: the same log
    back = read_trace(trace.write(tmp_path / "again.rmtrace.npz"))
    for f in ("ptr", "op", "peer", "nbytes", "comm_ptr", "comm_runs", "truncated"):
        assert np.array_equal(getattr(back.events, f), getattr(e, f)), f


def test_cap_truncates_and_zero_logs_nothing(tmp_path):
    runs = {}
    for name, cap in (("full", []), ("capped", ["--max-events", "10"]), ("none", ["--max-events", "0"])):
        (tmp_path / name).mkdir()
        runs[name] = read_trace(profile(4, tmp_path / name, "profile_events.py", options=cap)[0])
    whole, cut = runs["full"], runs["capped"]
    assert cut.events.truncated.all() and not whole.events.truncated.any()
    for me in range(4):
        assert logged(cut, me) == logged(whole, me)[:10]
    assert np.array_equal(cut.graph("all").bytes.toarray(), whole.graph("all").bytes.toarray())
    assert runs["none"].events is None


def test_every_completion_call_logs_its_waits(tmp_path):
    out, proc = profile(2, tmp_path, "profile_event_waits.py")
    seen = {int(m.group(1)): json.loads(m.group(2)) for m in re.finditer(r"rank (\d): (\{[^{}]*\})", proc.stdout)}
    trace = read_trace(out)
    for me in range(2):
        other, got = 1 - me, seen[me]
        x = Log()
        posts = [x.post(R, other, 8), x.post(R, other, 16)]  # Waitany twice
        x.wait(x.post(S, other, 8))
        x.wait(x.post(S, other, 16))
        x.wait(*(posts[i] for i in got["waitany"]))
        posts = [x.post(R, other, 8), x.post(R, other, 8)]  # Testsome until both
        x.wait(x.post(S, other, 8))
        x.wait(x.post(S, other, 8))
        x.wait(*(posts[i] for i in got["testsome"]))
        x.wait(x.post(S, other, 8), x.post(R, other, 8))  # Testall
        r = x.post(R, other, 8)  # Test
        x.wait(x.post(S, other, 8))
        x.wait(r)
        r = x.post(R, other, got["pickled"])  # pickled ANY_SOURCE irecv, req.test()
        x.wait(x.post(S, other, got["pickled"]))
        x.wait(r)
        r = x.post(R, other, 24)  # ANY_SOURCE Irecv of 40 bytes, Testany
        x.wait(x.post(S, other, 24))
        x.wait(r)
        posts = [x.post(R, other, 8), x.post(R, other, 8)]  # Waitsome with the program's statuses
        x.wait(x.post(S, other, 8))
        x.wait(x.post(S, other, 8))
        x.wait(*(posts[i] for i in got["waitsome"]))
        x.post(S, other, 8)  # Bsend: completes locally, no wait
        x.wait(x.post(R, other, 8))
        assert logged(trace, me) == x.events, f"rank {me}"


def test_killed_run_keeps_each_ranks_log_up_to_its_last_flush(tmp_path):
    """Parts flushed while the program ran carry the log so far: every rank
    has at least its first 10 Sendrecv (send, receive, two waits each)."""
    interval = 0.2
    out, proc = profile(4, tmp_path, "profile_kill.py", "2", str(interval),
                        options=["--flush-interval", str(interval)], check=False)
    assert proc.returncode != 0
    trace = read_trace(Path(str(out) + ".parts"), warn_missing=False)
    assert trace.events is not None
    for me in range(4):
        events = logged(trace, me)
        assert len(events) >= 40
        for k in range(10):
            assert events[4 * k:4 * k + 4] == [(S, (me + 1) % 4, 1000), (R, (me - 1) % 4, 1000),
                                               (W, 4 * k, 0), (W, 4 * k + 1, 0)]
