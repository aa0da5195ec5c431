/* gpu_moe.c: the MoE ops of the CUDA backend against the CPU reference (tests/gpu/gpu_ops.c's
 * rules: fp32 1e-5 relative per tensor, integer buffers and untouched gradient elements bit-exact,
 * bf16 judged against the fp32 CPU result): the routers, the fused experts (SiLU and the clamped
 * SwiGLU), the aux loss, the split experts (dispatch, one op per expert, combine) with an empty
 * expert, both in bf16, and the death test of an expert id out of range. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_compare.h"

static mt_tensor *b_moe_route(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_moe_route(c, in[0], *(int *)u, x);
}

int gpu_case_moe_route(void) {
    mt_rng r;
    mt_rng_seed(&r, 17);
    const int64_t N = 40, E = 8;
    gpu_input in[1] = {gpu_f32(&r, 2, (const int64_t[]){N, E}, 2.0f, true, "logits")};
    float *l = in[0].host;
    for (int e = 0; e < E; e++) l[3 * E + e] = 0.25f; /* a row of ties */
    l[5 * E + 2] = l[5 * E + 6] = 4.0f;               /* a tie for first place */
    for (int k = 1; k <= 3; k++) {
        char label[64];
        snprintf(label, sizeof(label), "moe_route k=%d", k);
        gpu_compare(label, b_moe_route, in, 1, &k, plain);
    }
    l[7 * E + 1] = INFINITY; /* diverged rows: NaN weights on experts 0..K-1, on both */
    l[9 * E + 4] = NAN;
    int k = 2;
    gpu_compare("moe_route non-finite rows", b_moe_route, in, 1, &k, plain);
    gpu_inputs_free(in, 1);
    return MT_TEST_OK;
}

static mt_tensor *b_moe_route_sigmoid(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    const int k = *(int *)u;
    return mt_moe_route_sigmoid(c, in[0], in[1], k, k == 4 ? 2.5f : 1.0f, x);
}

/* MiniMax-M2's router: 256 experts top-8 (the release's shape) and 16 top-4 with a routed
 * scaling factor, a bias that changes choices, a row of ties, diverged rows. */
int gpu_case_moe_route_sigmoid(void) {
    mt_rng r;
    mt_rng_seed(&r, 19);
    const int64_t N = 24, E = 256;
    gpu_input in[2] = {gpu_f32(&r, 2, (const int64_t[]){N, E}, 2.0f, true, "logits"),
                       gpu_f32(&r, 1, (const int64_t[]){E}, 0.1f, false, "bias")};
    float *l = in[0].host;
    for (int e = 0; e < E; e++) l[3 * E + e] = 0.25f; /* ties: decided by the bias */
    int k = 8;
    gpu_compare("moe_route_sigmoid E=256 k=8", b_moe_route_sigmoid, in, 2, &k, plain);
    l[7 * E + 1] = INFINITY;
    l[9 * E + 4] = NAN;
    gpu_compare("moe_route_sigmoid non-finite rows", b_moe_route_sigmoid, in, 2, &k, plain);
    gpu_inputs_free(in, 2);
    gpu_input in16[2] = {gpu_f32(&r, 2, (const int64_t[]){40, 16}, 2.0f, true, "logits"),
                         gpu_f32(&r, 1, (const int64_t[]){16}, 0.1f, false, "bias")};
    k = 4;
    gpu_compare("moe_route_sigmoid E=16 k=4 scale 2.5", b_moe_route_sigmoid, in16, 2, &k, plain);
    gpu_inputs_free(in16, 2);
    return MT_TEST_OK;
}

static mt_tensor *b_moe_experts(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_moe_experts(c, in[0], in[1], in[2], in[3], in[4], in[5]);
}

/* x (N,C), idx (N,2): two distinct experts per token out of E = 6, never expert 3 (an empty
 * expert), weight (N,2), w1 and w3 (E,F,C), w2 (E,C,F). */
