"""The machine a trace is mapped onto when the user names hosts: slots per
host from the trace where the names match, from --hierarchy/--topology or
--slots otherwise; a machine smaller than the job is an error with the
numbers unless --eps asks for several ranks per slot; hosts the trace never
ran on are one warning naming both lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rankmap.topology import hierarchy_topology
from rankmap.topology.export import hwloc_xml
from rankmap.trace import RankInfo, Trace, read_trace
from tests.test_hostile_inputs import run_cli

ROOT = Path(__file__).resolve().parents[1]
HOSTS = [f"cn{i:02d}" for i in range(1, 5)]


def recorded(path: Path, pus: int, binding) -> Path:
    """halo2d's 16-rank traffic as if recorded on cn01..cn04, 4 ranks per
    host, each host a node of ``pus`` PUs, rank r bound to ``binding(r)``."""
    src = read_trace(ROOT / "profiling/traces/halo2d-16.rmtrace.npz")
    node = hierarchy_topology([2, pus // 2] if pus > 2 else [pus], [1.0, 10.0][: 2 if pus > 2 else 1],
                              host_prefix=None)
    info = {r: RankInfo(HOSTS[r // 4], binding(r), "complete", 1.0, 2.0) for r in range(16)}
    Trace(16, src.edges, src.phases, info, {h: hwloc_xml(node, h) for h in HOSTS}, dict(src.meta),
          str(path)).write(path)
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    return {"bound": recorded(d / "bound.rmtrace.npz", 4, lambda r: [r % 4]),
            # four ranks per 2-PU host, unbound: the hosts of an emulated cluster on a small machine
            "shared": recorded(d / "shared.rmtrace.npz", 2, lambda r: [0, 1])}


def mapped(argv):
    rc, out, err = run_cli(["map", *argv, "--method", "greedy", "--json"])
    return rc, (json.loads(out) if rc == 0 else None), err


@pytest.mark.parametrize("kind", ["bound", "shared"])
def test_the_trace_alone_gives_one_slot_per_recorded_rank(traces, kind):
    rc, out, err = mapped([traces[kind]])
    assert rc == 0, err
    assert out["n_pes"] == 16 and not err


@pytest.mark.parametrize("kind", ["bound", "shared"])
def test_fewer_slots_than_ranks_is_an_error_with_the_numbers(traces, kind, tmp_path):
    rc, _out, err = mapped([traces[kind], "--hosts", "cn[01-03]"])
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert "16 ranks but the machine has 12 slots on 3 host(s) (cn01, cn02, cn03: 4 each)" in err
    assert "--eps" in err
    hostfile = tmp_path / "hosts"
    hostfile.write_text("cn01:4\ncn02:4\ncn03:4\ncn04:3\n")
    rc, _out, err = mapped([traces[kind], "--hostfile", hostfile])
    assert rc == 2 and "16 ranks but the machine has 15 slots on 4 host(s)" in err, err
    rc, out, err = mapped([traces[kind], "--hosts", "cn[01-03]", "--eps", "0.03"])
    assert rc == 0 and out["n_pes"] == 12, err  # asked for: several ranks per slot


@pytest.mark.parametrize("kind", ["bound", "shared"])
def test_a_new_host_gets_as_many_slots_as_each_recorded_host(traces, kind, tmp_path):
    rc, out, err = run_cli(["map", traces[kind], "--hosts", "cn[01-05]", "--method", "greedy",
                            "--as", "slurm", "-o", tmp_path / "hosts"])
    assert rc == 0, err
    assert "20 PEs on 5 host(s)" in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: 1 of the hosts --hosts names (cn05) "
                                                   "is not one the trace ran on (cn01, cn02, cn03, "
                                                   "cn04); it gets 4 slots"), err
    placed = (tmp_path / "hosts").read_text().split()
    assert len(placed) == 16 and max(placed.count(h) for h in set(placed)) <= 4


def test_hierarchy_describes_the_node_and_its_slots(traces):
    rc, _out, err = mapped([traces["bound"], "--hosts", "cn[01-04]", "--hierarchy", "2"])
    assert rc == 2 and "16 ranks but the machine has 8 slots on 4 host(s) (cn01, cn02, cn03, " \
                      "cn04: 2 each)" in err, err
    rc, out, err = mapped([traces["bound"], "--hosts", "cn[01-04]", "--hierarchy", "2", "--slots", "4"])
    assert rc == 0 and out["n_pes"] == 16, err
    rc, _out, err = mapped([traces["bound"], "--slots", "4"])
    assert rc == 2 and "--slots counts ranks per host of --hosts or --hostfile" in err


def test_hosts_the_trace_never_ran_on_are_one_warning_naming_both(traces):
    rc, out, err = mapped([traces["bound"], "--hosts", "cn[1-4]"])
    assert rc == 0, err
    lines = err.strip().splitlines()
    assert lines == ["warning: none of the hosts --hosts names (cn1, cn2, cn3, cn4) is one the "
                     "trace ran on (cn01, cn02, cn03, cn04); they get 4 slots, as each host of "
                     "the trace had (--slots N to say otherwise)"]
    assert out["n_pes"] == 16


def test_the_recorded_hosts_give_the_trace_own_machine(traces):
    rc, alone, err = mapped([traces["bound"]])
    rc2, named, err2 = mapped([traces["bound"], "--hosts", "cn[01-04]"])
    assert rc == rc2 == 0 and not err2, err2
    assert named["n_pes"] == alone["n_pes"] == 16
    assert named["before"] == alone["before"] == "recorded"
    assert named["J_before"] == alone["J_before"]
