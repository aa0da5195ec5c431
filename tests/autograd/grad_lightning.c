/* grad_lightning.c: lightning attention (spec section 4): finite-difference gradients of both
 * forms, block form against the naive form, packed segments against separate samples, decode
 * steps against the full forward, and the naive form against an independent double-precision
 * recurrence written here from spec 4.3. */
#include "tests/support/harness.h"
#include "kernels/cpu/lightning.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* qkv as the model produces it: SiLU of a normal pre-activation. */
static void fill_qkv(float *x, int64_t n, mt_rng *rng) {
    mt_fill_normal(x, n, 1.0f, rng);
    for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

static mt_tensor *new_qkv(int B, int T, int H, int D, bool with_grad, mt_rng *rng) {
    mt_tensor *t = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, H, 3 * D}, with_grad, "qkv");
    fill_qkv(t->data, mt_numel(t), rng);
    return t;
}

static mt_tensor *new_decay(int H, const float *lam) {
    mt_tensor *t = mt_test_tensor(MT_F32, 1, (int64_t[]){H}, false, "decay");
    memcpy(t->data, lam, sizeof(float) * H);
    return t;
}

static mt_tensor *new_seg(int B, int T, const int32_t *ids) {
    mt_tensor *t = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg");
    memcpy(t->data, ids, sizeof(int32_t) * B * T);
    return t;
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static double max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

typedef struct {
    mt_tensor *decay, *seg;
    int block;
} lt_args;

static mt_tensor *build_lightning(mt_ctx *c, mt_tensor **in, void *user) {
    lt_args *a = user;
    return mt_lightning(c, in[0], a->decay, a->seg, a->block);
}

/* Output and qkv gradient of one form for seed dout; out and dqkv are caller buffers. */
static void run_form(mt_tensor *qkv, mt_tensor *decay, mt_tensor *seg, int block, const float *dout,
                     float *out, float *dqkv) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    memset(qkv->grad, 0, mt_nbytes(qkv));
    mt_tensor *o = mt_lightning(&c, qkv, decay, seg, block);
    memcpy(out, o->data, mt_nbytes(o));
    mt_backward(&c, o, dout);
    memcpy(dqkv, qkv->grad, mt_nbytes(qkv));
    mt_ctx_free(&c);
}

/* ---- finite differences: small shapes, blocks of 4 crossed, the last one partial ---- */

static void gradcheck_forms(int block) {
    const float lam[2] = {0.3f, 0.05f};
    mt_rng rng;
    mt_rng_seed(&rng, 11 + block);
    mt_gradcheck_opts opts = {.h = 1e-2, .max_elems = 1 << 20}; /* every element */
    char label[64];
    static const int Ts[] = {7, 8, 9, 10, 1};
    for (size_t i = 0; i < sizeof(Ts) / sizeof(Ts[0]); i++) {
        int T = Ts[i], B = T == 1 ? 1 : 2;
        mt_tensor *qkv = new_qkv(B, T, 2, 4, true, &rng);
        lt_args a = {new_decay(2, lam), NULL, block};
        snprintf(label, sizeof(label), "lightning b%d T=%d", block, T);
        mt_gradcheck(label, build_lightning, &qkv, 1, &a, &opts);
    }
    /* Segments: resets inside blocks, at a block boundary (t = 4, 8) and non-monotonic ids
     * (row 1's second run of 5s is a new sample). */
    const int32_t ids[2 * 10] = {0, 0, 0, 1, 2, 2, 2, 2, 3, 3, /* */ 5, 5, 5, 5, 3, 3, 3, 3, 5, 5};
    mt_tensor *qkv = new_qkv(2, 10, 2, 4, true, &rng);
    lt_args a = {new_decay(2, lam), new_seg(2, 10, ids), block};
    snprintf(label, sizeof(label), "lightning b%d seg", block);
    mt_gradcheck(label, build_lightning, &qkv, 1, &a, &opts);
}

static int test_grad_lightning_naive(void) {
    gradcheck_forms(0);
    return MT_TEST_OK;
}

static int test_grad_lightning_block(void) {
    gradcheck_forms(4);
    return MT_TEST_OK;
}

/* ---- block form == naive form, forward and backward, realistic sizes ---- */

