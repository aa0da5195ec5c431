/* gpu_ops.cu: GPU benchmarks through the CUDA backend table (built with -DMT_CUDA=ON, run by
 * launch/gpu-check.sh). Prints:
 *  1. lightning attention (block form: batched cuBLAS GEMMs, lightning_block.cu)
 *     forward+backward time and achieved TFLOP/s for T = 2k, 8k, 32k with B*H fixed, and the
 *     time ratio for each 4x step in T (linear scaling gives 4), with fp32 and then bf16 GEMM
 *     operands (mt_ctx.compute_dtype); bf16 twice: the fused kernels (lightning_fused.cu, the
 *     default at D = 64 and 128: RESULT lightning) and the GEMM form (RESULT lightning-gemm);
 *  2. one MoE layer (router matmul, route, experts, aux loss) forward+backward with fp32 and
 *     then bf16 GEMMs, with the time split into route/permute, expert GEMMs, activations and
 *     combine (the CUDA phase profiler's events), and the GEMMs' TFLOP/s; then in bf16 the
 *     split form that dist.gather_unit = "expert" runs (RESULT moe_split);
 * fp32 kernels (the parity stage of the CUDA backend): the percentages are against the H100/
 * H200 datasheet fp32 (67 TFLOP/s) and dense bf16 (989 TFLOP/s) peaks; issue 6's targets are
 * for the bf16 kernels that come next.
 *  3. softmax attention in bf16 mode at MiniMax-Text-01's shape (H = 64, Hkv = 8, D = 128), fwd
 *     and bwd at T = 4k, 8k, on the flash kernels (attention_flash.cu: RESULT attention) and on
 *     cuDNN's fused attention (attention_cudnn.cu: RESULT attention-cudnn, only when cuDNN ran).
 *  4. (msa, not in all) MiniMax-M3's block-sparse attention, mt_msa_select + mt_msa_attention
 *     fwd+bwd in fp32 at T = 32k, against dense attention (bf16, flash kernels) at the same
 *     shape, as a ratio (RESULT msa; bench_msa below says the shape).
 * Usage: bench-gpu-ops [lightning|attention|moe|all|msa] [reps] [shrink]: shrink > 1 divides T, N,
 * C and F (a smoke run, e.g. on the CPU emulator in ctest; attention then also uses H = 2,
 * lightning D = 64 and a block of 256 / shrink, at least 64, one row tile of the fused
 * kernels, which run too: fewer, fuller blocks keep the emulated run short).
 * Exit 77 when no CUDA device is usable. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/lightning_fused.cuh"

#define PEAK_FP32_TFLOPS 67.0
#define PEAK_BF16_TFLOPS 989.4 /* H100/H200 SXM dense bf16 */

static uint64_t bench_rng = 0x243F6A8885A308D3ull;
static float bench_uniform(void) { /* splitmix64 -> [-1, 1) */
    uint64_t z = (bench_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) / 8388608.0f - 1.0f;
}

/* A device tensor the benchmark owns, filled with uniform random values times amp (never
 * zeros: zeros can run faster than real data). */
static mt_tensor *bench_tensor(const mt_backend *be, mt_dtype dt, int ndim, const int64_t *shape,
                               bool grad, float amp, const char *name) {
    mt_tensor *t = (mt_tensor *)calloc(1, sizeof(mt_tensor));
    mt_tensor_wrap(t, dt, ndim, shape, NULL, NULL, name);
    size_t nb = mt_nbytes(t);
    t->data = be->alloc(nb);
    MT_CHECK(t->data, "bench: cannot allocate %zu bytes for %s", nb, name);
    t->dev = be->dev;
    if (dt == MT_F32) {
        int64_t count = mt_numel(t);
        float *h = (float *)malloc(nb ? nb : 4);
        for (int64_t i = 0; i < count; i++) h[i] = amp * bench_uniform();
        be->to_device(t->data, h, nb);
        free(h);
    }
    if (grad) {
        t->grad = be->alloc(nb);
        MT_CHECK(t->grad, "bench: cannot allocate the gradient of %s", name);
        be->zero(t->grad, nb);
        t->requires_grad = true;
    }
    return t;
}

static void bench_tensor_free(const mt_backend *be, mt_tensor *t) {
    be->free(t->data);
    if (t->grad) be->free(t->grad);
    free(t);
}

