/* dist_cp_model.c: the whole model under context parallelism (mt_ctx.cp, issue 39) on C real MPI
 * ranks against the one-rank forward and backward of the same batch that every rank also runs:
 * tiny Text-01 (lightning and softmax layers, softmax router) and tiny M2 (softmax attention
 * with QK norm and partial RoPE, sigmoid router) and tiny M3 (dense and MSA layers, the indexer
 * KL in the loss, blocks of 4 with 3 kept), the router's load-balancing loss on, two rows
 * of packed samples whose borders fall inside and across the chunks, the second row padded
 * (valid_len). Each rank holds chunks r and 2C-1-r of every row (autograd/context_parallel.h);
 * the ranks' losses (each its tokens' part, over the whole batch's labelled tokens) and their
 * parameter gradients, summed over the ranks, must equal the one-rank run's to 1e-6 relative
 * (the loss) and relative L2 per bucket (the gradients). */
#include "tests/support/harness.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/minimax.h"
#include "tests/models/head_model.h"
#include "models/weights.h"
#include "train/comm.h"
#include "train/cp_group.h"

enum { CPM_B = 2, CPM_T = 64 };

/* A model of the config with its buckets bound on the host (tests/models/head_model.h), the
 * router's load-balancing loss on (it crosses the tokens too), weights drawn with seed 3. */
static void cpm_bind(ph_model *pm, const char *config) {
    mt_minimax_config cfg;
    mt_minimax_config_load(config, &cfg);
    cfg.output_router_logits = true;
    if (cfg.msa_block > 0) { /* MSA: blocks of 4 of which 3 kept, so queries drop blocks */
        cfg.msa_block = 4;
        cfg.msa_topk = 3;
    }
    ph_bind(pm, &cfg, MT_GATHER_LAYER);
    mt_weights_init_random(&pm->m, 3);
}

/* The batch (B,T): ids, labels (shifted, -100 at padding and some prompt tokens), positions
 * restarting at each packed sample, segment ids; valid_len the rows' real tokens. */
typedef struct {
    int32_t ids[CPM_B * CPM_T], labels[CPM_B * CPM_T], pos[CPM_B * CPM_T], seg[CPM_B * CPM_T];
    int64_t valid_len[CPM_B];
    int64_t targets;
} cpm_batch;

static void cpm_make(cpm_batch *bt, int V) {
    const int border[CPM_B] = {27, 9}; /* where each row's second sample starts */
    bt->valid_len[0] = CPM_T;
    bt->valid_len[1] = 50;
    uint64_t x = 12345;
    bt->targets = 0;
    for (int b = 0; b < CPM_B; b++)
        for (int t = 0; t < CPM_T; t++) {
            const int i = b * CPM_T + t;
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const bool real = t < bt->valid_len[b];
            bt->ids[i] = real ? (int32_t)((x >> 33) % (uint64_t)V) : 2;
            bt->seg[i] = t < border[b] ? 0 : real ? 1 : 2;
            /* the padding is a sample of its own, its positions restarting (MSA's row rule) */
            bt->pos[i] = t < border[b] ? t : real ? t - border[b] : t - (int)bt->valid_len[b];
            bt->labels[i] = real && t % 5 != 1 ? (int32_t)((x >> 13) % (uint64_t)V) : -100;
            bt->targets += bt->labels[i] >= 0;
        }
}

/* Rank r's tokens of each row (B,T) -> (B,T/C). */
static void cpm_take(int32_t *dst, const int32_t *src, int C, int r) {
    const int64_t Tl = CPM_T / C;
    for (int64_t b = 0; b < CPM_B; b++)
        for (int64_t i = 0; i < Tl; i++)
            dst[b * Tl + i] = src[b * CPM_T + mt_cp_global_index(r, C, CPM_T, i)];
}

/* Forward and backward of the batch's rows as given (T tokens a row, the whole batch's
 * targets as the loss's denominator), gradients accumulated into the bound buffers; returns
 * the loss. */
