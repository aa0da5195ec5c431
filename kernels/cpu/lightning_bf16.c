/* lightning_bf16.c: the block form of lightning attention in the bf16 GEMM mode (node ip[1] =
 * MT_BF16), the CPU reference of kernels/cuda/lightning_block.cu. It computes the block form
 * of lightning_block.c as the CUDA path's batched GEMMs do, and rounds exactly where those
 * GEMMs take their operands (R = mt_bf16_round, fl = rounding of a double to fp32, g^n =
 * exp(-lambda n) in double). Per (b,h) and block [b0, e], m = e - b0 + 1 rows (first: the
 * first reset in the block, e + 1 if none; from: the last reset, b0 if none; keep: no reset),
 * with A[i,j] = g^(i-j) where j <= i and no reset lies in (j, i], else 0:
 *   Q, K, V   = R(q), R(k), R(v)                                       plain operands
 *   Qd_i      = R(fl(g^(i-b0+1) q_i)) if i < first, else 0            readout rows
 *   Kd_j      = R(fl(g^(e-j) k_j)),  Vd_j = R(fl(g^(e-j) v_j)) if j >= from, else 0
 *   P         = fl(Q K^T),  Pm = R(fl(P A))                            masked scores
 *   dS_n      = fl(Kd^T V),  S_0 = 0,  S_{n+1} = fl(keep g^m S_n + dS_n)   (fp32 state)
 *   o         = fl(fl(Pm V) + Qd R(S_n))
 * and in the backward, with dO = R(do), dOd_i = R(fl(g^(i-b0+1) do_i)) if i < first:
 *   dG_n      = fl(Qd^T dO),  G_last = 0,  G_{n-1} = fl(keep g^m G_n + dG_n)  (fp32)
 *   dPm       = R(fl(fl(dO V^T) A))
 *   dq       += fl(fl(dPm K) + dOd R(S_n)^T)
 *   dk       += fl(fl(dPm^T Q) + Vd R(G_n)^T)
 *   dv       += fl(fl(Pm^T dO) + Kd R(G_n))
 * Every product is summed in double in index order, like the emulated cuBLAS (a GPU sums in
 * fp32 in its own order). Not fast: tests and small runs only. */
#include <math.h>
#include <string.h>

#include "bf16.h"
#include "cpu_ops.h"
#include "lightning.h"

typedef struct {
    int b0, e, m, first, from;
    bool keep;
} lt_blk;

static lt_blk blk_at(const int32_t *sg, int b0, int L, int T, int *vis) {
    lt_blk k = {b0, (b0 + L < T ? b0 + L : T) - 1, 0, 0, b0, true};
    k.m = k.e - b0 + 1;
    k.first = k.e + 1;
    int start = b0;
    for (int t = b0; t <= k.e; t++) {
        if (cpu_lightning_resets(sg, t)) {
            if (k.first > k.e) k.first = t;
            k.from = t;
            k.keep = false;
            start = t;
        }
        vis[t - b0] = start - b0; /* the first visible key of row t, within the block */
    }
    return k;
}

enum { LT_PLAIN, LT_QDECAY, LT_KDECAY };

/* dst (L,D): row i of src (stride `stride`, from position b0) as an operand, padded with 0. */
static void pack(float *dst, const float *src, size_t stride, int D, int L, const lt_blk *k,
                 const double *g, int kind) {
    for (int i = 0; i < L; i++) {
        const int t = k->b0 + i;
        double w = 1.0;
        bool on = i < k->m;
        if (kind == LT_QDECAY) {
            on = on && t < k->first;
            w = g[i + 1];
        } else if (kind == LT_KDECAY) {
            on = on && t >= k->from;
            w = g[k->e - t];
        }
        for (int c = 0; c < D; c++) {
            float x = on ? src[t * stride + c] : 0.0f;
            dst[(size_t)i * D + c] = mt_bf16_round(kind == LT_PLAIN ? x : (float)(w * x));
        }
    }
}

/* P (L,L) in place: R(fl(P A)). */
static void mask(float *P, int L, const lt_blk *k, const int *vis, const double *g) {
    for (int i = 0; i < L; i++)
        for (int j = 0; j < L; j++) {
            float *p = &P[(size_t)i * L + j];
            bool on = i < k->m && j <= i && j >= vis[i];
            *p = on ? mt_bf16_round((float)((double)*p * g[i - j])) : 0.0f;
        }
}

/* C (M,N) = fl(beta C + sum_l op(A)[i,l] op(B)[l,j]), row-major, beta 0 or 1 (C not read at 0).
 * ta: A stored (K,M); tb: B stored (N,K). */
