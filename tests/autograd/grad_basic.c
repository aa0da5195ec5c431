/* grad_basic.c: the basic ops (embedding, matmul, rmsnorm, pointwise, cross-entropy).
 * grad_*: every backward against finite differences (mt_gradcheck), including N = 1 shapes.
 * op_*_forward: forwards against a straightforward double-precision computation written here,
 * and the error paths for bad ids / labels. */
#include "tests/support/harness.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* helpers */

static mt_tensor *test_f32(int ndim, const int64_t *shape, bool grad, const char *name, float std,
                           mt_rng *rng) {
    mt_tensor *t = mt_test_tensor(MT_F32, ndim, shape, grad, name);
    mt_fill_normal(t->data, mt_numel(t), std, rng);
    return t;
}

/* The backward ACCUMULATES: a second mt_backward over the same tape (the seed overwrites the
 * output's gradient) must leave exactly twice the first gradient in every input, up to the
 * rounding of BLAS's blocked beta = 1 updates. */
static void check_accumulates(const char *label, mt_gradcheck_build build, mt_tensor **in, int n_in,
                              void *user) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    for (int i = 0; i < n_in; i++)
        if (in[i]->grad) memset(in[i]->grad, 0, mt_nbytes(in[i]));
    mt_tensor *out = build(&c, in, user);
    int64_t n_out = mt_numel(out);
    float *seed = mt_malloc(sizeof(float) * (size_t)n_out, "seed");
    mt_rng rng;
    mt_rng_seed(&rng, 99);
    mt_fill_normal(seed, n_out, 1.0f, &rng);
    mt_backward(&c, out, seed);
    float *twice[MT_MAX_IN] = {0};
    double gmax[MT_MAX_IN] = {0};
    for (int i = 0; i < n_in; i++) {
        if (!in[i]->grad) continue;
        int64_t n = mt_numel(in[i]);
        twice[i] = mt_malloc(sizeof(float) * (size_t)n, "twice");
        for (int64_t j = 0; j < n; j++) {
            twice[i][j] = 2.0f * ((const float *)in[i]->grad)[j];
            gmax[i] = fmax(gmax[i], fabs(twice[i][j]));
        }
    }
    mt_backward(&c, out, seed);
    for (int i = 0; i < n_in; i++) {
        if (!twice[i]) continue;
        char what[80];
        snprintf(what, sizeof(what), "%s d%s accumulates", label, in[i]->name);
        mt_check_close(what, in[i]->grad, twice[i], mt_numel(in[i]), 1e-6 * gmax[i], 1e-6);
        free(twice[i]);
    }
    free(seed);
    mt_ctx_free(&c);
}

/* Finite differences, then the accumulation contract. */
static void gradcheck_op(const char *label, mt_gradcheck_build build, mt_tensor **in, int n_in,
                         void *user) {
    mt_gradcheck(label, build, in, n_in, user, NULL);
    check_accumulates(label, build, in, n_in, user);
}

/* ------------------------------------------------------------------------------------------ */
/* embedding */

static mt_tensor *build_embedding(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_embedding(c, in[0], in[1]);
}

static mt_tensor *build_embedding_rows(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_embedding_rows(c, in[0], in[1], 1, 5, NULL);
}

/* rows 0..1 and 2..4 of a 5-id vocabulary, the second part filling the first's output */
static mt_tensor *build_embedding_parts(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    mt_tensor *y = mt_embedding_rows(c, in[0], in[1], 0, 5, NULL);
    return mt_embedding_rows(c, in[0], in[2], 2, 5, y);
}

