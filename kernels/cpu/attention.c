/* attention.c: causal GQA softmax attention (spec section 5) on the CPU: forward with the
 * log-sum-exp saved, flash-style backward from that lse, and the single-token decode step.
 * Reference kernel: fp32 storage, double accumulation for every sum over T or D.
 *
 * bf16 mode (node ip[0] == MT_BF16, mt_ctx.compute_dtype when the node was made): the CPU
 * reference of the CUDA tensor-core (flash) path. The operands of its four products are rounded
 * to bf16 (mt_bf16_round, nearest even; a double is rounded to fp32 first, then to bf16):
 *   forward:  q, k, v; p~ = exp(x - m) with x = scale q.k and m the row's maximum over its
 *             visible positions; out = sum_s bf16(p~_s) v_s / l with l = sum_s p~_s (unrounded);
 *             lse = m + log l;
 *   backward: dout; p = exp(x - lse) (the saved lse); delta = dout.out; dp = dout.v;
 *             ds = p (dp - delta); dq += scale sum bf16(ds) k, dk += scale sum bf16(ds) q,
 *             dv += sum bf16(p) dout.
 * Everything else (scores, softmax, l, lse, delta, dp, ds, every sum) stays fp32 or better:
 * here in double; the device sums in fp32 and rounds p~ against its running maximum (see
 * kernels/cuda/attention_flash.cu), which differs from this by rounding-level amounts only. */
#include <math.h>

#include "attention.h"
#include "bf16.h"
#include "cpu_ops.h"

/* x through bf16 when the mode rounds (double -> fp32 -> bf16), else x */
static inline double attn_r(double x, bool bf16) {
    return bf16 ? (double)mt_bf16_round((float)x) : x;
}

/* Double dot product with 8 independent partial sums: the compiler may not reorder one
 * running sum, and 8 lanes let it use vector registers (fixed order, so deterministic). */
static double attn_dot(const float *a, const float *b, int64_t D) {
    double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t d = 0;
    for (; d + 8 <= D; d += 8)
        for (int j = 0; j < 8; j++) part[j] += (double)a[d + j] * (double)b[d + j];
    double acc =
        ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
    for (; d < D; d++) acc += (double)a[d] * (double)b[d];
    return acc;
}

static void attn_check(int64_t H, int64_t Hkv, int64_t D) {
    MT_CHECK(Hkv > 0 && H % Hkv == 0, "attention: H=%lld is not a multiple of Hkv=%lld",
             (long long)H, (long long)Hkv);
    MT_CHECK(D > 0 && D <= CPU_ATTN_MAX_D, "attention: head dim %lld not in [1, %d]", (long long)D,
             CPU_ATTN_MAX_D);
}

/* One query row against kv positions s < n_s (k, v point at position 0 of the row's kv head,
 * kv_stride floats apart); with seg, only positions whose segment equals seg_t count.
 * Online softmax in double: the running max m rescales the running sum l and the output
 * accumulator when it grows, so one pass suffices. Writes o (D), returns the lse. */
static float attn_row(float *o, const float *qt, const float *k, const float *v, int64_t kv_stride,
                      const int32_t *seg, int32_t seg_t, int64_t n_s, int64_t D, double scale) {
    double acc[CPU_ATTN_MAX_D];
    for (int64_t d = 0; d < D; d++) acc[d] = 0;
    double m = -INFINITY, l = 0;
    for (int64_t s = 0; s < n_s; s++) {
        if (seg && seg[s] != seg_t) continue;
        const float *ks = k + s * kv_stride, *vs = v + s * kv_stride;
        double x = scale * attn_dot(qt, ks, D);
        if (x > m) {
            double r = exp(m - x); /* 0 on the first position (m = -inf) */
            l *= r;
            for (int64_t d = 0; d < D; d++) acc[d] *= r;
            m = x;
        }
        double p = exp(x - m);
        l += p;
        for (int64_t d = 0; d < D; d++) acc[d] += p * (double)vs[d];
    }
    /* l >= 1: the row always sees itself (s = t, same segment) */
    for (int64_t d = 0; d < D; d++) o[d] = (float)(acc[d] / l);
    return (float)(m + log(l));
}

/* The bf16 mode's row (header comment): two passes, the row maximum first, so p~ is rounded
 * relative to the final maximum. q, k, v arrive rounded. */
static float attn_row_bf16(float *o, const float *qt, const float *k, const float *v,
                           int64_t kv_stride, const int32_t *seg, int32_t seg_t, int64_t n_s,
                           int64_t D, double scale) {
    double acc[CPU_ATTN_MAX_D];
    for (int64_t d = 0; d < D; d++) acc[d] = 0;
    double m = -INFINITY, l = 0;
    for (int64_t s = 0; s < n_s; s++) {
        if (seg && seg[s] != seg_t) continue;
        double x = scale * attn_dot(qt, k + s * kv_stride, D);
        if (x > m) m = x;
    }
    for (int64_t s = 0; s < n_s; s++) {
        if (seg && seg[s] != seg_t) continue;
        const float *vs = v + s * kv_stride;
        double p = exp(scale * attn_dot(qt, k + s * kv_stride, D) - m);
        l += p;
        double pr = attn_r(p, true);
        for (int64_t d = 0; d < D; d++) acc[d] += pr * (double)vs[d];
    }
    for (int64_t d = 0; d < D; d++) o[d] = (float)(acc[d] / l);
    return (float)(m + log(l));
}

