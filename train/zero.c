/* zero.c: see zero.h. */
#include "zero.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "train/env.h"

static float *zero_alloc(const mt_backend *be, int64_t n, const char *what) {
    size_t bytes = sizeof(float) * (size_t)(n > 0 ? n : 1);
    float *p = be->alloc(bytes);
    if (!p)
        MT_DIE("out of %s memory: %s needs %lld floats (%.2f GiB)", be->name, what, (long long)n,
               (double)bytes / (1 << 30));
    be->zero(p, bytes);
    return p;
}

/* The buffers the collectives send from (master shards, bf16 sends, gradient slots): in memory
 * the peers read directly where the communicator offers it (comm.h alloc_shared). */
static void *zero_alloc_sent(const mt_zero *z, int64_t n, const char *what) {
    mt_comm *c = z->comm;
    const size_t bytes = sizeof(float) * (size_t)(n > 0 ? n : 1);
    void *p = c->alloc_shared && z->be->dev == MT_CPU ? c->alloc_shared(c, bytes) : NULL;
    if (!p) return zero_alloc(z->be, n, what);
    memset(p, 0, bytes);
    return p;
}

static void zero_free_sent(const mt_zero *z, void *p) {
    if (p && !(z->comm->free_shared && z->comm->free_shared(z->comm, p))) z->be->free(p);
}

/* A bucket padded to a multiple of 64*P, so every shard starts 256-byte aligned (cuda, nccl). */
static int64_t zero_padded(int64_t numel, int P) {
    int64_t align = 64 * (int64_t)P;
    return (numel + align - 1) / align * align;
}

/* Bucket b's slot is b % 2, so that consecutive buckets alternate (one computes while the next
 * lands in the other), except the last bucket when its index is odd and it is larger than
 * every other odd bucket (a whole lm_head after small buckets, as large as the embedding,
 * bucket 0; the model splits both by vocabulary with gather unit expert, so it is rare): it
 * joins slot 0, so that one slot, not both, has the size of the two largest buckets. The
 * slot of the last bucket and each slot's capacity, from the padded bucket sizes. */
static int zero_final_slot(const int64_t *padded, int n) {
    const int last = n - 1;
    if (last % 2 == 0) return 0;
    for (int b = 1; b < last; b += 2)
        if (padded[b] >= padded[last]) return 1;
    return 0;
}

static void zero_slot_caps(const int64_t *padded, int n, int final_slot, int64_t cap[2]) {
    cap[0] = cap[1] = 0;
    for (int b = 0; b < n; b++) {
        const int s = b == n - 1 ? final_slot : b % 2;
        if (padded[b] > cap[s]) cap[s] = padded[b];
    }
}

/* The bytes of the owned state (per element: master, gradient, m, v; with offload master and
 * gradient; with a host master the gradient and the bf16 master) and of the slots: data and
 * gradient buffers of both slots, the reduce-scatter landing area (one shard of the largest
 * bucket) and, for bf16 gathers, the bf16 landing buffers (zero_land16_split) and, unless the
 * gathers send master16, a shard-sized bf16 send buffer per slot. */
static int64_t zero_owned_bytes(int64_t owned, bool offload, bool host_master) {
    return (host_master ? 6 : offload ? 8 : 16) * owned;
}
/* offload: m and v (and a host master), and on a device backend three staging buffers of p and
 * g chunks (ZERO_STAGE_NUMEL elements each at most: 192 MiB in all) */
#define ZERO_STAGE_NUMEL ((int64_t)1 << 23)
static int64_t zero_stage_numel(int64_t owned) {
    return owned < 1 ? 1 : owned < ZERO_STAGE_NUMEL ? owned : ZERO_STAGE_NUMEL;
}
static int64_t zero_host_bytes(int64_t owned, bool offload, bool host_master, int64_t stage_numel) {
    return offload ? (int64_t)sizeof(float) * ((host_master ? 3 : 2) * owned + 6 * stage_numel) : 0;
}
/* bf16 gathers: a landing buffer per slot, so that each slot keeps its bf16 values (its
 * shadow, mt_backend.bf16_shadow) while the other slot's next gather lands, where that costs
 * little: the smaller slot at most a quarter of the larger (unit expert: the embedding and
 * lm_head slot against an expert's). Else one buffer of the larger slot, shared (unit layer:
 * equal slots, a second buffer would hold another whole layer), and a slot's shadow ends when
 * the other slot's gather starts. */