static void moe_inputs(mt_rng *r, int64_t N, int64_t C, int64_t F, int64_t E, gpu_input *in) {
    const int64_t K = 2;
    int32_t *idx = mt_malloc(sizeof(int32_t) * (size_t)(N * K), "idx");
    for (int64_t n = 0; n < N; n++) {
        int a = (int)(mt_rng_u64(r) % 5), b = (a + 1 + (int)(mt_rng_u64(r) % 4)) % 5;
        idx[n * K] = a >= 3 ? a + 1 : a;
        idx[n * K + 1] = b >= 3 ? b + 1 : b;
    }
    in[0] = gpu_f32(r, 2, (const int64_t[]){N, C}, 1.0f, true, "x");
    in[1] = gpu_i32(2, (const int64_t[]){N, K}, idx, "idx");
    in[2] = gpu_f32(r, 2, (const int64_t[]){N, K}, 0.5f, true, "weight");
    in[3] = gpu_f32(r, 3, (const int64_t[]){E, F, C}, 0.3f, true, "w1");
    in[4] = gpu_f32(r, 3, (const int64_t[]){E, F, C}, 0.3f, true, "w3");
    in[5] = gpu_f32(r, 3, (const int64_t[]){E, C, F}, 0.3f, true, "w2");
    free(idx);
}

int gpu_case_moe_experts(void) {
    mt_rng r;
    mt_rng_seed(&r, 18);
    const int64_t N = 24, C = 16, F = 20, E = 6;
    gpu_input in[6];
    moe_inputs(&r, N, C, F, E, in);
    gpu_compare("moe_experts", b_moe_experts, in, 6, NULL, exact);
    in[0].grad = in[2].grad = false; /* weight gradients only: the dx path is skipped */
    gpu_compare("moe_experts weights only", b_moe_experts, in, 6, NULL, exact);
    gpu_inputs_free(in, 6);
    return MT_TEST_OK;
}

/* The experts with the clamped SwiGLU, fused and split, at a limit (1.0) the pre-activations
 * (std about 1.2) cross on both sides; fp32 and bf16. */
static const mt_act gpu_act_small = {true, 1.702f, 1.0f, 1.0f};
static mt_tensor *b_moe_experts_oai(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_moe_experts_act(c, in[0], in[1], in[2], in[3], in[4], in[5], &gpu_act_small);
}
static mt_tensor *b_moe_split_oai(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x);

int gpu_case_moe_experts_oai(void) {
    mt_rng r;
    mt_rng_seed(&r, 19);
    const int64_t N = 24, C = 16, F = 20, E = 6;
    gpu_input in[6];
    moe_inputs(&r, N, C, F, E, in);
    gpu_compare("moe_experts swigluoai", b_moe_experts_oai, in, 6, NULL, exact);
    gpu_compare("moe split swigluoai", b_moe_split_oai, in, 6, NULL, exact);
    gpu_compare_bf16("moe_experts swigluoai bf16", b_moe_experts_oai, in, 6, NULL);
    gpu_compare_bf16("moe split swigluoai bf16", b_moe_split_oai, in, 6, NULL);
    gpu_inputs_free(in, 6);
    return MT_TEST_OK;
}

static mt_tensor *b_moe_aux(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_moe_aux(c, in[0], in[1]);
}

int gpu_case_moe_aux(void) {
    mt_rng r;
    mt_rng_seed(&r, 19);
    gpu_input in[2] = {gpu_f32(&r, 2, (const int64_t[]){30, 8}, 2.0f, true, "logits"),
                       gpu_f32(&r, 1, (const int64_t[]){8}, 1.0f, false, "coef")};
    float *coef = in[1].host;
    for (int e = 0; e < 8; e++) coef[e] = fabsf(coef[e]);
    gpu_compare("moe_aux", b_moe_aux, in, 2, NULL, plain);
    gpu_inputs_free(in, 2);
    return MT_TEST_OK;
}

int gpu_case_moe_experts_bf16(void) {
    mt_rng r;
    mt_rng_seed(&r, 22);
    const int64_t N = 24, C = 32, F = 40, E = 6;
    gpu_input in[6];
    moe_inputs(&r, N, C, F, E, in);
    gpu_compare_bf16("moe_experts bf16", b_moe_experts, in, 6, NULL);
    in[0].grad = in[2].grad = false; /* weight gradients only: the dx path is skipped */
    gpu_compare_bf16("moe_experts bf16 weights only", b_moe_experts, in, 6, NULL);
    gpu_inputs_free(in, 6);
    return MT_TEST_OK;
}

