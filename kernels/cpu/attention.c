/* attention.c: causal GQA softmax attention (spec section 5) on the CPU: forward with the
 * log-sum-exp saved, flash-style backward from that lse, and the single-token decode step.
 *
 * fp32 mode (the reference of the CUDA fp32 kernels): tiled GEMMs, as kernels/cpu/
 * lightning_block.c does for lightning. Per (b, h) and 64-row query tile I, over the key tiles
 * J <= I that any row of I sees (tiles above the diagonal, and tiles whose keys all lie in other
 * packed samples, are skipped before their product):
 *   forward:  S = scale Q_I K_J^T, causal + segment mask, online softmax in fp32
 *             (row maximum m, rescale of O_I and l by exp(m_old - m_new) when it grows),
 *             O_I += exp(S - m) V_J; O_I /= l and lse = m + log l at the end.
 *   backward: delta = rowsum(dO o O) (in double); per (b, kv head g), every key tile J, every
 *             head h of the group and every live query tile I: P = exp(S - lse) recomputed,
 *             dV_J += P^T dO_I, dP = dO_I V_J^T, dS = P (dP - delta), dQ_I += scale dS K_J,
 *             dK_J += scale dS^T Q_I.
 * The products run in registers (cpu_gemm_small, kernels/cpu/gemm_small.c) when the head dim is
 * a multiple of 8 up to 128, against a transposed copy of the key (and value) tile where the
 * product is A B^T; otherwise each is a cblas_sgemm.
 * The same tiles serve context parallelism's position kernels (cpu_attention_pos_*, attn_geom):
 * query rows at given positions against Tk keys; a query tile visits the key tiles up to its
 * highest position, so the plain kernels are the identity case, bit for bit.
 * One thread owns a (b, g), so it alone writes dk, dv of that head and dq of the group's heads:
 * the gradients accumulate (+=) in place, with no atomics and no scratch beyond two score tiles
 * and the transposed key and value tiles on the stack. Rounding: fp32 products (summed in k
 * order, or by BLAS), exp by cpu_expf (<= 1.3 ulp), l and the lse in double: 1-2e-7 relative L2
 * from the double-summing form this replaced (which attn_row still is: the decode step and the bf16
 * mode), at D = 16..32 and T up to 300 with packed samples; as in any fp32 attention (PyTorch's
 * too) a score x carries ~eps32 |x| of rounding, so outputs drift by ~1e-6 absolute once scores
 * reach ~+-25. Packed samples with ids rising along the row run in run mode (below).
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
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "attention.h"
#include "bf16.h"
#include "cpu_math.h"
#include "cpu_ops.h"

/* x through bf16 (double -> fp32 -> bf16): the bf16 mode's rounding of p and ds */
static inline double attn_r(double x) { return (double)mt_bf16_round((float)x); }

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

/* The fp32 mode's query and key tiles: a 16 KiB score tile, two per thread in the backward. */
#define ATTN_TILE 64

static void attn_check(int64_t H, int64_t Hkv, int64_t D) {
    MT_CHECK(Hkv > 0 && H % Hkv == 0, "attention: H=%lld is not a multiple of Hkv=%lld",
             (long long)H, (long long)Hkv);
    MT_CHECK(D > 0 && D <= CPU_ATTN_MAX_D, "attention: head dim %lld not in [1, %d]", (long long)D,
             CPU_ATTN_MAX_D);
}

/* The first key position query t sees: with a sliding window of win positions (0: none) the
 * keys s with t - win < s <= t, transformers' sliding_window_overlay (kv_idx > q_idx - W). */
static inline int64_t attn_lo(int64_t t, int64_t win) {
    return win > 0 && t - win + 1 > 0 ? t - win + 1 : 0;
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
        double pr = attn_r(p);
        for (int64_t d = 0; d < D; d++) acc[d] += pr * (double)vs[d];
    }
    for (int64_t d = 0; d < D; d++) o[d] = (float)(acc[d] / l);
    return (float)(m + log(l));
}

/* Which keys a query row sees. Query row i of a batch row sits at position attn_qp(qpos, i)
 * (qpos[i], or i itself when qpos is NULL) among Tk keys at positions 0 .. Tk-1, and sees key s
 * when s <= its position (and inside the window) and, with segments, sk[s] == sq[i]. The plain
 * kernels are the case Tq = Tk, qpos NULL, sq = sk = seg; the position kernels
 * (cpu_attention_pos_*) pass context parallelism's local queries against the gathered keys. */
typedef struct {
    int64_t B, Tq, Tk, H, Hkv, D;
    const int32_t *qpos;    /* (Tq) or NULL */
    const int32_t *sq, *sk; /* (B,Tq) and (B,Tk) segment ids, or both NULL */
    float scale;
    int64_t win;
    uint8_t *live; /* scratch of attn_live_bytes for the live-tile table, or NULL: per head */
} attn_geom;

static inline int64_t attn_qp(const int32_t *qpos, int64_t i) { return qpos ? qpos[i] : i; }

static attn_geom attn_geom_plain(const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                                 int64_t D, float scale, int64_t win) {
    return (attn_geom){B, T, T, H, Hkv, D, NULL, seg, seg, scale, win, NULL};
}

