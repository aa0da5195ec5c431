/* zero.h: ZeRO-3 sharding of parameters, gradients and AdamW moments over a communicator.
 *
 * The unit is the model's parameter bucket (models/minimax.h: embedding, each decoder layer
 * with ALL its experts, final norm + lm_head; or with gather unit expert each layer's attention,
 * each expert, and vocabulary parts of the embedding and lm_head). Bucket b is padded to a
 * multiple of the world size P; rank r owns elements [r*S_b, (r+1)*S_b) of it (S_b = padded_b /
 * P) as fp32 master weights, accumulated gradients and AdamW moments. Full parameters exist only
 * in two gather slots (bucket b uses slot b % 2, so the next bucket can be fetched while one
 * computes; see mt_zero_slot_of for the one exception):
 * gathered before the bucket's forward, released after, gathered again for its backward, whose
 * full gradient is reduce-scattered to the owners. Every rank issues the same collectives in
 * the same order whatever its tokens were routed to (an expert with no tokens has a zero
 * gradient that still goes through the reduce-scatter).
 *
 * Memory lives on the backend given to mt_zero_init (host for the CPU backend, device memory
 * for CUDA, where the communicator must be a device one: NCCL); the vector work (gradient
 * accumulation, norm, clipping, AdamW) runs through the backend's optimizer kernels. While a
 * bucket computes, the next bucket in walk order is prefetched (mt_zero_prefetch).
 *
 * With one rank nothing is sharded: mt_zero_slot_data/grad of bucket b are the owned master
 * weights and gradients themselves, gathers and reduces do nothing, and the backward
 * accumulates straight into the owned gradient (which mt_zero_zero_grad clears per step).
 *
 * bf16 gathers (mt_zero_init_gather, dist.gather_dtype = "bf16"): the parameters travel as bf16,
 * half the bytes of every all-gather, and the model computes with those values (each gathered
 * parameter is its master weight rounded to nearest even bf16, held in the slot as fp32), as
 * Megatron and DeepSpeed do with bf16 parameters; gradients, their reduce-scatter, the norm and
 * AdamW stay fp32 on the fp32 master weights. Each gather rounds the bucket's shard into a send
 * buffer of its slot (a shard's size) and lands in the slot's bf16 buffer (2 bytes per slot
 * element), widened into the slot before use and kept: the backend takes bf16 GEMM operands
 * inside the slot from it instead of casting them again (mt_backend.bf16_shadow); where slots
 * are equal (gather unit layer) one landing buffer serves both and a slot's bf16 values last
 * until the other slot's next gather. One rank gathers too (a copy), so that 1 and N ranks
 * compute the same.
 *
 * Optimizer offload (dist.offload_optimizer): the AdamW moments m and v live in host memory and
 * the update runs on the host CPU (the CPU backend's AdamW, OpenMP threads), as DeepSpeed's
 * ZeRO-Offload does: the master weights and gradients stay on the device (the gathers and
 * reduce-scatters need them there), and each step moves the gradient and master shards to the
 * host and the updated master weights back, chunk by chunk through three page-locked staging
 * buffers, a copy thread moving chunks k - 1 and k + 1 while the host updates chunk k (12 bytes
 * over PCIe per owned element). Device
 * memory per owned element: 8 bytes instead of 16. On the CPU backend everything is host
 * memory already: the same arrays, the same kernel.
 *
 * Node-shared parameters (mt_zero_share_node, the trainer's default where possible): with every
 * rank on one node (MPI shared memory, comm.h alloc_node), fp32 gathers, the CPU backend and no
 * expert parallelism, the whole padded buckets live once per node, back to back, in memory every
 * rank maps, as ZeRO++'s hierarchical partitioning keeps a full copy per node: AdamW stores
 * each rank's new values there as it updates its shards (after a node fence; the next gather
 * fences once); after any other change (loading, an offloaded step) the first gather has each
 * rank copy its shards of every bucket there between two node fences, and every other gather does
 * nothing (no copies, no prefetch; a bucket's slot data is its place in that copy). Gradients keep
 * their private slots and reduce-scatters; master weights, moments and checkpoints are as
 * before, and so are the values: a gather copies the same fp32 bits either way. The node holds
 * 4 bytes a parameter once instead of every rank's two gathered buckets.
 *
 * Offload with bf16 gathers on a device backend (host master): the gathers only ever send the
 * master weights rounded to bf16, so the fp32 master weights move to host memory too (master
 * points there, as DeepSpeed's ZeRO-Offload keeps them) and the device keeps their bf16
 * rounding (master16), which the gathers send as it is. A step moves the gradient to the host
 * (4 bytes per owned element) and the rounded update back (2 bytes) instead of 12; the device
 * holds 6 bytes per owned element (gradient + master16), the host 12 (master, m, v). The
 * values are those of the device-master layout: the same AdamW on the host, the same
 * round-to-nearest-even. Whoever changes the host master (loading, checkpoints) marks master16
 * stale (mt_zero_master_changed); the next gather rounds and uploads it. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "autograd/tensor.h"
#include "train/comm.h"

typedef struct {
    int64_t offset, numel; /* a parameter's range inside its bucket */
    bool decay;            /* weight decay applies (matrices; not norms) */
    bool frozen;           /* a buffer (models/minimax.h): AdamW leaves it and its moments alone */
} mt_zero_range;

