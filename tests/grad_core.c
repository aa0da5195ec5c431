/* grad_core.c: the tape itself: views, gradient accumulation, no-grad mode, error paths. */
#include "harness.h"

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

static const mt_test_case cases[] = {
    {"grad_view", test_grad_view},
    {"op_tape_accumulate", test_op_tape_accumulate},
};
MT_TEST_MAIN(cases)
