#!/usr/bin/env bash
# dist_run.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests.
#   dist_run.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set)
# Modes:
#   mixed            GSM8K + the messages and alpaca fixtures, data.weights 2:1:1, 2 ranks,
#                    steps from train.num_train_epochs, a wsd schedule with a warmup ratio
#   metrics          4 steps, eval every 2, resumed from step 2 into the same directory (--rewind)
#                    -> $TMP/metrics (dist_metrics_match reads its metrics.jsonl)
#   seed             train.seed alone (data.seed, model.init_seed unset), 2 steps on 1 rank: the
#                    same seed twice the same weights to the bit, another seed another first loss
#                    -> $TMP/seed-{9a,9b,9x,10}
#   ranks N [m2]     tests/recipes/dist.toml on N ranks (global batch 4) -> $TMP/ranks-npN; with
#                    m2 tests/recipes/dist-m2.toml (a tiny MiniMax-M2) -> $TMP/m2-ranks-npN; with
#                    m3 tests/recipes/dist-m3.toml (a tiny MiniMax-M3, gather unit expert)
#                    -> $TMP/m3-ranks-npN
#   resume-straight  20 steps, checkpoints at 10 and 20                   -> $TMP/resume-a
#   resume-split     --resume $TMP/resume-a/checkpoint-10, 10 more steps  -> $TMP/resume-b
#   resume-alone     --resume DIR with no recipe (the checkpoint's recipe.toml): 20 steps straight
#                    and 10 + resume + 10 give the same losses, weights and state files to the
#                    bit; a changed numerics key (--set train.learning_rate) is refused naming
#                    both values before any model is built, an allowed one (train.max_steps)
#                    resumes; a checkpoint without recipe.toml resumes with a recipe and is
#                    refused without one, naming the file; an edited recipe.toml is refused
#   eval-only        --eval-only on a run's export gives the eval loss the run logged after its
#                    last step, to the bit, and writes no checkpoint and no export; without an
#                    eval set it is refused naming the keys; into another run's results refused
#   kill             SIGKILL one rank mid-run: the job must end non-zero in < 30 s; SIGSTOP one:
#                    the peer's watchdog (dist.timeout = 3) must end it in < 30 s, but not a
#                    token cache build longer than dist.timeout; then a
#                    kill during a checkpoint write must leave the previous checkpoint loadable
#   signal           SIGUSR1 to mpirun, then SIGTERM and SIGINT to one rank alone, and SIGTERM
#                    to launch/run-local.sh: every rank stops after the same step with a
#                    checkpoint (exit 75), and the run resumes from it; two SIGTERMs end a rank
#                    at once; then output.save_total_limit keeps the newest checkpoints only
#   disk-full        a checkpoint beyond a file size limit: one-line error with HDF5's reason,
#                    non-zero exit, no checkpoint under its final name and no temporary file
#                    left; the same for the HF export; loss.csv, eval.csv and metrics.jsonl on /dev/full
#                    (recipe.toml: dist_write_failure_cleanup)
#   outdir           one run per output.dir: a second run into it while the first trains refuses
#                    in < 2 s naming the holder, and the first's outputs are byte for byte those
#                    of a run alone; a stale lock is taken over; a fresh run over another run's
#                    results is refused unless --overwrite
#   watchdog         the automatic dist.timeout (20 x the slowest step) ends a job whose rank
#                    is stopped; a rank stopped while it writes its state file ends the job
#                    within the checkpoints' automatic limit + 10 s; so does rank 0 stopped in
#                    the token cache build (dist.timeout = 2 s of heartbeat silence)
#   resume-check CORRUPT  --resume refuses, naming the file: the model config or the data file
#                    edited in place, one flipped bit of a state file (CORRUPT: tests/corrupt.c)
#                    naming the dataset too; a damaged export is refused as model.path
#   global-batch     train.global_batch_size: 2 -> 1, 1 -> 2 and 2 -> 4 rank resumes of 4-step
#                    runs from step 2 -> $TMP/gb-{np1,np2,2to1,1to2,2to4}; without it, a resume
#                    that would halve the global batch is refused
#   nonfinite        a diverging run stops naming the step, or skips steps when told to
#   bad-recipe       malformed recipes: one-line file:line errors, non-zero exit, no model; an
#                    activation arena too small for one micro-step
#   ep               dist.expert_parallel: Text-01 on 4 ranks with P = 2 and 4, M2 with P = 4, M3
#                    on 2 ranks with P = 2 (and 10 + resume + 10) -> $TMP/{ep-np4-p2,ep-np4-p4,
#                    m2-ep-np4-p4,m3-ep-np2-p2,m3-ep-resume}; another P on resume and bad layouts
#                    are refused with one line
#   ep-kill          kill's SIGKILL and SIGSTOP cases under expert parallelism (P = 2)
#   ep-emu EMU       3 steps with P = 2 on 2 ranks, the CPU trainer and the emulated CUDA one
#                    with NCCL (EMU) -> $TMP/ep-emu-{cpu,cuda}
#   expert           dist.gather_unit = "expert" on 2 ranks (one expert gathered at a time)
#                    -> $TMP/expert-np2; then resuming it with another gather unit must fail
#   recompute        train.gradient_checkpointing on 2 ranks: unit layer with the router aux loss
#                    and 2 micro-batches per step, kept and recomputed (the same collectives)
#                    -> $TMP/recompute-{keep,on};
#                    unit expert like the expert mode, and expert-np2 resumed from its step-10
#                    checkpoint with recomputation -> $TMP/recompute-{expert,resume}; unit
#                    expert with bf16 gathers, kept and recomputed -> $TMP/recompute-bf16-{keep,on}
#   bf16-gather      bf16 parameter gathers (dist.gather_dtype; fp32 GEMMs, so that only the
#                    summation order differs between rank counts) on 1 and 2 ranks, the 2-rank
#                    run resumed from its step-5 checkpoint, and fp32 gathers
#                    -> $TMP/bf16g-np{1,2}, $TMP/bf16g-resume, $TMP/bf16g-fp32
#   trim             padded rows (packing off), 2 ranks, with and without data.trim_padding,
#                    router aux loss on (it must leave the padding out) -> $TMP/trim-{on,off}
#   eval             data.eval_samples with train.eval_steps on 1 and 2 ranks, the 2-rank run
#                    resumed from its step-5 checkpoint, one step at learning rate 0 over the
#                    whole training pool with and without held-out samples, and with the data
#                    file as data.eval_path (all of it, 16 drawn samples)
#                    -> $TMP/eval-{np1,np2,resume,lr0,all-lr0,file-lr0,file16-lr0}; all samples
#                    held out: an error
#   generate         eval.generate_data = "synthetic" (8 problems after the training ones) every
#                    20 steps on 2 ranks: eval.csv's accuracy columns (a step-20 row without the
#                    eval loss, a step-40 row with it), and the per-sample results equal to the
#                    bit those of minimax-eval on the step-40 fp32 export (the same problems written
#                    by minimax-data synth: the replica path against the trainer's gathers), of
#                    the same run on 1 rank, and of --eval-only on the export; with bf16 gathers
#                    those of minimax-eval on the bf16 export; bad eval.* keys refused with one
#                    line naming the key
#   generate-emu EMU [device]  eval.generate on the emulated CUDA backend with NCCL (EMU): through
#                    the gathers on the device, the CPU replica's results (Text-01, M2, M3).
#                    With device: EMU is a CUDA build's minimax-train on a real GPU
#                    (exit 77 without one)
#   emu-cuda EMU NP  the same 3 steps on the CPU backend (BIN) and on the CUDA backend + NCCL
#                    through the CPU emulator (EMU, minimax-train-emu; dist.gather_unit expert),
#                    NP ranks each, then the emulated run resumed from its step-2 checkpoint (with
#                    train.gradient_checkpointing: the same step 3 to the bit), and
#                    both in bf16 GEMM mode with bf16 gathers (gather unit layer); and the
#                    emulated run with dist.offload_optimizer, resumed from its step 2, with
#                    fp32 gathers and in bf16 mode with bf16 gathers (master weights on the
#                    host); and 2 steps in strict emulation
#                    -> $TMP/emu-{cpu,cuda,resume,cpu-bf16,cuda-bf16,offload,offload-resume,strict,
#                       offload-bf16,offload-bf16-resume,cuda-bf16-cast,cuda-bf16x{,-cast}}
set -euo pipefail
bin="$1"
mode="$2"
tmp="${MT_TEST_TMPDIR:?}"
recipe=tests/recipes/dist.toml
# the fastest runs of the same recipe, for the modes that check what happens around the steps
# (1 layer, rows of 64 tokens, 1 row per rank: ~0.05 s a step)
fast=(--set model.num_hidden_layers=1 --set data.max_length=64 --set data.truncation=truncate
  --set train.per_device_train_batch_size=1)
lines() { { wc -l < "$1"; } 2> /dev/null || echo 0; } # lines FILE: 0 while it does not exist
run() { # run NP OUTDIR ARGS...
  local np="$1" out="$2"
  shift 2
  rm -rf "$out"
  mpirun -np "$np" --oversubscribe --bind-to none "$bin" "$recipe" \
    --set "output.dir=$out" --set "data.cache_dir=$tmp/dist-cache-np$np" "$@" > "$out.log" 2>&1 ||
    { tail -30 "$out.log"; return 1; }
}

