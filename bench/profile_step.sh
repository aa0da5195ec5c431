#!/usr/bin/env bash
# profile_step.sh: the op profile of a training step (MT_PROFILE=1; docs/benchmarks.md, "Op
# profile") of the bench models of bench/train_vs_torch.sh, against this machine's limits.
#
#   bash bench/profile_step.sh [--model small|m2|m3|all] [--steps N] [--ranks R] [--threads T]
#                              [--data JSONL] [--out DIR]
#
# --model: small is the MiniMax-Text-01-shaped bench model (bench/configs/bench-small.json),
# m2 the MiniMax-M2-shaped one (bench-m2.json), m3 the MiniMax-M3-shaped one (bench-m3.json:
# a dense layer under full attention, then MoE layers under MSA, blocks of 16, top 4 blocks, so
# the longer rows drop blocks; the indexer's KL on, as its recipe says), each with its bench
# recipe (bench/recipes/bench-*.toml: GSM8K rows padded to 256 tokens, global batch 4): the
# models of bench/train_vs_torch.sh; all (default): the three. Random initial weights
# (model.config): the profile needs no PyTorch.
# 1. builds minimax-train and bench-roofline (Release) in $MT_BENCH_BUILD (default build-bench);
# 2. measures this machine's limits once (bench/roofline.c): the fp32 GEMM rate (cblas_sgemm
#    1024^3 on T threads) and the memory bandwidth (a triad on T threads); MT_PEAK_GFLOPS and
#    MT_PEAK_GBPS replace the measured values (e.g. an idle machine's, or
#    ../shared/research/build-machine.md's 250-300 GFLOP/s for both cores);
# 3. trains each model N steps (default 6) with MT_PROFILE=1 as R ranks x T threads (default
#    1 x 2), in launch/env.sh's environment; the profile skips step 1 (warm-up);
# 4. prints each run's table (rank 0's, as minimax-train prints it), then per op its achieved
#    GFLOP/s against the GEMM rate and GB/s against the bandwidth (the larger of the two
#    fractions says which limit the op is nearer), and how much of the CPUs other processes took
#    during the run (as bench/train_vs_torch.sh measures it: above ~5 % the times are not
#    reliable). Output: DIR (default runs/bench-profile)/<model>/profile.tsv and summary.txt.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

models=all
steps=6
ranks=1
threads=2
data=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
  --model) models="$2"; shift 2 ;;
  --steps) steps="$2"; shift 2 ;;
  --ranks) ranks="$2"; shift 2 ;;
  --threads) threads="$2"; shift 2 ;;
  --data) data="$(realpath "$2")"; shift 2 ;;
  --out) out="$(realpath -m "$2")"; shift 2 ;;
  -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
  *) echo "$0: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$models" in small | m2 | m3) ;; all) models="small m2 m3" ;;
*) echo "$0: --model must be small, m2, m3 or all" >&2; exit 2 ;; esac
[ "$steps" -ge 2 ] || { echo "$0: --steps must be at least 2 (step 1 is warm-up)" >&2; exit 2; }
[ $((4 % ranks)) = 0 ] || { echo "$0: --ranks must divide the global batch 4" >&2; exit 2; }
[ -n "$out" ] || out="$(realpath -m "${MT_BENCH_OUT:-$root/runs/bench-profile}")"
cd "$root"
build="${MT_BENCH_BUILD:-$root/build-bench}"
mkdir -p "$out"
if [ -z "$data" ]; then
  data="$(realpath -m "$root/../shared/data/gsm8k/train.jsonl")"
  [ -f "$data" ] || data=synthetic # no GSM8K here: the recipes' tokenizer on synthetic samples
fi

# 1. build (warnings are not errors here: a benchmark should not die on a new compiler warning)
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 ||
    { cat "$out/cmake.log" >&2; exit 1; }
fi
cmake --build "$build" --target minimax-train bench-roofline >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log" >&2; echo "$0: build failed ($build)" >&2; exit 1; }
bin="$build/minimax-train"

# shellcheck source-path=SCRIPTDIR source=../launch/env.sh
source "$root/launch/env.sh"

