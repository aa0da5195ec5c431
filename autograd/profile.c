/* profile.c: see profile.h. The cost of each op's kernel call, from its node's shapes.
 *
 * Conventions of the formulas below:
 * - GEMM (M x N x K): 2 M N K FLOPs. A backward GEMM pair (dX = dY W, dW = dY^T X) counts only
 *   the products whose input has a gradient (the kernels skip the others).
 * - Elementwise ops (silu, sigmoid, swiglu, add, mul, scale, axpby, the copies of view, concat,
 *   embedding, dispatch, combine, exchange): one FLOP per element written (n), whatever the
 *   function costs (exp and division count as one); they are judged by their GB/s.
 * - Bytes: each tensor the kernel reads or writes counted once (mt_nbytes), a gradient that is
 *   accumulated into twice (read and written): the least traffic the call can have. Scratch a
 *   kernel carves and re-reads (attention's tiles, the lightning state) is not counted.
 * - Attention-like ops count the causal (query, key) pairs of one head, P(T, W) =
 *   sum_t min(t + 1, W) (W = T without a window): 4 D FLOPs a pair forward (q.k and p v),
 *   10 D backward (s again, dP = dO v, dq, dk, dv: FlashAttention's 2.5 x). Packed samples
 *   (seg given) see fewer keys than that: the count is then an upper bound (marked upper). */
#include "profile.h"
#include "context_parallel.h"

#include <string.h>
#include <time.h>

double mt_profile_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double nb(const mt_tensor *t) { return t ? (double)mt_nbytes(t) : 0.0; }
static double numel(const mt_tensor *t) { return t ? (double)mt_numel(t) : 0.0; }
/* the backward writes this input's gradient */
static bool has_grad(const mt_tensor *t) { return t && t->grad && t->dtype != MT_I32; }

/* Causal (query, key) pairs of one head over T positions with at most W keys each. */
static double causal_pairs(int64_t T, int64_t W) {
    if (W <= 0 || W >= T) return (double)T * (double)(T + 1) / 2;
    return (double)W * (double)(W + 1) / 2 + (double)(T - W) * (double)W;
}

/* Pointwise ops: forward reads the inputs and writes the output, n FLOPs; backward reads dY
 * (and the inputs when reads_in: the derivative depends on them) and accumulates into each
 * input's gradient, n FLOPs per gradient. */
static void cost_pointwise(const mt_node *n, bool bwd, bool reads_in, double *f, double *b) {
    const double y = numel(n->out);
    if (!bwd) {
        *f = y;
        *b = nb(n->out);
        for (int i = 0; i < n->n_in; i++) *b += nb(n->in[i]);
        return;
    }
    *f = 0;
    *b = nb(n->out);
    for (int i = 0; i < n->n_in; i++) {
        if (reads_in) *b += nb(n->in[i]);
        if (has_grad(n->in[i])) {
            *f += y;
            *b += 2 * nb(n->in[i]);
        }
    }
}

/* x (..., K) as N rows times w (M, K)^T: 2 N M K forward; backward 2 N M K for dX and for dW. */
static void cost_matmul(const mt_node *n, bool bwd, double *f, double *b) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    const double M = (double)w->shape[0], K = (double)w->shape[1], N = numel(x) / (K ? K : 1);
    const double g = 2 * N * M * K;
    if (!bwd) {
        *f = g;
        *b = nb(x) + nb(w) + nb(n->out);
        return;
    }
    *f = (has_grad(x) ? g : 0) + (has_grad(w) ? g : 0);
    *b = nb(n->out) + nb(x) + nb(w) + (has_grad(x) ? 2 * nb(x) : 0) + (has_grad(w) ? 2 * nb(w) : 0);
}

/* The causal pairs of one head summed over the rows of seg (B,T) when its ids rise along each
 * row (packed samples as the data pipeline makes them: each sample a sequence of its own, as the
 * CPU kernel runs them), read on the host; -1 otherwise (ids that repeat after a gap, or on a
 * device): the caller then counts every causal pair of the row, an upper bound. */
