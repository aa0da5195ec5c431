/* lightning_block.c: the block (chunked) form of lightning attention on the CPU, forward and
 * backward (spec 4.4, 4.9), written as the structure the CUDA kernels are to copy.
 *
 * For one (b,h) and a block of positions [b0, e], m = e - b0 + 1, with S the fp32 state after
 * position b0 - 1 (the end of the previous block):
 *   o_i = sum_{j = max(b0, start_i) .. i} gamma^(i-j) (q_i . k_j) v_j          (intra)
 *       + [i < first] gamma^(i-b0+1) q_i S                                     (inter)
 *   S  <- [no reset in block] gamma^m S + sum_{j = from .. e} gamma^(e-j) k_j^T v_j
 * where first is the first reset position in the block (e+1 if none) and from the last one
 * (b0 if none): a query after a reset cannot see the previous blocks, and keys before the
 * block's last reset do not reach the next block. With no segments this is exactly spec 4.4's
 * query_decay / key_decay / diagonal_decay algorithm. Sums are accumulated in double; the
 * state is stored in fp32 between blocks. */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"
#include "lightning.h"

/* gamma^n = exp(-lambda n) for n = 0 .. block, the only powers a block uses, computed once per
 * (b,h) rather than in the inner loops: the table holds the very doubles exp(-lambda n) gives
 * there, so the results do not change. Blocks above LT_TABLE_MAX fall back to exp(). */
#define LT_TABLE_MAX 1024
typedef struct {
    double lam;
    const double *g; /* NULL: no table */
} lt_pow;

static lt_pow lt_pow_init(double *buf, double lam, int block) {
    lt_pow p = {lam, NULL};
    if (block > LT_TABLE_MAX) return p;
    for (int n = 0; n <= block; n++) buf[n] = exp(-lam * n);
    p.g = buf;
    return p;
}

static inline double lt_g(const lt_pow *p, int n) { return p->g ? p->g[n] : exp(-p->lam * n); }

/* The first and last reset positions in [b0, e]: first = e + 1 and last = -1 when none. */
static void block_resets(const int32_t *sg, int b0, int e, int *first, int *last) {
    *first = e + 1;
    *last = -1;
    for (int r = b0; r <= e; r++) {
        if (!cpu_lightning_resets(sg, r)) continue;
        if (*first > e) *first = r;
        *last = r;
    }
}

/* The state at the block's end, in place:
 * S <- (keep ? gamma^m S : 0) + sum_{j = from .. e} gamma^(e-j) k_j^T v_j. */
static void block_state_update(float *S, const float *k, const float *v, size_t stride, int D,
                               const lt_pow *gp, int b0, int e, int from, bool keep) {
    const double gm = keep ? lt_g(gp, e - b0 + 1) : 0.0;
    double acc[CPU_LIGHTNING_MAX_D];
    for (int c = 0; c < D; c++) {
        float *Sc = S + (size_t)c * D;
        for (int d = 0; d < D; d++) acc[d] = gm * Sc[d];
        for (int j = from; j <= e; j++) {
            const float *vj = v + j * stride;
            double w = lt_g(gp, e - j) * k[j * stride + c];
            for (int d = 0; d < D; d++) acc[d] += w * vj[d];
        }
        for (int d = 0; d < D; d++) Sc[d] = (float)acc[d];
    }
}

/* The state's gradient one block earlier (at position b0 - 1), in place:
 * dS <- (keep ? gamma^m dS : 0) + sum_{i = b0 .. first-1} gamma^(i-b0+1) q_i^T do_i. */
