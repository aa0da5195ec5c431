/* msa_kl.c: the MSA indexer's sparse-KL loss (spec 5.2-5.3) on the CPU.
 *
 * Per counted query (b, t) and index head h (= kv head h), over the support M_h(t):
 *   teacher  P_g(t,j) = softmax_j scale q_g(t).k_h(j) for the G query heads g of group h,
 *            Pbar_h(t,j) = (1/G) sum_g P_g(t,j)                       (stop-gradient)
 *   student  Q_h(t,j) = softmax_j index_scale iq_h(t).ik(j)
 *   loss     coef / (Hi denom) sum_{b,t counted} sum_h sum_j Pbar (log Pbar - log Q)
 *   backward ds = Q - Pbar; diq_h(t) += c sum_j ds ik(j); dik(j) += c sum_{t,h} ds iq_h(t),
 *            c = gout coef index_scale / (Hi denom); q and k get nothing.
 * Logits are fp32 products summed in 8 fp32 lanes then in double (kl_dot); softmaxes, the KL
 * and every other sum in double. The teacher is recomputed here from q, k (not the attention's
 * lse). The backward recomputes both softmaxes' lse by query row (the diq pass), then dik goes
 * by key block through the selection's inverse (msa_attention.c), so one thread owns a block's
 * dik rows: no atomics, a fixed order. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_math.h"
#include "cpu_ops.h"
#include "msa.h"

#define MSA_KL_MAX_D 1024

/* fp32 products, 8 fp32 lanes of partial sums, the lanes added in double (in pairs: 0 + 4,
 * 1 + 5, ... then (0 + 2) + (1 + 3), vector work where 8 dependent scalar adds had been the
 * dot's longest part); a logit carries ~1e-7 relative rounding, far below the softmax's
 * sensitivity that matters here */
typedef float kl_f8 __attribute__((vector_size(32), aligned(4), may_alias));
typedef double kl_d4 __attribute__((vector_size(32)));
static inline double kl_dot(const float *restrict a, const float *restrict b, int64_t D) {
    kl_f8 part = {0};
    int64_t d = 0;
    for (; d + 8 <= D; d += 8)
        part += *(const kl_f8 *)(const void *)(a + d) * *(const kl_f8 *)(const void *)(b + d);
    const kl_d4 s4 =
        __builtin_convertvector(__builtin_shufflevector(part, part, 0, 1, 2, 3), kl_d4) +
        __builtin_convertvector(__builtin_shufflevector(part, part, 4, 5, 6, 7), kl_d4);
    double s = (s4[0] + s4[2]) + (s4[1] + s4[3]);
    for (; d < D; d++) s += (double)a[d] * b[d];
    return s;
}

static void kl_check(int64_t H, int64_t Hkv, int64_t D, int64_t Di, int block, int topk,
                     float denom) {
    MT_CHECK(Hkv > 0 && H % Hkv == 0 && D > 0 && Di > 0 && Di <= MSA_KL_MAX_D && block >= 1 &&
                 topk >= 1 && denom > 0,
             "msa_kl: H=%lld Hkv=%lld D=%lld Di=%lld block=%d topk=%d denom=%g", (long long)H,
             (long long)Hkv, (long long)D, (long long)Di, block, topk, (double)denom);
}

/* The support's keys of (b, h, t) in order into keys[], returns their count. */
static int64_t kl_support(int64_t *keys, const int32_t *sel, int64_t t, int32_t pt, int block,
                          int topk) {
    int64_t n = 0;
    for (int s = 0; s < topk && sel[s] >= 0; s++) {
        int64_t j0, j1;
        msa_block_keys(t, pt, sel[s], block, &j0, &j1);
        for (int64_t j = j0; j <= j1; j++) keys[n++] = j;
    }
    return n;
}

/* x[0, n) <- exp(x - m), m their maximum (returned), *l = their sum: the softmax is x / l and
 * its lse m + log l from one exp per entry (an lse pass, then exp(x - lse), took two), each
 * cpu_exp (cpu_math.h: vector lanes, within 1 ulp; libm's exp was a third of the KL's time). */
static double kl_exp_shift(double *x, int64_t n, double *l) {
    double m = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) x[i] = cpu_exp(x[i] - m);
    for (int64_t i = 0; i < n; i++) sum += x[i]; /* in order: the lanes would reorder it */
    *l = sum;
    return m;
}

/* One (b, h, query row t of Tq): pbar[0, n) the teacher mean, z[0, n) the student logits over
 * the key slots keys[] (of Tk) and qs[0, n) the student's exp(z - max z), whose sum is *ls_sum
 * (its softmax qs / *ls_sum); returns the student lse; lse_t (G) gets the teacher heads' lse
 * when not NULL. */
