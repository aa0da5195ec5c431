/* lightning_block.c: the block (chunked) form of lightning attention on the CPU, forward and
 * backward (spec 4.4, 4.9): the fp32 reference of kernels/cuda/lightning_block.cu, computed as
 * the same GEMMs (cblas_sgemm on strided rows of qkv, one (b,h) per OpenMP thread).
 *
 * For one (b,h) and a block of positions [b0, e], m = e - b0 + 1, with S the fp32 state after
 * position b0 - 1 (the end of the previous block):
 *   o_i = sum_{j = max(b0, start_i) .. i} gamma^(i-j) (q_i . k_j) v_j          (intra)
 *       + [i < first] gamma^(i-b0+1) q_i S                                     (inter)
 *   S  <- [no reset in block] gamma^m S + sum_{j = from .. e} gamma^(e-j) k_j^T v_j
 * where first is the first reset position in the block (e+1 if none) and from the last one
 * (b0 if none): a query after a reset cannot see the previous blocks, and keys before the
 * block's last reset do not reach the next block. With no segments this is exactly spec 4.4's
 * query_decay / key_decay / diagonal_decay algorithm.
 *
 * As GEMMs, per block (the formulas and reset rules of kernels/cuda/lightning_block.cu):
 *   forward   O = Pm V + diag(qd) (Q S),  S <- (keep ? gamma^m S : 0) + Kd^T V
 * with P = Q K^T masked to Pm (times gamma^(i-j) where key j is visible from row i, else 0),
 * qd_i = gamma^(i-b0+1) for i < first (else 0), Kd_j = gamma^(e-j) k_j for j >= from; the
 * backward below. The (m,m) scores are taken in LT_TILE x LT_TILE tiles (tiles above the
 * diagonal skipped, the diagonal tile masked), so the scratch is a few tiles on each thread's
 * stack whatever the block size: nothing is allocated, and the state workspaces keep the
 * signatures the tests and the node adapter use. Parallel over (b,h) only: the blocks of a row
 * are chained by the state.
 *
 * Rounding: products are summed in fp32 by BLAS (its order), the decays exp(-lambda n) are
 * doubles applied to fp32 values in double and rounded once, the state is fp32 between blocks:
 * the rounding of the CUDA fp32 path, up to summation order. Against the double-summing naive
 * form (lightning.c) that costs ~1.5e-7 relative L2 (grad_lightning's bound: 1e-6). Until
 * 2026-11-29 this file summed in double element by element: 6x slower forward and backward at
 * the training benchmark's shape, 11x at D = 128, block 256 (docs/benchmarks.md). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "cpu_ops.h"
#include "lightning.h"

/* Scores are computed in tiles of LT_TILE x LT_TILE: 16 KiB each, and at most LT_TILE x D
 * packed rows (64 KiB at D = 256) on each thread's stack. */
#define LT_TILE 64

/* gamma^n = exp(-lambda n) for n = 0 .. block, the only powers a block uses, computed once per
 * (b,h) rather than in the inner loops; rev[k] = gamma^(block-k), the same powers read forward
 * by the mask (gamma^(i-j) = rev[block - i + j]). Blocks above LT_TABLE_MAX fall back to
 * exp(). */
#define LT_TABLE_MAX 1024
typedef struct {
    double lam;
    int block;
    const double *g; /* NULL: no table */
    const double *rev;
} lt_pow;

static lt_pow lt_pow_init(double *buf, double *rev, double lam, int block) {
    lt_pow p = {lam, block, NULL, NULL};
    if (block > LT_TABLE_MAX) return p;
    for (int n = 0; n <= block; n++) buf[n] = exp(-lam * n);
    for (int k = 0; k <= block; k++) rev[k] = buf[block - k];
    p.g = buf;
    p.rev = rev;
    return p;
}

static inline double lt_g(const lt_pow *p, int n) { return p->g ? p->g[n] : exp(-p->lam * n); }

