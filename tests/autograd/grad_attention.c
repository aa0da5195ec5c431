/* grad_attention.c: partial NeoX RoPE and causal GQA softmax attention (spec section 5):
 * finite-difference gradients, forwards against straightforward double references written from
 * the definitions (explicit masks, explicit repeat_interleave), and the decode step against the
 * full causal forward. */
#include "tests/support/harness.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/bf16.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill_ids(mt_tensor *t, const int32_t *vals) {
    memcpy(t->data, vals, sizeof(int32_t) * (size_t)mt_numel(t));
}

/* Segment ids (2,T) spanning the kernels' 64-row tiles: row 0 has a sample of 70 tokens, one of
 * 30, then id 0 again after the gap (it sees the first sample's keys, tiles back), then tokens
 * cycling through 3 ids; row 1 is one sample (plain causal over every tile). */
static void fill_tile_ids(int32_t *ids, int64_t T) {
    for (int64_t t = 0; t < T; t++) {
        ids[t] = t < 70 ? 0 : t < 100 ? 1 : t < 130 ? 0 : (int32_t)(2 + t % 3);
        ids[T + t] = 7;
    }
}

/* Rising ids (packed samples as the data pipeline makes them, which the fp32 kernels run as
 * sequences of their own): row 0 samples of 37, 83 (across a tile border), 30; row 1 of 5, 145. */
static void fill_run_ids(int32_t *ids, int64_t T) {
    for (int64_t t = 0; t < T; t++) {
        ids[t] = t < 37 ? 0 : t < 120 ? 2 : 3;
        ids[T + t] = t < 5 ? 1 : 4;
    }
}

/* ---- gradients ----------------------------------------------------------------------------- */

typedef struct {
    mt_tensor *pos;
    int rotary_dim;
    float theta;
} rope_args;

static mt_tensor *build_rope(mt_ctx *c, mt_tensor **in, void *user) {
    rope_args *a = user;
    return mt_rope(c, in[0], a->pos, a->rotary_dim, a->theta);
}

static void check_rope_grad(const char *label, int64_t D, int rotary_dim, float theta,
                            uint64_t seed) {
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    int64_t B = 2, T = 3, H = 2;
    mt_tensor *x = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, H, D}, true, "x");
    mt_fill_normal(x->data, mt_numel(x), 1.0f, &rng);
    mt_tensor *pos = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "pos");
    for (int64_t i = 0; i < B * T; i++)
        ((int32_t *)pos->data)[i] = (int32_t)(mt_rng_u64(&rng) % 50);
    rope_args a = {pos, rotary_dim, theta};
    mt_gradcheck(label, build_rope, &x, 1, &a, &(mt_gradcheck_opts){.max_elems = 256});
}

static int test_grad_rope(void) {
    check_rope_grad("rope D=8 rotary=4", 8, 4, 10000.0f, 1);
    check_rope_grad("rope D=8 rotary=8", 8, 8, 10000.0f, 2);
    check_rope_grad("rope D=6 rotary=2", 6, 2, 1e7f, 3);
    return MT_TEST_OK;
}

typedef struct {
    mt_tensor *seg;
    float scale;
    mt_tensor *pos; /* non-NULL: q and k go through rope first */
    int rotary_dim;
} attn_args;

static mt_tensor *build_attention(mt_ctx *c, mt_tensor **in, void *user) {
    attn_args *a = user;
    mt_tensor *q = in[0], *k = in[1];
    if (a->pos) {
        q = mt_rope(c, q, a->pos, a->rotary_dim, 10000.0f);
        k = mt_rope(c, k, a->pos, a->rotary_dim, 10000.0f);
    }
    return mt_attention(c, q, k, in[2], a->seg, a->scale);
}

/* grads: which of q, k, v are leaves with a gradient (the others test the skip paths) */
static void check_attention_grad(const char *label, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                                 int64_t D, const int32_t *seg_vals, bool rope, const bool grads[3],
                                 uint64_t seed) {
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    mt_tensor *q = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, H, D}, grads[0], "q");
    mt_tensor *k = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, Hkv, D}, grads[1], "k");
    mt_tensor *v = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, Hkv, D}, grads[2], "v");
    mt_fill_normal(q->data, mt_numel(q), 1.0f, &rng);
    mt_fill_normal(k->data, mt_numel(k), 1.0f, &rng);
    mt_fill_normal(v->data, mt_numel(v), 1.0f, &rng);
    attn_args a = {NULL, 1.0f / sqrtf((float)D), NULL, (int)D / 2};
    if (seg_vals) {
        a.seg = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg");
        fill_ids(a.seg, seg_vals);
    }
    if (rope) {
        a.pos = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "pos");
        for (int64_t i = 0; i < B * T; i++) ((int32_t *)a.pos->data)[i] = (int32_t)(i % T + 3);
    }
    mt_tensor *in[3] = {q, k, v};
    mt_gradcheck(label, build_attention, in, 3, &a, &(mt_gradcheck_opts){.max_elems = 256});
}

