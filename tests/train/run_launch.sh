#!/usr/bin/env bash
# run_launch.sh: how minimax-train is started and ended, as a user meets it (docs/recipes.md,
# "Paths"; docs/training.md, "Failure"):
#   run_launch.sh BIN MODE   (run by ctest from the source directory; MT_TEST_TMPDIR set; the
#   launcher and helpers: tests/train/run_common.sh)
# Modes:
#   anywhere     `minimax-train /abs/path/recipes/tiny.toml` from a directory outside the
#                repository: its relative paths are the recipe folder's, output.dir the working
#                directory's; recipe.toml names the files absolutely, so `--resume DIR` alone
#                continues from a third directory; the resolved recipe is printed with --verbose
#                only
#   error-first  a recipe with a misspelt key, run alone and through launch/run-local.sh on 2
#                ranks: the first line printed is the error naming the recipe's file:line:col;
#                no line names a source file; a failed check deeper in (junk in MT_MPI_CHUNK)
#                names none either, except in a debug build or with MT_DEBUG=1
#   clean-stop   SIGUSR1 to launch/run-local.sh, and to mpirun under launch/mpirun.sh (the
#                documented mpirun line): exit 75, the clean-stop line, a checkpoint, and none of
#                mpirun's abort banners (which plain mpirun prints after the same stop)
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

banner='job has been aborted\|exited with non-zero status\|mpirun detected\|Primary job'
srcline='[a-z_]*\.\(c\|cu\|h\):[0-9][0-9]*:' # a source location, "train/trainer.c:276:"
repo="$PWD"

case "$mode" in
anywhere)
  # outside the repository (ctest's $tmp is in the build tree): under /tmp
  d="$(mktemp -d "${TMPDIR:-/tmp}/mt_anywhere.XXXXXX")"
  trap 'rm -rf "$d"' EXIT
  mkdir -p "$d/cwd" "$d/elsewhere"
  # one step, no evaluation: what is checked is where the files are found and written
  quick=(--set train.max_steps=1 --set train.eval_on_start=false --set train.eval_steps=0
    --set data.eval_samples=0 --set 'eval.generate_data=""' --set eval.generate_samples=0
    --set data.synthetic_samples=64 --set data.max_length=64 --set data.truncation=truncate
    --set model.num_hidden_layers=1)
  (cd "$d/cwd" && "$bin" "$repo/recipes/tiny.toml" --set output.dir=out "${quick[@]}") \
    > "$d/run.log" 2>&1 || { tail -20 "$d/run.log"; fail "recipes/tiny.toml from $d/cwd"; }
  [ -d "$d/cwd/out/checkpoint-1" ] || fail "no checkpoint in the working directory's out/"
  [ ! -e "$repo/recipes/out" ] || fail "output.dir went next to the recipe"
  grep -qx "config = \"$repo/recipes/configs/tiny.json\"" "$d/cwd/out/recipe.toml" &&
    grep -qx "tokenizer_dir = \"$repo/tests/fixtures/tokenizer\"" "$d/cwd/out/recipe.toml" ||
    { grep "config\|tokenizer_dir" "$d/cwd/out/recipe.toml"; fail "recipe.toml's paths"; }
  ! grep -q "^\[model\]\|^config = " "$d/run.log" || fail "the resolved recipe printed without --verbose"
  grep "^recipe: the resolved recipe is out/recipe.toml" "$d/run.log" || fail "recipe.toml not named"
  echo "ok: recipes/tiny.toml ran from $d/cwd, outputs in $d/cwd/out"
  # the checkpoint's own recipe, from a third directory: its paths are absolute
  (cd "$d/elsewhere" && "$bin" --resume "$d/cwd/out/checkpoint-1" --set train.max_steps=2 --verbose) \
    > "$d/resume.log" 2>&1 || { tail -20 "$d/resume.log"; fail "--resume alone from $d/elsewhere"; }
  grep -q "^resumed from .*checkpoint-1 at step 1" "$d/resume.log" && [ -d "$d/cwd/out/checkpoint-2" ] ||
    { tail -20 "$d/resume.log"; fail "the resume did not continue the run"; }
  grep -qx "config = \"$repo/recipes/configs/tiny.json\"" "$d/resume.log" ||
    fail "--verbose did not print the resolved recipe"
  echo "ok: --resume alone from $d/elsewhere; --verbose printed the resolved recipe"
  # a relative --set value is the working directory's
  cp recipes/configs/tiny.json "$d/elsewhere/my.json"
  rc=0
  (cd "$d/elsewhere" && "$bin" "$repo/recipes/tiny.toml" --set model.config=my.json \
    --set output.dir=out2 "${quick[@]}") > "$d/set.log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] && grep -qx "config = \"$d/elsewhere/my.json\"" "$d/elsewhere/out2/recipe.toml" ||
    { tail -5 "$d/set.log"; fail "--set model.config=my.json from $d/elsewhere: exit $rc"; }
  echo "ok: --set model.config=my.json read $d/elsewhere/my.json"
  ;;
