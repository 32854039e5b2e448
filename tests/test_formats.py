import numpy as np
import pytest

from rankmap.formats import FormatError, detect_format, read_graph, write_graph
from rankmap.graph import CommGraph


def test_metis_real_graph(data_dir):
    g = read_graph(data_dir / "graphs/3elt.graph")
    assert (g.n, g.n_edges) == (4720, 2 * 13722)
    assert g.is_symmetric()
    assert g.total_bytes == 2 * 13722  # unit edges, counted at both ends


def test_metis_weighted(data_dir):
    g = read_graph(data_dir / "graphs/example_weighted.graph")
    assert g.n == 132 and g.is_symmetric()
    assert not np.all(g.vertex_weights == 1)


def test_metis_formats_and_comments(tmp_path):
    f = tmp_path / "g.graph"
    # fmt 11: vertex weight, then (neighbour weight) pairs; vertex 3 has no neighbours
    f.write_text("% a comment\n3 1 11\n5 2 7\n4 1 7\n1\n")
    g = read_graph(f)
    assert g.vertex_weights.tolist() == [5, 4, 1]
    assert g.bytes[0, 1] == 7 and g.bytes[1, 0] == 7
    # fmt 0: an isolated vertex is a blank line
    f.write_text("3 1\n2\n1\n\n")
    assert read_graph(f).n == 3


@pytest.mark.parametrize("text,msg", [
    ("3 2\n2\n1 3\n", "has 2 vertex lines"),
    ("2 1\n2\n3\n", "outside 1..2"),
    ("2 1 1\n2 5\n1 4\n", "not symmetric"),
    ("2 2\n2\n1\n", "2m = 4"),
    ("x y\n", "integers"),
    ("2 1 7\n", "fmt"),
    ("2 1\n2 x\n1\n", "expected numbers"),
    ("2 1 1\n2\n1 1\n", "pairs"),
])
def test_metis_errors_name_file_and_line(tmp_path, text, msg):
    f = tmp_path / "bad.graph"
    f.write_text(text)
    with pytest.raises(FormatError, match=msg) as info:
        read_graph(f)
    assert "bad.graph" in str(info.value)


def test_metis_error_line_number(tmp_path):
    f = tmp_path / "bad.graph"
    f.write_text("% c\n3 2\n2\n1 3\n2 9\n")
    with pytest.raises(FormatError, match=r"bad.graph:5: vertex 3: neighbour 9"):
        read_graph(f)


def test_matrix_market_pattern_symmetric(data_dir):
    g = read_graph(data_dir / "graphs/jagmesh7.mtx")
    assert g.n == 1138 and g.is_symmetric() and g.n_edges == 2 * 3156


def test_matrix_market_general_and_errors(tmp_path):
    f = tmp_path / "a.mtx"
    f.write_text("%%MatrixMarket matrix coordinate integer general\n% c\n3 3 3\n1 2 10\n2 1 4\n3 3 9\n")
    g = read_graph(f)
    assert g.bytes[0, 1] == 10 and g.bytes[1, 0] == 4 and g.self_bytes == 9
    f.write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 -1\n")
    with pytest.raises(FormatError, match="negative"):
        read_graph(f)
    assert read_graph(f, weights="abs").bytes[0, 1] == 1
    f.write_text("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 2 1\n")
    with pytest.raises(FormatError, match="nnz = 2"):
        read_graph(f)
    f.write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 5 1\n")
    with pytest.raises(FormatError, match=r"a.mtx:3"):
        read_graph(f)


