/* op_msa.c: MiniMax-M3 block-sparse attention (MSA, spec sections 4-5): finite-difference
 * gradients of the attention and the indexer's KL loss, the attention against dense causal
 * attention when the selection covers every block and against a naive O(T^2) masked double
 * reference built from idx, the selection against a naive double reference, packed samples
 * against each sample run alone, and the decode steps against the last row of the forward.
 * The transformers and fp64 reference fixtures are in tests/kernels/op_msa_ref.c. */
#include "tests/support/harness.h"
#include "kernels/cpu/msa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A batch of rows: seg from sample lengths (per row, summing to T), pos restarting at 0. */
typedef struct {
    int64_t B, T;
    mt_tensor *pos, *seg;
} rows;

static rows make_rows(int64_t B, int64_t T, const int *lens /* per row, 0-terminated */) {
    rows r = {B, T, NULL, NULL};
    r.pos = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "pos");
    r.seg = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg");
    int32_t *p = r.pos->data, *s = r.seg->data;
    const int *l = lens;
    for (int64_t b = 0; b < B; b++) {
        int64_t t = 0;
        int32_t id = (int32_t)(10 * b);
        for (; *l; l++, id++)
            for (int i = 0; i < *l; i++, t++) {
                p[b * T + t] = i;
                s[b * T + t] = id;
            }
        l++;
        MT_CHECK(t == T, "make_rows: row %lld has %lld tokens, not T = %lld", (long long)b,
                 (long long)t, (long long)T);
    }
    return r;
}

static mt_tensor *randn(int ndim, const int64_t *shape, bool grad, const char *name, mt_rng *g) {
    mt_tensor *t = mt_test_tensor(MT_F32, ndim, shape, grad, name);
    mt_fill_normal(t->data, mt_numel(t), 1.0f, g);
    return t;
}

/* idx from the op itself (no grad) */
static mt_tensor *select_idx(mt_tensor *iq, mt_tensor *ik, const rows *r, int block, int topk) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *idx = mt_msa_select(&c, iq, ik, r->pos, r->seg, NULL, block, topk);
    mt_tensor *keep = mt_test_tensor(MT_I32, 4, idx->shape, false, "idx");
    memcpy(keep->data, idx->data, mt_nbytes(idx));
    mt_ctx_free(&c);
    return keep;
}

/* the naive support: does (b, kv head g, t) see key j */
static bool sees(const mt_tensor *idx, const rows *r, int block, int64_t b, int64_t g, int64_t t,
                 int64_t j) {
    const int32_t *pos = r->pos->data;
    const int64_t T = r->T, Hkv = idx->shape[1], topk = idx->shape[3];
    if (j > t || j < t - pos[b * T + t]) return false;
    const int32_t *sel = (const int32_t *)idx->data + ((b * Hkv + g) * T + t) * topk;
    for (int64_t s = 0; s < topk; s++)
        if (sel[s] == pos[b * T + j] / block) return true;
    return false;
}

/* ---- gradients ----------------------------------------------------------------------------- */

typedef struct {
    rows r;
    mt_tensor *idx, *mask, *q, *k;
    int block;
    float scale;
} msa_args;

static mt_tensor *build_attn(mt_ctx *c, mt_tensor **in, void *user) {
    msa_args *a = user;
    return mt_msa_attention(c, in[0], in[1], in[2], a->idx, a->r.pos, a->r.seg, NULL, a->block,
                            a->scale);
}

static mt_tensor *build_kl(mt_ctx *c, mt_tensor **in, void *user) {
    msa_args *a = user;
    return mt_msa_kl(c, a->q, a->k, in[0], in[1], a->idx, a->r.pos, a->r.seg, a->mask, NULL,
                     a->block, a->scale, 0.7f, 1.3f, 9.0f);
}

/* two rows: row 0 packs samples of 6 and 5 tokens, row 1 one of 11 (block 4: partial last
 * blocks everywhere); topk 2 leaves some blocks out of the later queries' support */
static const int grad_lens[] = {6, 5, 0, 11, 0};

