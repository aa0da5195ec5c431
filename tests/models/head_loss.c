/* head_loss.c: the head objectives (models/head.c, issue 38 item 3) on the head fixtures'
 * tiny MiniMax-Text-01 models (tests/fixtures/models/head_text01_*):
 *   grad_head_reward: finite differences of the reward-pair loss (margins, loss_denom 0 and
 *     > 0) against the backward, every parameter (mt_gradcheck's method and tolerance);
 *   parity_head_reward: the loss, d loss / d reward and score.weight's gradient against TRL's
 *     RewardTrainer formula transcribed here in float64, on the model's own rewards and
 *     pooled hidden rows; two micro-batches with loss_denom = the pairs add up to the mean;
 *   parity_head_loss_split: every head loss (single-label, multi-label, regression, reward
 *     pairs, token classification, QA) over two halves with loss_denom = the whole batch's
 *     count adds up, loss and gradients, to the whole batch's mean; the first rows followed by
 *     padding rows (head_pad_rows) give those rows' loss, gradients and metrics, all padding
 *     none;
 *   op_head_stats: mt_minimax_head_stats on hand-set logits against counts worked out by hand;
 *   op_head_reward_refusals: reward pairs on a head that is not a 1-label sequence head, or on
 *     an odd batch, stop with a message naming the setting. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/minimax.h"
#include "models/weights.h"
#include "tests/models/head_model.h"
#include "tests/support/harness.h"

#define HL_RTOL 1e-6 /* float64 references, the split losses' sums: relative */
/* The split gradients' sums, relative L2 (the parity tests' tolerance): the parts' backwards
 * add each weight's per-row products in another order than the whole batch's one GEMM, which
 * measured up to 3e-6 here in fp32; a wrong denominator is off by a factor (>= 1/4 here) */
#define HL_GRAD_RL2 1e-5

/* B rows of T random ids in [1, V), row b ending in b % 3 pad tokens (id 0) */
static mt_tensor *hl_ids(int64_t B, int64_t T, int V, uint64_t seed) {
    mt_tensor *ids = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "ids");
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    int32_t *x = ids->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            x[b * T + t] = t >= T - b % 3 ? 0 : 1 + (int32_t)(mt_rng_u64(&rng) % (uint64_t)(V - 1));
    return ids;
}

/* rows [r0, r1) of a batch: ids copied, the targets pointers into the whole batch's */
static mt_minimax_batch hl_rows(const mt_minimax_batch *full, const mt_minimax *m, int64_t r0,
                                int64_t r1) {
    const int64_t T = full->ids->shape[1];
    mt_tensor *ids = mt_test_tensor(MT_I32, 2, (int64_t[]){r1 - r0, T}, false, "ids");
    memcpy(ids->data, (const int32_t *)full->ids->data + r0 * T,
           sizeof(int32_t) * (size_t)((r1 - r0) * T));
    mt_minimax_batch b = *full;
    b.ids = ids;
    const bool tok = m->cfg.head == MT_HEAD_TOKEN_CLASSIFICATION;
    if (full->head_class) b.head_class = full->head_class + r0 * (tok ? T : 1);
    if (full->head_target) b.head_target = full->head_target + r0 * m->cfg.num_labels;
    if (full->start_pos) b.start_pos = full->start_pos + r0, b.end_pos = full->end_pos + r0;
    if (full->pair_margin) b.pair_margin = full->pair_margin + r0 / 2;
    return b;
}

static void hl_zero_grads(ph_model *pm) {
    for (int b = 0; b < pm->m.n_buckets; b++)
        memset(pm->grad[b], 0, sizeof(float) * (size_t)pm->m.bucket_numel[b]);
}

/* forward (and backward) of batch in a fresh tape of c; the loss as a float */
static float hl_step(ph_model *pm, mt_ctx *c, const mt_minimax_batch *batch, bool backward,
                     mt_minimax_out *out) {
    mt_ctx_reset(c);
    mt_minimax_forward(&pm->m, c, batch, NULL, out);
    MT_CHECK(out->loss, "head_loss: the forward made no loss");
    if (backward) mt_backward(c, out->loss, NULL);
    return *(const float *)out->loss->data;
}

/* ---- the reward loss in float64: TRL's RewardTrainer.compute_loss ---- */

/* sum over pairs p of -log sigmoid(r_2p - r_2p+1 - margin_p), / denom (<= 0: the pairs);
 * dr (B) its derivative by each reward */
