#!/usr/bin/env bash
# run_emu.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: the trainer
# on the CUDA backend with NCCL, both through the CPU emulator (minimax-train-emu), or a CUDA
# build on a real GPU, against the CPU trainer.
#   run_emu.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   emu-cuda EMU NP  the same 3 steps on the CPU backend (BIN) and on the CUDA backend + NCCL
#                    through the CPU emulator (EMU, minimax-train-emu; dist.gather_unit expert),
#                    NP ranks each, then the emulated run resumed from its step-2 checkpoint (with
#                    train.gradient_checkpointing: the same step 3 to the bit), and
#                    both in bf16 GEMM mode with bf16 gathers (gather unit layer); and the
#                    emulated run with dist.offload_optimizer, resumed from its step 2, with
#                    fp32 gathers and in bf16 mode with bf16 gathers (master weights on the
#                    host); and 2 steps in strict emulation
#                    -> $TMP/emu-{cpu,cuda,resume,cpu-bf16,cuda-bf16,offload,offload-resume,strict,
#                       offload-bf16,offload-bf16-resume,cuda-bf16-cast,cuda-bf16x{,-cast}}
#   ep-emu EMU       3 steps with P = 2 on 2 ranks, the CPU trainer and the emulated CUDA one
#                    with NCCL (EMU) -> $TMP/ep-emu-{cpu,cuda}
#   cp-emu EMU       3 steps with C = 2 on 2 ranks, the CPU trainer and the emulated CUDA one
#                    with NCCL (EMU), Text-01 and M3 -> $TMP/cp-emu-{cpu,cuda}, cp-emu-m3-*
#   generate-emu EMU [device]  eval.generate on the emulated CUDA backend with NCCL (EMU): through
#                    the gathers on the device, the CPU replica's results (Text-01, M2, M3).
#                    With device: EMU is a CUDA build's minimax-train on a real GPU
#                    (exit 77 without one)
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