static int test_grad_embedding(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 11);
    /* ids repeat (2 three times, 0 twice): the backward must add every occurrence */
    mt_tensor *ids = mt_test_tensor(MT_I32, 2, (int64_t[]){2, 4}, false, "ids");
    int32_t id_vals[8] = {2, 0, 2, 4, 1, 2, 0, 3};
    memcpy(ids->data, id_vals, sizeof(id_vals));
    mt_tensor *table = test_f32(2, (int64_t[]){5, 3}, true, "table", 1.0f, &rng);
    mt_tensor *in[2] = {ids, table};
    gradcheck_op("embedding", build_embedding, in, 2, NULL);

    /* N = 1 */
    mt_tensor *ids1 = mt_test_tensor(MT_I32, 2, (int64_t[]){1, 1}, false, "ids1");
    ((int32_t *)ids1->data)[0] = 4;
    mt_tensor *in1[2] = {ids1, table};
    gradcheck_op("embedding N=1", build_embedding, in1, 2, NULL);

    /* rows 1..3 of the 5-id vocabulary as a table of their own (ids 0 and 4: zero rows) */
    mt_tensor *rows = test_f32(2, (int64_t[]){3, 3}, true, "table rows 1..3", 1.0f, &rng);
    mt_tensor *inr[2] = {ids, rows};
    gradcheck_op("embedding rows 1..3 of 5", build_embedding_rows, inr, 2, NULL);
    mt_tensor *p0 = test_f32(2, (int64_t[]){2, 3}, true, "table rows 0..1", 1.0f, &rng);
    mt_tensor *p1 = test_f32(2, (int64_t[]){3, 3}, true, "table rows 2..4", 1.0f, &rng);
    mt_tensor *inp[3] = {ids, p0, p1};
    gradcheck_op("embedding in 2 parts", build_embedding_parts, inp, 3, NULL);
    return MT_TEST_OK;
}

static void embedding_bad_id(void *arg) {
    (void)arg;
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *ids = mt_test_tensor(MT_I32, 2, (int64_t[]){1, 2}, false, "bad_ids");
    ((int32_t *)ids->data)[1] = 7;
    mt_tensor *table = mt_test_tensor(MT_F32, 2, (int64_t[]){5, 3}, false, "table");
    mt_embedding(&c, ids, table);
}

static int test_op_embedding_forward(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 12);
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *ids = mt_test_tensor(MT_I32, 2, (int64_t[]){2, 3}, false, "ids");
    int32_t id_vals[6] = {4, 0, 4, 2, 3, 1};
    memcpy(ids->data, id_vals, sizeof(id_vals));
    mt_tensor *table = test_f32(2, (int64_t[]){5, 7}, false, "table", 1.0f, &rng);
    mt_tensor *y = mt_embedding(&c, ids, table);
    EXPECT(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 7,
           "embedding output shape %s, want (2,3,7)", mt_shape_str(y));
    const float *yd = y->data, *td = table->data;
    int bad = 0;
    for (int n = 0; n < 6; n++)
        for (int k = 0; k < 7; k++) bad += yd[n * 7 + k] != td[id_vals[n] * 7 + k];
    EXPECT(bad == 0, "embedding: %d gathered values differ from the table rows", bad);
    /* the table as three parts of 2, 2 and 1 rows, each filling its rows of one output: the
     * whole table's lookup exactly */
    mt_tensor *parts = NULL;
    for (int k = 0; k < 3; k++) {
        const int64_t r0 = 2 * k, R = k < 2 ? 2 : 1;
        mt_tensor *part = mt_test_tensor(MT_F32, 2, (int64_t[]){R, 7}, false, "part");
        memcpy(part->data, td + r0 * 7, sizeof(float) * (size_t)(R * 7));
        parts = mt_embedding_rows(&c, ids, part, r0, 5, parts);
    }
    EXPECT(memcmp(parts->data, yd, sizeof(float) * 42) == 0, "embedding parts differ from it");
    mt_ctx_free(&c);
    EXPECT(mt_expect_death(embedding_bad_id, NULL, "bad_ids"),
           "an id outside [0,V) must stop with an error naming the ids tensor");
    return MT_TEST_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* matmul */

static mt_tensor *build_matmul(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_matmul(c, in[0], in[1]);
}

