/* op_msa.c: constructors of MiniMax-M3's block-sparse attention ops (spec sections 4-5): the
 * indexer's block selection, attention over the selection, and the indexer's sparse-KL loss.
 * The node layouts written here are the contract with every backend (kernels/cpu/msa_*.c). */
#include <limits.h>
#include <math.h>

#include "ops.h"

static void msa_check_bt(const char *op, const mt_tensor *ids, const mt_tensor *x, mt_dtype dt) {
    MT_CHECK(ids->dtype == dt && ids->ndim == 2 && ids->shape[0] == x->shape[0] &&
                 ids->shape[1] == x->shape[1],
             "%s: %s %s %s must be %s (B,T) matching %s %s", op, ids->name, mt_shape_str(ids),
             mt_dtype_name(ids->dtype), mt_dtype_name(dt), x->name, mt_shape_str(x));
}

/* pos (required), seg (optional) against the keys x (B,Tk,...); block in range; q_slot (Tq)
 * I32 for the queries xq (B,Tq,...), or NULL with Tq = Tk */
static void msa_check_rows(const char *op, const mt_tensor *x, const mt_tensor *pos,
                           const mt_tensor *seg, int block, const mt_tensor *xq,
                           const mt_tensor *q_slot) {
    MT_CHECK(pos, "%s: pos must not be NULL (x %s)", op, x->name);
    msa_check_bt(op, pos, x, MT_I32);
    if (seg) msa_check_bt(op, seg, x, MT_I32);
    MT_CHECK(block >= 1 && x->shape[1] <= INT_MAX, "%s: block %d, T = %lld", op, block,
             (long long)x->shape[1]);
    MT_CHECK(xq->shape[0] == x->shape[0] && (q_slot || xq->shape[1] == x->shape[1]),
             "%s: queries %s %s against keys %s %s: B must match, and T without q_slot", op,
             xq->name, mt_shape_str(xq), x->name, mt_shape_str(x));
    if (q_slot) /* the slots' values are the trainer's (mt_cp_local_slots), on the backend */
        MT_CHECK(q_slot->dtype == MT_I32 && q_slot->ndim == 1 && q_slot->shape[0] == xq->shape[1] &&
                     xq->shape[1] <= x->shape[1],
                 "%s: q_slot %s %s %s must be I32 (Tq) for queries %s %s of keys %s %s", op,
                 q_slot->name, mt_shape_str(q_slot), mt_dtype_name(q_slot->dtype), xq->name,
                 mt_shape_str(xq), x->name, mt_shape_str(x));
}

/* iq (B,Tq,Hi,Di) and ik (B,Tk,1,Di) (Tq = Tk checked by msa_check_rows without q_slot) */
static void msa_check_index(const char *op, const mt_tensor *iq, const mt_tensor *ik) {
    MT_CHECK(iq->dtype == MT_F32 && ik->dtype == MT_F32 && iq->ndim == 4 && ik->ndim == 4 &&
                 ik->shape[0] == iq->shape[0] && ik->shape[2] == 1 && ik->shape[3] == iq->shape[3],
             "%s: iq %s %s, ik %s %s must be F32 (B,Tq,Hi,Di), (B,Tk,1,Di)", op, iq->name,
             mt_shape_str(iq), ik->name, mt_shape_str(ik));
}

/* idx (B,Hkv,T,topk) I32 for x (B,T,...) */
static void msa_check_sel(const char *op, const mt_tensor *idx, const mt_tensor *x, int64_t Hkv) {
    MT_CHECK(idx->dtype == MT_I32 && idx->ndim == 4 && idx->shape[0] == x->shape[0] &&
                 idx->shape[1] == Hkv && idx->shape[2] == x->shape[1] && idx->shape[3] >= 1,
             "%s: idx %s %s %s must be I32 (B,Hkv,T,topk) = (%lld,%lld,%lld,topk)", op, idx->name,
             mt_shape_str(idx), mt_dtype_name(idx->dtype), (long long)x->shape[0], (long long)Hkv,
             (long long)x->shape[1]);
}

/* q (B,Tq,H,D), k (B,Tk,Hkv,D) [and v like k] */
static void msa_check_qk(const char *op, const mt_tensor *q, const mt_tensor *k,
                         const mt_tensor *v) {
    MT_CHECK(q->dtype == MT_F32 && k->dtype == MT_F32 && q->ndim == 4 && k->ndim == 4 &&
                 k->shape[0] == q->shape[0] && k->shape[3] == q->shape[3] && k->shape[2] > 0 &&
                 q->shape[2] % k->shape[2] == 0,
             "%s: q %s %s, k %s %s must be F32 (B,Tq,H,D), (B,Tk,Hkv,D) with H a multiple of Hkv",
             op, q->name, mt_shape_str(q), k->name, mt_shape_str(k));
    if (v)
        MT_CHECK(v->dtype == MT_F32 && mt_same_shape(v, k), "%s: v %s %s must match k %s %s", op,
                 v->name, mt_shape_str(v), k->name, mt_shape_str(k));
}

