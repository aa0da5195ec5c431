/* dist_zero.c: ZeRO-3 sharding on real MPI ranks against an unsharded AdamW computed here.
 * Gradients are small multiples of 1/64 so their sum over ranks is exact in any order; the
 * sharded run must then equal the reference bit for bit. Bucket sizes do not divide by P. */
#include "tests/support/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/bf16.h"
#include "train/zero.h"

/* Bucket 5, the last, odd and larger than the other odd ones, shares slot 0 with bucket 0 (as
 * lm_head and the embedding with gather unit expert): slot 1 is sized by buckets 1 and 3 only. */
#define N_BUCKETS 6
static const int64_t bucket_numel[N_BUCKETS] = {1100, 37, 1000, 5, 333, 1200};

static float init_value(int b, int64_t i) { return 0.01f * (float)((b * 131 + i * 7) % 50 - 25); }
static float grad_value(int rank, int step, int b, int64_t i) {
    return (float)((rank * 17 + step * 5 + b * 3 + i) % 33 - 16) / 64.0f;
}

/* The reference: one process, full vectors, the same formula, the gradients of all P ranks. */
static void ref_adamw_step(float **ref, float **rm, float **rv, int step, int P, int micro,
                           const mt_adamw *opt) {
    double bc1 = 1 - pow(opt->beta1, step), bc2 = 1 - pow(opt->beta2, step);
    for (int b = 0; b < N_BUCKETS; b++)
        for (int64_t i = 0; i < bucket_numel[b]; i++) {
            float g = 0;
            for (int r = 0; r < P; r++) g += grad_value(r, step, b, i);
            g *= (float)micro; /* exact: multiples of 1/64 */
            bool decay = b != 2 || i < 900;
            if (decay) ref[b][i] *= (float)(1.0 - opt->lr * opt->weight_decay);
            /* torch.optim.AdamW's fp32 arithmetic (lerp, sqrt(v)/sqrt(bc2) + eps) */
            rm[b][i] += (g - rm[b][i]) * (1.0f - 0.9f);
            rv[b][i] = rv[b][i] * 0.95f + (1.0f - 0.95f) * g * g;
            float denom = sqrtf(rv[b][i]) / (float)sqrt(bc2) + (float)opt->eps;
            ref[b][i] -= (float)(opt->lr / bc1) * rm[b][i] / denom;
        }
}

/* A sharded state with decay everywhere in bucket 2 except a "norm" range, master weights
 * init_value * scale, and the reference's full vectors (parameters, m, v) next to it. */
static void zero_setup(mt_zero *z, mt_comm *comm, mt_dtype gather, float scale, float **ref,
                       float **rm, float **rv) {
    mt_zero_init_gather(z, comm, mt_backend_cpu(), N_BUCKETS, bucket_numel, gather, false);
    mt_zero_range ranges[2] = {{0, 900, true, false}, {900, 100, false, false}};
    mt_zero_set_ranges(z, 2, ranges, 2);
    for (int b = 0; b < N_BUCKETS; b++) {
        ref[b] = calloc(bucket_numel[b], sizeof(float));
        rm[b] = calloc(bucket_numel[b], sizeof(float));
        rv[b] = calloc(bucket_numel[b], sizeof(float));
        for (int64_t i = 0; i < bucket_numel[b]; i++) ref[b][i] = init_value(b, i) * scale;
        int64_t lo, hi;
        mt_zero_owned_range(z, b, &lo, &hi);
        mt_zero_set_master(z, b, lo, hi, ref[b] + lo);
    }
}

/* node: the parameters node-shared (zero.h, mt_zero_share_node), which every rank of these
 * tests can have (one node, MPI shared memory): the same bits, one copy per step; and two
 * micro-batches a step (the first reduce-scatter writes the owned gradient, the second adds). */
