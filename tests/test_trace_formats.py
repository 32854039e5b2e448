"""Readers of other tools' traces (Score-P OTF2, mpiP, SST DUMPI,
liballprof): per-pair bytes of real samples against an independent count
written here from the raw records, the recorded hosts, and one clear line
(exit 2) for malformed or truncated files."""

from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from benchmarks.trace_readers import write_dumpi, write_liballprof, write_mpip, write_otf2
from rankmap.cli import main
from rankmap.formats import FormatError, detect_format, read_graph
from rankmap.formats import dumpi as dumpi_reader
from rankmap.formats.registry import read_recorded
from rankmap.formats.traffic_table import Progress, collective_plan

DATA = Path(__file__).parent / "data" / "traces"
OTF2 = DATA / "otf2" / "traces.otf2"
MPIP = DATA / "mpip" / "miniAMR.x.64.253515.1.mpiP"
DUMPI = DATA / "dumpi"
LIBALLPROF = next((p for p in (Path(__file__).parents[1] / "../shared/data/traffic/atlahs-liballprof-sweep3d",
                               Path("/work/shared/data/traffic/atlahs-liballprof-sweep3d")) if p.is_dir()),
                  None)


def pairs(graph) -> dict:
    src, dst, b = graph.coo()
    return {(int(s), int(d)): float(x) for s, d, x in zip(src, dst, b)}


def off_diagonal(counts: dict) -> dict:
    return {k: v for k, v in counts.items() if k[0] != k[1] and v}


def cli_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


# ------------------------------------------------------------------- OTF2
def _need_otf2():
    return pytest.importorskip("otf2")


def test_otf2_sample_pairs_match_the_events_read_with_the_otf2_api():
    otf2 = _need_otf2()
    expected: dict = {}
    with otf2.reader.open(str(OTF2)) as tr:
        world = next(g for g in tr.definitions.groups if g.group_type == otf2.GroupType.COMM_LOCATIONS)
        rank = {loc.group: r for r, loc in enumerate(world.members)}
        for loc, ev in tr.events:
            if isinstance(ev, (otf2.events.MpiSend, otf2.events.MpiIsend)):
                peer = ev.communicator.group.members[ev.receiver] if ev.communicator.group.members \
                    else loc
                key = (rank[loc.group], rank[peer.group])
                expected[key] = expected.get(key, 0) + ev.msg_length
    trace = read_recorded(str(OTF2))
    assert detect_format(str(OTF2)) == "otf2"
    assert pairs(trace.graph("p2p")) == off_diagonal(expected)
    assert trace.hosts == [f"kn{i}.eth" for i in range(1, 11)]
    assert trace.graph("collective").total_bytes > 0


def test_otf2_written_trace_threads_subcommunicator_and_collectives(tmp_path):
    _need_otf2()
    info = write_otf2(str(tmp_path / "t"), ranks=6, rounds=64, threads=2, sub_every=4)
    trace = read_recorded(str(tmp_path / "t"), collectives="tree")  # the directory works too
    assert pairs(trace.graph("p2p")) == off_diagonal(info["expected"])
    assert trace.hosts == info["hosts"]
    # allreduce of 8 bytes every 16 rounds, along the profiler's tree plan
    want: dict = {}
    for r in range(6):
        for q, f, _ in collective_plan("tree", "allreduce", r, 6, 0):
            want[(r, q)] = want.get((r, q), 0) + 4 * 8 * f
    assert pairs(trace.graph("collective")) == want
    assert read_recorded(str(tmp_path / "t"), collectives="none").graph("collective").total_bytes == 0


def test_otf2_read_in_passes_over_location_groups_gives_the_same_run(tmp_path, monkeypatch):
    _need_otf2()
    from rankmap.formats import otf2 as otf2_reader

    write_otf2(str(tmp_path / "t"), ranks=5, rounds=40, threads=2, sub_every=3)
    whole = read_recorded(str(tmp_path / "t"))
    monkeypatch.setattr(otf2_reader, "_PASS_EVENTS", 150)  # a pass per location or two
    assert len(otf2_reader._passes(_locations(tmp_path / "t" / "traces.otf2"))) > 4
    parts = read_recorded(str(tmp_path / "t"))
    for kind in ("p2p", "collective"):
        assert pairs(parts.graph(kind)) == pairs(whole.graph(kind))


def _locations(anchor):
    import otf2

    with otf2.reader.open(str(anchor)) as tr:
        return list(tr.definitions.locations)