static int test_grad_matmul(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 21);
    /* leading dims (2,3) flatten to N = 6 rows */
    mt_tensor *x = test_f32(3, (int64_t[]){2, 3, 5}, true, "x", 1.0f, &rng);
    mt_tensor *w = test_f32(2, (int64_t[]){4, 5}, true, "w", 1.0f, &rng);
    gradcheck_op("matmul", build_matmul, (mt_tensor *[]){x, w}, 2, NULL);

    /* N = 1 */
    mt_tensor *x1 = test_f32(2, (int64_t[]){1, 5}, true, "x1", 1.0f, &rng);
    gradcheck_op("matmul N=1", build_matmul, (mt_tensor *[]){x1, w}, 2, NULL);

    /* x without a gradient (the backward must skip dx), and a non-square w */
    mt_tensor *xc = test_f32(2, (int64_t[]){3, 6}, false, "x_const", 1.0f, &rng);
    mt_tensor *w2 = test_f32(2, (int64_t[]){2, 6}, true, "w2", 1.0f, &rng);
    gradcheck_op("matmul const x", build_matmul, (mt_tensor *[]){xc, w2}, 2, NULL);
    return MT_TEST_OK;
}

/* Forward against a double dot product. fp32 accumulation of K products is bounded by
 * gamma_K * sum_k |x_k w_k| with gamma_K = K u / (1 - K u), u = 2^-24 (any summation order),
 * plus the rounding of the result to fp32; that bound is the tolerance. */
static void check_matmul_forward(const char *label, int64_t N, int64_t M, int64_t K, mt_rng *rng) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *x = test_f32(3, (int64_t[]){1, N, K}, false, "x", 1.0f, rng);
    mt_tensor *w = test_f32(2, (int64_t[]){M, K}, false, "w", 1.0f, rng);
    mt_tensor *y = mt_matmul(&c, x, w);
    EXPECT(y->ndim == 3 && y->shape[0] == 1 && y->shape[1] == N && y->shape[2] == M,
           "%s: output shape %s", label, mt_shape_str(y));
    const float *xd = x->data, *wd = w->data, *yd = y->data;
    double u = ldexp(1.0, -24), gamma = K * u / (1.0 - K * u);
    int64_t bad = 0;
    double max_ratio = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                ref += (double)xd[n * K + k] * wd[m * K + k];
                mag += fabs((double)xd[n * K + k] * wd[m * K + k]);
            }
            double err = fabs(yd[n * M + m] - ref), bound = gamma * mag + u * fabs(ref);
            if (bound > 0 && err / bound > max_ratio) max_ratio = err / bound;
            if (!(err <= bound)) {
                if (bad < 5)
                    printf("  %s y[%lld,%lld]: got %.9g want %.9g (bound %.3g)\n", label,
                           (long long)n, (long long)m, (double)yd[n * M + m], ref, bound);
                bad++;
            }
        }
    printf("  %-24s N=%lld M=%lld K=%lld max err/bound %.3g %s\n", label, (long long)N,
           (long long)M, (long long)K, max_ratio, bad ? "MISMATCH" : "ok");
    EXPECT(bad == 0, "%s: %lld of %lld outside the fp32 bound", label, (long long)bad,
           (long long)(N * M));
    mt_ctx_free(&c);
}

static int test_op_matmul_forward(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 22);
    check_matmul_forward("matmul small", 6, 11, 37, &rng);
    check_matmul_forward("matmul N=1", 1, 9, 16, &rng);
    check_matmul_forward("matmul blocked", 67, 129, 300, &rng); /* past BLAS's block sizes */

    /* Kin = 0: an empty sum is exactly zero */
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *x0 = mt_test_tensor(MT_F32, 2, (int64_t[]){2, 0}, false, "x0");
    mt_tensor *w0 = mt_test_tensor(MT_F32, 2, (int64_t[]){3, 0}, false, "w0");
    mt_tensor *y0 = mt_matmul(&c, x0, w0);
    const float *y0d = y0->data;
    int nonzero = 0;
    for (int i = 0; i < 6; i++) nonzero += y0d[i] != 0.0f;
    EXPECT(y0->shape[0] == 2 && y0->shape[1] == 3 && nonzero == 0,
           "matmul with Kin=0: shape %s, %d non-zero values", mt_shape_str(y0), nonzero);
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* rmsnorm */