static int test_grad_msa_attention(void) {
    mt_rng g;
    mt_rng_seed(&g, 21);
    const int64_t B = 2, T = 11, H = 4, Hkv = 2, D = 4, Di = 3;
    rows r = make_rows(B, T, grad_lens);
    mt_tensor *iq = randn(4, (int64_t[]){B, T, Hkv, Di}, false, "iq", &g);
    mt_tensor *ik = randn(4, (int64_t[]){B, T, 1, Di}, false, "ik", &g);
    mt_tensor *q = randn(4, (int64_t[]){B, T, H, D}, true, "q", &g);
    mt_tensor *k = randn(4, (int64_t[]){B, T, Hkv, D}, true, "k", &g);
    mt_tensor *v = randn(4, (int64_t[]){B, T, Hkv, D}, true, "v", &g);
    msa_args a = {r, select_idx(iq, ik, &r, 4, 2), NULL, NULL, NULL, 4, 0.5f};
    mt_tensor *in[3] = {q, k, v};
    const char *labels[4] = {"msa_attention q,k,v", "msa_attention q", "msa_attention k",
                             "msa_attention v"};
    const int masks[12] = {1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1};
    mt_gradcheck_subsets(labels, 4, masks, build_attn, in, 3, &a);
    return MT_TEST_OK;
}

static int test_grad_msa_kl(void) {
    mt_rng g;
    mt_rng_seed(&g, 22);
    const int64_t B = 2, T = 11, H = 4, Hkv = 2, D = 4, Di = 3;
    rows r = make_rows(B, T, grad_lens);
    mt_tensor *iq = randn(4, (int64_t[]){B, T, Hkv, Di}, true, "iq", &g);
    mt_tensor *ik = randn(4, (int64_t[]){B, T, 1, Di}, true, "ik", &g);
    mt_tensor *q = randn(4, (int64_t[]){B, T, H, D}, true, "q", &g);
    mt_tensor *k = randn(4, (int64_t[]){B, T, Hkv, D}, true, "k", &g);
    mt_tensor *mask = mt_test_tensor(MT_F32, 2, (int64_t[]){B, T}, false, "mask");
    for (int64_t i = 0; i < B * T; i++) ((float *)mask->data)[i] = i % 5 == 2 ? 0.0f : 1.0f;
    msa_args a = {r, select_idx(iq, ik, &r, 4, 2), mask, q, k, 4, 0.5f};
    mt_tensor *in[2] = {iq, ik};
    const char *labels[3] = {"msa_kl iq,ik", "msa_kl iq", "msa_kl ik"};
    const int masks[6] = {1, 1, 1, 0, 0, 1};
    mt_gradcheck_subsets(labels, 3, masks, build_kl, in, 2, &a);
    a.mask = NULL;
    mt_gradcheck("msa_kl no mask", build_kl, in, 2, &a, NULL);

    /* the teacher is stop-gradient: q and k (leaves with gradients) get exactly zero */
    mt_ctx c;
    mt_test_ctx_init(&c);
    memset(q->grad, 0, mt_nbytes(q));
    memset(k->grad, 0, mt_nbytes(k));
    mt_tensor *loss = mt_msa_kl(&c, q, k, iq, ik, a.idx, r.pos, r.seg, NULL, NULL, 4, 0.5f, 0.7f,
                                1.0f, (float)(B * T));
    EXPECT(loss->requires_grad, "msa_kl loss needs a gradient");
    mt_backward(&c, loss, NULL);
    int nonzero = 0;
    for (int64_t i = 0; i < mt_numel(q); i++) nonzero += ((float *)q->grad)[i] != 0.0f;
    for (int64_t i = 0; i < mt_numel(k); i++) nonzero += ((float *)k->grad)[i] != 0.0f;
    EXPECT(nonzero == 0, "msa_kl: %d nonzero q/k gradient elements", nonzero);
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* ---- the naive masked reference ------------------------------------------------------------ */

/* out, dq, dk, dv in double from the dense mask of idx, with the upstream gradient dout */
static void naive_attention(float *out, float *dq, float *dk, float *dv, const float *q,
                            const float *k, const float *v, const float *dout, const mt_tensor *idx,
                            const rows *r, int block, int64_t H, int64_t Hkv, int64_t D,
                            double scale) {
    const int64_t B = r->B, T = r->T, G = H / Hkv;
    double *p = malloc(sizeof(double) * (size_t)T), *dp = malloc(sizeof(double) * (size_t)T);
    memset(dk, 0, sizeof(float) * (size_t)(B * T * Hkv * D));
    memset(dv, 0, sizeof(float) * (size_t)(B * T * Hkv * D));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t g = h / G, row = (b * T + t) * H + h;
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < T; j++) {
                    p[j] = -INFINITY;
                    if (!sees(idx, r, block, b, g, t, j)) continue;
                    double x = 0;
                    for (int64_t d = 0; d < D; d++)
                        x += (double)q[row * D + d] * k[((b * T + j) * Hkv + g) * D + d];
                    p[j] = scale * x;
                    m = fmax(m, p[j]);
                }
                for (int64_t j = 0; j < T; j++) l += p[j] == -INFINITY ? 0 : exp(p[j] - m);
                for (int64_t j = 0; j < T; j++) p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - m) / l;
                double delta = 0;
                for (int64_t d = 0; d < D; d++) {
                    double o = 0;
                    for (int64_t j = 0; j < T; j++) o += p[j] * v[((b * T + j) * Hkv + g) * D + d];
                    out[row * D + d] = (float)o;
                    delta += o * dout[row * D + d];
                }
                for (int64_t j = 0; j < T; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += (double)dout[row * D + d] * v[((b * T + j) * Hkv + g) * D + d];
                    dp[j] = p[j] * (s - delta);
                }
                for (int64_t d = 0; d < D; d++) {
                    double a = 0;
                    for (int64_t j = 0; j < T; j++) a += dp[j] * k[((b * T + j) * Hkv + g) * D + d];
                    dq[row * D + d] = (float)(scale * a);
                }
                for (int64_t j = 0; j < T; j++)
                    for (int64_t d = 0; d < D; d++) {
                        const int64_t o = ((b * T + j) * Hkv + g) * D + d;
                        dk[o] += (float)(scale * dp[j] * q[row * D + d]);
                        dv[o] += (float)(p[j] * dout[row * D + d]);
                    }
            }
    free(p);
    free(dp);
}