static bool zero_land16_split(const int64_t cap[2]) {
    const int64_t small = cap[0] < cap[1] ? cap[0] : cap[1], big = cap[0] + cap[1] - small;
    return 4 * small <= big;
}
static int64_t zero_slot_bytes(const int64_t cap[2], int P, bool bf16, bool host_master) {
    const int64_t big = cap[0] > cap[1] ? cap[0] : cap[1];
    const int64_t land = zero_land16_split(cap) ? cap[0] + cap[1] : big;
    return 2 * (int64_t)sizeof(float) * (cap[0] + cap[1]) + (int64_t)sizeof(float) * (big / P) +
           (bf16 ? 2 * land + (host_master ? 0 : 2 * (cap[0] / P + cap[1] / P)) : 0);
}

mt_zero_sizes mt_zero_plan(int P, int n_buckets, const int64_t *bucket_numel, mt_dtype gather_dtype,
                           bool offload) {
    mt_zero_sizes z = {0, 0, 0, 0, 0};
    const bool bf16 = gather_dtype == MT_BF16;
    int64_t *padded = mt_malloc(sizeof(int64_t) * (size_t)n_buckets, "zero plan");
    for (int b = 0; b < n_buckets; b++) {
        padded[b] = zero_padded(bucket_numel[b], P);
        z.owned += padded[b] / P;
        if (padded[b] > z.slot_numel) z.slot_numel = padded[b];
    }
    int64_t cap[2];
    zero_slot_caps(padded, n_buckets, zero_final_slot(padded, n_buckets), cap);
    free(padded);
    if (P == 1 && !bf16) z.slot_numel = 0;    /* aliased: the shards are the slots */
    const bool host_master = offload && bf16; /* on a device backend, which this plans for */
    z.owned_bytes = zero_owned_bytes(z.owned, offload, host_master);
    z.host_bytes = zero_host_bytes(z.owned, offload, host_master, zero_stage_numel(z.owned));
    z.slot_bytes = z.slot_numel ? zero_slot_bytes(cap, P, bf16, host_master) : 0;
    return z;
}

void mt_zero_init(mt_zero *z, mt_comm *comm, const mt_backend *be, int n_buckets,
                  const int64_t *bucket_numel) {
    mt_zero_init_gather(z, comm, be, n_buckets, bucket_numel, MT_F32, false);
}

static uint16_t *zero_alloc16(const mt_backend *be, int64_t n, const char *what) {
    return (uint16_t *)zero_alloc(be, (n + 1) / 2, what); /* n 16-bit words */
}

