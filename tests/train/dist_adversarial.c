/* dist_adversarial.c: ZeRO-3 with adversarial MoE routing on real ranks, for MiniMax-Text-01
 * (recipes/configs/tiny.json: 4 experts top-2, a lightning layer 0) and MiniMax-M2
 * (recipes/configs/tiny-m2.json: 8 experts top-2, the sigmoid router with its correction bias,
 * a softmax layer 0; the *_m2_* cases).
 *
 * Layer 0 is rigged so routing is decided by the rank: its mixer output is zero and every
 * token's embedding is a unit vector e_g (g = token id % G, G = E / K groups of K experts), so
 * the router input is sqrt(C) e_g; the router sends group g to experts {Kg, ..., Kg + K - 1}
 * only (logit +sqrt(C) there, -sqrt(C) elsewhere; M2's sigmoid scores are then 1 and 0 to 1e-5,
 * and its correction bias, rigged to values in [-0.2, 0.2], reorders a group but never
 * changes it). Rank r feeds tokens of group r % G, so on each
 * rank E - K experts receive no token at all. The step must
 * neither hang (ctest's timeout) nor differ from an unsharded single-process run of the same
 * global batch; and before the reduce-scatter, the idle experts' local gradients must be
 * exactly zero on every rank. The _experts cases gather expert by expert (dist.gather_unit
 * "expert": every expert its own bucket, also the idle ones) against a single-process run of
 * the same layout: the sharding is what is compared. (The layouts against each other: with
 * unit expert the loss runs through lm_head's vocabulary parts, the same sums in another order,
 * and AdamW on rigged parameters with near-zero gradients turns those last bits into updates of
 * the learning rate's order; dist_expert_match compares the layouts in a training run: 1e-7
 * after 20 steps.) The learning rate is 1e-3: AdamW's update divides each gradient by its own
 * running size, so a summation order's rounding moves a parameter by up to lr times that
 * rounding's relative size, amplified where the gradient changes size between steps; at 1e-2
 * the expert-parallel sums (each expert's rows of all ranks in one product, against one product
 * per micro-batch here) came to 1.2e-5 in the sanitizer build, at 1e-3 they are 5e-7, while a
 * lost or doubled row moves a parameter by the whole update. M2 also runs with weight decay,
 * and its correction biases, buffers without gradients, must come out of the steps exactly as
 * rigged on every rank (frozen in the optimizer, decay included). */
#include "tests/support/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/weights.h"
#include "train/expert_parallel.h"
#include "train/sharded.h"

#define T_LEN 24
#define STEPS 3

typedef struct {
    mt_minimax model;
    mt_zero zero;
    mt_ctx ctx;
    mt_sharded sh;
} run;

/* Routing groups: G = E / K. */
static int64_t n_groups(const mt_minimax_config *cfg) {
    return cfg->num_local_experts / cfg->num_experts_per_tok;
}

/* Element j of parameter p's tensor (a vocabulary part's: of the whole tensor). */
static float rigged_value(const mt_minimax *m, int p, int64_t j, float random) {
    const mt_param_info *in = &m->info[p];
    const int64_t C = m->cfg.hidden_size, G = n_groups(&m->cfg), K = m->cfg.num_experts_per_tok;
    if (!strcmp(in->name, "model.layers.0.self_attn.out_proj.weight") || /* lightning */
        !strcmp(in->name, "model.layers.0.self_attn.o_proj.weight"))     /* softmax */
        return 0.0f;
    if (!strcmp(in->name, "model.embed_tokens.weight")) {
        int64_t v = j / C, c = j % C;
        if (m->plan[0].residual != MT_RESIDUAL_PLAIN) return c == v % G ? 1.0f : 0.0f;
        /* M2: the stream keeps the embedding's scale (a plain residual), which the mixer's
         * output, no longer zero after an AdamW step, must not outweigh; and the tokens of a
         * group differ outside the router's G columns, else every softmax layer averages
         * equal values, its q and k gradients are rounding noise, and AdamW (eps 1e-8) turns
         * that noise into updates of the learning rate's size */
        return c == v % G ? 256.0f : c >= G ? 800.0f * random : 0.0f;
    }
    if (!strcmp(in->name, "model.layers.0.block_sparse_moe.gate.weight")) {
        int64_t e = j / C, c = j % C, g = e / K;
        return c == g ? 1.0f : c < G ? -1.0f : 0.0f;
    }
    if (strstr(in->name, ".block_sparse_moe.e_score_correction_bias"))
        return 0.1f * (float)((j * 7) % 5) - 0.2f; /* [-0.2, 0.2]: scores saturate to 0, 1 */
    return random;
}

