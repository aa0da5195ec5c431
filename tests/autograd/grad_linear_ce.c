/* grad_linear_ce.c: the fused lm_head + cross-entropy (autograd/op_linear_cross_entropy.c).
 * - grad_linear_cross_entropy: finite differences for x and w, mean and sum/denom, chunks of
 *   1, 3 and all rows, ignored rows; the backward accumulates.
 * - op_linear_cross_entropy_matches: against the unfused mt_cross_entropy(mt_matmul(x, w)) on
 *   the same inputs, in fp32 and bf16 GEMM mode: loss and gradients to 1e-6 (the same
 *   arithmetic, other summation orders); every row ignored gives exactly zero; a bad label
 *   stops with an error naming the labels tensor.
 * - grad_linear_cross_entropy_parts: the lm_head split by vocabulary rows into a chain of parts
 *   (mt_linear_cross_entropy_part): finite differences for x and every part, a part no label
 *   falls in included.
 * - op_linear_cross_entropy_parts_match: the chain against the whole lm_head's fused op on the
 *   same w, fp32 and bf16 mode: loss and gradients to 1e-6. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"

typedef struct {
    float denom;
    int64_t chunk;
} lce_args;

static mt_tensor *build_lce(mt_ctx *c, mt_tensor **in, void *user) {
    const lce_args *a = user;
    return mt_linear_cross_entropy_chunked(c, in[0], in[1], in[2], a->denom, a->chunk);
}

static mt_tensor *lce_labels(int64_t N, const int32_t *vals) {
    mt_tensor *t = mt_test_tensor(MT_I32, 1, &N, false, "labels");
    memcpy(t->data, vals, sizeof(int32_t) * (size_t)N);
    return t;
}

static mt_tensor *lce_f32(int ndim, const int64_t *shape, const char *name, float std, mt_rng *r) {
    mt_tensor *t = mt_test_tensor(MT_F32, ndim, shape, true, name);
    mt_fill_normal(t->data, mt_numel(t), std, r);
    return t;
}

static int test_grad_lce(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 71);
    /* x (2,4,5) = 8 rows, w (9,5): V = 9, C = 5; rows 1 and 6 ignored */
    mt_tensor *x = lce_f32(3, (int64_t[]){2, 4, 5}, "x", 1.0f, &rng);
    mt_tensor *w = lce_f32(2, (int64_t[]){9, 5}, "w", 0.7f, &rng);
    mt_tensor *labels = lce_labels(8, (int32_t[]){3, -100, 0, 8, 2, 3, -100, 5});
    mt_tensor *in[3] = {x, w, labels};
    const lce_args cases[] = {{0.0f, 1}, {0.0f, 3}, {0.0f, 0}, {11.0f, 4}};
    for (int i = 0; i < 4; i++) {
        char label[96];
        snprintf(label, sizeof(label), "linear_cross_entropy denom %g chunk %lld",
                 (double)cases[i].denom, (long long)cases[i].chunk);
        mt_gradcheck(label, build_lce, in, 3, (void *)&cases[i], NULL);
    }
    /* the backward accumulates: two backwards give twice the gradient, with the logits formed
     * again (chunks of 3) and kept from the forward (one chunk) */
    for (int k = 1; k <= 2; k++) {
        mt_ctx c;
        mt_test_ctx_init(&c);
        memset(x->grad, 0, mt_nbytes(x));
        memset(w->grad, 0, mt_nbytes(w));
        mt_tensor *loss = build_lce(&c, in, (void *)&cases[k]);
        EXPECT(!c.nodes[c.n_nodes - 1].saved[2] == (k == 1), "logits kept with chunk %lld",
               (long long)cases[k].chunk);
        mt_backward(&c, loss, NULL);
        float *once = malloc(mt_nbytes(w));
        memcpy(once, w->grad, mt_nbytes(w));
        mt_backward(&c, loss, NULL);
        for (int64_t i = 0; i < mt_numel(w); i++) once[i] *= 2.0f;
        mt_check_close("linear_cross_entropy dw accumulates", w->grad, once, mt_numel(w), 1e-7,
                       1e-6);
        free(once);
        mt_ctx_free(&c);
    }
    return MT_TEST_OK;
}

