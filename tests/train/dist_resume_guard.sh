#!/usr/bin/env bash
# dist_resume_guard.sh: what a resume, or any run, may do to output directories (ctest
# dist_resume_guard; docs/training.md, "Failure").
#   dist_resume_guard.sh BIN guard   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the helpers: tests/train/run_common.sh)
# A run A of 4 steps (checkpoints at 2 and 4, eval-generate files at 2 and 4) and a run O of 2:
#   - --resume A/checkpoint-2 --set output.dir=O is refused naming both runs, O byte for byte
#     as it was; into an empty directory it resumes; with --overwrite it replaces O's results;
#     --overwrite into the checkpoint's own run is refused
#   - a resume whose train.max_steps is at or below the checkpoint's step: one line, A unchanged
#   - --resume A/checkpoint-2 into A (checkpoint-4 later) is refused naming --rewind, A
#     unchanged; with --rewind, checkpoint-4, loss.csv's and eval.csv's rows 3..4 and
#     eval-generate-4.jsonl move together into A/rewound-<time>/, and the run redoes steps 3..4
#   - the output directory over the inputs: output.dir = model.path (by another name, a link),
#     model.path inside output.dir's checkpoint-4 with --overwrite, a data file that is
#     output.dir/metrics.jsonl under another name (a hard link): refused before any model
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
[ "$mode" = guard ] || { echo "unknown mode $mode" >&2; exit 2; }
tmp="$tmp/resume-guard"
rm -rf "$tmp"
mkdir -p "$tmp"
fast=(--set model.num_hidden_layers=1 --set data.max_length=64 --set data.truncation=truncate
  --set train.per_device_train_batch_size=2 --set "data.cache_dir=$tmp/cache"
  --set eval.generate_data=synthetic --set eval.generate_samples=2
  --set eval.generate_max_new_tokens=4 --set eval.generate_every=2)
train() { # train LOG ARGS...: 1 rank; the exit code
  local log="$1" rc=0
  shift
  mpirun -np 1 --oversubscribe --bind-to none "$bin" "$@" > "$log" 2>&1 || rc=$?
  return "$rc"
}
tree_sum() { (cd "$1" && find . -type f ! -name '.minimax-train.*' -print0 | sort -z | xargs -0 sha1sum); }

a="$tmp/a" o="$tmp/o"
train "$tmp/a.log" "$recipe" "${fast[@]}" --set "output.dir=$a" --set train.max_steps=4 \
  --set output.save_steps=2 || { tail -20 "$tmp/a.log"; fail "run A"; }
train "$tmp/o.log" "$recipe" "${fast[@]}" --set "output.dir=$o" --set train.max_steps=2 \
  --set train.learning_rate=2e-3 || { tail -20 "$tmp/o.log"; fail "run O"; }
[ -d "$a/checkpoint-2" ] && [ -d "$a/checkpoint-4" ] && [ -f "$a/eval-generate-4.jsonl" ] ||
  fail "run A lacks its checkpoints or eval-generate files"
tree_sum "$a" > "$tmp/a.sum"
tree_sum "$o" > "$tmp/o.sum"

# 1. into another run's results: refused naming both, O unchanged
refused 1 "$tmp/1.log" "^error: --resume $a/checkpoint-2: output.dir $o holds another run's results (loss.csv (2 steps), .*checkpoint-2), and the checkpoint is of the run in $a" \
  --resume "$a/checkpoint-2" --set "output.dir=$o"
tree_sum "$o" | cmp -s - "$tmp/o.sum" || fail "the refused resume changed $o"
# ... into an empty directory: resumes
mkdir "$tmp/empty"
train "$tmp/1e.log" --resume "$a/checkpoint-2" --set "output.dir=$tmp/empty" ||
  { tail -5 "$tmp/1e.log"; fail "resume into an empty directory"; }
[ -d "$tmp/empty/checkpoint-4" ] || fail "the resume into an empty directory wrote no checkpoint-4"
# ... with --overwrite: O's results replaced (a copy of O)
cp -a "$o" "$tmp/o2"
train "$tmp/1o.log" --resume "$a/checkpoint-2" --set "output.dir=$tmp/o2" --overwrite ||
  { tail -5 "$tmp/1o.log"; fail "resume with --overwrite"; }
grep -q "^--overwrite: removed .*checkpoint-2" "$tmp/1o.log" || fail "--overwrite said nothing"
[ "$(wc -l < "$tmp/o2/loss.csv")" -eq 3 ] && [ "$(sed -n 2p "$tmp/o2/loss.csv" | cut -d, -f1)" = 3 ] ||
  fail "--overwrite: loss.csv is not the resumed run's steps 3..4"
# ... --overwrite into the checkpoint's own run: refused
refused 1 "$tmp/1oo.log" "^error: --resume $a/checkpoint-2 continues the run in $a and --overwrite would remove it" \
  --resume "$a/checkpoint-2" --overwrite