static void run_init(run *r, const mt_minimax_config *cfg, mt_comm *comm, mt_gather_unit unit) {
    mt_minimax_init_unit(&r->model, cfg, unit);
    mt_zero_init(&r->zero, comm, mt_backend_cpu(), r->model.n_buckets, r->model.bucket_numel);
    mt_ctx_init(&r->ctx, mt_backend_cpu(), (size_t)128 << 20, 1 << 14);
    mt_sharded_init(&r->sh, &r->model, &r->zero, &r->ctx);
    for (int b = 0; b < r->model.n_buckets; b++) {
        int64_t lo, hi;
        mt_zero_owned_range(&r->zero, b, &lo, &hi);
        float *dst = r->zero.master + r->zero.shard_offset[b];
        mt_weights_init_random_range(&r->model, 5, b, lo, hi, dst);
        for (int p = 0; p < r->model.n_params; p++) {
            const mt_param_info *in = &r->model.info[p];
            if (in->bucket != b) continue;
            for (int64_t j = 0; j < in->numel; j++) {
                int64_t k = in->offset + j;
                if (k >= lo && k < hi)
                    dst[k - lo] = rigged_value(&r->model, p, in->src_offset + j, dst[k - lo]);
            }
        }
    }
}

static void run_free(run *r) {
    mt_ctx_free(&r->ctx);
    mt_zero_free(&r->zero);
    mt_minimax_free(&r->model);
}

/* Every rank feeds group 0 (the expert-parallel cases: all tokens to the experts of one rank). */
static bool one_group;

/* The batch rank q feeds: tokens of group q % G (or 0), random targets. */
static void make_batch(int q, int step, int V, int G, int32_t *ids, int32_t *labels) {
    mt_rng rng;
    mt_rng_seed(&rng, (uint64_t)(1000 * step + q));
    for (int t = 0; t < T_LEN; t++) {
        ids[t] = (int32_t)(G * (mt_rng_u64(&rng) % (uint64_t)(V / G)) + (one_group ? 0 : q % G));
        labels[t] = t < 3 ? -100 : (int32_t)(mt_rng_u64(&rng) % (uint64_t)V);
    }
}

/* Checks, before the reduce-scatter of a bucket with layer 0's experts, that this rank's idle
 * experts have zero gradient and its busy ones do not; then does the usual reduce-scatter. */
static void (*sharded_hook)(void *, int, bool);
static int check_group = -1;
static void checking_hook(void *user, int bucket, bool enter) {
    mt_sharded *s = user;
    for (int e = 0; e < s->model->cfg.num_local_experts && !enter && check_group >= 0; e++) {
        if (mt_minimax_expert_bucket(s->model, 0, e) != bucket) continue;
        const float *g = mt_zero_slot_grad(s->zero, bucket);
        const char *kinds[3] = {"w1", "w2", "w3"};
        for (int k = 0; k < 3; k++) {
            char name[128];
            snprintf(name, sizeof(name), "model.layers.0.block_sparse_moe.experts.%d.%s.weight", e,
                     kinds[k]);
            const mt_param_info *in = &s->model->info[mt_minimax_find_param(s->model, name)];
            double ss = 0;
            for (int64_t j = 0; j < in->numel; j++) ss += fabs(g[in->offset + j]);
            bool busy = e / s->model->cfg.num_experts_per_tok == check_group;
            EXPECT(busy ? ss > 0 : ss == 0, "rank group %d, expert %d %s: local |grad| sum %g",
                   check_group, e, kinds[k], ss);
        }
    }
    sharded_hook(user, bucket, enter);
}

/* The correction biases of every layer after the steps (bucket slots gathered) equal the
 * rigged values bit for bit; returns how many were checked. */
static int64_t biases_unchanged(run *r) {
    int64_t n = 0;
    for (int p = 0; p < r->model.n_params; p++) {
        const mt_param_info *in = &r->model.info[p];
        if (!in->buffer) continue;
        mt_zero_gather(&r->zero, in->bucket, false);
        const float *x = mt_zero_slot_data(&r->zero, in->bucket) + in->offset;
        for (int64_t j = 0; j < in->numel; j++, n++)
            EXPECT(x[j] == rigged_value(&r->model, p, j, NAN), "%s[%lld] = %g after the steps",
                   in->name, (long long)j, (double)x[j]);
        mt_zero_release(&r->zero, in->bucket);
    }
    return n;
}