/* The split experts (autograd/ops.h): dispatch, one op per expert, combine, on moe_inputs' tensors.
 * Each expert op gets its rows of the stacked (E,F,C) / (E,C,F) weights (and of their gradients)
 * as a view, so the stacked inputs' gradients collect every expert's. *u selects what the
 * builder returns: MOE_SPLIT_Y the combined y (the whole chain), MOE_SPLIT_XS the dispatch's xs
 * (its node's offsets, perm and inv are then compared), MOE_SPLIT_YS the experts' ys (the last
 * expert's h1 and h3 compared). */
enum { MOE_SPLIT_Y, MOE_SPLIT_XS, MOE_SPLIT_YS };

static mt_tensor *moe_expert_view(mt_ctx *c, mt_tensor *w, int e, const char *name) {
    const int64_t rows = w->shape[1], cols = w->shape[2], per = rows * cols;
    mt_tensor *v = mt_arena_alloc(&c->host, sizeof(mt_tensor), "expert weight view");
    mt_tensor_wrap(v, MT_F32, 2, (const int64_t[]){rows, cols}, (float *)w->data + e * per,
                   w->grad ? (float *)w->grad + e * per : NULL, name);
    v->dev = w->dev;
    return v;
}

static mt_tensor *b_moe_split(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    const int mode = *(int *)u, E = (int)in[3]->shape[0];
    mt_moe_plan plan;
    mt_tensor *xs = mt_moe_dispatch(c, in[0], in[1], E, &plan);
    if (mode == MOE_SPLIT_XS) return xs;
    mt_tensor *ys = mt_moe_expert_out(c, &plan, xs->shape[1]);
    for (int e = 0; e < E; e++)
        mt_moe_expert_ffn(c, xs, &plan, in[2], e, moe_expert_view(c, in[3], e, "w1_e"),
                          moe_expert_view(c, in[4], e, "w3_e"),
                          moe_expert_view(c, in[5], e, "w2_e"), ys);
    if (mode == MOE_SPLIT_YS) return ys;
    return mt_moe_combine(c, ys, &plan);
}

static mt_tensor *b_moe_split_oai(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    const int E = (int)in[3]->shape[0];
    mt_moe_plan plan;
    mt_tensor *xs = mt_moe_dispatch(c, in[0], in[1], E, &plan);
    mt_tensor *ys = mt_moe_expert_out(c, &plan, xs->shape[1]);
    for (int e = 0; e < E; e++)
        mt_moe_expert_ffn_act(c, xs, &plan, in[2], e, moe_expert_view(c, in[3], e, "w1_e"),
                              moe_expert_view(c, in[4], e, "w3_e"),
                              moe_expert_view(c, in[5], e, "w2_e"), ys, &gpu_act_small);
    return mt_moe_combine(c, ys, &plan);
}

/* On the device alone, with every gradient starting at zero: the weight gradients of expert
 * `empty` (which no token chose) must stay exactly +0 (its op does nothing at all), those of
 * the other experts must not. */
