/* bench/roofline.c: this machine's two limits that bench/profile_step.sh holds each op of the
 * profile against (docs/benchmarks.md, "Op profile"):
 *   gemm_gflops  the fp32 GEMM rate: cblas_sgemm of 1024 x 1024 x 1024 (2 N^3 FLOPs), best of
 *                `reps`, on the threads OpenBLAS was given (OPENBLAS_NUM_THREADS);
 *   mem_gbps     the memory bandwidth: a STREAM-like triad a = b + s c over three 64 MiB arrays
 *                (12 bytes an element: two read, one written; a write-allocate's extra read is
 *                not counted, as STREAM does not), best of `reps`, on the OpenMP threads
 *                (OMP_NUM_THREADS), and its copy a = b (8 bytes an element).
 * Usage: bench-roofline [reps]   (source launch/env.sh first so OpenBLAS picks its AVX kernels).
 * Prints "name value" lines, one per limit. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_util.h"

static double best_gemm(int reps) {
    const int n = 1024;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
    float *c = malloc(sizeof(float) * n * n);
    if (!a || !b || !c) return 0;
    uint64_t s = 1;
    for (int i = 0; i < n * n; i++) {
        a[i] = bench_normal(&s);
        b[i] = bench_normal(&s);
    }
    double best = 0;
    for (int r = 0; r <= reps; r++) { /* r = 0: warm-up */
        const double t0 = bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        const double g = 2.0 * n * n * n / (bench_now() - t0) * 1e-9;
        if (r > 0 && g > best) best = g;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

static void best_stream(int reps, double *triad, double *copy) {
    const long n = 16L << 20; /* 64 MiB per array */
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    float *c = malloc(sizeof(float) * n);
    *triad = *copy = 0;
    if (!a || !b || !c) return;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) { /* first touch by the threads that use the pages */
        a[i] = 0.0f;
        b[i] = 1.0f;
        c[i] = 2.0f;
    }
    for (int r = 0; r <= reps; r++) {
        double t0 = bench_now();
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
        const double gt = 12.0 * (double)n / (bench_now() - t0) * 1e-9;
        t0 = bench_now();
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++) c[i] = a[i];
        const double gc = 8.0 * (double)n / (bench_now() - t0) * 1e-9;
        if (r > 0 && gt > *triad) *triad = gt;
        if (r > 0 && gc > *copy) *copy = gc;
    }
    volatile float sink = a[n / 2] + c[n / 3];
    (void)sink;
    free(a);
    free(b);
    free(c);
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1) {
        fprintf(stderr, "usage: bench-roofline [reps >= 1]\n");
        return 2;
    }
    double triad, copy;
    best_stream(reps, &triad, &copy);
    printf("gemm_gflops %.1f\n", best_gemm(reps));
    printf("mem_gbps %.1f\n", triad);
    printf("mem_copy_gbps %.1f\n", copy);
    return 0;
}
