/* gpu_msa.c: case gpu_msa of tests/gpu/gpu_ops.c (run as gpu_msa on a GPU, op_cuda_emu_msa on the
 * emulator): MiniMax-M3's block-sparse attention ops (mt_msa_select, mt_msa_attention,
 * mt_msa_kl) on the device against the CPU backend on the same inputs, by gpu_compare's fp32
 * rule: idx exact, values ||dev - cpu|| / ||cpu|| <= 1e-5. The tolerance is fp32 rounding: the
 * device sums exact fp32 products in double where the CPU runs fp32 sgemms (attention) or 8
 * fp32 lanes (KL logits), so the two differ by the CPU's own rounding, ~1e-7 relative per
 * logit and far below 1e-5 after the softmaxes; the dk, dv, dik gradients go through the
 * selection's inverse on both (no atomics), and keys no query sees stay bit-identical
 * (exact_untouched).
 *
 * Shapes: packed segments with a partial last block per sample and a sample with fewer
 * visible blocks than topk (-1 padding), Hkv = 2 and 1 (GQA, MQA), no seg, D and Di not
 * multiples of 32 and Di > 64 (the selection's dim chunks), T over several query and key tiles,
 * blocks of 40 keys (over one 32-key chunk of the attention kernels and one key tile);
 * the selection also on inputs in halves, whose products are exact in fp32 in any order, so
 * block scores tie exactly and the tie rule (the lower block id) is compared; the KL with a
 * mask, and its backward with only dik. The idx fed to attention and KL is the CPU's
 * selection of random index queries/keys (cpu_msa_select_forward), the same on both backends. */
#include "gpu_compare.h"
#include "kernels/cpu/msa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *label;
    int64_t B, T, H, Hkv, D, Di;
    int block, topk;
    const int *lens; /* per row, 0-terminated (make_rows in tests/kernels/op_msa.c); NULL: no seg */
    bool halves;     /* index inputs in multiples of 0.5: exact ties */
} msa_shape;

typedef struct {
    int block, topk;
    float scale, iscale;
} msa_par;

static mt_tensor *b_msa_select(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    const msa_par *p = u;
    (void)x;
    return mt_msa_select(c, in[0], in[1], in[2], in[3], NULL, p->block, p->topk);
}

static mt_tensor *b_msa_attention(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    const msa_par *p = u;
    (void)x;
    return mt_msa_attention(c, in[0], in[1], in[2], in[3], in[4], in[5], NULL, p->block, p->scale);
}

static mt_tensor *b_msa_kl(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    const msa_par *p = u;
    (void)x;
    return mt_msa_kl(c, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], NULL, p->block,
                     p->scale, p->iscale, 0.7f, 3.0f);
}

