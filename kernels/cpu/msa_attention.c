/* msa_attention.c: softmax attention restricted to the MSA selection (spec 4.3) on the CPU:
 * forward with the lse saved, backward from it, the inverse of a selection (which queries
 * chose a key block) and the single-token decode step.
 *
 * fp32 mode only (products by msa_dots and msa_rows_sum below, exp by cpu_expf, the softmax
 * row sums and delta in double): the reference of a device kernel. The cost is the support,
 * topk*block keys per query, never T^2:
 *   forward:  per (b, kv head, query t), the G heads of the group share the support: S = scale
 *             Q K^T, one product per selected block into a (G, topk*block) tile; m its row
 *             maximum, P = exp(S - m), l = sum P; O = sum over blocks P V / l;
 *             lse = m + log l.
 *   backward: delta = dout . out; dq per (b, kv head, t): P = exp(S - lse), dP = dO V^T,
 *             dS = P (dP - delta), dQ += scale dS K, block by block; dk and dv by key block:
 *             the selection's inverse lists the queries that chose each block, so one thread
 *             owns a key block's dk, dv rows (no atomics, a fixed order), and gathers up to 64
 *             (query, head) rows of q and dout: P (zero past each query's own slot),
 *             dV += P^T dO, dS as above, dK += scale dS^T Q (products accumulating in fp32,
 *             as the dense kernels of attention.c do). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_math.h"
#include "cpu_ops.h"
#include "msa.h"

#define MSA_MAX_D 1024
#define MSA_MAX_G 256

static inline float msa_dotf(const float *restrict a, const float *restrict b, int64_t D) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

static void msa_check_dims(const char *op, int64_t H, int64_t Hkv, int64_t D, int block, int topk) {
    MT_CHECK(Hkv > 0 && H % Hkv == 0 && H / Hkv <= MSA_MAX_G && D > 0 && D <= MSA_MAX_D &&
                 block >= 1 && topk >= 1,
             "%s: H=%lld Hkv=%lld D=%lld block=%d topk=%d (H a multiple of Hkv, H/Hkv <= %d, "
             "D <= %d)",
             op, (long long)H, (long long)Hkv, (long long)D, block, topk, MSA_MAX_G, MSA_MAX_D);
}

void cpu_msa_check_idx(const int32_t *idx, const int32_t *pos, const int32_t *q_slot, int64_t B,
                       int64_t Hkv, int64_t Tq, int64_t Tk, int block, int topk) {
    cpu_msa_check_slots(q_slot, Tq, Tk);
    for (int64_t r = 0; r < B * Hkv * Tq; r++) {
        const int64_t b = r / (Hkv * Tq), h = (r / Tq) % Hkv, t = r % Tq;
        const int32_t local = pos[b * Tk + msa_slot(q_slot, t)] / block, *sel = idx + r * topk;
        bool has_local = false;
        for (int s = 0; s < topk; s++) {
            MT_CHECK(sel[s] >= -1 && sel[s] <= local &&
                         (sel[s] >= 0 || s == topk - 1 || sel[s + 1] < 0),
                     "msa: idx[%lld,%lld,%lld,%d] = %d is not -1 or a block in [0, %d], or a "
                     "block follows a -1",
                     (long long)b, (long long)h, (long long)t, s, sel[s], local);
            for (int u = 0; u < s && sel[s] >= 0; u++)
                MT_CHECK(sel[u] != sel[s], "msa: idx[%lld,%lld,%lld,:] holds block %d twice",
                         (long long)b, (long long)h, (long long)t, sel[s]);
            has_local = has_local || sel[s] == local;
        }
        MT_CHECK(has_local, "msa: idx[%lld,%lld,%lld,:] lacks the local block %d", (long long)b,
                 (long long)h, (long long)t, local);
    }
}

/* The support's products are tiny (the forward's: 4 heads x 16 keys x 32 dims a block in the
 * M3 bench model): there a sgemm call cost more than its arithmetic, and more on 2 threads than
 * on one (the M3 bench step spent 17 % in these kernels at 7 to 12 GFLOP/s a core). Products up
 * to MSA_SMALL multiply-adds run in 8-float vectors held in registers instead: A B^T (msa_dots,
 * rows of a multiple of 8 floats) below, A B and A^T B (N a multiple of 8) by cpu_gemm_small;
 * others (M3's own blocks of 128 keys x 128 dims) keep the sgemm. Each output is one
 * fixed-order sum, the same on any thread. */
