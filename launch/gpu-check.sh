#!/usr/bin/env bash
# gpu-check.sh: the one GPU check for a fresh single-GPU machine with the CUDA toolkit.
# Builds the CUDA backend, runs every GPU parity test (CUDA op vs CPU reference), runs the GPU
# benchmarks, and prints a summary last. Worst case about 8 minutes: each step has a timeout.
#
#   bash launch/gpu-check.sh    # logs under $OUT if set (the device tool), else build-gpu-logs/
#
# Build modes: "cmake" when the project's dependencies (MPI, parallel HDF5, OpenBLAS, cJSON,
# PCRE2) configure, as on the build machine: then exactly -DMT_CUDA=ON with the detected
# CMAKE_CUDA_ARCHITECTURES, and ctest -R '^gpu_'. "standalone" otherwise (a GPU image without
# those packages, and nothing can be installed there): gcc + nvcc compile only what the GPU tests
# and benchmarks need (autograd, kernels, kernels/cpu, kernels/cuda, the test harness), with
# OpenBLAS if present, else kernels/cuda/ref/cblas_ref.c as the CPU reference's GEMM.
# Environment: MT_GPU_CHECK_MODE=cmake|standalone (force a mode), MT_CUDA_ARCH=90 (override the
# detected architecture), MT_GPU_CHECK_REF_BLAS=1 (standalone: use the reference sgemm),
# MT_GPU_CHECK_BENCH_REPS (default 3), NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
LOGDIR=${OUT:-$ROOT/build-gpu-logs}
mkdir -p "$LOGDIR"
T0=$(date +%s)
SUMMARY=()
note() { SUMMARY+=("$*"); }
elapsed() { echo $(($(date +%s) - $1)); }

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CC=${CC:-$(command -v gcc || command -v cc)}
JOBS=$(nproc 2> /dev/null || echo 4)
REPS=${MT_GPU_CHECK_BENCH_REPS:-3}

echo "== gpu-check: $(date -u +%FT%TZ) on $(hostname), $JOBS cores"
echo "-- nvcc: $("$NVCC" --version 2> /dev/null | tail -1)"
ARCH=${MT_CUDA_ARCH:-}
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm \
    --format=csv 2>&1 | sed 's/^/-- /'
  [ -z "$ARCH" ] && ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null |
    head -1 | tr -d ' .')
else
  echo "-- nvidia-smi not found: no driver on this machine? (the GPU tests will be skipped)"
fi
case "$ARCH" in [0-9][0-9] | [0-9][0-9][0-9]) ;; *) ARCH=90 ;; esac
echo "-- CUDA architecture: sm_$ARCH"
note "device: $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2> /dev/null | head -1 || echo none), sm_$ARCH"

# ---------------------------------------------------------------------------------------------
# build

MODE=${MT_GPU_CHECK_MODE:-}
BUILD=""
if [ "$MODE" != standalone ]; then
  t=$(date +%s)
  if timeout 90 cmake -S . -B build-gpu -G Ninja -DMT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
    -DCMAKE_CUDA_COMPILER="$NVCC" > "$LOGDIR/configure.log" 2>&1; then
    MODE=cmake
    note "configure (cmake, MT_CUDA=ON): ok in $(elapsed "$t") s"
  elif [ "$MODE" = cmake ]; then
    tail -20 "$LOGDIR/configure.log"
    note "configure (cmake): FAILED (see configure.log)"
    MODE=failed
  else
    echo "-- cmake configure failed (project dependencies missing?): standalone build"
    grep -m3 -E "Could NOT|not found|Error" "$LOGDIR/configure.log" | sed 's/^/   /'
    MODE=standalone
  fi
fi

if [ "$MODE" = cmake ]; then
  t=$(date +%s)
  if timeout 240 cmake --build build-gpu -j "$JOBS" --target test_gpu_ops bench-gpu-ops \
    > "$LOGDIR/build.log" 2>&1; then
    note "build (cmake): ok in $(elapsed "$t") s"
    BUILD=build-gpu
  else
    tail -30 "$LOGDIR/build.log"
    note "build (cmake): FAILED after $(elapsed "$t") s (see build.log)"
  fi
elif [ "$MODE" = standalone ]; then
  t=$(date +%s)
  SA=build-gpu-sa
  rm -rf "$SA" && mkdir -p "$SA/obj"
  CFLAGS="-O2 -std=c11 -D_GNU_SOURCE -DMT_WITH_CUDA -fopenmp -Wall -Wno-unused-parameter -I$ROOT"
  BLAS_LIB=""
  EXTRA_C=""
  if [ "${MT_GPU_CHECK_REF_BLAS:-0}" != 1 ] &&
    echo '#include <cblas.h>
