#!/usr/bin/env bash
# gpu_generate.sh CPU_GENERATE DEVICE_GENERATE: greedy generation on the CUDA backend
# (DEVICE_GENERATE --backend cuda: minimax-generate on a GPU, or minimax-generate-emu on the CUDA
# emulator) equals the CPU backend's token for token on the tiny fixtures of Text-01 (GQA and MQA,
# lightning and softmax layers), M2 (softmax, sigmoid router) and M3 (MSA block-sparse layers:
# the device's block selection and sparse attention steps), 20 new tokens for two prompts. Exit 77 when
# the device backend is not there (no GPU, or a build without -DMT_CUDA=ON).
set -uo pipefail
cpu="$1" dev="$2"
cd "$(dirname "$0")/../fixtures/models"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! "$dev" --model tiny_mqa --ids ids_a.json --max-new-tokens 1 --backend cuda > /dev/null 2> "$tmp/probe"; then
  if grep -q "no usable CUDA device" "$tmp/probe"; then cat "$tmp/probe"; exit 77; fi
  cat "$tmp/probe"; exit 1
fi
for model in tiny_mqa tiny_released8 tiny_irregular_gqa tiny_m2 tiny_m3; do
  "$cpu" --model "$model" --ids ids_a.json --max-new-tokens 20 > "$tmp/cpu.json" || exit 1
  "$dev" --model "$model" --ids ids_a.json --max-new-tokens 20 --backend cuda > "$tmp/dev.json" ||
    exit 1
  cmp -s "$tmp/cpu.json" "$tmp/dev.json" || {
    echo "FAIL $model: the device's tokens differ"; diff "$tmp/cpu.json" "$tmp/dev.json"; exit 1; }
  echo "ok: $model: 2 prompts x 20 tokens on the device = the CPU's"
done