#define MSA_SMALL (64 * 64 * 64)
typedef float msa_v8 __attribute__((vector_size(32), aligned(4), may_alias));
typedef float msa_v4 __attribute__((vector_size(16)));
#define MSA_LOAD(p) (*(const msa_v8 *)(const void *)(p))

static void msa_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *Bm, int64_t ldb, float beta,
                      float *C, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, alpha, A, (int)lda, Bm, (int)ldb, beta, C, (int)ldc);
}

/* The lane sums of a, b, c, d as one 4-float vector: the halves added, then pairs of lanes. */
static inline msa_v4 msa_sum4(msa_v8 a, msa_v8 b, msa_v8 c, msa_v8 d) {
#define MSA_HALVES(v)                                                                              \
    (__builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7))
    const msa_v4 a4 = MSA_HALVES(a), b4 = MSA_HALVES(b), c4 = MSA_HALVES(c), d4 = MSA_HALVES(d);
#undef MSA_HALVES
    const msa_v4 ab = __builtin_shufflevector(a4, b4, 0, 4, 1, 5) +
                      __builtin_shufflevector(a4, b4, 2, 6, 3, 7); /* a02 b02 a13 b13 */
    const msa_v4 cd =
        __builtin_shufflevector(c4, d4, 0, 4, 1, 5) + __builtin_shufflevector(c4, d4, 2, 6, 3, 7);
    return __builtin_shufflevector(ab, cd, 0, 1, 4, 5) +
           __builtin_shufflevector(ab, cd, 2, 3, 6, 7);
}

/* X[i][j] = alpha sum_d A[i][d] B[j][d] (A B^T), i < M, j < N: dot products of rows, four
 * columns at a time. */
static void msa_dots(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *Bm, int64_t ldb, float *X, int64_t ldx) {
    if (K % 8 || M * N * K > MSA_SMALL) {
        msa_sgemm(false, true, M, N, K, alpha, A, lda, Bm, ldb, 0.0f, X, ldx);
        return;
    }
    for (int64_t j0 = 0; j0 < N; j0 += 4) {
        const int64_t nj = N - j0 < 4 ? N - j0 : 4;
        const float *b0 = Bm + j0 * ldb, *b1 = nj > 1 ? b0 + ldb : b0;
        const float *b2 = nj > 2 ? b0 + 2 * ldb : b0, *b3 = nj > 3 ? b0 + 3 * ldb : b0;
        for (int64_t i = 0; i < M; i++) {
            const float *a = A + i * lda;
            msa_v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
            for (int64_t d = 0; d < K; d += 8) {
                const msa_v8 av = MSA_LOAD(a + d);
                CPU_FMA8(s0, av, MSA_LOAD(b0 + d)), CPU_FMA8(s1, av, MSA_LOAD(b1 + d));
                CPU_FMA8(s2, av, MSA_LOAD(b2 + d)), CPU_FMA8(s3, av, MSA_LOAD(b3 + d));
            }
            const msa_v4 out = alpha * msa_sum4(s0, s1, s2, s3);
            if (nj == 4) /* one store: lanes read back one at a time stalled on it */
                memcpy(X + i * ldx + j0, &out, sizeof(out));
            else
                for (int64_t u = 0; u < nj; u++) X[i * ldx + j0 + u] = out[u];
        }
    }
}

/* C[i][:] (=, or += where add) sum_k alpha A(i,k) B[k][:], i < M, N columns: A B, or A^T B
 * where at (A(i,k) = A[k][i]). */
static void msa_rows_sum(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                         bool at, const float *Bm, int64_t ldb, bool add, float *C, int64_t ldc) {
    if (M * N * K <= MSA_SMALL && N % 8 == 0)
        cpu_gemm_small(M, N, K, alpha, A, at ? 1 : lda, at ? lda : 1, Bm, ldb, add, C, ldc);
    else
        msa_sgemm(at, false, M, N, K, alpha, A, lda, Bm, ldb, add ? 1.0f : 0.0f, C, ldc);
}

