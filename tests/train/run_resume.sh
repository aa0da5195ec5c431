#!/usr/bin/env bash
# run_resume.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: resumes:
# from a checkpoint on the same or another rank count, with the checkpoint's own recipe, refused
# when an input changed, and the logs after a resume.
#   run_resume.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   resume-straight  20 steps, checkpoints at 10 and 20                   -> $TMP/resume-a
#   resume-split     --resume $TMP/resume-a/checkpoint-10, 10 more steps  -> $TMP/resume-b
#   resume-alone     --resume DIR with no recipe (the checkpoint's recipe.toml): 20 steps straight
#                    and 10 + resume + 10 give the same losses, weights and state files to the
#                    bit; a changed numerics key (--set train.learning_rate) is refused naming
#                    both values before any model is built, an allowed one (train.max_steps)
#                    resumes; a checkpoint without recipe.toml resumes with a recipe and is
#                    refused without one, naming the file; an edited recipe.toml is refused
#   resume-check CORRUPT  --resume refuses, naming the file: the model config or the data file
#                    edited in place, one flipped bit of a state file (CORRUPT: tests/support/corrupt.c)
#                    naming the dataset too; a damaged export is refused as model.path
#   resume-earlier POKE  a checkpoint as the build before auxiliary terms had names wrote it
#                    (its recipe.toml with train.indexer_kl_coef = 1.0 and train.indexer_detach =
#                    true, a recipe hash over those keys: POKE is tests/support/poke.c) resumes
#                    with its own recipe, its losses those of the straight run; without its
#                    recipe.toml the hash still decides: refused
#   global-batch     train.global_batch_size: 2 -> 1, 1 -> 2 and 2 -> 4 rank resumes of 4-step
#                    runs from step 2 -> $TMP/gb-{np1,np2,2to1,1to2,2to4}; without it, a resume
#                    that would halve the global batch is refused
#   metrics          4 steps, eval every 2, resumed from step 2 into the same directory (--rewind)
#                    -> $TMP/metrics (data_logger_metrics_match reads its metrics.jsonl)
#   tboard           output.report_to = ["csv", "tensorboard"]: 4 steps, the eval loss and
#                    eval.generate's accuracy every 2, resumed from step 2 with --rewind
#                    -> $TMP/tboard (data_tboard_match reads its event files back)
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

case "$mode" in
resume-straight)
  run 2 "$tmp/resume-a" --set train.per_device_train_batch_size=2 --set output.save_steps=10
  ;;
resume-split)
  run 2 "$tmp/resume-b" --set train.per_device_train_batch_size=2 --set output.save_steps=10 \
    --resume "$tmp/resume-a/checkpoint-10"
  grep -q "resumed from .*checkpoint-10 at step 10" "$tmp/resume-b.log"
  ;;
