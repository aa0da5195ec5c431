/* zero_node.c: node-shared parameters (zero.h, mt_zero_share_node). Every bucket whole, once
 * per node; each rank writes only its own shards there, between two node fences, so the copy
 * is the all-gather's result without a gather per bucket and per pass. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "train/zero.h"

bool mt_zero_share_node(mt_zero *z) {
    mt_comm *c = z->comm;
    /* the same answer on every rank: all of it is the same there, and alloc_node agrees */
    if (z->node || z->aliased || z->gather_bf16 || z->ep_size > 1 || c->device ||
        z->be->dev != MT_CPU || !c->alloc_node || !c->node_fence)
        return false;
    int64_t total = 0;
    int64_t *offset = mt_malloc(sizeof(int64_t) * (size_t)z->n_buckets, "node parameter offsets");
    for (int b = 0; b < z->n_buckets; b++) {
        offset[b] = total;
        total += z->shard_numel[b] * c->size;
    }
    float *node = c->alloc_node(c, sizeof(float) * (size_t)(total > 0 ? total : 1));
    if (!node) {
        free(offset);
        return false;
    }
    for (int s = 0; s < 2; s++) { /* the gathers' slots: no bucket lands there any more */
        if (z->slot_data[s]) z->be->free(z->slot_data[s]);
        z->slot_data[s] = NULL;
        z->slot_bucket[s] = -1;
    }
    z->node = node;
    z->node_offset = offset;
    z->node_numel = total;
    z->node_stale = true;
    return true;
}

/* AdamW writing the new values into the node copy as it updates the master weights
 * (zero_adamw.c): a fence before (every rank is done reading the old values), and the one after
 * left to the next refresh, before anything reads them. Saves the refresh's copy: 2 x 1, small
 * bench model, ~34 MB read and written per rank a step. */
void mt_zero_node_begin_write(mt_zero *z) { z->comm->node_fence(z->comm, z->node); }
void mt_zero_node_end_write(mt_zero *z) {
    z->node_stale = false;
    z->node_fence_pending = true;
}

void mt_zero_node_refresh(mt_zero *z) {
    mt_comm *c = z->comm;
    if (z->node_fence_pending) { /* AdamW's stores: every rank's shards are there after it */
        c->node_fence(c, z->node);
        z->node_fence_pending = false;
        z->gathers++;
    }
    if (!z->node_stale) return;
    c->node_fence(c, z->node); /* every rank is done reading the old values */
    for (int b = 0; b < z->n_buckets; b++) {
        const int64_t n = z->shard_numel[b];
        memcpy(z->node + z->node_offset[b] + c->rank * n, z->master + z->shard_offset[b],
               sizeof(float) * (size_t)n);
    }
    c->node_fence(c, z->node); /* every rank's shards are there */
    z->node_stale = false;
    z->gathers++;
}

void mt_zero_node_free(mt_zero *z) {
    MT_CHECK(z->comm->free_shared(z->comm, z->node), "zero: the node-shared parameters were not "
                                                     "the communicator's");
    free(z->node_offset);
    z->node = NULL;
    z->node_offset = NULL;
}

int64_t mt_zero_node_bytes(const mt_zero *z) {
    return z->node ? (int64_t)sizeof(float) * z->node_numel : 0;
}
