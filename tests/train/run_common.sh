#!/usr/bin/env bash
# run_common.sh: what the end-to-end runs of minimax-train (tests/train/run_*.sh) share, sourced
# by each: its arguments (BIN MODE [ARGS]), the temporary directory, the default recipe and the
# launcher run NP OUTDIR ARGS... (mpirun of BIN on NP ranks into OUTDIR, its log in OUTDIR.log),
# fail MESSAGE and the refusal check refused.
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
