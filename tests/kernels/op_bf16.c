/* op_bf16.c: the CPU reference of the bf16 GEMM mode (mt_ctx.compute_dtype = MT_BF16).
 *
 * op_bf16_round: kernels/cpu/bf16.h's bit-manipulation rounding against an independent one
 * written here in double arithmetic (scale by the bf16 ulp of the binade, nearbyint in the
 * default round-to-nearest-even mode, scale back, infinity from 2^128 on), bit for bit, over
 * random bit patterns of every exponent, exact ties and their neighbours, subnormals, the
 * largest finite values, infinities, and NaNs (which a carry must not turn into infinity).
 *
 * op_matmul_bf16: the bf16 matmul forward and backward equal, bit for bit, an fp32 matmul of
 * operands (x, w, dy) pre-rounded by that independent rounding; the mode is the one recorded
 * when the node was created (the context is switched back to fp32 before the backward).
 *
 * op_moe_experts_bf16: the bf16 experts' pre-activations h1, h3 and output against a double
 * reference on rounded operands, to 1e-5 (fp32 vs double sums): h = R(w) R(x), and
 * out = sum_j weight * R(w2) R(silu(h1) h3), with the node's own saved h1, h3 for the second
 * product, so a rounding flip of g caused by the sum order cannot enter.
 *
 * op_lightning_bf16: the block form of lightning attention in bf16 mode (kernels/cpu/
 * lightning_bf16.c) rounds (against the fp32 mode: bf16-sized differences) and is otherwise
 * the same function (integer inputs where every rounding is exact: equal to the naive fp32
 * form bit for bit); see test_lightning. */
#include "tests/support/harness.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/bf16.h"

/* ---- the independent rounding ---- */

static float ref_bf16(float x) {
    if (isnan(x) || isinf(x) || x == 0.0f) return x;
    double ax = fabs((double)x);
    int e;
    (void)frexp(ax, &e); /* ax = m 2^e, m in [0.5, 1): the leading bit is 2^(e-1) */
    int lead = e - 1 < -126 ? -126 : e - 1; /* below the normal range the ulp stays 2^-133 */
    double ulp = ldexp(1.0, lead - 7);      /* 8 significant bits */
    double v = nearbyint(ax / ulp) * ulp;   /* exact scalings; ties to even */
    if (v >= 0x1p128) v = INFINITY;
    return (float)copysign(v, (double)x);
}

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    return u;
}
static float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

/* helper == reference (bits), or both NaN; counts and prints mismatches. */
static int64_t round_check(uint32_t u, int64_t *bad) {
    float x = bits_f32(u), got = mt_bf16_round(x), want = ref_bf16(x);
    bool ok = isnan(want) ? isnan(got) : f32_bits(got) == f32_bits(want);
    ok = ok && (f32_bits(got) & 0xffffu) == 0; /* a bf16 value */
    if (!ok && (*bad)++ < 8)
        printf("  round 0x%08x (%g): got 0x%08x want 0x%08x\n", u, (double)x, f32_bits(got),
               f32_bits(want));
    return 1;
}