static void zero_init(mt_zero *z, mt_comm *comm, const mt_backend *be, int n_buckets,
                      const int64_t *bucket_numel, mt_dtype gather_dtype, bool offload,
                      bool inference) {
    MT_CHECK(gather_dtype == MT_F32 || gather_dtype == MT_BF16,
             "zero: parameters are gathered as fp32 or bf16, not %s", mt_dtype_name(gather_dtype));
    MT_CHECK(comm->device == (be->dev != MT_CPU),
             "zero: the %s communicator works on %s buffers but the %s backend keeps its memory "
             "on the %s (dist.backend: mpi for the CPU, nccl for CUDA)",
             comm->name, comm->device ? "device" : "host", be->name,
             be->dev != MT_CPU ? "device" : "host");
    memset(z, 0, sizeof(*z));
    z->comm = comm;
    z->be = be;
    z->n_buckets = n_buckets;
    int P = comm->size;
    z->numel = mt_calloc(n_buckets, sizeof(int64_t), "zero numel");
    z->shard_numel = mt_calloc(n_buckets, sizeof(int64_t), "zero shard numel");
    z->shard_offset = mt_calloc(n_buckets, sizeof(int64_t), "zero shard offset");
    z->ranges = mt_calloc(n_buckets, sizeof(mt_zero_range *), "zero ranges");
    z->n_ranges = mt_calloc(n_buckets, sizeof(int), "zero ranges");
    int64_t *padded = mt_malloc(sizeof(int64_t) * (size_t)n_buckets, "zero padded");
    for (int b = 0; b < n_buckets; b++) {
        padded[b] = zero_padded(bucket_numel[b], P);
        z->numel[b] = bucket_numel[b];
        z->shard_numel[b] = padded[b] / P;
        z->shard_offset[b] = z->total_shard;
        z->total_shard += z->shard_numel[b];
        if (padded[b] > z->slot_numel) z->slot_numel = padded[b];
    }
    z->final_slot = zero_final_slot(padded, n_buckets);
    zero_slot_caps(padded, n_buckets, z->final_slot, z->slot_cap);
    free(padded);
    z->gather_bf16 = gather_dtype == MT_BF16;
    z->offload = offload;
    z->inference = inference;
    z->master_on_host = offload && z->gather_bf16 && be->dev != MT_CPU;
    if (z->master_on_host) {
        z->master =
            mt_calloc((size_t)z->total_shard, sizeof(float), "master weights (host, offload)");
        z->master16 = zero_alloc16(be, z->total_shard, "bf16 master weights");
    } else {
        z->master = zero_alloc_sent(z, z->total_shard, "master weights");
    }
    if (!inference) z->grad = zero_alloc(be, z->total_shard, "gradients");
    if (offload) { /* zeroed host pages, touched first by the first step (never inference) */
        z->m = mt_calloc((size_t)z->total_shard, sizeof(float), "adam m (host, offload)");
        z->v = mt_calloc((size_t)z->total_shard, sizeof(float), "adam v (host, offload)");
        if (be->dev != MT_CPU) {
            z->stage_numel = zero_stage_numel(z->total_shard);
            /* tests shrink the chunk to run the chunking on small models */
            z->stage_numel =
                mt_env_int("MT_OFFLOAD_STAGE_NUMEL", 1, z->stage_numel, z->stage_numel);
            const size_t bytes = 6 * sizeof(float) * (size_t)z->stage_numel; /* 3 x (p, g) */
            z->stage = be->host_alloc(bytes);
            MT_CHECK(z->stage, "zero: out of host memory for the offload staging (%zu bytes)",
                     bytes);
            z->copier = mt_zero_copier_start(z);
        }
    } else if (!inference) {
        z->m = zero_alloc(be, z->total_shard, "adam m");
        z->v = zero_alloc(be, z->total_shard, "adam v");
    }
    z->slot_ticket[0] = z->slot_ticket[1] = -1;
    z->slot_bucket[0] = z->slot_bucket[1] = -1;
    z->in_use = -1;
    /* One rank owns every bucket whole: the parameters and gradients of bucket b are its
     * shard, so there is nothing to gather, copy or reduce (no slots either); unless the
     * parameters are used rounded to bf16, which needs a copy. */
    z->aliased = P == 1 && !z->gather_bf16;
    if (z->aliased) return;
    if (z->gather_bf16) {
        if (!z->master16) { /* else the gathers send master16 */
            z->send16[0] = zero_alloc_sent(z, (z->slot_cap[0] / P + 1) / 2, "bf16 gather send");
            z->send16[1] = zero_alloc_sent(z, (z->slot_cap[1] / P + 1) / 2, "bf16 gather send");
        }
        if (zero_land16_split(z->slot_cap)) {
            z->land16[0] = zero_alloc16(be, z->slot_cap[0], "bf16 gather landing");
            z->land16[1] = zero_alloc16(be, z->slot_cap[1], "bf16 gather landing");
        } else { /* shared */
            z->land16[0] = z->land16[1] = zero_alloc16(be, z->slot_numel, "bf16 gather landing");
        }
    }
    for (int s = 0; s < 2; s++) {
        z->slot_data[s] = zero_alloc(be, z->slot_cap[s], "gather slot");
        if (!inference) z->slot_grad[s] = zero_alloc_sent(z, z->slot_cap[s], "gradient slot");
    }
    if (inference) return;
    z->grad_unset = mt_calloc((size_t)n_buckets, sizeof(bool), "zero gradient marks");
    z->recv_numel = z->slot_numel / P;
    z->recv = zero_alloc(be, z->recv_numel, "reduce-scatter landing");
}

void mt_zero_init_gather(mt_zero *z, mt_comm *comm, const mt_backend *be, int n_buckets,
                         const int64_t *bucket_numel, mt_dtype gather_dtype, bool offload) {
    zero_init(z, comm, be, n_buckets, bucket_numel, gather_dtype, offload, false);
}

void mt_zero_init_inference(mt_zero *z, mt_comm *comm, const mt_backend *be, int n_buckets,
                            const int64_t *bucket_numel) {
    zero_init(z, comm, be, n_buckets, bucket_numel, MT_F32, false, true);
}

/* Makes the compute stream wait for an outstanding prefetch into slot s. */
static void zero_slot_wait(mt_zero *z, int s) {
    if (z->slot_ticket[s] < 0) return;
    z->comm->wait(z->comm, z->slot_ticket[s]);
    z->slot_ticket[s] = -1;
}