static int test_grad_attention(void) {
    const bool all[3] = {true, true, true};
    check_attention_grad("attn H=Hkv", 2, 5, 2, 2, 4, NULL, false, all, 11);
    check_attention_grad("attn GQA H=4 Hkv=2", 1, 5, 4, 2, 4, NULL, false, all, 12);
    check_attention_grad("attn H=3 Hkv=1", 2, 4, 3, 1, 4, NULL, false, all, 13);
    check_attention_grad("attn T=1", 2, 1, 2, 1, 4, NULL, false, all, 14);
    /* packed segments, the second row reuses id 5 after a gap (equality, not contiguity) */
    const int32_t seg[12] = {0, 0, 0, 1, 1, 2, 5, 5, 9, 9, 5, 5};
    check_attention_grad("attn seg GQA", 2, 6, 4, 2, 4, seg, false, all, 15);
    check_attention_grad("attn seg T=1 per row", 1, 4, 2, 2, 4, (int32_t[]){0, 1, 2, 3}, false, all,
                         16);
    check_attention_grad("attn only dq", 1, 5, 4, 2, 4, NULL, false, (bool[3]){true, false, false},
                         17);
    check_attention_grad("attn only dk", 1, 5, 4, 2, 4, NULL, false, (bool[3]){false, true, false},
                         18);
    check_attention_grad("attn only dv", 1, 5, 4, 2, 4, seg, false, (bool[3]){false, false, true},
                         19);
    check_attention_grad("rope+attn GQA seg", 2, 6, 4, 2, 8, seg, true, all, 20);
    /* T past the fp32 kernels' 64-row tiles: online softmax across key tiles, skipped tiles */
    int32_t tile_seg[2 * 150];
    fill_tile_ids(tile_seg, 150);
    check_attention_grad("attn multi-tile seg", 2, 150, 2, 1, 4, tile_seg, false, all, 31);
    /* D = 8: the tiles' products in registers (cpu_gemm_small), GQA over the key-tile loop */
    check_attention_grad("attn multi-tile seg D=8 GQA", 2, 150, 4, 2, 8, tile_seg, false, all, 32);
    int32_t run_seg[2 * 150];
    fill_run_ids(run_seg, 150);
    check_attention_grad("attn multi-tile runs D=8 GQA", 2, 150, 4, 2, 8, run_seg, false, all, 33);
    return MT_TEST_OK;
}

/* The softmax mixer of models/block_attention.c as its plan composes it, minus o_proj:
 * q = h Wq^T, k = h Wk^T, v = h Wv^T; the QK norm, over the whole projection width before the
 * head split (M2: q_norm (H*D), k_norm (Hkv*D)) or per head of width D (M3, Gemma (1 + w));
 * the heads; partial RoPE on the first rotary_dim dims; causal GQA attention. Inputs h, Wq,
 * Wk, Wv, q_norm, k_norm: every gradient, through the norm's statistics over all heads of a
 * token (whole width) or over one head (per head). */
typedef struct {
    int64_t H, Hkv, D;
    int rotary_dim;
    bool whole, gemma;
    mt_tensor *pos, *seg;
} qk_args;

static mt_tensor *build_qk_attention(mt_ctx *c, mt_tensor **in, void *user) {
    const qk_args *a = user;
    const int64_t B = in[0]->shape[0], T = in[0]->shape[1];
    mt_tensor *x[3];
    const int64_t heads[3] = {a->H, a->Hkv, a->Hkv};
    for (int i = 0; i < 3; i++) {
        x[i] = mt_matmul(c, in[0], in[1 + i]);
        if (i < 2 && a->whole) x[i] = mt_rmsnorm(c, x[i], in[4 + i], 1e-6f, a->gemma);
        x[i] = mt_view(c, x[i], 4, (int64_t[]){B, T, heads[i], a->D});
        if (i < 2 && !a->whole) x[i] = mt_rmsnorm(c, x[i], in[4 + i], 1e-6f, a->gemma);
        if (i < 2) x[i] = mt_rope(c, x[i], a->pos, a->rotary_dim, 5e6f);
    }
    return mt_attention(c, x[0], x[1], x[2], a->seg, 1.0f / sqrtf((float)a->D));
}

static void check_qk_attention_grad(const char *label, int64_t B, int64_t T, int64_t C,
                                    const qk_args *shape, const int32_t *seg_vals, uint64_t seed) {
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    qk_args a = *shape;
    const int64_t HD = a.H * a.D, KVD = a.Hkv * a.D, nw = a.whole ? HD : a.D;
    const int64_t nk = a.whole ? KVD : a.D;
    mt_tensor *in[6] = {
        mt_test_tensor(MT_F32, 3, (int64_t[]){B, T, C}, true, "h"),
        mt_test_tensor(MT_F32, 2, (int64_t[]){HD, C}, true, "wq"),
        mt_test_tensor(MT_F32, 2, (int64_t[]){KVD, C}, true, "wk"),
        mt_test_tensor(MT_F32, 2, (int64_t[]){KVD, C}, true, "wv"),
        mt_test_tensor(MT_F32, 1, (int64_t[]){nw}, true, "q_norm"),
        mt_test_tensor(MT_F32, 1, (int64_t[]){nk}, true, "k_norm"),
    };
    for (int i = 0; i < 4; i++)
        mt_fill_normal(in[i]->data, mt_numel(in[i]), i ? 1.0f / sqrtf((float)C) : 1.0f, &rng);
    /* norm weights away from their init (1, or 0 for Gemma) so that each one matters */
    for (int i = 4; i < 6; i++) {
        float *w = in[i]->data;
        for (int64_t j = 0; j < mt_numel(in[i]); j++)
            w[j] = (a.gemma ? 0.0f : 1.0f) + 0.5f * mt_rng_normal(&rng);
    }
    a.pos = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "pos");
    for (int64_t i = 0; i < B * T; i++)
        ((int32_t *)a.pos->data)[i] = (int32_t)(i % T + 5 * (i / T));
    if (seg_vals) {
        a.seg = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg");
        fill_ids(a.seg, seg_vals);
    }
    mt_gradcheck(label, build_qk_attention, in, 6, &a, &(mt_gradcheck_opts){.max_elems = 256});
}

