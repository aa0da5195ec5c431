#!/usr/bin/env bash
# run_head.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: the head
# objectives (train.objective, docs/recipes.md "Objectives").
#   run_head.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   reward N [m2|m3] tests/recipes/dist-rm.toml (a tiny reward model on synthetic preference pairs,
#                    4 pairs a step) on N ranks, a checkpoint at step 10 -> $TMP/rm-npN; with m2
#                    or m3 the tiny MiniMax-M2 or -M3 config -> $TMP/rm-m2-npN, rm-m3-npN
#   reward-layouts   the same on 2 ranks: resumed from rm-np2's step 10 (10 + resume + 10), with
#                    expert parallelism (P = 2, gather unit expert), and with bf16 gathers and
#                    bf16 GEMMs (model.dtype), and --eval-only of its final model on its data
#                    file as data.eval_path -> $TMP/rm-{resume,ep,bf16,eval-only}; minimax-serve
#                    and minimax-chat refuse that model (no lm_head)
#   reward-emu EMU   3 steps on the CPU backend and on the CUDA backend + NCCL through the CPU
#                    emulator (EMU, minimax-train-emu), 2 ranks -> $TMP/rm-emu-{cpu,cuda}
#   tiny-rm          recipes/tiny-rm.toml as shipped, 2 ranks -> $TMP/tiny-rm: the held-out pairs'
#                    accuracy about half at the start, above 90 % at the end
#   heads N          classification, token classification and QA on the jsonl files of
#                    tests/fixtures/head, N ranks -> $TMP/{cls,tok,qa}-npN
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
recipe=tests/recipes/dist-rm.toml

case "$mode" in
reward)
  np="$3"
  family="${4:-}"
  name="rm${family:+-$family}-np$np"
  config=()
  # lr 1e-4 for M2 and M3: at dist-rm.toml's 1e-3 the tiny M2's gradient norm reaches 24 under
  # clipping and the 1- and 2-rank runs drift apart from step 10 (1e-3 by step 17; at 1e-4 they
  # agree within 4e-7)
  [ -n "$family" ] && config=(--set "model.config=recipes/configs/tiny-$family.json"
    --set train.learning_rate=1e-4)
  run "$np" "$tmp/$name" "${config[@]}" --set "train.per_device_train_batch_size=$((4 / np))" \
    --set "data.cache_dir=$tmp/dist-cache-$name" --set output.save_steps=10
  grep -E "^model|^data|^eval|^step 20/" "$tmp/$name.log"
  ;;
reward-layouts)
  run 2 "$tmp/rm-resume" --set train.per_device_train_batch_size=2 \
    --set "data.cache_dir=$tmp/dist-cache-rm-np2" --resume "$tmp/rm-np2/checkpoint-10"
  run 2 "$tmp/rm-ep" --set train.per_device_train_batch_size=2 --set dist.gather_unit=expert \
    --set dist.expert_parallel=2 --set "data.cache_dir=$tmp/dist-cache-rm-np2"
  run 2 "$tmp/rm-bf16" --set train.per_device_train_batch_size=2 --set dist.gather_dtype=bf16 \
    --set model.dtype=bf16 \
    --set "data.cache_dir=$tmp/dist-cache-rm-np2"
  # --eval-only of rm-np2's final model on data.eval_path = its own data file: the same 8
  # held-out pairs (the split draws them from the file with data.seed) -> $TMP/rm-eval-only
  run 2 "$tmp/rm-eval-only" --set train.per_device_train_batch_size=2 \
    --set "model.path=$tmp/rm-np2/final" --set data.eval_samples=8 \
    --set "data.eval_path=$tmp/dist-cache-rm-np2/synthetic-pairs-11-64.jsonl" \
    --set "data.cache_dir=$tmp/dist-cache-rm-eval" --eval-only
  grep -E "^expert parallelism|^step 20/|^eval-only" "$tmp"/rm-{resume,ep,bf16,eval-only}.log
  # the reward model has no lm_head: minimax-serve and minimax-chat refuse it at start
  for tool in serve chat; do
    rc=0
    timeout 60 "$(dirname "$bin")/minimax-$tool" --model "$tmp/rm-np2/final" < /dev/null \
      > "$tmp/rm-$tool.log" 2>&1 || rc=$?
    want="a sequence_classification model (config.json's architectures) has no lm_head"
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qF -- "$want" "$tmp/rm-$tool.log" ||
      { echo "FAIL: minimax-$tool of a reward model: exit $rc"; tail -3 "$tmp/rm-$tool.log"; exit 1; }
    grep -m1 -F -- "$want" "$tmp/rm-$tool.log"
  done
  ;;
reward-emu)
  emu="$3"
  small=(--set train.max_steps=3 --set train.per_device_train_batch_size=2
    --set "data.cache_dir=$tmp/dist-cache-rm-np2" --set train.adam_epsilon=0.1
    --set train.learning_rate=1e-2)
  run 2 "$tmp/rm-emu-cpu" "${small[@]}"
  bin="$emu" run 2 "$tmp/rm-emu-cuda" "${small[@]}" --set dist.backend=nccl \
    --set dist.gather_unit=expert
  grep -E "^step 3/" "$tmp"/rm-emu-{cpu,cuda}.log
  ;;
tiny-rm)
  recipe=recipes/tiny-rm.toml
  run 2 "$tmp/tiny-rm" --set "data.cache_dir=$tmp/dist-cache-tiny-rm"
  grep -E "^eval" "$tmp/tiny-rm.log"
  # eval.csv: step,eval_loss,tokens,seconds,accuracy,count,margin
  awk -F, 'NR == 2 && ($5 < 0.3 || $5 > 0.7) { print "FAIL: start accuracy " $5; bad = 1 }
    NR > 1 { last = $5; n = $6 } END {
      if (last <= 0.9 || n != 200) { print "FAIL: final accuracy " last " of " n; bad = 1 }
      exit bad }' "$tmp/tiny-rm/eval.csv"
  ;;
heads)
  np="$3"
  fx=tests/fixtures/head
  common=(--set "train.per_device_train_batch_size=$((4 / np))" --set data.eval_samples=4
    --set "data.cache_dir=$tmp/dist-cache-heads-np$np" --set data.synthetic_kind=gsm8k)
  run "$np" "$tmp/cls-np$np" "${common[@]}" --set train.objective=classification \
    --set "data.path=$fx/classification.jsonl" --set 'model.labels=["negative","positive"]' \
    --set "data.cache_dir=$tmp/dist-cache-cls-np$np"
  run "$np" "$tmp/tok-np$np" "${common[@]}" --set train.objective=token_classification \
    --set "data.path=$fx/token_classification.jsonl" \
    --set 'model.labels=["O","B-NUM","I-NUM"]' --set "data.cache_dir=$tmp/dist-cache-tok-np$np"
  run "$np" "$tmp/qa-np$np" "${common[@]}" --set train.objective=question_answering \
    --set "data.path=$fx/qa.jsonl" --set "data.cache_dir=$tmp/dist-cache-qa-np$np"
  grep -E "^model|^data|^eval after step 20|^step 20/" "$tmp"/{cls,tok,qa}-np$np.log
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
