"""EZTrace ``eztrace_stats`` output: the directory or the
``communication_matrix_p2p.message_size.dat`` file (its ``nb_messages``
twin gives message counts)."""

from __future__ import annotations

import os

from ..graph import CommGraph
from .common import FormatError
from .dense import read_dense

EZTRACE_SIZE = "communication_matrix_p2p.message_size.dat"
EZTRACE_COUNT = "communication_matrix_p2p.nb_messages.dat"


def read_eztrace(path: str) -> CommGraph:
    """``eztrace_stats`` point-to-point matrices (row = sender)."""
    size_file = os.path.join(path, EZTRACE_SIZE) if os.path.isdir(path) else path
    if not os.path.exists(size_file):
        raise FileNotFoundError(f"{size_file}: no EZTrace message_size matrix")
    g = read_dense(size_file)
    count_file = size_file.replace("message_size", "nb_messages")
    if count_file != size_file and os.path.exists(count_file):
        counts = read_dense(count_file)
        if counts.n != g.n:
            raise FormatError(f"{count_file}: {counts.n} ranks but {size_file} has {g.n}")
        g = CommGraph(g.bytes, counts.bytes)
    return g
