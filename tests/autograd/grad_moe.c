/* grad_moe.c: the MoE ops. Gradients against finite differences (router, experts, aux), the
 * sparse dispatch against a dense double evaluation written here, the aux loss against HF's
 * load_balancing_loss_func formula (value, and gradient with the top-k selection frozen as
 * torch does), and the router's documented tie rule. */
#include "tests/support/harness.h"
#include "kernels/cpu/moe.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- independent references (double) ---- */

static void ref_softmax(const float *l, int E, double *p) {
    double mx = l[0], sum = 0;
    for (int e = 1; e < E; e++) mx = fmax(mx, l[e]);
    for (int e = 0; e < E; e++) sum += exp((double)l[e] - mx);
    for (int e = 0; e < E; e++) p[e] = exp((double)l[e] - mx) / sum;
}

/* The K largest by insertion sort on (p descending, index ascending). */
static void ref_topk(const double *p, int E, int K, int *sel) {
    int order[64];
    MT_CHECK(E <= 64, "test: E = %d too large", E);
    for (int e = 0; e < E; e++) {
        int i = e;
        while (i > 0 && p[order[i - 1]] < p[e]) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = e;
    }
    for (int j = 0; j < K; j++) sel[j] = order[j];
}

/* Every expert on every token, weighted by the zero-filled (N,E) gate. */
static void ref_experts_dense(const float *x, const int32_t *idx, const float *weight,
                              const float *w1, const float *w3, const float *w2, int64_t N,
                              int64_t C, int64_t F, int E, int K, float *out) {
    double *g = calloc((size_t)F, sizeof(double)), *o = calloc((size_t)C, sizeof(double));
    for (int64_t n = 0; n < N; n++) {
        memset(o, 0, sizeof(double) * (size_t)C);
        for (int e = 0; e < E; e++) {
            double gate = 0;
            for (int j = 0; j < K; j++)
                if (idx[n * K + j] == e) gate += weight[n * K + j];
            for (int64_t f = 0; f < F; f++) {
                double a = 0, b = 0;
                for (int64_t c = 0; c < C; c++) {
                    a += (double)w1[(e * F + f) * C + c] * x[n * C + c];
                    b += (double)w3[(e * F + f) * C + c] * x[n * C + c];
                }
                g[f] = a / (1.0 + exp(-a)) * b;
            }
            for (int64_t c = 0; c < C; c++) {
                double y = 0;
                for (int64_t f = 0; f < F; f++) y += (double)w2[(e * C + c) * F + f] * g[f];
                o[c] += gate * y;
            }
        }
        for (int64_t c = 0; c < C; c++) out[n * C + c] = (float)o[c];
    }
    free(g);
    free(o);
}

static double max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

/* ---- router ---- */

/* Logits whose sorted values are at least min_gap apart, in a random expert order: a finite
 * difference step that moves one logit by less than min_gap / 2 cannot change the selection
 * or its order. */
static void route_logits_separated(float *l, int64_t N, int E, float min_gap, mt_rng *rng) {
    for (int64_t n = 0; n < N; n++) {
        int perm[64];
        for (int e = 0; e < E; e++) perm[e] = e;
        for (int e = E - 1; e > 0; e--) {
            int r = (int)(mt_rng_u64(rng) % (uint64_t)(e + 1)), t = perm[e];
            perm[e] = perm[r];
            perm[r] = t;
        }
        float v = mt_rng_normal(rng);
        for (int i = 0; i < E; i++) {
            l[n * E + perm[i]] = v;
            v -= min_gap + 0.5f * mt_rng_uniform(rng);
        }
    }
}

/* The smallest gap between neighbours among the K+1 largest logits of any row. */
static double route_min_margin(const float *l, int64_t N, int E, int K) {
    double m = INFINITY;
    for (int64_t n = 0; n < N; n++) {
        double p[64];
        int sel[64];
        for (int e = 0; e < E; e++) p[e] = l[n * E + e];
        int top = K < E ? K + 1 : K;
        ref_topk(p, E, top, sel);
        for (int j = 0; j + 1 < top; j++) m = fmin(m, p[sel[j]] - p[sel[j + 1]]);
    }
    return m;
}