typedef struct mt_zero {
    mt_comm *comm;
    const mt_backend *be;
    int n_buckets;
    int64_t *numel;        /* (n_buckets) true size */
    int64_t *shard_numel;  /* (n_buckets) padded / P */
    int64_t *shard_offset; /* (n_buckets) start of the bucket's shard in the flat owned arrays */
    int64_t total_shard;   /* owned elements of this rank */
    float *master, *grad, *m, *v; /* (total_shard) each: what this rank owns */
    int64_t slot_numel;           /* largest padded bucket */
    int64_t slot_cap[2];          /* each slot's size: its largest padded bucket */
    int final_slot;               /* the last bucket's slot (mt_zero_slot_of) */
    float *slot_data[2], *slot_grad[2];
    int slot_bucket[2];  /* bucket held by each slot, -1 none */
    int slot_ticket[2];  /* outstanding prefetch of the slot (comm ticket), -1 none */
    int in_use;          /* gathered and not yet released (computing): no prefetch into its slot */
    bool aliased;        /* one rank: the "slots" are the shards themselves (no copies) */
    bool gather_bf16;    /* parameters gathered as bf16 (see above) */
    bool offload;        /* m and v in host memory, AdamW on the host (see above) */
    bool inference;      /* forwards only (mt_zero_init_inference): no gradients, no moments */
    bool master_on_host; /* offload + bf16 gathers on a device: master is host memory (above) */
    uint16_t *master16;  /* (total_shard) device, host master: master rounded to bf16 */
    bool master16_stale; /* the host master changed since master16 was written */
    float *stage;        /* offload on a device backend: 3 x (p, g) host chunks, stage_numel each */
    int64_t stage_numel;
    struct zero_copier *copier; /* offload on a device backend: the copy thread (zero.c) */
    uint16_t *send16[2];        /* (slot_cap[s] / P): a slot's shard rounded to bf16, sent */
    uint16_t *land16[2];    /* (slot_cap[s]) where slot s's bf16 all-gathers land, kept; the same
                               buffer for both slots where a second would cost much (zero.c) */
    bool land16_pending[2]; /* slot s's gather sits in land16[s], not yet widened */
    float *recv;            /* reduce-scatter landing area (one shard) */
    /* (n_buckets) where ranks reduce-scatter: the bucket's owned gradient is zero but not yet
     * written this step (mt_zero_zero_grad only marks it): its first reduce-scatter writes the
     * sum there instead of adding it to zeros (no clearing pass, no read), and the readers of
     * the gradients (norm, AdamW) clear what is still marked first. NULL: cleared at once. */
    bool *grad_unset;
    int64_t recv_numel;
    /* decay ranges per bucket (set by mt_zero_set_ranges), all decayed when not set */
    mt_zero_range **ranges;
    int *n_ranges;
    /* expert parallelism (mt_zero_set_expert_parallel): 0 or 1 none */
    int ep_size;
    int *ep_owner;  /* (n_buckets) the group rank whose experts the bucket holds, -1: not one */
    bool ep_paused; /* every bucket gathered to every rank (mt_zero_expert_parallel_pause) */
    float *ep_buf;  /* (world / P) shards of the largest expert bucket: the copies sent, the
                       gradient parts received */
    /* node-shared parameters (mt_zero_share_node; zero_node.c): NULL off */
    float *node;
    int64_t *node_offset; /* (n_buckets) bucket b's padded parameters at node + node_offset[b] */
    int64_t node_numel;
    bool node_stale; /* the master weights changed since this rank copied its shards there */
    bool node_fence_pending; /* AdamW stored them there: a fence before they are read */
    /* accounting */
    int64_t gathers, reduce_scatters;
} mt_zero;

void mt_zero_init(mt_zero *z, mt_comm *comm, const mt_backend *be, int n_buckets,
                  const int64_t *bucket_numel);