tree_sum "$a" | cmp -s - "$tmp/a.sum" || fail "a refused resume changed $a"

# 2. train.max_steps at or below the checkpoint's step
for steps in 2 4; do
  refused 1 "$tmp/2.log" "^error: --resume $a/checkpoint-4: train.max_steps = $steps is at or below the checkpoint's step 4" \
    --resume "$a/checkpoint-4" --set "train.max_steps=$steps"
done
refused 1 "$tmp/2b.log" "^error: --resume $a/checkpoint-2: train.max_steps = 1 is at or below the checkpoint's step 2" \
  "$recipe" "${fast[@]}" --set "output.dir=$a" --set train.max_steps=1 --resume "$a/checkpoint-2"
tree_sum "$a" | cmp -s - "$tmp/a.sum" || fail "a refused resume changed $a"

# 3. an older checkpoint of the same run: refused without --rewind
refused 1 "$tmp/3.log" "^error: --resume $a/checkpoint-2: output.dir $a holds the same run's results after step 2 (checkpoint-4, loss.csv's steps 3..4, eval.csv's step 4, eval-generate-4.jsonl).*--rewind" \
  --resume "$a/checkpoint-2"
tree_sum "$a" | cmp -s - "$tmp/a.sum" || fail "the refused resume changed $a"
# ... with --rewind: the later results moved aside together, the steps redone
cp "$a/loss.csv" "$tmp/a.loss"
cp "$a/eval.csv" "$tmp/a.eval"
train "$tmp/3r.log" --resume "$a/checkpoint-2" --rewind || { tail -5 "$tmp/3r.log"; fail "--rewind"; }
grep "^--rewind: moved" "$tmp/3r.log" || fail "--rewind said nothing"
aside=$(ls -d "$a"/rewound-*)
[ "$(echo "$aside" | wc -l)" -eq 1 ] || fail "not one rewound directory: $aside"
[ -f "$aside/checkpoint-4/model.safetensors" ] && [ -f "$aside/eval-generate-4.jsonl" ] ||
  fail "checkpoint-4 or eval-generate-4.jsonl not moved into $aside"
{ head -1 "$tmp/a.loss"; tail -n +4 "$tmp/a.loss"; } | cmp - "$aside/loss.csv" ||
  fail "$aside/loss.csv is not the header and the old rows 3..4"
{ head -1 "$tmp/a.eval"; tail -n +3 "$tmp/a.eval"; } | cmp - "$aside/eval.csv" ||
  fail "$aside/eval.csv is not the header and the old row of step 4"
[ "$(cut -d, -f1 "$a/loss.csv" | tr '\n' ' ')" = "step 1 2 3 4 " ] || fail "loss.csv steps: $(cut -d, -f1 "$a/loss.csv" | tr '\n' ' ')"
[ "$(cut -d, -f1-2 "$a/loss.csv")" = "$(cut -d, -f1-2 "$tmp/a.loss")" ] || fail "the redone steps' losses differ"
[ -d "$a/checkpoint-4" ] && [ -f "$a/eval-generate-4.jsonl" ] || fail "the redone run wrote no checkpoint-4"

# 4. outputs over inputs, refused before any model
ln -s "$a/checkpoint-4" "$tmp/model-alias"
refused 1 "$tmp/4a.log" "^error: output.dir $tmp/model-alias is model.path $a/checkpoint-4 (the same directory)" \
  "$recipe" "${fast[@]}" --set "model.path=$a/checkpoint-4" --set "output.dir=$tmp/model-alias"
ln -s "$a" "$tmp/a-alias"
refused 1 "$tmp/4b.log" "^error: model.path $tmp/a-alias/checkpoint-4 is $a/checkpoint-4, which this run writes or removes" \
  "$recipe" "${fast[@]}" --set "model.path=$tmp/a-alias/checkpoint-4" --set "output.dir=$a" --overwrite
[ -f "$a/checkpoint-4/model.safetensors" ] || fail "--overwrite removed model.path"
mkdir "$tmp/d" "$tmp/hl"
"$(dirname "$bin")/minimax-data" synth --out "$tmp/d/train.jsonl" --n 16 > /dev/null
ln "$tmp/d/train.jsonl" "$tmp/hl/metrics.jsonl"
cp "$tmp/d/train.jsonl" "$tmp/train.copy"
refused 1 "$tmp/4c.log" "^error: data.path $tmp/d/train.jsonl is $tmp/hl/metrics.jsonl, which this run writes or removes" \
  "$recipe" "${fast[@]}" --set "data.path=$tmp/d/train.jsonl" --set "output.dir=$tmp/hl"
cmp "$tmp/d/train.jsonl" "$tmp/train.copy" || fail "the data file was written over"
echo "ok: dist_resume_guard"