static void gemm(float *C, const float *A, const float *B, int M, int N, int K, bool ta, bool tb,
                 bool beta) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int l = 0; l < K; l++) {
                double a = ta ? A[(size_t)l * M + i] : A[(size_t)i * K + l];
                double b = tb ? B[(size_t)j * K + l] : B[(size_t)l * N + j];
                acc += a * b;
            }
            float *c = &C[(size_t)i * N + j];
            *c = beta ? (float)(acc + (double)*c) : (float)acc;
        }
}

/* S = fl(keep g^m S + dS) and S16 = R(S) of the next block (scan step). */
static void carry(float *S, const float *dS, int D, const lt_blk *k, const double *g) {
    const double gm = k->keep ? g[k->m] : 0.0;
    for (int x = 0; x < D * D; x++) S[x] = (float)(gm * (double)S[x] + (double)dS[x]);
}

static void round_copy(float *dst, const float *src, int n) {
    for (int x = 0; x < n; x++) dst[x] = mt_bf16_round(src[x]);
}

size_t cpu_lightning_bf16_scratch_floats(int T, int D, int block) {
    const size_t L = (size_t)(block < T ? block : T);
    /* g (L+1 doubles), vis (L ints), 8 operands, 2 score matrices, 3 results, 3 states;
     * a multiple of 16 floats, so every (b,h)'s doubles stay aligned */
    size_t n = 2 * (L + 1) + L + 8 * L * D + 2 * L * L + 3 * L * D + 3 * (size_t)D * D;
    return (n + 15) / 16 * 16;
}

typedef struct {
    double *g;
    int *vis;
    float *Q, *K, *V, *Qd, *Kd, *Vd, *dO, *dOd, *P, *dP, *R1, *R2, *R3, *S, *S16, *dS;
} lt_ws;

static lt_ws ws_carve(float *w, double lam, int L, int D) {
    lt_ws s;
    s.g = (double *)(void *)w;
    for (int n = 0; n <= L; n++) s.g[n] = exp(-lam * n);
    s.vis = (int *)(void *)(w + 2 * (L + 1));
    float *f = w + 2 * (L + 1) + L;
    const size_t LD = (size_t)L * D, LL = (size_t)L * L, DD = (size_t)D * D;
    float **ops[8] = {&s.Q, &s.K, &s.V, &s.Qd, &s.Kd, &s.Vd, &s.dO, &s.dOd};
    for (int o = 0; o < 8; o++, f += LD) *ops[o] = f;
    s.P = f, f += LL;
    s.dP = f, f += LL;
    s.R1 = f, f += LD;
    s.R2 = f, f += LD;
    s.R3 = f, f += LD;
    s.S = f, f += DD;
    s.S16 = f, f += DD;
    s.dS = f;
    return s;
}

void cpu_lightning_forward_block_bf16(float *out, float *work, const float *qkv, const float *decay,
                                      const int32_t *seg, int B, int T, int H, int D, int block) {
    cpu_lightning_check_dims("lightning forward (block, bf16)", B, T, H, D);
    MT_CHECK(block >= 1, "lightning forward (block, bf16): block = %d must be >= 1", block);
    const int L = block < T ? block : T;
    const size_t row3 = (size_t)H * 3 * D, row = (size_t)H * D;
    const size_t per = cpu_lightning_bf16_scratch_floats(T, D, block);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *base = qkv + ((size_t)b * T * H + h) * 3 * D;
        float *obase = out + ((size_t)b * T * H + h) * D;
        const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
        lt_ws s = ws_carve(work + bh * per, decay[h], L, D);
        memset(s.S, 0, sizeof(float) * D * D);
        for (int b0 = 0; b0 < T; b0 += L) {
            const lt_blk k = blk_at(sg, b0, L, T, s.vis);
            pack(s.Q, base, row3, D, L, &k, s.g, LT_PLAIN);
            pack(s.K, base + D, row3, D, L, &k, s.g, LT_PLAIN);
            pack(s.V, base + 2 * D, row3, D, L, &k, s.g, LT_PLAIN);
            pack(s.Qd, base, row3, D, L, &k, s.g, LT_QDECAY);
            pack(s.Kd, base + D, row3, D, L, &k, s.g, LT_KDECAY);
            round_copy(s.S16, s.S, D * D);
            gemm(s.P, s.Q, s.K, L, L, D, false, true, false);
            mask(s.P, L, &k, s.vis, s.g);
            gemm(s.R1, s.P, s.V, L, D, L, false, false, false);
            gemm(s.R1, s.Qd, s.S16, L, D, D, false, false, true);
            for (int i = 0; i < k.m; i++)
                memcpy(obase + (b0 + i) * row, s.R1 + (size_t)i * D, sizeof(float) * D);
            gemm(s.dS, s.Kd, s.V, D, D, L, true, false, false);
            carry(s.S, s.dS, D, &k, s.g);
        }
    }
}

