/* grad_act.c: the clamped SwiGLU of MiniMax-M3 (mt_act, "swigluoai", spec 7 of minimax-m3.md)
 * in the ops that take it: swiglu (the dense MLP and the shared expert), moe_experts and
 * moe_expert_ffn (the routed experts).
 *   grad_*: finite differences with values on both sides of the clamps, none within the step
 *           of a kink (the derivative jumps there);
 *   op_*:   forwards against the formula in double written here, the backward's masks at the
 *           limits exactly (the gradient passes at equality, as torch.clamp's), NaN through
 *           the clamps, and SiLU (act NULL or clamp false) bit-identical to mt_swiglu. */
#include "tests/support/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the formula, in double ---- */

static double ref_oai(double g, double u, const mt_act *a) {
    const double gc = g > a->limit ? a->limit : g;
    const double uc = u > a->limit ? a->limit : u < -a->limit ? -a->limit : u;
    return gc / (1.0 + exp(-a->alpha * gc)) * (uc + a->beta);
}

static void ref_oai_grad(double g, double u, const mt_act *a, double *dg, double *du) {
    const double gc = g > a->limit ? a->limit : g;
    const double uc = u > a->limit ? a->limit : u < -a->limit ? -a->limit : u;
    const double s = 1.0 / (1.0 + exp(-a->alpha * gc));
    *dg = g <= a->limit ? (uc + a->beta) * s * (1.0 + a->alpha * gc * (1.0 - s)) : 0.0;
    *du = (u >= -a->limit && u <= a->limit) ? gc * s : 0.0;
}

/* Moves every value within margin of a kink (g = limit; u = +-limit) to margin away from it. */
static void away_from_kinks(float *v, int64_t n, float limit, float margin, bool both) {
    for (int64_t i = 0; i < n; i++) {
        if (fabsf(v[i] - limit) < margin) v[i] = v[i] < limit ? limit - margin : limit + margin;
        if (both && fabsf(v[i] + limit) < margin)
            v[i] = v[i] < -limit ? -limit - margin : -limit + margin;
    }
}

/* ---- swiglu ---- */

static mt_tensor *build_swiglu_act(mt_ctx *c, mt_tensor **in, void *user) {
    return mt_swiglu_act(c, in[0], in[1], user);
}

static int test_grad_swiglu_oai(void) {
    /* M3's values, then a small limit with another beta (the op does not assume 1) */
    const mt_act acts[2] = {{true, 1.702f, 7.0f, 1.0f}, {true, 1.702f, 1.5f, 0.5f}};
    mt_rng rng;
    mt_rng_seed(&rng, 71);
    for (int k = 0; k < 2; k++) {
        const int64_t shape[2] = {4, 9};
        mt_tensor *g = mt_test_tensor(MT_F32, 2, shape, true, "gate");
        mt_tensor *u = mt_test_tensor(MT_F32, 2, shape, true, "up");
        const float std = 1.2f * acts[k].limit; /* a good share beyond the limits */
        mt_fill_normal(g->data, 36, std, &rng);
        mt_fill_normal(u->data, 36, std, &rng);
        away_from_kinks(g->data, 36, acts[k].limit, 0.05f, false);
        away_from_kinks(u->data, 36, acts[k].limit, 0.05f, true);
        int above = 0, below = 0, u_out = 0;
        for (int i = 0; i < 36; i++) {
            above += ((float *)g->data)[i] > acts[k].limit;
            below += ((float *)g->data)[i] < acts[k].limit;
            u_out += fabsf(((float *)u->data)[i]) > acts[k].limit;
        }
        EXPECT(above > 0 && below > 0 && u_out > 0 && u_out < 36,
               "swiglu_oai case %d: values do not straddle the limits (%d above, %d below, %d up "
               "outside)",
               k, above, below, u_out);
        const mt_gradcheck_opts opts = {.h = 1e-3, .max_elems = 36};
        char label[64];
        snprintf(label, sizeof(label), "swiglu_oai limit %g beta %g", (double)acts[k].limit,
                 (double)acts[k].beta);
        mt_gradcheck(label, build_swiglu_act, (mt_tensor *[]){g, u}, 2, (void *)&acts[k], &opts);
    }
    return MT_TEST_OK;
}