static float *bench_seed(int64_t n) {
    float *s = (float *)malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) s[i] = bench_uniform();
    return s;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median forward and backward ms over reps (at most 16) after one warm-up, timed with CUDA
 * events: fwd(c, u) builds the op's output on the reset context, the backward starts from seed. */
typedef mt_tensor *(*bench_fwd_fn)(mt_ctx *c, void *u);
static void bench_time_fwd_bwd(mt_ctx *c, int reps, bench_fwd_fn fwd, void *u, const float *seed,
                               double *fwd_ms, double *bwd_ms) {
    double tf[16], tb[16];
    const int nrep = reps < 16 ? reps : 16;
    cudaEvent_t e0, e1, e2;
    cudaCheck("bench", cudaEventCreate(&e0));
    cudaCheck("bench", cudaEventCreate(&e1));
    cudaCheck("bench", cudaEventCreate(&e2));
    for (int r = -1; r < nrep; r++) { /* r = -1: warm-up */
        mt_ctx_reset(c);
        cudaCheck("bench", cudaEventRecord(e0));
        mt_tensor *o = fwd(c, u);
        cudaCheck("bench", cudaEventRecord(e1));
        mt_backward(c, o, seed);
        cudaCheck("bench", cudaEventRecord(e2));
        cudaCheck("bench", cudaEventSynchronize(e2));
        float f = 0, b = 0;
        cudaCheck("bench", cudaEventElapsedTime(&f, e0, e1));
        cudaCheck("bench", cudaEventElapsedTime(&b, e1, e2));
        if (r >= 0) {
            tf[r] = f;
            tb[r] = b;
        }
    }
    qsort(tf, nrep, sizeof(double), cmp_double);
    qsort(tb, nrep, sizeof(double), cmp_double);
    *fwd_ms = tf[nrep / 2];
    *bwd_ms = tb[nrep / 2];
    cudaCheck("bench", cudaEventDestroy(e0));
    cudaCheck("bench", cudaEventDestroy(e1));
    cudaCheck("bench", cudaEventDestroy(e2));
}

/* ---- lightning attention ---- */

/* fused: bf16 mode as the fused kernels (else the GEMM form; fp32 mode is always the GEMM
 * form) */
typedef struct {
    mt_tensor *qkv, *decay, *seg;
    int block;
} bench_lightning_args;
static mt_tensor *bench_lightning_fwd(mt_ctx *c, void *u) {
    const bench_lightning_args *a = (const bench_lightning_args *)u;
    return mt_lightning(c, a->qkv, a->decay, a->seg, a->block);
}

