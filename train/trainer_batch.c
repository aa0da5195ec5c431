/* trainer_batch.c: the buffers of one micro-batch (ids, labels, positions, segments and each
 * row's real length, on the host and on the backend; a head objective's targets) and its upload
 * from a sampler's step (a head objective's: trainer_head.c), for
 * the optimizer step (trainer_step.c) and the eval loss (trainer_eval.c). */
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

void trainer_batch_init(trainer_batch *b, const mt_backend *be, int64_t B, int64_t T,
                        bool trim_padding, bool padding_free, int objective, int64_t num_labels) {
    b->objective = objective;
    b->num_labels = num_labels;
    if (objective != MT_OBJECTIVE_SFT) {
        b->item = mt_malloc(sizeof(int64_t) * (size_t)B, "batch samples");
        if (objective == MT_OBJECTIVE_REWARD) B *= 2; /* chosen, rejected */
        b->head_class = mt_malloc(sizeof(int32_t) * (size_t)(B * T), "batch classes");
        b->head_target = mt_malloc(sizeof(float) * (size_t)(B * (num_labels > 0 ? num_labels : 1)),
                                   "batch targets");
        b->start = mt_malloc(sizeof(int32_t) * (size_t)B, "batch span starts");
        b->end = mt_malloc(sizeof(int32_t) * (size_t)B, "batch span ends");
        b->margin = mt_calloc((size_t)B, sizeof(float), "batch margins");
    }
    b->be = be;
    b->B = B;
    b->T = T;
    b->trim_padding = trim_padding;
    b->padding_free = padding_free;
    size_t n = (size_t)(B * T);
    b->ids = mt_malloc(n * sizeof(int32_t), "batch ids");
    b->labels = mt_malloc(n * sizeof(int32_t), "batch labels");
    b->pos = mt_malloc(n * sizeof(int32_t), "batch positions");
    b->seg = mt_malloc(n * sizeof(int32_t), "batch segments");
    b->real = mt_malloc((size_t)B * sizeof(int64_t), "batch row lengths");
    b->dev = be->alloc(4 * n * sizeof(int32_t));
    MT_CHECK(b->dev, "out of %s memory for the batch (%zu bytes)", be->name,
             4 * n * sizeof(int32_t));
}

/* Context parallelism: each row a (B,T) keeps this rank's chunks of T / (2C) tokens, r and
 * 2C - 1 - r (autograd/context_parallel.h), packed to (B, T / C) in place. */
static void trainer_batch_take_chunks(int32_t *a, int64_t B, int64_t T, int C, int r) {
    const int64_t Tl = T / C;
    for (int64_t b = 0; b < B; b++) /* row b's local tokens end before row b's global ones */
        for (int64_t i = 0; i < Tl; i++) a[b * Tl + i] = a[b * T + mt_cp_global_index(r, C, T, i)];
}

/* data.padding_free: the real tokens of rows (B,T) moved, in place, to one row, each sample
 * its own segment (a packed row's samples keep theirs apart); padding only after the last,
 * up to a multiple of unit (at most B T, and at least unit: an all-padding micro-batch still
 * runs its collectives). Returns that row's length; b->real[0] = the real tokens. */
static int64_t trainer_batch_flatten(trainer_batch *b, int64_t B, int64_t T, int64_t unit,
                                     int32_t pad_id) {
    int32_t *ids = b->ids, *labels = b->labels, *pos = b->pos, *seg = b->seg;
    int64_t n = 0;
    int32_t base = 0; /* the segments of the rows before */
    for (int64_t r = 0; r < B; r++) {
        const int64_t len = b->real[r], at = r * T; /* at >= n: moves only go left */
        if (len == 0) continue;
        memmove(ids + n, ids + at, sizeof(int32_t) * (size_t)len);
        memmove(labels + n, labels + at, sizeof(int32_t) * (size_t)len);
        memmove(pos + n, pos + at, sizeof(int32_t) * (size_t)len);
        for (int64_t t = 0; t < len; t++) seg[n + t] = seg[at + t] + base;
        base = seg[n + len - 1] + 1;
        n += len;
    }
    int64_t Tp = (n + unit - 1) / unit * unit;
    if (Tp < unit) Tp = unit;
    if (Tp > B * T) Tp = B * T;        /* B T is a multiple of the 2C chunks (checked at start) */
    for (int64_t t = n; t < Tp; t++) { /* the sampler's padding: one more segment */
        ids[t] = pad_id;
        labels[t] = -100;
        pos[t] = (int32_t)(t - n);
        seg[t] = base;
    }
    b->real[0] = n;
    return Tp;
}

mt_minimax_batch trainer_batch_upload(trainer_batch *b, const mt_sampler *s, int64_t m,
                                      int64_t denom, trainer_micro *mt) {
    if (b->objective != MT_OBJECTIVE_SFT) return trainer_head_upload(b, s, m, denom, mt);
    const int64_t T = b->T, C = b->cp_size > 1 ? b->cp_size : 1;
    const int64_t unit = 8 * C; /* a multiple of 8 and of the 2C chunks (2C divides 8C) */
    int64_t B = b->B, Tm = T;
    if (b->trim_padding) {
        Tm = (mt_sampler_micro_len(s, m) + unit - 1) / unit * unit;
        if (Tm < unit) Tm = unit; /* an all-padding micro-batch still runs (collectives) */
        if (Tm > T) Tm = T;
    }
    int32_t *d = b->dev;
    int32_t *host[4] = {b->ids, b->labels, b->pos, b->seg};
    mt_sampler_fill(s, m, Tm, host[0], host[1], host[2], host[3]);
    for (int64_t r = 0; r < B; r++) b->real[r] = mt_sampler_row_len(s, m, r);
    if (b->padding_free) {
        Tm = trainer_batch_flatten(b, B, Tm, unit, (int32_t)s->cfg.pad_id);
        B = 1;
    }
    if (C > 1) { /* the rows' real lengths stay the whole samples' (models/minimax.h) */
        for (int a = 0; a < 4; a++) trainer_batch_take_chunks(host[a], B, Tm, (int)C, b->cp_rank);
        Tm /= C;
    }
    const size_t n = (size_t)(B * Tm);
    for (int a = 0; a < 4; a++) b->be->to_device(d + a * n, host[a], n * sizeof(int32_t));
    mt_tensor_wrap(&mt->ids, MT_I32, 2, (int64_t[]){B, Tm}, d, NULL, "ids");
    mt_tensor_wrap(&mt->labels, MT_I32, 2, (int64_t[]){B, Tm}, d + n, NULL, "labels");
    mt_tensor_wrap(&mt->pos, MT_I32, 2, (int64_t[]){B, Tm}, d + 2 * n, NULL, "positions");
    mt_tensor_wrap(&mt->seg, MT_I32, 2, (int64_t[]){B, Tm}, d + 3 * n, NULL, "segments");
    return (mt_minimax_batch){.ids = &mt->ids,
                              .labels = &mt->labels,
                              .pos = &mt->pos,
                              .seg = &mt->seg,
                              .valid_len = b->real,
                              .loss_denom = (float)(denom > 0 ? denom : 1),
                              .fused_loss = true};
}

void trainer_batch_free(trainer_batch *b) {
    free(b->ids);
    free(b->labels);
    free(b->pos);
    free(b->seg);
    free(b->real);
    free(b->item);
    free(b->head_class);
    free(b->head_target);
    free(b->start);
    free(b->end);
    free(b->margin);
    if (b->be) b->be->free(b->dev);
}
