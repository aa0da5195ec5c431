#!/usr/bin/env bash
# run_stop.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: a job that
# must end: a rank killed or stopped (the watchdogs), a stop signal.
#   run_stop.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   kill             SIGKILL one rank mid-run: the job must end non-zero in < 30 s; SIGSTOP one:
#                    the peer's watchdog (dist.timeout = 3) must end it in < 30 s, but not a
#                    token cache build longer than dist.timeout; then a
#                    kill during a checkpoint write must leave the previous checkpoint loadable
#   ep-kill          kill's SIGKILL and SIGSTOP cases under expert parallelism (P = 2)
#   cp-kill          the same under context parallelism (C = 2: K/V and state exchanges)
#   signal           SIGUSR1 to mpirun, then SIGTERM and SIGINT to one rank alone, and SIGTERM
#                    to launch/run-local.sh: every rank stops after the same step with a
#                    checkpoint (exit 75) and no final/, and the run resumes from it (and writes
#                    final/ when it finishes); two SIGTERMs end a rank
#                    at once; then output.save_total_limit keeps the newest checkpoints only
#   watchdog         the automatic dist.timeout (20 x the slowest step) ends a job whose rank
#                    is stopped; a rank stopped while it writes its state file ends the job
#                    within the checkpoints' automatic limit + 10 s; so does rank 0 stopped in
#                    the token cache build (dist.timeout = 2 s of heartbeat silence)
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

case "$mode" in
kill | ep-kill | cp-kill)
  ep=() pre=""
  if [ "$mode" = ep-kill ]; then # the same under expert parallelism (all-to-alls every layer)
    ep=(--set dist.gather_unit=expert --set dist.expert_parallel=2) pre=ep-
  fi
  if [ "$mode" = cp-kill ]; then # and under context parallelism (K/V and state exchanges)
    ep=(--set dist.context_parallel=2 --set train.per_device_train_batch_size=4) pre=cp-
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
  if [ "$mode" = cp-kill ]; then
    grep -q "^context parallelism: 1 groups of 2 ranks" "$out.log" ||
      { echo "FAIL: the run did not use context parallelism"; exit 1; }
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
signal)
  # stop_run: tests/train/run_common.sh
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
  [ -f "$tmp/signal-resume/final/model.safetensors" ] || { echo "FAIL: the finished resume wrote no final/"; exit 1; }
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
watchdog)
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
  # rank 0 by its environment; looked for again for a while (a loaded machine once missed it in
  # a single look while it was building the cache), and the processes listed if it never shows
  rank0=""
  for _ in $(seq 100); do
    for p in $(pgrep -f "output.dir=$out"); do
      tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=0" && rank0=$p
    done
    [ -z "$rank0" ] || break
    sleep 0.05
  done
  [ -n "$rank0" ] || { pgrep -af "output.dir=$out"; tail -5 "$out.log"; fail "no rank 0 found"; }
  start=$(date +%s.%N)
  kill -STOP "$rank0"
  await_end "$job" "$out" 12 "$start"
  grep -E "rank 0 builds the token cache while this rank waits, but has shown no sign of life for [0-9]+ s" \
    "$out.log" || { tail -20 "$out.log"; fail "no message about rank 0"; }
  rm -rf "$out-cache"
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
