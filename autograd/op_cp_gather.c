/* op_cp_gather.c: the whole rows of a context group from each rank's part (issue 39; the
 * layout: autograd/context_parallel.h; the API: ops.h, mt_cp_gather), and the row moves that
 * context parallelism's exchanges share. No arithmetic in the forward: the result is the
 * inputs' bits; the backward sums each rank's rows over the group (reduce-scatter).
 *
 * Node: in[0] x (B,Tl,...) F32 or I32; out (B,C Tl,...); ip[0] C; host: the group pointer. */
#include "ops.h"

void mt_cp_rows_move(const mt_backend *be, float *full, float *ranks, int64_t stride, int C,
                     int64_t B, int64_t Tl, int64_t W, bool to_full) {
    const int64_t T = C * Tl, n = Tl / 2;
    const size_t bytes = sizeof(float) * (size_t)(n * W);
    for (int q = 0; q < C; q++)
        for (int64_t b = 0; b < B; b++)
            for (int j = 0; j < 2; j++) {
                float *f = full + (b * T + mt_cp_chunk_of(q, C, j) * n) * W;
                float *r = ranks + q * stride + (b * Tl + j * n) * W;
                if (to_full)
                    be->copy(f, r, bytes);
                else
                    be->copy(r, f, bytes);
            }
}

/* A gather node's group and sizes: x (B,Tl,...), W 4-byte elements a token */
typedef struct {
    const mt_cp_group *g;
    int C;
    int64_t B, Tl, W, count; /* count = B Tl W, one rank's elements */
} gather_dims;

static gather_dims gather_dims_of(const mt_node *n) {
    const mt_tensor *x = n->in[0];
    gather_dims d = {
        *(const mt_cp_group *const *)n->host, (int)n->ip[0], x->shape[0], x->shape[1], 1, 0};
    for (int k = 2; k < x->ndim; k++) d.W *= x->shape[k];
    d.count = d.B * d.Tl * d.W;
    return d;
}

void mt_cp_gather_node_fwd(const mt_node *n) {
    const gather_dims d = gather_dims_of(n);
    float *recv = mt_node_scratch(n, sizeof(float) * (size_t)(d.C * d.count), "cp_gather rows");
    d.g->allgather(d.g->user, n->in[0]->data, recv, d.count, sizeof(float));
    mt_cp_rows_move(n->ctx->be, n->out->data, recv, d.count, d.C, d.B, d.Tl, d.W, true);
}

void mt_cp_gather_node_bwd(const mt_node *n) {
    const gather_dims d = gather_dims_of(n);
    const mt_backend *be = n->ctx->be;
    /* every rank's rows of the gradient, rank-major, summed over the group into its owner */
    float *ranks = mt_node_scratch(n, sizeof(float) * (size_t)(d.C * d.count), "cp_gather grads");
    mt_cp_rows_move(be, n->out->grad, ranks, d.count, d.C, d.B, d.Tl, d.W, false);
    float *mine = mt_node_scratch(n, sizeof(float) * (size_t)d.count, "cp_gather mine");
    d.g->reduce_scatter(d.g->user, ranks, mine, d.count);
    if (n->in[0]->grad) be->vec_add(n->in[0]->grad, mine, d.count);
}

mt_tensor *mt_cp_gather(mt_ctx *c, mt_tensor *x, const mt_cp_group *group) {
    MT_CHECK((x->dtype == MT_F32 || x->dtype == MT_I32) && x->ndim >= 2,
             "cp_gather: x %s %s %s must be F32 or I32 (B,Tl,...)", x->name, mt_shape_str(x),
             mt_dtype_name(x->dtype));
    if (!group || group->size == 1) return x;
    const int C = group->size;
    MT_CHECK(group->rank >= 0 && group->rank < C && group->allgather && group->reduce_scatter,
             "cp_gather: rank %d of a context group of %d, with its allgather and reduce_scatter",
             group->rank, C);
    MT_CHECK(x->shape[1] % 2 == 0 && (int64_t)C * x->shape[1] <= INT32_MAX,
             "cp_gather: %lld local tokens of %s %s must be even (two chunks of T/(2C), C = %d) "
             "and C Tl at most 2^31 - 1",
             (long long)x->shape[1], x->name, mt_shape_str(x), C);
    int64_t shape[MT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[1] *= C;
    mt_tensor *out = mt_tensor_new(c, x->dtype, x->ndim, shape, "cp_gather");
    mt_node *n = mt_node_begin(c, MT_OP_CP_GATHER, out, 1, &x);
    n->ip[0] = C;
    const mt_cp_group **slot = mt_arena_alloc(&c->host, sizeof(*slot), "cp_gather group");
    *slot = group;
    n->host = (void *)slot;
    mt_node_run(c, n);
    return out;
}

mt_tensor *mt_cp_local_slots(mt_ctx *c, const mt_cp_group *group, int64_t Tl) {
    const int C = group ? group->size : 1, r = group ? group->rank : 0;
    mt_tensor *slots = mt_tensor_new(c, MT_I32, 1, (int64_t[]){Tl}, "cp_local_slots");
    int32_t *h = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)(Tl ? Tl : 1), "cp slots");
    for (int64_t i = 0; i < Tl; i++) h[i] = (int32_t)mt_cp_global_index(r, C, C * Tl, i);
    c->be->to_device(slots->data, h, sizeof(int32_t) * (size_t)Tl);
    return slots;
}
