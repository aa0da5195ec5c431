#!/usr/bin/env bash
# data_pipeline_refusals.sh: recipes, data files and the trainer's environment that must be
# refused in one line naming the cause (ctest data_pipeline_refusals; docs/training.md,
# "Failure").
#   data_pipeline_refusals.sh BUILD_DIR   (run from the source directory; MT_TEST_TMPDIR, else
#                                          BUILD_DIR/test-tmp)
#   - train.max_grad_norm = nan (as train.learning_rate = nan), eval.generate_top_p = 0 (named as
#     itself), data.path = "" beside data.paths, data.paths = []: the key named
#   - a recipe that defines a table twice: both lines named; a string whose line ends in '\'
#     (at the end of the file, with and without a newline): file:line:col, one line
#   - data.max_length that drops every record: "no usable samples" says max_length and how many
#   - a JSON array with a trailing comma: the line and column of the comma
#   - junk in the numbers the trainer reads from its environment (MT_MPI_CHUNK, MT_TEST_WATCHDOG,
#     OMPI_COMM_WORLD_LOCAL_SIZE): refused naming the variable
set -euo pipefail
build="$(cd "$1" && pwd)"
bin="$build/minimax-train"
tmp="${MT_TEST_TMPDIR:-$build/test-tmp}/refusals"
rm -rf "$tmp"
mkdir -p "$tmp"
# MT_KEEP_GOING=1: every case reported (to show each one failing on an older build), exit 1 at
# the end if any failed
failed=0
fail() {
  echo "FAIL: $*"
  [ -n "${MT_KEEP_GOING:-}" ] || exit 1
  failed=1
}
good='[model]
config = "'"$PWD"'/recipes/configs/tiny.json"
num_hidden_layers = 1
[data]
tokenizer_dir = "'"$PWD"'/tests/fixtures/tokenizer"
max_length = 64
synthetic_samples = 16
truncation = "truncate"
'
errline='^\(\[rank [0-9]*\] \)\?error\|^minimax-data [a-z]*: ' # a line of an error
# refused LOG PATTERN CMD...: non-zero exit, exactly one line saying error, matching PATTERN
refused() {
  local log="$1" pattern="$2" rc=0
  shift 2
  "$@" > "$log" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || { tail -2 "$log"; fail "exit 0: $*"; return 0; }
  grep -q -- "$pattern" "$log" || { tail -2 "$log"; fail "want '$pattern' from: $*"; return 0; }
  [ "$(grep -c "$errline" "$log")" -eq 1 ] || { cat "$log"; fail "not one error line: $*"; return 0; }
  echo "ok: $(grep "$errline" "$log" | cut -c1-300)"
}
recipe() { # recipe TEXT: $tmp/r.toml
  printf '%s' "$1" > "$tmp/r.toml"
}
n_out=0 # a directory of its own for each run (an older build runs what this one refuses)
train() {
  n_out=$((n_out + 1))
  "$bin" "$tmp/r.toml" --set "output.dir=$tmp/out-$n_out" --set "data.cache_dir=$tmp/cache" "$@"
}

# recipe keys
recipe "$good[train]
max_steps = 1
max_grad_norm = nan
"
refused "$tmp/gn.log" "r.toml:11:17: train.max_grad_norm: must be a finite number" train
recipe "$good[train]
max_steps = 1
"
refused "$tmp/tp.log" "^error: --set eval.generate_top_p: eval.generate_top_p: must be in (0, 1]" \
  train --set eval.generate_data=synthetic --set eval.generate_samples=2 --set eval.generate_top_p=0
f=tests/fixtures/formats
refused "$tmp/dp.log" "^error: --set data.path: data.path: is empty" \
  train --set 'data.path=""' --set "data.paths=[\"$f/messages.jsonl\"]"
refused "$tmp/dps.log" "^error: --set data.paths: data.paths: is an empty list" \
  train --set 'data.paths=[]'
# the TOML reader
recipe "$good[train]
max_steps = 1
[output]
dir = \"runs/x\"
[train]
learning_rate = 1e-4
"
refused "$tmp/tt.log" "r.toml:13:2: table \[train\] is defined twice (first at line 9)" train
recipe "$good[output]
dir = \"runs\\"
refused "$tmp/bs.log" "r.toml:10:12: a '\\\\' at the end of the line" train
recipe "$good[output]
dir = \"runs\\
"
refused "$tmp/bsn.log" "r.toml:10:12: a '\\\\' at the end of the line" train

# data
recipe "$good[train]
max_steps = 1
"
refused "$tmp/ml.log" "no usable samples: all 16 samples (of 16 records) are longer than data.max_length = 8 tokens" \
  train --set data.max_length=8 --set data.truncation=drop
printf '[{"question": "1+1?", "answer": "#### 2"},\n  {"question": "2+1?", "answer": "#### 3"}  ,\n]\n' \
  > "$tmp/comma.json"
refused "$tmp/comma.log" "comma.json:2:45: malformed JSON array: a trailing comma" \
  "$build/minimax-data" tokenize --data "$tmp/comma.json" --tokenizer tests/fixtures/tokenizer \
  --out "$tmp/comma.h5"

# the environment
refused "$tmp/env1.log" "MT_MPI_CHUNK wants an integer in \[1, 1073741824\], got \"abc\"" \
  env MT_MPI_CHUNK=abc "$bin" "$tmp/r.toml" --set "output.dir=$tmp/out-env$RANDOM"
refused "$tmp/env2.log" "MT_TEST_WATCHDOG wants a number" \
  env MT_TEST_WATCHDOG="1 x" "$bin" "$tmp/r.toml" --set "output.dir=$tmp/out-env$RANDOM"
refused "$tmp/env3.log" "OMPI_COMM_WORLD_LOCAL_SIZE wants an integer in \[1, 1048576\], got \"2x\"" \
  env OMPI_COMM_WORLD_LOCAL_SIZE=2x "$bin" "$tmp/r.toml" --set "output.dir=$tmp/out-env$RANDOM"
[ "$failed" -eq 0 ] || exit 1
echo "ok: data_pipeline_refusals"
