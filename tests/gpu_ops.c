/* gpu_ops.c: every op of the CUDA backend against the CPU reference backend on the same random
 * inputs: the output, every buffer the node saves (rstd, lse, router p and idx, the MoE
 * permutation and pre-activations) and every input gradient after a backward from the same
 * random seed, with input gradients pre-filled with random values so the backward's
 * accumulation (+=) is checked too. fp32 rule: ||gpu - cpu|| / ||cpu|| <= 1e-5 per tensor,
 * integer buffers bit-exact, and where the CPU leaves a gradient element untouched (an empty
 * expert, an unused embedding row, an ignored label) the GPU must leave it bit-identical.
 * The device arena is filled with NaN bytes first, so an output element a kernel forgets to
 * write, or a scratch buffer read before it is written, shows up as a mismatch.
 *
 * Cases gpu_<op> exit 77 (skipped) when the CUDA backend is not built or no device is usable.
 * Case op_gpu_harness runs every comparison with the CPU backend standing in for the device,
 * so the comparison code itself is exercised (and sanitised) on machines without a GPU. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GPU_TOL   1e-5
#define GPU_ARENA ((size_t)16 << 20)
#define GPU_NODES 64

static const mt_backend *dev_be; /* the backend under test */
static void *poison;             /* GPU_ARENA bytes of 0xff: NaN as f32 */

/* ---- inputs ---- */

typedef struct {
    bool present; /* false: a NULL input (optional seg) */
    mt_dtype dt;
    int ndim;
    int64_t shape[MT_MAX_DIMS];
    bool grad;
    const char *name;
    void *host; /* numel elements of dt, owned */
} gpu_input;

static int64_t gpu_numel(const gpu_input *g) {
    int64_t n = 1;
    for (int i = 0; i < g->ndim; i++) n *= g->shape[i];
    return n;
}

static gpu_input gpu_f32(mt_rng *r, int ndim, const int64_t *shape, float amp, bool grad,
                         const char *name) {
    gpu_input g = {.present = true, .dt = MT_F32, .ndim = ndim, .grad = grad, .name = name};
    memcpy(g.shape, shape, sizeof(int64_t) * (size_t)ndim);
    int64_t n = gpu_numel(&g);
    g.host = mt_malloc(sizeof(float) * (size_t)(n ? n : 1), name);
    mt_fill_normal(g.host, n, amp, r);
    return g;
}

static gpu_input gpu_i32(int ndim, const int64_t *shape, const int32_t *vals, const char *name) {
    gpu_input g = {.present = true, .dt = MT_I32, .ndim = ndim, .name = name};
    memcpy(g.shape, shape, sizeof(int64_t) * (size_t)ndim);
    int64_t n = gpu_numel(&g);
    g.host = mt_malloc(sizeof(int32_t) * (size_t)(n ? n : 1), name);
    memcpy(g.host, vals, sizeof(int32_t) * (size_t)n);
    return g;
}

static gpu_input gpu_none(void) { return (gpu_input){.present = false}; }

static void gpu_inputs_free(gpu_input *ins, int n) {
    for (int i = 0; i < n; i++) free(ins[i].host);
}

/* ---- comparison ---- */

typedef mt_tensor *(*gpu_build)(mt_ctx *c, mt_tensor **in, void *user, mt_tensor **extra);

typedef struct {
    bool exact_untouched; /* gradient elements the CPU leaves alone must stay bit-identical */
} gpu_opts;

/* Downloads t's data (or grad) from the device backend into a new host buffer. */
static void *gpu_download(const mt_tensor *t, bool grad) {
    size_t nb = mt_nbytes(t);
    void *h = mt_malloc(nb ? nb : 4, "download");
    dev_be->to_host(h, grad ? t->grad : t->data, nb);
    return h;
}

