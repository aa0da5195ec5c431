/* grad_core.c: the tape itself: views, gradient accumulation, no-grad mode, recomputed segments
 * (mt_checkpoint), error paths. */
#include "tests/support/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mt_tensor *build_view(mt_ctx *c, mt_tensor **in, void *user) {
    (void)user;
    int64_t shape[2] = {3, 8};
    mt_tensor *v = mt_view(c, in[0], 2, shape);
    return mt_view(c, v, 1, (int64_t[]){24});
}

static int test_grad_view(void) {
    mt_rng rng;
    mt_rng_seed(&rng, 1);
    mt_tensor *x = mt_test_tensor(MT_F32, 3, (int64_t[]){2, 3, 4}, true, "x");
    mt_fill_normal(x->data, 24, 1.0f, &rng);
    mt_gradcheck("view", build_view, &x, 1, NULL, NULL);
    return MT_TEST_OK;
}

/* Using a tensor twice accumulates both contributions; no-grad records nothing. */
static int test_op_tape_accumulate(void) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *x = mt_test_tensor(MT_F32, 1, (int64_t[]){4}, true, "x");
    float *xd = x->data;
    for (int i = 0; i < 4; i++) xd[i] = (float)i;
    mt_tensor *a = mt_view(&c, x, 2, (int64_t[]){2, 2});
    mt_tensor *b = mt_view(&c, x, 2, (int64_t[]){2, 2});
    EXPECT(c.n_nodes == 2, "two view nodes recorded, got %d", c.n_nodes);
    float seed[4] = {1, 2, 3, 4};
    mt_backward(&c, a, seed);
    mt_backward(&c, b, seed); /* the tape still holds a's node: x receives a's gradient again */
    const float *g = x->grad;
    for (int i = 0; i < 4; i++)
        EXPECT(g[i] == 3 * seed[i], "grad[%d] = %g, want %g", i, g[i], 3 * seed[i]);

    mt_ctx_reset(&c);
    mt_ctx_set_grad(&c, false);
    mt_tensor *d = mt_view(&c, x, 1, (int64_t[]){4});
    EXPECT(c.n_nodes == 0 && !d->requires_grad, "no-grad mode recorded %d nodes", c.n_nodes);
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* ---- recomputed segments ---- */

/* A residual block with two outputs and a NULL third, like a decoder layer (x out, router):
 *   h = rmsnorm(x, g); y = 0.5 h + silu(h W); r = h Wr        x, y: (N,C); r: (N,E) */
typedef struct {
    mt_tensor *W, *g, *Wr;
    bool nested; /* the block's second half as a segment of its own */
} ck_block;

static void ck_tail(mt_ctx *c, void *user, mt_tensor *h, mt_tensor **out) {
    const ck_block *b = user;
    out[0] = mt_axpby(c, 0.5f, h, 1.0f, mt_silu(c, mt_matmul(c, h, b->W)));
}

static void ck_segment(mt_ctx *c, void *user, mt_tensor *x, mt_tensor **out) {
    const ck_block *b = user;
    mt_tensor *h = mt_rmsnorm(c, x, b->g, 1e-5f, false);
    if (b->nested)
        mt_checkpoint(c, ck_tail, b, sizeof(*b), h, 1, out);
    else
        ck_tail(c, (void *)b, h, out);
    out[1] = mt_matmul(c, h, b->Wr);
    out[2] = NULL;
}

/* in = {x, W, g, Wr, Wo}: two blocks, then out = y2 Wo + r1 + r2 (N,E); user: how */
typedef enum { CK_KEEP, CK_RECOMPUTE, CK_NESTED } ck_mode;
static mt_tensor *build_checkpoint(mt_ctx *c, mt_tensor **in, void *user) {
    const ck_mode mode = *(const ck_mode *)user;
    ck_block b = {in[1], in[2], in[3], mode == CK_NESTED};
    mt_tensor *x = in[0], *r[2], *out[3];
    for (int l = 0; l < 2; l++) {
        if (mode == CK_KEEP)
            ck_segment(c, &b, x, out);
        else
            mt_checkpoint(c, ck_segment, &b, sizeof(b), x, 3, out);
        x = out[0];
        r[l] = out[1];
    }
    return mt_add(c, mt_add(c, mt_matmul(c, x, in[4]), r[0]), r[1]);
}

static void ck_inside_bucket(void *arg) {
    mt_tensor **in = arg;
    mt_ctx c;
    mt_test_ctx_init(&c);
    c.tag = 3;
    ck_mode mode = CK_RECOMPUTE;
    build_checkpoint(&c, in, &mode);
}

/* Finite differences through recomputed segments (also nested); the gradients equal those of
 * the same ops with their activations kept, bit for bit, from a shorter tape and less arena. */