/* the op's output and gradients for seed dout */
static void run_msa(float *out, float *dq, float *dk, float *dv, mt_tensor *q, mt_tensor *k,
                    mt_tensor *v, const float *dout, mt_tensor *idx, const rows *r, int block,
                    float scale, bool dense) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    memset(q->grad, 0, mt_nbytes(q));
    memset(k->grad, 0, mt_nbytes(k));
    memset(v->grad, 0, mt_nbytes(v));
    mt_tensor *o = dense ? mt_attention(&c, q, k, v, r->seg, scale)
                         : mt_msa_attention(&c, q, k, v, idx, r->pos, r->seg, NULL, block, scale);
    memcpy(out, o->data, mt_nbytes(o));
    mt_backward(&c, o, dout);
    memcpy(dq, q->grad, mt_nbytes(q));
    memcpy(dk, k->grad, mt_nbytes(k));
    memcpy(dv, v->grad, mt_nbytes(v));
    mt_ctx_free(&c);
}

/* op vs reference (dense op or the naive loops) on random rows; tol: relative L2 */
static void check_attention(const char *label, int64_t B, int64_t T, const int *lens, int64_t H,
                            int64_t Hkv, int64_t D, int block, int topk, bool dense, double tol,
                            uint64_t seed) {
    mt_rng g;
    mt_rng_seed(&g, seed);
    rows r = make_rows(B, T, lens);
    mt_tensor *iq = randn(4, (int64_t[]){B, T, Hkv, 8}, false, "iq", &g);
    mt_tensor *ik = randn(4, (int64_t[]){B, T, 1, 8}, false, "ik", &g);
    mt_tensor *q = randn(4, (int64_t[]){B, T, H, D}, true, "q", &g);
    mt_tensor *k = randn(4, (int64_t[]){B, T, Hkv, D}, true, "k", &g);
    mt_tensor *v = randn(4, (int64_t[]){B, T, Hkv, D}, true, "v", &g);
    mt_tensor *idx = select_idx(iq, ik, &r, block, topk);
    const int64_t nq = B * T * H * D, nk = B * T * Hkv * D;
    float *dout = malloc(sizeof(float) * (size_t)nq);
    mt_fill_normal(dout, nq, 1.0f, &g);
    float *o[2], *dq[2], *dk[2], *dv[2];
    for (int i = 0; i < 2; i++) {
        o[i] = malloc(sizeof(float) * (size_t)nq);
        dq[i] = malloc(sizeof(float) * (size_t)nq);
        dk[i] = malloc(sizeof(float) * (size_t)nk);
        dv[i] = malloc(sizeof(float) * (size_t)nk);
    }
    const float scale = 1.0f / sqrtf((float)D);
    run_msa(o[0], dq[0], dk[0], dv[0], q, k, v, dout, idx, &r, block, scale, false);
    if (dense)
        run_msa(o[1], dq[1], dk[1], dv[1], q, k, v, dout, idx, &r, block, scale, true);
    else
        naive_attention(o[1], dq[1], dk[1], dv[1], q->data, k->data, v->data, dout, idx, &r, block,
                        H, Hkv, D, scale);
    char name[128];
    const char *what[4] = {"out", "dq", "dk", "dv"};
    float *got[4] = {o[0], dq[0], dk[0], dv[0]}, *want[4] = {o[1], dq[1], dk[1], dv[1]};
    const int64_t n[4] = {nq, nq, nk, nk};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s %s", label, what[i]);
        mt_check_rel_l2(name, got[i], want[i], n[i], tol);
        mt_check_close(name, got[i], want[i], n[i], 10 * tol, 10 * tol);
    }
    for (int i = 0; i < 2; i++) {
        free(o[i]);
        free(dq[i]);
        free(dk[i]);
        free(dv[i]);
    }
    free(dout);
}

