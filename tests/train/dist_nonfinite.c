/* dist_nonfinite.c: where a NaN is, on real ranks (train/nonfinite.h), with the ZeRO-3 shards
 * of the tiny model (the trainer's layout: buckets of a parity share a gather slot, so a
 * layer's parameters alias the ones of the layer two before):
 *   - a loaded state: a NaN in the master weights and in AdamW's v is named by parameter,
 *     element and array on the rank that owns it;
 *   - a step: a NaN in a master weight of layer 2 is named by the first op that reads it; a
 *     NaN that one rank's backward adds to a gradient of layer 1 in the second of two
 *     micro-batches is named on every rank, with that rank and micro-batch; a finite step
 *     says so;
 *   - MiniMax-M2 (dist_nonfinite_m2_np2): a NaN correction bias (a buffer) and a NaN gradient of
 *     the whole-width q norm, named the same way. */
#include "tests/support/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/weights.h"
#include "train/nonfinite.h"

#define T_LEN   24
#define N_MICRO 2

typedef struct {
    mt_minimax model;
    mt_zero zero;
    mt_ctx ctx;
    mt_sharded sh;
    int32_t ids[T_LEN], labels[T_LEN];
    mt_tensor tid, tlab;
    int64_t micro; /* the micro-batch the diagnosis runs now */
} run;

static mt_minimax_batch run_batch(void *user, int64_t m) {
    run *r = user;
    r->micro = m;
    mt_rng rng;
    mt_rng_seed(&rng, (uint64_t)(100 * m + r->zero.comm->rank));
    for (int t = 0; t < T_LEN; t++) {
        r->ids[t] = (int32_t)(mt_rng_u64(&rng) % (uint64_t)r->model.cfg.vocab_size);
        r->labels[t] = (int32_t)(mt_rng_u64(&rng) % (uint64_t)r->model.cfg.vocab_size);
    }
    mt_tensor_wrap(&r->tid, MT_I32, 2, (int64_t[]){1, T_LEN}, r->ids, NULL, "ids");
    mt_tensor_wrap(&r->tlab, MT_I32, 2, (int64_t[]){1, T_LEN}, r->labels, NULL, "labels");
    return (mt_minimax_batch){.ids = &r->tid,
                              .labels = &r->tlab,
                              .loss_denom = (float)(r->zero.comm->size * N_MICRO * T_LEN)};
}

/* Sets element e of parameter `name` in array a (0 master, 1 m, 2 v) on the rank owning it;
 * returns the old value there (0 elsewhere). Collective for the master weights. */
static float run_poke(run *r, const char *name, int64_t e, int a, float v) {
    const mt_minimax *m = &r->model;
    const int p = mt_minimax_find_param(m, name);
    MT_CHECK(p >= 0, "no parameter %s", name);
    const int b = m->info[p].bucket;
    int64_t lo, hi, k = m->info[p].offset + e;
    mt_zero_owned_range(&r->zero, b, &lo, &hi);
    if (a == 0) mt_zero_master_changed(&r->zero); /* on every rank: the gathers stay in step */
    if (k < lo || k >= hi) return 0;
    float *base = a == 0 ? r->zero.master : a == 1 ? r->zero.m : r->zero.v;
    float *x = base + r->zero.shard_offset[b] + (k - lo), old = *x;
    *x = v;
    return old;
}

/* The tape's tag hook around the sharded one: entering the backward of the poked bucket in
 * micro-batch 1 on the last rank, a NaN goes into the poked parameter's gathered gradient, as
 * if an earlier kernel of this rank had written it there. */
static void (*sharded_hook)(void *, int, bool);
static const char *grad_param;
static int64_t grad_elem;
static run *grad_run;
static void poking_hook(void *user, int bucket, bool enter) {
    sharded_hook(user, bucket, enter);
    run *r = grad_run;
    if (!grad_param || !enter || r->micro != 1 || r->zero.comm->rank != r->zero.comm->size - 1)
        return;
    const int p = mt_minimax_find_param(&r->model, grad_param);
    if (r->model.info[p].bucket != bucket) return;
    const float nan = NAN;
    r->ctx.be->to_device(mt_zero_slot_grad(&r->zero, bucket) + r->model.info[p].offset + grad_elem,
                         &nan, sizeof(nan));
}

static bool contains(const char *msg, const char *want) {
    const bool ok = strstr(msg, want) != NULL;
    EXPECT(ok, "want \"%s\" in:\n  %s", want, msg);
    return ok;
}

/* The model of `config` sharded over comm's ranks, randomly initialised. */
static run *run_new(mt_comm *comm, const char *config) {
    mt_minimax_config cfg;
    mt_minimax_config_load(config, &cfg);
    run *r = calloc(1, sizeof(run));
    mt_minimax_init(&r->model, &cfg);
    mt_zero_init(&r->zero, comm, mt_backend_cpu(), r->model.n_buckets, r->model.bucket_numel);
    mt_ctx_init(&r->ctx, mt_backend_cpu(), (size_t)128 << 20, 1 << 14);
    mt_sharded_init(&r->sh, &r->model, &r->zero, &r->ctx);
    for (int b = 0; b < r->model.n_buckets; b++) {
        int64_t lo, hi;
        mt_zero_owned_range(&r->zero, b, &lo, &hi);
        mt_weights_init_random_range(&r->model, 5, b, lo, hi,
                                     r->zero.master + r->zero.shard_offset[b]);
    }
    mt_zero_master_changed(&r->zero);
    return r;
}

static void run_free(run *r) {
    mt_ctx_free(&r->ctx);
    mt_zero_free(&r->zero);
    mt_minimax_free(&r->model);
    free(r);
}