case "$mode" in
mixed)
  # data.paths = GSM8K train + the messages and alpaca fixtures, data.weights 2:1:1, on 2 ranks
  # (skipped without ../shared): each file's share of an epoch in the log, the formats detected
  gsm="${MT_SHARED_DIR:-../shared}/data/gsm8k/train.jsonl"
  [ -r "$gsm" ] || { echo "no $gsm: skipped"; exit 77; }
  f=tests/fixtures/formats
  rm -rf "$tmp/dist-cache-mixed" # a fresh build, whose log names the formats
  run 2 "$tmp/mixed" --set "data.paths=[\"$gsm\", \"$f/messages.jsonl\", \"$f/alpaca.jsonl\"]" \
    --set "data.weights=[2, 1, 1]" --set data.max_length=512 --set train.num_train_epochs=0.0012 \
    --set train.lr_scheduler_type=wsd --set train.warmup_ratio=0.34 --set train.wsd_decay_ratio=0.3 --set train.warmup_steps=0 \
    --set train.per_device_train_batch_size=2 --set "data.cache_dir=$tmp/dist-cache-mixed"
  grep "^data: \|^train: \|^step 3/" "$tmp/mixed.log"
  # the steps from the epochs (7479 samples / 4 per step = 1870 per epoch), the schedule's phases
  grep -q "^train: 0.0012 epochs of 1870 steps = 3 steps" "$tmp/mixed.log"
  grep -q "^train: wsd schedule over 3 steps: 2 warmup, 1 decay" "$tmp/mixed.log"
  grep -q "^step 3/3 " "$tmp/mixed.log"
  grep -q "mixing: .*train.jsonl: 3739 of the 7479 samples of an epoch (50.0 %" "$tmp/mixed.log"
  grep -q "mixing: .*messages.jsonl: 1870 of the 7479 .*(25.0 %" "$tmp/mixed.log"
  grep -q "mixing: .*alpaca.jsonl: 1870 of the 7479 .*(25.0 %" "$tmp/mixed.log"
  grep -q "messages.jsonl: format messages (auto" "$tmp/mixed.log"
  grep -q "alpaca.jsonl: format alpaca (auto" "$tmp/mixed.log"
  # data.paths replaces data.path's default "synthetic": no synthetic file is generated (one
  # was written to ./data.paths, in the working directory)
  [ ! -e data.paths ] || { echo "FAIL: a file data.paths in $(pwd)"; exit 1; }
  ;;
ep)
  # expert parallelism (gather unit expert) on 4 ranks, P = 2 and 4 (Text-01, 4 experts; M2, 8)
  # and on 2 ranks, P = 2 (M3: 8 routed experts and the shared one); compared
  # with the 1-rank runs of mode ranks by dist_ep_match
  run 4 "$tmp/ep-np4-p2" --set train.per_device_train_batch_size=1 --set dist.gather_unit=expert \
    --set dist.expert_parallel=2 --set "data.cache_dir=$tmp/dist-cache-ep"
  run 4 "$tmp/ep-np4-p4" --set train.per_device_train_batch_size=1 --set dist.gather_unit=expert \
    --set dist.expert_parallel=4 --set "data.cache_dir=$tmp/dist-cache-ep"
  recipe=tests/recipes/dist-m2.toml
  run 4 "$tmp/m2-ep-np4-p4" --set train.per_device_train_batch_size=1 \
    --set dist.gather_unit=expert --set dist.expert_parallel=4 --set "data.cache_dir=$tmp/dist-cache-m2-ep"
  recipe=tests/recipes/dist-m3.toml
  run 2 "$tmp/m3-ep-np2-p2" --set train.per_device_train_batch_size=2 \
    --set dist.expert_parallel=2 --set "data.cache_dir=$tmp/dist-cache-m3-ep" \
    --set output.save_steps=10
  # 10 + resume + 10 with the same layout (dist_ep_match: the same as 20 straight)
  run 2 "$tmp/m3-ep-resume" --set train.per_device_train_batch_size=2 \
    --set dist.expert_parallel=2 --set "data.cache_dir=$tmp/dist-cache-m3-ep" \
    --resume "$tmp/m3-ep-np2-p2/checkpoint-10"
  grep -E "^expert parallelism|^step 20/" "$tmp"/{ep-np4-p2,ep-np4-p4,m2-ep-np4-p4,m3-ep-np2-p2}.log
  # another layout on resume is refused naming both values (a numerics key, docs/training.md)
  recipe=tests/recipes/dist.toml
  rc=0
  run 4 "$tmp/ep-switch" --set train.per_device_train_batch_size=1 --set dist.gather_unit=expert \
    --set dist.expert_parallel=4 --resume "$tmp/ep-np4-p2/checkpoint-20" > /dev/null || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: resuming a P = 2 checkpoint with P = 4 exited 0"; exit 1; }
  grep -E "error: .*expert_parallel" "$tmp/ep-switch.log" ||
    { echo "FAIL: the refusal does not name dist.expert_parallel"; tail -5 "$tmp/ep-switch.log"; exit 1; }
  # refused layouts: one line naming the keys, exit 2, before any weight is read
  for bad in "dist.expert_parallel=3" "dist.expert_parallel=2 --set dist.gather_unit=layer"; do
    rc=0
    # shellcheck disable=SC2086
    run 2 "$tmp/ep-bad" --set train.per_device_train_batch_size=2 --set dist.gather_unit=expert \
      --set $bad > /dev/null || rc=$?
    grep "^error: dist.expert_parallel" "$tmp/ep-bad.log"
    [ "$(grep -c "^error: dist.expert_parallel" "$tmp/ep-bad.log")" -eq 1 ] ||
      { echo "FAIL: --set $bad: not refused with one line"; cat "$tmp/ep-bad.log"; exit 1; }
  done
  ;;
ranks)
  np="$3"
  name=ranks
  if [ "${4:-}" = m2 ]; then recipe=tests/recipes/dist-m2.toml name=m2-ranks; fi
  if [ "${4:-}" = m3 ]; then recipe=tests/recipes/dist-m3.toml name=m3-ranks; fi
  run "$np" "$tmp/$name-np$np" --set "train.per_device_train_batch_size=$((4 / np))" \
    --set "data.cache_dir=$tmp/dist-cache-$name-np$np"
  grep -E "^model|^weights|^memory|^step 20/" "$tmp/$name-np$np.log"
  ;;
resume-straight)
  run 2 "$tmp/resume-a" --set train.per_device_train_batch_size=2 --set output.save_steps=10
  ;;
resume-split)
  run 2 "$tmp/resume-b" --set train.per_device_train_batch_size=2 --set output.save_steps=10 \
    --resume "$tmp/resume-a/checkpoint-10"
  grep -q "resumed from .*checkpoint-10 at step 10" "$tmp/resume-b.log"
  ;;
resume-alone)
  fail() { echo "FAIL: $*"; exit 1; }
  d="$tmp/alone"
  rm -rf "$d"
  mkdir -p "$d"
  common=("${fast[@]}" --set "data.cache_dir=$tmp/dist-cache-alone")
  run 2 "$d/a" "${common[@]}" --set output.save_steps=10
  # what a run stopped after step 10 leaves: its loss.csv and checkpoint-10 (the resume keeps
  # the rows up to its step and appends); output.dir is the directory the checkpoint is in
  mkdir "$d/b"
  cp -a "$d/a/checkpoint-10" "$d/a/loss.csv" "$d/b/"
  resume() { # resume NAME CHECKPOINT ARGS...: --resume with no recipe
    local name="$1" ck="$2"
    shift 2
    mpirun -np 2 --oversubscribe --bind-to none "$bin" --resume "$ck" "$@" > "$d/$name.log" 2>&1
  }
  resume b "$d/b/checkpoint-10" || { tail -20 "$d/b.log"; fail "--resume alone"; }
  grep "^recipe: $d/b/checkpoint-10/recipe.toml, the checkpoint's (output.dir $d/b)" "$d/b.log" ||
    fail "no line naming the checkpoint's recipe"
  grep -q "resumed from $d/b/checkpoint-10 at step 10" "$d/b.log" || fail "not resumed"
  # the straight run's steps 11..20 to the bit: losses, export, every rank's state
  [ "$(cut -d, -f1-5 "$d/a/loss.csv")" = "$(cut -d, -f1-5 "$d/b/loss.csv")" ] ||
    fail "loss.csv differs from the straight run's"
  [ "$(wc -l < "$d/b/loss.csv")" -eq 21 ] || fail "loss.csv has not 20 steps"
  for f in model.safetensors state-00000-of-00002.h5 state-00001-of-00002.h5; do
    cmp "$d/a/checkpoint-20/$f" "$d/b/checkpoint-20/$f" || fail "checkpoint-20/$f differs"
  done
  echo "ok: --resume alone: 10 + 10 steps equal 20 straight (loss.csv, export, state files)"
  # a numerics key changed: one line naming it with both values, exit 2, no model, nothing
  # written into output.dir
  cp "$d/b/loss.csv" "$d/b.losses"
  rc=0
  resume lr "$d/b/checkpoint-10" --set train.learning_rate=0.002 || rc=$?
  [ "$rc" -eq 2 ] || { tail -5 "$d/lr.log"; fail "a changed train.learning_rate: exit $rc, not 2"; }
  grep "^error: --resume $d/b/checkpoint-10: train.learning_rate = 0.002 differs from the checkpoint's 0.001 (this key changes the numerics; keys that may change on resume: .*train.max_steps, .*output.dir, .*dist.timeout, .*train.per_device_train_batch_size and train.gradient_accumulation_steps keeping the global batch)$" \
    "$d/lr.log" || { cat "$d/lr.log"; fail "the refusal does not name the key and both values"; }
  [ "$(grep -c "error" "$d/lr.log")" -eq 1 ] || fail "not one error line"
  ! grep -q "^activations:\|^model:\|^step " "$d/lr.log" || fail "a model was built"
  cmp "$d/b.losses" "$d/b/loss.csv" || fail "the refused resume changed loss.csv"
  cmp "$d/b/recipe.toml" "$d/b/checkpoint-20/recipe.toml" || fail "the refused resume wrote recipe.toml"
  # the same refusal with the recipe given
  rc=0
  mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" "${common[@]}" \
    --set "output.dir=$d/b" --set train.weight_decay=0.1 --resume "$d/b/checkpoint-10" \
    > "$d/wd.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep "^error: .*: train.weight_decay = 0.1 differs from the checkpoint's 0.01 " "$d/wd.log" ||
    { tail -5 "$d/wd.log"; fail "a recipe with another train.weight_decay: exit $rc"; }
  # an allowed key: train.max_steps
  mkdir "$d/c"
  cp -a "$d/a/checkpoint-10" "$d/c/"
  resume c "$d/c/checkpoint-10" --set train.max_steps=12 || { tail -20 "$d/c.log"; fail "train.max_steps=12"; }
  grep -q "^step 12/12 " "$d/c.log" && [ -d "$d/c/checkpoint-12" ] || fail "train.max_steps=12 did not run to step 12"
  # a checkpoint without recipe.toml: refused alone, naming the file; resumed with the recipe
  mkdir "$d/old"
  cp -a "$d/a/checkpoint-10" "$d/old/"
  rm "$d/old/checkpoint-10/recipe.toml"
  rc=0
  resume old-alone "$d/old/checkpoint-10" || rc=$?
  [ "$rc" -eq 2 ] && grep "^error: --resume $d/old/checkpoint-10: $d/old/checkpoint-10/recipe.toml is missing" "$d/old-alone.log" ||
    { tail -5 "$d/old-alone.log"; fail "no recipe.toml, no recipe: exit $rc"; }
  run 2 "$d/old-given" "${common[@]}" --set "output.dir=$d/old" --set train.max_steps=11 \
    --resume "$d/old/checkpoint-10" || fail "no recipe.toml, the recipe given"
  # an edited recipe.toml (its digest is in the manifest): refused, naming it
  mkdir "$d/edit"
  cp -a "$d/a/checkpoint-10" "$d/edit/"
  sed -i 's/^max_grad_norm = 1.0$/max_grad_norm = 2.0/' "$d/edit/checkpoint-10/recipe.toml"
  rc=0
  resume edit "$d/edit/checkpoint-10" || rc=$?
  [ "$rc" -eq 2 ] && grep "^error: --resume $d/edit/checkpoint-10: $d/edit/checkpoint-10/recipe.toml has changed since the checkpoint was written" "$d/edit.log" ||
    { tail -5 "$d/edit.log"; fail "an edited recipe.toml: exit $rc"; }
  ;;