/* The forward of both modes: every row (b, t, h) through its mode's row routine. */
static void attn_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                     const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D,
                     float scale, bool bf16) {
    attn_check(H, Hkv, D);
    int64_t rep = H / Hkv;
    /* rows are independent; later rows are longer, hence dynamic scheduling */
#pragma omp parallel for schedule(dynamic, 8)
    for (int64_t row = 0; row < B * T * H; row++) {
        int64_t b = row / (T * H), t = (row / H) % T, h = row % H;
        int64_t g = h / rep;
        const float *kb = k + (b * T * Hkv + g) * D, *vb = v + (b * T * Hkv + g) * D;
        const int32_t *segb = seg ? seg + b * T : NULL;
        float l =
            (bf16 ? attn_row_bf16 : attn_row)(out + row * D, q + row * D, kb, vb, Hkv * D, segb,
                                              segb ? segb[t] : 0, t + 1, D, (double)scale);
        if (lse) lse[(b * H + h) * T + t] = l;
    }
}

void cpu_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                       const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D,
                       float scale) {
    attn_fwd(out, lse, q, k, v, seg, B, T, H, Hkv, D, scale, false);
}

void cpu_attention_fwd_bf16(float *out, float *lse, const float *q, const float *k, const float *v,
                            const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                            int64_t D, float scale) {
    attn_fwd(out, lse, q, k, v, seg, B, T, H, Hkv, D, scale, true);
}

/* The backward of both modes; bf16 rounds p and ds before their products (dout, q, k, v arrive
 * rounded in that mode). */
static void attn_bwd(float *dq, float *dk, float *dv, double *delta, const float *dout,
                     const float *out, const float *lse, const float *q, const float *k,
                     const float *v, const int32_t *seg, int64_t B, int64_t T, int64_t H,
                     int64_t Hkv, int64_t D, float scale, bool bf16) {
    attn_check(H, Hkv, D);
    int64_t rep = H / Hkv;
    double sc = (double)scale;
    /* delta[b,h,t] = rowsum(dO o O): the softmax backward's per-row term */
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < B * T * H; row++) {
        int64_t b = row / (T * H), t = (row / H) % T, h = row % H;
        delta[(b * H + h) * T + t] = attn_dot(dout + row * D, out + row * D, D);
    }

    /* dq: one query row at a time, summing over its visible kv positions */
    if (dq) {
#pragma omp parallel for schedule(dynamic, 8)
        for (int64_t row = 0; row < B * T * H; row++) {
            int64_t b = row / (T * H), t = (row / H) % T, h = row % H;
            int64_t g = h / rep, bht = (b * H + h) * T + t;
            const float *qt = q + row * D, *do_t = dout + row * D;
            const int32_t *segb = seg ? seg + b * T : NULL;
            double acc[CPU_ATTN_MAX_D];
            for (int64_t d = 0; d < D; d++) acc[d] = 0;
            for (int64_t s = 0; s <= t; s++) {
                if (segb && segb[s] != segb[t]) continue;
                const float *ks = k + ((b * T + s) * Hkv + g) * D;
                const float *vs = v + ((b * T + s) * Hkv + g) * D;
                double p = exp(sc * attn_dot(qt, ks, D) - (double)lse[bht]);
                double ds = attn_r(p * (attn_dot(do_t, vs, D) - delta[bht]), bf16);
                for (int64_t d = 0; d < D; d++) acc[d] += ds * (double)ks[d];
            }
            for (int64_t d = 0; d < D; d++) dq[row * D + d] += (float)(sc * acc[d]);
        }
    }

    /* dk, dv: one kv row at a time, summing over the later query rows of every head in its
     * group (recomputing P instead of scattering, so no fp32 accumulation across threads) */
    if (dk || dv) {
#pragma omp parallel for schedule(dynamic, 8)
        for (int64_t row = 0; row < B * T * Hkv; row++) {
            int64_t b = row / (T * Hkv), s = (row / Hkv) % T, g = row % Hkv;
            const float *ks = k + row * D, *vs = v + row * D;
            const int32_t *segb = seg ? seg + b * T : NULL;
            double acc_k[CPU_ATTN_MAX_D], acc_v[CPU_ATTN_MAX_D];
            for (int64_t d = 0; d < D; d++) acc_k[d] = acc_v[d] = 0;
            for (int64_t h = g * rep; h < (g + 1) * rep; h++) {
                for (int64_t t = s; t < T; t++) {
                    if (segb && segb[t] != segb[s]) continue;
                    int64_t bht = (b * H + h) * T + t;
                    const float *qt = q + ((b * T + t) * H + h) * D;
                    const float *do_t = dout + ((b * T + t) * H + h) * D;
                    double p = exp(sc * attn_dot(qt, ks, D) - (double)lse[bht]);
                    if (dv) {
                        double pr = attn_r(p, bf16);
                        for (int64_t d = 0; d < D; d++) acc_v[d] += pr * (double)do_t[d];
                    }
                    if (dk) {
                        double ds = attn_r(p * (attn_dot(do_t, vs, D) - delta[bht]), bf16);
                        for (int64_t d = 0; d < D; d++) acc_k[d] += ds * (double)qt[d];
                    }
                }
            }
            if (dk)
                for (int64_t d = 0; d < D; d++) dk[row * D + d] += (float)(sc * acc_k[d]);
            if (dv)
                for (int64_t d = 0; d < D; d++) dv[row * D + d] += (float)acc_v[d];
        }
    }
}

