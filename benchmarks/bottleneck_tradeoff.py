"""Sum objective J against the bottleneck objective on real traffic.

For each Mapping Matters application (64 ranks) and machine (a 4:4:4 tree
with distances 1:10:100, and a 4x4x4 torus), the sum-optimised mapping
(``auto --objective sum``: on the tree its runs end in swap refinement, on
the torus it is ``mesh_auto``) is compared with the same mapping after
``bottleneck_refine`` (the link time whatever J: the ``bottleneck``
objective) and with auto's default (``time``: J within 1 %): J, the link
time (bytes over bandwidth, the tree's bandwidths from its distances), the
most loaded link and the makespan M = max(max comp, F * max link) with
F = 1e-9 (seconds per byte at 1 GB/s, unit vertex weights = 1 s each).

    python benchmarks/bottleneck_tradeoff.py
"""

from __future__ import annotations

import os
import sys
import time

sys.path[:0] = [os.path.dirname(__file__), os.path.join(os.path.dirname(__file__), "..")]  # this checkout

from mesh_common import MAPLIB_APPS, maplib_traffic  # noqa: E402

from rankmap.algorithms import apply_objective, map_tasks  # noqa: E402
from rankmap.algorithms.refine.bottleneck import bottleneck_refine  # noqa: E402
from rankmap.cost import evaluate  # noqa: E402
from rankmap.topology import MeshTopology, topology_from_strings  # noqa: E402

F = 1e-9


def main() -> None:
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    machines = {"tree 4:4:4": topology_from_strings("4:4:4", "1:10:100"),
                "torus 4x4x4": MeshTopology((4, 4, 4), torus=True)}
    print(f"{'app':<7}{'machine':<13}{'objective':<11}{'J':>12}{'max link':>12}{'makespan':>10}"
          f"{'J ratio':>9}{'link time ratio':>16}{'time s':>8}  busiest link")
    for app in MAPLIB_APPS:
        g = maplib_traffic(app)
        for label, topo in machines.items():
            t0 = time.perf_counter()
            pe_sum = map_tasks(g, topo, method="auto", objective="sum").pe_of_task
            t1 = time.perf_counter()
            pe_bn = bottleneck_refine(g, topo, pe_sum)
            t2 = time.perf_counter()
            pe_time = apply_objective(g, topo, pe_sum, "time")
            t3 = time.perf_counter()
            s = evaluate(g, topo, pe_sum, comm_factor=F)
            for name, pe, t in (("sum", pe_sum, t1 - t0), ("bottleneck", pe_bn, t2 - t1), ("time", pe_time, t3 - t2)):
                rep = evaluate(g, topo, pe, comm_factor=F)
                print(f"{app:<7}{label:<13}{name:<11}{rep.J:12.4g}{rep.bottleneck:12.4g}{rep.makespan:10.3f}"
                      f"{rep.J / s.J:9.3f}{rep.link_time / s.link_time:16.3f}{t:8.2f}  {rep.busiest_link}")


if __name__ == "__main__":
    main()