static int test_round(void) {
    mt_rng r;
    mt_rng_seed(&r, 61);
    int64_t bad = 0, n = 0;
    for (int i = 0; i < 2000000; i++) n += round_check((uint32_t)mt_rng_u64(&r), &bad);
    /* every bf16 value's exact tie above it and the neighbours of the tie, both signs */
    for (uint32_t b = 0; b < 0x10000u; b++)
        for (uint32_t low = 0x7ffeu; low <= 0x8001u; low++) n += round_check((b << 16) | low, &bad);
    const float special[] = {0.0f,         -0.0f,         INFINITY,       -INFINITY,
                             FLT_MAX,      -FLT_MAX,      FLT_MIN,        -FLT_MIN,
                             FLT_TRUE_MIN, -FLT_TRUE_MIN, 1.0f + 0x1p-8f, 1.0f - 0x1p-9f};
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        n += round_check(f32_bits(special[i]), &bad);
    const uint32_t nans[] = {0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu,
                             0xff800001u, 0xffc00000u, 0xffffffffu, 0x7f80ffffu};
    for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
        n += round_check(nans[i], &bad);
        EXPECT(isnan(mt_bf16_round(bits_f32(nans[i]))), "NaN 0x%08x did not stay NaN", nans[i]);
    }
    EXPECT(bad == 0, "%lld of %lld roundings differ from the reference", (long long)bad,
           (long long)n);
    /* properties the reference itself must show (so it is not wrong in the same way) */
    EXPECT(ref_bf16(1.0f + 0x1p-8f) == 1.0f, "tie 1 + 2^-8 must round to the even 1");
    EXPECT(ref_bf16(1.0f + 0x3p-8f) == 1.0f + 0x1p-6f, "tie 1 + 3 2^-8 must round up to even");
    EXPECT(isinf(ref_bf16(FLT_MAX)), "FLT_MAX is past the midpoint to 2^128: must give inf");
    EXPECT(ref_bf16(0x1.fdfffep127f) == 0x1.fep127f, "below that midpoint: the largest bf16");
    printf("op_bf16_round: %lld values, %lld differ\n", (long long)n, (long long)bad);
    return MT_TEST_OK;
}

/* ---- matmul ---- */

static void round_into(float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = ref_bf16(src[i]);
}

static void expect_same(const char *label, const float *a, const float *b, int64_t n) {
    int64_t diff = 0;
    for (int64_t i = 0; i < n; i++) diff += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    EXPECT(diff == 0, "%s: %lld of %lld values differ from the reference", label, (long long)diff,
           (long long)n);
    printf("  %-24s n=%-6lld %s\n", label, (long long)n, diff ? "DIFFER" : "bit-identical");
}

static void matmul_case(const char *label, int64_t N, int64_t M, int64_t K, mt_rng *r) {
    mt_tensor *x = mt_test_tensor(MT_F32, 2, (int64_t[]){N, K}, true, "x");
    mt_tensor *w = mt_test_tensor(MT_F32, 2, (int64_t[]){M, K}, true, "w");
    mt_tensor *xr = mt_test_tensor(MT_F32, 2, (int64_t[]){N, K}, true, "xr");
    mt_tensor *wr = mt_test_tensor(MT_F32, 2, (int64_t[]){M, K}, true, "wr");
    mt_fill_normal(x->data, N * K, 1.0f, r);
    mt_fill_normal(w->data, M * K, 0.3f, r);
    mt_fill_normal(x->grad, N * K, 0.5f, r); /* the backward accumulates */
    mt_fill_normal(w->grad, M * K, 0.5f, r);
    memcpy(xr->grad, x->grad, mt_nbytes(x));
    memcpy(wr->grad, w->grad, mt_nbytes(w));
    round_into(xr->data, x->data, N * K);
    round_into(wr->data, w->data, M * K);
    float *dy = mt_malloc(sizeof(float) * (size_t)(N * M), "dy");
    float *dyr = mt_malloc(sizeof(float) * (size_t)(N * M), "dyr");
    mt_fill_normal(dy, N * M, 1.0f, r);
    round_into(dyr, dy, N * M);

    mt_ctx c16, c32, cf;
    mt_test_ctx_init(&c16);
    mt_test_ctx_init(&c32);
    mt_test_ctx_init(&cf);
    c16.compute_dtype = MT_BF16;
    mt_tensor *y16 = mt_matmul(&c16, x, w);
    c16.compute_dtype = MT_F32; /* the backward must keep the forward's mode */
    mt_tensor *y32 = mt_matmul(&c32, xr, wr);
    mt_backward(&c16, y16, dy);
    mt_backward(&c32, y32, dyr);
    printf("%s: N=%lld M=%lld K=%lld\n", label, (long long)N, (long long)M, (long long)K);
    expect_same("y", y16->data, y32->data, N * M);
    expect_same("dx", x->grad, xr->grad, N * K);
    expect_same("dw", w->grad, wr->grad, M * K);
    /* the rounding mattered: the unrounded fp32 product differs */
    mt_tensor *yf = mt_matmul(&cf, x, w);
    int64_t moved = 0;
    for (int64_t i = 0; i < N * M; i++) moved += ((float *)yf->data)[i] != ((float *)y16->data)[i];
    EXPECT(moved > 0, "%s: bf16 and fp32 outputs are identical", label);
    free(dy);
    free(dyr);
    mt_ctx_free(&c16);
    mt_ctx_free(&c32);
    mt_ctx_free(&cf);
}