static double hl_trl_reward(const float *r, const float *margin, int64_t B, double denom,
                            double *dr) {
    const int64_t P = B / 2;
    if (denom <= 0) denom = (double)P;
    double L = 0;
    for (int64_t p = 0; p < P; p++) {
        const double x = (double)r[2 * p] - (double)r[2 * p + 1] - (margin ? margin[p] : 0.0);
        L += x > 0 ? log1p(exp(-x)) : -x + log1p(exp(x)); /* -log sigmoid(x) */
        const double s = 1.0 / (1.0 + exp(x));            /* sigmoid(-x) = -d/dx */
        dr[2 * p] = -s / denom;
        dr[2 * p + 1] = s / denom;
    }
    return L / denom;
}

/* max |a - ref| <= HL_RTOL max |ref| */
static void hl_check_max(const char *label, const float *a, const double *ref, int64_t n) {
    double dmax = 0, rmax = 0;
    for (int64_t i = 0; i < n; i++) {
        dmax = fmax(dmax, fabs((double)a[i] - ref[i]));
        rmax = fmax(rmax, fabs(ref[i]));
    }
    printf("  %-40s %lld values, max|diff| %.3e max|ref| %.3e ratio %.3e\n", label, (long long)n,
           dmax, rmax, dmax / rmax);
    EXPECT(rmax > 0 && dmax <= HL_RTOL * rmax, "%s: max |diff| %.3e exceeds %.0e x %.3e", label,
           dmax, HL_RTOL, rmax);
}

static void hl_check_scalar(const char *label, double v, double ref) {
    const double rel = fabs(v - ref) / fabs(ref);
    printf("  %-40s %.9f ref %.9f rel %.3e\n", label, v, ref, rel);
    EXPECT(rel <= HL_RTOL, "%s: %.9f against %.9f, relative %.3e exceeds %.0e", label, v, ref, rel,
           HL_RTOL);
}

/* One forward and backward of reward pairs, checked against the float64 formula: the loss,
 * d loss / d r (the gradient of out->logits) and score.weight's gradient, sum over rows of
 * dL/dr_row times the row's pooled hidden state (the input of the score matmul on the tape) */
static float hl_reward_case(const char *label, ph_model *pm, mt_ctx *c,
                            const mt_minimax_batch *batch) {
    hl_zero_grads(pm);
    mt_minimax_out out;
    const float loss = hl_step(pm, c, batch, true, &out);
    const int64_t B = out.logits->shape[0], C = pm->m.cfg.hidden_size;
    EXPECT(out.logits->ndim == 2 && out.logits->shape[1] == 1, "%s: logits %s", label,
           mt_shape_str(out.logits));
    const mt_tensor *pooled = NULL;
    for (int i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].out == out.logits && c->nodes[i].op == MT_OP_MATMUL)
            pooled = c->nodes[i].in[0];
    EXPECT(pooled && mt_numel(pooled) == B * C, "%s: no pooled rows (B, C) on the tape", label);
    if (!pooled || mt_numel(pooled) != B * C || !out.logits->grad) return loss;
    double *dr = mt_malloc(sizeof(double) * (size_t)B, "dr");
    double *dw = mt_calloc((size_t)C, sizeof(double), "dw");
    const double ref =
        hl_trl_reward(out.logits->data, batch->pair_margin, B, batch->loss_denom, dr);
    const float *h = pooled->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t k = 0; k < C; k++) dw[k] += dr[b] * (double)h[b * C + k];
    char what[200];
    snprintf(what, sizeof(what), "%s loss", label);
    hl_check_scalar(what, loss, ref);
    snprintf(what, sizeof(what), "%s dL/dr", label);
    hl_check_max(what, out.logits->grad, dr, B);
    snprintf(what, sizeof(what), "%s d score.weight", label);
    hl_check_max(what, pm->m.head_w->grad, dw, C);
    free(dr);
    free(dw);
    return loss;
}

static int hl_skip(const char *fixture) {
    char path[1300];
    snprintf(path, sizeof(path), "%s/%s/config.json", ph_dir(), fixture);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    if (!f) printf("  %s: no fixture (tools/make_head_fixtures.py)\n", path);
    return f ? 0 : 1;
}

