#!/usr/bin/env bash
# gpu-check.sh: the one GPU check for a fresh single-GPU machine with the CUDA toolkit (the
# device tool's H200). Builds, runs every gpu_* test, the checks only hardware can do and the
# benchmarks, and keeps what finished even when it is killed (docs/cuda.md, "launch/gpu-check.sh").
#
#   bash launch/gpu-deps.sh      # here, first: cJSON and PCRE2 into build-gpu-deps/ (the device
#                                # image has neither); then the device call:
#   run(command="bash launch/gpu-check.sh", carry=["build-gpu-deps"], timeout_s=360)
#
# What comes back: at most 4 files in $OUT (else build-gpu-logs/): summary.txt (one line per
# step, appended as each step ends), tests.log (every test's output, appended per case),
# build.log and bench.log. Per-case logs stay in a directory under /tmp (MT_GPU_CHECK_TMP).
# Every step runs under `timeout -k 10` with its own cap, clipped to what is left of the budget
# (MT_GPU_CHECK_BUDGET, default 330 s for the whole script, build included); a step starts only
# with a third of its cap and 10 s left, else its line says "notrun" and how to rerun it.
#
# Order: builds (separate chains: the library, the op test, the optimizer test, bench-gpu-ops,
# the host archive of models/, train/, data/ and jinja/, the step binary, the NCCL test,
# minimax-generate), gpu_nccl_np1 (NCCL_DEBUG=WARN, NCCL_SOCKET_IFNAME=lo), the bf16 /
# fused-kernel / cuDNN cases, gpu_optim, gpu_generate, the training-step checks (bf16 with
# MT_CUDA_SYNC=1 and without), the remaining op cases, bench-gpu-ops, the bf16 step with
# --profile, the fp32 step, compute-sanitizer (racecheck, read from its RACECHECK SUMMARY;
# memcheck, from its ERROR SUMMARY) on one small shape of the bf16 attention, lightning and MoE
# cases, then bench-gpu-ops msa (MSA against dense attention). The op cases are whatever
# test_gpu_ops lists (gpu_*), so new cases run without editing this script. The step checks use
# NCCL when gpu_nccl_np1 passed, else bench-gpu-step --comm self (device copies): a failing or
# missing NCCL costs only NCCL.
#
# Environment:
#   MT_GPU_CHECK_FULL=1         also the PyTorch peer (bench/gpu_peer.py) and the recompute and
#                               offload step benchmarks
#   MT_GPU_CHECK_ONLY=<regex>   only the steps whose name matches (bash ERE; builds always run
#                               and are reused: a rerun compiles only what changed)
#   MT_GPU_CHECK_BUILD_DIR=dir  no build: the binaries of an existing cmake build (ctest
#                               gpu_check_standalone: a CPU build, where every GPU case skips)
#   MT_GPU_CHECK_MODE=cmake|standalone  cmake when the project's dependencies configure (MPI,
#                               HDF5, cJSON, ...), else standalone: gcc + nvcc compile only what
#                               the GPU tests, the benchmarks and minimax-generate need, without
#                               MPI or HDF5 (the device image's case)
#   MT_GPU_CHECK_DEPS=auto|system|carried  standalone: cJSON and PCRE2 from the system, else from
#                               build-gpu-deps/ (auto), or only from one of them
#   MT_GPU_CHECK_BUDGET (330), MT_GPU_CHECK_BENCH_REPS (3), MT_GPU_CHECK_STEP_ARGS (extra
#   bench-gpu-step flags for the step benchmarks), MT_GPU_CHECK_STEP_COMM=nccl|self,
#   MT_GPU_CHECK_REF_BLAS=1 (standalone: the reference sgemm, not OpenBLAS), MT_CUDA_ARCH (90),
#   MT_GPU_CHECK_PYTHON (python3), MT_GPU_CHECK_TMP, NVCC, CC.
set -u -o pipefail

# ---- where things go ------------------------------------------------------------------------

OUTDIR=${OUT:-}
[ -n "$OUTDIR" ] && [ "${OUTDIR#/}" = "$OUTDIR" ] && OUTDIR=$PWD/$OUTDIR # before the cd
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P) || {
  echo "gpu-check: cannot find the repository root" >&2
  exit 1
}
cd "$ROOT" || exit 1
OUTDIR=${OUTDIR:-$ROOT/build-gpu-logs}
mkdir -p "$OUTDIR" || exit 1
SUMMARY=$OUTDIR/summary.txt TESTS_LOG=$OUTDIR/tests.log
BUILD_LOG=$OUTDIR/build.log BENCH_LOG=$OUTDIR/bench.log
: > "$SUMMARY" && : > "$TESTS_LOG" && : > "$BUILD_LOG" && : > "$BENCH_LOG" || exit 1
WORK=${MT_GPU_CHECK_TMP:-}
if [ -n "$WORK" ]; then
  mkdir -p "$WORK" || exit 1
  WORK=$(mktemp -d "$WORK/gpu-check.XXXXXX") || exit 1
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 1
fi

BUDGET=${MT_GPU_CHECK_BUDGET:-330}
FULL=${MT_GPU_CHECK_FULL:-0}
ONLY=${MT_GPU_CHECK_ONLY:-}
REPS=${MT_GPU_CHECK_BENCH_REPS:-3}
JOBS=$(nproc 2> /dev/null || echo 4)
PY=${MT_GPU_CHECK_PYTHON:-python3}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CC=${CC:-$(command -v gcc || command -v cc || echo cc)}
# NCCL names a bootstrap failure inside the VM; one rank needs no other interface than loopback
export NCCL_DEBUG=${NCCL_DEBUG:-WARN} NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$JOBS} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
unset MT_CUDA_SYNC # the tests set it themselves; a benchmark never syncs per kernel

# ---- the summary ----------------------------------------------------------------------------

N_OK=0 N_PASS=0 N_FAIL=0 N_SKIP=0 N_TIMEOUT=0 N_NOTRUN=0 CURRENT="" CHILD="" FINISHED=0
declare -A RC=() T=() # step name -> exit status (what later steps depend on), seconds

# line STATUS NAME DETAIL: one summary line, appended now (a killed run keeps it) and echoed
line() {
  printf '%-7s %s: %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY"
  case $1 in
    ok) N_OK=$((N_OK + 1)) ;;
    pass) N_PASS=$((N_PASS + 1)) ;;
    FAIL) N_FAIL=$((N_FAIL + 1)) ;;
    skip) N_SKIP=$((N_SKIP + 1)) ;;
    TIMEOUT) N_TIMEOUT=$((N_TIMEOUT + 1)) ;;
    notrun) N_NOTRUN=$((N_NOTRUN + 1)) ;;
  esac
}
left() { echo $((BUDGET - SECONDS)); }
selected() { [ -z "$ONLY" ] || [[ $1 =~ $ONLY ]]; }

