#!/usr/bin/env bash
# run-local.sh: run minimax-train on this machine with real MPI ranks.
#   bash launch/run-local.sh [-n RANKS] RECIPE.toml [--set table.key=value]... [--resume DIR]
# Sets what a local run needs: mpirun as root allowed, oversubscription (more ranks than cores
# for tests), no core binding (so BLAS can use its threads), cores/ranks BLAS threads per rank,
# shared-memory transport, and the OpenBLAS core type for this CPU (launch/env.sh); a clean stop
# (exit 75) without mpirun's abort banner (launch/mpirun.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=env.sh
source "$here/env.sh"

ranks="${MT_RANKS:-2}"
if [ "${1:-}" = "-n" ]; then
  ranks="$2"
  shift 2
fi
[ $# -ge 1 ] || { echo "usage: $0 [-n RANKS] RECIPE.toml [minimax-train args...]" >&2; exit 2; }
bin="${MT_TRAIN_BIN:-$root/build/minimax-train}"
[ -x "$bin" ] || { echo "$bin not found: build first (bash launch/demo.sh builds it)" >&2; exit 2; }

cores="$(nproc)"
threads=$(( cores / ranks ))
[ "$threads" -ge 1 ] || threads=1
envs=(-x OPENBLAS_NUM_THREADS="$threads" -x OMP_NUM_THREADS="$threads" -x OMP_WAIT_POLICY)
[ -z "${OPENBLAS_CORETYPE:-}" ] || envs+=(-x OPENBLAS_CORETYPE)
as_root=()
[ "$(id -u)" -ne 0 ] || as_root=(--allow-run-as-root)

# mpirun through launch/mpirun.sh: SIGTERM and SIGINT (kill, Ctrl-C) to this script become one
# SIGUSR1 for mpirun, which forwards it to every rank: the run stops after its step with a
# checkpoint and exits 75, reported as the clean stop it is (mpirun's "job aborted" banner
# dropped); a second one ends the job at once.
exec bash "$here/mpirun.sh" "${as_root[@]}" -np "$ranks" --oversubscribe --bind-to none \
  --mca pml ob1 --mca btl self,vader \
  "${envs[@]}" "$bin" "$@"