static void block_dstate_update(float *dS, const float *q, const float *dout, size_t qstride,
                                size_t gstride, int D, const lt_pow *gp, int b0, int e, int first,
                                bool keep) {
    const double gm = keep ? lt_g(gp, e - b0 + 1) : 0.0;
    double acc[CPU_LIGHTNING_MAX_D];
    for (int c = 0; c < D; c++) {
        float *dSc = dS + (size_t)c * D;
        for (int d = 0; d < D; d++) acc[d] = gm * dSc[d];
        for (int i = b0; i < first; i++) {
            const float *g = dout + i * gstride;
            double w = lt_g(gp, i - b0 + 1) * q[i * qstride + c];
            for (int d = 0; d < D; d++) acc[d] += w * g[d];
        }
        for (int d = 0; d < D; d++) dSc[d] = (float)acc[d];
    }
}

void cpu_lightning_forward_block(float *out, float *state, const float *qkv, const float *decay,
                                 const int32_t *seg, int B, int T, int H, int D, int block) {
    cpu_lightning_check_dims("lightning forward (block)", B, T, H, D);
    MT_CHECK(block >= 1, "lightning forward (block): block = %d must be >= 1", block);
    const size_t row3 = (size_t)H * 3 * D, row = (size_t)H * D;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *base = qkv + ((size_t)b * T * H + h) * 3 * D;
        float *obase = out + ((size_t)b * T * H + h) * D;
        const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
        double table[LT_TABLE_MAX + 1];
        const lt_pow gp = lt_pow_init(table, decay[h], block);
        float *S = state + (size_t)bh * D * D;
        memset(S, 0, sizeof(float) * D * D);
        double acc[CPU_LIGHTNING_MAX_D];
        for (int b0 = 0; b0 < T; b0 += block) {
            const int e = (b0 + block < T ? b0 + block : T) - 1;
            int first, last;
            block_resets(sg, b0, e, &first, &last);
            int start = b0;
            for (int i = b0; i <= e; i++) {
                if (cpu_lightning_resets(sg, i)) start = i;
                const float *q = base + i * row3;
                for (int d = 0; d < D; d++) acc[d] = 0;
                for (int j = start; j <= i; j++) {
                    const float *k = base + j * row3 + D, *v = k + D;
                    double w = lt_g(&gp, i - j) * cpu_lightning_dot(q, k, D);
                    for (int d = 0; d < D; d++) acc[d] += w * v[d];
                }
                if (i < first) {
                    const double qd = lt_g(&gp, i - b0 + 1);
                    for (int c = 0; c < D; c++) {
                        const float *Sc = S + (size_t)c * D;
                        double a = qd * q[c];
                        for (int d = 0; d < D; d++) acc[d] += a * Sc[d];
                    }
                }
                float *o = obase + i * row;
                for (int d = 0; d < D; d++) o[d] = (float)acc[d];
            }
            block_state_update(S, base + D, base + 2 * D, row3, D, &gp, b0, e,
                               last >= 0 ? last : b0, last < 0);
        }
    }
}

/* With A[i,j] the intra weights above and dS the gradient of the state at a block's end:
 *   dq_i = sum_j A[i,j] (do_i . v_j) k_j + [i < first] gamma^(i-b0+1) do_i S^T
 *   dk_j = sum_i A[i,j] (do_i . v_j) q_i + [j >= from] gamma^(e-j) v_j dS^T
 *   dv_j = sum_i A[i,j] (q_i . k_j) do_i + [j >= from] gamma^(e-j) k_j dS
 *   dS  <- [no reset in block] gamma^m dS + sum_{i = b0 .. first-1} gamma^(i-b0+1) q_i^T do_i
 * dq needs S at each block's start: a forward sweep recomputes it (nothing is saved by the
 * forward); dk and dv need dS at each block's end: a reverse sweep carries it
 * (dS_t = gamma dS_{t+1} + q_t^T do_t, taken a block at a time). */
