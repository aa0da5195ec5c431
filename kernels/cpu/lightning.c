/* lightning.c: lightning attention on the CPU: the naive O(T^2) forward and backward, the
 * decode state and step, and the node adapters. The block form is in lightning_block.c.
 * Every (b,h) pair is independent and writes disjoint rows, so the loops over pairs run in
 * parallel. Weights gamma^n = exp(-lambda n) are computed directly in double (no running
 * products), so the naive form is the exact reference up to fp32 rounding of the output. */
#include <math.h>

#include "cpu_ops.h"
#include "lightning.h"

void cpu_lightning_check_dims(const char *kernel, int B, int T, int H, int D) {
    MT_CHECK(B >= 1 && T >= 1 && H >= 1 && D >= 1 && D <= CPU_LIGHTNING_MAX_D,
             "%s: B=%d T=%d H=%d D=%d (each must be >= 1, D <= %d)", kernel, B, T, H, D,
             CPU_LIGHTNING_MAX_D);
}

/* o_t = sum_{s = start_t .. t} gamma^(t-s) (q_t . k_s) v_s */
void cpu_lightning_forward_naive(float *out, const float *qkv, const float *decay,
                                 const int32_t *seg, int B, int T, int H, int D) {
    cpu_lightning_check_dims("lightning forward (naive)", B, T, H, D);
    const size_t row3 = (size_t)H * 3 * D, row = (size_t)H * D; /* position strides */
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *base = qkv + ((size_t)b * T * H + h) * 3 * D;
        float *obase = out + ((size_t)b * T * H + h) * D;
        const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
        const double lam = decay[h];
        double acc[CPU_LIGHTNING_MAX_D];
        int start = 0;
        for (int t = 0; t < T; t++) {
            if (cpu_lightning_resets(sg, t)) start = t;
            const float *q = base + t * row3;
            for (int d = 0; d < D; d++) acc[d] = 0;
            for (int s = start; s <= t; s++) {
                const float *k = base + s * row3 + D, *v = k + D;
                double w = exp(-lam * (t - s)) * cpu_lightning_dot(q, k, D);
                for (int d = 0; d < D; d++) acc[d] += w * v[d];
            }
            float *o = obase + t * row;
            for (int d = 0; d < D; d++) o[d] = (float)acc[d];
        }
    }
}

/* With A[t,s] = gamma^(t-s) [start_t <= s <= t] (spec 4.9):
 *   dq_t = sum_s A[t,s] (do_t . v_s) k_s
 *   dk_s = sum_t A[t,s] (do_t . v_s) q_t,   dv_s = sum_t A[t,s] (q_t . k_s) do_t
 * dq walks rows forward (tracking the segment start), dk/dv walk columns backward (tracking
 * the next reset, where s stops being visible). */
void cpu_lightning_backward_naive(float *dqkv, const float *dout, const float *qkv,
                                  const float *decay, const int32_t *seg, int B, int T, int H,
                                  int D) {
    cpu_lightning_check_dims("lightning backward (naive)", B, T, H, D);
    const size_t row3 = (size_t)H * 3 * D, row = (size_t)H * D;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *base = qkv + ((size_t)b * T * H + h) * 3 * D;
        float *dbase = dqkv + ((size_t)b * T * H + h) * 3 * D;
        const float *gbase = dout + ((size_t)b * T * H + h) * D;
        const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
        const double lam = decay[h];
        double acc[CPU_LIGHTNING_MAX_D], acc2[CPU_LIGHTNING_MAX_D];

        int start = 0;
        for (int t = 0; t < T; t++) {
            if (cpu_lightning_resets(sg, t)) start = t;
            const float *dot = gbase + t * row;
            for (int c = 0; c < D; c++) acc[c] = 0;
            for (int s = start; s <= t; s++) {
                const float *k = base + s * row3 + D, *v = k + D;
                double w = exp(-lam * (t - s)) * cpu_lightning_dot(dot, v, D);
                for (int c = 0; c < D; c++) acc[c] += w * k[c];
            }
            float *dq = dbase + t * row3;
            for (int c = 0; c < D; c++) dq[c] += (float)acc[c];
        }

        int end = T; /* first position past s's segment */
        for (int s = T - 1; s >= 0; s--) {
            if (s + 1 < T && cpu_lightning_resets(sg, s + 1)) end = s + 1;
            const float *k = base + s * row3 + D, *v = k + D;
            for (int c = 0; c < D; c++) acc[c] = acc2[c] = 0;
            for (int t = s; t < end; t++) {
                const float *q = base + t * row3, *dot = gbase + t * row;
                double g = exp(-lam * (t - s));
                double wk = g * cpu_lightning_dot(dot, v, D), wv = g * cpu_lightning_dot(q, k, D);
                for (int c = 0; c < D; c++) acc[c] += wk * q[c];
                for (int d = 0; d < D; d++) acc2[d] += wv * dot[d];
            }
            float *dk = dbase + s * row3 + D, *dv = dk + D;
            for (int c = 0; c < D; c++) dk[c] += (float)acc[c];
            for (int d = 0; d < D; d++) dv[d] += (float)acc2[d];
        }
    }
}

