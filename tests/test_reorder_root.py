"""The centralised path's mapping step on the root (no MPI ranks needed):
which method and refinement run, with what budget."""

import sys

import numpy as np
import pytest

import rankmap
import rankmap.algorithms.portfolio.one_to_one as auto_module
from rankmap.algorithms import AUTO_FIRST_CALL
from rankmap.algorithms.distributed.swap_rounds import REPLICAS
from rankmap.deadline import Deadline
from rankmap.reorder.api import IN_PROGRAM_TIME_LIMIT, _map_on_root, call_seconds, multilevel_tuning


def ring_rows(p: int):
    """Rows of a ring over a scrambled order: the launch order is bad."""
    order = np.random.default_rng(7).permutation(p)
    rows = []
    for r in range(p):
        i = int(np.flatnonzero(order == r)[0])
        rows.append((np.array([order[(i - 1) % p], order[(i + 1) % p]]), np.full(2, 1000.0)))
    return rows


def settings(method, refine, **options):
    """What reorder_comm broadcasts (the swap rounds' defaults)."""
    return dict(method=method, refine=refine, seed=0, replicas=REPLICAS, kicks=0, options=options)


@pytest.fixture
def planned(monkeypatch):
    """The time_limit auto plans for, recorded on each call."""
    seen = []
    real = auto_module.plan

    def spy(graph, topology, time_limit, *rest):
        seen.append(time_limit)
        return real(graph, topology, time_limit, *rest)

    monkeypatch.setattr(auto_module, "plan", spy)
    return seen


TOPO = rankmap.topology_from_strings("2:2:4", "1:10:100")


@pytest.mark.parametrize("method, refine, name", [
    ("auto", "auto", "auto"),            # auto ends with swap refinement: not run twice
    ("greedy", "auto", "greedy+swap"),
    ("greedy", "swap", "greedy+swap"),
    ("identity", "rounds", "identity+rounds"),
    ("greedy", "none", "greedy"),
])
def test_method_and_refinement(method, refine, name, planned):
    # a deadline no load reaches: the plan is the in-program one, the result repeatable
    task_of_pe, info = _map_on_root(ring_rows(16), TOPO, np.arange(16), settings(method, refine), Deadline(600))
    assert sorted(task_of_pe.tolist()) == list(range(16))
    assert info["J_after"] < info["J_before"] and info["T_after"] <= info["T_before"]
    assert info["method"] == name and info["objective"] == ("time" if method == "auto" else "sum")
    if method == "auto":
        assert planned == [IN_PROGRAM_TIME_LIMIT]


def test_a_given_time_limit_wins(planned):
    _map_on_root(ring_rows(16), TOPO, np.arange(16), settings("auto", "auto", time_limit=3.0))
    assert planned == [3.0]


def test_unknown_refinement_is_refused():
    with pytest.raises(ValueError, match="refine must be"):
        _map_on_root(ring_rows(16), TOPO, np.arange(16), settings("greedy", "sideways"))


def test_the_default_bound_pays_autos_first_start_once(monkeypatch):
    # a first call in a process that has not loaded auto: the default would leave
    # auto no time to start (it would keep the given order); a given limit is the limit
    monkeypatch.delitem(sys.modules, "rankmap.algorithms.portfolio.one_to_one", raising=False)
    assert call_seconds({}, "auto") == IN_PROGRAM_TIME_LIMIT + AUTO_FIRST_CALL
    assert call_seconds({}, "greedy") == IN_PROGRAM_TIME_LIMIT
    assert call_seconds({"time_limit": 0.2}, "auto") == 0.2
    monkeypatch.setitem(sys.modules, "rankmap.algorithms.portfolio.one_to_one", object())
    assert call_seconds({}, "auto") == IN_PROGRAM_TIME_LIMIT


def test_the_coarse_mapping_gets_a_share_of_the_calls_limit():
    """The distributed path's coarse mapping plans for half the call's
    limit (at most 10 s) unless told otherwise: a 10 s plan inside a 0.5 s
    call was always cut by the clock."""
    assert multilevel_tuning({})["coarse_time_limit"] == pytest.approx(IN_PROGRAM_TIME_LIMIT / 2)
    assert multilevel_tuning({"time_limit": 4, "set_size": 2}) == {"coarse_time_limit": 2.0, "set_size": 2}
    assert multilevel_tuning({"time_limit": 60})["coarse_time_limit"] == 10.0
    assert multilevel_tuning({"time_limit": 60, "coarse_time_limit": 30})["coarse_time_limit"] == 30