/* samples of several lengths packed in rows, spanning 64-row tiles and partial blocks */
static const int dense_lens[] = {70, 30, 50, 0, 150, 0};

static int test_op_msa_dense_equal(void) {
    /* topk = 10 covers every block of a 150-token sample at block 16: dense causal attention */
    check_attention("dense GQA", 2, 150, dense_lens, 4, 2, 16, 16, 10, true, 1e-6, 31);
    check_attention("dense H=Hkv", 2, 150, dense_lens, 2, 2, 8, 32, 5, true, 1e-6, 32);
    return MT_TEST_OK;
}

static int test_op_msa_naive(void) {
    check_attention("naive GQA", 2, 150, dense_lens, 4, 2, 16, 16, 3, false, 1e-6, 41);
    check_attention("naive topk 1", 2, 150, dense_lens, 2, 1, 8, 8, 1, false, 1e-6, 42);
    check_attention("naive H=Hkv", 2, 150, dense_lens, 2, 2, 8, 5, 4, false, 1e-6, 43);
    /* one block longer than every sample (topk 2: a -1 slot everywhere); samples of 1-3 tokens */
    check_attention("naive block > T", 2, 150, dense_lens, 4, 2, 8, 256, 2, false, 1e-6, 45);
    check_attention("naive tiny samples", 1, 7, (int[]){1, 2, 1, 3, 0}, 2, 1, 4, 2, 2, false, 1e-6,
                    46);

    /* the selection against block scores in double, sorted: local first, then descending */
    mt_rng g;
    mt_rng_seed(&g, 44);
    const int64_t B = 2, T = 150, Hi = 2, Di = 8;
    const int block = 8, topk = 4;
    rows r = make_rows(B, T, dense_lens);
    mt_tensor *iq = randn(4, (int64_t[]){B, T, Hi, Di}, false, "iq", &g);
    mt_tensor *ik = randn(4, (int64_t[]){B, T, 1, Di}, false, "ik", &g);
    mt_tensor *idx = select_idx(iq, ik, &r, block, topk);
    const int32_t *pos = r.pos->data, *got = idx->data;
    int bad = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hi; h++)
            for (int64_t t = 0; t < T; t++) {
                const int32_t pt = pos[b * T + t], local = pt / block;
                double bs[32];
                for (int i = 0; i <= local; i++) bs[i] = -INFINITY;
                for (int64_t j = t - pt; j <= t; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < Di; d++)
                        s += (double)((float *)iq->data)[((b * T + t) * Hi + h) * Di + d] *
                             ((float *)ik->data)[(b * T + j) * Di + d];
                    bs[pos[b * T + j] / block] = fmax(bs[pos[b * T + j] / block], s);
                }
                int32_t want[8];
                want[0] = local;
                bs[local] = -INFINITY;
                for (int s = 1; s < topk; s++) {
                    int best = -1;
                    for (int i = 0; i < local; i++)
                        if (bs[i] > -INFINITY && (best < 0 || bs[i] > bs[best])) best = i;
                    want[s] = best;
                    if (best >= 0) bs[best] = -INFINITY;
                }
                const int32_t *sel = got + ((b * Hi + h) * T + t) * topk;
                for (int s = 0; s < topk; s++) bad += sel[s] != want[s];
            }
    EXPECT(bad == 0, "msa_select: %d slots differ from the double reference", bad);
    return MT_TEST_OK;
}

