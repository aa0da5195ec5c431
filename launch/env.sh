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

# Active OpenMP waiting: a step is many short parallel loops and BLAS calls, all on one OpenMP
# pool (the OpenMP build of OpenBLAS, docs/blas.md), and a passive thread sleeps after each one
# (the bench model at 1 rank x 2 threads: 10 % less wall time a run than PASSIVE, which this
# file set while OpenBLAS had its own pthreads). Spinning is only safe with a core per thread:
# launch/run-local.sh gives each rank cores/ranks threads (1 when oversubscribed, where the
# policy does not matter); set OMP_WAIT_POLICY=PASSIVE when other work shares the cores.
if [ -z "${OMP_WAIT_POLICY:-}" ]; then
    OMP_WAIT_POLICY=ACTIVE
    export OMP_WAIT_POLICY
fi