static double seg_run_pairs(const mt_node *n, const mt_tensor *seg, int64_t W) {
    if (n->ctx->be->dev != MT_CPU) return -1;
    const int64_t B = seg->shape[0], T = seg->shape[1];
    const int32_t *id = seg->data;
    double pairs = 0;
    for (int64_t r = 0; r < B; r++)
        for (int64_t s0 = 0, s1; s0 < T; s0 = s1) {
            for (s1 = s0 + 1; s1 < T && id[r * T + s1] == id[r * T + s0]; s1++) continue;
            if (s1 < T && id[r * T + s1] < id[r * T + s0]) return -1;
            pairs += causal_pairs(s1 - s0, W);
        }
    return pairs;
}

/* Softmax attention, q (B,T,H,D), k and v (B,T,Hkv,D), ip[1] = window: 4 D a pair forward, 10 D
 * backward; the log-sum-exp (B,H,T) saved. */
static void cost_attention(const mt_node *n, bool bwd, double *f, double *b, bool *upper) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    const int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2], D = q->shape[3];
    const double runs = seg ? seg_run_pairs(n, seg, n->ip[1]) : -1;
    const double pairs = (double)H * (runs >= 0 ? runs : (double)B * causal_pairs(T, n->ip[1]));
    const double io = nb(q) + nb(k) + nb(v) + nb(n->out) + nb(seg) + nb(n->saved[0]);
    *upper = seg != NULL && runs < 0;
    if (!bwd) {
        *f = 4.0 * (double)D * pairs;
        *b = io;
    } else {
        *f = 10.0 * (double)D * pairs;
        *b = io + nb(n->out) /* dO */ + 2 * (nb(q) + nb(k) + nb(v));
    }
}

/* Context parallelism's attention (ip[1] = C, ip[2] = rank): the local rows' causal pairs,
 * chunk c of n tokens seeing c n + i + 1 keys at row i (a C-th of the row's pairs); the bytes
 * as attention over the gathered K and V (C times the local ones, read and, backward, written). */
static void cost_cp_attention(const mt_node *n, bool bwd, double *f, double *b, bool *upper) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    const int64_t B = q->shape[0], Tl = q->shape[1], H = q->shape[2], D = q->shape[3];
    const int C = (int)n->ip[1], r = (int)n->ip[2];
    double rows = C == 1 ? causal_pairs(Tl, 0) : 0;
    for (int j = 0; C > 1 && j < 2; j++) {
        const double nn = (double)(Tl / 2), c0 = (double)mt_cp_chunk_of(r, C, j);
        rows += nn * c0 * nn + nn * (nn + 1) / 2;
    }
    const double pairs = (double)B * (double)H * rows, kv = C * (nb(k) + nb(v));
    const double io = nb(q) + kv + nb(n->out) + C * nb(seg) + nb(n->saved[0]);
    *upper = seg != NULL;
    *f = (bwd ? 10.0 : 4.0) * (double)D * pairs;
    *b = bwd ? io + nb(n->out) + 2 * (nb(q) + kv) : io;
}

/* Lightning attention, qkv (B,T,H,3D), ip[0] = block. Naive form (block 0): all causal pairs at
 * 4 D. Block form: per block of L positions the intra-block pairs L (L + 1) / 2 at 4 D, and the
 * state's two D x D products (q S, S += k^T v) at 2 L D^2 each. Backward: twice the forward
 * (each product's two gradients). */
static void cost_lightning(const mt_node *n, bool bwd, double *f, double *b) {
    const mt_tensor *qkv = n->in[0];
    const int64_t B = qkv->shape[0], T = qkv->shape[1], H = qkv->shape[2], D = qkv->shape[3] / 3;
    const int64_t blk = n->ip[0];
    double per_head = 0;
    if (blk <= 0) {
        per_head = 4.0 * (double)D * causal_pairs(T, 0);
    } else {
        for (int64_t t0 = 0; t0 < T; t0 += blk) {
            const double L = (double)(T - t0 < blk ? T - t0 : blk);
            per_head += 2.0 * (double)D * L * (L + 1) + 4.0 * L * (double)D * (double)D;
        }
    }
    const double fwd = (double)B * (double)H * per_head;
    const double io = nb(qkv) + nb(n->in[1]) + nb(n->in[2]) + nb(n->out);
    *f = bwd ? 2 * fwd : fwd;
    *b = bwd ? io + nb(n->out) + 2 * nb(qkv) : io;
}