finish() { # the last line, once: counts and where the logs are
  [ "$FINISHED" = 1 ] && return
  FINISHED=1
  line info total "$N_PASS pass, $N_FAIL FAIL, $N_TIMEOUT TIMEOUT, $N_SKIP skip, $N_NOTRUN notrun ($N_OK builds ok) in $SECONDS s${1:+; $1}; per-case logs in $WORK"
  echo
  echo "================ gpu-check summary ($OUTDIR/summary.txt) ================"
  cat "$SUMMARY"
}
on_signal() {
  [ -n "$CHILD" ] && kill -TERM -- "-$CHILD" 2> /dev/null # timeout leads its process group
  line INTERRUPTED "${CURRENT:-gpu-check}" "signal $1 after $SECONDS s; the steps above finished"
  finish "interrupted"
  exit 130
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'on_signal HUP' HUP
trap 'finish "the script stopped early (exit $?)"' EXIT

# first_reason LOG: the line of a log that says why a step failed or skipped
first_reason() {
  local r
  r=$(grep -m1 -E 'NCCL WARN|FAIL|[Ee]rror|MISMATCH|SKIP|no usable|not built|what\(\)|Assertion' "$1" 2> /dev/null)
  [ -n "$r" ] || r=$(grep -m1 -v '^[[:space:]]*$' "$1" 2> /dev/null)
  printf '%s' "${r:0:220}"
}

# append_log LOG DEST HEADER: a step's log into tests.log or bench.log (at most 2 MB of it)
append_log() {
  {
    echo "=== $3"
    head -c 2000000 "$1"
    [ "$(wc -c < "$1")" -gt 2000000 ] && echo "=== (truncated: the whole log is $1)"
    echo
  } >> "$2"
}

# capped CAP OUTFILE CMD...: CMD under timeout -k 10 CAP, in the background so that a signal to
# this script is handled at once (the trap ends the step's process group too); its exit status
capped() {
  local cap=$1 out=$2
  shift 2
  timeout -k 10 "$cap" "$@" >> "$out" 2>&1 < /dev/null &
  CHILD=$!
  wait "$CHILD"
  local rc=$?
  CHILD=""
  return "$rc"
}

# run_step NAME CAP DEST CMD...: CMD capped at CAP (clipped to the budget), its output in
# $WORK/NAME.log, appended to DEST, one summary line (none with QUIET=1: the caller writes it);
# RC[NAME] = its exit status, T[NAME] its seconds
run_step() {
  local name=$1 cap=$2 dest=$3 rest t rc
  shift 3
  rest=$(left)
  if [ "$rest" -lt 10 ] || [ "$rest" -lt $((cap / 3)) ]; then
    line notrun "$name" "out of budget ($rest s left of MT_GPU_CHECK_BUDGET=$BUDGET); rerun: MT_GPU_CHECK_ONLY='^$name\$'"
    RC[$name]=notrun
    return
  fi
  [ "$rest" -lt "$cap" ] && cap=$rest
  CURRENT=$name
  t=$SECONDS
  : > "$WORK/$name.log"
  capped "$cap" "$WORK/$name.log" "$@"
  rc=$?
  CURRENT=""
  RC[$name]=$rc T[$name]=$((SECONDS - t))
  append_log "$WORK/$name.log" "$dest" "$name: $* (exit $rc after $((SECONDS - t)) s)"
  [ "${QUIET:-0}" = 1 ] && return
  case $rc in
    0) line pass "$name" "$((SECONDS - t)) s" ;;
    77) line skip "$name" "$(first_reason "$WORK/$name.log")" ;;
    124 | 137) line TIMEOUT "$name" "killed at its $cap s cap (partial output in $(basename "$dest"))" ;;
    *) line FAIL "$name" "exit $rc after $((SECONDS - t)) s: $(first_reason "$WORK/$name.log")" ;;
  esac
}

# step NAME CAP DEST BIN ARGS...: run_step when selected, "notrun" when BIN was not built
step() {
  local name=$1 bin=$4
  selected "$name" || return 0
  if [ ! -x "$bin" ]; then
    line notrun "$name" "$(basename "$bin") was not built (see its build line)"
    RC[$name]=notrun
    return
  fi
  run_step "$1" "$2" "$3" "${@:5}"
}

# ---- the machine ----------------------------------------------------------------------------

GPU=$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2> /dev/null | head -1)
ARCH=${MT_CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -1 | tr -d ' .')}
case "$ARCH" in [0-9][0-9] | [0-9][0-9][0-9]) ;; *) ARCH=90 ;; esac
BUILD_DIR=${MT_GPU_CHECK_BUILD_DIR:-}
MODE=${MT_GPU_CHECK_MODE:-}
[ -n "$BUILD_DIR" ] && MODE=given
line info gpu-check "$(date -u +%FT%TZ) on $(hostname), $JOBS cores, budget $BUDGET s, full=$FULL${ONLY:+, only=$ONLY}"
line info device "${GPU:-none (nvidia-smi lists no GPU: every GPU case will skip)}; building for sm_$ARCH"

# ---- build ----------------------------------------------------------------------------------
# Binaries, in every mode: $B/tests/test_gpu_ops, test_gpu_optim, test_dist_nccl,
# $B/bench-gpu-ops, $B/bench-gpu-step, $B/minimax-generate. A chain that fails leaves its binary missing, and only
# the steps that need that binary say "notrun".

# build_step NAME CAP CMD...: a build command, its output into build.log
build_step() {
  local name=$1 cap=$2 t rc rest from
  shift 2
  rest=$(left)
  [ "$rest" -lt "$cap" ] && cap=$((rest > 10 ? rest : 10))
  CURRENT=$name
  t=$SECONDS
  echo "=== $name: $(printf '%s ' "$@" | cut -c1-300)" >> "$BUILD_LOG"
  from=$(($(wc -c < "$BUILD_LOG") + 1)) # this step's part of build.log
  capped "$cap" "$BUILD_LOG" "$@"
  rc=$?
  CURRENT=""
  case $rc in
    0) line ok "$name" "$((SECONDS - t)) s" ;;
    124 | 137) line TIMEOUT "$name" "killed at its $cap s cap (build.log)" ;;
    *) line FAIL "$name" "exit $rc after $((SECONDS - t)) s: $(tail -c "+$from" "$BUILD_LOG" | grep -m1 -E 'error|Error' | cut -c1-200) (build.log)" ;;
  esac
  return "$rc"
}

