#!/usr/bin/env bash
# run_common.sh: what the end-to-end runs of minimax-train (tests/train/run_*.sh) share, sourced
# by each: its arguments (BIN MODE [ARGS]), the temporary directory, the default recipe and the
# launcher run NP OUTDIR ARGS... (mpirun of BIN on NP ranks into OUTDIR, its log in OUTDIR.log),
# fail MESSAGE, the refusal check refused and stop_run (a run stopped by a signal).
# shellcheck disable=SC2034 # the variables are the sourcing script's
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
# mpirun for run and refused. odls_base_sigkill_timeout 0: after a rank's non-zero exit, mpirun
# signals the job's ranks a second apart (SIGCONT, SIGTERM, SIGKILL), 2 s of waiting each time a
# run here fails as expected, with every rank ended already (a script that kills or stops one
# rank of a running job launches mpirun itself, with its defaults)
mpi=(mpirun --oversubscribe --bind-to none --mca odls_base_sigkill_timeout 0)
run() { # run NP OUTDIR ARGS...
  local np="$1" out="$2"
  shift 2
  rm -rf "$out"
  "${mpi[@]}" -np "$np" "$bin" "$recipe" \
    --set "output.dir=$out" --set "data.cache_dir=$tmp/dist-cache-np$np" "$@" > "$out.log" 2>&1 ||
    { tail -30 "$out.log"; return 1; }
}
fail() {
  echo "FAIL: $*"
  exit 1
}
# refused NP LOG PATTERN ARGS...: BIN ARGS... on NP ranks is refused before any model is built:
# exit 2, one error line, matching PATTERN (grep), no model or memory line; the log in LOG
refused() {
  local np="$1" log="$2" pattern="$3" rc=0
  shift 3
  "${mpi[@]}" -np "$np" "$bin" "$@" > "$log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || { tail -5 "$log"; fail "exit $rc, not 2: $*"; }
  grep -q -- "$pattern" "$log" || { tail -5 "$log"; fail "want '$pattern'"; }
  [ "$(grep -c '^error' "$log")" -eq 1 ] || { cat "$log"; fail "not one error line: $*"; }
  ! grep -q "^model:\|^memory" "$log" || fail "a model was built: $*"
  echo "ok: $(grep '^error' "$log" | cut -c1-300)"
}
# stop_run SIGNAL TARGET(mpirun|rank|launcher) OUT [ARGS]: a long run, stopped by SIGNAL to
# TARGET once loss.csv has 3 steps; prints the step it stopped after. launcher is
# launch/run-local.sh, which turns SIGTERM and SIGINT into SIGUSR1 for mpirun (mpirun itself
# kills the ranks 1 s after it gets either). Its mpirun keeps Open MPI's default kill grace
# (run's mpi drops it).
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
  for _ in $(seq 600); do [ "$(lines "$out/loss.csv")" -ge 4 ] && break; sleep 0.1; done
  if [ "$target" = rank ]; then kill -"$sig" "$(pgrep -f -n "output.dir=$out")"; else kill -"$sig" "$job"; fi
  for _ in $(seq 600); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
  kill -0 "$job" 2> /dev/null && { echo "FAIL: still running 60 s after SIG$sig" >&2; kill -9 "$job"; exit 1; }
  wait "$job" || rc=$?
  [ "$rc" -eq 75 ] || { echo "FAIL: SIG$sig to $target: exit $rc, not 75" >&2; tail -20 "$out.log" >&2; exit 1; }
  step=$(sed -n 's/^stopped by a signal ([^)]*) after step \([0-9]*\) of 100000.*/\1/p' "$out.log")
  [ -n "$step" ] && [ -d "$out/checkpoint-$step" ] ||
    { echo "FAIL: SIG$sig to $target: no stop message or checkpoint" >&2; tail -20 "$out.log" >&2; exit 1; }
  [ "$(ls -d "$out"/checkpoint-* | wc -l)" -eq 1 ] || { echo "FAIL: more than one checkpoint" >&2; exit 1; }
  # a stopped run is not finished: its model is the checkpoint's, final/ comes with the resume
  [ ! -e "$out/final" ] || { echo "FAIL: SIG$sig to $target: a stopped run wrote final/" >&2; exit 1; }
  echo "SIG$sig to $target: every rank stopped after step $step, exit 75, checkpoint-$step" >&2
  echo "$step"
}
