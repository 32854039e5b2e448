"""rankmap's mesh heuristics against the Mapping Matters (MapLib) tools.

Same traffic (64-rank AMG, BT-MZ, CG, LULESH byte matrices), same machines
(4x4x4 mesh and torus, one rank per node), same metric (average hops per
byte, scored by rankmap.cost.evaluate for every mapping, MapLib's included).
The "MapLib says" column is IeNPC/IeNLC from MapLib's own statistics, as a
check that both sides count hops the same way.

    python benchmarks/mesh_maplib.py
"""

from __future__ import annotations

import os
import sys
import time

sys.path[:0] = [os.path.dirname(__file__), os.path.join(os.path.dirname(__file__), "..")]  # this checkout

from mesh_common import MAPLIB_APPS, maplib_mappings, maplib_reported_hops, maplib_traffic  # noqa: E402

from rankmap.algorithms import map_tasks  # noqa: E402
from rankmap.cost import evaluate  # noqa: E402
from rankmap.topology import MeshTopology  # noqa: E402

OURS = ["identity", "curve", "bft", "mht", "affn", "coce", "coce_mht", "pairs", "mesh_bisect", "mesh_auto"]


def main() -> None:
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    summary = []
    for app in MAPLIB_APPS:
        g = maplib_traffic(app)
        for kind in ("mesh", "torus"):
            topo = MeshTopology((4, 4, 4), torus=kind == "torus")
            theirs = {name: evaluate(g, topo, pe).hops_per_byte for name, pe in maplib_mappings(app, kind).items()}
            said = maplib_reported_hops(app, kind)
            print(f"\n{app} on 4x4x4 {kind}: MapLib tools")
            print(f"  {'tool':<12} {'hops/byte':>9} {'MapLib says':>11}")
            for name, h in sorted(theirs.items(), key=lambda kv: kv[1]):
                print(f"  {name:<12} {h:9.3f} {said.get(name, float('nan')):11.3f}")
            ours = {}
            for m in OURS:
                t0 = time.perf_counter()
                pe = map_tasks(g, topo, method=m).pe_of_task
                ours[m] = (evaluate(g, topo, pe).hops_per_byte, time.perf_counter() - t0)
            print("  rankmap: " + ", ".join(f"{m} {h:.3f} ({t:.2f}s)" for m, (h, t) in ours.items()))
            best_tool = min(theirs, key=theirs.get)
            summary.append((app, kind, best_tool, theirs[best_tool], ours))
    print("\nSummary: average hops per byte (lower is better); best MapLib tool vs rankmap")
    head = f"{'app':<7}{'topo':<6}{'best MapLib':>22}" + "".join(f"{m:>12}" for m in OURS)
    print(head)
    for app, kind, tool, h, ours in summary:
        print(f"{app:<7}{kind:<6}{tool + f' {h:.3f}':>22}" + "".join(f"{ours[m][0]:12.3f}" for m in OURS))


if __name__ == "__main__":
    main()