resume-earlier)
  poke="$3" d="$tmp/earlier"
  rm -rf "$d"
  mkdir -p "$d/b"
  common=("${fast[@]}" --set "data.cache_dir=$tmp/dist-cache-earlier")
  run 2 "$d/a" "${common[@]}" --set train.max_steps=4 --set output.save_steps=2
  ck="$d/b/checkpoint-2"
  cp -a "$d/a/checkpoint-2" "$d/a/loss.csv" "$d/b/"
  sed -i 's/^\[train\]$/[train]\nindexer_kl_coef = 1.0\nindexer_detach = true/' "$ck/recipe.toml"
  grep -q '^indexer_detach = true$' "$ck/recipe.toml" || fail "the old keys were not written"
  "$poke" h5u64 "$ck/state.h5" recipe_digest "@$ck/recipe.toml"
  "$poke" h5u64 "$ck/state.h5" recipe_hash 0123456789abcdef
  "${mpi[@]}" -np 2 "$bin" --resume "$ck" > "$d/b.log" 2>&1 ||
    { tail -20 "$d/b.log"; fail "the earlier build's checkpoint does not resume"; }
  grep -q "resumed from $ck at step 2" "$d/b.log" || fail "not resumed"
  [ "$(cut -d, -f1-5 "$d/a/loss.csv")" = "$(cut -d, -f1-5 "$d/b/loss.csv")" ] ||
    fail "loss.csv differs from the straight run's"
  # no recipe.toml to compare key by key: the recipe hash decides, and it differs
  mkdir "$d/c"
  cp -a "$d/a/checkpoint-2" "$d/c/"
  ck="$d/c/checkpoint-2"
  rm "$ck/recipe.toml"
  "$poke" h5u64 "$ck/state.h5" recipe_hash 0123456789abcdef
  rc=0
  "${mpi[@]}" -np 2 "$bin" "$recipe" "${common[@]}" --set train.max_steps=4 \
    --set "output.dir=$d/c" --resume "$ck" > "$d/c.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep -q "^error: --resume $ck: the recipe differs from the one that wrote the checkpoint in a key that changes the numerics (its recipe hash 0123456789abcdef" "$d/c.log" ||
    { tail -5 "$d/c.log"; fail "no recipe.toml and another recipe hash: exit $rc"; }
  echo "ok: the earlier build's checkpoint resumed; without its recipe.toml the hash refuses it"
  ;;
resume-alone)
  d="$tmp/alone"
  rm -rf "$d"
  mkdir -p "$d"
  common=("${fast[@]}" --set "data.cache_dir=$tmp/dist-cache-alone")
  run 2 "$d/a" "${common[@]}" --set output.save_steps=10
  # what a run stopped after step 10 leaves: its loss.csv and checkpoint-10 (the resume keeps
  # the rows up to its step and appends); output.dir is the directory the checkpoint is in
  mkdir "$d/b"
  cp -a "$d/a/checkpoint-10" "$d/a/loss.csv" "$d/b/"
  resume() { # resume NAME CHECKPOINT ARGS...: --resume with no recipe
    local name="$1" ck="$2"
    shift 2
    "${mpi[@]}" -np 2 "$bin" --resume "$ck" "$@" > "$d/$name.log" 2>&1
  }
  resume b "$d/b/checkpoint-10" || { tail -20 "$d/b.log"; fail "--resume alone"; }
  grep "^recipe: $d/b/checkpoint-10/recipe.toml, the checkpoint's (output.dir $d/b)" "$d/b.log" ||
    fail "no line naming the checkpoint's recipe"
  grep -q "resumed from $d/b/checkpoint-10 at step 10" "$d/b.log" || fail "not resumed"
  # the straight run's steps 11..20 to the bit: losses, export, every rank's state
  [ "$(cut -d, -f1-5 "$d/a/loss.csv")" = "$(cut -d, -f1-5 "$d/b/loss.csv")" ] ||
    fail "loss.csv differs from the straight run's"
  [ "$(wc -l < "$d/b/loss.csv")" -eq 21 ] || fail "loss.csv has not 20 steps"
  for f in model.safetensors state-00000-of-00002.h5 state-00001-of-00002.h5; do
    cmp "$d/a/checkpoint-20/$f" "$d/b/checkpoint-20/$f" || fail "checkpoint-20/$f differs"
  done
  echo "ok: --resume alone: 10 + 10 steps equal 20 straight (loss.csv, export, state files)"
  # a numerics key changed: one line naming it with both values, exit 2, no model, nothing
  # written into output.dir
  cp "$d/b/loss.csv" "$d/b.losses"
  rc=0
  resume lr "$d/b/checkpoint-10" --set train.learning_rate=0.002 || rc=$?
  [ "$rc" -eq 2 ] || { tail -5 "$d/lr.log"; fail "a changed train.learning_rate: exit $rc, not 2"; }
  grep "^error: --resume $d/b/checkpoint-10: train.learning_rate = 0.002 differs from the checkpoint's 0.001 (this key changes the numerics; keys that may change on resume: .*train.max_steps, .*output.dir, .*dist.timeout, .*train.per_device_train_batch_size and train.gradient_accumulation_steps keeping the global batch)$" \
    "$d/lr.log" || { cat "$d/lr.log"; fail "the refusal does not name the key and both values"; }
  [ "$(grep -c "error" "$d/lr.log")" -eq 1 ] || fail "not one error line"
  ! grep -q "^activations:\|^model:\|^step " "$d/lr.log" || fail "a model was built"
  cmp "$d/b.losses" "$d/b/loss.csv" || fail "the refused resume changed loss.csv"
  cmp "$d/b/recipe.toml" "$d/b/checkpoint-20/recipe.toml" || fail "the refused resume wrote recipe.toml"
  # the same refusal with the recipe given
  rc=0
  "${mpi[@]}" -np 2 "$bin" "$recipe" "${common[@]}" \
    --set "output.dir=$d/b" --set train.weight_decay=0.1 --resume "$d/b/checkpoint-10" \
    > "$d/wd.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep "^error: .*: train.weight_decay = 0.1 differs from the checkpoint's 0.01 " "$d/wd.log" ||
    { tail -5 "$d/wd.log"; fail "a recipe with another train.weight_decay: exit $rc"; }
  # an allowed key: train.max_steps
  mkdir "$d/c"
  cp -a "$d/a/checkpoint-10" "$d/c/"
  resume c "$d/c/checkpoint-10" --set train.max_steps=12 || { tail -20 "$d/c.log"; fail "train.max_steps=12"; }
  grep -q "^step 12/12 " "$d/c.log" && [ -d "$d/c/checkpoint-12" ] || fail "train.max_steps=12 did not run to step 12"
  # a checkpoint without recipe.toml: refused alone, naming the file; resumed with the recipe
  mkdir "$d/old"
  cp -a "$d/a/checkpoint-10" "$d/old/"
  rm "$d/old/checkpoint-10/recipe.toml"
  rc=0
  resume old-alone "$d/old/checkpoint-10" || rc=$?
  [ "$rc" -eq 2 ] && grep "^error: --resume $d/old/checkpoint-10: $d/old/checkpoint-10/recipe.toml is missing" "$d/old-alone.log" ||
    { tail -5 "$d/old-alone.log"; fail "no recipe.toml, no recipe: exit $rc"; }
  run 2 "$d/old-given" "${common[@]}" --set "output.dir=$d/old" --set train.max_steps=11 \
    --resume "$d/old/checkpoint-10" || fail "no recipe.toml, the recipe given"
  # an edited recipe.toml (its digest is in the manifest): refused, naming it
  mkdir "$d/edit"
  cp -a "$d/a/checkpoint-10" "$d/edit/"
  sed -i 's/^max_grad_norm = 1.0$/max_grad_norm = 2.0/' "$d/edit/checkpoint-10/recipe.toml"
  rc=0
  resume edit "$d/edit/checkpoint-10" || rc=$?
  [ "$rc" -eq 2 ] && grep "^error: --resume $d/edit/checkpoint-10: $d/edit/checkpoint-10/recipe.toml has changed since the checkpoint was written" "$d/edit.log" ||
    { tail -5 "$d/edit.log"; fail "an edited recipe.toml: exit $rc"; }
  ;;
