/* bench_util.h: what the CPU benchmarks share (bench/attention.c, lightning.c, matmul.c): a
 * monotonic clock, a seeded generator for inputs, packed-sample segment ids and the median of
 * repeated timings. Header-only: each bench/<name>.c builds one executable. */
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline float bench_uniform(uint64_t *s) { /* xorshift64*, [0, 1) */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (float)((*s * 2685821657736338717ull) >> 40) / (float)(1 << 24);
}

static inline float bench_normal(uint64_t *s) { /* roughly normal: a centred sum of 3 uniforms */
    return 2.0f * (bench_uniform(s) + bench_uniform(s) + bench_uniform(s)) - 3.0f;
}

/* seg (B,T): samples of 1..200 tokens packed into each row */
static inline void bench_pack_segments(int32_t *seg, int B, int T, uint64_t *s) {
    for (int b = 0; b < B; b++)
        for (int t = 0, id = 0; t < T; id++)
            for (int len = 1 + (int)(bench_uniform(s) * 200); len > 0 && t < T; len--)
                seg[b * T + t++] = id;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of t[0..n), sorting t. */
static inline double bench_median(double *t, int n) {
    qsort(t, (size_t)n, sizeof(double), bench_cmp_double);
    return t[n / 2];
}
