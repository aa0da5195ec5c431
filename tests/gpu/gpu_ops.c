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
 * bf16 mode (mt_ctx.compute_dtype = MT_BF16, cases gpu_matmul_bf16 and gpu_moe_experts_bf16):
 * the device cannot match the CPU's bf16 run to 1e-5 in general (a different summation order
 * may flip the rounding of an intermediate such as g), so each output, saved float buffer and
 * gradient is judged against the fp32 CPU result: with e_ref = ||cpu_bf16 - cpu_fp32|| /
 * ||cpu_fp32|| and e_dev = ||dev_bf16 - cpu_fp32|| / ||cpu_fp32||, require e_ref > 0 (bf16
 * really rounded on the CPU), e_dev <= 2 e_ref (the device is no worse than the reference
 * rounding) and e_dev >= e_ref / 2 (the device rounded too: an fp32 device GEMM would give
 * e_dev near 1e-7). Integer buffers and untouched gradient elements stay exact.
 *
 * Cases gpu_<op> exit 77 (skipped) when the CUDA backend is not built or no device is usable.
 * Case op_gpu_harness runs every comparison with the CPU backend standing in for the device,
 * so the comparison code itself is exercised (and sanitised) on machines without a GPU. */
#include "gpu_compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef MT_WITH_CUDA
#include "kernels/cuda/attention_cudnn.h"
#endif

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

static mt_tensor *b_concat(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_concat(c, in[0], in[1]);
}

static int case_concat(void) {
    mt_rng r;
    mt_rng_seed(&r, 30);
    gpu_input in[2] = {gpu_f32(&r, 3, (const int64_t[]){3, 5, 17}, 1.0f, true, "a"),
                       gpu_f32(&r, 3, (const int64_t[]){3, 5, 6}, 1.0f, true, "b")};
    gpu_compare("concat", b_concat, in, 2, NULL, exact);
    gpu_inputs_free(in, 2);
    return MT_TEST_OK;
}

static mt_tensor *b_embedding(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_embedding(c, in[0], in[1]);
}

static mt_tensor *b_embedding_rows(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_embedding_rows(c, in[0], in[1], 4, 11, NULL);
}

static mt_tensor *b_embedding_parts(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    mt_tensor *y = mt_embedding_rows(c, in[0], in[1], 0, 11, NULL);
    return mt_embedding_rows(c, in[0], in[2], 4, 11, y);
}

static mt_tensor *b_embedding_rows_1000(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_embedding_rows(c, in[0], in[1], 1000, 3000, NULL);
}