typedef struct {
    float eps;
    bool gemma;
} rmsnorm_args;

static mt_tensor *build_rmsnorm(mt_ctx *c, mt_tensor **in, void *user) {
    const rmsnorm_args *a = user;
    return mt_rmsnorm(c, in[0], in[1], a->eps, a->gemma);
}

static void grad_rmsnorm_case(bool gemma) {
    mt_rng rng;
    mt_rng_seed(&rng, gemma ? 32 : 31);
    rmsnorm_args args = {1e-5f, gemma};
    const char *name = gemma ? "rmsnorm gemma" : "rmsnorm";
    mt_tensor *x = test_f32(3, (int64_t[]){2, 3, 8}, true, "x", 1.0f, &rng);
    mt_tensor *w = test_f32(1, (int64_t[]){8}, true, "w", 1.0f, &rng);
    gradcheck_op(name, build_rmsnorm, (mt_tensor *[]){x, w}, 2, &args);

    /* N = 1, and a large eps so that the eps term matters in the derivative */
    mt_tensor *x1 = test_f32(2, (int64_t[]){1, 5}, true, "x1", 1.0f, &rng);
    mt_tensor *w1 = test_f32(1, (int64_t[]){5}, true, "w1", 1.0f, &rng);
    rmsnorm_args big_eps = {0.5f, gemma};
    gradcheck_op(name, build_rmsnorm, (mt_tensor *[]){x1, w1}, 2, &big_eps);

    /* w without a gradient */
    mt_tensor *wc = test_f32(1, (int64_t[]){8}, false, "w_const", 1.0f, &rng);
    gradcheck_op(name, build_rmsnorm, (mt_tensor *[]){x, wc}, 2, &args);
}

static int test_grad_rmsnorm(void) {
    grad_rmsnorm_case(false);
    return MT_TEST_OK;
}

static int test_grad_rmsnorm_gemma(void) {
    grad_rmsnorm_case(true);
    return MT_TEST_OK;
}

/* y and the saved rstd against double: every step is a product (no cancellation), so a few
 * fp32 roundings bound the error well inside rtol 1e-5. */
static void check_rmsnorm_forward(int64_t N, int64_t C, float xscale, float eps, bool gemma,
                                  bool zero_row, mt_rng *rng) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *x = test_f32(2, (int64_t[]){N, C}, true, "x", xscale, rng);
    mt_tensor *w = test_f32(1, (int64_t[]){C}, true, "w", 1.0f, rng);
    if (zero_row) memset(x->data, 0, sizeof(float) * (size_t)C);
    mt_tensor *y = mt_rmsnorm(&c, x, w, eps, gemma);
    EXPECT(c.n_nodes == 1, "rmsnorm with gradients recorded %d nodes", c.n_nodes);
    const float *rstd = c.nodes[0].saved[0]->data;
    const float *xd = x->data, *wd = w->data;
    float *yref = mt_malloc(sizeof(float) * (size_t)(N * C), "yref");
    float *rref = mt_malloc(sizeof(float) * (size_t)N, "rref");
    for (int64_t n = 0; n < N; n++) {
        double ss = 0;
        for (int64_t k = 0; k < C; k++) ss += (double)xd[n * C + k] * xd[n * C + k];
        double r = 1.0 / sqrt(ss / C + eps);
        rref[n] = (float)r;
        for (int64_t k = 0; k < C; k++)
            yref[n * C + k] = (float)((gemma ? 1.0 + wd[k] : (double)wd[k]) * xd[n * C + k] * r);
    }
    char label[64];
    snprintf(label, sizeof(label), "rmsnorm%s N=%lld C=%lld", gemma ? " gemma" : "", (long long)N,
             (long long)C);
    mt_check_close(label, y->data, yref, N * C, 0.0, 1e-5);
    mt_check_close("  rstd", rstd, rref, N, 0.0, 1e-5);
    free(yref);
    free(rref);
    mt_ctx_free(&c);
}

