/* bench/lightning.c: wall time of the fp32 block-form lightning kernels (kernels/cpu/
 * lightning_block.c), forward and backward, at the training benchmark's shape and at a
 * MiniMax-Text-01-like one. Median of `reps` runs after one warm-up; threads from
 * OMP_NUM_THREADS (the training benchmark uses 2).
 *
 * Usage: bench-lightning [reps]
 *
 * Shapes (B, T, H, D, block): 4 x 256 x 8 x 32, block 64 (bench/configs/bench-small.json, rows of
 * 256 tokens, batch 4) and 1 x 4096 x 8 x 128, block 256 (Text-01's head dim and block). The
 * inputs are SiLU of normals, as the model produces them; with_seg adds packed samples. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "bench/bench_util.h"
#include "kernels/cpu/lightning.h"

static void bench_shape(int B, int T, int H, int D, int block, int with_seg, int reps) {
    const size_t nq = (size_t)B * T * H * 3 * D, no = (size_t)B * T * H * D;
    const size_t ns = (size_t)B * H * D * D;
    float *qkv = mt_malloc(sizeof(float) * nq, "bench"),
          *dqkv = mt_malloc(sizeof(float) * nq, "bench");
    float *out = mt_malloc(sizeof(float) * no, "bench"),
          *dout = mt_malloc(sizeof(float) * no, "bench");
    float *state = mt_malloc(sizeof(float) * 2 * ns, "bench");
    float *decay = mt_malloc(sizeof(float) * H, "bench");
    int32_t *seg = with_seg ? mt_malloc(sizeof(int32_t) * B * T, "bench") : NULL;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < nq; i++) { /* SiLU of a roughly normal value */
        float x = bench_normal(&s);
        qkv[i] = x / (1.0f + expf(-x));
    }
    for (size_t i = 0; i < no; i++) dout[i] = bench_uniform(&s) - 0.5f;
    for (int h = 0; h < H; h++) decay[h] = 0.5f * powf(2.0f, -8.0f * (h + 1) / H); /* slopes */
    if (seg) bench_pack_segments(seg, B, T, &s);
    double *tf = mt_malloc(sizeof(double) * reps, "bench"),
           *tb = mt_malloc(sizeof(double) * reps, "bench");
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
        cpu_lightning_forward_block(out, state, qkv, decay, seg, B, T, H, D, block);
        double t1 = bench_now();
        memset(dqkv, 0, sizeof(float) * nq);
        double t2 = bench_now();
        cpu_lightning_backward_block(dqkv, state, state + ns, dout, qkv, decay, seg, B, T, H, D,
                                     block);
        double t3 = bench_now();
        if (r >= 0) tf[r] = t1 - t0, tb[r] = t3 - t2;
    }
    const double f = bench_median(tf, reps), b = bench_median(tb, reps);
    double cs = 0; /* a checksum, so that the work cannot be dropped and runs can be compared */
    for (size_t i = 0; i < no; i++) cs += out[i];
    for (size_t i = 0; i < nq; i++) cs += dqkv[i];
    printf("B=%d T=%-5d H=%d D=%-3d block %-3d %s  fwd %8.3f ms  bwd %8.3f ms  fwd+bwd %8.3f ms"
           "  (median of %d; checksum %.6g)\n",
           B, T, H, D, block, seg ? "seg" : "   ", 1e3 * f, 1e3 * b, 1e3 * (f + b), reps, cs);
    free(qkv);
    free(dqkv);
    free(out);
    free(dout);
    free(state);
    free(decay);
    free(seg);
    free(tf);
    free(tb);
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 11;
    MT_CHECK(reps >= 1, "bench-lightning: reps = %d must be >= 1", reps);
    bench_shape(4, 256, 8, 32, 64, 0, reps);
    bench_shape(4, 256, 8, 32, 64, 1, reps);
    bench_shape(1, 4096, 8, 128, 256, 0, reps > 5 ? 5 : reps);
    return 0;
}
