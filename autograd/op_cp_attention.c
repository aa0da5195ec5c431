/* op_cp_attention.c: causal GQA softmax attention under context parallelism (issue 39 item 2;
 * the layout: autograd/context_parallel.h; the API: ops.h, mt_cp_attention).
 *
 * The exchange is an all-gather of K and V, not a ring: with GQA (Hkv of H heads) a rank's K
 * and V are 2 Hkv / H of its q and out, so gathering them costs (C-1)/C of the row's 2 T Hkv D
 * floats per rank and layer (M2: Hkv/H = 8/48, a sixth of the activations' width), in one
 * collective that the interconnect runs at full bandwidth; a ring moves the same bytes in C-1
 * steps, each of which must hide behind a step of compute to pay off, and its online-softmax
 * merges round the outputs differently from one rank. Gathered, each rank computes exactly the
 * one-rank kernel's rows (the causal layout balances the work), so results equal one rank's to
 * fp32 rounding. Memory: the gathered (B,T,Hkv,D) K and V live only inside the kernel call
 * (node scratch), forward and backward each gather again, nothing of size T is kept.
 *
 * Buffers: a rank sends [k | v | seg] (its B Tl Hkv D floats twice, then B Tl segment ids as
 * 4-byte elements: the all-gather copies bytes) in one allgather call; the rank-major result is
 * copied into global token order (chunk j of rank q's rows is chunk mt_cp_chunk_of(q, C, j)).
 * The backward lays the gathered gradients dk | dv out rank-major again (reusing that receive
 * buffer) and reduce-scatters them in one call: rank q gets the sum over ranks of its rows.
 *
 * Node: in[0..3] q, k, v, seg (or NULL); saved[0] lse (B,H,Tl) (with a backward), saved[1] the
 * local rows' global positions (Tl) I32 on the backend; fp[0] scale; ip[0] the GEMM mode,
 * ip[1] C, ip[2] the rank; host: the group pointer (NULL: one rank). */
#include <math.h>

#include "ops.h"

static const mt_cp_group *cp_group(const mt_node *n) {
    return n->host ? *(const mt_cp_group *const *)n->host : NULL;
}

void mt_cp_attention_gather(const mt_node *n, const float *k, const float *v, mt_cp_kv *kv) {
    const mt_tensor *kt = n->in[1], *seg = n->in[3];
    const int C = (int)n->ip[1];
    const int64_t B = kt->shape[0], Tl = kt->shape[1], W = kt->shape[2] * kt->shape[3];
    const int32_t *q_pos = n->saved[1]->data;
    if (C == 1) {
        *kv = (mt_cp_kv){k, v, seg ? seg->data : NULL, q_pos, Tl, NULL};
        return;
    }
    const mt_backend *be = n->ctx->be;
    const mt_cp_group *g = cp_group(n);
    const int64_t T = C * Tl, rows = B * Tl * W, per = 2 * rows + (seg ? B * Tl : 0);
    float *send = mt_node_scratch(n, sizeof(float) * (size_t)per, "cp_attention send");
    be->copy(send, k, sizeof(float) * (size_t)rows);
    be->copy(send + rows, v, sizeof(float) * (size_t)rows);
    if (seg) be->copy(send + 2 * rows, seg->data, sizeof(int32_t) * (size_t)(B * Tl));
    float *recv = mt_node_scratch(n, sizeof(float) * (size_t)(C * per), "cp_attention gathered");
    g->allgather(g->user, send, recv, per, sizeof(float));
    float *full = mt_node_scratch(n, sizeof(float) * (size_t)(2 * B * T * W + (seg ? B * T : 0)),
                                  "cp_attention keys");
    mt_cp_rows_move(be, full, recv, per, C, B, Tl, W, true);
    mt_cp_rows_move(be, full + B * T * W, recv + rows, per, C, B, Tl, W, true);
    if (seg) mt_cp_rows_move(be, full + 2 * B * T * W, recv + 2 * rows, per, C, B, Tl, 1, true);
    *kv = (mt_cp_kv){
        full, full + B * T * W, seg ? (const int32_t *)(full + 2 * B * T * W) : NULL, q_pos, T,
        recv};
}

