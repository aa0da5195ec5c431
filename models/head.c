/* head.c: the heads of a model that is not a causal LM (models/config.h, mt_head_kind):
 * transformers' generic GenericForSequenceClassification, GenericForTokenClassification and
 * GenericForQuestionAnswering on the decoder's final-norm output, with transformers' losses
 * (loss_utils.py: ForSequenceClassificationLoss, ForTokenClassification,
 * ForQuestionAnsweringLoss). Written in existing differentiable ops only (matmul, gather rows,
 * concat, view, elementwise, cross-entropy), so every backend that runs the decoder runs the
 * heads, forward and backward, with no kernel of their own:
 *   bias:        x W^T + 1 b^T, the outer product a matmul of a ones column and b as (M,1);
 *   pooling:     the rows (b, t_b) of h as (B*T, C) gathered by an embedding lookup;
 *   MSE:         sum (z - y)^2 as the matmul of a ones row and the squares;
 *   BCE:         softplus(z) - z y, softplus(z) = the cross-entropy of logits (0, z) at class 0,
 *                sum z y a matmul of z and the targets as rows;
 *   QA split:    start / end as the matmul of (B,T,2) and the unit rows (1,0) / (0,1);
 *   reward pairs: TRL's RewardTrainer loss -log sigmoid(r_2p - r_2p+1 - margin_p), the
 *                differences the matmul of a constant +1/-1 (P, B) matrix and the rewards,
 *                -log sigmoid(x) the cross-entropy of logits (x, 0) at class 0.
 * Each loss is the mean of its terms, or their sum / batch->loss_denom when that is > 0.
 * Dropout of the token head is the identity (evaluation; this trainer runs without dropout). */
#include <string.h>

#include "models/block.h"

void mt_head_layout(mt_layout_cursor *cur) {
    mt_minimax *m = cur->m;
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t C = cfg->hidden_size, M = cfg->num_labels;
    MT_CHECK(M >= 1, "head: %s with %lld labels", mt_head_name(cfg->head), (long long)M);
    const bool qa = cfg->head == MT_HEAD_QUESTION_ANSWERING;
    const char *w = qa ? "qa_outputs.weight" : "score.weight";
    m->head_w = mt_layout_add(cur, true, 2, qa ? 2 : M, C, MT_INIT_NORMAL, w, 0, 0);
    m->head_b = NULL;
    if (cfg->head != MT_HEAD_SEQUENCE_CLASSIFICATION) /* nn.Linear's bias, initialised to 0 */
        m->head_b = mt_layout_add(cur, true, 1, qa ? 2 : M, 0, MT_INIT_ZEROS,
                                  qa ? "qa_outputs.bias" : "score.bias", 0, 0);
}

/* A constant F32 tensor of the context from host values. */
static mt_tensor *hd_const(mt_ctx *c, int ndim, const int64_t *shape, const float *h,
                           const char *name) {
    mt_tensor *t = mt_tensor_new(c, MT_F32, ndim, shape, name);
    c->be->to_device(t->data, h, sizeof(float) * (size_t)mt_numel(t));
    return t;
}

static mt_tensor *hd_fill(mt_ctx *c, int ndim, const int64_t *shape, float v, const char *name) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *h = mt_arena_alloc(&c->host, sizeof(float) * (size_t)n, "head.fill");
    for (int64_t i = 0; i < n; i++) h[i] = v;
    return hd_const(c, ndim, shape, h, name);
}

static mt_tensor *hd_i32(mt_ctx *c, int64_t n, const int32_t *h, const char *name) {
    mt_tensor *t = mt_tensor_new(c, MT_I32, 1, &n, name);
    c->be->to_device(t->data, h, sizeof(int32_t) * (size_t)n);
    return t;
}

