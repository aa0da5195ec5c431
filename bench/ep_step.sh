#!/usr/bin/env bash
# ep_step.sh: ZeRO-3 against expert parallelism on 4 CPU ranks (docs/benchmarks.md, "Expert
# parallelism"; issue 26). A benchmark, not a test.
#
#   bash bench/ep_step.sh [--ep P] [--steps N] [--build DIR] [--out DIR]
#
# Trains bench/recipes/bench-ep.toml (32 experts, top-2) on 4 MPI ranks twice: with
# dist.expert_parallel = 1 (ZeRO-3: every expert gathered on every rank) and = P (default 4:
# each rank owns 32/P experts, tokens travel by all-to-all). Each layout runs 2 steps and
# 2 + N steps (default N = 10); the difference of the two runs' byte tallies (the MPI
# communicator's, MT_COMM_BYTES: train/comm.h) divided by N is the traffic of one step, free of
# setup and checkpoint. Prints per layout the median step time of the long run's steps 3..
# (metrics.jsonl step_s) and the bytes each rank sent per step (all-gathers, reduce-scatters,
# all-to-alls), the ZeRO-3 / EP ratios, and minimax-info's prediction for the same layout
# (--ranks 4 --seq 256 --batch 2 --expert-parallel P: ring collectives, uniform routing).
# Needs a minimax-train that knows dist.expert_parallel (issue 26's trainer).
# Environment: MT_BENCH_BUILD (default build), MPIEXEC (default mpiexec).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
ep=4
steps=10
build="${MT_BENCH_BUILD:-$root/build}"
out="$root/runs/bench-ep"
while [ $# -gt 0 ]; do
  case "$1" in
  --ep) ep="$2"; shift 2 ;;
  --steps) steps="$2"; shift 2 ;;
  --build) build="$(realpath "$2")"; shift 2 ;;
  --out) out="$(realpath -m "$2")"; shift 2 ;;
  -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
  *) echo "$0: unknown argument $1" >&2; exit 2 ;;
  esac
done
train="$build/minimax-train"
info="$build/minimax-info"
[ -x "$train" ] && [ -x "$info" ] || { echo "$0: build minimax-train and minimax-info in $build first" >&2; exit 2; }
mpi="${MPIEXEC:-mpiexec}"
as_root=()
[ "$(id -u)" -ne 0 ] || as_root=(--allow-run-as-root)
cd "$root"
mkdir -p "$out"

# run LAYOUT STEPS: the run's directory; its tallies in DIR/bytes.<rank>
run() {
  local p=$1 n=$2 dir="$out/ep$1-steps$2"
  rm -rf "$dir"
  MT_COMM_BYTES="$dir.bytes" OMP_NUM_THREADS=1 "$mpi" "${as_root[@]}" -n 4 --oversubscribe --bind-to none \
    "$train" bench/recipes/bench-ep.toml --set "dist.expert_parallel=$p" \
    --set "train.max_steps=$n" --set "output.dir=$dir" >"$dir.log" 2>&1 || {
    echo "$0: the run with dist.expert_parallel = $p failed (a trainer without issue 26's EP?):" >&2
    tail -5 "$dir.log" >&2
    exit 1
  }
  echo "$dir"
}

# key KIND FILES...: the largest rank's value of KIND
key() {
  local k=$1; shift
  cat "$@" | awk -F= -v k="$k" '$1 == k && $2 > m { m = $2 } END { print m + 0 }'
}

declare -A t g r a
for p in 1 "$ep"; do
  short=$(run "$p" 2)
  long=$(run "$p" $((2 + steps)))
  for k in gather reduce_scatter alltoall; do
    d=$(( $(key $k "$long".bytes.*) - $(key $k "$short".bytes.*) ))
    case $k in gather) g[$p]=$((d / steps)) ;; reduce_scatter) r[$p]=$((d / steps)) ;; alltoall) a[$p]=$((d / steps)) ;; esac
  done
  t[$p]=$(grep '"type": "train"' "$long/metrics.jsonl" | tail -n "$steps" |
    sed 's/.*"step_s": \([0-9.e+-]*\).*/\1/' | sort -g |
    awk '{ v[NR] = $1 } END { printf "%.4f", v[int((NR + 1) / 2)] }')
done

pred=$("$info" --config bench/configs/bench-e32.json --ranks 4 --seq 256 --batch 2 --gather-unit expert \
  --expert-parallel "$ep" 2>/dev/null)
pk() { printf '%s\n' "$pred" | sed -n "s/^$1=\([0-9.]*\).*/\1/p"; }

printf '%-8s %10s %14s %14s %14s %14s %14s\n' layout step_s gather_B reduce_B alltoall_B total_B predicted_B
for p in 1 "$ep"; do
  tot=$((g[$p] + r[$p] + a[$p]))
  if [ "$p" = 1 ]; then want=$(pk traffic_zero3_bytes_per_step); name=zero3; else want=$(pk traffic_ep_bytes_per_step); name="ep$p"; fi
  printf '%-8s %10s %14d %14d %14d %14d %14s\n' "$name" "${t[$p]}" "${g[$p]}" "${r[$p]}" "${a[$p]}" "$tot" "$want"
done
t1=$((g[1] + r[1] + a[1])); te=$((g[$ep] + r[$ep] + a[$ep]))
awk -v a="$t1" -v b="$te" -v s1="${t[1]}" -v se="${t[$ep]}" -v pr="$(pk traffic_ratio_zero3_over_ep)" 'BEGIN {
  printf "bytes per step, zero3 / ep: measured %.3f, minimax-info %s\n", a / b, pr
  printf "step time, zero3 / ep: %.3f\n", s1 / se }'
