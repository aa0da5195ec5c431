/* tensor.c: tensors, the context and the tape (forward bookkeeping and the reverse pass). */
#include "tensor.h"

#include "profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *op_names[MT_OP_COUNT] = {
#define MT_OP(E, name) [MT_OP_##E] = #name,
#include "ops.def"
#undef MT_OP
};

const char *mt_op_name(mt_op op) {
    if (op == MT_OP_SEGMENT) return "checkpoint";
    return (op >= 0 && op < MT_OP_COUNT) ? op_names[op] : "?";
}

size_t mt_dtype_size(mt_dtype dt) {
    switch (dt) {
    case MT_F32:
        return 4;
    case MT_BF16:
        return 2;
    case MT_I32:
        return 4;
    default:
        MT_DIE("unknown dtype %d", (int)dt);
    }
}

const char *mt_dtype_name(mt_dtype dt) {
    static const char *names[MT_DTYPE_COUNT] = {"f32", "bf16", "i32"};
    return (dt >= 0 && dt < MT_DTYPE_COUNT) ? names[dt] : "?";
}

int64_t mt_numel(const mt_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t mt_nbytes(const mt_tensor *t) { return (size_t)mt_numel(t) * mt_dtype_size(t->dtype); }

const char *mt_shape_str(const mt_tensor *t) {
    static char bufs[8][96];
    static int next = 0;
    char *b = bufs[next];
    next = (next + 1) % 8;
    if (!t) return "(null)";
    int n = snprintf(b, 96, "(");
    for (int i = 0; i < t->ndim && n < 90; i++)
        n += snprintf(b + n, 96 - n, i ? ",%lld" : "%lld", (long long)t->shape[i]);
    snprintf(b + n, 96 - n, ")");
    return b;
}

bool mt_same_shape(const mt_tensor *a, const mt_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

static void tensor_set_shape(mt_tensor *t, int ndim, const int64_t *shape) {
    MT_CHECK(ndim >= 0 && ndim <= MT_MAX_DIMS, "tensor %s: %d dims (max %d)",
             t->name ? t->name : "?", ndim, MT_MAX_DIMS);
    t->ndim = ndim;
    for (int i = 0; i < MT_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    for (int i = 0; i < ndim; i++)
        MT_CHECK(shape[i] >= 0, "tensor %s: negative dim %lld", t->name ? t->name : "?",
                 (long long)shape[i]);
}

void mt_tensor_wrap(mt_tensor *t, mt_dtype dt, int ndim, const int64_t *shape, void *data,
                    void *grad, const char *name) {
    memset(t, 0, sizeof(*t));
    t->name = name;
    t->dtype = dt;
    t->dev = MT_CPU;
    tensor_set_shape(t, ndim, shape);
    t->data = data;
    t->grad = grad;
    t->requires_grad = grad != NULL;
}

mt_tensor *mt_tensor_new(mt_ctx *c, mt_dtype dt, int ndim, const int64_t *shape, const char *name) {
    mt_tensor *t = mt_arena_alloc(&c->host, sizeof(mt_tensor), name);
    memset(t, 0, sizeof(*t));
    t->name = name;
    t->dtype = dt;
    t->dev = c->be->dev;
    tensor_set_shape(t, ndim, shape);
    t->data = mt_arena_alloc(&c->arena, mt_nbytes(t), name);
    return t;
}

mt_tensor *mt_tensor_zeros(mt_ctx *c, mt_dtype dt, int ndim, const int64_t *shape,
                           const char *name) {
    mt_tensor *t = mt_tensor_new(c, dt, ndim, shape, name);
    c->be->zero(t->data, mt_nbytes(t));
    return t;
}

void mt_tensor_ensure_grad(mt_ctx *c, mt_tensor *t) {
    if (t->grad) return;
    MT_CHECK(t->dtype != MT_I32, "tensor %s: integer tensors have no gradient", t->name);
    t->grad = mt_arena_alloc(&c->arena, mt_nbytes(t), t->name);
    c->be->zero(t->grad, mt_nbytes(t));
}

/* ------------------------------------------------------------------------------------------ */

/* Tensor structs live on the host; one per op output plus a few saved buffers. */
#define MT_HOST_BYTES_PER_NODE (4 * sizeof(mt_tensor) + 256)

void mt_ctx_init(mt_ctx *c, const mt_backend *be, size_t arena_bytes, int max_nodes) {
    memset(c, 0, sizeof(*c));
    mt_backend_validate(be);
    c->be = be;
    mt_arena_init(&c->arena, be, arena_bytes, "activations");
    mt_arena_init(&c->host, mt_backend_cpu(), (size_t)max_nodes * MT_HOST_BYTES_PER_NODE + 65536,
                  "tensor structs");
    c->cap_nodes = max_nodes;
    c->nodes = mt_calloc((size_t)max_nodes, sizeof(mt_node), "tape");
    c->grad_enabled = true;
    c->tag = -1;
    c->compute_dtype = MT_F32;
}

void mt_ctx_free(mt_ctx *c) {
    mt_arena_free(&c->arena);
    mt_arena_free(&c->host);
    free(c->nodes);
    memset(c, 0, sizeof(*c));
}

void mt_ctx_reset(mt_ctx *c) {
    mt_arena_reset(&c->arena);
    mt_arena_reset(&c->host);
    c->n_nodes = 0;
    c->tag = -1;
}

bool mt_ctx_set_grad(mt_ctx *c, bool enabled) {
    bool prev = c->grad_enabled;
    c->grad_enabled = enabled;
    return prev;
}

mt_node *mt_node_begin(mt_ctx *c, mt_op op, mt_tensor *out, int n_in, mt_tensor *const *in) {
    MT_CHECK(c->n_nodes < c->cap_nodes, "tape is full (%d nodes) at op %s: raise max_nodes",
             c->cap_nodes, mt_op_name(op));
    MT_CHECK(n_in <= MT_MAX_IN, "op %s: %d inputs (max %d)", mt_op_name(op), n_in, MT_MAX_IN);
    mt_node *n = &c->nodes[c->n_nodes];
    memset(n, 0, sizeof(*n));
    n->op = op;
    n->out = out;
    n->n_in = n_in;
    n->ctx = c;
    n->tag = c->tag;
    out->requires_grad = false;
    for (int i = 0; i < n_in; i++) {
        n->in[i] = in[i];
        if (in[i] && in[i]->requires_grad && in[i]->dtype != MT_I32) out->requires_grad = true;
    }
    if (!c->grad_enabled) out->requires_grad = false;
    return n;
}

/* Where a kernel's scratch starts: what is live then counts toward the arena's peak_live. */
static size_t tape_kernel_mark(mt_ctx *c) {
    const size_t mark = mt_arena_mark(&c->arena);
    if (mark > c->arena.peak_live) c->arena.peak_live = mark;
    return mark;
}

void mt_node_run(mt_ctx *c, mt_node *n) {
    if (c->defer_forward && n->out->requires_grad) {
        n->fwd_pending = true; /* mt_tape_backward runs it */
        c->n_nodes++;
        return;
    }
    /* the constructor carved the output and the saved buffers; what the kernel carves is
     * scratch, dropped after (on a device the next kernels queue behind its users) */
    const size_t mark = tape_kernel_mark(c);
    if (c->prof) /* the op profile (profile.h): NULL in a normal step, one test per kernel */
        mt_profile_kernel(c, n, false);
    else
        c->be->ops[n->op].fwd(n);
    if (c->node_hook) c->node_hook(c->node_user, n, true);
    mt_arena_rewind(&c->arena, mark);
    if (n->out->requires_grad) c->n_nodes++; /* keep it: the slot is not reused */
}

void *mt_node_scratch(const mt_node *n, size_t bytes, const char *what) {
    return mt_arena_alloc(&n->ctx->arena, bytes, what);
}

void mt_backward(mt_ctx *c, mt_tensor *out, const float *seed) {
    MT_CHECK(out->requires_grad, "backward from %s, which does not require a gradient",
             out->name ? out->name : "?");
    MT_CHECK(out->dtype == MT_F32, "backward seed for %s: only f32 supported", out->name);
    MT_CHECK(seed || mt_numel(out) == 1,
             "backward from %s %s: a non-scalar output needs a seed gradient", out->name,
             mt_shape_str(out));
    mt_tensor_ensure_grad(c, out);
    size_t nb = mt_nbytes(out);
    if (seed) {
        c->be->to_device(out->grad, seed, nb);
    } else {
        const float one = 1.0f;
        c->be->to_device(out->grad, &one, sizeof(one));
    }
    mt_tape_backward(c, 0, c->n_nodes);
}

/* Does a gradient flow into node n (into its output, or into any output of a segment)? */
static bool node_has_grad(const mt_node *n) {
    if (n->op != MT_OP_SEGMENT) return n->out->grad != NULL;
    for (int i = 0; i < n->segment->n_out; i++)
        if (n->segment->out[i] && n->segment->out[i]->grad) return true;
    return false;
}

void mt_tape_backward(mt_ctx *c, int begin, int end) {
    int tag = -1;
    for (int i = end - 1; i >= begin; i--) {
        const mt_node *n = &c->nodes[i]; /* the tape never moves: segments append after end */
        if (!node_has_grad(n)) continue;
        if (n->tag != tag && c->tag_hook) {
            if (tag >= 0) c->tag_hook(c->tag_user, tag, false);
            if (n->tag >= 0) c->tag_hook(c->tag_user, n->tag, true);
        }
        tag = n->tag;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] && n->in[j]->requires_grad && n->in[j]->dtype != MT_I32)
                mt_tensor_ensure_grad(c, n->in[j]);
        if (n->op == MT_OP_SEGMENT) {
            mt_segment_backward(c, n);
        } else {
            /* a backward carves only scratch (input gradients exist by now): drop it after;
             * on a device the next kernels queue behind the ones still using it */
            const size_t mark = tape_kernel_mark(c);
            if (n->fwd_pending) {
                if (c->prof)
                    mt_profile_kernel(c, n, false);
                else
                    c->be->ops[n->op].fwd(n);
                if (c->node_hook) c->node_hook(c->node_user, n, true);
            }
            if (c->prof)
                mt_profile_kernel(c, n, true);
            else
                c->be->ops[n->op].bwd(n);
            if (c->node_hook) c->node_hook(c->node_user, n, false);
            mt_arena_rewind(&c->arena, mark);
        }
    }
    if (tag >= 0 && c->tag_hook) c->tag_hook(c->tag_user, tag, false);
}