/* The same with the gather precision, MT_F32 (mt_zero_init) or MT_BF16, and the optimizer
 * offload (see above). */
void mt_zero_init_gather(mt_zero *z, mt_comm *comm, const mt_backend *be, int n_buckets,
                         const int64_t *bucket_numel, mt_dtype gather_dtype, bool offload);
/* The same layout for forwards only (generation through the gathers, minimax-eval --weights
 * gathered): the master shards and the gather slots, no gradients, moments or reduce-scatter
 * buffers (4 bytes an owned element); fp32 gathers. The slot's gradient is NULL; a gather
 * with_grad, a reduce-scatter or an optimizer step is a bug. */
void mt_zero_init_inference(mt_zero *z, mt_comm *comm, const mt_backend *be, int n_buckets,
                            const int64_t *bucket_numel);
/* The same layout for P ranks without allocating anything (memory planning, minimax-info):
 * elements one rank owns (each has master, gradient, m and v), the slot size (the largest padded
 * bucket; 0 when one rank computes on its shards), and the bytes mt_zero_owned_bytes,
 * mt_zero_slot_bytes and mt_zero_host_bytes will report for it (device backends: with offload,
 * m and v count as host bytes, and with bf16 gathers the master too). */
typedef struct {
    int64_t owned, slot_numel;
    int64_t owned_bytes, slot_bytes, host_bytes;
} mt_zero_sizes;
mt_zero_sizes mt_zero_plan(int P, int n_buckets, const int64_t *bucket_numel, mt_dtype gather_dtype,
                           bool offload);
void mt_zero_free(mt_zero *z);
void mt_zero_set_ranges(mt_zero *z, int bucket, const mt_zero_range *ranges, int n);
/* Bucket b's gather slot (0 or 1): b % 2, so consecutive buckets alternate; but a last bucket
 * of odd index larger than every other odd bucket (a whole lm_head after small buckets)
 * shares slot 0 with the embedding, so that only one slot needs their size. */
int mt_zero_slot_of(const mt_zero *z, int bucket);
/* The slot buffers a bucket's parameters and gradients live in while gathered. */
float *mt_zero_slot_data(const mt_zero *z, int bucket);
float *mt_zero_slot_grad(const mt_zero *z, int bucket);
/* Whether bucket b's parameters are in its slot now (buckets of a parity share one: the
 * others' pointers then alias it); always with one aliased rank; node-shared, every bucket's
 * once the node's copy is current. */
bool mt_zero_slot_holds(const mt_zero *z, int bucket);
/* This rank's element range [lo, hi) of bucket b in bucket coordinates (hi clipped to numel). */
void mt_zero_owned_range(const mt_zero *z, int bucket, int64_t *lo, int64_t *hi);
/* The same for rank `rank` of `world` ranks and a bucket of numel elements, without a mt_zero:
 * what a checkpoint written by another world size holds (train/checkpoint.c). */
void mt_zero_range_of(int64_t numel, int world, int rank, int64_t *lo, int64_t *hi);
/* Copies host values of bucket elements [lo, hi) (within this rank's owned range) into the
 * master weights (loading, initialisation). */
void mt_zero_set_master(mt_zero *z, int bucket, int64_t lo, int64_t hi, const float *host);
/* Whoever writes z->master directly (checkpoint loading) calls this: the slots are stale (and
 * master16 with a host master). */
void mt_zero_master_changed(mt_zero *z);

/* Full parameters of bucket b into its slot (no-op when the slot still holds b). with_grad
 * zeroes the slot's gradient buffer for a backward. */
void mt_zero_gather(mt_zero *z, int bucket, bool with_grad);
/* The fp32 master weights of bucket b, whole (exports): a plain fp32 all-gather into its slot
 * whatever the gather precision, or the shard itself with one aliased rank. The slot counts as
 * holding nothing afterwards. */
const float *mt_zero_gather_master(mt_zero *z, int bucket);
void mt_zero_release(mt_zero *z, int bucket);
/* Starts gathering bucket b into its slot without waiting (a no-op when the slot holds it, when
 * b is out of range, or when its slot is the one of the bucket in use: gathered and not yet
 * released); the next mt_zero_gather of b waits for it. */
void mt_zero_prefetch(mt_zero *z, int bucket);
/* Reduce-scatters the slot's full gradient and adds this rank's part to the owned gradient. */
void mt_zero_reduce_grad(mt_zero *z, int bucket);
void mt_zero_zero_grad(mt_zero *z);
/* The first non-finite element of this rank's owned range of bucket b in array 0 (the fp32
 * master weights), 1 (AdamW m) or 2 (AdamW v), in bucket coordinates, or -1 (a loaded state is
 * checked so, wherever each array lives: the backend's memory or, offloaded, the host's). */
