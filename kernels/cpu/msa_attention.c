/* msa_attention.c: softmax attention restricted to the MSA selection (spec 4.3) on the CPU:
 * forward with the lse saved, backward from it, the inverse of a selection (which queries
 * chose a key block) and the single-token decode step.
 *
 * fp32 mode only (the products of q.k and dout.v are fp32 dot products, exp is cpu_expf, the
 * softmax sums and the output / gradient accumulators are double): the reference of a device
 * kernel. The cost is the support, topk*block keys per query row, never T^2:
 *   forward:  per query row (b, t, h), the scores of its selected blocks' keys into a row
 *             buffer, their maximum, p = exp(x - m), out = sum p v / sum p, lse = m + log l.
 *   backward: delta = dout . out; dq by query row (p recomputed from the lse); dk and dv by key
 *             block: the selection's inverse lists the queries that chose each block, so one
 *             thread owns a key block's dk, dv rows (no atomics, a fixed order). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_math.h"
#include "cpu_ops.h"
#include "msa.h"

#define MSA_MAX_D 1024

static inline float msa_dotf(const float *restrict a, const float *restrict b, int64_t D) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

static void msa_check_dims(const char *op, int64_t H, int64_t Hkv, int64_t D, int block, int topk) {
    MT_CHECK(Hkv > 0 && H % Hkv == 0 && D > 0 && D <= MSA_MAX_D && block >= 1 && topk >= 1,
             "%s: H=%lld Hkv=%lld D=%lld block=%d topk=%d (H a multiple of Hkv, D <= %d)", op,
             (long long)H, (long long)Hkv, (long long)D, block, topk, MSA_MAX_D);
}

void cpu_msa_check_idx(const int32_t *idx, const int32_t *pos, int64_t B, int64_t Hkv, int64_t T,
                       int block, int topk) {
    for (int64_t r = 0; r < B * Hkv * T; r++) {
        const int64_t b = r / (Hkv * T), t = r % T;
        const int32_t local = pos[b * T + t] / block, *sel = idx + r * topk;
        for (int s = 0; s < topk; s++) {
            MT_CHECK(sel[s] >= -1 && sel[s] <= local,
                     "msa: idx[%lld,%lld,%lld,%d] = %d is not -1 or a block in [0, %d]",
                     (long long)b, (long long)((r / T) % Hkv), (long long)t, s, sel[s], local);
            for (int u = 0; u < s && sel[s] >= 0; u++)
                MT_CHECK(sel[u] != sel[s], "msa: idx[%lld,%lld,%lld,:] holds block %d twice",
                         (long long)b, (long long)((r / T) % Hkv), (long long)t, sel[s]);
        }
    }
}

int64_t cpu_msa_attention_work(int block, int topk) {
    return (int64_t)omp_get_max_threads() * block * topk;
}

void cpu_msa_attention_forward(float *out, float *lse, float *work, const float *q, const float *k,
                               const float *v, const int32_t *idx, const int32_t *pos,
                               const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                               int64_t D, int block, int topk, float scale) {
    msa_check_dims("msa_attention", H, Hkv, D, block, topk);
    cpu_msa_check_rows(pos, seg, B, T);
    cpu_msa_check_idx(idx, pos, B, Hkv, T, block, topk);
    const int64_t G = H / Hkv;
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t row = 0; row < B * T * H; row++) {
        const int64_t b = row / (T * H), t = (row / H) % T, h = row % H, g = h / G;
        const int32_t pt = pos[b * T + t], *sel = idx + ((b * Hkv + g) * T + t) * topk;
        const float *qt = q + row * D, *kb = k + (b * T * Hkv + g) * D,
                    *vb = v + (b * T * Hkv + g) * D;
        float *restrict x = work + (size_t)omp_get_thread_num() * block * topk;
        /* scores of the support, block by block, and their maximum */
        float m = -INFINITY;
        int64_t n = 0;
        for (int s = 0; s < topk && sel[s] >= 0; s++) {
            int64_t j0, j1;
            msa_block_keys(t, pt, sel[s], block, &j0, &j1);
            for (int64_t j = j0; j <= j1; j++) {
                const float xj = scale * msa_dotf(qt, kb + j * Hkv * D, D);
                x[n++] = xj;
                m = xj > m ? xj : m;
            }
        }
        double acc[MSA_MAX_D], l = 0;
        for (int64_t d = 0; d < D; d++) acc[d] = 0;
        n = 0;
        for (int s = 0; s < topk && sel[s] >= 0; s++) {
            int64_t j0, j1;
            msa_block_keys(t, pt, sel[s], block, &j0, &j1);
            for (int64_t j = j0; j <= j1; j++) {
                const float p = cpu_expf(x[n++] - m);
                const float *restrict vj = vb + j * Hkv * D;
                l += p;
                for (int64_t d = 0; d < D; d++) acc[d] += (double)p * vj[d];
            }
        }
        /* l >= 1: the local block holds t itself */
        for (int64_t d = 0; d < D; d++) out[row * D + d] = (float)(acc[d] / l);
        if (lse) lse[(b * H + h) * T + t] = (float)((double)m + log(l));
    }
}