/* query rows per chunk of the dk/dv pass: about 64 rows of (query, head) */
static int64_t msa_chunk(int64_t G) { return G >= 64 ? 1 : 64 / G; }

int64_t cpu_msa_attention_work(int64_t G, int block, int topk) {
    return (int64_t)omp_get_max_threads() * G * block * topk;
}

void cpu_msa_attention_forward(float *out, float *lse, float *work, const float *q, const float *k,
                               const float *v, const int32_t *idx, const int32_t *pos,
                               const int32_t *seg, const int32_t *q_slot, int64_t B, int64_t Tq,
                               int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int block, int topk,
                               float scale) {
    msa_check_dims("msa_attention", H, Hkv, D, block, topk);
    cpu_msa_check_rows(pos, seg, B, Tk);
    cpu_msa_check_idx(idx, pos, q_slot, B, Hkv, Tq, Tk, block, topk);
    const int64_t G = H / Hkv, sup = (int64_t)block * topk, ldk = Hkv * D;
    /* one (b, kv head, query) per iteration: its G query heads share the support */
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t w = 0; w < B * Hkv * Tq; w++) {
        const int64_t b = w / (Hkv * Tq), g = (w / Tq) % Hkv, t = w % Tq, ts = msa_slot(q_slot, t);
        const int32_t pt = pos[b * Tk + ts], *sel = idx + w * topk;
        const float *qt = q + ((b * Tq + t) * H + g * G) * D, *kb = k + (b * Tk * Hkv + g) * D,
                    *vb = v + (b * Tk * Hkv + g) * D;
        float *ot = out + ((b * Tq + t) * H + g * G) * D;
        float *X = work + (size_t)omp_get_thread_num() * (size_t)(G * sup);
        /* S = scale Q K^T over the selected blocks, side by side in X (G, sup) */
        int64_t n = 0;
        for (int s = 0; s < topk && sel[s] >= 0; s++) {
            int64_t j0, j1;
            msa_block_keys(ts, pt, sel[s], block, &j0, &j1);
            msa_dots(G, j1 - j0 + 1, D, scale, qt, D, kb + j0 * ldk, ldk, X + n, sup);
            n += j1 - j0 + 1;
        }
        double l[MSA_MAX_G];
        for (int64_t a = 0; a < G; a++) {
            float *restrict x = X + a * sup, m = -INFINITY;
            for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
            double sum = 0;
#pragma omp simd reduction(+ : sum)
            for (int64_t i = 0; i < n; i++) {
                x[i] = cpu_expf(x[i] - m);
                sum += (double)x[i];
            }
            l[a] = sum; /* >= 1: the local block holds t itself */
            if (lse) lse[(b * H + g * G + a) * Tq + t] = (float)((double)m + log(l[a]));
        }
        /* O = P V block by block, then / l */
        n = 0;
        for (int s = 0; s < topk && sel[s] >= 0; s++) {
            int64_t j0, j1;
            msa_block_keys(ts, pt, sel[s], block, &j0, &j1);
            msa_rows_sum(G, D, j1 - j0 + 1, 1.0f, X + n, sup, false, vb + j0 * ldk, ldk, s > 0, ot,
                         D);
            n += j1 - j0 + 1;
        }
        for (int64_t a = 0; a < G; a++)
            for (int64_t d = 0; d < D; d++) ot[a * D + d] = (float)((double)ot[a * D + d] / l[a]);
    }
}

int64_t cpu_msa_inverse_ints(int64_t B, int64_t Hs, int64_t Tq, int64_t Tk, int topk) {
    return B * Hs * (Tk + 1) + B * Hs * Tq * topk;
}