/* The sum of every parameter's gradient (all buckets) into a new copy */
static float *hl_grads_copy(const ph_model *pm, int64_t *n) {
    *n = 0;
    for (int b = 0; b < pm->m.n_buckets; b++) *n += pm->m.bucket_numel[b];
    float *g = mt_malloc(sizeof(float) * (size_t)*n, "grads"), *at = g;
    for (int b = 0; b < pm->m.n_buckets; b++) {
        memcpy(at, pm->grad[b], sizeof(float) * (size_t)pm->m.bucket_numel[b]);
        at += pm->m.bucket_numel[b];
    }
    return g;
}

/* The whole batch's mean (loss_denom 0) against two parts [0, cut) and [cut, B) with
 * loss_denom = count, their losses summed and their gradients accumulated: the loss to HL_RTOL
 * relative, every parameter's gradient to HL_GRAD_RL2 relative L2 (of the whole gradient's norm
 * where its own is below 1e-3 of that: a gradient that is 0 in exact arithmetic) */
static void hl_split_case(const char *label, ph_model *pm, mt_ctx *c, const mt_minimax_batch *full,
                          int64_t cut, float count) {
    mt_minimax_out out;
    hl_zero_grads(pm);
    mt_minimax_batch whole = *full;
    whole.loss_denom = 0;
    const float mean = hl_step(pm, c, &whole, true, &out);
    int64_t n;
    float *ref = hl_grads_copy(pm, &n);
    hl_zero_grads(pm);
    double sum = 0;
    for (int k = 0; k < 2; k++) {
        mt_minimax_batch part = hl_rows(full, &pm->m, k ? cut : 0, k ? full->ids->shape[0] : cut);
        part.loss_denom = count;
        sum += hl_step(pm, c, &part, true, &out);
    }
    char what[200];
    snprintf(what, sizeof(what), "%s: two parts' loss", label);
    hl_check_scalar(what, sum, mean);
    double all = 0;
    for (int64_t i = 0; i < n; i++) all += (double)ref[i] * ref[i];
    all = sqrt(all);
    double worst = 0;
    const char *worst_name = "";
    for (int p = 0; p < pm->m.n_params; p++) {
        const mt_param_info *info = &pm->m.info[p];
        if (info->buffer) continue;
        const float *g = pm->m.params[p].grad;
        int64_t off = info->offset; /* in the buckets' concatenation */
        for (int b = 0; b < info->bucket; b++) off += pm->m.bucket_numel[b];
        const float *r = ref + off;
        double num = 0, den = 0;
        for (int64_t i = 0; i < info->numel; i++) {
            num += ((double)g[i] - r[i]) * ((double)g[i] - r[i]);
            den += (double)r[i] * r[i];
        }
        const double rl2 = sqrt(num) / fmax(sqrt(den), 1e-3 * all);
        EXPECT(rl2 <= HL_GRAD_RL2, "%s: %s gradient relative L2 %.3e (|ref| %.3e)", label,
               info->name, rl2, sqrt(den));
        if (rl2 > worst) worst = rl2, worst_name = info->name;
    }
    printf("  %-40s %d parameters, worst relative L2 %.3e (%s)\n", label, pm->m.n_params, worst,
           worst_name);
    free(ref);
}

typedef struct {
    ph_model *pm;
    const mt_minimax_batch *batch;
} hl_gc;

static mt_tensor *hl_gc_build(mt_ctx *c, mt_tensor **in, void *user) {
    (void)in; /* the model's own parameter tensors */
    const hl_gc *g = user;
    mt_minimax_out out;
    mt_minimax_forward(&g->pm->m, c, g->batch, NULL, &out);
    return out.loss;
}

/* Every parameter (up to 48 elements of each) by central differences. The routers' top-k is a
 * discontinuity that finite differences cannot step over, so every expert is chosen here
 * (num_experts_per_tok = num_local_experts); the routed MoE has its own checks (grad_moe_*). */
