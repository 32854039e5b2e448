"""The alpha and beta of the emulated cluster's links, measured: an
osu_latency-style ping-pong (``programs/pingpong.py``) between two ranks on
two nodes of an emulated cluster (root needed) and, for comparison, two
ranks on one node, at each given link rate.

alpha: the median one-way time of messages of 0 to 64 bytes; beta: the
slope of the one-way time between 256 KiB and 1 MiB (bytes per second).
The emulator writes the network alpha measured here into the cluster files
it emits (``emulate.cluster.EMULATED_LATENCY``; docs/methods.md, "Message
costs").

  python benchmarks/cluster/pingpong.py                      # 50mbit and 200mbit, 5 repeats
  python benchmarks/cluster/pingpong.py --rates 50mbit --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rankmap.emulate import ClusterSpec, EmulatedCluster  # noqa: E402
from rankmap.topology.bandwidth import format_latency, parse_rate  # noqa: E402

PROGRAM = Path(__file__).parent / "programs" / "pingpong.py"


def fit(sizes, seconds) -> tuple[float, float]:
    """(alpha seconds, beta bytes/s) of one ping-pong curve."""
    sizes, seconds = np.asarray(sizes, dtype=float), np.asarray(seconds, dtype=float)
    alpha = float(np.median(seconds[sizes <= 64]))
    big = sizes >= 262144
    slope = np.polyfit(sizes[big], seconds[big], 1)[0]
    return alpha, float(1.0 / slope)


def measure(cluster: EmulatedCluster, across: bool, iterations: int, env: dict) -> dict:
    """One ping-pong curve: ranks 0 and 1 on two nodes (hydra's round-robin
    order) or both on the first node (block order, two slots)."""
    exe = cluster.mpiexec(2, order="round-robin", env=env) if across else \
        cluster.mpiexec(2, order="block", ppn=2, env=env)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(exe + [sys.executable, str(PROGRAM), str(iterations)], capture_output=True,
                          text=True, timeout=600, env=env)
    if proc.returncode:
        raise SystemExit(f"ping-pong failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="50mbit,200mbit", help="link rates to measure at (tc units)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=200, help="exchanges per small size")
    ap.add_argument("--heavy-yield", action="store_true",
                    help="MPIR_CVAR_ENABLE_HEAVY_YIELD=1, as benchmarks/cluster/run.py runs its programs")
    args = ap.parse_args(argv)
    mpi_env = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"} if args.heavy_yield else {}
    rows = []
    for rate in args.rates.split(","):
        spec = ClusterSpec(nodes=2, slots=2, bandwidth=rate)
        with EmulatedCluster(spec) as cluster:
            for where in ("across", "inside"):
                fits = [fit(**measure(cluster, where == "across", args.iterations, mpi_env))
                        for _ in range(args.repeats)]
                alphas, betas = zip(*fits)
                row = {"rate": rate, "pair": where, "heavy_yield": args.heavy_yield, "alpha_s": float(np.median(alphas)),
                       "alpha_min_s": min(alphas), "alpha_max_s": max(alphas),
                       "beta_Bps": float(np.median(betas)), "rate_Bps": parse_rate(rate) / 8}
                rows.append(row)
                print(f"{rate:>8s} {where:6s} alpha {format_latency(row['alpha_s'])} "
                      f"({format_latency(row['alpha_min_s'])}-{format_latency(row['alpha_max_s'])}), "
                      f"beta {row['beta_Bps'] / 1e6:.3g} MB/s (link {row['rate_Bps'] / 1e6:.3g} MB/s)",
                      flush=True)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