static void bench_lightning(const mt_backend *be, int reps, int shrink, mt_dtype cd, bool fused) {
    const int BH = 16, H = 16, B = BH / H, D = shrink > 1 ? 64 : 128;
    const int block = 256 / shrink > 64 ? 256 / shrink : 64;
    const int Ts[3] = {2048 / shrink, 8192 / shrink, 32768 / shrink};
    cuda_lightning_fused_select(fused);
    const bool on = cd == MT_BF16 && cuda_lightning_fused_on(D);
    printf("\n== lightning attention, block form (B=%d H=%d D=%d block=%d), %s GEMM operands, %s\n",
           B, H, D, block, cd == MT_BF16 ? "bf16" : "fp32", on ? "fused kernels" : "GEMM form");
    if (cd == MT_BF16 && fused && !on) printf("(no fused kernel at D = %d: the GEMM form)\n", D);
    printf("FLOPs per position and head: forward 2*block*D (intra, causal) + 4*D^2 (state "
           "readout + update); backward counted as 2x forward\n");
    printf("(the GEMMs execute 4*block*D + 4*D^2 forward and 10*block*D + 10*D^2 backward per "
           "position and head: full block squares, the state recomputed)\n");
    printf("%8s %10s %10s %10s %10s %8s %8s %8s\n", "T", "fwd ms", "bwd ms", "total ms", "TFLOP/s",
           "%fp32", "%bf16", "x4T");
    double prev = 0;
    for (int ti = 0; ti < 3; ti++) {
        const int T = Ts[ti];
        mt_ctx c;
        size_t nblk = (size_t)(T + block - 1) / block;
        /* activations plus the block form's scratch (lightning_block.cu), fp32 bounds */
        size_t rows = (size_t)BH * nblk * block;
        size_t arena = (size_t)B * T * H * D * 4 * 8 + rows * (68 * (size_t)D + 16 * block) +
                       18 * (size_t)BH * nblk * D * D + ((size_t)64 << 20);
        mt_ctx_init(&c, be, arena, 64);
        c.compute_dtype = cd;
        int64_t qs[4] = {B, T, H, 3 * D}, hs[1] = {H}, ss[2] = {B, T};
        mt_tensor *qkv = bench_tensor(be, MT_F32, 4, qs, true, 0.5f, "qkv");
        mt_tensor *decay = bench_tensor(be, MT_F32, 1, hs, false, 0.0f, "decay");
        mt_tensor *seg = bench_tensor(be, MT_I32, 2, ss, false, 0.0f, "seg");
        float lam[64];
        for (int h = 0; h < H; h++) lam[h] = 0.5f / (float)(1 << (h % 8)); /* 0.5 .. 0.004 */
        be->to_device(decay->data, lam, sizeof(float) * H);
        be->zero(seg->data, sizeof(int32_t) * (size_t)B * T); /* one segment per row */
        float *seed = bench_seed((int64_t)B * T * H * D);
        bench_lightning_args la = {qkv, decay, seg, block};
        double f, b;
        bench_time_fwd_bwd(&c, reps, bench_lightning_fwd, &la, seed, &f, &b);
        const double tot = f + b;
        double flops = 3.0 * (double)BH * T * (2.0 * block * D + 4.0 * D * D);
        double tflops = flops / (tot * 1e-3) / 1e12;
        char ratio[32] = "-";
        if (prev > 0) snprintf(ratio, sizeof(ratio), "%.2f", tot / prev);
        printf("%8d %10.3f %10.3f %10.3f %10.3f %7.2f%% %7.2f%% %8s\n", T, f, b, tot, tflops,
               100 * tflops / PEAK_FP32_TFLOPS, 100 * tflops / PEAK_BF16_TFLOPS, ratio);
        if (cd == MT_BF16) /* the line gpu-check.sh pairs with bench/gpu_peer.py's */
            printf("RESULT %s T=%d: %.3f ms fwd+bwd, %.2f TFLOP/s\n",
                   fused ? "lightning" : "lightning-gemm", T, tot, tflops);
        prev = tot;
        free(seed);
        bench_tensor_free(be, qkv);
        bench_tensor_free(be, decay);
        bench_tensor_free(be, seg);
        mt_ctx_free(&c);
    }
}

/* ---- softmax attention (bf16 mode: flash kernels, cuDNN) ---- */

/* Causal GQA attention in bf16 mode at MiniMax-Text-01's shape (H = 64, Hkv = 8, D = 128), B = 1,
 * one segment, T = 4k and 8k, on the path impl selects (kernels/cuda/attention_cudnn.h). FLOP
 * convention (causal, as FlashAttention reports it): forward 4 (T^2/2) D H B (Q K^T and P V over
 * the lower triangle), backward 2.5x the forward (five products). The bf16 casts, the delta pass
 * (flash) and the conversions around cuDNN are inside the timed region. */
static mt_tensor *bench_attention_fwd(mt_ctx *c, void *u) {
    mt_tensor **qkv = (mt_tensor **)u;
    return mt_attention(c, qkv[0], qkv[1], qkv[2], NULL, 1.0f / sqrtf((float)qkv[0]->shape[3]));
}