void cpu_msa_inverse(int32_t *inv, const int32_t *idx, const int32_t *pos, const int32_t *q_slot,
                     int64_t B, int64_t Hs, int64_t Tq, int64_t Tk, int block, int topk) {
#pragma omp parallel for schedule(static)
    for (int64_t bh = 0; bh < B * Hs; bh++) {
        const int64_t b = bh / Hs;
        int32_t *off = inv + bh * (Tk + 1), *list = inv + B * Hs * (Tk + 1) + bh * Tq * topk;
        const int32_t *sel = idx + bh * Tq * topk, *pb = pos + b * Tk;
        memset(off, 0, sizeof(int32_t) * (size_t)(Tk + 1));
        /* counts at off[jb + 1], prefix sums, then the fill moves each off[jb] up to the next
         * one's start; shifting back restores the starts. Query row t sits at slot ts. */
        for (int64_t t = 0; t < Tq; t++) {
            const int64_t ts = msa_slot(q_slot, t), rs = ts - pb[ts];
            for (int s = 0; s < topk && sel[t * topk + s] >= 0; s++)
                off[rs + (int64_t)sel[t * topk + s] * block + 1]++;
        }
        for (int64_t j = 0; j < Tk; j++) off[j + 1] += off[j];
        for (int64_t t = 0; t < Tq; t++) {
            const int64_t ts = msa_slot(q_slot, t), rs = ts - pb[ts];
            for (int s = 0; s < topk && sel[t * topk + s] >= 0; s++)
                list[off[rs + (int64_t)sel[t * topk + s] * block]++] = (int32_t)t;
        }
        for (int64_t j = Tk; j > 0; j--) off[j] = off[j - 1];
        off[0] = 0;
    }
}

/* per thread: the dq pass's two (G, sup) tiles, or the dk/dv pass's gathered Q, dO (R, D) and
 * its P, dP (R, block), R = msa_chunk(G) * G rows, whichever is larger */
static size_t msa_bwd_thread_floats(int64_t G, int64_t D, int block, int topk) {
    const size_t a = 2 * (size_t)(G * block * topk), R = (size_t)(msa_chunk(G) * G);
    const size_t b = 2 * R * (size_t)D + 2 * R * (size_t)block + 2 * R;
    return (a > b ? a : b) + 16;
}

size_t cpu_msa_attention_bwd_work(int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv,
                                  int64_t D, int block, int topk) {
    return sizeof(double) * (size_t)(B * H * Tq) +
           sizeof(int32_t) * (size_t)cpu_msa_inverse_ints(B, Hkv, Tq, Tk, topk) + 64 +
           sizeof(float) * (size_t)omp_get_max_threads() *
               msa_bwd_thread_floats(H / Hkv, D, block, topk);
}

