#!/usr/bin/env bash
# run_eval.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: evaluation
# during and after training: the eval loss, --eval-only, accuracy by generation.
#   run_eval.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   eval             data.eval_samples with train.eval_steps on 1 and 2 ranks, the 2-rank run
#                    resumed from its step-5 checkpoint, one step at learning rate 0 over the
#                    whole training pool with and without held-out samples, and with the data
#                    file as data.eval_path (all of it, 16 drawn samples)
#                    -> $TMP/eval-{np1,np2,resume,lr0,all-lr0,file-lr0,file16-lr0}; all samples
#                    held out: an error
#   eval-only        --eval-only on a run's export gives the eval loss the run logged after its
#                    last step, to the bit, and writes no checkpoint and no export; with
#                    data.eval_path only that file is tokenized; without an
#                    eval set it is refused naming the keys; into another run's results refused
#   generate         eval.generate_data = "synthetic" (8 problems after the training ones) every
#                    20 steps on 2 ranks: eval.csv's accuracy columns (a step-20 row without the
#                    eval loss, a step-40 row with it), and the per-sample results equal to the
#                    bit those of minimax-eval on the step-40 fp32 export (the same problems written
#                    by minimax-data synth: the replica path against the trainer's gathers), of
#                    the same run on 1 rank, and of --eval-only on the export; with bf16 gathers
#                    those of minimax-eval on the bf16 export (its keys refused at start:
#                    run_brief.sh)
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

case "$mode" in
eval)
  # data.eval_samples = 16 of the 93 held out, evaluated at the start and every 5 steps, on 1
  # and 2 ranks; the
  # 2-rank run resumed from its step-5 checkpoint; then, from its trained step-10 export, one
  # step at learning rate 0 that takes the whole training pool as its global batch (4 rows x 12
  # micro-batches x 2 ranks >= 77), and the same without held-out samples over all 93: the
  # training loss over the pool and the eval loss over the held-out samples must add up to the
  # loss over all of them
  ev=(--set data.eval_samples=16 --set train.eval_steps=5 --set train.max_steps=10
    --set output.save_steps=5 --set "data.cache_dir=$tmp/dist-cache-eval"
    --set train.eval_on_start=true)
  run 1 "$tmp/eval-np1" "${ev[@]}" --set train.per_device_train_batch_size=4
  run 2 "$tmp/eval-np2" "${ev[@]}" --set train.per_device_train_batch_size=2
  run 2 "$tmp/eval-resume" "${ev[@]}" --set train.per_device_train_batch_size=2 \
    --resume "$tmp/eval-np2/checkpoint-5"
  whole=(--set train.max_steps=1 --set train.learning_rate=0 --set train.per_device_train_batch_size=4
    --set train.gradient_accumulation_steps=12 --set "data.cache_dir=$tmp/dist-cache-eval"
    --set "model.path=$tmp/eval-np2/checkpoint-10")
  run 2 "$tmp/eval-lr0" "${whole[@]}" --set data.eval_samples=16 --set train.eval_on_start=true
  run 2 "$tmp/eval-all-lr0" "${whole[@]}"
  # data.eval_path: the same data file as an eval file of its own, all of it and 16 drawn
  # samples (those that data.eval_samples = 16 holds out); the training data stays whole
  file="$tmp/dist-cache-eval/synthetic-gsm8k-11-96.jsonl"
  run 2 "$tmp/eval-file-lr0" "${whole[@]}" --set "data.eval_path=$file"
  run 2 "$tmp/eval-file16-lr0" "${whole[@]}" --set "data.eval_path=$file" --set data.eval_samples=16
  grep -h "^eval \(at\|after\)\|held out" "$tmp/eval-np2.log" "$tmp/eval-lr0.log"
  # all samples held out: refused by name once the data is known, non-zero exit
  rc=0
  run 2 "$tmp/eval-none" --set data.eval_samples=93 --set "data.cache_dir=$tmp/dist-cache-eval" \
    > /dev/null || rc=$?
  [ "$rc" -ne 0 ] && grep -q "data.eval_samples = 93 leaves no sample to train on: .* has 93 usable samples" \
    "$tmp/eval-none.log" || { echo "FAIL: data.eval_samples = 93 (exit $rc)"; cat "$tmp/eval-none.log"; exit 1; }
  echo "ok: $(grep -m1 'error' "$tmp/eval-none.log")"
  ;;