/* Experts of N tokens, K each, w1 and w3 (E,F,C), w2 (E,C,F): three GEMMs of 2 C F a slot, N K
 * slots (the rows per expert vary, their sum does not): 6 N K C F forward, 12 N K C F backward
 * (dX and dW of each). Weight bytes: the experts that got rows where the CPU backend's offsets
 * say so (host memory), else all E (an upper bound). */
static void cost_moe_experts(const mt_node *n, bool bwd, double *f, double *b, bool *upper) {
    const mt_tensor *x = n->in[0], *w1 = n->in[3];
    const double N = (double)x->shape[0], C = (double)x->shape[1];
    const double K = (double)n->in[1]->shape[1];
    const int64_t E = w1->shape[0];
    const double F = (double)w1->shape[1];
    double used = (double)E;
    const mt_tensor *off = n->saved[0];
    if (off && n->ctx && n->ctx->be == mt_backend_cpu() && off->data) {
        const int32_t *o = off->data;
        used = 0;
        for (int64_t e = 0; e < E; e++) used += o[e + 1] > o[e];
    } else {
        *upper = true;
    }
    const double wbytes = used * 3.0 * F * C * 4.0, slots = N * K;
    const double h = 2 * slots * F * 4.0; /* h1, h3 */
    if (!bwd) {
        *f = 6 * slots * C * F;
        *b = nb(x) + wbytes + nb(n->out) + nb(n->in[1]) + nb(n->in[2]) + h;
    } else {
        *f = 12 * slots * C * F;
        *b = nb(n->out) + 3 * nb(x) + 3 * wbytes + h + nb(n->in[1]) + 2 * nb(n->in[2]);
    }
}

/* One expert on its `rows` slots (ip[2], what the call did): 6 rows C F forward, 12 backward. */
static void cost_expert_ffn(const mt_node *n, bool bwd, double *f, double *b) {
    const mt_tensor *w1 = n->in[3];
    const double F = (double)w1->shape[0], C = (double)w1->shape[1], rows = (double)n->ip[2];
    const double w = rows > 0 ? 3 * F * C * 4.0 : 0, x = rows * C * 4.0, h = 2 * rows * F * 4.0;
    *f = (bwd ? 12 : 6) * rows * C * F;
    *b = bwd ? x + 2 * x + x + 3 * w + h : x + w + x + h;
}

/* The fused lm_head + loss over M labelled rows (ip[1]) in chunks of R (ip[2]): 2 M V C + 3 M V
 * (softmax) forward, each chunk reading all of w (and writing the logits when kept, saved[2]);
 * backward forms the logits again (unless kept: then reads them) and adds dX and dW: 2 M V C
 * each (dW read and written per chunk). */
static void cost_linear_ce(const mt_node *n, bool bwd, double *f, double *b) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    const double V = (double)w->shape[0], C = (double)w->shape[1], M = (double)n->ip[1];
    const int64_t R = n->ip[2] > 0 ? n->ip[2] : 1;
    const double chunks = (double)((n->ip[1] + R - 1) / R), xrows = M * C * 4.0;
    const double lab = nb(n->in[2]) + nb(n->in[3]) + nb(n->out) + M * 4.0;
    const double kept_logits = n->saved[2] ? M * V * 4.0 : 0.0;
    if (!bwd) {
        *f = 2 * M * V * C + 3 * M * V;
        *b = chunks * nb(w) + xrows + lab + kept_logits;
    } else {
        const bool kept = kept_logits > 0;
        *f = (kept ? 0 : 2 * M * V * C) + 3 * M * V + (has_grad(x) ? 2 * M * V * C : 0) +
             (has_grad(w) ? 2 * M * V * C : 0);
        *b = chunks * nb(w) * (has_grad(w) ? 3 : 1) + xrows * (has_grad(x) ? 3 : 1) + lab +
             kept_logits;
    }
}

/* MSA: block selection, q (or iq) (B,T,Hx,Dx), idx (B,Hkv,T,topk), ip[0] = block. The support of
 * a query is at most topk blocks of `block` keys, and at most its t + 1 keys: P(T, topk block)
 * pairs per head, an upper bound (the local block is partial, fewer blocks may be visible). */
