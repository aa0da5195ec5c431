#!/usr/bin/env bash
# dist_nonfinite.sh: non-finite numbers and bad sizes through minimax-train on 2 real ranks.
#   dist_nonfinite.sh TRAIN POKE        (ctest dist_train_nonfinite_weights)
#   dist_nonfinite.sh TRAIN POKE EMU    (ctest dist_train_emu_cuda_nonfinite: the expert case
#                                        on the CUDA backend and NCCL, emulated:
#                                        minimax-train-emu)
# MT_TEST_TMPDIR set. One step of tests/recipes/dist.toml saves a checkpoint (fp32 HF export +
# state.h5); POKE (tests/support/poke.c) then writes values into copies of it:
#   - a NaN in one weight of the export (rank 0's range), and an infinity at the end of the
#     lm_head (rank 1's): the run must refuse, naming the tensor and the element
#   - 1e30 in every weight of layer 2's qkv_proj, and 1e37 in expert 2's w1 of layer 1 (finite,
#     so loaded): the loss of step 1 is NaN, and the error must name the first op that computed
#     a non-finite value, in that layer (the expert's bucket with dist.gather_unit "expert")
#   - a NaN in the master weights of state.h5: --resume must refuse, naming the parameter
# and a micro-batch beyond the kernels' int range and a model vocabulary smaller than the
# tokenizer's must stop with one line naming the key before anything is written.
set -euo pipefail
bin="$1"
poke="$2"
emu="${3:-}"
tmp="${MT_TEST_TMPDIR:?}/nonfinite${emu:+-emu}"
rm -rf "$tmp"
mkdir -p "$tmp"
recipe=tests/recipes/dist.toml
run() { # run OUTDIR ARGS...: 2 ranks of $train (default TRAIN), the log in OUTDIR.log
  local out="$1"
  shift
  rm -rf "$out"
  mpirun -np 2 --oversubscribe --bind-to none "${train:-$bin}" "$recipe" --set "output.dir=$out" \
    --set "data.cache_dir=$tmp/cache" --set train.per_device_train_batch_size=2 "$@" \
    > "$out.log" 2>&1
}
fails() { # fails OUTDIR PATTERN ARGS...: the run must exit non-zero saying PATTERN
  local out="$1" pattern="$2" rc=0
  shift 2
  run "$out" "$@" || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: exit 0 for $*"; tail -5 "$out.log"; exit 1; }
  grep -q -- "$pattern" "$out.log" || { echo "FAIL: want '$pattern', got:"; tail -8 "$out.log"; exit 1; }
  echo "ok: $(grep -m1 -- "$pattern" "$out.log" | cut -c1-400)"
}

run "$tmp/base" --set train.max_steps=1 || { tail -20 "$tmp/base.log"; exit 1; }
ck="$tmp/base/checkpoint-1"

first="the loss is not finite .*the first non-finite value (rank [01], micro-batch 1 of 1, run again with checks)"
cp -r "$ck" "$tmp/m-big"
"$poke" st "$tmp/m-big/model.safetensors" model.layers.2.self_attn.qkv_proj.weight 0 -1 1e30
cp -r "$ck" "$tmp/m-exp"
"$poke" st "$tmp/m-exp/model.safetensors" model.layers.1.block_sparse_moe.experts.2.w1.weight 0 -1 1e37
big="$first: the forward of [a-z_]* (model.layers.2)"
exp="$first: the forward of moe_expert_ffn (model.layers.1.block_sparse_moe.experts.2) computed tensor 'moe_expert.ys' .* from finite inputs (with model.layers.1.block_sparse_moe.experts.2.w1.weight"
if [ -n "$emu" ]; then # on the CUDA backend: backend kernels, NCCL collectives, expert buckets
  train="$emu" fails "$tmp/exp" "step 1: $exp" --set "model.path=$tmp/m-exp" \
    --set train.max_steps=1 --set dist.backend=nccl --set data.max_length=64 \
    --set data.truncation=truncate --set "data.cache_dir=$tmp/cache-64" \
    --set dist.gather_unit=expert
  rm -rf "$tmp"
  exit 0
fi
cp -r "$ck" "$tmp/m-nan"
"$poke" st "$tmp/m-nan/model.safetensors" model.layers.1.self_attn.out_proj.weight 5 1 nan
fails "$tmp/nan" "tensor model.layers.1.self_attn.out_proj.weight element 5 (\[0, 5\]) is nan" \
  --set "model.path=$tmp/m-nan" --set train.max_steps=1
cp -r "$ck" "$tmp/m-inf"
"$poke" st "$tmp/m-inf/model.safetensors" lm_head.weight 786431 1 inf
fails "$tmp/inf" "\[rank 1\] error: .*tensor lm_head.weight element 786431 (\[6143, 127\]) is inf" \
  --set "model.path=$tmp/m-inf" --set train.max_steps=1

fails "$tmp/big" "step 1: $big" --set "model.path=$tmp/m-big" --set train.max_steps=1
fails "$tmp/exp" "step 1: $exp" --set "model.path=$tmp/m-exp" --set train.max_steps=1 \
  --set dist.gather_unit=expert
# train.skip_nonfinite_steps: each skipped step names it too, and the run goes on
run "$tmp/skip" --set "model.path=$tmp/m-big" --set train.max_steps=2 \
  --set train.skip_nonfinite_steps=true || { tail -5 "$tmp/skip.log"; exit 1; }
[ "$(grep -c "non-finite loss or gradient, step skipped; .*(model.layers.2)" "$tmp/skip.log")" -eq 2 ] ||
  { echo "FAIL: want 2 skipped steps named"; grep step "$tmp/skip.log"; exit 1; }
echo "ok: $(grep -m1 "step skipped" "$tmp/skip.log" | cut -c1-300)"

cp -r "$ck" "$tmp/ck-nan"
"$poke" h5 "$tmp/ck-nan/state-00000-of-00002.h5" bucket_0002_master 0 nan # rank 0's file
fails "$tmp/resume" "resume $tmp/ck-nan: the master weights of model.layers.1\.[a-z_.]* hold a non-finite value at element 0" \
  --resume "$tmp/ck-nan" --set train.max_steps=2

# sizes and vocabularies: one line naming the key, nothing written
fails "$tmp/long" "data.max_length: train.per_device_train_batch_size x data.max_length = 2 x 100000000 = 200000000 tokens per micro-batch" \
  --set data.max_length=100000000
sed 's/"vocab_size": 6144/"vocab_size": 4000/' recipes/configs/tiny.json > "$tmp/v4000.json"
fails "$tmp/vocab" "data.tokenizer_dir: $PWD/tests/fixtures/tokenizer/tokenizer.json has 6144 token ids but the model's vocab_size is 4000" \
  --set "model.config=$tmp/v4000.json"
for out in long vocab; do
  [ "$(grep -c 'error' "$tmp/$out.log")" -le 2 ] || { echo "FAIL: more than one error line"; cat "$tmp/$out.log"; exit 1; }
  [ ! -e "$tmp/$out" ] || { echo "FAIL: $tmp/$out was written"; ls -R "$tmp/$out"; exit 1; }
done
echo "ok: sizes and vocabulary refused before any output"
rm -rf "$tmp"