eval-only)
  fail() { echo "FAIL: $*"; exit 1; }
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
  mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" "${fast[@]}" --eval-only \
    --set "model.path=$d/train/checkpoint-4" --set "output.dir=$d/none" > "$d/none.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep "^error: --eval-only: no eval set: set data.eval_samples .* or data.eval_path" "$d/none.log" ||
    { tail -5 "$d/none.log"; fail "--eval-only without an eval set: exit $rc"; }
  # into another run's results: refused as a fresh run is
  rc=0
  mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" "${ev[@]}" --set "output.dir=$d/train" \
    --eval-only > "$d/over.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep "^error: output.dir $d/train holds another run's results" "$d/over.log" ||
    { tail -5 "$d/over.log"; fail "--eval-only into a run's results: exit $rc"; }
  ;;
kill | ep-kill)
  ep=() pre=""
  if [ "$mode" = ep-kill ]; then # the same under expert parallelism (all-to-alls every layer)
    ep=(--set dist.gather_unit=expert --set dist.expert_parallel=2) pre=ep-
  fi
  out="$tmp/${pre}kill"
  rm -rf "$out"
  mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$out" \
    --set "data.cache_dir=$tmp/dist-cache-kill" --set train.max_steps=100000 \
    --set train.per_device_train_batch_size=2 "${ep[@]}" > "$out.log" 2>&1 &
  job=$!
  for _ in $(seq 600); do [ "$(wc -l < "$out/loss.csv" 2> /dev/null || echo 0)" -ge 3 ] && break; sleep 0.1; done
  victim=$(pgrep -f -n "output.dir=$out" | head -1)
  [ -n "$victim" ] || { echo "no rank process found"; exit 1; }
  start=$(date +%s.%N)
  kill -9 "$victim"
  for _ in $(seq 600); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
  kill -0 "$job" 2> /dev/null && { echo "FAIL: the job still runs 60 s after a rank was killed"; kill -9 "$job"; exit 1; }
  rc=0
  wait "$job" || rc=$?
  took=$(echo "$(date +%s.%N) - $start" | bc)
  echo "killed rank pid $victim: mpirun exited with $rc after ${took}s"
  [ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0 after a rank was killed"; exit 1; }
  awk -v t="$took" 'BEGIN { exit !(t < 30) }' || { echo "FAIL: took ${took}s (limit 30s)"; exit 1; }

  # a rank stopped (SIGSTOP): alive, so MPI notices nothing, and its peer waits in a collective;
  # the peer's host watchdog must end the job after dist.timeout = 3 s
  out="$tmp/${pre}stop-rank"
  rm -rf "$out"
  mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$out" \
    --set "data.cache_dir=$tmp/dist-cache-kill" --set train.max_steps=100000 \
    --set train.per_device_train_batch_size=2 --set dist.timeout=3 "${ep[@]}" > "$out.log" 2>&1 &
  job=$!
  for _ in $(seq 600); do [ "$(wc -l < "$out/loss.csv" 2> /dev/null || echo 0)" -ge 3 ] && break; sleep 0.1; done
  victim=$(pgrep -f -n "output.dir=$out" | head -1)
  [ -n "$victim" ] || { echo "no rank process found"; exit 1; }
  kill -0 "$job" 2> /dev/null || { echo "FAIL: the job ended before a rank was stopped"; cat "$out.log"; exit 1; }
  start=$(date +%s.%N)
  kill -STOP "$victim"
  for _ in $(seq 600); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2> /dev/null; then
    echo "FAIL: the job still runs 60 s after a rank was stopped"
    pkill -9 -f "output.dir=$out"
    exit 1
  fi
  rc=0
  wait "$job" || rc=$?
  took=$(echo "$(date +%s.%N) - $start" | bc)
  pkill -9 -f "output.dir=$out" || true
  grep "mpi watchdog" "$out.log" | head -2
  echo "stopped rank pid $victim: mpirun exited with $rc after ${took}s"
  [ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0 after a rank was stopped"; exit 1; }
  grep -q "mpi watchdog: host collective [0-9]* (.*) has not completed after [0-9]* s (dist.timeout = 3 s)" \
    "$out.log" || { echo "FAIL: no watchdog message"; tail -20 "$out.log"; exit 1; }
  awk -v t="$took" 'BEGIN { exit !(t < 30) }' || { echo "FAIL: took ${took}s (limit 30s)"; exit 1; }
  if [ "$mode" = ep-kill ]; then
    grep -q "^expert parallelism: 1 groups of 2 ranks" "$out.log" ||
      { echo "FAIL: the run did not use expert parallelism"; exit 1; }
    exit 0
  fi
  # ... but not while rank 0 alone builds the token cache (50,000 synthetic samples: about 2 s
  # of generating and tokenizing, longer than dist.timeout = 1) and its peer waits
  out="$tmp/stop-cache"
  run 2 "$out" --set "data.cache_dir=$out-cache" --set data.synthetic_samples=50000 \
    --set dist.timeout=1 --set train.max_steps=1 --set train.per_device_train_batch_size=2
  rm -rf "$out-cache"
  grep "cache built" "$out.log"

  # a kill during a checkpoint write: MT_TEST_CHECKPOINT_DELAY holds the state file under its
  # temporary name for a while, so the kill lands inside the write
  out="$tmp/kill-ckpt"
  rm -rf "$out"
  run 2 "$out" --set train.max_steps=2 --set output.save_steps=2 --set train.per_device_train_batch_size=2
  MT_TEST_CHECKPOINT_DELAY=20 mpirun -np 2 --oversubscribe --bind-to none -x MT_TEST_CHECKPOINT_DELAY \
    "$bin" "$recipe" --set "output.dir=$out" --set "data.cache_dir=$tmp/dist-cache-kill" \
    --set train.max_steps=4 --set output.save_steps=4 --set train.per_device_train_batch_size=2 \
    --resume "$out/checkpoint-2" > "$out.log2" 2>&1 &
  job=$!
  for _ in $(seq 600); do [ -e "$out/checkpoint-4.tmp/state.h5.tmp" ] && break; sleep 0.1; done
  [ -e "$out/checkpoint-4.tmp/state.h5.tmp" ] || { echo "FAIL: the checkpoint write never started"; cat "$out.log2"; exit 1; }
  pkill -9 -f "output.dir=$out" || true
  wait "$job" || true
  [ ! -e "$out/checkpoint-4" ] || { echo "FAIL: a half-written checkpoint-4 exists"; exit 1; }
  run 2 "$out-resumed" --set train.max_steps=3 --set train.per_device_train_batch_size=2 \
    --resume "$out/checkpoint-2"
  grep -q "resumed from .*checkpoint-2 at step 2" "$out-resumed.log"
  echo "previous checkpoint loads after a kill during the next write"
  ;;
expert)
  run 2 "$tmp/expert-np2" --set train.per_device_train_batch_size=2 --set dist.gather_unit=expert \
    --set output.save_steps=10
  grep -E "^memory|^model|^step 20/" "$tmp/expert-np2.log"
  rc=0
  run 2 "$tmp/expert-switch" --set train.per_device_train_batch_size=2 \
    --resume "$tmp/expert-np2/checkpoint-10" > /dev/null || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: resuming an expert-unit checkpoint with unit layer exited 0"; exit 1; }
  grep -E "error: .*gather_unit" "$tmp/expert-switch.log" ||
    { echo "FAIL: the refusal does not name dist.gather_unit"; tail -5 "$tmp/expert-switch.log"; exit 1; }
  ;;
recompute)
  common=(--set train.per_device_train_batch_size=1 --set train.gradient_accumulation_steps=2
    --set train.router_aux_loss_coef=0.01 --set train.max_steps=10)
  run 2 "$tmp/recompute-keep" "${common[@]}"
  run 2 "$tmp/recompute-on" "${common[@]}" --set train.gradient_checkpointing=true
  collectives() { grep -o "peak use .*" "$1" | sort | head -1; }
  collectives "$tmp/recompute-keep.log"
  collectives "$tmp/recompute-on.log"
  grep -q "layers recomputed" "$tmp/recompute-on.log" || { echo "FAIL: not recomputed"; exit 1; }
  [ "$(collectives "$tmp/recompute-keep.log" | grep -o "step collectives.*")" = \
    "$(collectives "$tmp/recompute-on.log" | grep -o "step collectives.*")" ] ||
    { echo "FAIL: recomputing layers (unit layer) changed the collectives"; exit 1; }
  expert=(--set train.per_device_train_batch_size=2 --set dist.gather_unit=expert
    --set train.gradient_checkpointing=true)
  run 2 "$tmp/recompute-expert" "${expert[@]}"
  collectives "$tmp/recompute-expert.log"
  run 2 "$tmp/recompute-resume" "${expert[@]}" --resume "$tmp/expert-np2/checkpoint-10"
  # bf16 gathers (a landing buffer per slot, widened into it) under the recompute walk's
  # re-gathers and prefetch order, kept and recomputed
  bf16=(--set train.per_device_train_batch_size=2 --set dist.gather_unit=expert
    --set dist.gather_dtype=bf16 --set train.max_steps=10)
  run 2 "$tmp/recompute-bf16-keep" "${bf16[@]}"
  run 2 "$tmp/recompute-bf16-on" "${bf16[@]}" --set train.gradient_checkpointing=true
  ;;