typedef struct {
    int K;
    const int32_t *ref_idx; /* the selection at the unperturbed point */
    int64_t n_idx;
    int flips;
} route_user;

static mt_tensor *build_route(mt_ctx *c, mt_tensor **in, void *user) {
    route_user *u = user;
    mt_tensor *idx;
    mt_tensor *w = mt_moe_route(c, in[0], u->K, &idx);
    if (u->ref_idx && memcmp(idx->data, u->ref_idx, sizeof(int32_t) * (size_t)u->n_idx) != 0)
        u->flips++;
    return w;
}

static void route_case(int64_t N, int E, int K, uint64_t seed) {
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    mt_tensor *logits = mt_test_tensor(MT_F32, 2, (int64_t[]){N, E}, true, "logits");
    float *l = logits->data;
    route_logits_separated(l, N, E, 0.25f, &rng);
    const double h = 1e-2; /* the gradcheck default; it also steps by 2h */
    double margin = route_min_margin(l, N, E, K);
    EXPECT(margin > 4 * h, "route logits margin %g must exceed 4h = %g", margin, 4 * h);

    /* forward against the double reference */
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_ctx_set_grad(&c, false);
    mt_tensor *idx;
    mt_tensor *w = mt_moe_route(&c, logits, K, &idx);
    float *wref = malloc(sizeof(float) * (size_t)(N * K));
    int32_t *idx0 = malloc(sizeof(int32_t) * (size_t)(N * K));
    memcpy(idx0, idx->data, sizeof(int32_t) * (size_t)(N * K));
    int idx_bad = 0;
    for (int64_t n = 0; n < N; n++) {
        double p[64], s = 0;
        int sel[64];
        ref_softmax(l + n * E, E, p);
        ref_topk(p, E, K, sel);
        for (int j = 0; j < K; j++) s += p[sel[j]];
        for (int j = 0; j < K; j++) {
            wref[n * K + j] = (float)(p[sel[j]] / s);
            idx_bad += idx0[n * K + j] != sel[j];
        }
    }
    EXPECT(idx_bad == 0, "route N=%lld E=%d K=%d: %d chosen experts differ from the reference",
           (long long)N, E, K, idx_bad);
    /* fp32 p rounded once, w rounded once: a few ulp */
    mt_check_close("route weights", w->data, wref, N * K, 0, 1e-6);
    mt_ctx_free(&c);

    route_user u = {.K = K, .ref_idx = idx0, .n_idx = N * K, .flips = 0};
    mt_gradcheck_opts opts = {.h = h, .max_elems = 64};
    mt_gradcheck("moe_route", build_route, &logits, 1, &u, &opts);
    EXPECT(u.flips == 0, "route: %d finite-difference evaluations changed the selection", u.flips);
    free(wref);
    free(idx0);
}

static int test_grad_moe_route(void) {
    route_case(6, 8, 2, 11);
    route_case(5, 6, 3, 12);
    route_case(4, 4, 1, 13);
    return MT_TEST_OK;
}

