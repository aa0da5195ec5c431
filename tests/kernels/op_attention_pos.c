/* op_attention_pos.c: the position kernels of context parallelism (cpu_attention_pos_fwd/_bwd,
 * kernels/cpu/attention.h) against the full-sequence kernels. Identity positions over the same
 * keys must give cpu_attention_fwd/_bwd (and the bf16 forms) bit for bit; the rows of a rank of
 * the causal layout (autograd/context_parallel.h: chunks r and 2C-1-r of 2C) must give the full
 * kernel's rows, and the ranks' key gradients summed must give its dk, dv (fp32: 1e-6 relative
 * L2; the tiles' sums group differently). Packed segments cross the chunk borders and the
 * kernels' 64-row tiles. */
#include "tests/support/harness.h"
#include "autograd/context_parallel.h"
#include "kernels/cpu/attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t B, T, H, Hkv, D;
    float *q, *k, *v, *dout;
    int32_t *seg;
} pos_case;

static void *zalloc(size_t bytes) { return mt_malloc(bytes ? bytes : 1, "test buffer"); }

static pos_case case_make(int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D, bool seg,
                          uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    pos_case c = {.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D};
    const int64_t nq = B * T * H * D, nk = B * T * Hkv * D;
    c.q = zalloc(sizeof(float) * nq);
    c.k = zalloc(sizeof(float) * nk);
    c.v = zalloc(sizeof(float) * nk);
    c.dout = zalloc(sizeof(float) * nq);
    mt_fill_normal(c.q, nq, 1.0f, &r);
    mt_fill_normal(c.k, nk, 1.0f, &r);
    mt_fill_normal(c.v, nk, 1.0f, &r);
    mt_fill_normal(c.dout, nq, 1.0f, &r);
    if (seg) { /* row 0: samples of 37, 50, 3, then the rest; id 0 again after a gap */
        c.seg = zalloc(sizeof(int32_t) * B * T);
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                c.seg[b * T + t] = b == 0 ? (t < 37   ? 0
                                             : t < 87 ? 1
                                             : t < 90 ? 0
                                                      : 2 + (int)(t / 41))
                                          : 9;
    }
    return c;
}

static void case_free(pos_case *c) {
    free(c->q), free(c->k), free(c->v), free(c->dout), free(c->seg);
}

/* Runs forward and backward of the full kernel (pos NULL) or the position kernel with identity
 * positions; results into out (nq), lse (B H T), g (nq + 2 nk, pre-filled for +=). */
static void run_full(const pos_case *c, bool bf16, bool pos, float *out, float *lse, float *g) {
    const int64_t B = c->B, T = c->T, H = c->H, Hkv = c->Hkv, D = c->D;
    const int64_t nq = B * T * H * D, nk = B * T * Hkv * D;
    double *delta = zalloc(sizeof(double) * B * H * T);
    int32_t *id = zalloc(sizeof(int32_t) * T);
    for (int64_t i = 0; i < T; i++) id[i] = (int32_t)i;
    const float sc = 0.3f;
    if (pos) {
        cpu_attention_pos_fwd(out, lse, c->q, c->k, c->v, c->seg, c->seg, id, B, T, T, H, Hkv, D,
                              sc, bf16);
        cpu_attention_pos_bwd(g, g + nq, g + nq + nk, delta, c->dout, out, lse, c->q, c->k, c->v,
                              c->seg, c->seg, id, B, T, T, H, Hkv, D, sc, bf16);
    } else if (bf16) {
        cpu_attention_fwd_bf16(out, lse, c->q, c->k, c->v, c->seg, B, T, H, Hkv, D, sc);
        cpu_attention_bwd_bf16(g, g + nq, g + nq + nk, delta, c->dout, out, lse, c->q, c->k, c->v,
                               c->seg, B, T, H, Hkv, D, sc);
    } else {
        cpu_attention_fwd(out, lse, c->q, c->k, c->v, c->seg, B, T, H, Hkv, D, sc);
        cpu_attention_bwd(g, g + nq, g + nq + nk, delta, c->dout, out, lse, c->q, c->k, c->v,
                          c->seg, B, T, H, Hkv, D, sc);
    }
    free(delta);
    free(id);
}