/* One block [b0, e] of a row: first / from as above (first = e + 1 and from = b0 when the block
 * has no reset), keep = no reset in the block. */
typedef struct {
    int b0, e, m, first, from;
    bool keep;
} lt_blk;

static lt_blk lt_blk_at(const int32_t *sg, int b0, int block, int T) {
    lt_blk k = {b0, (b0 + block < T ? b0 + block : T) - 1, 0, 0, b0, true};
    k.m = k.e - b0 + 1;
    k.first = k.e + 1;
    for (int r = b0; r <= k.e; r++) {
        if (!cpu_lightning_resets(sg, r)) continue;
        if (k.first > k.e) k.first = r;
        k.from = r;
        k.keep = false;
    }
    return k;
}

/* start[a] = the first key row i0 + a sees within the block (its segment's start, or b0), for
 * the rows i0 .. i1 of a tile. Non-decreasing in a. */
static void lt_tile_starts(int *start, const int32_t *sg, int b0, int i0, int i1) {
    int s = b0;
    if (sg)
        for (int r = i0; r > b0; r--)
            if (cpu_lightning_resets(sg, r)) {
                s = r;
                break;
            }
    start[0] = s;
    for (int i = i0 + 1; i <= i1; i++) {
        if (cpu_lightning_resets(sg, i)) s = i;
        start[i - i0] = s;
    }
}

/* Row-major C (M,N) = op(A) op(B) + beta C. */
static void lt_gemm(bool ta, bool tb, int M, int N, int K, const float *A, size_t lda,
                    const float *Bm, size_t ldb, float beta, float *C, size_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, 1.0f, A, (int)lda, Bm, (int)ldb, beta, C, (int)ldc);
}

/* The scores of rows i0.. (ni) against keys j0.. (nj), P (ni, LT_TILE), in place: P[a][c] *
 * gamma^(i-j) where key j = j0 + c is visible from row i = i0 + a (start[a] <= j <= i), else 0.
 * The product is taken in double and rounded once. */
static void lt_mask(float *P, int ni, int nj, int i0, int j0, const int *start, const lt_pow *gp) {
    for (int a = 0; a < ni; a++) {
        const int i = i0 + a;
        float *restrict p = P + (size_t)a * LT_TILE;
        int lo = start[a] - j0, hi = i - j0 + 1; /* visible: lo <= c < hi */
        lo = lo < 0 ? 0 : (lo > nj ? nj : lo);
        hi = hi > nj ? nj : (hi < lo ? lo : hi);
        for (int c = 0; c < lo; c++) p[c] = 0.0f;
        if (gp->rev) {
            const double *restrict w = gp->rev + gp->block - i + j0;
            for (int c = lo; c < hi; c++) p[c] = (float)((double)p[c] * w[c]);
        } else {
            for (int c = lo; c < hi; c++) p[c] = (float)((double)p[c] * lt_g(gp, i - j0 - c));
        }
        for (int c = hi; c < nj; c++) p[c] = 0.0f;
    }
}

/* X (n, D) = rows r0 .. r0+n-1 of src (stride `stride`), row r scaled by gamma^(off + sign r):
 * the decayed GEMM operands (q or do by gamma^(i-b0+1), k or v by gamma^(e-j)). */
static void lt_pack(float *restrict X, const float *src, size_t stride, int D, int r0, int n,
                    const lt_pow *gp, int off, int sign) {
    for (int a = 0; a < n; a++) {
        const int r = r0 + a;
        const double w = lt_g(gp, off + sign * r);
        const float *restrict s = src + (size_t)r * stride;
        float *restrict x = X + (size_t)a * D;
        for (int c = 0; c < D; c++) x[c] = (float)(w * (double)s[c]);
    }
}