bf16-gather)
  # AdamW with epsilon above the gradients' scale (as in emu-cuda): each update is proportional
  # to its gradient, so the 1-vs-2-rank comparison sees the sharding's summation order, not
  # AdamW turning the rounding of a near-zero gradient into a full +-lr step (at epsilon 1e-8
  # two rare tokens' embedding rows differed by 7e-4 relative after 10 steps, all else by 1e-6)
  common=(--set train.max_steps=10 --set output.save_steps=5 --set train.adam_epsilon=0.1
    --set train.learning_rate=1e-2)
  run 1 "$tmp/bf16g-np1" "${common[@]}" --set dist.gather_dtype=bf16
  run 2 "$tmp/bf16g-np2" "${common[@]}" --set dist.gather_dtype=bf16 \
    --set train.per_device_train_batch_size=2
  run 2 "$tmp/bf16g-resume" "${common[@]}" --set dist.gather_dtype=bf16 \
    --set train.per_device_train_batch_size=2 --resume "$tmp/bf16g-np2/checkpoint-5"
  run 2 "$tmp/bf16g-fp32" "${common[@]}" --set train.per_device_train_batch_size=2
  grep -E "^memory|^step 10/" "$tmp/bf16g-np2.log"
  ;;
trim)
  for v in on off; do
    run 2 "$tmp/trim-$v" --set train.per_device_train_batch_size=2 --set data.packing=false \
      --set data.max_length=384 --set "data.cache_dir=$tmp/dist-cache-trim" \
      --set train.router_aux_loss_coef=0.02 \
      --set train.max_steps=10 --set "data.trim_padding=$([ $v = on ] && echo true || echo false)"
  done
  ;;
generate)
  fail() { echo "FAIL: $*"; exit 1; }
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
  # bad keys: one line naming the key, no model
  bad() { # bad PATTERN ARGS...
    local pattern="$1" rc=0
    shift
    mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$d/bad" "$@" \
      > "$d/bad.log" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] && grep -q -- "$pattern" "$d/bad.log" && [ "$(grep -c '^error' "$d/bad.log")" -eq 1 ] &&
      ! grep -q "^model:" "$d/bad.log" || { cat "$d/bad.log"; fail "want '$pattern' (exit $rc)"; }
    echo "ok: $(grep '^error' "$d/bad.log")"
  }
  bad "^error: --set eval.generate_every: eval.generate_every: needs eval.generate_data" --set eval.generate_every=5
  bad "^error: --set eval.generate_data: eval.generate_data: cannot read /nonexistent.jsonl" \
    --set eval.generate_data=/nonexistent.jsonl
  bad "eval.generate_samples: must be > 0 with eval.generate_data = \"synthetic\"" --set eval.generate_data=synthetic
  bad "eval.generate_shots: needs eval.generate_shots_file" --set eval.generate_data=synthetic \
    --set eval.generate_samples=4 --set eval.generate_shots=2
  bad "eval.generate_max_new_tokens: must be in \[1, 100000\]" --set eval.generate_data=synthetic \
    --set eval.generate_samples=4 --set eval.generate_max_new_tokens=0
  printf '{"question": "q1", "answer": "#### 1"}\n{"question": "q2"}\n' > "$d/noans.jsonl"
  bad "^error: eval.generate_data: .*noans.jsonl:2: .*answer" --set "eval.generate_data=$d/noans.jsonl"
  ;;
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
ep-emu)
  # expert parallelism on the CUDA backend with NCCL (both emulated: EMU = minimax-train-emu),
  # 2 ranks, P = 2, against the CPU trainer's same run (dist_ep_emu_match)
  emu="$3"
  small=(--set train.max_steps=3 --set data.max_length=64 --set data.truncation=truncate
    --set "data.cache_dir=$tmp/dist-cache-ep-emu" --set train.adam_epsilon=0.1
    --set train.learning_rate=1e-2 --set train.per_device_train_batch_size=2
    --set dist.gather_unit=expert --set dist.expert_parallel=2)
  run 2 "$tmp/ep-emu-cpu" "${small[@]}"
  bin="$emu" run 2 "$tmp/ep-emu-cuda" "${small[@]}" --set dist.backend=nccl
  grep -E "^expert parallelism|^step 3/" "$tmp/ep-emu-cuda.log"
  ;;
generate-emu)
  # accuracy by generation on the CUDA backend (NCCL; both through the emulator, EMU): with
  # eval.generate_weights = "auto" the device run decodes through the gathers, on the device,
  # and writes the CPU replica's results (--eval-only of the random initialisations of Text-01,
  # M2 and M3, 8 problems of 16 tokens, 2 ranks, 3 a batch)
  emu="$3"
  fail() { echo "FAIL: $*"; exit 1; }
  if [ "${4:-}" = device ] && ! nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then
    echo "no GPU: skipped"
    exit 77
  fi
  d="$tmp/gen-emu"
  rm -rf "$d"
  mkdir -p "$d"
  g=(--eval-only --set data.max_length=64 --set data.truncation=truncate --set eval.generate_data=synthetic
    --set eval.generate_samples=8 --set eval.generate_max_new_tokens=16 --set eval.generate_batch=3
    --set train.per_device_train_batch_size=2 --set "data.cache_dir=$tmp/dist-cache-gen-emu")
  for fam in text01 m2 m3; do
    recipe=tests/recipes/dist.toml
    [ "$fam" != text01 ] && recipe="tests/recipes/dist-$fam.toml"
    run 2 "$d/$fam-cpu" "${g[@]}"
    bin="$emu" run 2 "$d/$fam-cuda" "${g[@]}" --set dist.backend=nccl
    grep -q 'the ranks decode in step through the ZeRO-3 gathers on the cuda backend' "$d/$fam-cuda.log" ||
      fail "$fam: not decoded through the gathers on the device: $(grep eval.generate "$d/$fam-cuda.log")"
    cmp "$d/$fam-cuda/eval-generate-0.jsonl" "$d/$fam-cpu/eval-generate-0.jsonl" ||
      fail "$fam: the device's results differ from the CPU replica's"
    echo "ok: $fam: 8 problems decoded through the gathers on the (emulated) device = the CPU replica's results"
  done
  ;;