/* The element of bucket b that differs most between the runs, by parameter name. */
static void report_worst(run *a, run *r, int b) {
    mt_zero_gather(&a->zero, b, false);
    mt_zero_gather(&r->zero, b, false);
    const float *x = mt_zero_slot_data(&a->zero, b), *y = mt_zero_slot_data(&r->zero, b);
    for (int p = 0; p < r->model.n_params; p++) {
        const mt_param_info *in = &r->model.info[p];
        if (in->bucket != b) continue;
        double num = 0, den = 0, worst = 0;
        int64_t wj = 0;
        for (int64_t j = 0; j < in->numel; j++) {
            double d = (double)x[in->offset + j] - y[in->offset + j];
            num += d * d;
            den += (double)y[in->offset + j] * y[in->offset + j];
            if (fabs(d) > worst) worst = fabs(d), wj = j;
        }
        printf("    %s: relative L2 difference %.3g, worst [%lld] %.9g vs %.9g\n", in->name,
               sqrt(num / (den > 0 ? den : 1)), (long long)wj, (double)x[in->offset + wj],
               (double)y[in->offset + wj]);
    }
}

static int adversarial_ep(const char *config, mt_gather_unit unit, int P) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *world = mt_comm_mpi_init(&argc, &argv);
    int N = world->size, rank = world->rank;
    mt_minimax_config cfg;
    mt_minimax_config_load(config, &cfg);
    const int G = (int)n_groups(&cfg);
    mt_layer_plan p0;
    mt_config_layer_plan(&cfg, 0, &p0);
    const bool m2 = p0.router == MT_ROUTER_SIGMOID;
    MT_CHECK(G >= 2 && G * cfg.num_experts_per_tok == cfg.num_local_experts &&
                 G <= cfg.hidden_size && cfg.vocab_size % G == 0,
             "%s: the rigging needs E = G K with 2 <= G <= C groups", config);
    run sharded, ref;
    run_init(&sharded, &cfg, world, unit);
    run_init(&ref, &cfg, mt_comm_self(), unit);
    mt_expert_parallel ep;
    mt_expert_parallel_init(&ep, P, world, world, &sharded.model, &sharded.zero);
    sharded_hook = sharded.ctx.tag_hook;
    sharded.ctx.tag_hook = checking_hook;

    int32_t ids[T_LEN], labels[T_LEN];
    mt_tensor tid, tlab;
    mt_tensor_wrap(&tid, MT_I32, 2, (int64_t[]){1, T_LEN}, ids, NULL, "ids");
    mt_tensor_wrap(&tlab, MT_I32, 2, (int64_t[]){1, T_LEN}, labels, NULL, "labels");
    mt_minimax_batch batch = {.ids = &tid, .labels = &tlab, .loss_denom = (float)(N * (T_LEN - 4))};
    double worst_loss = 0;
    for (int step = 1; step <= STEPS; step++) {
        mt_adamw opt = {.lr = 1e-3,
                        .beta1 = 0.9,
                        .beta2 = 0.999,
                        .eps = 1e-8,
                        .weight_decay = m2 ? 0.1 : 0.0,
                        .step = step};
        double gn;
        /* sharded: this rank's batch */
        mt_zero_zero_grad(&sharded.zero);
        make_batch(rank, step, cfg.vocab_size, G, ids, labels);
        check_group = P > 1 ? -1 : rank % G; /* under EP a rank computes its own experts only */
        double loss = mt_sharded_micro_step(&sharded.sh, &batch, NULL);
        check_group = -1;
        world->allreduce_f64(world, &loss, 1);
        EXPECT(mt_sharded_optimizer_step(&sharded.sh, &opt, 1.0, &gn), "step %d not finite", step);
        /* reference: every rank's batch as micro-batches of one process */
        mt_zero_zero_grad(&ref.zero);
        double ref_loss = 0;
        for (int q = 0; q < N; q++) {
            make_batch(q, step, cfg.vocab_size, G, ids, labels);
            ref_loss += mt_sharded_micro_step(&ref.sh, &batch, NULL);
        }
        EXPECT(mt_sharded_optimizer_step(&ref.sh, &opt, 1.0, &gn), "ref step %d", step);
        double rel = fabs(loss - ref_loss) / ref_loss;
        if (rel > worst_loss) worst_loss = rel;
        EXPECT(rel <= 1e-5, "step %d: loss %.9g sharded vs %.9g unsharded", step, loss, ref_loss);
    }
    /* relative L2 difference per bucket (the same layout on both sides), every bucket gathered
     * to every rank */
    mt_zero_expert_parallel_pause(&sharded.zero, true);
    const int nb = ref.model.n_buckets;
    double *num = calloc((size_t)nb, sizeof(double)), *den = calloc((size_t)nb, sizeof(double));
    for (int b = 0; b < nb; b++) {
        mt_zero_gather(&sharded.zero, b, false);
        mt_zero_gather(&ref.zero, b, false);
        const float *x = mt_zero_slot_data(&sharded.zero, b), *y = mt_zero_slot_data(&ref.zero, b);
        for (int64_t j = 0; j < ref.model.bucket_numel[b]; j++) {
            num[b] += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
            den[b] += (double)y[j] * y[j];
        }
    }
    double worst = 0;
    for (int b = 0; b < nb; b++) {
        double rel = den[b] > 0 ? sqrt(num[b] / den[b]) : sqrt(num[b]);
        if (rel > worst) worst = rel;
        EXPECT(rel <= 1e-5, "bucket %d: relative L2 difference %.3g", b, rel);
        if (rel > 1e-5) report_worst(&sharded, &ref, b);
    }
    free(num);
    free(den);
    const int64_t frozen = biases_unchanged(&sharded) + biases_unchanged(&ref);
    EXPECT(!m2 || frozen == 2 * (int64_t)cfg.num_hidden_layers * cfg.num_local_experts,
           "%lld correction bias elements checked", (long long)frozen);
    if (rank == 0)
        printf("  %s, %d ranks, gather unit %s (%d buckets), expert parallel %d%s, %d steps: max "
               "loss diff %.3g, max parameter rel L2 diff %.3g; %lld correction bias elements "
               "unchanged in each run\n",
               config, N, unit == MT_GATHER_EXPERT ? "expert" : "layer", sharded.model.n_buckets, P,
               one_group ? " (every token to layer 0's experts 0..K-1)" : "", STEPS, worst_loss,
               worst, (long long)frozen / 2);
    mt_expert_parallel_free(&ep, &sharded.model);
    run_free(&sharded);
    run_free(&ref);
    mt_comm_finalize(world);
    return MT_TEST_OK;
}