/* ---- packed samples ------------------------------------------------------------------------ */

/* A row of two samples against each sample alone: the selection, the attention output and
 * gradients, and the KL loss and gradients agree; so nothing crosses the samples. */
static int test_op_msa_packed(void) {
    mt_rng g;
    mt_rng_seed(&g, 51);
    const int64_t L0 = 37, L1 = 29, T = L0 + L1, H = 4, Hkv = 2, D = 8, Di = 8;
    const int block = 8, topk = 3;
    const float scale = 0.35f;
    rows packed = make_rows(1, T, (int[]){37, 29, 0});
    mt_tensor *iq = randn(4, (int64_t[]){1, T, Hkv, Di}, true, "iq", &g);
    mt_tensor *ik = randn(4, (int64_t[]){1, T, 1, Di}, true, "ik", &g);
    mt_tensor *q = randn(4, (int64_t[]){1, T, H, D}, true, "q", &g);
    mt_tensor *k = randn(4, (int64_t[]){1, T, Hkv, D}, true, "k", &g);
    mt_tensor *v = randn(4, (int64_t[]){1, T, Hkv, D}, true, "v", &g);
    mt_tensor *all[5] = {iq, ik, q, k, v};
    /* the packed run: idx, out, loss = sum(out * w) + kl, every gradient */
    float *w = malloc(sizeof(float) * (size_t)(T * H * D));
    mt_fill_normal(w, T * H * D, 1.0f, &g);
    float *got_grad[5], *alone_grad[5], *got_out = malloc(sizeof(float) * (size_t)(T * H * D));
    int32_t *got_idx = malloc(sizeof(int32_t) * (size_t)(Hkv * T * topk));
    for (int i = 0; i < 5; i++) {
        got_grad[i] = calloc((size_t)mt_numel(all[i]), sizeof(float));
        alone_grad[i] = calloc((size_t)mt_numel(all[i]), sizeof(float));
    }
    double got_kl = 0, alone_kl = 0;
    for (int run = 0; run < 3; run++) { /* 0: packed, 1: sample 0 alone, 2: sample 1 alone */
        const int64_t t0 = run == 2 ? L0 : 0, n = run == 0 ? T : run == 1 ? L0 : L1;
        rows r = run == 0 ? packed : make_rows(1, n, (int[]){(int)n, 0});
        mt_tensor *x[5];
        for (int i = 0; i < 5; i++) { /* the tokens [t0, t0 + n) of each tensor */
            const int64_t per = all[i]->shape[2] * all[i]->shape[3];
            x[i] = mt_test_tensor(MT_F32, 4, (int64_t[]){1, n, all[i]->shape[2], all[i]->shape[3]},
                                  true, all[i]->name);
            memcpy(x[i]->data, (float *)all[i]->data + t0 * per, sizeof(float) * (size_t)(n * per));
        }
        mt_ctx c;
        mt_test_ctx_init(&c);
        mt_tensor *idx = mt_msa_select(&c, x[0], x[1], r.pos, r.seg, NULL, block, topk);
        mt_tensor *o =
            mt_msa_attention(&c, x[2], x[3], x[4], idx, r.pos, r.seg, NULL, block, scale);
        mt_tensor *kl = mt_msa_kl(&c, x[2], x[3], x[0], x[1], idx, r.pos, r.seg, NULL, NULL, block,
                                  scale, 0.5f, 1.0f, (float)T);
        mt_backward(&c, o, w + t0 * H * D);
        mt_backward(&c, kl, NULL);
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t t = 0; t < n; t++)
                for (int s = 0; s < topk; s++) {
                    const int32_t e = ((int32_t *)idx->data)[(h * n + t) * topk + s];
                    if (run == 0)
                        got_idx[(h * T + t) * topk + s] = e;
                    else
                        EXPECT(got_idx[(h * T + t0 + t) * topk + s] == e,
                               "packed idx[%lld,%lld,%d] = %d, alone %d", (long long)h,
                               (long long)(t0 + t), s, got_idx[(h * T + t0 + t) * topk + s], e);
                }
        if (run == 0) {
            memcpy(got_out, o->data, mt_nbytes(o));
            got_kl = *(float *)kl->data;
        } else {
            mt_check_close("packed out", got_out + t0 * H * D, o->data, n * H * D, 1e-6, 1e-6);
            alone_kl += *(float *)kl->data;
        }
        for (int i = 0; i < 5; i++) {
            const int64_t per = all[i]->shape[2] * all[i]->shape[3];
            memcpy((run == 0 ? got_grad[i] : alone_grad[i] + t0 * per), x[i]->grad,
                   sizeof(float) * (size_t)(n * per));
        }
        mt_ctx_free(&c);
    }
    EXPECT(fabs(got_kl - alone_kl) <= 1e-6 * fabs(alone_kl), "packed kl %.9g, alone %.9g", got_kl,
           alone_kl);
    for (int i = 0; i < 5; i++) {
        mt_check_close(all[i]->name, got_grad[i], alone_grad[i], mt_numel(all[i]), 1e-6, 1e-5);
        free(got_grad[i]);
        free(alone_grad[i]);
    }
    free(w);
    free(got_out);
    free(got_idx);
    return MT_TEST_OK;
}