int64_t mt_zero_first_nonfinite(const mt_zero *z, int array, int bucket);

/* Global L2 norm of the owned gradients and whether all are finite on every rank: one pass
 * over the shard and one all-reduce. */
double mt_zero_grad_norm(mt_zero *z, bool *finite);

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    int64_t step;     /* 1-based, for bias correction */
    float grad_scale; /* the gradients times this first (clipping); 0: 1 */
} mt_adamw;
/* PyTorch AdamW on the owned shard, on the gradients times grad_scale (the clipping, in the same
 * pass; they stay unscaled): p -= lr*wd*p (decayed ranges); m, v update;
 * p -= lr * m_hat / (sqrt(v_hat) + eps). */
void mt_zero_adamw_step(mt_zero *z, const mt_adamw *opt);

/* Expert parallelism (train/expert_parallel.h): the buckets stay ZeRO-3 sharded over the whole
 * world (the same master weights, moments and checkpoints as without it), but a bucket with
 * owner[b] = p >= 0 (an expert of group rank p) is gathered only to the ranks that compute with
 * it, those of group rank p (world rank r with r % P == p): every rank sends its shard to each
 * of them in one all-to-all, so a rank receives its E/P experts instead of all E; its gradient
 * goes back the same way, each owner sending every rank its part, summed there in rank order
 * (the other ranks used the expert for nothing: their part would be zeros). Every rank still
 * enters every bucket in the same order. fp32 gathers only. owner: (n_buckets), copied. */
void mt_zero_set_expert_parallel(mt_zero *z, int P, const int *owner);
/* paused: every bucket is gathered whole to every rank again (the trainer's generation decodes
 * from a replica); the slots are marked stale on each change. */
void mt_zero_expert_parallel_pause(mt_zero *z, bool paused);
/* Whether this rank computes with bucket b (always, but for other ranks' experts under EP). */
bool mt_zero_ep_owns(const mt_zero *z, int bucket);
/* zero.c's gather and reduce of an expert bucket under EP (zero_ep.c); false: not one. */
bool mt_zero_ep_gather(mt_zero *z, int bucket, float *slot);
bool mt_zero_ep_reduce(mt_zero *z, int bucket, const float *slot_grad);

/* Switches to node-shared parameters (see above) where possible; collective, after
 * mt_zero_set_expert_parallel. Returns whether it did (the same on every rank). */
bool mt_zero_share_node(mt_zero *z);
/* zero.c's side of it (zero_node.c): the first gather after a change copies this rank's shards
 * into the node's copy (collective); mt_zero_free's release of it. */
void mt_zero_node_refresh(mt_zero *z);
void mt_zero_node_free(mt_zero *z);
/* zero_adamw.c's side: AdamW stores into the node's copy between these two (collective); the
 * next refresh then only fences. */
void mt_zero_node_begin_write(mt_zero *z);
void mt_zero_node_end_write(mt_zero *z);
/* Whether bucket b's gradient is in its slot now (the backward between its gather and its
 * reduce-scatter; always with one aliased rank). */
bool mt_zero_grad_holds(const mt_zero *z, int bucket);

/* Shared by zero.c and zero_adamw.c: the slots' outstanding transfers waited for; the slots
 * marked stale after the master weights changed; master16 rounded again from a host master
 * that changed; the offload copy thread started at init and stopped at free. */
void mt_zero_slots_wait(mt_zero *z);
void mt_zero_slots_stale(mt_zero *z);
void mt_zero_master16_refresh(mt_zero *z);
struct zero_copier *mt_zero_copier_start(const mt_zero *z);
void mt_zero_copier_stop(struct zero_copier *c);

/* Bytes this rank holds in the backend's memory: owned (master + grad, + m + v without offload;
 * grad + master16 with a host master) and the gather slots (with the reduce-scatter landing
 * area, and for bf16 gathers the send and landing buffers); and in host memory with offload:
 * m + v (+ master with a host master) and the staging buffer. */
int64_t mt_zero_owned_bytes(const mt_zero *z);
int64_t mt_zero_slot_bytes(const mt_zero *z);
int64_t mt_zero_host_bytes(const mt_zero *z);
/* The node-shared parameters' bytes (one copy for the node, mapped by every rank), 0 off. */
int64_t mt_zero_node_bytes(const mt_zero *z);
