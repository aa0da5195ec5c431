/* zero_ep.c: the expert buckets' gathers and gradient returns under expert parallelism
 * (zero.h, mt_zero_set_expert_parallel). Shards stay where ZeRO-3 puts them; only the
 * collectives change: all-to-alls whose receivers are the expert's owners. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "train/zero.h"

void mt_zero_set_expert_parallel(mt_zero *z, int P, const int *owner) {
    const int W = z->comm->size;
    MT_CHECK(P >= 1 && W % P == 0, "zero: expert parallelism over %d ranks of %d", P, W);
    MT_CHECK(!z->gather_bf16, "zero: expert parallelism gathers fp32 parameters only");
    MT_CHECK(!z->node, "zero: expert parallelism is set before the parameters are node-shared");
    MT_CHECK(z->comm->alltoallv, "zero: the %s communicator has no all-to-all", z->comm->name);
    free(z->ep_owner);
    if (z->ep_buf) z->be->free(z->ep_buf);
    z->ep_owner = NULL;
    z->ep_buf = NULL;
    z->ep_size = P;
    if (P <= 1) return;
    z->ep_owner = mt_malloc(sizeof(int) * (size_t)z->n_buckets, "ep owners");
    memcpy(z->ep_owner, owner, sizeof(int) * (size_t)z->n_buckets);
    int64_t most = 0;
    for (int b = 0; b < z->n_buckets; b++)
        if (owner[b] >= 0 && z->shard_numel[b] > most) most = z->shard_numel[b];
    z->ep_buf = z->be->alloc(sizeof(float) * (size_t)((W / P) * most + 1));
    MT_CHECK(z->ep_buf, "zero: out of memory for the expert-parallel buffer (%lld floats)",
             (long long)((W / P) * most));
    mt_zero_master_changed(z);
}

void mt_zero_expert_parallel_pause(mt_zero *z, bool paused) {
    if (z->ep_size <= 1 || z->ep_paused == paused) return;
    z->ep_paused = paused;
    mt_zero_master_changed(z); /* a slot gathered one way is not what the other way holds */
}

static int zero_ep_owner(const mt_zero *z, int bucket) {
    return z->ep_size > 1 && !z->ep_paused ? z->ep_owner[bucket] : -1;
}

bool mt_zero_ep_owns(const mt_zero *z, int bucket) {
    const int p = zero_ep_owner(z, bucket);
    return p < 0 || z->comm->rank % z->ep_size == p;
}

/* Every rank sends its shard to each owner (world / P copies, back to back); each owner
 * receives every rank's shard in rank order: the whole padded bucket, as an all-gather
 * leaves it. The other ranks' slots receive nothing (they compute nothing with it). */
bool mt_zero_ep_gather(mt_zero *z, int bucket, float *slot) {
    const int p = zero_ep_owner(z, bucket);
    if (p < 0) return false;
    mt_comm *c = z->comm;
    const int W = c->size, P = z->ep_size;
    const int64_t n = z->shard_numel[bucket];
    const bool mine = c->rank % P == p;
    int64_t send_n[W], recv_n[W];
    for (int r = 0, k = 0; r < W; r++) {
        send_n[r] = r % P == p ? n : 0;
        recv_n[r] = mine ? n : 0;
        if (r % P == p)
            z->be->copy(z->ep_buf + (k++) * n, z->master + z->shard_offset[bucket],
                        sizeof(float) * (size_t)n);
    }
    c->alltoallv(c, z->ep_buf, send_n, slot, recv_n, sizeof(float));
    return true;
}

/* Each owner sends rank r part r of the bucket's gradient; every rank adds the owners' parts
 * to its own gradient shard in rank order (a reduce-scatter over the ranks that have one). */
bool mt_zero_ep_reduce(mt_zero *z, int bucket, const float *slot_grad) {
    const int p = zero_ep_owner(z, bucket);
    if (p < 0) return false;
    mt_comm *c = z->comm;
    const int W = c->size, P = z->ep_size;
    const int64_t n = z->shard_numel[bucket];
    const bool mine = c->rank % P == p;
    int64_t send_n[W], recv_n[W];
    for (int r = 0; r < W; r++) {
        send_n[r] = mine ? n : 0;
        recv_n[r] = r % P == p ? n : 0;
    }
    c->alltoallv(c, slot_grad, send_n, z->ep_buf, recv_n, sizeof(float));
    for (int k = 0; k < W / P; k++)
        z->be->vec_add(z->grad + z->shard_offset[bucket], z->ep_buf + k * n, n);
    return true;
}