int64_t cpu_msa_inverse_ints(int64_t B, int64_t Hs, int64_t T, int topk) {
    return B * Hs * (T + 1) + B * Hs * T * topk;
}

void cpu_msa_inverse(int32_t *inv, const int32_t *idx, const int32_t *pos, int64_t B, int64_t Hs,
                     int64_t T, int block, int topk) {
#pragma omp parallel for schedule(static)
    for (int64_t bh = 0; bh < B * Hs; bh++) {
        const int64_t b = bh / Hs;
        int32_t *off = inv + bh * (T + 1), *list = inv + B * Hs * (T + 1) + bh * T * topk;
        const int32_t *sel = idx + bh * T * topk, *pb = pos + b * T;
        memset(off, 0, sizeof(int32_t) * (size_t)(T + 1));
        /* counts at off[jb + 1], prefix sums, then the fill moves each off[jb] up to the next
         * one's start; shifting back restores the starts */
        for (int64_t t = 0; t < T; t++)
            for (int s = 0; s < topk && sel[t * topk + s] >= 0; s++)
                off[t - pb[t] + (int64_t)sel[t * topk + s] * block + 1]++;
        for (int64_t j = 0; j < T; j++) off[j + 1] += off[j];
        for (int64_t t = 0; t < T; t++)
            for (int s = 0; s < topk && sel[t * topk + s] >= 0; s++)
                list[off[t - pb[t] + (int64_t)sel[t * topk + s] * block]++] = (int32_t)t;
        for (int64_t j = T; j > 0; j--) off[j] = off[j - 1];
        off[0] = 0;
    }
}

size_t cpu_msa_attention_bwd_work(int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D,
                                  int block, int topk) {
    return sizeof(double) * (size_t)(B * H * T) +
           sizeof(int32_t) * (size_t)cpu_msa_inverse_ints(B, Hkv, T, topk) +
           sizeof(double) * (size_t)omp_get_max_threads() * 2 * (size_t)(block * D) + 64;
}

