/* trainer_head.c: the head objectives in the loop (train.objective, data/head_data.h): the
 * reward pairs' view for the sampler, each sample's number of loss terms (the global batch's
 * count is every head loss's denominator, so micro-batches and ranks add up to the global mean,
 * as the labelled tokens do for SFT), and a micro-batch's rows and targets. */
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

void trainer_head_pairs_view(const mt_token_data *d, mt_token_data *view) {
    *view = (mt_token_data){0};
    if (d->objective != MT_OBJECTIVE_REWARD || d->n_samples == 0) return;
    MT_CHECK(d->n_samples % 2 == 0, "reward data: %lld samples, not chosen / rejected pairs",
             (long long)d->n_samples);
    const int64_t P = d->n_samples / 2;
    view->objective = MT_OBJECTIVE_REWARD;
    view->n_samples = P;
    view->n_tokens = d->n_tokens;
    view->ids = d->ids;       /* shared: pair p's tokens are chosen's then rejected's */
    view->labels = d->labels; /* shared (all -100) */
    view->offsets = mt_malloc(sizeof(int64_t) * (size_t)(P + 1), "reward pair offsets");
    view->source = mt_malloc(sizeof(int32_t) * (size_t)(P + 1), "reward pair sources");
    view->head_i32 = mt_malloc(sizeof(int32_t) * (size_t)(P + 1), "reward chosen lengths");
    view->head_f32 = mt_calloc((size_t)(P + 1), sizeof(float), "reward margins");
    view->i32_width = view->f32_width = 1;
    for (int64_t p = 0; p < P; p++) {
        view->offsets[p] = d->offsets[2 * p];
        view->source[p] = d->source ? d->source[2 * p] : 0;
        view->head_i32[p] = (int32_t)(d->offsets[2 * p + 1] - d->offsets[2 * p]);
        if (d->head_f32 && d->f32_width >= 1) view->head_f32[p] = d->head_f32[2 * p * d->f32_width];
    }
    view->offsets[P] = d->offsets[2 * P];
    view->n_lines = d->n_lines;
    view->n_targets = P;
}

void trainer_head_pairs_free(mt_token_data *view) {
    free(view->offsets);
    free(view->source);
    free(view->head_i32);
    free(view->head_f32);
    *view = (mt_token_data){0};
}

int64_t trainer_head_item_terms(const mt_token_data *d, int64_t i) {
    switch (d->objective) {
    case MT_OBJECTIVE_CLASSIFICATION:
        if (d->head_i32) return d->head_i32[i * d->i32_width] != MT_IGNORE_INDEX;
        return d->f32_width;
    case MT_OBJECTIVE_TOKEN_CLASSIFICATION: {
        int64_t n = 0;
        for (int64_t t = d->offsets[i]; t < d->offsets[i + 1]; t++)
            n += d->labels[t] != MT_IGNORE_INDEX;
        return n;
    }
    default: /* a reward pair, a QA span (the start's and the end's terms, each over rows) */
        return 1;
    }
}

int64_t trainer_head_step_terms(const mt_sampler *s) {
    int64_t n = 0;
    for (int64_t j = 0; j < s->step_count; j++)
        n += trainer_head_item_terms(s->data, s->order[s->step_first + j]);
    return n;
}

/* The sample of row b of micro-batch m (-1: padding), pack off: one per row. */
static int64_t head_row_item(const mt_sampler *s, int64_t m, int64_t b) {
    const int64_t row = m * s->cfg.micro_batch + b;
    if (row >= s->n_rows || s->row_first[row] == s->row_first[row + 1]) return -1;
    return s->row_items[s->row_first[row]];
}

/* Row r of the batch: tokens src[0, len), then padding (its own segment, as the sampler pads). */
static void head_row_fill(trainer_batch *b, int64_t r, int64_t T, const int32_t *src, int64_t len,
                          int32_t pad) {
    for (int64_t t = 0; t < T; t++) {
        const bool tok = t < len;
        b->ids[r * T + t] = tok ? src[t] : pad;
        b->pos[r * T + t] = (int32_t)(tok ? t : t - len);
        b->seg[r * T + t] = tok ? 0 : 1;
    }
    b->real[r] = len;
}