static void msa_run(const msa_shape *s, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    const int64_t B = s->B, T = s->T, Hkv = s->Hkv;
    int32_t *pos = mt_malloc(sizeof(int32_t) * (size_t)(B * T), "pos");
    int32_t *seg = mt_malloc(sizeof(int32_t) * (size_t)(B * T), "seg");
    const int *l = s->lens;
    for (int64_t b = 0; b < B; b++) {
        if (!l) {
            for (int64_t t = 0; t < T; t++) pos[b * T + t] = (int32_t)t, seg[b * T + t] = 0;
            continue;
        }
        int64_t t = 0;
        for (int32_t id = (int32_t)(7 * b); *l; l++, id++)
            for (int i = 0; i < *l; i++, t++) pos[b * T + t] = i, seg[b * T + t] = id;
        l++;
        MT_CHECK(t == T, "%s: row %lld has %lld tokens", s->label, (long long)b, (long long)t);
    }
    const int64_t bt[2] = {B, T};
    gpu_input iq = gpu_f32(&r, 4, (const int64_t[]){B, T, Hkv, s->Di}, 1.0f, true, "iq");
    gpu_input ik = gpu_f32(&r, 4, (const int64_t[]){B, T, 1, s->Di}, 1.0f, true, "ik");
    if (s->halves) {
        float *a = iq.host, *b = ik.host;
        for (int64_t i = 0; i < gpu_numel(&iq); i++) a[i] = roundf(2.0f * a[i]) / 2.0f;
        for (int64_t i = 0; i < gpu_numel(&ik); i++) b[i] = roundf(2.0f * b[i]) / 2.0f;
    }
    gpu_input gpos = gpu_i32(2, bt, pos, "pos");
    gpu_input gseg = s->lens ? gpu_i32(2, bt, seg, "seg") : gpu_none();
    const msa_par par = {s->block, s->topk, 1.0f / sqrtf((float)s->D), 1.0f / sqrtf((float)s->Di)};
    char label[160];

    /* the selection */
    gpu_input sel_in[4] = {iq, ik, gpos, gseg};
    snprintf(label, sizeof label, "%s select", s->label);
    gpu_compare(label, b_msa_select, sel_in, 4, (void *)&par, exact);

    /* the CPU's selection feeds both backends */
    int32_t *idx = mt_malloc(sizeof(int32_t) * (size_t)(B * Hkv * T * s->topk), "idx");
    float *work = mt_malloc(sizeof(float) * (size_t)cpu_msa_select_work(T, s->block), "work");
    cpu_msa_select_forward(idx, work, iq.host, ik.host, pos, s->lens ? seg : NULL, NULL, B, T, T,
                           Hkv, s->Di, s->block, s->topk);
    free(work);
    gpu_input gidx = gpu_i32(4, (const int64_t[]){B, Hkv, T, s->topk}, idx, "idx");

    gpu_input at[6] = {gpu_f32(&r, 4, (const int64_t[]){B, T, s->H, s->D}, 1.5f, true, "q"),
                       gpu_f32(&r, 4, (const int64_t[]){B, T, Hkv, s->D}, 1.5f, true, "k"),
                       gpu_f32(&r, 4, (const int64_t[]){B, T, Hkv, s->D}, 1.0f, true, "v"),
                       gidx,
                       gpos,
                       gseg};
    snprintf(label, sizeof label, "%s attention", s->label);
    gpu_compare(label, b_msa_attention, at, 6, (void *)&par, exact);
    at[0].grad = false; /* dk, dv only */
    snprintf(label, sizeof label, "%s attention dk dv", s->label);
    gpu_compare(label, b_msa_attention, at, 6, (void *)&par, exact);
    at[0].grad = true;
    at[1].grad = at[2].grad = false; /* dq only */
    snprintf(label, sizeof label, "%s attention dq", s->label);
    gpu_compare(label, b_msa_attention, at, 6, (void *)&par, exact);

    /* the KL: the teacher (q, k) gets no gradient; a mask leaving every third token out */
    float *mask = mt_malloc(sizeof(float) * (size_t)(B * T), "mask");
    for (int64_t i = 0; i < B * T; i++) mask[i] = i % 3 == 1 ? 0.0f : 1.0f;
    gpu_input gmask = {
        .present = true, .dt = MT_F32, .ndim = 2, .shape = {B, T}, .name = "mask", .host = mask};
    at[0].grad = at[1].grad = false;
    gpu_input kl[8] = {at[0], at[1], iq, ik, gidx, gpos, gseg, gpu_none()};
    snprintf(label, sizeof label, "%s kl", s->label);
    gpu_compare(label, b_msa_kl, kl, 8, (void *)&par, exact);
    kl[7] = gmask;
    kl[2].grad = false; /* dik only */
    snprintf(label, sizeof label, "%s kl masked dik", s->label);
    gpu_compare(label, b_msa_kl, kl, 8, (void *)&par, exact);
    kl[2].grad = true;
    kl[3].grad = false; /* diq only */
    snprintf(label, sizeof label, "%s kl masked diq", s->label);
    gpu_compare(label, b_msa_kl, kl, 8, (void *)&par, exact);

    free(mask);
    gpu_inputs_free(at, 3);
    gpu_inputs_free(&gidx, 1);
    gpu_inputs_free(&iq, 1);
    gpu_inputs_free(&ik, 1);
    gpu_inputs_free(&gpos, 1);
    if (s->lens) gpu_inputs_free(&gseg, 1);
    free(idx);
    free(pos);
    free(seg);
}