static void gpu_check(const char *label, const char *what, const mt_tensor *dev_t,
                      const void *cpu_data, bool grad) {
    char full[160];
    snprintf(full, sizeof(full), "%s %s", label, what);
    void *got = gpu_download(dev_t, grad);
    int64_t n = mt_numel(dev_t);
    if (dev_t->dtype == MT_F32) {
        /* Non-finite values must match in place (a diverged router row propagates NaN on both
         * backends); they are then left out of the norm. */
        float *a = got, *b = mt_malloc(sizeof(float) * (size_t)(n ? n : 1), "reference copy");
        memcpy(b, cpu_data, sizeof(float) * (size_t)n);
        int64_t odd = 0, same = 0;
        for (int64_t i = 0; i < n; i++) {
            if (isfinite(a[i]) && isfinite(b[i])) continue;
            bool match = (isnan(a[i]) && isnan(b[i])) || a[i] == b[i];
            if (!match && odd++ < 5)
                printf("  %s[%lld]: got %g want %g\n", full, (long long)i, (double)a[i],
                       (double)b[i]);
            same += match;
            a[i] = b[i] = 0.0f;
        }
        EXPECT(odd == 0, "%s: %lld non-finite values differ", full, (long long)odd);
        if (same) printf("  %-32s %lld matching non-finite values\n", full, (long long)same);
        mt_check_rel_l2(full, a, b, n, GPU_TOL);
        free(b);
    } else {
        int64_t bad = 0;
        const int32_t *a = got, *b = cpu_data;
        for (int64_t i = 0; i < n; i++)
            if (a[i] != b[i] && bad++ < 5)
                printf("  %s[%lld]: got %d want %d\n", full, (long long)i, a[i], b[i]);
        EXPECT(bad == 0, "%s: %lld of %lld integers differ", full, (long long)bad, (long long)n);
        printf("  %-32s n=%-8lld %s\n", full, (long long)n, bad ? "MISMATCH" : "exact");
    }
    free(got);
}

/* Runs build on the CPU backend and on the device backend with the same inputs and compares
 * outputs, saved buffers and input gradients. */