static int zero_vs_unsharded(bool node) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *comm = mt_comm_mpi_init(&argc, &argv);
    int P = comm->size;
    mt_zero z;
    float *ref[N_BUCKETS], *rm[N_BUCKETS], *rv[N_BUCKETS];
    zero_setup(&z, comm, MT_F32, 1.0f, ref, rm, rv);
    if (node) {
        const bool shared = mt_zero_share_node(&z);
        EXPECT(shared == (P > 1), "node-shared parameters %s with %d ranks on one node",
               shared ? "taken" : "refused", P);
    }
    mt_adamw opt = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    const int micro = node ? 2 : 1;
    for (int step = 1; step <= 5; step++) {
        mt_zero_zero_grad(&z);
        for (int mb = 0; mb < micro; mb++)
            for (int b = N_BUCKETS - 1; b >= 0; b--) { /* backward order */
                mt_zero_gather(&z, b, true);
                float *g = mt_zero_slot_grad(&z, b);
                for (int64_t i = 0; i < bucket_numel[b]; i++)
                    g[i] = grad_value(comm->rank, step, b, i);
                mt_zero_reduce_grad(&z, b);
                mt_zero_release(&z, b);
            }
        opt.step = step;
        mt_zero_adamw_step(&z, &opt);
        ref_adamw_step(ref, rm, rv, step, P, micro, &opt);
    }
    for (int b = 0; b < N_BUCKETS; b++) {
        mt_zero_gather(&z, b, false);
        mt_zero_release(&z, b);
    }
    for (int b = 0; b < N_BUCKETS; b++) {
        if (!node) mt_zero_gather(&z, b, false);
        /* node-shared: every bucket at once, after one gather each; and the exports' view */
        const float *full = mt_zero_slot_data(&z, b), *master = mt_zero_gather_master(&z, b);
        int bad = 0;
        for (int64_t i = 0; i < bucket_numel[b]; i++) bad += full[i] != ref[b][i];
        for (int64_t i = 0; i < bucket_numel[b]; i++) bad += master[i] != ref[b][i];
        EXPECT(bad == 0, "bucket %d: %d of %lld parameters differ from the unsharded AdamW", b, bad,
               (long long)bucket_numel[b]);
        free(ref[b]);
        free(rm[b]);
        free(rv[b]);
    }
    /* the owned part shrinks with P (padding to 64*P is the only overhead) */
    int64_t total = 0;
    for (int b = 0; b < N_BUCKETS; b++) total += bucket_numel[b];
    EXPECT(z.total_shard * P <= total + N_BUCKETS * 64 * P, "owned %lld x %d vs %lld",
           (long long)z.total_shard, P, (long long)total);
    /* the planner (minimax-info --ranks) matches what was allocated */
    mt_zero_sizes plan = mt_zero_plan(P, N_BUCKETS, bucket_numel, MT_F32, false);
    /* node-shared: the slots keep only their gradient buffers; the node holds every bucket */
    const int64_t data_slots = z.node ? 4 * (z.slot_cap[0] + z.slot_cap[1]) : 0;
    int64_t padded = 0;
    for (int b = 0; b < N_BUCKETS; b++) padded += z.shard_numel[b] * P;
    EXPECT(mt_zero_node_bytes(&z) == (z.node ? 4 * padded : 0), "node bytes %lld for %lld floats",
           (long long)mt_zero_node_bytes(&z), (long long)padded);
    EXPECT(plan.owned == z.total_shard && plan.slot_numel == (P > 1 ? z.slot_numel : 0) &&
               plan.owned_bytes == mt_zero_owned_bytes(&z) &&
               plan.slot_bytes - data_slots == mt_zero_slot_bytes(&z),
           "mt_zero_plan: owned %lld slot %lld (%lld, %lld bytes), allocated %lld and %lld (%lld, "
           "%lld bytes)",
           (long long)plan.owned, (long long)plan.slot_numel, (long long)plan.owned_bytes,
           (long long)plan.slot_bytes, (long long)z.total_shard, (long long)z.slot_numel,
           (long long)mt_zero_owned_bytes(&z), (long long)mt_zero_slot_bytes(&z));
    EXPECT(mt_zero_slot_of(&z, N_BUCKETS - 1) == 0 && mt_zero_slot_of(&z, 4) == 0 &&
               mt_zero_slot_of(&z, 3) == 1,
           "slots: the last bucket joins slot 0");
    if (P > 1) {
        EXPECT(z.gathers > 0 && z.reduce_scatters == 5 * micro * N_BUCKETS, "collective counts");
        /* node-shared: one copy of the shards a step and one for the final look */
        EXPECT(!node || z.gathers == 6, "node-shared: %lld copies, 6 expected",
               (long long)z.gathers);
        EXPECT(z.slot_cap[0] >= 1200 && z.slot_cap[1] < 1200 && z.slot_cap[1] >= 37,
               "slot sizes %lld and %lld", (long long)z.slot_cap[0], (long long)z.slot_cap[1]);
    } else /* one rank: the slots are the shards, no collective and no slot memory */
        EXPECT(z.gathers == 0 && z.reduce_scatters == 0 && mt_zero_slot_bytes(&z) == 0 &&
                   mt_zero_slot_data(&z, 1) == z.master + z.shard_offset[1],
               "one rank: slots must alias the shards");
    mt_zero_free(&z);
    mt_comm_finalize(comm);
    return MT_TEST_OK;
}
static int test_zero_vs_unsharded(void) { return zero_vs_unsharded(false); }
static int test_zero_node(void) { return zero_vs_unsharded(true); }