/* The bf16 mode's forward (cpu_attention_fwd_bf16), a row at a time in double. */
static void attn_fwd_bf16(float *out, float *lse, const float *q, const float *k, const float *v,
                          const attn_geom *G) {
    attn_check(G->H, G->Hkv, G->D);
    const int64_t Tq = G->Tq, Tk = G->Tk, H = G->H, Hkv = G->Hkv, D = G->D, rep = H / Hkv;
    /* rows are independent; later rows are longer, hence dynamic scheduling */
#pragma omp parallel for schedule(dynamic, 8)
    for (int64_t row = 0; row < G->B * Tq * H; row++) {
        int64_t b = row / (Tq * H), i = (row / H) % Tq, h = row % H;
        int64_t g = h / rep, t = attn_qp(G->qpos, i);
        const float *kb = k + (b * Tk * Hkv + g) * D, *vb = v + (b * Tk * Hkv + g) * D;
        const int32_t *skb = G->sk ? G->sk + b * Tk : NULL;
        const int64_t lo = attn_lo(t, G->win), ks = lo * Hkv * D;
        float l = attn_row_bf16(out + row * D, q + row * D, kb + ks, vb + ks, Hkv * D,
                                skb ? skb + lo : NULL, G->sq ? G->sq[b * Tq + i] : 0, t + 1 - lo, D,
                                (double)G->scale);
        if (lse) lse[(b * H + h) * Tq + i] = l;
    }
}

/* ---- the fp32 mode as tiled GEMMs ----------------------------------------------------------- */

/* Row-major C (M,N) = alpha op(A) op(B) + beta C, called inside the OpenMP loops: the OpenMP
 * build of OpenBLAS runs it on the calling thread. */
static void attn_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                      size_t lda, const float *Bm, size_t ldb, float beta, float *C, size_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, alpha, A, (int)lda, Bm, (int)ldb, beta, C, (int)ldc);
}

/* The tiles' products run in registers (cpu_gemm_small: 1.3-1.5x an sgemm at 64 x 64 x 32) when
 * the head dim is whole vectors and its transposed key tile fits the stack; else as sgemms. */
#define ATTN_SMALL_MAX_D 128
static inline bool attn_small(int D) { return D % 8 == 0 && D <= ATTN_SMALL_MAX_D; }

/* C (M,N) = alpha op(A) B (+ C where add), B (K,N) row-major; ta: A is stored (K,M). */
static void attn_prod(bool small, bool ta, int M, int N, int K, float alpha, const float *A,
                      size_t lda, const float *Bm, size_t ldb, bool add, float *C, size_t ldc) {
    if (small)
        cpu_gemm_small(M, N, K, alpha, A, ta ? 1 : (int64_t)lda, ta ? (int64_t)lda : 1, Bm,
                       (int64_t)ldb, add, C, (int64_t)ldc);
    else
        attn_gemm(ta, false, M, N, K, alpha, A, lda, Bm, ldb, add ? 1.0f : 0.0f, C, ldc);
}

/* Xt (D, ATTN_TILE) = the tile's nj rows of keys (or values) transposed, its columns nj up to
 * the next multiple of 8 zero, so that products against it run over whole vectors (the extra
 * columns of their results are never read). */
static void attn_tile_t(float *Xt, const float *xb, size_t ldk, int nj, int D) {
    cpu_transpose(Xt, ATTN_TILE, xb, (int64_t)ldk, nj, D);
    for (int d = 0; d < D; d++)
        for (int c = nj; c < (nj + 7) / 8 * 8; c++) Xt[d * ATTN_TILE + c] = 0.0f;
}

/* S (ni, nj) = alpha A_I X_J^T (scores: Q K^T; the backward's dO V^T): against Xt, the tile
 * transposed by attn_tile_t, when small; else an sgemm on X's rows xb. */
static void attn_prod_t(bool small, int ni, int nj, int D, float alpha, const float *A, size_t lda,
                        const float *Xt, const float *xb, size_t ldk, float *S) {
    if (small)
        cpu_gemm_small(ni, (nj + 7) / 8 * 8, D, alpha, A, (int64_t)lda, 1, Xt, ATTN_TILE, false, S,
                       ATTN_TILE);
    else
        attn_gemm(false, true, ni, nj, D, alpha, A, lda, xb, ldk, 0.0f, S, ATTN_TILE);
}

/* The keys row t sees within a tile [j0, j0 + nj): c < attn_hi(..) by causality (s <= t), and
 * among those, with sg, only keys of t's segment. */
static inline int attn_hi(int64_t t, int64_t j0, int nj) {
    int64_t hi = t - j0 + 1;
    return hi < 0 ? 0 : (hi > nj ? nj : (int)hi);
}
/* and c >= attn_lo_in(..) by the sliding window (attn_lo) */
static inline int attn_lo_in(int64_t t, int64_t j0, int nj, int64_t win) {
    int64_t lo = attn_lo(t, win) - j0;
    return lo < 0 ? 0 : (lo > nj ? nj : (int)lo);
}

/* The query rows of one tile of a batch row: rows i0 .. i0+ni-1, their positions (qpos, NULL:
 * the rows themselves) and segments (sq of the rows, sk of the keys; NULL: one segment). */
typedef struct {
    const int32_t *qpos, *sq, *sk;
    int64_t i0;
    int ni;
    int64_t win;
    int64_t k0; /* the first key tile's start: 0, or the first row of the tile's sample run */
} attn_rows;

/* One past the last key any row of the tile sees (its highest position + 1): the key tiles
 * [0, attn_end) are the ones the tile visits, tiles above every row's position are skipped. */