static int test_grad_attention_qk_norm(void) {
    /* M2's shape in small: H*D (16) wider than C (8), rotary_dim = D/2 (partial 0.5), GQA 2 */
    check_qk_attention_grad("M2 whole-width qk norm, partial rope, GQA", 2, 5, 8,
                            &(qk_args){.H = 4, .Hkv = 2, .D = 4, .rotary_dim = 2, .whole = true},
                            NULL, 41);
    /* irregular: 3 query heads on one kv head, D = 6 with 2 rotated dims, packed segments */
    const int32_t seg[7] = {0, 0, 0, 4, 4, 4, 4};
    check_qk_attention_grad("irregular whole-width qk norm, MQA 3:1, rotary 2 of 6, seg", 1, 7, 5,
                            &(qk_args){.H = 3, .Hkv = 1, .D = 6, .rotary_dim = 2, .whole = true},
                            seg, 42);
    /* the per-head Gemma form the plan also has (M3): one weight of width D for every head */
    check_qk_attention_grad("per-head gemma qk norm, partial rope, GQA", 2, 4, 8,
                            &(qk_args){.H = 4, .Hkv = 2, .D = 4, .rotary_dim = 2, .gemma = true},
                            NULL, 43);
    return MT_TEST_OK;
}

/* ---- attention forward vs a double reference ------------------------------------------------ */

/* Straight from the definition: repeat_interleave the kv heads, build the (T,T) mask, full
 * score matrix, max-subtracted softmax, P V; everything in double. */
static void ref_attention(double *out, double *lse, const float *q, const float *k, const float *v,
                          const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                          int64_t D, double scale) {
    int64_t rep = H / Hkv;
    double *kr = malloc(sizeof(double) * (size_t)(T * H * D)); /* (T,H,D) repeated k */
    double *vr = malloc(sizeof(double) * (size_t)(T * H * D));
    bool *mask = malloc(sizeof(bool) * (size_t)(T * T));
    double *S = malloc(sizeof(double) * (size_t)(T * T));
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t g = 0; g < Hkv; g++)
                for (int64_t r = 0; r < rep; r++)
                    for (int64_t d = 0; d < D; d++) {
                        int64_t src = ((b * T + t) * Hkv + g) * D + d;
                        kr[(t * H + g * rep + r) * D + d] = k[src];
                        vr[(t * H + g * rep + r) * D + d] = v[src];
                    }
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s < T; s++)
                mask[t * T + s] = s <= t && (!seg || seg[b * T + s] == seg[b * T + t]);
        for (int64_t h = 0; h < H; h++) {
            for (int64_t t = 0; t < T; t++) {
                double mx = -INFINITY;
                for (int64_t s = 0; s < T; s++) {
                    double acc = 0;
                    for (int64_t d = 0; d < D; d++)
                        acc += (double)q[((b * T + t) * H + h) * D + d] * kr[(s * H + h) * D + d];
                    S[t * T + s] = mask[t * T + s] ? scale * acc : -INFINITY;
                    if (S[t * T + s] > mx) mx = S[t * T + s];
                }
                double sum = 0;
                for (int64_t s = 0; s < T; s++) sum += exp(S[t * T + s] - mx);
                lse[(b * H + h) * T + t] = mx + log(sum);
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t s = 0; s < T; s++)
                        acc += exp(S[t * T + s] - mx) / sum * vr[(s * H + h) * D + d];
                    out[((b * T + t) * H + h) * D + d] = acc;
                }
            }
        }
    }
    free(kr);
    free(vr);
    free(mask);
    free(S);
}