static void check_identity(const char *label, int64_t B, int64_t T, int64_t Hkv, bool seg,
                           bool bf16, uint64_t seed) {
    pos_case c = case_make(B, T, 4, Hkv, 16, seg, seed);
    const int64_t nq = B * T * 4 * 16, nk = B * T * Hkv * 16, ng = nq + 2 * nk;
    float *o[2], *l[2], *g[2];
    mt_rng r;
    mt_rng_seed(&r, seed + 100);
    for (int w = 0; w < 2; w++) {
        o[w] = zalloc(sizeof(float) * nq);
        l[w] = zalloc(sizeof(float) * B * 4 * T);
        g[w] = zalloc(sizeof(float) * ng);
    }
    mt_fill_normal(g[0], ng, 1.0f, &r); /* the backward accumulates */
    memcpy(g[1], g[0], sizeof(float) * ng);
    run_full(&c, bf16, false, o[0], l[0], g[0]);
    run_full(&c, bf16, true, o[1], l[1], g[1]);
    EXPECT(!memcmp(o[0], o[1], sizeof(float) * nq), "%s: output differs from the full kernel",
           label);
    EXPECT(!memcmp(l[0], l[1], sizeof(float) * B * 4 * T), "%s: lse differs", label);
    EXPECT(!memcmp(g[0], g[1], sizeof(float) * ng), "%s: gradients differ", label);
    for (int w = 0; w < 2; w++) free(o[w]), free(l[w]), free(g[w]);
    case_free(&c);
}

static int test_identity(void) {
    check_identity("identity fp32 seg", 2, 150, 2, true, false, 1);
    check_identity("identity fp32", 1, 70, 1, false, false, 2);
    check_identity("identity bf16 seg", 2, 90, 2, true, true, 3);
    return MT_TEST_OK;
}

/* rows[i] of (B,T,W) at global position gi into (B,Tl,W) local rows, by the layout */
static void take_rows(float *dst, const float *src, int64_t B, int64_t T, int64_t W, int r, int C) {
    const int64_t Tl = T / C;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Tl; i++)
            memcpy(dst + (b * Tl + i) * W, src + (b * T + mt_cp_global_index(r, C, T, i)) * W,
                   sizeof(float) * W);
}

