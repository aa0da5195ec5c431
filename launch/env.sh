# env.sh: run-time environment for minimax-train; launchers source it (". launch/env.sh").
#
# Debian's OpenBLAS 0.3.21 does not recognise recent CPUs (e.g. Xeon model 207, Emerald Rapids)
# and silently falls back to its SSE3 "Prescott" kernels, 3-5x slower (docs/blas.md). The core
# type has to be in the environment before the library loads, so it is pinned here from the
# CPU flags. A value the user already set is kept. POSIX sh; safe to source more than once.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -r /proc/cpuinfo ]; then
    mt_cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    case "$mt_cpu_flags" in
    *" avx512_bf16 "*) OPENBLAS_CORETYPE=Cooperlake ;;
    *" avx512f "*) OPENBLAS_CORETYPE=SkylakeX ;;
    *" avx2 "*) OPENBLAS_CORETYPE=Haswell ;;
    esac
    unset mt_cpu_flags
    if [ -n "${OPENBLAS_CORETYPE:-}" ]; then export OPENBLAS_CORETYPE; fi
fi

# OpenMP (our kernels) and OpenBLAS (its own pthreads) are two thread pools; with OpenMP's
# default active waiting, idle OpenMP threads spin while BLAS runs and a 2-thread rank runs at
# half speed (docs/benchmarks.md). Passive waiting lets them share the cores.
if [ -z "${OMP_WAIT_POLICY:-}" ]; then
    OMP_WAIT_POLICY=PASSIVE
    export OMP_WAIT_POLICY
fi