static double kl_row(double *pbar, double *z, double *qs, double *ls_sum, double *lse_t,
                     const int64_t *keys, int64_t n, const float *q, const float *k,
                     const float *iq, const float *ik, int64_t b, int64_t t, int64_t h, int64_t Tq,
                     int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int64_t Di, float scale,
                     float index_scale) {
    const int64_t G = H / Hkv, Hi = Hkv;
    double *x = qs; /* the teacher heads' exps first, then the student's */
    for (int64_t i = 0; i < n; i++) pbar[i] = 0;
    for (int64_t g = h * G; g < (h + 1) * G; g++) {
        const float *qg = q + ((b * Tq + t) * H + g) * D;
        for (int64_t i = 0; i < n; i++)
            x[i] = (double)scale * kl_dot(qg, k + ((b * Tk + keys[i]) * Hkv + h) * D, D);
        double l;
        const double m = kl_exp_shift(x, n, &l);
        if (lse_t) lse_t[g - h * G] = m + log(l);
        for (int64_t i = 0; i < n; i++) pbar[i] += x[i] / l / (double)G;
    }
    const float *iqh = iq + ((b * Tq + t) * Hi + h) * Di;
    for (int64_t i = 0; i < n; i++)
        z[i] = x[i] = (double)index_scale * kl_dot(iqh, ik + (b * Tk + keys[i]) * Di, Di);
    const double m = kl_exp_shift(x, n, ls_sum);
    return m + log(*ls_sum);
}

size_t cpu_msa_kl_work(int64_t B, int64_t Tq, int block, int topk) {
    const size_t sup = (size_t)block * (size_t)topk;
    return sizeof(double) * (size_t)(B * Tq) +
           (size_t)omp_get_max_threads() * sup * (3 * sizeof(double) + sizeof(int64_t));
}

double cpu_msa_kl_forward(void *work, const float *q, const float *k, const float *iq,
                          const float *ik, const int32_t *idx, const int32_t *pos,
                          const int32_t *seg, const float *mask, const int32_t *q_slot, int64_t B,
                          int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int64_t Di,
                          int block, int topk, float scale, float index_scale, float coef,
                          float denom) {
    kl_check(H, Hkv, D, Di, block, topk, denom);
    cpu_msa_check_rows(pos, seg, B, Tk);
    cpu_msa_check_idx(idx, pos, q_slot, B, Hkv, Tq, Tk, block, topk);
    const int64_t Hi = Hkv;
    const size_t sup = (size_t)block * (size_t)topk;
    double *row_kl = work;
    char *thr = (char *)(row_kl + B * Tq);
    /* one (b, t) per iteration, its heads' KL summed into row_kl in a fixed order */
#pragma omp parallel for schedule(dynamic, 8)
    for (int64_t bt = 0; bt < B * Tq; bt++) {
        row_kl[bt] = 0;
        if (mask && mask[bt] == 0.0f) continue;
        const int64_t b = bt / Tq, t = bt % Tq, ts = msa_slot(q_slot, t);
        char *mine = thr + (size_t)omp_get_thread_num() * sup * (3 * sizeof(double) + 8);
        double *pbar = (double *)mine, *z = pbar + sup, *x = z + sup;
        int64_t *keys = (int64_t *)(x + sup);
        double kl = 0;
        for (int64_t h = 0; h < Hi; h++) {
            const int64_t n = kl_support(keys, idx + ((b * Hi + h) * Tq + t) * topk, ts,
                                         pos[b * Tk + ts], block, topk);
            double l_s;
            const double lse_s = kl_row(pbar, z, x, &l_s, NULL, keys, n, q, k, iq, ik, b, t, h, Tq,
                                        Tk, H, Hkv, D, Di, scale, index_scale);
            for (int64_t i = 0; i < n; i++)
                if (pbar[i] > 0) kl += pbar[i] * (log(pbar[i]) - (z[i] - lse_s));
        }
        row_kl[bt] = kl;
    }
    double sum = 0;
    for (int64_t bt = 0; bt < B * Tq; bt++) sum += row_kl[bt];
    return (double)coef / ((double)Hi * (double)denom) * sum;
}

size_t cpu_msa_kl_bwd_work(int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t Di,
                           int block, int topk) {
    const size_t sup = (size_t)block * (size_t)topk;
    return sizeof(double) * (size_t)(B * Tq * (H + Hkv)) +
           sizeof(int32_t) * (size_t)cpu_msa_inverse_ints(B, Hkv, Tq, Tk, topk) + 64 +
           (size_t)omp_get_max_threads() * (sup * (3 * sizeof(double) + sizeof(int64_t)) +
                                            sizeof(double) * (size_t)(block * (Di + H / Hkv + 1)));
}