static int64_t attn_end(const attn_rows *R) {
    if (!R->qpos) return R->i0 + R->ni;
    int64_t hi = 0;
    for (int a = 0; a < R->ni; a++) hi = R->qpos[R->i0 + a] > hi ? R->qpos[R->i0 + a] : hi;
    return hi + 1;
}

/* Whether any row of the tile sees any key j0 .. j0+nj-1: tiles above the diagonal and tiles
 * that lie in other packed samples are skipped before their product. Segments are compared by
 * id (equal ids after a gap see each other), so this scans until the first visible pair: a few
 * compares for a live tile, ni x nj for a dead one (a D-th of its product). */
static bool attn_tile_live(const attn_rows *R, int64_t j0, int nj) {
    if (j0 >= attn_end(R)) return false;
    if (R->win > 0) { /* left of every window */
        int64_t lo = attn_lo(attn_qp(R->qpos, R->i0), R->win);
        for (int a = 1; R->qpos && a < R->ni; a++) {
            const int64_t la = attn_lo(R->qpos[R->i0 + a], R->win);
            lo = la < lo ? la : lo;
        }
        if (j0 + nj - 1 < lo) return false;
    }
    if (!R->sk) return true;
    for (int a = R->ni - 1; a >= 0; a--) {
        const int64_t t = attn_qp(R->qpos, R->i0 + a);
        const int32_t st = R->sq[R->i0 + a];
        const int hi = attn_hi(t, j0, nj), lo = attn_lo_in(t, j0, nj, R->win);
        for (int c = lo; c < hi; c++)
            if (R->sk[j0 + c] == st) return true;
    }
    return false;
}

/* S (ni, ATTN_TILE) in place: -inf where row i0 + a does not see key j0 + c. */
static void attn_mask(float *S, const attn_rows *R, int64_t j0, int nj) {
    for (int a = 0; a < R->ni; a++) {
        const int64_t t = attn_qp(R->qpos, R->i0 + a);
        float *restrict s = S + (size_t)a * ATTN_TILE;
        const int hi = attn_hi(t, j0, nj), lo = attn_lo_in(t, j0, nj, R->win);
        for (int c = 0; c < lo; c++) s[c] = -INFINITY;
        if (R->sk)
            for (int c = 0; c < hi; c++)
                if (R->sk[j0 + c] != R->sq[R->i0 + a]) s[c] = -INFINITY;
        for (int c = hi; c < nj; c++) s[c] = -INFINITY;
    }
}

/* Forward of one (b, h) and query tile R (ob and qb point at row i0's output and query, kb and
 * vb at key 0's key and value): online softmax across the key tiles the rows see. Per tile:
 * S = scale Q_I K_J^T (sgemm), masked; m the running row maximum, O_I (the output rows
 * themselves) and l rescaled by exp(m_old - m_new) when it grows; P = exp(S - m);
 * O_I += P V_J (sgemm); l += rowsum P (in double). At the end O_I /= l, lse = m + log l. */
static void attn_fwd_tile(float *ob, float *lse_row, const float *qb, const float *kb,
                          const float *vb, const attn_rows *R, const uint8_t *live, int64_t H,
                          int64_t Hkv, int D, float scale) {
    const size_t ldq = (size_t)(H * D), ldk = (size_t)(Hkv * D);
    const int ni = R->ni;
    const bool small = attn_small(D);
    float S[ATTN_TILE * ATTN_TILE], m[ATTN_TILE], Kt[ATTN_SMALL_MAX_D * ATTN_TILE];
    double l[ATTN_TILE];
    for (int a = 0; a < ni; a++) {
        memset(ob + (size_t)a * ldq, 0, sizeof(float) * (size_t)D);
        m[a] = -INFINITY;
        l[a] = 0;
    }
    const int64_t end = attn_end(R);
    for (int64_t j0 = R->k0; j0 < end; j0 += ATTN_TILE) {
        const int nj = (int)(end - j0 < ATTN_TILE ? end - j0 : ATTN_TILE);
        if (live ? !live[j0 / ATTN_TILE] : !attn_tile_live(R, j0, nj)) continue;
        if (small) attn_tile_t(Kt, kb + j0 * ldk, ldk, nj, D);
        attn_prod_t(small, ni, nj, D, scale, qb, ldq, Kt, kb + j0 * ldk, ldk, S);
        attn_mask(S, R, j0, nj);
        for (int a = 0; a < ni; a++) {
            float *restrict s = S + (size_t)a * ATTN_TILE;
            float mx = m[a];
#pragma omp simd reduction(max : mx)
            for (int c = 0; c < nj; c++) mx = s[c] > mx ? s[c] : mx;
            if (mx == -INFINITY) { /* the row sees nothing here, nor before */
                for (int c = 0; c < nj; c++) s[c] = 0.0f;
                continue;
            }
            if (mx > m[a] && m[a] != -INFINITY) {
                const float r = cpu_expf(m[a] - mx);
                float *restrict o = ob + (size_t)a * ldq;
                for (int d = 0; d < D; d++) o[d] *= r;
                l[a] *= (double)r;
            }
            m[a] = mx;
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int c = 0; c < nj; c++) { /* masked: exp(-inf) = 0 */
                s[c] = cpu_expf(s[c] - mx);
                sum += s[c];
            }
            l[a] += (double)sum;
        }
        attn_prod(small, false, ni, D, nj, 1.0f, S, ATTN_TILE, vb + j0 * ldk, ldk, true, ob, ldq);
    }
    /* l >= 1: every row sees itself (s = t, same segment) */
    for (int a = 0; a < ni; a++) {
        float *restrict o = ob + (size_t)a * ldq;
        for (int d = 0; d < D; d++) o[d] = (float)((double)o[d] / l[a]);
        if (lse_row) lse_row[R->i0 + a] = (float)((double)m[a] + log(l[a]));
    }
}

