/* plan.c: activation memory of one micro-step, from a dry run of the model on the plan backend
 * (kernels/backend_plan.c): the real op constructors, tape and recomputed segments carve from an
 * arena whose memory never exists, so the peaks are exact for the shapes (see minimax.h); and
 * the most tokens one forward may take. */
#include <limits.h>
#include <stdlib.h>

#include "models/minimax.h"

int64_t mt_minimax_max_tokens(const mt_minimax_config *cfg, mt_gather_unit unit) {
    /* N rows: BLAS dimensions and positions are int; the MoE's N*K slots are int32 indices;
     * the fused experts (unit layer) take the (N, C) input as one int-sized matrix */
    int64_t n = INT_MAX / (cfg->num_experts_per_tok > 0 ? cfg->num_experts_per_tok : 1);
    if (unit == MT_GATHER_LAYER && cfg->hidden_size > 0 && INT_MAX / cfg->hidden_size < n)
        n = INT_MAX / cfg->hidden_size;
    return n;
}

int64_t mt_minimax_plan_activations(const mt_minimax_config *cfg, mt_gather_unit unit,
                                    bool recompute, int64_t B, int64_t T) {
    MT_CHECK(B >= 1 && T >= 1, "plan: batch %lld x %lld", (long long)B, (long long)T);
    const mt_backend *be = mt_backend_plan();
    mt_minimax m;
    mt_minimax_init_unit(&m, cfg, unit);
    m.gradient_checkpointing = recompute;
    for (int b = 0; b < m.n_buckets; b++) {
        const size_t bytes = sizeof(float) * (size_t)m.bucket_numel[b];
        mt_minimax_bind_bucket(&m, b, be->alloc(bytes), be->alloc(bytes));
    }
    mt_ctx c;
    /* the trainer's tape; an arena never filled */
    mt_ctx_init(&c, be, (size_t)1 << 50, MT_MINIMAX_TAPE_NODES);
    mt_tensor io[4];
    const char *names[4] = {"ids", "labels", "positions", "segments"};
    for (int i = 0; i < 4; i++) {
        mt_tensor_wrap(&io[i], MT_I32, 2, (int64_t[]){B, T}, be->alloc(sizeof(int32_t) * B * T),
                       NULL, names[i]);
        io[i].dev = be->dev;
    }
    int64_t *valid = mt_malloc(sizeof(int64_t) * (size_t)B, "plan rows");
    for (int64_t b = 0; b < B; b++) valid[b] = T;
    /* as the trainer's micro-step: every token labelled (the most loss rows), fused loss; a
     * head model (no lm_head): its loss with every row or token labelled */
    const bool head = cfg->head != MT_HEAD_CAUSAL_LM;
    int32_t *cls = mt_calloc((size_t)(B * T), sizeof(int32_t), "plan classes");
    float *target = mt_calloc((size_t)(B * T) * (size_t)(cfg->num_labels > 0 ? cfg->num_labels : 1),
                              sizeof(float), "plan targets");
    mt_minimax_batch batch = {.ids = &io[0],
                              .labels = head ? NULL : &io[1],
                              .pos = &io[2],
                              .seg = &io[3],
                              .valid_len = valid,
                              .loss_denom = (float)(B * T),
                              .fused_loss = !head,
                              .jitter = true}; /* the router jitter's noise, where there is one */
    if (head) {
        const bool single = cfg->problem_type == MT_PROBLEM_SINGLE_LABEL ||
                            (cfg->problem_type == MT_PROBLEM_AUTO && cfg->num_labels > 1);
        batch.head_class = cfg->head == MT_HEAD_TOKEN_CLASSIFICATION || single ? cls : NULL;
        batch.head_target = batch.head_class ? NULL : target;
        batch.start_pos = batch.end_pos = cls;
    }
    mt_minimax_out out;
    mt_minimax_forward(&m, &c, &batch, NULL, &out);
    mt_backward(&c, out.loss, NULL);
    const int64_t live = (int64_t)c.arena.peak_live;
    free(valid);
    free(cls);
    free(target);
    mt_ctx_free(&c);
    mt_minimax_free(&m);
    return live;
}
