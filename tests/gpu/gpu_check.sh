#!/usr/bin/env bash
# gpu_check.sh BUILD_DIR STEP...: ctest gpu_check_standalone (tests/gpu/gpu_check.cmake), the
# logic of launch/gpu-check.sh without a GPU and without its build, in seconds:
#  1. on BUILD_DIR's binaries (MT_GPU_CHECK_BUILD_DIR; CUDA_VISIBLE_DEVICES=-1, so every GPU case
#     skips even on a GPU machine): exit 0; $OUT holds exactly summary.txt, tests.log,
#     build.log and bench.log; summary.txt has one line per STEP (the gpu_* cases of the cmake
#     lists and the script's own steps), every gpu_* case skipped, in the documented order, the
#     total last; the summary is the end of stdout;
#  2. MT_GPU_CHECK_ONLY: only the steps it matches;
#  3. MT_GPU_CHECK_BUDGET=0: every step "notrun" with the command that reruns it;
#  4. fake binaries: a failing case is a FAIL line and exit 1, a missing binary "notrun", and a
#     SIGTERM while a case hangs leaves an INTERRUPTED line and the total, and ends the case;
#  5. a fake compute-sanitizer: racecheck's RACECHECK SUMMARY and memcheck's ERROR SUMMARY read.
set -u
build=$1
shift
steps=("$@")
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
tmp=$(mktemp -d "${MT_TEST_TMPDIR:-${TMPDIR:-/tmp}}/gpu_check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check COND_DESCRIPTION CMD...: one verdict line
  local what=$1
  shift
  if "$@"; then echo "ok    $what"; else
    echo "FAIL  $what"
    fails=$((fails + 1))
  fi
}
# gpu_check NAME BUILD [VAR=VALUE...]: the script on BUILD's binaries into $tmp/NAME (OUT), its
# stdout in NAME/stdout
gpu_check() {
  local name=$1 dir=$2
  shift 2
  mkdir -p "$tmp/$name/out" "$tmp/$name/work"
  env CUDA_VISIBLE_DEVICES=-1 OUT="$tmp/$name/out" MT_GPU_CHECK_TMP="$tmp/$name/work" \
    MT_GPU_CHECK_BUILD_DIR="$dir" "$@" bash "$src/launch/gpu-check.sh" > "$tmp/$name/stdout" 2>&1
}
lineno() { grep -n -m1 -E "^[A-Za-z]+ +$2: " "$1" | cut -d: -f1; }
only_files() { # DIR: exactly the four result files, no directory
  [ "$(cd "$1" && find . -mindepth 1 | LC_ALL=C sort | tr '\n' ' ')" = "./bench.log ./build.log ./summary.txt ./tests.log " ]
}

# 1. the default run
t0=$SECONDS
gpu_check default "$build"
rc=$?
s=$tmp/default/out/summary.txt
echo "default run: exit $rc in $((SECONDS - t0)) s"
check "exit 0 with every GPU case skipped" [ "$rc" = 0 ]
check "\$OUT holds summary.txt, tests.log, build.log, bench.log and nothing else" only_files "$tmp/default/out"
missing=""
for st in "${steps[@]}"; do [ -n "$(lineno "$s" "$st")" ] || missing="$missing $st"; done
check "summary.txt names all ${#steps[@]} steps${missing:+ (missing:$missing)}" [ -z "$missing" ]
ran=$(grep -cE '^(pass|FAIL|TIMEOUT) +gpu_' "$s")
check "no gpu_* case ran without a device ($ran did)" [ "$ran" = 0 ]
order=(gpu_nccl_np1 gpu_attention_bf16 gpu_moe_experts_bf16_lanes1 gpu_optim gpu_generate gpu_step_check_fp32
  gpu_step_check_bf16 gpu_step_check_bf16_nosync gpu_step_check_bf16_mid_nosync gpu_view
  bench_gpu_ops step_bf16_profile step_fp32 sanitize_racecheck_gpu_attention_bf16 bench_msa peer
  total)