void cpu_msa_attention_backward(float *dq, float *dk, float *dv, void *work, const float *dout,
                                const float *out, const float *lse, const float *q, const float *k,
                                const float *v, const int32_t *idx, const int32_t *pos,
                                const int32_t *seg, const int32_t *q_slot, int64_t B, int64_t Tq,
                                int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int block, int topk,
                                float scale) {
    msa_check_dims("msa_attention", H, Hkv, D, block, topk);
    if (!dq && !dk && !dv) return;
    (void)seg; /* the rows were checked by the forward */
    const int64_t G = H / Hkv, sup = (int64_t)block * topk, ldk = Hkv * D;
    const size_t per_thr = msa_bwd_thread_floats(G, D, block, topk);
    double *delta = work;
    int32_t *inv = (int32_t *)(delta + B * H * Tq);
    float *thr = (float *)(((uintptr_t)(inv + cpu_msa_inverse_ints(B, Hkv, Tq, Tk, topk)) + 63) &
                           ~(uintptr_t)63);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < B * Tq * H; row++) {
        const int64_t b = row / (Tq * H), t = (row / H) % Tq, h = row % H;
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += (double)dout[row * D + d] * out[row * D + d];
        delta[(b * H + h) * Tq + t] = s;
    }
    /* dq: one (b, kv head, query) at a time over its support: P = exp(S - lse), dP = dO V^T,
     * dS = P (dP - delta), dQ += scale dS K */
    if (dq) {
#pragma omp parallel for schedule(dynamic, 16)
        for (int64_t w = 0; w < B * Hkv * Tq; w++) {
            const int64_t b = w / (Hkv * Tq), g = (w / Tq) % Hkv, t = w % Tq;
            const int64_t ts = msa_slot(q_slot, t);
            const int32_t pt = pos[b * Tk + ts], *sel = idx + w * topk;
            const int64_t r0 = (b * Tq + t) * H + g * G;
            const float *kb = k + (b * Tk * Hkv + g) * D, *vb = v + (b * Tk * Hkv + g) * D;
            float *X = thr + (size_t)omp_get_thread_num() * per_thr, *Y = X + G * sup;
            int64_t n = 0;
            for (int s = 0; s < topk && sel[s] >= 0; s++) {
                int64_t j0, j1;
                msa_block_keys(ts, pt, sel[s], block, &j0, &j1);
                const int64_t nk = j1 - j0 + 1;
                msa_dots(G, nk, D, scale, q + r0 * D, D, kb + j0 * ldk, ldk, X + n, sup);
                msa_dots(G, nk, D, 1.0f, dout + r0 * D, D, vb + j0 * ldk, ldk, Y + n, sup);
                n += nk;
            }
            for (int64_t a = 0; a < G; a++) {
                const int64_t bht = (b * H + g * G + a) * Tq + t;
                const float ls = lse[bht], dl = (float)delta[bht];
                float *restrict x = X + a * sup, *restrict y = Y + a * sup;
#pragma omp simd
                for (int64_t i = 0; i < n; i++) y[i] = cpu_expf(x[i] - ls) * (y[i] - dl);
            }
            n = 0;
            for (int s = 0; s < topk && sel[s] >= 0; s++) {
                int64_t j0, j1;
                msa_block_keys(ts, pt, sel[s], block, &j0, &j1);
                msa_rows_sum(G, D, j1 - j0 + 1, scale, Y + n, sup, false, kb + j0 * ldk, ldk, true,
                             dq + r0 * D, D);
                n += j1 - j0 + 1;
            }
        }
    }
    if (!dk && !dv) return;
    cpu_msa_inverse(inv, idx, pos, q_slot, B, Hkv, Tq, Tk, block, topk);
    /* dk, dv: one key block (b, kv head g, first slot jb) at a time; the queries that chose it
     * go C at a time, their G heads' q and dout gathered into R = C*G rows:
     * P = exp(S - lse) (0 past each query's own slot), dV += P^T dO, dS = P (dP - delta),
     * dK += scale dS^T Q */
    const int64_t C = msa_chunk(G);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t w = 0; w < B * Hkv * Tk; w++) {
        const int64_t bg = w / Tk, jb = w % Tk, b = bg / Hkv, g = bg % Hkv;
        const int32_t *off = inv + bg * (Tk + 1);
        const int32_t *list = inv + B * Hkv * (Tk + 1) + bg * Tq * topk;
        if (off[jb] == off[jb + 1]) continue;
        float *Qg = thr + (size_t)omp_get_thread_num() * per_thr, *dOg = Qg + C * G * D;
        float *P = dOg + C * G * D, *dP = P + C * G * block, *ls = dP + C * G * block,
              *dl = ls + C * G;
        const float *kb = k + (b * Tk * Hkv + g) * D + jb * ldk,
                    *vb = v + (b * Tk * Hkv + g) * D + jb * ldk;
        float *dkb = dk ? dk + (b * Tk * Hkv + g) * D + jb * ldk : NULL;
        float *dvb = dv ? dv + (b * Tk * Hkv + g) * D + jb * ldk : NULL;
        for (int32_t e0 = off[jb]; e0 < off[jb + 1]; e0 += (int32_t)C) {
            const int64_t nc = off[jb + 1] - e0 < C ? off[jb + 1] - e0 : C, R = nc * G;
            /* the keys any of these queries sees: jb .. min(last t, block end) */
            const int64_t tl = msa_slot(q_slot, list[e0 + nc - 1]);
            const int64_t nk = (tl < jb + block - 1 ? tl : jb + block - 1) - jb + 1;
            for (int64_t c = 0; c < nc; c++) {
                const int64_t t = list[e0 + c], r0 = (b * Tq + t) * H + g * G;
                memcpy(Qg + c * G * D, q + r0 * D, sizeof(float) * (size_t)(G * D));
                memcpy(dOg + c * G * D, dout + r0 * D, sizeof(float) * (size_t)(G * D));
                for (int64_t a = 0; a < G; a++) {
                    ls[c * G + a] = lse[(b * H + g * G + a) * Tq + t];
                    dl[c * G + a] = (float)delta[(b * H + g * G + a) * Tq + t];
                }
            }
            msa_dots(R, nk, D, scale, Qg, D, kb, ldk, P, block);
            for (int64_t r = 0; r < R; r++) {
                const int64_t t = msa_slot(q_slot, list[e0 + r / G]);
                const int64_t hi = t - jb + 1 < nk ? t - jb + 1 : nk;
                float *restrict p = P + r * block;
#pragma omp simd
                for (int64_t i = 0; i < hi; i++) p[i] = cpu_expf(p[i] - ls[r]);
                for (int64_t i = hi; i < nk; i++) p[i] = 0.0f;
            }
            if (dvb) msa_rows_sum(nk, D, R, 1.0f, P, block, true, dOg, D, true, dvb, ldk);
            if (!dkb) continue;
            msa_dots(R, nk, D, 1.0f, dOg, D, vb, ldk, dP, block);
            for (int64_t r = 0; r < R; r++) {
                const float *restrict p = P + r * block;
                float *restrict y = dP + r * block;
                for (int64_t i = 0; i < nk; i++) y[i] = p[i] * (y[i] - dl[r]);
            }
            msa_rows_sum(nk, D, R, scale, dP, block, true, Qg, D, true, dkb, ldk);
        }
    }
}

