"""The wall-clock deadline: every stage stops at it with a valid mapping no
worse than the given order, and a deadline that does not cut changes nothing
(the counted-work plan stays repeatable).  Behaviour, not seconds: a deadline
that has passed already cuts on any machine, one of ten minutes on none."""

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

from rankmap.algorithms import map_tasks
from rankmap.algorithms.construct.multisection import multisection_map
from rankmap.algorithms.distributed.swap_rounds import refine_rounds
from rankmap.algorithms.refine import swaps
from rankmap.cli import main
from rankmap.cost import mapping_cost
from rankmap.deadline import Deadline
from rankmap.mapping import validate_mapping
from rankmap.topology.hierarchy import hierarchy_topology
from tests.quality_instances import grid_graph

PASSED = 1e-9  # seconds: expired by the time anything checks it
GENEROUS = 600.0


def scrambled(g):
    """The given order made bad on purpose: a random relabelling of a grid."""
    perm = np.random.default_rng(5).permutation(g.n)
    src, dst, w = g.coo()
    from rankmap.graph import CommGraph

    return CommGraph.from_edges(perm[src], perm[dst], w, n=g.n)


def test_deadline_object():
    d = Deadline(PASSED)
    assert d.expired() and d.hit and d.remaining() == 0.0
    never = Deadline()
    assert not never.expired() and not never.hit and never.remaining() == float("inf")
    copy = pickle.loads(pickle.dumps(Deadline(GENEROUS)))  # worker processes check the same end
    assert not copy.expired() and 0 < copy.remaining() <= GENEROUS
    assert copy.allows(1.0) and not copy.hit and never.allows(1e9)
    assert not copy.allows(2 * GENEROUS) and copy.hit  # a step refused for want of time changes the result
    assert not copy.expired()  # ... but the time left still goes to the steps that fit in it


@pytest.mark.parametrize("method, options", [
    ("auto", {}), ("multisection", {"preset": "fast"}), ("treematch", {}), ("swap", {}), ("greedy", {"refine": True}),
    ("multilevel", {}),
])
def test_a_passed_deadline_returns_a_valid_mapping_no_worse_than_the_given_order(method, options):
    g = scrambled(grid_graph(40, 40))  # 1600 tasks: too many for any of them in no time
    topo = hierarchy_topology([4, 16, 25], [1, 10, 100])
    m = map_tasks(g, topo, method=method, deadline=Deadline(PASSED), **options)
    validate_mapping(m.pe_of_task, g, topo)
    assert m.deadline_hit
    assert mapping_cost(g, topo, m.pe_of_task) <= mapping_cost(g, topo, np.arange(g.n))


def test_a_tiny_time_limit_cuts_auto_on_a_larger_graph():
    g = scrambled(grid_graph(64, 64))  # 4096 tasks: auto plans seconds of work
    topo = hierarchy_topology([4, 16, 64], [1, 10, 100])
    m = map_tasks(g, topo, method="auto", time_limit=0.01)
    validate_mapping(m.pe_of_task, g, topo)
    assert m.deadline_hit
    assert mapping_cost(g, topo, m.pe_of_task) <= mapping_cost(g, topo, np.arange(g.n))


def test_many_to_one_under_a_passed_deadline():
    g = grid_graph(30, 30)
    topo = hierarchy_topology([4, 4, 4], [1, 10, 100])  # 900 tasks on 64 PEs
    for method in ("auto", "multisection"):
        m = map_tasks(g, topo, method=method, eps=0.03, deadline=Deadline(PASSED))
        validate_mapping(m.pe_of_task, g, topo, eps=0.03)
        assert m.deadline_hit
    w = np.where(np.arange(g.n) % 7 == 0, 3.0, 1.0)  # unequal weights: the in-order fill packs
    from rankmap.graph import CommGraph

    src, dst, bytes_ = g.coo()
    weighted = CommGraph.from_edges(src, dst, bytes_, n=g.n, vertex_weights=w)
    pe = multisection_map(weighted, topo, eps=0.03, deadline=Deadline(PASSED))
    validate_mapping(pe, weighted, topo, eps=0.03)


def test_a_deadline_that_does_not_cut_changes_nothing():
    g = grid_graph(24, 24)
    topo = hierarchy_topology([4, 16, 9], [1, 10, 100])
    counted = map_tasks(g, topo, method="auto", seed=2, work_limit=0.3)
    a = map_tasks(g, topo, method="auto", seed=2, work_limit=0.3, time_limit=GENEROUS)
    b = map_tasks(g, topo, method="auto", seed=2, work_limit=0.3, time_limit=GENEROUS)
    assert not (counted.deadline_hit or a.deadline_hit or b.deadline_hit)
    assert np.array_equal(a.pe_of_task, b.pe_of_task)
    assert np.array_equal(a.pe_of_task, counted.pe_of_task)