mt_tensor *mt_msa_select(mt_ctx *c, mt_tensor *iq, mt_tensor *ik, mt_tensor *pos, mt_tensor *seg,
                         mt_tensor *q_slot, int block, int topk) {
    msa_check_index("msa_select", iq, ik);
    msa_check_rows("msa_select", ik, pos, seg, block, iq, q_slot);
    MT_CHECK(topk >= 1 && topk <= 4096, "msa_select: topk %d not in [1, 4096] (iq %s)", topk,
             iq->name);
    const int64_t B = iq->shape[0], T = iq->shape[1], Hi = iq->shape[2];
    mt_tensor *idx = mt_tensor_new(c, MT_I32, 4, (int64_t[]){B, Hi, T, topk}, "msa_select.idx");
    mt_tensor *in[5] = {iq, ik, pos, seg, q_slot};
    mt_node *n = mt_node_begin(c, MT_OP_MSA_SELECT, idx, 5, in);
    idx->requires_grad = false; /* an integer selection: the node never reaches the tape */
    n->ip[0] = block;
    n->ip[1] = topk;
    mt_node_run(c, n);
    return idx;
}

mt_tensor *mt_msa_attention(mt_ctx *c, mt_tensor *q, mt_tensor *k, mt_tensor *v, mt_tensor *idx,
                            mt_tensor *pos, mt_tensor *seg, mt_tensor *q_slot, int block,
                            float scale) {
    msa_check_qk("msa_attention", q, k, v);
    msa_check_rows("msa_attention", k, pos, seg, block, q, q_slot);
    msa_check_sel("msa_attention", idx, q, k->shape[2]);
    MT_CHECK(isfinite(scale), "msa_attention: scale %g", (double)scale);
    const int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2];
    mt_tensor *out = mt_tensor_new(c, MT_F32, 4, q->shape, "msa_attention");
    mt_tensor *in[7] = {q, k, v, idx, pos, seg, q_slot};
    mt_node *n = mt_node_begin(c, MT_OP_MSA_ATTENTION, out, 7, in);
    n->ip[0] = block;
    n->fp[0] = scale;
    if (out->requires_grad) /* the log-sum-exp is only needed by a backward */
        n->saved[0] = mt_tensor_new(c, MT_F32, 3, (int64_t[]){B, H, T}, "msa_attention lse");
    mt_node_run(c, n);
    return out;
}

mt_tensor *mt_msa_kl(mt_ctx *c, mt_tensor *q, mt_tensor *k, mt_tensor *iq, mt_tensor *ik,
                     mt_tensor *idx, mt_tensor *pos, mt_tensor *seg, mt_tensor *mask,
                     mt_tensor *q_slot, int block, float scale, float index_scale, float coef,
                     float denom) {
    msa_check_qk("msa_kl", q, k, NULL);
    msa_check_index("msa_kl", iq, ik);
    MT_CHECK(iq->shape[0] == q->shape[0] && iq->shape[1] == q->shape[1] &&
                 iq->shape[2] == k->shape[2] && ik->shape[1] == k->shape[1],
             "msa_kl: iq %s %s must be (B,Tq,Hi,Di) with Hi = Hkv of k %s %s, and ik %s %s its "
             "Tk rows",
             iq->name, mt_shape_str(iq), k->name, mt_shape_str(k), ik->name, mt_shape_str(ik));
    msa_check_rows("msa_kl", k, pos, seg, block, q, q_slot);
    msa_check_sel("msa_kl", idx, q, k->shape[2]);
    if (mask) msa_check_bt("msa_kl", mask, q, MT_F32);
    MT_CHECK(isfinite(scale) && isfinite(index_scale) && isfinite(coef) && denom > 0 &&
                 isfinite(denom),
             "msa_kl: scale %g, index_scale %g, coef %g, denom %g (denom > 0)", (double)scale,
             (double)index_scale, (double)coef, (double)denom);
    mt_tensor *loss = mt_tensor_new(c, MT_F32, 0, NULL, "msa_kl");
    mt_tensor *in[9] = {q, k, iq, ik, idx, pos, seg, mask, q_slot};
    mt_node *n = mt_node_begin(c, MT_OP_MSA_KL, loss, 9, in);
    /* the teacher (q, k) is a constant: only iq, ik make the loss need a backward */
    loss->requires_grad = c->grad_enabled && (iq->requires_grad || ik->requires_grad);
    n->ip[0] = block;
    n->fp[0] = scale;
    n->fp[1] = index_scale;
    n->fp[2] = coef;
    n->fp[3] = denom;
    mt_node_run(c, n);
    return loss;
}