static int test_op_rmsnorm_forward(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 33);
    check_rmsnorm_forward(4, 4096, 1.0f, 1e-6f, false, false, &rng); /* long rows */
    check_rmsnorm_forward(3, 64, 1e3f, 1e-6f, false, false, &rng);   /* large values */
    check_rmsnorm_forward(3, 64, 1e-3f, 1e-6f, true, false, &rng);   /* small: eps matters */
    check_rmsnorm_forward(1, 17, 1.0f, 1e-5f, true, false, &rng);    /* N = 1 */
    check_rmsnorm_forward(2, 16, 1.0f, 1e-5f, false, true, &rng);    /* a zero row */
    return MT_TEST_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* pointwise ops */

static mt_tensor *build_silu(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_silu(c, in[0]);
}
static mt_tensor *build_sigmoid(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_sigmoid(c, in[0]);
}
static mt_tensor *build_swiglu(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_swiglu(c, in[0], in[1]);
}
static mt_tensor *build_add(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_add(c, in[0], in[1]);
}
static mt_tensor *build_concat(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_concat(c, in[0], in[1]);
}

static mt_tensor *build_mul(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_mul(c, in[0], in[1]);
}
static mt_tensor *build_square(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_mul(c, in[0], in[0]); /* the same tensor on both sides accumulates twice */
}
static mt_tensor *build_double(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    return mt_add(c, in[0], in[0]);
}
static mt_tensor *build_scale(mt_ctx *c, mt_tensor **in, void *user) {
    return mt_scale(c, in[0], *(const float *)user);
}
static mt_tensor *build_axpby(mt_ctx *c, mt_tensor **in, void *user) {
    const float *ab = user;
    return mt_axpby(c, ab[0], in[0], ab[1], in[1]);
}

/* One gradcheck at (3,7) and one at N = 1 for an op of one or two inputs. Values of std 3 reach
 * well into both tails of sigmoid. */
static void grad_pointwise(const char *name, mt_gradcheck_build build, int n_in, void *user,
                           uint64_t seed) {
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    const int64_t shapes[2][2] = {{3, 7}, {1, 1}};
    for (int s = 0; s < 2; s++) {
        mt_tensor *a = test_f32(2, shapes[s], true, "a", 3.0f, &rng);
        mt_tensor *b = test_f32(2, shapes[s], true, "b", 1.0f, &rng);
        char label[48];
        snprintf(label, sizeof(label), "%s (%lld,%lld)", name, (long long)shapes[s][0],
                 (long long)shapes[s][1]);
        gradcheck_op(label, build, (mt_tensor *[]){a, b}, n_in, user);
    }
}