/* x (..., C) W^T + b: x (B,T,C) -> (B,T,M) */
static mt_tensor *hd_linear(mt_ctx *c, mt_tensor *x, mt_tensor *w, mt_tensor *b) {
    mt_tensor *y = mt_matmul(c, x, w);
    if (!b) return y;
    int64_t shape[MT_MAX_DIMS];
    for (int i = 0; i < x->ndim - 1; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = 1;
    mt_tensor *ones = hd_fill(c, x->ndim, shape, 1.0f, "head.ones");
    mt_tensor *bcol = mt_view(c, b, 2, (int64_t[]){b->shape[0], 1});
    return mt_add(c, y, mt_matmul(c, ones, bcol));
}

/* Each row's pooled position: the rightmost token that is not pad_token_id (0 when all are),
 * as transformers' argmax of t * (ids != pad); without a pad token the last position, and only
 * for one row (transformers refuses several). */
static int64_t *hd_pool_positions(mt_minimax *m, mt_ctx *c, mt_tensor *ids) {
    const int64_t B = ids->shape[0], T = ids->shape[1];
    const int pad = m->cfg.pad_token_id;
    MT_CHECK(pad >= 0 || B == 1,
             "head: sequence classification of a batch of %lld rows needs config.json's "
             "pad_token_id (null here): the pooled token is the rightmost one that is not the pad "
             "token (transformers: \"Cannot handle batch sizes > 1 if no padding token is "
             "defined.\")",
             (long long)B);
    int32_t *h = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)(B * T), "head.ids");
    c->be->to_host(h, ids->data, sizeof(int32_t) * (size_t)(B * T));
    int64_t *at = mt_arena_alloc(&c->host, sizeof(int64_t) * (size_t)B, "head.pooled");
    for (int64_t b = 0; b < B; b++) {
        at[b] = pad < 0 ? T - 1 : 0;
        for (int64_t t = 0; pad >= 0 && t < T; t++)
            if (h[b * T + t] != pad) at[b] = t;
    }
    return at;
}

void mt_head_forward(mt_minimax *m, mt_ctx *c, mt_tensor *h, mt_tensor *ids, mt_minimax_out *out) {
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t B = h->shape[0], T = h->shape[1], C = h->shape[2];
    switch (cfg->head) {
    case MT_HEAD_SEQUENCE_CLASSIFICATION: {
        /* score on the pooled rows only: the same numbers as transformers' score on every
         * token, then the pooled rows */
        int64_t *at = hd_pool_positions(m, c, ids);
        int32_t *rows = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)B, "head.rows");
        for (int64_t b = 0; b < B; b++) rows[b] = (int32_t)(b * T + at[b]);
        mt_tensor *idx = hd_i32(c, B, rows, "head.pool_rows");
        mt_tensor *pooled = mt_embedding(c, idx, mt_view(c, h, 2, (int64_t[]){B * T, C}));
        out->logits = mt_matmul(c, pooled, m->head_w);
        out->pooled = at;
        break;
    }
    case MT_HEAD_TOKEN_CLASSIFICATION:
        out->logits = hd_linear(c, h, m->head_w, m->head_b);
        break;
    case MT_HEAD_QUESTION_ANSWERING: {
        mt_tensor *both = hd_linear(c, h, m->head_w, m->head_b); /* (B,T,2) */
        mt_tensor *se[2];
        for (int k = 0; k < 2; k++) {
            const float unit[2] = {k == 0 ? 1.0f : 0.0f, k == 1 ? 1.0f : 0.0f};
            mt_tensor *sel = hd_const(c, 2, (int64_t[]){1, 2}, unit, "head.qa_select");
            se[k] = mt_view(c, mt_matmul(c, both, sel), 2, (int64_t[]){B, T});
        }
        out->logits = se[0];
        out->end_logits = se[1];
        break;
    }
    default:
        MT_DIE("head: forward of a causal LM's config");
    }
}

/* sum over all elements of x (any shape, n elements) times s, as a scalar */
static mt_tensor *hd_sum(mt_ctx *c, mt_tensor *x, float s) {
    const int64_t n = mt_numel(x);
    mt_tensor *ones = hd_fill(c, 2, (int64_t[]){1, n}, 1.0f, "head.ones_row");
    mt_tensor *r = mt_matmul(c, ones, mt_view(c, x, 2, (int64_t[]){1, n})); /* (1,1) */
    return mt_view(c, mt_scale(c, r, s), 0, NULL);
}

/* The divisor of a loss of n terms: the batch's loss_denom when > 0, else n (the mean). */
static float hd_denom(const mt_minimax_batch *batch, int64_t n) {
    return batch->loss_denom > 0 ? batch->loss_denom : (float)n;
}