void cpu_msa_attention_backward(float *dq, float *dk, float *dv, void *work, const float *dout,
                                const float *out, const float *lse, const float *q, const float *k,
                                const float *v, const int32_t *idx, const int32_t *pos,
                                const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                                int64_t D, int block, int topk, float scale) {
    msa_check_dims("msa_attention", H, Hkv, D, block, topk);
    if (!dq && !dk && !dv) return;
    (void)seg; /* the rows were checked by the forward */
    const int64_t G = H / Hkv;
    double *delta = work;
    int32_t *inv = (int32_t *)(delta + B * H * T);
    double *acc_all = (double *)(((uintptr_t)(inv + cpu_msa_inverse_ints(B, Hkv, T, topk)) + 63) &
                                 ~(uintptr_t)63);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < B * T * H; row++) {
        const int64_t b = row / (T * H), t = (row / H) % T, h = row % H;
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += (double)dout[row * D + d] * out[row * D + d];
        delta[(b * H + h) * T + t] = s;
    }
    /* dq: one query row at a time over its support */
    if (dq) {
#pragma omp parallel for schedule(dynamic, 16)
        for (int64_t row = 0; row < B * T * H; row++) {
            const int64_t b = row / (T * H), t = (row / H) % T, h = row % H, g = h / G;
            const int64_t bht = (b * H + h) * T + t;
            const int32_t pt = pos[b * T + t], *sel = idx + ((b * Hkv + g) * T + t) * topk;
            const float *qt = q + row * D, *dot = dout + row * D;
            const float *kb = k + (b * T * Hkv + g) * D, *vb = v + (b * T * Hkv + g) * D;
            const float ls = lse[bht], dl = (float)delta[bht];
            double acc[MSA_MAX_D];
            for (int64_t d = 0; d < D; d++) acc[d] = 0;
            for (int s = 0; s < topk && sel[s] >= 0; s++) {
                int64_t j0, j1;
                msa_block_keys(t, pt, sel[s], block, &j0, &j1);
                for (int64_t j = j0; j <= j1; j++) {
                    const float *kj = kb + j * Hkv * D, *vj = vb + j * Hkv * D;
                    const float p = cpu_expf(scale * msa_dotf(qt, kj, D) - ls);
                    const double ds = (double)p * ((double)msa_dotf(dot, vj, D) - dl);
                    for (int64_t d = 0; d < D; d++) acc[d] += ds * kj[d];
                }
            }
            for (int64_t d = 0; d < D; d++) dq[row * D + d] += (float)(scale * acc[d]);
        }
    }
    if (!dk && !dv) return;
    cpu_msa_inverse(inv, idx, pos, B, Hkv, T, block, topk);
    /* dk, dv: one key block (b, kv head g, first slot jb) at a time over the queries that chose
     * it and every query head of the group */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t w = 0; w < B * Hkv * T; w++) {
        const int64_t bg = w / T, jb = w % T, b = bg / Hkv, g = bg % Hkv;
        const int32_t *off = inv + bg * (T + 1);
        const int32_t *list = inv + B * Hkv * (T + 1) + bg * T * topk;
        if (off[jb] == off[jb + 1]) continue;
        double *restrict ak = acc_all + (size_t)omp_get_thread_num() * 2 * (size_t)(block * D);
        double *restrict av = ak + (size_t)block * D;
        memset(ak, 0, sizeof(double) * 2 * (size_t)(block * D));
        const float *kb = k + (b * T * Hkv + g) * D, *vb = v + (b * T * Hkv + g) * D;
        int64_t jmax = jb;
        for (int32_t e = off[jb]; e < off[jb + 1]; e++) {
            const int64_t t = list[e], j1 = t < jb + block - 1 ? t : jb + block - 1;
            if (j1 > jmax) jmax = j1;
            for (int64_t h = g * G; h < (g + 1) * G; h++) {
                const int64_t row = (b * T + t) * H + h, bht = (b * H + h) * T + t;
                const float *qt = q + row * D, *dot = dout + row * D;
                const float ls = lse[bht], dl = (float)delta[bht];
                for (int64_t j = jb; j <= j1; j++) {
                    const float *kj = kb + j * Hkv * D, *vj = vb + j * Hkv * D;
                    const float p = cpu_expf(scale * msa_dotf(qt, kj, D) - ls);
                    double *restrict akj = ak + (j - jb) * D, *restrict avj = av + (j - jb) * D;
                    if (dv)
                        for (int64_t d = 0; d < D; d++) avj[d] += (double)p * dot[d];
                    if (dk) {
                        const double ds = (double)p * ((double)msa_dotf(dot, vj, D) - dl);
                        for (int64_t d = 0; d < D; d++) akj[d] += ds * qt[d];
                    }
                }
            }
        }
        for (int64_t j = jb; j <= jmax; j++) {
            const int64_t o = ((b * T + j) * Hkv + g) * D;
            if (dk)
                for (int64_t d = 0; d < D; d++) dk[o + d] += (float)(scale * ak[(j - jb) * D + d]);
            if (dv)
                for (int64_t d = 0; d < D; d++) dv[o + d] += (float)av[(j - jb) * D + d];
        }
    }
}