static void to_float(float *dst, const double *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

static void check_attention_forward(const char *label, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                                    int64_t D, const int32_t *seg_vals, float qstd, uint64_t seed) {
    printf("%s: B=%lld T=%lld H=%lld Hkv=%lld D=%lld seg=%s q std %g\n", label, (long long)B,
           (long long)T, (long long)H, (long long)Hkv, (long long)D, seg_vals ? "yes" : "no",
           (double)qstd);
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    mt_tensor *q = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, H, D}, false, "q");
    mt_tensor *k = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, Hkv, D}, false, "k");
    mt_tensor *v = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, Hkv, D}, false, "v");
    mt_fill_normal(q->data, mt_numel(q), qstd, &rng);
    mt_fill_normal(k->data, mt_numel(k), 1.0f, &rng);
    mt_fill_normal(v->data, mt_numel(v), 1.0f, &rng);
    mt_tensor *seg = NULL;
    if (seg_vals) {
        seg = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg");
        fill_ids(seg, seg_vals);
    }
    float scale = 1.0f / sqrtf((float)D);
    int64_t n_out = B * T * H * D, n_lse = B * H * T;
    double *ref = malloc(sizeof(double) * (size_t)n_out);
    double *ref_lse = malloc(sizeof(double) * (size_t)n_lse);
    ref_attention(ref, ref_lse, q->data, k->data, v->data, seg ? seg->data : NULL, B, T, H, Hkv, D,
                  (double)scale);
    float *reff = malloc(sizeof(float) * (size_t)n_out);
    float *ref_lsef = malloc(sizeof(float) * (size_t)n_lse);
    to_float(reff, ref, n_out);
    to_float(ref_lsef, ref_lse, n_lse);

    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *out = mt_attention(&c, q, k, v, seg, scale);
    /* outputs are convex combinations of v (|v| <~ 4): fp32 rounding of the final value */
    mt_check_close("out (op)", out->data, reff, n_out, 1e-6, 1e-5);

    /* the typed kernel also returns the lse the backward relies on */
    float *out2 = malloc(sizeof(float) * (size_t)n_out);
    float *lse = malloc(sizeof(float) * (size_t)n_lse);
    cpu_attention_fwd(out2, lse, q->data, k->data, v->data, seg ? seg->data : NULL, B, T, H, Hkv, D,
                      scale);
    EXPECT(memcmp(out2, out->data, sizeof(float) * (size_t)n_out) == 0,
           "%s: typed kernel and op differ", label);
    mt_check_close("lse", lse, ref_lsef, n_lse, 1e-6, 1e-5);
    mt_ctx_free(&c);
    free(ref);
    free(ref_lse);
    free(reff);
    free(ref_lsef);
    free(out2);
    free(lse);
}

static int test_op_attention_forward(void) {
    check_attention_forward("H=Hkv", 2, 9, 2, 2, 8, NULL, 1.0f, 21);
    check_attention_forward("GQA H=8 Hkv=2", 2, 17, 8, 2, 16, NULL, 1.0f, 22);
    check_attention_forward("Hkv=1", 1, 12, 4, 1, 8, NULL, 1.0f, 23);
    check_attention_forward("T=1", 3, 1, 4, 2, 8, NULL, 1.0f, 24);
    const int32_t seg[30] = {0, 0, 0, 0, 1, 1, 1, 2, 2, 2, /* packed samples */
                             4, 4, 7, 7, 4, 4, 7, 7, 7, 4, /* repeated ids after gaps */
                             0, 1, 2, 3, 4, 5, 6, 7, 8, 9 /* every token alone */};
    check_attention_forward("seg GQA", 3, 10, 4, 2, 8, seg, 1.0f, 25);
    /* scores in the hundreds: exp overflows without the max subtraction */
    check_attention_forward("large scores seg", 3, 10, 4, 2, 8, seg, 60.0f, 26);
    /* T past the fp32 kernels' 64-row tiles */
    int32_t tile_seg[2 * 150];
    fill_tile_ids(tile_seg, 150);
    check_attention_forward("multi-tile seg GQA", 2, 150, 4, 2, 16, tile_seg, 1.0f, 27);
    check_attention_forward("multi-tile", 1, 200, 2, 1, 8, NULL, 1.0f, 28);
    int32_t run_seg[2 * 150];
    fill_run_ids(run_seg, 150);
    check_attention_forward("multi-tile runs GQA", 2, 150, 4, 2, 16, run_seg, 1.0f, 29);
    return MT_TEST_OK;
}

/* ---- rope forward vs a double reference ----------------------------------------------------- */

/* Reference rotation in double from given angles; returns the elementwise bound
 * (|x1| + |x2|) * (angle_err + 4 eps32) in tol. */
static void ref_rope_row(double *y, double *tol, const float *x, const double *angle,
                         const double *angle_err, int64_t D, int64_t rd) {
    int64_t half = rd / 2;
    for (int64_t j = 0; j < half; j++) {
        double c = cos(angle[j]), s = sin(angle[j]);
        double x1 = x[j], x2 = x[j + half];
        y[j] = x1 * c - x2 * s;
        y[j + half] = x2 * c + x1 * s;
        tol[j] = tol[j + half] = (fabs(x1) + fabs(x2)) * (angle_err[j] + 4.0 * FLT_EPSILON / 2);
    }
    for (int64_t j = rd; j < D; j++) y[j] = x[j], tol[j] = 0;
}

typedef enum { ANGLE_EXACT, ANGLE_HF_FP32 } angle_mode;