cmake_build() {
  B=$ROOT/build-gpu
  if [ ! -f "$B/build.ninja" ]; then
    build_step configure 120 cmake -S . -B "$B" -G Ninja -DMT_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DCMAKE_CUDA_COMPILER="$NVCC" || return 1
  fi
  build_step build_test_gpu_ops 300 cmake --build "$B" -j "$JOBS" --target test_gpu_ops
  build_step build_test_gpu_optim 120 cmake --build "$B" -j "$JOBS" --target test_gpu_optim
  build_step build_bench_gpu_ops 120 cmake --build "$B" -j "$JOBS" --target bench-gpu-ops
  build_step build_bench_gpu_step 180 cmake --build "$B" -j "$JOBS" --target bench-gpu-step
  build_step build_test_dist_nccl 120 cmake --build "$B" -j "$JOBS" --target test_dist_nccl
  build_step build_minimax_generate 120 cmake --build "$B" -j "$JOBS" --target minimax-generate
  HAVE_NCCL=1
}

# standalone: objects in build-gpu-sa/obj, rebuilt when missing, older than their source or
# than the newest header, or built with other flags (or against another cJSON / PCRE2)
# probe_lib NAME HEADER PIPMOD: INC/LINK flags for a library the toolkit or the system has, else
# the copy in pip's nvidia wheel (torch's dependency; linked by soname with an rpath)
probe_lib() {
  local name=$1 hdr=$2 mod=$3 d so
  PROBE_INC="" PROBE_LINK=""
  if [ -f "$SA/probe_$name.found" ]; then # a rerun: the first run's answer
    { read -r PROBE_INC && read -r PROBE_LINK; } < "$SA/probe_$name.found"
    return 0
  fi
  [ -f "$SA/probe_$name.none" ] && return 1
  printf '#include <%s>\nint main(void) { return 0; }\n' "$hdr" > "$SA/probe_$name.cu"
  if "$NVCC" "$SA/probe_$name.cu" -o "$SA/probe_$name" "-l$name" > /dev/null 2>&1; then
    PROBE_LINK="-l$name"
  else
    d=$("$PY" -c "import nvidia.$mod as n; print(list(n.__path__)[0])" 2> /dev/null)
    # shellcheck disable=SC2012 # a wheel's library directory: plain names
    so=$(ls "$d/lib/lib$name.so."* 2> /dev/null | head -1)
    if [ -z "$d" ] || [ ! -f "$d/include/$hdr" ] || [ -z "$so" ]; then
      touch "$SA/probe_$name.none"
      return 1
    fi
    PROBE_INC="-I$d/include"
    PROBE_LINK="-L$d/lib -l:$(basename "$so") -Xlinker -rpath -Xlinker $d/lib"
  fi
  printf '%s\n%s\n' "$PROBE_INC" "$PROBE_LINK" > "$SA/probe_$name.found"
}

obj_of() { echo "$SA/obj/$(echo "$1" | tr / _).o"; }

# sa_compile NAME CAP SRC...: the stale sources, in parallel
sa_compile() {
  local name=$1 cap=$2 f o stale=()
  shift 2
  for f in "$@"; do
    o=$(obj_of "$f")
    if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ "$NEWEST_HDR" -nt "$o" ]; then stale+=("$f"); fi
  done
  if [ "${#stale[@]}" = 0 ]; then
    line ok "$name" "up to date (${#} files)"
    return 0
  fi
  # shellcheck disable=SC2016 # expanded by the inner bash
  build_step "$name" "$cap" bash -c 'printf "%s\n" "${@:2}" | xargs -P "$1" -I{} bash "$SA/cc.sh" {}' \
    _ "$JOBS" "${stale[@]}"
}

# sa_link NAME BIN OBJ_AND_FLAGS...: relinked when missing or older than an object
sa_link() {
  local name=$1 bin=$2 a newer=0
  shift 2
  for a in "$@"; do [ -f "$a" ] && [ "$a" -nt "$bin" ] && newer=1; done
  if [ -x "$bin" ] && [ "$newer" = 0 ]; then
    line ok "$name" "up to date"
    return 0
  fi
  rm -f "$bin"
  # shellcheck disable=SC2016 # expanded by the inner bash (LINK: a flag list)
  build_step "$name" 90 bash -c '"$NVCC" -o "$1.part" "${@:2}" $LINK && mv -f "$1.part" "$1"' _ "$bin" "$@"
}

