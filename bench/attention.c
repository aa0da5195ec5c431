/* bench/attention.c: wall time of the fp32 softmax attention kernels (kernels/cpu/attention.c),
 * forward (with the lse) and backward (dq, dk, dv), at the training benchmark's shape and at a
 * MiniMax-Text-01-like one. Median of `reps` runs after one warm-up; threads from
 * OMP_NUM_THREADS (the training benchmark uses 2).
 *
 * Usage: bench-attention [reps] [small]   (small: the first two shapes only, e.g. for perf)
 *
 * Shapes (B, T, H, Hkv, D): 4 x 256 x 8 x 4 x 32 (bench/configs/bench-small.json: rows of 256
 * tokens, batch 4) and 1 x 4096 x 16 x 8 x 128 (Text-01's head dim, a long row). Inputs are
 * normals; with_seg adds packed samples of 1..200 tokens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "bench/bench_util.h"
#include "kernels/cpu/attention.h"

static void bench_shape(int B, int T, int H, int Hkv, int D, int with_seg, int reps) {
    const size_t nq = (size_t)B * T * H * D, nk = (size_t)B * T * Hkv * D;
    float *q = mt_malloc(sizeof(float) * nq, "bench"), *dq = mt_malloc(sizeof(float) * nq, "bench");
    float *k = mt_malloc(sizeof(float) * nk, "bench"), *dk = mt_malloc(sizeof(float) * nk, "bench");
    float *v = mt_malloc(sizeof(float) * nk, "bench"), *dv = mt_malloc(sizeof(float) * nk, "bench");
    float *out = mt_malloc(sizeof(float) * nq, "bench"),
          *dout = mt_malloc(sizeof(float) * nq, "bench");
    float *lse = mt_malloc(sizeof(float) * B * H * T, "bench");
    double *delta = mt_malloc(sizeof(double) * B * H * T, "bench");
    int32_t *seg = with_seg ? mt_malloc(sizeof(int32_t) * B * T, "bench") : NULL;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < nq; i++) q[i] = bench_normal(&s), dout[i] = bench_uniform(&s) - 0.5f;
    for (size_t i = 0; i < nk; i++) k[i] = bench_normal(&s), v[i] = bench_normal(&s);
    if (seg) bench_pack_segments(seg, B, T, &s);
    const float scale = 1.0f / sqrtf((float)D);
    double *tf = mt_malloc(sizeof(double) * reps, "bench"),
           *tb = mt_malloc(sizeof(double) * reps, "bench");
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
        cpu_attention_fwd(out, lse, q, k, v, seg, B, T, H, Hkv, D, scale);
        double t1 = bench_now();
        memset(dq, 0, sizeof(float) * nq);
        memset(dk, 0, sizeof(float) * nk);
        memset(dv, 0, sizeof(float) * nk);
        double t2 = bench_now();
        cpu_attention_bwd(dq, dk, dv, delta, dout, out, lse, q, k, v, seg, B, T, H, Hkv, D, scale);
        double t3 = bench_now();
        if (r >= 0) tf[r] = t1 - t0, tb[r] = t3 - t2;
    }
    const double f = bench_median(tf, reps), b = bench_median(tb, reps);
    double cs = 0; /* a checksum, so that the work cannot be dropped and runs can be compared */
    for (size_t i = 0; i < nq; i++) cs += out[i] + dq[i];
    for (size_t i = 0; i < nk; i++) cs += dk[i] + dv[i];
    printf("B=%d T=%-5d H=%-2d Hkv=%d D=%-3d %s  fwd %9.3f ms  bwd %9.3f ms  fwd+bwd %9.3f ms"
           "  (median of %d; checksum %.6g)\n",
           B, T, H, Hkv, D, seg ? "seg" : "   ", 1e3 * f, 1e3 * b, 1e3 * (f + b), reps, cs);
    free(q);
    free(dq);
    free(k);
    free(dk);
    free(v);
    free(dv);
    free(out);
    free(dout);
    free(lse);
    free(delta);
    free(seg);
    free(tf);
    free(tb);
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 11;
    MT_CHECK(reps >= 1, "bench-attention: reps = %d must be >= 1", reps);
    bench_shape(4, 256, 8, 4, 32, 0, reps);
    bench_shape(4, 256, 8, 4, 32, 1, reps);
    if (argc > 2 && strcmp(argv[2], "small") == 0) return 0;
    bench_shape(1, 4096, 16, 8, 128, 0, reps > 3 ? 3 : reps);
    return 0;
}