static int grad_head_reward(void) {
    if (hl_skip("head_text01_seq1")) return MT_TEST_SKIP;
    char dir[1200];
    snprintf(dir, sizeof(dir), "%s/head_text01_seq1", ph_dir());
    mt_minimax_config cfg;
    mt_minimax_config_load(dir, &cfg);
    cfg.num_experts_per_tok = cfg.num_local_experts;
    ph_model pm;
    ph_bind(&pm, &cfg, MT_GATHER_LAYER);
    mt_weights_load(dir, &pm.m);
    mt_tensor **in = mt_calloc((size_t)pm.m.n_params, sizeof(mt_tensor *), "inputs");
    int n_in = 0;
    for (int p = 0; p < pm.m.n_params; p++)
        if (!pm.m.info[p].buffer) in[n_in++] = &pm.m.params[p];
    const float margin[2] = {0.75f, -0.5f};
    mt_minimax_batch batch = {.ids = hl_ids(4, 5, cfg.vocab_size, 382), .head_pairs = true};
    const mt_gradcheck_opts opts = {.h = 1e-2, .max_elems = 48};
    hl_gc g = {&pm, &batch};
    mt_gradcheck("reward", hl_gc_build, in, n_in, &g, &opts);
    batch.pair_margin = margin;
    mt_gradcheck("reward, margins", hl_gc_build, in, n_in, &g, &opts);
    batch.loss_denom = 5;
    mt_gradcheck("reward, margins, denom 5", hl_gc_build, in, n_in, &g, &opts);
    free(in);
    ph_free(&pm);
    return MT_TEST_OK;
}

static int parity_head_reward(void) {
    if (hl_skip("head_text01_seq1")) return MT_TEST_SKIP;
    ph_model pm;
    ph_load(&pm, "head_text01_seq1", MT_GATHER_LAYER);
    mt_ctx c;
    mt_ctx_init(&c, mt_backend_cpu(), (size_t)128 << 20, 1 << 14);
    const float margin[3] = {0.5f, -0.25f, 1.0f};
    mt_minimax_batch batch = {.ids = hl_ids(6, 7, pm.m.cfg.vocab_size, 381), .head_pairs = true};
    hl_reward_case("3 pairs", &pm, &c, &batch);
    batch.pair_margin = margin;
    const float mean = hl_reward_case("3 pairs, margins", &pm, &c, &batch);
    /* two micro-batches of 2 and 1 pairs, loss_denom 3: each against the formula's sum / 3 */
    float sum = 0;
    for (int k = 0; k < 2; k++) {
        mt_minimax_batch part = hl_rows(&batch, &pm.m, k ? 4 : 0, k ? 6 : 4);
        part.loss_denom = 3;
        sum +=
            hl_reward_case(k ? "pair 3, loss_denom 3" : "pairs 1-2, loss_denom 3", &pm, &c, &part);
    }
    hl_check_scalar("micro-batches' sum", sum, mean);
    hl_split_case("reward pairs 2 + 1", &pm, &c, &batch, 4, 3);
    mt_ctx_free(&c);
    ph_free(&pm);
    return MT_TEST_OK;
}

/* Each head loss over B = 4 rows of T = 6 tokens, whole against two parts: rows [0, 1) and
 * [1, 4) (unequal counts on each side). count: the terms of the whole batch as the trainer
 * counts them (labelled rows; rows x num_labels elements; pairs; labelled tokens; QA rows). */
/* The batch's first `cut` rows followed by padding rows (head_pad_rows = B - cut, the trainer's
 * short share of a global batch) against those rows alone, loss_denom 3 both: the same loss,
 * gradients (relative L2 over all) and metrics; every row padding: a loss of 0, no gradient,
 * no metric. */
