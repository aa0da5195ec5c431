#!/usr/bin/env bash
# cp_memory.sh: what context parallelism saves (issue 39's benchmark; docs/benchmarks.md,
# "Context parallelism"). A benchmark, not a test.
#
#   bash bench/cp_memory.sh [--model text01|m3] [--seq 8192] [--ranks 4] [--steps 4] [--out DIR]
#
# The tiny Text-01 config (recipes/configs/tiny.json; --model m3: the tiny M3,
# recipes/configs/tiny-m3.json, whose MSA layers gather K, V and the index keys under context
# parallelism and keep them until their backward) trains on rows of --seq tokens (default
# 8192: generated conversations longer than that, truncated to it) on --ranks CPU ranks
# (default 4, one thread each), per-device batch 1, layers kept (no recompute), once with dist.context_parallel = 1 (each rank a whole
# row) and once with C = ranks (every rank 1/C of one row). For each: the activation arena's
# peak per rank (the trainer's memory line: live tensors, and with the kernels' scratch), the
# host peak RSS of rank 0 (metrics.jsonl), minimax-info's planned activations per rank for the
# same layout (--seq T [--context-parallel C]), the step time (steps after the first) and the
# share of the CPUs other processes took (bench/measure.sh; above ~5 % the times are not
# results; the memory figures are).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
model=text01
seq=8192
ranks=4
steps=4
out="$root/runs/bench-cp"
while [ $# -gt 0 ]; do
  case "$1" in
  --model) model="$2"; shift 2 ;;
  --seq) seq="$2"; shift 2 ;;
  --ranks) ranks="$2"; shift 2 ;;
  --steps) steps="$2"; shift 2 ;;
  --out) out="$(realpath -m "$2")"; shift 2 ;;
  -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
  *) echo "$0: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$model" in
text01) config=recipes/configs/tiny.json recipe=tests/recipes/dist.toml ;;
m3) config=recipes/configs/tiny-m3.json recipe=tests/recipes/dist-m3.toml ;;
*) echo "$0: --model text01 or m3, not $model" >&2; exit 2 ;;
esac
build="${MT_BENCH_BUILD:-$root/build-bench}"
cd "$root"
mkdir -p "$out"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 ||
    { cat "$out/cmake.log" >&2; exit 1; }
fi
cmake --build "$build" --target minimax-train minimax-info >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log" >&2; echo "$0: build failed ($build)" >&2; exit 1; }
# shellcheck source-path=SCRIPTDIR source=measure.sh
. "$here/measure.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# conversations of about 1.5 --seq words (the test tokenizer), cut to --seq tokens
data="$out/long.jsonl"
python3 - "$data" "$seq" "$ranks" "$steps" <<'PY'
import json, random, sys
path, seq, ranks, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(7)
words = "the a of to and in is for on with that by this at from tool call result answer step".split()
with open(path, "w") as f:
    for _ in range(ranks * (steps + 1)):
        text = " ".join(rng.choice(words) for _ in range(seq * 3 // 2))
        f.write(json.dumps({"messages": [{"role": "user", "content": "Summarise the trace."},
                                         {"role": "assistant", "content": text}]}) + "\n")
PY

printf "%-6s %14s %14s %14s %12s %10s %s\n" C "planned MiB" "arena MiB" "rank-0 RSS MiB" "s/step" \
  "tokens/s" "machine"
for C in 1 "$ranks"; do
  info=("$build/minimax-info" --config "$config" --seq "$seq")
  [ "$C" -gt 1 ] && info+=(--context-parallel "$C")
  planned="$("${info[@]}" | sed -n 's/^activation_bytes_kept=\([0-9]*\).*/\1/p')"
  dir="$out/$model-c$C"
  rm -rf "$dir"
  bench_measured "$model-c$C" mpirun -np "$ranks" --oversubscribe --bind-to none "$build/minimax-train" \
    "$recipe" --set "output.dir=$dir" --set "data.cache_dir=$out/cache-$model" \
    --set "data.path=$data" --set "data.max_length=$seq" --set data.truncation=truncate \
    --set data.packing=false --set data.eval_samples=0 \
    --set train.per_device_train_batch_size=1 --set "train.max_steps=$steps" \
    --set "dist.context_parallel=$C" --set dist.arena_mb=4096 --set output.export_final=false
  # the memory line of every rank: peak use (with kernel scratch) and the live part
  arena="$(sed -n 's/.*peak use \([0-9.]*\) MiB, \([0-9.]*\) MiB without.*/\1 \2/p' "$out/$model-c$C.log" |
    awk '{ if ($1 > a) a = $1; if ($2 > l) l = $2 } END { printf "%.1f (%.1f live)", a, l }')"
  rss="$(grep -o '"host_peak_rss_mib": *[0-9.]*' "$dir/metrics.jsonl" | tail -1 | awk '{ printf "%.0f", $2 }')"
  # loss.csv's columns by name (models with auxiliary terms add columns)
  step="$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "elapsed_s") e = i }
    NR > 2 { s += $e - prev } { prev = $e } END { if (NR > 2) printf "%.3f", s / (NR - 2) }' \
    "$dir/loss.csv")"
  toks="$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "tokens") k = i }
    NR > 2 { t += $k } END { print t }' "$dir/loss.csv")"
  printf "%-6s %14.1f %14s %14s %12s %10.0f %s\n" "$C" "$(echo "$planned / 1048576" | bc -l)" \
    "$arena" "$rss" "$step" "$(echo "$toks / ($step * ($steps - 1))" | bc -l)" "$bench_share"
done
echo "tiny $model, rows of $seq tokens, $ranks ranks x 1 thread, per-device batch 1: C = 1" \
  "trains $ranks rows a step, C = $ranks one row; planned = minimax-info activation_bytes_kept" >&2