void mt_zero_slots_wait(mt_zero *z) {
    zero_slot_wait(z, 0);
    zero_slot_wait(z, 1);
}

void mt_zero_free(mt_zero *z) {
    mt_zero_slots_wait(z); /* no transfer may still write a slot */
    free(z->numel);
    free(z->shard_numel);
    free(z->shard_offset);
    for (int b = 0; b < z->n_buckets; b++) free(z->ranges[b]);
    free(z->ranges);
    free(z->n_ranges);
    const mt_backend *be = z->be;
    if (z->master_on_host) {
        free(z->master);
        be->free(z->master16);
    } else {
        zero_free_sent(z, z->master);
    }
    if (z->grad) be->free(z->grad);
    if (z->offload) {
        free(z->m);
        free(z->v);
        if (z->copier) mt_zero_copier_stop(z->copier);
        if (z->stage) be->host_free(z->stage);
    } else if (!z->inference) {
        be->free(z->m);
        be->free(z->v);
    }
    if (z->node) mt_zero_node_free(z);
    if (!z->aliased) {
        for (int s = 0; s < 2; s++) {
            if (z->slot_data[s]) be->free(z->slot_data[s]);
            zero_free_sent(z, z->slot_grad[s]);
        }
        if (z->recv) be->free(z->recv);
    }
    if (z->gather_bf16) {
        zero_free_sent(z, z->send16[0]);
        zero_free_sent(z, z->send16[1]);
        for (int s = 0; s < 2; s++)
            if (be->bf16_shadow) be->bf16_shadow(s, NULL, NULL, 0);
        be->free(z->land16[0]);
        if (z->land16[1] != z->land16[0]) be->free(z->land16[1]);
    }
    free(z->ep_owner);
    free(z->grad_unset);
    if (z->ep_buf) be->free(z->ep_buf);
    memset(z, 0, sizeof(*z));
}

void mt_zero_set_ranges(mt_zero *z, int bucket, const mt_zero_range *ranges, int n) {
    free(z->ranges[bucket]);
    z->ranges[bucket] = mt_malloc(sizeof(mt_zero_range) * (size_t)(n ? n : 1), "zero ranges");
    memcpy(z->ranges[bucket], ranges, sizeof(mt_zero_range) * (size_t)n);
    z->n_ranges[bucket] = n;
}

int mt_zero_slot_of(const mt_zero *z, int bucket) {
    return bucket == z->n_buckets - 1 ? z->final_slot : bucket % 2;
}

float *mt_zero_slot_data(const mt_zero *z, int bucket) {
    if (z->node) return z->node + z->node_offset[bucket];
    return z->aliased ? z->master + z->shard_offset[bucket]
                      : z->slot_data[mt_zero_slot_of(z, bucket)];
}
float *mt_zero_slot_grad(const mt_zero *z, int bucket) {
    if (z->inference) return NULL;
    return z->aliased ? z->grad + z->shard_offset[bucket]
                      : z->slot_grad[mt_zero_slot_of(z, bucket)];
}
bool mt_zero_slot_holds(const mt_zero *z, int bucket) {
    if (z->node) return !z->node_stale && !z->node_fence_pending;
    return mt_zero_grad_holds(z, bucket);
}
bool mt_zero_grad_holds(const mt_zero *z, int bucket) {
    return z->aliased || z->slot_bucket[mt_zero_slot_of(z, bucket)] == bucket;
}

void mt_zero_range_of(int64_t numel, int world, int rank, int64_t *lo, int64_t *hi) {
    const int64_t s = zero_padded(numel, world) / world;
    *lo = rank * s;
    *hi = *lo + s < numel ? *lo + s : numel;
    if (*hi < *lo) *hi = *lo;
}

void mt_zero_owned_range(const mt_zero *z, int bucket, int64_t *lo, int64_t *hi) {
    mt_zero_range_of(z->numel[bucket], z->comm->size, z->comm->rank, lo, hi);
}

void mt_zero_set_master(mt_zero *z, int bucket, int64_t lo, int64_t hi, const float *host) {
    int64_t own_lo, own_hi;
    mt_zero_owned_range(z, bucket, &own_lo, &own_hi);
    MT_CHECK(lo >= own_lo && hi <= own_hi && lo <= hi,
             "zero: set_master of bucket %d [%lld, %lld) outside the owned range [%lld, %lld)",
             bucket, (long long)lo, (long long)hi, (long long)own_lo, (long long)own_hi);
    float *dst = z->master + z->shard_offset[bucket] + (lo - own_lo);
    const size_t bytes = sizeof(float) * (size_t)(hi - lo);
    if (z->master_on_host)
        memcpy(dst, host, bytes);
    else
        z->be->to_device(dst, host, bytes);
    mt_zero_master_changed(z);
}