error-first)
  d="$tmp/error-first"
  rm -rf "$d"
  mkdir -p "$d"
  # tests/recipes/dist.toml's copy in $d with a misspelt key: its relative paths made the
  # repository's
  sed "s|= \"\\.\\./|= \"$repo/tests/recipes/../|" tests/recipes/dist.toml > "$d/bad.toml"
  sed -i 's/^\[train\]$/[train]\nlearnig_rate = 1e-5/' "$d/bad.toml"
  line=$(grep -n "^learnig_rate" "$d/bad.toml" | head -1 | cut -d: -f1)
  want="error: $d/bad.toml:$line:16: unknown key 'train.learnig_rate' (see docs/recipes.md for the keys)"
  check_first() { # check_first LOG WHAT
    [ "$(head -1 "$1")" = "$want" ] || { head -5 "$1"; fail "$2: the first line is not the error"; }
    ! grep -q "$srcline" "$1" || { grep "$srcline" "$1"; fail "$2: a source location"; }
    echo "ok: $2: $(head -1 "$1")"
  }
  rc=0
  "$bin" "$d/bad.toml" --set "output.dir=$d/out" > "$d/alone.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || fail "exit $rc alone"
  check_first "$d/alone.log" "alone"
  rc=0
  MT_TRAIN_BIN="$bin" bash launch/run-local.sh -n 2 "$d/bad.toml" --set "output.dir=$d/out" \
    > "$d/launcher.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || fail "exit $rc through launch/run-local.sh"
  check_first "$d/launcher.log" "launch/run-local.sh -n 2"
  # a failure that is no recipe's: a check deeper in the trainer
  rc=0
  MT_MPI_CHUNK=abc "$bin" tests/recipes/dist.toml --set "output.dir=$d/out-env" > "$d/env.log" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && grep -q "^error: .*MT_MPI_CHUNK wants an integer" "$d/env.log" ||
    { cat "$d/env.log"; fail "MT_MPI_CHUNK=abc: exit $rc"; }
  if "$bin" --version | grep -q "^build: Debug"; then
    grep -q "$srcline" "$d/env.log" || fail "a debug build's error without its source location"
  else
    ! grep -q "$srcline" "$d/env.log" || { cat "$d/env.log"; fail "a source location"; }
  fi
  MT_DEBUG=1 MT_MPI_CHUNK=abc "$bin" tests/recipes/dist.toml --set "output.dir=$d/out-env" \
    > "$d/env-debug.log" 2>&1 || true
  grep -q "^error: .*train/env\.c:[0-9]*: .*MT_MPI_CHUNK" "$d/env-debug.log" ||
    { cat "$d/env-debug.log"; fail "MT_DEBUG=1: no source location"; }
  echo "ok: $(head -1 "$d/env.log"); with MT_DEBUG=1: $(head -1 "$d/env-debug.log" | cut -c1-60)..."
  ;;
