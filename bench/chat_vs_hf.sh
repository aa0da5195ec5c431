#!/usr/bin/env bash
# chat_vs_hf.sh: chat-template rendering + tokenization of the C data pipeline (build/bench-chat:
# jinja/ and data/tokenizer.c) against transformers' apply_chat_template(tokenize=True)
# (bench/chat_hf.py), same tokenizer, template and records, one thread each. A benchmark, not a
# test: it needs the Python venv of docs/benchmarks.md (transformers, tokenizers, jinja2; no torch).
#
#   bash bench/chat_vs_hf.sh [--tokenizer DIR] [--chat-template FILE] [--data JSONL]
#                            [--build DIR] [--python PY] [--core N]
#
# Defaults: --tokenizer tests/fixtures/tokenizer_m2, --chat-template
# ../shared/templates/MiniMax-M2.jinja, --data ../shared/data/gsm8k/train.jsonl, --build build
# (bench-chat must be built there), --python $MT_BENCH_PYTHON or /work/pyref/bin/python; --core N
# pins both runs to CPU N with taskset. Run from anywhere; relative paths are the caller's.
# Prints the two result lines ("RESULT chat: ..." from bench-chat, "PEER chat: ..." from
# chat_hf.py), "ratio: X" (C records/s over Python's: > 1, C is faster), and per run the share of
# the machine's CPU that other processes used meanwhile (/proc/stat busy time minus the run's own
# CPU time, as bench/train_vs_torch.sh measures it): above ~5 % the timings are not reliable.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

tokenizer="$root/tests/fixtures/tokenizer_m2"
template="$(realpath -m "$root/../shared/templates/MiniMax-M2.jinja")"
data="$(realpath -m "$root/../shared/data/gsm8k/train.jsonl")"
build="$root/build"
py="${MT_BENCH_PYTHON:-/work/pyref/bin/python}"
core=""
while [ $# -gt 0 ]; do
  case "$1" in
  --tokenizer) tokenizer="$(realpath "$2")"; shift 2 ;;
  --chat-template) template="$(realpath "$2")"; shift 2 ;;
  --data) data="$(realpath "$2")"; shift 2 ;;
  --build) build="$(realpath "$2")"; shift 2 ;;
  --python) py="$2"; shift 2 ;;
  --core) core="$2"; shift 2 ;;
  -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
  *) echo "$0: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin="$build/bench-chat"
[ -x "$bin" ] || { echo "$0: no $bin: build the bench-chat target first (--build DIR)" >&2; exit 2; }
[ -d "$tokenizer" ] || { echo "$0: $tokenizer: no tokenizer directory" >&2; exit 2; }
[ -r "$template" ] || { echo "$0: $template: cannot read the chat template" >&2; exit 2; }
[ -r "$data" ] || { echo "$0: $data: cannot read the records" >&2; exit 2; }
"$py" -c "import transformers, tokenizers, jinja2" 2>/dev/null || {
  echo "$0: $py lacks transformers/tokenizers/jinja2; create the venv as docs/benchmarks.md says" >&2
  exit 2
}
pin=()
if [ -n "$core" ]; then
  command -v taskset >/dev/null || { echo "$0: --core needs taskset" >&2; exit 2; }
  pin=(taskset -c "$core")
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Interference: CPU time the whole machine spent (/proc/stat: user, nice, system, irq, softirq,
# steal) minus what the measured command and its children used, as a share of all CPUs.
hz="$(getconf CLK_TCK)"
ncpu="$(nproc)"
cpu_busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
others=""
measured() { # name command...: runs it, output in $tmp/name.log, appends to $others
  local name="$1" b0 b1 t0 t1 rc=0
  shift
  b0="$(cpu_busy)"
  t0="$(date +%s.%N)"
  /usr/bin/time -f "%U %S" -o "$tmp/$name.time" "$@" >"$tmp/$name.log" 2>&1 || rc=$?
  t1="$(date +%s.%N)"
  b1="$(cpu_busy)"
  if [ "$rc" -ne 0 ]; then
    tail -20 "$tmp/$name.log" >&2
    echo "$0: $name failed (exit $rc)" >&2
    exit 1
  fi
  others+="  $name: $(awk -v b0="$b0" -v b1="$b1" -v t0="$t0" -v t1="$t1" -v hz="$hz" \
    -v n="$ncpu" 'NR == 1 { own = $1 + $2; wall = t1 - t0;
      o = (b1 - b0) / hz - own; if (o < 0) o = 0;
      p = 100 * o / (wall * n);
      if (wall < 0.5) { printf "%.2f s wall (start-up included): too short to tell", wall; exit }
      printf "%.2f s wall (start-up included), own CPU %.2f s, other processes %.0f%% of the %d CPUs%s",
             wall, own, p, n, (p > 5 ? "  <- disturbed" : "") }' "$tmp/$name.time")"$'\n'
}

measured c env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "${pin[@]}" \
  "$bin" --tokenizer "$tokenizer" --chat-template "$template" --data "$data"
measured python env OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false "${pin[@]}" \
  "$py" "$here/chat_hf.py" --tokenizer "$tokenizer" --chat-template "$template" --data "$data"
c_line="$(grep -m1 '^RESULT chat:' "$tmp/c.log")" ||
  { cat "$tmp/c.log" >&2; echo "$0: no 'RESULT chat:' line from bench-chat" >&2; exit 1; }
py_line="$(grep -m1 '^PEER chat:' "$tmp/python.log")" ||
  { cat "$tmp/python.log" >&2; echo "$0: no 'PEER chat:' line from chat_hf.py" >&2; exit 1; }

echo "$c_line"
echo "$py_line"
c_n="$(echo "$c_line" | awk '{print $3}')"
py_n="$(echo "$py_line" | awk '{print $3}')"
[ "$c_n" = "$py_n" ] || echo "WARNING: bench-chat did $c_n records, chat_hf.py $py_n" >&2
awk -v a="$(echo "$c_line" | awk '{print $(NF - 1)}')" -v b="$(echo "$py_line" | awk '{print $(NF - 1)}')" \
  'BEGIN { printf "ratio: %.2f\n", a / b }'
echo "tokenizer $tokenizer, template $template, data $data${core:+, both pinned to CPU $core}"
echo "interference (whole runs; above ~5% the records/s are not reliable):"
printf "%s" "$others"
