#!/bin/sh
# Offline: trace -> mapping -> launch file -> rerun.
#
#   sh examples/offline_walkthrough.sh [TRACE] [MACHINE]
#
# TRACE: a recorded trace (mpiexec -n P python -m rankmap.profile app.py writes
# app.rmtrace.npz) or any graph file rankmap reads; default: the bundled NPB
# BT-MZ traffic (64 ranks).  MACHINE: a topology file; default: the bundled
# 4-node machine.  Writes to ./rankmap-walkthrough/.
set -e
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
TRACE=${1:-$HERE/rankmap/data/btmz64.edges}
MACHINE=${2:-$HERE/rankmap/data/demo-cluster.txt}
MPIEXEC=${MPIEXEC:-$(dirname "$(command -v "$PY")")/mpiexec}
OUT=rankmap-walkthrough
mkdir -p "$OUT"

echo "== 1. map on one process (centralised: auto = best J of the methods)"
$PY -m rankmap map "$TRACE" --topology "$MACHINE" -o "$OUT/order.perm" --as perm

echo "== 2. the same on 4 processes (distributed swap refinement from the launch order)"
"$MPIEXEC" -n 4 $PY -m rankmap map "$TRACE" --topology "$MACHINE" --method identity --distributed

echo "== 3. launch files for the next run"
for fmt in openmpi hydra slurm mpich; do
    $PY -m rankmap map "$TRACE" --topology "$MACHINE" -o "$OUT/order.$fmt" --as $fmt --json >/dev/null
    echo "   $OUT/order.$fmt"
done
cat <<MSG
== 4. rerun the application with the new order (on the cluster the machine describes);
   each launch file has its bindings beside it, and rankmap-bind puts every rank on its cores:
   Open MPI : mpirun -n P --rankfile $OUT/order.openmpi --bind-to none rankmap-bind $OUT/order.openmpi.bindings -- python app.py
   MPICH    : mpiexec -n P -f $OUT/order.hydra rankmap-bind $OUT/order.hydra.bindings -- python app.py
   Slurm    : SLURM_HOSTFILE=$OUT/order.slurm srun -n P --distribution=arbitrary --cpu-bind=none rankmap-bind $OUT/order.slurm.bindings -- python app.py
   Cray     : cp $OUT/order.mpich MPICH_RANK_ORDER; MPICH_RANK_REORDER_METHOD=3 srun -n P --cpu-bind=none rankmap-bind $OUT/order.mpich.bindings -- python app.py
MSG