/* The query tile of rows [i0, i0 + ATTN_TILE) of batch row b (cut at Tq). */
static attn_rows attn_rows_at(const attn_geom *G, int64_t b, int64_t i0) {
    const int32_t *sq = G->sq ? G->sq + b * G->Tq : NULL, *sk = G->sk ? G->sk + b * G->Tk : NULL;
    const int ni = (int)(G->Tq - i0 < ATTN_TILE ? G->Tq - i0 : ATTN_TILE);
    return (attn_rows){G->qpos, sq, sk, i0, ni, G->win, 0};
}

/* ---- run mode: each packed sample a sequence of its own ----
 * With ids non-decreasing along each row (as the pipeline packs samples) and rows at their own
 * positions, a row sees its run's rows up to itself; the run's tiles start at its first row: no
 * tile straddles two samples, no segment mask, a sample's bits are those it gets alone (M2 bench
 * rows: 0.6x the time of the 64-row grid's tiles, docs/benchmarks.md). */

/* Segments, identity positions, the same non-decreasing ids for queries and keys per row. */
static bool attn_run_mode(const attn_geom *G) {
    if (!G->sq || !G->sk || G->Tq != G->Tk) return false;
    for (int64_t i = 0; G->qpos && i < G->Tq; i++)
        if (G->qpos[i] != i) return false;
    for (int64_t b = 0; b < G->B; b++) {
        const int32_t *sq = G->sq + b * G->Tq, *sk = G->sk + b * G->Tk;
        for (int64_t i = 0; i < G->Tq; i++)
            if (sq[i] != sk[i] || (i > 0 && sq[i] < sq[i - 1])) return false;
    }
    return true;
}

/* The first row in [lo, hi) of non-decreasing sg[] with an id above v (hi if none): log T. */
static int64_t attn_first_above(const int32_t *sg, int64_t lo, int64_t hi, int64_t v) {
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        const bool above = sg[mid] > v;
        lo = above ? lo : mid + 1;
        hi = above ? mid : hi;
    }
    return lo;
}

/* A run's query tile: rows [i0, min(i0 + ATTN_TILE, s1)), keys from the run's start s0. */
static attn_rows attn_rows_run(const attn_geom *G, int64_t i0, int64_t s0, int64_t s1) {
    const int ni = (int)(s1 - i0 < ATTN_TILE ? s1 - i0 : ATTN_TILE);
    return (attn_rows){NULL, NULL, NULL, i0, ni, G->win, s0};
}

/* The live-tile table's size: a byte per (batch row, query tile, key tile). */
static size_t attn_live_bytes(const attn_geom *G) {
    return (size_t)(G->B * ((G->Tq + ATTN_TILE - 1) / ATTN_TILE) *
                    ((G->Tk + ATTN_TILE - 1) / ATTN_TILE));
}

/* With segments and G->live, attn_tile_live of every (query tile, key tile) pair of every batch
 * row, once a call: it is the same for every head, and a dead tile's scan (ni x nj compares)
 * repeated per head was 3% of the M2 bench model's step. live[(b * ntq + it) * ntk + jt], ntk
 * the key tiles (Tk / ATTN_TILE rounded up); NULL without segments (the check is a comparison)
 * or without scratch (the kernels called outside a node: each tile is checked per head). */
static uint8_t *attn_live_table(const attn_geom *G, int64_t *ntk_out) {
    const int64_t ntq = (G->Tq + ATTN_TILE - 1) / ATTN_TILE,
                  ntk = (G->Tk + ATTN_TILE - 1) / ATTN_TILE;
    *ntk_out = ntk;
    if (!G->sk || !G->live) return NULL;
    uint8_t *live = G->live;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t w = 0; w < G->B * ntq; w++) {
        const attn_rows R = attn_rows_at(G, w / ntq, (w % ntq) * ATTN_TILE);
        for (int64_t jt = 0; jt < ntk; jt++) {
            const int64_t j0 = jt * ATTN_TILE;
            const int nj = (int)(G->Tk - j0 < ATTN_TILE ? G->Tk - j0 : ATTN_TILE);
            live[w * ntk + jt] = attn_tile_live(&R, j0, nj);
        }
    }
    return live;
}