/* S_{T-1} = sum_{s = start_{T-1} .. T-1} gamma^(T-1-s) k_s^T v_s, one row of S at a time. */
void cpu_lightning_state(float *state, const float *qkv, const float *decay, const int32_t *seg,
                         int B, int T, int H, int D) {
    cpu_lightning_check_dims("lightning state", B, T, H, D);
    const size_t row3 = (size_t)H * 3 * D;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *base = qkv + ((size_t)b * T * H + h) * 3 * D;
        const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
        const double lam = decay[h];
        float *S = state + (size_t)bh * D * D;
        int start = 0;
        for (int t = 1; t < T; t++)
            if (cpu_lightning_resets(sg, t)) start = t;
        double acc[CPU_LIGHTNING_MAX_D];
        for (int c = 0; c < D; c++) {
            for (int d = 0; d < D; d++) acc[d] = 0;
            for (int s = start; s < T; s++) {
                const float *k = base + s * row3 + D, *v = k + D;
                double w = exp(-lam * (T - 1 - s)) * k[c];
                for (int d = 0; d < D; d++) acc[d] += w * v[d];
            }
            for (int d = 0; d < D; d++) S[(size_t)c * D + d] = (float)acc[d];
        }
    }
}

/* g = sum_{t < first} gamma^(t+1) q_t^T do_t, first = the row's first reset (T if none). */
void cpu_lightning_state_grad(float *g, const float *dout, const float *qkv, const float *decay,
                              const int32_t *seg, int B, int T, int H, int D) {
    cpu_lightning_check_dims("lightning state gradient", B, T, H, D);
    const size_t row3 = (size_t)H * 3 * D, row = (size_t)H * D;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const float *base = qkv + ((size_t)b * T * H + h) * 3 * D;
        const float *gbase = dout + ((size_t)b * T * H + h) * D;
        const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
        const double lam = decay[h];
        int first = 1;
        while (first < T && !cpu_lightning_resets(sg, first)) first++;
        float *G = g + (size_t)bh * D * D;
        double acc[CPU_LIGHTNING_MAX_D];
        for (int c = 0; c < D; c++) {
            for (int d = 0; d < D; d++) acc[d] = 0;
            for (int t = 0; t < first; t++) {
                const float *q = base + t * row3, *dot = gbase + t * row;
                const double w = exp(-lam * (t + 1)) * q[c];
                for (int d = 0; d < D; d++) acc[d] += w * dot[d];
            }
            for (int d = 0; d < D; d++) G[(size_t)c * D + d] = (float)acc[d];
        }
    }
}

/* One token of one head: S (D,D) = g S + k^T v, then out (D) = q S. The state is updated before
 * the readout, so the token sees itself with weight 1. */
static void lightning_token(float *S, const float *q, const float *k, const float *v, double g,
                            int D, float *out) {
    for (int c = 0; c < D; c++) {
        float *Sc = S + (size_t)c * D;
        for (int d = 0; d < D; d++) Sc[d] = (float)(g * Sc[d] + (double)k[c] * v[d]);
    }
    double acc[CPU_LIGHTNING_MAX_D];
    for (int d = 0; d < D; d++) acc[d] = 0;
    for (int c = 0; c < D; c++) {
        const float *Sc = S + (size_t)c * D;
        for (int d = 0; d < D; d++) acc[d] += (double)q[c] * Sc[d];
    }
    for (int d = 0; d < D; d++) out[d] = (float)acc[d];
}

