#!/usr/bin/env bash
# run_outdir.sh: end-to-end runs of minimax-train on real MPI ranks for the dist_* tests: one run
# per output.dir (train/output_dir.c).
#   run_outdir.sh BIN MODE [ARGS]   (run by ctest from the source directory; MT_TEST_TMPDIR set;
#   the launcher and helpers: tests/train/run_common.sh)
# Modes:
#   outdir           one run per output.dir: a second run into it while the first trains refuses
#                    in < 2 s naming the holder, and the first's outputs are byte for byte those
#                    of a run alone; a stale lock is taken over; a fresh run over another run's
#                    results is refused unless --overwrite
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

case "$mode" in
outdir)
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
  fresh() { "${mpi[@]}" -np 2 "$bin" "$recipe" --set "output.dir=$out" "${args[@]}" "$@"; }
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
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
