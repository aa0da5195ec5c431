/* grad_moe_split.c: the split MoE ops (dispatch, one op per expert, combine; what the model
 * runs when experts are gathered one at a time). Gradients against finite differences, an
 * expert with no tokens (exactly zero gradients, its weights never read), and the composition
 * against the fused mt_moe_experts, forward and every gradient, in fp32 and bf16 mode. */
#include "tests/support/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mt_tensor *idx;
    int E;
} split_user;

/* Expert e's (d1,d2) matrix of a stacked (E,d1,d2) tensor: its data and gradient. */
static mt_tensor *expert_slice(mt_ctx *c, mt_tensor *w, int e) {
    mt_tensor *t = mt_arena_alloc(&c->host, sizeof(mt_tensor), "expert slice");
    const int64_t per = w->shape[1] * w->shape[2];
    mt_tensor_wrap(t, MT_F32, 2, (int64_t[]){w->shape[1], w->shape[2]}, (float *)w->data + e * per,
                   w->grad ? (float *)w->grad + e * per : NULL, w->name);
    return t;
}

/* in = {x (N,C), weight (N,K), w1 (E,F,C), w3 (E,F,C), w2 (E,C,F)} */
static mt_tensor *build_split(mt_ctx *c, mt_tensor **in, void *user) {
    split_user *u = user;
    mt_moe_plan plan;
    mt_tensor *xs = mt_moe_dispatch(c, in[0], u->idx, u->E, &plan);
    mt_tensor *ys = mt_moe_expert_out(c, &plan, in[0]->shape[1]);
    for (int e = 0; e < u->E; e++)
        mt_moe_expert_ffn(c, xs, &plan, in[1], e, expert_slice(c, in[2], e),
                          expert_slice(c, in[3], e), expert_slice(c, in[4], e), ys);
    return mt_moe_combine(c, ys, &plan);
}

static mt_tensor *build_fused(mt_ctx *c, mt_tensor **in, void *user) {
    split_user *u = user;
    return mt_moe_experts(c, in[0], u->idx, in[1], in[2], in[3], in[4]);
}

enum { N = 7, C = 6, F = 5, E = 4, K = 2 };
/* expert 2 is never chosen; token 5 names expert 1 twice */
static const int32_t idx_data[N * K] = {0, 1, 3, 0, 1, 3, 0, 3, 3, 1, 1, 1, 0, 1};

static void make_inputs(mt_tensor **in, mt_tensor **idx, uint64_t seed) {
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    *idx = mt_test_tensor(MT_I32, 2, (int64_t[]){N, K}, false, "idx");
    memcpy((*idx)->data, idx_data, sizeof(idx_data));
    in[0] = mt_test_tensor(MT_F32, 2, (int64_t[]){N, C}, true, "x");
    in[1] = mt_test_tensor(MT_F32, 2, (int64_t[]){N, K}, true, "weight");
    in[2] = mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w1");
    in[3] = mt_test_tensor(MT_F32, 3, (int64_t[]){E, F, C}, true, "w3");
    in[4] = mt_test_tensor(MT_F32, 3, (int64_t[]){E, C, F}, true, "w2");
    mt_fill_normal(in[0]->data, N * C, 1.0f, &rng);
    mt_fill_uniform(in[1]->data, N * K, 0.1f, 1.0f, &rng);
    for (int i = 2; i < 5; i++) mt_fill_normal(in[i]->data, E * F * C, 0.5f, &rng);
}

