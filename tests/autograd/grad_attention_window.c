/* grad_attention_window.c: softmax attention with a sliding window (mt_attention_window, the
 * config key sliding_window): query t sees key s when t - W < s <= t (transformers'
 * sliding_window_overlay on its causal mask), and only keys of its segment.
 *   op_attention_window: the fp32 forward and backward (kernels/cpu/attention.c's 64-position
 *     tiles) against a double reference written from that definition, T = 150 over packed
 *     segments, windows 1, 3, 63, 64, 65, 100 and 1000 (wider than T: the causal attention);
 *     out and every gradient to 1e-5 relative L2; and the window must change the result.
 *   op_attention_window_bf16: the bf16 mode (row kernels) against the same reference to bf16's
 *     rounding (2e-2 relative L2) and farther from the reference without the window.
 *   grad_attention_window: finite differences of the op (W = 3, T = 7). */
#include "tests/support/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool win_visible(const int32_t *seg, int64_t b, int64_t T, int64_t t, int64_t s, int64_t W) {
    if (s > t || (W > 0 && s <= t - W)) return false;
    return !seg || seg[b * T + s] == seg[b * T + t];
}

/* Double reference: out (B,T,H,D) and dq, dk, dv from dout, written from the definition. */
static void win_ref(double *out, double *dq, double *dk, double *dv, const float *q, const float *k,
                    const float *v, const float *dout, const int32_t *seg, int64_t B, int64_t T,
                    int64_t H, int64_t Hkv, int64_t D, double scale, int64_t W) {
    const int64_t rep = H / Hkv;
    double *p = malloc(sizeof(double) * (size_t)T), *dp = malloc(sizeof(double) * (size_t)T);
    memset(dk, 0, sizeof(double) * (size_t)(B * T * Hkv * D));
    memset(dv, 0, sizeof(double) * (size_t)(B * T * Hkv * D));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t g = h / rep;
                const float *qt = q + ((b * T + t) * H + h) * D;
                const float *dot = dout + ((b * T + t) * H + h) * D;
                double m = -INFINITY, l = 0;
                for (int64_t s = 0; s < T; s++) {
                    p[s] = -INFINITY;
                    if (!win_visible(seg, b, T, t, s, W)) continue;
                    const float *ks = k + ((b * T + s) * Hkv + g) * D;
                    double x = 0;
                    for (int64_t d = 0; d < D; d++) x += (double)qt[d] * ks[d];
                    p[s] = scale * x;
                    m = fmax(m, p[s]);
                }
                for (int64_t s = 0; s < T; s++) l += p[s] == -INFINITY ? 0 : exp(p[s] - m);
                double *o = out + ((b * T + t) * H + h) * D;
                double rs = 0;
                for (int64_t d = 0; d < D; d++) o[d] = 0;
                for (int64_t s = 0; s < T; s++) {
                    p[s] = p[s] == -INFINITY ? 0 : exp(p[s] - m) / l;
                    const float *vs = v + ((b * T + s) * Hkv + g) * D;
                    dp[s] = 0;
                    for (int64_t d = 0; d < D; d++) {
                        o[d] += p[s] * vs[d];
                        dp[s] += (double)dot[d] * vs[d];
                    }
                    rs += p[s] * dp[s];
                }
                double *dqt = dq + ((b * T + t) * H + h) * D;
                for (int64_t d = 0; d < D; d++) dqt[d] = 0;
                for (int64_t s = 0; s < T; s++) {
                    if (p[s] == 0) continue;
                    const double ds = p[s] * (dp[s] - rs);
                    const float *ks = k + ((b * T + s) * Hkv + g) * D;
                    double *dks = dk + ((b * T + s) * Hkv + g) * D;
                    double *dvs = dv + ((b * T + s) * Hkv + g) * D;
                    for (int64_t d = 0; d < D; d++) {
                        dqt[d] += scale * ds * ks[d];
                        dks[d] += scale * ds * qt[d];
                        dvs[d] += p[s] * dot[d];
                    }
                }
            }
    free(p);
    free(dp);
}

/* relative L2, against |ref|^2 but at least n x 0.01 (elements of order 0.1: a window of 1
 * makes dq and dk exactly zero, where fp32 leaves rounding noise) */
static double win_rel_l2(const float *a, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / fmax(den, 0.01 * (double)n));
}

typedef struct {
    mt_tensor *q, *k, *v, *seg, *dout;
    int64_t B, T, H, Hkv, D;
} win_case;

static void win_case_init(win_case *w, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D,
                          uint64_t seed) {
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    *w = (win_case){.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D};
    w->q = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, H, D}, true, "q");
    w->k = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, Hkv, D}, true, "k");
    w->v = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, Hkv, D}, true, "v");
    w->dout = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, H, D}, false, "dout");
    mt_tensor *f[4] = {w->q, w->k, w->v, w->dout};
    for (int i = 0; i < 4; i++) mt_fill_normal(f[i]->data, mt_numel(f[i]), 1.0f, &rng);
    w->seg = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg");
    int32_t *s = w->seg->data;
    for (int64_t t = 0; t < T; t++) { /* row 0: samples of 70, 30, the rest; row 1: one sample */
        s[t] = t < 70 ? 0 : t < 100 ? 1 : 2;
        s[T + t] = 7;
    }
}