static void hl_pad_case(const char *label, ph_model *pm, mt_ctx *c, const mt_minimax_batch *full,
                        int64_t cut) {
    mt_minimax_out out;
    mt_minimax_batch alone = hl_rows(full, &pm->m, 0, cut), padded = *full;
    alone.loss_denom = padded.loss_denom = 3;
    padded.head_pad_rows = full->ids->shape[0] - cut;
    mt_head_stats st[2];
    memset(st, 0, sizeof(st));
    float loss[2];
    float *g[2];
    int64_t n = 0;
    for (int k = 0; k < 2; k++) {
        hl_zero_grads(pm);
        loss[k] = hl_step(pm, c, k ? &padded : &alone, true, &out);
        mt_minimax_head_stats(&pm->m, c, k ? &padded : &alone, &out, &st[k]);
        g[k] = hl_grads_copy(pm, &n);
    }
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)g[1][i] - g[0][i]) * ((double)g[1][i] - g[0][i]);
        den += (double)g[0][i] * g[0][i];
    }
    const double rel = fabs((double)loss[1] - loss[0]) / fmax(fabs((double)loss[0]), 1e-30),
                 rl2 = sqrt(num / fmax(den, 1e-300));
    printf("  %-40s %lld rows + %lld padding: loss %.3e, gradients %.3e relative\n", label,
           (long long)cut, (long long)padded.head_pad_rows, rel, rl2);
    EXPECT(rel <= HL_RTOL && rl2 <= HL_GRAD_RL2 && den > 0,
           "%s: padded rows change the loss by %.3e, the gradients by %.3e", label, rel, rl2);
    EXPECT(st[0].correct == st[1].correct && st[0].count == st[1].count &&
               fabs(st[0].margin - st[1].margin) <= HL_RTOL * fmax(fabs(st[0].margin), 1),
           "%s: padded rows change the metrics (%g of %g, %g of %g)", label, st[1].correct,
           st[1].count, st[0].correct, st[0].count);
    free(g[0]);
    free(g[1]);
    padded.head_pad_rows = full->ids->shape[0];
    hl_zero_grads(pm);
    const float zero = hl_step(pm, c, &padded, true, &out);
    mt_head_stats none = {0};
    mt_minimax_head_stats(&pm->m, c, &padded, &out, &none);
    g[0] = hl_grads_copy(pm, &n);
    double any = 0;
    for (int64_t i = 0; i < n; i++) any += fabs(g[0][i]);
    EXPECT(zero == 0 && any == 0 && none.count == 0,
           "%s: an all-padding batch gives loss %g, gradient sum %g, %g counted", label, zero, any,
           none.count);
    free(g[0]);
}

static void hl_split_fixture(const char *fixture, const char *label, mt_problem_type problem,
                             int kind) {
    ph_model pm;
    ph_load(&pm, fixture, MT_GATHER_LAYER);
    if (problem != MT_PROBLEM_AUTO) pm.m.cfg.problem_type = problem;
    const int64_t B = 4, T = 6, M = pm.m.cfg.num_labels;
    mt_ctx c;
    mt_ctx_init(&c, mt_backend_cpu(), (size_t)128 << 20, 1 << 14);
    mt_minimax_batch batch = {.ids = hl_ids(B, T, pm.m.cfg.vocab_size, 383 + (uint64_t)kind)};
    mt_rng rng;
    mt_rng_seed(&rng, 384 + (uint64_t)kind);
    int32_t cls[24], sp[4], ep[4];
    float target[4 * 3];
    float count = 0;
    const bool tok = pm.m.cfg.head == MT_HEAD_TOKEN_CLASSIFICATION;
    if (pm.m.cfg.head == MT_HEAD_QUESTION_ANSWERING) {
        for (int64_t b = 0; b < B; b++) { /* in [0, T): none ignored, one clamped from -2 */
            sp[b] = b == 2 ? -2 : (int32_t)(mt_rng_u64(&rng) % (uint64_t)T);
            ep[b] = (int32_t)(mt_rng_u64(&rng) % (uint64_t)T);
        }
        batch.start_pos = sp, batch.end_pos = ep;
        count = (float)B;
    } else if (kind == 'p') {
        batch.head_pairs = true;
        count = (float)(B / 2);
    } else if (kind == 'c' || tok) { /* every third (row or token) ignored */
        const int64_t n = tok ? B * T : B;
        for (int64_t i = 0; i < n; i++) {
            cls[i] = i % 3 == 1 ? MT_IGNORE_INDEX : (int32_t)(mt_rng_u64(&rng) % (uint64_t)M);
            count += cls[i] != MT_IGNORE_INDEX;
        }
        batch.head_class = cls;
    } else {
        for (int64_t i = 0; i < B * M; i++) target[i] = mt_rng_uniform(&rng);
        batch.head_target = target;
        count = (float)(B * M);
    }
    /* reward pairs split at a pair's boundary */
    hl_split_case(label, &pm, &c, &batch, kind == 'p' ? 2 : 1, count);
    hl_pad_case(label, &pm, &c, &batch, kind == 'p' ? 2 : 3);
    mt_ctx_free(&c);
    ph_free(&pm);
}

