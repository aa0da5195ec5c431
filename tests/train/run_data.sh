#!/usr/bin/env bash
# run_data.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: what the
# data files and the seeds make of a run.
#   run_data.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   mixed            GSM8K + the messages and alpaca fixtures, data.weights 2:1:1, 2 ranks,
#                    steps from train.num_train_epochs, a wsd schedule with a warmup ratio
#   seed             train.seed alone (data.seed, model.init_seed unset), 2 steps on 1 rank: the
#                    same seed twice the same weights to the bit, another seed another first loss
#                    -> $TMP/seed-{9a,9b,9x,10}
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

case "$mode" in
mixed)
  # data.paths = GSM8K train + the messages and alpaca fixtures, data.weights 2:1:1, on 2 ranks
  # (skipped without ../shared): each file's share of an epoch in the log, the formats detected
  gsm="${MT_SHARED_DIR:-../shared}/data/gsm8k/train.jsonl"
  [ -r "$gsm" ] || { echo "no $gsm: skipped"; exit 77; }
  f=tests/fixtures/formats
  rm -rf "$tmp/dist-cache-mixed" # a fresh build, whose log names the formats
  run 2 "$tmp/mixed" --set "data.paths=[\"$gsm\", \"$f/messages.jsonl\", \"$f/alpaca.jsonl\"]" \
    --set "data.weights=[2, 1, 1]" --set data.max_length=512 --set train.num_train_epochs=0.0012 \
    --set train.lr_scheduler_type=wsd --set train.warmup_ratio=0.34 --set train.wsd_decay_ratio=0.3 --set train.warmup_steps=0 \
    --set train.per_device_train_batch_size=2 --set "data.cache_dir=$tmp/dist-cache-mixed"
  grep "^data: \|^train: \|^step 3/" "$tmp/mixed.log"
  # the steps from the epochs (7479 samples / 4 per step = 1870 per epoch), the schedule's phases
  grep -q "^train: 0.0012 epochs of 1870 steps = 3 steps" "$tmp/mixed.log"
  grep -q "^train: wsd schedule over 3 steps: 2 warmup, 1 decay" "$tmp/mixed.log"
  grep -q "^step 3/3 " "$tmp/mixed.log"
  grep -q "mixing: .*train.jsonl: 3739 of the 7479 samples of an epoch (50.0 %" "$tmp/mixed.log"
  grep -q "mixing: .*messages.jsonl: 1870 of the 7479 .*(25.0 %" "$tmp/mixed.log"
  grep -q "mixing: .*alpaca.jsonl: 1870 of the 7479 .*(25.0 %" "$tmp/mixed.log"
  grep -q "messages.jsonl: format messages (auto" "$tmp/mixed.log"
  grep -q "alpaca.jsonl: format alpaca (auto" "$tmp/mixed.log"
  # data.paths replaces data.path's default "synthetic": no synthetic file is generated (one
  # was written to ./data.paths, in the working directory)
  [ ! -e data.paths ] || { echo "FAIL: a file data.paths in $(pwd)"; exit 1; }
  ;;
seed)
  # train.seed with data.seed and model.init_seed unset (dist.toml without its seeds), 2 steps
  # on 1 rank: the same train.seed reproduces the weights bit for bit and equals both seeds set
  # to it; another train.seed changes the first loss and the weights
  recipe="$tmp/seed.toml"
  # (a copy in $tmp: its relative paths, the recipe folder's, made the repository's)
  sed -e '/seed/d' -e "s|= \"\\.\\./|= \"$PWD/tests/recipes/../|" tests/recipes/dist.toml > "$recipe"
  run 1 "$tmp/seed-9a" --set train.max_steps=2 --set train.seed=9
  run 1 "$tmp/seed-9b" --set train.max_steps=2 --set train.seed=9
  run 1 "$tmp/seed-9x" --set train.max_steps=2 --set data.seed=9 --set model.init_seed=9
  run 1 "$tmp/seed-10" --set train.max_steps=2 --set train.seed=10
  [ "$(grep -c -E "^(init_)?seed = 9$" "$tmp/seed-9a/recipe.toml")" = 3 ] ||
    { echo "FAIL: the resolved recipe does not name seed 9 three times"; exit 1; }
  w=checkpoint-2/model.safetensors
  cmp "$tmp/seed-9a/$w" "$tmp/seed-9b/$w" || { echo "FAIL: train.seed 9 twice: other weights"; exit 1; }
  cmp "$tmp/seed-9a/$w" "$tmp/seed-9x/$w" ||
    { echo "FAIL: train.seed 9 differs from data.seed = model.init_seed = 9"; exit 1; }
  losses() { cut -d, -f1-5 "$1/loss.csv"; } # step, loss, lr, grad_norm, tokens
  [ "$(losses "$tmp/seed-9a")" = "$(losses "$tmp/seed-9b")" ] || { echo "FAIL: loss.csv differs"; exit 1; }
  first() { sed -n 2p "$1/loss.csv" | cut -d, -f2; }
  [ "$(first "$tmp/seed-9a")" != "$(first "$tmp/seed-10")" ] ||
    { echo "FAIL: train.seed 10 gives the first loss of train.seed 9"; exit 1; }
  cmp -s "$tmp/seed-9a/$w" "$tmp/seed-10/$w" && { echo "FAIL: train.seed 10: the weights of 9"; exit 1; }
  echo "train.seed 9: first loss $(first "$tmp/seed-9a") twice; train.seed 10: $(first "$tmp/seed-10")"
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
