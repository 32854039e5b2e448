"""Every launch file rankmap writes reads back wherever rankmap reads a
mapping (``eval --mapping``, ``show --mapping``): the same PEs where the
format names them, the same hosts where it names hosts only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from rankmap.formats import LAUNCH_FORMATS, write_all_launch_files, write_launch_file
from rankmap.formats.common import FormatError
from rankmap.topology.tree import core_slots
from rankmap.formats.launch_files import READERS, launch_kind, read_launch_file
from rankmap.topology import hierarchy_topology, read_hwloc_xml
from rankmap.topology.cluster import compose_cluster, restrict_to_slots
from tests.test_hostile_inputs import run_cli

DATA = Path(__file__).parent / "data"
SMT_NODE = DATA / "topologies/16em64t-4s2c2t.v2-hwloc2.14.xml"  # 4 packages x 2 cores x 2 threads


def machines():
    plain = compose_cluster([(f"cn{i:02d}", hierarchy_topology([4, 2], [1, 10], host_prefix=None))
                             for i in range(1, 4)])
    smt = read_hwloc_xml(SMT_NODE)
    two_smt = compose_cluster([("a", smt), ("b", smt)])
    # a trace's machine: some cores of each node, each slot bound to two CPUs
    slots = np.array([0, 2, 5, 16, 17, 30])
    bound = restrict_to_slots(two_smt, slots).with_pe_cpus(
        [(int(two_smt.pe_os_index[p]), int(two_smt.pe_os_index[p]) + 100) for p in np.sort(slots)])
    return {"hierarchy": plain, "smt": two_smt, "bound-cpus": bound}


def test_every_written_format_has_a_reader():
    assert set(READERS) == set(LAUNCH_FORMATS)


@pytest.mark.parametrize("name", list(machines()))
@pytest.mark.parametrize("fill", ["one-to-one", "some-slots-empty"])
def test_written_launch_files_read_back_to_the_same_placement(tmp_path, name, fill):
    topo = machines()[name]
    rng = np.random.default_rng(7)
    n = topo.n_pes if fill == "one-to-one" else topo.n_pes - 2
    pe = rng.permutation(topo.n_pes)[:n]
    written = write_all_launch_files(pe, topo, tmp_path)
    assert set(written) - {"hydra_rankmap"} == set(LAUNCH_FORMATS)
    cores = core_slots(topo)
    for kind, path in written.items():
        if kind == "hydra_rankmap":  # read with the machinefile
            continue
        assert launch_kind(path, Path(path).read_text()) == kind
        renamed = tmp_path / f"renamed-{kind}"  # the content alone tells the format
        renamed.write_text(Path(path).read_text())
        if kind == "hydra" and "hydra_rankmap" in written:
            Path(f"{renamed}.rankmap").write_text(Path(written["hydra_rankmap"]).read_text())
        for f in (path, renamed):
            placement = read_launch_file(f, n)
            assert placement.kind == kind
            got = placement.pe_of_task(topo)
            assert got.shape == (n,)
            hosts = topo.pe_host[got].tolist()
            if kind == "mpich":  # slot order: the ranks in PE order, filling the first n slots
                assert np.array_equal(np.argsort(got), np.argsort(pe)), kind
            elif kind == "perm" or kind == "bind":
                assert np.array_equal(got, pe), kind
            elif kind == "openmpi":  # a core: the same core on the same host
                assert hosts == topo.pe_host[pe].tolist() and np.array_equal(cores[got], cores[pe])
            else:  # hydra, slurm: hosts only
                assert hosts == topo.pe_host[pe].tolist(), kind
            order, at = placement.launch_order()
            assert sorted(order.tolist()) == list(range(n))
            if at is not None:
                assert at == [topo.pe_host[pe[t]] for t in order]


def test_many_ranks_per_pe_read_back(tmp_path):
    topo = machines()["hierarchy"]
    pe = np.repeat(np.arange(topo.n_pes), 2)[::-1].copy()  # two ranks on every PE
    for kind in LAUNCH_FORMATS:
        f = tmp_path / kind
        write_launch_file(pe, topo, str(f), kind)
        placement = read_launch_file(f, pe.size)
        if kind == "mpich":
            with pytest.raises(FormatError, match="names no PEs"):
                placement.pe_of_task(topo)
            continue
        got = placement.pe_of_task(topo)
        assert topo.pe_host[got].tolist() == topo.pe_host[pe].tolist(), kind
        assert np.bincount(got, minlength=topo.n_pes).max() == 2, kind


def test_hosts_the_machine_lacks_are_named(tmp_path):
    topo = machines()["hierarchy"]
    f = tmp_path / "slurm.hostfile"
    f.write_text("cn01\ncn09\n")
    with pytest.raises(FormatError, match=r"slurm.hostfile: host 'cn09' is not in the machine"):
        read_launch_file(f, 2).pe_of_task(topo)


@pytest.mark.parametrize("text, message", [
    ("rank 0=a slot=0\nrank 0=a slot=1\n", "rank 0 listed twice"),
    ("rank 0=a slot=0\nrank 5=a slot=1\n", "rank 5 is not in the job's ranks 0..1"),
    ("rank 0=a slot=0\n", "no line for rank 1"),
    ("rank 0=a slot=x\nrank 1=a slot=0\n", "expected 'rank R=HOST slot=K'"),
    ("# MPICH_RANK_ORDER\n0,0\n", "rank 0 listed twice"),
    ("# MPICH_RANK_ORDER\n0,7\n", "'7' is not in the ranks 0..1"),
    ("a:1\nb:x\n", "expected 'host[:count]'"),
    ("a b\nc d\n", "not a launch file rankmap reads"),
    ("", "empty mapping file"),
])
def test_malformed_launch_files_are_one_line_naming_the_file(tmp_path, text, message):
    f = tmp_path / "m"
    f.write_text(text)
    with pytest.raises(FormatError, match=re.escape(message)) as info:
        read_launch_file(f, 2).pe_of_task(machines()["hierarchy"])
    assert str(info.value).startswith(str(f)) and "\n" not in str(info.value)


def test_show_and_eval_take_every_file_map_writes(tmp_path):
    """The relaunch a user runs: map a trace onto named hosts with --as all,
    then show and eval each file written; eval of the files that name PEs
    or cores reproduces map's J."""
    trace = Path(__file__).resolve().parents[1] / "profiling/traces/halo2d-16.rmtrace.npz"
    launch = tmp_path / "launch"
    rc, out, err = run_cli(["map", trace, "--hosts", "cn[01-04]", "--hierarchy", "2:2",
                            "--method", "greedy", "--as", "all", "-o", launch, "--json"])
    assert rc == 0, err
    mapped_J = json.loads(out)["J"]
    machine = ["--hosts", "cn[01-04]", "--hierarchy", "2:2"]
    for kind in LAUNCH_FORMATS:
        f = launch / {"perm": "mapping.txt", "mpich": "MPICH_RANK_ORDER", "hydra": "machinefile",
                      "openmpi": "rankfile", "slurm": "slurm.hostfile", "bind": "bindings"}[kind]
        rc, out, err = run_cli(["show", trace, "--plot", tmp_path / f"{kind}.png", "--mapping", f])
        assert rc == 0, f"{kind}: {err}"
        rc, out, err = run_cli(["eval", trace, "--mapping", f, *machine, "--json"])
        assert rc == 0, f"{kind}: {err}"
        if kind in ("perm", "mpich", "openmpi", "bind"):
            assert json.loads(out)["J"] == pytest.approx(mapped_J), kind
