#!/usr/bin/env bash
# bench/tokenize.sh: C tokenizer (bench-tokenize) vs HF `tokenizers` (bench/tokenize_hf.py) on all
# GSM8K training samples rendered with the chat template, both pinned to the same core, and the
# speed ratios HF time / C time (> 1: C is faster), in wall time and in process CPU time (the
# latter is the one to trust on a busy machine). Not a test.
#
# usage: bench/tokenize.sh [build dir] [tokenizer.json] [train.jsonl]
# env: PYTHON (default /work/pyref/bin/python), CORE (default: the last CPU), PASSES (default 5).
# Run from the repository root after building the bench-tokenize target.
set -euo pipefail
BUILD=${1:-build}
TOK=${2:-tests/fixtures/tokenizer/tokenizer.json}
DATA=${3:-../shared/data/gsm8k/train.jsonl}
PYTHON=${PYTHON:-/work/pyref/bin/python}
PASSES=${PASSES:-5}
CORE=${CORE:-$(($(nproc) - 1))}

[ -x "$BUILD/bench-tokenize" ] || { echo "no $BUILD/bench-tokenize: build it first" >&2; exit 1; }
[ -f "$DATA" ] || { echo "no $DATA" >&2; exit 1; }
PIN=""
command -v taskset >/dev/null && PIN="taskset -c $CORE"

c_out=$($PIN "$BUILD/bench-tokenize" "$TOK" "$DATA" "$PASSES")
hf_out=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false $PIN "$PYTHON" bench/tokenize_hf.py "$TOK" "$DATA" "$PASSES")
echo "$c_out" | grep -v '^RESULT'
echo "$hf_out" | grep -v '^RESULT'
echo "(both pinned to core $CORE${PIN:+ with taskset}; one thread each)"
printf '%s\n%s\n' "$c_out" "$hf_out" | awk '
  /^RESULT/ { name = $2; for (i = 3; i <= NF; i++) { split($i, kv, "="); v[name, kv[1]] = kv[2] } names[name] = 1 }
  END {
    if (!(("c", "warm") in v)) exit 1
    for (n in names) if (n != "c" && v[n, "tokens"] != v["c", "tokens"])
      printf "WARNING: %s produced %s tokens, C %s\n", n, v[n, "tokens"], v["c", "tokens"]
    split("hf_loop hf_batch hf_batch_fast", order, " ")
    for (k = 1; k <= 3; k++) { n = order[k]; if ((n, "warm") in v)
      printf "ratio HF/C %-14s wall: cold %5.2fx  warm %5.2fx   CPU time: cold %5.2fx  warm %5.2fx\n", n ":",
        v[n, "cold"] / v["c", "cold"], v[n, "warm"] / v["c", "warm"],
        v[n, "cold_cpu"] / v["c", "cold_cpu"], v[n, "warm_cpu"] / v["c", "warm_cpu"] }
  }'
