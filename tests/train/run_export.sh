#!/usr/bin/env bash
# run_export.sh: what a run ships (docs/checkpoints.md, "What a run ships"), end to end on the
# tiny FP8 MiniMax-M2 fixture (tests/recipes/export-m2-fp8.toml).
#   run_export.sh BIN MODE   (run by ctest from the source directory; MT_TEST_TMPDIR set)
# Modes:
#   fp8       the recipe exported as fp8 and as fp32 (the same run: the fp32 master weights)
#             -> $TMP/export-fp8, $TMP/export-fp32, for parity_export_fp8
#             (tests/train/parity_export.c)
#   final     output.export_dtype = "bf16": final/ holds the export of the last checkpoint and
#             no training state; its config.json says dtype bfloat16, its
#             generation_config.json has the template's end of turn as eos and pad (a
#             source's sampling defaults copied); --rewind moves a later final/ aside
#   no-state  output.save_optimizer_state = false: no state-*.h5 in the checkpoints, the log
#             says it cannot be resumed, and --resume from it is refused in one line naming it;
#             a stop signal's checkpoint writes no final/
#   refused   fp8 from a source that is not FP8, and from a random initialisation: the error
#             names output.export_dtype
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
recipe=tests/recipes/export-m2-fp8.toml

case "$mode" in
fp8)
  run 1 "$tmp/export-fp8"
  run 1 "$tmp/export-fp32" --set output.export_dtype=fp32
  grep -E "^step 4/|^saved" "$tmp/export-fp8.log"
  ;;
final)
  out="$tmp/export-final"
  run 1 "$out" --set output.export_dtype=bf16 --set output.save_steps=2
  grep -E "^saved" "$out.log"
  ckpt="$out/checkpoint-4"
  ls "$out/final"
  for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
    [ -f "$out/final/$f" ] || fail "final/ lacks $f"
    cmp -s "$out/final/$f" "$ckpt/$f" || fail "final/$f differs from $ckpt/$f"
  done
  # the checkpoint's training state and recipe are not shipped; nothing else is there either
  extra=$(ls "$out/final" | grep -vxE 'config.json|generation_config.json|model.safetensors|tokenizer.json|tokenizer_config.json|special_tokens_map.json|chat_template.jinja' || true)
  [ -z "$extra" ] || fail "final/ holds more than the model: $extra"
  ls "$ckpt" | grep -qE '^state.*\.h5$' || fail "the checkpoint lacks its training state"
  grep -q '"dtype":[[:space:]]*"bfloat16"' "$out/final/config.json" || fail "config.json: no dtype bfloat16"
  grep -q '"torch_dtype":[[:space:]]*"bfloat16"' "$out/final/config.json" || fail "config.json: no torch_dtype"
  # the template's eos_token (tokenizer_config.json) and its id in tokenizer.json
  eos=$(grep -o '"eos_token": *"[^"]*"' tests/fixtures/tokenizer_bytes/tokenizer_config.json | sed 's/.*: *"//; s/"$//')
  id=$(tr -d '\n' < tests/fixtures/tokenizer_bytes/tokenizer.json | grep -o "\"id\": *[0-9]*, *\"content\": *\"$eos\"" | grep -o '[0-9]*' | head -1)
  [ -n "$id" ] || fail "no id for $eos"
  cat "$out/final/generation_config.json"
  grep -q "\"eos_token_id\":[[:space:]]*$id\b" "$out/final/generation_config.json" || fail "eos_token_id is not $id ($eos)"
  grep -q "\"pad_token_id\":[[:space:]]*$id\b" "$out/final/generation_config.json" || fail "pad_token_id is not $id"
  # --rewind to step 2 moves the later step's final/ aside with checkpoint-4; the rewound run
  # ends with its own
  "$bin" --resume "$out/checkpoint-2" --rewind --set train.max_steps=3 > "$out-rewind.log" 2>&1 ||
    { tail -5 "$out-rewind.log"; fail "the rewind failed"; }
  ls -d "$out"/rewound-*/final > /dev/null 2>&1 || fail "--rewind left the later final/ in place"
  grep -q "^saved $out/final: the model of step 3" "$out-rewind.log" || fail "the rewound run wrote no final/"
  # a source with sampling defaults (as the release's generation_config.json has): copied, less
  # _from_model_config; its eos (7 here) kept, the template's end of turn added
  src="$tmp/export-src-gen"
  rm -rf "$src" && cp -r tests/fixtures/models/tiny_m2_fp8 "$src"
  printf '{"_from_model_config": true, "bos_token_id": 1, "do_sample": true, "eos_token_id": 7,\n "temperature": 0.75, "top_p": 0.95, "top_k": 40, "transformers_version": "5.24.0"}\n' \
    > "$src/generation_config.json"
  run 1 "$out-gen" --set model.path="$src" --set output.export_final=false
  gen="$out-gen/checkpoint-4/generation_config.json"
  cat "$gen"
  [ ! -e "$out-gen/final" ] || fail "output.export_final = false wrote final/"
  tr -d ' \t\n' < "$gen" | grep -q "\"eos_token_id\":\[7,$id\]" || fail "eos_token_id is not [7, $id]"
  for kv in '"bos_token_id":1' '"do_sample":true' '"temperature":0.75' '"top_p":0.95' '"top_k":40' "\"pad_token_id\":$id"; do
    tr -d ' \t\n' < "$gen" | grep -qF "$kv" || fail "generation_config.json lacks $kv"
  done
  ! grep -q _from_model_config "$gen" || fail "_from_model_config kept"
  ;;