/* MSELoss: sum (z - y)^2 over the elements / denom */
static mt_tensor *hd_mse(mt_ctx *c, mt_tensor *z, const float *y, float denom) {
    mt_tensor *t = hd_const(c, z->ndim, z->shape, y, "head.target");
    mt_tensor *d = mt_axpby(c, 1.0f, z, -1.0f, t);
    return hd_sum(c, mt_mul(c, d, d), 1.0f / denom);
}

/* sum over the n rows of the cross-entropy of the logits (x, 0) at class 0 / denom, x (n, 1):
 * -log(e^x / (e^x + e^0)) = -log sigmoid(x); with zero_first the logits (0, x), log(1 + e^x) =
 * softplus(x) */
static mt_tensor *hd_ce_class0(mt_ctx *c, mt_tensor *x, bool zero_first, float denom) {
    const int64_t n = x->shape[0];
    mt_tensor *zeros = hd_fill(c, 2, (int64_t[]){n, 1}, 0.0f, "head.zero");
    mt_tensor *pair = zero_first ? mt_concat(c, zeros, x) : mt_concat(c, x, zeros);
    int32_t *zero = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)n, "head.class0");
    memset(zero, 0, sizeof(int32_t) * (size_t)n);
    return mt_cross_entropy(c, pair, hd_i32(c, n, zero, "head.class0"), denom);
}

/* BCEWithLogitsLoss: the sum of softplus(z) - z y / denom */
static mt_tensor *hd_bce(mt_ctx *c, mt_tensor *z, const float *y, float denom) {
    const int64_t n = mt_numel(z);
    mt_tensor *softplus = hd_ce_class0(c, mt_view(c, z, 2, (int64_t[]){n, 1}), true, denom);
    mt_tensor *t = hd_const(c, 2, (int64_t[]){1, n}, y, "head.target");
    mt_tensor *zy = mt_matmul(c, mt_view(c, z, 2, (int64_t[]){1, n}), t); /* (1,1) */
    return mt_axpby(c, 1.0f, softplus, -1.0f / denom, mt_view(c, zy, 0, NULL));
}

/* TRL's RewardTrainer loss: -log sigmoid(r_2p - r_2p+1 - margin_p) over the pairs p; the pair
 * differences as the matmul of the constant (P, B) matrix of rows e_2p - e_2p+1 and r */
static mt_tensor *hd_reward(mt_minimax *m, mt_ctx *c, const mt_minimax_batch *batch,
                            const mt_minimax_out *out) {
    const int64_t B = out->logits->shape[0], P = B / 2;
    MT_CHECK(m->cfg.head == MT_HEAD_SEQUENCE_CLASSIFICATION && m->cfg.num_labels == 1,
             "head: reward pairs (head_pairs) need a sequence classification head with "
             "num_labels 1 (the reward), this model is %s with %d labels",
             mt_head_name(m->cfg.head), m->cfg.num_labels);
    MT_CHECK(B % 2 == 0 && B > 0,
             "head: reward pairs need an even batch (rows 2p chosen, 2p + 1 rejected), got %lld "
             "rows",
             (long long)B);
    MT_CHECK(!batch->head_class && !batch->head_target,
             "head: reward pairs take no head_class / head_target");
    float *sel = mt_arena_alloc(&c->host, sizeof(float) * (size_t)(P * B), "head.pair_select");
    memset(sel, 0, sizeof(float) * (size_t)(P * B));
    for (int64_t p = 0; p < P; p++) sel[p * B + 2 * p] = 1.0f, sel[p * B + 2 * p + 1] = -1.0f;
    mt_tensor *d = mt_matmul(c, hd_const(c, 2, (int64_t[]){P, B}, sel, "head.pair_select"),
                             mt_view(c, out->logits, 2, (int64_t[]){1, B})); /* (P,1) */
    if (batch->pair_margin)
        d = mt_axpby(c, 1.0f, d, -1.0f,
                     hd_const(c, 2, (int64_t[]){P, 1}, batch->pair_margin, "head.pair_margin"));
    return hd_ce_class0(c, d, false, hd_denom(batch, P));
}

/* transformers' span loss: positions clamped to [0, T], T ignored; each of the start and end
 * CEs a mean over its rows (sum / loss_denom), the loss their mean */