static int test_op_swiglu_oai(void) {
    const mt_act a = {true, 1.702f, 7.0f, 1.0f};
    /* the limits exactly, just beyond them, inside, far outside, NaN */
    const float L = a.limit, Lp = nextafterf(L, 100.0f), Lm = nextafterf(-L, -100.0f);
    const float gv[] = {L, Lp, -L, 3.0f, -20.0f, 30.0f, 0.0f, 1.0f, NAN, 2.0f};
    const float uv[] = {L, -L, Lp, Lm, 0.5f, -30.0f, 30.0f, -1.0f, 1.0f, NAN};
    enum { N = sizeof(gv) / sizeof(gv[0]) };
    mt_tensor *g = mt_test_tensor(MT_F32, 1, (int64_t[]){N}, true, "gate");
    mt_tensor *u = mt_test_tensor(MT_F32, 1, (int64_t[]){N}, true, "up");
    memcpy(g->data, gv, sizeof(gv));
    memcpy(u->data, uv, sizeof(uv));
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *y = mt_swiglu_act(&c, g, u, &a);
    float yref[N], dgref[N], duref[N], seed[N];
    for (int i = 0; i < N; i++) {
        double dg, du;
        yref[i] = (float)ref_oai(gv[i], uv[i], &a);
        ref_oai_grad(gv[i], uv[i], &a, &dg, &du);
        seed[i] = 1.0f + 0.25f * (float)i;
        dgref[i] = (float)(seed[i] * dg);
        duref[i] = (float)(seed[i] * du);
    }
    const float *yd = y->data;
    EXPECT(isnan(yd[8]) && isnan(yd[9]), "swiglu_oai: NaN must pass the clamps, got %g %g",
           (double)yd[8], (double)yd[9]);
    mt_check_close("swiglu_oai forward", yd, yref, N - 2, 0.0, 2e-6);
    mt_backward(&c, y, seed);
    const float *dg = g->grad, *du = u->grad;
    /* the masks: g = L and u = +-L pass, g and u just beyond get exactly 0 */
    EXPECT(dg[0] != 0 && du[0] != 0 && du[1] != 0,
           "swiglu_oai: the gradient must pass at the "
           "limits (dg %g, du %g %g)",
           (double)dg[0], (double)du[0], (double)du[1]);
    EXPECT(dg[1] == 0 && du[2] == 0 && du[3] == 0 && dg[5] == 0 && du[5] == 0 && du[6] == 0,
           "swiglu_oai: beyond the limits the gradient must be exactly 0");
    mt_check_close("swiglu_oai dgate", dg, dgref, N - 2, 1e-7, 2e-6);
    mt_check_close("swiglu_oai dup", du, duref, N - 2, 1e-7, 2e-6);
    mt_ctx_free(&c);

    /* SiLU: act NULL and clamp false are mt_swiglu bit for bit */
    mt_rng rng;
    mt_rng_seed(&rng, 72);
    mt_tensor *g2 = mt_test_tensor(MT_F32, 1, (int64_t[]){64}, false, "gate");
    mt_tensor *u2 = mt_test_tensor(MT_F32, 1, (int64_t[]){64}, false, "up");
    mt_fill_normal(g2->data, 64, 4.0f, &rng);
    mt_fill_normal(u2->data, 64, 4.0f, &rng);
    mt_test_ctx_init(&c);
    const mt_act off = {false, 1.702f, 7.0f, 1.0f};
    mt_tensor *y0 = mt_swiglu(&c, g2, u2), *y1 = mt_swiglu_act(&c, g2, u2, NULL),
              *y2 = mt_swiglu_act(&c, g2, u2, &off);
    EXPECT(memcmp(y0->data, y1->data, 64 * sizeof(float)) == 0 &&
               memcmp(y0->data, y2->data, 64 * sizeof(float)) == 0,
           "swiglu: the SiLU path must not change");
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* ---- the experts ---- */

enum { N = 7, C = 6, F = 5, E = 4, K = 2 };
/* expert 2 is never chosen */
static const int32_t idx_data[N * K] = {0, 1, 3, 0, 1, 3, 0, 3, 3, 1, 1, 0, 0, 1};

typedef struct {
    mt_tensor *idx;
    mt_act act;
} experts_user;

static mt_tensor *build_fused(mt_ctx *c, mt_tensor **in, void *user) {
    experts_user *u = user;
    return mt_moe_experts_act(c, in[0], u->idx, in[1], in[2], in[3], in[4], &u->act);
}

static mt_tensor *expert_slice(mt_ctx *c, mt_tensor *w, int e) {
    mt_tensor *t = mt_arena_alloc(&c->host, sizeof(mt_tensor), "expert slice");
    const int64_t per = w->shape[1] * w->shape[2];
    mt_tensor_wrap(t, MT_F32, 2, (int64_t[]){w->shape[1], w->shape[2]}, (float *)w->data + e * per,
                   w->grad ? (float *)w->grad + e * per : NULL, w->name);
    return t;
}

static mt_tensor *build_split(mt_ctx *c, mt_tensor **in, void *user) {
    experts_user *u = user;
    mt_moe_plan plan;
    mt_tensor *xs = mt_moe_dispatch(c, in[0], u->idx, E, &plan);
    mt_tensor *ys = mt_moe_expert_out(c, &plan, C);
    for (int e = 0; e < E; e++)
        mt_moe_expert_ffn_act(c, xs, &plan, in[1], e, expert_slice(c, in[2], e),
                              expert_slice(c, in[3], e), expert_slice(c, in[4], e), ys, &u->act);
    return mt_moe_combine(c, ys, &plan);
}

/* The chosen experts' pre-activations w1_e x_n and w3_e x_n in double: *gap gets the smallest
 * distance to a kink; the counts of gates above the limit and of ups outside it. */
static void experts_preacts(mt_tensor **in, float limit, double *gap, int *g_above, int *u_out) {
    const float *x = in[0]->data, *w1 = in[2]->data, *w3 = in[3]->data;
    *gap = INFINITY;
    *g_above = *u_out = 0;
    for (int n = 0; n < N; n++)
        for (int j = 0; j < K; j++)
            for (int f = 0; f < F; f++) {
                const int e = idx_data[n * K + j];
                double a = 0, b = 0;
                for (int k = 0; k < C; k++) {
                    a += (double)w1[(e * F + f) * C + k] * x[n * C + k];
                    b += (double)w3[(e * F + f) * C + k] * x[n * C + k];
                }
                *gap = fmin(*gap, fmin(fabs(a - limit), fmin(fabs(b - limit), fabs(b + limit))));
                *g_above += a > limit;
                *u_out += fabs(b) > limit;
            }
}

/* Inputs whose pre-activations straddle a small limit, each at least 0.01 from a kink: the
 * limit is the first of a few candidates that leaves that gap. */
static void experts_inputs(mt_tensor **in, mt_tensor **idx, experts_user *u) {
    mt_rng rng;
    mt_rng_seed(&rng, 73);
    *idx = mt_test_tensor(MT_I32, 2, (int64_t[]){N, K}, false, "idx");
    memcpy((*idx)->data, idx_data, sizeof(idx_data));
    in[0] = mt_test_tensor(MT_F32, 2, (int64_t[]){N, C}, true, "x");
    in[1] = mt_test_tensor(MT_F32, 2, (int64_t[]){N, K}, true, "weight");
    in[2] = mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w1");
    in[3] = mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w3");
    in[4] = mt_test_tensor(MT_F32, 3, (int64_t[]){E, C, F}, true, "w2");
    mt_fill_normal(in[0]->data, N * C, 1.0f, &rng);
    mt_fill_uniform(in[1]->data, N * K, 0.1f, 1.0f, &rng);
    mt_fill_normal(in[2]->data, E * F * C, 0.6f, &rng);
    mt_fill_normal(in[3]->data, E * F * C, 0.6f, &rng);
    mt_fill_normal(in[4]->data, E * C * F, 0.5f, &rng);
    u->idx = *idx;
    u->act = (mt_act){true, 1.702f, 0.0f, 1.0f};
    double gap = 0;
    int above = 0, out = 0;
    for (int t = 0; t < 200 && !(gap >= 0.01); t++) {
        u->act.limit = 0.6f + 0.0037f * (float)t;
        experts_preacts(in, u->act.limit, &gap, &above, &out);
    }
    EXPECT(gap >= 0.01 && above > 0 && out > 0,
           "moe_experts_oai: no limit leaves a 0.01 gap to the kinks with values on both sides "
           "(gap %g, %d gates above, %d ups outside)",
           gap, above, out);
}

static int test_grad_moe_experts_oai(void) {
    mt_tensor *in[5], *idx;
    experts_user u;
    experts_inputs(in, &idx, &u);
    /* steps h and 2h = 2e-3 move a pre-activation by at most 2e-3 max(|w|, |x|) < 0.01 */
    const mt_gradcheck_opts opts = {.h = 1e-3, .max_elems = 48};
    mt_gradcheck("moe_experts swigluoai", build_fused, in, 5, &u, &opts);
    mt_gradcheck("moe_expert_ffn swigluoai", build_split, in, 5, &u, &opts);
    return MT_TEST_OK;
}

/* The fused op against the formula on every token (double), and the split op against the
 * fused one: the same products in the same order, so the same bits. */
static int test_op_moe_experts_oai(void) {
    mt_tensor *in[5], *idx;
    experts_user u;
    experts_inputs(in, &idx, &u);
    const float *x = in[0]->data, *wt = in[1]->data, *w1 = in[2]->data, *w3 = in[3]->data,
                *w2 = in[4]->data;
    float ref[N * C];
    double scale = 0;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double o = 0;
            for (int j = 0; j < K; j++) {
                const int e = idx_data[n * K + j];
                double y = 0;
                for (int f = 0; f < F; f++) {
                    double a = 0, b = 0;
                    for (int k = 0; k < C; k++) {
                        a += (double)w1[(e * F + f) * C + k] * x[n * C + k];
                        b += (double)w3[(e * F + f) * C + k] * x[n * C + k];
                    }
                    y += (double)w2[(e * C + c) * F + f] * ref_oai(a, b, &u.act);
                }
                o += wt[n * K + j] * y;
            }
            ref[n * C + c] = (float)o;
            scale = fmax(scale, fabs(o));
        }
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *fused = build_fused(&c, in, &u), *split = build_split(&c, in, &u);
    mt_check_close("moe_experts swigluoai vs formula", fused->data, ref, N * C, 1e-6 * scale, 1e-5);
    EXPECT(memcmp(fused->data, split->data, sizeof(ref)) == 0,
           "moe_expert_ffn swigluoai: the split experts must equal the fused op bit for bit");
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"grad_swiglu_oai", test_grad_swiglu_oai},
    {"op_swiglu_oai", test_op_swiglu_oai},
    {"grad_moe_experts_oai", test_grad_moe_experts_oai},
    {"op_moe_experts_oai", test_op_moe_experts_oai},
};
MT_TEST_MAIN(cases)