/* ---- decode -------------------------------------------------------------------------------- */

/* Every prefix length t_len of one-sample rows, the two rows at different lengths (B = 2): the
 * decode steps over a cache of t_max > T positions (NaN past T: never read) equal row
 * t_len - 1 of the full forward. */
static int test_op_msa_decode(void) {
    mt_rng g;
    mt_rng_seed(&g, 61);
    const int64_t B = 2, T = 45, t_max = 50, H = 4, Hkv = 2, D = 8, Di = 8;
    const int block = 8, topk = 3;
    const float scale = 0.35f;
    rows r = make_rows(B, T, (int[]){45, 0, 45, 0});
    mt_tensor *iq = randn(4, (int64_t[]){B, T, Hkv, Di}, false, "iq", &g);
    mt_tensor *ik = randn(4, (int64_t[]){B, T, 1, Di}, false, "ik", &g);
    mt_tensor *q = randn(4, (int64_t[]){B, T, H, D}, false, "q", &g);
    mt_tensor *k = randn(4, (int64_t[]){B, T, Hkv, D}, false, "k", &g);
    mt_tensor *v = randn(4, (int64_t[]){B, T, Hkv, D}, false, "v", &g);
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *idx = mt_msa_select(&c, iq, ik, r.pos, r.seg, NULL, block, topk);
    mt_tensor *o = mt_msa_attention(&c, q, k, v, idx, r.pos, r.seg, NULL, block, scale);
    float *ikc = malloc(sizeof(float) * (size_t)(B * t_max * Di));
    float *kc = malloc(sizeof(float) * (size_t)(B * t_max * Hkv * D));
    float *vc = malloc(sizeof(float) * (size_t)(B * t_max * Hkv * D));
    float *qd = malloc(sizeof(float) * (size_t)(B * H * D)), *iqd = malloc(sizeof(float) * 64);
    float *od = malloc(sizeof(float) * (size_t)(B * H * D)), *ow = malloc(sizeof(float) * 64);
    float *work = malloc(sizeof(float) * (size_t)cpu_msa_select_decode_work(B, Hkv, t_max, block));
    int32_t *idd = malloc(sizeof(int32_t) * (size_t)(B * Hkv * topk));
    for (int64_t i = 0; i < B * t_max * Hkv * D; i++) kc[i] = vc[i] = NAN;
    for (int64_t i = 0; i < B * t_max * Di; i++) ikc[i] = NAN;
    int bad_idx = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            memcpy(ikc + (b * t_max + t) * Di, (float *)ik->data + (b * T + t) * Di,
                   sizeof(float) * Di);
            memcpy(kc + (b * t_max + t) * Hkv * D, (float *)k->data + (b * T + t) * Hkv * D,
                   sizeof(float) * Hkv * D);
            memcpy(vc + (b * t_max + t) * Hkv * D, (float *)v->data + (b * T + t) * Hkv * D,
                   sizeof(float) * Hkv * D);
        }
    for (int64_t t_len = 1; t_len <= T; t_len++) {
        /* ragged: row 0 counts up, row 1 down, so the rows' lengths (and visible blocks
         * selections) differ in one call; row b's query is its row at tl[b] - 1 */
        const int32_t tl[2] = {(int32_t)t_len, (int32_t)(T + 1 - t_len)};
        for (int64_t b = 0; b < B; b++) {
            const int64_t t = tl[b] - 1;
            memcpy(iqd + b * Hkv * Di, (float *)iq->data + (b * T + t) * Hkv * Di,
                   sizeof(float) * Hkv * Di);
            memcpy(qd + b * H * D, (float *)q->data + (b * T + t) * H * D, sizeof(float) * H * D);
            memcpy(ow + b * H * D, (float *)o->data + (b * T + t) * H * D, sizeof(float) * H * D);
        }
        cpu_msa_select_decode(idd, work, iqd, ikc, tl, B, t_max, Hkv, Di, block, topk);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hkv; h++)
                for (int s = 0; s < topk; s++)
                    bad_idx += idd[(b * Hkv + h) * topk + s] !=
                               ((int32_t *)idx->data)[((b * Hkv + h) * T + tl[b] - 1) * topk + s];
        cpu_msa_attention_decode(od, qd, kc, vc, idd, tl, B, t_max, H, Hkv, D, block, topk, scale);
        mt_check_close("msa decode out", od, ow, B * H * D, 1e-6, 1e-5);
    }
    EXPECT(bad_idx == 0, "msa decode: %d selection slots differ from the forward", bad_idx);
    free(ikc), free(kc), free(vc), free(qd), free(iqd), free(od), free(ow), free(work), free(idd);
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* ---- rule violations ----------------------------------------------------------------------- */