case "$mode" in
emu-cuda)
  emu="$3"
  np="$4"
  # AdamW with epsilon above the gradients' scale: each update is proportional to its
  # gradient, so the bf16 comparison sees the kernels' rounding, not AdamW's first steps
  # turning any rounding of a near-zero gradient into a full +-lr step
  # 8 samples held out: every run ends with the eval loss, forward only through the backend
  small=(--set train.max_steps=3 --set data.max_length=64 --set data.truncation=truncate
    --set "data.cache_dir=$tmp/dist-cache-emu" --set train.adam_epsilon=0.1
    --set train.learning_rate=1e-2 --set "train.per_device_train_batch_size=$((4 / np))"
    --set data.eval_samples=8)
  run "$np" "$tmp/emu-cpu" "${small[@]}"
  # the device runs gather one expert at a time (the split MoE ops, expert buckets over NCCL)
  bin="$emu" run "$np" "$tmp/emu-cuda" "${small[@]}" --set dist.backend=nccl --set output.save_steps=2 \
    --set dist.gather_unit=expert
  # resumed with every layer recomputed in the backward: step 3 must still equal the straight run's
  bin="$emu" run "$np" "$tmp/emu-resume" "${small[@]}" --set dist.backend=nccl \
    --set dist.gather_unit=expert --set train.gradient_checkpointing=true \
    --resume "$tmp/emu-cuda/checkpoint-2"
  # the AdamW moments offloaded to host memory (the update on the host CPU, through a staging
  # buffer shrunk to 4099 elements so that every shard takes several chunks), checkpointed at
  # step 2 and resumed from there
  MT_OFFLOAD_STAGE_NUMEL=4099 bin="$emu" run "$np" "$tmp/emu-offload" "${small[@]}" \
    --set dist.backend=nccl --set dist.gather_unit=expert --set output.save_steps=2 \
    --set dist.offload_optimizer=true
  MT_OFFLOAD_STAGE_NUMEL=4099 bin="$emu" run "$np" "$tmp/emu-offload-resume" "${small[@]}" \
    --set dist.backend=nccl --set dist.gather_unit=expert --set dist.offload_optimizer=true \
    --resume "$tmp/emu-offload/checkpoint-2"
  grep "^memory" "$tmp/emu-offload.log"
  # strict emulation (tests/cuda_emu/emu.cpp) over the whole trainer, 2 steps: reversed
  # schedules, poisoned shared and fresh device memory, and every prefetch and reduce-scatter
  # after its stream waited for the compute stream's earlier work
  MT_EMU_STRICT=1 bin="$emu" run "$np" "$tmp/emu-strict" "${small[@]}" --set dist.backend=nccl \
    --set dist.gather_unit=expert --set train.max_steps=2
  # a device too small for the state, slots and arena (an emulated 64 MiB one): stopped before
  # anything is allocated, with the remedies, offload among them
  rc=0
  MT_CUDA_EMU_MEM_MB=64 bin="$emu" run "$np" "$tmp/emu-small-device" "${small[@]}" \
    --set dist.backend=nccl > /dev/null 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: a 64 MiB device was accepted"; exit 1; }
  grep -q "^error: a rank needs .* GiB of cuda memory .* are free; use more GPUs .*dist.offload_optimizer = true" \
    "$tmp/emu-small-device.log" || { echo "FAIL: no memory error"; cat "$tmp/emu-small-device.log"; exit 1; }
  ! grep -q "^memory\[" "$tmp/emu-small-device.log" || { echo "FAIL: it trained"; exit 1; }
  grep "^error" "$tmp/emu-small-device.log"
  # rank 1 hangs in its first collective (tests/cuda_emu/emu_nccl.cpp): with dist.timeout = 5
  # the NCCL watchdogs must name it and end the job (the first, so that no slow emulated kernel
  # can keep an earlier one pending for 5 s, as the emulator runs queued collectives late)
  rc=0
  MT_EMU_NCCL_STALL=1:1 timeout -k 5 120 mpirun -np "$np" --oversubscribe --bind-to none "$emu" \
    "$recipe" --set "output.dir=$tmp/emu-stall" "${small[@]}" --set dist.backend=nccl \
    --set dist.timeout=5 > "$tmp/emu-stall.log" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] ||
    { echo "FAIL: a stalled collective: exit $rc"; tail -20 "$tmp/emu-stall.log"; exit 1; }
  grep -E "nccl watchdog: collective 1 \(.*\) has not completed after [0-9]+ s \(dist.timeout = 5 s\)" \
    "$tmp/emu-stall.log" || { echo "FAIL: no watchdog message"; tail -20 "$tmp/emu-stall.log"; exit 1; }
  grep -q "moments offloaded: .* MiB of host memory" "$tmp/emu-offload.log" ||
    { echo "FAIL: the offloaded run's memory line does not show host moments"; exit 1; }
  # bf16 GEMMs and bf16 parameter gathers: the emulated device against the CPU's bf16 rounding
  # reference
  run "$np" "$tmp/emu-cpu-bf16" "${small[@]}" --set model.dtype=bf16 --set dist.gather_dtype=bf16
  bin="$emu" run "$np" "$tmp/emu-cuda-bf16" "${small[@]}" --set dist.backend=nccl --set model.dtype=bf16 \
    --set dist.gather_dtype=bf16
  # the same with every bf16 GEMM operand cast, none taken from a gather slot's bf16 values
  # (mt_backend.bf16_shadow): the same bits; with gather unit layer (one landing buffer for
  # both slots) and expert (one per slot, and every layer recomputed in the backward)
  MT_BF16_SHADOW=0 bin="$emu" run "$np" "$tmp/emu-cuda-bf16-cast" "${small[@]}" --set dist.backend=nccl \
    --set model.dtype=bf16 --set dist.gather_dtype=bf16
  for cast in 1 0; do
    MT_BF16_SHADOW=$cast bin="$emu" run "$np" "$tmp/emu-cuda-bf16x$([ $cast = 0 ] && echo -cast)" \
      "${small[@]}" --set dist.backend=nccl --set model.dtype=bf16 --set dist.gather_dtype=bf16 \
      --set dist.gather_unit=expert --set train.gradient_checkpointing=true
  done
  # offload with bf16 gathers: the fp32 master weights in host memory too, the device keeping
  # only their bf16 rounding for the gathers; checkpointed at step 2 and resumed from there
  offload_bf16=(--set dist.backend=nccl --set model.dtype=bf16 --set dist.gather_dtype=bf16
    --set dist.offload_optimizer=true)
  MT_OFFLOAD_STAGE_NUMEL=4099 bin="$emu" run "$np" "$tmp/emu-offload-bf16" "${small[@]}" \
    "${offload_bf16[@]}" --set output.save_steps=2
  MT_OFFLOAD_STAGE_NUMEL=4099 bin="$emu" run "$np" "$tmp/emu-offload-bf16-resume" "${small[@]}" \
    "${offload_bf16[@]}" --resume "$tmp/emu-offload-bf16/checkpoint-2"
  grep "^memory" "$tmp/emu-offload-bf16.log"
  grep -q "moments and master weights offloaded: .* MiB of host memory" "$tmp/emu-offload-bf16.log" ||
    { echo "FAIL: the bf16-gather offload's memory line does not show host master weights"; exit 1; }
  grep -E "^memory|^step" "$tmp/emu-cuda.log"
  grep -q "memory\[rank 0, cuda\]" "$tmp/emu-cuda.log" || { echo "FAIL: not on the cuda backend"; exit 1; }
  ;;
