"""Start-up of the command line: a command imports only what its path needs,
and its time limit counts from the start of the process.  Behaviour, not
seconds: what is imported, and which clock the deadline starts on."""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rankmap.cli import command_modules, command_names, command_table
from rankmap.deadline import process_start
from rankmap.graph import CommGraph

MACHINE = ["--hierarchy", "4:16:16", "--distances", "1:10:100"]


def run_python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


def test_a_cheap_map_imports_no_scipy_and_no_other_command(data_dir, tmp_path):
    """``rankmap map --method identity`` as a program (``main()`` reading
    sys.argv): reading the graph, scoring and writing stay on numpy; the
    parser is the map command's alone."""
    graph = str(data_dir / "graphs/delaunay_n10.graph")
    argv = ["rankmap", "map", graph, *MACHINE, "--method", "identity", "-o", str(tmp_path / "x.perm")]
    out = run_python(
        f"import sys; sys.argv = {argv!r}; from rankmap.cli import main; code = main(); "
        "others = sorted(m for m in sys.modules if m.startswith('rankmap.cli.') and m.endswith('_cmd')); "
        "heavy = sorted(m for m in ('scipy', 'rankmap.algorithms.refine._kernels', 'networkx', 'mpi4py', "
        "'rankmap.emulate') "
        "if m in sys.modules); "
        "print('RESULT', code, others, heavy)")
    assert "RESULT 0 ['rankmap.cli.map_cmd'] []" in out, out
    assert (tmp_path / "x.perm").read_text().split() == [str(t) for t in range(1024)]


def test_help_lists_every_command(capsys):
    from rankmap.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert all(f"    {name} " in text for name in command_names())


def test_commands_are_named_by_their_module():
    """Discovery reads the names from the files (``NAME_cmd``), so each
    module's NAME must be its file's."""
    mods = command_modules()
    assert sorted(m.NAME for m in mods) == command_names()
    assert all(m.__name__ == f"rankmap.cli.{m.NAME}_cmd" for m in mods)
    assert command_table() == [(m.NAME, m.HELP, m.ORDER) for m in mods]  # what --help reads from the sources