void cpu_msa_kl_backward(float *diq, float *dik, void *work, float gout, const float *q,
                         const float *k, const float *iq, const float *ik, const int32_t *idx,
                         const int32_t *pos, const int32_t *seg, const float *mask,
                         const int32_t *q_slot, int64_t B, int64_t Tq, int64_t Tk, int64_t H,
                         int64_t Hkv, int64_t D, int64_t Di, int block, int topk, float scale,
                         float index_scale, float coef, float denom) {
    kl_check(H, Hkv, D, Di, block, topk, denom);
    if (!diq && !dik) return;
    (void)seg; /* the rows were checked by the forward */
    const int64_t Hi = Hkv, G = H / Hkv;
    const size_t sup = (size_t)block * (size_t)topk;
    const double c = (double)gout * (double)coef * (double)index_scale / ((double)Hi * denom);
    double *lse_t = work;               /* (B,Tq,H) the teacher heads' lse */
    double *lse_s = lse_t + B * Tq * H; /* (B,Tq,Hi) the student's */
    int32_t *inv = (int32_t *)(lse_s + B * Tq * Hi);
    char *thr = (char *)(((uintptr_t)(inv + cpu_msa_inverse_ints(B, Hkv, Tq, Tk, topk)) + 63) &
                         ~(uintptr_t)63);
    const size_t per_thr = sup * (3 * sizeof(double) + sizeof(int64_t)) +
                           sizeof(double) * (size_t)(block * (Di + G + 1));
    /* pass 1, by query row: both softmaxes' lse, and diq */
#pragma omp parallel for schedule(dynamic, 8)
    for (int64_t bt = 0; bt < B * Tq; bt++) {
        if (mask && mask[bt] == 0.0f) continue;
        const int64_t b = bt / Tq, t = bt % Tq, ts = msa_slot(q_slot, t);
        char *mine = thr + (size_t)omp_get_thread_num() * per_thr;
        double *pbar = (double *)mine, *z = pbar + sup, *x = z + sup;
        int64_t *keys = (int64_t *)(x + sup);
        for (int64_t h = 0; h < Hi; h++) {
            const int64_t n = kl_support(keys, idx + ((b * Hi + h) * Tq + t) * topk, ts,
                                         pos[b * Tk + ts], block, topk);
            double l_s;
            const double ls = kl_row(pbar, z, x, &l_s, lse_t + bt * H + h * G, keys, n, q, k, iq,
                                     ik, b, t, h, Tq, Tk, H, Hkv, D, Di, scale, index_scale);
            lse_s[bt * Hi + h] = ls;
            if (!diq) continue;
            double acc[MSA_KL_MAX_D];
            for (int64_t d = 0; d < Di; d++) acc[d] = 0;
            for (int64_t i = 0; i < n; i++) {
                const double ds = x[i] / l_s - pbar[i];
                const float *ikj = ik + (b * Tk + keys[i]) * Di;
                for (int64_t d = 0; d < Di; d++) acc[d] += ds * ikj[d];
            }
            float *g = diq + (bt * Hi + h) * Di;
            for (int64_t d = 0; d < Di; d++) g[d] += (float)(c * acc[d]);
        }
    }
    if (!dik) return;
    cpu_msa_inverse(inv, idx, pos, q_slot, B, Hi, Tq, Tk, block, topk);
    /* pass 2, by key block (b, first slot jb): every index head's queries that chose it */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t w = 0; w < B * Tk; w++) {
        const int64_t b = w / Tk, jb = w % Tk;
        double *restrict acc = (double *)(thr + (size_t)omp_get_thread_num() * per_thr +
                                          sup * (3 * sizeof(double) + sizeof(int64_t)));
        /* the entries' exponents, teacher (nk, G) then student (nk), exponentiated together */
        double *restrict xt = acc + block * Di, *restrict xs = xt + block * G;
        bool any = false;
        int64_t jmax = jb;
        for (int64_t h = 0; h < Hi; h++) {
            const int64_t bh = b * Hi + h;
            const int32_t *off = inv + bh * (Tk + 1);
            const int32_t *list = inv + B * Hi * (Tk + 1) + bh * Tq * topk;
            for (int32_t e = off[jb]; e < off[jb + 1]; e++) {
                const int64_t t = list[e], bt = b * Tq + t, ts = msa_slot(q_slot, t);
                if (mask && mask[bt] == 0.0f) continue;
                if (!any) memset(acc, 0, sizeof(double) * (size_t)(block * Di));
                any = true;
                const int64_t j1 = ts < jb + block - 1 ? ts : jb + block - 1;
                if (j1 > jmax) jmax = j1;
                const float *iqh = iq + (bt * Hi + h) * Di;
                const int64_t nk = j1 - jb + 1;
                for (int64_t i = 0; i < nk; i++) {
                    const int64_t j = jb + i;
                    for (int64_t a = 0; a < G; a++)
                        xt[i * G + a] =
                            (double)scale * kl_dot(q + (bt * H + h * G + a) * D,
                                                   k + ((b * Tk + j) * Hkv + h) * D, D) -
                            lse_t[bt * H + h * G + a];
                    xs[i] = (double)index_scale * kl_dot(iqh, ik + (b * Tk + j) * Di, Di) -
                            lse_s[bt * Hi + h];
                }
#pragma omp simd
                for (int64_t i = 0; i < nk * G; i++) xt[i] = cpu_exp(xt[i]);
#pragma omp simd
                for (int64_t i = 0; i < nk; i++) xs[i] = cpu_exp(xs[i]);
                for (int64_t i = 0; i < nk; i++) {
                    double pbar = 0;
                    for (int64_t a = 0; a < G; a++) pbar += xt[i * G + a];
                    const double ds = xs[i] - pbar / (double)G;
                    double *restrict ai = acc + i * Di;
                    for (int64_t d = 0; d < Di; d++) ai[d] += ds * iqh[d];
                }
            }
        }
        if (!any) continue;
        for (int64_t j = jb; j <= jmax; j++)
            for (int64_t d = 0; d < Di; d++)
                dik[(b * Tk + j) * Di + d] += (float)(c * acc[(j - jb) * Di + d]);
    }
}