resume-check)
  corrupt="$3"
  d="$tmp/rc"
  rm -rf "$d"
  mkdir -p "$d"
  cp recipes/configs/tiny.json "$d/config.json"
  # the data file is the synthetic one the first run writes into its cache directory
  data="$d/cache/synthetic-gsm8k-11-96.jsonl"
  args=("${fast[@]}" --set "model.config=$d/config.json" --set "data.cache_dir=$d/cache"
    --set train.max_steps=2 --set output.save_steps=1)
  run 2 "$d/base" "${args[@]}"
  ck="$d/base/checkpoint-1"
  # not_resumed NAME PATTERN [ARGS...]: resuming fails with one error line matching PATTERN and
  # trains no step (the damage may show only once the model is built: not run_common's refused)
  not_resumed() {
    local name="$1" pattern="$2" rc=0
    shift 2
    run 2 "$d/$name" "${args[@]}" "$@" > /dev/null || rc=$?
    [ "$rc" -ne 0 ] || fail "$name: exit 0"
    grep -E "error: .*$pattern" "$d/$name.log" || { tail -20 "$d/$name.log"; fail "$name: no error matching $pattern"; }
    [ "$(grep -c "error: " "$d/$name.log")" -eq 1 ] || { cat "$d/$name.log"; fail "$name: not one error line"; }
    ! grep -q "^step " "$d/$name.log" || fail "$name: it trained"
  }
  digests="\(FNV-1a digest [0-9a-f]{16} then, [0-9a-f]{16} now\)"
  # the model config edited in place (rope_theta), then the data file (one digit of one sample)
  sed -i 's/"rope_theta": 10000.0/"rope_theta": 20000.0/' "$d/config.json"
  ! cmp -s "$d/config.json" recipes/configs/tiny.json || fail "the config edit changed nothing"
  not_resumed config "--resume $ck: the model config $d/config.json has changed since the checkpoint was written $digests" --resume "$ck"
  cp recipes/configs/tiny.json "$d/config.json"
  cp "$data" "$d/data.saved"
  sed -i '5s/[0-9]/7/' "$data"
  ! cmp -s "$data" "$d/data.saved" || fail "the data edit changed nothing"
  not_resumed data "--resume $ck: the data file $data has changed since the checkpoint was written $digests" --resume "$ck"
  cp "$d/data.saved" "$data"
  # one bit of one master weight of a state file
  cp -a "$ck" "$d/ck-saved"
  "$corrupt" h5 "$ck/state-00001-of-00002.h5" bucket_0001_master 10
  not_resumed state "$ck/state-00001-of-00002.h5: cannot read dataset bucket_0001_master: the checkpoint is damaged" --resume "$ck"
  rm -rf "$ck"
  cp -a "$d/ck-saved" "$ck"
  # untouched, it resumes
  run 2 "$d/resumed" "${args[@]}" --resume "$ck"
  grep "resumed from $ck at step 1" "$d/resumed.log" || fail "the untouched checkpoint did not resume"
  # the export: an undamaged one given as model.path is checked against its digest and loads;
  # one bit of model.safetensors changed is refused, naming the file
  ex="$d/base/checkpoint-2"
  # (model.path and model.config exclude each other: the runs from the export set only the path)
  args=("${fast[@]}" --set "data.cache_dir=$d/cache" --set output.save_steps=1)
  run 2 "$d/from-export" "${args[@]}" --set "model.path=$ex" --set train.max_steps=1
  grep "^model.path: 1 of 1 safetensors files checked against their digests" "$d/from-export.log" ||
    fail "the export was not checked"
  "$corrupt" safetensors "$ex/model.safetensors"
  not_resumed export "model.path: $ex/model.safetensors: the data does not match the digest its header records" \
    --set "model.path=$ex" --set train.max_steps=1
  ;;