int main(void){float a=1,b=1,c=0;cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,1,1,1,1.0f,&a,1,&b,1,0.0f,&c,1);return c!=1;}' |
    "$CC" -x c - -o "$SA/blas_probe" -lopenblas > /dev/null 2>&1; then
    BLAS_LIB=-lopenblas
    note "standalone build: CPU reference GEMM from OpenBLAS"
  else
    CFLAGS="$CFLAGS -I$ROOT/kernels/cuda/ref"
    EXTRA_C=kernels/cuda/ref/cblas_ref.c
    note "standalone build: CPU reference GEMM from kernels/cuda/ref/cblas_ref.c (no OpenBLAS)"
  fi
  C_SRCS=$(ls autograd/*.c kernels/*.c kernels/cpu/*.c tests/harness.c $EXTRA_C)
  CU_SRCS=$(ls kernels/cuda/*.cu)
  NVFLAGS="-O3 -std=c++17 -DMT_WITH_CUDA -I$ROOT -gencode=arch=compute_$ARCH,code=sm_$ARCH -Xcompiler=-Wall"
  export CC CFLAGS NVCC NVFLAGS SA
  compile_c() { "$CC" $CFLAGS -c "$1" -o "$SA/obj/$(echo "$1" | tr / _).o"; }
  compile_cu() { "$NVCC" $NVFLAGS -c "$1" -o "$SA/obj/$(echo "$1" | tr / _).o"; }
  export -f compile_c compile_cu
  ok=1
  {
    printf '%s\n' $C_SRCS tests/gpu_ops.c | timeout 120 xargs -P "$JOBS" -I{} bash -c 'compile_c {}' &&
      printf '%s\n' $CU_SRCS bench/gpu_ops.cu | timeout 200 xargs -P "$JOBS" -I{} bash -c 'compile_cu {}'
  } > "$LOGDIR/build.log" 2>&1 || ok=0
  if [ $ok = 1 ]; then
    LIB_OBJS=$(for f in $C_SRCS $CU_SRCS; do echo "$SA/obj/$(echo "$f" | tr / _).o"; done)
    LINK="-lcublas -lcudart -Xcompiler=-fopenmp $BLAS_LIB -lm"
    timeout 60 "$NVCC" -o "$SA/test_gpu_ops" $LIB_OBJS "$SA/obj/tests_gpu_ops.c.o" $LINK \
      >> "$LOGDIR/build.log" 2>&1 &&
      timeout 60 "$NVCC" -o "$SA/bench-gpu-ops" $LIB_OBJS "$SA/obj/bench_gpu_ops.cu.o" $LINK \
        >> "$LOGDIR/build.log" 2>&1 || ok=0
  fi
  if [ $ok = 1 ]; then
    note "build (standalone, gcc + nvcc): ok in $(elapsed "$t") s"
    BUILD=$SA
    mkdir -p "$SA/tests" && mv "$SA/test_gpu_ops" "$SA/tests/"
  else
    grep -m20 -E "error|Error" "$LOGDIR/build.log"
    note "build (standalone): FAILED after $(elapsed "$t") s (see build.log)"
  fi
fi

# ---------------------------------------------------------------------------------------------
# tests: every gpu_* case (CUDA op vs CPU reference), synchronising after each kernel

PASS=0 FAIL=0 SKIP=0 FAILED_CASES=""
if [ -n "$BUILD" ]; then
  t=$(date +%s)
  CASES=$(sed -n '/mt_test_cases(test_gpu_ops/,/)/p' tests/gpu.cmake | tr -d '()' | tr ' ' '\n' |
    grep -E '^gpu_')
  echo "== GPU parity tests (fp32, ||gpu - cpu|| / ||cpu|| <= 1e-5)"
  for c in $CASES; do
    MT_CUDA_SYNC=1 MT_CUDA_VERBOSE=1 OMP_NUM_THREADS=$JOBS OPENBLAS_NUM_THREADS=1 \
      timeout 90 "$BUILD/tests/test_gpu_ops" "$c" > "$LOGDIR/test_$c.log" 2>&1
    rc=$?
    case $rc in
      0) PASS=$((PASS + 1)) && echo "   pass  $c" ;;
      77) SKIP=$((SKIP + 1)) && echo "   skip  $c: $(head -1 "$LOGDIR/test_$c.log")" ;;
      *)
        FAIL=$((FAIL + 1)) && FAILED_CASES="$FAILED_CASES $c"
        echo "   FAIL  $c (exit $rc)"
        grep -E "MISMATCH|FAIL|error|cuda" "$LOGDIR/test_$c.log" | head -8 | sed 's/^/         /'
        ;;
    esac
  done
  cat "$LOGDIR"/test_gpu_*.log > "$LOGDIR/tests.log" 2> /dev/null
  rm -f "$LOGDIR"/test_gpu_*.log
  note "GPU tests: $PASS passed, $FAIL failed, $SKIP skipped in $(elapsed "$t") s${FAILED_CASES:+ (failed:$FAILED_CASES)}"
fi

# ---------------------------------------------------------------------------------------------
# benchmarks

if [ -n "$BUILD" ]; then
  t=$(date +%s)
  echo "== benchmarks (bench-gpu-ops, $REPS timed repetitions after a warm-up, medians)"
  timeout 200 "$BUILD/bench-gpu-ops" all "$REPS" > "$LOGDIR/bench.log" 2>&1
  rc=$?
  cat "$LOGDIR/bench.log"
  case $rc in
    0) note "benchmarks: ok in $(elapsed "$t") s" ;;
    77) note "benchmarks: skipped (no usable CUDA device)" ;;
    124) note "benchmarks: TIMED OUT after 200 s (partial output above)" ;;
    *) note "benchmarks: FAILED (exit $rc)" ;;
  esac
fi

# ---------------------------------------------------------------------------------------------
echo
echo "================ gpu-check summary ($(elapsed "$T0") s, mode ${MODE:-none}) ================"
for s in "${SUMMARY[@]}"; do echo "  $s"; done
[ -s "$LOGDIR/bench.log" ] && grep -E "^ *[0-9]+ |total fwd|route/permute|expert GEMMs|activations|combine" \
  "$LOGDIR/bench.log" | sed 's/^/  | /'
echo "  logs: $LOGDIR"
[ -n "$BUILD" ] && [ "$FAIL" = 0 ] && exit 0
exit 1