static void moe_split_empty_expert(const char *label, gpu_input *ins, int empty, mt_dtype cd) {
    mt_rng r;
    mt_rng_seed(&r, 99);
    mt_ctx c;
    mt_ctx_init(&c, dev_be, GPU_ARENA, 64);
    c.compute_dtype = cd;
    dev_be->to_device(c.arena.base, poison, GPU_ARENA);
    mt_tensor t[6];
    mt_tensor *p[6];
    for (int i = 0; i < 6; i++) {
        const size_t nb = (size_t)gpu_numel(&ins[i]) * mt_dtype_size(ins[i].dt);
        void *d = dev_be->alloc(nb), *dg = NULL;
        MT_CHECK(d, "%s: cannot allocate %s", label, ins[i].name);
        dev_be->to_device(d, ins[i].host, nb);
        if (ins[i].grad) {
            void *zero = calloc(1, nb);
            dg = dev_be->alloc(nb);
            MT_CHECK(zero && dg, "%s: cannot allocate the gradient of %s", label, ins[i].name);
            dev_be->to_device(dg, zero, nb);
            free(zero);
        }
        mt_tensor_wrap(&t[i], ins[i].dt, ins[i].ndim, ins[i].shape, d, dg, ins[i].name);
        t[i].dev = dev_be->dev;
        p[i] = &t[i];
    }
    int mode = MOE_SPLIT_Y;
    mt_tensor *y = b_moe_split(&c, p, &mode, NULL);
    const int64_t ny = mt_numel(y);
    float *seed = mt_malloc(sizeof(float) * (size_t)ny, "seed");
    mt_fill_normal(seed, ny, 1.0f, &r);
    mt_backward(&c, y, seed);
    free(seed);
    for (int i = 3; i < 6; i++) {
        const int64_t per = t[i].shape[1] * t[i].shape[2], E = t[i].shape[0];
        float *g = mt_malloc(sizeof(float) * (size_t)(E * per), "gradient");
        dev_be->to_host(g, t[i].grad, sizeof(float) * (size_t)(E * per));
        int64_t nonzero_empty = 0, zero_used = 0;
        const float pz = 0.0f;
        for (int64_t e = 0; e < E; e++)
            for (int64_t j = 0; j < per; j++) {
                const bool is_pz = !memcmp(&g[e * per + j], &pz, sizeof(float));
                if (e == empty)
                    nonzero_empty += !is_pz;
                else
                    zero_used += g[e * per + j] == 0.0f;
            }
        EXPECT(nonzero_empty == 0, "%s: d%s of the empty expert %d: %lld of %lld elements not +0",
               label, t[i].name, empty, (long long)nonzero_empty, (long long)per);
        EXPECT(zero_used < per, "%s: d%s of the used experts is mostly zero (%lld)", label,
               t[i].name, (long long)zero_used);
        printf("  %-32s d%s of empty expert %d: %lld of %lld elements not +0\n", label, t[i].name,
               empty, (long long)nonzero_empty, (long long)per);
        free(g);
    }
    for (int i = 0; i < 6; i++) {
        dev_be->free(t[i].data);
        if (t[i].grad) dev_be->free(t[i].grad);
    }
    mt_ctx_free(&c);
}

int gpu_case_moe_split(void) {
    mt_rng r;
    mt_rng_seed(&r, 30);
    const int64_t N = 24, C = 16, F = 20, E = 6;
    gpu_input in[6];
    moe_inputs(&r, N, C, F, E, in); /* expert 3 gets no token */
    int mode = MOE_SPLIT_Y;
    gpu_compare("moe split", b_moe_split, in, 6, &mode, exact);
    mode = MOE_SPLIT_XS;
    gpu_compare("moe split dispatch", b_moe_split, in, 6, &mode, exact);
    mode = MOE_SPLIT_YS;
    gpu_compare("moe split experts", b_moe_split, in, 6, &mode, exact);
    mode = MOE_SPLIT_Y;
    in[3].grad = in[4].grad = in[5].grad = false; /* frozen experts: dx and dweight only */
    gpu_compare("moe split frozen experts", b_moe_split, in, 6, &mode, exact);
    in[3].grad = in[4].grad = in[5].grad = true;
    in[0].grad = in[2].grad = false; /* weight gradients only: no dx path, no dispatch backward */
    gpu_compare("moe split weights only", b_moe_split, in, 6, &mode, exact);
    in[0].grad = in[2].grad = true;
    for (int i = 0; i < 6; i++) in[i].grad = false; /* no backward: h1, h3 are scratch */
    gpu_compare("moe split forward only", b_moe_split, in, 6, &mode, exact);
    for (int i = 0; i < 6; i++) in[i].grad = i != 1;
    moe_split_empty_expert("moe split empty expert", in, 3, MT_F32);
    gpu_inputs_free(in, 6);
    /* the device's expert sort at MiniMax-M2's width (kernels/cuda/sort.cuh): E = 256 experts,
     * K = 8 distinct experts per token, 1500 tokens (12000 assignments: 12 chunks of the count
     * and place kernels), experts 0 and 250..255 empty; the dispatch alone (offsets, perm and
     * inv exact, xs, and dx from the combine of dxs) */
    enum { NM = 1500, KM = 8, EM = 256, CM = 4 };
    int32_t *idx = mt_malloc(sizeof(int32_t) * NM * KM, "idx");
    for (int n = 0; n < NM; n++)
        for (int j = 0; j < KM; j++) {
            int32_t e;
            bool seen;
            do { /* a distinct expert in 1..249 */
                e = 1 + (int32_t)(mt_rng_u64(&r) % 249);
                seen = false;
                for (int k = 0; k < j; k++) seen |= idx[n * KM + k] == e;
            } while (seen);
            idx[n * KM + j] = e;
        }
    gpu_input wide[6] = {gpu_f32(&r, 2, (const int64_t[]){NM, CM}, 1.0f, true, "x"),
                         gpu_i32(2, (const int64_t[]){NM, KM}, idx, "idx"),
                         gpu_f32(&r, 2, (const int64_t[]){NM, KM}, 0.5f, false, "weight"),
                         gpu_f32(&r, 3, (const int64_t[]){EM, CM, CM}, 0.3f, false, "w1"),
                         gpu_f32(&r, 3, (const int64_t[]){EM, CM, CM}, 0.3f, false, "w3"),
                         gpu_f32(&r, 3, (const int64_t[]){EM, CM, CM}, 0.3f, false, "w2")};
    free(idx);
    mode = MOE_SPLIT_XS;
    gpu_compare("moe split dispatch E=256 K=8 N=1500", b_moe_split, wide, 6, &mode, exact);
    gpu_inputs_free(wide, 6);
    return MT_TEST_OK;
}