static void bench_attention(const mt_backend *be, int reps, int shrink, int impl) {
    const int B = 1, H = shrink > 1 ? 2 : 64, Hkv = shrink > 1 ? 1 : 8, D = 128;
    const int Ts[2] = {4096 / shrink, 8192 / shrink};
    const bool cudnn = impl == CUDA_ATTN_CUDNN;
    cuda_attention_impl_set(impl);
    printf("\n== softmax attention, bf16, %s (B=%d H=%d Hkv=%d D=%d, causal, one segment)\n",
           cudnn ? "cuDNN fused attention" : "flash kernels", B, H, Hkv, D);
    printf("FLOPs: forward 4*(T^2/2)*D*H*B, backward 2.5x forward\n");
    printf("%8s %10s %10s %10s %10s %10s %10s %8s\n", "T", "fwd ms", "bwd ms", "fwd TF/s",
           "bwd TF/s", "total ms", "TFLOP/s", "%bf16");
    for (int ti = 0; ti < 2; ti++) {
        const int T = Ts[ti];
        mt_ctx c;
        /* out, its gradient, lse; scratch: bf16 copies of q, k, v, out, dout and of the three
         * gradients, cuDNN's fp32 dq, its workspace (generous) */
        size_t arena = (size_t)B * T * D * (H + Hkv) * 4 * 6 + ((size_t)1 << 30);
        mt_ctx_init(&c, be, arena, 16);
        c.compute_dtype = MT_BF16;
        int64_t qs[4] = {B, T, H, D}, ks[4] = {B, T, Hkv, D};
        mt_tensor *q = bench_tensor(be, MT_F32, 4, qs, true, 1.0f, "q");
        mt_tensor *k = bench_tensor(be, MT_F32, 4, ks, true, 1.0f, "k");
        mt_tensor *v = bench_tensor(be, MT_F32, 4, ks, true, 1.0f, "v");
        float *seed = bench_seed((int64_t)B * T * H * D);
        mt_tensor *qkv3[3] = {q, k, v};
        cuda_attention_stats s0, s1;
        cuda_attention_stats_get(&s0);
        double f, b;
        bench_time_fwd_bwd(&c, reps, bench_attention_fwd, qkv3, seed, &f, &b);
        cuda_attention_stats_get(&s1);
        const double tot = f + b;
        double fwd_flops = 4.0 * ((double)T * T / 2) * D * H * B, bwd_flops = 2.5 * fwd_flops;
        double tflops = (fwd_flops + bwd_flops) / (tot * 1e-3) / 1e12;
        printf("%8d %10.3f %10.3f %10.2f %10.2f %10.3f %10.2f %7.2f%%\n", T, f, b,
               fwd_flops / (f * 1e-3) / 1e12, bwd_flops / (b * 1e-3) / 1e12, tot, tflops,
               100 * tflops / PEAK_BF16_TFLOPS);
        /* the lines gpu-check.sh pairs with bench/gpu_peer.py's; cuDNN's only when it ran */
        const bool fell = s1.fallback_fwd + s1.fallback_bwd > s0.fallback_fwd + s0.fallback_bwd;
        if (!cudnn)
            printf("RESULT attention T=%d: %.3f ms fwd+bwd, %.2f TFLOP/s\n", T, tot, tflops);
        else if (!fell && s1.cudnn_fwd > s0.cudnn_fwd && s1.cudnn_bwd > s0.cudnn_bwd)
            printf("RESULT attention-cudnn T=%d: %.3f ms fwd+bwd, %.2f TFLOP/s\n", T, tot, tflops);
        else
            printf("attention-cudnn T=%d: cuDNN did not run (the times above are the fallback's): "
                   "%s\n",
                   T, s1.last_reason);
        free(seed);
        bench_tensor_free(be, q);
        bench_tensor_free(be, k);
        bench_tensor_free(be, v);
        mt_ctx_free(&c);
    }
    cuda_attention_impl_set(-1);
}

/* ---- MoE layer ---- */

/* Expert e's (d1,d2) matrix of a stacked (E,d1,d2) tensor, data and gradient (host struct). */
static mt_tensor *bench_expert_slice(mt_ctx *c, mt_tensor *w, int e) {
    mt_tensor *t = (mt_tensor *)mt_arena_alloc(&c->host, sizeof(mt_tensor), "expert slice");
    const int64_t per = w->shape[1] * w->shape[2], shape[2] = {w->shape[1], w->shape[2]};
    mt_tensor_wrap(t, MT_F32, 2, shape, (float *)w->data + e * per, (float *)w->grad + e * per,
                   w->name);
    t->dev = w->dev;
    return t;
}

/* cd: the GEMM precision (mt_ctx.compute_dtype): fp32 runs one grouped cuBLAS GEMM per GEMM
 * kind, bf16 one cublasGemmEx per expert and kind (kernels/cuda/moe_experts.cu says why) spread
 * over `lanes` GEMM lanes (concurrent streams; 0: MT_CUDA_GEMM_LANES, else the default).
 * split: the experts as dispatch, one op per expert, combine (dist.gather_unit = "expert"),
 * every GEMM one cuBLAS call per expert. */