void cpu_msa_attention_decode(float *out, const float *q, const float *k_cache,
                              const float *v_cache, const int32_t *idx, int64_t t_len, int64_t B,
                              int64_t t_max, int64_t H, int64_t Hkv, int64_t D, int block, int topk,
                              float scale) {
    msa_check_dims("msa_attention decode", H, Hkv, D, block, topk);
    MT_CHECK(t_len >= 1 && t_len <= t_max, "msa_attention decode: t_len %lld not in [1, %lld]",
             (long long)t_len, (long long)t_max);
    const int64_t G = H / Hkv, t = t_len - 1;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < B * H; row++) {
        const int64_t b = row / H, h = row % H, g = h / G;
        const int32_t *sel = idx + (b * Hkv + g) * topk;
        const float *qt = q + row * D, *kb = k_cache + (b * t_max * Hkv + g) * D,
                    *vb = v_cache + (b * t_max * Hkv + g) * D;
        double acc[MSA_MAX_D], m = -INFINITY, l = 0;
        for (int64_t d = 0; d < D; d++) acc[d] = 0;
        for (int s = 0; s < topk && sel[s] >= 0; s++) {
            MT_CHECK(sel[s] <= t / block, "msa_attention decode: block %d past position %lld",
                     sel[s], (long long)t);
            int64_t j0, j1;
            msa_block_keys(t, (int32_t)t, sel[s], block, &j0, &j1);
            for (int64_t j = j0; j <= j1; j++) {
                const double x = (double)scale * msa_dotf(qt, kb + j * Hkv * D, D);
                if (x > m) { /* online softmax: rescale what came before */
                    const double r = exp(m - x);
                    l *= r;
                    for (int64_t d = 0; d < D; d++) acc[d] *= r;
                    m = x;
                }
                const double p = exp(x - m);
                const float *vj = vb + j * Hkv * D;
                l += p;
                for (int64_t d = 0; d < D; d++) acc[d] += p * vj[d];
            }
        }
        for (int64_t d = 0; d < D; d++) out[row * D + d] = (float)(acc[d] / l);
    }
}

/* ---- node adapters: in[0] q (B,T,H,D), in[1] k, in[2] v (B,T,Hkv,D), in[3] idx (B,Hkv,T,topk)
 * I32, in[4] pos (B,T) I32, in[5] seg (B,T) I32 or NULL; saved[0] lse (B,H,T) (only when a
 * backward will run); fp[0] scale; ip[0] block ---- */

void cpu_msa_attention_fwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *idx = n->in[3];
    const mt_tensor *pos = n->in[4], *seg = n->in[5];
    const int block = (int)n->ip[0], topk = (int)idx->shape[3];
    float *work = mt_node_scratch(n, sizeof(float) * (size_t)cpu_msa_attention_work(block, topk),
                                  "msa_attention scores");
    cpu_msa_attention_forward(n->out->data, n->saved[0] ? n->saved[0]->data : NULL, work, q->data,
                              k->data, v->data, idx->data, pos->data, seg ? seg->data : NULL,
                              q->shape[0], q->shape[1], q->shape[2], k->shape[2], q->shape[3],
                              block, topk, n->fp[0]);
}

void cpu_msa_attention_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *idx = n->in[3];
    const mt_tensor *pos = n->in[4], *seg = n->in[5];
    if (!q->grad && !k->grad && !v->grad) return;
    const int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2], Hkv = k->shape[2];
    const int64_t D = q->shape[3];
    const int block = (int)n->ip[0], topk = (int)idx->shape[3];
    void *work = mt_node_scratch(n, cpu_msa_attention_bwd_work(B, T, H, Hkv, D, block, topk),
                                 "msa_attention backward");
    cpu_msa_attention_backward(q->grad, k->grad, v->grad, work, n->out->grad, n->out->data,
                               n->saved[0]->data, q->data, k->data, v->data, idx->data, pos->data,
                               seg ? seg->data : NULL, B, T, H, Hkv, D, block, topk, n->fp[0]);
}