int gpu_case_msa(void) {
    /* row 0: a 5-token sample (2 blocks < topk 3), then 17 and 15 (partial last blocks) */
    static const int packed[] = {5, 17, 15, 0, 37, 0};
    static const int two[] = {9, 31, 0};
    /* blocks of 40 keys: more than one 32-key chunk per block in the attention kernels, and
     * blocks across the selection's 32-key tiles */
    static const int long_blocks[] = {150, 50, 0};
    const msa_shape shapes[] = {
        {"msa gqa packed", 2, 37, 4, 2, 16, 8, 4, 3, packed, false},
        {"msa mqa", 1, 45, 3, 1, 40, 72, 8, 4, NULL, false},
        {"msa ties", 1, 40, 4, 2, 8, 6, 4, 5, two, true},
        {"msa block 40", 1, 200, 4, 2, 16, 8, 40, 3, long_blocks, false},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) msa_run(&shapes[i], 40 + i);
    return MT_TEST_OK;
}

/* ---- death tests (not among the cases the harness runs in one process; tests/gpu/gpu.cmake
 * matches the message) ---- */

/* in[i] as a device tensor (host copy of its data) */
static mt_tensor *msa_dev(mt_tensor *t, const gpu_input *g) {
    const size_t nb = (size_t)gpu_numel(g) * mt_dtype_size(g->dt);
    void *d = dev_be->alloc(nb);
    MT_CHECK(d, "gpu_msa: cannot allocate %s", g->name);
    dev_be->to_device(d, g->host, nb);
    mt_tensor_wrap(t, g->dt, g->ndim, g->shape, d, NULL, g->name);
    t->dev = dev_be->dev;
    return t;
}

/* pos[0,6] = 0 inside one sample (seg NULL): the device's row check names it */
int gpu_msa_bad_pos(void) {
    if (gpu_setup() == MT_TEST_SKIP) return MT_TEST_SKIP;
    mt_rng r;
    mt_rng_seed(&r, 50);
    const int64_t T = 12;
    int32_t pos[12];
    for (int t = 0; t < T; t++) pos[t] = t == 6 ? 0 : t;
    gpu_input in[3] = {gpu_f32(&r, 4, (const int64_t[]){1, T, 1, 8}, 1.0f, false, "iq"),
                       gpu_f32(&r, 4, (const int64_t[]){1, T, 1, 8}, 1.0f, false, "ik"),
                       gpu_i32(2, (const int64_t[]){1, T}, pos, "pos")};
    mt_ctx c;
    mt_ctx_init(&c, dev_be, GPU_ARENA, 8);
    mt_tensor t[3];
    mt_msa_select(&c, msa_dev(&t[0], &in[0]), msa_dev(&t[1], &in[1]), msa_dev(&t[2], &in[2]), NULL,
                  NULL, 4, 2);
    printf("gpu_msa_bad_pos: the bad positions were not refused\n");
    return 1;
}

/* idx[0,1,9,:] without its local block (9/4 = 2): the device's selection check names it */
int gpu_msa_bad_idx(void) {
    if (gpu_setup() == MT_TEST_SKIP) return MT_TEST_SKIP;
    mt_rng r;
    mt_rng_seed(&r, 51);
    const int64_t T = 12, Hkv = 2, topk = 2;
    int32_t pos[12], idx[2 * 12 * 2];
    for (int t = 0; t < T; t++) pos[t] = t;
    for (int h = 0; h < Hkv; h++)
        for (int t = 0; t < T; t++) {
            idx[(h * T + t) * topk] = t / 4;
            idx[(h * T + t) * topk + 1] = t >= 4 ? 0 : -1;
        }
    idx[(1 * T + 9) * topk] = 1; /* blocks {1, 0}: the local block 2 is missing */
    gpu_input in[5] = {gpu_f32(&r, 4, (const int64_t[]){1, T, 4, 8}, 1.0f, false, "q"),
                       gpu_f32(&r, 4, (const int64_t[]){1, T, Hkv, 8}, 1.0f, false, "k"),
                       gpu_f32(&r, 4, (const int64_t[]){1, T, Hkv, 8}, 1.0f, false, "v"),
                       gpu_i32(4, (const int64_t[]){1, Hkv, T, topk}, idx, "idx"),
                       gpu_i32(2, (const int64_t[]){1, T}, pos, "pos")};
    mt_ctx c;
    mt_ctx_init(&c, dev_be, GPU_ARENA, 8);
    mt_tensor t[5];
    for (int i = 0; i < 5; i++) msa_dev(&t[i], &in[i]);
    mt_msa_attention(&c, &t[0], &t[1], &t[2], &t[3], &t[4], NULL, NULL, 4, 0.3f);
    printf("gpu_msa_bad_idx: the bad selection was not refused\n");
    return 1;
}
