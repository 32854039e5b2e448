"""Every reader fuzzed (``tests/fuzz_inputs.py``): each family's mutated and
generated inputs with a fixed seed and a small budget, so that CI stays
about a minute; ``benchmarks/fuzz_readers.py`` runs the long campaign.  Below
the families, by name, the inputs fuzzing turns up that take a reader down
a path of its own (a C library reading on forever, a zip's directory, null
metadata, numbers past any machine)."""

from __future__ import annotations

import os
import zipfile

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from rankmap.formats import GRAPH_FORMATS, LAUNCH_FORMATS
from tests.fuzz_inputs import (DATA, ROOT, SCANNED, Case, check, check_subprocess, families,
                               launch_samples, scanned_readers, trace_samples)

#: cases per family and weight unit in CI (fixed seed: the same cases every run)
CI_EXAMPLES = int(os.environ.get("RANKMAP_FUZZ_EXAMPLES", "40"))
#: families whose reader runs in C get their own process per case: fewer cases
CI_SUBPROCESS_EXAMPLES = 6
FAMILIES = {f.name: f for f in families()}


def test_every_reader_and_launch_format_has_a_family():
    covered = {c for f in FAMILIES.values() for c in f.covers}
    assert set(GRAPH_FORMATS) <= covered
    assert {f"launch:{k}" for k in LAUNCH_FORMATS} <= covered
    assert {"topology:hwloc", "topology:file", "topology:switches", "topology:gpu-node",
            "topology:hierarchy", "hosts:file", "hosts:list", "generated"} <= covered
    assert {f"scan:{m}" for m in scanned_readers()} == {"scan:metis", "scan:edge_list"} <= covered


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_fuzz_family(name):
    family = FAMILIES[name]
    examples = CI_SUBPROCESS_EXAMPLES if family.subprocess else CI_EXAMPLES * family.weight
    run = check_subprocess if family.subprocess else check

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), phases=(Phase.generate, Phase.shrink))
    @given(st.data())
    def fuzz(data):
        outcome, problem = run(family.make(data.draw))
        assert problem is None, problem

    before = SCANNED.copy()
    fuzz()
    if name.startswith("scanned-"):  # the scan itself reads a good share, not only its fall-back
        scanned = SCANNED - before
        assert scanned["read"] >= examples // 10, dict(scanned)


# ------------------------------------------------------------- named inputs
def _only(files: dict, argv: list, names: tuple, subprocess: bool = False):
    return (check_subprocess if subprocess else check)(Case(files, argv, names))


def test_an_otf2_event_file_that_reads_on_forever_is_refused():
    """A truncated event file with one record type changed makes the OTF2
    library yield events without end: refused once they pass the count the
    definitions announce."""
    path, files = trace_samples()["otf2"][0]
    data = bytearray(files["otf2/traces/9.evt"][:120])
    data[36] = 0x24
    files = {**files, "otf2/traces/9.evt": bytes(data)}
    outcome, problem = _only(files, ["show", f"{{d}}/{path}"], ("traces.otf2",), subprocess=True)
    assert (outcome, problem) == ("refused", None)


def test_an_otf2_name_that_is_not_utf8_is_one_line():
    path, files = trace_samples()["otf2"][0]
    data = bytearray(files["otf2/traces.def"])
    data[50:53] = b"\xff\xff\xff"
    outcome, problem = _only({**files, "otf2/traces.def": bytes(data)}, ["show", f"{{d}}/{path}"],
                             ("traces.otf2",), subprocess=True)
    assert (outcome, problem) == ("refused", None)


def test_a_zip_with_a_damaged_directory_is_a_damaged_trace():
    data = (ROOT / "profiling/traces/halo2d-4.rmtrace.npz").read_bytes()
    at = data.rfind(b"PK\x01\x02")  # a central directory entry's signature
    bad = data[:at] + b"XX" + data[at + 2:]
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(__import__("io").BytesIO(bad)).namelist()
    for argv in (["show", "{d}/t.rmtrace.npz"], ["convert", "{d}/t.rmtrace.npz", "-o", "{d}/o.mtx"]):
        assert _only({"t.rmtrace.npz": bad}, argv, ("t.rmtrace.npz: damaged",)) == ("refused", None)


def test_a_zip_member_of_an_unknown_compression_is_a_damaged_trace():
    data = bytearray((ROOT / "profiling/traces/halo2d-4.rmtrace.npz").read_bytes())
    data[8:10] = b"\x63\x00"  # the first member's compression method: 99, which zipfile lacks
    at = data.find(b"PK\x01\x02") + 10
    data[at:at + 2] = b"\x63\x00"
    for argv in (["show", "{d}/t.rmtrace.npz"], ["convert", "{d}/t.rmtrace.npz", "-o", "{d}/o.mtx"]):
        assert _only({"t.rmtrace.npz": bytes(data)}, argv, ("t.rmtrace.npz: damaged",)) == \
            ("refused", None)


