#!/usr/bin/env bash
# train_vs_torch.sh: training throughput of minimax-train against PyTorch + transformers on the
# CPU: same model, same initial weights, same batches, same thread count (docs/benchmarks.md,
# "training vs PyTorch"). A benchmark, not a test: it needs the Python venv described there.
#
#   bash bench/train_vs_torch.sh [--model small|m2|m3] [--steps N] [--warmup W] [--repeat R]
#                                [--data JSONL] [--out DIR] [--recompute] [--padded]
#
# --model: small (default) is a MiniMax-Text-01-shaped model (bench/configs/bench-small.json,
# bench/recipes/bench-small.toml), m2 a MiniMax-M2-shaped one (bench-m2.json, bench-m2.toml),
# m3 a MiniMax-M3-shaped text model (bench-m3.json, bench-m3.toml: dense and MoE layers, MSA
# layers whose top-4 blocks of 16 drop blocks of the longer rows). transformers' M3 has no
# indexer KL, so for m3 every compared minimax-train run sets model.aux_coef.index_kl = 0, and
# each round adds a 1 x 2 run with the KL on (the recipe's 1.0), whose step time against the
# KL-off 1 x 2 run is reported as the KL's own cost.
# 1. builds minimax-train (Release) in $MT_BENCH_BUILD (default build-bench) when needed;
# 2. transformers initialises the model (MiniMaxForCausalLM, MiniMaxM2ForCausalLM,
#    MiniMaxM3VLForCausalLM) from the config and saves it (fp32 safetensors): both sides start
#    from these weights;
# 3. minimax-train trains N steps (default 30) of the recipe (GSM8K train
#    split, default ../shared/data/gsm8k/train.jsonl; padded rows of at most 256 tokens, each
#    batch cut after its longest row on both sides (data.trim_padding), global batch 4,
#    no shuffling) as 1 rank x 2 threads and as 2 ranks x 1 thread (global batch 4 both times);
#    the recipes set data.padding_free: minimax-train runs each micro-batch's rows as one row
#    and skips the padding the trimming leaves, which transformers' sdpa attention on the CPU
#    cannot (it pads); --padded runs minimax-train on the padded rows as well;
# 4. bench/train_torch.py trains the same N steps with torch.set_num_threads(2), on the batches
#    it rebuilds from the token cache minimax-train wrote, with the resolved recipe's settings;
# 5. steps 3 and 4 run R times (default 2), interleaved, and each configuration's best repeat
#    counts (noise on a shared VM only ever slows a run down);
# 6. prints tokens/s over steps W+1..N (default W = 3; real tokens / step wall time), the ratios
#    minimax-train / PyTorch, how well the losses agree, the machine, and how much CPU other
#    processes took during each run (the numbers are only meaningful on an idle machine), and
#    each run's peak resident memory (GNU time's maximum RSS: the largest rank's).
# --padded: minimax-train with data.padding_free = false (the same padded rows as PyTorch).
# --recompute: both sides recompute each decoder layer in the backward
# (train.gradient_checkpointing; transformers' gradient_checkpointing_enable()). Default output
# runs/bench-train, with -m2 / -m3 and -recompute appended as the options say.
# Environment: MT_BENCH_PYTHON (default /work/pyref/bin/python), MT_BENCH_BUILD, MT_BENCH_OUT
# (default runs/bench-train); OMP_WAIT_POLICY, when set, goes to minimax-train's ranks only.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

model=small
steps=30
warmup=3
repeat=2
data=""
recompute=0
padded=0
out=""
while [ $# -gt 0 ]; do
  case "$1" in
  --model) model="$2"; shift 2 ;;
  --steps) steps="$2"; shift 2 ;;
  --warmup) warmup="$2"; shift 2 ;;
  --repeat) repeat="$2"; shift 2 ;;
  --data) data="$(realpath "$2")"; shift 2 ;;
  --out) out="$(realpath -m "$2")"; shift 2 ;;
  --recompute) recompute=1; shift ;;
  --padded) padded=1; shift ;;
  -h | --help) sed -n '2,35p' "$0"; exit 0 ;;
  *) echo "$0: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$steps" -gt "$warmup" ] || { echo "$0: --steps must exceed --warmup" >&2; exit 2; }