void cpu_attention_bwd(float *dq, float *dk, float *dv, double *delta, const float *dout,
                       const float *out, const float *lse, const float *q, const float *k,
                       const float *v, const int32_t *seg, int64_t B, int64_t T, int64_t H,
                       int64_t Hkv, int64_t D, float scale) {
    attn_bwd(dq, dk, dv, delta, dout, out, lse, q, k, v, seg, B, T, H, Hkv, D, scale, false);
}

void cpu_attention_bwd_bf16(float *dq, float *dk, float *dv, double *delta, const float *dout,
                            const float *out, const float *lse, const float *q, const float *k,
                            const float *v, const int32_t *seg, int64_t B, int64_t T, int64_t H,
                            int64_t Hkv, int64_t D, float scale) {
    attn_bwd(dq, dk, dv, delta, dout, out, lse, q, k, v, seg, B, T, H, Hkv, D, scale, true);
}

void cpu_attention_decode(float *out, const float *q, const float *k_cache, const float *v_cache,
                          int64_t t_len, int64_t B, int64_t t_max, int64_t H, int64_t Hkv,
                          int64_t D, float scale) {
    attn_check(H, Hkv, D);
    MT_CHECK(t_len >= 1 && t_len <= t_max, "attention decode: t_len %lld not in [1, Tmax=%lld]",
             (long long)t_len, (long long)t_max);
    int64_t rep = H / Hkv;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < B * H; row++) {
        int64_t b = row / H, h = row % H, g = h / rep;
        const float *kb = k_cache + (b * t_max * Hkv + g) * D;
        const float *vb = v_cache + (b * t_max * Hkv + g) * D;
        attn_row(out + row * D, q + row * D, kb, vb, Hkv * D, NULL, 0, t_len, D, (double)scale);
    }
}

/* ---- node adapters: in[0..3] q (B,T,H,D), k, v (B,T,Hkv,D), seg (B,T) I32 or NULL;
 * saved[0] lse (B,H,T) (only when a backward will run); fp[0] scale; ip[0] the mode (MT_F32 or
 * MT_BF16, header comment) ---- */

/* In bf16 mode, a scratch copy of t's data rounded through bf16; else the data itself. */
static const float *attn_operand(const mt_node *n, const mt_tensor *t, const float *src,
                                 const char *what) {
    if (n->ip[0] != MT_BF16) return src;
    int64_t count = mt_numel(t);
    float *r = mt_node_scratch(n, sizeof(float) * (size_t)(count ? count : 1), what);
    mt_bf16_round_n(r, src, count);
    return r;
}

void cpu_attention_fwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    const float *qd = attn_operand(n, q, q->data, "attention q bf16");
    const float *kd = attn_operand(n, k, k->data, "attention k bf16");
    const float *vd = attn_operand(n, v, v->data, "attention v bf16");
    (n->ip[0] == MT_BF16 ? cpu_attention_fwd_bf16 : cpu_attention_fwd)(
        n->out->data, n->saved[0] ? n->saved[0]->data : NULL, qd, kd, vd, seg ? seg->data : NULL,
        q->shape[0], q->shape[1], q->shape[2], k->shape[2], q->shape[3], n->fp[0]);
}

void cpu_attention_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    if (!q->grad && !k->grad && !v->grad) return;
    int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2];
    double *delta = mt_node_scratch(n, sizeof(double) * (size_t)(B * H * T), "attention delta");
    const float *qd = attn_operand(n, q, q->data, "attention q bf16");
    const float *kd = attn_operand(n, k, k->data, "attention k bf16");
    const float *vd = attn_operand(n, v, v->data, "attention v bf16");
    const float *dout = attn_operand(n, n->out, n->out->grad, "attention dout bf16");
    (n->ip[0] == MT_BF16 ? cpu_attention_bwd_bf16 : cpu_attention_bwd)(
        q->grad, k->grad, v->grad, delta, dout, n->out->data, n->saved[0]->data, qd, kd, vd,
        seg ? seg->data : NULL, B, T, H, k->shape[2], q->shape[3], n->fp[0]);
}
