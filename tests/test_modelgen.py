"""Model creation: an application graph cut into n blocks becomes an
n-task communication graph."""

import numpy as np
import pytest

from rankmap.modelgen import model_graph, partition_into_blocks
from tests.quality_instances import grid_graph


@pytest.mark.parametrize("how", ["bisection", "multisection"])
def test_blocks_are_balanced_and_quotient_keeps_cut_bytes(how):
    app = grid_graph(16, 16)
    block = partition_into_blocks(app, 16, how=how, hierarchy=[4, 4], seed=1)
    counts = np.bincount(block, minlength=16)
    assert counts.min() > 0 and counts.max() <= np.floor(1.03 * 16)
    model = model_graph(app, 16, how=how, hierarchy=[4, 4], seed=1)
    src, dst, w = app.coo()
    assert model.n == 16
    assert model.total_bytes == pytest.approx(w[block[src] != block[dst]].sum())
    assert model.vertex_weights.sum() == app.n


def test_model_creation_errors():
    app = grid_graph(4, 4)
    with pytest.raises(ValueError, match="hierarchy"):
        partition_into_blocks(app, 4, how="multisection")
    with pytest.raises(ValueError, match="model creation"):
        partition_into_blocks(app, 4, how="spectral")
    with pytest.raises(ValueError, match="blocks"):
        partition_into_blocks(app, 17)