/* bf16 gathers: every gathered parameter is its master weight rounded to bf16 (also with one
 * rank), through prefetches that land while another bucket is in use; the master weights stay
 * fp32 and follow the unsharded AdamW exactly; mt_zero_gather_master gives them whole. */
static int test_zero_bf16(void) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *comm = mt_comm_mpi_init(&argc, &argv);
    const int P = comm->size;
    mt_zero z;
    float *ref[N_BUCKETS], *rm[N_BUCKETS], *rv[N_BUCKETS];
    zero_setup(&z, comm, MT_BF16, 1.01f, ref, rm, rv); /* 1.01: values bf16 cannot hold */
    int bad_gather = 0, rounded = 0;
    mt_adamw opt = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    for (int step = 1; step <= 4; step++) {
        mt_zero_zero_grad(&z);
        for (int b = 0; b < N_BUCKETS; b++) { /* forward order, prefetching the next */
            mt_zero_gather(&z, b, false);
            mt_zero_prefetch(&z, b + 1);
            const float *x = mt_zero_slot_data(&z, b);
            for (int64_t i = 0; i < bucket_numel[b]; i++) {
                bad_gather += x[i] != mt_bf16_round(ref[b][i]);
                rounded += x[i] != ref[b][i];
            }
        }
        for (int b = N_BUCKETS - 1; b >= 0; b--) { /* backward order, prefetching the previous */
            mt_zero_gather(&z, b, true);
            mt_zero_prefetch(&z, b - 1);
            const float *x = mt_zero_slot_data(&z, b);
            float *g = mt_zero_slot_grad(&z, b);
            for (int64_t i = 0; i < bucket_numel[b]; i++) {
                bad_gather += x[i] != mt_bf16_round(ref[b][i]);
                g[i] = grad_value(comm->rank, step, b, i);
            }
            mt_zero_reduce_grad(&z, b);
        }
        opt.step = step;
        mt_zero_adamw_step(&z, &opt);
        ref_adamw_step(ref, rm, rv, step, P, 1, &opt);
    }
    EXPECT(bad_gather == 0, "%d gathered parameters are not their master weight rounded to bf16",
           bad_gather);
    EXPECT(rounded > 0, "no gathered parameter differs from fp32: nothing was rounded");
    for (int b = 0; b < N_BUCKETS; b++) {
        const float *full = mt_zero_gather_master(&z, b);
        int bad = 0;
        for (int64_t i = 0; i < bucket_numel[b]; i++) bad += full[i] != ref[b][i];
        EXPECT(bad == 0, "bucket %d: %d master weights differ from the unsharded AdamW", b, bad);
        mt_zero_gather(&z, b, false); /* back to the rounded values */
        const float *x = mt_zero_slot_data(&z, b);
        bad = 0;
        for (int64_t i = 0; i < bucket_numel[b]; i++) bad += x[i] != mt_bf16_round(ref[b][i]);
        EXPECT(bad == 0, "bucket %d: a gather after the fp32 one is not rounded (%d)", b, bad);
        free(ref[b]);
        free(rm[b]);
        free(rv[b]);
    }
    EXPECT(z.gathers > 0 && mt_zero_slot_bytes(&z) > 0, "bf16 gathers use slots, also at P = 1");
    mt_zero_sizes plan = mt_zero_plan(P, N_BUCKETS, bucket_numel, MT_BF16, false);
    EXPECT(plan.owned_bytes == mt_zero_owned_bytes(&z) && plan.slot_bytes == mt_zero_slot_bytes(&z),
           "mt_zero_plan (bf16 gathers): %lld and %lld bytes, allocated %lld and %lld",
           (long long)plan.owned_bytes, (long long)plan.slot_bytes,
           (long long)mt_zero_owned_bytes(&z), (long long)mt_zero_slot_bytes(&z));
    mt_zero_free(&z);
    mt_comm_finalize(comm);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"dist_zero_np1", test_zero_vs_unsharded}, {"dist_zero_np2", test_zero_vs_unsharded},
    {"dist_zero_np3", test_zero_vs_unsharded}, {"dist_zero_bf16_np1", test_zero_bf16},
    {"dist_zero_bf16_np2", test_zero_bf16},    {"dist_zero_bf16_np3", test_zero_bf16},
    {"dist_zero_node_np2", test_zero_node},    {"dist_zero_node_np3", test_zero_node},
};
MT_TEST_MAIN(cases)
