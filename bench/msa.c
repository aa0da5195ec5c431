/* bench/msa.c: wall time of MiniMax-M3's block-sparse attention on the CPU (kernels/cpu/msa_*.c)
 * against dense causal attention (kernels/cpu/attention.c) in the same run: MSA forward +
 * backward (the indexer's selection, the attention over the selected blocks with the lse, its
 * dq, dk, dv), the indexer's KL loss forward + backward (diq, dik) separately, and dense
 * cpu_attention_fwd + cpu_attention_bwd; the ratios MSA / dense fall as T grows (the support
 * is topk*block keys per query, dense T/2 on average). Median of `reps` runs (one warm-up
 * first when reps > 1); threads from OMP_NUM_THREADS.
 *
 * Usage: bench-msa [reps] [T ...]      (default: 1 run each of T = 4096 and 16384)
 *
 * Shape: B = 1, H = 4 query heads, Hkv = Hi = 2, D = Di = 64, block 64, topk 16 (M3's topk; its
 * block is 128 and D 128), one sample per row, normal inputs. About a minute in all on 2 cores. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "bench/bench_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/msa.h"

enum { B = 1, H = 4, HKV = 2, D = 64, DI = 64, BLOCK = 64, TOPK = 16 };

static float *bench_normals(size_t n, uint64_t *s) {
    float *x = mt_malloc(sizeof(float) * n, "bench");
    for (size_t i = 0; i < n; i++) x[i] = bench_normal(s);
    return x;
}

static void bench_t(int T, int reps) {
    const size_t nq = (size_t)B * T * H * D, nk = (size_t)B * T * HKV * D;
    const size_t niq = (size_t)B * T * HKV * DI, nik = (size_t)B * T * DI;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    float *q = bench_normals(nq, &s), *k = bench_normals(nk, &s), *v = bench_normals(nk, &s);
    float *iq = bench_normals(niq, &s), *ik = bench_normals(nik, &s);
    float *dout = bench_normals(nq, &s);
    float *out = mt_malloc(sizeof(float) * nq, "bench"), *dq = mt_malloc(sizeof(float) * nq, "b");
    float *dk = mt_malloc(sizeof(float) * nk, "bench"), *dv = mt_malloc(sizeof(float) * nk, "b");
    float *diq = mt_malloc(sizeof(float) * niq, "b"), *dik = mt_malloc(sizeof(float) * nik, "b");
    float *lse = mt_malloc(sizeof(float) * B * H * T, "bench");
    double *delta = mt_malloc(sizeof(double) * B * H * T, "bench");
    int32_t *pos = mt_malloc(sizeof(int32_t) * B * T, "bench");
    int32_t *idx = mt_malloc(sizeof(int32_t) * (size_t)B * HKV * T * TOPK, "bench");
    for (int t = 0; t < B * T; t++) pos[t] = t % T;
    float *wsel = mt_malloc(sizeof(float) * (size_t)cpu_msa_select_work(T, BLOCK), "bench");
    float *watt =
        mt_malloc(sizeof(float) * (size_t)cpu_msa_attention_work(H / HKV, BLOCK, TOPK), "bench");
    void *wbwd = mt_malloc(cpu_msa_attention_bwd_work(B, T, T, H, HKV, D, BLOCK, TOPK), "bench");
    void *wkl = mt_malloc(cpu_msa_kl_work(B, T, BLOCK, TOPK), "bench");
    void *wklb = mt_malloc(cpu_msa_kl_bwd_work(B, T, T, H, HKV, DI, BLOCK, TOPK), "bench");
    const float scale = 1.0f / sqrtf((float)D), iscale = 1.0f / sqrtf((float)DI);
    double *td = mt_malloc(sizeof(double) * reps, "b"), *tm = mt_malloc(sizeof(double) * reps, "b");
    double *ts = mt_malloc(sizeof(double) * reps, "b"), *tk = mt_malloc(sizeof(double) * reps, "b");
    double *tf = mt_malloc(sizeof(double) * reps, "b");
    double cs = 0, loss = 0; /* checksums: the work cannot be dropped, runs can be compared */
    for (int r = reps > 1 ? -1 : 0; r < reps; r++) {
        memset(dq, 0, sizeof(float) * nq);
        memset(dk, 0, sizeof(float) * nk);
        memset(dv, 0, sizeof(float) * nk);
        double t0 = bench_now();
        cpu_attention_fwd(out, lse, q, k, v, NULL, B, T, H, HKV, D, scale);
        cpu_attention_bwd(dq, dk, dv, delta, dout, out, lse, q, k, v, NULL, B, T, H, HKV, D, scale);
        double t1 = bench_now();
        for (size_t i = 0; i < nq; i++) cs += dq[i];
        memset(dq, 0, sizeof(float) * nq);
        memset(dk, 0, sizeof(float) * nk);
        memset(dv, 0, sizeof(float) * nk);
        double t2 = bench_now();
        cpu_msa_select_forward(idx, wsel, iq, ik, pos, NULL, NULL, B, T, T, HKV, DI, BLOCK, TOPK);
        double t3 = bench_now();
        cpu_msa_attention_forward(out, lse, watt, q, k, v, idx, pos, NULL, NULL, B, T, T, H, HKV, D,
                                  BLOCK, TOPK, scale);
        double t3b = bench_now();
        cpu_msa_attention_backward(dq, dk, dv, wbwd, dout, out, lse, q, k, v, idx, pos, NULL, NULL,
                                   B, T, T, H, HKV, D, BLOCK, TOPK, scale);
        double t4 = bench_now();
        memset(diq, 0, sizeof(float) * niq);
        memset(dik, 0, sizeof(float) * nik);
        double t5 = bench_now();
        loss = cpu_msa_kl_forward(wkl, q, k, iq, ik, idx, pos, NULL, NULL, NULL, B, T, T, H, HKV, D,
                                  DI, BLOCK, TOPK, scale, iscale, 1.0f, (float)(B * T));
        cpu_msa_kl_backward(diq, dik, wklb, 1.0f, q, k, iq, ik, idx, pos, NULL, NULL, NULL, B, T, T,
                            H, HKV, D, DI, BLOCK, TOPK, scale, iscale, 1.0f, (float)(B * T));
        double t6 = bench_now();
        if (r >= 0)
            td[r] = t1 - t0, ts[r] = t3 - t2, tf[r] = t3b - t3, tm[r] = t4 - t2, tk[r] = t6 - t5;
    }
    for (size_t i = 0; i < nq; i++) cs += dq[i];
    for (size_t i = 0; i < nik; i++) cs += dik[i];
    const double d = bench_median(td, reps), m = bench_median(tm, reps);
    const double sel = bench_median(ts, reps), kl = bench_median(tk, reps);
    const double fwd = bench_median(tf, reps);
    printf("T=%-6d dense fwd+bwd %9.1f ms | msa select+fwd+bwd %9.1f ms (select %7.1f, fwd %7.1f) "
           "ratio %.3f | kl fwd+bwd %9.1f ms ratio %.3f  (median of %d; checksum %.6g, kl %.6g)\n",
           T, 1e3 * d, 1e3 * m, 1e3 * sel, 1e3 * fwd, m / d, 1e3 * kl, kl / d, reps, cs, loss);
    fflush(stdout);
    free(q), free(k), free(v), free(iq), free(ik), free(dout), free(out), free(dq), free(dk);
    free(dv), free(diq), free(dik), free(lse), free(delta), free(pos), free(idx), free(wsel);
    free(watt), free(wbwd), free(wkl), free(wklb), free(td), free(tm), free(ts), free(tk), free(tf);
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 1;
    MT_CHECK(reps >= 1, "bench-msa: reps %d", reps);
    printf("B=%d H=%d Hkv=Hi=%d D=Di=%d block=%d topk=%d, one sample per row\n", B, H, HKV, D,
           BLOCK, TOPK);
    if (argc > 2)
        for (int i = 2; i < argc; i++) bench_t(atoi(argv[i]), reps);
    else
        for (int T = 4096; T <= 16384; T *= 4) bench_t(T, reps);
    return 0;
}
