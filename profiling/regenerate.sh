#!/bin/sh
# Regenerate the recorded traces in profiling/traces/ (run from the repository root):
#   sh profiling/regenerate.sh [SIZES]      default sizes: "4 16"
# Each program runs under the profiler (tree collective model) with mpiexec,
# oversubscribed if the machine has fewer cores.
set -e
PY=${PYTHON:-python}
MPIEXEC=${MPIEXEC:-$(dirname "$(command -v "$PY")")/mpiexec}
[ -x "$MPIEXEC" ] || MPIEXEC=mpiexec
SIZES=${1:-"4 16"}
cd "$(dirname "$0")/.."
for prog in halo2d halo3d cg fft_transpose sweep master_worker irregular; do
  for n in $SIZES; do
    echo "== $prog on $n ranks"
    "$MPIEXEC" -n "$n" "$PY" -m rankmap.profile --no-topology \
      -o "profiling/traces/$prog-$n.rmtrace.npz" "profiling/$prog.py"
  done
done