static int test_op_lightning_block_vs_naive(void) {
    const int H = 2, D = 32, block = 64;
    /* a fast head (gamma^64 ~ 3e-6) and a slow one (most of the sum comes through the state) */
    const float lam[2] = {0.2f, 0.002f};
    static const int Ts[] = {1, 63, 64, 65, 256, 257, 1000};
    mt_rng rng;
    mt_rng_seed(&rng, 7);
    mt_tensor *decay = new_decay(H, lam);
    for (size_t i = 0; i < sizeof(Ts) / sizeof(Ts[0]); i++) {
        for (int with_seg = 0; with_seg < 2; with_seg++) {
            const int T = Ts[i], B = T >= 256 ? 1 : 2;
            if (with_seg && T < 256) continue;
            mt_tensor *qkv = new_qkv(B, T, H, D, true, &rng);
            mt_tensor *seg = NULL;
            if (with_seg) { /* samples of random lengths 1..150 packed into the row */
                int32_t *ids = malloc(sizeof(int32_t) * B * T);
                int id = 0;
                for (int t = 0; t < T;) {
                    int len = 1 + (int)(mt_rng_u64(&rng) % 150);
                    for (int j = 0; j < len && t < T; j++) ids[t++] = id;
                    id++;
                }
                seg = new_seg(B, T, ids);
                free(ids);
            }
            const int64_t no = (int64_t)B * T * H * D, nq = mt_numel(qkv);
            float *dout = malloc(sizeof(float) * no);
            mt_fill_normal(dout, no, 1.0f, &rng);
            float *o_n = malloc(sizeof(float) * no), *o_b = malloc(sizeof(float) * no);
            float *g_n = malloc(sizeof(float) * nq), *g_b = malloc(sizeof(float) * nq);
            run_form(qkv, decay, seg, 0, dout, o_n, g_n);
            run_form(qkv, decay, seg, block, dout, o_b, g_b);
            char label[64];
            snprintf(label, sizeof(label), "fwd T=%d%s", T, with_seg ? " seg" : "");
            mt_check_rel_l2(label, o_b, o_n, no, 1e-6);
            printf("    max|diff| %.3g (max|ref| %.3g)\n", max_abs_diff(o_b, o_n, no),
                   max_abs(o_n, no));
            snprintf(label, sizeof(label), "dqkv T=%d%s", T, with_seg ? " seg" : "");
            mt_check_rel_l2(label, g_b, g_n, nq, 1e-6);
            printf("    max|diff| %.3g (max|ref| %.3g)\n", max_abs_diff(g_b, g_n, nq),
                   max_abs(g_n, nq));
            free(dout);
            free(o_n);
            free(o_b);
            free(g_n);
            free(g_b);
        }
    }
    return MT_TEST_OK;
}

/* ---- a packed row equals its samples run separately, forward and backward ---- */