/* S (D,D) <- (keep ? gamma^m S : 0): the carried part of a state (or state gradient). */
static void lt_state_decay(float *S, int D, const lt_pow *gp, const lt_blk *k) {
    if (!k->keep) {
        memset(S, 0, sizeof(float) * D * D);
        return;
    }
    const double gm = lt_g(gp, k->m);
    for (int x = 0; x < D * D; x++) S[x] = (float)(gm * (double)S[x]);
}

/* S <- (keep ? gamma^m S : 0) + Kd^T V over the keys from .. e: the state at the block's end. */
static void lt_state_update(float *S, float *X, const float *kb, const float *vb, size_t row3,
                            int D, const lt_pow *gp, const lt_blk *k) {
    lt_state_decay(S, D, gp, k);
    for (int j0 = k->from; j0 <= k->e; j0 += LT_TILE) {
        const int nj = (k->e - j0 + 1 < LT_TILE) ? k->e - j0 + 1 : LT_TILE;
        lt_pack(X, kb, row3, D, j0, nj, gp, k->e, -1);
        lt_gemm(true, false, D, D, nj, X, D, vb + j0 * row3, row3, 1.0f, S, D);
    }
}

void cpu_lightning_forward_block(float *out, float *state, const float *qkv, const float *decay,
                                 const int32_t *seg, int B, int T, int H, int D, int block) {
    cpu_lightning_forward_block_from(out, state, NULL, qkv, decay, seg, B, T, H, D, block);
}

/* S (D,D) of pair bh = s0's, or 0 when s0 is NULL. */
static void lt_state_init(float *S, const float *s0, int bh, int D) {
    if (s0)
        memcpy(S, s0 + (size_t)bh * D * D, sizeof(float) * D * D);
    else
        memset(S, 0, sizeof(float) * D * D);
}

void cpu_lightning_forward_block_from(float *out, float *state, const float *s0, const float *qkv,
                                      const float *decay, const int32_t *seg, int B, int T, int H,
                                      int D, int block) {
    cpu_lightning_check_dims("lightning forward (block)", B, T, H, D);
    MT_CHECK(block >= 1, "lightning forward (block): block = %d must be >= 1", block);
    const size_t row3 = (size_t)H * 3 * D, row = (size_t)H * D;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *qb = qkv + ((size_t)b * T * H + h) * 3 * D, *kb = qb + D, *vb = qb + 2 * D;
        float *ob = out + ((size_t)b * T * H + h) * D;
        const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
        double table[LT_TABLE_MAX + 1], rev[LT_TABLE_MAX + 1];
        float P[LT_TILE * LT_TILE], X[LT_TILE * CPU_LIGHTNING_MAX_D];
        int start[LT_TILE];
        const lt_pow gp = lt_pow_init(table, rev, decay[h], block);
        float *S = state + (size_t)bh * D * D;
        lt_state_init(S, s0, bh, D);
        for (int b0 = 0; b0 < T; b0 += block) {
            const lt_blk k = lt_blk_at(sg, b0, block, T);
            /* inter: o_i = gamma^(i-b0+1) (q_i S) before the first reset, 0 from it on */
            if (k.first > b0)
                lt_gemm(false, false, k.first - b0, D, D, qb + b0 * row3, row3, S, D, 0.0f,
                        ob + b0 * row, row);
            for (int i = b0; i <= k.e; i++) {
                float *o = ob + i * row;
                if (i >= k.first) {
                    memset(o, 0, sizeof(float) * D);
                    continue;
                }
                const double w = lt_g(&gp, i - b0 + 1);
                for (int d = 0; d < D; d++) o[d] = (float)(w * (double)o[d]);
            }
            /* intra: O_I += mask(Q_I K_J^T) V_J over the tiles J <= I */
            for (int i0 = b0; i0 <= k.e; i0 += LT_TILE) {
                const int ni = (k.e - i0 + 1 < LT_TILE) ? k.e - i0 + 1 : LT_TILE;
                lt_tile_starts(start, sg, b0, i0, i0 + ni - 1);
                for (int j0 = b0; j0 <= i0; j0 += LT_TILE) {
                    const int nj = (k.e - j0 + 1 < LT_TILE) ? k.e - j0 + 1 : LT_TILE;
                    if (start[0] >= j0 + nj) continue; /* every row's segment starts after J */
                    lt_gemm(false, true, ni, nj, D, qb + i0 * row3, row3, kb + j0 * row3, row3,
                            0.0f, P, LT_TILE);
                    lt_mask(P, ni, nj, i0, j0, start, &gp);
                    lt_gemm(false, false, ni, D, nj, P, LT_TILE, vb + j0 * row3, row3, 1.0f,
                            ob + i0 * row, row);
                }
            }
            lt_state_update(S, X, kb, vb, row3, D, &gp, &k);
        }
    }
}

