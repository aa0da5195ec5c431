#!/usr/bin/env bash
# docs_commands.sh: the command blocks of README.md and docs/*.md that are marked, checked
# against the code (ctest eval_docs_commands; docs/design.md, "Docs that run").
#   docs_commands.sh BUILD_DIR [FILE.md...]   (default: README.md docs/*.md; run from the source
#                                              directory; exit 1 with "FILE:LINE: ..." lines)
#   docs_commands.sh BUILD_DIR --self-test    (stale paths and flags in a scratch doc must fail)
# The marker: a line `<!-- runnable -->` or `<!-- checked -->` right above a code block (blank
# lines between allowed; the block indented 4 spaces, or fenced with ```). Both kinds are
# checked: every word that names a file of the repository (it starts with one of its top-level
# folders: recipes/, tests/, docs/, launch/, tools/, bench/, ...) must exist, and every --flag
# given to a minimax-* program must appear in that program's --help (minimax-train's --set keys
# in the key table of train/recipe.c). A runnable block is also run, with bash -e -o
# pipefail, in a scratch directory holding links to the repository's folders (so recipes/... and
# tests/fixtures/... resolve and its outputs stay out of the checkout), with BUILD_DIR first on
# PATH; it must exit 0 within 120 s. Usage lines with placeholders (DIR, N, [--flag X]) are
# marked `checked`: their flags are checked, the placeholders are not paths.
set -uo pipefail
build=$(realpath "$1")
shift
src=$(pwd)
tops="recipes|tests|docs|launch|tools|bench|core|autograd|kernels|jinja|data|models|eval|train|serve|apps"
fail=0
bad() {
  echo "$1: $2"
  fail=1
}

# the blocks of FILE after a marker: "KIND<TAB>LINE<TAB>command" lines, continuations joined
blocks() {
  awk '
    function flush() { if (cmd != "") print kind "\t" start "\t" cmd; cmd = "" }
    /^<!-- (runnable|checked) -->[ \t]*$/ { flush(); kind = ($0 ~ /runnable/) ? "runnable" : "checked"; want = 1; inb = 0; next }
    want && /^[ \t]*$/ && !inb { next }
    want && !inb && /^```/ { inb = 2; next }
    want && !inb && /^    / { inb = 1 }
    want && inb == 2 && /^```/ { flush(); want = 0; inb = 0; next }
    want && inb == 1 && !/^    / && !/^[ \t]*$/ { flush(); want = 0; inb = 0; next }
    want && inb {
      line = $0; if (inb == 1) sub(/^    /, "", line)
      if (line ~ /^[ \t]*$/) next
      if (cmd == "") start = NR
      if (cmd ~ /\\$/) { sub(/\\$/, "", cmd); cmd = cmd " " line } else { flush(); start = NR; cmd = line }
      next
    }
    want && !inb { want = 0 }
    END { flush() }' "$1"
}

# the --help text of a program (cached)
declare -A helps
help_of() {
  local tool=$1
  if [ -z "${helps[$tool]+x}" ]; then
    helps[$tool]=$("$build/$tool" --help 2>&1)
  fi
  printf '%s' "${helps[$tool]}"
}