static double cpm_step(ph_model *pm, mt_ctx *c, const cpm_batch *full, const int32_t *const *a,
                       int64_t T) {
    mt_ctx_reset(c);
    mt_tensor *t[4];
    const char *names[4] = {"ids", "labels", "pos", "seg"};
    for (int k = 0; k < 4; k++) {
        t[k] = mt_tensor_new(c, MT_I32, 2, (int64_t[]){CPM_B, T}, names[k]);
        memcpy(t[k]->data, a[k], sizeof(int32_t) * (size_t)(CPM_B * T));
    }
    mt_minimax_batch batch = {.ids = t[0],
                              .labels = t[1],
                              .pos = t[2],
                              .seg = t[3],
                              .valid_len = full->valid_len,
                              .loss_denom = (float)full->targets,
                              .aux_denom = (float)full->targets,
                              .fused_loss = true};
    mt_minimax_out out;
    mt_minimax_forward(&pm->m, c, &batch, NULL, &out);
    mt_backward(c, out.loss, NULL);
    return ((const float *)out.loss->data)[0];
}

static void cpm_zero_grads(ph_model *pm) {
    for (int b = 0; b < pm->m.n_buckets; b++)
        memset(pm->grad[b], 0, sizeof(float) * (size_t)pm->m.bucket_numel[b]);
}

static void cpm_check(const char *config, mt_comm *comm) {
    const int C = comm->size, r = comm->rank;
    ph_model pm;
    cpm_bind(&pm, config);
    cpm_batch bt;
    cpm_make(&bt, pm.m.cfg.vocab_size);
    mt_ctx c;
    mt_ctx_init(&c, mt_backend_cpu(), (size_t)256 << 20, 1 << 14);
    /* the one-rank run of the whole rows */
    const int32_t *whole[4] = {bt.ids, bt.labels, bt.pos, bt.seg};
    cpm_zero_grads(&pm);
    const double loss_ref = cpm_step(&pm, &c, &bt, whole, CPM_T);
    float **ref = mt_calloc((size_t)pm.m.n_buckets, sizeof(float *), "reference grads");
    for (int b = 0; b < pm.m.n_buckets; b++) {
        ref[b] = mt_malloc(sizeof(float) * (size_t)pm.m.bucket_numel[b], "reference grad");
        memcpy(ref[b], pm.grad[b], sizeof(float) * (size_t)pm.m.bucket_numel[b]);
    }
    /* this rank's chunks under the group */
    int32_t local[4][CPM_B * CPM_T];
    const int32_t *parts[4];
    for (int k = 0; k < 4; k++) {
        cpm_take(local[k], whole[k], C, r);
        parts[k] = local[k];
    }
    mt_cp_group g = mt_cp_group_comm(comm);
    c.cp = &g;
    cpm_zero_grads(&pm);
    double loss = cpm_step(&pm, &c, &bt, parts, CPM_T / C);
    c.cp = NULL;
    MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const double loss_err = fabs(loss - loss_ref) / fabs(loss_ref);
    EXPECT(loss_err <= 1e-6, "%s, C = %d: loss %.9g, one rank %.9g (%.2g relative)", config, C,
           loss, loss_ref, loss_err);
    double worst = 0;
    for (int b = 0; b < pm.m.n_buckets; b++) {
        const int64_t n = pm.m.bucket_numel[b];
        MPI_Allreduce(MPI_IN_PLACE, pm.grad[b], (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double d2 = 0, r2 = 0;
        for (int64_t i = 0; i < n; i++) {
            const double d = (double)pm.grad[b][i] - ref[b][i];
            d2 += d * d;
            r2 += (double)ref[b][i] * ref[b][i];
        }
        const double err = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
        if (err > worst) worst = err;
        EXPECT(err <= 1e-6, "%s, C = %d: bucket %d's gradient %.2g relative L2 from one rank's",
               config, C, b, err);
        free(ref[b]);
    }
    if (r == 0)
        printf("%s, C = %d: loss %.9g vs %.9g (%.2g), worst bucket gradient %.2g relative L2\n",
               config, C, loss, loss_ref, loss_err, worst);
    free(ref);
    mt_ctx_free(&c);
    ph_free(&pm);
}

static int test_dist_cp_model(void) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *comm = mt_comm_mpi_init(&argc, &argv);
    EXPECT(comm->size >= 2 && CPM_T % (2 * comm->size) == 0, "run me with 2 or 4 ranks (got %d)",
           comm->size);
    cpm_check("recipes/configs/tiny.json", comm);
    cpm_check("recipes/configs/tiny-m2.json", comm);
    cpm_check("recipes/configs/tiny-m3.json", comm);
    mt_comm_finalize(comm);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {{"dist_cp_model_np2", test_dist_cp_model},
                                     {"dist_cp_model_np4", test_dist_cp_model}};
MT_TEST_MAIN(cases)