/* With A[i,j] the intra weights above, dP = mask(dO V^T) and dS the gradient of the state at a
 * block's end:
 *   dq_i = sum_j A[i,j] (do_i . v_j) k_j + [i < first] gamma^(i-b0+1) do_i S^T
 *   dk_j = sum_i A[i,j] (do_i . v_j) q_i + [j >= from] gamma^(e-j) v_j dS^T
 *   dv_j = sum_i A[i,j] (q_i . k_j) do_i + [j >= from] gamma^(e-j) k_j dS
 *   dS  <- [no reset in block] gamma^m dS + sum_{i = b0 .. first-1} gamma^(i-b0+1) q_i^T do_i
 * i.e. dQ = dP K + dOd S^T, dK = dP^T Q + Vd dS^T, dV = Pm^T dO + Kd dS per block. dq's inter
 * term needs S at each block's start: a forward sweep recomputes it (nothing is saved by the
 * forward); everything else needs dS at each block's end: a reverse sweep carries it
 * (dS_t = gamma dS_{t+1} + q_t^T do_t, taken a block at a time), and takes the intra terms of
 * dq, dk and dv from the same two masked score tiles. */
void cpu_lightning_backward_block(float *dqkv, float *state, float *dstate, const float *dout,
                                  const float *qkv, const float *decay, const int32_t *seg, int B,
                                  int T, int H, int D, int block) {
    cpu_lightning_backward_block_from(dqkv, state, dstate, NULL, NULL, dout, qkv, decay, seg, B, T,
                                      H, D, block);
}