static double msa_pairs(const mt_node *n, const mt_tensor *idx) {
    const int64_t T = idx->shape[2], topk = idx->shape[3], blk = n->ip[0];
    return causal_pairs(T, topk * blk);
}

static void cost_msa(const mt_node *n, bool bwd, double *f, double *b, bool *upper) {
    *upper = true;
    if (n->op == MT_OP_MSA_SELECT) { /* iq.ik over every visible key, then the top-k */
        const mt_tensor *iq = n->in[0];
        const int64_t B = iq->shape[0], T = iq->shape[1], Hi = iq->shape[2], Di = iq->shape[3];
        *f = 2.0 * (double)Di * (double)B * (double)Hi * causal_pairs(T, 0);
        *b = nb(iq) + nb(n->in[1]) + nb(n->in[2]) + nb(n->in[3]) + nb(n->out);
        *upper = n->in[3] != NULL;
        return;
    }
    if (n->op == MT_OP_MSA_ATTENTION) { /* as attention over the selected support */
        const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
        const double pairs = (double)q->shape[0] * (double)q->shape[2] * msa_pairs(n, n->in[3]);
        const double io = nb(q) + nb(k) + nb(v) + nb(n->in[3]) + nb(n->out) + nb(n->saved[0]);
        *f = (bwd ? 10.0 : 4.0) * (double)q->shape[3] * pairs;
        *b = bwd ? io + nb(n->out) + 2 * (nb(q) + nb(k) + nb(v)) : io;
        return;
    }
    /* the indexer KL: per index head and pair, the G query heads' q.k (2 D each) and iq.ik
     * (2 Di); backward the same again and diq, dik (4 Di) */
    const mt_tensor *q = n->in[0], *k = n->in[1], *iq = n->in[2], *ik = n->in[3];
    const double G = (double)(q->shape[2] / k->shape[2]), D = (double)q->shape[3];
    const double Di = (double)iq->shape[3];
    const double pairs = (double)q->shape[0] * (double)k->shape[2] * msa_pairs(n, n->in[4]);
    const double io = nb(q) + nb(k) + nb(iq) + nb(ik) + nb(n->in[4]);
    *f = pairs * (2 * D * G + 2 * Di + (bwd ? 4 * Di : 0));
    *b = bwd ? io + 2 * (nb(iq) + nb(ik)) : io;
}

/* Router and losses over rows of logits (N,X) (X = E or V): about 4 N X FLOPs forward (max,
 * exp, sum, scale; the top-k's comparisons as one more), 3 N X backward. */
static void cost_rows(const mt_node *n, bool bwd, double *f, double *b) {
    const mt_tensor *lg = n->in[0];
    const double NX = numel(lg);
    double extra = nb(n->out);
    for (int i = 0; i < MT_MAX_SAVED; i++) extra += nb(n->saved[i]);
    for (int i = 1; i < n->n_in; i++) extra += nb(n->in[i]);
    *f = (bwd ? 3 : 4) * NX;
    *b = bwd ? 3 * nb(lg) + extra : nb(lg) + extra;
}