static void add_rows(float *dst, size_t stride, const float *src, int m, int D) {
    for (int i = 0; i < m; i++)
        for (int c = 0; c < D; c++) dst[i * stride + c] += src[(size_t)i * D + c];
}

void cpu_lightning_backward_block_bf16(float *dqkv, float *work, const float *dout,
                                       const float *qkv, const float *decay, const int32_t *seg,
                                       int B, int T, int H, int D, int block) {
    cpu_lightning_check_dims("lightning backward (block, bf16)", B, T, H, D);
    MT_CHECK(block >= 1, "lightning backward (block, bf16): block = %d must be >= 1", block);
    const int L = block < T ? block : T, nblk = (T + L - 1) / L;
    const size_t row3 = (size_t)H * 3 * D, row = (size_t)H * D;
    const size_t per = cpu_lightning_bf16_scratch_floats(T, D, block);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *base = qkv + ((size_t)b * T * H + h) * 3 * D;
        const float *gbase = dout + ((size_t)b * T * H + h) * D;
        float *dbase = dqkv + ((size_t)b * T * H + h) * 3 * D;
        const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
        lt_ws s = ws_carve(work + bh * per, decay[h], L, D);

        /* forward sweep: S_n, dq */
        memset(s.S, 0, sizeof(float) * D * D);
        for (int b0 = 0; b0 < T; b0 += L) {
            const lt_blk k = blk_at(sg, b0, L, T, s.vis);
            pack(s.K, base + D, row3, D, L, &k, s.g, LT_PLAIN);
            pack(s.V, base + 2 * D, row3, D, L, &k, s.g, LT_PLAIN);
            pack(s.Kd, base + D, row3, D, L, &k, s.g, LT_KDECAY);
            pack(s.dO, gbase, row, D, L, &k, s.g, LT_PLAIN);
            pack(s.dOd, gbase, row, D, L, &k, s.g, LT_QDECAY);
            round_copy(s.S16, s.S, D * D);
            gemm(s.dP, s.dO, s.V, L, L, D, false, true, false);
            mask(s.dP, L, &k, s.vis, s.g);
            gemm(s.R1, s.dP, s.K, L, D, L, false, false, false);
            gemm(s.R1, s.dOd, s.S16, L, D, D, false, true, true);
            add_rows(dbase + b0 * row3, row3, s.R1, k.m, D);
            gemm(s.dS, s.Kd, s.V, D, D, L, true, false, false);
            carry(s.S, s.dS, D, &k, s.g);
        }

        /* reverse sweep: G_n (S and S16 now hold G), dk, dv */
        memset(s.S, 0, sizeof(float) * D * D);
        for (int nb = nblk - 1; nb >= 0; nb--) {
            const lt_blk k = blk_at(sg, nb * L, L, T, s.vis);
            pack(s.Q, base, row3, D, L, &k, s.g, LT_PLAIN);
            pack(s.K, base + D, row3, D, L, &k, s.g, LT_PLAIN);
            pack(s.V, base + 2 * D, row3, D, L, &k, s.g, LT_PLAIN);
            pack(s.Qd, base, row3, D, L, &k, s.g, LT_QDECAY);
            pack(s.Kd, base + D, row3, D, L, &k, s.g, LT_KDECAY);
            pack(s.Vd, base + 2 * D, row3, D, L, &k, s.g, LT_KDECAY);
            pack(s.dO, gbase, row, D, L, &k, s.g, LT_PLAIN);
            round_copy(s.S16, s.S, D * D);
            gemm(s.P, s.Q, s.K, L, L, D, false, true, false);
            mask(s.P, L, &k, s.vis, s.g);
            gemm(s.dP, s.dO, s.V, L, L, D, false, true, false);
            mask(s.dP, L, &k, s.vis, s.g);
            gemm(s.R2, s.dP, s.Q, L, D, L, true, false, false);
            gemm(s.R2, s.Vd, s.S16, L, D, D, false, true, true);
            gemm(s.R3, s.P, s.dO, L, D, L, true, false, false);
            gemm(s.R3, s.Kd, s.S16, L, D, D, false, false, true);
            add_rows(dbase + k.b0 * row3 + D, row3, s.R2, k.m, D);
            add_rows(dbase + k.b0 * row3 + 2 * D, row3, s.R3, k.m, D);
            gemm(s.dS, s.Qd, s.dO, D, D, L, true, false, false);
            carry(s.S, s.dS, D, &k, s.g);
        }
    }
}