static void bench_moe(const mt_backend *be, int reps, int shrink, mt_dtype cd, bool split,
                      int lanes) {
    const int64_t N = 4096 / shrink, C = 2048 / shrink, F = 3072 / shrink;
    const int E = 32, K = 2;
    cuda_lanes_set(lanes);
    char lanes_txt[64] = "";
    if (cd == MT_BF16 && !split && lanes > 0)
        snprintf(lanes_txt, sizeof(lanes_txt), ", %d GEMM lane%s", lanes, lanes > 1 ? "s" : "");
    else if (cd == MT_BF16 && !split)
        snprintf(lanes_txt, sizeof(lanes_txt), ", GEMM lanes: MT_CUDA_GEMM_LANES, else %d",
                 CUDA_LANES_DEFAULT);
    printf("\n== MoE layer (N=%lld tokens, C=%lld, F=%lld, E=%d, top-%d), %s GEMMs, %s%s, "
           "forward+backward\n",
           (long long)N, (long long)C, (long long)F, E, K, cd == MT_BF16 ? "bf16" : "fp32",
           split ? "split (one op per expert)" : "fused", lanes_txt);
    mt_ctx c;
    /* activations and scratch; bf16 adds the experts' weights cast to bf16 in the forward and
     * again in the backward (3 E F C bf16 each) */
    size_t arena = (size_t)N * K * (8 * C + 8 * F) * 4 + (size_t)N * E * 4 * 8 +
                   (size_t)N * C * 4 * 4 + ((size_t)512 << 20) +
                   (cd == MT_BF16 ? (size_t)3 * E * F * C * 4 : 0);
    mt_ctx_init(&c, be, arena, 64);
    c.compute_dtype = cd;
    int64_t xs[2] = {N, C}, rs[2] = {E, C}, w1s[3] = {E, F, C}, w2s[3] = {E, C, F}, es[1] = {E};
    mt_tensor *x = bench_tensor(be, MT_F32, 2, xs, true, 1.0f, "x");
    mt_tensor *wr = bench_tensor(be, MT_F32, 2, rs, true, 0.05f, "router");
    mt_tensor *w1 = bench_tensor(be, MT_F32, 3, w1s, true, 0.02f, "w1");
    mt_tensor *w3 = bench_tensor(be, MT_F32, 3, w1s, true, 0.02f, "w3");
    mt_tensor *w2 = bench_tensor(be, MT_F32, 3, w2s, true, 0.02f, "w2");
    mt_tensor *coef = bench_tensor(be, MT_F32, 1, es, false, 0.01f, "coef");
    float *seed = bench_seed(N * C);
    cuda_prof_enable(true);
    double total[16];
    double ms[CUDA_PROF_SLOTS] = {0};
    int nrep = reps < 16 ? reps : 16;
    cudaEvent_t e0, e1;
    cudaCheck("bench", cudaEventCreate(&e0));
    cudaCheck("bench", cudaEventCreate(&e1));
    for (int r = -1; r < nrep; r++) {
        mt_ctx_reset(&c);
        double discard[CUDA_PROF_SLOTS] = {0};
        cudaCheck("bench", cudaEventRecord(e0));
        mt_tensor *logits = mt_matmul(&c, x, wr);
        mt_tensor *idx = NULL;
        mt_tensor *w = mt_moe_route(&c, logits, K, &idx);
        mt_tensor *y;
        if (split) {
            mt_moe_plan plan;
            mt_tensor *xsl = mt_moe_dispatch(&c, x, idx, E, &plan);
            mt_tensor *ys = mt_moe_expert_out(&c, &plan, C);
            for (int e = 0; e < E; e++)
                mt_moe_expert_ffn(&c, xsl, &plan, w, e, bench_expert_slice(&c, w1, e),
                                  bench_expert_slice(&c, w3, e), bench_expert_slice(&c, w2, e), ys);
            y = mt_moe_combine(&c, ys, &plan);
        } else {
            y = mt_moe_experts(&c, x, idx, w, w1, w3, w2);
        }
        mt_tensor *aux = mt_moe_aux(&c, logits, coef);
        (void)aux; /* its backward is not part of the timed path: seeded from y only */
        mt_backward(&c, y, seed);
        cudaCheck("bench", cudaEventRecord(e1));
        cudaCheck("bench", cudaEventSynchronize(e1));
        float t = 0;
        cudaCheck("bench", cudaEventElapsedTime(&t, e0, e1));
        cuda_prof_read(r >= 0 ? ms : discard);
        if (r >= 0) total[r] = t;
    }
    cuda_prof_enable(false);
    qsort(total, nrep, sizeof(double), cmp_double);
    double tot = total[nrep / 2];
    for (int s = 0; s < CUDA_PROF_SLOTS; s++) ms[s] /= nrep;
    double gemm_flops = 18.0 * (double)N * K * C * F; /* 3 forward + 6 backward GEMMs */
    double gemm_tflops = gemm_flops / (ms[CUDA_PROF_GEMM] * 1e-3) / 1e12;
    printf("total fwd+bwd (median of %d): %.3f ms (includes the router matmul and host syncs)\n",
           nrep, tot);
    printf("  route/permute %8.3f ms  (router softmax/top-k, counting sort, gathers; mean)\n",
           ms[CUDA_PROF_ROUTE]);
    printf("  expert GEMMs  %8.3f ms  %.2f TFLOP/s = %.1f%% of fp32, %.1f%% of bf16 peak\n",
           ms[CUDA_PROF_GEMM], gemm_tflops, 100 * gemm_tflops / PEAK_FP32_TFLOPS,
           100 * gemm_tflops / PEAK_BF16_TFLOPS);
    printf("  activations   %8.3f ms  (SwiGLU, its backward, dweight)\n", ms[CUDA_PROF_ACT]);
    printf("  combine       %8.3f ms  (weighted unpermute, dx combine)\n", ms[CUDA_PROF_COMBINE]);
    printf("  other         %8.3f ms  (router matmul, bf16 casts, host syncs: total - the above)\n",
           tot - ms[CUDA_PROF_ROUTE] - ms[CUDA_PROF_GEMM] - ms[CUDA_PROF_ACT] -
               ms[CUDA_PROF_COMBINE]);
    if (cd == MT_BF16)
        printf("RESULT %s: %.3f ms fwd+bwd, expert GEMMs %.2f TFLOP/s\n",
               split        ? "moe_split"
               : lanes == 1 ? "moe_lanes1"
                            : "moe",
               tot, gemm_tflops);
    free(seed);
    cudaCheck("bench", cudaEventDestroy(e0));
    cudaCheck("bench", cudaEventDestroy(e1));
    mt_tensor *all[6] = {x, wr, w1, w3, w2, coef};
    for (int i = 0; i < 6; i++) bench_tensor_free(be, all[i]);
    mt_ctx_free(&c);
}

