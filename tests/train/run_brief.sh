#!/usr/bin/env bash
# run_brief.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: the
# branches that long runs also reach, reached here by the shortest runs (1 layer, 2 steps, rows of
# 64 tokens) and by refusals before any model, so that CI's sanitized pass can leave those long
# runs out (tools/sanitize_select.py, tests/sanitizer_covered.txt).
#   run_brief.sh BIN MODE   (run by ctest from the source directory; MT_TEST_TMPDIR set; the
#   launcher and helpers: tests/train/run_common.sh)
# Modes:
#   brief            refused layouts and keys (expert parallelism, eval.generate); the eval before
#                    step 1 (train.eval_on_start) with an explicit dist.timeout; recomputed layers
#                    with gather unit expert; a 2-shot sampled --eval-only through the gathers; a
#                    reward model's --eval-only from its own export -> $TMP/brief-*
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