void cpu_lightning_backward_block(float *dqkv, float *state, float *dstate, const float *dout,
                                  const float *qkv, const float *decay, const int32_t *seg, int B,
                                  int T, int H, int D, int block) {
    cpu_lightning_check_dims("lightning backward (block)", B, T, H, D);
    MT_CHECK(block >= 1, "lightning backward (block): block = %d must be >= 1", block);
    const size_t row3 = (size_t)H * 3 * D, row = (size_t)H * D;
    const int nblocks = (T + block - 1) / block;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *base = qkv + ((size_t)b * T * H + h) * 3 * D;
        float *dbase = dqkv + ((size_t)b * T * H + h) * 3 * D;
        const float *gbase = dout + ((size_t)b * T * H + h) * D;
        const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
        double table[LT_TABLE_MAX + 1];
        const lt_pow gp = lt_pow_init(table, decay[h], block);
        double acc[CPU_LIGHTNING_MAX_D], acc2[CPU_LIGHTNING_MAX_D];

        /* forward sweep: dq */
        float *S = state + (size_t)bh * D * D;
        memset(S, 0, sizeof(float) * D * D);
        for (int b0 = 0; b0 < T; b0 += block) {
            const int e = (b0 + block < T ? b0 + block : T) - 1;
            int first, last;
            block_resets(sg, b0, e, &first, &last);
            int start = b0;
            for (int i = b0; i <= e; i++) {
                if (cpu_lightning_resets(sg, i)) start = i;
                const float *dot = gbase + i * row;
                for (int c = 0; c < D; c++) acc[c] = 0;
                for (int j = start; j <= i; j++) {
                    const float *k = base + j * row3 + D, *v = k + D;
                    double w = lt_g(&gp, i - j) * cpu_lightning_dot(dot, v, D);
                    for (int c = 0; c < D; c++) acc[c] += w * k[c];
                }
                if (i < first) {
                    const double qd = lt_g(&gp, i - b0 + 1);
                    for (int c = 0; c < D; c++)
                        acc[c] += qd * cpu_lightning_dot(dot, S + (size_t)c * D, D);
                }
                float *dq = dbase + i * row3;
                for (int c = 0; c < D; c++) dq[c] += (float)acc[c];
            }
            block_state_update(S, base + D, base + 2 * D, row3, D, &gp, b0, e,
                               last >= 0 ? last : b0, last < 0);
        }

        /* reverse sweep: dk, dv */
        float *dS = dstate + (size_t)bh * D * D;
        memset(dS, 0, sizeof(float) * D * D);
        for (int nb = nblocks - 1; nb >= 0; nb--) {
            const int b0 = nb * block;
            const int e = (b0 + block < T ? b0 + block : T) - 1;
            int first, last;
            block_resets(sg, b0, e, &first, &last);
            const int from = last >= 0 ? last : b0;
            int end = e + 1; /* first position past j's segment, within the block */
            for (int j = e; j >= b0; j--) {
                if (j + 1 <= e && cpu_lightning_resets(sg, j + 1)) end = j + 1;
                const float *k = base + j * row3 + D, *v = k + D;
                for (int c = 0; c < D; c++) acc[c] = acc2[c] = 0;
                for (int i = j; i < end; i++) {
                    const float *q = base + i * row3, *dot = gbase + i * row;
                    double g = lt_g(&gp, i - j);
                    double wk = g * cpu_lightning_dot(dot, v, D);
                    double wv = g * cpu_lightning_dot(q, k, D);
                    for (int c = 0; c < D; c++) acc[c] += wk * q[c];
                    for (int d = 0; d < D; d++) acc2[d] += wv * dot[d];
                }
                if (j >= from) {
                    const double kd = lt_g(&gp, e - j);
                    for (int c = 0; c < D; c++) {
                        const float *dSc = dS + (size_t)c * D;
                        acc[c] += kd * cpu_lightning_dot(dSc, v, D);
                        double a = kd * k[c];
                        for (int d = 0; d < D; d++) acc2[d] += a * dSc[d];
                    }
                }
                float *dk = dbase + j * row3 + D, *dv = dk + D;
                for (int c = 0; c < D; c++) dk[c] += (float)acc[c];
                for (int d = 0; d < D; d++) dv[d] += (float)acc2[d];
            }
            block_dstate_update(dS, base, gbase, row3, row, D, &gp, b0, e, first, last < 0);
        }
    }
}
