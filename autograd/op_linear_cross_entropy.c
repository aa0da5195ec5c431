/* op_linear_cross_entropy.c: the lm_head and the cross-entropy fused, so the (N,V) logits never
 * exist at once (V = 200,064 for MiniMax: 0.8 MB per row in fp32). Only labelled rows are
 * computed: their logits are formed R rows at a time, reduced to a log-sum-exp, and formed
 * again in the backward, unless they are few (M V floats within LCE_KEEP_BYTES, one chunk: a
 * small vocabulary): then the forward keeps them and the backward skips that GEMM.
 * An lm_head split by vocabulary rows (w_k: rows [row0, row0 + V_k) of a vocabulary of `vocab`)
 * runs as a chain of these ops, one per part, each carrying per labelled row the running
 * log-sum-exp and the target logit: lse_k = logaddexp(lse_{k-1}, lse(x w_k^T)), t_k = t_{k-1} +
 * the label's logit where the label is in part k. The last op of the chain (final) outputs the
 * loss sum_i (lse - t) / denom; one final op without a predecessor is the whole lm_head.
 * Node: in[0] = x (..., C) as N rows, in[1] = w (V_k,C), in[2] = labels (N) I32, in[3] = prev
 *       (2,M): the predecessor's lse and t rows, or NULL;
 *       out: the scalar loss (final), else (2,M): lse_k and t_k of the labelled rows;
 *       saved[0] = lse_k (M) f32 of the labelled rows, saved[1] = rows (M) I32: the labelled
 *       rows in ascending order; saved[2] = the logits (M,V_k) f32 when kept (R = M and
 *       4 M V_k <= LCE_KEEP_BYTES, on every backend alike), else NULL;
 *       ip[0] = GEMM precision (as matmul), ip[1] = M, ip[2] = R (rows per chunk), ip[3] = row0,
 *       ip[4] = vocab, ip[5] = final; fp[0] = denom as given (mt_cross_entropy's rule).
 * The labels are read on the host here (one small copy on a device backend): that checks them
 * with a message naming the position and fixes M, which sizes every GEMM of the op. Later parts
 * of a chain take M and the row list from their predecessor, so a chain copies the labels once
 * (each copy waits for the device). */
#include <limits.h>

#include "ops.h"

/* fp32 logits of one chunk, unless the backend sets its own (mt_backend.logits_chunk_bytes) */
#define LCE_CHUNK_BYTES ((int64_t)64 << 20)
/* logits kept from the forward for the backward: 16 MiB (a real MiniMax vocabulary never fits:
 * 20 rows of 200,064; a small test or benchmark one does) */
#define LCE_KEEP_BYTES ((int64_t)16 << 20)

/* The node of the chain's previous part when it read the same labels against the same vocabulary,
 * else NULL. */
static const mt_node *lce_previous_part(const mt_ctx *c, const mt_tensor *prev,
                                        const mt_tensor *labels, int64_t vocab) {
    if (!prev) return NULL;
    for (int i = c->n_nodes - 1; i >= 0; i--) {
        const mt_node *n = &c->nodes[i];
        if (n->out != prev) continue;
        return n->op == MT_OP_LINEAR_CROSS_ENTROPY && n->in[2] == labels && n->ip[4] == vocab
                   ? n
                   : NULL;
    }
    return NULL;
}

/* The labelled rows of labels (N) in ascending order, checked against the vocabulary, as a new
 * I32 tensor (device memory on a device backend); *M their number. */
static mt_tensor *lce_labelled_rows(mt_ctx *c, const mt_tensor *labels, int64_t N, int64_t vocab,
                                    const mt_tensor *w, int64_t *M_out) {
    int32_t *lab = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)(N ? N : 1), "lce.labels");
    c->be->to_host(lab, labels->data, sizeof(int32_t) * (size_t)N);
    int32_t *rows = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)(N ? N : 1), "lce.rows");
    int64_t M = 0;
    for (int64_t i = 0; i < N; i++) {
        if (lab[i] == MT_IGNORE_INDEX) continue;
        MT_CHECK(lab[i] >= 0 && lab[i] < vocab,
                 "linear_cross_entropy: %s[%lld] = %d is neither %d nor in [0,%lld) for w %s %s",
                 labels->name, (long long)i, lab[i], MT_IGNORE_INDEX, (long long)vocab, w->name,
                 mt_shape_str(w));
        rows[M++] = (int32_t)i;
    }
    mt_tensor *t = mt_tensor_new(c, MT_I32, 1, &M, "linear_cross_entropy.rows");
    c->be->to_device(t->data, rows, sizeof(int32_t) * (size_t)M);
    *M_out = M;
    return t;
}