/* loss, dx, dw of one build on zeroed gradients. */
static float run_grads(mt_tensor *x, mt_tensor *w, mt_tensor *labels, float denom, bool fused,
                       int64_t chunk, mt_dtype mode, float *dx, float *dw) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    c.compute_dtype = mode;
    memset(x->grad, 0, mt_nbytes(x));
    memset(w->grad, 0, mt_nbytes(w));
    mt_tensor *loss = fused ? mt_linear_cross_entropy_chunked(&c, x, w, labels, denom, chunk)
                            : mt_cross_entropy(&c, mt_matmul(&c, x, w), labels, denom);
    mt_backward(&c, loss, NULL);
    float value = *(const float *)loss->data;
    memcpy(dx, x->grad, mt_nbytes(x));
    memcpy(dw, w->grad, mt_nbytes(w));
    mt_ctx_free(&c);
    return value;
}

static void bad_label(void *arg) {
    (void)arg;
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *x = mt_test_tensor(MT_F32, 2, (int64_t[]){2, 3}, false, "x");
    mt_tensor *w = mt_test_tensor(MT_F32, 2, (int64_t[]){4, 3}, false, "w");
    mt_tensor *labels = lce_labels(2, (int32_t[]){1, 4});
    mt_linear_cross_entropy(&c, x, w, labels, 0.0f);
}

static int test_lce_matches(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 72);
    const int64_t N = 37, C = 24, V = 301;
    mt_tensor *x = lce_f32(2, (int64_t[]){N, C}, "x", 1.0f, &rng);
    mt_tensor *w = lce_f32(2, (int64_t[]){V, C}, "w", 0.3f, &rng);
    int32_t lab[37];
    for (int i = 0; i < N; i++) lab[i] = i % 4 == 1 ? -100 : (int32_t)(mt_rng_u64(&rng) % V);
    mt_tensor *labels = lce_labels(N, lab);
    float *dx0 = malloc(mt_nbytes(x)), *dw0 = malloc(mt_nbytes(w)), *dx1 = malloc(mt_nbytes(x)),
          *dw1 = malloc(mt_nbytes(w));
    const mt_dtype modes[2] = {MT_F32, MT_BF16};
    const int64_t chunks[3] = {1, 5, 0};
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 3; k++)
            for (int d = 0; d < 2; d++) {
                float denom = d ? 50.0f : 0.0f;
                float l0 = run_grads(x, w, labels, denom, false, 0, modes[m], dx0, dw0);
                float l1 = run_grads(x, w, labels, denom, true, chunks[k], modes[m], dx1, dw1);
                char what[128];
                snprintf(what, sizeof(what), "%s chunk %lld denom %g", mt_dtype_name(modes[m]),
                         (long long)chunks[k], (double)denom);
                printf("  %s: loss %.9g vs %.9g\n", what, (double)l1, (double)l0);
                EXPECT(fabs((double)l1 - l0) <= 1e-6 * fabs((double)l0), "%s: loss %.9g vs %.9g",
                       what, (double)l1, (double)l0);
                char lx[160], lw[160];
                snprintf(lx, sizeof(lx), "%s dx", what);
                snprintf(lw, sizeof(lw), "%s dw", what);
                mt_check_rel_l2(lx, dx1, dx0, mt_numel(x), 1e-6);
                mt_check_rel_l2(lw, dw1, dw0, mt_numel(w), 1e-6);
            }
    /* bf16 mode really rounds: its loss differs from fp32 */
    float lf = run_grads(x, w, labels, 0.0f, true, 0, MT_F32, dx1, dw1);
    float lb = run_grads(x, w, labels, 0.0f, true, 0, MT_BF16, dx1, dw1);
    EXPECT(lf != lb, "bf16 mode gave the fp32 loss %.9g", (double)lf);

    /* every row ignored: loss 0, gradients untouched */
    int32_t none[37];
    for (int i = 0; i < N; i++) none[i] = -100;
    mt_tensor *ignored = lce_labels(N, none);
    float l = run_grads(x, w, ignored, 0.0f, true, 0, MT_F32, dx1, dw1);
    int nonzero = 0;
    for (int64_t i = 0; i < N * C; i++) nonzero += dx1[i] != 0.0f;
    for (int64_t i = 0; i < V * C; i++) nonzero += dw1[i] != 0.0f;
    EXPECT(l == 0.0f && nonzero == 0, "all rows ignored: loss %g, %d non-zero gradients", (double)l,
           nonzero);
    free(dx0), free(dw0), free(dx1), free(dw1);

    EXPECT(mt_expect_death(bad_label, NULL, "labels[1] = 4"),
           "a label outside [0,V) must stop with an error naming the labels tensor and position");
    return MT_TEST_OK;
}

