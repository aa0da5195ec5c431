#!/usr/bin/env bash
# fuzz.sh: builds the fuzz targets (tests/fuzz, clang + libFuzzer + ASan/UBSan) and runs each
# over its seeds and mutations of them, as many targets at once as there are cores.
#   bash tools/fuzz.sh            60 s of fuzzing per target, the corpus kept in build-fuzz/
#   bash tools/fuzz.sh 600 [T..]  10 minutes per target (or only targets T: toml, safetensors,
#                                 config, tokenizer_json, encode, sample, jsonl, jinja)
#   bash tools/fuzz.sh --runs N   N mutations per target from the seeds alone, with a fixed
#                                 random seed (CI: a short regression run, not a search)
# A crash, leak, sanitizer report or hang fails the run with the target's name and the input that
# did it (build-fuzz/<target>-crash-*); replay one with build-fuzz/fuzz_<target> FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=(-max_total_time=60)
corpus_dir=build-fuzz/corpus
if [ "${1:-}" = "--runs" ]; then
  # a fresh corpus: the seeds and what these runs add, nothing from earlier searches
  mode=(-runs="${2:?--runs N}" -seed=1)
  corpus_dir=build-fuzz/corpus-runs
  rm -rf "$corpus_dir"
  shift 2
elif [ -n "${1:-}" ]; then
  mode=(-max_total_time="$1")
  shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(toml safetensors config tokenizer_json encode sample jsonl jinja)
mkdir -p build-fuzz
log=build-fuzz/build.log
cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang > "$log" 2>&1 ||
  { cat "$log"; exit 1; }
cmake --build build-fuzz -j "$(nproc)" >> "$log" 2>&1 || { tail -40 "$log"; exit 1; }

seeds=tests/fuzz/seeds
declare -A corpus=(
  [toml]="recipes tests/recipes"
  [safetensors]="$seeds/safetensors"
  [config]="recipes/configs"
  [tokenizer_json]="$seeds/tokenizer_json"
  [encode]="$seeds/text"
  [sample]="$seeds/text"
  [jsonl]="$seeds/jsonl"
  [jinja]="$seeds/jinja"
)
for t in "${targets[@]}"; do
  [ -n "${corpus[$t]:-}" ] || { echo "fuzz.sh: no target '$t'"; exit 2; }
done
# fuzz_one T: fuzz_T over its corpus; its output in build-fuzz/T.log, then its exit code and
# seconds in build-fuzz/T.done
fuzz_one() {
  local t="$1" start rc=0
  # new inputs go to the first directory (kept between runs); the seed directories are read only
  mkdir -p "$corpus_dir/$t"
  start=$(date +%s)
  # shellcheck disable=SC2086 # the seed directories are a word list
  build-fuzz/fuzz_$t "${mode[@]}" -max_len=16384 -timeout=20 -rss_limit_mb=4096 \
    -artifact_prefix="build-fuzz/$t-" "$corpus_dir/$t" ${corpus[$t]} > "build-fuzz/$t.log" 2>&1 ||
    rc=$?
  echo "$rc $(($(date +%s) - start))" > "build-fuzz/$t.done"
}
# the targets side by side, one a core; then each one's verdict in order
rm -f build-fuzz/*.done
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
for t in "${targets[@]}"; do
  read -r rc secs < "build-fuzz/$t.done"
  if [ "$rc" -ne 0 ]; then
    tail -40 "build-fuzz/$t.log"
    echo "FAIL: fuzz_$t (input: $(ls build-fuzz/$t-* 2>/dev/null | head -1))"
    exit 1
  fi
  echo "ok: fuzz_$t, $(grep -o 'Done [0-9]* runs' "build-fuzz/$t.log") in $secs s," \
    "coverage $(grep -o 'cov: [0-9]*' "build-fuzz/$t.log" | tail -1 | cut -d' ' -f2) edges"
done