def test_recorded_negative_bytes_name_the_trace():
    _, files = trace_samples()["liballprof"][0]
    first = sorted(files)[0]
    files = {**files, first: files[first].replace(b":1000:10:", b":1000:-10:", 1)}  # a count of -10
    assert _only(files, ["convert", "{d}/lap", "-o", "{d}/o.mtx"], ("lap",)) == ("refused", None)


def test_a_utf16_hostfile_is_refused_naming_it():
    text = (DATA / "slurm/slurm.hosts").read_text()
    for encoding, said in (("utf-16", "h.hosts: cannot read"), ("utf-16-le", "h.hosts:1: host name")):
        assert _only({"g.edges": b"0 1 5\n", "h.hosts": text.encode(encoding)},
                     ["map", "{d}/g.edges", "--hostfile", "{d}/h.hosts", "--hierarchy", "2",
                      "--method", "identity"], (said,)) == ("refused", None)
    assert _only({"g.edges": b"0 1 5\n"}, ["map", "{d}/g.edges", "--hosts", "cn01 cn02",
                                           "--hierarchy", "2"], ("control or space",)) == \
        ("refused", None)


def test_topology_conf_errors_name_the_file_read():
    conf = (DATA / "slurm/topology.conf").read_bytes().replace(b"dev[6-11]", b"dev[6-7]")
    assert _only({"g.edges": b"0 1 5\n", "fabric.conf": conf},
                 ["map", "{d}/g.edges", "--hosts", "dev[0-17]", "--switches", "{d}/fabric.conf",
                  "--hierarchy", "2"], ("fabric.conf: host 'dev8' is under no switch",)) == \
        ("refused", None)


def test_topo_describes_a_mesh_or_torus():
    for text in (b"mesh 8x8\n", b"torus 4x4x2 cores 2\n"):
        for argv in (["topo", "--topology", "{d}/m.topo"], ["topo", "--topology", "{d}/m.topo", "--json"]):
            assert _only({"m.topo": text}, argv, ()) == ("read", None)


def test_launch_files_with_numbers_past_any_machine_are_refused():
    rankfile = launch_samples()["openmpi"].replace(b"slot=0", b"slot=99999999999999999999", 1)
    bindings = launch_samples()["bind"].replace(b" @1 ", b" 0-99999999999 ", 1)
    logical = launch_samples()["bind"].replace(b" @1 ", b" @99999999999999999999 ", 1)
    for name, data in (("rankfile", rankfile), ("bindings", bindings), ("bindings", logical)):
        files = {"g.edges": b"0 1 5\n" * 8 + b"15 0 1\n", name: data}
        outcome, problem = _only(files, ["eval", "{d}/g.edges", "--mapping", f"{{d}}/{name}",
                                         "--hosts", "cn[01-04]", "--hierarchy", "2:2"], (name,))
        assert (outcome, problem) == ("refused", None)


def test_a_hosts_only_mapping_refused_is_one_line():
    machinefile = b"cn01:2\ncn02:14\n"  # 14 ranks on a host of 4 PEs
    files = {"g.edges": b"".join(b"%d %d 5\n" % (t, (t + 1) % 16) for t in range(16)),
             "machinefile": machinefile}
    assert _only(files, ["eval", "{d}/g.edges", "--mapping", "{d}/machinefile", "--hosts", "cn[01-04]",
                         "--hierarchy", "2:2"], ("machinefile: not one-to-one",)) == ("refused", None)


def test_subprocess_runs_of_broken_inputs_are_one_line_without_traceback():
    """The checks of the in-process runs, in real processes: one line on
    stderr, exit 2, no traceback."""
    cases = [
        ({"a.mtx": b"%%MatrixMarket matrix array real general\n2 2\n1,2\n3\n4\n5\n"},
         ["convert", "{d}/a.mtx", "-o", "{d}/o.edges"], ("a.mtx:3",)),
        ({"n.xml": (DATA / "topologies/8em64t-2mi2ma2c.xml").read_bytes().replace(b"<object", b"<obj\x00", 1)},
         ["topo", "--xml", "{d}/n.xml"], ("n.xml",)),
        ({"t.rmtrace.npz": (ROOT / "profiling/traces/cg-4.rmtrace.npz").read_bytes()[:3000]},
         ["show", "{d}/t.rmtrace.npz"], ("truncated",)),
        ({"h.csv": b"a,b,c,d\n0,1,2,3\n1,0,2,3\n2,2,0,3\n3,3,3,0\n"},
         ["convert", "{d}/h.csv", "-o", "{d}/o.mtx"], ("--format dense",)),
    ]
    for files, argv, names in cases:
        assert _only(files, argv, names, subprocess=True) == ("refused", None), argv



