#!/usr/bin/env bash
# check_layout.sh: the layout rules of docs/design.md, checked on the tracked sources.
#   bash tools/check_layout.sh             check this checkout; exit 1 with "file:line: rule: ..."
#   bash tools/check_layout.sh --self-test  break each rule once in a scratch copy and expect
#                                           the check to fail on it with that file and line
#   bash tools/check_layout.sh --edges      print the include edges between rooms (with counts)
# The rules:
#   rooms      a room (top-level folder of the product) includes only the rooms ROOMS allows
#              below, and the edges between rooms form no cycle
#   family     no model family's name (Text-01, M2, M3) in the code of a room other than models/
#              (comments do not count; a line that must name one says `layout: family name ok`)
#   cpu-call   no call of a cpu_* kernel outside kernels/ (tests/ and bench/ excepted)
#   size       no source file over 800 lines but generated tables (first line says GENERATED)
set -uo pipefail
cd "$(dirname "$0")/.."

# room: the rooms it may include (besides itself). An edge not listed is a violation; the
# table itself is ordered from the bottom up, so it cannot describe a cycle.
ROOMS=(
  "core:"
  "autograd:core"
  "kernels:core autograd"
  "jinja:core"
  "data:core jinja"
  "models:core autograd kernels data"
  "eval:core autograd data models"
  "train:core autograd kernels jinja data models eval"
  "serve:core autograd data models"
  "apps:core autograd kernels jinja data models eval train serve"
)
MAX_LINES=800

# code_lines FILE: "LINE<TAB>code" for every line of FILE with comments blanked out (strings
# kept, so that a "//" inside a literal is not a comment).
code_lines() {
  awk '
    BEGIN { inc = 0 }
    {
      out = ""; s = $0; n = length(s); i = 1; str = 0
      while (i <= n) {
        c = substr(s, i, 1); d = substr(s, i, 2)
        if (inc) { if (d == "*/") { inc = 0; i += 2 } else i++; continue }
        if (str) {
          out = out c
          if (c == "\\") { out = out substr(s, i + 1, 1); i += 2; continue }
          if (c == q) str = 0
          i++; continue
        }
        if (d == "/*") { inc = 1; i += 2; continue }
        if (d == "//") break
        if (c == "\"" || c == "\x27") { str = 1; q = c }
        out = out c; i++
      }
      printf "%d\t%s\n", NR, out
    }' "$1"
}

# sources ROOT: the product's source files under ROOT (tests, bench, tools excluded)
sources() {
  (cd "$1" && git ls-files -co --exclude-standard -- "${ROOM_NAMES[@]/%//}" 2> /dev/null |
    grep -E '\.(c|h|cu|cuh|cpp)$')
}
ROOM_NAMES=()
for r in "${ROOMS[@]}"; do ROOM_NAMES+=("${r%%:*}"); done