eval-only)
  d="$tmp/evo"
  rm -rf "$d"
  mkdir -p "$d"
  ev=("${fast[@]}" --set "data.cache_dir=$tmp/dist-cache-evo" --set data.eval_samples=16
    --set train.max_steps=4)
  run 2 "$d/train" "${ev[@]}"
  # the export of the last step, evaluated alone: the eval loss the run logged after step 4
  run 2 "$d/only" "${ev[@]}" --eval-only --set "model.path=$d/train/checkpoint-4"
  evl() { grep '"type": "eval"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": \([^,]*\),.*/\1/'; }
  [ -n "$(evl "$d/train")" ] && [ "$(evl "$d/train")" = "$(evl "$d/only")" ] ||
    fail "--eval-only: eval loss $(evl "$d/only"), the run logged $(evl "$d/train")"
  grep "^eval-only: loss $(evl "$d/train") over .* labelled eval tokens of $d/train/checkpoint-4" "$d/only.log" ||
    fail "no eval-only line with the loss"
  [ "$(ls "$d/only" | tr '\n' ' ')" = "eval.csv metrics.jsonl recipe.toml " ] ||
    fail "--eval-only wrote $(ls "$d/only" | tr '\n' ' ')"
  ! grep -q "^step " "$d/only.log" || fail "--eval-only took a step"
  echo "ok: --eval-only: eval loss $(evl "$d/only"), the run's after step 4"
  # no eval set: refused naming the keys, before any model
  rc=0
  "${mpi[@]}" -np 2 "$bin" "$recipe" "${fast[@]}" --eval-only \
    --set "model.path=$d/train/checkpoint-4" --set "output.dir=$d/none" > "$d/none.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep "^error: --eval-only: no eval set: set data.eval_samples .* or data.eval_path" "$d/none.log" ||
    { tail -5 "$d/none.log"; fail "--eval-only without an eval set: exit $rc"; }
  # with data.eval_path only that file is tokenized: the training data is neither written
  # (data.path = "synthetic") nor tokenized
  "$(dirname "$bin")/minimax-data" synth --out "$d/evp.jsonl" --n 8 --seed 5 > /dev/null
  run 2 "$d/evp" "${fast[@]}" --eval-only --set "model.path=$d/train/checkpoint-4" \
    --set "data.eval_path=$d/evp.jsonl" --set "data.cache_dir=$d/evp-cache" ||
    fail "--eval-only with data.eval_path"
  [ "$(ls "$d/evp-cache" | tr '\n' ' ')" = "eval-tokens.h5 " ] ||
    fail "--eval-only with data.eval_path built $(ls "$d/evp-cache" | tr '\n' ' ')"
  grep -q "^eval-only: loss .* over .* labelled eval tokens" "$d/evp.log" || fail "no eval-only line"
  echo "ok: --eval-only with data.eval_path: the cache holds $(ls "$d/evp-cache")"
  # into another run's results: refused as a fresh run is
  rc=0
  "${mpi[@]}" -np 2 "$bin" "$recipe" "${ev[@]}" --set "output.dir=$d/train" \
    --eval-only > "$d/over.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep "^error: output.dir $d/train holds another run's results" "$d/over.log" ||
    { tail -5 "$d/over.log"; fail "--eval-only into a run's results: exit $rc"; }
  ;;