static int parity_head_loss_split(void) {
    if (hl_skip("head_text01_seq3") || hl_skip("head_text01_seq1") || hl_skip("head_text01_tok") ||
        hl_skip("head_text01_qa"))
        return MT_TEST_SKIP;
    hl_split_fixture("head_text01_seq3", "single_label_classification", MT_PROBLEM_AUTO, 'c');
    hl_split_fixture("head_text01_seq3", "multi_label_classification", MT_PROBLEM_AUTO, 'm');
    hl_split_fixture("head_text01_seq3", "regression (3 labels)", MT_PROBLEM_REGRESSION, 'r');
    hl_split_fixture("head_text01_seq1", "regression (1 label)", MT_PROBLEM_AUTO, 'r');
    hl_split_fixture("head_text01_seq1", "reward pairs", MT_PROBLEM_AUTO, 'p');
    hl_split_fixture("head_text01_tok", "token classification", MT_PROBLEM_AUTO, 't');
    hl_split_fixture("head_text01_qa", "question answering", MT_PROBLEM_AUTO, 'q');
    return MT_TEST_OK;
}

/* ---- the head metrics ---- */

static mt_head_stats hl_stats(mt_head_kind head, int labels, mt_problem_type problem,
                              const mt_minimax_batch *batch, mt_tensor *logits, mt_tensor *end) {
    mt_minimax m;
    memset(&m, 0, sizeof(m));
    m.cfg.head = head, m.cfg.num_labels = labels, m.cfg.problem_type = problem;
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_minimax_out out = {.logits = logits, .end_logits = end};
    mt_head_stats st = {0, 0, 0};
    mt_minimax_head_stats(&m, &c, batch, &out, &st);
    mt_ctx_free(&c);
    return st;
}

static mt_tensor *hl_logits(int ndim, const int64_t *shape, const float *v) {
    mt_tensor *t = mt_test_tensor(MT_F32, ndim, shape, false, "logits");
    memcpy(t->data, v, sizeof(float) * (size_t)mt_numel(t));
    return t;
}

static void hl_expect_stats(const char *label, mt_head_stats st, double correct, double margin,
                            double count) {
    printf("  %-28s correct %g margin %g count %g (expected %g %g %g)\n", label, st.correct,
           st.margin, st.count, correct, margin, count);
    EXPECT(st.correct == correct && fabs(st.margin - margin) < 1e-12 && st.count == count,
           "%s: correct %g margin %g count %g, expected %g %g %g", label, st.correct, st.margin,
           st.count, correct, margin, count);
}