# 2. the limits
limits="$(OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" "$build/bench-roofline" 5)"
peak_gflops="${MT_PEAK_GFLOPS:-$(awk '$1 == "gemm_gflops" { print $2 }' <<<"$limits")}"
peak_gbps="${MT_PEAK_GBPS:-$(awk '$1 == "mem_gbps" { print $2 }' <<<"$limits")}"

# shellcheck source-path=SCRIPTDIR source=measure.sh
source "$here/measure.sh"
measured() { # name command...: runs it (bench/measure.sh), sets $others for the summary
  bench_measured "$@"
  others="$bench_share"
}

as_root=()
[ "$(id -u)" -ne 0 ] || as_root=(--allow-run-as-root)
envs=(-x MT_PROFILE=1 -x OPENBLAS_NUM_THREADS="$threads" -x OMP_NUM_THREADS="$threads")
[ -z "${OPENBLAS_CORETYPE:-}" ] || envs+=(-x OPENBLAS_CORETYPE)
[ -z "${OMP_WAIT_POLICY:-}" ] || envs+=(-x OMP_WAIT_POLICY)

{
  echo "== op profile: $(date -u +%Y-%m-%dT%H:%MZ), $steps steps (step 1 not counted)," \
    "$ranks rank(s) x $threads thread(s), data $data"
  echo "minimax-train: commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "?")$(
    git -C "$root" diff --quiet HEAD 2>/dev/null || echo " + uncommitted changes"); OpenBLAS" \
    "core type ${OPENBLAS_CORETYPE:-auto}; OMP_WAIT_POLICY ${OMP_WAIT_POLICY:-unset}"
  echo "limits on $threads thread(s) (bench-roofline):" $limits"; used: GEMM $peak_gflops" \
    "GFLOP/s, memory $peak_gbps GB/s${MT_PEAK_GFLOPS:+ (MT_PEAK_GFLOPS)}${MT_PEAK_GBPS:+ (MT_PEAK_GBPS)}"
} | tee "$out/summary.txt"

for model in $models; do
  recipe="bench/recipes/bench-$model.toml"
  sets=()
  [ "$data" != synthetic ] || sets+=(--set data.synthetic_samples=256)
  rm -rf "${out:?}/$model"
  # 3. the run
  measured "$model" mpirun "${as_root[@]}" -np "$ranks" --oversubscribe --bind-to none \
    --mca pml ob1 --mca btl self,vader "${envs[@]}" \
    "$bin" "$recipe" --set output.dir="$out/$model" --set data.cache_dir="$out/cache-$model" \
    --set data.path="$data" --set train.max_steps="$steps" \
    --set train.per_device_train_batch_size=$((4 / ranks)) "${sets[@]}"
  rm -rf "${out:?}/$model"/checkpoint-* # the final training state, not needed here
  # 4. the tables
  {
    echo
    echo "== $model: $(sed -n 's/^model: \([^;]*\) in [0-9]* buckets.*/\1/p' "$out/$model.log")"
    sed -n '/^op profile/,/(untimed)/p' "$out/$model.log"
    echo "against the limits (GEMM $peak_gflops GFLOP/s, memory $peak_gbps GB/s):"
    awk -F'\t' -v pf="$peak_gflops" -v pb="$peak_gbps" '
      NR == 1 { printf "  %-22s %-4s %10s %7s %9s %8s %9s %8s  %s\n", "op", "dir", "ms/step",
                "share", "GFLOP/s", "of peak", "GB/s", "of bw", "nearer"; next }
      $1 == "(step)" || $1 == "(untimed)" { next }
      { f = $8 / pf; b = $9 / pb;
        printf "  %-22s %-4s %10.3f %6.1f%% %9.2f %7.1f%% %9.2f %7.1f%%  %s\n", $1, $2, $4,
               100 * $5, $8, 100 * f, $9, 100 * b, (f + b == 0 ? "-" : f >= b ? "compute" : "memory") }' \
      "$out/$model/profile.tsv"
    echo "interference: $others"
  } | tee -a "$out/summary.txt"
done
