/* dist_cp_attention.c: context parallelism's attention (mt_cp_attention) on C real MPI ranks
 * (the world as one context group, train/cp_group.h) against the one-rank full-sequence
 * mt_attention that every rank also runs: each rank holds chunks r and 2C-1-r of every row
 * (autograd/context_parallel.h); q and k go through RoPE at positions that restart with each
 * packed sample (the caller's global positions), and the samples cross the chunk borders. The
 * rank's outputs and its q, k, v gradients (the key gradients summed over the ranks by the
 * reduce-scatter) must equal the full run's rows to 1e-6 relative L2 (issue 39's acceptance),
 * in the fp32 and the bf16 GEMM modes. */
#include "tests/support/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/comm.h"
#include "train/cp_group.h"
#include "tests/train/cp_rows.h"

enum { QKV = 3 };

typedef struct {
    int64_t B, T, H, Hkv, D;
    mt_dtype mode;
} cp_shape;

/* out = attention(rope(q), rope(k), v) over the whole rows (group NULL: mt_attention) or this
 * rank's rows (mt_cp_attention); backward from seed. */
static mt_tensor *cp_forward(mt_ctx *c, mt_tensor **x, mt_tensor *pos, mt_tensor *seg,
                             const mt_cp_group *g, const float *seed) {
    mt_tensor *q = mt_rope(c, x[0], pos, (int)x[0]->shape[3] / 2, 10000.0f);
    mt_tensor *k = mt_rope(c, x[1], pos, (int)x[1]->shape[3] / 2, 10000.0f);
    const float scale = 1.0f / sqrtf((float)x[0]->shape[3]);
    mt_tensor *o =
        g ? mt_cp_attention(c, q, k, x[2], seg, g, scale) : mt_attention(c, q, k, x[2], seg, scale);
    mt_backward(c, o, seed);
    return o;
}

static void check_shape(const char *label, const cp_shape *s, mt_comm *comm, uint64_t seed) {
    const int C = comm->size, r = comm->rank;
    const int64_t B = s->B, T = s->T, Tl = T / C,
                  W[QKV] = {s->H * s->D, s->Hkv * s->D, s->Hkv * s->D};
    const char *names[QKV] = {"q", "k", "v"};
    mt_rng rng;
    mt_rng_seed(&rng, seed); /* the same inputs on every rank */
    mt_tensor *full[QKV], *loc[QKV];
    for (int i = 0; i < QKV; i++) {
        full[i] = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, W[i] / s->D, s->D}, true, names[i]);
        loc[i] = mt_test_tensor(MT_F32, 4, (int64_t[]){B, Tl, W[i] / s->D, s->D}, true, names[i]);
        mt_fill_normal(full[i]->data, mt_numel(full[i]), 1.0f, &rng);
        cp_take_rows(loc[i]->data, full[i]->data, B, T, sizeof(float) * (size_t)W[i], r, C);
        memset(full[i]->grad, 0, mt_nbytes(full[i]));
        memset(loc[i]->grad, 0, mt_nbytes(loc[i]));
    }
    /* packed samples crossing the chunk borders (cp_rows.h) */
    mt_tensor *seg = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg");
    mt_tensor *pos = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "pos");
    int32_t *sg = seg->data, *ps = pos->data;
    cp_packed_rows(sg, ps, B, T);
    mt_tensor *seg_l = mt_test_tensor(MT_I32, 2, (int64_t[]){B, Tl}, false, "seg_local");
    mt_tensor *pos_l = mt_test_tensor(MT_I32, 2, (int64_t[]){B, Tl}, false, "pos_local");
    cp_take_rows(seg_l->data, sg, B, T, sizeof(int32_t), r, C);
    cp_take_rows(pos_l->data, ps, B, T, sizeof(int32_t), r, C);
    float *dout = mt_malloc(sizeof(float) * (size_t)(B * T * W[0]), "dout");
    float *dout_l = mt_malloc(sizeof(float) * (size_t)(B * Tl * W[0]), "dout local");
    mt_fill_normal(dout, B * T * W[0], 1.0f, &rng);
    cp_take_rows(dout_l, dout, B, T, sizeof(float) * (size_t)W[0], r, C);

    mt_ctx cf, cl;
    mt_test_ctx_init(&cf);
    mt_test_ctx_init(&cl);
    cf.compute_dtype = cl.compute_dtype = s->mode;
    mt_tensor *of = cp_forward(&cf, full, pos, seg, NULL, dout);
    mt_cp_group g = mt_cp_group_comm(comm);
    mt_tensor *ol = cp_forward(&cl, loc, pos_l, seg_l, &g, dout_l);

    /* the full run's rows of this rank, against the rank's results */
    char name[160];
    float *want = mt_malloc(sizeof(float) * (size_t)(B * Tl * W[0]), "want");
    cp_take_rows(want, of->data, B, T, sizeof(float) * (size_t)W[0], r, C);
    snprintf(name, sizeof name, "%s rank %d/%d out", label, r, C);
    mt_check_rel_l2(name, ol->data, want, B * Tl * W[0], 1e-6);
    for (int i = 0; i < QKV; i++) {
        cp_take_rows(want, full[i]->grad, B, T, sizeof(float) * (size_t)W[i], r, C);
        snprintf(name, sizeof name, "%s rank %d/%d d%s", label, r, C, names[i]);
        mt_check_rel_l2(name, loc[i]->grad, want, B * Tl * W[i], 1e-6);
    }
    free(want), free(dout), free(dout_l);
    mt_ctx_free(&cf);
    mt_ctx_free(&cl);
}

static int test_dist_cp_attention(void) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *comm = mt_comm_mpi_init(&argc, &argv);
    const int C = comm->size;
    EXPECT(C >= 2, "run me with at least 2 ranks (got %d)", C);
    /* chunks of 24 tokens (inside the kernels' 64-row tiles) and of 64 (whole tiles) */
    const cp_shape gqa = {2, 2 * C * 24, 4, 2, 16, MT_F32};
    const cp_shape mqa = {1, 2 * C * 64, 4, 1, 16, MT_F32};
    const cp_shape bf16 = {2, 2 * C * 24, 4, 2, 16, MT_BF16};
    check_shape("gqa fp32", &gqa, comm, 1);
    check_shape("mqa fp32", &mqa, comm, 2);
    check_shape("gqa bf16", &bf16, comm, 3);
    mt_comm_finalize(comm);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"dist_cp_attention_np2", test_dist_cp_attention},
    {"dist_cp_attention_np4", test_dist_cp_attention},
};
MT_TEST_MAIN(cases)