static void attn_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                     const attn_geom *G) {
    attn_check(G->H, G->Hkv, G->D);
    const int64_t Tq = G->Tq, Tk = G->Tk, H = G->H, Hkv = G->Hkv, D = G->D;
    const int64_t rep = H / Hkv, nt = (Tq + ATTN_TILE - 1) / ATTN_TILE;
    const bool runs = attn_run_mode(G);
    int64_t ntk = 0;
    uint8_t *live = runs ? NULL : attn_live_table(G, &ntk);
    /* (b, h, query tile) are independent; later tiles are longer, hence dynamic scheduling. In
     * run mode unit (b, h, it) runs the run tiles that start in the grid's tile it. */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t w = 0; w < G->B * H * nt; w++) {
        const int64_t b = w / (H * nt), h = (w / nt) % H, it = w % nt, i0 = it * ATTN_TILE;
        const int64_t g = h / rep;
        if (runs) {
            const int32_t *sg = G->sq + b * Tq;
            const int64_t c1 = i0 + ATTN_TILE < Tq ? i0 + ATTN_TILE : Tq;
            for (int64_t i = i0, s0, s1; i < c1; i = s1) {
                s0 = attn_first_above(sg, 0, i, (int64_t)sg[i] - 1); /* i's run [s0, s1) */
                s1 = attn_first_above(sg, i + 1, Tq, sg[i]);
                for (int64_t r0 = s0 + (i - s0 + ATTN_TILE - 1) / ATTN_TILE * ATTN_TILE;
                     r0 < c1 && r0 < s1; r0 += ATTN_TILE) {
                    const attn_rows R = attn_rows_run(G, r0, s0, s1);
                    attn_fwd_tile(out + ((b * Tq + r0) * H + h) * D,
                                  lse ? lse + (b * H + h) * Tq : NULL,
                                  q + ((b * Tq + r0) * H + h) * D, k + (b * Tk * Hkv + g) * D,
                                  v + (b * Tk * Hkv + g) * D, &R, NULL, H, Hkv, (int)D, G->scale);
                }
            }
            continue;
        }
        const attn_rows R = attn_rows_at(G, b, i0);
        attn_fwd_tile(out + ((b * Tq + i0) * H + h) * D, lse ? lse + (b * H + h) * Tq : NULL,
                      q + ((b * Tq + i0) * H + h) * D, k + (b * Tk * Hkv + g) * D,
                      v + (b * Tk * Hkv + g) * D, &R, live ? live + (b * nt + it) * ntk : NULL, H,
                      Hkv, (int)D, G->scale);
    }
}

void cpu_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                       const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D,
                       float scale) {
    const attn_geom G = attn_geom_plain(seg, B, T, H, Hkv, D, scale, 0);
    attn_fwd(out, lse, q, k, v, &G);
}

void cpu_attention_fwd_bf16(float *out, float *lse, const float *q, const float *k, const float *v,
                            const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                            int64_t D, float scale) {
    const attn_geom G = attn_geom_plain(seg, B, T, H, Hkv, D, scale, 0);
    attn_fwd_bf16(out, lse, q, k, v, &G);
}

/* delta[b,h,i] = rowsum(dO o O): the softmax backward's per-row term */
static void attn_delta(double *delta, const float *dout, const float *out, const attn_geom *G) {
    const int64_t Tq = G->Tq, H = G->H, D = G->D;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < G->B * Tq * H; row++) {
        int64_t b = row / (Tq * H), t = (row / H) % Tq, h = row % H;
        delta[(b * H + h) * Tq + t] = attn_dot(dout + row * D, out + row * D, D);
    }
}

/* The bf16 mode's dq: one query row at a time, summing over its visible kv positions. */
static void attn_dq_bf16(float *dq, const double *delta, const float *dout, const float *lse,
                         const float *q, const float *k, const float *v, const attn_geom *G) {
    const int64_t Tq = G->Tq, Tk = G->Tk, H = G->H, Hkv = G->Hkv, D = G->D, rep = H / Hkv;
    const double sc = (double)G->scale;
#pragma omp parallel for schedule(dynamic, 8)
    for (int64_t row = 0; row < G->B * Tq * H; row++) {
        int64_t b = row / (Tq * H), i = (row / H) % Tq, h = row % H;
        int64_t g = h / rep, bht = (b * H + h) * Tq + i, t = attn_qp(G->qpos, i);
        const float *qt = q + row * D, *do_t = dout + row * D;
        const int32_t *skb = G->sk ? G->sk + b * Tk : NULL;
        const int32_t st = G->sq ? G->sq[b * Tq + i] : 0;
        double acc[CPU_ATTN_MAX_D];
        for (int64_t d = 0; d < D; d++) acc[d] = 0;
        for (int64_t s = attn_lo(t, G->win); s <= t; s++) {
            if (skb && skb[s] != st) continue;
            const float *ks = k + ((b * Tk + s) * Hkv + g) * D;
            const float *vs = v + ((b * Tk + s) * Hkv + g) * D;
            double p = exp(sc * attn_dot(qt, ks, D) - (double)lse[bht]);
            double ds = attn_r(p * (attn_dot(do_t, vs, D) - delta[bht]));
            for (int64_t d = 0; d < D; d++) acc[d] += ds * (double)ks[d];
        }
        for (int64_t d = 0; d < D; d++) dq[row * D + d] += (float)(sc * acc[d]);
    }
}

/* The bf16 mode's backward, a row at a time in double: p and ds are rounded before their
 * products (dout, q, k, v arrive rounded in that mode). */