# header_needs FILE: NEEDS = what FILE includes, directly or through the project's headers
# ("..."), one letter per include: X for mpi.h or hdf5.h, J for cJSON, P for PCRE2
declare -A HDR_NEEDS=()
header_needs() {
  local f=$1 d=. h r="" incs=()
  if [ -n "${HDR_NEEDS[$f]+set}" ]; then
    NEEDS=${HDR_NEEDS[$f]}
    return
  fi
  HDR_NEEDS[$f]="" # an include cycle ends here
  [[ $f == */* ]] && d=${f%/*}
  mapfile -t incs < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1/p' "$f")
  for h in "${incs[@]}"; do
    case $h in
      '<mpi.h>' | '<hdf5.h>' | '<H5'*) r+=X ;;
      '<cjson/cJSON.h>') r+=J ;;
      '<pcre2.h>') r+=P ;;
      '"'*)
        h=${h//\"/}
        [ -f "$d/$h" ] && h=$d/$h
        if [ -f "$h" ]; then
          header_needs "$h"
          r+=$NEEDS
        fi
        ;;
    esac
  done
  HDR_NEEDS[$f]=$r NEEDS=$r
}

# probe_host_dep NAME HEADER LIB CALL [PREAMBLE]: cJSON or PCRE2 for models/ and data/: the
# system's (unless MT_GPU_CHECK_DEPS=carried), else the copy launch/gpu-deps.sh extracted into
# build-gpu-deps/ (linked by soname with an rpath); PROBE_INC, PROBE_LINK (nvcc's form) and
# PROBE_FROM when a probe compiles, links and runs
probe_host_dep() {
  local name=$1 hdr=$2 lib=$3 src=$SA/probe_$1.c libdir=$DEPS_DIR/usr/lib/x86_64-linux-gnu so
  PROBE_INC="" PROBE_LINK="" PROBE_FROM=""
  printf '%s\n#include <%s>\nint main(void) { %s; return 0; }\n' "${5:-}" "$hdr" "$4" > "$src"
  if [ "$DEPS" != carried ] && "$CC" "$src" -o "$SA/probe_$name" "-l$lib" > /dev/null 2>&1 &&
    "$SA/probe_$name"; then
    PROBE_LINK="-l$lib" PROBE_FROM="the system's (-l$lib)"
    return 0
  fi
  [ "$DEPS" = system ] && return 1
  # the library under its soname (gpu-deps.sh keeps the files so, without links)
  # shellcheck disable=SC2012 # plain library names
  so=$(cd "$libdir" 2> /dev/null && ls "lib$lib.so."* 2> /dev/null | head -1)
  [ -n "$so" ] && [ -f "$DEPS_DIR/usr/include/$hdr" ] || return 1
  "$CC" "$src" -o "$SA/probe_$name" "-I$DEPS_DIR/usr/include" "-L$libdir" "-l:$so" \
    "-Wl,-rpath,$libdir" > /dev/null 2>&1 && "$SA/probe_$name" || return 1
  PROBE_INC="-I$DEPS_DIR/usr/include"
  PROBE_LINK="-L$libdir -l:$so -Xlinker -rpath -Xlinker $libdir"
  PROBE_FROM="build-gpu-deps/ ($so, $(grep -m1 -E "^lib${lib}[0-9-]*=" "$DEPS_DIR/.packages" 2> /dev/null); launch/gpu-deps.sh)"
}

# sa_archive NAME ARCHIVE SRC...: the sources' objects in one static archive (ar rcs), rebuilt
# when missing, older than an object, or of other members
sa_archive() {
  local name=$1 a=$2 f o objs=() newer=0
  shift 2
  for f in "$@"; do
    o=$(obj_of "$f")
    objs+=("$o")
    [ "$o" -nt "$a" ] && newer=1
  done
  if [ -f "$a" ] && [ "$newer" = 0 ] && [ "$(cat "$a.list" 2> /dev/null)" = "${objs[*]}" ]; then
    line ok "$name" "up to date (${#objs[@]} objects)"
    return 0
  fi
  rm -f "$a"
  # shellcheck disable=SC2016 # expanded by the inner bash
  build_step "$name" 60 bash -c 'rm -f "$1.part" && ar rcs "$1.part" "${@:2}" && mv -f "$1.part" "$1"' \
    _ "$a" "${objs[@]}" && echo "${objs[*]}" > "$a.list"
}

# sa_main NAME BIN MAIN_SOURCE NEEDS: a binary on the library and libmt_host.a (standalone_build's
# lib_obj, host_a, nccl_link and deps_link); "notrun" when NEEDS names (J, P) a cJSON or PCRE2
# that was not found
# shellcheck disable=SC2015 # "compile && link || remove the binary": removed when either fails
sa_main() {
  local name=$1 bin=$2 src=$3 why=""
  [[ $4 =~ J ]] && [ "$HAVE_CJSON" != 1 ] && why="cJSON"
  [[ $4 =~ P ]] && [ "$HAVE_PCRE2" != 1 ] && why="${why:+$why and }PCRE2"
  if [ -n "$why" ]; then
    rm -f "$bin"
    line notrun "build_$name" "$(basename "$bin") needs $why, $where: run bash launch/gpu-deps.sh on the build machine, then the device call with carry=[\"build-gpu-deps\"]"
    return
  fi
  if [ ! -f "$host_a" ]; then
    rm -f "$bin"
    line notrun "build_$name" "libmt_host.a was not built (see the build_host_lib lines)"
    return
  fi
  # shellcheck disable=SC2086 # nccl_link, deps_link: flag lists
  sa_compile "build_${name}_src" 120 "$src" &&
    sa_link "build_$name" "$bin" "${lib_obj[@]}" "$(obj_of "$src")" "$host_a" $nccl_link $deps_link ||
    rm -f "$bin"
}

# shellcheck disable=SC2015 # "compile && link || remove the binary": removed when either fails
standalone_build() {
  SA=$ROOT/build-gpu-sa
  B=$SA
  DEPS_DIR=$ROOT/build-gpu-deps
  mkdir -p "$SA/obj" "$SA/tests" || return 1
  local c_flags="-O2 -std=c11 -D_GNU_SOURCE -DMT_WITH_CUDA -fopenmp -Wall -Wno-unused-parameter -I$ROOT"
  local nv_flags="-O3 -std=c++17 -DMT_WITH_CUDA -I$ROOT -gencode=arch=compute_$ARCH,code=sm_$ARCH -Xcompiler=-Wall"
  local blas="" extra_c=() nccl_inc="" nccl_link="" cudnn_inc="" cudnn_link=""
  if [ "${MT_GPU_CHECK_REF_BLAS:-0}" != 1 ] &&
    printf '#include <cblas.h>\nint main(void){float a=1,b=1,c=0;cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,1,1,1,1.0f,&a,1,&b,1,0.0f,&c,1);return c!=1;}\n' |
    "$CC" -x c - -o "$SA/blas_probe" -lopenblas > /dev/null 2>&1; then
    blas=-lopenblas
    line info cpu_reference_gemm "OpenBLAS"
  else
    c_flags="$c_flags -I$ROOT/tests/cuda_ref"
    extra_c=(tests/cuda_ref/cblas_ref.c)
    line info cpu_reference_gemm "tests/cuda_ref/cblas_ref.c (no OpenBLAS, or MT_GPU_CHECK_REF_BLAS=1)"
  fi
  if probe_lib nccl nccl.h nccl; then
    HAVE_NCCL=1 nccl_inc=$PROBE_INC nccl_link=$PROBE_LINK
    line info nccl "${PROBE_LINK%% *}${PROBE_INC:+ (the pip wheel nvidia-nccl)}"
  else
    line info nccl "not found: no gpu_nccl_np1; the step checks run with --comm self"
  fi
  if probe_lib cudnn cudnn.h cudnn; then
    cudnn_inc=$PROBE_INC cudnn_link=$PROBE_LINK
    # the version of the library the binaries load (kernels/cuda/attention_cudnn.cu ties its
    # graphs to it: docs/cuda.md, "cuDNN attention", Versions)
    printf '%s\n' '#include <cudnn.h>' '#include <stdio.h>' \
      'int main(void) { size_t v = cudnnGetVersion(); printf("%zu.%zu.%zu, cudnnGetVersion() %zu, headers %d", v / 10000, v / 100 % 100, v % 100, v, CUDNN_VERSION); return 0; }' \
      > "$SA/cudnn_version.cu"
    local cudnn_ver
    # shellcheck disable=SC2086 # flag lists
    cudnn_ver=$("$NVCC" $cudnn_inc "$SA/cudnn_version.cu" -o "$SA/cudnn_version" $cudnn_link > /dev/null 2>&1 &&
      "$SA/cudnn_version") || cudnn_ver="version unknown (the probe did not build or run)"
    line info cudnn "$cudnn_ver; ${PROBE_LINK%% *}${PROBE_INC:+ (the pip wheel nvidia-cudnn)}"
  else
    line info cudnn "not found: built with MT_NO_CUDNN (attention on the flash kernels; gpu_attention_cudnn fails on 9.x)"
    nv_flags="$nv_flags -DMT_NO_CUDNN"
  fi
  # cJSON (models/config.c, the model families, safetensors; data/) and PCRE2 (the tokenizer):
  # not on the device image; launch/gpu-deps.sh brings Debian's copies in build-gpu-deps/
  DEPS=${MT_GPU_CHECK_DEPS:-auto}
  case $DEPS in auto | system | carried) ;; *)
    line info deps "MT_GPU_CHECK_DEPS=$DEPS is none of auto, system, carried: auto"
    DEPS=auto
    ;;
  esac
  local dep_inc="" deps_link="" where
  case $DEPS in
    auto) where="on neither this machine nor build-gpu-deps/" ;;
    system) where="not on this machine (MT_GPU_CHECK_DEPS=system)" ;;
    carried) where="not in build-gpu-deps/ (MT_GPU_CHECK_DEPS=carried)" ;;
  esac
  HAVE_CJSON=0 HAVE_PCRE2=0
  if probe_host_dep cjson cjson/cJSON.h cjson 'cJSON_Delete(cJSON_CreateObject())'; then
    HAVE_CJSON=1 dep_inc=$PROBE_INC deps_link=$PROBE_LINK
    line info cjson "$PROBE_FROM"
  else
    line info cjson "none, $where: bench-gpu-step and minimax-generate are not built; bash launch/gpu-deps.sh on the build machine brings it (carry build-gpu-deps)"
  fi
  if probe_host_dep pcre2 pcre2.h pcre2-8 'pcre2_code_free(NULL)' '#define PCRE2_CODE_UNIT_WIDTH 8'; then
    HAVE_PCRE2=1 deps_link="$deps_link $PROBE_LINK"
    [ "$PROBE_INC" = "$dep_inc" ] || dep_inc="$dep_inc $PROBE_INC"
    line info pcre2 "$PROBE_FROM"
  else
    line info pcre2 "none, $where: minimax-generate is not built; bash launch/gpu-deps.sh on the build machine brings it (carry build-gpu-deps)"
  fi
  export CC NVCC SA
  export CFLAGS="$c_flags $nccl_inc $cudnn_inc" NVFLAGS="$nv_flags $nccl_inc $cudnn_inc"
  export LINK="-lcublas -lcudart $cudnn_link -Xcompiler=-fopenmp $blas -lm"
  export DEP_CFLAGS=$dep_inc # C sources only: where cJSON's and PCRE2's headers are
  if [ "$(cat "$SA/flags" 2> /dev/null)" != "$CFLAGS | $NVFLAGS" ]; then
    rm -f "$SA"/obj/*.o
    echo "$CFLAGS | $NVFLAGS" > "$SA/flags"
  fi
  # another cJSON or PCRE2 (the system's or build-gpu-deps/'s, or none): the C sources of models/,
  # train/, data/ and the binaries on them are rebuilt
  if [ "$(cat "$SA/flags_deps" 2> /dev/null)" != "$DEP_CFLAGS | $deps_link" ]; then
    rm -f "$SA"/obj/models_*.c.o "$SA"/obj/train_*.c.o "$SA"/obj/data_*.c.o "$SA"/obj/jinja_*.c.o \
      "$SA"/obj/core_file_io.c.o "$SA"/obj/core_cli_flags.c.o "$SA"/obj/eval_*.c.o "$SA"/obj/apps_*.c.o \
      "$SA/obj/bench_gpu_step.c.o" "$SA/libmt_host.a" "$SA/bench-gpu-step" \
      "$SA/tests/test_dist_nccl" "$SA/minimax-generate"
    echo "$DEP_CFLAGS | $deps_link" > "$SA/flags_deps"
  fi
  # cc.sh SRC: compiles one source into obj/ (atomically: a killed compile leaves no object)
  cat > "$SA/cc.sh" << 'EOF'
set -u
o="$SA/obj/$(echo "$1" | tr / _).o"
case $1 in
  *.cu) "$NVCC" $NVFLAGS -c "$1" -o "$o.part" ;;
  *) "$CC" $CFLAGS $DEP_CFLAGS -c "$1" -o "$o.part" ;;
esac && mv -f "$o.part" "$o"
EOF
  NEWEST_HDR=$(find core autograd kernels jinja data models eval train apps tests bench \( -name '*.h' -o -name '*.cuh' \) \
    -printf '%T@ %p\n' 2> /dev/null | sort -n | tail -1 | cut -d' ' -f2-)
  NEWEST_HDR=${NEWEST_HDR:-CMakeLists.txt}

  local lib_src=(core/check.c core/version.c autograd/*.c kernels/*.c kernels/cpu/*.c tests/support/harness.c "${extra_c[@]}" kernels/cuda/*.cu)
  local lib_obj=() f
  for f in "${lib_src[@]}"; do lib_obj+=("$(obj_of "$f")"); done
  # a chain that fails removes its binary, so that no stale one runs
  sa_compile build_lib 300 "${lib_src[@]}" || {
    rm -f "$SA"/tests/test_* "$SA"/bench-gpu-* "$SA/minimax-generate"
    return 1
  }
  # the sources of test_gpu_ops (tests/gpu/gpu.cmake's mt_test_binary line)
  local ops_src=(tests/gpu/gpu_ops.c tests/gpu/gpu_compare.c tests/gpu/gpu_msa.c tests/gpu/gpu_moe.c
    tests/gpu/gpu_decode.c tests/gpu/gpu_cp.c) ops_obj=()
  for f in "${ops_src[@]}"; do ops_obj+=("$(obj_of "$f")"); done
  sa_compile build_test_gpu_ops_src 60 "${ops_src[@]}" &&
    sa_link build_test_gpu_ops "$SA/tests/test_gpu_ops" "${lib_obj[@]}" "${ops_obj[@]}" ||
    rm -f "$SA/tests/test_gpu_ops"
  sa_compile build_test_gpu_optim_src 60 tests/gpu/gpu_optim.c &&
    sa_link build_test_gpu_optim "$SA/tests/test_gpu_optim" "${lib_obj[@]}" "$(obj_of tests/gpu/gpu_optim.c)" ||
    rm -f "$SA/tests/test_gpu_optim"
  sa_compile build_bench_gpu_ops_src 120 bench/gpu_ops.cu &&
    sa_link build_bench_gpu_ops "$SA/bench-gpu-ops" "${lib_obj[@]}" "$(obj_of bench/gpu_ops.cu)" ||
    rm -f "$SA/bench-gpu-ops"
  # the host side of the step, the NCCL test and minimax-generate: every non-main source of
  # models/, train/, data/, jinja/, eval/, apps/ and core's file and flag helpers that includes
  # neither mpi.h nor hdf5.h (directly or through the project's headers; cJSON's and PCRE2's only when found), the stubs for MPI (train/comm.h's
  # mt_comm_mpi_init, never called here) and, without NCCL, for NCCL's communicator (--comm
  # nccl refuses), and with NCCL train/*.cu: one archive, from which the linker takes what each
  # binary needs
  local host_src=() drop=X
  [ "$HAVE_CJSON" = 1 ] || drop="${drop}J"
  [ "$HAVE_PCRE2" = 1 ] || drop="${drop}P"
  for f in core/file_io.c core/cli_flags.c models/*.c train/*.c data/*.c jinja/*.c eval/*.c \
    apps/*.c; do
    case $f in *_main.c) continue ;; esac
    header_needs "$f"
    [[ $NEEDS =~ [$drop] ]] || host_src+=("$f")
  done
  printf '%s\n' '#include "core/check.h"' '#include "train/comm.h"' \
    'mt_comm *mt_comm_mpi_init(int *c, char ***v) { (void)c, (void)v;' \
    '  MT_DIE("no MPI in the standalone build: only single-process runs here"); }' \
    'void mt_comm_finalize(mt_comm *c) { (void)c; }' > "$SA/no_mpi.c.new"
  cmp -s "$SA/no_mpi.c.new" "$SA/no_mpi.c" || mv -f "$SA/no_mpi.c.new" "$SA/no_mpi.c"
  host_src+=("${SA#"$ROOT"/}/no_mpi.c")
  if [ "${HAVE_NCCL:-0}" = 1 ]; then
    host_src+=(train/*.cu)
  else
    printf '%s\n' '#include "train/comm.h"' \
      'mt_comm *mt_comm_nccl_init(mt_comm *h, double t) { (void)h, (void)t; return NULL; }' \
      'void mt_comm_nccl_free(mt_comm *c) { (void)c; }' > "$SA/nccl_none.c.new"
    cmp -s "$SA/nccl_none.c.new" "$SA/nccl_none.c" || mv -f "$SA/nccl_none.c.new" "$SA/nccl_none.c"
    host_src+=("${SA#"$ROOT"/}/nccl_none.c")
  fi
  local host_a=$SA/libmt_host.a
  sa_compile build_host_lib_src 240 "${host_src[@]}" &&
    sa_archive build_host_lib "$host_a" "${host_src[@]}" || rm -f "$host_a"
  sa_main bench_gpu_step "$SA/bench-gpu-step" bench/gpu_step.c J # config.c, family_*.c
  if [ "${HAVE_NCCL:-0}" = 1 ]; then
    sa_main test_dist_nccl "$SA/tests/test_dist_nccl" tests/gpu/dist_nccl.c ""
  fi
  sa_main minimax_generate "$SA/minimax-generate" apps/minimax_generate_main.c JP # the tokenizer
}

HAVE_NCCL=0
if [ "$MODE" = given ]; then
  B=$(cd "$BUILD_DIR" 2> /dev/null && pwd -P)
  if [ -n "$B" ]; then
    line info build "given: $B (MT_GPU_CHECK_BUILD_DIR, nothing built)"
    [ -x "$B/tests/test_dist_nccl" ] && HAVE_NCCL=1
  else
    line FAIL build "MT_GPU_CHECK_BUILD_DIR=$BUILD_DIR is not a directory"
    B=$ROOT/build-gpu-none
  fi
else
  if [ -z "$MODE" ]; then # a rerun reuses the build that is there
    if [ -f build-gpu/build.ninja ]; then
      MODE=cmake
    elif [ -f build-gpu-sa/flags ]; then
      MODE=standalone
    elif capped 120 "$WORK/configure.log" cmake -S . -B build-gpu -G Ninja -DMT_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DCMAKE_CUDA_COMPILER="$NVCC"; then
      MODE=cmake
    else
      MODE=standalone
      line info configure "cmake does not configure ($(grep -m1 -E 'Could NOT|not found|Error' "$WORK/configure.log" | cut -c1-120)): standalone build"
    fi
    [ -f "$WORK/configure.log" ] && { echo "=== configure (cmake, MT_CUDA=ON)" && cat "$WORK/configure.log"; } >> "$BUILD_LOG"
  fi
  line info mode "$MODE; nvcc $("$NVCC" --version 2> /dev/null | tail -1)"
  if [ "$MODE" = cmake ]; then cmake_build; else standalone_build; fi
fi

OPS=$B/tests/test_gpu_ops OPTIM=$B/tests/test_gpu_optim NCCLT=$B/tests/test_dist_nccl
BENCH_OPS=$B/bench-gpu-ops STEP=$B/bench-gpu-step

# cases_of BIN FALLBACK...: the gpu_* cases a test binary lists (called without a case it prints
# them), else FALLBACK (a binary that was not built: its cases then say "notrun")
cases_of() {
  local c=""
  [ -x "$1" ] && c=$("$1" 2>&1 > /dev/null | sed -n 's/.*(cases:\(.*\))$/\1/p' | tr ' ' '\n' | grep '^gpu_')
  if [ -n "$c" ]; then echo "$c"; else printf '%s\n' "${@:2}"; fi
}
# the op cases of tests/gpu/gpu.cmake's list, for a test_gpu_ops that was not built
# shellcheck disable=SC2020 # three characters to newlines
GPU_CMAKE_OPS=$(sed -n '/^set(mt_gpu_ops/,/)/p' tests/gpu/gpu.cmake | tr '() ' '\n\n\n' |
  grep -vE '^(set|mt_gpu_ops)?$' | sed 's/^/gpu_/')

# ---- tests ----------------------------------------------------------------------------------

export MT_CUDA_VERBOSE=1
SYNC=(env MT_CUDA_SYNC=1) # a sync after every kernel, so a fault names its op

# 1. NCCL first: a bootstrap failure inside the VM is named here, before anything needs NCCL
for c in $(cases_of "$NCCLT" gpu_nccl_np1); do
  step "$c" 60 "$TESTS_LOG" "$NCCLT" "${SYNC[@]}" "$NCCLT" "$c"
done

# 2. the bf16 fused-kernel cases (and cuDNN's), then their variants: lightning through the GEMM
# form instead of the fused kernel, the experts on one GEMM lane
# shellcheck disable=SC2086 # GPU_CMAKE_OPS is a word list
OP_CASES=$(cases_of "$OPS" $GPU_CMAKE_OPS)
for c in $OP_CASES; do
  [[ $c =~ bf16|cudnn ]] && step "$c" 90 "$TESTS_LOG" "$OPS" "${SYNC[@]}" "$OPS" "$c"
done
step gpu_lightning_bf16_gemm 90 "$TESTS_LOG" "$OPS" "${SYNC[@]}" MT_LIGHTNING_FUSED=0 "$OPS" gpu_lightning_bf16
step gpu_moe_experts_bf16_lanes1 90 "$TESTS_LOG" "$OPS" "${SYNC[@]}" MT_CUDA_GEMM_LANES=1 "$OPS" gpu_moe_experts_bf16

# 3. the training-step checks: bench-gpu-step --check, the device's steps against the CPU
# backend's (fp32 to 1e-5; bf16 by the bf16 rule). Each bf16 check twice: MT_CUDA_SYNC=1, then
# without it (_nosync), so the prefetch, the landing buffers and the bf16 shadows overlap compute
COMM=${MT_GPU_CHECK_STEP_COMM:-}
if [ -z "$COMM" ]; then
  case ${RC[gpu_nccl_np1]:-unset} in
    0) COMM=nccl ;;
    unset) if [ "$HAVE_NCCL" = 1 ]; then COMM=nccl; else COMM=self; fi ;;
    *) COMM=self ;;
  esac
fi
line info step_comm "bench-gpu-step --comm $COMM (nccl when gpu_nccl_np1 passed, or did not run and NCCL is built; else self: device copies)"
for c in $(cases_of "$OPTIM" gpu_optim); do
  step "$c" 60 "$TESTS_LOG" "$OPTIM" "${SYNC[@]}" "$OPTIM" "$c"
done
# generation on the device (tests/gpu/gpu_generate.sh): --backend cuda equals the CPU token for token
step gpu_generate 120 "$TESTS_LOG" "$B/minimax-generate" "${SYNC[@]}" bash tests/gpu/gpu_generate.sh \
  "$B/minimax-generate" "$B/minimax-generate"
TINY="--hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --experts 4 --ffn 64 --vocab 256 --seq 48 --block 16 --steps 2 --warmup 1"
D64="--hidden 64 --heads 4 --kv-heads 2 --head-dim 64 --experts 4 --ffn 64 --vocab 256 --seq 96 --block 32 --steps 2 --warmup 1"
# mid-size: 4 lightning blocks of 4 fused-kernel row tiles, 16 x 16 flash tiles, 8 experts on
# the 4 GEMM lanes; the CPU reference is two runs (fp32, bf16) of two steps
MID="--hidden 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 128 --experts 8 --topk 2 --ffn 256 --vocab 1024 --seq 1024 --block 256 --steps 2 --warmup 0"
# shellcheck disable=SC2086 # TINY, args: flag lists
step gpu_step_check_fp32 60 "$TESTS_LOG" "$STEP" "${SYNC[@]}" "$STEP" --comm "$COMM" $TINY --check
while read -r name cap args; do
  # shellcheck disable=SC2086
  step "$name" "$cap" "$TESTS_LOG" "$STEP" "${SYNC[@]}" "$STEP" --dtype bf16 --comm "$COMM" $args --check
  # shellcheck disable=SC2086
  step "${name}_nosync" "$cap" "$TESTS_LOG" "$STEP" env MT_CUDA_SYNC=0 "$STEP" --dtype bf16 \
    --comm "$COMM" $args --check
done << STEPS
gpu_step_check_bf16 60 $TINY
gpu_step_check_bf16_d64 60 --fused-loss 0 $D64
gpu_step_check_bf16_mid 90 $MID
gpu_step_check_recompute 60 --recompute 1 $TINY
gpu_step_check_offload 60 --offload 1 $TINY
gpu_step_check_offload_bf16g 60 --offload 1 --gather-dtype bf16 $TINY
STEPS

# 4. the remaining op cases
for c in $OP_CASES; do
  [[ $c =~ bf16|cudnn ]] || step "$c" 60 "$TESTS_LOG" "$OPS" "${SYNC[@]}" "$OPS" "$c"
done

# ---- benchmarks -----------------------------------------------------------------------------

step bench_gpu_ops 150 "$BENCH_LOG" "$BENCH_OPS" "$BENCH_OPS" all "$REPS"
# the full training step of a MiniMax-Text-01-shaped model (bench/gpu_step.c): 1.66 B
# parameters, drawn on the host first (about half of each run's time)
# shellcheck disable=SC2086 # MT_GPU_CHECK_STEP_ARGS is a flag list
step step_bf16_profile 120 "$BENCH_LOG" "$STEP" "$STEP" --dtype bf16 --comm "$COMM" --profile 1 \
  --decode 32 --decode-batch 8 ${MT_GPU_CHECK_STEP_ARGS:-}
# shellcheck disable=SC2086
step step_fp32 100 "$BENCH_LOG" "$STEP" "$STEP" --dtype fp32 --comm "$COMM" ${MT_GPU_CHECK_STEP_ARGS:-}

# ---- compute-sanitizer: races and bad accesses on one small shape per case ------------------

SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null)
# sanitize TOOL CASE FILTER: the case under compute-sanitizer on the comparisons FILTER selects
# (MT_GPU_COMPARE_ONLY, tests/gpu/gpu_compare.h); pass when it reports 0 errors and the case passes
sanitize() {
  local tool=$1 c=$2 name="sanitize_${1}_$2" n why
  selected "$name" || return 0
  if [ -z "$SAN" ]; then
    line skip "$name" "compute-sanitizer not found (PATH, /usr/local/cuda/bin)"
    return
  elif [ ! -x "$OPS" ]; then
    line notrun "$name" "test_gpu_ops was not built"
    return
  elif [ "${RC[$c]:-}" = 77 ]; then
    line skip "$name" "$c itself skipped (no usable device)"
    return
  fi
  # --report-api-errors no: the code checks every CUDA call itself, and an expected failure (an
  # allocation probe) is no memory error
  QUIET=1 run_step "$name" 60 "$TESTS_LOG" env MT_CUDA_SYNC=1 MT_GPU_COMPARE_ONLY="$3" \
    "$SAN" --tool "$tool" --error-exitcode 99 --print-limit 50 --report-api-errors no "$OPS" "$c"
  # memcheck ends with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: H hazards
  # displayed (E errors, W warnings)": N or E is the error count
  local sum="ERROR SUMMARY" h="" r
  if [ "$tool" = racecheck ]; then
    sum="RACECHECK SUMMARY"
    r=$(grep -E 'RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?' "$WORK/$name.log" | tail -1)
    n=$(sed -n 's/.*(\([0-9]*\) error.*/\1/p' <<< "$r")
    if [ -n "$r" ]; then
      h="; $(sed -n 's/.*SUMMARY: \([0-9]*\) hazard.*/\1/p' <<< "$r") hazards"
      h="$h, $(sed -n 's/.*, \([0-9]*\) warning.*/\1/p' <<< "$r") warnings"
    fi
  else
    n=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$WORK/$name.log" | tail -1)
  fi
  why="compute-sanitizer --tool $tool: ${n:-no} $sum"
  case ${RC[$name]}:${n:-none} in
    notrun:*) ;;
    0:0) line pass "$name" "0 errors ($tool$h) in ${T[$name]} s" ;;
    77:*) line skip "$name" "$(first_reason "$WORK/$name.log")" ;;
    124:* | 137:*) line TIMEOUT "$name" "killed at its cap after ${T[$name]} s; $why" ;;
    *:none) line FAIL "$name" "exit ${RC[$name]}, no $sum (the sanitizer did not run to the end): $(first_reason "$WORK/$name.log")" ;;
    *:0) line FAIL "$name" "0 errors ($tool$h) but the case failed, exit ${RC[$name]}: $(first_reason "$WORK/$name.log")" ;;
    *) line FAIL "$name" "$n errors ($tool$h), exit ${RC[$name]}: $(grep -m1 -E '=+ (Error|ERROR|Race|Invalid)|FAIL' "$WORK/$name.log" | cut -c1-200)" ;;
  esac
}
ATT='D=(64|128) T=70 seg$'        # both head dims, two query tiles, packed segments
LIGHT='D=(64|128) T=150 block 100' # both fused-kernel head dims, two row tiles per block
sanitize racecheck gpu_attention_bf16 "$ATT"
sanitize racecheck gpu_lightning_bf16 "$LIGHT"
sanitize memcheck gpu_attention_bf16 "$ATT"
sanitize memcheck gpu_lightning_bf16 "$LIGHT"
sanitize memcheck gpu_moe_experts_bf16 '^moe_experts bf16$'