emu-cuda)
  emu="$3"
  np="$4"
  # AdamW with epsilon above the gradients' scale: each update is proportional to its
  # gradient, so the bf16 comparison sees the kernels' rounding, not AdamW's first steps
  # turning any rounding of a near-zero gradient into a full +-lr step
  # 8 samples held out: every run ends with the eval loss, forward only through the backend
  small=(--set train.max_steps=3 --set data.max_length=64 --set data.truncation=truncate
    --set "data.cache_dir=$tmp/dist-cache-emu" --set train.adam_epsilon=0.1
    --set train.learning_rate=1e-2 --set "train.per_device_train_batch_size=$((4 / np))"
    --set data.eval_samples=8)
  run "$np" "$tmp/emu-cpu" "${small[@]}"
  # the device runs gather one expert at a time (the split MoE ops, expert buckets over NCCL)
  bin="$emu" run "$np" "$tmp/emu-cuda" "${small[@]}" --set dist.backend=nccl --set output.save_steps=2 \
    --set dist.gather_unit=expert
  # resumed with every layer recomputed in the backward: step 3 must still equal the straight run's
  bin="$emu" run "$np" "$tmp/emu-resume" "${small[@]}" --set dist.backend=nccl \
    --set dist.gather_unit=expert --set train.gradient_checkpointing=true \
    --resume "$tmp/emu-cuda/checkpoint-2"
  # the AdamW moments offloaded to host memory (the update on the host CPU, through a staging
  # buffer shrunk to 4099 elements so that every shard takes several chunks), checkpointed at
  # step 2 and resumed from there
  MT_OFFLOAD_STAGE_NUMEL=4099 bin="$emu" run "$np" "$tmp/emu-offload" "${small[@]}" \
    --set dist.backend=nccl --set dist.gather_unit=expert --set output.save_steps=2 \
    --set dist.offload_optimizer=true
  MT_OFFLOAD_STAGE_NUMEL=4099 bin="$emu" run "$np" "$tmp/emu-offload-resume" "${small[@]}" \
    --set dist.backend=nccl --set dist.gather_unit=expert --set dist.offload_optimizer=true \
    --resume "$tmp/emu-offload/checkpoint-2"
  grep "^memory" "$tmp/emu-offload.log"
  # strict emulation (tests/cuda_emu/emu.cpp) over the whole trainer, 2 steps: reversed
  # schedules, poisoned shared and fresh device memory, and every prefetch and reduce-scatter
  # after its stream waited for the compute stream's earlier work
  MT_EMU_STRICT=1 bin="$emu" run "$np" "$tmp/emu-strict" "${small[@]}" --set dist.backend=nccl \
    --set dist.gather_unit=expert --set train.max_steps=2
  # a device too small for the state, slots and arena (an emulated 64 MiB one): stopped before
  # anything is allocated, with the remedies, offload among them
  rc=0
  MT_CUDA_EMU_MEM_MB=64 bin="$emu" run "$np" "$tmp/emu-small-device" "${small[@]}" \
    --set dist.backend=nccl > /dev/null 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: a 64 MiB device was accepted"; exit 1; }
  grep -q "^error: a rank needs .* GiB of cuda memory .* are free; use more GPUs .*dist.offload_optimizer = true" \
    "$tmp/emu-small-device.log" || { echo "FAIL: no memory error"; cat "$tmp/emu-small-device.log"; exit 1; }
  ! grep -q "^memory\[" "$tmp/emu-small-device.log" || { echo "FAIL: it trained"; exit 1; }
  grep "^error" "$tmp/emu-small-device.log"
  # rank 1 hangs in its first collective (tests/cuda_emu/emu_nccl.cpp): with dist.timeout = 5
  # the NCCL watchdogs must name it and end the job (the first, so that no slow emulated kernel
  # can keep an earlier one pending for 5 s, as the emulator runs queued collectives late)
  rc=0
  MT_EMU_NCCL_STALL=1:1 timeout -k 5 120 mpirun -np "$np" --oversubscribe --bind-to none "$emu" \
    "$recipe" --set "output.dir=$tmp/emu-stall" "${small[@]}" --set dist.backend=nccl \
    --set dist.timeout=5 > "$tmp/emu-stall.log" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] ||
    { echo "FAIL: a stalled collective: exit $rc"; tail -20 "$tmp/emu-stall.log"; exit 1; }
  grep -E "nccl watchdog: collective 1 \(.*\) has not completed after [0-9]+ s \(dist.timeout = 5 s\)" \
    "$tmp/emu-stall.log" || { echo "FAIL: no watchdog message"; tail -20 "$tmp/emu-stall.log"; exit 1; }
  grep -q "moments offloaded: .* MiB of host memory" "$tmp/emu-offload.log" ||
    { echo "FAIL: the offloaded run's memory line does not show host moments"; exit 1; }
  # bf16 GEMMs and bf16 parameter gathers: the emulated device against the CPU's bf16 rounding
  # reference
  run "$np" "$tmp/emu-cpu-bf16" "${small[@]}" --set model.dtype=bf16 --set dist.gather_dtype=bf16
  bin="$emu" run "$np" "$tmp/emu-cuda-bf16" "${small[@]}" --set dist.backend=nccl --set model.dtype=bf16 \
    --set dist.gather_dtype=bf16
  # the same with every bf16 GEMM operand cast, none taken from a gather slot's bf16 values
  # (mt_backend.bf16_shadow): the same bits; with gather unit layer (one landing buffer for
  # both slots) and expert (one per slot, and every layer recomputed in the backward)
  MT_BF16_SHADOW=0 bin="$emu" run "$np" "$tmp/emu-cuda-bf16-cast" "${small[@]}" --set dist.backend=nccl \
    --set model.dtype=bf16 --set dist.gather_dtype=bf16
  for cast in 1 0; do
    MT_BF16_SHADOW=$cast bin="$emu" run "$np" "$tmp/emu-cuda-bf16x$([ $cast = 0 ] && echo -cast)" \
      "${small[@]}" --set dist.backend=nccl --set model.dtype=bf16 --set dist.gather_dtype=bf16 \
      --set dist.gather_unit=expert --set train.gradient_checkpointing=true
  done
  # offload with bf16 gathers: the fp32 master weights in host memory too, the device keeping
  # only their bf16 rounding for the gathers; checkpointed at step 2 and resumed from there
  offload_bf16=(--set dist.backend=nccl --set model.dtype=bf16 --set dist.gather_dtype=bf16
    --set dist.offload_optimizer=true)
  MT_OFFLOAD_STAGE_NUMEL=4099 bin="$emu" run "$np" "$tmp/emu-offload-bf16" "${small[@]}" \
    "${offload_bf16[@]}" --set output.save_steps=2
  MT_OFFLOAD_STAGE_NUMEL=4099 bin="$emu" run "$np" "$tmp/emu-offload-bf16-resume" "${small[@]}" \
    "${offload_bf16[@]}" --resume "$tmp/emu-offload-bf16/checkpoint-2"
  grep "^memory" "$tmp/emu-offload-bf16.log"
  grep -q "moments and master weights offloaded: .* MiB of host memory" "$tmp/emu-offload-bf16.log" ||
    { echo "FAIL: the bf16-gather offload's memory line does not show host master weights"; exit 1; }
  grep -E "^memory|^step" "$tmp/emu-cuda.log"
  grep -q "memory\[rank 0, cuda\]" "$tmp/emu-cuda.log" || { echo "FAIL: not on the cuda backend"; exit 1; }
  ;;
signal)
  # stop_run SIGNAL TARGET(mpirun|rank) OUT [ARGS]: a long run, stopped once loss.csv has 3
  # steps; prints the step it stopped after
  # (TARGET launcher: launch/run-local.sh, which turns SIGTERM and SIGINT into SIGUSR1 for
  # mpirun; mpirun itself kills the ranks 1 s after it gets either)
  stop_run() {
    local sig="$1" target="$2" out="$3" job rc=0 step
    shift 3
    rm -rf "$out"
    local launch=(mpirun -np 2 --oversubscribe --bind-to none "$bin")
    [ "$target" != launcher ] || launch=(env MT_TRAIN_BIN="$bin" bash launch/run-local.sh -n 2)
    "${launch[@]}" "$recipe" --set "output.dir=$out" \
      --set "data.cache_dir=$tmp/dist-cache-signal" --set train.max_steps=100000 \
      --set train.per_device_train_batch_size=2 "$@" > "$out.log" 2>&1 &
    job=$!
    for _ in $(seq 600); do [ "$(wc -l < "$out/loss.csv" 2> /dev/null || echo 0)" -ge 4 ] && break; sleep 0.1; done
    if [ "$target" = rank ]; then kill -"$sig" "$(pgrep -f -n "output.dir=$out")"; else kill -"$sig" "$job"; fi
    for _ in $(seq 600); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
    kill -0 "$job" 2> /dev/null && { echo "FAIL: still running 60 s after SIG$sig" >&2; kill -9 "$job"; exit 1; }
    wait "$job" || rc=$?
    [ "$rc" -eq 75 ] || { echo "FAIL: SIG$sig to $target: exit $rc, not 75" >&2; tail -20 "$out.log" >&2; exit 1; }
    step=$(sed -n 's/^stopped by a signal ([^)]*) after step \([0-9]*\) of 100000.*/\1/p' "$out.log")
    [ -n "$step" ] && [ -d "$out/checkpoint-$step" ] ||
      { echo "FAIL: SIG$sig to $target: no stop message or checkpoint" >&2; tail -20 "$out.log" >&2; exit 1; }
    [ "$(ls -d "$out"/checkpoint-* | wc -l)" -eq 1 ] || { echo "FAIL: more than one checkpoint" >&2; exit 1; }
    echo "SIG$sig to $target: every rank stopped after step $step, exit 75, checkpoint-$step" >&2
    echo "$step"
  }
  step=$(stop_run USR1 mpirun "$tmp/signal-usr1")
  step_term=$(stop_run TERM rank "$tmp/signal-term")
  # SIGINT to a rank, SIGTERM to the launcher: the same stop (the fast runs: their own cache)
  stop_run INT rank "$tmp/signal-int" "${fast[@]}" --set "data.cache_dir=$tmp/dist-cache-signal-fast" > /dev/null
  stop_run TERM launcher "$tmp/signal-launcher" "${fast[@]}" --set "data.cache_dir=$tmp/dist-cache-signal-fast" > /dev/null
  # the first run resumes from its checkpoint and finishes 2 more steps
  run 2 "$tmp/signal-resume" --set "data.cache_dir=$tmp/dist-cache-signal" \
    --set train.per_device_train_batch_size=2 --set "train.max_steps=$((step + 2))" \
    --resume "$tmp/signal-usr1/checkpoint-$step"
  grep -q "resumed from .*checkpoint-$step at step $step" "$tmp/signal-resume.log"
  grep -E "^step $((step + 2))/|^done" "$tmp/signal-resume.log"
  echo "SIGTERM run stopped after step $step_term"
  # a second SIGTERM ends the rank at once: the job ends, but not as a clean stop (steps of 40
  # micro-batches, several seconds, so that the first cannot finish one before the second)
  out="$tmp/signal-twice"
  rm -rf "$out"
  mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$out" \
    --set "data.cache_dir=$tmp/dist-cache-signal" --set train.max_steps=100000 \
    --set train.per_device_train_batch_size=2 --set train.gradient_accumulation_steps=40 \
    > "$out.log" 2>&1 &
  job=$!
  for _ in $(seq 600); do [ "$(wc -l < "$out/loss.csv" 2> /dev/null || echo 0)" -ge 2 ] && break; sleep 0.1; done
  victim=$(pgrep -f -n "output.dir=$out")
  kill -TERM "$victim"
  sleep 0.5 # apart: a signal sent while the same one is pending merges with it
  kill -TERM "$victim"
  for _ in $(seq 600); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
  kill -0 "$job" 2> /dev/null && { echo "FAIL: still running 60 s after two SIGTERMs"; kill -9 "$job"; exit 1; }
  rc=0
  wait "$job" || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 75 ] || { echo "FAIL: two SIGTERMs: exit $rc"; exit 1; }
  echo "two SIGTERMs to one rank: the job ended with $rc"
  # output.save_total_limit = 2 with a checkpoint every step: the last two remain
  run 2 "$tmp/save-limit" --set "data.cache_dir=$tmp/dist-cache-signal" \
    --set train.per_device_train_batch_size=2 --set train.max_steps=4 --set output.save_steps=1 \
    --set output.save_total_limit=2
  kept=$(cd "$tmp/save-limit" && echo checkpoint-*)
  [ "$kept" = "checkpoint-3 checkpoint-4" ] || { echo "FAIL: save_total_limit 2 kept: $kept"; exit 1; }
  grep -c "^removed .*checkpoint-[12] (output.save_total_limit = 2)" "$tmp/save-limit.log"
  ;;