def test_null_optional_metadata_of_a_trace_is_shown():
    """``argv``, ``mpi`` and the other optional fields may be null."""
    import io
    import json

    import numpy as np

    with np.load(ROOT / "profiling/traces/halo2d-4.rmtrace.npz") as z:
        members = {k: z[k] for k in z.files}
    meta = json.loads(members["rankmap_trace"].tobytes())
    meta.update(argv=None, mpi=None, program=None, collectives=None)
    members["rankmap_trace"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **members)
    assert _only({"t.rmtrace.npz": buf.getvalue()}, ["show", "{d}/t.rmtrace.npz"], ()) == ("read", None)
    members["p2p_src"] = np.where(np.arange(members["p2p_src"].size) == 0, -1, members["p2p_src"])
    buf = io.BytesIO()
    np.savez(buf, **members)  # a sender outside COMM_WORLD: only receivers may be (dst -1)
    for argv in (["show", "{d}/t.rmtrace.npz"], ["convert", "{d}/t.rmtrace.npz", "-o", "{d}/o.mtx"]):
        assert _only({"t.rmtrace.npz": buf.getvalue()}, argv, ("t.rmtrace.npz: member 'p2p_src'",)) \
            == ("refused", None)


def test_machines_past_the_pe_bound_are_refused_before_they_are_built():
    """A few bytes of hierarchy or host list would expand to gigabytes of
    tree: refused at ``MAX_PES`` with the count."""
    from rankmap.limits import MAX_PES, MAX_TREE_PES

    assert (MAX_PES, MAX_TREE_PES) == (1 << 24, 1 << 21)  # arrays for a uniform hierarchy, else a tree
    g = {"g.edges": b"0 1 5\n"}
    for argv, said in ((["--hierarchy", "42:20:13:51:130"], "makes 72399600 PEs"),
                       (["--hosts", "n[0-99999]", "--hierarchy", "64"], "100000 hosts make 6400000 PEs")):
        assert _only(g, ["map", "{d}/g.edges", *argv, "--method", "identity"], (said,)) == \
            ("refused", None)


def test_a_cluster_file_names_the_line_of_a_file_it_cannot_read():
    cluster = b"cluster\nhierarchy 8:2 distances 1:10\nnodes dev[0-3]\nswitches fabri.conf\n"
    assert _only({"m.topo": cluster}, ["topo", "--topology", "{d}/m.topo"],
                 ("m.topo:4: ",)) == ("refused", None)


def test_a_dumpi_index_pointing_past_any_file_is_refused():
    path, files = trace_samples()["dumpi"][0]
    data = bytearray(files["dumpi/testtrace-0003.bin"])
    at = data.rfind(bytes.fromhex("ffaadd44554d5049"))  # the index after the last magic
    data[at + 8:at + 16] = b"\xff" * 8  # its first offset: 2^64 - 1
    outcome, problem = _only({**files, "dumpi/testtrace-0003.bin": bytes(data)},
                             ["show", f"{{d}}/{path}"], ("testtrace-0003.bin: DUMPI index points outside",))
    assert (outcome, problem) == ("refused", None)


def test_a_rank_number_past_the_file_is_refused_without_counting_to_it():
    """A rank 10^14 in an mpiP task line or a liballprof file name: the
    first missing rank is named at once (counting every rank up to it
    filled the memory)."""
    _, files = trace_samples()["mpip"][0]
    mpip = files["small.mpiP"].replace(b"Assignment      : 3 ", b"Assignment      : 99999999999999 ", 1)
    assert _only({"small.mpiP": mpip}, ["show", "{d}/small.mpiP"],
                 ("small.mpiP: no '@ MPI Task Assignment' line for rank 3",)) == ("refused", None)
    _, files = trace_samples()["liballprof"][0]
    files = dict(files)
    files["lap/pmpi-trace-rank-99999999999999.txt"] = files.pop("lap/pmpi-trace-rank-3.txt")
    assert _only(files, ["show", "{d}/lap"], ("lacks the file of rank 3",)) == ("refused", None)


def test_mpip_message_counts_not_finite_or_past_int64_are_refused_at_their_line():
    """A matrix row's count of ``inf``, ``nan`` or 1e30 (the cast to whole
    messages overflowed), and finite counts whose sum passes int64."""
    _, files = trace_samples()["mpip"][0]
    text = files["small.mpiP"]
    row = b"0\t3\t4000\t3\n"
    line = text[:text.index(row)].count(b"\n") + 1
    for count, said in ((b"inf", "message count inf is not a finite"),
                        (b"nan", "message count nan is not a finite"),
                        (b"1e30", "message count '1e30' is too large")):
        mpip = text.replace(row, b"0\t3\t4000\t" + count + b"\n", 1)
        for argv in (["show", "{d}/small.mpiP"], ["convert", "{d}/small.mpiP", "-o", "{d}/o.mtx"]):
            assert _only({"small.mpiP": mpip}, argv, (f"small.mpiP:{line}: {said}",)) == \
                ("refused", None)
    twice = text.replace(row, b"0\t3\t4000\t4611686018427387904\n0\t3\t1\t4611686018427387904\n", 1)
    assert _only({"small.mpiP": twice}, ["convert", "{d}/small.mpiP", "-o", "{d}/o.mtx"],
                 ("small.mpiP: the p2p bytes or messages of a pair sum past",)) == ("refused", None)
