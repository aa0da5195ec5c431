#!/usr/bin/env bash
# gpu-check.sh: the one GPU check for a fresh single-GPU machine with the CUDA toolkit.
# Builds the CUDA backend, runs every GPU parity test (CUDA op vs CPU reference), runs the GPU
# benchmarks (ops, then a full training step in fp32 and bf16), then the PyTorch peer on the same
# shapes (bench/gpu_peer.py, when python3 has torch and transformers), and prints a summary last
# with the speed-up over the peer per benchmark.
# Worst case 8 minutes: each step has a timeout, capped by what is left of an overall budget
# (MT_GPU_CHECK_BUDGET, default 470 s; a step with under 10 s left is skipped).
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
# MT_GPU_CHECK_BENCH_REPS (default 3), MT_GPU_CHECK_STEP_ARGS (extra bench-gpu-step flags, e.g.
# "--layers 4 --seq 8192"), NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc),
# MT_GPU_CHECK_PYTHON (default python3: the interpreter with torch for the peer).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
LOGDIR=${OUT:-$ROOT/build-gpu-logs}
mkdir -p "$LOGDIR"
T0=$(date +%s)
SUMMARY=()
note() { SUMMARY+=("$*"); }
elapsed() { echo $(($(date +%s) - $1)); }
# note_rc LABEL RC START: the summary line of a step that exited with RC (77: no device)
note_rc() {
  case $2 in
    0) note "$1: ok in $(elapsed "$3") s" ;;
    77) note "$1: skipped (no usable CUDA device)" ;;
    124) note "$1: TIMED OUT after $(elapsed "$3") s (partial output above)" ;;
    *) note "$1: FAILED (exit $2)" ;;
  esac
}
BUDGET=${MT_GPU_CHECK_BUDGET:-470}
# tmo N CMD...: CMD under a timeout of N seconds, or of what is left of the budget when that is
# less; not run (exit 124, as a timeout) when under 10 s are left
tmo() {
  local n=$1 left=$((BUDGET - $(elapsed "$T0")))
  shift
  if [ "$left" -lt 10 ]; then
    echo "gpu-check: time budget spent, not run: $*" >&2
    return 124
  fi
  [ "$left" -lt "$n" ] && n=$left
  timeout "$n" "$@"
}

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
STEP_BIN=""
STEP_RC="" # non-empty: the step benchmark failed to build or to run
if [ "$MODE" != standalone ]; then
  t=$(date +%s)
  if tmo 90 cmake -S . -B build-gpu -G Ninja -DMT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
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
  if tmo 240 cmake --build build-gpu -j "$JOBS" --target test_gpu_ops bench-gpu-ops \
    > "$LOGDIR/build.log" 2>&1; then
    note "build (cmake): ok in $(elapsed "$t") s"
    BUILD=build-gpu
  else
    tail -30 "$LOGDIR/build.log"
    note "build (cmake): FAILED after $(elapsed "$t") s (see build.log)"
  fi
  # the training-step benchmark apart: a failure there must not cost the parity tests
  t=$(date +%s)
  if [ -n "$BUILD" ] && tmo 120 cmake --build build-gpu -j "$JOBS" \
    --target bench-gpu-step test_gpu_optim test_dist_nccl > "$LOGDIR/build_step.log" 2>&1; then
    STEP_BIN=build-gpu/bench-gpu-step
    TRAIN_TESTS=build-gpu/tests
    note "build (bench-gpu-step, optimizer and NCCL tests): ok in $(elapsed "$t") s"
  elif [ -n "$BUILD" ]; then
    tail -20 "$LOGDIR/build_step.log"
    note "build (bench-gpu-step): FAILED (see build_step.log)"
    STEP_RC=build
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
  # the parity test: gpu_ops.c and, where present, its comparison helpers
  TEST_C="tests/gpu_ops.c $(ls tests/gpu_compare.c 2> /dev/null)"
  TEST_OBJS=$(for f in $TEST_C; do echo "$SA/obj/$(echo "$f" | tr / _).o"; done)
  ok=1
  {
    printf '%s\n' $C_SRCS $TEST_C | tmo 120 xargs -P "$JOBS" -I{} bash -c 'compile_c {}' &&
      printf '%s\n' $CU_SRCS bench/gpu_ops.cu | tmo 200 xargs -P "$JOBS" -I{} bash -c 'compile_cu {}'
  } > "$LOGDIR/build.log" 2>&1 || ok=0
  if [ $ok = 1 ]; then
    LIB_OBJS=$(for f in $C_SRCS $CU_SRCS; do echo "$SA/obj/$(echo "$f" | tr / _).o"; done)
    LINK="-lcublas -lcudart -Xcompiler=-fopenmp $BLAS_LIB -lm"
    tmo 60 "$NVCC" -o "$SA/test_gpu_ops" $LIB_OBJS $TEST_OBJS $LINK \
      >> "$LOGDIR/build.log" 2>&1 &&
      tmo 60 "$NVCC" -o "$SA/bench-gpu-ops" $LIB_OBJS "$SA/obj/bench_gpu_ops.cu.o" $LINK \
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
  # the training-step benchmark (bench/gpu_step.c): the model, ZeRO-3 with one rank and the NCCL
  # communicator on top of the library above; only files that need no cJSON, MPI or HDF5
  # NCCL: the toolkit's (or the system's), else the copy that pip's nvidia-nccl wheel (a torch
  # dependency) carries, linked by its soname with an rpath: a GPU image may have only that
  NCCL_INC="" NCCL_LINK="-lnccl"
  printf '%s\n' '#include <nccl.h>' 'int main(void) { int v; return ncclGetVersion(&v); }' \
    > "$SA/nccl_probe.cu"
  if [ $ok = 1 ] && ! "$NVCC" "$SA/nccl_probe.cu" -o "$SA/nccl_probe" -lnccl > /dev/null 2>&1; then
    d=$("${MT_GPU_CHECK_PYTHON:-python3}" -c \
      'import nvidia.nccl as n; print(list(n.__path__)[0])' 2> /dev/null)
    if [ -n "$d" ] && [ -f "$d/include/nccl.h" ] && [ -f "$d/lib/libnccl.so.2" ]; then
      NCCL_INC="-I$d/include"
      NCCL_LINK="-L$d/lib -l:libnccl.so.2 -Xlinker -rpath -Xlinker $d/lib"
      note "standalone build: NCCL from $d (pip's nvidia-nccl)"
    else
      note "standalone build: no NCCL found (the NCCL test and the step benchmark will not build)"
    fi
  fi
  if [ $ok = 1 ]; then
    t=$(date +%s)
    STEP_C="models/minimax.c models/layout.c models/generate.c models/weights_init.c models/plan.c
      train/zero.c train/sharded.c train/comm_self.c bench/gpu_step.c tests/gpu_optim.c
      tests/dist_nccl.c"
    STEP_CU=$(ls train/*.cu 2> /dev/null)
    STEP_OBJS=$(for f in $STEP_C $STEP_CU; do echo "$SA/obj/$(echo "$f" | tr / _).o"; done |
      grep -vE "tests_(gpu_optim|dist_nccl)")
    O=$SA/obj
    if {
      printf '%s\n' $STEP_C | tmo 60 xargs -P "$JOBS" -I{} bash -c 'compile_c {}' &&
        { [ -z "$STEP_CU" ] || printf '%s\n' $STEP_CU |
          NVFLAGS="$NVFLAGS $NCCL_INC" tmo 120 xargs -P "$JOBS" -I{} bash -c 'compile_cu {}'; } &&
        tmo 60 "$NVCC" -o "$SA/bench-gpu-step" $LIB_OBJS $STEP_OBJS $NCCL_LINK $LINK &&
        tmo 60 "$NVCC" -o "$SA/tests/test_gpu_optim" $LIB_OBJS "$O/tests_gpu_optim.c.o" $LINK &&
        printf '%s\n' '#include "autograd/check.h"' '#include "train/comm.h"' \
          'mt_comm *mt_comm_mpi_init(int *c, char ***v) { (void)c, (void)v;' \
          '  MT_DIE("no MPI in the standalone build: only gpu_nccl_np1 runs here"); }' \
          'void mt_comm_finalize(mt_comm *c) { (void)c; }' > "$SA/no_mpi.c" &&
        "$CC" $CFLAGS -c "$SA/no_mpi.c" -o "$O/no_mpi.o" &&
        tmo 60 "$NVCC" -o "$SA/tests/test_dist_nccl" $LIB_OBJS "$O/tests_dist_nccl.c.o" \
          "$O/train_comm_self.c.o" $(ls "$O"/train_*.cu.o) "$O/no_mpi.o" $NCCL_LINK $LINK
    } > "$LOGDIR/build_step.log" 2>&1; then
      STEP_BIN=$SA/bench-gpu-step
      TRAIN_TESTS=$SA/tests
      note "build (bench-gpu-step, standalone): ok in $(elapsed "$t") s"
    else
      grep -m20 -E "error|Error" "$LOGDIR/build_step.log"
      note "build (bench-gpu-step, standalone): FAILED (see build_step.log)"
      STEP_RC=build
    fi
  fi
fi

# ---------------------------------------------------------------------------------------------
# tests: every gpu_* case (CUDA op vs CPU reference), synchronising after each kernel

PASS=0 FAIL=0 SKIP=0 FAILED_CASES=""
if [ -n "$BUILD" ]; then
  t=$(date +%s)
  # tests/gpu.cmake lists the ops once: set(mt_gpu_ops view embedding ...), case gpu_<op>
  CASES=$(sed -n '/^set(mt_gpu_ops/,/)/p' tests/gpu.cmake | tr '() ' '\n\n\n' |
    grep -vE '^(set|mt_gpu_ops)?$' | sed 's/^/gpu_/')
  RUNS=()
  for c in $CASES; do RUNS+=("$c|$BUILD/tests/test_gpu_ops $c"); done
  # lightning's bf16 case once more through the GEMM form instead of the fused intra kernel
  RUNS+=("gpu_lightning_bf16_gemm|env MT_LIGHTNING_FUSED=0 $BUILD/tests/test_gpu_ops gpu_lightning_bf16")
  # the bf16 experts' GEMMs on the default stream alone instead of the concurrent GEMM lanes
  RUNS+=("gpu_moe_experts_bf16_lanes1|env MT_CUDA_GEMM_LANES=1 $BUILD/tests/test_gpu_ops gpu_moe_experts_bf16")
  # beyond the ops: the optimizer kernels, NCCL on one GPU, and a tiny model's training steps
  # on the device against the CPU backend (bench-gpu-step --check: fp32 to 1e-5; bf16 by the
  # rule |dev - cpu fp32| <= 2 |cpu bf16 - cpu fp32|)
  TINY="--hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --experts 4 --ffn 64 --vocab 256
    --seq 48 --block 16 --steps 2 --warmup 1 --check"
  [ -n "${TRAIN_TESTS:-}" ] && RUNS+=("gpu_optim|$TRAIN_TESTS/test_gpu_optim gpu_optim"
    "gpu_nccl_np1|$TRAIN_TESTS/test_dist_nccl gpu_nccl_np1")
  [ -n "${STEP_BIN:-}" ] && RUNS+=("gpu_step_check_fp32|$STEP_BIN $TINY"
    "gpu_step_check_bf16|$STEP_BIN --dtype bf16 $TINY"
    "gpu_step_check_bf16_d64|$STEP_BIN --dtype bf16 --fused-loss 0 ${TINY/--head-dim 16/--head-dim 64}"
    "gpu_step_check_recompute|$STEP_BIN --dtype bf16 --recompute 1 $TINY"
    "gpu_step_check_offload|$STEP_BIN --dtype bf16 --offload 1 $TINY"
    "gpu_step_check_offload_bf16g|$STEP_BIN --dtype bf16 --offload 1 --gather-dtype bf16 $TINY")
  echo "== GPU tests (ops: fp32 ||gpu - cpu|| / ||cpu|| <= 1e-5, bf16 by the bf16 rule)"
  for r in "${RUNS[@]}"; do
    c=${r%%|*}
    # shellcheck disable=SC2086 # the command line is a word list
    MT_CUDA_SYNC=1 MT_CUDA_VERBOSE=1 OMP_NUM_THREADS=$JOBS OPENBLAS_NUM_THREADS=1 \
      tmo 90 ${r#*|} > "$LOGDIR/test_$c.log" 2>&1
    rc=$?
    case $rc in
      0) PASS=$((PASS + 1)) && echo "   pass  $c" ;;
      77) SKIP=$((SKIP + 1)) && echo "   skip  $c: $(head -1 "$LOGDIR/test_$c.log")" ;;
      *)
        FAIL=$((FAIL + 1)) && FAILED_CASES="$FAILED_CASES $c"
        echo "   FAIL  $c (exit $rc)"
        grep -E "MISMATCH|FAIL|error|cuda|RESULT" "$LOGDIR/test_$c.log" | head -8 | sed 's/^/         /'
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
  tmo 150 "$BUILD/bench-gpu-ops" all "$REPS" > "$LOGDIR/bench.log" 2>&1
  rc=$?
  cat "$LOGDIR/bench.log"
  note_rc benchmarks "$rc" "$t"
fi

# full training step of a MiniMax-Text-01-shaped model (bench/gpu_step.c): fp32, then bf16
# GEMMs; after the PyTorch peer (whose ratios need those two), bf16 with every layer recomputed
# in the backward (train.gradient_checkpointing), then bf16 with AdamW offloaded to the host
# (dist.offload_optimizer with bf16 gathers, the GPU setting: master weights on the host too;
# what the copies and the host update cost), the first things a short budget drops
rm -f "$LOGDIR"/step_*.log
step_bench() { # DTYPE RECOMPUTE(0|1) [OFFLOAD(0|1)]
  local dt=$1 rec=$2 off=${3:-0} name t rc
  name=$dt$([ "$rec" = 1 ] && echo _recompute)$([ "$off" = 1 ] && echo _offload)
  t=$(date +%s)
  echo "== training step benchmark ($dt GEMMs$([ "$rec" = 1 ] && echo ", layers recomputed")$([ "$off" = 1 ] && echo ", AdamW on the host, bf16 gathers"))"
  # shellcheck disable=SC2086 # MT_GPU_CHECK_STEP_ARGS is a list of flags
  # the plain bf16 step also prints where its time goes, op by op (--profile)
  OMP_NUM_THREADS=$JOBS tmo 100 "$STEP_BIN" --dtype "$dt" --recompute "$rec" --offload "$off" \
    --gather-dtype "$([ "$off" = 1 ] && echo bf16 || echo fp32)" \
    --profile "$([ "$dt$rec$off" = bf1600 ] && echo 1 || echo 0)" \
    ${MT_GPU_CHECK_STEP_ARGS:-} > "$LOGDIR/step_$name.log" 2>&1
  rc=$?
  cat "$LOGDIR/step_$name.log"
  note_rc "training step $name" "$rc" "$t"
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || STEP_RC=$rc
}
if [ -n "$STEP_BIN" ]; then
  step_bench fp32 0
  step_bench bf16 0
fi

# the PyTorch peer (bench/gpu_peer.py) on the same GPU and shapes, for the ratios in the summary
rm -f "$LOGDIR/peer.log"
PY=${MT_GPU_CHECK_PYTHON:-python3}
if [ -n "$BUILD$STEP_BIN" ] && "$PY" -c "import torch, transformers" 2> /dev/null; then
  t=$(date +%s)
  echo "== PyTorch peer (bench/gpu_peer.py)"
  tmo 90 "$PY" bench/gpu_peer.py --reps "$REPS" > "$LOGDIR/peer.log" 2>&1
  rc=$?
  grep -E "^(==|PEER|SKIP)" "$LOGDIR/peer.log"
  note_rc "PyTorch peer" "$rc" "$t"
else
  note "PyTorch peer: not run (no python3 with torch and transformers, or nothing built)"
fi
[ -z "$STEP_BIN" ] || step_bench bf16 1
[ -z "$STEP_BIN" ] || step_bench bf16 0 1

# ---------------------------------------------------------------------------------------------
echo
echo "================ gpu-check summary ($(elapsed "$T0") s, mode ${MODE:-none}) ================"
for s in "${SUMMARY[@]}"; do echo "  $s"; done
[ -s "$LOGDIR/bench.log" ] &&
  grep -E "^== MoE|^ *[0-9]+ |total fwd|route/permute|expert GEMMs|activations|combine|^RESULT moe_(split|lanes1)" \
    "$LOGDIR/bench.log" | sed 's/^/  | /'
# the bf16 experts' GEMM lanes against one lane (MT_CUDA_GEMM_LANES, kernels/cuda/moe_experts.cu)
[ -s "$LOGDIR/bench.log" ] &&
  awk -F': ' '/^RESULT moe: /{ split($2, w, " "); a = w[1] } /^RESULT moe_lanes1: /{ split($2, w, " "); b = w[1] }
    END { if (a > 0 && b > 0) printf "  | GEMM lanes: bf16 MoE layer %.3f ms with the default lanes, %.3f ms with one: x%.2f\n", a, b, b / a }' \
    "$LOGDIR/bench.log"
cat "$LOGDIR"/step_*.log 2> /dev/null | grep -m2 -E "^   C=|FLOPs per token" | sed 's/^/  | /'
cat "$LOGDIR"/step_*.log 2> /dev/null | grep -E "^RESULT" | sed 's/^/  | /'
# minimax-train / PyTorch: each "PEER <key>: <ms> ms" against "RESULT <key>: <ms> ms"
if [ -s "$LOGDIR/peer.log" ]; then
  cat "$LOGDIR/bench.log" "$LOGDIR"/step_*.log 2> /dev/null | grep -E "^RESULT " |
    awk -F': ' 'FILENAME == "-" { k = substr($1, 8); split($2, w, " "); ours[k] = w[1]; next }
      /^PEER / && $2 ~ /^[0-9]/ { k = substr($1, 6); split($2, w, " ");
        if (k in ours && ours[k] > 0) printf "  | %-22s minimax-train %10.3f ms  PyTorch %10.3f ms  speed-up x%.2f\n", k, ours[k], w[1], w[1] / ours[k]
        else printf "  | %-22s PyTorch %10.3f ms (no minimax-train result)\n", k, w[1] }' - "$LOGDIR/peer.log"
fi
echo "  logs: $LOGDIR"
[ -n "$BUILD" ] && [ "$FAIL" = 0 ] && [ -z "$STEP_RC" ] && exit 0
exit 1
