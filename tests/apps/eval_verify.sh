#!/usr/bin/env bash
# eval_verify.sh: every tool that loads an export checks the digest its safetensors headers
# record (minimax_train.data_digest, docs/checkpoints.md):
#   eval_verify.sh HELPER BINDIR    (ctest eval_verify_digest; HELPER: test_eval_verify,
#                                    BINDIR: the minimax-* binaries; point BINDIR at another
#                                    build to compare)
# MT_TEST_TMPDIR set. On a random 1-layer model saved by the trainer's writer, minimax-forward,
# -generate, -eval, -chat and -serve:
#   - load the intact export;
#   - refuse it, in one line naming the file, once one byte of lm_head.weight changed (a value
#     that stays finite: only the digest sees it), before any output;
#   - load that damaged export with --no-verify;
#   - load a file without a digest (another writer's) saying on stderr that it is unverified;
# and minimax-eval --weights gathered on 2 ranks refuses the damaged export too.
set -euo pipefail
helper="$1"
bin="$2"
tmp="${MT_TEST_TMPDIR:?}/eval_verify"
rm -rf "$tmp"
mkdir -p "$tmp"
"$helper" make "$tmp/ok"
good="$tmp/ok/model"
cp -r "$good" "$tmp/damaged"
"$helper" damage "$tmp/damaged/model.safetensors" lm_head.weight
cp -r "$good" "$tmp/foreign"
"$helper" foreign "$tmp/foreign/model.safetensors"
echo '[[1, 2, 3]]' > "$tmp/ids.json"
printf '{"question": "What is 1 + 1?", "answer": "1 + 1 = 2\\n#### 2"}\n' > "$tmp/q.jsonl"

# tool MODEL NAME [FLAGS...]: runs one tool on MODEL, its output in $tmp/NAME.log; the exit code
serve_pid=""
tool() {
  local model="$1" name="$2" rc=0
  shift 2
  local log="$tmp/$name.log"
  case "$name" in
  forward*) "$bin/minimax-forward" --model "$model" --ids "$tmp/ids.json" \
              --out "$tmp/$name.safetensors" "$@" > "$log" 2>&1 || rc=$? ;;
  generate*) "$bin/minimax-generate" --model "$model" --ids "$tmp/ids.json" \
               --max-new-tokens 2 "$@" > "$log" 2>&1 || rc=$? ;;
  eval*) "$bin/minimax-eval" --model "$model" --data "$tmp/q.jsonl" --max-new-tokens 2 \
           "$@" > "$log" 2>&1 || rc=$? ;;
  chat*) echo hello | "$bin/minimax-chat" --model "$model" --max-new-tokens 2 "$@" \
           > "$log" 2>&1 || rc=$? ;;
  serve*) # up when it says it listens (then stopped with SIGTERM), else its exit code
    "$bin/minimax-serve" --model "$model" --port 0 "$@" > "$log" 2>&1 &
    serve_pid=$!
    for _ in $(seq 600); do
      grep -q "listening on" "$log" && break
      kill -0 "$serve_pid" 2> /dev/null || break
      sleep 0.1
    done
    if grep -q "listening on" "$log"; then
      kill -TERM "$serve_pid"
      wait "$serve_pid" || true
    else
      wait "$serve_pid" || rc=$?
    fi
    serve_pid="" ;;
  esac
  return "$rc"
}
trap '[ -z "$serve_pid" ] || kill "$serve_pid" 2> /dev/null || true' EXIT

fail() {
  echo "FAIL: $1"
  tail -5 "$2"
  exit 1
}
for t in forward generate eval chat serve; do
  tool "$good" "$t-ok" || fail "$t refused the intact export" "$tmp/$t-ok.log"
  ! grep -q "unverified" "$tmp/$t-ok.log" || fail "$t calls the intact export unverified" \
    "$tmp/$t-ok.log"
  echo "ok: $t loads the intact export"

  rc=0
  tool "$tmp/damaged" "$t-damaged" || rc=$?
  [ "$rc" -ne 0 ] || fail "$t loaded the damaged export with exit 0" "$tmp/$t-damaged.log"
  want="$tmp/damaged/model.safetensors: the data does not match the digest its header records"
  # in one line (minimax-eval's MPI_Abort banner may follow it)
  grep -qF "$want" "$tmp/$t-damaged.log" || fail "$t: want '$want'" "$tmp/$t-damaged.log"
  [ "$(grep -c "damaged" "$tmp/$t-damaged.log")" -eq 1 ] || fail "$t: want one line" \
    "$tmp/$t-damaged.log"
  [ ! -e "$tmp/$t-damaged.safetensors" ] || fail "$t wrote output" "$tmp/$t-damaged.log"
  echo "ok: $t: $(grep -m1 damaged "$tmp/$t-damaged.log" | cut -c1-300)"

  tool "$tmp/damaged" "$t-noverify" --no-verify ||
    fail "$t --no-verify refused the damaged export" "$tmp/$t-noverify.log"
  echo "ok: $t --no-verify loads it"

  tool "$tmp/foreign" "$t-foreign" || fail "$t refused a file without a digest" \
    "$tmp/$t-foreign.log"
  want="$tmp/foreign/model.safetensors records no minimax_train.data_digest (not written by minimax-train): loaded unverified"
  grep -qF "$want" "$tmp/$t-foreign.log" || fail "$t: want '$want'" "$tmp/$t-foreign.log"
  [ "$(grep -c unverified "$tmp/$t-foreign.log")" -eq 1 ] ||
    fail "$t: want one unverified line" "$tmp/$t-foreign.log"
  echo "ok: $t: $(grep -m1 unverified "$tmp/$t-foreign.log" | cut -c1-300)"
done
# minimax-eval --weights gathered on 2 ranks: each rank reads its shard, the files are checked
# apart (each rank every 2nd file)
if command -v mpirun > /dev/null; then
  rc=0
  mpirun -np 2 --oversubscribe --bind-to none "$bin/minimax-eval" --model "$tmp/damaged" \
    --data "$tmp/q.jsonl" --max-new-tokens 2 --weights gathered > "$tmp/gathered.log" 2>&1 ||
    rc=$?
  [ "$rc" -ne 0 ] || fail "eval --weights gathered loaded the damaged export" "$tmp/gathered.log"
  want="$tmp/damaged/model.safetensors: the data does not match the digest its header records"
  grep -qF "$want" "$tmp/gathered.log" || fail "eval --weights gathered: want '$want'" \
    "$tmp/gathered.log"
  echo "ok: eval --weights gathered: $(grep -m1 damaged "$tmp/gathered.log" | cut -c1-300)"
fi
rm -rf "$tmp"
