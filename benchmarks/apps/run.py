"""Real MPI applications, judged by their own timers, on an emulated cluster
(network namespaces joined by rate-limited links; root needed).

For each application given as ``--app NAME=MPI:COMMAND`` (MPI: the one it
was built against, ``mpich`` or ``openmpi``), the pipeline is the user's:

1. record: a round-robin launch of ``python -m rankmap.profile -o TRACE
   COMMAND`` (a compiled program is recorded through the PMPI library; under
   Open MPI the profiler is started by Open MPI's mpirun);
2. map: ``rankmap map TRACE --as all -o DIR --json``, no further options;
3. run, in rounds whose order rotates, the launcher's block and round-robin
   orders and rankmap's printed relaunch line for that MPI (``# MPICH
   (hydra)``, or ``# Open MPI 4`` / ``5`` by the mpirun's version), with
   the cluster's launcher options put after the launcher word;
4. read the application's own timers (``timers.py``).

Before every run a probe (``shm_probe.c``, built with the MPI's ``mpicc``)
runs with the same launch line and reports each rank's host, CPUs and the
size of its ``MPI_COMM_TYPE_SHARED`` communicator: a run whose ranks did not
land on the hosts the order names, or whose shared-memory communicators are
not the ranks of the host, is flagged.  The same probe, launched with a
hostfile of slot counts and no order option, tells which order is the
launcher's default.

Reported per application and order: the median, minimum and maximum over
rounds of the application's time, its further timers, the bytes that crossed
the network, and rankmap's median over the better of block and round-robin
(with the median of the per-round ratios beside it: the orders of a round
ran back to back).  Writes the rows as JSON, a bar plot, and the results
section of a Markdown page (between its ``<!-- apps:begin -->`` and
``<!-- apps:end -->`` markers).

  python benchmarks/apps/run.py --rounds 5 \\
      --app 'hpcg-mpich=mpich:/opt/hpcg-mpich/bin/xhpcg 16 16 16' \\
      --app 'lammps=openmpi:lmp -in in.melt -var n 20 -var steps 200 -log none' \\
      --input lammps=/opt/lammps/in.melt
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from launch import MPIS, Command, LaunchError, Launcher, find_relaunch, parse_relaunch  # noqa: E402
from timers import TimerError, reader_for  # noqa: E402

from rankmap.bind import read_bindings  # noqa: E402
from rankmap.cpulist import parse_cpulist  # noqa: E402
from rankmap.emulate import ClusterSpec, EmulatedCluster  # noqa: E402
from rankmap.trace import read_trace  # noqa: E402

ORDERS = ["block", "round-robin", "rankmap"]
UNPINNED = "rankmap-unpinned"   # rankmap's hosts without rankmap-bind (--unpinned)


class RunFailed(RuntimeError):
    pass


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def launch(cmd: Command, cwd: Path, timeout: float, what: str) -> tuple[str, float]:
    """Run ``cmd`` in ``cwd`` (its output kept there as ``NAME.out``,
    ``NAME.err``); its standard output and wall time.  The whole process
    group goes on a timeout."""
    name = what.split()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd.argv, cwd=cwd, env={**os.environ, **cmd.env}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        proc.returncode = "timeout"
    except BaseException:   # interrupted: leave no launcher behind
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    wall = time.perf_counter() - start
    (cwd / f"{name}.out").write_text(out)
    (cwd / f"{name}.err").write_text(f"# {shlex.join(cmd.argv)}\n{err}")
    if proc.returncode != 0:
        raise RunFailed(f"{what} failed ({proc.returncode}, {wall:.1f} s): {shlex.join(cmd.argv)}\n"
                        f"{err[-2000:]}")
    return out, wall


def read_probe(stdout: str) -> list[dict]:
    line = next((x for x in stdout.splitlines() if x.startswith("SHM_PROBE ")), None)
    if line is None:
        raise RunFailed("the probe printed no SHM_PROBE line")
    return [{"host": h, "shared": s, "cpus": c} for h, s, c in json.loads(line[len("SHM_PROBE "):])]


def check_probe(probe: list[dict], hosts: list[str], cpus: list[str] | None) -> list[str]:
    """What is wrong with a run's placement: ranks off their host (or CPUs),
    shared-memory communicators that are not the ranks of the host."""
    problems = []
    off = [r for r, p in enumerate(probe) if p["host"] != hosts[r]]
    if off:
        problems.append(f"{len(off)} ranks off their host (rank {off[0]} on {probe[off[0]]['host']}, "
                        f"not {hosts[off[0]]})")
    if cpus is not None:
        wrong = [r for r, p in enumerate(probe) if cpus[r] is not None and cpus_of(p["cpus"]) != cpus[r]]
        if wrong:
            problems.append(f"{len(wrong)} ranks off their CPUs (rank {wrong[0]} on {probe[wrong[0]]['cpus']}, "
                            f"not {cpus[wrong[0]]})")
    per_host = {}
    for p in probe:
        per_host[p["host"]] = per_host.get(p["host"], 0) + 1
    split = sorted({(p["host"], p["shared"], per_host[p["host"]]) for p in probe
                    if p["shared"] != per_host[p["host"]]})
    if split:
        problems.append("MPI_COMM_TYPE_SHARED not the host's ranks: " + ", ".join(
            f"{h} {s} of {n}" for h, s, n in split))
    return problems


def cpus_of(text: str) -> list[int] | None:
    """A Linux CPU list as sorted CPUs; None for a logical core (``@K``),
    resolved only on the host."""
    return None if text.startswith("@") else sorted(parse_cpulist(text))


def node_groups(hosts: list[str]) -> frozenset:
    groups: dict[str, set] = {}
    for r, h in enumerate(hosts):
        groups.setdefault(h, set()).add(r)
    return frozenset(frozenset(g) for g in groups.values())


def package_of(program: str) -> str:
    """``package version`` of the Debian package that owns ``program``, or
    where the program is when no package does."""
    path = shutil.which(program)
    if path is None:
        return f"{program} (not found)"
    real = os.path.realpath(path)
    if shutil.which("dpkg-query"):
        for candidate in dict.fromkeys([path, real]):
            owner = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
            if owner.returncode == 0:
                pkg = owner.stdout.split(":")[0].strip()
                version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg],
                                         capture_output=True, text=True).stdout
                return f"{pkg} {version} (Debian)"
    return f"{real} (no package)"


def machine() -> str:
    model = "?"
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} CPUs ({model}), {platform.system()} {platform.release()}"


def rankmap_commit() -> str:
    """The commit of the rankmap tree that ran (``-dirty`` when its package
    has uncommitted changes), or ``?`` outside a git checkout."""
    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "?"
    return commit + ("-dirty" if git("status", "--porcelain", "--", "rankmap") else "")


def rankmap_command() -> list[str]:
    script = Path(sys.executable).parent / "rankmap"
    return [str(script)] if script.exists() else [sys.executable, "-m", "rankmap"]


class App:
    """One application: its command, MPI, recording, mapping and runs."""

    def __init__(self, spec: str, inputs: list[Path]):
        name, sep, rest = spec.partition("=")
        mpi, sep2, command = rest.partition(":")
        if not (sep and sep2 and name and command.strip()):
            raise SystemExit(f"--app {spec!r}: expected NAME=MPI:COMMAND")
        if mpi not in MPIS:
            raise SystemExit(f"--app {spec!r}: MPI {mpi!r}, expected one of {', '.join(MPIS)}")
        self.name, self.mpi, self.argv = name, mpi, shlex.split(command)
        self.inputs = inputs
        missing = [p for p in inputs if not p.is_file()]
        if missing:
            raise SystemExit(f"--input {missing[0]}: no such file")
        self.reader = reader_for(self.argv[0])
        self.runs: list[dict] = []
        self.relaunch = None          # rankmap's printed line, taken apart (record_and_map)
        self.hosts: dict[str, list[str]] = {}   # host of each rank, per order
        self.cpus: list | None = None           # CPUs of each rank in rankmap's bindings
        self.row: dict = {"name": name, "mpi": mpi, "command": shlex.join(self.argv),
                          "inputs": [str(p) for p in inputs], "package": package_of(self.argv[0])}

    def run_dir(self, work: Path, label: str) -> Path:
        d = work / self.name / label
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        for p in self.inputs:
            shutil.copy(p, d / p.name)
        return d


class Bench:
    def __init__(self, cluster: EmulatedCluster, args):
        self.cluster, self.args = cluster, args
        self.work = Path(args.work)
        self.launchers: dict[str, Launcher] = {}
        self.probes: dict[str, str] = {}
        self.mpis: dict[str, dict] = {}

    def launcher(self, mpi: str) -> Launcher:
        if mpi not in self.launchers:
            exe = self.args.mpiexec if mpi == "mpich" else self.args.mpirun
            lau = Launcher(self.cluster, mpi, exe, busy_poll=self.args.busy_poll)
            self.launchers[mpi] = lau
            probe = self.work / f"shm_probe-{mpi}"
            build = subprocess.run([lau.mpicc, "-O2", "-o", str(probe), str(HERE / "shm_probe.c")],
                                   capture_output=True, text=True)
            if build.returncode != 0:
                raise SystemExit(f"building the probe with {lau.mpicc} failed:\n{build.stderr}")
            self.probes[mpi] = str(probe)
            self.mpis[mpi] = {"launcher": lau.exe, "default_order": self.default_order(lau, probe)}
            log(f"# {mpi}: {lau.exe}; with a hostfile of slot counts and no order option it places "
                f"{self.mpis[mpi]['default_order']}")
        return self.launchers[mpi]

    def default_order(self, lau: Launcher, probe: Path) -> str:
        d = self.work / f"default-{lau.mpi}"
        d.mkdir(parents=True, exist_ok=True)
        cmd = lau.command(lau.order("default", d / "hostfile") + [str(probe)])
        out, _ = launch(cmd, d, 120, "probe default order")
        hosts = [p["host"] for p in read_probe(out)]
        for order in ("block", "round-robin"):
            if hosts == lau.expected_hosts(order):
                return order
        return "other: " + " ".join(hosts)

    # ---- steps 1 and 2 ----------------------------------------------------
    def record_and_map(self, app: App) -> None:
        lau = self.launcher(app.mpi)
        d = app.run_dir(self.work, "record")
        trace = d / "app.rmtrace.npz"
        cmd = lau.command(lau.order("round-robin") + [sys.executable, "-m", "rankmap.profile", "-o", str(trace),
                                                       *app.argv])
        out, wall = launch(cmd, d, self.args.timeout, "record")
        app.row["record"] = {"wall_s": wall, **app.reader(d, out), "command": shlex.join(cmd.argv)}
        t = read_trace(trace)
        app.row["mpi_library"] = " ".join(str((t.meta.get("mpi") or {}).get("library", "?")).split())
        recorded = [str(a) for a in (t.meta.get("argv") or [])]
        launch_dir = self.work / app.name / "launch"
        mapped = subprocess.run(rankmap_command() + ["map", str(trace), "--as", "all", "-o", str(launch_dir),
                                                     "--json"], capture_output=True, text=True, cwd=d)
        if mapped.returncode != 0:
            raise RunFailed(f"rankmap map {trace} failed: {mapped.stderr[-2000:]}")
        result = json.loads(mapped.stdout)
        (self.work / app.name / "map.json").write_text(mapped.stdout)
        line = find_relaunch(result["relaunch"], lau.relaunch_comment)
        app.relaunch = parse_relaunch(line, recorded)
        bindings = read_bindings(result["launch_files"]["bind"])
        app.hosts = {"block": lau.expected_hosts("block"), "round-robin": lau.expected_hosts("round-robin"),
                     "rankmap": [b.host for b in bindings]}
        app.cpus = [cpus_of(b.cpus) for b in bindings]
        groups = node_groups(app.hosts["rankmap"])
        same = [o for o in ("block", "round-robin") if node_groups(app.hosts[o]) == groups]
        app.row["map"] = {
            "relaunch": line, "method": result.get("method"),
            "J": result.get("J"), "J_recorded": result.get("J_before"), "J_identity": result.get("J_identity"),
            "link_time": result.get("link_time"), "link_time_recorded": result.get("link_time_before"),
            "replay_time": result.get("replay_time"), "replay_time_recorded": result.get("replay_time_before"),
            "time": result.get("time"), "time_recorded": result.get("time_before"),
            "time_source": result.get("time_source"), "kept_given_order": result.get("kept_given_order"),
            "node_groups_as": same[0] if same else None}
        log(f"  {app.name}: recorded ({wall:.1f} s, the app's time {app.row['record']['time_s']:.3f} s), "
            f"mapped: J {result.get('J'):.4g} (recorded order {result.get('J_before'):.4g}); nodes grouped as "
            f"{same[0] if same else 'neither block nor round-robin'}\n    {line}")

    # ---- step 3 -----------------------------------------------------------
    def commands(self, app: App, order: str) -> tuple[Command, Command]:
        """(probe, application) commands of ``order``."""
        lau = self.launchers[app.mpi]
        probe = [self.probes[app.mpi]]
        if order in ("rankmap", UNPINNED):
            line = app.relaunch if order == "rankmap" else app.relaunch.unpinned()
            return lau.relaunch(line, probe), lau.relaunch(line)
        words = lau.order(order)
        return lau.command(words + probe), lau.command(words + app.argv)

    def run_once(self, app: App, order: str, round_no: int, position: int) -> dict:
        d = app.run_dir(self.work, f"round{round_no}-{order}")
        probe_cmd, app_cmd = self.commands(app, order)
        row = {"round": round_no, "order": order, "position": position, "load_before": loadavg()}
        try:
            probe = read_probe(launch(probe_cmd, d, 120, "probe")[0])
            row["placement_problems"] = check_probe(probe, app.hosts["rankmap" if order == UNPINNED else order],
                                                    app.cpus if order == "rankmap" else None)
            row["shared_sizes"] = [p["shared"] for p in probe]
            before = self.cluster.traffic()
            out, wall = launch(app_cmd, d, self.args.timeout, "app")
            after = self.cluster.traffic()
            row.update(app.reader(d, out))
            row["wall_s"] = wall
            row["net_bytes"] = sum(after["node_tx"]) - sum(before["node_tx"])
        except (RunFailed, TimerError) as exc:
            row["error"] = str(exc)
        row["load_after"] = loadavg()
        return row


# ---- summary --------------------------------------------------------------
def summarise(app_row: dict, runs: list[dict], orders: list[str]) -> None:
    keys = sorted({k for r in runs for k in r if k.endswith(("_s", "_pct", "gflops", "net_bytes"))})
    summary = {}
    for order in orders:
        ok = [r for r in runs if r["order"] == order and "error" not in r]
        if not ok:
            summary[order] = {"n": 0}
            continue
        times = [r["time_s"] for r in ok]
        summary[order] = {"n": len(ok), "median_s": statistics.median(times), "min_s": min(times),
                          "max_s": max(times),
                          **{f"median_{k}": statistics.median(r[k] for r in ok if k in r)
                             for k in keys if k != "time_s" and any(k in r for r in ok)}}
    app_row["summary"] = summary
    # each order over the better of block and round-robin: of the medians, and
    # the median of the per-round ratios (a round's orders ran back to back)
    base = [summary[o]["median_s"] for o in ("block", "round-robin") if summary[o]["n"]]
    paired: dict[str, list[float]] = {o: [] for o in orders}
    for k in sorted({r["round"] for r in runs}):
        t = {r["order"]: r["time_s"] for r in runs if r["round"] == k and "error" not in r}
        if "block" in t and "round-robin" in t:
            for o in orders:
                if o in t:
                    paired[o].append(t[o] / min(t["block"], t["round-robin"]))
    for o in orders:
        s = summary[o]
        s["over_best"] = s["median_s"] / min(base) if s["n"] and base else None
        s["over_best_paired"] = statistics.median(paired[o]) if paired[o] else None
    app_row["rankmap_over_best"] = summary["rankmap"]["over_best"]
    app_row["rankmap_over_best_paired"] = summary["rankmap"]["over_best_paired"]
    flags: dict[tuple[str, str], list[int]] = {}
    for r in runs:
        for text in r.get("placement_problems", []) + ([r["error"].splitlines()[0]] if "error" in r else []):
            flags.setdefault((r["order"], text), []).append(r["round"])
    app_row["flags"] = [{"order": o, "text": t, "rounds": rounds} for (o, t), rounds in flags.items()]


DETAIL = {"lmp": ("median_comm_pct", "Comm %"), "xhpcg": ("median_ddot_s", "DDOT s"),
          "pw.x": ("median_fft_scatter_s", "FFT all-to-all s")}


def detail_of(app_row: dict) -> tuple[str, str]:
    name = Path(shlex.split(app_row["command"])[0]).name
    return DETAIL.get("lmp" if name.startswith("lmp") else name, ("", ""))


def table(report: dict) -> str:
    lines = ["| application | MPI | order | runs | time s (median) | min-max | further timer | "
             "network MB | over the better of block, round-robin | flagged runs |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for a in report["apps"]:
        key, label = detail_of(a)
        default = report["mpis"].get(a["mpi"], {}).get("default_order")
        for order in report["orders"]:
            s = a.get("summary", {}).get(order, {"n": 0})
            name = f"{order} (default)" if order == default else order
            if s["n"] == 0:
                lines.append(f"| {a['name']} | {a['mpi']} | {name} | 0 | - | - | - | - | - | failed |")
                continue
            detail = f"{label} {s[key]:.3g}" if key in s else ""
            ratio = "" if s["over_best"] is None else f"{s['over_best']:.3f}" + (
                f" (paired {s['over_best_paired']:.3f})" if s["over_best_paired"] is not None else "")
            if order == "rankmap" and ratio:
                ratio = f"**{ratio}**"
            flags = sum(len(f["rounds"]) for f in a.get("flags", []) if f["order"] == order)
            lines.append(f"| {a['name']} | {a['mpi']} | {name} | {s['n']} | {s['median_s']:.3f} | "
                         f"{s['min_s']:.3f}-{s['max_s']:.3f} | {detail} | "
                         f"{s.get('median_net_bytes', 0) / 1e6:.1f} | {ratio} | {flags or ''} |")
    return "\n".join(lines)


def run_loads(report: dict) -> tuple[float, float]:
    """The lowest and highest 1-minute load average at the end of a run."""
    loads = [r["load_after"][0] for a in report["apps"] for r in a.get("runs", [])] or [float("nan")]
    return min(loads), max(loads)


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    apps = [a for a in report["apps"] if a.get("summary")]
    orders = report["orders"]
    width = 0.8 / len(orders)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(apps) + 2), 3.8))
    for k, order in enumerate(orders):
        mid, low, high = [], [], []
        for a in apps:
            s = a["summary"]
            best = min(s[o]["median_s"] for o in ("block", "round-robin") if s[o]["n"])
            so = s[order]
            mid.append(so["median_s"] / best if so["n"] else np.nan)
            low.append((so["median_s"] - so["min_s"]) / best if so["n"] else 0)
            high.append((so["max_s"] - so["median_s"]) / best if so["n"] else 0)
        ax.bar(np.arange(len(apps)) + k * width, mid, width, yerr=[low, high], capsize=3, label=order)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(np.arange(len(apps)) + width * (len(orders) - 1) / 2, [a["name"] for a in apps])
    ax.set_ylabel("own time / better of block, round-robin")
    c = report["cluster"]
    low, high = run_loads(report)
    ax.set_title(f"{c['nodes']} nodes x {c['slots']} slots, {c['bandwidth']}; median of {report['rounds']} "
                 f"rounds, min-max bars; {report['date']}, load {low}-{high}", fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def page_section(report: dict, plot_path: Path | None, page: Path) -> str:
    c = report["cluster"]
    low, high = run_loads(report)
    out = [f"Measured {report['date']} on {report['machine']}, rankmap at commit "
           f"{report.get('rankmap_commit', '?')}; load average (1 minute) {low}-{high} at the "
           f"end of the runs{'; ' + report['note'] if report.get('note') else ''}.",
           f"Emulated cluster: {c['nodes']} nodes x {c['slots']} slots, {c['bandwidth']} links; "
           f"{report['rounds']} rounds, order rotated each round; "
           f"{'busy polling' if report['busy_poll'] else 'ranks yield while they wait'}.", "",
           "```sh", report["command"], "```", ""]
    out += ["| MPI | launcher | default order (hostfile of slot counts, no order option) |", "|---|---|---|"]
    out += [f"| {m} | `{v['launcher']}` | {v['default_order']} |" for m, v in report["mpis"].items()]
    out += ["", "| application | command | from | MPI library (from the trace) | recorded run, own time s |",
            "|---|---|---|---|---|"]
    for a in report["apps"]:
        rec = a.get("record", {})
        out.append(f"| {a['name']} | `{a['command']}` | {a['package']} | {a.get('mpi_library', '?')} | "
                   f"{rec.get('time_s', float('nan')):.3f} |")
    out += ["", table(report), ""]
    if plot_path is not None:
        out += [f"![own time per order]({os.path.relpath(plot_path, page.parent)})", ""]
    out += ["| application | rankmap's node groups | J recorded (round-robin) | J rankmap | "
            "modelled time recorded / rankmap | network priced as |", "|---|---|---|---|---|---|"]
    for a in report["apps"]:
        m = a.get("map")
        if not m:
            continue
        groups = m["node_groups_as"] or "neither block nor round-robin"
        if m.get("kept_given_order"):
            groups += " (the recorded order kept)"
        t = f"{m['time_recorded'] / m['time']:.2f}" if m.get("time") and m.get("time_recorded") else "-"
        out.append(f"| {a['name']} | {groups} | {m['J_recorded']:.4g} | {m['J']:.4g} | {t} | "
                   f"{m.get('time_source') or '-'} |")
    flags = [(a["name"], f) for a in report["apps"] for f in a.get("flags", [])]
    out += ["", "Flags (placement, shared memory, failures):" if flags else "No run was flagged: every rank "
            "ran on the host its order names, and every MPI_COMM_TYPE_SHARED held exactly its host's ranks.", ""]
    out += [f"- {name}, {f['order']} (rounds {', '.join(map(str, f['rounds']))}): {f['text']}"
            for name, f in flags]
    return "\n".join(out).rstrip() + "\n"


def write_page(page: Path, section: str) -> None:
    begin, end = "<!-- apps:begin -->", "<!-- apps:end -->"
    text = page.read_text() if page.exists() else f"# Real applications\n\n{begin}\n{end}\n"
    if begin not in text or end not in text:
        raise SystemExit(f"{page}: no {begin} ... {end} markers to put the results between")
    head, rest = text.split(begin, 1)
    page.write_text(f"{head}{begin}\n{section}{end}{rest.split(end, 1)[1]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("--app", action="append", default=[], metavar="NAME=MPI:COMMAND",
                   help="an application, the MPI it was built against (mpich, openmpi) and its command")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE",
                   help="a file copied into every working directory of application NAME (its input deck)")
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--slots", type=int, default=4, help="ranks per node")
    p.add_argument("--bandwidth", default="50mbit", help="node link rate, each direction")
    p.add_argument("--rounds", type=int, default=5, help="rounds of every order (default 5)")
    p.add_argument("--timeout", type=float, default=900, help="seconds one launch may take")
    p.add_argument("--mpiexec", help="MPICH's hydra mpiexec (default: the one beside this Python)")
    p.add_argument("--mpirun", help="Open MPI's mpirun (default: mpirun on PATH)")
    p.add_argument("--busy-poll", action="store_true", help="let waiting ranks spin (no yield settings)")
    p.add_argument("--unpinned", action="store_true",
                   help=f"also run rankmap's line without rankmap-bind ({UNPINNED}): its hosts, the CPUs "
                        "left to the OS as in block and round-robin")
    p.add_argument("--work", default="/tmp/rankmap-apps", help="traces, launch files, run directories")
    p.add_argument("--json", default=str(ROOT / "benchmarks/results/apps.json"))
    p.add_argument("--plot", default=str(ROOT / "docs/img/apps.png"))
    p.add_argument("--page", default=str(ROOT / "docs/results/apps.md"))
    p.add_argument("--note", default="", help="a sentence for the page (e.g. what else loaded the machine)")
    p.add_argument("--from", dest="render", metavar="JSON",
                   help="run nothing: the table, plot and page of a results file")
    args = p.parse_args()
    if args.render:
        report = json.loads(Path(args.render).read_text())
        publish(report, args)
        return
    if not args.app:
        p.error("give at least one --app (or --from)")

    inputs: dict[str, list[Path]] = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep:
            raise SystemExit(f"--input {item!r}: expected NAME=FILE")
        inputs.setdefault(name, []).append(Path(path).resolve())
    apps = [App(spec, inputs.get(spec.partition("=")[0], [])) for spec in args.app]
    unknown = set(inputs) - {a.name for a in apps}
    if unknown:
        raise SystemExit(f"--input for {sorted(unknown)[0]!r}: no --app of that name")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    spec = ClusterSpec(nodes=args.nodes, slots=args.slots, bandwidth=args.bandwidth)
    report = {"date": datetime.date.today().isoformat(), "machine": machine(), "rankmap_commit": rankmap_commit(),
              "command": shlex.join([Path(sys.executable).name, *sys.argv]),
              "cluster": {"nodes": args.nodes, "slots": args.slots, "bandwidth": args.bandwidth},
              "rounds": args.rounds, "busy_poll": args.busy_poll, "note": args.note,
              "orders": ORDERS + ([UNPINNED] if args.unpinned else []),
              "load_before": loadavg(), "mpis": {}, "apps": [a.row for a in apps]}

    def save() -> None:
        report["load_after"] = loadavg()
        for a in apps:
            summarise(a.row, a.runs, report["orders"])
            a.row["runs"] = a.runs
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")

    with EmulatedCluster(spec) as cluster:
        bench = Bench(cluster, args)
        report["mpis"] = bench.mpis
        log(f"# cluster {cluster.name}: {spec.nodes} nodes x {spec.slots} slots, {spec.bandwidth}; "
            f"load {loadavg()}")
        ready = []
        for app in apps:
            try:
                bench.record_and_map(app)
                ready.append(app)
            except (RunFailed, TimerError, LaunchError) as exc:
                app.row["error"] = str(exc)
                log(f"  {app.name}: {exc}")
        orders = report["orders"]
        for k in range(args.rounds):
            rotated = orders[k % len(orders):] + orders[:k % len(orders)]
            for app in ready:
                for position, order in enumerate(rotated):
                    row = bench.run_once(app, order, k, position)
                    app.runs.append(row)
                    what = (f"error: {row['error'].splitlines()[0]}" if "error" in row else
                            f"{row['time_s']:.3f} s (wall {row['wall_s']:.1f} s, net "
                            f"{row['net_bytes'] / 1e6:.1f} MB)")
                    flag = f"  FLAGGED: {'; '.join(row['placement_problems'])}" if row.get(
                        "placement_problems") else ""
                    log(f"  round {k} {app.name} {order}: {what}; load {row['load_after'][0]}{flag}")
            save()
    save()
    log(f"# wrote {args.json}")
    publish(report, args)


def publish(report: dict, args) -> None:
    """The table on standard output, the plot and the page's results section."""
    print(table(report))
    if args.plot:
        plot(report, Path(args.plot))
    if args.page:
        write_page(Path(args.page), page_section(report, Path(args.plot) if args.plot else None,
                                                 Path(args.page)))
    log("# wrote" + (f" {args.plot}" if args.plot else "") + (f" {args.page}" if args.page else ""))


if __name__ == "__main__":
    main()