disk-full)
  # limited KB OUT: 2 ranks, 2 steps and a checkpoint at step 2 under a file size limit of KB
  # KiB (the trainer ignores SIGXFSZ, so writes fail with EFBIG as on a full disk or quota;
  # mpirun restores the signal's default action, death, in the ranks); must fail, leaving no
  # checkpoint-2
  limited() {
    rm -rf "$2"
    local rc=0
    (
      ulimit -f "$1"
      mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$2" \
        --set "data.cache_dir=$tmp/dist-cache-np2" --set train.max_steps=2 \
        --set output.save_steps=2 --set train.per_device_train_batch_size=2
    ) > "$2.log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { echo "FAIL: $2: a checkpoint beyond $1 KiB was written"; exit 1; }
    [ ! -e "$2/checkpoint-2" ] || { echo "FAIL: $2: checkpoint-2 exists"; exit 1; }
    no_leftovers "$2"
  }
  no_leftovers() { # no temporary file or directory of a failed write in $1
    local left
    left=$(find "$1" -name '*.tmp*' | head -5)
    [ -z "$left" ] || { echo "FAIL: temporary files left behind: $left"; exit 1; }
  }
  # 20 MB against each rank's 21 MB state file: one line names the file, the dataset and HDF5's
  # reason, the system's (no HDF5 error stack); loss.csv keeps both steps
  out="$tmp/disk-full"
  limited 20000 "$out"
  grep -E "^\[rank [0-9]\] error: .*/checkpoint-2\.tmp/state-0000[01]-of-00002\.h5: cannot write dataset bucket_[0-9]+_[a-z]+ \(HDF5: Write failed: File too large\)" \
    "$out.log" || { echo "FAIL: no error naming the file and HDF5's reason"; tail -20 "$out.log"; exit 1; }
  ! grep -q "HDF5-DIAG" "$out.log" || { echo "FAIL: HDF5 printed its error stack"; exit 1; }
  [ "$(wc -l < "$out/loss.csv")" -eq 3 ] || { echo "FAIL: loss.csv lacks a step"; exit 1; }
  # 10 MB against the 14 MB export, written first
  out="$tmp/disk-full-export"
  limited 10000 "$out"
  grep -E "^\[rank 0\] error: .*/checkpoint-2\.tmp/\.model-00001\.safetensors\.tmp\.[0-9]+: write failed: File too large" \
    "$out.log" || { echo "FAIL: no error naming the export file"; tail -20 "$out.log"; exit 1; }
  # the loss log and the eval log on a full device (/dev/full: every write fails with ENOSPC)
  full_log() { # full_log FILE ARGS...: FILE of the output directory on /dev/full
    local file="$1" out="$tmp/disk-full-$1" rc=0
    shift
    rm -rf "$out"
    mkdir -p "$out"
    ln -s /dev/full "$out/$file"
    mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$out" \
      --set "data.cache_dir=$tmp/dist-cache-np2" --set train.max_steps=2 \
      --set train.per_device_train_batch_size=2 "$@" > "$out.log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { echo "FAIL: a run without its $file went on"; exit 1; }
    grep "$file: write failed: No space left on device" "$out.log" ||
      { echo "FAIL: no error naming $file"; tail -20 "$out.log"; exit 1; }
  }
  full_log loss.csv
  full_log eval.csv --set data.eval_samples=8
  full_log metrics.jsonl
  ;;
nonfinite)
  # a learning rate of 1e30 overflows the parameters after step 1: the job must stop with the
  # step number, or skip such steps when the recipe says so
  rc=0
  run 2 "$tmp/nan" --set train.learning_rate=1e30 --set train.max_grad_norm=0 \
    --set train.per_device_train_batch_size=2 --set train.max_steps=4 || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: a NaN run exited 0"; exit 1; }
  grep -E "error: .*step [0-9]+: the (loss|gradient) is not finite" "$tmp/nan.log"
  run 2 "$tmp/nan-skip" --set train.learning_rate=1e30 --set train.max_grad_norm=0 \
    --set train.per_device_train_batch_size=2 --set train.max_steps=4 \
    --set train.skip_nonfinite_steps=true
  grep -E "step [0-9]+: non-finite loss or gradient, step skipped" "$tmp/nan-skip.log"
  ;;
bad-recipe)
  expect() { # expect RECIPE_TEXT PATTERN [ARGS...]
    local text="$1" pattern="$2"
    shift 2
    printf '%s' "$text" > "$tmp/bad.toml"
    local rc=0
    mpirun -np 2 --oversubscribe "$bin" "$tmp/bad.toml" "$@" > "$tmp/bad.log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { echo "FAIL: exit 0 for: $text"; exit 1; }
    grep -q -- "$pattern" "$tmp/bad.log" || { echo "FAIL: want '$pattern', got:"; cat "$tmp/bad.log"; exit 1; }
    [ "$(grep -c '^error' "$tmp/bad.log")" -eq 1 ] || { echo "FAIL: not one error line:"; cat "$tmp/bad.log"; exit 1; }
    ! grep -q "^model:\|^memory" "$tmp/bad.log" || { echo "FAIL: a model was built"; exit 1; }
    echo "ok: $(grep '^error' "$tmp/bad.log")"
  }
  good='[model]\nconfig = "recipes/configs/tiny.json"\n[data]\ntokenizer_dir = "tests/fixtures/tokenizer"\n'
  expect "$(printf "$good")
[train]
max_steps = 10 steps
" "bad.toml:6:16: unexpected 's'"
  expect "$(printf "$good")
[train]
learnig_rate = 1e-5
" "bad.toml:6:16: unknown key 'train.learnig_rate'"
  expect "$(printf "$good")
[train]
max_steps = \"ten\"
" "bad.toml:6:13: train.max_steps must be an integer, not string"
  expect '[model]
path = "/nonexistent/MiniMax-Text-01-hf"
' "bad.toml:2:8: model.path: directory /nonexistent/MiniMax-Text-01-hf does not exist"
  # an arena one micro-step cannot fit: refused before any memory or weights, naming the remedy
  expect "$(printf "$good")
[dist]
arena_mb = 4
" "error: dist.arena_mb = 4 is too small: .* or set train.gradient_checkpointing = true"
  # more memory than any node has (the released Text-01: 7.3 TB of sharded state over 2
  # ranks): refused before any memory is taken or any weight is read
  expect '[model]
config = "recipes/configs/minimax-text-01.json"
[data]
tokenizer_dir = "tests/fixtures/tokenizer"
[train]
gradient_checkpointing = true
[dist]
arena_mb = 8192
' "error: a rank needs .* GiB of cpu memory (sharded state [0-9.]* GiB: 228044827648 parameters, 1/2 of the model; .*) but .* GiB are free.*; use more nodes"
  ;;