static int test_grad_silu(void) {
    grad_pointwise("silu", build_silu, 1, NULL, 41);
    return MT_TEST_OK;
}
static int test_grad_sigmoid(void) {
    grad_pointwise("sigmoid", build_sigmoid, 1, NULL, 42);
    return MT_TEST_OK;
}
static int test_grad_swiglu(void) {
    grad_pointwise("swiglu", build_swiglu, 2, NULL, 43);
    return MT_TEST_OK;
}
static int test_grad_add(void) {
    grad_pointwise("add", build_add, 2, NULL, 44);
    grad_pointwise("add a+a", build_double, 1, NULL, 45);
    return MT_TEST_OK;
}
static int test_grad_concat(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 50);
    mt_tensor *a = test_f32(3, (int64_t[]){2, 3, 4}, true, "a", 1.0f, &rng);
    mt_tensor *b = test_f32(3, (int64_t[]){2, 3, 1}, true, "b", 1.0f, &rng);
    mt_tensor *in[2] = {a, b};
    gradcheck_op("concat", build_concat, in, 2, NULL);
    return MT_TEST_OK;
}
static int test_grad_mul(void) {
    grad_pointwise("mul", build_mul, 2, NULL, 46);
    grad_pointwise("mul a*a", build_square, 1, NULL, 47);
    return MT_TEST_OK;
}
static int test_grad_scale(void) {
    float s = -0.75f;
    grad_pointwise("scale", build_scale, 1, &s, 48);
    return MT_TEST_OK;
}
static int test_grad_axpby(void) {
    float ab[2] = {2.5f, -0.4f};
    grad_pointwise("axpby", build_axpby, 2, ab, 49);
    return MT_TEST_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* cross-entropy */

static mt_tensor *build_cross_entropy(mt_ctx *c, mt_tensor **in, void *user) {
    return mt_cross_entropy(c, in[0], in[1], *(const float *)user);
}

static mt_tensor *test_labels(int64_t N, const int32_t *vals) {
    mt_tensor *t = mt_test_tensor(MT_I32, 1, &N, false, "labels");
    memcpy(t->data, vals, sizeof(int32_t) * (size_t)N);
    return t;
}

static int test_grad_cross_entropy(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 51);
    mt_tensor *logits = test_f32(2, (int64_t[]){6, 7}, true, "logits", 2.0f, &rng);
    mt_tensor *labels = test_labels(6, (int32_t[]){3, -100, 0, 6, -100, 3});
    mt_tensor *in[2] = {logits, labels};
    float mean = 0.0f, sum_over = 10.0f;
    gradcheck_op("cross_entropy mean", build_cross_entropy, in, 2, &mean);
    gradcheck_op("cross_entropy sum/denom", build_cross_entropy, in, 2, &sum_over);

    /* T = 1: one row */
    mt_tensor *logits1 = test_f32(2, (int64_t[]){1, 7}, true, "logits1", 2.0f, &rng);
    mt_tensor *labels1 = test_labels(1, (int32_t[]){5});
    gradcheck_op("cross_entropy T=1", build_cross_entropy, (mt_tensor *[]){logits1, labels1}, 2,
                 &mean);

    /* every row ignored: the mean form is exactly 0 and so is its gradient */
    mt_tensor *none = test_labels(6, (int32_t[]){-100, -100, -100, -100, -100, -100});
    gradcheck_op("cross_entropy all ignored", build_cross_entropy, (mt_tensor *[]){logits, none}, 2,
                 &mean);
    mt_ctx c;
    mt_test_ctx_init(&c);
    memset(logits->grad, 0, sizeof(float) * 42);
    mt_tensor *loss = mt_cross_entropy(&c, logits, none, 0.0f);
    mt_backward(&c, loss, NULL);
    int nonzero = 0;
    for (int i = 0; i < 42; i++) nonzero += ((const float *)logits->grad)[i] != 0.0f;
    EXPECT(*(const float *)loss->data == 0.0f && nonzero == 0,
           "all rows ignored: loss %g (want 0), %d non-zero gradients",
           (double)*(const float *)loss->data, nonzero);
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* The loss and the saved lse against double. The kernel sums in double and rounds once, so
 * the loss is within 2 fp32 ulps; lse is stored in fp32 (one rounding). */
static void check_cross_entropy_forward(const char *label, int64_t N, int64_t V, float scale,
                                        float offset, const int32_t *lab, float denom,
                                        mt_rng *rng) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *logits = test_f32(2, (int64_t[]){N, V}, true, "logits", scale, rng);
    float *x = logits->data;
    for (int64_t i = 0; i < N * V; i++) x[i] += offset;
    mt_tensor *labels = test_labels(N, lab);
    mt_tensor *loss = mt_cross_entropy(&c, logits, labels, denom);
    EXPECT(loss->ndim == 0 && c.n_nodes == 1, "%s: loss must be a scalar on the tape", label);
    const float *lse = c.nodes[0].saved[0]->data;
    double total = 0;
    int64_t count = 0;
    float *lse_ref = mt_malloc(sizeof(float) * (size_t)N, "lse_ref");
    float *lse_got = mt_malloc(sizeof(float) * (size_t)N, "lse_got");
    for (int64_t n = 0; n < N; n++) {
        lse_ref[n] = lse_got[n] = 0.0f;
        if (lab[n] == MT_IGNORE_INDEX) continue;
        double mx = -INFINITY, s = 0;
        for (int64_t v = 0; v < V; v++) mx = fmax(mx, x[n * V + v]);
        for (int64_t v = 0; v < V; v++) s += exp(x[n * V + v] - mx);
        double l = mx + log(s);
        lse_ref[n] = (float)l;
        lse_got[n] = lse[n];
        total += l - x[n * V + lab[n]];
        count++;
    }
    double want = denom > 0 ? total / denom : (count ? total / count : 0.0);
    float got = *(const float *)loss->data;
    bool ok = fabs(got - want) <= 2 * FLT_EPSILON * fabs(want);
    printf("  %-32s loss %.9g want %.9g %s\n", label, (double)got, want, ok ? "ok" : "MISMATCH");
    EXPECT(ok, "%s: loss %.9g, double reference %.9g", label, (double)got, want);
    mt_check_close("  lse", lse_got, lse_ref, N, 0.0, FLT_EPSILON);
    free(lse_ref);
    free(lse_got);
    mt_ctx_free(&c);
}