static int test_grad_moe_split(void) {
    mt_tensor *in[5], *idx;
    make_inputs(in, &idx, 61);
    split_user u = {idx, E};
    mt_gradcheck("moe split all", build_split, in, 5, &u, NULL);
    /* subsets: the expert op skips the products nobody needs */
    const int subsets[3][5] = {{0, 1, 0, 0, 1}, {1, 0, 0, 0, 0}, {0, 0, 1, 1, 0}};
    const char *names[3] = {"moe split weight,w2", "moe split x", "moe split w1,w3"};
    mt_gradcheck_subsets(names, 3, &subsets[0][0], build_split, in, 5, &u);

    /* the token-less expert: exactly zero gradients, and NaN weights never reach the output */
    mt_ctx c;
    mt_test_ctx_init(&c);
    for (int i = 0; i < 5; i++) memset(in[i]->grad, 0, mt_nbytes(in[i]));
    mt_tensor *out = build_split(&c, in, &u);
    float seed[N * C], ref[N * C];
    mt_rng rng;
    mt_rng_seed(&rng, 62);
    mt_fill_normal(seed, N * C, 1.0f, &rng);
    mt_backward(&c, out, seed);
    memcpy(ref, out->data, sizeof(ref));
    int nonzero = 0;
    double norm0 = 0;
    for (int i = 2; i < 5; i++)
        for (int j = 0; j < F * C; j++) {
            nonzero += ((const float *)in[i]->grad)[2 * F * C + j] != 0.0f;
            norm0 += fabs(((const float *)in[i]->grad)[j]);
        }
    EXPECT(nonzero == 0, "expert 2 has no tokens but %d of its gradients are not 0.0", nonzero);
    EXPECT(norm0 > 0, "expert 0 has tokens but a zero gradient");
    for (int i = 2; i < 5; i++) ((float *)in[i]->data)[2 * F * C] = NAN;
    mt_ctx_reset(&c);
    out = build_split(&c, in, &u);
    EXPECT(memcmp(out->data, ref, sizeof(ref)) == 0,
           "NaN weights of the token-less expert changed the output");
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* The split composition and the fused op on the same inputs: output and every gradient. Both
 * run the same per-expert body in the same order; the split one weights the rows before the
 * combine adds them, the fused one inside the combine: the same products. */
static void split_vs_fused(mt_dtype mode) {
    mt_tensor *in[5], *idx;
    make_inputs(in, &idx, 71);
    split_user u = {idx, E};
    float *got[6], *want[6];
    const int64_t n_out = N * C;
    for (int pass = 0; pass < 2; pass++) {
        mt_ctx c;
        mt_test_ctx_init(&c);
        c.compute_dtype = mode;
        for (int i = 0; i < 5; i++) memset(in[i]->grad, 0, mt_nbytes(in[i]));
        mt_tensor *out = (pass == 0 ? build_split : build_fused)(&c, in, &u);
        float seed[N * C];
        mt_rng rng;
        mt_rng_seed(&rng, 72);
        mt_fill_normal(seed, n_out, 1.0f, &rng);
        mt_backward(&c, out, seed);
        float **dst = pass == 0 ? got : want;
        dst[0] = malloc(sizeof(float) * (size_t)n_out);
        memcpy(dst[0], out->data, sizeof(float) * (size_t)n_out);
        for (int i = 0; i < 5; i++) {
            dst[i + 1] = malloc(mt_nbytes(in[i]));
            memcpy(dst[i + 1], in[i]->grad, mt_nbytes(in[i]));
        }
        mt_ctx_free(&c);
    }
    const char *names[6] = {"out", "dx", "dweight", "dw1", "dw3", "dw2"};
    for (int i = 0; i < 6; i++) {
        const int64_t n = i == 0 ? n_out : mt_numel(in[i - 1]);
        double mx = 0;
        for (int64_t j = 0; j < n; j++) mx = fmax(mx, fabs(want[i][j]));
        char label[64];
        snprintf(label, sizeof(label), "split vs fused %s %s", mode == MT_BF16 ? "bf16" : "fp32",
                 names[i]);
        mt_check_close(label, got[i], want[i], n, 1e-6 * mx, 1e-6);
        free(got[i]);
        free(want[i]);
    }
}

static int test_op_moe_split_vs_fused(void) {
    split_vs_fused(MT_F32);
    split_vs_fused(MT_BF16);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"grad_moe_split", test_grad_moe_split},
    {"op_moe_split_vs_fused", test_op_moe_split_vs_fused},
};
MT_TEST_MAIN(cases)
