#!/usr/bin/env bash
# gpu_generate.sh CPU_GENERATE DEVICE_GENERATE: greedy generation on the CUDA backend
# (DEVICE_GENERATE --backend cuda: minimax-generate on a GPU, or minimax-generate-emu on the CUDA
# emulator) equals the CPU backend's token for token on the tiny fixtures of Text-01 (GQA and MQA,
# lightning and softmax layers) and M2 (softmax, sigmoid router), 20 new tokens for two prompts;
# an MSA model (M3) is refused in one line (no MSA decode kernels on the device). Exit 77 when
# the device backend is not there (no GPU, or a build without -DMT_CUDA=ON).
set -uo pipefail
cpu="$1" dev="$2"
cd "$(dirname "$0")/fixtures/models"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! "$dev" --model tiny_mqa --ids ids_a.json --max-new-tokens 1 --backend cuda > /dev/null 2> "$tmp/probe"; then
  if grep -q "no usable CUDA device" "$tmp/probe"; then cat "$tmp/probe"; exit 77; fi
  cat "$tmp/probe"; exit 1
fi
for model in tiny_mqa tiny_released8 tiny_irregular_gqa tiny_m2; do
  "$cpu" --model "$model" --ids ids_a.json --max-new-tokens 20 > "$tmp/cpu.json" || exit 1
  "$dev" --model "$model" --ids ids_a.json --max-new-tokens 20 --backend cuda > "$tmp/dev.json" ||
    exit 1
  cmp -s "$tmp/cpu.json" "$tmp/dev.json" || {
    echo "FAIL $model: the device's tokens differ"; diff "$tmp/cpu.json" "$tmp/dev.json"; exit 1; }
  echo "ok: $model: 2 prompts x 20 tokens on the device = the CPU's"
done
if "$dev" --model tiny_m3 --ids ids_a.json --max-new-tokens 4 --backend cuda > /dev/null 2> "$tmp/m3"; then
  echo "FAIL tiny_m3: an MSA model decoded on the device"; exit 1
fi
grep -q "no MSA decode step" "$tmp/m3" || { cat "$tmp/m3"; echo "FAIL tiny_m3: not the refusal"; exit 1; }
echo "ok: tiny_m3 refused: $(grep -o 'the .* backend has no MSA decode step.*' "$tmp/m3")"
