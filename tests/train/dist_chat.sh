#!/usr/bin/env bash
# dist_chat.sh: recipes/tiny-m2.toml or tiny-m3.toml (synthetic agentic conversations rendered
# with the released template from ../shared) on 2 MPI ranks for 12 steps: the loss falls, the
# export's chat_template.jinja is the source template byte for byte and its
# tokenizer_config.json the tokenizer directory's; then the same run with data.chat_template
# naming a missing file stops before any step with one line naming it.
#   dist_chat.sh BIN m2|m3   (run by ctest from the source directory; MT_TEST_TMPDIR set)
# Exit 77 (skipped) where ../shared/templates is absent.
set -euo pipefail
bin="$1"
fam="$2"
tmp="${MT_TEST_TMPDIR:?}"
shared="${MT_SHARED_DIR:-../shared}"
template="$shared/templates/MiniMax-${fam^^}.jinja"
[ -r "$template" ] || { echo "no $template: skipped"; exit 77; }
out="$tmp/chat-$fam"
rm -rf "$out"
mpirun -np 2 --oversubscribe --bind-to none "$bin" "recipes/tiny-$fam.toml" \
  --set "output.dir=$out" --set "data.chat_template=$template" --set train.max_steps=12 \
  --set train.warmup_steps=2 --set data.eval_samples=0 --set train.eval_steps=0 \
  --set train.eval_on_start=false --set data.synthetic_samples=120 > "$out.log" 2>&1 ||
  { tail -30 "$out.log"; echo "FAIL: the run failed"; exit 1; }
grep -E "^data: |^step (1|12)/" "$out.log"
# the loss falls: the mean of the last 3 steps below 80 % of the first step's
awk -F, 'NR == 2 { first = $2 } NR > 1 { l[NR] = $2; n = NR }
  END { m = (l[n] + l[n - 1] + l[n - 2]) / 3;
        printf "loss: step 1 %.4f, last 3 steps %.4f\n", first, m;
        exit !(n == 13 && m < 0.8 * first) }' "$out/loss.csv" ||
  { echo "FAIL: the loss did not fall"; exit 1; }
export="$out/checkpoint-12"
cmp "$export/chat_template.jinja" "$template" ||
  { echo "FAIL: the export's chat_template.jinja differs from $template"; exit 1; }
cmp "$export/tokenizer_config.json" "tests/fixtures/tokenizer_$fam/tokenizer_config.json" ||
  { echo "FAIL: the export's tokenizer_config.json differs from the tokenizer directory's"; exit 1; }
echo "export: chat_template.jinja and tokenizer_config.json byte-identical to the sources"
# a missing template: one line naming the file, non-zero exit, no step
rc=0
mpirun -np 2 --oversubscribe --bind-to none "$bin" "recipes/tiny-$fam.toml" \
  --set "output.dir=$out-missing" --set "data.chat_template=$tmp/absent.jinja" \
  > "$out-missing.log" 2>&1 || rc=$?
if [ "$rc" -eq 0 ] || ! grep -q "data.chat_template.*$tmp/absent.jinja" "$out-missing.log" ||
  grep -q "^step " "$out-missing.log"; then
  cat "$out-missing.log"
  echo "FAIL: a missing data.chat_template was not refused naming it"
  exit 1
fi
grep "absent.jinja" "$out-missing.log" | head -1
echo "PASSED dist_chat $fam"