/* The C ranks' rows of one row set against the full kernel. */
static void check_layout(const char *label, int C, int64_t B, int64_t T, int64_t Hkv, bool seg,
                         bool bf16, uint64_t seed) {
    const int64_t H = 4, D = 16, Tl = T / C, nq = B * T * H * D, nk = B * T * Hkv * D;
    pos_case c = case_make(B, T, H, Hkv, D, seg, seed);
    float *out = zalloc(sizeof(float) * nq), *lse = zalloc(sizeof(float) * B * H * T);
    float *g = zalloc(sizeof(float) * (nq + 2 * nk));
    memset(g, 0, sizeof(float) * (nq + 2 * nk));
    run_full(&c, bf16, false, out, lse, g);
    /* per rank: local q, dout, seg; outputs and dq by rows; dk, dv summed over ranks */
    const int64_t lq = B * Tl * H * D;
    float *ql = zalloc(sizeof(float) * lq), *dol = zalloc(sizeof(float) * lq);
    float *ol = zalloc(sizeof(float) * lq), *ll = zalloc(sizeof(float) * B * H * Tl);
    float *dql = zalloc(sizeof(float) * lq), *dq = zalloc(sizeof(float) * nq);
    float *o_all = zalloc(sizeof(float) * nq), *dkv = zalloc(sizeof(float) * 2 * nk);
    float *segf = zalloc(sizeof(float) * B * T), *segl = zalloc(sizeof(float) * B * Tl);
    double *delta = zalloc(sizeof(double) * B * H * Tl);
    int32_t *pos = zalloc(sizeof(int32_t) * Tl);
    memset(dkv, 0, sizeof(float) * 2 * nk);
    if (seg) memcpy(segf, c.seg, sizeof(int32_t) * B * T);
    double lse_err = 0;
    for (int r = 0; r < C; r++) {
        for (int64_t i = 0; i < Tl; i++) pos[i] = (int32_t)mt_cp_global_index(r, C, T, i);
        take_rows(ql, c.q, B, T, H * D, r, C);
        take_rows(dol, c.dout, B, T, H * D, r, C);
        if (seg) take_rows(segl, segf, B, T, 1, r, C);
        const int32_t *sq = seg ? (const int32_t *)segl : NULL;
        memset(dql, 0, sizeof(float) * lq);
        cpu_attention_pos_fwd(ol, ll, ql, c.k, c.v, sq, c.seg, pos, B, Tl, T, H, Hkv, D, 0.3f,
                              bf16);
        cpu_attention_pos_bwd(dql, dkv, dkv + nk, delta, dol, ol, ll, ql, c.k, c.v, sq, c.seg, pos,
                              B, Tl, T, H, Hkv, D, 0.3f, bf16);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < Tl; i++) {
                const int64_t t = pos[i], src = (b * Tl + i) * H * D, dst = (b * T + t) * H * D;
                memcpy(o_all + dst, ol + src, sizeof(float) * H * D);
                memcpy(dq + dst, dql + src, sizeof(float) * H * D);
                for (int64_t h = 0; h < H; h++) {
                    const double d = ll[(b * H + h) * Tl + i] - lse[(b * H + h) * T + t];
                    lse_err = d * d > lse_err ? d * d : lse_err;
                }
            }
    }
    char name[160];
    snprintf(name, sizeof name, "%s out", label);
    mt_check_rel_l2(name, o_all, out, nq, 1e-6);
    snprintf(name, sizeof name, "%s dq", label);
    mt_check_rel_l2(name, dq, g, nq, 1e-6);
    snprintf(name, sizeof name, "%s dk", label);
    mt_check_rel_l2(name, dkv, g + nq, nk, 1e-6);
    snprintf(name, sizeof name, "%s dv", label);
    mt_check_rel_l2(name, dkv + nk, g + nq + nk, nk, 1e-6);
    EXPECT(lse_err < 1e-10, "%s: lse differs by %g", label, sqrt(lse_err));
    free(out), free(lse), free(g), free(ql), free(dol), free(ol), free(ll), free(dql), free(dq);
    free(o_all), free(dkv), free(segf), free(segl), free(delta), free(pos);
    case_free(&c);
}

static int test_layout(void) {
    /* T / (2C) = 40, 20 and 10: chunks end inside the 64-row tiles; 256 / 4: whole tiles */
    check_layout("C=2 T=160 seg gqa", 2, 2, 160, 2, true, false, 11);
    check_layout("C=4 T=160 seg mqa", 4, 2, 160, 1, true, false, 12);
    check_layout("C=4 T=80 no seg", 4, 1, 80, 2, false, false, 13);
    check_layout("C=2 T=512 seg", 2, 1, 512, 2, true, false, 14);
    check_layout("C=2 T=96 seg bf16", 2, 2, 96, 2, true, true, 15);
    return MT_TEST_OK;
}

static void bad_position(void *arg) {
    float x[16] = {0};
    int32_t p[1] = {*(int32_t *)arg};
    cpu_attention_pos_fwd(x, NULL, x, x, x, NULL, NULL, p, 1, 1, 2, 1, 1, 8, 1.0f, false);
}

static int test_refusals(void) {
    int32_t p = 2;
    EXPECT(mt_expect_death(bad_position, &p, "query row 0 at position 2, keys 0 .. 1"),
           "a position past the keys must be refused");
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_attention_pos", test_identity},
    {"op_attention_pos_layout", test_layout},
    {"op_attention_pos_refusals", test_refusals},
};
MT_TEST_MAIN(cases)
