#!/usr/bin/env bash
# run_ranks.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: the same
# training on other rank counts and layouts, whose outputs test_dist_compare
# (tests/train/dist_compare.c) holds to each other.
#   run_ranks.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   ranks N [m2]     tests/recipes/dist.toml on N ranks (global batch 4) -> $TMP/ranks-npN; with
#                    m2 tests/recipes/dist-m2.toml (a tiny MiniMax-M2) -> $TMP/m2-ranks-npN; with
#                    m3 tests/recipes/dist-m3.toml (a tiny MiniMax-M3, gather unit expert)
#                    -> $TMP/m3-ranks-npN
#   expert           dist.gather_unit = "expert" on 2 ranks (one expert gathered at a time)
#                    -> $TMP/expert-np2; then resuming it with another gather unit must fail
#   recompute        train.gradient_checkpointing on 2 ranks: unit layer with the router aux loss
#                    and 2 micro-batches per step, kept and recomputed (the same collectives)
#                    -> $TMP/recompute-{keep,on}, and on node-shared parameters -> recompute-node;
#                    unit expert like the expert mode, and expert-np2 resumed from its step-10
#                    checkpoint with recomputation -> $TMP/recompute-{expert,resume}; unit
#                    expert with bf16 gathers, kept and recomputed -> $TMP/recompute-bf16-{keep,on}
#   bf16-gather      bf16 parameter gathers (dist.gather_dtype; fp32 GEMMs, so that only the
#                    summation order differs between rank counts) on 1 and 2 ranks, the 2-rank
#                    run resumed from its step-5 checkpoint, and fp32 gathers
#                    -> $TMP/bf16g-np{1,2}, $TMP/bf16g-resume, $TMP/bf16g-fp32
#   trim             padded rows (packing off), 2 ranks, with and without data.trim_padding,
#                    router aux loss on (it must leave the padding out) -> $TMP/trim-{on,off}
#   padfree          data.padding_free: the trim runs' padded rows as one row -> $TMP/trim-pf;
#                    dist.toml, dist-m2.toml and dist-m3.toml (packed rows, 2 ranks) with each
#                    micro-batch's rows as one -> $TMP/{,m2-,m3-}pf-np2; the tiny M3 so with
#                    context parallelism (C = 2 on 2 ranks) -> $TMP/m3-pf-cp-c2
#   mpi-copies       the ranks runs' gathers and reduce-scatters through MPI's messages instead of
#                    reading the peers' node-shared buffers or the node's shared parameters
#                    (MT_COMM_SHARED=0): 2 and 4 ranks,
#                    and the bf16-gather 2-rank run -> $TMP/mpi-np{2,4}, $TMP/mpi-bf16g-np2; the
#                    byte tallies (MT_COMM_BYTES) say which path each run took
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

case "$mode" in
ranks)
  np="$3"
  name=ranks
  if [ "${4:-}" = m2 ]; then recipe=tests/recipes/dist-m2.toml name=m2-ranks; fi
  if [ "${4:-}" = m3 ]; then recipe=tests/recipes/dist-m3.toml name=m3-ranks; fi
  run "$np" "$tmp/$name-np$np" --set "train.per_device_train_batch_size=$((4 / np))" \
    --set "data.cache_dir=$tmp/dist-cache-$name-np$np"
  grep -E "^model|^weights|^memory|^step 20/" "$tmp/$name-np$np.log"
  ;;
expert)
  # the gathers themselves (dist.node_params off), as on several nodes: recompute compares its
  # all-gathers with these
  run 2 "$tmp/expert-np2" --set train.per_device_train_batch_size=2 --set dist.gather_unit=expert \
    --set output.save_steps=10 --set dist.node_params=false
  grep -E "^memory|^model|^step 20/" "$tmp/expert-np2.log"
  rc=0
  run 2 "$tmp/expert-switch" --set train.per_device_train_batch_size=2 \
    --resume "$tmp/expert-np2/checkpoint-10" > /dev/null || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: resuming an expert-unit checkpoint with unit layer exited 0"; exit 1; }
  grep -E "error: .*gather_unit" "$tmp/expert-switch.log" ||
    { echo "FAIL: the refusal does not name dist.gather_unit"; tail -5 "$tmp/expert-switch.log"; exit 1; }
  ;;