static void check_rope_forward(const char *label, int64_t B, int64_t T, int64_t H, int64_t D,
                               int64_t rd, float theta, const int32_t *pos_vals, angle_mode mode) {
    printf("%s: D=%lld rotary=%lld theta=%g angles %s\n", label, (long long)D, (long long)rd,
           (double)theta, mode == ANGLE_EXACT ? "exact double" : "HF fp32");
    mt_rng rng;
    mt_rng_seed(&rng, 31);
    mt_tensor *x = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, H, D}, false, "x");
    mt_fill_normal(x->data, mt_numel(x), 1.0f, &rng);
    mt_tensor *pos = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "pos");
    fill_ids(pos, pos_vals);
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *y = mt_rope(&c, x, pos, (int)rd, theta);
    const float *xd = x->data, *yd = y->data;
    int64_t half = rd / 2, bad = 0, pass_bad = 0;
    double max_err = 0, max_ratio = 0, u = FLT_EPSILON / 2;
    double *angle = malloc(sizeof(double) * (size_t)half);
    double *angle_err = malloc(sizeof(double) * (size_t)half);
    double *ref = malloc(sizeof(double) * (size_t)D), *tol = malloc(sizeof(double) * (size_t)D);
    for (int64_t n = 0; n < B * T; n++) {
        double p = pos_vals[n];
        for (int64_t i = 0; i < half; i++) {
            double e = (double)(2 * i) / (double)rd;
            if (mode == ANGLE_EXACT) {
                /* the kernel's angle is an fp32 product of an fp32 inv_freq whose exponent
                 * was rounded to fp32: |error| <= angle (ln(theta) e + 5) eps32, doubled */
                angle[i] = p * pow((double)theta, -e);
                angle_err[i] = 2.0 * fabs(angle[i]) * (log((double)theta) * e + 5.0) * u;
            } else {
                /* HF RotaryEmbedding: inv_freq = 1.0 / (theta ** (arange(0, rd, 2).float() / rd))
                 * and freqs = pos.float() * inv_freq, each step rounded to fp32 */
                float ef = (float)(2 * i) / (float)rd;
                float powf32 = (float)pow((double)theta, (double)ef);
                float inv = 1.0f / powf32;
                float af = (float)p * inv;
                angle[i] = af;
                angle_err[i] = 0;
            }
        }
        for (int64_t h = 0; h < H; h++) {
            const float *xh = xd + (n * H + h) * D, *yh = yd + (n * H + h) * D;
            ref_rope_row(ref, tol, xh, angle, angle_err, D, rd);
            for (int64_t j = 0; j < D; j++) {
                double err = fabs((double)yh[j] - ref[j]);
                if (j >= rd) {
                    if (memcmp(&yh[j], &xh[j], sizeof(float)) != 0) pass_bad++;
                    continue;
                }
                if (err > max_err) max_err = err;
                if (err / tol[j] > max_ratio) max_ratio = err / tol[j];
                if (!(err <= tol[j])) {
                    if (bad < 5)
                        printf("  row %lld head %lld dim %lld: got %.9g want %.9g tol %.3g\n",
                               (long long)n, (long long)h, (long long)j, (double)yh[j], ref[j],
                               tol[j]);
                    bad++;
                }
            }
        }
    }
    printf("  rotated: max_err=%.3g max err/tol=%.3g, %lld misses; passthrough: %lld changed\n",
           max_err, max_ratio, (long long)bad, (long long)pass_bad);
    EXPECT(bad == 0, "%s: %lld rotated values outside the bound", label, (long long)bad);
    EXPECT(pass_bad == 0, "%s: %lld passthrough values changed", label, (long long)pass_bad);

    /* in place (the decode path) gives the same bits */
    float *xin = malloc(sizeof(float) * (size_t)mt_numel(x));
    memcpy(xin, xd, sizeof(float) * (size_t)mt_numel(x));
    cpu_rope_fwd(xin, xin, pos_vals, B * T, H, D, rd, theta);
    EXPECT(memcmp(xin, yd, sizeof(float) * (size_t)mt_numel(x)) == 0, "%s: in-place rope differs",
           label);
    free(xin);
    free(angle);
    free(angle_err);
    free(ref);
    free(tol);
    mt_ctx_free(&c);
}

static int test_op_rope_forward(void) {
    int32_t pos[8];
    mt_rng rng;
    mt_rng_seed(&rng, 32);
    for (int i = 0; i < 8; i++) pos[i] = (int32_t)(mt_rng_u64(&rng) % 2000);
    pos[0] = 0;
    check_rope_forward("partial D=8 rd=4", 2, 4, 3, 8, 4, 10000.0f, pos, ANGLE_EXACT);
    check_rope_forward("full D=8 rd=8", 2, 4, 3, 8, 8, 10000.0f, pos, ANGLE_EXACT);
    check_rope_forward("partial D=6 rd=2", 2, 4, 3, 6, 2, 10000.0f, pos, ANGLE_EXACT);
    /* the MiniMax-Text-01 layer shape, long positions */
    const int32_t mid[8] = {0, 1, 7, 4095, 65535, 30000, 12345, -5};
    check_rope_forward("minimax D=128 rd=64", 1, 8, 2, 128, 64, 1e7f, mid, ANGLE_EXACT);
    /* far positions: the fp32 angle error is large in absolute terms, so compare with HF's
     * fp32 angles (the rounding the model parity is checked against) */
    const int32_t far[8] = {0, 1, 7, 4095, 65535, 131071, 1000003, -5};
    check_rope_forward("minimax D=128 rd=64", 1, 8, 2, 128, 64, 1e7f, far, ANGLE_HF_FP32);
    check_rope_forward("full D=128 rd=128", 1, 8, 2, 128, 128, 1e7f, far, ANGLE_HF_FP32);
    return MT_TEST_OK;
}