void mt_cp_attention_scatter(const mt_node *n, const float *dkv, const mt_cp_kv *kv) {
    const mt_tensor *kt = n->in[1], *vt = n->in[2];
    const mt_backend *be = n->ctx->be;
    const mt_cp_group *g = cp_group(n);
    const int C = (int)n->ip[1];
    const int64_t B = kt->shape[0], Tl = kt->shape[1], W = kt->shape[2] * kt->shape[3];
    const int64_t T = C * Tl, rows = B * Tl * W;
    MT_CHECK(kv->buf && C > 1, "cp_attention: the gradient exchange needs a group of 2+ ranks");
    /* rank q's block: its dk rows, then its dv rows (2 rows floats; the receive buffer holds
     * C per >= C 2 rows) */
    mt_cp_rows_move(be, (float *)dkv, kv->buf, 2 * rows, C, B, Tl, W, false);
    mt_cp_rows_move(be, (float *)dkv + B * T * W, kv->buf + rows, 2 * rows, C, B, Tl, W, false);
    float *mine = mt_node_scratch(n, sizeof(float) * (size_t)(2 * rows), "cp_attention dkv");
    g->reduce_scatter(g->user, kv->buf, mine, 2 * rows);
    if (kt->grad) be->vec_add(kt->grad, mine, rows);
    if (vt->grad) be->vec_add(vt->grad, mine + rows, rows);
}

static void cp_check(const mt_tensor *q, const mt_tensor *k, const mt_tensor *v,
                     const mt_tensor *seg, const mt_cp_group *g) {
    MT_CHECK(q->dtype == MT_F32 && k->dtype == MT_F32 && v->dtype == MT_F32 && q->ndim == 4 &&
                 k->ndim == 4 && mt_same_shape(k, v),
             "cp_attention: q %s %s, k %s %s, v %s %s must be F32 (B,Tl,H,D), (B,Tl,Hkv,D) x2",
             q->name, mt_shape_str(q), k->name, mt_shape_str(k), v->name, mt_shape_str(v));
    const int64_t H = q->shape[2], Hkv = k->shape[2], Tl = q->shape[1];
    MT_CHECK(k->shape[0] == q->shape[0] && k->shape[1] == Tl && k->shape[3] == q->shape[3] &&
                 Hkv > 0 && H % Hkv == 0,
             "cp_attention: q %s %s and k %s %s: B, Tl, D must match and H a multiple of Hkv",
             q->name, mt_shape_str(q), k->name, mt_shape_str(k));
    if (seg)
        MT_CHECK(seg->dtype == MT_I32 && seg->ndim == 2 && seg->shape[0] == q->shape[0] &&
                     seg->shape[1] == Tl,
                 "cp_attention: %s %s %s must be I32 (B,Tl) matching %s %s", seg->name,
                 mt_shape_str(seg), mt_dtype_name(seg->dtype), q->name, mt_shape_str(q));
    if (!g) return;
    MT_CHECK(g->size >= 1 && g->rank >= 0 && g->rank < g->size,
             "cp_attention: rank %d of a context group of %d", g->rank, g->size);
    if (g->size == 1) return;
    MT_CHECK(g->allgather && g->reduce_scatter,
             "cp_attention: the context group (size %d) lacks its allgather or reduce_scatter",
             g->size);
    MT_CHECK(Tl % 2 == 0 && (int64_t)g->size * Tl <= INT32_MAX,
             "cp_attention: %lld local tokens of %s %s must be even (two chunks of T/(2C), C = "
             "%d) and C Tl at most 2^31 - 1",
             (long long)Tl, q->name, mt_shape_str(q), g->size);
}

mt_tensor *mt_cp_attention(mt_ctx *c, mt_tensor *q, mt_tensor *k, mt_tensor *v, mt_tensor *seg,
                           const mt_cp_group *group, float scale) {
    cp_check(q, k, v, seg, group);
    MT_CHECK(isfinite(scale), "cp_attention: scale %g", (double)scale);
    const int C = group ? group->size : 1, r = group ? group->rank : 0;
    const int64_t B = q->shape[0], Tl = q->shape[1], H = q->shape[2];
    mt_tensor *out = mt_tensor_new(c, MT_F32, 4, q->shape, "cp_attention");
    mt_tensor *in[4] = {q, k, v, seg};
    mt_node *n = mt_node_begin(c, MT_OP_CP_ATTENTION, out, 4, in);
    n->fp[0] = scale;
    n->ip[0] = mt_gemm_mode(c, "cp_attention");
    n->ip[1] = C;
    n->ip[2] = r;
    if (C > 1) {
        const mt_cp_group **slot = mt_arena_alloc(&c->host, sizeof(*slot), "cp_attention group");
        *slot = group;
        n->host = (void *)slot;
    }
    /* the local rows' global positions, on the backend (the kernels read them) */
    n->saved[1] = mt_tensor_new(c, MT_I32, 1, (int64_t[]){Tl}, "cp_attention positions");
    int32_t *pos =
        mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)(Tl ? Tl : 1), "cp_attention positions");
    for (int64_t i = 0; i < Tl; i++) pos[i] = (int32_t)mt_cp_global_index(r, C, C * Tl, i);
    c->be->to_device(n->saved[1]->data, pos, sizeof(int32_t) * (size_t)Tl);
    if (out->requires_grad)
        n->saved[0] = mt_tensor_new(c, MT_F32, 3, (int64_t[]){B, H, Tl}, "cp_attention lse");
    mt_node_run(c, n);
    return out;
}