recompute)
  # dist.node_params off: the gathers' walk under recomputation, as on several nodes
  common=(--set train.per_device_train_batch_size=1 --set train.gradient_accumulation_steps=2
    --set train.router_aux_loss_coef=0.01 --set train.max_steps=10 --set dist.node_params=false)
  run 2 "$tmp/recompute-keep" "${common[@]}"
  run 2 "$tmp/recompute-on" "${common[@]}" --set train.gradient_checkpointing=true
  # the same recomputed run on the node's shared parameters (the default on one node)
  run 2 "$tmp/recompute-node" "${common[@]}" --set train.gradient_checkpointing=true \
    --set dist.node_params=true
  grep -q "the node's shared parameters" "$tmp/recompute-node.log" ||
    { echo "FAIL: recompute-node did not share the parameters"; exit 1; }
  collectives() { grep -o "peak use .*" "$1" | sort | head -1; }
  collectives "$tmp/recompute-keep.log"
  collectives "$tmp/recompute-on.log"
  grep -q "layers recomputed" "$tmp/recompute-on.log" || { echo "FAIL: not recomputed"; exit 1; }
  [ "$(collectives "$tmp/recompute-keep.log" | grep -o "step collectives.*")" = \
    "$(collectives "$tmp/recompute-on.log" | grep -o "step collectives.*")" ] ||
    { echo "FAIL: recomputing layers (unit layer) changed the collectives"; exit 1; }
  expert=(--set train.per_device_train_batch_size=2 --set dist.gather_unit=expert
    --set train.gradient_checkpointing=true --set dist.node_params=false)
  run 2 "$tmp/recompute-expert" "${expert[@]}"
  collectives "$tmp/recompute-expert.log"
  run 2 "$tmp/recompute-resume" "${expert[@]}" --resume "$tmp/expert-np2/checkpoint-10"
  # bf16 gathers (a landing buffer per slot, widened into it) under the recompute walk's
  # re-gathers and prefetch order, kept and recomputed
  bf16=(--set train.per_device_train_batch_size=2 --set dist.gather_unit=expert
    --set dist.gather_dtype=bf16 --set train.max_steps=10)
  run 2 "$tmp/recompute-bf16-keep" "${bf16[@]}"
  run 2 "$tmp/recompute-bf16-on" "${bf16[@]}" --set train.gradient_checkpointing=true
  ;;
bf16-gather)
  # AdamW with epsilon above the gradients' scale (as in emu-cuda): each update is proportional
  # to its gradient, so the 1-vs-2-rank comparison sees the sharding's summation order, not
  # AdamW turning the rounding of a near-zero gradient into a full +-lr step (at epsilon 1e-8
  # two rare tokens' embedding rows differed by 7e-4 relative after 10 steps, all else by 1e-6)
  common=(--set train.max_steps=10 --set output.save_steps=5 --set train.adam_epsilon=0.1
    --set train.learning_rate=1e-2)
  run 1 "$tmp/bf16g-np1" "${common[@]}" --set dist.gather_dtype=bf16
  run 2 "$tmp/bf16g-np2" "${common[@]}" --set dist.gather_dtype=bf16 \
    --set train.per_device_train_batch_size=2
  run 2 "$tmp/bf16g-resume" "${common[@]}" --set dist.gather_dtype=bf16 \
    --set train.per_device_train_batch_size=2 --resume "$tmp/bf16g-np2/checkpoint-5"
  run 2 "$tmp/bf16g-fp32" "${common[@]}" --set train.per_device_train_batch_size=2
  grep -E "^memory|^step 10/" "$tmp/bf16g-np2.log"
  ;;
