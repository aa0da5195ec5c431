#!/usr/bin/env bash
# run_ep.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: expert
# parallelism (dist.expert_parallel).
#   run_ep.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   ep               dist.expert_parallel: Text-01 on 4 ranks with P = 2 and 4, M2 with P = 4, M3
#                    on 2 ranks with P = 2 (and 10 + resume + 10) -> $TMP/{ep-np4-p2,ep-np4-p4,
#                    m2-ep-np4-p4,m3-ep-np2-p2,m3-ep-resume}; another P on resume is refused
#                    (the layouts refused at start: run_brief.sh)
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

case "$mode" in
ep)
  # expert parallelism (gather unit expert) on 4 ranks, P = 2 and 4 (Text-01, 4 experts; M2, 8)
  # and on 2 ranks, P = 2 (M3: 8 routed experts and the shared one); compared
  # with the 1-rank runs of mode ranks by dist_ep_match
  run 4 "$tmp/ep-np4-p2" --set train.per_device_train_batch_size=1 --set dist.gather_unit=expert \
    --set dist.expert_parallel=2 --set "data.cache_dir=$tmp/dist-cache-ep"
  run 4 "$tmp/ep-np4-p4" --set train.per_device_train_batch_size=1 --set dist.gather_unit=expert \
    --set dist.expert_parallel=4 --set "data.cache_dir=$tmp/dist-cache-ep"
  recipe=tests/recipes/dist-m2.toml
  run 4 "$tmp/m2-ep-np4-p4" --set train.per_device_train_batch_size=1 \
    --set dist.gather_unit=expert --set dist.expert_parallel=4 --set "data.cache_dir=$tmp/dist-cache-m2-ep"
  recipe=tests/recipes/dist-m3.toml
  run 2 "$tmp/m3-ep-np2-p2" --set train.per_device_train_batch_size=2 \
    --set dist.expert_parallel=2 --set "data.cache_dir=$tmp/dist-cache-m3-ep" \
    --set output.save_steps=10
  # 10 + resume + 10 with the same layout (dist_ep_match: the same as 20 straight)
  run 2 "$tmp/m3-ep-resume" --set train.per_device_train_batch_size=2 \
    --set dist.expert_parallel=2 --set "data.cache_dir=$tmp/dist-cache-m3-ep" \
    --resume "$tmp/m3-ep-np2-p2/checkpoint-10"
  grep -E "^expert parallelism|^step 20/" "$tmp"/{ep-np4-p2,ep-np4-p4,m2-ep-np4-p4,m3-ep-np2-p2}.log
  # another layout on resume is refused naming both values (a numerics key, docs/training.md)
  recipe=tests/recipes/dist.toml
  rc=0
  run 4 "$tmp/ep-switch" --set train.per_device_train_batch_size=1 --set dist.gather_unit=expert \
    --set dist.expert_parallel=4 --resume "$tmp/ep-np4-p2/checkpoint-20" > /dev/null || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: resuming a P = 2 checkpoint with P = 4 exited 0"; exit 1; }
  grep -E "error: .*expert_parallel" "$tmp/ep-switch.log" ||
    { echo "FAIL: the refusal does not name dist.expert_parallel"; tail -5 "$tmp/ep-switch.log"; exit 1; }
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