static int test_op_lightning_segments(void) {
    const int H = 2, D = 16, block = 64;
    const float lam[2] = {0.1f, 0.003f};
    /* Row 0: boundaries inside blocks, a 1-token sample, samples that cross the block edges
     * at other offsets than when run alone (55..124, 125..136). Row 1: a boundary exactly at
     * t = 64 and the same ids reused non-monotonically (the state resets on every change). */
    static const int lens[2][6] = {{5, 1, 9, 40, 70, 12}, {64, 7, 20, 1, 37, 8}};
    static const int32_t idv[2][6] = {{0, 1, 2, 3, 4, 5}, {7, 2, 7, 2, 9, 7}};
    const int B = 2, T = 137;
    mt_rng rng;
    mt_rng_seed(&rng, 21);
    mt_tensor *decay = new_decay(H, lam);
    mt_tensor *qkv = new_qkv(B, T, H, D, true, &rng);
    int32_t ids[2 * 137];
    for (int b = 0; b < B; b++)
        for (int s = 0, t = 0; s < 6; s++)
            for (int j = 0; j < lens[b][s]; j++) ids[b * T + t++] = idv[b][s];
    mt_tensor *seg = new_seg(B, T, ids);
    const int64_t no = (int64_t)B * T * H * D, nq = mt_numel(qkv);
    float *dout = malloc(sizeof(float) * no), *o = malloc(sizeof(float) * no);
    float *g = malloc(sizeof(float) * nq);
    float *o_sep = malloc(sizeof(float) * no), *g_sep = malloc(sizeof(float) * nq);
    mt_fill_normal(dout, no, 1.0f, &rng);

    for (int form = 0; form < 2; form++) {
        const int blk = form ? block : 0;
        run_form(qkv, decay, seg, blk, dout, o, g);
        /* each sample alone: copy its rows out, run without segments, copy the results back */
        for (int b = 0; b < B; b++) {
            for (int s = 0, t0 = 0; s < 6; t0 += lens[b][s++]) {
                const int L = lens[b][s];
                mt_tensor *x = mt_test_tensor(MT_F32, 4, (int64_t[]){1, L, H, 3 * D}, true, "x");
                const size_t r3 = (size_t)H * 3 * D, r = (size_t)H * D;
                memcpy(x->data, (float *)qkv->data + ((size_t)b * T + t0) * r3,
                       sizeof(float) * L * r3);
                float *ox = malloc(sizeof(float) * L * r), *gx = malloc(sizeof(float) * L * r3);
                run_form(x, decay, NULL, blk, dout + ((size_t)b * T + t0) * r, ox, gx);
                memcpy(o_sep + ((size_t)b * T + t0) * r, ox, sizeof(float) * L * r);
                memcpy(g_sep + ((size_t)b * T + t0) * r3, gx, sizeof(float) * L * r3);
                free(ox);
                free(gx);
            }
        }
        const char *name = form ? "block" : "naive";
        char label[64];
        snprintf(label, sizeof(label), "%s fwd packed vs separate", name);
        mt_check_rel_l2(label, o, o_sep, no, 1e-6);
        printf("    max|diff| %.3g (max|ref| %.3g)\n", max_abs_diff(o, o_sep, no),
               max_abs(o_sep, no));
        snprintf(label, sizeof(label), "%s dqkv packed vs separate", name);
        mt_check_rel_l2(label, g, g_sep, nq, 1e-6);
        printf("    max|diff| %.3g (max|ref| %.3g)\n", max_abs_diff(g, g_sep, nq),
               max_abs(g_sep, nq));
        /* the naive form sums exactly the same terms in the same order either way */
        if (!form)
            EXPECT(max_abs_diff(o, o_sep, no) == 0 && max_abs_diff(g, g_sep, nq) == 0,
                   "naive form: packed and separate runs differ");
    }
    free(dout);
    free(o);
    free(g);
    free(o_sep);
    free(g_sep);
    return MT_TEST_OK;
}

/* ---- decode: prefix state + one step per token equals the full forward ---- */

static int test_op_lightning_decode(void) {
    const int B = 2, T = 90, H = 2, D = 16;
    const float lam[2] = {0.1f, 0.001f};
    const size_t r3 = (size_t)H * 3 * D, r = (size_t)H * D, nS = (size_t)B * H * D * D;
    mt_rng rng;
    mt_rng_seed(&rng, 31);
    float *qkv = malloc(sizeof(float) * B * T * r3);
    fill_qkv(qkv, (int64_t)B * T * r3, &rng);
    /* Row 1 is packed when the prompt covers t = 23, where a second sample starts (decode
     * continues that sample; it never crosses a reset). */
    int32_t ids[2 * 90];
    for (int t = 0; t < T; t++) ids[t] = 0, ids[T + t] = t < 23 ? 4 : 1;
    float *ref = malloc(sizeof(float) * B * T * r), *dec = malloc(sizeof(float) * B * T * r);
    float *state = malloc(sizeof(float) * nS), *state2 = malloc(sizeof(float) * nS);
    float *prefix = malloc(sizeof(float) * B * T * r3), *o_tmp = malloc(sizeof(float) * B * T * r);
    float *qkv_t = malloc(sizeof(float) * B * r3), *o_t = malloc(sizeof(float) * B * r);
    static const int Ps[] = {0, 1, 40, 64};
    for (size_t pi = 0; pi < sizeof(Ps) / sizeof(Ps[0]); pi++) {
        const int P = Ps[pi];
        const int32_t *seg = P > 23 ? ids : NULL;
        cpu_lightning_forward_naive(ref, qkv, lam, seg, B, T, H, D);
        if (P == 0) {
            memset(state, 0, sizeof(float) * nS);
        } else { /* the prompt as its own (B,P) batch */
            int32_t pids[2 * 90];
            for (int b = 0; b < B; b++) {
                memcpy(prefix + (size_t)b * P * r3, qkv + (size_t)b * T * r3,
                       sizeof(float) * P * r3);
                memcpy(pids + b * P, ids + b * T, sizeof(int32_t) * P);
            }
            cpu_lightning_state(state, prefix, lam, seg ? pids : NULL, B, P, H, D);
            /* the block forward's final state is the same cache */
            cpu_lightning_forward_block(o_tmp, state2, prefix, lam, seg ? pids : NULL, B, P, H, D,
                                        16);
            char label[64];
            snprintf(label, sizeof(label), "block final state P=%d", P);
            mt_check_rel_l2(label, state2, state, (int64_t)nS, 1e-6);
        }
        for (int t = P; t < T; t++) {
            for (int b = 0; b < B; b++)
                memcpy(qkv_t + b * r3, qkv + ((size_t)b * T + t) * r3, sizeof(float) * r3);
            cpu_lightning_decode_step(state, qkv_t, lam, o_t, B, H, D);
            for (int b = 0; b < B; b++)
                memcpy(dec + ((size_t)b * (T - P) + t - P) * r, o_t + b * r, sizeof(float) * r);
        }
        for (int b = 0; b < B; b++) /* the reference's decoded positions, (B, T-P, H, D) */
            memmove(ref + (size_t)b * (T - P) * r, ref + ((size_t)b * T + P) * r,
                    sizeof(float) * (T - P) * r);
        const int64_t n = (int64_t)B * (T - P) * r;
        char label[64];
        snprintf(label, sizeof(label), "decode P=%d", P);
        mt_check_close(label, dec, ref, n, 1e-6 * max_abs(ref, n), 1e-5);
    }
    free(qkv);
    free(ref);
    free(dec);
    free(state);
    free(state2);
    free(prefix);
    free(o_tmp);
    free(qkv_t);
    free(o_t);
    return MT_TEST_OK;
}