mt_tensor *mt_linear_cross_entropy_part(mt_ctx *c, mt_tensor *x, mt_tensor *w, mt_tensor *labels,
                                        mt_tensor *prev, int64_t row0, int64_t vocab, bool final,
                                        float denom, int64_t chunk_rows) {
    MT_CHECK(x->dtype == MT_F32 && w->dtype == MT_F32 && x->ndim >= 1 && w->ndim == 2,
             "linear_cross_entropy: x %s %s must be f32 (...,C), w %s %s f32 (V,C)", x->name,
             mt_shape_str(x), w->name, mt_shape_str(w));
    const int64_t C = x->shape[x->ndim - 1], V = w->shape[0], N = C ? mt_numel(x) / C : 0;
    MT_CHECK(w->shape[1] == C && C > 0 && V > 0,
             "linear_cross_entropy: x %s %s and w %s %s disagree on C (or are empty)", x->name,
             mt_shape_str(x), w->name, mt_shape_str(w));
    MT_CHECK(labels->dtype == MT_I32 && mt_numel(labels) == N,
             "linear_cross_entropy: labels %s %s must be i32 with one entry per row of x %s %s",
             labels->name, mt_shape_str(labels), x->name, mt_shape_str(x));
    MT_CHECK(N <= INT_MAX && V <= INT_MAX && C <= INT_MAX && vocab <= INT_MAX,
             "linear_cross_entropy: x %s %s, w %s %s: a dimension exceeds BLAS's int range",
             x->name, mt_shape_str(x), w->name, mt_shape_str(w));
    MT_CHECK(row0 >= 0 && row0 + V <= vocab && (prev || !final || (row0 == 0 && V == vocab)),
             "linear_cross_entropy: w %s %s as rows %lld.. of a vocabulary of %lld%s", w->name,
             mt_shape_str(w), (long long)row0, (long long)vocab,
             prev || !final ? "" : " (a final part without predecessor must be all of it)");

    const mt_node *pred = lce_previous_part(c, prev, labels, vocab);
    int64_t M = pred ? pred->ip[1] : 0;
    mt_tensor *rows = pred ? pred->saved[1] : lce_labelled_rows(c, labels, N, vocab, w, &M);
    MT_CHECK(!prev || (prev->dtype == MT_F32 && prev->ndim == 2 && prev->shape[0] == 2 &&
                       prev->shape[1] == M),
             "linear_cross_entropy: prev %s %s must be f32 (2,%lld): the chain's lse and t rows",
             prev ? prev->name : "", prev ? mt_shape_str(prev) : "", (long long)M);
    const int64_t budget =
        c->be->logits_chunk_bytes ? (int64_t)c->be->logits_chunk_bytes : LCE_CHUNK_BYTES;
    int64_t R = chunk_rows > 0 ? chunk_rows : budget / (4 * V);
    if (R > M) R = M;
    if (R < 1) R = 1;

    const int64_t out_shape[2] = {2, M};
    mt_tensor *y = final ? mt_tensor_new(c, MT_F32, 0, NULL, "linear_cross_entropy")
                         : mt_tensor_new(c, MT_F32, 2, out_shape, "linear_cross_entropy.chain");
    mt_tensor *in[4] = {x, w, labels, prev};
    mt_node *n = mt_node_begin(c, MT_OP_LINEAR_CROSS_ENTROPY, y, 4, in);
    n->saved[0] = mt_tensor_new(c, MT_F32, 1, &M, "linear_cross_entropy.lse");
    n->saved[1] = rows; /* shared along a chain, read only */
    if (R == M && M > 0 && 4 * M * V <= LCE_KEEP_BYTES && y->requires_grad)
        n->saved[2] = mt_tensor_new(c, MT_F32, 2, (int64_t[]){M, V}, "linear_cross_entropy.logits");
    n->ip[0] = mt_gemm_mode(c, "linear_cross_entropy");
    n->ip[1] = M;
    n->ip[2] = R;
    n->ip[3] = row0;
    n->ip[4] = vocab;
    n->ip[5] = final;
    n->fp[0] = denom;
    mt_node_run(c, n);
    return y;
}

mt_tensor *mt_linear_cross_entropy_chunked(mt_ctx *c, mt_tensor *x, mt_tensor *w, mt_tensor *labels,
                                           float denom, int64_t chunk_rows) {
    return mt_linear_cross_entropy_part(c, x, w, labels, NULL, 0, w->shape[0], true, denom,
                                        chunk_rows);
}

mt_tensor *mt_linear_cross_entropy(mt_ctx *c, mt_tensor *x, mt_tensor *w, mt_tensor *labels,
                                   float denom) {
    return mt_linear_cross_entropy_chunked(c, x, w, labels, denom, 0);
}