static int test_op_moe_route_ties(void) {
    /* Rule: descending probability, equal probabilities go to the lower expert index. */
    const int E = 5;
    const float rows[5][5] = {
        {0, 0, 0, 0, 0}, {1, 3, 3, 0, 3}, {5, 2, 2, 2, 1}, {2, 2, 1, 2, 0}, {-1, 4, 0, 4, 4},
    };
    const int want2[5][2] = {{0, 1}, {1, 2}, {0, 1}, {0, 1}, {1, 3}};
    const int want3[5][3] = {{0, 1, 2}, {1, 2, 4}, {0, 1, 2}, {0, 1, 3}, {1, 3, 4}};
    mt_tensor *logits = mt_test_tensor(MT_F32, 2, (int64_t[]){5, E}, false, "logits");
    memcpy(logits->data, rows, sizeof(rows));
    mt_ctx c;
    mt_test_ctx_init(&c);
    for (int K = 2; K <= 3; K++) {
        mt_tensor *idx;
        mt_tensor *w = mt_moe_route(&c, logits, K, &idx);
        const int32_t *got = idx->data;
        const float *wd = w->data;
        for (int n = 0; n < 5; n++) {
            for (int j = 0; j < K; j++) {
                int want = K == 2 ? want2[n][j] : want3[n][j];
                EXPECT(got[n * K + j] == want, "K=%d row %d slot %d: expert %d, want %d", K, n, j,
                       got[n * K + j], want);
            }
            /* renormalised weights: positive, descending, sum 1 */
            double s = 0;
            for (int j = 0; j < K; j++) s += wd[n * K + j];
            EXPECT(fabs(s - 1) <= 4 * FLT_EPSILON, "K=%d row %d: weights sum to %.9g", K, n, s);
            for (int j = 1; j < K; j++)
                EXPECT(wd[n * K + j] <= wd[n * K + j - 1], "K=%d row %d: weights not descending", K,
                       n);
        }
        /* all-equal row: exactly 1/K each */
        for (int j = 0; j < K; j++)
            EXPECT(wd[j] == (float)(1.0 / K), "K=%d all-equal row: weight %.9g", K, wd[j]);
    }
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* ---- experts ---- */

typedef struct {
    mt_tensor *idx;
} experts_user;

static mt_tensor *build_experts(mt_ctx *c, mt_tensor **in, void *user) {
    experts_user *u = user;
    return mt_moe_experts(c, in[0], u->idx, in[1], in[2], in[3], in[4]);
}

static int test_grad_moe_experts(void) {
    enum { N = 7, C = 6, F = 5, E = 4, K = 2 };
    /* expert 2 is never chosen */
    const int32_t idx_data[N * K] = {0, 1, 3, 0, 1, 3, 0, 3, 3, 1, 1, 0, 0, 1};
    mt_rng rng;
    mt_rng_seed(&rng, 21);
    mt_tensor *idx = mt_test_tensor(MT_I32, 2, (int64_t[]){N, K}, false, "idx");
    memcpy(idx->data, idx_data, sizeof(idx_data));
    mt_tensor *x = mt_test_tensor(MT_F32, 2, (int64_t[]){N, C}, true, "x");
    mt_tensor *wt = mt_test_tensor(MT_F32, 2, (int64_t[]){N, K}, true, "weight");
    mt_tensor *w1 = mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w1");
    mt_tensor *w3 = mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w3");
    mt_tensor *w2 = mt_test_tensor(MT_F32, 3, (int64_t[]){E, C, F}, true, "w2");
    mt_fill_normal(x->data, N * C, 1.0f, &rng);
    mt_fill_uniform(wt->data, N * K, 0.1f, 1.0f, &rng);
    mt_fill_normal(w1->data, E * F * C, 0.5f, &rng);
    mt_fill_normal(w3->data, E * F * C, 0.5f, &rng);
    mt_fill_normal(w2->data, E * C * F, 0.5f, &rng);
    mt_tensor *in[5] = {x, wt, w1, w3, w2};
    experts_user u = {idx};

    /* all gradients, then subsets (the kernel skips the products nobody needs) */
    mt_gradcheck("moe_experts all", build_experts, in, 5, &u, NULL);
    const int subsets[3][5] = {{0, 1, 0, 0, 1}, {1, 0, 0, 0, 0}, {0, 0, 1, 1, 0}};
    const char *names[3] = {"moe_experts weight,w2", "moe_experts x", "moe_experts w1,w3"};
    mt_gradcheck_subsets(names, 3, &subsets[0][0], build_experts, in, 5, &u);

    /* the zero-token expert: output equals the dense evaluation, its gradients are exactly 0 */
    mt_ctx c;
    mt_test_ctx_init(&c);
    for (int i = 0; i < 5; i++) memset(in[i]->grad, 0, mt_nbytes(in[i]));
    mt_tensor *out = mt_moe_experts(&c, x, idx, wt, w1, w3, w2);
    float ref[N * C], seed[N * C];
    ref_experts_dense(x->data, idx_data, wt->data, w1->data, w3->data, w2->data, N, C, F, E, K,
                      ref);
    mt_check_close("experts vs dense", out->data, ref, N * C, 1e-5 * max_abs(ref, N * C), 1e-5);
    mt_fill_normal(seed, N * C, 1.0f, &rng);
    mt_backward(&c, out, seed);
    const float *g1 = w1->grad, *g3 = w3->grad, *g2 = w2->grad;
    int nonzero_e2 = 0;
    double norm_e0 = 0;
    for (int i = 0; i < F * C; i++) {
        nonzero_e2 += g1[2 * F * C + i] != 0.0f;
        nonzero_e2 += g3[2 * F * C + i] != 0.0f;
        nonzero_e2 += g2[2 * C * F + i] != 0.0f;
        norm_e0 += fabs(g1[i]) + fabs(g3[i]) + fabs(g2[i]);
    }
    EXPECT(nonzero_e2 == 0, "expert 2 has no tokens but %d of its gradients are not 0.0",
           nonzero_e2);
    EXPECT(norm_e0 > 0, "expert 0 has tokens but a zero gradient");

    /* NaN weights in the unused expert must not reach the output: it is never computed */
    float *w1d = w1->data, *w3d = w3->data, *w2d = w2->data;
    float keep[3];
    keep[0] = w1d[2 * F * C], keep[1] = w3d[2 * F * C], keep[2] = w2d[2 * C * F];
    w1d[2 * F * C] = w3d[2 * F * C] = w2d[2 * C * F] = NAN;
    mt_ctx_reset(&c);
    mt_tensor *out2 = mt_moe_experts(&c, x, idx, wt, w1, w3, w2);
    EXPECT(memcmp(out2->data, out->data, sizeof(ref)) == 0,
           "NaN weights of the token-less expert changed the output");
    w1d[2 * F * C] = keep[0], w3d[2 * F * C] = keep[1], w2d[2 * C * F] = keep[2];
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* Sparse dispatch vs the dense double evaluation; with and without saved activations. */
static void dense_vs_sparse_case(const char *label, int64_t N, int64_t C, int64_t F, int E, int K,
                                 const int32_t *fixed_idx, uint64_t seed) {
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    mt_tensor *x = mt_test_tensor(MT_F32, 2, (int64_t[]){N, C}, false, "x");
    mt_tensor *w1 = mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w1");
    mt_tensor *w3 = mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, false, "w3");
    mt_tensor *w2 = mt_test_tensor(MT_F32, 3, (int64_t[]){E, C, F}, false, "w2");
    mt_tensor *logits = mt_test_tensor(MT_F32, 2, (int64_t[]){N, E}, false, "logits");
    mt_fill_normal(x->data, N * C, 1.0f, &rng);
    mt_fill_normal(w1->data, E * F * C, 1.0f / sqrtf((float)C), &rng);
    mt_fill_normal(w3->data, E * F * C, 1.0f / sqrtf((float)C), &rng);
    mt_fill_normal(w2->data, E * C * F, 1.0f / sqrtf((float)F), &rng);
    mt_fill_normal(logits->data, N * E, 1.5f, &rng);
    float *l = logits->data;
    for (int64_t n = 0; n < N; n++) l[n * E + E - 1] = -30.0f; /* the last expert gets no token */

    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_ctx_set_grad(&c, false);
    mt_tensor *idx;
    mt_tensor *wt = mt_moe_route(&c, logits, K, &idx);
    if (fixed_idx) memcpy(idx->data, fixed_idx, sizeof(int32_t) * (size_t)(N * K));
    const int32_t *id = idx->data;
    int64_t last = 0;
    for (int64_t a = 0; a < N * K; a++) last += id[a] == E - 1;
    EXPECT(last == 0, "%s: expert %d should receive no token, got %lld", label, E - 1,
           (long long)last);

    mt_tensor *out_ng = mt_moe_experts(&c, x, idx, wt, w1, w3, w2); /* h in scratch */
    mt_ctx_set_grad(&c, true);
    mt_tensor *out_g = mt_moe_experts(&c, x, idx, wt, w1, w3, w2); /* h saved */
    EXPECT(out_g->requires_grad, "%s: output should require a gradient", label);
    EXPECT(memcmp(out_ng->data, out_g->data, mt_nbytes(out_g)) == 0,
           "%s: grad and no-grad forwards differ", label);

    float *ref = malloc(mt_nbytes(out_g));
    ref_experts_dense(x->data, id, wt->data, w1->data, w3->data, w2->data, N, C, F, E, K, ref);
    char buf[96];
    snprintf(buf, sizeof(buf), "%s sparse vs dense", label);
    mt_check_close(buf, out_g->data, ref, N * C, 1e-5 * max_abs(ref, N * C), 1e-5);
    mt_check_rel_l2(buf, out_g->data, ref, N * C, 1e-5);
    free(ref);
    mt_ctx_free(&c);
}

static int test_op_moe_dense_vs_sparse(void) {
    dense_vs_sparse_case("K=1", 48, 24, 40, 8, 1, NULL, 31);
    dense_vs_sparse_case("K=2", 64, 24, 40, 8, 2, NULL, 32);
    dense_vs_sparse_case("K=3", 33, 16, 20, 6, 3, NULL, 33);
    /* a token that names the same expert twice: both assignments count */
    const int32_t dup[4 * 2] = {1, 1, 0, 2, 2, 2, 3, 0};
    dense_vs_sparse_case("repeated expert", 4, 8, 12, 5, 2, dup, 34);
    return MT_TEST_OK;
}

/* ---- aux loss ---- */

static mt_tensor *build_aux(mt_ctx *c, mt_tensor **in, void *user) {
    return mt_moe_aux(c, in[0], (mt_tensor *)user);
}

static int test_grad_moe_aux(void) {
    enum { N = 9, E = 6 };
    mt_rng rng;
    mt_rng_seed(&rng, 41);
    mt_tensor *logits = mt_test_tensor(MT_F32, 2, (int64_t[]){N, E}, true, "logits");
    mt_tensor *coef = mt_test_tensor(MT_F32, 1, (int64_t[]){E}, false, "coef");
    mt_fill_normal(logits->data, N * E, 1.5f, &rng);
    const int64_t count[E] = {5, 0, 3, 6, 2, 2};
    mt_moe_aux_coef(coef->data, count, E, N);
    mt_gradcheck("moe_aux", build_aux, &logits, 1, coef, NULL);
    return MT_TEST_OK;
}

/* HF's load_balancing_loss_func over all layers' rows concatenated, with the selection sel
 * (R,K) frozen: E * sum_{k,e} f[k,e] * Pbar[e]. */
static double ref_hf_aux(const double *logits, const int *sel, int64_t R, int E, int K) {
    double f[8][16] = {{0}}, pbar[16] = {0};
    MT_CHECK(K <= 8 && E <= 16, "test: K=%d E=%d too large", K, E);
    for (int64_t r = 0; r < R; r++) {
        const double *l = logits + r * E;
        double mx = l[0], sum = 0;
        for (int e = 1; e < E; e++) mx = fmax(mx, l[e]);
        for (int e = 0; e < E; e++) sum += exp(l[e] - mx);
        for (int e = 0; e < E; e++) pbar[e] += exp(l[e] - mx) / sum / (double)R;
        for (int k = 0; k < K; k++) f[k][sel[r * K + k]] += 1.0 / (double)R;
    }
    double aux = 0;
    for (int k = 0; k < K; k++)
        for (int e = 0; e < E; e++) aux += f[k][e] * pbar[e];
    return E * aux;
}

static int test_op_moe_aux_hf_formula(void) {
    enum { L = 3, N = 10, E = 8, K = 2, R = L * N };
    mt_rng rng;
    mt_rng_seed(&rng, 51);
    mt_tensor *logits[L];
    for (int i = 0; i < L; i++) {
        logits[i] = mt_test_tensor(MT_F32, 2, (int64_t[]){N, E}, true, "logits");
        mt_fill_normal(logits[i]->data, N * E, 2.0f, &rng);
    }
    /* pass 1: routing, counts over every layer's rows */
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_ctx_set_grad(&c, false);
    int64_t count[E] = {0};
    int sel_route[R * K];
    for (int i = 0; i < L; i++) {
        mt_tensor *idx;
        mt_moe_route(&c, logits[i], K, &idx);
        const int32_t *id = idx->data;
        for (int a = 0; a < N * K; a++) {
            count[id[a]]++;
            sel_route[i * N * K + a] = id[a];
        }
    }
    mt_ctx_set_grad(&c, true);
    mt_tensor *coef = mt_test_tensor(MT_F32, 1, (int64_t[]){E}, false, "coef");
    mt_moe_aux_coef(coef->data, count, E, R);

    /* pass 2: the per-layer aux terms and their gradients */
    double aux = 0;
    for (int i = 0; i < L; i++) {
        mt_ctx_reset(&c);
        mt_tensor *a = mt_moe_aux(&c, logits[i], coef);
        aux += ((const float *)a->data)[0];
        mt_backward(&c, a, NULL);
    }
    mt_ctx_free(&c);

    /* reference: concatenated rows, HF's own top-k of the probabilities */
    double *lall = malloc(sizeof(double) * R * E);
    int sel[R * K];
    for (int i = 0; i < L; i++)
        for (int j = 0; j < N * E; j++) lall[i * N * E + j] = ((const float *)logits[i]->data)[j];
    for (int r = 0; r < R; r++) {
        float lf[E];
        double p[E];
        for (int e = 0; e < E; e++) lf[e] = (float)lall[r * E + e];
        ref_softmax(lf, E, p);
        ref_topk(p, E, K, sel + r * K);
    }
    EXPECT(memcmp(sel, sel_route, sizeof(sel)) == 0, "router selection differs from HF top-k");
    double want = ref_hf_aux(lall, sel, R, E, K);
    /* coef and each layer's value are rounded to fp32 once; the rest is double */
    printf("  aux: sum over layers %.9g, HF formula %.9g\n", aux, want);
    EXPECT(fabs(aux - want) <= 1e-6 * fabs(want), "aux %.9g vs HF %.9g", aux, want);

    /* gradient: central differences of the HF formula in double with sel frozen (topk indices
     * carry no gradient in torch) */
    float *fd = malloc(sizeof(float) * R * E), *an = malloc(sizeof(float) * R * E);
    const double h = 1e-5;
    for (int j = 0; j < R * E; j++) {
        double x0 = lall[j];
        lall[j] = x0 + h;
        double lp = ref_hf_aux(lall, sel, R, E, K);
        lall[j] = x0 - h;
        double lm = ref_hf_aux(lall, sel, R, E, K);
        lall[j] = x0;
        fd[j] = (float)((lp - lm) / (2 * h));
        an[j] = ((const float *)logits[j / (N * E)]->grad)[j % (N * E)];
    }
    mt_check_close("aux grad vs HF (fd)", an, fd, R * E, 1e-5 * max_abs(fd, R * E), 1e-5);
    free(lall);
    free(fd);
    free(an);
    return MT_TEST_OK;
}

/* ---- the sigmoid router (MiniMax-M2) ---- */

typedef struct {
    int K;
    float scale;
    mt_tensor *bias;
    const int32_t *ref_idx;
    int64_t n_idx;
    int flips;
} sroute_user;

static mt_tensor *build_sroute(mt_ctx *c, mt_tensor **in, void *user) {
    sroute_user *u = user;
    mt_tensor *idx;
    mt_tensor *w = mt_moe_route_sigmoid(c, in[0], u->bias, u->K, u->scale, &idx);
    if (u->ref_idx && memcmp(idx->data, u->ref_idx, sizeof(int32_t) * (size_t)u->n_idx) != 0)
        u->flips++;
    return w;
}

/* Forward against a double reference (the bias chooses, the unbiased scores weight), then
 * finite differences of the weights w.r.t. the logits. The bias is drawn until it changes the
 * choice of some row and every row's K-th and (K+1)-th biased scores stay apart by more than
 * a finite-difference step can move them (h * max sigmoid' = h / 4, with room). */
static void sroute_case(int64_t N, int E, int K, float scale, uint64_t seed) {
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    mt_tensor *logits = mt_test_tensor(MT_F32, 2, (int64_t[]){N, E}, true, "logits");
    mt_tensor *bias = mt_test_tensor(MT_F32, 1, (int64_t[]){E}, false, "bias");
    float *l = logits->data, *bb = bias->data;
    const double h = 1e-2;
    int changed = 0;
    double margin = 0;
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)(N * K));
    for (int attempt = 0; attempt < 100 && (changed == 0 || margin <= h); attempt++) {
        for (int64_t i = 0; i < N * E; i++) l[i] = 1.5f * mt_rng_normal(&rng);
        for (int e = 0; e < E; e++) bb[e] = 0.15f * mt_rng_normal(&rng);
        changed = 0;
        margin = INFINITY;
        for (int64_t n = 0; n < N; n++) {
            double v[64], s[64];
            int o[64], u[64];
            for (int e = 0; e < E; e++) {
                s[e] = 1 / (1 + exp(-(double)l[n * E + e]));
                v[e] = s[e] + bb[e];
            }
            ref_topk(v, E, K < E ? K + 1 : K, o);
            ref_topk(s, E, K, u);
            if (K < E) margin = fmin(margin, v[o[K - 1]] - v[o[K]]);
            for (int j = 0; j < K; j++) {
                sel[n * K + j] = o[j];
                bool in_u = false;
                for (int i = 0; i < K; i++) in_u = in_u || u[i] == o[j];
                changed += !in_u;
            }
        }
    }
    EXPECT(changed > 0 && margin > h, "sroute: no bias that changes a choice with margin %g",
           margin);

    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_ctx_set_grad(&c, false);
    mt_tensor *idx;
    mt_tensor *w = mt_moe_route_sigmoid(&c, logits, bias, K, scale, &idx);
    float *wref = malloc(sizeof(float) * (size_t)(N * K));
    int idx_bad = 0;
    for (int64_t n = 0; n < N; n++) {
        double S = 0;
        for (int j = 0; j < K; j++) S += 1 / (1 + exp(-(double)l[n * E + sel[n * K + j]]));
        for (int j = 0; j < K; j++) {
            double sj = 1 / (1 + exp(-(double)l[n * E + sel[n * K + j]]));
            wref[n * K + j] = (float)(scale * sj / S);
            idx_bad += ((const int32_t *)idx->data)[n * K + j] != sel[n * K + j];
        }
    }
    EXPECT(idx_bad == 0, "sroute N=%lld E=%d K=%d: %d chosen experts differ from the reference",
           (long long)N, E, K, idx_bad);
    mt_check_close("sroute weights", w->data, wref, N * K, 0, 1e-6);
    mt_ctx_free(&c);

    sroute_user u = {.K = K, .scale = scale, .bias = bias, .ref_idx = sel, .n_idx = N * K};
    mt_gradcheck_opts opts = {.h = h, .max_elems = 64};
    mt_gradcheck("moe_route_sigmoid", build_sroute, &logits, 1, &u, &opts);
    EXPECT(u.flips == 0, "sroute: %d finite-difference evaluations changed the selection", u.flips);
    free(wref);
    free(sel);
}

