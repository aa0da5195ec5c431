#!/usr/bin/env bash
# cli_help.sh BIN...: each binary answers --help (usage on stdout naming itself, nothing on
# stderr, exit 0) and --version (program, commit, build type, backends; exit 0), and a bad
# option still exits 2 with nothing on stdout. MT_WANT_COMMIT and MT_WANT_BUILD: what
# CMakeLists.txt configured (tests/apps/cli.cmake).
set -uo pipefail
tmp="${MT_TEST_TMPDIR:?}/cli-help"
mkdir -p "$tmp"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
[ "$#" -ge 5 ] || bad "expected at least the 5 binaries, got $#: $*"
for bin in "$@"; do
  name=$(basename "$bin")
  "$bin" --help > "$tmp/out" 2> "$tmp/err"
  rc=$?
  [ "$rc" -eq 0 ] || bad "$name --help exits $rc"
  [ -s "$tmp/err" ] && bad "$name --help wrote to stderr: $(head -3 "$tmp/err")"
  grep -q "^usage: $name " "$tmp/out" || bad "$name --help: no 'usage: $name' on stdout: $(head -3 "$tmp/out")"
  grep -q -- "--version" "$tmp/out" || bad "$name --help does not mention --version"

  "$bin" --version > "$tmp/out" 2> "$tmp/err"
  rc=$?
  [ "$rc" -eq 0 ] || bad "$name --version exits $rc"
  [ -s "$tmp/err" ] && bad "$name --version wrote to stderr: $(head -3 "$tmp/err")"
  want=$(printf '%s (minimax-train)\ncommit: %s\nbuild: %s\n' "$name" "${MT_WANT_COMMIT:?}" \
    "${MT_WANT_BUILD:?}")
  [ "$(head -3 "$tmp/out")" = "$want" ] || bad "$name --version: got
$(cat "$tmp/out")
want
$want"
  grep -Eq '^backends: cpu( cuda)?$' "$tmp/out" || bad "$name --version: no backends line"

  "$bin" --no-such-option > "$tmp/out" 2> "$tmp/err"
  rc=$?
  [ "$rc" -eq 2 ] || bad "$name --no-such-option exits $rc, not 2"
  [ -s "$tmp/out" ] && bad "$name --no-such-option wrote to stdout: $(head -3 "$tmp/out")"
  grep -q "usage: $name" "$tmp/err" || bad "$name --no-such-option: no usage on stderr"
  echo "$name: --help, --version and a bad option answered"
done
exit "$fail"