case "$model" in small | m2 | m3) ;; *) echo "$0: --model must be small, m2 or m3" >&2; exit 2 ;; esac
suffix=""
[ "$model" = small ] || suffix="-$model"
[ $recompute = 0 ] || suffix+="-recompute"
[ $padded = 0 ] || suffix+="-padded"
[ -n "$out" ] || out="$(realpath -m "${MT_BENCH_OUT:-$root/runs/bench-train$suffix}")"
mt_recompute=() pt_recompute=()
[ $recompute = 0 ] || { mt_recompute=(--set train.gradient_checkpointing=true); pt_recompute=(--gradient-checkpointing); }
[ $padded = 0 ] || mt_recompute+=(--set data.padding_free=false)
mt_kl_off=() # m3: the compared runs without the indexer KL (transformers has none)
[ "$model" != m3 ] || mt_kl_off=(--set model.aux_coef.index_kl=0)
cd "$root"
py="${MT_BENCH_PYTHON:-/work/pyref/bin/python}"
build="${MT_BENCH_BUILD:-$root/build-bench}"
config="bench/configs/bench-$model.json"
recipe="bench/recipes/bench-$model.toml"

"$py" -c "import torch, transformers, h5py" 2>/dev/null || {
  echo "$0: $py lacks torch/transformers/h5py; create the venv as docs/benchmarks.md says" >&2
  exit 2
}
mkdir -p "$out"

# 1. build (warnings are not errors here: a benchmark should not die on a new compiler warning)
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 ||
    { cat "$out/cmake.log" >&2; exit 1; }
fi
cmake --build "$build" --target minimax-train >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log" >&2; echo "$0: build failed ($build)" >&2; exit 1; }
bin="$build/minimax-train"

# 2. the common initial weights (made again only when the config changes)
if ! cmp -s "$config" "$out/init.config.json" || [ ! -f "$out/init/model.safetensors" ]; then
  "$py" bench/train_torch.py init --config "$config" --out "$out/init" --seed 42
  cp "$config" "$out/init.config.json"
fi

# shellcheck source-path=SCRIPTDIR source=measure.sh
source "$here/measure.sh"
measured() { # name command...: runs it (bench/measure.sh), adds its line to $others
  bench_measured "$@"
  others+="  $1: $bench_share"$'\n'
}
others=""

# 3. minimax-train, in launch/run-local.sh's environment (launch/env.sh: the OpenBLAS core type;
#    mpirun flags) but with explicit RANKS x THREADS: 1 x 2 and 2 x 1
# shellcheck source-path=SCRIPTDIR source=../launch/env.sh
source "$root/launch/env.sh"
as_root=()
[ "$(id -u)" -ne 0 ] || as_root=(--allow-run-as-root)
run_mt() { # name ranks threads per-device-batch [--set key=value...]
  local name="$1" ranks="$2" threads="$3" batch="$4" envs
  shift 4
  envs=(-x OPENBLAS_NUM_THREADS="$threads" -x OMP_NUM_THREADS="$threads")
  [ -z "${OPENBLAS_CORETYPE:-}" ] || envs+=(-x OPENBLAS_CORETYPE)
  [ -z "${OMP_WAIT_POLICY:-}" ] || envs+=(-x OMP_WAIT_POLICY)
  rm -rf "${out:?}/$name"
  measured "$name" mpirun "${as_root[@]}" -np "$ranks" --oversubscribe --bind-to none \
    --mca pml ob1 --mca btl self,vader "${envs[@]}" \
    "$bin" "$recipe" --set output.dir="$out/$name" --set model.path="$out/init" \
    --set data.cache_dir="$out/cache" --set train.max_steps="$steps" \
    --set train.per_device_train_batch_size="$batch" ${data:+--set data.path="$data"} \
    "${mt_recompute[@]}" "$@"
  rm -rf "${out:?}/$name"/checkpoint-* # the final training state (~200 MB), not needed here
}
echo "$repeat round(s) of: minimax-train 1 rank x 2 threads, 2 ranks x 1 thread$(
  [ "$model" != m3 ] || echo " (indexer KL off), 1 x 2 with the KL on");" \
  "PyTorch 2 threads; $steps steps each" >&2