def test_otf2_truncated_event_file_is_one_line(tmp_path, capsys):
    _need_otf2()
    shutil.copytree(OTF2.parent, tmp_path / "otf2")
    evt = tmp_path / "otf2" / "traces" / "3.evt"
    evt.write_bytes(evt.read_bytes()[: evt.stat().st_size // 2])
    with pytest.raises(FormatError, match="traces.otf2"):
        read_graph(str(tmp_path / "otf2" / "traces.otf2"))
    err = cli_error(capsys, ["show", str(tmp_path / "otf2" / "traces.otf2")])
    assert "traces.otf2" in err


def test_otf2_garbage_anchor_and_missing_package(tmp_path, monkeypatch):
    bad = tmp_path / "traces.otf2"
    bad.write_text("not an anchor\n")
    if _has_otf2():
        with pytest.raises(FormatError, match="not a readable OTF2 trace"):
            read_graph(str(bad))
    import sys

    monkeypatch.setitem(sys.modules, "otf2", None)
    with pytest.raises(FormatError, match=re.escape('pip install "rankmap[otf2]"')):
        read_graph(str(bad))


def _has_otf2() -> bool:
    try:
        import otf2  # noqa: F401
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------- mpiP
def test_mpip_sample_pairs_match_the_matrix_text():
    text = MPIP.read_text()
    block = text.split("Start Communication Matrix")[1].split("End Communication Matrix")[0]
    expected = {(int(a), int(b)): float(c) for a, b, c, _ in
                re.findall(r"^(\d+)\t(\d+)\t(\d+)\t(\d+)$", block, re.M)}
    trace = read_recorded(str(MPIP))
    assert detect_format(str(MPIP)) == "mpip"
    assert pairs(trace.graph("p2p")) == off_diagonal(expected)
    hosts = dict(re.findall(r"^@ MPI Task Assignment\s*: (\d+) (\S+)", text, re.M))
    assert trace.hosts == [hosts[str(r)] for r in range(64)]
    assert trace.graph("collective").total_bytes == 0  # mpiP's matrix has none


def test_mpip_without_matrix_says_so_and_truncated_names_the_line(tmp_path, capsys):
    text = MPIP.read_text()
    stock = tmp_path / "stock.mpiP"
    stock.write_text(text.split("------- Start Communication Matrix")[0])
    err = cli_error(capsys, ["map", str(stock), "--hierarchy", "64"])
    assert "only per-rank totals" in err and "stock.mpiP" in err
    cut = tmp_path / "cut.mpiP"
    cut.write_text(text.split("Statistics of rank: 40")[0])
    err = cli_error(capsys, ["show", str(cut)])
    assert re.search(r"cut\.mpiP:\d+: truncated", err)
    bad = tmp_path / "bad.mpiP"
    bad.write_text(text.replace("3\t7\t", "3\tseven\t", 1))
    assert re.search(r"bad\.mpiP:\d+: matrix row", cli_error(capsys, ["show", str(bad)]))


def test_mpip_map_uses_the_recorded_hosts_as_before(capsys):
    import json

    assert main(["map", str(MPIP), "--hierarchy", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["before"] == "recorded"


# ------------------------------------------------------------------ DUMPI
def _index(data: bytes) -> dict:
    """The trailing index and datatype sizes, decoded here independently."""
    magic = 0xFFAADD44554D5049
    for k in (8, 7, 6, 5):
        if struct.unpack_from(">Q", data, len(data) - 8 * k)[0] == magic:
            vals = struct.unpack_from(f">{k - 1}Q", data, len(data) - 8 * k + 8)
            break
    vals = (0,) * (8 - k) + vals
    sizelbl, header, body, footer = vals[0], vals[3], vals[4], vals[5]
    n = struct.unpack_from(">i", data, sizelbl)[0]
    return {"sizes": struct.unpack_from(f">{n}i", data, sizelbl + 4), "body": body,
            "header": header, "footer": footer, "version": tuple(data[header:header + 3])}


def _walk(path) -> tuple[dict, dict]:
    """Label counts and (comm, dest) -> bytes of Isend/Send of the sample
    traces, decoding only the calls they contain."""
    data = Path(path).read_bytes()
    ix = _index(data)
    status = 14 if ix["version"] >= (0, 6, 3) else 10
    pos = ix["body"] + 8
    counts, sent = {}, {}

    def u(fmt):
        nonlocal pos
        v = struct.unpack_from(">" + fmt, data, pos)
        pos += struct.calcsize(">" + fmt)
        return v

    def statuses(mask):
        if mask & 3:
            pos_n = u("i")[0]
            u(f"{status * pos_n}x")

    while True:
        label = u("H")[0]
        if label == 293:
            break
        counts[label] = counts.get(label, 0) + 1
        mask = u("B")[0]
        u(f"{(2 if mask & 64 else 0) + (12 if mask & 4 else 0) + (12 if mask & 8 else 0)}x")
        assert not mask & 128
        if label in (0, 8):  # Send, Isend
            count, dtype, dest, _tag, comm = u("iHiiH")
            if label == 8:
                u("i")
            sent[(comm, dest)] = sent.get((comm, dest), 0) + count * ix["sizes"][dtype]
        elif label in (1, 12):  # Recv, Irecv
            u("iHiiH")
            u("i") if label == 12 else statuses(mask)
        elif label == 13:  # Wait
            u("i")
            statuses(mask)
        elif label == 18:  # Waitall: count, then the requests array with its own length
            u("i")
            n = u("i")[0]
            u(f"{n}i")
            statuses(mask)
        elif label == 52:  # Barrier
            u("H")
        elif label == 60:  # Alltoall
            u("iHiHH")
        elif label == 65:  # Allreduce
            u("iHBH")
        elif label == 72:  # Comm_group
            u("HH")
        elif label == 76:  # Group_incl
            u("Hi")
            n = u("i")[0]
            u(f"{n}iH")
        elif label in (81, 82):  # Comm_size, Comm_rank
            u("Hi")
        elif label == 85:  # Comm_create
            u("HHH")
        elif label == 124:  # Init
            argc = u("i")[0]
            for _ in range(argc):
                u(f"{u('i')[0]}x")
        elif label == 125:  # Finalize: no arguments
            pass
        else:
            raise AssertionError(f"label {label} not in the samples")
    return counts, sent


def _footer_counts(path) -> list:
    data = Path(path).read_bytes()
    f = _index(data)["footer"]
    assert struct.unpack_from(">Q", data, f)[0] == 0xF007FEE7
    return list(struct.unpack_from(">291I", data, f + 8))


@pytest.mark.parametrize("prefix,ranks", [("testbgp", 7), ("testtrace", 4)])
def test_dumpi_call_counts_match_the_footer_and_pairs_the_records(prefix, ranks):
    files = sorted(DUMPI.glob(f"{prefix}-*.bin"))
    assert len(files) == ranks
    expected: dict = {}
    for r, f in enumerate(files):
        footer = _footer_counts(f)
        rf = dumpi_reader._RankFile(str(f))
        st = dumpi_reader._read_rank(dumpi_reader._Rank(r, "tree"), rf, Progress(0, ""))
        assert st.counts == footer  # every call type (and the total) against the file's own
        counts, sent = _walk(f)
        assert {k: v for k, v in enumerate(footer[:290]) if v} == counts
        for (comm, dest), b in sent.items():
            # world (2) in both samples, or testbgp's Comm_create of all ranks
            key = (r, dest)
            expected[key] = expected.get(key, 0) + b
    trace = read_recorded(str(DUMPI / f"{prefix}.meta"))
    assert pairs(trace.graph("p2p")) == off_diagonal(expected)
    assert len(set(trace.hosts)) == 1 and trace.hosts[0]


def test_dumpi_written_trace_and_truncation(tmp_path, capsys):
    info = write_dumpi(str(tmp_path), "w", ranks=5, rounds=40)
    trace = read_recorded(str(tmp_path / "w-0002.bin"))  # any .bin finds its .meta
    assert pairs(trace.graph("p2p")) == off_diagonal(info["expected"])
    assert trace.hosts == info["hosts"]
    want: dict = {}
    for r in range(5):
        for q, f, _ in collective_plan("ring", "allreduce", r, 5, 0):
            want[(r, q)] = want.get((r, q), 0) + 2 * 8 * 2 * f
    assert pairs(read_recorded(str(tmp_path / "w.meta"), collectives="ring").graph("collective")) \
        == pytest.approx(want)
    # a body cut short: the index is intact, the record stream is not
    f = tmp_path / "w-0003.bin"
    data = bytearray(f.read_bytes())
    ix = _index(bytes(data))
    data[ix["body"] + 8 + 21 * 9] = 0xFF  # the label of the 10th record (a Send: 21 bytes each)
    f.write_bytes(bytes(data))
    err = cli_error(capsys, ["show", str(tmp_path / "w.meta")])
    assert "w-0003.bin: record" in err
    f.write_bytes(bytes(data[: len(data) // 2]))
    err = cli_error(capsys, ["map", str(tmp_path / "w.meta"), "--hierarchy", "8"])
    assert "w-0003.bin" in err and "truncated" in err


# ------------------------------------------------------------- liballprof
@pytest.mark.skipif(LIBALLPROF is None, reason="../shared/data liballprof sample not present")
def test_liballprof_sample_pairs_match_the_send_lines():
    expected: dict = {}
    for f in LIBALLPROF.glob("pmpi-trace-rank-*.txt"):
        me = int(re.search(r"(\d+)\.txt$", f.name).group(1))
        for count, size, dest in re.findall(r"^MPI_Send:[^:]*:[^:]*:(\d+):\d+,(\d+),[^:]*:(\d+):",
                                            f.read_text(), re.M):
            expected[(me, int(dest))] = expected.get((me, int(dest)), 0) + int(count) * int(size)
    trace = read_recorded(str(LIBALLPROF / "pmpi-trace-rank-1.txt"))
    assert detect_format(str(LIBALLPROF)) == "liballprof"
    assert pairs(trace.graph("p2p")) == off_diagonal(expected)
    assert trace.hosts == [f"odin07{i}.cs.indiana.edu" for i in range(1, 5)]


def test_liballprof_written_trace_and_malformed_lines(tmp_path, capsys):
    write_liballprof(str(tmp_path), ranks=4, rounds=32)
    trace = read_recorded(str(tmp_path))
    assert pairs(trace.graph("p2p")) == {(r, (r + 1) % 4): 32 * (10 + r) * 8.0 for r in range(4)}
    assert trace.hosts == ["node0"] * 4  # "# hostname: node0." (no domain name)
    f = tmp_path / "pmpi-trace-rank-2.txt"
    lines = f.read_text().splitlines(keepends=True)
    f.write_text("".join(lines[:10]) + lines[10][:25] + "\n" + "".join(lines[11:]))
    err = cli_error(capsys, ["show", str(tmp_path)])
    assert "pmpi-trace-rank-2.txt:11:" in err
    f.write_text("".join(lines[:-1]))  # no MPI_Finalize: the last buffer was lost
    assert "truncated" in cli_error(capsys, ["show", str(tmp_path)])
    f.write_text("".join(lines).replace(",2,4:", ",0,2:", 1))  # a sub-communicator
    assert "communicator of 2 ranks" in cli_error(capsys, ["show", str(tmp_path)])
    os.remove(tmp_path / "pmpi-trace-rank-1.txt")
    assert "rank 1" in cli_error(capsys, ["show", str(tmp_path / "pmpi-trace-rank-0.txt")])


# ------------------------------------------------------------- the CLI
@pytest.mark.parametrize("path,hierarchy", [(OTF2, "1:10"), (DUMPI / "testbgp.meta", "8"),
                                            (DUMPI / "testtrace.meta", "4"), (MPIP, "16:4")])
def test_real_samples_map_and_show(path, hierarchy, capsys):
    if path == OTF2:
        _need_otf2()
    assert main(["map", str(path), "--hierarchy", hierarchy]) == 0
    assert "J (bytes x distance)" in capsys.readouterr().out
    assert main(["show", str(path), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "recorded  by" in out and "top 3 pairs" in out


def test_mpip_benchmark_writer_roundtrip(tmp_path):
    info = write_mpip(str(tmp_path / "b.mpiP"), 12)
    g = read_graph(str(tmp_path / "b.mpiP"))
    assert g.bytes.nnz == info["events"] and np.isclose(
        g.total_bytes, 12 * 1000 * sum(d + 1 for d in (1, 2, 3, 9, 10, 11)))


@pytest.mark.skipif(LIBALLPROF is None, reason="../shared/data liballprof sample not present")
def test_liballprof_sample_maps_with_its_hosts_as_before_and_shows(capsys):
    import json

    assert main(["map", str(LIBALLPROF), "--hierarchy", "1:4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["before"] == "recorded"
    assert main(["show", str(LIBALLPROF / "pmpi-trace-rank-0.txt")]) == 0
    assert "odin071.cs.indiana.edu (1 ranks)" in capsys.readouterr().out