/* ---- decode ------------------------------------------------------------------------------- */

/* Generation: rope one position at a time, append k/v to the cache, attend; every step must
 * reproduce the full causal forward's row. */
static int test_op_attention_decode(void) { /* B = 2: the per-row lengths below */
    int64_t B = 2, T = 7, H = 4, Hkv = 2, D = 8, rd = 4, t_max = T + 3;
    float theta = 10000.0f, scale = 1.0f / sqrtf((float)D);
    mt_rng rng;
    mt_rng_seed(&rng, 41);
    mt_tensor *q = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, H, D}, false, "q");
    mt_tensor *k = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, Hkv, D}, false, "k");
    mt_tensor *v = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, Hkv, D}, false, "v");
    mt_fill_normal(q->data, mt_numel(q), 1.0f, &rng);
    mt_fill_normal(k->data, mt_numel(k), 1.0f, &rng);
    mt_fill_normal(v->data, mt_numel(v), 1.0f, &rng);
    mt_tensor *pos = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "pos");
    int32_t *pd = pos->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) pd[b * T + t] = (int32_t)(t + 5 * b);

    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *qr = mt_rope(&c, q, pos, (int)rd, theta);
    mt_tensor *kr = mt_rope(&c, k, pos, (int)rd, theta);
    mt_tensor *full = mt_attention(&c, qr, kr, v, NULL, scale);
    const float *fd = full->data, *qd = q->data, *kd = k->data, *vd = v->data;

    float *kc = calloc((size_t)(B * t_max * Hkv * D), sizeof(float));
    float *vc = calloc((size_t)(B * t_max * Hkv * D), sizeof(float));
    float *q_t = malloc(sizeof(float) * (size_t)(B * H * D));
    float *k_t = malloc(sizeof(float) * (size_t)(B * Hkv * D));
    float *o_t = malloc(sizeof(float) * (size_t)(B * H * D));
    float *want = malloc(sizeof(float) * (size_t)(B * H * D));
    int32_t pos_t[2];
    double max_diff = 0;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t b = 0; b < B; b++) {
            pos_t[b] = pd[b * T + t];
            memcpy(q_t + b * H * D, qd + (b * T + t) * H * D, sizeof(float) * (size_t)(H * D));
            memcpy(k_t + b * Hkv * D, kd + (b * T + t) * Hkv * D,
                   sizeof(float) * (size_t)(Hkv * D));
            memcpy(want + b * H * D, fd + (b * T + t) * H * D, sizeof(float) * (size_t)(H * D));
        }
        cpu_rope_fwd(q_t, q_t, pos_t, B, H, D, rd, theta);
        cpu_rope_fwd(k_t, k_t, pos_t, B, Hkv, D, rd, theta);
        for (int64_t b = 0; b < B; b++) {
            memcpy(kc + (b * t_max + t) * Hkv * D, k_t + b * Hkv * D,
                   sizeof(float) * (size_t)(Hkv * D));
            memcpy(vc + (b * t_max + t) * Hkv * D, vd + (b * T + t) * Hkv * D,
                   sizeof(float) * (size_t)(Hkv * D));
        }
        int32_t tl[2] = {(int32_t)(t + 1), (int32_t)(t + 1)}; /* rows alike; ragged below */
        cpu_attention_decode(o_t, q_t, kc, vc, tl, B, t_max, H, Hkv, D, scale);
        for (int64_t i = 0; i < B * H * D; i++)
            max_diff = fmax(max_diff, fabs((double)o_t[i] - (double)want[i]));
        char label[32];
        snprintf(label, sizeof(label), "decode step %lld", (long long)t);
        mt_check_close(label, o_t, want, B * H * D, 1e-6, 1e-5);
    }
    printf("decode vs full forward: max |diff| over all steps %.3g\n", max_diff);
    /* ragged: the full caches, row 0's query at position 2 and row 1's at T-1; row 0 must read
     * only its first 3 positions (what lies beyond is later tokens, never its own) */
    const int32_t tl[2] = {3, (int32_t)T};
    for (int64_t b = 0; b < B; b++) {
        const int64_t t = tl[b] - 1;
        pos_t[b] = pd[b * T + t];
        memcpy(q_t + b * H * D, qd + (b * T + t) * H * D, sizeof(float) * (size_t)(H * D));
        memcpy(want + b * H * D, fd + (b * T + t) * H * D, sizeof(float) * (size_t)(H * D));
    }
    cpu_rope_fwd(q_t, q_t, pos_t, B, H, D, rd, theta);
    cpu_attention_decode(o_t, q_t, kc, vc, tl, B, t_max, H, Hkv, D, scale);
    mt_check_close("ragged decode step", o_t, want, B * H * D, 1e-6, 1e-5);
    free(kc);
    free(vc);
    free(q_t);
    free(k_t);
    free(o_t);
    free(want);
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* ---- bf16 mode ------------------------------------------------------------------------------ */

/* The bf16 rule of kernels/cpu/attention.c's header written out in double, with each rounding
 * point switchable: the op must match the rule with every point on, and differ clearly from it
 * with any one off (so each rounding is really there and really matters at this shape). */