static int test_matmul(void) {
    mt_rng r;
    mt_rng_seed(&r, 62);
    matmul_case("matmul bf16 small", 6, 23, 50, &r);
    matmul_case("matmul bf16 blocked", 67, 129, 300, &r); /* past BLAS's block sizes */
    return MT_TEST_OK;
}

/* ---- moe_experts ---- */

static int test_moe_experts(void) {
    mt_rng r;
    mt_rng_seed(&r, 63);
    const int64_t N = 20, C = 24, F = 36, E = 5, K = 2;
    mt_tensor *x = mt_test_tensor(MT_F32, 2, (int64_t[]){N, C}, true, "x");
    mt_tensor *idx = mt_test_tensor(MT_I32, 2, (int64_t[]){N, K}, false, "idx");
    mt_tensor *wt = mt_test_tensor(MT_F32, 2, (int64_t[]){N, K}, true, "weight");
    mt_tensor *w1 = mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w1");
    mt_tensor *w3 = mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w3");
    mt_tensor *w2 = mt_test_tensor(MT_F32, 3, (int64_t[]){E, C, F}, true, "w2");
    mt_fill_normal(x->data, N * C, 1.0f, &r);
    mt_fill_normal(wt->data, N * K, 0.5f, &r);
    mt_fill_normal(w1->data, E * F * C, 0.3f, &r);
    mt_fill_normal(w3->data, E * F * C, 0.3f, &r);
    mt_fill_normal(w2->data, E * C * F, 0.3f, &r);
    int32_t *id = idx->data;
    for (int64_t n = 0; n < N; n++) {
        id[n * K] = (int32_t)(n % E);
        id[n * K + 1] = (int32_t)((n + 1 + n / E) % E);
    }
    mt_ctx c;
    mt_test_ctx_init(&c);
    c.compute_dtype = MT_BF16;
    mt_tensor *out = mt_moe_experts(&c, x, idx, wt, w1, w3, w2);
    const mt_node *nd = &c.nodes[c.n_nodes - 1];
    const int32_t *inv = nd->saved[2]->data;
    const float *h1 = nd->saved[3]->data, *h3 = nd->saved[4]->data;
    float *h1r = mt_malloc(sizeof(float) * (size_t)(N * K * F), "h1 ref");
    float *h3r = mt_malloc(sizeof(float) * (size_t)(N * K * F), "h3 ref");
    float *outr = mt_calloc((size_t)(N * C), sizeof(float), "out ref");
    const float *xd = x->data, *wd = wt->data;
    const float *w1d = w1->data, *w3d = w3->data, *w2d = w2->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < K; j++) {
            int64_t e = id[n * K + j], s = inv[n * K + j];
            for (int64_t f = 0; f < F; f++) { /* h (by slot s) = R(w_e) R(x_n) */
                double a1 = 0, a3 = 0;
                for (int64_t k = 0; k < C; k++) {
                    double xv = ref_bf16(xd[n * C + k]);
                    a1 += (double)ref_bf16(w1d[(e * F + f) * C + k]) * xv;
                    a3 += (double)ref_bf16(w3d[(e * F + f) * C + k]) * xv;
                }
                h1r[s * F + f] = (float)a1;
                h3r[s * F + f] = (float)a3;
            }
            for (int64_t k = 0; k < C; k++) { /* the node's own h1, h3: see the header */
                double acc = 0;
                for (int64_t f = 0; f < F; f++) {
                    float z = h1[s * F + f], g = z * (1.0f / (1.0f + expf(-z))) * h3[s * F + f];
                    acc += (double)ref_bf16(w2d[(e * C + k) * F + f]) * ref_bf16(g);
                }
                outr[n * C + k] += (float)(wd[n * K + j] * acc);
            }
        }
    printf("moe_experts bf16 against a double reference on rounded operands\n");
    mt_check_rel_l2("moe_experts bf16 h1", h1, h1r, N * K * F, 1e-5);
    mt_check_rel_l2("moe_experts bf16 h3", h3, h3r, N * K * F, 1e-5);
    mt_check_rel_l2("moe_experts bf16 out", out->data, outr, N * C, 1e-5);
    free(h1r);
    free(h3r);
    free(outr);
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* ---- lightning, block form ---- */