/* bf16 gathers: slot s's bf16 values registered with the backend as the shadow of its fp32
 * buffer (on: after widening, so both hold the same bucket), or withdrawn (before land16[s] or
 * the slot is overwritten). */
static void zero_shadow(mt_zero *z, int s, bool on) {
    if (!z->gather_bf16 || !z->be->bf16_shadow) return;
    if (on)
        z->be->bf16_shadow(s, z->slot_data[s], z->land16[s],
                           z->shard_numel[z->slot_bucket[s]] * z->comm->size);
    else
        z->be->bf16_shadow(s, NULL, NULL, 0);
}

/* The parameters changed: no slot holds a current gather. */
void mt_zero_slots_stale(mt_zero *z) {
    mt_zero_slots_wait(z); /* no transfer may still land */
    for (int s = 0; s < 2; s++) {
        z->slot_bucket[s] = -1;
        z->land16_pending[s] = false;
        zero_shadow(z, s, false);
    }
    z->node_stale = z->node != NULL;
}

void mt_zero_master_changed(mt_zero *z) {
    mt_zero_slots_stale(z);
    z->master16_stale = z->master_on_host; /* rounded and uploaded by the next gather */
}

/* bf16 gathers: slot s's all-gather waits in land16[s]; widens it into the slot's fp32 buffer
 * and registers land16[s] as its shadow. */
static void zero_expand(mt_zero *z, int s) {
    if (!z->land16_pending[s]) return;
    zero_slot_wait(z, s);
    z->be->vec_from_bf16(z->slot_data[s], z->land16[s],
                         z->shard_numel[z->slot_bucket[s]] * z->comm->size);
    z->land16_pending[s] = false;
    zero_shadow(z, s, true);
}

/* Issues the all-gather of bucket b into slot s (started: a ticket; else finished). */
static void zero_issue_gather(mt_zero *z, int bucket, int s, bool start) {
    mt_comm *c = z->comm;
    const int64_t n = z->shard_numel[bucket];
    if (mt_zero_ep_gather(z, bucket, z->slot_data[s])) {
    } else if (z->gather_bf16) {
        /* land16[s] is about to change: the kernels queued so far still read it (the gather
         * waits for them), those queued later must not take it for the old bucket. A shared
         * buffer holds the other slot's values too: its pending gather is widened first. */
        if (z->land16[0] == z->land16[1]) {
            zero_expand(z, 1 - s);
            zero_shadow(z, 1 - s, false);
        }
        zero_shadow(z, s, false);
        /* this slot's previous transfer, the last reader of send16[s], has finished (waited
         * for by the caller); the rounding runs on the compute stream, which the all-gather
         * waits for */
        uint16_t *send;
        if (z->master16) {
            mt_zero_master16_refresh(z);
            send = z->master16 + z->shard_offset[bucket];
        } else {
            send = z->send16[s];
            z->be->vec_to_bf16(send, z->master + z->shard_offset[bucket], n);
        }
        if (start)
            z->slot_ticket[s] = c->allgather_start(c, send, z->land16[s], n, sizeof(uint16_t));
        else
            c->allgather(c, send, z->land16[s], n, sizeof(uint16_t));
        z->land16_pending[s] = true;
    } else {
        const float *send = z->master + z->shard_offset[bucket];
        if (start)
            z->slot_ticket[s] = c->allgather_start(c, send, z->slot_data[s], n, sizeof(float));
        else
            c->allgather(c, send, z->slot_data[s], n, sizeof(float));
    }
    z->slot_bucket[s] = bucket;
    z->gathers++;
}

void mt_zero_prefetch(mt_zero *z, int bucket) {
    if (z->aliased || z->node || bucket < 0 || bucket >= z->n_buckets) return;
    int s = mt_zero_slot_of(z, bucket);
    if (z->in_use >= 0 && z->in_use != bucket && s == mt_zero_slot_of(z, z->in_use)) return;
    if (z->slot_bucket[s] == bucket) return;
    zero_slot_wait(z, s); /* a slot holds one transfer at a time */
    zero_issue_gather(z, bucket, s, true);
}

