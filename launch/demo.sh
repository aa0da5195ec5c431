#!/usr/bin/env bash
# demo.sh: the main job on a fresh machine: install dependencies, build, and train the tiny
# MiniMax-Text-01-shaped model on synthetic GSM8K-style data with 2 MPI ranks (about 25 s of
# training on 2 cores, after the build, then about a second answering 100 new problems by
# generation: eval.csv's accuracy, printed at the end).
# Usage: bash launch/demo.sh [RECIPE.toml] [minimax-train args...]   (default recipes/tiny.toml)
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/install-deps.sh --no-test-deps # the demo runs no tests: no browser
mkdir -p build # the build's log goes there, not into the source tree
cmake -S . -B build -G Ninja -DMT_WERROR=ON > build/demo-build.log 2>&1 ||
  { cat build/demo-build.log; exit 1; }
cmake --build build -j "$(nproc)" >> build/demo-build.log 2>&1 ||
  { tail -50 build/demo-build.log; exit 1; }
recipe="${1:-recipes/tiny.toml}"
[ $# -eq 0 ] || shift
# each demo starts afresh: --overwrite replaces the previous demo's outputs in output.dir (the
# trainer's own files only), unless the arguments continue it (--resume DIR) or say it already
fresh=(--overwrite)
for a in "$@"; do [ "$a" != --resume ] && [ "$a" != --overwrite ] || fresh=(); done
bash launch/run-local.sh -n "${MT_RANKS:-2}" "$recipe" "${fresh[@]}" "$@"
out="$(awk -F' = ' '/^dir = /{gsub(/"/,"",$2); print $2; exit}' "$recipe")"
if [ -f "$out/loss.csv" ]; then
  awk -F, 'NR==2{first=$2} NR>1{last=$2; step=$1} END{printf "loss: %.4f at step 1 -> %.4f at step %d\n", first, last, step}' "$out/loss.csv"
  # eval.csv: step,eval_loss,... and with eval.generate_data accuracy,correct,samples (cells of
  # what a row did not measure are empty)
  [ -f "$out/eval.csv" ] &&
    awk -F, 'NR>1 && $2!=""{printf "eval loss after step %d: %.4f\n", $1, $2}
      NR>1 && $5!=""{printf "accuracy by generation after step %d: %.1f%% (%d / %d problems; %s)\n",
        $1, 100*$5, $6, $7, "'"$out"'/eval-generate-" $1 ".jsonl"}' "$out/eval.csv"
  echo "loss curve: $out/loss.csv, $out/loss.png; model: $(ls -d "$out"/checkpoint-* | sort -V | tail -1)"
fi