# ---- MiniMax-M3's block-sparse attention against dense attention ----------------------------
# (fp32 select + attention vs the bf16 flash kernels at T = 32k, bench/gpu_ops.cu's bench_msa:
# one timed run after the warm-up); after the correctness checks, so a short budget costs it
# first
step bench_msa 60 "$BENCH_LOG" "$BENCH_OPS" "$BENCH_OPS" msa 1

# ---- MT_GPU_CHECK_FULL=1: the PyTorch peer, the recompute and offload step benchmarks ---------

full_step() { # NAME CAP CMD...
  selected "$1" || return 0
  if [ "$FULL" != 1 ]; then
    line off "$1" "MT_GPU_CHECK_FULL=1 runs it"
    return
  fi
  step "$@"
}
if [ "$FULL" != 1 ] || "$PY" -c "import torch, transformers" > /dev/null 2>&1; then
  full_step peer 120 "$BENCH_LOG" "$(command -v "$PY")" env PYTHONUNBUFFERED=1 "$PY" bench/gpu_peer.py --reps "$REPS"
elif selected peer; then
  line notrun peer "no $PY with torch and transformers"
fi
# shellcheck disable=SC2086
full_step step_bf16_recompute 100 "$BENCH_LOG" "$STEP" "$STEP" --dtype bf16 --comm "$COMM" --recompute 1 ${MT_GPU_CHECK_STEP_ARGS:-}
# shellcheck disable=SC2086
full_step step_bf16_offload 120 "$BENCH_LOG" "$STEP" "$STEP" --dtype bf16 --comm "$COMM" --offload 1 --gather-dtype bf16 ${MT_GPU_CHECK_STEP_ARGS:-}