int gpu_case_moe_split_bf16(void) {
    mt_rng r;
    mt_rng_seed(&r, 31);
    const int64_t N = 24, C = 32, F = 40, E = 6;
    gpu_input in[6];
    moe_inputs(&r, N, C, F, E, in); /* expert 3 gets no token */
    int mode = MOE_SPLIT_Y;
    gpu_compare_bf16("moe split bf16", b_moe_split, in, 6, &mode);
    mode = MOE_SPLIT_YS;
    gpu_compare_bf16("moe split bf16 experts", b_moe_split, in, 6, &mode);
    mode = MOE_SPLIT_Y;
    in[0].grad = in[2].grad = false; /* weight gradients only */
    gpu_compare_bf16("moe split bf16 weights only", b_moe_split, in, 6, &mode);
    in[0].grad = in[2].grad = true;
    moe_split_empty_expert("moe split bf16 empty expert", in, 3, MT_BF16);
    gpu_inputs_free(in, 6);
    return MT_TEST_OK;
}

/* An expert id outside [0, E) must end the run naming its position (the device's sort flags it
 * and leaves it out, so it indexes nothing first): ids 6 at [5,1] and -1 at [9,0], E = 6; the
 * first in assignment order is named. A death test (tests/gpu/gpu.cmake matches the message), so
 * not among GPU_CASES, which the harness runs in one process. */
int gpu_moe_bad_id(void) {
    if (gpu_setup() == MT_TEST_SKIP) return MT_TEST_SKIP;
    mt_rng r;
    mt_rng_seed(&r, 18);
    gpu_input in[6];
    moe_inputs(&r, 24, 16, 20, 6, in);
    int32_t *idx = in[1].host;
    idx[5 * 2 + 1] = 6;
    idx[9 * 2] = -1;
    mt_ctx c;
    mt_ctx_init(&c, dev_be, GPU_ARENA, 64);
    mt_tensor t[6];
    mt_tensor *p[6];
    for (int i = 0; i < 6; i++) {
        const size_t nb = (size_t)gpu_numel(&in[i]) * mt_dtype_size(in[i].dt);
        void *d = dev_be->alloc(nb);
        MT_CHECK(d, "gpu_moe_bad_id: cannot allocate %s", in[i].name);
        dev_be->to_device(d, in[i].host, nb);
        mt_tensor_wrap(&t[i], in[i].dt, in[i].ndim, in[i].shape, d, NULL, in[i].name);
        t[i].dev = dev_be->dev;
        p[i] = &t[i];
    }
    b_moe_experts(&c, p, NULL, NULL);
    printf("gpu_moe_bad_id: the bad ids were not refused\n");
    return 1;
}