void mt_profile_cost(const mt_node *n, bool bwd, double *flops, double *bytes, bool *upper) {
    double f = 0, b = 0;
    *upper = false;
    switch (n->op) {
    case MT_OP_VIEW: /* shares its input's data: the forward moves nothing */
        if (bwd) cost_pointwise(n, true, false, &f, &b);
        break;
    case MT_OP_CONCAT:
    case MT_OP_ADD:
    case MT_OP_SCALE:
    case MT_OP_AXPBY:
    case MT_OP_MOE_COMBINE:
    case MT_OP_EP_EXCHANGE:
        cost_pointwise(n, bwd, false, &f, &b);
        break;
    case MT_OP_SILU:
    case MT_OP_SIGMOID:
    case MT_OP_SWIGLU:
    case MT_OP_MUL:
        cost_pointwise(n, bwd, true, &f, &b);
        break;
    case MT_OP_EMBEDDING: /* ids in[0]: a row copy per id; backward adds the rows back */
        f = numel(n->out);
        b = (bwd ? 3 : 2) * nb(n->out) + nb(n->in[0]);
        break;
    case MT_OP_MOE_DISPATCH: /* x in[0], idx in[1]: a row copy per slot; backward sums back */
        f = numel(n->out);
        b = bwd ? nb(n->out) + 2 * nb(n->in[0]) + nb(n->in[1]) : 2 * nb(n->out) + nb(n->in[1]);
        break;
    case MT_OP_MATMUL:
        cost_matmul(n, bwd, &f, &b);
        break;
    case MT_OP_RMSNORM: { /* forward 4 n (square, sum, x rstd, w); backward 6 n */
        const mt_tensor *x = n->in[0], *w = n->in[1];
        f = (bwd ? 6 : 4) * numel(x);
        b = bwd ? nb(n->out) + 3 * nb(x) + nb(n->saved[0]) + (has_grad(w) ? 3 : 1) * nb(w)
                : nb(x) + nb(w) + nb(n->out) + nb(n->saved[0]);
        break;
    }
    case MT_OP_ROPE: { /* 3 FLOPs per rotated element (two products and a sum) */
        const mt_tensor *x = n->in[0];
        const double rotated = numel(x) / (double)x->shape[3] * (double)n->ip[0];
        f = 3 * rotated;
        b = bwd ? 3 * nb(x) + nb(n->in[1]) : 2 * nb(x) + nb(n->in[1]);
        break;
    }
    case MT_OP_ATTENTION:
        cost_attention(n, bwd, &f, &b, upper);
        break;
    case MT_OP_CP_ATTENTION:
        cost_cp_attention(n, bwd, &f, &b, upper);
        break;
    case MT_OP_LIGHTNING:
        cost_lightning(n, bwd, &f, &b);
        break;
    case MT_OP_MOE_ROUTE:
    case MT_OP_MOE_ROUTE_SIGMOID:
    case MT_OP_MOE_AUX:
    case MT_OP_CROSS_ENTROPY:
        cost_rows(n, bwd, &f, &b);
        break;
    case MT_OP_MOE_EXPERTS:
        cost_moe_experts(n, bwd, &f, &b, upper);
        break;
    case MT_OP_MOE_EXPERT_FFN:
        cost_expert_ffn(n, bwd, &f, &b);
        break;
    case MT_OP_LINEAR_CROSS_ENTROPY:
        cost_linear_ce(n, bwd, &f, &b);
        break;
    case MT_OP_MSA_SELECT:
    case MT_OP_MSA_ATTENTION:
    case MT_OP_MSA_KL:
        cost_msa(n, bwd, &f, &b, upper);
        break;
    default:
        break;
    }
    *flops = f;
    *bytes = b;
}

static void stat_add(mt_profile_stat *s, double sec, double flops, double bytes, bool upper) {
    s->calls++;
    s->sec += sec;
    s->flops += flops;
    s->bytes += bytes;
    s->upper = s->upper || upper;
}

void mt_profile_kernel(mt_ctx *c, const mt_node *n, bool backward) {
    const mt_backend *be = c->be;
    const bool device = be->dev != MT_CPU && be->sync; /* time the kernel, not its launch */
    if (device) be->sync();
    const double t0 = mt_profile_now();
    if (backward)
        be->ops[n->op].bwd(n);
    else
        be->ops[n->op].fwd(n);
    if (device) be->sync();
    const double dt = mt_profile_now() - t0;
    double f, b;
    bool upper;
    mt_profile_cost(n, backward, &f, &b, &upper);
    stat_add(&c->prof->op[n->op][backward ? 1 : 0], dt, f, b, upper);
}

void mt_profile_add(mt_profile *p, const char *name, int dir, double sec, double flops,
                    double bytes) {
    int i = 0;
    while (i < p->n_extra && !(p->extra_dir[i] == dir && !strcmp(p->extra_name[i], name))) i++;
    if (i == p->n_extra) {
        MT_CHECK(p->n_extra < MT_PROFILE_MAX_EXTRA, "profile: more than %d named rows (at %s)",
                 MT_PROFILE_MAX_EXTRA, name);
        p->extra_name[i] = name;
        p->extra_dir[i] = dir;
        p->n_extra++;
    }
    stat_add(&p->extra[i], sec, flops, bytes, false);
}
