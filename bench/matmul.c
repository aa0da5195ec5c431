/* bench/matmul.c: GFLOP/s of the mt_matmul op (forward and backward through the op API) next to
 * raw cblas_sgemm in the same run, against the theoretical fp32 peak of one core.
 *
 * Usage: bench-matmul [reps]      (source launch/env.sh first so OpenBLAS picks its AVX kernels)
 *
 * Sizes are N x M x K for y (N,M) = x (N,K) w (M,K)^T: 1024^3 and 4096 x 4096 x 1024. Forward is
 * 2NMK flop, backward (dx and dw) 4NMK. Each figure is the best of `reps` runs after a warm-up.
 *
 * Peak = flop/cycle x clock. flop/cycle: 64 for an Intel core with AVX-512 (2 FMA ports x 16
 * lanes x 2), 32 for AVX2 cores and for AMD Zen 2-4 (2 FMA pipes of 256 bits; Zen 4 splits
 * AVX-512 into two halves), 64 for Zen 5. The nominal clock is the GHz in the "model name" of
 * /proc/cpuinfo, else "cpu MHz". Virtual machines often run above that clock (turbo), so the
 * clock is also measured with a chain of dependent integer adds (1 per cycle) and the ratio to
 * the peak at that clock is printed too. MT_FLOP_PER_CYCLE and MT_CPU_GHZ override the guesses. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "autograd/ops.h"
#include "bench/bench_util.h"

/* OpenBLAS extensions, weak so the bench also links against another CBLAS. */
char *openblas_get_corename(void) __attribute__((weak));
void openblas_set_num_threads(int n) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));

/* ------------------------------------------------------------------------------------------ */
/* the CPU: name, flags, nominal and measured clock, flop per cycle */

typedef struct {
    char model[128];
    char vendor[32];
    int family;
    bool avx2, fma, avx512f;
    double nominal_ghz; /* 0 when unknown */
    const char *ghz_source;
} bench_cpu;