static void die_bad_pos(void *arg) {
    (void)arg;
    rows r = make_rows(1, 6, (int[]){6, 0});
    ((int32_t *)r.pos->data)[3] = 7; /* a jump inside a sample */
    mt_rng g;
    mt_rng_seed(&g, 1);
    mt_tensor *iq = randn(4, (int64_t[]){1, 6, 1, 4}, false, "iq", &g);
    mt_tensor *ik = randn(4, (int64_t[]){1, 6, 1, 4}, false, "ik", &g);
    select_idx(iq, ik, &r, 2, 2);
}

static void die_dup_idx(void *arg) {
    (void)arg;
    rows r = make_rows(1, 6, (int[]){6, 0});
    mt_rng g;
    mt_rng_seed(&g, 1);
    mt_tensor *q = randn(4, (int64_t[]){1, 6, 1, 4}, false, "q", &g);
    mt_tensor *idx = mt_test_tensor(MT_I32, 4, (int64_t[]){1, 1, 6, 2}, false, "idx");
    for (int i = 0; i < 12; i++) ((int32_t *)idx->data)[i] = 0; /* block 0 twice */
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_msa_attention(&c, q, q, q, idx, r.pos, r.seg, NULL, 4, 1.0f);
}

static void die_no_local(void *arg) {
    (void)arg;
    rows r = make_rows(1, 6, (int[]){6, 0});
    mt_rng g;
    mt_rng_seed(&g, 1);
    mt_tensor *q = randn(4, (int64_t[]){1, 6, 1, 4}, false, "q", &g);
    mt_tensor *idx = mt_test_tensor(MT_I32, 4, (int64_t[]){1, 1, 6, 2}, false, "idx");
    /* {0, -1} everywhere: queries 4, 5 (block 1) miss their local block */
    for (int i = 0; i < 12; i++) ((int32_t *)idx->data)[i] = i % 2 ? -1 : 0;
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_msa_kl(&c, q, q, q, q, idx, r.pos, r.seg, NULL, NULL, 4, 1.0f, 1.0f, 1.0f, 1.0f);
}

static int test_op_msa_checks(void) {
    EXPECT(mt_expect_death(die_bad_pos, NULL, "pos[0,3] = 7, expected 3"), "bad pos accepted");
    EXPECT(mt_expect_death(die_dup_idx, NULL, "holds block 0 twice"), "duplicate block accepted");
    EXPECT(mt_expect_death(die_no_local, NULL, "idx[0,0,4,:] lacks the local block 1"),
           "a query without its local block accepted");
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"grad_msa_attention", test_grad_msa_attention}, {"grad_msa_kl", test_grad_msa_kl},
    {"op_msa_dense_equal", test_op_msa_dense_equal}, {"op_msa_naive", test_op_msa_naive},
    {"op_msa_packed", test_op_msa_packed},           {"op_msa_decode", test_op_msa_decode},
    {"op_msa_checks", test_op_msa_checks},
};
MT_TEST_MAIN(cases)
