#!/usr/bin/env bash
# run_failures.sh: end-to-end runs of minimax-train on real MPI ranks (dist_*, data_recipe_*):
# failures that must end a run in one line: a full disk, a diverging run, a malformed recipe.
#   run_failures.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   disk-full        a checkpoint beyond a file size limit: one-line error with HDF5's reason,
#                    non-zero exit, no checkpoint under its final name and no temporary file
#                    left; the same for the HF export; loss.csv, eval.csv and metrics.jsonl on /dev/full
#                    (recipe.toml: data_write_failure_cleanup)
#   nonfinite        a diverging run stops naming the step, or skips steps when told to
#   bad-recipe       malformed recipes: one-line file:line errors, non-zero exit, no model; an
#                    activation arena too small for one micro-step
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

case "$mode" in
disk-full)
  # limited KB OUT: 2 ranks, 2 steps and a checkpoint at step 2 under a file size limit of KB
  # KiB (the trainer ignores SIGXFSZ, so writes fail with EFBIG as on a full disk or quota;
  # mpirun restores the signal's default action, death, in the ranks); must fail, leaving no
  # checkpoint-2
  limited() {
    rm -rf "$2"
    local rc=0
    (
      ulimit -f "$1"
      mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$2" \
        --set "data.cache_dir=$tmp/dist-cache-np2" --set train.max_steps=2 \
        --set output.save_steps=2 --set train.per_device_train_batch_size=2
    ) > "$2.log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { echo "FAIL: $2: a checkpoint beyond $1 KiB was written"; exit 1; }
    [ ! -e "$2/checkpoint-2" ] || { echo "FAIL: $2: checkpoint-2 exists"; exit 1; }
    no_leftovers "$2"
  }
  no_leftovers() { # no temporary file or directory of a failed write in $1
    local left
    left=$(find "$1" -name '*.tmp*' | head -5)
    [ -z "$left" ] || { echo "FAIL: temporary files left behind: $left"; exit 1; }
  }
  # 20 MB against each rank's 21 MB state file: one line names the file, the dataset and HDF5's
  # reason, the system's (no HDF5 error stack); loss.csv keeps both steps
  out="$tmp/disk-full"
  limited 20000 "$out"
  grep -E "^\[rank [0-9]\] error: .*/checkpoint-2\.tmp/state-0000[01]-of-00002\.h5: cannot write dataset bucket_[0-9]+_[a-z]+ \(HDF5: Write failed: File too large\)" \
    "$out.log" || { echo "FAIL: no error naming the file and HDF5's reason"; tail -20 "$out.log"; exit 1; }
  ! grep -q "HDF5-DIAG" "$out.log" || { echo "FAIL: HDF5 printed its error stack"; exit 1; }
  [ "$(wc -l < "$out/loss.csv")" -eq 3 ] || { echo "FAIL: loss.csv lacks a step"; exit 1; }
  # 10 MB against the 14 MB export, written first
  out="$tmp/disk-full-export"
  limited 10000 "$out"
  grep -E "^\[rank 0\] error: .*/checkpoint-2\.tmp/\.model-00001\.safetensors\.tmp\.[0-9]+: write failed: File too large" \
    "$out.log" || { echo "FAIL: no error naming the export file"; tail -20 "$out.log"; exit 1; }
  # the loss log and the eval log on a full device (/dev/full: every write fails with ENOSPC)
  full_log() { # full_log FILE ARGS...: FILE of the output directory on /dev/full
    local file="$1" out="$tmp/disk-full-$1" rc=0
    shift
    rm -rf "$out"
    mkdir -p "$out"
    ln -s /dev/full "$out/$file"
    mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$out" \
      --set "data.cache_dir=$tmp/dist-cache-np2" --set train.max_steps=2 \
      --set train.per_device_train_batch_size=2 "$@" > "$out.log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { echo "FAIL: a run without its $file went on"; exit 1; }
    grep "$file: write failed: No space left on device" "$out.log" ||
      { echo "FAIL: no error naming $file"; tail -20 "$out.log"; exit 1; }
  }
  full_log loss.csv
  full_log eval.csv --set data.eval_samples=8
  full_log metrics.jsonl
  ;;
nonfinite)
  # a learning rate of 1e30 overflows the parameters after step 1: the job must stop with the
  # step number, or skip such steps when the recipe says so
  rc=0
  run 2 "$tmp/nan" --set train.learning_rate=1e30 --set train.max_grad_norm=0 \
    --set train.per_device_train_batch_size=2 --set train.max_steps=4 || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: a NaN run exited 0"; exit 1; }
  grep -E "error: .*step [0-9]+: the (loss|gradient) is not finite" "$tmp/nan.log"
  run 2 "$tmp/nan-skip" --set train.learning_rate=1e30 --set train.max_grad_norm=0 \
    --set train.per_device_train_batch_size=2 --set train.max_steps=4 \
    --set train.skip_nonfinite_steps=true
  grep -E "step [0-9]+: non-finite loss or gradient, step skipped" "$tmp/nan-skip.log"
  ;;
bad-recipe)
  expect() { # expect RECIPE_TEXT PATTERN [ARGS...]: the recipe refused before any model
    local text="$1" pattern="$2"
    shift 2
    printf '%s' "$text" > "$tmp/bad.toml"
    refused 2 "$tmp/bad.log" "$pattern" "$tmp/bad.toml" "$@"
  }
  # the recipe is written in $tmp: its paths absolute (relative ones are the recipe folder's)
  good="[model]\\nconfig = \"$PWD/recipes/configs/tiny.json\"\\n[data]\\ntokenizer_dir = \"$PWD/tests/fixtures/tokenizer\"\\n"
  expect "$(printf "$good")
[train]
max_steps = 10 steps
" "bad.toml:6:16: unexpected 's'"
  expect "$(printf "$good")
[train]
learnig_rate = 1e-5
" "bad.toml:6:16: unknown key 'train.learnig_rate'"
  expect "$(printf "$good")
[train]
max_steps = \"ten\"
" "bad.toml:6:13: train.max_steps must be an integer, not string"
  expect '[model]
path = "/nonexistent/MiniMax-Text-01-hf"
' "bad.toml:2:8: model.path: directory /nonexistent/MiniMax-Text-01-hf does not exist"
  # an arena one micro-step cannot fit: refused before any memory or weights, naming the remedy
  expect "$(printf "$good")
[dist]
arena_mb = 4
" "error: dist.arena_mb = 4 is too small: .* or set train.gradient_checkpointing = true"
  # more memory than any node has (the released Text-01: 7.3 TB of sharded state over 2
  # ranks): refused before any memory is taken or any weight is read
  expect '[model]
config = "'"$PWD"'/recipes/configs/minimax-text-01.json"
[data]
tokenizer_dir = "'"$PWD"'/tests/fixtures/tokenizer"
[train]
gradient_checkpointing = true
[dist]
arena_mb = 8192
' "error: a rank needs .* GiB of cpu memory (sharded state [0-9.]* GiB: 228044827648 parameters, 1/2 of the model; .*) but .* GiB are free.*; use more nodes"
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