static void attn_bwd_bf16(float *dq, float *dk, float *dv, double *delta, const float *dout,
                          const float *out, const float *lse, const float *q, const float *k,
                          const float *v, const attn_geom *G) {
    attn_check(G->H, G->Hkv, G->D);
    const int64_t Tq = G->Tq, Tk = G->Tk, H = G->H, Hkv = G->Hkv, D = G->D, rep = H / Hkv;
    const double sc = (double)G->scale;
    attn_delta(delta, dout, out, G);
    if (dq) attn_dq_bf16(dq, delta, dout, lse, q, k, v, G);
    if (!dk && !dv) return;
        /* dk, dv: one kv row at a time, summing over the query rows that see it, of every head in
         * its group (recomputing P instead of scattering, so no fp32 accumulation across threads)
         */
#pragma omp parallel for schedule(dynamic, 8)
    for (int64_t row = 0; row < G->B * Tk * Hkv; row++) {
        int64_t b = row / (Tk * Hkv), s = (row / Hkv) % Tk, g = row % Hkv;
        const float *ks = k + row * D, *vs = v + row * D;
        const int32_t *sqb = G->sq ? G->sq + b * Tq : NULL;
        const int32_t ss = G->sk ? G->sk[b * Tk + s] : 0;
        double acc_k[CPU_ATTN_MAX_D], acc_v[CPU_ATTN_MAX_D];
        for (int64_t d = 0; d < D; d++) acc_k[d] = acc_v[d] = 0;
        for (int64_t h = g * rep; h < (g + 1) * rep; h++) {
            for (int64_t i = G->qpos ? 0 : s; i < Tq; i++) {
                const int64_t t = attn_qp(G->qpos, i);
                if (t < s || (G->win > 0 && t >= s + G->win)) continue;
                if (sqb && sqb[i] != ss) continue;
                int64_t bht = (b * H + h) * Tq + i;
                const float *qt = q + ((b * Tq + i) * H + h) * D;
                const float *do_t = dout + ((b * Tq + i) * H + h) * D;
                double p = exp(sc * attn_dot(qt, ks, D) - (double)lse[bht]);
                if (dv) {
                    double pr = attn_r(p);
                    for (int64_t d = 0; d < D; d++) acc_v[d] += pr * (double)do_t[d];
                }
                if (dk) {
                    double ds = attn_r(p * (attn_dot(do_t, vs, D) - delta[bht]));
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

/* Backward of one (b, h), query tile R against key tile J (live): P = exp(S - lse) recomputed
 * (0 where masked), dV_J += P^T dO_I, dP = dO_I V_J^T, dS = P (dP - delta),
 * dQ_I += scale dS K_J, dK_J += scale dS^T Q_I; every product accumulating into the gradient
 * rows (NULL gradients skipped). P, dP: (ATTN_TILE, ATTN_TILE) scratch; Kt, Vt: the key and value
 * tiles transposed (attn_tile_t) when small. */
static void attn_bwd_tile(float *dqb, float *dkb, float *dvb, float *P, float *dP, const float *dob,
                          const float *lse_row, const double *delta_row, const float *qb,
                          const float *kb, const float *vb, const float *Kt, const float *Vt,
                          const attn_rows *R, int64_t j0, int nj, int64_t H, int64_t Hkv, int D,
                          float scale) {
    const size_t ldq = (size_t)(H * D), ldk = (size_t)(Hkv * D);
    const int64_t i0 = R->i0;
    const int ni = R->ni;
    const bool small = attn_small(D);
    attn_prod_t(small, ni, nj, D, scale, qb + i0 * ldq, ldq, Kt, kb + j0 * ldk, ldk, P);
    for (int a = 0; a < ni; a++) {
        const int64_t t = attn_qp(R->qpos, i0 + a);
        const float ls = lse_row[i0 + a];
        float *restrict p = P + (size_t)a * ATTN_TILE;
        const int hi = attn_hi(t, j0, nj), lo = attn_lo_in(t, j0, nj, R->win);
#pragma omp simd
        for (int c = 0; c < hi; c++) p[c] = cpu_expf(p[c] - ls);
        for (int c = 0; c < lo; c++) p[c] = 0.0f;
        if (R->sk)
            for (int c = 0; c < hi; c++)
                if (R->sk[j0 + c] != R->sq[i0 + a]) p[c] = 0.0f;
        for (int c = hi; c < nj; c++) p[c] = 0.0f;
    }
    if (dvb)
        attn_prod(small, true, nj, D, ni, 1.0f, P, ATTN_TILE, dob + i0 * ldq, ldq, true,
                  dvb + j0 * ldk, ldk);
    if (!dqb && !dkb) return;
    attn_prod_t(small, ni, nj, D, 1.0f, dob + i0 * ldq, ldq, Vt, vb + j0 * ldk, ldk, dP);
    for (int a = 0; a < ni; a++) {
        const float dl = (float)delta_row[i0 + a];
        const float *restrict p = P + (size_t)a * ATTN_TILE;
        float *restrict ds = dP + (size_t)a * ATTN_TILE;
        for (int c = 0; c < nj; c++) ds[c] = p[c] * (ds[c] - dl);
    }
    if (dqb)
        attn_prod(small, false, ni, D, nj, scale, dP, ATTN_TILE, kb + j0 * ldk, ldk, true,
                  dqb + i0 * ldq, ldq);
    if (dkb)
        attn_prod(small, true, nj, D, ni, scale, dP, ATTN_TILE, qb + i0 * ldq, ldq, true,
                  dkb + j0 * ldk, ldk);
}

/* The backward of one (b, kv head g) over the query rows and keys [lo, hi) (the whole batch row,
 * or one sample run as its own sequence: run): every key tile J from lo, every head h of the
 * group, every live query tile I from lo. The key tiles are the outer loop, so each is
 * transposed once for all the group's query tiles; every gradient row still sums its terms in
 * the order of a loop over (h, I, J): dQ_I over J, dK_J and dV_J over (h, I). */
static void attn_bwd_span(float *dq, float *dk, float *dv, const double *delta, const float *dout,
                          const float *lse, const float *q, const float *k, const float *v,
                          const attn_geom *G, const uint8_t *live, int64_t ntk, int64_t b,
                          int64_t g, int64_t lo, int64_t hi, bool run) {
    const int64_t Tq = G->Tq, Tk = G->Tk, H = G->H, Hkv = G->Hkv, D = G->D, rep = H / Hkv;
    const int64_t ntq = (Tq + ATTN_TILE - 1) / ATTN_TILE, khi = run ? hi : Tk;
    const bool small = attn_small((int)D);
    const size_t kvo = (size_t)((b * Tk * Hkv + g) * D);
    float P[ATTN_TILE * ATTN_TILE], dP[ATTN_TILE * ATTN_TILE];
    float Kt[ATTN_SMALL_MAX_D * ATTN_TILE], Vt[ATTN_SMALL_MAX_D * ATTN_TILE];
    for (int64_t j0 = lo; j0 < khi; j0 += ATTN_TILE) {
        const int nj = (int)(khi - j0 < ATTN_TILE ? khi - j0 : ATTN_TILE);
        bool transposed = false;
        for (int64_t h = g * rep; h < (g + 1) * rep; h++) {
            const size_t qo = (size_t)((b * Tq * H + h) * D);
            for (int64_t i0 = lo; i0 < hi; i0 += ATTN_TILE) {
                const attn_rows R = run ? attn_rows_run(G, i0, lo, hi) : attn_rows_at(G, b, i0);
                const int64_t end = attn_end(&R);
                if (j0 >= end) continue;
                const int njr = (int)(end - j0 < nj ? end - j0 : nj); /* keys the rows see */
                if (live ? !live[(b * ntq + i0 / ATTN_TILE) * ntk + j0 / ATTN_TILE]
                         : !attn_tile_live(&R, j0, njr))
                    continue;
                if (small && !transposed) {
                    attn_tile_t(Kt, k + kvo + j0 * Hkv * D, (size_t)(Hkv * D), nj, (int)D);
                    attn_tile_t(Vt, v + kvo + j0 * Hkv * D, (size_t)(Hkv * D), nj, (int)D);
                    transposed = true;
                }
                attn_bwd_tile(dq ? dq + qo : NULL, dk ? dk + kvo : NULL, dv ? dv + kvo : NULL, P,
                              dP, dout + qo, lse + (b * H + h) * Tq, delta + (b * H + h) * Tq,
                              q + qo, k + kvo, v + kvo, Kt, Vt, &R, j0, njr, H, Hkv, (int)D,
                              G->scale);
            }
        }
    }
}

static void attn_bwd(float *dq, float *dk, float *dv, double *delta, const float *dout,
                     const float *out, const float *lse, const float *q, const float *k,
                     const float *v, const attn_geom *G) {
    attn_check(G->H, G->Hkv, G->D);
    if (!dq && !dk && !dv) return;
    attn_delta(delta, dout, out, G);
    const bool runs = attn_run_mode(G);
    int64_t ntk = 0;
    uint8_t *live = runs ? NULL : attn_live_table(G, &ntk);
    /* one (b, kv head) per thread: it alone writes dk, dv of that head and dq of the heads of
     * its group, so every gradient row is accumulated without atomics or extra scratch */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bg = 0; bg < G->B * G->Hkv; bg++) {
        const int64_t b = bg / G->Hkv, g = bg % G->Hkv;
        if (!runs) {
            attn_bwd_span(dq, dk, dv, delta, dout, lse, q, k, v, G, live, ntk, b, g, 0, G->Tq,
                          false);
            continue;
        }
        const int32_t *sg = G->sq + b * G->Tq;
        for (int64_t s0 = 0, s1; s0 < G->Tq; s0 = s1) {
            s1 = attn_first_above(sg, s0 + 1, G->Tq, sg[s0]);
            attn_bwd_span(dq, dk, dv, delta, dout, lse, q, k, v, G, NULL, 0, b, g, s0, s1, true);
        }
    }
}

void cpu_attention_bwd(float *dq, float *dk, float *dv, double *delta, const float *dout,
                       const float *out, const float *lse, const float *q, const float *k,
                       const float *v, const int32_t *seg, int64_t B, int64_t T, int64_t H,
                       int64_t Hkv, int64_t D, float scale) {
    const attn_geom G = attn_geom_plain(seg, B, T, H, Hkv, D, scale, 0);
    attn_bwd(dq, dk, dv, delta, dout, out, lse, q, k, v, &G);
}

void cpu_attention_bwd_bf16(float *dq, float *dk, float *dv, double *delta, const float *dout,
                            const float *out, const float *lse, const float *q, const float *k,
                            const float *v, const int32_t *seg, int64_t B, int64_t T, int64_t H,
                            int64_t Hkv, int64_t D, float scale) {
    const attn_geom G = attn_geom_plain(seg, B, T, H, Hkv, D, scale, 0);
    attn_bwd_bf16(dq, dk, dv, delta, dout, out, lse, q, k, v, &G);
}

/* ---- context parallelism's local queries against the gathered keys (attention.h) ---- */

static attn_geom attn_geom_pos(const int32_t *seg_q, const int32_t *seg_k, const int32_t *q_pos,
                               int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D,
                               float scale) {
    MT_CHECK(!seg_q == !seg_k, "attention (positions): segment ids for %s only",
             seg_q ? "the queries" : "the keys");
    for (int64_t i = 0; i < Tq; i++)
        MT_CHECK(q_pos[i] >= 0 && q_pos[i] < Tk,
                 "attention (positions): query row %lld at position %d, keys 0 .. %lld",
                 (long long)i, q_pos[i], (long long)(Tk - 1));
    return (attn_geom){B, Tq, Tk, H, Hkv, D, q_pos, seg_q, seg_k, scale, 0, NULL};
}

void cpu_attention_pos_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                           const int32_t *seg_q, const int32_t *seg_k, const int32_t *q_pos,
                           int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D,
                           float scale, bool bf16) {
    const attn_geom G = attn_geom_pos(seg_q, seg_k, q_pos, B, Tq, Tk, H, Hkv, D, scale);
    (bf16 ? attn_fwd_bf16 : attn_fwd)(out, lse, q, k, v, &G);
}

void cpu_attention_pos_bwd(float *dq, float *dk, float *dv, double *delta, const float *dout,
                           const float *out, const float *lse, const float *q, const float *k,
                           const float *v, const int32_t *seg_q, const int32_t *seg_k,
                           const int32_t *q_pos, int64_t B, int64_t Tq, int64_t Tk, int64_t H,
                           int64_t Hkv, int64_t D, float scale, bool bf16) {
    const attn_geom G = attn_geom_pos(seg_q, seg_k, q_pos, B, Tq, Tk, H, Hkv, D, scale);
    (bf16 ? attn_bwd_bf16 : attn_bwd)(dq, dk, dv, delta, dout, out, lse, q, k, v, &G);
}

void cpu_attention_decode(float *out, const float *q, const float *k_cache, const float *v_cache,
                          const int32_t *t_len, int64_t B, int64_t t_max, int64_t H, int64_t Hkv,
                          int64_t D, float scale) {
    attn_check(H, Hkv, D);
    for (int64_t b = 0; b < B; b++)
        MT_CHECK(t_len[b] >= 1 && t_len[b] <= t_max,
                 "attention decode: row %lld: t_len %d not in [1, Tmax=%lld]", (long long)b,
                 t_len[b], (long long)t_max);
    int64_t rep = H / Hkv;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < B * H; row++) {
        int64_t b = row / H, h = row % H, g = h / rep;
        const float *kb = k_cache + (b * t_max * Hkv + g) * D;
        const float *vb = v_cache + (b * t_max * Hkv + g) * D;
        attn_row(out + row * D, q + row * D, kb, vb, Hkv * D, NULL, 0, t_len[b], D, (double)scale);
    }
}

void cpu_attention_chunk(float *out, const float *q, const float *k_cache, const float *v_cache,
                         int64_t t0, int64_t T, int64_t t_max, int64_t H, int64_t Hkv, int64_t D,
                         float scale) {
    attn_check(H, Hkv, D);
    MT_CHECK(t0 >= 0 && T >= 1 && t0 + T <= t_max,
             "attention chunk: positions [%lld, %lld) not in [0, Tmax=%lld]", (long long)t0,
             (long long)(t0 + T), (long long)t_max);
    const int64_t rep = H / Hkv, nt = (T + ATTN_TILE - 1) / ATTN_TILE;
    /* the prefill's tiles (cpu_attention_fwd), the query tiles starting at position t0 */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t w = 0; w < H * nt; w++) {
        const int64_t h = w / nt, a0 = (w % nt) * ATTN_TILE, g = h / rep;
        const int ni = (int)(T - a0 < ATTN_TILE ? T - a0 : ATTN_TILE);
        const attn_rows R = {NULL, NULL, NULL, t0 + a0, ni, 0, 0};
        attn_fwd_tile(out + (a0 * H + h) * D, NULL, q + (a0 * H + h) * D, k_cache + g * D,
                      v_cache + g * D, &R, NULL, H, Hkv, (int)D, scale);
    }
}

/* ---- node adapters: in[0..3] q (B,T,H,D), k, v (B,T,Hkv,D), seg (B,T) I32 or NULL;
 * saved[0] lse (B,H,T) (only when a backward will run); fp[0] scale; ip[0] the mode (MT_F32 or
 * MT_BF16, header comment); ip[1] the sliding window (0: none; attn_lo) ---- */

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
    attn_geom G = attn_geom_plain(seg ? seg->data : NULL, q->shape[0], q->shape[1], q->shape[2],
                                  k->shape[2], q->shape[3], n->fp[0], n->ip[1]);
    if (seg) G.live = mt_node_scratch(n, attn_live_bytes(&G), "attention live tiles");
    (n->ip[0] == MT_BF16 ? attn_fwd_bf16 : attn_fwd)(
        n->out->data, n->saved[0] ? n->saved[0]->data : NULL, qd, kd, vd, &G);
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
    attn_geom G = attn_geom_plain(seg ? seg->data : NULL, B, T, H, k->shape[2], q->shape[3],
                                  n->fp[0], n->ip[1]);
    if (seg) G.live = mt_node_scratch(n, attn_live_bytes(&G), "attention live tiles");
    (n->ip[0] == MT_BF16 ? attn_bwd_bf16 : attn_bwd)(
        q->grad, k->grad, v->grad, delta, dout, n->out->data, n->saved[0]->data, qd, kd, vd, &G);
}