static int test_grad_checkpoint(void) {
    const int64_t N = 6, C = 8, E = 3;
    mt_rng rng;
    mt_rng_seed(&rng, 7);
    mt_tensor *in[5] = {
        mt_test_tensor(MT_F32, 2, (int64_t[]){N, C}, true, "x"),
        mt_test_tensor(MT_F32, 2, (int64_t[]){C, C}, true, "W"),
        mt_test_tensor(MT_F32, 1, (int64_t[]){C}, true, "g"),
        mt_test_tensor(MT_F32, 2, (int64_t[]){E, C}, true, "Wr"),
        mt_test_tensor(MT_F32, 2, (int64_t[]){E, C}, true, "Wo"),
    };
    for (int i = 0; i < 5; i++) mt_fill_normal(in[i]->data, mt_numel(in[i]), 0.5f, &rng);
    ck_mode modes[3] = {CK_KEEP, CK_RECOMPUTE, CK_NESTED};
    mt_gradcheck("checkpoint", build_checkpoint, in, 5, &modes[1], NULL);
    mt_gradcheck("checkpoint nested", build_checkpoint, in, 5, &modes[2], NULL);

    float seed[N * E];
    mt_fill_normal(seed, N * E, 1.0f, &rng);
    float *grads[3][5];
    int nodes[3];
    size_t peak[3];
    mt_ctx c;
    mt_test_ctx_init(&c);
    for (int m = 0; m < 3; m++) {
        for (int i = 0; i < 5; i++) memset(in[i]->grad, 0, mt_nbytes(in[i]));
        mt_ctx_reset(&c);
        c.arena.peak = 0;
        mt_tensor *out = build_checkpoint(&c, in, &modes[m]);
        nodes[m] = c.n_nodes;
        mt_backward(&c, out, seed);
        peak[m] = c.arena.peak;
        for (int i = 0; i < 5; i++) {
            grads[m][i] = mt_malloc(mt_nbytes(in[i]), "grad copy");
            memcpy(grads[m][i], in[i]->grad, mt_nbytes(in[i]));
        }
    }
    for (int m = 1; m < 3; m++) {
        for (int i = 0; i < 5; i++)
            EXPECT(memcmp(grads[m][i], grads[0][i], mt_nbytes(in[i])) == 0,
                   "mode %d: the gradient of %s differs from the kept activations' one", m,
                   in[i]->name);
        printf("  mode %d: %d tape nodes (kept: %d), arena peak %zu bytes (kept: %zu)\n", m,
               nodes[m], nodes[0], peak[m], peak[0]);
        EXPECT(nodes[m] == 5, "mode %d: %d nodes; want 2 segments + 3 outer ops", m, nodes[m]);
        EXPECT(peak[m] < peak[0], "mode %d: arena peak %zu, not below %zu", m, peak[m], peak[0]);
    }
    for (int m = 0; m < 3; m++)
        for (int i = 0; i < 5; i++) free(grads[m][i]);

    /* without gradients a segment just runs: no node, the same values */
    mt_ctx_reset(&c);
    mt_ctx_set_grad(&c, false);
    mt_tensor *out = build_checkpoint(&c, in, &modes[1]);
    EXPECT(c.n_nodes == 0 && !out->requires_grad, "no-grad mode recorded %d nodes", c.n_nodes);
    mt_ctx_set_grad(&c, true);
    mt_ctx_free(&c);
    EXPECT(mt_expect_death(ck_inside_bucket, in, "checkpoint: a segment starts inside bucket 3"),
           "a segment inside a bucket must be refused");
    return MT_TEST_OK;
}

/* ---- the node hook (the non-finite diagnosis, train/nonfinite.c) ---- */

typedef struct {
    char seen[256]; /* "F<op> " after a forward kernel, "B<op> " after a backward kernel */
    bool grads_ready;
} hook_log;

static void log_hook(void *user, const mt_node *n, bool forward) {
    hook_log *h = user;
    snprintf(h->seen + strlen(h->seen), sizeof(h->seen) - strlen(h->seen), "%c%s ",
             forward ? 'F' : 'B', mt_op_name(n->op));
    if (!forward)
        for (int j = 0; j < n->n_in; j++)
            h->grads_ready &= !n->in[j] || !n->in[j]->requires_grad || n->in[j]->grad;
}

/* After every kernel, forward and backward, with the inputs' gradients there after a backward;
 * a deferred forward reports when it runs (in the reverse pass, right before its backward). */
static int test_op_node_hook(void) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *x = mt_test_tensor(MT_F32, 2, (int64_t[]){2, 3}, true, "x");
    mt_tensor *w = mt_test_tensor(MT_F32, 2, (int64_t[]){4, 3}, true, "w");
    mt_rng rng;
    mt_rng_seed(&rng, 2);
    mt_fill_normal(x->data, 6, 1.0f, &rng);
    mt_fill_normal(w->data, 12, 1.0f, &rng);
    hook_log h = {"", true};
    c.node_hook = log_hook;
    c.node_user = &h;
    mt_tensor *y = mt_matmul(&c, x, w);
    c.defer_forward = true;
    mt_tensor *z = mt_silu(&c, y);
    c.defer_forward = false;
    mt_tensor *s = mt_scale(&c, z, 2.0f);
    EXPECT(!strcmp(h.seen, "Fmatmul Fscale "), "forward hooks: \"%s\"", h.seen);
    float seed[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    mt_backward(&c, s, seed);
    EXPECT(!strcmp(h.seen, "Fmatmul Fscale Bscale Fsilu Bsilu Bmatmul "), "all hooks: \"%s\"",
           h.seen);
    EXPECT(h.grads_ready, "an input gradient was missing after its backward kernel");
    c.node_hook = NULL;
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"grad_view", test_grad_view},
    {"op_tape_accumulate", test_op_tape_accumulate},
    {"grad_checkpoint", test_grad_checkpoint},
    {"op_node_hook", test_op_node_hook},
};
MT_TEST_MAIN(cases)