/* ---- MSA (MiniMax-M3's block-sparse attention) against dense flash attention ---- */

/* B = 1, one kv group at M3's ratio (H = 16 query heads on Hkv = 1; M3 has H = 64, Hkv = 4: four
 * such groups, about 4x these times), D = 128, Di = 128, block 128, topk 16, T = 32k: the MSA
 * forward is the selection (mt_msa_select, dense O(T^2 Di) by definition) plus the attention
 * over topk*block = 2048 keys per query (mt_msa_attention), the backward the attention's; fp32
 * (the MSA nodes carry no GEMM mode: msa_*.cu). Against mt_attention in bf16 mode on the flash
 * kernels (attention_flash.cu) at the same shape, causal, one segment. FLOPs of MSA's attention:
 * forward 4 T (topk block) D H, backward 2.5x (the selection's 2 T^2/2 Di Hkv not counted). */
typedef struct {
    mt_tensor *q, *k, *v, *iq, *ik, *pos;
    int block, topk;
} bench_msa_args;
static mt_tensor *bench_msa_fwd(mt_ctx *c, void *u) {
    const bench_msa_args *a = (const bench_msa_args *)u;
    mt_tensor *idx = mt_msa_select(c, a->iq, a->ik, a->pos, NULL, NULL, a->block, a->topk);
    return mt_msa_attention(c, a->q, a->k, a->v, idx, a->pos, NULL, NULL, a->block,
                            1.0f / sqrtf((float)a->q->shape[3]));
}