def test_an_unknown_command_is_one_line(capsys):
    from rankmap.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["mapp", "x"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "invalid choice: 'mapp'" in err and "'map'" in err


def test_process_start_is_before_the_first_line_of_the_program():
    out = run_python("import time; time.sleep(0.5); from rankmap.deadline import process_start; "
                     "print('SINCE', time.monotonic() - process_start())")
    since = float(out.split("SINCE")[1])
    assert 0.5 <= since < 120
    assert process_start() <= time.monotonic()


SPY = """
import sys, time
time.sleep(1.0)
from rankmap.cli import main, map_cmd
real, seen = map_cmd.map_tasks, []
def spy(*args, deadline=None, **kw):
    if deadline is not None:
        seen.append(deadline.remaining())
    return real(*args, deadline=deadline, **kw)
map_cmd.map_tasks = spy
argv = {argv!r}
if {as_program!r}:
    sys.argv = ["rankmap", *argv]
    main()
else:
    main(argv)
print("LEFT", seen[0])
"""


def test_a_command_limit_counts_from_the_process_start(data_dir):
    """The second a program spent before ``main()`` ran is gone from its
    limit; ``main(argv)`` called by a program counts from the call."""
    argv = ["map", str(data_dir / "graphs/delaunay_n10.graph"), *MACHINE, "--method", "identity",
            "--time-limit", "30", "--json"]
    as_program = float(run_python(SPY.format(argv=argv, as_program=True)).split("LEFT")[1])
    as_call = float(run_python(SPY.format(argv=argv, as_program=False)).split("LEFT")[1])
    assert as_program <= 29.0 and as_program < as_call


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_graph_matches_scipy(seed):
    """CommGraph builds its CSR without scipy; the scipy views and the
    symmetry check agree with scipy's own construction."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n = 40
    src, dst = rng.integers(0, n, 300), rng.integers(0, n, 300)
    w = rng.integers(0, 5, 300).astype(float)
    g = CommGraph.from_edges(src, dst, w, n=n, messages=w + 1)
    ref = sp.coo_array((w, (src, dst)), shape=(n, n)).tocsr()
    ref.setdiag(0)
    ref.eliminate_zeros()
    assert g.self_bytes == pytest.approx(w[src == dst].sum())
    assert (g.bytes != ref).nnz == 0 and g.n_edges == ref.nnz and g.bytes.has_sorted_indices
    assert np.array_equal(g.volume(), (ref + ref.T).sum(axis=1))
    msgs = sp.coo_array((w + 1, (src, dst)), shape=(n, n)).tocsr()
    msgs.setdiag(0)
    msgs.eliminate_zeros()
    assert (g.messages != msgs).nnz == 0
    assert (g.quotient(np.arange(n) // 2).messages.sum() == msgs.sum()
            - sum(msgs[u, u ^ 1] for u in range(n)))
    asym = (ref - ref.T).tocoo()
    first = np.lexsort((asym.col, asym.row))
    first = [(int(asym.row[k]), int(asym.col[k])) for k in first if asym.data[k]]
    assert g.asymmetric_pair() == (first[0] if first else None)
    sym = CommGraph(ref + ref.T)
    assert sym.is_symmetric() and sym.asymmetric_pair() is None
    dense = CommGraph(g.bytes.toarray())
    assert (dense.bytes != g.bytes).nnz == 0


@pytest.mark.parametrize("seed", range(6))
def test_the_hashed_symmetry_check_agrees_with_the_sort(seed, monkeypatch):
    """Large graphs are told symmetric by their hash (``mirror_hash``),
    small ones by a sort: both say the same on symmetric graphs and on
    graphs with one pair changed, missing, or added on one side only."""
    import rankmap.graph as graph_module
    from rankmap import cores

    rng = np.random.default_rng(seed)
    n = 60
    src, dst = rng.integers(0, n, 400), rng.integers(0, n, 400)
    w = rng.integers(1, 5, 400).astype(float)
    cases = [(np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([w, w]))]
    s, d, x = cases[0]
    keep = s != d
    s, d, x = s[keep], d[keep], x[keep]
    k = int(rng.integers(0, s.size))
    cases.append((s, d, np.where(np.arange(s.size) == k, x + 1, x)))  # one weight differs from its mirror's
    cases.append((np.delete(s, k), np.delete(d, k), np.delete(x, k)))  # one mirror missing
    free = [(u, v) for u in range(n) for v in range(n) if u != v and not np.any((s == u) & (d == v))]
    u, v = free[int(rng.integers(0, len(free)))]
    cases.append((np.append(s, u), np.append(d, v), np.append(x, 1.0)))  # one pair without a mirror
    by_sort = [CommGraph.from_edges(*c, n=n).asymmetric_pair() for c in cases]  # small: the exact sort
    assert [p is None for p in by_sort] == [True, False, False, False]
    monkeypatch.setattr(graph_module, "_SORT_CHECK_MAX", 0)
    assert [CommGraph.from_edges(*c, n=n).asymmetric_pair() for c in cases] == by_sort
    graphs = [CommGraph.from_edges(*c, n=n) for c in cases]
    for g in graphs:
        g.symmetric  # B + B^T: 2B where the hash says B is symmetric
    assert [g.known_symmetric() for g in graphs] == [True, False, False, False]
    monkeypatch.setattr(cores, "THREADED_MIN_ENTRIES", 0)  # ... in slices of rows on three threads
    monkeypatch.setattr(cores, "default_workers", lambda: 3)
    assert len(cores.row_slices(CommGraph.from_edges(*cases[0], n=n).rows()[0])) == 3
    assert [CommGraph.from_edges(*c, n=n).asymmetric_pair() for c in cases] == by_sort


def test_the_graph_refuses_what_it_refused():
    with pytest.raises(ValueError, match="square"):
        CommGraph(np.ones((2, 3)))
    with pytest.raises(ValueError, match="negative"):
        CommGraph.from_edges([0], [1], [-1.0], n=2)
    with pytest.raises(ValueError, match="message matrix shape"):
        CommGraph(np.ones((2, 2)), messages=np.ones((3, 3)))


def test_auto_that_cannot_start_in_time_returns_the_given_order_without_loading_auto(data_dir):
    """At a limit below auto's priced first call (its imports), a fresh
    process returns at most the given order's J, cut."""
    from rankmap.algorithms import AUTO_FIRST_CALL

    graph = str(data_dir / "graphs/delaunay_n10.graph")
    limit = str(0.9 * AUTO_FIRST_CALL)
    out = run_python(
        f"import sys, json; sys.argv = {['rankmap', 'map', graph, *MACHINE, '--time-limit', limit, '--json']!r}; "
        "from rankmap.cli import main; main(); "
        "print('AUTO', 'rankmap.algorithms.portfolio.one_to_one' in sys.modules, file=sys.stderr)")
    result = json.loads(out[out.index("{"):out.rindex("}") + 1])
    assert result["deadline_hit"] and result["J"] <= result["J_identity"] and "AUTO False" in out


def test_auto_with_time_for_its_start_runs(data_dir):
    from rankmap.algorithms import AUTO_FIRST_CALL, map_tasks
    from rankmap.formats import read_graph
    from rankmap.topology import topology_from_strings

    g = read_graph(str(data_dir / "graphs/example_weighted.graph"))
    topo = topology_from_strings("4:16:4", "1:10:100")
    done = map_tasks(g, topo, method="auto", work_limit=0.05, time_limit=600 + AUTO_FIRST_CALL)
    given = map_tasks(g, topo, method="identity")
    assert not done.deadline_hit and not np.array_equal(done.pe_of_task, given.pe_of_task)


def test_the_program_exits_fast_with_every_output_whole(data_dir, tmp_path):
    """``python -m rankmap`` leaves by ``os._exit`` (``cli.console``): what it
    printed and wrote is complete, and its exit status is main's."""
    graph = str(data_dir / "graphs/delaunay_n10.graph")
    cmd = [sys.executable, "-m", "rankmap", "map", graph, *MACHINE, "--method", "greedy", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert sorted(result["pe_of_task"]) == list(range(1024))
    out = tmp_path / "order.rankfile"
    proc = subprocess.run(cmd[:-1] + ["-o", str(out), "--as", "openmpi"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert len([line for line in out.read_text().splitlines() if line.startswith("rank ")]) == 1024
    proc = subprocess.run(cmd[:4] + [str(tmp_path / "missing.graph"), *MACHINE], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("under_mpi", [False, True])
def test_the_program_skips_teardown_except_under_mpi(data_dir, under_mpi):
    """The teardown is skipped (an atexit handler never runs), except when
    mpi4py is loaded: MPI_Finalize must run at exit."""
    graph = str(data_dir / "graphs/delaunay_n10.graph")
    argv = ["rankmap", "map", graph, *MACHINE, "--method", "identity"]
    code = ("import atexit, sys; " + ("from mpi4py import MPI; " if under_mpi else "")
            + "atexit.register(lambda: print('TEARDOWN', flush=True)); "
            f"sys.argv = {argv!r}; from rankmap.cli import console; console()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "1024 tasks" in proc.stdout
    assert ("TEARDOWN" in proc.stdout) == under_mpi


def test_checking_a_budget_option_loads_no_method():
    """``reorder_comm(options={"time_limit": L})`` checks its options on every
    rank: a budget is known without importing every method (scipy, KaHIP,
    Mt-KaHyPar: CPU time of every rank inside the call); another key still
    is checked against all of them."""
    out = run_python(
        "import sys; from rankmap.algorithms.options import check_options; "
        "check_options({'time_limit': 0.5, 'work_limit': 1}); "
        "print('LOADED', 'rankmap.algorithms.portfolio.one_to_one' in sys.modules); "
        "check_options({'workers': 2})\n"
        "try:\n    check_options({'time_limt': 1})\nexcept ValueError as exc:\n    print('REFUSED', exc)")
    assert "LOADED False" in out, out
    assert "REFUSED unknown option 'time_limt'" in out, out
    from rankmap.algorithms.options import check_options

    for bad in ({"time_limit": 0}, {"work_limit": float("nan")}, {"time_limit": True}):
        with pytest.raises(ValueError, match="option"):
            check_options(bad)


def test_an_unbuilt_source_tree_says_so(tmp_path):
    """Importing rankmap's sources without their compiled kernels (a source
    tree first on the path, never built) is one ImportError that says what
    to do, not a failure deep inside a mapping."""
    import shutil

    import rankmap

    shutil.copytree(Path(rankmap.__file__).parent, tmp_path / "rankmap",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    # -S: no site-packages, so no installed rankmap (nor an editable install's finder) comes first
    proc = subprocess.run([sys.executable, "-S", "-c", "import rankmap"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 1 and "compiled kernels are missing" in proc.stderr and "pip install" in proc.stderr


def test_importing_rankmap_loads_nothing_heavy():
    """``import rankmap`` and ``rankmap --help`` load nothing else (not
    even numpy): scipy, the partitioners, lxml, matplotlib and the compiled
    kernels are imported where a command's path first needs them."""
    heavy = ("scipy", "kahip", "mtkahypar", "kaminpar", "lxml", "matplotlib", "networkx", "mpi4py",
             "rankmap._kernels", "rankmap.algorithms.refine._kernels", "rankmap.algorithms.construct._kernels")
    out = run_python(f"import sys, rankmap; print('BARE', sorted(m for m in ('numpy', *{heavy!r}) if m in sys.modules))")
    assert "BARE []" in out, out
    out = run_python("import sys; from rankmap.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
                     f"print('HELP', sorted(m for m in ('numpy', *{heavy!r}) if m in sys.modules))")
    assert "HELP []" in out, out


def test_an_exact_split_solves_without_scipy_optimize_and_prints_nothing():
    """The exact splits' LPs and branch and bounds go to HiGHS through
    highspy: scipy.optimize (a slower import than a small search) stays
    unloaded, and the solver writes nothing on standard output, where
    ``--json`` goes."""
    out = subprocess.run([sys.executable, "-c", (
        "import sys, numpy as np; from rankmap.algorithms.refine.exact_groups import "
        "exact_group_refine; from rankmap.graph import CommGraph; "
        "from rankmap.topology.hierarchy import hierarchy_topology; "
        "w = np.zeros((12, 12)); "
        "[w.__setitem__((a, b), 5.0) for c in range(3) for a in range(4 * c, 4 * c + 4) "
        "for b in range(4 * c, 4 * c + 4) if a != b]; "
        "perm = np.random.default_rng(0).permutation(12); g = CommGraph.from_dense(w[perm][:, perm]); "
        "pe, removed, work = exact_group_refine(g, hierarchy_topology([4, 3], [1.0, 10.0]), np.arange(12)); "
        "print(removed > 0, work > 0, 'scipy.optimize' in sys.modules, file=sys.stderr)")],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr.split() == ["True", "True", "False"], (out.stdout, out.stderr)
