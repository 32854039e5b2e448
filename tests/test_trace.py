"""The trace format: round trip, merge of rank parts, missing ranks, bad files,
and the show/merge commands."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from rankmap.cli import main as cli
from rankmap.trace import (RankInfo, Trace, is_trace, merge_traces, part_path, read_trace)


def _part(rank, n, sends, phase_names=("main",), host="nodeA", status="complete"):
    """A one-rank trace: ``sends`` = [(dst, bytes, msgs, phase_index)] of p2p."""
    empty = {f: np.zeros(0, dtype=np.int64) for f in ("src", "dst", "phase", "msgs")}
    empty["bytes"] = np.zeros(0)
    edges = {k: dict(empty) for k in ("p2p", "collective", "rma")}
    if sends:
        dst, b, m, ph = (np.array(c) for c in zip(*sends))
        edges["p2p"] = {"src": np.full(len(dst), rank), "dst": dst, "bytes": b.astype(float),
                        "msgs": m, "phase": ph}
    return Trace(n, edges, list(phase_names), {rank: RankInfo(host, [rank], status, 1.0, 2.0)},
                 {host: None}, {"collectives": "tree", "argv": ["app.py"]}, f"part{rank}")


def test_round_trip_and_numpy_only_reading(tmp_path):
    t = merge_traces([_part(0, 3, [(1, 100, 2, 0), (2, 5, 1, 1)], ("main", "solve")),
                      _part(1, 3, [(0, 7, 1, 0), (-1, 9, 1, 0)]),
                      _part(2, 3, [], host="nodeB")])
    path = t.write(tmp_path / "x.rmtrace.npz")
    assert is_trace(path)
    back = read_trace(path)
    assert back.hosts == ["nodeA", "nodeA", "nodeB"] and back.bindings == [[0], [1], [2]]
    assert back.phases == ["main", "solve"]
    g = back.graph()
    assert g.bytes[0, 1] == 100 and g.bytes[0, 2] == 5 and g.bytes[1, 0] == 7
    assert g.messages[0, 1] == 2
    assert back.graph(phase="solve").total_bytes == 5
    assert back.external_bytes() == 9
    # readable with numpy + json alone
    with np.load(path) as z:
        meta = json.loads(z["rankmap_trace"].tobytes())
        assert meta["format"] == "rankmap-trace" and meta["nranks"] == 3
        assert z["p2p_bytes"].sum() == 121


def test_parts_directory_reports_missing_ranks_by_number(tmp_path):
    out = tmp_path / "run.rmtrace.npz"
    for r in (0, 2):
        _part(r, 4, [((r + 1) % 4, 10, 1, 0)], status="flushed").write(part_path(out, r))
    parts = part_path(out, 0).parent
    assert is_trace(parts)
    with pytest.warns(UserWarning, match=r"2 of 4 ranks \(1, 3\)"):
        t = read_trace(parts)
    assert list(t.missing_ranks) == [1, 3]
    assert t.graph().total_bytes == 20
    code = cli(["merge", str(parts)])
    assert code == 0 and out.exists()
    assert cli(["merge", str(parts), "-o", str(tmp_path / "s.rmtrace.npz"), "--strict"]) == 2


def test_merge_rejects_duplicates_and_other_runs():
    with pytest.raises(ValueError, match="recorded twice"):
        merge_traces([_part(0, 2, []), _part(0, 2, [])])
    with pytest.raises(ValueError, match="not parts of the same run"):
        merge_traces([_part(0, 2, []), _part(1, 3, [])])


def test_bad_files_are_named(tmp_path):
    junk = tmp_path / "junk.npz"
    np.savez(junk, a=np.arange(3))
    assert not is_trace(junk) and not is_trace(tmp_path / "nope")
    with pytest.raises(ValueError, match="junk.npz: not a rankmap trace"):
        read_trace(junk)
    text = tmp_path / "t.rmtrace.npz"
    text.write_text("hello")
    with pytest.raises(ValueError, match="t.rmtrace.npz"):
        read_trace(text)
    with pytest.raises(OSError, match="no such trace"):
        read_trace(tmp_path / "absent.rmtrace.npz")
    t = _part(0, 2, [(1, 1, 1, 0)])
    with pytest.raises(ValueError, match="no phase 'x'"):
        t.graph(phase="x")
    with pytest.raises(ValueError, match="unknown traffic kind"):
        t.graph("bogus")


def test_show_prints_summary_and_plot(tmp_path, capsys):
    t = merge_traces([_part(0, 2, [(1, 2048, 4, 0)]), _part(1, 2, [(0, 10, 1, 0)])])
    path = t.write(tmp_path / "s.rmtrace.npz")
    png = tmp_path / "m.png"
    assert cli(["show", str(path), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "ranks     2 (2 recorded)" in out and "0 -> 1" in out and "2.00 KiB" in out
    assert "events    none" in out  # no event log: map judges by the link time alone
    assert png.stat().st_size > 1000


def test_topology_is_none_without_host_xml():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _part(0, 1, []).topology() is None


def test_show_plot_before_and_after_a_mapping(tmp_path, capsys):
    # pairs (0,1) and (2,3) talk, launched round-robin on hosts a, b
    t = merge_traces([_part(0, 4, [(1, 4096, 1, 0)], host="a"), _part(1, 4, [(0, 4096, 1, 0)], host="b"),
                      _part(2, 4, [(3, 4096, 1, 0), (0, 64, 1, 0)], host="a"),
                      _part(3, 4, [(2, 4096, 1, 0)], host="b")])
    path = t.write(tmp_path / "rr.rmtrace.npz")
    png = tmp_path / "m.png"
    assert cli(["show", str(path), "--plot", str(png)]) == 0
    assert "bytes within a node: 0.4%" in capsys.readouterr().out   # only 2 -> 0 stays on a
    for name, text in [("slurm.hostfile", "a\na\nb\nb\n"),
                       ("rankfile", "rank 0=a slot=0\nrank 1=a slot=1\nrank 2=b slot=0\nrank 3=b slot=1\n")]:
        (tmp_path / name).write_text(text)
        assert cli(["show", str(path), "--plot", str(png), "--mapping", str(tmp_path / name)]) == 0
        assert "bytes within a node: 0.4% -> 99.6%" in capsys.readouterr().out, name  # 2 -> 0 now crosses
    (tmp_path / "perm").write_text("3\n2\n1\n0\n")
    assert cli(["show", str(path), "--plot", str(png), "--mapping", str(tmp_path / "perm")]) == 0
    assert png.stat().st_size > 1000
    (tmp_path / "short").write_text("a\nb\n")
    assert cli(["show", str(path), "--plot", str(png), "--mapping", str(tmp_path / "short")]) == 2
    assert "short: 2 lines for a job of 4 ranks" in capsys.readouterr().err
    assert cli(["show", str(path), "--mapping", str(tmp_path / "perm")]) == 2
    assert "--mapping goes with --plot" in capsys.readouterr().err


def test_unbound_ranks_are_placed_by_host_without_machine_options(tmp_path, data_dir, capsys):
    """Ranks launched round-robin on four hosts and left unbound (hydra's
    default; every rank may run on any CPU of its host): the trace gives
    one slot per rank on each host and each rank's host as the "before",
    exactly what naming the hosts with --hosts gives."""
    xml = (data_dir / "topologies/16em64t-4s2c2t.v2-hwloc2.14.xml").read_text()
    hosts = ["cn01", "cn02", "cn03", "cn04"]
    parts = [_part(r, 16, [((r + 1) % 16, 1000, 1, 0), ((r - 1) % 16, 1000, 1, 0)], host=hosts[r % 4])
             for r in range(16)]
    t = merge_traces(parts)
    t.info = {r: i._replace(binding=list(range(16))) for r, i in t.info.items()}
    t.host_topology_xml = dict.fromkeys(hosts, xml)
    topo, pe_of_rank = t.topology_and_placement()
    assert topo.n_pes == 16 and sorted(topo.hosts()) == hosts
    assert [topo.pe_host[pe_of_rank[r]] for r in range(16)] == [hosts[r % 4] for r in range(16)]
    path = t.write(tmp_path / "rr.rmtrace.npz")
    reports = []
    for extra in ([], ["--hosts", "cn[01-04]"]):
        assert cli(["map", str(path), "--work-limit", "0.2", "--json", *extra]) == 0
        reports.append(json.loads(capsys.readouterr().out))
    assert reports[0]["before"] == "recorded" and reports[0]["n_pes"] == 16
    assert reports[0]["J_before"] == reports[1]["J_before"] and reports[0]["J"] == reports[1]["J"]
    assert reports[0]["J"] < reports[0]["J_before"]  # a ring dealt round-robin: every pair crossed nodes


def _panel_hosts(ax):
    """The host names along the top of one heat-map panel, left to right."""
    return [x.get_text() for c in ax.child_axes for x in c.get_xticklabels()]


def test_heat_map_lists_the_hosts_in_order_in_both_panels(tmp_path):
    """Ranks launched round-robin with rank 0 on cn03, and a launch file that
    puts rank 0 on cn10: both panels group the ranks by host in the hosts'
    own order, numbers compared as numbers (cn9 before cn10)."""
    import matplotlib.pyplot as plt

    from rankmap.cli.show_cmd import heat_map

    hosts = ["cn03", "cn10", "cn9", "cn01"]
    t = merge_traces([_part(r, 8, [((r + 1) % 8, 4096, 1, 0)], host=hosts[r % 4]) for r in range(8)])
    (tmp_path / "slurm.hostfile").write_text("".join(hosts[(r // 2 + 1) % 4] + "\n" for r in range(8)))
    (tmp_path / "rankfile").write_text("".join(f"rank {r}={hosts[(r // 2 + 1) % 4]} slot={r % 2}\n"
                                               for r in range(8)))
    for launch in ("slurm.hostfile", "rankfile"):
        fig, shares = heat_map(t, mapping=str(tmp_path / launch))
        before, after = fig.axes[:2]
        assert _panel_hosts(before) == _panel_hosts(after) == ["cn01", "cn03", "cn9", "cn10"], launch
        assert [x.get_text() for x in before.get_yticklabels()] == ["3", "7", "0", "4", "2", "6", "1", "5"]
        assert [x.get_text() for x in after.get_yticklabels()] == ["4", "5", "6", "7", "2", "3", "0", "1"]
        assert shares == [0.0, 0.5]
        plt.close(fig)


def test_heat_map_colours_bytes_linearly_unless_asked_for_log(tmp_path):
    """By default a cell's colour is in proportion to its bytes, so a 26 MiB
    halo cell dominates 40 B of a collective; --scale log shows both."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm, Normalize

    from rankmap.cli import build_parser
    from rankmap.cli.show_cmd import heat_map

    args = build_parser().parse_args(["show", "t.rmtrace.npz", "--plot", "m.png"])
    assert (args.traffic, args.scale) == ("all", "linear")
    t = merge_traces([_part(0, 3, [(1, 26 * 2**20, 1, 0), (2, 40, 1, 0)]), _part(1, 3, [(0, 26 * 2**20, 1, 0)]),
                      _part(2, 3, [(0, 40, 1, 0)])])
    fig, _ = heat_map(t)
    linear = fig.axes[0].images[0].norm
    assert type(linear) is Normalize and (linear.vmin, linear.vmax) == (0.0, 26 * 2**20)
    assert linear(40) < 1e-5  # the collective's cell next to white
    plt.close(fig)
    fig, _ = heat_map(t, scale="log")
    log = fig.axes[0].images[0].norm
    assert isinstance(log, LogNorm) and log.vmin <= 40 and log(40) == 0.0
    plt.close(fig)
    png = tmp_path / "log.png"
    assert cli(["show", str(t.write(tmp_path / "t.rmtrace.npz")), "--plot", str(png), "--scale", "log"]) == 0
    assert png.stat().st_size > 1000


