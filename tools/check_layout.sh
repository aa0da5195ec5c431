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
ROOM_NAMES=()
for r in "${ROOMS[@]}"; do ROOM_NAMES+=("${r%%:*}"); done

# scan ROOT: one pass of awk over the product's sources (tests, bench, tools excluded), each
# line with its comments blanked out (strings kept, so that a "//" inside a literal is not a
# comment); prints "E<TAB>from<TAB>to<TAB>file:line" for each include of one room's file into
# another room (a quoted include resolved against the including file's folder when that file
# exists, else against the root), and "V<TAB>file:line: rule: ..." for the family and cpu-call
# rules.
scan() {
  local scan_list
  scan_list=$(mktemp)
  (
    cd "$1" || exit 1
    git ls-files -co --exclude-standard > "$scan_list"
    grep -E "^($(IFS='|'; echo "${ROOM_NAMES[*]}"))/.*\.(c|h|cu|cuh|cpp)$" "$scan_list" |
      xargs awk -v rooms=" ${ROOM_NAMES[*]} " -v list="$scan_list" '
    BEGIN { while ((getline f < list) > 0) exists[f] = 1 }
    function resolved(dir, inc,   parts, n, i, out, k, o) { # dir/inc without . and .. parts
      n = split(dir "/" inc, parts, "/"); k = 0
      for (i = 1; i <= n; i++) {
        if (parts[i] == "." || parts[i] == "") continue
        if (parts[i] == ".." && k > 0) { k--; continue }
        o[++k] = parts[i]
      }
      out = o[1]
      for (i = 2; i <= k; i++) out = out "/" o[i]
      return out
    }
    function trim(t) { sub(/^[ \t]+/, "", t); return substr(t, 1, 100) }
    FNR == 1 { inc = 0; room = FILENAME; sub(/\/.*/, "", room); dir = FILENAME; sub(/\/[^\/]*$/, "", dir) }
    {
      s = $0
      if (!inc && index(s, "/*") == 0 && index(s, "//") == 0) out = s # no comment: as it is
      else {
        out = ""; n = length(s); i = 1; str = 0
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
      }
      if (s ~ /^[ \t]*#[ \t]*include[ \t]*"/) {
        target = s; sub(/^[^"]*"/, "", target); sub(/".*/, "", target)
        if (resolved(dir, target) in exists) target = resolved(dir, target)
        sub(/\/.*/, "", target)
        if (target != room && index(rooms, " " target " "))
          printf "E\t%s\t%s\t%s:%d\n", room, target, FILENAME, FNR
      }
      if (room != "models" && tolower(out) ~ /(^|[^a-z0-9_])(minimax[-_])?(text[-_]?01|m2|m3)([^a-z0-9_]|$)/ &&
          index(s, "layout: family name ok") == 0)
        printf "V\t%s:%d: family: a model family'"'"'s name outside models/: %s\n", FILENAME, FNR, trim(out)
      if (room != "kernels" && out ~ /(^|[^A-Za-z0-9_])cpu_[a-z0-9_]+[ \t]*\(/)
        printf "V\t%s:%d: cpu-call: a cpu_* kernel called outside kernels/ (go through the backend table): %s\n", FILENAME, FNR, trim(out)
    }'
  )
  rm -f "$scan_list"
}

# edges ROOT: "from to file:line" for each include of one room's file into another room
edges() { scan "$1" | awk -F '\t' '$1 == "E" { print $2, $3, $4 }'; }

check() {
  local root=$1 bad=0 allowed from to at scanned all_edges
  scanned=$(scan "$root") || return 1
  # rooms: each edge allowed by the table
  declare -A may
  for r in "${ROOMS[@]}"; do may[${r%%:*}]=" ${r#*:} "; done
  all_edges=$(awk -F '\t' '$1 == "E" { print $2, $3, $4 }' <<< "$scanned")
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
  # family, cpu-call (found by the scan)
  grep '^V' <<< "$scanned" | cut -f2- | grep . && bad=1
  # size: the files over the limit, then whether each says GENERATED
  local f n
  while read -r n f; do
    head -1 "$root/$f" | grep -q GENERATED && continue
    echo "$f:$((MAX_LINES + 1)): size: $n lines, over $MAX_LINES (split it by job; generated tables say GENERATED on their first line)"
    bad=1
  done < <(cd "$root" && git ls-files -co --exclude-standard | grep -E '\.(c|h|cu|cuh|cpp|sh)$' |
    grep -v '^tests/fixtures/' | xargs wc -l | awk -v max=$MAX_LINES '$2 != "total" && $1 > max')
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
