"""The distributed refinement with real ranks (oversubscribed): the offline
path (``refine_distributed``, ``rankmap map --distributed``)."""

import json
from pathlib import Path

import numpy as np
import pytest

from mpi_util import ROOT, run_mpi

SCRIPT = str(Path(__file__).parent / "mpi_scripts" / "distributed_offline.py")


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_refine_distributed_equals_the_serial_rounds(n):
    out = run_mpi(n, [SCRIPT], timeout=120).stdout
    for name in ("same-as-serial", "exact-J", "lean-ranks"):
        assert f"CHECK {name} ok" in out, out


@pytest.mark.mpi
def test_map_cli_distributed(tmp_path):
    import rankmap
    from rankmap.formats import write_graph

    grid = np.arange(16).reshape(4, 4)
    src = np.concatenate([grid[:-1].ravel(), grid[:, :-1].ravel()])
    dst = np.concatenate([grid[1:].ravel(), grid[:, 1:].ravel()])
    order = np.random.default_rng(1).permutation(16)  # scrambled: the launch order is bad
    g = rankmap.CommGraph.from_edges(order[np.concatenate([src, dst])], order[np.concatenate([dst, src])],
                                     np.full(2 * len(src), 100.0), n=16)
    path = tmp_path / "grid.edges"
    write_graph(g, str(path))
    proc = run_mpi(4, ["-m", "rankmap", "map", str(path), "--hierarchy", "4:4", "--distances", "1:10",
                       "--method", "identity", "--distributed", "--json"], timeout=120, cwd=ROOT)
    report = json.loads(proc.stdout)
    assert sorted(report["pe_of_task"]) == list(range(16))
    assert report["J"] < report["J_before"]
    assert report["J"] == pytest.approx(rankmap.mapping_cost(g, rankmap.topology_from_strings("4:4", "1:10"),
                                                             report["pe_of_task"]))