prev=0 bad=""
for st in "${order[@]}"; do
  n=$(lineno "$s" "$st")
  if [ -z "$n" ] || [ "$n" -le "$prev" ]; then bad="$bad $st"; else prev=$n; fi
done
check "steps in the documented order${bad:+ (out of order or missing:$bad)}" [ -z "$bad" ]
check "the total is the last line" grep -qE '^info +total: ' <(tail -1 "$s")
check "stdout ends with the summary" cmp -s <(tail -n "$(wc -l < "$s")" "$tmp/default/stdout") "$s"
check "tests.log has each case's output" grep -q '^=== gpu_view: ' "$tmp/default/out/tests.log"

# 2. a subset
gpu_check only "$build" MT_GPU_CHECK_ONLY='^gpu_(matmul|step_check_bf16_nosync)$'
s=$tmp/only/out/summary.txt
n=$(grep -cvE '^info ' "$s")
check "MT_GPU_CHECK_ONLY: exactly its 2 steps ($n lines)" [ "$n" = 2 ]
check "MT_GPU_CHECK_ONLY: gpu_matmul" grep -qE '^skip +gpu_matmul: ' "$s"
check "MT_GPU_CHECK_ONLY: gpu_step_check_bf16_nosync" grep -qE '^skip +gpu_step_check_bf16_nosync: ' "$s"

# 3. no budget left
gpu_check budget "$build" MT_GPU_CHECK_BUDGET=0
rc=$?
s=$tmp/budget/out/summary.txt
check "MT_GPU_CHECK_BUDGET=0: exit 0 ($rc)" [ "$rc" = 0 ]
check "MT_GPU_CHECK_BUDGET=0: gpu_matmul notrun, with its rerun" \
  grep -qF "notrun  gpu_matmul: out of budget (" "$s"
check "MT_GPU_CHECK_BUDGET=0: the rerun command" grep -qF "rerun: MT_GPU_CHECK_ONLY='^gpu_matmul\$'" "$s"

# 4. fake binaries: gpu_beta_bf16 fails, gpu_alpha passes, gpu_gamma hangs until a SIGTERM
fake=$tmp/fake
mkdir -p "$fake/tests"
cat > "$fake/tests/test_gpu_ops" << 'EOF'
#!/bin/sh
[ $# = 1 ] || { echo "usage: test_gpu_ops CASE   (cases: gpu_alpha gpu_beta_bf16 gpu_gamma op_gpu_harness)" >&2; exit 2; }
case $1 in
  gpu_alpha) echo "PASSED gpu_alpha" ;;
  gpu_beta_bf16) echo "FAIL fake.c:1: e_dev 3e-2 > 2 e_ref"; exit 1 ;;
  gpu_gamma) echo $$ > "$FAKE_PID"; exec sleep 300 ;;
  *) echo "SKIP $1"; exit 77 ;;
esac
EOF
chmod +x "$fake/tests/test_gpu_ops"
export FAKE_PID=$tmp/fake.pid
mkdir -p "$tmp/fake_run/out" "$tmp/fake_run/work"
# in the background itself (not in a subshell), so that the TERM below reaches the script
CUDA_VISIBLE_DEVICES=-1 OUT=$tmp/fake_run/out MT_GPU_CHECK_TMP=$tmp/fake_run/work \
  MT_GPU_CHECK_BUILD_DIR=$fake bash "$src/launch/gpu-check.sh" > "$tmp/fake_run/stdout" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$FAKE_PID" ] && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid"
rc=$?
s=$tmp/fake_run/out/summary.txt
check "SIGTERM: exit 130 ($rc)" [ "$rc" = 130 ]
check "a failing case: its FAIL line names the failed check" \
  grep -qE '^FAIL +gpu_beta_bf16: exit 1 after [0-9]+ s: FAIL fake.c:1: e_dev' "$s"