/* ---- the chain of vocabulary parts ---- */

typedef struct {
    int n_parts;
    int64_t rows[4]; /* each part's vocabulary rows */
    float denom;
    int64_t chunk;
} lce_parts_args;

/* in[0] = x, in[1 .. n_parts] = the parts of w in vocabulary order, in[n_parts + 1] = labels */
static mt_tensor *build_lce_parts(mt_ctx *c, mt_tensor **in, void *user) {
    const lce_parts_args *a = user;
    int64_t vocab = 0, row0 = 0;
    for (int k = 0; k < a->n_parts; k++) vocab += a->rows[k];
    mt_tensor *chain = NULL;
    for (int k = 0; k < a->n_parts; k++) {
        chain = mt_linear_cross_entropy_part(c, in[0], in[1 + k], in[1 + a->n_parts], chain, row0,
                                             vocab, k == a->n_parts - 1, a->denom, a->chunk);
        row0 += a->rows[k];
    }
    return chain;
}

static int test_grad_lce_parts(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 73);
    /* V = 9 as three parts of 3, 4 and 2 rows; no label falls in the last part */
    mt_tensor *x = lce_f32(3, (int64_t[]){2, 4, 5}, "x", 1.0f, &rng);
    mt_tensor *w0 = lce_f32(2, (int64_t[]){3, 5}, "w0", 0.7f, &rng);
    mt_tensor *w1 = lce_f32(2, (int64_t[]){4, 5}, "w1", 0.7f, &rng);
    mt_tensor *w2 = lce_f32(2, (int64_t[]){2, 5}, "w2", 0.7f, &rng);
    mt_tensor *labels = lce_labels(8, (int32_t[]){3, -100, 0, 6, 2, 3, -100, 5});
    mt_tensor *in[5] = {x, w0, w1, w2, labels};
    const lce_parts_args cases[] = {{3, {3, 4, 2}, 0.0f, 1}, {3, {3, 4, 2}, 11.0f, 0}};
    for (int i = 0; i < 2; i++) {
        char label[96];
        snprintf(label, sizeof(label), "linear_cross_entropy 3 parts denom %g chunk %lld",
                 (double)cases[i].denom, (long long)cases[i].chunk);
        mt_gradcheck(label, build_lce_parts, in, 5, (void *)&cases[i], NULL);
    }
    return MT_TEST_OK;
}

/* The chain over parts of w (rows copied out of w; their gradients put back in place) against
 * the whole op. */