def test_refine_around_in_slices_is_the_same_search(monkeypatch):
    g = grid_graph(16, 16)
    topo = hierarchy_topology([4, 8, 8], [1, 10, 100])
    start = np.random.default_rng(0).permutation(g.n)
    whole = swaps.refine_around(g, topo, start, np.arange(g.n), seed=1)
    monkeypatch.setattr(swaps, "SCAN_SLICE_WORK", 1)  # one task per compiled call, the clock read between
    sliced = swaps.refine_around(g, topo, start, np.arange(g.n), seed=1, deadline=Deadline(GENEROUS))
    assert np.array_equal(whole[0], sliced[0]) and whole[1] == sliced[1]
    capped = swaps.refine_around(g, topo, start, np.arange(g.n), seed=1, max_scans=37)
    assert capped[1] == 37
    cut = swaps.refine_around(g, topo, start, np.arange(g.n), seed=1, deadline=Deadline(PASSED))
    assert cut[1] <= 1 and sorted(cut[0].tolist()) == list(range(g.n))


def test_swap_rounds_stop_at_the_deadline():
    g = grid_graph(12, 12)
    topo = hierarchy_topology([4, 4, 9], [1, 10, 100])
    start = np.random.default_rng(3).permutation(g.n)
    full, res = refine_rounds(g, topo, start, seed=1, replicas=2)
    again, same = refine_rounds(g, topo, start, seed=1, replicas=2, deadline=Deadline(GENEROUS))
    assert np.array_equal(full, again) and not same.deadline_hit
    pe, cut = refine_rounds(g, topo, start, seed=1, replicas=2, kicks=3, deadline=Deadline(PASSED))
    assert cut.deadline_hit and cut.rounds == 1 < res.rounds
    assert sorted(pe.tolist()) == list(range(g.n)) and cut.J_after <= cut.J_before


def run_json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_work_limit_is_repeatable_and_time_limit_reports_the_cut(capsys, data_dir):
    graph = str(data_dir / "graphs/delaunay_n10.graph")
    machine = ["--hierarchy", "4:16:16", "--distances", "1:10:100", "--json"]
    a = run_json(capsys, ["map", graph, *machine, "--work-limit", "0.2"])
    b = run_json(capsys, ["map", graph, *machine, "--work-limit", "0.2"])
    assert a["pe_of_task"] == b["pe_of_task"] and not a["deadline_hit"] and a["work_limit"] == 0.2
    cut = run_json(capsys, ["map", graph, *machine, "--time-limit", "1e-9"])
    assert cut["deadline_hit"] and cut["J"] <= cut["J_identity"]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_cli_refuses_a_limit_that_is_no_duration(capsys, data_dir, value):
    with pytest.raises(SystemExit) as exc:
        main(["map", str(data_dir / "graphs/delaunay_n10.graph"), "--hierarchy", "4:16:16",
              "--work-limit", value])
    assert exc.value.code == 2 and "--work-limit" in capsys.readouterr().err


