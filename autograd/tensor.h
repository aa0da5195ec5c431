/* tensor.h: the autograd core's types: tensor, tape node, backend table, arena and context.
 *
 * Conventions (decided once, see docs/design.md):
 * - Tensors are contiguous, row-major, shapes outermost-first (PyTorch order), no strides.
 * - Forward is eager: an op constructor checks shapes, carves its output (and what its backward
 *   needs) from the context's arena, runs the backend's forward, and appends a node to the tape
 *   when gradients are being recorded and some input needs a gradient.
 * - Backward walks the tape in reverse; every backward ACCUMULATES (+=) into input gradients.
 *   Gradients of non-leaf tensors are carved lazily from the arena, zeroed; leaf gradients
 *   (parameters) point into buffers their owner zeroes once per step.
 * - Nothing here calls malloc inside a step: the arena and the tape are sized once. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/check.h"

typedef enum { MT_F32, MT_BF16, MT_I32, MT_DTYPE_COUNT } mt_dtype;
typedef enum { MT_CPU, MT_CUDA, MT_DEV_COUNT } mt_dev;

typedef enum {
#define MT_OP(E, name) MT_OP_##E,
#include "ops.def"
#undef MT_OP
    MT_OP_COUNT,
    MT_OP_SEGMENT = MT_OP_COUNT /* a recomputed segment (mt_checkpoint): no backend kernel */
} mt_op;

#define MT_MAX_DIMS    4
#define MT_MAX_IN      9
#define MT_MAX_SAVED   6
#define MT_MAX_IPARAMS 8
#define MT_MAX_FPARAMS 4

typedef struct mt_tensor {
    mt_dtype dtype;
    mt_dev dev;
    int ndim; /* 0 for a scalar */
    int64_t shape[MT_MAX_DIMS];
    void *data;         /* never owned: arena, parameter bucket or caller memory */
    void *grad;         /* same shape and dtype as data; NULL until needed */
    bool requires_grad; /* leaf parameter, or computed from one */
    const char *name;   /* used in error messages */
} mt_tensor;

struct mt_ctx;

/* The gated activation of a SwiGLU FFN of gate g and up u (spec 7 of minimax-m3.md): plain,
 * y = silu(g) u; or clamped ("swigluoai", MiniMax-M3): g' = min(g, limit),
 * u' = clamp(u, -limit, limit), y = g' sigmoid(alpha g') (u' + beta). Ops that take one keep it
 * in a node as ip[k] = clamp (k per op), fp[0..2] = alpha, limit, beta. */
typedef struct {
    bool clamp;
    float alpha, limit, beta;
} mt_act;

typedef struct mt_node {
    mt_op op;
    mt_tensor *out;
    mt_tensor *in[MT_MAX_IN]; /* inputs; NULL entries allowed for optional inputs */
    int n_in;
    mt_tensor *saved[MT_MAX_SAVED]; /* what the backward needs beyond in/out (rstd, lse, ...) */
    int64_t ip[MT_MAX_IPARAMS];     /* integer attributes, meaning defined per op */
    float fp[MT_MAX_FPARAMS];       /* float attributes (eps, scale, ...) */
    struct mt_ctx *ctx;             /* for scratch memory in kernels: mt_node_scratch */
    int tag;                        /* ctx->tag when recorded: the parameter bucket in use */
    void *host; /* host memory (ctx->host) a device forward fills for its backward, so that the
                   backward need not copy it back again (the MoE expert offsets), or NULL */
    struct mt_segment *segment; /* op MT_OP_SEGMENT: what mt_checkpoint recorded */
    bool fwd_pending; /* recorded under ctx->defer_forward: forward runs in the backward */
} mt_node;

/* A node's activation: ip[k] = clamp, fp[0..2] = alpha, limit, beta (mt_act). */
static inline mt_act mt_node_act(const mt_node *n, int k) {
    mt_act a;
    a.clamp = n->ip[k] != 0;
    a.alpha = n->fp[0];
    a.limit = n->fp[1];
    a.beta = n->fp[2];
    return a;
}

/* ------------------------------------------------------------------------------------------ */
/* backend table: model code calls ops; ops call through this table; no #ifdef anywhere else */