trim)
  for v in on off; do
    run 2 "$tmp/trim-$v" --set train.per_device_train_batch_size=2 --set data.packing=false \
      --set data.max_length=384 --set "data.cache_dir=$tmp/dist-cache-trim" \
      --set train.router_aux_loss_coef=0.02 \
      --set train.max_steps=10 --set "data.trim_padding=$([ $v = on ] && echo true || echo false)"
  done
  ;;
padfree)
  run 2 "$tmp/trim-pf" --set train.per_device_train_batch_size=2 --set data.packing=false \
    --set data.max_length=384 --set "data.cache_dir=$tmp/dist-cache-pf-trim" \
    --set train.router_aux_loss_coef=0.02 --set train.max_steps=10 --set data.padding_free=true
  for name in pf m2-pf m3-pf; do
    recipe=tests/recipes/dist.toml
    [ "$name" != m2-pf ] || recipe=tests/recipes/dist-m2.toml
    [ "$name" != m3-pf ] || recipe=tests/recipes/dist-m3.toml
    run 2 "$tmp/$name-np2" --set train.per_device_train_batch_size=2 --set data.padding_free=true \
      --set "data.cache_dir=$tmp/dist-cache-$name"
  done
  run 2 "$tmp/m3-pf-cp-c2" --set train.per_device_train_batch_size=4 --set data.padding_free=true \
    --set dist.context_parallel=2 --set "data.cache_dir=$tmp/dist-cache-m3-pf-cp"
  grep -E "^step 20/" "$tmp"/{pf,m2-pf,m3-pf}-np2.log "$tmp/m3-pf-cp-c2.log"
  ;;
mpi-copies)
  # shared= in rank 0's tally: bytes read from node-shared buffers (0: MPI's messages)
  shared_bytes() { sed -n 's/^shared=//p' "$1.0"; }
  for np in 2 4; do
    MT_COMM_BYTES="$tmp/shm-np$np.bytes" run "$np" "$tmp/shm-np$np" \
      --set "train.per_device_train_batch_size=$((4 / np))" --set train.max_steps=2
    MT_COMM_SHARED=0 MT_COMM_BYTES="$tmp/mpi-np$np.bytes" run "$np" "$tmp/mpi-np$np" \
      --set "train.per_device_train_batch_size=$((4 / np))"
    echo "np $np: shared bytes $(shared_bytes "$tmp/shm-np$np.bytes") by default," \
      "$(shared_bytes "$tmp/mpi-np$np.bytes") with MT_COMM_SHARED=0"
    [ "$(shared_bytes "$tmp/shm-np$np.bytes")" -gt 0 ] ||
      { echo "FAIL: $np ranks on one node did not read the peers' shared buffers"; exit 1; }
    [ "$(shared_bytes "$tmp/mpi-np$np.bytes")" = 0 ] ||
      { echo "FAIL: MT_COMM_SHARED=0 still read shared buffers"; exit 1; }
    # dist.node_params (on by default): the parameters once on the node, not gathered; so the
    # match of ranks-npN with mpi-npN holds the node's copy to MPI's gathers
    grep -q "the node's shared parameters" "$tmp/shm-np$np.log" ||
      { echo "FAIL: $np ranks on one node did not share the parameters"; exit 1; }
    ! grep -q "the node's shared parameters" "$tmp/mpi-np$np.log" ||
      { echo "FAIL: MT_COMM_SHARED=0 still shared the parameters"; exit 1; }
  done
  MT_COMM_SHARED=0 run 2 "$tmp/mpi-bf16g-np2" --set train.max_steps=10 --set output.save_steps=5 \
    --set train.adam_epsilon=0.1 --set train.learning_rate=1e-2 --set dist.gather_dtype=bf16 \
    --set train.per_device_train_batch_size=2
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