mt12="" mt21="" pt="" mtkl=""
for r in $(seq 1 "$repeat"); do
  run_mt "mt-1x2.$r" 1 2 4 "${mt_kl_off[@]}"
  run_mt "mt-2x1.$r" 2 1 2 "${mt_kl_off[@]}"
  if [ "$model" = m3 ]; then # the KL's own cost: the recipe's index_kl (on)
    run_mt "mt-1x2-kl.$r" 1 2 4
    mtkl+="${mtkl:+,}$out/mt-1x2-kl.$r/loss.csv"
  fi
  # 4. PyTorch, from the 1-rank run's resolved recipe (checkpoint, token cache, batch and
  #    hyper-parameters), in its default OpenMP setting (PASSIVE slows it; ACTIVE, what
  #    launch/env.sh gives minimax-train, measured no faster: 1573-2116 vs 1820-2238 tok/s)
  measured "torch.$r" env -u OMP_WAIT_POLICY "$py" bench/train_torch.py train --recipe "$out/mt-1x2.1/recipe.toml" \
    --world 1 --threads 2 --csv "$out/torch.$r.csv" "${pt_recompute[@]}"
  mt12+="${mt12:+,}$out/mt-1x2.$r/loss.csv"
  mt21+="${mt21:+,}$out/mt-2x1.$r/loss.csv"
  pt+="${pt:+,}$out/torch.$r.csv"
done

# 6. results
{
  echo "== training vs PyTorch: $(date -u +%Y-%m-%dT%H:%MZ), $steps steps, warm-up $warmup," \
    "best of $repeat$([ $recompute = 1 ] && echo ", layers recomputed in the backward on both sides")"
  echo "machine: $("$py" bench/train_torch.py machine); OpenBLAS core type" \
    "${OPENBLAS_CORETYPE:-auto}; OMP_WAIT_POLICY ${OMP_WAIT_POLICY:-unset}"
  echo "minimax-train: commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "?")$(
    git -C "$root" diff --quiet HEAD 2>/dev/null || echo " + uncommitted changes"), $bin"
  echo "model: $config ($(sed -n 's/^model: \([^;]*\) in [0-9]* buckets.*/\1/p' "$out/mt-1x2.1.log"))"
  echo "pytorch: $(grep -m1 '^torch ' "$out/torch.1.log")"
  echo "rows: minimax-train $(if grep -q '^padding_free = true' "$out/mt-1x2.1/recipe.toml"; then
    echo "padding-free (each micro-batch's samples as one row, data.padding_free)"
  else echo "padded like PyTorch's (--padded)"; fi); PyTorch padded to each batch's longest row"
  [ "$model" != m3 ] || echo "indexer KL: off in the compared minimax-train runs" \
    "(model.aux_coef.index_kl = 0; transformers has none), on (the recipe's) in the 1x2 KL-on runs"
  "$py" bench/train_torch.py summary --warmup "$warmup" --ref "pytorch 1x2" \
    "minimax-train 1x2=$mt12" "minimax-train 2x1=$mt21" "pytorch 1x2=$pt"
  [ -z "$mtkl" ] || "$py" bench/train_torch.py cost --warmup "$warmup" --what "the indexer KL" \
    "minimax-train 1x2=$mt12" "minimax-train 1x2 KL on=$mtkl"
  echo "interference and memory (whole runs, start-up included; above ~5% the tokens/s are not" \
    "reliable):"
  printf "%s" "$others"
} | tee "$out/summary.txt"