typedef void (*mt_kernel_fn)(const mt_node *node);
typedef struct {
    mt_kernel_fn fwd;
    mt_kernel_fn bwd;
} mt_op_impl;

/* AdamW constants of one run of elements (PyTorch's fp32 arithmetic, torch.optim.AdamW):
 * p *= keep (decoupled weight decay: keep = 1 - lr*wd, or 1); m += (g - m)(1 - b1);
 * v = b2 v + (1 - b2) g^2; p -= step_size m / (sqrt(v) / bc2_sqrt + eps). */
/* keep = 1 - lr * weight_decay (1: no decay); gscale multiplies the gradient first, rounded
 * as its own fp32 product (gradient clipping in the same pass; 0 is taken as 1); p_copy: NULL,
 * or (CPU backend only) where the new p is stored too, in the same pass (train/zero_node.c). */
typedef struct {
    float keep, b1, b2, step_size, bc2_sqrt, eps, gscale;
    float *p_copy;
} mt_adamw_args;

typedef struct mt_backend {
    const char *name;
    mt_dev dev;
    void *(*alloc)(size_t bytes); /* big blocks only: arenas, shards, buckets */
    void (*free)(void *p);
    void (*zero)(void *p, size_t bytes);
    void (*to_device)(void *dst, const void *src_host, size_t bytes);
    void (*to_host)(void *dst_host, const void *src, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes); /* backend memory to backend memory */
    /* host memory that to_device/to_host move fastest (page-locked on CUDA): staging buffers */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
    /* bytes this process could still allocate with alloc (the device's free memory; the CPU's
     * available memory, shared by every process on the node), 0 when unknown */
    size_t (*mem_available)(void);
    void (*sync)(void);
    /* fp32 logits per chunk of the fused lm_head + loss (0: 64 MiB): larger chunks make its
     * GEMMs compute-bound on a GPU (each chunk reads all of w, and its dw GEMM rewrites dw) */
    size_t logits_chunk_bytes;
    mt_op_impl ops[MT_OP_COUNT];
    /* the sharded optimizer's vector kernels on fp32 buffers (kernels/<backend>/optim) */
    void (*vec_add)(float *dst, const float *src, int64_t n); /* dst += src */
    /* Sum of squares (in double) and the count of non-finite elements, returned to the host. */
    void (*vec_stats)(const float *x, int64_t n, double *sumsq, int64_t *nonfinite);
    void (*adamw)(float *p, float *m, float *v, const float *g, int64_t n, const mt_adamw_args *a);
    /* bf16 parameter gathers (dist.gather_dtype): dst = the bf16 bits of src rounded to nearest
     * even (NaN stays NaN); and back, exactly. */
    void (*vec_to_bf16)(uint16_t *dst, const float *src, int64_t n);
    void (*vec_from_bf16)(float *dst, const uint16_t *src, int64_t n);
    /* The bf16 bits of fp32 memory [base, base + n) whose every value is a widened bf16 (a
     * gather slot expanded from a bf16 all-gather): bf16-mode kernels then take an operand
     * inside it from shadow instead of casting a copy. One registration per slot (0, 1);
     * shadow NULL withdraws it. NULL where the backend has no use for it (the CPU). */
    void (*bf16_shadow)(int slot, const float *base, const uint16_t *shadow, int64_t n);
    /* The calling thread's device, and binding another thread to it: the CUDA runtime's current
     * device is per thread, so a helper thread that calls into the backend (the optimizer
     * offload's copies) first calls thread_bind(thread_device() of the thread that started it),
     * else its work goes to device 0 on every rank. NULL where there are no devices (CPU). */
    int (*thread_device)(void);
    void (*thread_bind)(int device);
    /* Generation's cached steps (models/generate.h): no tape, no gradient, one new token per
     * row against the caches, on backend memory. Layouts and math: kernels/cpu/attention.h
     * (cpu_attention_decode) and kernels/cpu/lightning.h (cpu_lightning_state,
     * cpu_lightning_decode_step). t_len (B), host memory: the positions each row's query sees,
     * the new one included (rows of a ragged batch differ). NULL where the backend has none:
     * generation says so. */
    struct {
        void (*attention)(float *out, const float *q, const float *k_cache, const float *v_cache,
                          const int32_t *t_len, int64_t B, int64_t t_max, int64_t H, int64_t Hkv,
                          int64_t D, float scale);
        void (*lightning_state)(float *state, const float *qkv, const float *decay,
                                const int32_t *seg, int B, int T, int H, int D);
        void (*lightning_step)(float *state, const float *qkv_t, const float *decay, float *out,
                               int B, int H, int D);
        /* Chunked prefill: T new tokens of one filled row in one call (kernels/cpu/attention.h
         * cpu_attention_chunk, kernels/cpu/lightning.h cpu_lightning_chunk): the queries at
         * positions t0 .. t0+T-1 against the row's caches (t_max positions), which hold the
         * chunk's keys and values already; the recurrence over the T tokens. NULL where the
         * backend has none: the model runs the one-token steps above once per token. */
        void (*attention_chunk)(float *out, const float *q, const float *k_cache,
                                const float *v_cache, int64_t t0, int64_t T, int64_t t_max,
                                int64_t H, int64_t Hkv, int64_t D, float scale);
        void (*lightning_chunk)(float *state, const float *qkv, const float *decay, float *out,
                                int T, int H, int D);
        /* and an MSA layer's (kernels/cpu/msa.h, cpu_msa_chunk): each token the decode step
         * (dense or sparse) it would be alone */
        void (*msa_chunk)(float *out, const float *q, const float *iq, const float *k_cache,
                          const float *v_cache, const float *ik_cache, int64_t t0, int64_t T,
                          int64_t t_max, int64_t H, int64_t Hkv, int64_t D, int64_t Di, int block,
                          int topk, float scale);
        /* MiniMax-M3's MSA layers (kernels/cpu/msa.h, cpu_msa_select_decode and
         * cpu_msa_attention_decode): the new query's block selection over the index-key cache,
         * and its attention over the selected blocks of the KV cache */
        void (*msa_select)(int32_t *idx, float *work, const float *iq, const float *ik_cache,
                           const int32_t *t_len, int64_t B, int64_t t_max, int64_t Hi, int64_t Di,
                           int block, int topk);
        int64_t (*msa_select_work)(int64_t B, int64_t Hi, int64_t t_max, int block);
        void (*msa_attention)(float *out, const float *q, const float *k_cache,
                              const float *v_cache, const int32_t *idx, const int32_t *t_len,
                              int64_t B, int64_t t_max, int64_t H, int64_t Hkv, int64_t D,
                              int block, int topk, float scale);
    } decode;
} mt_backend;