outdir)
  fail() { echo "FAIL: $*"; exit 1; }
  args=("${fast[@]}" --set "data.cache_dir=$tmp/dist-cache-outdir" --set train.max_steps=4)
  out="$tmp/outdir"
  rm -rf "$out" "$out-first"
  mkdir -p "$tmp/dist-cache-outdir"
  # two runs into one output.dir: the second, started while the first trains, refuses within
  # 2 s, naming the first's rank 0. The first holds its checkpoint under the temporary name for
  # 2 s (train/checkpoint.c's test hook), so that it is still running when the second has been
  # refused. What starting a job costs now (mpirun and MPI_Init: the same command with --help)
  # is measured first: the limit is 2 s beyond it, so that a loaded machine or a sanitized
  # build does not fail the test (alone, the refusal takes 0.5 to 1.1 s in all).
  start=$(date +%s.%N)
  OMPI_MCA_odls_base_sigkill_timeout=0 mpirun -np 2 --oversubscribe --bind-to none "$bin" --help > /dev/null 2>&1
  startup=$(echo "$(date +%s.%N) - $start" | bc)
  MT_TEST_CHECKPOINT_DELAY=2 mpirun -np 2 --oversubscribe --bind-to none -x MT_TEST_CHECKPOINT_DELAY \
    "$bin" "$recipe" --set "output.dir=$out" "${args[@]}" > "$out.log" 2>&1 &
  job=$!
  for _ in $(seq 600); do [ "$(lines "$out/loss.csv")" -ge 2 ] && break; sleep 0.02; done
  kill -0 "$job" 2> /dev/null || fail "the first run ended before the second started"
  # (mpirun waits odls_base_sigkill_timeout, 1 s, before it reports a non-zero exit of its
  # ranks: Open MPI's second, not the trainer's, so 0 for this run)
  start=$(date +%s.%N)
  rc=0
  OMPI_MCA_odls_base_sigkill_timeout=0 mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" \
    --set "output.dir=$out" "${args[@]}" > "$out-second.log" 2>&1 || rc=$?
  took=$(echo "$(date +%s.%N) - $start" | bc)
  kill -0 "$job" 2> /dev/null || fail "the first run ended before the second was refused"
  echo "the second run exited $rc after ${took}s (a job's start: ${startup}s)"
  [ "$rc" -ne 0 ] || fail "the second run into the same output.dir exited 0"
  grep "^error: output.dir $out is in use by another run (pid [0-9]* on host $(hostname); lock file $out/.minimax-train.lock)" \
    "$out-second.log" || { cat "$out-second.log"; fail "no refusal naming the holder"; }
  holder=$(sed -n 's/^error: .* in use by another run (pid \([0-9]*\) .*/\1/p' "$out-second.log")
  tr '\0' '\n' < "/proc/$holder/environ" | grep -qx "OMPI_COMM_WORLD_RANK=0" ||
    fail "the refusal does not name the first run's rank 0 (pid $holder)"
  # before it reads anything: no model, no data
  ! grep -qE "^(model|data): " "$out-second.log" || fail "the second run set up before it refused"
  awk -v t="$took" -v s="$startup" 'BEGIN { exit !(t < s + 2) }' ||
    fail "the refusal took ${took}s (limit 2 s + the start, ${startup}s)"
  wait "$job" || { tail -20 "$out.log"; fail "the first run failed"; }
  cp -a "$out" "$out-first"

  # a fresh run into a directory holding another run's results: refused, naming them, nothing
  # touched; with --overwrite the trainer's own files go first (a file of the user's stays)
  echo "the user's notes" > "$out/notes.txt"
  fresh() { mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$out" "${args[@]}" "$@"; }
  rc=0
  fresh > "$out-rerun.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || fail "a fresh run over another run's results: exit $rc, not 2"
  grep "^error: output.dir $out holds another run's results: loss.csv (4 steps), checkpoint-4; continue it with --resume $out/checkpoint-4, replace them with --overwrite" \
    "$out-rerun.log" || { cat "$out-rerun.log"; fail "no refusal naming the results"; }
  cmp "$out/loss.csv" "$out-first/loss.csv" || fail "the refused run changed loss.csv"
  rc=0
  fresh --overwrite --resume "$out/checkpoint-4" --set train.max_steps=5 > "$out-both.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep -q "^error: --resume $out/checkpoint-4 continues the run in $out and --overwrite would remove it" \
    "$out-both.log" || fail "--overwrite with --resume: exit $rc"
  # a lock left by a run that ended without releasing it (killed): taken over, saying so
  sleep 0 &
  dead=$!
  wait "$dead"
  printf 'host %s pid %d\n' "$(hostname)" "$dead" > "$out/.minimax-train.lock"
  fresh --overwrite > "$out-overwrite.log" 2>&1 || { tail -20 "$out-overwrite.log"; fail "--overwrite failed"; }
  grep "^output.dir $out: taking over the lock left by pid $dead on host $(hostname) (no longer running)" \
    "$out-overwrite.log" || fail "no message about the stale lock"
  grep "^--overwrite: removed .*loss.csv.* from $out" "$out-overwrite.log" || fail "no list of what --overwrite removed"
  [ -f "$out/notes.txt" ] || fail "--overwrite removed a file it did not write"
  # the run that had the directory to itself (after --overwrite) against the first: what is
  # deterministic, byte for byte (loss.csv but its timing columns, the export, the state)
  cut -d, -f1-5 "$out-first/loss.csv" > "$out-first.losses"
  cut -d, -f1-5 "$out/loss.csv" | cmp - "$out-first.losses" || fail "loss.csv differs from a run alone"
  for f in model.safetensors config.json state.h5 state-00000-of-00002.h5 state-00001-of-00002.h5; do
    cmp "$out-first/checkpoint-4/$f" "$out/checkpoint-4/$f" || fail "checkpoint-4/$f differs from a run alone"
  done
  echo "the first run's loss.csv, export and state equal a run alone's, byte for byte"
  ;;
watchdog)
  fail() { echo "FAIL: $*"; exit 1; }
  # await_end JOB OUT LIMIT START: the job must end non-zero within LIMIT s of START
  await_end() {
    local job="$1" out="$2" limit="$3" start="$4" rc=0 took
    for _ in $(seq 600); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
    if kill -0 "$job" 2> /dev/null; then
      pkill -9 -f "output.dir=$out" || true
      fail "$out: the job still runs 60 s after its rank was stopped"
    fi
    wait "$job" || rc=$?
    took=$(echo "$(date +%s.%N) - $start" | bc)
    pkill -9 -f "output.dir=$out" || true
    echo "$out: mpirun exited with $rc ${took}s after the rank stopped (limit $limit s)"
    [ "$rc" -ne 0 ] || fail "$out: exit 0"
    awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t < l) }' || fail "$out: took ${took}s"
  }
  launch() { # launch OUT ARGS...: a 2-rank run in the background (job in $job)
    local out="$1"
    shift
    rm -rf "$out"
    MT_TEST_WATCHDOG="1 4" mpirun -np 2 --oversubscribe --bind-to none -x MT_TEST_WATCHDOG \
      -x MT_TEST_STATE_STOP "$bin" "$recipe" --set "output.dir=$out" "${fast[@]}" \
      --set "data.cache_dir=$tmp/dist-cache-watchdog" "$@" > "$out.log" 2>&1 &
    job=$!
  }
  # the automatic limit (dist.timeout unset): 20 x the slowest step so far, at least 300 s; here
  # 4 x, at least 1 s (MT_TEST_WATCHDOG, so that sanitized steps too end it in seconds): a rank
  # stopped after a few steps ends the job within seconds, not the 1800 s of a fixed default
  out="$tmp/watch-auto"
  MT_TEST_STATE_STOP=none launch "$out" --set train.max_steps=100000
  for _ in $(seq 600); do [ "$(lines "$out/loss.csv")" -ge 4 ] && break; sleep 0.05; done
  kill -0 "$job" 2> /dev/null || fail "the job ended before a rank was stopped"
  start=$(date +%s.%N)
  kill -STOP "$(pgrep -f -n "output.dir=$out")"
  await_end "$job" "$out" 30 "$start"
  grep -E "mpi watchdog: host collective [0-9]+ \(.*\) has not completed after [0-9]+ s \(dist.timeout automatic: 4 x the slowest step so far, [0-9.]+ s, at least 1 s\)" \
    "$out.log" || { tail -20 "$out.log"; fail "no watchdog message with the automatic limit"; }
  # a rank that stops itself in the middle of writing its state file (train/checkpoint.c's test
  # hook) at the second checkpoint: its peer, done with its own file, waits in a barrier and
  # ends the job after the automatic limit for checkpoints (4 x the first one's time, at least
  # 1 s, here); the failing rank removes checkpoint-2.tmp
  out="$tmp/watch-state"
  MT_TEST_STATE_STOP=1:2 launch "$out" --set train.max_steps=4 --set output.save_steps=1 \
    --set output.export=false
  for _ in $(seq 600); do grep -q "test hook: rank 1 stops itself" "$out.log" 2> /dev/null && break; sleep 0.02; done
  grep "test hook: rank 1 stops itself while writing .*/checkpoint-2.tmp/" "$out.log" ||
    { kill -9 "$job"; fail "the rank did not stop in its state write of checkpoint-2"; }
  start=$(date +%s.%N)
  limit=$(sed -n 's/^watchdog (dist.timeout automatic): a collective may wait \([0-9]*\) s in the checkpoints.*/\1/p' "$out.log")
  await_end "$job" "$out" "$((limit + 10))" "$start"
  grep -E "mpi watchdog: host collective [0-9]+ \(a barrier\) has not completed after [0-9]+ s \(dist.timeout automatic: 4 x the slowest checkpoint so far, [0-9.]+ s, at least 1 s\)" \
    "$out.log" || { tail -20 "$out.log"; fail "no watchdog message"; }
  [ -d "$out/checkpoint-1" ] && [ ! -e "$out/checkpoint-2" ] && [ ! -e "$out/checkpoint-2.tmp" ] ||
    fail "checkpoint-1 is gone, or a checkpoint-2 is left"
  # rank 0 stopped while it builds the token cache (50,000 samples: seconds) and the other
  # waits: the heartbeat file stops changing, and dist.timeout = 2 s later the job ends
  out="$tmp/watch-cache"
  rm -rf "$out-cache"
  MT_TEST_STATE_STOP=none launch "$out" --set "data.cache_dir=$out-cache" \
    --set data.synthetic_samples=50000 --set dist.timeout=2 --set train.max_steps=1
  for _ in $(seq 600); do [ -e "$out-cache/synthetic-gsm8k-11-50000.jsonl" ] && break; sleep 0.02; done
  rank0=""
  for p in $(pgrep -f "output.dir=$out"); do
    tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=0" && rank0=$p
  done
  [ -n "$rank0" ] || fail "no rank 0 found"
  start=$(date +%s.%N)
  kill -STOP "$rank0"
  await_end "$job" "$out" 12 "$start"
  grep -E "rank 0 builds the token cache while this rank waits, but has shown no sign of life for [0-9]+ s" \
    "$out.log" || { tail -20 "$out.log"; fail "no message about rank 0"; }
  rm -rf "$out-cache"
  ;;