/* Forward and backward of mt_lightning in GEMM mode cd; the context is switched to fp32 before
 * the backward (the node must keep its mode). dqkv starts from g0 (the backward accumulates). */
static void lightning_run(mt_dtype cd, int block, const float *qkv, const float *decay,
                          const int32_t *seg, const float *dout, const float *g0,
                          const int64_t *shape, float *out, float *dqkv) {
    const int64_t B = shape[0], T = shape[1], H = shape[2], n3 = B * T * H * shape[3];
    mt_tensor *q = mt_test_tensor(MT_F32, 4, shape, true, "qkv");
    mt_tensor *dc = mt_test_tensor(MT_F32, 1, (int64_t[]){H}, false, "decay");
    mt_tensor *sg = seg ? mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg") : NULL;
    memcpy(q->data, qkv, sizeof(float) * (size_t)n3);
    memcpy(q->grad, g0, sizeof(float) * (size_t)n3);
    memcpy(dc->data, decay, sizeof(float) * (size_t)H);
    if (sg) memcpy(sg->data, seg, sizeof(int32_t) * (size_t)(B * T));
    mt_ctx c;
    mt_test_ctx_init(&c);
    c.compute_dtype = cd;
    mt_tensor *o = mt_lightning(&c, q, dc, sg, block);
    c.compute_dtype = MT_F32;
    mt_backward(&c, o, dout);
    memcpy(out, o->data, mt_nbytes(o));
    memcpy(dqkv, q->grad, sizeof(float) * (size_t)n3);
    mt_ctx_free(&c);
}

/* (1) Random inputs: the bf16 run differs from the fp32 one by bf16 rounding, relative L2 in
 * [2e-4, 2e-2] for out and dqkv (no rounding gives about 1e-7; a wrong decay power, mask or
 * reset about 1e-1). (2) Inputs in {-1, 0, 1}, lambda = 0, D = 4: every GEMM operand and
 * intermediate (scores, states, their gradients) is an integer below 256 in magnitude, so bf16
 * rounding is exact and the bf16 block form must equal the naive fp32 form bit for bit: the
 * masks, resets, padding, scans and transposes are the same function. */