/* MiniMax-M2's MoE shape: 256 experts top-8 behind the sigmoid router with a correction bias,
 * through the fixed-order expert loop: the output equals the dense double evaluation, and
 * after a backward every expert no token chose (173 of the 256 here) has exactly zero
 * gradients while every chosen one has some. */
static int test_op_moe_m2_shape(void) {
    enum { N = 40, C = 16, F = 8, E = 256, K = 8 };
    mt_rng rng;
    mt_rng_seed(&rng, 35);
    mt_tensor *x = mt_test_tensor(MT_F32, 2, (int64_t[]){N, C}, true, "x");
    mt_tensor *w[3] = {mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w1"),
                       mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w3"),
                       mt_test_tensor(MT_F32, 3, (int64_t[]){E, C, F}, true, "w2")};
    mt_tensor *logits = mt_test_tensor(MT_F32, 2, (int64_t[]){N, E}, true, "logits");
    mt_tensor *bias = mt_test_tensor(MT_F32, 1, (int64_t[]){E}, false, "bias");
    mt_fill_normal(x->data, N * C, 1.0f, &rng);
    for (int i = 0; i < 3; i++) mt_fill_normal(w[i]->data, E * F * C, 0.25f, &rng);
    mt_fill_normal(logits->data, N * E, 1.5f, &rng);
    mt_fill_normal(bias->data, E, 0.1f, &rng);

    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *idx;
    mt_tensor *wt = mt_moe_route_sigmoid(&c, logits, bias, K, 1.0f, &idx);
    mt_tensor *out = mt_moe_experts(&c, x, idx, wt, w[0], w[1], w[2]);
    float *ref = malloc(sizeof(float) * N * C), *seed = malloc(sizeof(float) * N * C);
    ref_experts_dense(x->data, idx->data, wt->data, w[0]->data, w[1]->data, w[2]->data, N, C, F, E,
                      K, ref);
    mt_check_close("M2 shape sparse vs dense", out->data, ref, N * C, 1e-5 * max_abs(ref, N * C),
                   1e-5);
    mt_fill_normal(seed, N * C, 1.0f, &rng);
    mt_backward(&c, out, seed);
    bool chosen[E] = {false};
    for (int a = 0; a < N * K; a++) chosen[((const int32_t *)idx->data)[a]] = true;
    int idle = 0, wrong = 0;
    for (int e = 0; e < E; e++) {
        double g = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < F * C; j++) g += fabs(((const float *)w[i]->grad)[e * F * C + j]);
        idle += !chosen[e];
        wrong += chosen[e] ? g == 0 : g != 0;
    }
    printf("  E=%d K=%d: %d experts without a token, %d with a wrong zero/non-zero gradient\n", E,
           K, idle, wrong);
    EXPECT(idle > 0 && wrong == 0, "%d idle experts, %d gradients wrong", idle, wrong);
    free(ref);
    free(seed);
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

static int test_grad_moe_route_sigmoid(void) {
    sroute_case(6, 8, 2, 1.0f, 21);
    sroute_case(5, 16, 4, 2.5f, 22); /* 16 experts top-4, a routed scaling factor */
    sroute_case(4, 5, 1, 1.0f, 23);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"grad_moe_route_sigmoid", test_grad_moe_route_sigmoid},
    {"grad_moe_route", test_grad_moe_route},
    {"grad_moe_experts", test_grad_moe_experts},
    {"grad_moe_aux", test_grad_moe_aux},
    {"op_moe_dense_vs_sparse", test_op_moe_dense_vs_sparse},
    {"op_moe_aux_hf_formula", test_op_moe_aux_hf_formula},
    {"op_moe_route_ties", test_op_moe_route_ties},
    {"op_moe_m2_shape", test_op_moe_m2_shape},
};
MT_TEST_MAIN(cases)