clean-stop)
  # stop LAUNCH OUT TARGET: a long run through LAUNCH (words), SIGUSR1 once loss.csv has 3
  # steps, to the launcher's process (TARGET launcher) or to mpirun (TARGET mpirun); the exit
  # code into rc
  stop() {
    local launch="$1" out="$2" target="$3" job pid
    rm -rf "$out"
    # shellcheck disable=SC2086 # the launcher's words
    $launch "$recipe" --set "output.dir=$out" --set "data.cache_dir=$tmp/dist-cache-launch" \
      --set train.max_steps=100000 "${fast[@]}" > "$out.log" 2>&1 &
    job=$!
    for _ in $(seq 600); do [ "$(lines "$out/loss.csv")" -ge 4 ] && break; sleep 0.1; done
    [ "$(lines "$out/loss.csv")" -ge 4 ] || { kill -9 "$job"; cat "$out.log"; fail "$launch: no steps"; }
    pid=$job
    [ "$target" = launcher ] || pid=$(pgrep -n -f "^mpirun .*output.dir=$out( |$)")
    kill -USR1 "$pid"
    for _ in $(seq 600); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
    kill -0 "$job" 2> /dev/null && { kill -9 "$job"; fail "$launch: still running 60 s after SIGUSR1"; }
    rc=0
    wait "$job" || rc=$?
  }
  clean() { # clean OUT WHAT: exit 75, the stop line, its checkpoint, no banner
    local step
    [ "$rc" -eq 75 ] || { tail -20 "$1.log"; fail "$2: exit $rc, not 75"; }
    step=$(sed -n 's/^stopped by a signal ([^)]*) after step \([0-9]*\) of 100000.*/\1/p' "$1.log")
    [ -n "$step" ] && [ -d "$1/checkpoint-$step" ] || { tail -20 "$1.log"; fail "$2: no stop line or checkpoint"; }
    ! grep -q "$banner" "$1.log" || { tail -20 "$1.log"; fail "$2: mpirun's abort banner after a clean stop"; }
    echo "ok: $2: exit 75, $(grep "^stopped by a signal" "$1.log")"
  }
  stop "env MT_TRAIN_BIN=$bin bash launch/run-local.sh -n 2" "$tmp/stop-local" launcher
  clean "$tmp/stop-local" "SIGUSR1 to launch/run-local.sh"
  stop "bash launch/mpirun.sh -np 2 --oversubscribe --bind-to none $bin" "$tmp/stop-wrapped" mpirun
  clean "$tmp/stop-wrapped" "SIGUSR1 to mpirun under launch/mpirun.sh"
  # plain mpirun: the same stop ends with the banner the launchers drop (this test's witness)
  stop "mpirun -np 2 --oversubscribe --bind-to none $bin" "$tmp/stop-plain" mpirun
  [ "$rc" -eq 75 ] || fail "plain mpirun: exit $rc"
  if grep -q "$banner" "$tmp/stop-plain.log"; then
    echo "plain mpirun after the same stop: $(grep -m1 "$banner" "$tmp/stop-plain.log")"
  else
    echo "plain mpirun printed no banner here (this Open MPI does not)"
  fi
  # a failure keeps mpirun's report: a bad recipe through the wrapper
  rc=0
  bash launch/mpirun.sh -np 2 --oversubscribe "$bin" "$recipe" --set train.learnig_rate=1 \
    > "$tmp/stop-bad.log" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep -q "^error: --set train.learnig_rate: unknown key" "$tmp/stop-bad.log" ||
    { cat "$tmp/stop-bad.log"; fail "a bad key through launch/mpirun.sh: exit $rc"; }
  if grep -q "$banner" "$tmp/stop-plain.log"; then
    grep -q "$banner" "$tmp/stop-bad.log" || { cat "$tmp/stop-bad.log"; fail "a failure lost mpirun's report"; }
  fi
  echo "ok: a failure (exit 2) keeps mpirun's report"
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