ep-emu)
  # expert parallelism on the CUDA backend with NCCL (both emulated: EMU = minimax-train-emu),
  # 2 ranks, P = 2, against the CPU trainer's same run (dist_ep_emu_match)
  emu="$3"
  small=(--set train.max_steps=3 --set data.max_length=64 --set data.truncation=truncate
    --set "data.cache_dir=$tmp/dist-cache-ep-emu" --set train.adam_epsilon=0.1
    --set train.learning_rate=1e-2 --set train.per_device_train_batch_size=2
    --set dist.gather_unit=expert --set dist.expert_parallel=2)
  run 2 "$tmp/ep-emu-cpu" "${small[@]}"
  bin="$emu" run 2 "$tmp/ep-emu-cuda" "${small[@]}" --set dist.backend=nccl
  grep -E "^expert parallelism|^step 3/" "$tmp/ep-emu-cuda.log"
  ;;
cp-emu)
  # context parallelism on the CUDA backend with NCCL (both emulated: EMU = minimax-train-emu),
  # 2 ranks, C = 2 (the K/V all-gathers, dK/dV reduce-scatters and lightning state exchanges on
  # the device), against the CPU trainer's same run (dist_cp_emu_match)
  emu="$3"
  small=(--set train.max_steps=3 --set data.max_length=64 --set data.truncation=truncate
    --set "data.cache_dir=$tmp/dist-cache-cp-emu" --set train.adam_epsilon=0.1
    --set train.learning_rate=1e-2 --set train.per_device_train_batch_size=4
    --set dist.context_parallel=2)
  run 2 "$tmp/cp-emu-cpu" "${small[@]}"
  bin="$emu" run 2 "$tmp/cp-emu-cuda" "${small[@]}" --set dist.backend=nccl
  # M3: the MSA layers' gathers and the device MSA kernels at query slots (block 16 of rows of
  # 64: top 4 keeps every block, so max_length 128 where later queries drop blocks)
  recipe=tests/recipes/dist-m3.toml
  m3=("${small[@]}" --set data.max_length=128 --set "data.cache_dir=$tmp/dist-cache-cp-emu-m3")
  run 2 "$tmp/cp-emu-m3-cpu" "${m3[@]}"
  bin="$emu" run 2 "$tmp/cp-emu-m3-cuda" "${m3[@]}" --set dist.backend=nccl
  grep -E "^context parallelism|^step 3/" "$tmp/cp-emu-cuda.log" "$tmp/cp-emu-m3-cuda.log"
  ;;
generate-emu)
  # accuracy by generation on the CUDA backend (NCCL; both through the emulator, EMU): with
  # eval.generate_weights = "auto" the device run decodes through the gathers, on the device,
  # and writes the CPU replica's results (--eval-only of the random initialisations of Text-01,
  # M2 and M3, 8 problems of 16 tokens, 2 ranks, 3 a batch)
  emu="$3"
  if [ "${4:-}" = device ] && ! nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then
    echo "no GPU: skipped"
    exit 77
  fi
  d="$tmp/gen-emu"
  rm -rf "$d"
  mkdir -p "$d"
  g=(--eval-only --set data.max_length=64 --set data.truncation=truncate --set eval.generate_data=synthetic
    --set eval.generate_samples=8 --set eval.generate_max_new_tokens=16 --set eval.generate_batch=3
    --set train.per_device_train_batch_size=2 --set "data.cache_dir=$tmp/dist-cache-gen-emu")
  for fam in text01 m2 m3; do
    recipe=tests/recipes/dist.toml
    [ "$fam" != text01 ] && recipe="tests/recipes/dist-$fam.toml"
    run 2 "$d/$fam-cpu" "${g[@]}"
    bin="$emu" run 2 "$d/$fam-cuda" "${g[@]}" --set dist.backend=nccl
    grep -q 'the ranks decode in step through the ZeRO-3 gathers on the cuda backend' "$d/$fam-cuda.log" ||
      fail "$fam: not decoded through the gathers on the device: $(grep eval.generate "$d/$fam-cuda.log")"
    cmp "$d/$fam-cuda/eval-generate-0.jsonl" "$d/$fam-cpu/eval-generate-0.jsonl" ||
      fail "$fam: the device's results differ from the CPU replica's"
    echo "ok: $fam: 8 problems decoded through the gathers on the (emulated) device = the CPU replica's results"
  done
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
