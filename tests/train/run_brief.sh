#!/usr/bin/env bash
# run_brief.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: the
# branches that long runs also reach, reached here by the shortest runs (1 layer, 2 steps, rows of
# 64 tokens) and by refusals before any model, so that CI's sanitized pass can leave those long
# runs out (tools/sanitize_select.py, tests/sanitizer_covered.txt).
#   run_brief.sh BIN MODE   (run by ctest from the source directory; MT_TEST_TMPDIR set; the
#   launcher and helpers: tests/train/run_common.sh)
# Modes:
#   brief            refused layouts and keys (expert parallelism, eval.generate, --rewind alone,
#                    an output.dir that cannot be made, a global batch the ranks cannot split,
#                    --eval-only without an eval set); the eval before step 1
#                    (train.eval_on_start) with an explicit dist.timeout; recomputed layers with
#                    gather unit expert; a 2-shot sampled --eval-only through the gathers;
#                    checkpoints pruned by output.save_total_limit, with MPI-message collectives,
#                    their byte tally and a failing gnuplot; resumes of that run refused (no step
#                    left, a numerics key, an edited model config, the global batch halved,
#                    recipe.toml edited or missing) and one kept by train.global_batch_size; a
#                    SIGUSR1 stop; M3 under context parallelism with unpacked padding-free rows
#                    and the router's aux loss; a reward model's --eval-only from its own export
#                    -> $TMP/brief-*
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

# bad PATTERN ARGS...: the fast recipe with ARGS refused before any model (2 ranks)
bad() {
  local pattern="$1"
  shift
  rm -rf "$tmp/brief-bad"
  refused 2 "$tmp/brief-bad.log" "$pattern" "$recipe" --set "output.dir=$tmp/brief-bad" \
    "${fast[@]}" "$@"
}