generate)
  d="$tmp/gen"
  rm -rf "$d"
  mkdir -p "$d"
  bindir="$(dirname "$bin")"
  # 4 layers, lr 3e-3: after 40 steps the completions differ from problem to problem
  g=(--set data.max_length=128 --set train.max_steps=40 --set train.learning_rate=3e-3
    --set data.eval_samples=8 --set eval.generate_data=synthetic --set eval.generate_samples=8
    --set eval.generate_max_new_tokens=24 --set eval.generate_batch=3 --set eval.generate_every=20)
  run 2 "$d/np2" "${g[@]}" --set train.per_device_train_batch_size=1 \
    --set "data.cache_dir=$tmp/dist-cache-gen"
  run 1 "$d/np1" "${g[@]}" --set train.per_device_train_batch_size=2 \
    --set "data.cache_dir=$tmp/dist-cache-gen1"
  grep "accuracy" "$d/np2.log"
  e="$d/np2/eval.csv"
  [ "$(head -1 "$e")" = "step,eval_loss,tokens,seconds,accuracy,correct,samples,gen_seconds" ] ||
    fail "eval.csv header: $(head -1 "$e")"
  # step 20: generation alone (the eval loss after the last step only); step 40: both
  awk -F, 'NR==2 && !($1==20 && $2=="" && $6!="" && $7==8) {exit 1}
    NR==3 && !($1==40 && $2!="" && $6!="" && $7==8) {exit 1} END {if (NR!=3) exit 1}' "$e" ||
    { cat "$e"; fail "eval.csv rows"; }
  n_ok=$(grep -c '"correct":true' "$d/np2/eval-generate-40.jsonl" || true)
  [ "$(awk -F, 'NR==3{print $6}' "$e")" = "$n_ok" ] || fail "eval.csv counts $(awk -F, 'NR==3{print $6}' "$e") correct, the jsonl $n_ok"
  [ "$(wc -l < "$d/np2/eval-generate-40.jsonl")" -eq 8 ] || fail "not 8 result lines"
  [ "$(grep -o '"completion":"[^"]*"' "$d/np2/eval-generate-40.jsonl" | sort -u | wc -l)" -ge 3 ] ||
    fail "the completions do not depend on the problem: a weak comparison"
  # 1 rank: the same results
  cmp "$d/np2/eval-generate-40.jsonl" "$d/np1/eval-generate-40.jsonl" || fail "1 and 2 ranks differ"
  cmp "$d/np2/eval-generate-20.jsonl" "$d/np1/eval-generate-20.jsonl" || fail "1 and 2 ranks differ at step 20"
  # minimax-eval on the export: problems 96.. of data.seed 11's stream, as eval.generate_data says
  "$bindir/minimax-data" synth --out "$d/synth.jsonl" --n 104 --seed 11 > /dev/null
  tail -n 8 "$d/synth.jsonl" > "$d/held.jsonl"
  mpirun -np 2 --oversubscribe --bind-to none "$bindir/minimax-eval" --model "$d/np2/checkpoint-40" \
    --data "$d/held.jsonl" --max-new-tokens 24 --batch 2 --out "$d/me.jsonl" > "$d/me.log" 2>&1 ||
    { cat "$d/me.log"; fail "minimax-eval"; }
  cmp "$d/me.jsonl" "$d/np2/eval-generate-40.jsonl" || fail "minimax-eval on the export differs"
  grep -q "gsm8k accuracy .* ($n_ok / 8)" "$d/me.log" || fail "minimax-eval's accuracy: $(cat "$d/me.log")"
  # --eval-only on the export: the same results as step 0
  run 2 "$d/only" "${g[@]}" --set train.per_device_train_batch_size=1 --eval-only \
    --set "model.path=$d/np2/checkpoint-40" --set "data.cache_dir=$tmp/dist-cache-gen"
  cmp "$d/only/eval-generate-0.jsonl" "$d/np2/eval-generate-40.jsonl" || fail "--eval-only differs"
  echo "ok: accuracy by generation: $n_ok / 8 after step 40, the same on 1 and 2 ranks, from minimax-eval on the export and from --eval-only"
  # n-shot and sampling: --eval-only on the export, as minimax-eval with the same flags
  head -n 3 "$d/synth.jsonl" > "$d/shots.jsonl"
  s=(--set eval.generate_shots=2 --set "eval.generate_shots_file=$d/shots.jsonl"
    --set eval.generate_temperature=0.8 --set eval.generate_top_p=0.9 --set eval.generate_seed=5)
  run 2 "$d/shots" "${g[@]}" "${s[@]}" --set train.per_device_train_batch_size=1 --eval-only \
    --set "model.path=$d/np2/checkpoint-40" --set "data.cache_dir=$tmp/dist-cache-gen"
  grep -q "eval.generate: 8 problems of synthetic, 2-shot, 24 new tokens at most, sampled (temperature 0.8, top-k 0, top-p 0.9, seed 5)" "$d/shots.log" ||
    fail "the n-shot sampled evaluation's log line: $(grep eval.generate "$d/shots.log")"
  mpirun -np 2 --oversubscribe --bind-to none "$bindir/minimax-eval" --model "$d/np2/checkpoint-40" \
    --data "$d/held.jsonl" --max-new-tokens 24 --batch 3 --shots 2 --shots-file "$d/shots.jsonl" \
    --temperature 0.8 --top-p 0.9 --seed 5 --out "$d/me-shots.jsonl" > "$d/me-shots.log" 2>&1 ||
    { cat "$d/me-shots.log"; fail "minimax-eval --shots"; }
  cmp "$d/me-shots.jsonl" "$d/shots/eval-generate-0.jsonl" || fail "n-shot sampled: minimax-eval differs"
  ! cmp -s "$d/shots/eval-generate-0.jsonl" "$d/only/eval-generate-0.jsonl" ||
    fail "the 2-shot sampled results equal the zero-shot greedy ones: the keys did nothing"
  echo "ok: 2-shot, sampled (temperature 0.8, top-p 0.9, seed 5): the results of minimax-eval with the same flags"
  # bf16 gathers: the replica holds the bf16 rounding, what a bf16 export holds
  run 2 "$d/bf16" "${g[@]}" --set train.per_device_train_batch_size=1 --set dist.gather_dtype=bf16 \
    --set output.export_dtype=bf16 --set "data.cache_dir=$tmp/dist-cache-gen"
  mpirun -np 2 --oversubscribe --bind-to none "$bindir/minimax-eval" --model "$d/bf16/checkpoint-40" \
    --data "$d/held.jsonl" --max-new-tokens 24 --out "$d/me-bf16.jsonl" > "$d/me-bf16.log" 2>&1 ||
    { cat "$d/me-bf16.log"; fail "minimax-eval (bf16)"; }
  cmp "$d/me-bf16.jsonl" "$d/bf16/eval-generate-40.jsonl" || fail "bf16 gathers: minimax-eval on the bf16 export differs"
  echo "ok: bf16 gathers: the results of minimax-eval on the bf16 export"
  # eval.generate_weights = "gathered": no replica, the ranks decode in step through the gathers;
  # on the CPU the replica's results to the bit. 2 ranks; 3 ranks with 2 prompts a batch and
  # gather unit expert (shares of 3, 3 and 2: a rank walks the buckets of whole prefills and
  # decodes with no rows); expert parallelism paused; M2 and M3 (random initialisations, unit
  # expert, 3 ranks) against their replica runs; and a training run generating every 20 steps
  # with bf16 gathers: the same results and, after the decoding, the same steps to the bit
  ga=(--set eval.generate_weights=gathered)
  only=(--eval-only --set "model.path=$d/np2/checkpoint-40" --set "data.cache_dir=$tmp/dist-cache-gen")
  run 2 "$d/gath" "${g[@]}" "${ga[@]}" "${only[@]}" --set train.per_device_train_batch_size=1
  grep -q 'the ranks decode in step through the ZeRO-3 gathers on the cpu backend' "$d/gath.log" ||
    fail "gathered: the log line: $(grep eval.generate "$d/gath.log")"
  cmp "$d/gath/eval-generate-0.jsonl" "$d/only/eval-generate-0.jsonl" || fail "gathered, 2 ranks: the replica's results differ"
  run 3 "$d/gath3" "${g[@]}" "${ga[@]}" "${only[@]}" --set eval.generate_batch=2 --set dist.gather_unit=expert --set train.per_device_train_batch_size=2
  cmp "$d/gath3/eval-generate-0.jsonl" "$d/only/eval-generate-0.jsonl" || fail "gathered, 3 ranks, unit expert: the replica's results differ"
  run 2 "$d/gath-ep" "${g[@]}" "${ga[@]}" "${only[@]}" --set train.per_device_train_batch_size=1 \
    --set dist.gather_unit=expert --set dist.expert_parallel=2
  cmp "$d/gath-ep/eval-generate-0.jsonl" "$d/only/eval-generate-0.jsonl" || fail "gathered, expert parallel: the replica's results differ"
  for fam in m2 m3; do
    fr=(--eval-only --set eval.generate_batch=2 --set dist.gather_unit=expert
      --set train.per_device_train_batch_size=2 --set "data.cache_dir=$tmp/dist-cache-gen-$fam")
    recipe="tests/recipes/dist-$fam.toml" run 3 "$d/$fam-rep" "${g[@]}" "${fr[@]}" \
      --set eval.generate_weights=replica
    recipe="tests/recipes/dist-$fam.toml" run 3 "$d/$fam-gath" "${g[@]}" "${fr[@]}" "${ga[@]}"
    cmp "$d/$fam-gath/eval-generate-0.jsonl" "$d/$fam-rep/eval-generate-0.jsonl" || fail "gathered, $fam: the replica's results differ"
  done
  run 2 "$d/bf16-gath" "${g[@]}" "${ga[@]}" --set train.per_device_train_batch_size=1 \
    --set dist.gather_dtype=bf16 --set output.export_dtype=bf16 --set "data.cache_dir=$tmp/dist-cache-gen"
  for st in 20 40; do
    cmp "$d/bf16-gath/eval-generate-$st.jsonl" "$d/bf16/eval-generate-$st.jsonl" || fail "gathered, bf16 gathers, step $st: the replica's results differ"
  done
  [ "$(cut -d, -f1-5 "$d/bf16-gath/loss.csv")" = "$(cut -d, -f1-5 "$d/bf16/loss.csv")" ] || fail "gathered: the training steps after the decoding differ"
  echo "ok: eval.generate_weights = gathered: the replica's results on 2 and 3 ranks, with gather unit expert, expert parallelism, M2 and M3; the steps after it unchanged"
  # its keys refused at start: run_brief.sh
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