static int case_embedding(void) {
    mt_rng r;
    mt_rng_seed(&r, 2);
    int32_t ids[21];
    for (int i = 0; i < 21; i++) ids[i] = (int32_t)(mt_rng_u64(&r) % 9); /* rows 9, 10 unused */
    ids[4] = ids[5] = ids[17] = 3;                                       /* repeats accumulate */
    gpu_input in[2] = {gpu_i32(2, (const int64_t[]){3, 7}, ids, "ids"),
                       gpu_f32(&r, 2, (const int64_t[]){11, 16}, 1.0f, true, "table")};
    gpu_compare("embedding", b_embedding, in, 2, NULL, bitwise);
    gpu_inputs_free(in, 2);
    /* rows 4..8 of the 11-id vocabulary as a table of their own: the other ids give zero rows,
     * and their gradients go nowhere */
    gpu_input part[2] = {gpu_i32(2, (const int64_t[]){3, 7}, ids, "ids"),
                         gpu_f32(&r, 2, (const int64_t[]){5, 16}, 1.0f, true, "table rows 4..8")};
    gpu_compare("embedding rows 4..8 of 11", b_embedding_rows, part, 2, NULL, bitwise);
    gpu_inputs_free(part, 2);
    /* the whole vocabulary as parts of 4 and 7 rows filling one output */
    gpu_input parts[3] = {gpu_i32(2, (const int64_t[]){3, 7}, ids, "ids"),
                          gpu_f32(&r, 2, (const int64_t[]){4, 16}, 1.0f, true, "table rows 0..3"),
                          gpu_f32(&r, 2, (const int64_t[]){7, 16}, 1.0f, true, "table rows 4..")};
    gpu_compare("embedding in 2 parts", b_embedding_parts, parts, 3, NULL, bitwise);
    gpu_inputs_free(parts, 3);
    /* the device's sort at size (kernels/cuda/sort.cuh): 3000 positions (3 chunks) into 3000
     * rows (12-bit keys: two radix passes), id 7 at every other position (a run of 1500 summed
     * in position order); then rows 1000..2499 as a part (11-bit keys) */
    enum { NL = 3000, VL = 3000 };
    int32_t *many = mt_malloc(sizeof(int32_t) * NL, "ids");
    for (int i = 0; i < NL; i++) many[i] = i % 2 ? 7 : (int32_t)(mt_rng_u64(&r) % VL);
    gpu_input large[2] = {gpu_i32(1, (const int64_t[]){NL}, many, "ids"),
                          gpu_f32(&r, 2, (const int64_t[]){VL, 8}, 1.0f, true, "table")};
    gpu_compare("embedding 3000 positions", b_embedding, large, 2, NULL, bitwise);
    gpu_inputs_free(large, 2);
    gpu_input half[2] = {gpu_i32(1, (const int64_t[]){NL}, many, "ids"),
                         gpu_f32(&r, 2, (const int64_t[]){1500, 8}, 1.0f, true, "rows 1000..")};
    gpu_compare("embedding 3000 positions rows 1000..2499", b_embedding_rows_1000, half, 2, NULL,
                bitwise);
    gpu_inputs_free(half, 2);
    free(many);
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

/* The clamped SwiGLU of MiniMax-M3 (mt_act): gpu_wide's values (std 4, extremes to +-90) fall on
 * both sides of the limit 7 and of -7; the limits themselves, exactly, too (the masks pass the
 * gradient there). */
static const mt_act gpu_act_m3 = {true, 1.702f, 7.0f, 1.0f};
static mt_tensor *b_swiglu_oai(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_swiglu_act(c, in[0], in[1], &gpu_act_m3);
}
static int case_swiglu_oai(void) {
    mt_rng r;
    mt_rng_seed(&r, 70);
    gpu_input in[2] = {gpu_wide(&r, "gate"), gpu_wide(&r, "up")};
    float *g = in[0].host, *u = in[1].host;
    g[3] = 7.0f, u[4] = 7.0f, u[6] = -7.0f;
    gpu_compare("swiglu_oai", b_swiglu_oai, in, 2, NULL, plain);
    gpu_inputs_free(in, 2);
    return MT_TEST_OK;
}
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

/* The QK norm of the softmax mixer (models/block_attention.c) on a projection (B,T,n*D): one
 * RMSNorm over the whole width before the head split (MiniMax-M2), or of width D per head
 * (Gemma, M3), then partial RoPE on the first rot dims of each head. */
typedef struct {
    int64_t n, D;
    int rot;
    bool whole, gemma;
} qk_case;

static mt_tensor *b_qk_norm(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    const qk_case *q = u;
    const int64_t B = in[0]->shape[0], T = in[0]->shape[1];
    mt_tensor *y = in[0];
    if (q->whole) y = mt_rmsnorm(c, y, in[1], 1e-6f, q->gemma);
    y = mt_view(c, y, 4, (const int64_t[]){B, T, q->n, q->D});
    if (!q->whole) y = mt_rmsnorm(c, y, in[1], 1e-6f, q->gemma);
    return mt_rope(c, y, in[2], q->rot, 5e6f);
}

/* MiniMax-M2's widths: q 48 x 128 = 6144 and k 8 x 128 = 1024 (rows wider than a thread
 * block), an odd width (3 x 6 = 18), and the per-head Gemma form. */
static int case_qk_norm(void) {
    const qk_case cases[4] = {{48, 128, 64, true, false},
                              {8, 128, 64, true, false},
                              {3, 6, 2, true, false},
                              {4, 16, 8, false, true}};
    const char *labels[4] = {"qk_norm whole q 6144", "qk_norm whole k 1024", "qk_norm whole 3x6",
                             "qk_norm per head gemma"};
    for (int k = 0; k < 4; k++) {
        const qk_case *q = &cases[k];
        mt_rng r;
        mt_rng_seed(&r, 40 + (uint64_t)k);
        int32_t pos[10]; /* B = 2, T = 5 */
        for (int i = 0; i < 10; i++) pos[i] = (int32_t)(mt_rng_u64(&r) % 200000);
        gpu_input in[3] = {
            gpu_f32(&r, 3, (const int64_t[]){2, 5, q->n * q->D}, 2.0f, true, "x"),
            gpu_f32(&r, 1, (const int64_t[]){q->whole ? q->n * q->D : q->D}, 1.0f, true, "w"),
            gpu_i32(2, (const int64_t[]){2, 5}, pos, "pos")};
        gpu_compare(labels[k], b_qk_norm, in, 3, (void *)q, plain);
        gpu_inputs_free(in, 3);
    }
    return MT_TEST_OK;
}

/* u: the sliding window (int64_t; 0: none) */
static mt_tensor *b_attention(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_attention_window(c, in[0], in[1], in[2], in[3], 0.25f, *(const int64_t *)u);
}

static int attention_run(const char *label, int64_t Hkv, bool with_seg, uint64_t seed, int64_t w) {
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
    gpu_compare(label, b_attention, in, 4, &w, plain);
    gpu_inputs_free(in, 4);
    return MT_TEST_OK;
}

static int case_attention(void) {
    attention_run("attention gqa seg", 2, true, 13, 0);
    attention_run("attention gqa", 2, false, 14, 0);
    attention_run("attention mqa seg", 1, true, 15, 0);
    attention_run("attention gqa seg window 3", 2, true, 16, 3);
    attention_run("attention mqa window 6", 1, false, 17, 6);
    return MT_TEST_OK;
}

/* bf16 mode (attention_flash.cu at D = 64 and 128, the reference kernels with the same rounding
 * points at D = 16): T not a multiple of the tiles (37, 70: the forward's 64 query rows, the
 * backward's 64 kv and 32 query rows, K/V tiles of 64 or 32), GQA, packed segments (one with a
 * repeated id after a gap), and the backward with only dq or only dk, dv. */
static int64_t attn_win; /* the bf16 runs' sliding window (0: none) */
static mt_tensor *b_attention_scaled(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    return mt_attention_window(c, in[0], in[1], in[2], in[3], 1.0f / sqrtf((float)in[0]->shape[3]),
                               attn_win);
}

static void attention_bf16_run(const char *label, int64_t T, int64_t D, float q_amp, bool with_seg,
                               bool grad_q, bool grad_kv, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    const int64_t B = 2, H = 4, Hkv = 2;
    int32_t seg[2 * 70];
    for (int t = 0; t < T; t++) {
        seg[t] = t < 20 ? 3 : t < 45 ? 1 : t < 52 ? 3 : 2; /* id 3 again after a gap */
        seg[T + t] = t < 64 ? 0 : 1; /* a sample boundary on a tile edge: whole tiles skipped */
    }
    gpu_input in[4] = {gpu_f32(&r, 4, (const int64_t[]){B, T, H, D}, q_amp, grad_q, "q"),
                       gpu_f32(&r, 4, (const int64_t[]){B, T, Hkv, D}, 1.0f, grad_kv, "k"),
                       gpu_f32(&r, 4, (const int64_t[]){B, T, Hkv, D}, 1.0f, grad_kv, "v"),
                       with_seg ? gpu_i32(2, (const int64_t[]){B, T}, seg, "seg") : gpu_none()};
    gpu_compare_bf16_opts(label, b_attention_scaled, in, 4, NULL, plain);
    gpu_inputs_free(in, 4);
}

/* The cases above test the own kernels: on a device where cuDNN would be the default
 * (kernels/cuda/attention_cudnn.h) they select them explicitly. */
static void attention_select(int impl) {
#ifdef MT_WITH_CUDA
    if (!strcmp(dev_be->name, "cuda")) cuda_attention_impl_set(impl);
#else
    (void)impl;
#endif
}

static int case_attention_bf16(void) {
    attention_select(1); /* CUDA_ATTN_FLASH */
    attention_bf16_run("attention bf16 D=64 T=70 seg", 70, 64, 1.0f, true, true, true, 41);
    attention_bf16_run("attention bf16 D=128 T=70 seg", 70, 128, 1.0f, true, true, true, 42);
    attention_bf16_run("attention bf16 D=128 T=37", 37, 128, 1.0f, false, true, true, 43);
    attention_bf16_run("attention bf16 D=64 T=37 dq only", 37, 64, 1.0f, true, true, false, 44);
    attention_bf16_run("attention bf16 D=64 T=37 dk dv only", 37, 64, 1.0f, false, false, true, 45);
    /* scores of tens: the running maximum jumps by more than 2^8 between tiles (O rescales) */
    attention_bf16_run("attention bf16 D=128 T=70 large scores", 70, 128, 8.0f, true, true, true,
                       47);
    attention_bf16_run("attention bf16 D=16 T=37 seg (reference)", 37, 16, 1.0f, true, true, true,
                       46);
    attn_win = 5; /* a window: the reference kernels at any D (flash and cuDNN have none) */
    attention_bf16_run("attention bf16 D=64 T=70 seg window 5", 70, 64, 1.0f, true, true, true, 48);
    attn_win = 0;
    attention_select(-1);
    return MT_TEST_OK;
}

/* cuDNN's fused attention (kernels/cuda/attention_cudnn.cu, forced with CUDA_ATTN_CUDNN) under
 * the bf16 rule against the CPU: rows of one sample each (the dense graph, with seg absent or one
 * id per row), packed samples as runs of increasing ids (the ragged graph: 5 or 6 sequences in a
 * batch bucket of 8, so zero-length sequences too), GQA 4/2 and MHA 4/4, D = 64 and 128,
 * T = 37 and 70 (no multiple of any tile), the backward with only dq or only dk, dv, scores of
 * tens. On a device of compute capability 9.x every call must run on cuDNN: a fallback fails the
 * case. Where cuDNN cannot run (the emulator, whose cuDNN has no engines) every call falls back
 * with one line per shape, and its results equal the flash kernels' bit for bit.
 * The version guards: cuDNN <= 9.15 builds the three dense backwards (T = 70, 37, 37: no
 * multiple of 128) with cudnn-frontend's padding-mask workaround, later versions none; below
 * 9.10.2 every call runs on the own kernels; packed samples at D = 40 (no multiple of 16) run
 * the forward on cuDNN and the backward on the own kernels. The emulator fakes the version
 * (MT_EMU_CUDNN_VERSION: op_cuda_emu_attention_cudnn_v*). */
typedef struct {
    int64_t T, D, Hkv;
    int segs; /* 0: no seg; 1: one id per row; 2: packed samples */
    float q_amp;
    bool grad_q, grad_kv;
} attention_cudnn_shape;

static void attention_cudnn_inputs(gpu_input in[4], const attention_cudnn_shape *a, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    const int64_t B = 2, H = 4, T = a->T;
    int32_t seg[2 * 70];
    for (int t = 0; t < T; t++) {
        seg[t] = a->segs == 1 ? 7 : t < 20 ? 0 : t < 45 ? 1 : t < 52 ? 2 : 3;
        seg[T + t] = a->segs == 1 ? 9 : t < 64 ? 4 : 5; /* T = 70: a boundary on a tile edge */
    }
    in[0] = gpu_f32(&r, 4, (const int64_t[]){B, T, H, a->D}, a->q_amp, a->grad_q, "q");
    in[1] = gpu_f32(&r, 4, (const int64_t[]){B, T, a->Hkv, a->D}, 1.0f, a->grad_kv, "k");
    in[2] = gpu_f32(&r, 4, (const int64_t[]){B, T, a->Hkv, a->D}, 1.0f, a->grad_kv, "v");
    in[3] = a->segs ? gpu_i32(2, (const int64_t[]){B, T}, seg, "seg") : gpu_none();
}

#if defined(MT_WITH_CUDA) && defined(MT_CUDA_EMU)
static void select_flash(void) { cuda_attention_impl_set(CUDA_ATTN_FLASH); }
static void select_cudnn(void) { cuda_attention_impl_set(CUDA_ATTN_CUDNN); }
#endif

static int case_attention_cudnn(void) {
    static const attention_cudnn_shape shapes[] = {
        {70, 64, 2, 0, 1.0f, true, true},  {37, 128, 2, 0, 1.0f, true, true},
        {70, 64, 2, 2, 1.0f, true, true},  {70, 128, 2, 2, 1.0f, true, true},
        {37, 64, 2, 2, 1.0f, true, false}, {37, 128, 2, 2, 1.0f, false, true},
        {70, 64, 4, 2, 1.0f, true, true},  {70, 128, 2, 2, 8.0f, true, true},
        {37, 64, 2, 1, 1.0f, true, true}, /* last: a dense backward is the last plan built */
    };
    static const char *labels[] = {
        "attention cudnn D=64 T=70",
        "attention cudnn D=128 T=37",
        "attention cudnn D=64 T=70 packed",
        "attention cudnn D=128 T=70 packed",
        "attention cudnn D=64 T=37 packed dq only",
        "attention cudnn D=128 T=37 packed dk dv only",
        "attention cudnn D=64 T=70 packed MHA",
        "attention cudnn D=128 T=70 packed large scores",
        "attention cudnn D=64 T=37 one sample per row",
    };
    static const attention_cudnn_shape d40 = {70, 40, 2, 2, 1.0f, true, true};
    const int n = (int)(sizeof(shapes) / sizeof(shapes[0]));
#ifdef MT_WITH_CUDA
    const bool on_cuda = !strcmp(dev_be->name, "cuda");
    cuda_attention_stats s0 = {0}, s1 = {0};
    if (on_cuda) cuda_attention_stats_get(&s0);
#endif
    attention_select(2); /* CUDA_ATTN_CUDNN */
    for (int i = 0; i < n; i++) {
        gpu_input in[4];
        attention_cudnn_inputs(in, &shapes[i], 60 + (uint64_t)i);
        gpu_compare_bf16_opts(labels[i], b_attention_scaled, in, 4, NULL, plain);
        gpu_inputs_free(in, 4);
    }
#ifdef MT_WITH_CUDA
    if (on_cuda) {
        cuda_attention_stats_get(&s1);
        const long long fwd = s1.cudnn_fwd - s0.cudnn_fwd, bwd = s1.cudnn_bwd - s0.cudnn_bwd;
        const long long fell =
            s1.fallback_fwd - s0.fallback_fwd + s1.fallback_bwd - s0.fallback_bwd;
        const long long ver = (long long)s1.cudnn_version;
        const long long workaround = s1.workaround_graphs - s0.workaround_graphs;
        printf("attention cudnn: cuDNN %lld: %lld forward and %lld backward calls ran on cuDNN, "
               "%lld fell back (%lld lines), %lld dense backward graphs with the padding-mask "
               "workaround%s%s\n",
               ver, fwd, bwd, fell, (long long)(s1.log_lines - s0.log_lines), workaround,
               s1.last_reason[0] ? "; last: " : "", s1.last_reason);
        const bool usable = ver >= 91002; /* attention_cudnn.cu's SDPA_MIN_VERSION */
        if (!usable) {
            EXPECT(fwd + bwd == 0 && fell == 2 * n && workaround == 0 &&
                       strstr(s1.last_reason, "need 9.10.2 or later"),
                   "cuDNN %lld: every call must run on the own kernels, naming the version", ver);
        } else {
            EXPECT(workaround == (ver <= 91500 ? 3 : 0),
                   "cuDNN %lld: %lld dense backward graphs with the padding-mask workaround, want "
                   "%d",
                   ver, workaround, ver <= 91500 ? 3 : 0);
        }
#ifdef MT_CUDA_EMU
        /* the emulator's cuDNN validates the graphs, then has no engine for them; the last plan
         * is a dense backward's (with the workaround up to 9.15) */
        EXPECT(fwd == 0 && bwd == 0 && fell == 2 * n, "emulator: %lld cuDNN calls, %lld fallbacks",
               fwd + bwd, fell);
        EXPECT(!usable || strstr(s1.last_reason, "no cuDNN engines") != NULL,
               "emulator: the graphs must reach the plan stage, not fail before: %s",
               s1.last_reason);
        EXPECT(!usable || ver > 91500 || strstr(s1.last_reason, "padding-mask workaround"),
               "emulator: cuDNN %lld: the last plan must be the dense workaround graph: %s", ver,
               s1.last_reason);
        EXPECT(s1.log_lines - s0.log_lines <= 2 * n, "more fallback lines than plans");
        for (int i = 0; i < n; i += 4) { /* the fallback is the flash path, bit for bit */
            gpu_input in[4];
            attention_cudnn_inputs(in, &shapes[i], 60 + (uint64_t)i);
            gpu_compare_same_bf16(labels[i], b_attention_scaled, in, 4, NULL, select_flash,
                                  select_cudnn);
            gpu_inputs_free(in, 4);
        }
#else
        if (s1.device_major == 9 && usable)
            EXPECT(fwd == n && bwd == n && fell == 0,
                   "compute capability 9.x: every call must run on cuDNN (%lld + %lld of %d, "
                   "%lld fell back): %s",
                   fwd, bwd, n, fell, s1.last_reason);
#endif
    }
#endif
    /* packed samples at D = 40: the ragged backward needs a multiple of 16 */
#ifdef MT_WITH_CUDA
    if (on_cuda) cuda_attention_stats_get(&s1);
#endif
    gpu_input in[4];
    attention_cudnn_inputs(in, &d40, 70);
    gpu_compare_bf16_opts("attention cudnn D=40 T=70 packed", b_attention_scaled, in, 4, NULL,
                          plain);
    gpu_inputs_free(in, 4);
#ifdef MT_WITH_CUDA
    if (on_cuda) {
        cuda_attention_stats s2;
        cuda_attention_stats_get(&s2);
        const long long fwd = s2.cudnn_fwd - s1.cudnn_fwd, bwd = s2.cudnn_bwd - s1.cudnn_bwd,
                        fell = s2.fallback_bwd - s1.fallback_bwd;
        printf("attention cudnn D=40 packed: %lld forward, %lld backward calls on cuDNN, the "
               "backward fell back %lld time(s): %s\n",
               fwd, bwd, fell, s2.last_reason);
        if (s2.cudnn_version >= 91002) {
            EXPECT(bwd == 0 && fell == 1 && strstr(s2.last_reason, "multiple of 16"),
                   "D = 40 packed: the backward must fall back naming the head dim: %s",
                   s2.last_reason);
#ifndef MT_CUDA_EMU
            if (s2.device_major == 9)
                EXPECT(fwd == 1, "D = 40 packed: the forward must run on cuDNN: %s",
                       s2.last_reason);
#endif
        }
    }
#endif
    attention_select(-1);
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

static int case_matmul_bf16(void) {
    mt_rng r;
    mt_rng_seed(&r, 21);
    gpu_input in[2] = {gpu_f32(&r, 3, (const int64_t[]){5, 7, 96}, 1.0f, true, "x"),
                       gpu_f32(&r, 2, (const int64_t[]){40, 96}, 0.3f, true, "w")};
    gpu_compare_bf16("matmul bf16", b_matmul, in, 2, NULL);
    in[0].grad = false; /* weight gradient only */
    gpu_compare_bf16("matmul bf16 dw only", b_matmul, in, 2, NULL);
    in[0].grad = true;
    in[1].grad = false; /* input gradient only: a frozen weight */
    gpu_compare_bf16("matmul bf16 dx only", b_matmul, in, 2, NULL);
    gpu_inputs_free(in, 2);
    return MT_TEST_OK;
}

/* The block form in bf16 mode (lightning_block.cu against kernels/cpu/lightning_bf16.c), B = 2,
 * H = 2, T not a multiple of the block, with segments (row 0 with resets, row 1 without) and
 * without. D = 32 runs the GEMM form; D = 64 and 128 the fused kernels (lightning_fused.cu)
 * unless MT_LIGHTNING_FUSED=0 (ctest op_cuda_emu_lightning_bf16_gemm runs the GEMM form). */
static void lightning_bf16_run(const char *label, int64_t T, int64_t D, int block,
                               const int *resets, int n_resets, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    const int64_t B = 2, H = 2;
    int32_t *seg = mt_malloc(sizeof(int32_t) * (size_t)(B * T), "seg");
    for (int t = 0, id = 0; t < T; t++) {
        for (int k = 0; k < n_resets; k++) id += resets[k] == t;
        seg[t] = id;
        seg[T + t] = 7;
    }
    gpu_input in[3] = {gpu_f32(&r, 4, (const int64_t[]){B, T, H, 3 * D}, 0.5f, true, "qkv"),
                       gpu_f32(&r, 1, (const int64_t[]){H}, 1.0f, false, "decay"),
                       gpu_i32(2, (const int64_t[]){B, T}, seg, "seg")};
    float *lam = in[1].host;
    lam[0] = 0.05f;
    lam[1] = 0.6f;
    char l2[96];
    snprintf(l2, sizeof(l2), "%s seg", label);
    gpu_compare_bf16(l2, b_lightning, in, 3, &block);
    gpu_input noseg[3] = {in[0], in[1], gpu_none()};
    gpu_compare_bf16(label, b_lightning, noseg, 3, &block);
    gpu_inputs_free(in, 3);
    free(seg);
}

static int case_lightning_bf16(void) {
    const int r37[3] = {8, 13, 30}; /* a block edge (8) and inside blocks */
    lightning_bf16_run("lightning bf16 D=32 T=37 block 8", 37, 32, 8, r37, 3, 24);
    /* block 100: two 64-row tiles per block (the second partial), the last block 50 rows;
     * resets inside the first tile (30), across the tile edge (75), on the block edge (100)
     * and inside the last block (131); block 8 and block > T: tiles of 8 and 37 rows */
    const int r150[4] = {30, 75, 100, 131};
    lightning_bf16_run("lightning bf16 D=64 T=150 block 100", 150, 64, 100, r150, 4, 25);
    lightning_bf16_run("lightning bf16 D=64 T=37 block 8", 37, 64, 8, r37, 3, 26);
    lightning_bf16_run("lightning bf16 D=128 T=150 block 100", 150, 128, 100, r150, 4, 27);
    lightning_bf16_run("lightning bf16 D=128 T=37 block 64", 37, 128, 64, r37, 3, 28);
    return MT_TEST_OK;
}

/* the fused lm_head + cross-entropy (tests/gpu/gpu_lce.c) */
static int case_linear_cross_entropy(void) { return gpu_case_linear_cross_entropy(); }

/* the cases of tests/gpu/gpu_msa.c (M3's MSA), gpu_decode.c, gpu_cp.c and gpu_moe.c */
static int case_msa(void) { return gpu_case_msa(); }
static int case_decode(void) { return gpu_case_decode(); }
static int case_cp_attention(void) { return gpu_case_cp_attention(); }
static int case_moe_route(void) { return gpu_case_moe_route(); }
static int case_moe_route_sigmoid(void) { return gpu_case_moe_route_sigmoid(); }
static int case_moe_experts(void) { return gpu_case_moe_experts(); }
static int case_moe_experts_oai(void) { return gpu_case_moe_experts_oai(); }
static int case_moe_aux(void) { return gpu_case_moe_aux(); }
static int case_moe_experts_bf16(void) { return gpu_case_moe_experts_bf16(); }
static int case_moe_split(void) { return gpu_case_moe_split(); }
static int case_moe_split_bf16(void) { return gpu_case_moe_split_bf16(); }

/* ---- the cases: one line each; gpu_<op> runs case_<op> against the device ---- */

static int case_determinism(void);

/* clang-format off */
#define GPU_CASES(X)                                                                               \
    X(view) X(concat) X(embedding) X(matmul) X(rmsnorm) X(silu) X(sigmoid) X(swiglu) X(add)        \
    X(mul) X(scale) X(axpby) X(rope) X(qk_norm) X(attention) X(lightning) X(moe_route)             \
    X(moe_route_sigmoid) X(moe_experts) X(moe_aux) X(cross_entropy) X(linear_cross_entropy)        \
    X(matmul_bf16) X(moe_experts_bf16) X(lightning_bf16) X(attention_bf16) X(attention_cudnn)      \
    X(moe_split) X(moe_split_bf16) X(swiglu_oai) X(moe_experts_oai) X(msa) X(decode)               \
    X(cp_attention) X(determinism)
/* clang-format on */

typedef struct {
    const char *op;
    mt_test_fn fn;
} gpu_case;

#define GPU_TABLE_ROW(op) {#op, case_##op},
static const gpu_case gpu_cases[] = {GPU_CASES(GPU_TABLE_ROW)};
#define GPU_N_CASES ((int)(sizeof(gpu_cases) / sizeof(gpu_cases[0])))

/* Every other case with the device checked against itself instead of the CPU (gpu_compare.h):
 * each comparison runs the device on the same inputs twice on the emulator (its own order, then
 * blocks and threads shuffled) or three times on a GPU (in whatever order the hardware picks),
 * and requires bit-identical outputs, saved buffers and gradients: no result may depend on the
 * order blocks or threads run in (docs/cuda.md, "Determinism"). Left out: attention_cudnn, whose
 * dq cuDNN sums by atomics (the emulator runs the flash kernels there: attention_bf16). */
static int case_determinism(void) {
    gpu_self_compare = true;
    for (int i = 0; i < GPU_N_CASES; i++)
        if (gpu_cases[i].fn != case_determinism && gpu_cases[i].fn != case_attention_cudnn)
            gpu_cases[i].fn();
    gpu_self_compare = false;
    return MT_TEST_OK;
}

static int gpu_run(const char *op) {
    if (gpu_setup() == MT_TEST_SKIP) return MT_TEST_SKIP;
    for (int i = 0; i < GPU_N_CASES; i++)
        if (!strcmp(gpu_cases[i].op, op)) {
            int rc = gpu_cases[i].fn();
            gpu_filter_done();
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

#define GPU_CASE_FN(op)                                                                            \
    static int gpu_##op(void) { return gpu_run(#op); }
GPU_CASES(GPU_CASE_FN)

#define GPU_TEST_ROW(op) {"gpu_" #op, gpu_##op},
static const mt_test_case cases[] = {GPU_CASES(GPU_TEST_ROW){"death_moe_bad_id", gpu_moe_bad_id},
                                     {"death_msa_bad_pos", gpu_msa_bad_pos},
                                     {"death_msa_bad_idx", gpu_msa_bad_idx},
                                     {"op_gpu_harness", case_harness}};
MT_TEST_MAIN(cases)