def test_merge_names_only_the_rank_without_a_finished_marker(tmp_path):
    """A launcher that lets the others finish: only the dead rank lacks the
    marker; merge names it with the time its data stops, --strict fails."""
    out = tmp_path / "run.rmtrace.npz"
    for r in range(3):
        _part(r, 3, [((r + 1) % 3, 10, 1, 0)], status="flushed" if r == 1 else "complete") \
            .write(part_path(out, r))
    parts = part_path(out, 0).parent
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert cli(["merge", str(parts)]) == 0
    lines = [ln for ln in text.getvalue().splitlines() if "no finished marker" in ln]
    assert len(lines) == 1 and lines[0].strip().startswith("rank 1:") and "data stops at" in lines[0]
    assert cli(["merge", str(parts), "-o", str(tmp_path / "s.rmtrace.npz"), "--strict"]) == 2


def test_strict_merge_of_nothing_fails(tmp_path):
    out = tmp_path / "run.rmtrace.npz"
    for r in range(2):
        _part(r, 2, []).write(part_path(out, r))
    assert cli(["merge", str(part_path(out, 0).parent), "--strict"]) == 2


def test_the_network_a_site_describes_prices_the_recorded_hosts(tmp_path, data_dir, monkeypatch):
    """RANKMAP_NETWORK (a cluster file's network line, as an emulated
    cluster gives every rank) is recorded and prices the links between the
    recorded hosts; without it the defaults do; text that does not read is
    left out with one warning."""
    from rankmap.emulate import ClusterSpec
    from rankmap.profile.parts import site_network
    from rankmap.topology.message_cost import message_costs

    xml = (data_dir / "topologies/16em64t-4s2c2t.v2-hwloc2.14.xml").read_text()
    hosts = ["cn01", "cn02", "cn02"]  # ranks 1 and 2 share their host's CPUs: placed by host
    t = merge_traces([_part(r, 3, [((r + 1) % 3, 1000, 1, 0)], host=hosts[r]) for r in range(3)])
    t.info = {r: i._replace(binding=list(range(16))) for r, i in t.info.items()}
    t.host_topology_xml = dict.fromkeys(hosts, xml)

    def between_hosts(trace):
        topo, pe = trace.topology_and_placement()
        costs = message_costs(topo)
        top = topo.lca(pe[:1], pe[1:2])
        return float(costs.alpha[top][0]), 1 / float(costs.inverse[top][0]), costs.source

    default = between_hosts(t)
    line = ClusterSpec(nodes=2, slots=2, bandwidth="50mbit").network_line()
    monkeypatch.setenv("RANKMAP_NETWORK", line)
    t.meta.update(site_network())
    t = read_trace(t.write(tmp_path / "net.rmtrace.npz"))
    assert t.meta["network"] == line == "network 2 distances 100 bandwidths 50mbit latencies 40us"
    alpha, beta, _ = between_hosts(t)
    assert alpha == pytest.approx(40e-6) and beta <= 50e6 / 8 < default[1]
    t.meta["network"] = "network 2 distances x"
    with pytest.warns(UserWarning, match="RANKMAP_NETWORK does not read"):
        assert between_hosts(t) == default
    monkeypatch.delenv("RANKMAP_NETWORK")
    assert site_network() == {}
