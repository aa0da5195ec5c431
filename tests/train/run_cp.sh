#!/usr/bin/env bash
# run_cp.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: context
# parallelism (dist.context_parallel, docs/training.md "Long sequences").
#   run_cp.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   cp               Text-01 with C = 2 on 2 ranks, C = 4 on 4, C = 2 x data parallel 2, and
#                    C = 2 with expert parallelism 2 on 4 ranks; M2 with C = 2 and 4; M3 with
#                    C = 2, 4 and 2 x expert parallel 2; packed samples (dist.toml packs) cross
#                    the chunk borders -> $TMP/cp-*, m2-cp-*, m3-cp-*; 10 + resume + 10 with
#                    C = 2 -> $TMP/cp-resume, m3-cp-resume (dist_cp_match compares them with the
#                    1-rank runs of mode ranks); another C on resume and the layouts that cannot
#                    run are refused with one line
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

case "$mode" in
cp)
  # the global batch is 4 samples as in mode ranks: C ranks share a data-parallel rank's rows
  run 2 "$tmp/cp-np2-c2" --set train.per_device_train_batch_size=4 --set dist.context_parallel=2 \
    --set output.save_steps=10 --set "data.cache_dir=$tmp/dist-cache-cp"
  run 4 "$tmp/cp-np4-c4" --set train.per_device_train_batch_size=4 --set dist.context_parallel=4 \
    --set "data.cache_dir=$tmp/dist-cache-cp"
  run 4 "$tmp/cp-np4-c2-dp2" --set train.per_device_train_batch_size=2 \
    --set dist.context_parallel=2 --set "data.cache_dir=$tmp/dist-cache-cp"
  run 4 "$tmp/cp-np4-c2-ep2" --set train.per_device_train_batch_size=2 \
    --set dist.context_parallel=2 --set dist.gather_unit=expert --set dist.expert_parallel=2 \
    --set "data.cache_dir=$tmp/dist-cache-cp"
  recipe=tests/recipes/dist-m2.toml
  run 2 "$tmp/m2-cp-np2-c2" --set train.per_device_train_batch_size=4 \
    --set dist.context_parallel=2 --set "data.cache_dir=$tmp/dist-cache-m2-cp"
  run 4 "$tmp/m2-cp-np4-c4" --set train.per_device_train_batch_size=4 \
    --set dist.context_parallel=4 --set "data.cache_dir=$tmp/dist-cache-m2-cp"
  # M3: MSA layers (block 16, top 4 of 8 blocks: later queries drop blocks) and the indexer KL
  recipe=tests/recipes/dist-m3.toml
  run 2 "$tmp/m3-cp-np2-c2" --set train.per_device_train_batch_size=4 \
    --set dist.context_parallel=2 --set output.save_steps=10 --set "data.cache_dir=$tmp/dist-cache-m3-cp"
  run 4 "$tmp/m3-cp-np4-c4" --set train.per_device_train_batch_size=4 \
    --set dist.context_parallel=4 --set "data.cache_dir=$tmp/dist-cache-m3-cp"
  run 4 "$tmp/m3-cp-np4-c2-ep2" --set train.per_device_train_batch_size=2 \
    --set dist.context_parallel=2 --set dist.gather_unit=expert --set dist.expert_parallel=2 \
    --set "data.cache_dir=$tmp/dist-cache-m3-cp"
  run 2 "$tmp/m3-cp-resume" --set train.per_device_train_batch_size=4 \
    --set dist.context_parallel=2 --set "data.cache_dir=$tmp/dist-cache-m3-cp" \
    --resume "$tmp/m3-cp-np2-c2/checkpoint-10"
  # 10 + resume + 10 with the same layout (dist_cp_match: the same as 20 straight)
  recipe=tests/recipes/dist.toml
  run 2 "$tmp/cp-resume" --set train.per_device_train_batch_size=4 --set dist.context_parallel=2 \
    --set "data.cache_dir=$tmp/dist-cache-cp" --resume "$tmp/cp-np2-c2/checkpoint-10"
  grep -E "^context parallelism|^step 20/" "$tmp"/{cp-np2-c2,cp-np4-c4,cp-np4-c2-dp2,m2-cp-np4-c4,m3-cp-np4-c4}.log
  # another C on resume is refused naming the key (a numerics key, docs/training.md)
  rc=0
  run 4 "$tmp/cp-switch" --set train.per_device_train_batch_size=4 --set dist.context_parallel=4 \
    --resume "$tmp/cp-np2-c2/checkpoint-10" > /dev/null || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: resuming a C = 2 checkpoint with C = 4 exited 0"; exit 1; }
  grep -E "error: .*dist.context_parallel" "$tmp/cp-switch.log" ||
    { echo "FAIL: the refusal does not name dist.context_parallel"; tail -5 "$tmp/cp-switch.log"; exit 1; }
  # layouts that cannot run: one line naming the key, exit 2, before any model
  check_refused() { # check_refused NP PATTERN ARGS...
    local np="$1" pattern="$2"
    shift 2
    refused "$np" "$tmp/cp-bad.log" "^error: .*$pattern" "$recipe" --set "output.dir=$tmp/cp-bad" \
      --set "data.cache_dir=$tmp/dist-cache-np$np" "$@"
  }
  check_refused 4 "dist.context_parallel = 3 does not divide" --set dist.context_parallel=3 \
    --set train.per_device_train_batch_size=1 --set data.max_length=120
  check_refused 2 "data.max_length" --set dist.context_parallel=2 --set data.max_length=126
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