static mt_tensor *hd_span(mt_ctx *c, const mt_minimax_batch *batch, const mt_minimax_out *out) {
    const int64_t B = out->logits->shape[0], T = out->logits->shape[1];
    mt_tensor *ce[2];
    for (int k = 0; k < 2; k++) {
        const int32_t *p = k == 0 ? batch->start_pos : batch->end_pos;
        int32_t *lab = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)B, "head.span");
        for (int64_t b = 0; b < B; b++) {
            const int64_t v = p[b] < 0 ? 0 : p[b] > T ? T : p[b];
            lab[b] = v == T ? MT_IGNORE_INDEX : (int32_t)v;
        }
        ce[k] = mt_cross_entropy(c, k == 0 ? out->logits : out->end_logits,
                                 hd_i32(c, B, lab, "head.span"), batch->loss_denom);
    }
    return mt_axpby(c, 0.5f, ce[0], 0.5f, ce[1]);
}

/* The sequence head's problem type: the config's, or inferred as transformers does from
 * num_labels and the targets' dtype */
static mt_problem_type hd_problem(const mt_minimax *m, const mt_minimax_batch *batch) {
    const mt_minimax_config *cfg = &m->cfg;
    if (cfg->problem_type != MT_PROBLEM_AUTO) return cfg->problem_type;
    return cfg->num_labels == 1 ? MT_PROBLEM_REGRESSION
           : batch->head_class  ? MT_PROBLEM_SINGLE_LABEL
                                : MT_PROBLEM_MULTI_LABEL;
}

/* The first Bk rows of x (B, ...) as (Bk, ...): gathered by an embedding lookup of x as rows */
static mt_tensor *hd_first_rows(mt_ctx *c, mt_tensor *x, int64_t Bk) {
    const int64_t B = x->shape[0], w = mt_numel(x) / B;
    int32_t *rows = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)Bk, "head.rows");
    for (int64_t b = 0; b < Bk; b++) rows[b] = (int32_t)b;
    mt_tensor *g =
        mt_embedding(c, hd_i32(c, Bk, rows, "head.rows"), mt_view(c, x, 2, (int64_t[]){B, w}));
    int64_t shape[MT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[0] = Bk;
    return mt_view(c, g, x->ndim, shape);
}

/* The loss of a batch whose last head_pad_rows rows are padding: the loss of its first rows
 * (their targets are the first of the batch's arrays); none: 0, still a function of the logits,
 * so that the backward walks (and reduces) every bucket as the other ranks' do. */
static mt_tensor *hd_loss_real_rows(mt_minimax *m, mt_ctx *c, const mt_minimax_batch *batch,
                                    const mt_minimax_out *out) {
    const int64_t Bk = batch->ids->shape[0] - batch->head_pad_rows;
    if (Bk <= 0) return hd_sum(c, out->logits, 0.0f);
    mt_minimax_out o = *out;
    o.logits = hd_first_rows(c, out->logits, Bk);
    if (out->end_logits) o.end_logits = hd_first_rows(c, out->end_logits, Bk);
    mt_tensor ids = *batch->ids;
    ids.shape[0] = Bk; /* the shape alone is read */
    mt_minimax_batch b = *batch;
    b.ids = &ids;
    b.head_pad_rows = 0;
    return mt_head_loss(m, c, &b, &o);
}