void cpu_lightning_decode_step(float *state, const float *qkv_t, const float *decay, float *out,
                               int B, int H, int D) {
    cpu_lightning_check_dims("lightning decode step", B, 1, H, D);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int h = bh % H;
        const float *q = qkv_t + (size_t)bh * 3 * D, *k = q + D, *v = k + D;
        float *S = state + (size_t)bh * D * D;
        lightning_token(S, q, k, v, exp(-(double)decay[h]), D, out + (size_t)bh * D);
    }
}

/* cpu_lightning_decode_step's arithmetic token after token, inside one call (bit-equal). */
void cpu_lightning_chunk(float *state, const float *qkv, const float *decay, float *out, int T,
                         int H, int D) {
    cpu_lightning_check_dims("lightning chunk", 1, T, H, D);
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        float *S = state + (size_t)h * D * D;
        const double g = exp(-(double)decay[h]);
        for (int t = 0; t < T; t++) {
            const float *q = qkv + ((size_t)t * H + h) * 3 * D, *k = q + D, *v = k + D;
            lightning_token(S, q, k, v, g, D, out + ((size_t)t * H + h) * D);
        }
    }
}

/* ---- node adapters: in = {qkv (B,T,H,3D), decay (H), seg (B,T) or NULL}, ip[0] = block,
 * ip[1] = GEMM precision (MT_BF16: the block form with bf16 operands, lightning_bf16.c) ---- */

static bool lightning_node_bf16(const mt_node *n) { return n->ip[0] > 0 && n->ip[1] == MT_BF16; }

static float *lightning_bf16_work(const mt_node *n, int B, int T, int H, int D) {
    size_t per = cpu_lightning_bf16_scratch_floats(T, D, (int)n->ip[0]);
    return mt_node_scratch(n, sizeof(float) * per * B * H, "lightning bf16 workspace");
}

static void lightning_node_dims(const mt_node *n, int *B, int *T, int *H, int *D) {
    const mt_tensor *qkv = n->in[0];
    *B = (int)qkv->shape[0];
    *T = (int)qkv->shape[1];
    *H = (int)qkv->shape[2];
    *D = (int)(qkv->shape[3] / 3);
}

void cpu_lightning_fwd_node(const mt_node *n) {
    int B, T, H, D;
    lightning_node_dims(n, &B, &T, &H, &D);
    const int block = (int)n->ip[0];
    const float *qkv = n->in[0]->data, *decay = n->in[1]->data;
    const int32_t *seg = n->in[2] ? n->in[2]->data : NULL;
    if (block == 0) {
        cpu_lightning_forward_naive(n->out->data, qkv, decay, seg, B, T, H, D);
    } else if (lightning_node_bf16(n)) {
        cpu_lightning_forward_block_bf16(n->out->data, lightning_bf16_work(n, B, T, H, D), qkv,
                                         decay, seg, B, T, H, D, block);
    } else {
        float *state = mt_node_scratch(n, sizeof(float) * B * H * D * D, "lightning state");
        cpu_lightning_forward_block(n->out->data, state, qkv, decay, seg, B, T, H, D, block);
    }
}

void cpu_lightning_bwd_node(const mt_node *n) {
    if (!n->in[0]->grad) return;
    int B, T, H, D;
    lightning_node_dims(n, &B, &T, &H, &D);
    const int block = (int)n->ip[0];
    const float *qkv = n->in[0]->data, *decay = n->in[1]->data, *dout = n->out->grad;
    const int32_t *seg = n->in[2] ? n->in[2]->data : NULL;
    float *dqkv = n->in[0]->grad;
    if (block == 0) {
        cpu_lightning_backward_naive(dqkv, dout, qkv, decay, seg, B, T, H, D);
    } else if (lightning_node_bf16(n)) {
        cpu_lightning_backward_block_bf16(dqkv, lightning_bf16_work(n, B, T, H, D), dout, qkv,
                                          decay, seg, B, T, H, D, block);
    } else {
        size_t nstate = (size_t)B * H * D * D;
        float *state = mt_node_scratch(n, sizeof(float) * 2 * nstate, "lightning state");
        cpu_lightning_backward_block(dqkv, state, state + nstate, dout, qkv, decay, seg, B, T, H, D,
                                     block);
    }
}