static void cross_entropy_bad_label(void *arg) {
    (void)arg;
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *logits = mt_test_tensor(MT_F32, 2, (int64_t[]){2, 4}, false, "logits");
    int64_t two = 2;
    mt_tensor *labels = mt_test_tensor(MT_I32, 1, &two, false, "bad_labels");
    ((int32_t *)labels->data)[1] = 4;
    mt_cross_entropy(&c, logits, labels, 0.0f);
}

static int test_op_cross_entropy_forward(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 52);
    int32_t lab[5] = {0, 999, -100, 17, 500};
    check_cross_entropy_forward("ce mean", 5, 1000, 2.0f, 0.0f, lab, 0.0f, &rng);
    check_cross_entropy_forward("ce sum/denom", 5, 1000, 2.0f, 0.0f, lab, 7.0f, &rng);
    /* logits near 1000, spread 30: exp would overflow even in double without the max shift */
    check_cross_entropy_forward("ce large logits", 5, 1000, 30.0f, 1000.0f, lab, 0.0f, &rng);
    int32_t one[1] = {3};
    check_cross_entropy_forward("ce T=1", 1, 5, 1.0f, 0.0f, one, 0.0f, &rng);
    int32_t none[3] = {-100, -100, -100};
    check_cross_entropy_forward("ce all ignored", 3, 5, 1.0f, 0.0f, none, 0.0f, &rng);
    EXPECT(mt_expect_death(cross_entropy_bad_label, NULL, "bad_labels"),
           "a label outside [0,V) that is not -100 must stop with an error naming the labels");
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"grad_embedding", test_grad_embedding},
    {"grad_matmul", test_grad_matmul},
    {"grad_rmsnorm", test_grad_rmsnorm},
    {"grad_rmsnorm_gemma", test_grad_rmsnorm_gemma},
    {"grad_silu", test_grad_silu},
    {"grad_sigmoid", test_grad_sigmoid},
    {"grad_swiglu", test_grad_swiglu},
    {"grad_add", test_grad_add},
    {"grad_concat", test_grad_concat},
    {"grad_mul", test_grad_mul},
    {"grad_scale", test_grad_scale},
    {"grad_axpby", test_grad_axpby},
    {"grad_cross_entropy", test_grad_cross_entropy},
    {"op_embedding_forward", test_op_embedding_forward},
    {"op_matmul_forward", test_op_matmul_forward},
    {"op_rmsnorm_forward", test_op_rmsnorm_forward},
    {"op_cross_entropy_forward", test_op_cross_entropy_forward},
};
MT_TEST_MAIN(cases)