def test_edge_list_csv_and_whitespace(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("src,dst,bytes,count\n0,1,100,2\n1,0,50,1\n2,0,8,1\n0,1,1,1\n")
    g = read_graph(f)
    assert g.n == 3 and g.bytes[0, 1] == 101 and g.messages[0, 1] == 3
    f2 = tmp_path / "t.txt"
    f2.write_text("# comment\n0 1 100\n1 0 50\n")
    assert detect_format(str(f2)) == "edges"
    assert read_graph(f2).messages is None
    f2.write_text("0 1 100\n1 x 50\n")
    with pytest.raises(FormatError, match=r"t.txt:2"):
        read_graph(f2)


def test_dense_formats(data_dir, tmp_path):
    g = read_graph(data_dir / "traffic/app.mat")
    assert g.n == 64 and detect_format(str(data_dir / "traffic/app.mat")) == "dense"
    lulesh = read_graph(data_dir / "traffic/lulesh64.size.csv")
    assert lulesh.n == 64 and not lulesh.is_symmetric()
    f = tmp_path / "bad.mat"
    f.write_text("0 1 2\n1 0 2\n")
    with pytest.raises(FormatError, match="not square"):
        read_graph(f)
    f.write_text("0 1\n1 0 2\n")
    with pytest.raises(FormatError, match=r"bad.mat:2"):
        read_graph(f)


def test_self_traffic_dropped_with_note():
    g = CommGraph.from_dense([[5, 1], [2, 7]])
    assert g.self_bytes == 12 and g.n_edges == 2


OMPI_RANK0 = ("# POINT TO POINT\n"
              "E\t0\t1\t4096 bytes\t2 msgs sent\t0,0,1,1\n"
              "I\t0\t2\t64 bytes\t1 msgs sent\n"
              "# OSC\n# COLLECTIVES\nC\t0\t1\t8 bytes\t1 msgs sent\n"
              "D\tMPI_COMM_WORLD\tprocs: 0,1,2\nO2A\t0\t8 bytes\t1 msgs sent\n")
OMPI_RANK1 = "# POINT TO POINT\nE\t1\t0\t100 bytes\t1 msgs sent\t1,0,0\n"


def test_open_mpi_monitoring(tmp_path):
    (tmp_path / "prof.0.prof").write_text(OMPI_RANK0)
    (tmp_path / "prof.1.prof").write_text(OMPI_RANK1)
    (tmp_path / "prof.2.prof").write_text("# POINT TO POINT\n")
    g = read_graph(tmp_path)  # a directory of per-rank files
    assert g.bytes[0, 1] == 4096 and g.bytes[1, 0] == 100 and g.messages[0, 1] == 2
    assert g.bytes[0, 2] == 0
    gi = read_graph(str(tmp_path / "prof"), fmt="ompi", include_internal=True)  # the prefix
    assert gi.bytes[0, 2] == 64
    assert detect_format(str(tmp_path / "prof.0.prof")) == "ompi"
    (tmp_path / "prof.1.prof").write_text("E\t1\t0\tlots bytes\t1 msgs sent\n")
    with pytest.raises(FormatError, match=r"prof.1.prof:1"):
        read_graph(tmp_path)


def test_eztrace_stats(tmp_path):
    (tmp_path / "communication_matrix_p2p.message_size.dat").write_text("0 800 0 \n400 0 0 \n0 0 0 \n")
    (tmp_path / "communication_matrix_p2p.nb_messages.dat").write_text("0 2 0 \n1 0 0 \n0 0 0 \n")
    g = read_graph(tmp_path)
    assert g.n == 3 and g.bytes[0, 1] == 800 and g.messages[1, 0] == 1


@pytest.mark.parametrize("ext", ["graph", "mtx", "edges", "mat"])
def test_writers_round_trip(data_dir, tmp_path, ext):
    g = read_graph(data_dir / "traffic/lulesh64.size.csv")
    out = tmp_path / f"out.{ext}"
    write_graph(g, str(out))
    back = read_graph(out)
    expected = g.symmetric if ext == "graph" else g.bytes
    assert abs(back.bytes - expected).max() == 0


def test_unknown_format_is_a_clear_error(tmp_path):
    f = tmp_path / "x.bin"
    f.write_text("hello\n")
    with pytest.raises(FormatError, match="--format"):
        read_graph(f)
    with pytest.raises(FileNotFoundError):
        read_graph(tmp_path / "missing.graph")