resume-check)
  corrupt="$3"
  fail() { echo "FAIL: $*"; exit 1; }
  d="$tmp/rc"
  rm -rf "$d"
  mkdir -p "$d"
  cp recipes/configs/tiny.json "$d/config.json"
  # the data file is the synthetic one the first run writes into its cache directory
  data="$d/cache/synthetic-gsm8k-11-96.jsonl"
  args=("${fast[@]}" --set "model.config=$d/config.json" --set "data.cache_dir=$d/cache"
    --set train.max_steps=2 --set output.save_steps=1)
  run 2 "$d/base" "${args[@]}"
  ck="$d/base/checkpoint-1"
  # refused NAME PATTERN [ARGS...]: resuming must fail with one error line matching PATTERN
  refused() {
    local name="$1" pattern="$2" rc=0
    shift 2
    run 2 "$d/$name" "${args[@]}" "$@" > /dev/null || rc=$?
    [ "$rc" -ne 0 ] || fail "$name: exit 0"
    grep -E "error: .*$pattern" "$d/$name.log" || { tail -20 "$d/$name.log"; fail "$name: no error matching $pattern"; }
    [ "$(grep -c "error: " "$d/$name.log")" -eq 1 ] || { cat "$d/$name.log"; fail "$name: not one error line"; }
    ! grep -q "^step " "$d/$name.log" || fail "$name: it trained"
  }
  digests="\(FNV-1a digest [0-9a-f]{16} then, [0-9a-f]{16} now\)"
  # the model config edited in place (rope_theta), then the data file (one digit of one sample)
  sed -i 's/"rope_theta": 10000.0/"rope_theta": 20000.0/' "$d/config.json"
  ! cmp -s "$d/config.json" recipes/configs/tiny.json || fail "the config edit changed nothing"
  refused config "--resume $ck: the model config $d/config.json has changed since the checkpoint was written $digests" --resume "$ck"
  cp recipes/configs/tiny.json "$d/config.json"
  cp "$data" "$d/data.saved"
  sed -i '5s/[0-9]/7/' "$data"
  ! cmp -s "$data" "$d/data.saved" || fail "the data edit changed nothing"
  refused data "--resume $ck: the data file $data has changed since the checkpoint was written $digests" --resume "$ck"
  cp "$d/data.saved" "$data"
  # one bit of one master weight of a state file
  cp -a "$ck" "$d/ck-saved"
  "$corrupt" h5 "$ck/state-00001-of-00002.h5" bucket_0001_master 10
  refused state "$ck/state-00001-of-00002.h5: cannot read dataset bucket_0001_master: the checkpoint is damaged" --resume "$ck"
  rm -rf "$ck"
  cp -a "$d/ck-saved" "$ck"
  # untouched, it resumes
  run 2 "$d/resumed" "${args[@]}" --resume "$ck"
  grep "resumed from $ck at step 1" "$d/resumed.log" || fail "the untouched checkpoint did not resume"
  # the export: an undamaged one given as model.path is checked against its digest and loads;
  # one bit of model.safetensors changed is refused, naming the file
  ex="$d/base/checkpoint-2"
  run 2 "$d/from-export" "${args[@]}" --set "model.path=$ex" --set train.max_steps=1
  grep "^model.path: 1 of 1 safetensors files checked against their digests" "$d/from-export.log" ||
    fail "the export was not checked"
  "$corrupt" safetensors "$ex/model.safetensors"
  refused export "model.path: $ex/model.safetensors: the data does not match the digest its header records" \
    --set "model.path=$ex" --set train.max_steps=1
  ;;
global-batch)
  fail() { echo "FAIL: $*"; exit 1; }
  # a global batch of 4 samples on 1, 2 and 4 ranks of 1 row: 4, 2 and 1 accumulation steps
  common=("${fast[@]}" --set train.max_steps=4 --set output.save_steps=2 --set "data.cache_dir=$tmp/dist-cache-gb")
  gb=("${common[@]}" --set train.global_batch_size=4)
  # 2 ranks x 2 accumulation steps; without train.global_batch_size its resume on 1 rank would
  # halve the global batch: refused, naming both layouts
  run 2 "$tmp/gb-np2" "${common[@]}" --set train.gradient_accumulation_steps=2
  rc=0
  run 1 "$tmp/gb-halved" "${common[@]}" --set train.gradient_accumulation_steps=2 \
    --resume "$tmp/gb-np2/checkpoint-2" > /dev/null || rc=$?
  [ "$rc" -ne 0 ] || fail "a resume that halves the global batch exited 0"
  grep "^error: --resume $tmp/gb-np2/checkpoint-2: the global batch would change from 4 samples (2 ranks x 1 row per device x 2 accumulation steps) to 2 (1 rank x 1 row per device x 2 accumulation steps), .*; set train.global_batch_size = 4" \
    "$tmp/gb-halved.log" || { tail -5 "$tmp/gb-halved.log"; fail "no refusal naming both layouts"; }
  # with it: the uninterrupted run on 1 rank, and the resumes 2 -> 1, 1 -> 2, 2 -> 4 from step 2
  # (dist_global_batch_match compares steps 3 and 4)
  run 1 "$tmp/gb-np1" "${gb[@]}"
  grep "^global batch: 4 samples per step = 1 rank x 1 row x 4 accumulation steps (train.global_batch_size)" \
    "$tmp/gb-np1.log" || fail "1 rank: no global batch line"
  run 1 "$tmp/gb-2to1" "${gb[@]}" --resume "$tmp/gb-np2/checkpoint-2"
  run 2 "$tmp/gb-1to2" "${gb[@]}" --resume "$tmp/gb-np1/checkpoint-2"
  run 4 "$tmp/gb-2to4" "${gb[@]}" --resume "$tmp/gb-np2/checkpoint-2"
  grep -h "^resume: the global batch stays" "$tmp"/gb-{2to1,1to2,2to4}.log
  grep -q "^resume: the global batch stays 4 samples: 2 ranks x 1 row per device x 2 accumulation steps before, 1 rank x 1 row per device x 4 accumulation steps now" \
    "$tmp/gb-2to1.log" || fail "2 -> 1: no layout line"
  # a global batch the ranks cannot split
  rc=0
  run 2 "$tmp/gb-odd" "${common[@]}" --set train.global_batch_size=5 > /dev/null || rc=$?
  [ "$rc" -ne 0 ] && grep "^error: train.global_batch_size = 5 is not a multiple of train.per_device_train_batch_size x ranks = 1 x 2" \
    "$tmp/gb-odd.log" || fail "global_batch_size 5 on 2 ranks: exit $rc"
  ;;
metrics)
  # 4 steps with an eval every 2 on 2 ranks, then resumed from the step-2 checkpoint in the
  # same directory (--rewind: checkpoint-4 is there): metrics.jsonl keeps steps <= 2 and
  # appends, as loss.csv and eval.csv do (dist_metrics_match compares them)
  m=(--set train.max_steps=4 --set train.per_device_train_batch_size=2 --set data.eval_samples=8
    --set train.eval_steps=2 --set output.save_steps=2 --set output.export=false)
  run 2 "$tmp/metrics" "${m[@]}"
  mv "$tmp/metrics.log" "$tmp/metrics-first.log"
  mpirun -np 2 --oversubscribe --bind-to none "$bin" "$recipe" --set "output.dir=$tmp/metrics" \
    --set "data.cache_dir=$tmp/dist-cache-np2" "${m[@]}" --resume "$tmp/metrics/checkpoint-2" \
    --rewind > "$tmp/metrics.log" 2>&1 || { tail -30 "$tmp/metrics.log"; exit 1; }
  grep -q "resumed from .*checkpoint-2 at step 2" "$tmp/metrics.log"
  ;;
seed)
  # train.seed with data.seed and model.init_seed unset (dist.toml without its seeds), 2 steps
  # on 1 rank: the same train.seed reproduces the weights bit for bit and equals both seeds set
  # to it; another train.seed changes the first loss and the weights
  recipe="$tmp/seed.toml"
  sed '/seed/d' tests/recipes/dist.toml > "$recipe"
  run 1 "$tmp/seed-9a" --set train.max_steps=2 --set train.seed=9
  run 1 "$tmp/seed-9b" --set train.max_steps=2 --set train.seed=9
  run 1 "$tmp/seed-9x" --set train.max_steps=2 --set data.seed=9 --set model.init_seed=9
  run 1 "$tmp/seed-10" --set train.max_steps=2 --set train.seed=10
  [ "$(grep -c -E "^(init_)?seed = 9$" "$tmp/seed-9a/recipe.toml")" = 3 ] ||
    { echo "FAIL: the resolved recipe does not name seed 9 three times"; exit 1; }
  w=checkpoint-2/model.safetensors
  cmp "$tmp/seed-9a/$w" "$tmp/seed-9b/$w" || { echo "FAIL: train.seed 9 twice: other weights"; exit 1; }
  cmp "$tmp/seed-9a/$w" "$tmp/seed-9x/$w" ||
    { echo "FAIL: train.seed 9 differs from data.seed = model.init_seed = 9"; exit 1; }
  losses() { cut -d, -f1-5 "$1/loss.csv"; } # step, loss, lr, grad_norm, tokens
  [ "$(losses "$tmp/seed-9a")" = "$(losses "$tmp/seed-9b")" ] || { echo "FAIL: loss.csv differs"; exit 1; }
  first() { sed -n 2p "$1/loss.csv" | cut -d, -f2; }
  [ "$(first "$tmp/seed-9a")" != "$(first "$tmp/seed-10")" ] ||
    { echo "FAIL: train.seed 10 gives the first loss of train.seed 9"; exit 1; }
  cmp -s "$tmp/seed-9a/$w" "$tmp/seed-10/$w" && { echo "FAIL: train.seed 10: the weights of 9"; exit 1; }
  echo "train.seed 9: first loss $(first "$tmp/seed-9a") twice; train.seed 10: $(first "$tmp/seed-10")"
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