static void gpu_compare(const char *label, gpu_build build, gpu_input *ins, int n_in, void *user,
                        gpu_opts opts) {
    mt_rng r;
    uint64_t h = 1469598103934665603ull;
    for (const char *p = label; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    mt_rng_seed(&r, h);

    mt_ctx cc, dc;
    mt_ctx_init(&cc, mt_backend_cpu(), GPU_ARENA, GPU_NODES);
    mt_ctx_init(&dc, dev_be, GPU_ARENA, GPU_NODES);
    dev_be->to_device(dc.arena.base, poison, GPU_ARENA);

    mt_tensor tc[MT_MAX_IN], td[MT_MAX_IN];
    mt_tensor *pc[MT_MAX_IN] = {0}, *pd[MT_MAX_IN] = {0};
    float *g0[MT_MAX_IN] = {0};
    for (int i = 0; i < n_in; i++) {
        gpu_input *g = &ins[i];
        if (!g->present) continue;
        int64_t n = gpu_numel(g);
        size_t nb = (size_t)n * mt_dtype_size(g->dt);
        void *hc = mt_malloc(nb ? nb : 4, "cpu input");
        memcpy(hc, g->host, nb);
        void *dd = dev_be->alloc(nb);
        MT_CHECK(dd, "%s: cannot allocate input %s on %s", label, g->name, dev_be->name);
        dev_be->to_device(dd, g->host, nb);
        float *gc = NULL;
        void *dg = NULL;
        if (g->grad) {
            g0[i] = mt_malloc(nb ? nb : 4, "initial grad");
            mt_fill_normal(g0[i], n, 0.5f, &r);
            gc = mt_malloc(nb ? nb : 4, "cpu grad");
            memcpy(gc, g0[i], nb);
            dg = dev_be->alloc(nb);
            MT_CHECK(dg, "%s: cannot allocate the gradient of %s", label, g->name);
            dev_be->to_device(dg, g0[i], nb);
        }
        mt_tensor_wrap(&tc[i], g->dt, g->ndim, g->shape, hc, gc, g->name);
        mt_tensor_wrap(&td[i], g->dt, g->ndim, g->shape, dd, dg, g->name);
        td[i].dev = dev_be->dev;
        pc[i] = &tc[i];
        pd[i] = &td[i];
    }

    mt_tensor *ec = NULL, *ed = NULL;
    mt_tensor *oc = build(&cc, pc, user, &ec);
    mt_tensor *od = build(&dc, pd, user, &ed);
    printf("%s: out %s on %s\n", label, mt_shape_str(oc), dev_be->name);
    gpu_check(label, "out", od, oc->data, false);
    if (ec) gpu_check(label, ec->name, ed, ec->data, false);
    if (oc->requires_grad) { /* the op's own node is the last one on each tape */
        const mt_node *nc = &cc.nodes[cc.n_nodes - 1], *nd = &dc.nodes[dc.n_nodes - 1];
        for (int k = 0; k < MT_MAX_SAVED; k++) {
            EXPECT(!nc->saved[k] == !nd->saved[k], "%s: saved[%d] present on one backend only",
                   label, k);
            if (nc->saved[k] && nd->saved[k])
                gpu_check(label, nc->saved[k]->name, nd->saved[k], nc->saved[k]->data, false);
        }

        int64_t no = mt_numel(oc);
        float *seed = mt_malloc(sizeof(float) * (size_t)(no ? no : 1), "seed");
        mt_fill_normal(seed, no, 1.0f, &r);
        mt_backward(&cc, oc, seed);
        mt_backward(&dc, od, seed);
        free(seed);
        for (int i = 0; i < n_in; i++) {
            if (!pc[i] || !pc[i]->grad) continue;
            char what[64];
            snprintf(what, sizeof(what), "d%s", pc[i]->name);
            gpu_check(label, what, pd[i], pc[i]->grad, true);
            if (!opts.exact_untouched) continue;
            float *got = gpu_download(pd[i], true);
            const float *want = pc[i]->grad;
            int64_t n = mt_numel(pc[i]), untouched = 0, moved = 0;
            for (int64_t j = 0; j < n; j++) {
                if (memcmp(&want[j], &g0[i][j], sizeof(float)) != 0) continue;
                untouched++;
                moved += memcmp(&got[j], &g0[i][j], sizeof(float)) != 0;
            }
            EXPECT(moved == 0,
                   "%s: %lld of the %lld elements of %s the CPU leaves untouched "
                   "were changed",
                   label, (long long)moved, (long long)untouched, what);
            printf("  %-32s %lld untouched elements, %lld changed\n", what, (long long)untouched,
                   (long long)moved);
            free(got);
        }
    }

    for (int i = 0; i < n_in; i++) {
        if (!pc[i]) continue;
        free(tc[i].data);
        free(tc[i].grad);
        free(g0[i]);
        dev_be->free(td[i].data);
        if (td[i].grad) dev_be->free(td[i].grad);
    }
    mt_ctx_free(&cc);
    mt_ctx_free(&dc);
}

static const gpu_opts plain = {0}, exact = {.exact_untouched = true};

/* ---- the ops ---- */

static mt_tensor *b_view(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_view(c, in[0], 3, (const int64_t[]){2, 12, 5});
}

static int case_view(void) {
    mt_rng r;
    mt_rng_seed(&r, 1);
    gpu_input in[1] = {gpu_f32(&r, 3, (const int64_t[]){4, 6, 5}, 1.0f, true, "x")};
    gpu_compare("view", b_view, in, 1, NULL, plain);
    gpu_inputs_free(in, 1);
    return MT_TEST_OK;
}

static mt_tensor *b_embedding(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_embedding(c, in[0], in[1]);
}

static int case_embedding(void) {
    mt_rng r;
    mt_rng_seed(&r, 2);
    int32_t ids[21];
    for (int i = 0; i < 21; i++) ids[i] = (int32_t)(mt_rng_u64(&r) % 9); /* rows 9, 10 unused */
    ids[4] = ids[5] = ids[17] = 3;                                       /* repeats accumulate */
    gpu_input in[2] = {gpu_i32(2, (const int64_t[]){3, 7}, ids, "ids"),
                       gpu_f32(&r, 2, (const int64_t[]){11, 16}, 1.0f, true, "table")};
    gpu_compare("embedding", b_embedding, in, 2, NULL, exact);
    gpu_inputs_free(in, 2);
    return MT_TEST_OK;
}

static mt_tensor *b_matmul(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_matmul(c, in[0], in[1]);
}

static int case_matmul(void) {
    mt_rng r;
    mt_rng_seed(&r, 3);
    gpu_input in[2] = {gpu_f32(&r, 3, (const int64_t[]){5, 7, 33}, 1.0f, true, "x"),
                       gpu_f32(&r, 2, (const int64_t[]){29, 33}, 0.3f, true, "w")};
    gpu_compare("matmul", b_matmul, in, 2, NULL, plain);
    in[0].grad = false; /* weight gradient only */
    gpu_compare("matmul dw only", b_matmul, in, 2, NULL, plain);
    gpu_inputs_free(in, 2);
    return MT_TEST_OK;
}

static mt_tensor *b_rmsnorm(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_rmsnorm(c, in[0], in[1], 1e-6f, *(bool *)u);
}

static int case_rmsnorm(void) {
    mt_rng r;
    mt_rng_seed(&r, 4);
    gpu_input in[2] = {gpu_f32(&r, 3, (const int64_t[]){6, 10, 48}, 2.0f, true, "x"),
                       gpu_f32(&r, 1, (const int64_t[]){48}, 1.0f, true, "w")};
    bool gemma = false;
    gpu_compare("rmsnorm", b_rmsnorm, in, 2, &gemma, plain);
    gemma = true;
    gpu_compare("rmsnorm gemma", b_rmsnorm, in, 2, &gemma, plain);
    gpu_inputs_free(in, 2);
    return MT_TEST_OK;
}

/* Elementwise inputs with a few extreme values (the sigmoid's two branches, saturation). */
static gpu_input gpu_wide(mt_rng *r, const char *name) {
    gpu_input g = gpu_f32(r, 2, (const int64_t[]){25, 40}, 4.0f, true, name);
    float *v = g.host;
    const float extremes[8] = {-90.0f, -30.0f, -12.0f, -0.0f, 0.0f, 12.0f, 30.0f, 90.0f};
    for (int i = 0; i < 8; i++) v[37 * i + 5] = extremes[i];
    return g;
}

static mt_tensor *b_silu(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_silu(c, in[0]);
}
static mt_tensor *b_sigmoid(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_sigmoid(c, in[0]);
}
static mt_tensor *b_swiglu(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_swiglu(c, in[0], in[1]);
}
static mt_tensor *b_add(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_add(c, in[0], in[1] ? in[1] : in[0]);
}
static mt_tensor *b_mul(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_mul(c, in[0], in[1] ? in[1] : in[0]);
}
static mt_tensor *b_scale(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_scale(c, in[0], -1.7f);
}
static mt_tensor *b_axpby(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_axpby(c, 0.7f, in[0], -1.3f, in[1] ? in[1] : in[0]);
}

/* One input, or two (and the aliased form op(a, a) when alias is set). */
static int elementwise_case(const char *label, gpu_build build, int n_in, bool alias,
                            uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    gpu_input in[2] = {gpu_wide(&r, "a"), n_in > 1 ? gpu_wide(&r, "b") : gpu_none()};
    gpu_compare(label, build, in, n_in, NULL, plain);
    if (alias) {
        char l2[64];
        snprintf(l2, sizeof(l2), "%s aliased", label);
        gpu_input one[2] = {in[0], gpu_none()};
        gpu_compare(l2, build, one, 2, NULL, plain);
    }
    gpu_inputs_free(in, n_in);
    return MT_TEST_OK;
}

static int case_silu(void) { return elementwise_case("silu", b_silu, 1, false, 5); }
static int case_sigmoid(void) { return elementwise_case("sigmoid", b_sigmoid, 1, false, 6); }
static int case_swiglu(void) { return elementwise_case("swiglu", b_swiglu, 2, false, 7); }
static int case_add(void) { return elementwise_case("add", b_add, 2, true, 8); }
static int case_mul(void) { return elementwise_case("mul", b_mul, 2, true, 9); }
static int case_scale(void) { return elementwise_case("scale", b_scale, 1, false, 10); }
static int case_axpby(void) { return elementwise_case("axpby", b_axpby, 2, true, 11); }

static mt_tensor *b_rope(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_rope(c, in[0], in[1], *(int *)u, 10000.0f);
}

static int case_rope(void) {
    mt_rng r;
    mt_rng_seed(&r, 12);
    int32_t pos[18];
    for (int i = 0; i < 18; i++) pos[i] = (int32_t)(mt_rng_u64(&r) % 300000);
    pos[0] = 0;
    gpu_input in[2] = {gpu_f32(&r, 4, (const int64_t[]){2, 9, 3, 16}, 1.0f, true, "x"),
                       gpu_i32(2, (const int64_t[]){2, 9}, pos, "pos")};
    int rot = 8; /* partial: half of each head passes through */
    gpu_compare("rope partial", b_rope, in, 2, &rot, plain);
    rot = 16;
    gpu_compare("rope full", b_rope, in, 2, &rot, plain);
    gpu_inputs_free(in, 2);
    return MT_TEST_OK;
}

static mt_tensor *b_attention(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_attention(c, in[0], in[1], in[2], in[3], 0.25f);
}

static int attention_run(const char *label, int64_t Hkv, bool with_seg, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    const int64_t B = 2, T = 13, H = 4, D = 16;
    int32_t seg[26];
    for (int t = 0; t < T; t++) {
        seg[t] = t < 5 ? 0 : t < 9 ? 1 : 2; /* three packed samples */
        seg[T + t] = 5;                     /* one sample */
    }
    gpu_input in[4] = {gpu_f32(&r, 4, (const int64_t[]){B, T, H, D}, 1.0f, true, "q"),
                       gpu_f32(&r, 4, (const int64_t[]){B, T, Hkv, D}, 1.0f, true, "k"),
                       gpu_f32(&r, 4, (const int64_t[]){B, T, Hkv, D}, 1.0f, true, "v"),
                       with_seg ? gpu_i32(2, (const int64_t[]){B, T}, seg, "seg") : gpu_none()};
    gpu_compare(label, b_attention, in, 4, NULL, plain);
    gpu_inputs_free(in, 4);
    return MT_TEST_OK;
}

static int case_attention(void) {
    attention_run("attention gqa seg", 2, true, 13);
    attention_run("attention gqa", 2, false, 14);
    attention_run("attention mqa seg", 1, true, 15);
    return MT_TEST_OK;
}

static mt_tensor *b_lightning(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_lightning(c, in[0], in[1], in[2], *(int *)u);
}

static int case_lightning(void) {
    mt_rng r;
    mt_rng_seed(&r, 16);
    const int64_t B = 2, T = 37, H = 3, D = 16;
    int32_t seg[74];
    for (int t = 0; t < T; t++) {
        seg[t] = t < 8 ? 0 : t < 13 ? 1 : t < 30 ? 2 : 3; /* resets at 8 (a block edge), 13, 30 */
        seg[T + t] = 7;
    }
    gpu_input in[3] = {gpu_f32(&r, 4, (const int64_t[]){B, T, H, 3 * D}, 0.5f, true, "qkv"),
                       gpu_f32(&r, 1, (const int64_t[]){H}, 1.0f, false, "decay"),
                       gpu_i32(2, (const int64_t[]){B, T}, seg, "seg")};
    float *lam = in[1].host;
    lam[0] = 0.05f;
    lam[1] = 0.3f;
    lam[2] = 1.2f;
    const int blocks[4] = {0, 8, 5, 64}; /* naive; T not a multiple; block > T */
    for (int i = 0; i < 4; i++) {
        int block = blocks[i];
        char label[64];
        snprintf(label, sizeof(label), "lightning seg block %d", block);
        gpu_compare(label, b_lightning, in, 3, &block, plain);
    }
    gpu_input noseg[3] = {in[0], in[1], gpu_none()};
    int block = 8;
    gpu_compare("lightning block 8", b_lightning, noseg, 3, &block, plain);
    block = 0;
    gpu_compare("lightning naive", b_lightning, noseg, 3, &block, plain);
    gpu_inputs_free(in, 3);
    return MT_TEST_OK;
}

static mt_tensor *b_moe_route(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_moe_route(c, in[0], *(int *)u, x);
}

static int case_moe_route(void) {
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

static mt_tensor *b_moe_experts(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_moe_experts(c, in[0], in[1], in[2], in[3], in[4], in[5]);
}

static int case_moe_experts(void) {
    mt_rng r;
    mt_rng_seed(&r, 18);
    const int64_t N = 24, C = 16, F = 20, E = 6, K = 2;
    int32_t idx[48];
    for (int n = 0; n < N; n++) { /* two distinct experts per token, never expert 3 */
        int a = (int)(mt_rng_u64(&r) % 5), b = (a + 1 + (int)(mt_rng_u64(&r) % 4)) % 5;
        idx[n * K] = a >= 3 ? a + 1 : a;
        idx[n * K + 1] = b >= 3 ? b + 1 : b;
    }
    gpu_input in[6] = {gpu_f32(&r, 2, (const int64_t[]){N, C}, 1.0f, true, "x"),
                       gpu_i32(2, (const int64_t[]){N, K}, idx, "idx"),
                       gpu_f32(&r, 2, (const int64_t[]){N, K}, 0.5f, true, "weight"),
                       gpu_f32(&r, 3, (const int64_t[]){E, F, C}, 0.3f, true, "w1"),
                       gpu_f32(&r, 3, (const int64_t[]){E, F, C}, 0.3f, true, "w3"),
                       gpu_f32(&r, 3, (const int64_t[]){E, C, F}, 0.3f, true, "w2")};
    gpu_compare("moe_experts", b_moe_experts, in, 6, NULL, exact);
    in[0].grad = in[2].grad = false; /* weight gradients only: the dx path is skipped */
    gpu_compare("moe_experts weights only", b_moe_experts, in, 6, NULL, exact);
    gpu_inputs_free(in, 6);
    return MT_TEST_OK;
}

static mt_tensor *b_moe_aux(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_moe_aux(c, in[0], in[1]);
}

static int case_moe_aux(void) {
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

static mt_tensor *b_cross_entropy(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_cross_entropy(c, in[0], in[1], *(float *)u);
}

static int case_cross_entropy(void) {
    mt_rng r;
    mt_rng_seed(&r, 20);
    const int64_t N = 12, V = 37;
    int32_t lab[12], none[12];
    for (int n = 0; n < N; n++) {
        lab[n] = (n % 5 == 2) ? MT_IGNORE_INDEX : (int32_t)(mt_rng_u64(&r) % V);
        none[n] = MT_IGNORE_INDEX;
    }
    gpu_input in[2] = {gpu_f32(&r, 2, (const int64_t[]){N, V}, 3.0f, true, "logits"),
                       gpu_i32(1, (const int64_t[]){N}, lab, "labels")};
    float denom = 0.0f;
    gpu_compare("cross_entropy mean", b_cross_entropy, in, 2, &denom, exact);
    denom = 7.5f;
    gpu_compare("cross_entropy denom", b_cross_entropy, in, 2, &denom, exact);
    float *l = in[0].host;
    for (int64_t i = 0; i < N * V; i++) l[i] *= 30.0f; /* logits far beyond exp's range */
    denom = 0.0f;
    gpu_compare("cross_entropy large", b_cross_entropy, in, 2, &denom, exact);
    memcpy(in[1].host, none, sizeof(none));
    gpu_compare("cross_entropy all ignored", b_cross_entropy, in, 2, &denom, exact);
    gpu_inputs_free(in, 2);
    return MT_TEST_OK;
}

/* ---- the cases ---- */

typedef struct {
    const char *op;
    mt_test_fn fn;
} gpu_case;

static const gpu_case gpu_cases[] = {
    {"view", case_view},
    {"embedding", case_embedding},
    {"matmul", case_matmul},
    {"rmsnorm", case_rmsnorm},
    {"silu", case_silu},
    {"sigmoid", case_sigmoid},
    {"swiglu", case_swiglu},
    {"add", case_add},
    {"mul", case_mul},
    {"scale", case_scale},
    {"axpby", case_axpby},
    {"rope", case_rope},
    {"attention", case_attention},
    {"lightning", case_lightning},
    {"moe_route", case_moe_route},
    {"moe_experts", case_moe_experts},
    {"moe_aux", case_moe_aux},
    {"cross_entropy", case_cross_entropy},
};
#define GPU_N_CASES ((int)(sizeof(gpu_cases) / sizeof(gpu_cases[0])))

/* Selects the device backend; MT_TEST_SKIP when there is none. */
static int gpu_setup(void) {
    dev_be = mt_backend_cuda();
    if (!dev_be) {
#ifdef MT_WITH_CUDA
        printf("no usable CUDA device (no driver, no GPU, or compute capability < 8.0)\n");
#else
        printf("CUDA backend not built (configure with -DMT_CUDA=ON)\n");
#endif
        return MT_TEST_SKIP;
    }
    if (!poison) {
        poison = mt_malloc(GPU_ARENA, "poison");
        memset(poison, 0xff, GPU_ARENA);
    }
    return MT_TEST_OK;
}

static int gpu_run(const char *op) {
    if (gpu_setup() == MT_TEST_SKIP) return MT_TEST_SKIP;
    for (int i = 0; i < GPU_N_CASES; i++)
        if (!strcmp(gpu_cases[i].op, op)) {
            int rc = gpu_cases[i].fn();
            free(poison);
            poison = NULL;
            return rc;
        }
    MT_DIE("gpu_ops: no case for op %s", op);
}

/* Every comparison with the CPU backend as the "device": checks the harness, not a kernel. */
static int case_harness(void) {
    dev_be = mt_backend_cpu();
    poison = mt_malloc(GPU_ARENA, "poison");
    memset(poison, 0xff, GPU_ARENA);
    for (int i = 0; i < GPU_N_CASES; i++) gpu_cases[i].fn();
    free(poison);
    poison = NULL;
    return MT_TEST_OK;
}

#define GPU_CASE(op)                                                                               \
    static int gpu_##op(void) { return gpu_run(#op); }
GPU_CASE(view)
GPU_CASE(embedding)
GPU_CASE(matmul)
GPU_CASE(rmsnorm)
GPU_CASE(silu)
GPU_CASE(sigmoid)
GPU_CASE(swiglu)
GPU_CASE(add)
GPU_CASE(mul)
GPU_CASE(scale)
GPU_CASE(axpby)
GPU_CASE(rope)
GPU_CASE(attention)
GPU_CASE(lightning)
GPU_CASE(moe_route)
GPU_CASE(moe_experts)
GPU_CASE(moe_aux)
GPU_CASE(cross_entropy)

static const mt_test_case cases[] = {
    {"gpu_view", gpu_view},
    {"gpu_embedding", gpu_embedding},
    {"gpu_matmul", gpu_matmul},
    {"gpu_rmsnorm", gpu_rmsnorm},
    {"gpu_silu", gpu_silu},
    {"gpu_sigmoid", gpu_sigmoid},
    {"gpu_swiglu", gpu_swiglu},
    {"gpu_add", gpu_add},
    {"gpu_mul", gpu_mul},
    {"gpu_scale", gpu_scale},
    {"gpu_axpby", gpu_axpby},
    {"gpu_rope", gpu_rope},
    {"gpu_attention", gpu_attention},
    {"gpu_lightning", gpu_lightning},
    {"gpu_moe_route", gpu_moe_route},
    {"gpu_moe_experts", gpu_moe_experts},
    {"gpu_moe_aux", gpu_moe_aux},
    {"gpu_cross_entropy", gpu_cross_entropy},
    {"op_gpu_harness", case_harness},
};
MT_TEST_MAIN(cases)