/* ---- node adapters: in[0] q (B,Tq,H,D), in[1] k (B,Tk,Hkv,D) (no gradient), in[2] iq
 * (B,Tq,Hi,Di), in[3] ik (B,Tk,1,Di), in[4] idx (B,Hi,Tq,topk) I32, in[5] pos (B,Tk) I32, in[6]
 * seg (B,Tk) I32 or NULL, in[7] mask (B,Tq) F32 or NULL, in[8] q_slot (Tq) I32 or NULL
 * (Tq = Tk); out the scalar loss; ip[0] block; fp[0] scale, fp[1] index_scale, fp[2] coef,
 * fp[3] denom; no saved buffers ---- */

void cpu_msa_kl_fwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *iq = n->in[2], *ik = n->in[3], *idx = n->in[4];
    const mt_tensor *pos = n->in[5], *seg = n->in[6], *mask = n->in[7], *qs = n->in[8];
    const int64_t B = q->shape[0], Tq = q->shape[1];
    const int block = (int)n->ip[0], topk = (int)idx->shape[3];
    void *work = mt_node_scratch(n, cpu_msa_kl_work(B, Tq, block, topk), "msa_kl rows");
    const double loss =
        cpu_msa_kl_forward(work, q->data, k->data, iq->data, ik->data, idx->data, pos->data,
                           seg ? seg->data : NULL, mask ? mask->data : NULL, qs ? qs->data : NULL,
                           B, Tq, k->shape[1], q->shape[2], k->shape[2], q->shape[3], iq->shape[3],
                           block, topk, n->fp[0], n->fp[1], n->fp[2], n->fp[3]);
    *(float *)n->out->data = (float)loss;
}

void cpu_msa_kl_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *iq = n->in[2], *ik = n->in[3], *idx = n->in[4];
    const mt_tensor *pos = n->in[5], *seg = n->in[6], *mask = n->in[7], *qs = n->in[8];
    if (!iq->grad && !ik->grad) return;
    const int64_t B = q->shape[0], Tq = q->shape[1], Tk = k->shape[1], H = q->shape[2];
    const int64_t Hkv = k->shape[2];
    const int block = (int)n->ip[0], topk = (int)idx->shape[3];
    void *work = mt_node_scratch(
        n, cpu_msa_kl_bwd_work(B, Tq, Tk, H, Hkv, iq->shape[3], block, topk), "msa_kl backward");
    cpu_msa_kl_backward(iq->grad, ik->grad, work, *(const float *)n->out->grad, q->data, k->data,
                        iq->data, ik->data, idx->data, pos->data, seg ? seg->data : NULL,
                        mask ? mask->data : NULL, qs ? qs->data : NULL, B, Tq, Tk, H, Hkv,
                        q->shape[3], iq->shape[3], block, topk, n->fp[0], n->fp[1], n->fp[2],
                        n->fp[3]);
}