static void bench_msa(const mt_backend *be, int reps, int shrink) {
    const int B = 1, H = shrink > 1 ? 2 : 16, Hkv = 1, D = 128, Di = 128, topk = 16;
    const int T = 32768 / shrink, block = 128 / shrink > 16 ? 128 / shrink : 16;
    printf("\n== MSA (select + attention, fp32) vs dense attention (bf16 flash), B=%d T=%d H=%d "
           "Hkv=%d D=%d Di=%d block=%d topk=%d\n",
           B, T, H, Hkv, D, Di, block, topk);
    mt_ctx c;
    size_t arena = (size_t)B * T * D * (H + Hkv) * 4 * 8 + ((size_t)1 << 30);
    mt_ctx_init(&c, be, arena, 16);
    int64_t qs[4] = {B, T, H, D}, ks[4] = {B, T, Hkv, D}, iqs[4] = {B, T, Hkv, Di},
            iks[4] = {B, T, 1, Di}, ps[2] = {B, T};
    bench_msa_args a;
    a.q = bench_tensor(be, MT_F32, 4, qs, true, 1.0f, "q");
    a.k = bench_tensor(be, MT_F32, 4, ks, true, 1.0f, "k");
    a.v = bench_tensor(be, MT_F32, 4, ks, true, 1.0f, "v");
    a.iq = bench_tensor(be, MT_F32, 4, iqs, false, 1.0f, "iq");
    a.ik = bench_tensor(be, MT_F32, 4, iks, false, 1.0f, "ik");
    a.pos = bench_tensor(be, MT_I32, 2, ps, false, 0.0f, "pos");
    int32_t *ph = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * T));
    for (int64_t i = 0; i < (int64_t)B * T; i++) ph[i] = (int32_t)(i % T);
    be->to_device(a.pos->data, ph, sizeof(int32_t) * (size_t)(B * T));
    free(ph);
    a.block = block;
    a.topk = topk;
    float *seed = bench_seed((int64_t)B * T * H * D);
    double mf, mb, df, db;
    bench_time_fwd_bwd(&c, reps, bench_msa_fwd, &a, seed, &mf, &mb);
    mt_ctx_free(&c);
    /* dense: bf16 mode, the flash kernels */
    mt_ctx_init(&c, be, arena, 16);
    c.compute_dtype = MT_BF16;
    cuda_attention_impl_set(CUDA_ATTN_FLASH);
    mt_tensor *qkv3[3] = {a.q, a.k, a.v};
    bench_time_fwd_bwd(&c, reps, bench_attention_fwd, qkv3, seed, &df, &db);
    cuda_attention_impl_set(-1);
    mt_ctx_free(&c);
    const double sup = (double)topk * block < T ? (double)topk * block : T;
    const double flops = 3.5 * 4.0 * T * sup * D * H * B;
    printf("%-28s %10s %10s %10s %10s\n", "", "fwd ms", "bwd ms", "total ms", "TFLOP/s");
    printf("%-28s %10.3f %10.3f %10.3f %10.2f\n", "msa fp32 (select+attention)", mf, mb, mf + mb,
           flops / ((mf + mb) * 1e-3) / 1e12);
    printf("%-28s %10.3f %10.3f %10.3f\n", "dense bf16 flash", df, db, df + db);
    printf("RESULT msa T=%d: %.3f ms fwd+bwd (fp32), dense flash bf16 %.3f ms: msa/dense %.3f\n", T,
           mf + mb, df + db, (mf + mb) / (df + db));
    free(seed);
    mt_tensor *ts[6] = {a.q, a.k, a.v, a.iq, a.ik, a.pos};
    for (int i = 0; i < 6; i++) bench_tensor_free(be, ts[i]);
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "all";
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    int shrink = argc > 3 ? atoi(argv[3]) : 1;
    if (reps < 1) reps = 1;
    if (shrink < 1 || shrink > 256) shrink = 1;
    const mt_backend *be = mt_backend_cuda();
    if (!be) {
        printf("bench-gpu-ops: no usable CUDA device; skipped\n");
        return 77;
    }
    if (!strcmp(what, "lightning") || !strcmp(what, "all")) {
        bench_lightning(be, reps, shrink, MT_F32, false);
        bench_lightning(be, reps, shrink, MT_BF16, true);  /* the default */
        bench_lightning(be, reps, shrink, MT_BF16, false); /* MT_LIGHTNING_FUSED=0 */
    }
    if (!strcmp(what, "attention") || !strcmp(what, "all")) {
        bench_attention(be, reps, shrink, CUDA_ATTN_FLASH);
        bench_attention(be, reps, shrink, CUDA_ATTN_CUDNN);
    }
    if (!strcmp(what, "moe") || !strcmp(what, "all")) {
        bench_moe(be, reps, shrink, MT_F32, false, 0);
        bench_moe(be, reps, shrink, MT_BF16, false, 0); /* the default lanes */
        bench_moe(be, reps, shrink, MT_BF16, false, 1); /* no concurrency: the A/B */
        bench_moe(be, reps, shrink, MT_BF16, true, 0);
    }
    if (!strcmp(what, "msa")) bench_msa(be, reps, shrink); /* not in "all": its own step */
    return 0;
}