global-batch)
  # a global batch of 4 samples on 1, 2 and 4 ranks of 1 row: 4, 2 and 1 accumulation steps
  common=("${fast[@]}" --set train.max_steps=4 --set output.save_steps=2 --set "data.cache_dir=$tmp/dist-cache-gb")
  gb=("${common[@]}" --set train.global_batch_size=4)
  # 2 ranks x 2 accumulation steps; without train.global_batch_size its resume on 1 rank would
  # halve the global batch: refused, naming both layouts
  run 2 "$tmp/gb-np2" "${common[@]}" --set train.gradient_accumulation_steps=2
  rc=0
  run 1 "$tmp/gb-halved" "${common[@]}" --set train.gradient_accumulation_steps=2 \
    --resume "$tmp/gb-np2/checkpoint-2" > /dev/null || rc=$?
  [ "$rc" -ne 0 ] || fail "a resume that halves the global batch exited 0"
  grep "^error: --resume $tmp/gb-np2/checkpoint-2: the global batch would change from 4 samples (2 ranks x 1 row per device x 2 accumulation steps) to 2 (1 rank x 1 row per device x 2 accumulation steps), .*; set train.global_batch_size = 4" \
    "$tmp/gb-halved.log" || { tail -5 "$tmp/gb-halved.log"; fail "no refusal naming both layouts"; }
  # with it: the uninterrupted run on 1 rank, and the resumes 2 -> 1, 1 -> 2, 2 -> 4 from step 2
  # (dist_global_batch_match compares steps 3 and 4)
  run 1 "$tmp/gb-np1" "${gb[@]}"
  grep "^global batch: 4 samples per step = 1 rank x 1 row x 4 accumulation steps (train.global_batch_size)" \
    "$tmp/gb-np1.log" || fail "1 rank: no global batch line"
  run 1 "$tmp/gb-2to1" "${gb[@]}" --resume "$tmp/gb-np2/checkpoint-2"
  run 2 "$tmp/gb-1to2" "${gb[@]}" --resume "$tmp/gb-np1/checkpoint-2"
  run 4 "$tmp/gb-2to4" "${gb[@]}" --resume "$tmp/gb-np2/checkpoint-2"
  grep -h "^resume: the global batch stays" "$tmp"/gb-{2to1,1to2,2to4}.log
  grep -q "^resume: the global batch stays 4 samples: 2 ranks x 1 row per device x 2 accumulation steps before, 1 rank x 1 row per device x 4 accumulation steps now" \
    "$tmp/gb-2to1.log" || fail "2 -> 1: no layout line"
  # a global batch the ranks cannot split
  rc=0
  run 2 "$tmp/gb-odd" "${common[@]}" --set train.global_batch_size=5 > /dev/null || rc=$?
  [ "$rc" -ne 0 ] && grep "^error: train.global_batch_size = 5 is not a multiple of train.per_device_train_batch_size x ranks = 1 x 2" \
    "$tmp/gb-odd.log" || fail "global_batch_size 5 on 2 ranks: exit $rc"
  ;;