def test_a_cheap_method_loads_no_search_and_no_partitioner(data_dir):
    """``rankmap map --method identity`` imports only what its path needs:
    looking a method up imports the one module that registers it."""
    code = ("import sys; from rankmap.cli import main; "
            f"main(['map', {str(data_dir / 'graphs/delaunay_n10.graph')!r}, '--hierarchy', '4:16:16', "
            "'--method', 'greedy', '--json']); "
            "heavy = [m for m in ('scipy.optimize', 'highspy', 'rankmap.algorithms.refine._kernels', 'kahip', 'mtkahypar', "
            "'networkx', 'mpi4py') if m in sys.modules]; "
            "print('HEAVY', heavy, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stderr, proc.stderr


def test_the_method_table_names_the_module_that_registers_each_method():
    from rankmap.algorithms.registry import _MODULE_OF, METHODS

    registered = {name: spec.fn.__module__ for name, spec in METHODS.items()}  # imports them all
    for name, module in registered.items():
        assert _MODULE_OF.get(name) is None or module.endswith("." + _MODULE_OF[name]), name
    assert set(_MODULE_OF) == set(registered)  # a new method: add it to the table


def test_sooner_ends_earlier_and_keeps_no_end_as_none():
    d = Deadline(100.0)
    inner = d.sooner(30.0)
    assert 69.0 < inner.remaining() < 70.5 and not inner.hit
    assert Deadline().sooner(5.0).end is None
    assert Deadline(1.0).sooner(10.0).expired()


def test_the_passes_after_a_search_are_reserved_at_their_measured_pace():
    """The whole-graph passes no deadline cuts are reserved at their price
    until a caller measured their pace (the CLI times the given order's
    report); then at that pace with a margin, kept by inner deadlines and
    worker processes."""
    import rankmap.algorithms as algorithms

    g = grid_graph(64, 64)
    d = Deadline(GENEROUS)
    priced = algorithms._tail_seconds(g, d)
    assert priced == algorithms._TAIL_PASSES * algorithms.pass_seconds(g) > 0
    d.pace = 0.2
    assert algorithms._tail_seconds(g, d) == pytest.approx(algorithms._TAIL_MARGIN * 0.2 * priced)
    assert d.sooner(1.0).pace == 0.2 and pickle.loads(pickle.dumps(d)).pace == 0.2


def test_a_refinement_that_cannot_look_at_every_task_before_the_deadline_leaves_the_start(monkeypatch):
    """Beyond the quadratic neighbourhood a refinement starts only where
    its set-up and n pairs fit the deadline: at the price of a pair that
    leaves no such time the start comes back as it was, cut; with time for
    them it refines."""
    from rankmap.algorithms.refine import budgeted

    g = scrambled(grid_graph(48, 48))  # 2304 tasks: N_C^10, not the quadratic scans
    topo = hierarchy_topology([4, 16, 36], [1, 10, 100])
    start = np.arange(g.n)
    assert not budgeted.quadratic(g, topo)
    monkeypatch.setattr(budgeted, "_PER_PAIR_EDGE", GENEROUS / g.n)  # n pairs: past the deadline
    deadline = Deadline(GENEROUS)
    kept, work = budgeted.refine_start(g, topo, start, 10.0, 0, deadline)
    assert kept is start and work == 0.0 and deadline.hit
    monkeypatch.setattr(budgeted, "_PER_PAIR_EDGE", 1e-3 / g.n)  # ... and within it
    deadline = Deadline(GENEROUS)
    refined, work = budgeted.refine_start(g, topo, start, 10.0, 0, deadline)
    assert mapping_cost(g, topo, refined) < mapping_cost(g, topo, start) and work > 0


def test_a_refinement_whose_set_up_the_deadline_cannot_afford_leaves_the_start(monkeypatch):
    """A refinement's set-up (per-task sums, renumbering, the distance
    oracle) cannot be cut: where the deadline leaves less than its price
    the start comes back as it was, and the cut is reported; so do auto's
    kicks and its exact split of the nodes into groups."""
    from rankmap.algorithms.portfolio import one_to_one
    from rankmap.algorithms.portfolio.one_to_one import iterated_search
    from rankmap.algorithms.refine import budgeted

    g = scrambled(grid_graph(48, 48))
    topo = hierarchy_topology([4, 16, 36], [1, 10, 100])
    start = np.arange(g.n)
    refined, _ = budgeted.refine_start(g, topo, start, 10.0, 0, Deadline(GENEROUS))
    assert mapping_cost(g, topo, refined) < mapping_cost(g, topo, start)
    monkeypatch.setattr(budgeted, "_PER_SETUP_ENTRY", 1.0)
    deadline = Deadline(GENEROUS)
    kept, work = budgeted.refine_start(g, topo, start, 10.0, 0, deadline)
    assert kept is start and work == 0.0 and deadline.hit
    deadline = Deadline(GENEROUS)  # ... nor the kicks of auto's search, each refined around the kick
    j = mapping_cost(g, topo, refined)
    assert iterated_search(g, topo, refined, j, seed=0, budget=10.0, deadline=deadline) == (refined, j)
    assert deadline.hit
    deadline = Deadline(GENEROUS)  # ... nor the exact split of the nodes into groups (its passes first)
    assert one_to_one.exact_groups(g, topo, refined, j, 10.0, 0, deadline) == (refined, j, 0.0) and deadline.hit
    deadline = Deadline(GENEROUS)  # ... and a pass that moved tasks keeps its result unrefined
    moved = refined.copy()
    moved[[0, 1]] = moved[[1, 0]]
    assert one_to_one._settle(g, topo, refined, j, moved, 5.0, 0.1, 10.0, 0, deadline) == (moved, j - 5.0, 0.1)
    assert deadline.hit


def test_the_link_stage_is_skipped_where_the_deadline_cannot_afford_its_tables(monkeypatch):
    """auto's link stage (``--objective time``) builds tables no deadline
    cuts (9 s at 2^20 tasks on a loaded machine): where the deadline leaves
    too little for them the mapping is J's, and the cut is reported."""
    import rankmap.algorithms as algorithms

    g = scrambled(grid_graph(16, 16))
    topo = hierarchy_topology([4, 4, 16], [1, 10, 100])
    pe = np.random.default_rng(0).permutation(g.n)
    monkeypatch.setattr(algorithms, "_PER_LINK_SETUP_ENTRY", 1.0)  # 1 s per entry: no deadline affords it
    deadline = Deadline(GENEROUS)
    assert algorithms.apply_objective(g, topo, pe, "time", deadline=deadline) is pe and deadline.hit
    assert algorithms.apply_objective(g, topo, pe, "time") is not pe  # no deadline: the stage runs
