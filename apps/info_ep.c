/* info_ep.c: minimax-info's sizing of expert parallelism (apps/info_ep.h). */
#include "apps/info_ep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "train/zero.h"

/* Ring collectives over R ranks: what one rank sends for the buckets of numel[], each padded as
 * train/zero.c pads it (a multiple of 64 R elements) and moved as R - 1 of its R shards. A
 * bucket is gathered in the forward and again in the backward, except the last bucket of each
 * of the two gather slots (train/zero.c's slot rule: b % 2, the final bucket in slot 0 unless
 * an earlier odd bucket is at least as large), which is still there when the backward, in
 * reverse order, reaches it; every gradient is reduce-scattered once. expert (NULL: none):
 * the buckets whose moves are expert parallelism's (summed into *ex_gather, *ex_reduce). */
static void info_ep_traffic(int R, int n, const int64_t *numel, const bool *expert,
                            int gather_bytes, int64_t *gather, int64_t *reduce, int64_t *ex_gather,
                            int64_t *ex_reduce) {
    if (R == 1 || n == 0) return; /* one rank computes on its shards */
    const int64_t align = (int64_t)64 * R;
    const int64_t padded_last = (numel[n - 1] + align - 1) / align * align;
    int final_slot = 0;
    if ((n - 1) % 2 == 1)
        for (int b = 1; b < n - 1; b += 2)
            if ((numel[b] + align - 1) / align * align >= padded_last) final_slot = 1;
    int last_of[2] = {-1, -1}; /* the highest bucket of each slot */
    for (int b = 0; b < n; b++) last_of[b == n - 1 ? final_slot : b % 2] = b;
    for (int b = 0; b < n; b++) {
        const int64_t padded = (numel[b] + align - 1) / align * align;
        const int64_t moved = padded / R * (R - 1);
        const int times = b == last_of[0] || b == last_of[1] ? 1 : 2;
        const bool ex = expert && expert[b];
        *(ex ? ex_gather : gather) += times * moved * gather_bytes;
        *(ex ? ex_reduce : reduce) += moved * (int64_t)sizeof(float);
    }
}

mt_info_ep_out mt_info_ep_plan(const mt_info_ep_in *in) {
    const int N = in->ranks, P = in->ep;
    MT_CHECK(N >= 1 && P >= 1 && N % P == 0, "expert parallel %d must divide the %d ranks", P, N);
    MT_CHECK(in->experts % P == 0, "expert parallel %d must divide the %d experts", P, in->experts);
    const int gb = in->gather_dtype == MT_BF16 ? 2 : 4;
    mt_info_ep_out o = {0};
    const mt_zero_sizes z =
        mt_zero_plan(N, in->n_buckets, in->bucket_numel, in->gather_dtype, in->offload);
    o.owned_bytes = z.owned_bytes, o.slot_bytes = z.slot_bytes, o.host_bytes = z.host_bytes;
    if (P == 1) {
        info_ep_traffic(N, in->n_buckets, in->bucket_numel, NULL, gb, &o.gather_bytes,
                        &o.reduce_bytes, NULL, NULL);
        return o;
    }
    /* the same shards; an expert bucket moves between every rank and its N / P owners only */
    bool *expert = mt_calloc((size_t)in->n_buckets, sizeof(bool), "ep buckets");
    int64_t largest = 0, ex_gather = 0, ex_reduce = 0;
    for (int b = 0; b < in->n_buckets; b++) {
        MT_CHECK(in->bucket_expert_numel[b] == 0 ||
                     in->bucket_expert_numel[b] == in->bucket_numel[b],
                 "bucket %d: %lld of %lld elements are experts; expert parallelism needs the "
                 "gather unit expert (a bucket per expert)",
                 b, (long long)in->bucket_expert_numel[b], (long long)in->bucket_numel[b]);
        expert[b] = in->bucket_expert_numel[b] > 0;
        const int64_t shard = (in->bucket_numel[b] + 64 * N - 1) / (64 * N) * 64;
        if (expert[b] && shard > largest) largest = shard;
    }
    info_ep_traffic(N, in->n_buckets, in->bucket_numel, expert, gb, &o.gather_bytes,
                    &o.reduce_bytes, &ex_gather, &ex_reduce);
    free(expert);
    /* a rank sends each expert's shard to the owners but itself, owning E / P of every layer's
     * E experts: (N - 1) / P shards per expert on average, the ring's N - 1 over P; the same for
     * the gradient parts the owners send back */
    o.gather_bytes += ex_gather / P;
    o.reduce_bytes += ex_reduce / P;
    o.slot_bytes += (int64_t)(N / P) * largest * (int64_t)sizeof(float); /* the send buffer */
    /* per MoE layer: the rows of C (dispatch, combine; forward, backward) and their routing
     * weights (forward, backward), (P - 1) / P of them to other ranks, and the counts (P - 1
     * messages of E / P int64) */
    const int64_t rows = in->tokens * in->top_k;
    o.alltoall_bytes = (int64_t)in->moe_layers *
                       ((4 * rows * in->hidden * in->act_bytes + 2 * rows * 4) / P * (P - 1) +
                        (int64_t)(P - 1) * (in->experts / P) * 8);
    return o;
}

/* The inputs of mt_info_ep_plan for model m (its buckets' expert elements and MoE layers);
 * expert_numel is the caller's (n_buckets), freed by it. */
mt_info_ep_in mt_info_ep_in_model(const mt_minimax *m, int64_t *expert_numel, int ranks, int ep,
                                  mt_dtype gather_dtype, bool offload, int64_t tokens) {
    int moe_layers = 0, last = -1;
    for (int b = 0; b < m->n_buckets; b++) expert_numel[b] = 0;
    for (int p = 0; p < m->n_params; p++) {
        const mt_param_info *info = &m->info[p];
        if (!strstr(info->name, ".block_sparse_moe.experts.")) continue;
        expert_numel[info->bucket] += info->numel;
        int l = -1;
        if (sscanf(info->name, "model.layers.%d.", &l) == 1 && l != last) moe_layers++, last = l;
    }
    return (mt_info_ep_in){.ranks = ranks,
                           .ep = ep,
                           .n_buckets = m->n_buckets,
                           .bucket_numel = m->bucket_numel,
                           .bucket_expert_numel = expert_numel,
                           .experts = m->cfg.num_local_experts,
                           .moe_layers = moe_layers,
                           .top_k = m->cfg.num_experts_per_tok,
                           .hidden = m->cfg.hidden_size,
                           .tokens = tokens,
                           .gather_dtype = gather_dtype,
                           .act_bytes = 4, /* the exchanged rows are fp32 */
                           .offload = offload};
}