typedef struct {
    bool p_fwd, dout, p_bwd, ds;
} bf16_points;

static double r16(double x, bool on) { return on ? (double)mt_bf16_round((float)x) : x; }

static bool attn_visible(const int32_t *seg, int64_t b, int64_t T, int64_t t, int64_t s) {
    return s <= t && (!seg || seg[b * T + s] == seg[b * T + t]);
}

static double ddot(const float *a, const float *b, int64_t D) {
    double s = 0;
    for (int64_t d = 0; d < D; d++) s += (double)a[d] * (double)b[d];
    return s;
}

/* out, lse from rounded qr, kr, vr: p~ = exp(x - max) rounded (if p_fwd), divided by sum p~ */
static void ref_bf16_fwd(double *out, double *lse, const float *qr, const float *kr,
                         const float *vr, const int32_t *seg, int64_t B, int64_t T, int64_t H,
                         int64_t Hkv, int64_t D, double scale, bf16_points pt) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                int64_t g = h / (H / Hkv);
                const float *qt = qr + ((b * T + t) * H + h) * D;
                double m = -INFINITY, l = 0, acc[64] = {0};
                for (int64_t s = 0; s <= t; s++)
                    if (attn_visible(seg, b, T, t, s))
                        m = fmax(m, scale * ddot(qt, kr + ((b * T + s) * Hkv + g) * D, D));
                for (int64_t s = 0; s <= t; s++) {
                    if (!attn_visible(seg, b, T, t, s)) continue;
                    double p = exp(scale * ddot(qt, kr + ((b * T + s) * Hkv + g) * D, D) - m);
                    l += p;
                    for (int64_t d = 0; d < D; d++)
                        acc[d] += r16(p, pt.p_fwd) * vr[((b * T + s) * Hkv + g) * D + d];
                }
                for (int64_t d = 0; d < D; d++) out[((b * T + t) * H + h) * D + d] = acc[d] / l;
                lse[(b * H + h) * T + t] = m + log(l);
            }
}

/* dq, dk, dv (from zero) given the op's own out and lse */
static void ref_bf16_bwd(double *dq, double *dk, double *dv, const float *qr, const float *kr,
                         const float *vr, const float *dout, const float *out, const float *lse,
                         const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                         int64_t D, double scale, bf16_points pt) {
    int64_t nq = B * T * H * D, nkv = B * T * Hkv * D;
    float *dr = malloc(sizeof(float) * (size_t)nq);
    for (int64_t i = 0; i < nq; i++) dr[i] = (float)r16(dout[i], pt.dout);
    memset(dq, 0, sizeof(double) * (size_t)nq);
    memset(dk, 0, sizeof(double) * (size_t)nkv);
    memset(dv, 0, sizeof(double) * (size_t)nkv);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                int64_t g = h / (H / Hkv), row = (b * T + t) * H + h;
                double delta = ddot(dr + row * D, out + row * D, D);
                for (int64_t s = 0; s <= t; s++) {
                    if (!attn_visible(seg, b, T, t, s)) continue;
                    int64_t kv = ((b * T + s) * Hkv + g) * D;
                    double p = exp(scale * ddot(qr + row * D, kr + kv, D) -
                                   (double)lse[(b * H + h) * T + t]);
                    double ds = r16(p * (ddot(dr + row * D, vr + kv, D) - delta), pt.ds);
                    double pr = r16(p, pt.p_bwd);
                    for (int64_t d = 0; d < D; d++) {
                        dq[row * D + d] += scale * ds * kr[kv + d];
                        dk[kv + d] += scale * ds * qr[row * D + d];
                        dv[kv + d] += pr * dr[row * D + d];
                    }
                }
            }
    free(dr);
}

static double rel_l2_d(const float *a, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / den);
}

static double rel_l2_f(const float *a, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / den);
}

/* The op in the given mode, forward and backward from seed; the context is set back to fp32
 * before the backward, so the node's recorded mode is what counts. Copies out, lse, dq, dk, dv
 * into res[0..4]. */
static void run_attention_mode(mt_dtype mode, mt_tensor *q, mt_tensor *k, mt_tensor *v,
                               mt_tensor *seg, float scale, const float *seed, float *res[5]) {
    mt_tensor *in[3] = {q, k, v};
    for (int i = 0; i < 3; i++) memset(in[i]->grad, 0, mt_nbytes(in[i]));
    mt_ctx c;
    mt_test_ctx_init(&c);
    c.compute_dtype = mode;
    mt_tensor *out = mt_attention(&c, q, k, v, seg, scale);
    c.compute_dtype = MT_F32;
    memcpy(res[0], out->data, mt_nbytes(out));
    const mt_tensor *lse = c.nodes[c.n_nodes - 1].saved[0];
    memcpy(res[1], lse->data, mt_nbytes(lse));
    mt_backward(&c, out, seed);
    for (int i = 0; i < 3; i++) memcpy(res[2 + i], in[i]->grad, mt_nbytes(in[i]));
    mt_ctx_free(&c);
}

