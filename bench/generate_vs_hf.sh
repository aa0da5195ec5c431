#!/usr/bin/env bash
# generate_vs_hf.sh: generation throughput of minimax-eval against transformers' generate on the
# CPU: same model and weights, same prompts, same batch, greedy, same thread count
# (docs/benchmarks.md, "generation vs transformers"). A benchmark, not a test: it needs the
# Python venv of docs/benchmarks.md.
#
#   bash bench/generate_vs_hf.sh [--limit N] [--batches "1 8"] [--max-new-tokens M]
#                                [--threads K] [--wait-policy active|passive] [--repeat R]
#                                [--data JSONL] [--out DIR]
#
# 1. builds minimax-eval (Release) in $MT_BENCH_BUILD (default build-bench) when needed;
# 2. transformers initialises bench/configs/bench-small.json's model (bench/train_torch.py init,
#    seed 42, fp32 safetensors) and the test tokenizer (tests/fixtures/tokenizer) joins it;
# 3. for each batch size B (default 1 and 8): minimax-eval on 1 rank with K threads (default 2)
#    and bench/generate_hf.py with torch.set_num_threads(K) decode the first N questions
#    (default 16) of the GSM8K train split (default ../shared/data/gsm8k/train.jsonl), B at a
#    time, up to M new tokens (default 64) each; R rounds (default 2), interleaved, the best
#    of each side counts;
#    Both sides run with OMP_WAIT_POLICY=--wait-policy (default active): a decode step is many
#    small parallel loops, and passive OpenMP threads sleep after each one (launch/env.sh sets
#    active too);
# 4. prints tokens/s of both (tokens generated / wall time of the decoding: minimax-eval's own
#    report, generate's calls), the ratio minimax-eval / transformers, how many completions
#    agree (greedy both: they should all be equal), and the machine.
# Environment: MT_BENCH_PYTHON (default /work/pyref/bin/python), MT_BENCH_BUILD.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

limit=16
batches="1 8"
n_new=64
threads=2
wait_policy=active
repeat=2
data="$root/../shared/data/gsm8k/train.jsonl"
out="$root/runs/bench-generate"
while [ $# -gt 0 ]; do
  case "$1" in
  --limit) limit="$2"; shift 2 ;;
  --batches) batches="$2"; shift 2 ;;
  --max-new-tokens) n_new="$2"; shift 2 ;;
  --threads) threads="$2"; shift 2 ;;
  --wait-policy) wait_policy="$2"; shift 2 ;;
  --repeat) repeat="$2"; shift 2 ;;
  --data) data="$(realpath "$2")"; shift 2 ;;
  --out) out="$(realpath -m "$2")"; shift 2 ;;
  -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
  *) echo "$0: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -r "$data" ] || { echo "$0: $data: cannot read the questions (--data JSONL)" >&2; exit 2; }
cd "$root"
py="${MT_BENCH_PYTHON:-/work/pyref/bin/python}"
build="${MT_BENCH_BUILD:-$root/build-bench}"
"$py" -c "import torch, transformers" 2>/dev/null || {
  echo "$0: $py lacks torch/transformers; create the venv as docs/benchmarks.md says" >&2
  exit 2
}
mkdir -p "$out"

# 1. build
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 ||
    { cat "$out/cmake.log" >&2; exit 1; }
fi
cmake --build "$build" --target minimax-eval >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log" >&2; echo "$0: build failed ($build)" >&2; exit 1; }

# 2. the model, with the tokenizer (made again only when the config changes)
config=bench/configs/bench-small.json
model="$out/model"
if ! cmp -s "$config" "$out/model.config.json" || [ ! -f "$model/model.safetensors" ]; then
  "$py" bench/train_torch.py init --config "$config" --out "$model" --seed 42
  cp "$config" "$out/model.config.json"
fi
cp tests/fixtures/tokenizer/tokenizer.json tests/fixtures/tokenizer/tokenizer_config.json "$model/"

# 3. both sides, interleaved; the best rate of each
# shellcheck source-path=SCRIPTDIR source=../launch/env.sh
source "$root/launch/env.sh"
export OMP_WAIT_POLICY="$wait_policy"
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b > a) ? b : a }'; }
echo "machine: $("$py" -c 'import platform, os; print(platform.machine(), os.cpu_count(), "CPUs")');" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" >&2
printf "%-6s %14s %14s %8s %8s\n" batch minimax-eval transformers ratio agree
for B in $batches; do
  mt="" hf="" agree=""
  for _ in $(seq 1 "$repeat"); do
    OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" "$build/minimax-eval" \
      --model "$model" --data "$data" --limit "$limit" --batch "$B" --max-new-tokens "$n_new" \
      --out "$out/mt-$B.jsonl" >"$out/mt-$B.log" 2>&1 ||
      { tail -20 "$out/mt-$B.log" >&2; exit 1; }
    rate="$(sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p' "$out/mt-$B.log")"
    mt="$(best "$mt" "$rate")"
    "$py" bench/generate_hf.py --model "$model" --data "$data" --limit "$limit" --batch "$B" \
      --max-new-tokens "$n_new" --threads "$threads" --compare "$out/mt-$B.jsonl" \
      >"$out/hf-$B.log" 2>&1 || { tail -20 "$out/hf-$B.log" >&2; exit 1; }
    line="$(tail -1 "$out/hf-$B.log")"
    hf="$(best "$hf" "$(echo "$line" | awk '{print $6}')")"
    agree="$(echo "$line" | awk '{print $8}')"
  done
  printf "%-6s %14s %14s %8s %8s\n" "$B" "$mt" "$hf" \
    "$(awk -v a="$mt" -v b="$hf" 'BEGIN { printf "%.2fx", a / b }')" "$agree"
done
echo "tokens/s: tokens generated over the decoding's wall time, $limit questions, up to $n_new" \
  "new tokens, $threads threads each, OMP_WAIT_POLICY=$wait_policy, best of $repeat" >&2
