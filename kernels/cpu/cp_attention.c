/* cp_attention.c: the CPU node adapters of context parallelism's attention
 * (autograd/op_cp_attention.c): the local queries against the gathered keys through the
 * position kernels of attention.c (cpu_attention_pos_*). Node: see op_cp_attention.c. In bf16
 * mode q, k, v and dout are rounded before the exchange (rounding commutes with the copies). */
#include "../../autograd/ops.h"
#include "attention.h"
#include "bf16.h"
#include "cpu_ops.h"

static const float *cp_operand(const mt_node *n, const mt_tensor *t, const float *src,
                               const char *what) {
    if (n->ip[0] != MT_BF16) return src;
    const int64_t count = mt_numel(t);
    float *r = mt_node_scratch(n, sizeof(float) * (size_t)(count ? count : 1), what);
    mt_bf16_round_n(r, src, count);
    return r;
}

void cpu_cp_attention_fwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    const float *qd = cp_operand(n, q, q->data, "cp_attention q bf16");
    mt_cp_kv kv;
    mt_cp_attention_gather(n, cp_operand(n, k, k->data, "cp_attention k bf16"),
                           cp_operand(n, v, v->data, "cp_attention v bf16"), &kv);
    cpu_attention_pos_fwd(n->out->data, n->saved[0] ? n->saved[0]->data : NULL, qd, kv.k, kv.v,
                          seg ? seg->data : NULL, kv.seg, kv.q_pos, q->shape[0], q->shape[1], kv.T,
                          q->shape[2], k->shape[2], q->shape[3], n->fp[0], n->ip[0] == MT_BF16);
}

void cpu_cp_attention_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    const bool alone = n->ip[1] == 1;
    /* with a group every rank takes part in the exchanges, gradients or not */
    if (alone && !q->grad && !k->grad && !v->grad) return;
    const int64_t B = q->shape[0], Tl = q->shape[1], H = q->shape[2], Hkv = k->shape[2];
    const int64_t D = q->shape[3];
    double *delta = mt_node_scratch(n, sizeof(double) * (size_t)(B * H * Tl), "cp_attention delta");
    const float *qd = cp_operand(n, q, q->data, "cp_attention q bf16");
    const float *dout = cp_operand(n, n->out, n->out->grad, "cp_attention dout bf16");
    mt_cp_kv kv;
    mt_cp_attention_gather(n, cp_operand(n, k, k->data, "cp_attention k bf16"),
                           cp_operand(n, v, v->data, "cp_attention v bf16"), &kv);
    float *dk = k->grad, *dv = v->grad, *dkv = NULL;
    if (!alone) { /* the gathered keys' gradients, exchanged below */
        const size_t kvn = (size_t)(B * kv.T * Hkv * D);
        dkv = mt_node_scratch(n, sizeof(float) * 2 * kvn, "cp_attention gathered dkv");
        n->ctx->be->zero(dkv, sizeof(float) * 2 * kvn);
        dk = dkv;
        dv = dkv + kvn;
    }
    cpu_attention_pos_bwd(q->grad, dk, dv, delta, dout, n->out->data, n->saved[0]->data, qd, kv.k,
                          kv.v, seg ? seg->data : NULL, kv.seg, kv.q_pos, B, Tl, kv.T, H, Hkv, D,
                          n->fp[0], n->ip[0] == MT_BF16);
    if (!alone) mt_cp_attention_scatter(n, dkv, &kv);
}
