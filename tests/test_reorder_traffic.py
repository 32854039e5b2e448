"""Every form reorder_comm accepts for ``traffic`` becomes the same row."""

import numpy as np
import pytest
import scipy.sparse as sp

import rankmap
from rankmap.reorder.traffic import own_row


def _graph():
    return rankmap.CommGraph.from_edges([0, 1, 1, 2], [1, 0, 2, 3], [5.0, 6.0, 7.0, 8.0], n=4)


@pytest.mark.parametrize("traffic", [
    ([0, 2], [6.0, 7.0]),
    {0: 6.0, 2: 7.0},
    np.array([6.0, 0.0, 7.0, 0.0]),
    _graph(),
    _graph().bytes,
    sp.coo_matrix(_graph().bytes.toarray()),
])
def test_every_form_gives_the_row(traffic):
    dst, nbytes = own_row(traffic, 1, 4)
    assert dst.tolist() == [0, 2] and nbytes.tolist() == [6.0, 7.0]


def test_a_graph_file_gives_the_row(tmp_path):
    path = tmp_path / "g.edges"
    path.write_text("0 1 5\n1 0 6\n1 2 7\n2 3 8\n")
    dst, nbytes = own_row(str(path), 1, 4)
    assert dst.tolist() == [0, 2] and nbytes.tolist() == [6.0, 7.0]


@pytest.mark.parametrize("traffic, message", [
    (None, "traffic is required"),
    (([0, 9], [1.0, 1.0]), "destination 9 is not a rank"),
    (([0], [-1.0]), "non-negative"),
    (([0, 1], [1.0]), "2 destinations but 1 byte counts"),
    (([0.5], [1.0]), "integer ranks"),
    (_graph(), None),
    (object(), "cannot use a object"),
])
def test_bad_traffic_is_named(traffic, message):
    size = 5 if isinstance(traffic, rankmap.CommGraph) else 4
    with pytest.raises(ValueError, match=message or "has 4 tasks but the communicator has 5"):
        own_row(traffic, 1, size)