static int adversarial(const char *config, mt_gather_unit unit) {
    return adversarial_ep(config, unit, 1);
}

static const char *TEXT01 = "recipes/configs/tiny.json", *M2 = "recipes/configs/tiny-m2.json";
/* Expert parallelism over every rank (P = N), all tokens to layer 0's experts 0..K-1: with 2
 * ranks they are rank 0's, every token of both ranks goes there; with 4 (one Text-01 expert
 * each; two M2 experts each) ranks 2 and 3 (M2: 1 to 3) get no token of layer 0 at all. */
static int test_ep_adversarial(void) {
    one_group = true;
    int argc = 0;
    char **argv = NULL;
    const int P = mt_comm_mpi_init(&argc, &argv)->size;
    return adversarial_ep(TEXT01, MT_GATHER_EXPERT, P);
}
static int test_ep_adversarial_m2(void) {
    one_group = true;
    int argc = 0;
    char **argv = NULL;
    const int P = mt_comm_mpi_init(&argc, &argv)->size;
    return adversarial_ep(M2, MT_GATHER_EXPERT, P);
}
static int test_adversarial(void) { return adversarial(TEXT01, MT_GATHER_LAYER); }
static int test_adversarial_experts(void) { return adversarial(TEXT01, MT_GATHER_EXPERT); }
static int test_adversarial_m2(void) { return adversarial(M2, MT_GATHER_LAYER); }
static int test_adversarial_m2_experts(void) { return adversarial(M2, MT_GATHER_EXPERT); }

static const mt_test_case cases[] = {
    {"dist_adversarial_routing_np2", test_adversarial},
    {"dist_adversarial_routing_np4", test_adversarial},
    {"dist_adversarial_experts_np2", test_adversarial_experts},
    {"dist_adversarial_experts_np3", test_adversarial_experts},
    {"dist_adversarial_m2_routing_np2", test_adversarial_m2},
    {"dist_adversarial_m2_routing_np4", test_adversarial_m2},
    {"dist_adversarial_m2_experts_np3", test_adversarial_m2_experts},
    {"dist_ep_adversarial_np2", test_ep_adversarial},
    {"dist_ep_adversarial_np4", test_ep_adversarial},
    {"dist_ep_adversarial_m2_np4", test_ep_adversarial_m2},
};
MT_TEST_MAIN(cases)