static int test_op_attention_bf16(void) {
    const int64_t B = 2, T = 21, H = 4, Hkv = 2, D = 16;
    const double tol = 1e-6;   /* the op against the rule: fp32 storage of double results */
    const double apart = 5e-5; /* the rule with one rounding point off must be this far */
    mt_rng rng;
    mt_rng_seed(&rng, 31);
    mt_tensor *q = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, H, D}, true, "q");
    mt_tensor *k = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, Hkv, D}, true, "k");
    mt_tensor *v = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, Hkv, D}, true, "v");
    mt_fill_normal(q->data, mt_numel(q), 2.0f, &rng);
    mt_fill_normal(k->data, mt_numel(k), 1.0f, &rng);
    mt_fill_normal(v->data, mt_numel(v), 1.0f, &rng);
    mt_tensor *seg = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg");
    for (int64_t t = 0; t < T; t++) { /* packed, id 0 again after a gap; one sample */
        ((int32_t *)seg->data)[t] = t < 7 ? 0 : t < 15 ? 1 : 0;
        ((int32_t *)seg->data)[T + t] = 4;
    }
    const float scale = 1.0f / sqrtf((float)D);
    const int64_t n[5] = {B * T * H * D, B * H * T, B * T * H * D, B * T * Hkv * D,
                          B * T * Hkv * D};
    const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
    float *seed = malloc(sizeof(float) * (size_t)n[0]);
    mt_fill_normal(seed, n[0], 1.0f, &rng);
    float *r16v[5], *r32v[5];
    double *ref[5], *alt[5];
    for (int i = 0; i < 5; i++) {
        r16v[i] = malloc(sizeof(float) * (size_t)n[i]);
        r32v[i] = malloc(sizeof(float) * (size_t)n[i]);
        ref[i] = malloc(sizeof(double) * (size_t)n[i]);
        alt[i] = malloc(sizeof(double) * (size_t)n[i]);
    }
    run_attention_mode(MT_BF16, q, k, v, seg, scale, seed, r16v);
    run_attention_mode(MT_F32, q, k, v, seg, scale, seed, r32v);

    float *qr = malloc(sizeof(float) * (size_t)n[2]), *kr = malloc(sizeof(float) * (size_t)n[3]),
          *vr = malloc(sizeof(float) * (size_t)n[4]);
    mt_bf16_round_n(qr, q->data, n[2]);
    mt_bf16_round_n(kr, k->data, n[3]);
    mt_bf16_round_n(vr, v->data, n[4]);
    const int32_t *sg = seg->data;
    const bf16_points all = {true, true, true, true};
    ref_bf16_fwd(ref[0], ref[1], qr, kr, vr, sg, B, T, H, Hkv, D, scale, all);
    ref_bf16_bwd(ref[2], ref[3], ref[4], qr, kr, vr, seed, r16v[0], r16v[1], sg, B, T, H, Hkv, D,
                 scale, all);
    for (int i = 0; i < 5; i++) {
        double e = rel_l2_d(r16v[i], ref[i], n[i]), e32 = rel_l2_f(r16v[i], r32v[i], n[i]);
        printf("  bf16 %-4s vs the rule %.2e (tol %.0e); vs fp32 mode %.2e\n", names[i], e, tol,
               e32);
        EXPECT(e <= tol, "bf16 %s: %.3e from the rule", names[i], e);
        EXPECT(e32 > 1e-4, "bf16 %s: only %.3e from fp32: q, k, v not rounded?", names[i], e32);
    }
    /* each rounding point off in turn: the op must be far from that variant */
    const struct {
        const char *what;
        bf16_points pt;
        int first, last; /* tensors it changes */
    } off[4] = {{"p (forward)", {false, true, true, true}, 0, 0},
                {"dout", {true, false, true, true}, 2, 4},
                {"p (dv)", {true, true, false, true}, 4, 4},
                {"ds", {true, true, true, false}, 2, 3}};
    for (int j = 0; j < 4; j++) {
        if (off[j].first == 0)
            ref_bf16_fwd(alt[0], alt[1], qr, kr, vr, sg, B, T, H, Hkv, D, scale, off[j].pt);
        else
            ref_bf16_bwd(alt[2], alt[3], alt[4], qr, kr, vr, seed, r16v[0], r16v[1], sg, B, T, H,
                         Hkv, D, scale, off[j].pt);
        for (int i = off[j].first; i <= off[j].last; i++) {
            double e = rel_l2_d(r16v[i], alt[i], n[i]);
            printf("  without rounding %-11s: %-3s %.2e from the op\n", off[j].what, names[i], e);
            EXPECT(e > apart, "rounding %s: %s only %.3e from the unrounded variant", off[j].what,
                   names[i], e);
        }
    }
    for (int i = 0; i < 5; i++) {
        free(r16v[i]);
        free(r32v[i]);
        free(ref[i]);
        free(alt[i]);
    }
    free(qr);
    free(kr);
    free(vr);
    free(seed);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"grad_rope", test_grad_rope},
    {"grad_attention", test_grad_attention},
    {"grad_attention_qk_norm", test_grad_attention_qk_norm},
    {"op_attention_forward", test_op_attention_forward},
    {"op_rope_forward", test_op_rope_forward},
    {"op_attention_decode", test_op_attention_decode},
    {"op_attention_bf16", test_op_attention_bf16},
};
MT_TEST_MAIN(cases)