void cpu_msa_attention_decode(float *out, const float *q, const float *k_cache,
                              const float *v_cache, const int32_t *idx, const int32_t *t_len,
                              int64_t B, int64_t t_max, int64_t H, int64_t Hkv, int64_t D,
                              int block, int topk, float scale) {
    msa_check_dims("msa_attention decode", H, Hkv, D, block, topk);
    for (int64_t b = 0; b < B; b++)
        MT_CHECK(t_len[b] >= 1 && t_len[b] <= t_max,
                 "msa_attention decode: row %lld: t_len %d not in [1, %lld]", (long long)b,
                 t_len[b], (long long)t_max);
    const int64_t G = H / Hkv;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < B * H; row++) {
        const int64_t b = row / H, h = row % H, g = h / G, t = t_len[b] - 1;
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

/* ---- node adapters: in[0] q (B,Tq,H,D), in[1] k, in[2] v (B,Tk,Hkv,D), in[3] idx
 * (B,Hkv,Tq,topk) I32, in[4] pos (B,Tk) I32, in[5] seg (B,Tk) I32 or NULL, in[6] q_slot (Tq) I32
 * or NULL (Tq = Tk); saved[0] lse (B,H,Tq) (only when a backward will run); fp[0] scale;
 * ip[0] block ---- */

void cpu_msa_attention_fwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *idx = n->in[3];
    const mt_tensor *pos = n->in[4], *seg = n->in[5], *qs = n->in[6];
    const int block = (int)n->ip[0], topk = (int)idx->shape[3];
    const int64_t G = q->shape[2] / k->shape[2];
    float *work = mt_node_scratch(n, sizeof(float) * (size_t)cpu_msa_attention_work(G, block, topk),
                                  "msa_attention scores");
    cpu_msa_attention_forward(n->out->data, n->saved[0] ? n->saved[0]->data : NULL, work, q->data,
                              k->data, v->data, idx->data, pos->data, seg ? seg->data : NULL,
                              qs ? qs->data : NULL, q->shape[0], q->shape[1], k->shape[1],
                              q->shape[2], k->shape[2], q->shape[3], block, topk, n->fp[0]);
}

void cpu_msa_attention_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *idx = n->in[3];
    const mt_tensor *pos = n->in[4], *seg = n->in[5], *qs = n->in[6];
    if (!q->grad && !k->grad && !v->grad) return;
    const int64_t B = q->shape[0], Tq = q->shape[1], Tk = k->shape[1], H = q->shape[2];
    const int64_t Hkv = k->shape[2], D = q->shape[3];
    const int block = (int)n->ip[0], topk = (int)idx->shape[3];
    void *work = mt_node_scratch(n, cpu_msa_attention_bwd_work(B, Tq, Tk, H, Hkv, D, block, topk),
                                 "msa_attention backward");
    cpu_msa_attention_backward(q->grad, k->grad, v->grad, work, n->out->grad, n->out->data,
                               n->saved[0]->data, q->data, k->data, v->data, idx->data, pos->data,
                               seg ? seg->data : NULL, qs ? qs->data : NULL, B, Tq, Tk, H, Hkv, D,
                               block, topk, n->fp[0]);
}