mt_minimax_batch trainer_head_upload(trainer_batch *b, const mt_sampler *s, int64_t m,
                                     int64_t denom, trainer_micro *mt) {
    const mt_token_data *d = s->data;
    const bool pairs = d->objective == MT_OBJECTIVE_REWARD;
    const int64_t Bs = s->cfg.micro_batch, R = b->B, K = b->num_labels;
    MT_CHECK(R == (pairs ? 2 * Bs : Bs), "head batch: %lld rows for %lld sampler rows",
             (long long)R, (long long)Bs);
    /* the rows' spans: the samples of the micro-batch first (rows after them are padding) */
    int64_t longest = 0, rows = 0;
    for (int64_t i = 0; i < Bs; i++) {
        const int64_t it = head_row_item(s, m, i);
        if (it < 0) continue;
        const int64_t len = d->offsets[it + 1] - d->offsets[it];
        const int64_t first = pairs ? d->head_i32[it] : len, second = len - first;
        if (first > longest) longest = first;
        if (second > longest) longest = second;
        b->item[rows++] = it;
    }
    int64_t T = b->T;
    if (b->trim_padding) {
        T = (longest + 7) / 8 * 8;
        if (T < 8) T = 8;
        if (T > b->T) T = b->T;
    }
    const int32_t pad = s->cfg.pad_id;
    for (int64_t r = 0; r < R; r++) head_row_fill(b, r, T, NULL, 0, pad);
    for (int64_t k = 0; k < rows; k++) {
        const int64_t it = b->item[k], off = d->offsets[it], len = d->offsets[it + 1] - off;
        if (pairs) {
            const int64_t c = d->head_i32[it];
            head_row_fill(b, 2 * k, T, d->ids + off, c, pad);
            head_row_fill(b, 2 * k + 1, T, d->ids + off + c, len - c, pad);
            b->margin[k] = d->head_f32[it];
            continue;
        }
        head_row_fill(b, k, T, d->ids + off, len, pad);
        if (d->objective == MT_OBJECTIVE_TOKEN_CLASSIFICATION)
            for (int64_t t = 0; t < T; t++)
                b->head_class[k * T + t] = t < len ? d->labels[off + t] : MT_IGNORE_INDEX;
        else if (d->objective == MT_OBJECTIVE_QUESTION_ANSWERING) {
            b->start[k] = d->head_i32[it * 2];
            b->end[k] = d->head_i32[it * 2 + 1];
        } else if (d->head_i32) {
            b->head_class[k] = d->head_i32[it * d->i32_width];
        } else {
            memcpy(b->head_target + k * K, d->head_f32 + it * d->f32_width,
                   sizeof(float) * (size_t)K);
        }
    }
    const size_t n = (size_t)(R * T);
    int32_t *dev = b->dev;
    b->be->to_device(dev, b->ids, n * sizeof(int32_t));
    b->be->to_device(dev + 2 * n, b->pos, n * sizeof(int32_t));
    b->be->to_device(dev + 3 * n, b->seg, n * sizeof(int32_t));
    mt_tensor_wrap(&mt->ids, MT_I32, 2, (int64_t[]){R, T}, dev, NULL, "ids");
    mt_tensor_wrap(&mt->pos, MT_I32, 2, (int64_t[]){R, T}, dev + 2 * n, NULL, "positions");
    mt_tensor_wrap(&mt->seg, MT_I32, 2, (int64_t[]){R, T}, dev + 3 * n, NULL, "segments");
    mt_minimax_batch batch = {.ids = &mt->ids,
                              .pos = &mt->pos,
                              .seg = &mt->seg,
                              .valid_len = b->real,
                              .loss_denom = (float)(denom > 0 ? denom : 1),
                              .head_pad_rows = R - (pairs ? 2 * rows : rows)};
    switch (d->objective) {
    case MT_OBJECTIVE_REWARD:
        batch.head_pairs = true;
        batch.pair_margin = b->margin;
        break;
    case MT_OBJECTIVE_QUESTION_ANSWERING:
        batch.start_pos = b->start;
        batch.end_pos = b->end;
        break;
    case MT_OBJECTIVE_CLASSIFICATION:
        batch.head_class = d->head_i32 ? b->head_class : NULL;
        batch.head_target = d->head_i32 ? NULL : b->head_target;
        break;
    default: /* token classification */
        batch.head_class = b->head_class;
    }
    return batch;
}

int trainer_head_columns(const trainer_data *data) {
    const mt_token_data *d = data->data.n_samples ? &data->data : &data->eval_data;
    switch (d->objective) {
    case MT_OBJECTIVE_REWARD:
        return 2;
    case MT_OBJECTIVE_CLASSIFICATION: /* float targets (regression, multi-label): no accuracy */
        return d->head_i32 ? 1 : 0;
    case MT_OBJECTIVE_TOKEN_CLASSIFICATION:
    case MT_OBJECTIVE_QUESTION_ANSWERING:
        return 1;
    default:
        return 0;
    }
}