static int op_head_stats(void) {
    const mt_head_kind SEQ = MT_HEAD_SEQUENCE_CLASSIFICATION;
    /* reward pairs (chosen, rejected): (2, 1) right, +1; (0.5, 0.5) a tie, wrong as TRL's
     * strict >, 0; (-1, 0.25) wrong, -1.25. The margins of the loss do not enter. */
    const float r[6] = {2.0f, 1.0f, 0.5f, 0.5f, -1.0f, 0.25f}, pm[3] = {5, 5, 5};
    mt_tensor *rl = hl_logits(2, (int64_t[]){6, 1}, r);
    mt_minimax_batch pairs = {.head_pairs = true, .pair_margin = pm};
    hl_expect_stats("reward pairs", hl_stats(SEQ, 1, MT_PROBLEM_AUTO, &pairs, rl, NULL), 1, -0.25,
                    3);
    /* single-label, 3 classes: argmax 1 = label 1 right; label -100 not counted; (0.5, 0.5,
     * 0.2) argmax 0 (the first of a tie, torch.argmax) against 1 wrong; argmax 2 = 2 right */
    const float z[12] = {0.1f, 2.0f, -1.0f, 3.0f, 0.0f, 0.0f, 0.5f, 0.5f, 0.2f, -1.0f, -2.0f, 4.0f};
    const int32_t cls[4] = {1, MT_IGNORE_INDEX, 1, 2};
    mt_tensor *zl = hl_logits(2, (int64_t[]){4, 3}, z);
    mt_minimax_batch single = {.head_class = cls};
    hl_expect_stats("single-label", hl_stats(SEQ, 3, MT_PROBLEM_AUTO, &single, zl, NULL), 2, 0, 3);
    hl_expect_stats("single-label (config)",
                    hl_stats(SEQ, 3, MT_PROBLEM_SINGLE_LABEL, &single, zl, NULL), 2, 0, 3);
    /* regression and multi-label: no metric */
    mt_minimax_batch floats = {.head_target = z};
    hl_expect_stats("multi-label", hl_stats(SEQ, 3, MT_PROBLEM_AUTO, &floats, zl, NULL), 0, 0, 0);
    hl_expect_stats("regression", hl_stats(SEQ, 3, MT_PROBLEM_REGRESSION, &floats, zl, NULL), 0, 0,
                    0);
    /* token classification (2, 3, 2): argmax 0 = 0 right, 1 = 1 right, ignored, 0 against 1
     * wrong, ignored, 0 = 0 right */
    const float tz[12] = {1, 0, 0, 1, 5, 0, 2, 1, 0, 9, 0.3f, 0.1f};
    const int32_t tcls[6] = {0, 1, MT_IGNORE_INDEX, 1, MT_IGNORE_INDEX, 0};
    mt_minimax_batch tokens = {.head_class = tcls};
    hl_expect_stats("token classification",
                    hl_stats(MT_HEAD_TOKEN_CLASSIFICATION, 2, MT_PROBLEM_AUTO, &tokens,
                             hl_logits(3, (int64_t[]){2, 3, 2}, tz), NULL),
                    3, 0, 4);
    /* QA, T = 4: row 0 start argmax 1, end 2, targets 1, 2: right; row 1 argmaxes 0, 3,
     * targets -2 (clamped to 0), 1: counted, wrong; row 2 start target 4 = T (ignored): not
     * counted; row 3 argmaxes 0, 3, targets -1 (0), 3: right */
    const float qs[16] = {0, 1, 0, 0, 2, 1, 1, 1, 0, 0, 0, 0, 3, 1, 2, 0};
    const float qe[16] = {0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 2};
    const int32_t sp[4] = {1, -2, 4, -1}, ep[4] = {2, 1, 0, 3};
    mt_minimax_batch span = {.start_pos = sp, .end_pos = ep};
    hl_expect_stats("question answering",
                    hl_stats(MT_HEAD_QUESTION_ANSWERING, 2, MT_PROBLEM_AUTO, &span,
                             hl_logits(2, (int64_t[]){4, 4}, qs),
                             hl_logits(2, (int64_t[]){4, 4}, qe)),
                    2, 0, 3);
    /* no targets: nothing; a second call adds */
    mt_minimax_batch none = {0};
    hl_expect_stats("no targets", hl_stats(SEQ, 3, MT_PROBLEM_AUTO, &none, zl, NULL), 0, 0, 0);
    mt_minimax m;
    memset(&m, 0, sizeof(m));
    m.cfg.head = SEQ, m.cfg.num_labels = 1;
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_minimax_out out = {.logits = rl};
    mt_head_stats st = {1, 1, 1};
    mt_minimax_head_stats(&m, &c, &pairs, &out, &st);
    mt_ctx_free(&c);
    hl_expect_stats("reward pairs, added", st, 2, 0.75, 4);
    return MT_TEST_OK;
}

/* ---- refusals ---- */

typedef struct {
    const char *fixture;
    int64_t rows;
} hl_refusal;

static void hl_refused(void *arg) {
    const hl_refusal *r = arg;
    ph_model pm;
    ph_load(&pm, r->fixture, MT_GATHER_LAYER);
    mt_ctx c;
    mt_ctx_init(&c, mt_backend_cpu(), (size_t)64 << 20, 1 << 13);
    mt_minimax_batch batch = {.ids = hl_ids(r->rows, 5, pm.m.cfg.vocab_size, 385),
                              .head_pairs = true};
    mt_minimax_out out;
    mt_minimax_forward(&pm.m, &c, &batch, NULL, &out);
    exit(0);
}

static int op_head_reward_refusals(void) {
    if (hl_skip("head_text01_seq3") || hl_skip("head_text01_tok")) return MT_TEST_SKIP;
    const hl_refusal three = {"head_text01_seq3", 4}, tok = {"head_text01_tok", 4},
                     odd = {"head_text01_seq1", 3};
    EXPECT(mt_expect_death(hl_refused, (void *)&three, "num_labels 1"),
           "reward pairs with 3 labels: not refused naming num_labels");
    EXPECT(mt_expect_death(hl_refused, (void *)&tok, "sequence classification"),
           "reward pairs on a token head: not refused");
    EXPECT(mt_expect_death(hl_refused, (void *)&odd, "even batch"),
           "reward pairs on 3 rows: not refused");
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_head_stats", op_head_stats},
    {"op_head_reward_refusals", op_head_reward_refusals},
    {"parity_head_loss_split", parity_head_loss_split},
    {"grad_head_reward", grad_head_reward},
    {"parity_head_reward", parity_head_reward},
};
MT_TEST_MAIN(cases)