const char *mt_op_name(mt_op op);
const mt_backend *mt_backend_cpu(void);
/* NULL when the CUDA backend was not built or no device is present. */
const mt_backend *mt_backend_cuda(void);
/* A backend that computes nothing, for memory planning (kernels/backend_plan.c). */
const mt_backend *mt_backend_plan(void);
/* The backend a --backend flag names ("cpu" or "cuda"), or NULL with one line in err: an
 * unknown name, or no usable CUDA device (or a build without it). */
const mt_backend *mt_backend_named(const char *name, char *err, size_t n);
/* Dies naming every (op, direction) the backend lacks. */
void mt_backend_validate(const mt_backend *be);
/* The index of the first non-finite element of x[0, n) (backend memory), or -1: the backend's
 * vec_stats over all of it, then a bisection (about log2 n more) only when it counts one. */
int64_t mt_backend_first_nonfinite(const mt_backend *be, const float *x, int64_t n);

/* ------------------------------------------------------------------------------------------ */
/* arena: one big block, bump allocation, reset once per step */

typedef struct mt_arena {
    const mt_backend *be;
    uint8_t *base;
    size_t cap, used, peak;
    size_t peak_live; /* the peak without kernels' scratch: what is in use when a kernel starts */
    const char *name;
} mt_arena;

void mt_arena_init(mt_arena *a, const mt_backend *be, size_t cap_bytes, const char *name);
void mt_arena_free(mt_arena *a);
/* 64-byte aligned; dies with the requested size, use and capacity when full. */
void *mt_arena_alloc(mt_arena *a, size_t bytes, const char *what);
void mt_arena_reset(mt_arena *a);
/* Everything carved after mt_arena_mark is dropped by mt_arena_rewind (recomputed segments). */
size_t mt_arena_mark(const mt_arena *a);
void mt_arena_rewind(mt_arena *a, size_t mark);