/* Runs the op in mode (MT_F32 or MT_BF16): res = out, dq, dk, dv (malloc'ed). */
static void win_run(win_case *w, mt_dtype mode, int64_t W, float *res[4]) {
    mt_tensor *in[3] = {w->q, w->k, w->v};
    for (int i = 0; i < 3; i++) memset(in[i]->grad, 0, mt_nbytes(in[i]));
    mt_ctx c;
    mt_test_ctx_init(&c);
    c.compute_dtype = mode;
    mt_tensor *out =
        mt_attention_window(&c, w->q, w->k, w->v, w->seg, 1.0f / sqrtf((float)w->D), W);
    c.compute_dtype = MT_F32;
    res[0] = malloc(mt_nbytes(out));
    memcpy(res[0], out->data, mt_nbytes(out));
    mt_backward(&c, out, w->dout->data);
    for (int i = 0; i < 3; i++) {
        res[1 + i] = malloc(mt_nbytes(in[i]));
        memcpy(res[1 + i], in[i]->grad, mt_nbytes(in[i]));
    }
    mt_ctx_free(&c);
}

/* res against the reference of window W: worst relative L2 over out, dq, dk, dv */
static double win_err(win_case *w, float *res[4], int64_t W) {
    const int64_t nq = w->B * w->T * w->H * w->D, nk = w->B * w->T * w->Hkv * w->D;
    double *ref[4] = {malloc(sizeof(double) * (size_t)nq), malloc(sizeof(double) * (size_t)nq),
                      malloc(sizeof(double) * (size_t)nk), malloc(sizeof(double) * (size_t)nk)};
    win_ref(ref[0], ref[1], ref[2], ref[3], w->q->data, w->k->data, w->v->data, w->dout->data,
            w->seg->data, w->B, w->T, w->H, w->Hkv, w->D, 1.0 / sqrt((double)w->D), W);
    const int64_t n[4] = {nq, nq, nk, nk};
    double worst = 0;
    for (int i = 0; i < 4; i++) {
        worst = fmax(worst, win_rel_l2(res[i], ref[i], n[i]));
        free(ref[i]);
    }
    return worst;
}

static int op_attention_window(void) {
    win_case w;
    win_case_init(&w, 2, 150, 4, 2, 16, 71);
    const int64_t wins[] = {1, 3, 63, 64, 65, 100, 1000};
    for (size_t i = 0; i < sizeof(wins) / sizeof(wins[0]); i++) {
        float *res[4];
        win_run(&w, MT_F32, wins[i], res);
        const double e = win_err(&w, res, wins[i]);
        const double e_causal = win_err(&w, res, 0);
        printf("  W=%-4lld worst relative L2 %.3e (against the causal reference %.3e)\n",
               (long long)wins[i], e, e_causal);
        EXPECT(e <= 1e-5, "window %lld: relative L2 %.3e exceeds 1e-5", (long long)wins[i], e);
        if (wins[i] < 100) /* a window that cuts must show */
            EXPECT(e_causal > 1e-2, "window %lld: no different from the causal attention",
                   (long long)wins[i]);
        for (int j = 0; j < 4; j++) free(res[j]);
    }
    return MT_TEST_OK;
}

static int op_attention_window_bf16(void) {
    win_case w;
    win_case_init(&w, 2, 150, 4, 2, 16, 72);
    const int64_t wins[] = {1, 3, 65};
    for (size_t i = 0; i < sizeof(wins) / sizeof(wins[0]); i++) {
        float *res[4];
        win_run(&w, MT_BF16, wins[i], res);
        const double e = win_err(&w, res, wins[i]), e_causal = win_err(&w, res, 0);
        printf("  bf16 W=%-3lld worst relative L2 %.3e (causal reference %.3e)\n",
               (long long)wins[i], e, e_causal);
        EXPECT(e <= 2e-2, "bf16 window %lld: relative L2 %.3e exceeds 2e-2", (long long)wins[i], e);
        EXPECT(e_causal > 5 * e, "bf16 window %lld: as close to the causal attention",
               (long long)wins[i]);
        for (int j = 0; j < 4; j++) free(res[j]);
    }
    return MT_TEST_OK;
}

static mt_tensor *win_build(mt_ctx *c, mt_tensor **in, void *user) {
    return mt_attention_window(c, in[0], in[1], in[2], NULL, 0.5f, *(const int64_t *)user);
}

static int grad_attention_window(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 73);
    mt_tensor *q = mt_test_tensor(MT_F32, 4, (int64_t[]){1, 7, 2, 4}, true, "q");
    mt_tensor *k = mt_test_tensor(MT_F32, 4, (int64_t[]){1, 7, 1, 4}, true, "k");
    mt_tensor *v = mt_test_tensor(MT_F32, 4, (int64_t[]){1, 7, 1, 4}, true, "v");
    mt_tensor *in[3] = {q, k, v};
    for (int i = 0; i < 3; i++) mt_fill_normal(in[i]->data, mt_numel(in[i]), 1.0f, &rng);
    int64_t W = 3;
    mt_gradcheck("attention window 3", win_build, in, 3, &W,
                 &(mt_gradcheck_opts){.max_elems = 256});
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_attention_window", op_attention_window},
    {"op_attention_window_bf16", op_attention_window_bf16},
    {"grad_attention_window", grad_attention_window},
};

MT_TEST_MAIN(cases)