static int test_lce_parts_match(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 74);
    const int64_t N = 37, C = 24, V = 301, rows[3] = {100, 1, 200};
    mt_tensor *x = lce_f32(2, (int64_t[]){N, C}, "x", 1.0f, &rng);
    mt_tensor *w = lce_f32(2, (int64_t[]){V, C}, "w", 0.3f, &rng);
    int32_t lab[37];
    for (int i = 0; i < N; i++) lab[i] = i % 4 == 1 ? -100 : (int32_t)(mt_rng_u64(&rng) % V);
    lab[0] = 100; /* the one-row part */
    mt_tensor *labels = lce_labels(N, lab);
    mt_tensor *part[3];
    for (int k = 0, r0 = 0; k < 3; r0 += (int)rows[k], k++) {
        part[k] = mt_test_tensor(MT_F32, 2, (int64_t[]){rows[k], C}, true, "w part");
        memcpy(part[k]->data, (float *)w->data + r0 * C, sizeof(float) * (size_t)(rows[k] * C));
    }
    float *dx0 = malloc(mt_nbytes(x)), *dw0 = malloc(mt_nbytes(w)), *dx1 = malloc(mt_nbytes(x)),
          *dw1 = malloc(mt_nbytes(w));
    const mt_dtype modes[2] = {MT_F32, MT_BF16};
    for (int m = 0; m < 2; m++)
        for (int d = 0; d < 2; d++) {
            const float denom = d ? 50.0f : 0.0f;
            const float l0 = run_grads(x, w, labels, denom, true, 7, modes[m], dx0, dw0);
            mt_ctx c;
            mt_test_ctx_init(&c);
            c.compute_dtype = modes[m];
            memset(x->grad, 0, mt_nbytes(x));
            for (int k = 0; k < 3; k++) memset(part[k]->grad, 0, mt_nbytes(part[k]));
            lce_parts_args a = {3, {rows[0], rows[1], rows[2]}, denom, 7};
            mt_tensor *in[5] = {x, part[0], part[1], part[2], labels};
            mt_tensor *loss = build_lce_parts(&c, in, &a);
            /* the labels are read once per chain: every part has the first part's row list */
            const mt_tensor *first_rows = NULL;
            int n_parts = 0;
            for (int i = 0; i < c.n_nodes; i++) {
                const mt_node *n = &c.nodes[i];
                if (n->op != MT_OP_LINEAR_CROSS_ENTROPY) continue;
                if (!n_parts++) first_rows = n->saved[1];
                EXPECT(n->saved[1] == first_rows, "part %d made its own row list", n_parts);
            }
            EXPECT(n_parts == 3, "%d chain parts recorded", n_parts);
            mt_backward(&c, loss, NULL);
            const float l1 = *(const float *)loss->data;
            memcpy(dx1, x->grad, mt_nbytes(x));
            for (int k = 0, r0 = 0; k < 3; r0 += (int)rows[k], k++)
                memcpy(dw1 + r0 * C, part[k]->grad, mt_nbytes(part[k]));
            mt_ctx_free(&c);
            char what[96];
            snprintf(what, sizeof(what), "3 parts, %s denom %g", mt_dtype_name(modes[m]),
                     (double)denom);
            printf("  %s: loss %.9g vs %.9g (whole)\n", what, (double)l1, (double)l0);
            EXPECT(fabs((double)l1 - l0) <= 1e-6 * fabs((double)l0), "%s: loss %.9g vs %.9g", what,
                   (double)l1, (double)l0);
            char lx[128], lw[128];
            snprintf(lx, sizeof(lx), "%s dx", what);
            snprintf(lw, sizeof(lw), "%s dw", what);
            mt_check_rel_l2(lx, dx1, dx0, mt_numel(x), 1e-6);
            mt_check_rel_l2(lw, dw1, dw0, mt_numel(w), 1e-6);
        }
    free(dx0), free(dw0), free(dx1), free(dw1);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"grad_linear_cross_entropy", test_grad_lce},
    {"op_linear_cross_entropy_matches", test_lce_matches},
    {"grad_linear_cross_entropy_parts", test_grad_lce_parts},
    {"op_linear_cross_entropy_parts_match", test_lce_parts_match},
};
MT_TEST_MAIN(cases)