/* ------------------------------------------------------------------------------------------ */
/* context: backend + arena + tape */

typedef struct mt_ctx {
    const mt_backend *be;
    mt_arena arena; /* tensors, activations, saved buffers, activation grads, scratch */
    mt_arena host;  /* tensor structs and small host-side metadata */
    mt_node *nodes; /* the tape */
    int n_nodes, cap_nodes;
    bool grad_enabled;
    /* Bucket tags: nodes record ctx->tag (-1: none). During mt_backward, tag_hook(user, tag,
     * true) runs before the first node of a tag and (user, tag, false) after its last, so a
     * sharded optimizer can gather a layer's parameters and reduce-scatter its gradients. */
    int tag;
    void (*tag_hook)(void *user, int tag, bool enter);
    void *tag_user;
    /* GEMM precision, torch.autocast style: MT_F32 (the default) or MT_BF16. With MT_BF16 the
     * operands of every GEMM in matmul and moe_experts, forward and backward (x, W, dY and the
     * saved activations they multiply), are rounded to bf16 (nearest even, NaN stays NaN) and
     * the products are accumulated in fp32; outputs and gradients stay fp32 tensors. So are the
     * block-form lightning products' operands (its state stays fp32), and attention's q, k, v,
     * dout, probabilities and ds before its products (kernels/cpu/attention.c). Everything
     * else (norms, softmax, naive lightning, CE, optimizer) stays fp32, and parameters stay
     * fp32 master weights. A node records the mode when it is created, so its backward uses the
     * mode of its forward (docs/cuda.md, "bf16 mixed precision"). */
    mt_dtype compute_dtype;
    /* > 0 while mt_backward re-runs a checkpointed segment's forward (mt_checkpoint): bucket
     * hooks use it to prefetch in the order the backward needs. */
    int recomputing;
    /* While set, an op that needs a gradient keeps its node but not its forward: the reverse
     * pass runs the forward kernel right before the backward kernel (inside the node's bucket
     * hooks, so its parameters are gathered once for both), and until then the output holds no
     * values. Only for ops whose output values nothing reads: the experts of a layer being
     * recomputed (the combine's backward reads none; the layer's output is kept). */
    bool defer_forward;
    /* Called after every kernel while set: forward true after a forward kernel (the node's
     * output is computed), false after a backward kernel (its inputs' gradients are). NULL in
     * the normal step, which then pays one test per kernel; the non-finite diagnosis sets it
     * (train/nonfinite.c). */
    void (*node_hook)(void *user, const mt_node *n, bool forward);
    void *node_user;
    /* The op profile (autograd/profile.h) every kernel call is timed into while set; NULL
     * (the default): one test per kernel. */
    struct mt_profile *prof;
    /* Context parallelism (autograd/context_parallel.h): while set (size > 1), the forward's
     * rows hold this rank's T / C tokens of each sample, and the ops that cross tokens
     * (softmax and lightning attention, the router's load-balancing counts) exchange through
     * it; NULL (the default, and always in generation): each row is a whole sample. */
    const struct mt_cp_group *cp;
} mt_ctx;

void mt_ctx_init(mt_ctx *c, const mt_backend *be, size_t arena_bytes, int max_nodes);
void mt_ctx_free(mt_ctx *c);
/* Drops the tape and every tensor carved since init (call after the optimizer step). */
void mt_ctx_reset(mt_ctx *c);
/* No-grad mode for evaluation and generation; returns the previous setting. */
bool mt_ctx_set_grad(mt_ctx *c, bool enabled);
/* c->compute_dtype, checked: what a GEMM op records in its node (matmul, moe_experts,
 * attention: ip[0]; lightning: ip[1]). */
static inline int64_t mt_gemm_mode(const mt_ctx *c, const char *op) {
    MT_CHECK(c->compute_dtype == MT_F32 || c->compute_dtype == MT_BF16,
             "%s: compute_dtype %d is neither MT_F32 nor MT_BF16", op, (int)c->compute_dtype);
    return (int64_t)c->compute_dtype;
}

