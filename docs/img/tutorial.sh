#!/bin/sh
# Makes the tutorial's pictures and outputs (docs/tutorial.md) on one machine.
#
# 32 ranks of profiling/halo2d.py, each in a UTS namespace of its own whose
# host name is cn01..cn04 in turn (rank r on cn0(r % 4 + 1): round-robin, as
# `srun --distribution=cyclic` or `mpiexec --map-by node` place ranks), so
# the trace is that of a 4-node job; then show, map, and the run again in
# rankmap's order (each rank named after its line of the Slurm hostfile).
# The bytes are real; the hosts share this machine's cores (no network).
# MPIR_CVAR_NOLOCAL=1: MPICH then sees every rank as a node of its own, so
# one rank of each host name records the host's machine tree.
# Needs root (unshare --uts) and the venv of the README:
#   sh docs/img/tutorial.sh [WORKDIR]
set -e
cd "$(dirname "$0")/../.."
BIN=$PWD/.venv/bin
W=${1:-$(mktemp -d)}
mkdir -p "$W"
IMG=$PWD/docs/img
run_named() {  # run_named HOSTNAME_COMMAND ARGS...: every rank under the host name the command prints
  name=$1; shift
  MPIR_CVAR_NOLOCAL=1 "$BIN/mpiexec" -n 32 unshare --uts sh -c "hostname \"\$($name)\" && exec \"\$@\"" sh "$@"
}
ln -sfn "$PWD/profiling" "$W/profiling"   # the program as the trace names it: profiling/halo2d.py
cd "$W"
export PATH="$BIN:$PATH"
run_named 'echo cn0$((PMI_RANK % 4 + 1))' \
    python -m rankmap.profile -o halo.rmtrace.npz profiling/halo2d.py > /dev/null
rankmap show halo.rmtrace.npz --top 4 --plot "$IMG/tutorial_before.png" > show.txt
rankmap map halo.rmtrace.npz --as all -o launch > map.txt
rankmap show halo.rmtrace.npz --plot "$IMG/tutorial_compare.png" --mapping launch/slurm.hostfile > compare.txt
run_named 'sed -n "$((PMI_RANK + 1))p" launch/slurm.hostfile' \
    python -m rankmap.profile -o after.rmtrace.npz profiling/halo2d.py > /dev/null
rankmap show after.rmtrace.npz --top 4 --plot "$IMG/tutorial_after.png" > after.txt
rankmap map after.rmtrace.npz --method identity > after_map.txt
echo "outputs in $W"