case "$mode" in
brief)
  steps=(--set train.max_steps=2 --set "data.cache_dir=$tmp/dist-cache-brief")
  # expert parallelism: a P that does not divide the ranks, and P with gather unit layer
  bad "^error: dist.expert_parallel = 3 does not divide the 2 ranks" --set dist.expert_parallel=3 \
    --set dist.gather_unit=expert
  bad "^error: dist.expert_parallel = 2 needs dist.gather_unit = \"expert\"" \
    --set dist.expert_parallel=2 --set dist.gather_unit=layer
  # eval.generate's keys
  bad "^error: --set eval.generate_every: eval.generate_every: needs eval.generate_data" \
    --set eval.generate_every=5
  bad "^error: --set eval.generate_data: eval.generate_data: cannot read /nonexistent.jsonl" \
    --set eval.generate_data=/nonexistent.jsonl
  bad "eval.generate_samples: must be > 0 with eval.generate_data = \"synthetic\"" \
    --set eval.generate_data=synthetic
  bad "eval.generate_shots: needs eval.generate_shots_file" --set eval.generate_data=synthetic \
    --set eval.generate_samples=4 --set eval.generate_shots=2
  bad "eval.generate_max_new_tokens: must be in \[1, 100000\]" --set eval.generate_data=synthetic \
    --set eval.generate_samples=4 --set eval.generate_max_new_tokens=0
  printf '{"question": "q1", "answer": "#### 1"}\n{"question": "q2"}\n' > "$tmp/brief-noans.jsonl"
  bad "^error: eval.generate_data: .*brief-noans.jsonl:2: .*answer" \
    --set "eval.generate_data=$tmp/brief-noans.jsonl"
  # the eval before step 1, under the host watchdog with an explicit timeout: a step-0 row
  run 2 "$tmp/brief-eval" "${fast[@]}" "${steps[@]}" --set data.eval_samples=4 \
    --set train.eval_on_start=true --set dist.timeout=120
  awk -F, 'NR == 2 && $1 == 0 { found = 1 } END { exit !found }' "$tmp/brief-eval/eval.csv" ||
    { cat "$tmp/brief-eval/eval.csv"; fail "no eval row at step 0"; }
  # every layer recomputed in the backward, gather unit expert: the walk from a layer's last expert
  run 2 "$tmp/brief-recompute" "${fast[@]}" "${steps[@]}" --set train.gradient_checkpointing=true \
    --set dist.gather_unit=expert
  grep -q "^step 2/2" "$tmp/brief-recompute.log" || fail "the recomputed run did not finish"
  # a 2-shot sampled --eval-only of the random initialisation, decoded through the gathers
  "$(dirname "$bin")/minimax-data" synth --out "$tmp/brief-shots.jsonl" --n 3 --seed 5 > /dev/null
  run 2 "$tmp/brief-shots" "${fast[@]}" "${steps[@]}" --eval-only --set eval.generate_data=synthetic \
    --set eval.generate_samples=3 --set eval.generate_max_new_tokens=4 --set eval.generate_shots=2 \
    --set "eval.generate_shots_file=$tmp/brief-shots.jsonl" --set eval.generate_temperature=0.8 \
    --set eval.generate_top_p=0.9 --set eval.generate_seed=5 --set eval.generate_weights=gathered
  grep "eval.generate: 3 problems of synthetic, 2-shot, 4 new tokens at most, sampled (temperature 0.8, top-k 0, top-p 0.9, seed 5); the ranks decode in step through the ZeRO-3 gathers" \
    "$tmp/brief-shots.log" || fail "the 2-shot sampled line: $(grep eval.generate "$tmp/brief-shots.log")"
  # refusals before any model: --rewind without --resume, an output.dir that cannot be created,
  # a global batch the ranks cannot split
  bad "^error: --rewind goes with --resume" --rewind
  bad "^error: .*output.dir.*/proc/mt-no-such-dir" --set output.dir=/proc/mt-no-such-dir/out
  bad "^error: .*train.global_batch_size = 3 is not a multiple of" --set train.global_batch_size=3
  bad "^error: --eval-only: no eval set" --eval-only
  # a checkpoint every step, output.save_total_limit = 1 (step 2 removes checkpoint-1); the
  # collectives as MPI messages (MT_COMM_SHARED=0: no node-shared parameters either) with the
  # byte tally written (MT_COMM_BYTES); a gnuplot that fails: a warning, not a failed run
  mkdir -p "$tmp/brief-bin"
  printf '#!/bin/sh\nexit 1\n' > "$tmp/brief-bin/gnuplot"
  chmod +x "$tmp/brief-bin/gnuplot"
  keep="$tmp/brief-keep"
  cp recipes/configs/tiny.json "$tmp/brief-config.json"
  PATH="$tmp/brief-bin:$PATH" MT_COMM_SHARED=0 MT_COMM_BYTES="$keep.bytes" run 2 "$keep" \
    "${fast[@]}" "${steps[@]}" --set output.save_steps=1 --set output.save_total_limit=1 \
    --set "model.config=$tmp/brief-config.json"
  grep "^removed $keep/checkpoint-1 (output.save_total_limit = 1)" "$keep.log" ||
    fail "checkpoint-1 not removed"
  [ "$(echo "$keep"/checkpoint-*)" = "$keep/checkpoint-2" ] || fail "checkpoints: $(ls "$keep")"
  grep -q "^shared=0$" "$keep.bytes.0" && grep -q "^gather=[1-9]" "$keep.bytes.1" ||
    fail "the byte tallies: $(cat "$keep".bytes.*)"
  grep -q "^warning: could not draw $keep/loss.png" "$keep.log" || fail "no gnuplot warning"
  # resumes of it: nothing left to train; a numerics key changed; its model config edited; on 1
  # rank the global batch would halve, refused, and kept with train.global_batch_size = 2 (2
  # micro-batches a step); a copy of the checkpoint whose recipe.toml is edited, then missing
  ck="$keep/checkpoint-2"
  refused 2 "$tmp/brief-r.log" "^error: --resume $ck: train.max_steps = 2 is at or below the checkpoint's step 2" \
    --resume "$ck"
  refused 2 "$tmp/brief-r.log" "^error: --resume $ck: train.learning_rate = 0.002 differs from the checkpoint's 0.001" \
    --resume "$ck" --set train.max_steps=3 --set train.learning_rate=0.002
  sed -i 's/"rope_theta": 10000.0/"rope_theta": 20000.0/' "$tmp/brief-config.json"
  refused 2 "$tmp/brief-r.log" "^error: --resume $ck: the model config $tmp/brief-config.json has changed since the checkpoint was written" \
    --resume "$ck" --set train.max_steps=3
  cp recipes/configs/tiny.json "$tmp/brief-config.json"
  resumed=(--resume "$ck" --set train.max_steps=3)
  rm -rf "$tmp/brief-gb"
  refused 1 "$tmp/brief-r.log" "^error: --resume $ck: the global batch would change from 2 samples" \
    "${resumed[@]}" --set "output.dir=$tmp/brief-gb"
  mpirun -np 1 --oversubscribe --bind-to none "$bin" "${resumed[@]}" --set train.global_batch_size=2 \
    --set "output.dir=$tmp/brief-gb" > "$tmp/brief-gb.log" 2>&1 || { tail "$tmp/brief-gb.log"; fail "the 1-rank resume"; }
  grep "^resume: the global batch stays 2 samples" "$tmp/brief-gb.log" || fail "no global batch line"
  rm -rf "$tmp/brief-alone" && mkdir -p "$tmp/brief-alone" && cp -a "$ck" "$tmp/brief-alone/"
  ck="$tmp/brief-alone/checkpoint-2"
  echo "# edited" >> "$ck/recipe.toml"
  refused 2 "$tmp/brief-r.log" "^error: --resume $ck: $ck/recipe.toml has changed since the checkpoint was written" \
    --resume "$ck" --set train.max_steps=3
  rm "$ck/recipe.toml"
  refused 2 "$tmp/brief-r.log" "^error: --resume $ck: $ck/recipe.toml is missing" --resume "$ck" \
    --set train.max_steps=3
  # SIGUSR1 to mpirun mid-run: every rank stops after the same step, exit 75, its checkpoint
  stop_run USR1 mpirun "$tmp/brief-stop" "${fast[@]}" --set "data.cache_dir=$tmp/dist-cache-brief" \
    > /dev/null
  # context parallelism (C = 2) on M3's first two layers (the second one MSA) with padding-free
  # rows, unpacked rows of 128 tokens (samples shorter than a row: padding after the last), the
  # router's aux loss on; with --overwrite (nothing there to remove): 2 steps
  recipe=tests/recipes/dist-m3.toml
  run 2 "$tmp/brief-cp" "${fast[@]}" "${steps[@]}" --set model.num_hidden_layers=2 \
    --set dist.context_parallel=2 --set data.padding_free=true --set data.packing=false \
    --set data.max_length=128 \
    --set train.router_aux_loss_coef=0.02 --set "data.cache_dir=$tmp/dist-cache-brief-m3" --overwrite
  grep "^context parallelism" "$tmp/brief-cp.log" || fail "no context parallelism line"
  # a reward model, then --eval-only from its export: the head as the checkpoint has it
  recipe=tests/recipes/dist-rm.toml
  run 2 "$tmp/brief-rm" "${fast[@]}" "${steps[@]}" --set "data.cache_dir=$tmp/dist-cache-brief-rm"
  run 2 "$tmp/brief-rm-eval" "${fast[@]}" --set "model.path=$tmp/brief-rm/final" \
    --set data.eval_samples=4 --set "data.cache_dir=$tmp/dist-cache-brief-rm" --eval-only
  grep "^eval" "$tmp/brief-rm-eval.log" || fail "no eval line from the reward model's export"
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
