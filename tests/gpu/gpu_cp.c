/* gpu_cp.c: case gpu_cp_attention of tests/gpu/gpu_ops.c (op_cuda_emu_cp_attention on the
 * emulator): context parallelism's attention (mt_cp_attention; kernels/cuda/cp_attention.cu)
 * on the device against the CPU backend on the same inputs, fp32 rule (1e-5 relative; the CPU's
 * fp32 tiles against the device's double sums) and the bf16 rule. The group is the one-process
 * mirror (tests/support/cp_mirror.h: every rank holds this rank's tokens), so the exchange, the
 * reordering by the causal layout and the position kernels run as they do on C ranks: rank 1
 * of 2 and rank 2 of 4, with packed segments crossing the chunk borders; and no group (one
 * rank: the kernels with identity positions). */
#include "gpu_compare.h"
#include "tests/support/cp_mirror.h"

typedef struct {
    int size, rank; /* 0: no group */
    cp_mirror m;
    mt_cp_group g;
} cp_par;

static mt_tensor *b_cp_attention(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    cp_par *p = u;
    if (p->size) p->g = cp_mirror_group(&p->m, c->be, p->size, p->rank);
    return mt_cp_attention(c, in[0], in[1], in[2], in[3], p->size ? &p->g : NULL, 0.25f);
}

static void cp_run(const char *label, int size, int rank, int64_t Tl, int64_t Hkv, bool seg,
                   bool bf16, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    const int64_t B = 2, H = 4, D = bf16 ? 64 : 16;
    int32_t ids[2 * 64];
    for (int64_t t = 0; t < Tl; t++) { /* row 0: samples of 5, 7, then the rest; row 1: one */
        ids[t] = t < 5 ? 0 : t < 12 ? 1 : 2;
        ids[Tl + t] = 3;
    }
    gpu_input in[4] = {gpu_f32(&r, 4, (const int64_t[]){B, Tl, H, D}, 1.0f, true, "q"),
                       gpu_f32(&r, 4, (const int64_t[]){B, Tl, Hkv, D}, 1.0f, true, "k"),
                       gpu_f32(&r, 4, (const int64_t[]){B, Tl, Hkv, D}, 1.0f, true, "v"),
                       seg ? gpu_i32(2, (const int64_t[]){B, Tl}, ids, "seg") : gpu_none()};
    cp_par p = {.size = size, .rank = rank};
    if (bf16)
        gpu_compare_bf16_opts(label, b_cp_attention, in, 4, &p, plain);
    else
        gpu_compare(label, b_cp_attention, in, 4, &p, plain);
    gpu_inputs_free(in, 4);
}

int gpu_case_cp_attention(void) {
    cp_run("cp_attention C=2 rank 1 gqa seg", 2, 1, 18, 2, true, false, 61);
    cp_run("cp_attention C=4 rank 2 mqa seg", 4, 2, 14, 1, true, false, 62);
    cp_run("cp_attention C=4 rank 0 gqa", 4, 0, 10, 2, false, false, 63);
    cp_run("cp_attention no group gqa seg", 0, 0, 13, 2, true, false, 64);
    cp_run("cp_attention C=2 rank 0 seg bf16", 2, 0, 18, 2, true, true, 65);
    return MT_TEST_OK;
}
