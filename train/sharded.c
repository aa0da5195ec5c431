/* sharded.c: see sharded.h. */
#include "sharded.h"

#include <math.h>
#include <stdlib.h>

#include "autograd/profile.h"

/* The forward walks buckets 0..n-1 and the backward n-1..0: while one computes, the next one
 * in walk order is gathered into the other slot. With recomputed layers
 * (m->gradient_checkpointing) the backward walks each layer's first bucket twice (its recompute,
 * then its backward) and its experts once, from the last layer to the first; the prefetches
 * follow that walk. */
static int sharded_next_forward(const mt_sharded *s, int bucket) {
    const mt_minimax *m = s->model;
    if (!s->ctx->recomputing) return bucket + 1;
    /* a layer recomputed in the backward enters only its first bucket (its experts' forwards
     * wait for their backwards, models/minimax.c), and its backward starts at its last expert */
    const int l = mt_minimax_bucket_layer(m, bucket);
    if (l < 0 || m->unit != MT_GATHER_EXPERT) return -1;
    return mt_minimax_layer_last_bucket(m, l);
}

static int sharded_next_backward(const mt_sharded *s, int bucket) {
    const mt_minimax *m = s->model;
    if (!m->gradient_checkpointing) return bucket - 1;
    /* after a layer's first bucket (or the final one) the previous layer's recompute starts */
    const int l = bucket == mt_minimax_final_bucket(m) ? m->cfg.num_hidden_layers
                                                       : mt_minimax_bucket_layer(m, bucket);
    return l >= 1 ? mt_minimax_layer_bucket(m, l - 1) : bucket - 1;
}

/* Starts gathering `next` while `bucket` computes (zero skips it when both share a slot: a
 * layer with an odd number of experts apart, or a whole lm_head after an even bucket). */
static void sharded_prefetch(mt_sharded *s, int next) {
    if (s->prefetch) mt_zero_prefetch(s->zero, next);
}

/* The op profile's rows of the ZeRO work (autograd/profile.h), while s->ctx->prof is set:
 * "zero_gather" the wait for bucket's gather and the start of the next one, its bytes the
 * gathered buckets' (gathers issued times this bucket's gathered size: neighbours are alike);
 * "zero_reduce_scatter" the gradients' reduce-scatter and the shard's accumulation. */
static double sharded_gather_bytes(const mt_zero *z, int bucket, int64_t gathers) {
    const double elem = z->gather_bf16 ? 2.0 : 4.0;
    return (double)gathers * (double)z->shard_numel[bucket] * (double)z->comm->size * elem;
}

static void sharded_gather(mt_sharded *s, int bucket, bool with_grad, int next) {
    mt_profile *p = s->ctx->prof;
    const double t0 = p ? mt_profile_now() : 0;
    const int64_t g0 = s->zero->gathers;
    mt_zero_gather(s->zero, bucket, with_grad);
    sharded_prefetch(s, next);
    if (p)
        mt_profile_add(p, "zero_gather", with_grad ? MT_PROFILE_BWD : MT_PROFILE_FWD,
                       mt_profile_now() - t0, 0,
                       sharded_gather_bytes(s->zero, bucket, s->zero->gathers - g0));
}

static void hook_forward_enter(void *user, int bucket) {
    mt_sharded *s = user;
    sharded_gather(s, bucket, false, sharded_next_forward(s, bucket));
}

static void hook_forward_leave(void *user, int bucket) {
    mt_sharded *s = user;
    mt_zero_release(s->zero, bucket);
}

static void hook_backward(void *user, int bucket, bool enter) {
    mt_sharded *s = user;
    if (enter) {
        sharded_gather(s, bucket, true, sharded_next_backward(s, bucket));
    } else {
        mt_profile *p = s->ctx->prof;
        const double t0 = p ? mt_profile_now() : 0;
        mt_zero_reduce_grad(s->zero, bucket);
        mt_zero_release(s->zero, bucket);
        /* sent P n, received n, the shard's gradient read and written: 4 bytes each; none when
         * the backward accumulated into the shard directly (one rank: aliased) */
        if (p) {
            const double n = s->zero->aliased ? 0 : (double)s->zero->shard_numel[bucket];
            mt_profile_add(p, "zero_reduce_scatter", MT_PROFILE_BWD, mt_profile_now() - t0, n,
                           4.0 * n * ((double)s->zero->comm->size + 3));
        }
    }
}

void mt_sharded_load(mt_zero *z, mt_minimax *m, mt_weights_reader *reader, uint64_t init_seed) {
    const int64_t chunk = (int64_t)1 << 24;
    float *host = mt_malloc(sizeof(float) * (size_t)chunk, "weight loading buffer");
    for (int b = 0; b < m->n_buckets; b++) {
        int64_t lo, hi;
        mt_zero_owned_range(z, b, &lo, &hi);
        for (int64_t i = lo; i < hi; i += chunk) {
            const int64_t end = hi - i < chunk ? hi : i + chunk;
            if (reader)
                mt_weights_read_range(reader, b, i, end, host);
            else
                mt_weights_init_random_range(m, init_seed, b, i, end, host);
            mt_zero_set_master(z, b, i, end, host);
        }
    }
    free(host);
}

