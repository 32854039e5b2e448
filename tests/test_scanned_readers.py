"""The whole-file scanning of large METIS and edge-list files reads exactly
what the line loop reads, and leaves every file it cannot read plainly
(and every error) to the line loop."""

import numpy as np
import pytest

from rankmap import cores
from rankmap.formats import FormatError, columns, edge_list, metis, read_graph
from rankmap.formats.columns import scan_numbers


def _same(a, b):
    assert a.n == b.n
    for x, y in zip(a._b, b._b):
        assert np.array_equal(x, y)
    assert np.array_equal(a.vertex_weights, b.vertex_weights)
    assert (a.messages is None) == (b.messages is None)
    if a.messages is not None:
        assert (a.messages != b.messages).nnz == 0


@pytest.fixture(params=["numpy", "compiled", "compiled on threads"])
def scanned(monkeypatch, request):
    """Every file through the scanning path, whatever its size: its numpy
    passes, or plain blocks by the compiled pass as in large files, or
    that in blocks of 8 bytes scanned three at a time."""
    monkeypatch.setattr(metis, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(edge_list, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(columns, "COMPILED_MIN_BYTES", 1 << 62 if request.param == "numpy" else 0)
    if request.param == "compiled on threads":
        monkeypatch.setattr(columns, "BLOCK", 8)
        monkeypatch.setattr(cores, "default_workers", lambda: 3)


METIS_PLAIN = [
    "3 2\n2\n1 3\n2\n",                        # fmt 0
    "3 1\n2\n1\n\n",                           # an isolated vertex: a blank line
    "3 2 1\n2 7 3 1\n1 7\n1 1\n",             # edge weights, columns unsorted
    "3 1 11\n5 2 7\n4 1 7\n1\n",              # vertex and edge weights
    "3 1 10\n5 2\n4 1\n1\n",                  # vertex weights only
    "3 1 100\n9 2\n9 1\n9\n",                 # vertex sizes
    "3 2\r\n2\r\n1 3\r\n2\r\n\n\n",           # CRLF, trailing blank lines
    "3 2\n2\n1 3\n2",                          # no newline at the end
    "   3 2\n 2 \n1   3\n\t2\n",               # spacing
    "% comment first\n3 2\n2\n1 3\n2\n",       # a comment before the header
]


@pytest.mark.parametrize("text", METIS_PLAIN)
def test_metis_scanned_equals_line_loop(tmp_path, scanned, text):
    f = tmp_path / "g.graph"
    f.write_text(text)
    got = metis._read_scanned(str(f))
    assert got is not None, "a plain file is read by scanning"
    _same(got, metis._read_lines(str(f)))


@pytest.mark.parametrize("text", [
    "3 2\n2\n1 3\n% late comment\n2\n",   # a comment among the vertices
    "3 2\n2\n1 3\n2\n7\n",                # a fourth vertex line
    "3 2\n2\n1 -3\n2\n",                  # a sign
    "2 1 1\n2 5\n1 4\n",                  # not symmetric
    "2 1\n2\n3\n",                        # neighbour out of range
    "2 1\n1\n2\n",                        # self-loops
    "2 2\n2\n1\n",                        # m does not match
    "2 1 1\n2\n1 1\n",                    # a neighbour without its weight
    "2 1\n2 x\n1\n",                      # a word
    "2 1 11 1\n1 2 1\n1 1 1\n",            # ncon
])
def test_metis_unusual_files_go_to_the_line_loop(tmp_path, scanned, text):
    f = tmp_path / "g.graph"
    f.write_text(text)
    assert metis._read_scanned(str(f)) is None
    try:
        expected = metis._read_lines(str(f))
    except FormatError as exc:
        with pytest.raises(FormatError) as info:
            read_graph(f)
        assert str(info.value) == str(exc)  # the same message, file and line
    else:
        _same(read_graph(f), expected)


def test_metis_real_graph_scanned(data_dir, scanned):
    path = str(data_dir / "graphs/3elt.graph")
    _same(metis._read_scanned(path), metis._read_lines(path))
    weighted = str(data_dir / "graphs/example_weighted.graph")
    got = metis._read_scanned(weighted)
    _same(got if got is not None else read_graph(weighted), metis._read_lines(weighted))


EDGES_PLAIN = [
    "0 1 100\n1 0 50\n2 0 8\n0 1 1\n",
    "0,1,100,2\n1,0,50,1\n2,0,8,1\n0,1,1,1\n",
    "0 1 1.5e3 2\n1 0 0.25 1\n\n2 0 8 1\n",
    "0\t1\t100\r\n1\t0\t50\r\n",
    "0 1 100\n1 0 50",
    "1 0 7\n0 0 5\n",                      # self-traffic, dropped with its total kept
    "# src dst bytes\n\n  # more\n0 1 5\n",   # comments before the first edge (write_edge_list's)
]


@pytest.mark.parametrize("text", EDGES_PLAIN)
def test_edge_list_scanned_equals_line_loop(tmp_path, scanned, monkeypatch, text):
    f = tmp_path / "t.txt"
    f.write_text(text)
    got = edge_list._read_scanned(str(f))
    assert got is not None
    monkeypatch.setattr(edge_list, "FAST_MIN_BYTES", 1 << 40)
    expected = edge_list.read_edge_list(str(f))
    _same(got, expected)
    assert got.self_bytes == expected.self_bytes


@pytest.mark.parametrize("text", [
    "src,dst,bytes\n0,1,100\n",    # a header row
    "0 1 100\n# c\n1 0 100\n",     # a comment after the first edge
    "0 1 100\n1 0 50 2\n",         # three and four columns
    "0 1.0 100\n",                 # a rank with a decimal point
    "1e1 0 100\n",                 # a rank in exponent notation
    "0 1 -5\n",                    # a sign
    "0 1 1e400\n",                 # not finite
    "0 1 100 2.5\n",               # a fractional message count
    "0 1 100 7 9\n",               # five columns
])
def test_edge_list_unusual_files_go_to_the_line_loop(tmp_path, scanned, monkeypatch, text):
    f = tmp_path / "t.txt"
    f.write_text(text)
    assert edge_list._read_scanned(str(f)) is None


def test_scan_reads_across_blocks(tmp_path, monkeypatch, scanned):
    """Lines cut by the block boundary and a line longer than a block."""
    monkeypatch.setattr(columns, "BLOCK", 7)
    f = tmp_path / "n.txt"
    f.write_text("1 22 333\n4444 55555 6\n\n7 8 9 10 11 12 13 14\n")
    scan = scan_numbers(str(f), 0, dtype=np.int64)
    assert scan.values.tolist() == [1, 22, 333, 4444, 55555, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    assert scan.per_line.tolist() == [3, 3, 0, 8]


@pytest.mark.parametrize("text", [
    b"1 22 333\n4444\t55555 6\n\n7 8\n", b"5 6", b"\n\n", b"  9  \n 10", b"0 007 9223372036854775806\n", b"9223372036854775807\n",
    b"9223372036854775808\n", b"1 2\r\n3\r\n", b"1 -2\n", b"1.5 2\n", b"1 # 2\n", b"12,3\n",
])
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_the_compiled_pass_reads_plain_text_as_the_numpy_passes_and_declines_the_rest(text, dtype):
    """Digits and separators: the same numbers and counts per line; a
    carriage return, a sign, a decimal point, another character or a
    number past int64: declined (None), for the numpy passes to decide."""
    from rankmap.formats.columns import SEPARATORS, _scan_block, _scan_plain, _table
    from rankmap.formats._columns import scan_digits

    is_sep = _table(SEPARATORS)
    spaces = bytes.maketrans(SEPARATORS, b" " * len(SEPARATORS))
    got = _scan_plain(scan_digits, text, is_sep, dtype)
    expected = _scan_block(text, _table(b"0123456789.-" + SEPARATORS), is_sep, None, spaces, dtype)
    plain = all(c in b"0123456789 \t\n," for c in text) and not any(big in text for big in (b"9223372036854775807", b"9223372036854775808")) \
        and any(c in b"0123456789" for c in text)
    assert (got is not None) == plain
    if got is not None:
        assert expected is not None
        for a, b in zip(got, expected):
            assert a.dtype == b.dtype and np.array_equal(a, b)


def test_rows_in_order_are_kept_or_canonicalised_as_from_edges():
    from rankmap.graph import CommGraph

    canonical = CommGraph.from_rows(np.array([0, 2, 3, 4]), np.array([1, 2, 0, 0]), np.array([5.0, 1.0, 5.0, 1.0]))
    assert canonical._b[1] is not None and canonical.self_bytes == 0 and canonical.is_symmetric()
    # unsorted columns, a repeated pair, the diagonal, a zero: summed, sorted and dropped as from_edges does
    indptr, indices = np.array([0, 4, 5, 6]), np.array([2, 1, 1, 0, 0, 0])
    data = np.array([1.0, 2.0, 3.0, 7.0, 5.0, 0.0])
    rows = CommGraph.from_rows(indptr, indices, data)
    edges = CommGraph.from_edges(np.repeat(np.arange(3), np.diff(indptr)), indices, data, n=3)
    _same(rows, edges)
    assert rows.self_bytes == edges.self_bytes == 7.0


def test_an_integer_past_int64_is_read_as_the_line_loop_reads_it(tmp_path, scanned, monkeypatch):
    """numpy reads 99999999999999999999 as 2^63 - 1 where Python reads
    1e20: the scan reparses such a block as floats (edge lists) or leaves
    the file to the line loop (METIS, whose counts are integers)."""
    f = tmp_path / "t.edges"
    f.write_text("0 1 99999999999999999999\n1 0 5 \n")
    got = edge_list._read_scanned(str(f))
    assert got is not None and got.coo()[2].tolist() == [1e20, 5.0]
    monkeypatch.setattr(edge_list, "FAST_MIN_BYTES", 1 << 40)
    _same(got, edge_list.read_edge_list(str(f)))
    g = tmp_path / "g.graph"
    g.write_text("2 1 1\n2 9223372036854775808\n1 9223372036854775808\n")
    assert metis._read_scanned(str(g)) is None


@pytest.mark.parametrize("text", [
    "# src dst\rs 1 2\n0 1 5\n",     # a carriage return inside a comment: a line of its own
    "0 1\r5 2\n1 0 5 1\n",           # ... inside the edges: two lines of two fields
    "# (0-based rank\xd8)\n0 1 5\n",  # a comment that is not UTF-8 (latin-1)
])
def test_edge_lines_that_the_line_loop_splits_or_refuses_go_to_it(tmp_path, scanned, text):
    f = tmp_path / "t.edges"
    f.write_bytes(text.encode("latin-1"))
    assert edge_list._read_scanned(str(f)) is None
    with pytest.raises(FormatError, match="t.edges"):
        read_graph(f)


@pytest.mark.parametrize("text", ["% c\xd8\n2 1\n2\n1\n", "2\r1\n2\n1\n", "2 1\n2\r\n1\r\r\n"])
def test_metis_lines_that_the_line_loop_splits_or_refuses_go_to_it(tmp_path, scanned, text):
    f = tmp_path / "g.graph"
    f.write_bytes(text.encode("latin-1"))
    assert metis._read_scanned(str(f)) is None