check "a passing case" grep -qE '^pass +gpu_alpha: ' "$s"
check "a binary that was not built: notrun" grep -qE '^notrun +gpu_step_check_fp32: bench-gpu-step was not built' "$s"
check "SIGTERM: the INTERRUPTED line names the running case" grep -qE '^INTERRUPTED gpu_gamma: signal TERM' "$s"
check "SIGTERM: the total is still written" grep -qE '^info +total: .*1 FAIL.*interrupted' <(tail -1 "$s")
check "SIGTERM: the hung case was ended" bash -c "sleep 0.5; ! kill -0 $(cat "$FAKE_PID" 2> /dev/null || echo 999999) 2> /dev/null"
check "SIGTERM: still only the four files" only_files "$tmp/fake_run/out"

# 5. compute-sanitizer's summaries (a fake one on PATH, fake cases that pass): racecheck passes on
# "RACECHECK SUMMARY: ... (0 errors, ...)" and fails naming its error count; memcheck passes on
# "ERROR SUMMARY: 0 errors" and fails without one
san=$tmp/san
mkdir -p "$san/b/tests" "$san/bin" "$san/out" "$san/work"
cat > "$san/b/tests/test_gpu_ops" << 'EOF'
#!/bin/sh
[ $# = 1 ] || { echo "usage: test_gpu_ops CASE   (cases: gpu_attention_bf16 gpu_lightning_bf16 gpu_moe_experts_bf16)" >&2; exit 2; }
echo "PASSED $1"
EOF
cat > "$san/bin/compute-sanitizer" << 'EOF'
#!/bin/sh
tool=$2
shift 8 # --tool T --error-exitcode 99 --print-limit 50 --report-api-errors no
"$@" || exit
case $tool:$2 in
  racecheck:gpu_attention_bf16) echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" ;;
  racecheck:*) echo "========= Error: Race reported between Write access at k+0x10"
    echo "========= RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warning)"; exit 99 ;;
  memcheck:gpu_moe_experts_bf16) ;;
  *) echo "========= ERROR SUMMARY: 0 errors" ;;
esac
EOF
chmod +x "$san/b/tests/test_gpu_ops" "$san/bin/compute-sanitizer"
PATH=$san/bin:$PATH CUDA_VISIBLE_DEVICES=-1 OUT=$san/out MT_GPU_CHECK_TMP=$san/work \
  MT_GPU_CHECK_BUILD_DIR=$san/b MT_GPU_CHECK_ONLY='^sanitize_' bash "$src/launch/gpu-check.sh" \
  > "$san/stdout" 2>&1
rc=$? ss=$san/out/summary.txt
check "sanitizers: exit 1 with a failed one ($rc)" [ "$rc" = 1 ]
check "racecheck: 0 errors in its RACECHECK SUMMARY passes" \
  grep -qE '^pass +sanitize_racecheck_gpu_attention_bf16: 0 errors \(racecheck; 0 hazards, 0 warnings\)' "$ss"
check "racecheck: errors in its RACECHECK SUMMARY fail, counted" \
  grep -qE '^FAIL +sanitize_racecheck_gpu_lightning_bf16: 2 errors \(racecheck; 3 hazards, 1 warnings\), exit 99: =+ Error: Race' "$ss"
check "memcheck: ERROR SUMMARY: 0 errors passes" grep -qE '^pass +sanitize_memcheck_gpu_attention_bf16: 0 errors' "$ss"
check "memcheck: no ERROR SUMMARY fails" \
  grep -qE '^FAIL +sanitize_memcheck_gpu_moe_experts_bf16: exit 0, no ERROR SUMMARY' "$ss"

if [ "$fails" != 0 ]; then
  echo "--- summary.txt of the default run:"
  cat "$tmp/default/out/summary.txt"
  echo "--- summary.txt of the fake run:"
  cat "$s"
fi
echo "$fails check(s) failed"
[ "$fails" = 0 ]