size_t mt_dtype_size(mt_dtype dt);
const char *mt_dtype_name(mt_dtype dt);
int64_t mt_numel(const mt_tensor *t);
size_t mt_nbytes(const mt_tensor *t);
/* "(2,3,4)": for messages; rotates over a few static buffers so several fit in one printf. */
const char *mt_shape_str(const mt_tensor *t);
bool mt_same_shape(const mt_tensor *a, const mt_tensor *b);

/* A new tensor carved from the context's arena (contents undefined). */
mt_tensor *mt_tensor_new(mt_ctx *c, mt_dtype dt, int ndim, const int64_t *shape, const char *name);
mt_tensor *mt_tensor_zeros(mt_ctx *c, mt_dtype dt, int ndim, const int64_t *shape,
                           const char *name);
/* Describe caller-owned memory as a tensor (parameters, batches). grad may be NULL. */
void mt_tensor_wrap(mt_tensor *t, mt_dtype dt, int ndim, const int64_t *shape, void *data,
                    void *grad, const char *name);
/* Carve t->grad (zeroed) from the arena if it has none. */
void mt_tensor_ensure_grad(mt_ctx *c, mt_tensor *t);

/* ------------------------------------------------------------------------------------------ */
/* tape: used by op constructors (autograd/op_*.c) */

/* Takes the next tape slot and fills op, out, inputs; out->requires_grad is derived here. */
mt_node *mt_node_begin(mt_ctx *c, mt_op op, mt_tensor *out, int n_in, mt_tensor *const *in);
/* Runs the backend forward; keeps the node on the tape when it needs a backward. */
void mt_node_run(mt_ctx *c, mt_node *n);
/* Stores an activation (mt_act, NULL: plain SiLU) in node n: ip[k] = clamp, fp[0..2] = alpha,
 * limit, beta (autograd/op_elementwise.c). */
void mt_node_set_act(mt_node *n, int k, const mt_act *act);
/* Scratch memory for a kernel, carved from the arena: alive until the kernel (forward or
 * backward) returns; the tape rewinds the arena after each. A backward must not rely on a
 * forward's scratch: what it needs is a saved buffer the op constructor carves. */
void *mt_node_scratch(const mt_node *n, size_t bytes, const char *what);

/* Activation checkpointing: a segment of ops whose activations are recomputed in the backward
 * instead of kept (autograd/checkpoint.c). fn builds outputs out[0..n_out) from x with ops
 * (out[i] may be NULL, the same ones every time; none may be x itself) and must compute the
 * same values when run again on the same x: the backward re-runs it on x, so each bucket hook
 * it calls runs again too. With gradients off fn just runs. Otherwise only out[] survive, copied
 * (their contents equal), and one tape node stands for the segment: the arena holds the kept
 * inputs and outputs of all segments plus one segment's activations. user (user_bytes) is
 * copied and handed to fn both times. Called outside any bucket tag (ctx->tag = -1). */
#define MT_SEGMENT_MAX_OUT 4
typedef void (*mt_segment_fn)(mt_ctx *c, void *user, mt_tensor *x, mt_tensor **out);
void mt_checkpoint(mt_ctx *c, mt_segment_fn fn, const void *user, size_t user_bytes, mt_tensor *x,
                   int n_out, mt_tensor **out);
/* What a segment node records: fn, its copy of user, and the kept outputs (node->out is out[0]). */
typedef struct mt_segment {
    mt_segment_fn fn;
    void *user;
    int n_out;
    mt_tensor *out[MT_SEGMENT_MAX_OUT];
} mt_segment;
/* The backward of a segment node (called by the reverse pass). */
void mt_segment_backward(mt_ctx *c, const mt_node *n);
/* Reverse pass over tape nodes [begin, end) with the tag hooks; the gradients of the outputs
 * that seed it are set. mt_backward and segment backwards use it. */
void mt_tape_backward(mt_ctx *c, int begin, int end);

/* Reverse pass from `out`. seed: dL/dout on the host (numel floats), or NULL for a scalar
 * loss (seed 1). Accumulates into the grads of every tensor that requires one. */
void mt_backward(mt_ctx *c, mt_tensor *out, const float *seed);