void mt_zero_gather(mt_zero *z, int bucket, bool with_grad) {
    MT_CHECK(!with_grad || !z->inference,
             "zero: bucket %d gathered for a backward by an "
             "inference layout (no gradients)",
             bucket);
    z->in_use = bucket;
    if (z->aliased) return; /* the backward accumulates into the owned gradient directly */
    int s = mt_zero_slot_of(z, bucket);
    if (z->node) { /* the parameters are there once refreshed; the slot keeps the gradient */
        mt_zero_node_refresh(z);
        if (with_grad) z->slot_bucket[s] = bucket;
    } else if (z->slot_bucket[s] != bucket) {
        zero_slot_wait(z, s);
        zero_issue_gather(z, bucket, s, false);
    }
    zero_slot_wait(z, s);
    zero_expand(z, s);
    if (with_grad) /* the bucket's padded size: its shards' range of the reduce-scatter */
        z->be->zero(z->slot_grad[s],
                    sizeof(float) * (size_t)(z->shard_numel[bucket] * z->comm->size));
}

const float *mt_zero_gather_master(mt_zero *z, int bucket) {
    if (z->aliased) return z->master + z->shard_offset[bucket];
    if (z->node) { /* fp32 gathers: the node's copy holds the master weights' bits */
        mt_zero_node_refresh(z);
        return z->node + z->node_offset[bucket];
    }
    int s = mt_zero_slot_of(z, bucket);
    zero_slot_wait(z, s);
    z->land16_pending[s] = false; /* a pending bf16 gather is dropped */
    zero_shadow(z, s, false);
    const float *send = z->master + z->shard_offset[bucket];
    if (z->master_on_host) { /* the host shard goes up through the reduce-scatter landing area */
        z->be->to_device(z->recv, send, sizeof(float) * (size_t)z->shard_numel[bucket]);
        send = z->recv;
    }
    z->comm->allgather(z->comm, send, z->slot_data[s], z->shard_numel[bucket], sizeof(float));
    z->slot_bucket[s] = -1; /* exact values, not what a gather of the bucket holds */
    return z->slot_data[s];
}

void mt_zero_release(mt_zero *z, int bucket) {
    /* Slots are planned memory: nothing is freed. The slot keeps its contents, so gathering the
     * same bucket again before the next optimizer step (forward end -> backward start) is
     * skipped; the other buckets of its parity overwrite it. */
    if (z->in_use == bucket) z->in_use = -1;
}

void mt_zero_reduce_grad(mt_zero *z, int bucket) {
    if (z->aliased) return;
    int s = mt_zero_slot_of(z, bucket);
    MT_CHECK(z->slot_bucket[s] == bucket, "zero: reduce_grad of bucket %d, but its slot holds %d",
             bucket, z->slot_bucket[s]);
    int64_t n = z->shard_numel[bucket];
    z->reduce_scatters++;
    float *acc = z->grad + z->shard_offset[bucket];
    bool unset = z->grad_unset[bucket];
    z->grad_unset[bucket] = false;
    if (unset && z->ep_size > 1) { /* an expert's gradient comes back as parts to add */
        z->be->zero(acc, sizeof(float) * (size_t)n);
        unset = false;
    }
    if (mt_zero_ep_reduce(z, bucket, z->slot_grad[s])) return;
    if (unset) { /* the step's first: the sum itself, the bits of 0 + sum */
        z->comm->reduce_scatter(z->comm, z->slot_grad[s], acc, n);
        return;
    }
    if (z->comm->reduce_scatter_add &&
        z->comm->reduce_scatter_add(z->comm, z->slot_grad[s], acc, n))
        return; /* summed straight into the shard's gradient: one pass */
    z->comm->reduce_scatter(z->comm, z->slot_grad[s], z->recv, n);
    z->be->vec_add(acc, z->recv, n);
}

int64_t mt_zero_owned_bytes(const mt_zero *z) {
    return zero_owned_bytes(z->total_shard, z->offload, z->master_on_host);
}
int64_t mt_zero_host_bytes(const mt_zero *z) {
    return zero_host_bytes(z->total_shard, z->offload, z->master_on_host,
                           z->stage ? z->stage_numel : 0);
}

int64_t mt_zero_slot_bytes(const mt_zero *z) {
    if (z->aliased) return 0;
    const int64_t data = z->node ? (int64_t)sizeof(float) * (z->slot_cap[0] + z->slot_cap[1]) : 0;
    return zero_slot_bytes(z->slot_cap, z->comm->size, z->gather_bf16, z->master_on_host) - data;
}