/* A NaN put into master weight `name` element e: check_finite names it on the one rank that
 * owns it, and the step names the first op that reads it (want_read: "op (bucket)"). The old
 * value is put back. */
static void expect_master_nan(run *r, const char *name, int64_t e, const char *want_read) {
    char msg[1024], want[512];
    const float old = run_poke(r, name, e, 0, NAN);
    const bool ok = mt_sharded_check_finite(&r->sh, msg, sizeof(msg));
    int64_t holders = !ok;
    r->zero.comm->allreduce_i64(r->zero.comm, &holders, 1);
    EXPECT(holders == 1, "%lld ranks found the NaN master weight", (long long)holders);
    snprintf(want, sizeof(want), "the master weights of %s hold a non-finite value at element %lld",
             name, (long long)e);
    if (!ok) contains(msg, want);
    EXPECT(mt_sharded_find_nonfinite(&r->sh, N_MICRO, run_batch, r, msg, sizeof(msg)),
           "no finding: %s", msg);
    contains(msg, "(rank 0, micro-batch 1 of 2, run again with checks)");
    snprintf(want, sizeof(want), "parameter %s element %lld = nan, read by the forward of %s", name,
             (long long)e, want_read);
    contains(msg, want);
    if (r->zero.comm->rank == 0) printf("  %d ranks: %s\n", r->zero.comm->size, msg);
    run_poke(r, name, e, 0, old);
}

/* A NaN that the last rank's backward of micro-batch 2 adds to the gradient of `name` element
 * e, named on every rank by the backward that wrote it (want_op: "op (bucket)"). */
static void expect_grad_nan(run *r, const char *name, int64_t e, const char *want_op) {
    char msg[1024], want[512];
    sharded_hook = r->ctx.tag_hook;
    r->ctx.tag_hook = poking_hook;
    grad_run = r;
    grad_param = name;
    grad_elem = e;
    EXPECT(mt_sharded_find_nonfinite(&r->sh, N_MICRO, run_batch, r, msg, sizeof(msg)),
           "no finding: %s", msg);
    snprintf(want, sizeof(want),
             "(rank %d, micro-batch 2 of 2, run again with checks): the gradient of parameter %s "
             "element %lld = nan, from the backward of %s",
             r->zero.comm->size - 1, name, (long long)e, want_op);
    contains(msg, want);
    if (r->zero.comm->rank == 0) printf("  %d ranks: %s\n", r->zero.comm->size, msg);
    grad_param = NULL;
    r->ctx.tag_hook = sharded_hook;
}

static int test_nonfinite(void) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *comm = mt_comm_mpi_init(&argc, &argv);
    run *r = run_new(comm, "recipes/configs/tiny.json");
    const mt_minimax_config cfg = r->model.cfg;
    char msg[1024], want[512];

    /* all finite */
    EXPECT(mt_sharded_check_finite(&r->sh, msg, sizeof(msg)), "a finite state refused: %s", msg);
    EXPECT(!mt_sharded_find_nonfinite(&r->sh, N_MICRO, run_batch, r, msg, sizeof(msg)),
           "a finite step: %s", msg);
    contains(msg, "every activation and gradient of every rank was finite");

    /* a loaded state: master weights, then AdamW's v; on the owning rank only (local); the
     * step: the first op reading the weight names it (layer 2's slot also holds layer 0's
     * pointers) */
    expect_master_nan(r, "model.layers.2.self_attn.qkv_proj.weight", 3 * cfg.hidden_size + 77,
                      "matmul (model.layers.2)");

    const char *wv = "model.layers.3.block_sparse_moe.experts.1.w2.weight";
    run_poke(r, wv, 5, 2, INFINITY);
    const bool ok = mt_sharded_check_finite(&r->sh, msg, sizeof(msg));
    int64_t holders = !ok;
    comm->allreduce_i64(comm, &holders, 1);
    EXPECT(holders == 1, "%lld ranks found the infinite v", (long long)holders);
    snprintf(want, sizeof(want),
             "the AdamW second moments (v) of %s hold a non-finite value at element 5", wv);
    if (!ok) contains(msg, want);
    run_poke(r, wv, 5, 2, 0.0f);

    /* a gradient: the last rank's backward of micro-batch 2 (layer 1's slot also holds the
     * embedding's pointers) */
    expect_grad_nan(r, "model.layers.1.self_attn.out_proj.weight", 1000, "matmul (model.layers.1)");
    run_free(r);
    mt_comm_finalize(comm);
    return MT_TEST_OK;
}

/* MiniMax-M2 (tiny-m2): the router's correction bias, a buffer the optimizer never changes, is
 * named like any weight, in the loaded state and by the router that reads it; the gradient of
 * the whole-width q norm by the RMSNorm backward that reads it. */
static int test_nonfinite_m2(void) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *comm = mt_comm_mpi_init(&argc, &argv);
    run *r = run_new(comm, "recipes/configs/tiny-m2.json");
    expect_master_nan(r, "model.layers.1.block_sparse_moe.e_score_correction_bias", 3,
                      "moe_route_sigmoid (model.layers.1)");
    expect_grad_nan(r, "model.layers.2.self_attn.q_norm.weight", 150, "rmsnorm (model.layers.2)");
    run_free(r);
    mt_comm_finalize(comm);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"dist_nonfinite_np1", test_nonfinite},
    {"dist_nonfinite_np2", test_nonfinite},
    {"dist_nonfinite_np3", test_nonfinite},
    {"dist_nonfinite_m2_np2", test_nonfinite_m2},
};
MT_TEST_MAIN(cases)