/* ---- the naive (and block) form against spec 4.3's recurrence, in double ---- */

static int test_op_lightning_recurrence(void) {
    const int B = 2, T = 200, H = 3, D = 8;
    const float lam[3] = {0.7f, 0.05f, 1e-4f};
    mt_rng rng;
    mt_rng_seed(&rng, 41);
    const int64_t nq = (int64_t)B * T * H * 3 * D, no = (int64_t)B * T * H * D;
    float *qkv = malloc(sizeof(float) * nq);
    fill_qkv(qkv, nq, &rng);
    int32_t ids[2 * 200];
    for (int t = 0; t < T; t++) ids[t] = 0, ids[T + t] = t / 37;
    float *ref = malloc(sizeof(float) * no);
    double S[8][8];
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const double gamma = exp(-(double)lam[h]);
            memset(S, 0, sizeof(S));
            for (int t = 0; t < T; t++) {
                if (t > 0 && ids[b * T + t] != ids[b * T + t - 1]) memset(S, 0, sizeof(S));
                const float *q = qkv + (((size_t)b * T + t) * H + h) * 3 * D;
                const float *k = q + D, *v = q + 2 * D;
                for (int c = 0; c < D; c++) /* S_t = gamma S_{t-1} + k_t^T v_t */
                    for (int d = 0; d < D; d++) S[c][d] = gamma * S[c][d] + (double)k[c] * v[d];
                for (int d = 0; d < D; d++) { /* o_t = q_t S_t */
                    double o = 0;
                    for (int c = 0; c < D; c++) o += (double)q[c] * S[c][d];
                    ref[(((size_t)b * T + t) * H + h) * D + d] = (float)o;
                }
            }
        }
    }
    const double atol = 1e-7 * max_abs(ref, no);
    float *out = malloc(sizeof(float) * no);
    cpu_lightning_forward_naive(out, qkv, lam, ids, B, T, H, D);
    mt_check_close("naive vs recurrence", out, ref, no, atol, 1e-6);
    float *state = malloc(sizeof(float) * B * H * D * D);
    cpu_lightning_forward_block(out, state, qkv, lam, ids, B, T, H, D, 32);
    mt_check_close("block vs recurrence", out, ref, no, atol, 1e-5);
    free(qkv);
    free(ref);
    free(out);
    free(state);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"grad_lightning_naive", test_grad_lightning_naive},
    {"grad_lightning_block", test_grad_lightning_block},
    {"op_lightning_block_vs_naive", test_op_lightning_block_vs_naive},
    {"op_lightning_segments", test_op_lightning_segments},
    {"op_lightning_decode", test_op_lightning_decode},
    {"op_lightning_recurrence", test_op_lightning_recurrence},
};
MT_TEST_MAIN(cases)