# the static checks of one command line
last_tool=""
check_line() {
  local where=$1 cmd=$2 words w tool="" flag key
  # shell words without running anything: xargs honours quotes; a comment ends the line
  mapfile -t words < <(printf '%s\n' "${cmd%%  #*}" | sed 's/ # .*//' | xargs -n1 printf '%s\n' 2> /dev/null)
  # a usage line that goes on from the one before ("    [--flag X]") keeps its program
  [[ "${words[0]:-}" == [\[\(-]* ]] && tool=$last_tool
  for w in "${words[@]}"; do
    case "$w" in
    '|' | '&&' | '||' | ';' | '&' | '>' | '2>') tool="" ;;
    esac
    w=${w#[}
    w=${w#(}
    w=${w%...}
    w=${w%]}
    w=${w%)}
    local base=${w##*/}
    if [[ "$base" =~ ^minimax-[a-z]+$ ]]; then
      if [ -x "$build/$base" ]; then tool=$base; else bad "$where" "$w: no such program in the build"; fi
      last_tool=$tool
      continue
    fi
    if [ -n "$tool" ] && [[ "$w" == --* ]]; then
      flag=${w%%=*}
      flag=${flag%%|*}
      flag=${flag%,}
      if [ "$flag" = "--" ]; then continue; fi
      grep -q -- "$flag\b" <<< "$(help_of "$tool")" || bad "$where" "$tool $flag: not in $tool --help"
    fi
    if [ "$tool" = minimax-train ] && [[ "$w" =~ ^[a-z_]+\.[a-z_0-9]+= ]] && [[ "$w" != table.key=* ]]; then
      key=${w%%=*}
      grep -q -- "\"$key\"" "$src/train/recipe.c" || bad "$where" "recipe key $key: not in train/recipe.c"
    fi
    # a path of the repository (a value after = included)
    local p=${w#*=}
    p=${p%%[,:\)\'\"]*}
    if [[ "$p" =~ ^($tops)/[A-Za-z0-9_./-]+$ ]] && [[ "$p" != *'*'* ]]; then
      [ -e "$src/$p" ] || bad "$where" "$p does not exist"
    fi
  done
}

check_files() {
  local f kind line cmd n=0 ran=0
  for f in "$@"; do
    while IFS=$'\t' read -r kind line cmd; do
      n=$((n + 1))
      check_line "$f:$line" "$cmd"
    done < <(blocks "$f")
  done
  echo "docs_commands: $n marked command lines checked in $# files"
}

# runs the runnable blocks of the files, each as one bash script in a scratch directory
run_files() {
  local f kind line cmd scratch t0 n=0 m
  scratch=$(mktemp -d "${MT_TEST_TMPDIR:-/tmp}/docs-run.XXXXXX")
  for t in "$src"/*/; do
    t=${t%/}
    [[ "$(basename "$t")" =~ ^($tops)$ ]] && ln -s "$t" "$scratch/$(basename "$t")"
  done
  declare -A where
  for f in "$@"; do
    while IFS=$'\t' read -r kind line cmd; do
      [ "$kind" = runnable ] || continue
      m=$(awk -v L="$line" 'NR <= L && /^<!-- (runnable|checked) -->/ { m = NR } END { print m }' "$f")
      where[$f:$m]=1
      printf '%s\n' "$cmd" >> "$scratch/$(printf '%s' "$f:$m" | tr '/' '%').sh"
    done < <(blocks "$f")
  done
  for w in "${!where[@]}"; do
    local s="$scratch/$(printf '%s' "$w" | tr '/' '%').sh"
    n=$((n + 1))
    t0=$(date +%s%N)
    if ! (cd "$scratch" && PATH="$build:$PATH" timeout 120 bash -e -o pipefail "$s" > "$s.log" 2>&1); then
      bad "$w" "the runnable block failed:"
      sed 's/^/    /' "$s" | head -5
      tail -20 "$s.log" | sed 's/^/    | /'
    else
      echo "docs_commands: ran $w ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
    fi
  done
  echo "docs_commands: $n runnable blocks run"
  [ "$fail" -eq 0 ] && rm -rf "$scratch"
}

if [ "${1:-}" = --self-test ]; then
  d=$(mktemp -d "${MT_TEST_TMPDIR:-/tmp}/docs-self.XXXXXX")
  cat > "$d/good.md" << 'EOF'
Text.

<!-- runnable -->

    minimax-info --config recipes/configs/tiny.json

<!-- checked -->

    mpirun -np N minimax-eval --model DIR --data test.jsonl [--limit N] [--task gsm8k|messages]
EOF
  printf 'x\n<!-- checked -->\n\n    minimax-info --config recipes/configs/no-such.json\n' > "$d/stale-path.md"
  printf 'x\n\n<!-- runnable -->\n    minimax-eval --no-such-flag 3\n' > "$d/stale-flag.md"
  printf '<!-- runnable -->\n```sh\nminimax-info --config recipes/configs/tiny.json --ranks 0\n```\n' > "$d/fails.md"
  printf '<!-- checked -->\n\n    minimax-train recipes/tiny.toml --set train.no_such_key=1\n' > "$d/stale-key.md"
  ok=0
  out=$(bash "$0" "$build" "$d/good.md" 2>&1) || { echo "FAIL: a good doc fails:"; echo "$out"; ok=1; }
  for c in "stale-path.md:4: recipes/configs/no-such.json does not exist" \
    "stale-flag.md:4: minimax-eval --no-such-flag: not in minimax-eval --help" \
    "fails.md:1: the runnable block failed" \
    "stale-key.md:3: recipe key train.no_such_key: not in train/recipe.c"; do
    f=${c%%:*}
    out=$(bash "$0" "$build" "$d/$f" 2>&1) && { echo "FAIL: $f passed"; ok=1; continue; }
    grep -qF -- "${c#*:}" <<< "$out" || { echo "FAIL: $f: want \"$c\", got:"; echo "$out"; ok=1; }
    echo "ok: $f refused: $(grep -m1 -F -- "${c#*:}" <<< "$out")"
  done
  rm -rf "$d"
  exit $ok
fi

files=("$@")
[ ${#files[@]} -gt 0 ] || files=(README.md docs/*.md)
check_files "${files[@]}"
run_files "${files[@]}"
exit $fail