no-state)
  out="$tmp/export-nostate"
  run 1 "$out" --set output.save_optimizer_state=false --set output.save_steps=2
  grep -E "^saved" "$out.log"
  for c in checkpoint-2 checkpoint-4 final; do
    [ -f "$out/$c/model.safetensors" ] || fail "$c has no export"
    ! ls "$out/$c" | grep -qE '^state.*\.h5$' || fail "$c holds optimizer state"
  done
  grep -q "saved $out/checkpoint-2 .*no optimizer state.*cannot be resumed" "$out.log" ||
    fail "the log does not say the checkpoint cannot be resumed"
  rc=0
  "$bin" --resume "$out/checkpoint-2" --set train.max_steps=6 > "$out-resume.log" 2>&1 || rc=$?
  cat "$out-resume.log" | grep -E "^error" || true
  [ "$rc" -ne 0 ] || fail "resuming a checkpoint without optimizer state exited 0"
  [ "$(grep -c "^error" "$out-resume.log")" = 1 ] || fail "not one error line"
  grep -q "^error: --resume $out/checkpoint-2: the checkpoint holds no optimizer state" "$out-resume.log" ||
    fail "the refusal does not name the checkpoint and why"
  ;;
refused)
  rc=0
  run 1 "$tmp/export-refused" --set model.path=tests/fixtures/models/tiny_m2 > /dev/null || rc=$?
  [ "$rc" -ne 0 ] || fail "fp8 from a source that is not FP8 exited 0"
  grep -E "^error" "$tmp/export-refused.log"
  grep -q '^error: .*output.export_dtype = "fp8": .*tiny_m2/config.json has no fp8 quantization_config' \
    "$tmp/export-refused.log" || fail "the refusal does not name output.export_dtype and the config"
  ! grep -q "^step 1/" "$tmp/export-refused.log" || fail "it trained before refusing"
  rc=0
  run 1 "$tmp/export-refused2" --set model.path= --set model.config=recipes/configs/tiny-m2.json > /dev/null || rc=$?
  [ "$rc" -ne 0 ] || fail "fp8 from a random initialisation exited 0"
  grep -E "output.export_dtype" "$tmp/export-refused2.log" | head -2
  grep -q 'output.export_dtype' "$tmp/export-refused2.log" || fail "the error does not name the key"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo "OK $mode"