void mt_sharded_init(mt_sharded *s, mt_minimax *m, mt_zero *z, mt_ctx *c) {
    s->model = m;
    s->zero = z;
    s->ctx = c;
    s->prefetch = true;
    for (int b = 0; b < m->n_buckets; b++) {
        int n = 0;
        for (int p = 0; p < m->n_params; p++) n += m->info[p].bucket == b;
        mt_zero_range *ranges = mt_calloc((size_t)n, sizeof(mt_zero_range), "decay ranges");
        int k = 0;
        for (int p = 0; p < m->n_params; p++) {
            const mt_param_info *in = &m->info[p];
            if (in->bucket == b)
                ranges[k++] = (mt_zero_range){in->offset, in->numel, in->ndim >= 2 && !in->buffer,
                                              in->buffer};
        }
        mt_zero_set_ranges(z, b, ranges, n);
        free(ranges);
    }
    mt_sharded_bind(s, true);
    c->tag_hook = hook_backward;
    c->tag_user = s;
}

void mt_sharded_bind(mt_sharded *s, bool grads) {
    for (int b = 0; b < s->model->n_buckets; b++)
        mt_minimax_bind_bucket(s->model, b, mt_zero_slot_data(s->zero, b),
                               grads ? mt_zero_slot_grad(s->zero, b) : NULL);
}

mt_bucket_hooks mt_sharded_forward_hooks(mt_sharded *s) {
    return (mt_bucket_hooks){hook_forward_enter, hook_forward_leave, s};
}

double mt_sharded_micro_step(mt_sharded *s, const mt_minimax_batch *batch, mt_micro_extra *extra) {
    mt_bucket_hooks hooks = mt_sharded_forward_hooks(s);
    mt_ctx_reset(s->ctx);
    mt_minimax_out out;
    mt_minimax_forward(s->model, s->ctx, batch, &hooks, &out);
    mt_backward(s->ctx, out.loss, NULL);
    /* read after the backward is queued: on a device the copy then waits for one stream, once */
    const mt_backend *be = s->ctx->be;
    float ce = 0;
    be->to_host(&ce, out.ce_loss->data, sizeof(float));
    if (extra) {
        extra->n = out.n_aux;
        for (int k = 0; k < out.n_aux; k++) {
            float v = 0;
            if (out.aux[k].value) be->to_host(&v, out.aux[k].value->data, sizeof(float));
            extra->value[k] = v;
        }
        extra->head = (mt_head_stats){0};
        if (s->model->cfg.head != MT_HEAD_CAUSAL_LM)
            mt_minimax_head_stats(s->model, s->ctx, batch, &out, &extra->head);
    }
    return ce;
}

double mt_sharded_micro_eval(mt_sharded *s, const mt_minimax_batch *batch, mt_head_stats *head) {
    mt_bucket_hooks hooks = mt_sharded_forward_hooks(s);
    mt_ctx_reset(s->ctx);
    const bool grad = mt_ctx_set_grad(s->ctx, false); /* nothing saved for a backward */
    mt_minimax_out out;
    mt_minimax_forward(s->model, s->ctx, batch, &hooks, &out);
    mt_ctx_set_grad(s->ctx, grad);
    float ce = 0;
    s->ctx->be->to_host(&ce, out.ce_loss->data, sizeof(float));
    if (head && s->model->cfg.head != MT_HEAD_CAUSAL_LM)
        mt_minimax_head_stats(s->model, s->ctx, batch, &out, head);
    return ce;
}

bool mt_sharded_optimizer_step(mt_sharded *s, const mt_adamw *opt, double max_grad_norm,
                               double *grad_norm) {
    bool finite = false;
    mt_profile *p = s->ctx->prof;
    /* the op profile's rows: the norm reads the shard's gradient (2 FLOPs an element); AdamW
     * reads and writes p, m, v and reads g (28 bytes), about 12 FLOPs an element */
    const double n = (double)s->zero->total_shard;
    double t0 = p ? mt_profile_now() : 0;
    *grad_norm = mt_zero_grad_norm(s->zero, &finite);
    if (p)
        mt_profile_add(p, "optim_grad_norm", MT_PROFILE_STEP, mt_profile_now() - t0, 2 * n, 4 * n);
    if (!isfinite(*grad_norm) || !finite) return false;
    mt_adamw o = *opt; /* clipping: AdamW reads the gradients scaled (zero.h) */
    if (max_grad_norm > 0 && *grad_norm > max_grad_norm)
        o.grad_scale = (float)(max_grad_norm / (*grad_norm + 1e-6));
    t0 = p ? mt_profile_now() : 0;
    mt_zero_adamw_step(s->zero, &o);
    if (p) mt_profile_add(p, "optim_adamw", MT_PROFILE_STEP, mt_profile_now() - t0, 12 * n, 28 * n);
    return true;
}