static void bench_cpu_read(bench_cpu *cpu) {
    memset(cpu, 0, sizeof(*cpu));
    cpu->ghz_source = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[4096];
    double mhz = 0;
    bool have_flags = false;
    while (fgets(line, sizeof(line), f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *val = colon + 1;
        while (*val == ' ' || *val == '\t') val++;
        val[strcspn(val, "\n")] = 0;
        if (!strncmp(line, "model name", 10) && !cpu->model[0]) {
            snprintf(cpu->model, sizeof(cpu->model), "%s", val);
        } else if (!strncmp(line, "vendor_id", 9) && !cpu->vendor[0]) {
            snprintf(cpu->vendor, sizeof(cpu->vendor), "%s", val);
        } else if (!strncmp(line, "cpu family", 10) && !cpu->family) {
            cpu->family = atoi(val);
        } else if (!strncmp(line, "cpu MHz", 7) && mhz == 0) {
            mhz = atof(val);
        } else if (!strncmp(line, "flags", 5) && !have_flags) {
            have_flags = true;
            char *tok = strtok(val, " ");
            for (; tok; tok = strtok(NULL, " ")) {
                if (!strcmp(tok, "avx2")) cpu->avx2 = true;
                if (!strcmp(tok, "fma")) cpu->fma = true;
                if (!strcmp(tok, "avx512f")) cpu->avx512f = true;
            }
        }
    }
    fclose(f);
    /* "Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz": the number before GHz */
    char *g = strstr(cpu->model, "GHz");
    if (g) {
        char *p = g;
        while (p > cpu->model && (p[-1] == '.' || (p[-1] >= '0' && p[-1] <= '9'))) p--;
        if (p < g) {
            cpu->nominal_ghz = atof(p);
            cpu->ghz_source = "model name";
        }
    }
    if (cpu->nominal_ghz <= 0 && mhz > 0) {
        cpu->nominal_ghz = mhz / 1000.0;
        cpu->ghz_source = "cpu MHz";
    }
    const char *env = getenv("MT_CPU_GHZ");
    if (env && atof(env) > 0) {
        cpu->nominal_ghz = atof(env);
        cpu->ghz_source = "MT_CPU_GHZ";
    }
}

static int bench_flop_per_cycle(const bench_cpu *cpu, const char **why) {
    const char *env = getenv("MT_FLOP_PER_CYCLE");
    if (env && atoi(env) > 0) {
        *why = "MT_FLOP_PER_CYCLE";
        return atoi(env);
    }
    bool amd = !strcmp(cpu->vendor, "AuthenticAMD");
    if (amd && cpu->family >= 0x1a) {
        *why = "AMD Zen 5: 2 x 512-bit FMA";
        return 64;
    }
    if (amd && cpu->family >= 0x17) {
        *why = "AMD Zen 2-4: 2 x 256-bit FMA (Zen 4 runs AVX-512 as two halves)";
        return 32;
    }
    if (cpu->avx512f) {
        *why = "AVX-512: 2 FMA ports x 16 lanes x 2";
        return 64;
    }
    if (cpu->avx2 && cpu->fma) {
        *why = "AVX2: 2 FMA ports x 8 lanes x 2";
        return 32;
    }
    *why = "SSE: 4-lane add + 4-lane mul";
    return 8;
}

/* A chain of dependent adds retires one per cycle on every x86 core since the Pentium Pro, so
 * adds per second is the clock the core actually runs at. */
static double bench_measure_ghz(void) {
#if defined(__x86_64__)
    double best = 0;
    for (int r = 0; r < 10; r++) { /* best of 10 x 0.1 s: other processes share the core */
        uint64_t x = 0, iters = 50u * 1000u * 1000u;
        double t0 = bench_now();
        for (uint64_t i = 0; i < iters; i++)
            __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                             "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                             : "+r"(x));
        double ghz = 8.0 * (double)iters / (bench_now() - t0) * 1e-9;
        if (ghz > best) best = ghz;
    }
    return best;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------------------------------ */

/* OpenBLAS cores whose sgemm uses AVX2 or AVX-512 kernels. */
static bool bench_core_is_modern(const char *core) {
    static const char *good[] = {"Haswell",        "Zen",     "SkylakeX",  "Cooperlake", "Sapphire",
                                 "SapphireRapids", "Skylake", "Broadwell", "Excavator"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (!strcasecmp(core, good[i])) return true;
    return false;
}

static void bench_set_threads(int n) {
    if (openblas_set_num_threads) openblas_set_num_threads(n);
}

static int bench_get_threads(void) {
    return openblas_get_num_threads ? openblas_get_num_threads() : -1;
}

typedef struct {
    double raw, fwd, bwd; /* GFLOP/s */
} bench_result;

static bench_result bench_size(int N, int M, int K, int reps) {
    float *xd = mt_malloc(sizeof(float) * (size_t)N * K, "x");
    float *xg = mt_calloc((size_t)N * K, sizeof(float), "dx");
    float *wd = mt_malloc(sizeof(float) * (size_t)M * K, "w");
    float *wg = mt_calloc((size_t)M * K, sizeof(float), "dw");
    float *yd = mt_malloc(sizeof(float) * (size_t)N * M, "y");
    float *seed = mt_malloc(sizeof(float) * (size_t)N * M, "seed");
    for (int64_t i = 0; i < (int64_t)N * K; i++) xd[i] = (float)((i * 7 % 13) - 6) * 0.01f;
    for (int64_t i = 0; i < (int64_t)M * K; i++) wd[i] = (float)((i * 5 % 11) - 5) * 0.01f;
    for (int64_t i = 0; i < (int64_t)N * M; i++) seed[i] = (float)((i % 3) - 1);
    mt_tensor x, w;
    mt_tensor_wrap(&x, MT_F32, 2, (int64_t[]){N, K}, xd, xg, "x");
    mt_tensor_wrap(&w, MT_F32, 2, (int64_t[]){M, K}, wd, wg, "w");
    mt_ctx c;
    /* y, dy and alignment slack */
    mt_ctx_init(&c, mt_backend_cpu(), 2 * sizeof(float) * (size_t)N * M + (1 << 20), 16);

    double flop = 2.0 * N * M * K;
    double best_raw = 1e30, best_fwd = 1e30, best_bwd = 1e30;
    for (int r = 0; r <= reps; r++) { /* r = 0 is the warm-up */
        double t0 = bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, M, K, 1.0f, xd, K, wd, K, 0.0f, yd,
                    M);
        double t1 = bench_now();
        mt_ctx_reset(&c);
        mt_tensor *y = mt_matmul(&c, &x, &w);
        double t2 = bench_now();
        mt_backward(&c, y, seed);
        double t3 = bench_now();
        if (r == 0) continue;
        if (t1 - t0 < best_raw) best_raw = t1 - t0;
        if (t2 - t1 < best_fwd) best_fwd = t2 - t1;
        if (t3 - t2 < best_bwd) best_bwd = t3 - t2;
    }
    mt_ctx_free(&c);
    free(xd), free(xg), free(wd), free(wg), free(yd), free(seed);
    return (bench_result){flop / best_raw * 1e-9, flop / best_fwd * 1e-9,
                          2 * flop / best_bwd * 1e-9};
}

int main(int argc, char **argv) {
    /* OpenBLAS sizes its thread pool from the environment when it loads, and a pool made with
     * OPENBLAS_NUM_THREADS=1 (as tests set) does not grow on openblas_set_num_threads(2). So run
     * once more with a pool of 2, then switch between 1 and 2 threads at run time. */
    if (openblas_set_num_threads && !getenv("MT_BENCH_MATMUL_CHILD")) {
        setenv("OPENBLAS_NUM_THREADS", "2", 1);
        setenv("MT_BENCH_MATMUL_CHILD", "1", 1);
        execv("/proc/self/exe", argv);
        perror("bench-matmul: execv /proc/self/exe (2-thread rows may not use 2 threads)");
    }
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1) reps = 1;
    bench_cpu cpu;
    bench_cpu_read(&cpu);
    const char *fpc_why = "";
    int fpc = bench_flop_per_cycle(&cpu, &fpc_why);
    double ghz_meas = bench_measure_ghz();
    double peak_nominal = fpc * cpu.nominal_ghz, peak_meas = fpc * ghz_meas;

    const char *core = openblas_get_corename ? openblas_get_corename() : NULL;
    printf("bench-matmul: y = x w^T through mt_matmul vs raw cblas_sgemm, best of %d\n", reps);
    printf("cpu:   %s (%s family %d), flags:%s%s%s\n", cpu.model[0] ? cpu.model : "?",
           cpu.vendor[0] ? cpu.vendor : "?", cpu.family, cpu.avx2 ? " avx2" : "",
           cpu.fma ? " fma" : "", cpu.avx512f ? " avx512f" : "");
    printf("peak:  %d flop/cycle (%s)\n", fpc, fpc_why);
    printf("       x %.3f GHz nominal (%s) = %.1f GFLOP/s per core\n", cpu.nominal_ghz,
           cpu.ghz_source, peak_nominal);
    if (ghz_meas > 0)
        printf("       x %.3f GHz measured (dependent adds) = %.1f GFLOP/s per core\n", ghz_meas,
               peak_meas);
    if (ghz_meas > 0 && cpu.nominal_ghz > 0 && ghz_meas < 0.9 * cpu.nominal_ghz)
        printf("NOTE:  the measured clock is below nominal: other processes share this core, so "
               "the figures below are low and unreliable; rerun on an idle machine\n");
    printf("blas:  %s core %s; OPENBLAS_CORETYPE=%s\n", core ? "OpenBLAS" : "non-OpenBLAS CBLAS",
           core ? core : "-",
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(unset)");
    if (core && cpu.avx2 && !bench_core_is_modern(core)) {
        printf("\n"
               "*****************************************************************************\n"
               "*** WARNING: OpenBLAS runs its '%s' kernels (SSE-era or generic) on a CPU\n"
               "*** with AVX2%s. sgemm will be several times slower than it should be.\n"
               "*** Source launch/env.sh (sets OPENBLAS_CORETYPE from /proc/cpuinfo) first.\n"
               "*****************************************************************************\n\n",
               core, cpu.avx512f ? "/AVX-512" : "");
        fprintf(stderr, "bench-matmul: WARNING: OpenBLAS core is %s; source launch/env.sh\n", core);
    }

    const int sizes[2][3] = {{1024, 1024, 1024}, {4096, 4096, 1024}};
    /* OpenBLAS: 1 and 2 threads set at run time. Another CBLAS (e.g. BLIS through
     * LD_PRELOAD or a relink) takes its thread count from the environment: one pass. */
    int threads[2] = {1, 2}, n_passes = 2;
    if (!openblas_set_num_threads) {
        const char *env = getenv("BLIS_NUM_THREADS");
        if (!env) env = getenv("OMP_NUM_THREADS");
        threads[0] = env && atoi(env) > 0 ? atoi(env) : 1;
        n_passes = 1;
        printf("(not OpenBLAS: %d thread(s) from BLIS_NUM_THREADS / OMP_NUM_THREADS)\n",
               threads[0]);
    }
    double accept = 0;
    printf("\n%-7s %-16s %10s %10s %10s %9s %9s %9s %9s\n", "threads", "N x M x K", "sgemm",
           "op fwd", "op bwd", "fwd/sgemm", "bwd/sgemm", "fwd/peak", "fwd/peak");
    printf("%-7s %-16s %10s %10s %10s %9s %9s %9s %9s\n", "", "", "GFLOP/s", "GFLOP/s", "GFLOP/s",
           "", "", "nominal", "measured");
    for (int t = 0; t < n_passes; t++) {
        bench_set_threads(threads[t]);
        int got = bench_get_threads();
        if (got > 0) threads[t] = got;
        for (int s = 0; s < 2; s++) {
            int N = sizes[s][0], M = sizes[s][1], K = sizes[s][2];
            bench_result r = bench_size(N, M, K, reps);
            double pn = peak_nominal * threads[t], pm = peak_meas * threads[t];
            char dims[32];
            snprintf(dims, sizeof(dims), "%dx%dx%d", N, M, K);
            printf("%-7d %-16s %10.1f %10.1f %10.1f %8.0f%% %8.0f%% %8.0f%% %8.0f%%\n", threads[t],
                   dims, r.raw, r.fwd, r.bwd, 100 * r.fwd / r.raw, 100 * r.bwd / r.raw,
                   pn > 0 ? 100 * r.fwd / pn : 0, pm > 0 ? 100 * r.fwd / pm : 0);
            fflush(stdout);
            if (threads[t] == 1 && s == 0) accept = r.fwd;
        }
    }
    if (peak_nominal > 0 && accept > 0) {
        double ratio = accept / peak_nominal;
        printf("\nacceptance: op forward, 1 thread, 1024^3 = %.1f GFLOP/s = %.0f%% of one core's "
               "nominal peak (need >= 75%%): %s\n",
               accept, 100 * ratio, ratio >= 0.75 ? "PASS" : "FAIL");
        if (peak_meas > 0)
            printf("            (%.0f%% of the peak at the measured %.2f GHz)\n",
                   100 * accept / peak_meas, ghz_meas);
    }
    return 0;
}