mt_tensor *mt_head_loss(mt_minimax *m, mt_ctx *c, const mt_minimax_batch *batch,
                        const mt_minimax_out *out) {
    if (batch->head_pad_rows > 0) return hd_loss_real_rows(m, c, batch, out);
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t B = batch->ids->shape[0], T = batch->ids->shape[1];
    MT_CHECK(!batch->head_pairs || cfg->head == MT_HEAD_SEQUENCE_CLASSIFICATION,
             "head: reward pairs (head_pairs) need a sequence classification head with "
             "num_labels 1, this model is %s",
             mt_head_name(cfg->head));
    switch (cfg->head) {
    case MT_HEAD_SEQUENCE_CLASSIFICATION: {
        if (batch->head_pairs) return hd_reward(m, c, batch, out);
        if (!batch->head_class && !batch->head_target) return NULL;
        const mt_problem_type p = hd_problem(m, batch);
        if (p == MT_PROBLEM_SINGLE_LABEL) {
            MT_CHECK(batch->head_class, "head: single_label_classification needs class ids");
            return mt_cross_entropy(c, out->logits, hd_i32(c, B, batch->head_class, "head.class"),
                                    batch->loss_denom);
        }
        MT_CHECK(batch->head_target, "head: %s needs float targets (B x num_labels)",
                 mt_problem_type_name(p));
        const float denom = hd_denom(batch, mt_numel(out->logits));
        return p == MT_PROBLEM_REGRESSION ? hd_mse(c, out->logits, batch->head_target, denom)
                                          : hd_bce(c, out->logits, batch->head_target, denom);
    }
    case MT_HEAD_TOKEN_CLASSIFICATION:
        if (!batch->head_class) return NULL;
        return mt_cross_entropy(c, out->logits, hd_i32(c, B * T, batch->head_class, "head.class"),
                                batch->loss_denom);
    case MT_HEAD_QUESTION_ANSWERING:
        if (!batch->start_pos || !batch->end_pos) return NULL;
        return hd_span(c, batch, out);
    default:
        return NULL;
    }
}

/* The first index of the largest of n values (torch.argmax) */
static int64_t hd_argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* rows of M class logits against class ids (-100 ignored): correct and count into st */
static void hd_stats_class(const float *z, int64_t rows, int64_t M, const int32_t *cls,
                           mt_head_stats *st) {
    for (int64_t r = 0; r < rows; r++) {
        if (cls[r] == MT_IGNORE_INDEX) continue;
        st->correct += hd_argmax(z + r * M, M) == cls[r];
        st->count += 1;
    }
}

void mt_minimax_head_stats(const mt_minimax *m, mt_ctx *c, const mt_minimax_batch *batch,
                           const mt_minimax_out *out, mt_head_stats *st) {
    const mt_minimax_config *cfg = &m->cfg;
    if (!out->logits || cfg->head == MT_HEAD_CAUSAL_LM) return;
    const bool seq = cfg->head == MT_HEAD_SEQUENCE_CLASSIFICATION;
    const bool qa = cfg->head == MT_HEAD_QUESTION_ANSWERING;
    if (seq && !batch->head_pairs &&
        (!batch->head_class || hd_problem(m, batch) != MT_PROBLEM_SINGLE_LABEL))
        return;
    if (cfg->head == MT_HEAD_TOKEN_CLASSIFICATION && !batch->head_class) return;
    if (qa && (!batch->start_pos || !batch->end_pos)) return;
    const int64_t n = mt_numel(out->logits);
    float *z = mt_arena_alloc(&c->host, sizeof(float) * (size_t)(qa ? 2 * n : n), "head.stats");
    c->be->to_host(z, out->logits->data, sizeof(float) * (size_t)n);
    if (qa) c->be->to_host(z + n, out->end_logits->data, sizeof(float) * (size_t)n);
    /* the last head_pad_rows rows are padding: left out */
    const int64_t B = out->logits->shape[0] - batch->head_pad_rows;
    if (B <= 0) return;
    if (seq && batch->head_pairs) {
        for (int64_t p = 0; p < B / 2; p++) {
            const double d = (double)z[2 * p] - (double)z[2 * p + 1];
            st->correct += d > 0; /* TRL: chosen > rejected, a tie is wrong */
            st->margin += d;
            st->count += 1;
        }
    } else if (qa) {
        /* a row counts when neither target is ignored (clamped to T) */
        const int64_t T = out->logits->shape[1];
        for (int64_t b = 0; b < B; b++) {
            const int32_t s = batch->start_pos[b], e = batch->end_pos[b];
            const int64_t sc = s < 0 ? 0 : s, ec = e < 0 ? 0 : e;
            if (sc >= T || ec >= T) continue;
            st->correct += hd_argmax(z + b * T, T) == sc && hd_argmax(z + n + b * T, T) == ec;
            st->count += 1;
        }
    } else {
        const int64_t M = out->logits->shape[out->logits->ndim - 1];
        hd_stats_class(z, n / M / out->logits->shape[0] * B, M, batch->head_class, st);
    }
}