metrics)
  # 4 steps with an eval every 2 on 2 ranks, then resumed from the step-2 checkpoint in the
  # same directory (--rewind: checkpoint-4 is there): metrics.jsonl keeps steps <= 2 and
  # appends, as loss.csv and eval.csv do (data_logger_metrics_match compares them)
  m=(--set train.max_steps=4 --set train.per_device_train_batch_size=2 --set data.eval_samples=8
    --set train.eval_steps=2 --set output.save_steps=2 --set output.export=false)
  run 2 "$tmp/metrics" "${m[@]}"
  mv "$tmp/metrics.log" "$tmp/metrics-first.log"
  mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$tmp/metrics" \
    --set "data.cache_dir=$tmp/dist-cache-np2" "${m[@]}" --resume "$tmp/metrics/checkpoint-2" \
    --rewind > "$tmp/metrics.log" 2>&1 || { tail -30 "$tmp/metrics.log"; exit 1; }
  grep -q "resumed from .*checkpoint-2 at step 2" "$tmp/metrics.log"
  ;;
tboard)
  m=(--set train.max_steps=4 --set train.per_device_train_batch_size=2 --set data.eval_samples=8
    --set train.eval_steps=2 --set output.save_steps=2 --set output.export=false
    --set eval.generate_data=synthetic --set eval.generate_samples=4
    --set eval.generate_max_new_tokens=8 --set eval.generate_batch=4 --set eval.generate_every=2
    --set 'output.report_to=["csv", "tensorboard"]')
  run 2 "$tmp/tboard" "${m[@]}"
  mv "$tmp/tboard.log" "$tmp/tboard-first.log"
  mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$tmp/tboard" \
    --set "data.cache_dir=$tmp/dist-cache-np2" "${m[@]}" --resume "$tmp/tboard/checkpoint-2" \
    --rewind > "$tmp/tboard.log" 2>&1 || { tail -30 "$tmp/tboard.log"; exit 1; }
  grep -q "TensorBoard event file's later steps into $tmp/tboard/rewound-" "$tmp/tboard.log"
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