# edges ROOT: "from to file:line" for each include of one room's file into another room
edges() {
  local root=$1 f room line inc target
  while read -r f; do
    room=${f%%/*}
    while IFS=: read -r line inc; do
      inc=${inc#*\"}
      inc=${inc%%\"*}
      if [ -e "$root/$(dirname "$f")/$inc" ]; then # relative to the including file
        target=$(realpath -m --relative-to="$root" "$root/$(dirname "$f")/$inc")
      else
        target=$inc
      fi
      target=${target%%/*}
      [ "$target" != "$room" ] && [[ " ${ROOM_NAMES[*]} " == *" $target "* ]] &&
        echo "$room $target $f:$line"
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$root/$f" | cut -d: -f1,2-)
  done < <(sources "$root")
}

check() {
  local root=$1 bad=0 f room allowed from to at
  # rooms: each edge allowed by the table
  declare -A may
  for r in "${ROOMS[@]}"; do may[${r%%:*}]=" ${r#*:} "; done
  local all_edges
  all_edges=$(edges "$root")
  while read -r from to at; do
    [ -n "$from" ] || continue
    if [[ "${may[$from]}" != *" $to "* ]]; then
      allowed=$(echo ${may[$from]})
      echo "$at: rooms: $from/ includes $to/, which docs/design.md does not allow ($from/ may include: ${allowed:-nothing})"
      bad=1
    fi
  done <<< "$all_edges"
  # ... and no cycle among the edges that exist (tsort names the rooms of a loop)
  local loop
  loop=$(awk '{print $1, $2}' <<< "$all_edges" | sort -u | tsort 2>&1 > /dev/null | grep -v 'input contains a loop' | sed 's/^tsort: //')
  if [ -n "$loop" ]; then
    echo "rooms: the includes between rooms form a cycle through: $(echo $loop)"
    bad=1
  fi
  # family, cpu-call, size
  while read -r f; do
    room=${f%%/*}
    if [ "$room" != models ]; then
      code_lines "$root/$f" | grep -iE '(^|[^A-Za-z0-9_])(minimax[-_])?(text[-_]?01|m2|m3)([^A-Za-z0-9_]|$)' |
        while IFS=$'\t' read -r line text; do
          sed -n "${line}p" "$root/$f" | grep -q 'layout: family name ok' && continue
          echo "$f:$line: family: a model family's name outside models/: $(echo "$text" | sed 's/^[[:space:]]*//' | cut -c1-100)"
      done | grep . && bad=1
    fi
    if [ "$room" != kernels ]; then
      code_lines "$root/$f" | grep -E '(^|[^A-Za-z0-9_])cpu_[a-z0-9_]+[[:space:]]*\(' |
        while IFS=$'\t' read -r line text; do
          echo "$f:$line: cpu-call: a cpu_* kernel called outside kernels/ (go through the backend table): $(echo "$text" | sed 's/^[[:space:]]*//' | cut -c1-100)"
        done | grep . && bad=1
    fi
  done < <(sources "$root")
  while read -r f; do
    local n
    n=$(wc -l < "$root/$f")
    if [ "$n" -gt $MAX_LINES ] && ! head -1 "$root/$f" | grep -q GENERATED; then
      echo "$f:$((MAX_LINES + 1)): size: $n lines, over $MAX_LINES (split it by job; generated tables say GENERATED on their first line)"
      bad=1
    fi
  done < <(cd "$root" && git ls-files -co --exclude-standard | grep -E '\.(c|h|cu|cuh|cpp|sh)$' |
    grep -v '^tests/fixtures/')
  return $bad
}

# self_test: a scratch copy of the tracked tree, one violation of each rule at a time; the
# check must fail naming that file and line, and pass on the untouched copy.
self_test() {
  local tmp fails=0
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  git ls-files -co --exclude-standard | grep -v '^tests/fixtures/' | tar -cf - -T - | tar -xf - -C "$tmp"
  (cd "$tmp" && git init -q && git add -A > /dev/null)
  expect() { # expect NAME FILE:LINE: the check fails and says FILE:LINE: NAME
    local out
    out=$(check "$tmp")
    if grep -q "^$2: $1:" <<< "$out"; then
      echo "self-test $1: refused at $2 (ok)"
    else
      echo "self-test $1: NOT refused at $2; the check said:"; echo "$out" | head -5
      fails=1
    fi
  }
  if ! out=$(check "$tmp"); then echo "self-test: the untouched copy fails:"; echo "$out"; return 1; fi
  local f=models/generate.c n
  n=$(($(wc -l < "$tmp/$f") + 1))
  echo '#include "train/trainer.h"' >> "$tmp/$f" # models/ may not include train/
  expect rooms "$f:$n"
  git -C "$tmp" checkout -q -- "$f"
  f=data/chat.c n=$(($(wc -l < "$tmp/$f") + 1))
  echo '#include "models/minimax.h"' >> "$tmp/$f" # a cycle: models/ includes data/
  expect rooms "$f:$n"
  git -C "$tmp" checkout -q -- "$f"
  f=train/trainer.c n=$(($(wc -l < "$tmp/$f") + 1))
  echo 'static const char *family = "MiniMax-M3";' >> "$tmp/$f"
  expect family "$f:$n"
  git -C "$tmp" checkout -q -- "$f"
  f=serve/engine.c n=$(($(wc -l < "$tmp/$f") + 1))
  echo 'static void f(void) { cpu_matmul_forward(0, 0, 0, 0, 0, 0); }' >> "$tmp/$f"
  expect cpu-call "$f:$n"
  git -C "$tmp" checkout -q -- "$f"
  f=serve/openai.c
  for _ in $(seq $((MAX_LINES + 1 - $(wc -l < "$tmp/$f")))); do echo >> "$tmp/$f"; done
  expect size "$f:$((MAX_LINES + 1))"
  return $fails
}

case "${1:-}" in
  "") check "$PWD" && echo "layout rules: ok (rooms, family, cpu-call, size)" ;;
  --self-test) self_test ;;
  --edges) edges "$PWD" | awk '{print $1 " -> " $2}' | sort | uniq -c ;;
  *) echo "usage: $0 [--self-test | --edges]" >&2; exit 2 ;;
esac