static int test_lightning(void) {
    mt_rng r;
    mt_rng_seed(&r, 64);
    const int64_t B = 2, T = 37, H = 2;
    int32_t seg[74];
    for (int t = 0; t < T; t++) {
        seg[t] = t < 8 ? 0 : t < 13 ? 1 : t < 30 ? 2 : 3; /* resets on a block edge and inside */
        seg[T + t] = 7;
    }
    for (int pass = 0; pass < 2; pass++) {
        const bool exact = pass == 1;
        const int64_t D = exact ? 4 : 16, shape[4] = {B, T, H, 3 * D};
        const int64_t n3 = B * T * H * 3 * D, n1 = B * T * H * D;
        float *qkv = mt_malloc(sizeof(float) * (size_t)n3, "qkv");
        float *g0 = mt_malloc(sizeof(float) * (size_t)n3, "g0");
        float *dout = mt_malloc(sizeof(float) * (size_t)n1, "dout");
        float *o16 = mt_malloc(sizeof(float) * (size_t)n1, "o16");
        float *o32 = mt_malloc(sizeof(float) * (size_t)n1, "o32");
        float *d16 = mt_malloc(sizeof(float) * (size_t)n3, "d16");
        float *d32 = mt_malloc(sizeof(float) * (size_t)n3, "d32");
        mt_fill_normal(qkv, n3, 0.5f, &r);
        mt_fill_normal(dout, n1, 1.0f, &r);
        mt_fill_normal(g0, n3, 0.5f, &r);
        if (exact) { /* integers: -1, 0, 1 and an integer-valued initial gradient */
            for (int64_t i = 0; i < n3; i++) qkv[i] = (float)(mt_rng_u64(&r) % 3) - 1.0f;
            for (int64_t i = 0; i < n1; i++) dout[i] = (float)(mt_rng_u64(&r) % 3) - 1.0f;
            for (int64_t i = 0; i < n3; i++) g0[i] = (float)(mt_rng_u64(&r) % 5) - 2.0f;
        }
        const float decay[2] = {exact ? 0.0f : 0.1f, exact ? 0.0f : 0.5f};
        const int blocks[2] = {8, 5};
        for (int bi = 0; bi < 2; bi++) {
            const int block = blocks[bi];
            lightning_run(MT_BF16, block, qkv, decay, seg, dout, g0, shape, o16, d16);
            char lo[64], ld[64];
            snprintf(lo, sizeof(lo), "lightning bf16 block %d out", block);
            snprintf(ld, sizeof(ld), "lightning bf16 block %d dqkv", block);
            if (exact) {
                lightning_run(MT_F32, 0, qkv, decay, seg, dout, g0, shape, o32, d32);
                printf("integer inputs, lambda 0, D 4: bf16 block form against fp32 naive\n");
                expect_same(lo, o16, o32, n1);
                expect_same(ld, d16, d32, n3);
                continue;
            }
            lightning_run(MT_F32, block, qkv, decay, seg, dout, g0, shape, o32, d32);
            /* dqkv - g0: the gradients themselves, not the accumulated sums */
            for (int64_t i = 0; i < n3; i++) {
                d16[i] -= g0[i];
                d32[i] -= g0[i];
            }
            const float *a[2] = {o16, d16}, *b[2] = {o32, d32};
            const int64_t n[2] = {n1, n3};
            for (int k = 0; k < 2; k++) {
                double num = 0, den = 0;
                for (int64_t i = 0; i < n[k]; i++) {
                    num += ((double)a[k][i] - b[k][i]) * ((double)a[k][i] - b[k][i]);
                    den += (double)b[k][i] * b[k][i];
                }
                double e = sqrt(num / den);
                printf("  %-32s bf16 vs fp32 rel_l2 %.3e (must lie in [2e-4, 2e-2])\n", k ? ld : lo,
                       e);
                EXPECT(e >= 2e-4 && e <= 2e-2, "%s: bf16 vs fp32 rel_l2 %.3e outside [2e-4, 2e-2]",
                       k ? ld : lo, e);
            }
        }
        free(qkv);
        free(g0);
        free(dout);
        free(o16);
        free(o32);
        free(d16);
        free(d32);
    }
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_bf16_round", test_round},
    {"op_matmul_bf16", test_matmul},
    {"op_moe_experts_bf16", test_moe_experts},
    {"op_lightning_bf16", test_lightning},
};
MT_TEST_MAIN(cases)