void cpu_lightning_backward_block_from(float *dqkv, float *state, float *dstate, const float *s0,
                                       const float *dsT, const float *dout, const float *qkv,
                                       const float *decay, const int32_t *seg, int B, int T, int H,
                                       int D, int block) {
    cpu_lightning_check_dims("lightning backward (block)", B, T, H, D);
    MT_CHECK(block >= 1, "lightning backward (block): block = %d must be >= 1", block);
    const size_t row3 = (size_t)H * 3 * D, row = (size_t)H * D;
    const int nblocks = (T + block - 1) / block;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *qb = qkv + ((size_t)b * T * H + h) * 3 * D, *kb = qb + D, *vb = qb + 2 * D;
        float *dqb = dqkv + ((size_t)b * T * H + h) * 3 * D, *dkb = dqb + D, *dvb = dqb + 2 * D;
        const float *gb = dout + ((size_t)b * T * H + h) * D;
        const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
        double table[LT_TABLE_MAX + 1], rev[LT_TABLE_MAX + 1];
        float P[LT_TILE * LT_TILE], dP[LT_TILE * LT_TILE];
        float X[LT_TILE * CPU_LIGHTNING_MAX_D];
        int start[LT_TILE];
        const lt_pow gp = lt_pow_init(table, rev, decay[h], block);

        /* forward sweep: dq's inter term, dq_I += dOd_I S^T */
        float *S = state + (size_t)bh * D * D;
        lt_state_init(S, s0, bh, D);
        for (int b0 = 0; b0 < T; b0 += block) {
            const lt_blk k = lt_blk_at(sg, b0, block, T);
            for (int i0 = b0; i0 < k.first; i0 += LT_TILE) {
                const int ni = (k.first - i0 < LT_TILE) ? k.first - i0 : LT_TILE;
                lt_pack(X, gb, row, D, i0, ni, &gp, 1 - b0, 1);
                lt_gemm(false, true, ni, D, D, X, D, S, D, 1.0f, dqb + i0 * row3, row3);
            }
            lt_state_update(S, X, kb, vb, row3, D, &gp, &k);
        }

        /* reverse sweep: the inter terms of dk and dv, then the intra terms of dq, dk, dv */
        float *dS = dstate + (size_t)bh * D * D;
        lt_state_init(dS, dsT, bh, D);
        for (int nb = nblocks - 1; nb >= 0; nb--) {
            const lt_blk k = lt_blk_at(sg, nb * block, block, T);
            for (int j0 = k.from; j0 <= k.e; j0 += LT_TILE) {
                const int nj = (k.e - j0 + 1 < LT_TILE) ? k.e - j0 + 1 : LT_TILE;
                lt_pack(X, vb, row3, D, j0, nj, &gp, k.e, -1); /* dK_J += Vd_J dS^T */
                lt_gemm(false, true, nj, D, D, X, D, dS, D, 1.0f, dkb + j0 * row3, row3);
                lt_pack(X, kb, row3, D, j0, nj, &gp, k.e, -1); /* dV_J += Kd_J dS */
                lt_gemm(false, false, nj, D, D, X, D, dS, D, 1.0f, dvb + j0 * row3, row3);
            }
            for (int i0 = k.b0; i0 <= k.e; i0 += LT_TILE) {
                const int ni = (k.e - i0 + 1 < LT_TILE) ? k.e - i0 + 1 : LT_TILE;
                lt_tile_starts(start, sg, k.b0, i0, i0 + ni - 1);
                for (int j0 = k.b0; j0 <= i0; j0 += LT_TILE) {
                    const int nj = (k.e - j0 + 1 < LT_TILE) ? k.e - j0 + 1 : LT_TILE;
                    if (start[0] >= j0 + nj) continue;
                    lt_gemm(false, true, ni, nj, D, qb + i0 * row3, row3, kb + j0 * row3, row3,
                            0.0f, P, LT_TILE);
                    lt_mask(P, ni, nj, i0, j0, start, &gp);
                    lt_gemm(false, true, ni, nj, D, gb + i0 * row, row, vb + j0 * row3, row3, 0.0f,
                            dP, LT_TILE);
                    lt_mask(dP, ni, nj, i0, j0, start, &gp);
                    lt_gemm(false, false, ni, D, nj, dP, LT_TILE, kb + j0 * row3, row3, 1.0f,
                            dqb + i0 * row3, row3); /* dQ_I += dP K_J */
                    lt_gemm(true, false, nj, D, ni, dP, LT_TILE, qb + i0 * row3, row3, 1.0f,
                            dkb + j0 * row3, row3); /* dK_J += dP^T Q_I */
                    lt_gemm(true, false, nj, D, ni, P, LT_TILE, gb + i0 * row, row, 1.0f,
                            dvb + j0 * row3, row3); /* dV_J += Pm^T dO_I */
                }
            }
            /* dS <- (keep ? gamma^m dS : 0) + Qd^T dO over the rows before the first reset */
            lt_state_decay(dS, D, &gp, &k);
            for (int i0 = k.b0; i0 < k.first; i0 += LT_TILE) {
                const int ni = (k.first - i0 < LT_TILE) ? k.first - i0 : LT_TILE;
                lt_pack(X, qb, row3, D, i0, ni, &gp, 1 - k.b0, 1);
                lt_gemm(true, false, D, D, ni, X, D, gb + i0 * row, row, 1.0f, dS, D);
            }
        }
    }
}
