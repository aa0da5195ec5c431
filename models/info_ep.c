/* info_ep.c: minimax-info's sizing of expert parallelism (models/info_ep.h). */
#include "models/info_ep.h"

#include <stdlib.h>

#include "autograd/check.h"
#include "train/zero.h"

/* Ring collectives over R ranks: what one rank sends for the buckets of numel[], each padded as
 * train/zero.c pads it (a multiple of 64 R elements) and moved as R - 1 of its R shards. A
 * bucket is gathered in the forward and again in the backward, except the last bucket of each
 * of the two gather slots (train/zero.c's slot rule: b % 2, the final bucket in slot 0 unless
 * an earlier odd bucket is at least as large), which is still there when the backward, in
 * reverse order, reaches it; every gradient is reduce-scattered once. */
static void info_ep_traffic(int R, int n, const int64_t *numel, int gather_bytes, int64_t *gather,
                            int64_t *reduce) {
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
        *gather += times * moved * gather_bytes;
        *reduce += moved * (int64_t)sizeof(float);
    }
}

mt_info_ep_out mt_info_ep_plan(const mt_info_ep_in *in) {
    const int N = in->ranks, P = in->ep;
    MT_CHECK(N >= 1 && P >= 1 && N % P == 0, "expert parallel %d must divide the %d ranks", P, N);
    MT_CHECK(in->experts % P == 0, "expert parallel %d must divide the %d experts", P, in->experts);
    const int gb = in->gather_dtype == MT_BF16 ? 2 : 4;
    mt_info_ep_out o = {0};
    if (P == 1) {
        const mt_zero_sizes z =
            mt_zero_plan(N, in->n_buckets, in->bucket_numel, in->gather_dtype, in->offload);
        o.owned_bytes = z.owned_bytes, o.slot_bytes = z.slot_bytes, o.host_bytes = z.host_bytes;
        info_ep_traffic(N, in->n_buckets, in->bucket_numel, gb, &o.gather_bytes, &o.reduce_bytes);
        return o;
    }
    const int D = N / P;
    int64_t *dense = mt_malloc(sizeof(int64_t) * 2 * (size_t)in->n_buckets, "ep buckets");
    int64_t *local = dense + in->n_buckets;
    int n_local = 0;
    for (int b = 0; b < in->n_buckets; b++) {
        dense[b] = in->bucket_numel[b] - in->bucket_expert_numel[b];
        MT_CHECK(in->bucket_expert_numel[b] % P == 0, "bucket %d: %lld expert elements over %d", b,
                 (long long)in->bucket_expert_numel[b], P);
        if (in->bucket_expert_numel[b]) local[n_local++] = in->bucket_expert_numel[b] / P;
    }
    const mt_zero_sizes zd = mt_zero_plan(N, in->n_buckets, dense, in->gather_dtype, in->offload);
    const mt_zero_sizes ze = mt_zero_plan(D, n_local, local, in->gather_dtype, in->offload);
    o.owned_bytes = zd.owned_bytes + ze.owned_bytes;
    o.slot_bytes = zd.slot_bytes + ze.slot_bytes;
    o.host_bytes = zd.host_bytes + ze.host_bytes;
    info_ep_traffic(N, in->n_buckets, dense, gb, &o.gather_bytes, &o.reduce_bytes);
    info_ep_traffic(D, n_local, local, gb, &o.gather_bytes, &o.reduce_bytes);
    /* dispatch + combine, forward + backward: 4 exchanges of B T top_k rows of C */
    const int64_t rows = in->tokens * in->top_k;
    o.alltoall_bytes =
        (int64_t)in->moe_layers * 4 * rows * in->hidden * in->act_bytes / P * (P - 1);
    free(dense);
    return o;
}