# ---- the numbers against the targets (docs/cuda.md says what each line means) ----------------

grep -hE '^RESULT ' "$BENCH_LOG" | cut -c8- | while IFS= read -r r; do line result "${r%%:*}" "${r#*: }"; done
PEAK=989.4 # dense bf16, H100/H200 SXM: bench-gpu-ops' and bench-gpu-step's
# target NAME GOAL% VALUE%: met when VALUE >= GOAL
target() {
  [ -n "$3" ] || return 0
  if awk -v v="$3" -v g="$2" 'BEGIN { exit !(v >= g) }'; then
    line met "$1" "$3 % of the bf16 peak (target >= $2 %)"
  else
    line MISSED "$1" "$3 % of the bf16 peak (target >= $2 %)"
  fi
}
pct() { awk -v t="$1" -v p="$PEAK" 'BEGIN { if (t != "") printf "%.1f", 100 * t / p }'; }
target "lightning T=32768 fwd+bwd" 50 "$(pct "$(sed -n 's/^RESULT lightning T=32768: .*, \([0-9.]*\) TFLOP\/s.*/\1/p' "$BENCH_LOG" | head -1)")"
target "moe expert GEMMs (bf16)" 60 "$(pct "$(sed -n 's/^RESULT moe: .*expert GEMMs \([0-9.]*\) TFLOP\/s.*/\1/p' "$BENCH_LOG" | head -1)")"
target "step bf16 MFU" 40 "$(sed -n 's/^RESULT step bf16: .*MFU \([0-9.e+-]*\)%.*/\1/p' "$BENCH_LOG" | head -1)"
# the bf16 experts' GEMM lanes against one lane; minimax-train against PyTorch per key
awk -F': ' '/^RESULT moe: /{ split($2, w, " "); a = w[1] } /^RESULT moe_lanes1: /{ split($2, w, " "); b = w[1] }
  END { if (a > 0 && b > 0) printf "%.3f ms with the default lanes, %.3f ms with one: x%.2f\n", a, b, b / a }' \
  "$BENCH_LOG" | while IFS= read -r r; do line result "GEMM lanes" "$r"; done
awk -F': ' '/^RESULT / { k = substr($1, 8); split($2, w, " "); ours[k] = w[1]; next }
  /^PEER / && $2 ~ /^[0-9]/ { k = substr($1, 6); split($2, w, " ");
    if (k in ours && ours[k] > 0) printf "%s|minimax-train %.3f ms, PyTorch %.3f ms: speed-up x%.2f\n", k, ours[k], w[1], w[1] / ours[k]
    else printf "%s|PyTorch %.3f ms (no minimax-train result)\n", k, w[1] }' "$BENCH_LOG" |
  while IFS='|' read -r k r; do line peer "$k" "$r"; done

trap - EXIT
finish ""
[ "$N_FAIL" = 0 ] && [ "$N_TIMEOUT" = 0 ]
