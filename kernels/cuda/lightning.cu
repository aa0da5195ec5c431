/* lightning.cu: lightning attention (spec section 4) on the GPU: the node adapters, and the
 * naive O(T^2) form (block = 0) here, forward and backward, mirroring kernels/cpu/lightning.c.
 * The block form (block > 0), the one training uses, is lightning_block.cu: batched GEMMs on
 * tensor cores in the bf16 mode.
 * Node (autograd/op_lightning.c): in = {qkv (B,T,H,3D) with q|k|v per head, decay (H) lambda
 * per head, seg (B,T) I32 or NULL}, ip[0] = block (0: the naive form), ip[1] = GEMM precision
 * (the naive form has no GEMMs: fp32 in either mode). Nothing saved.
 *
 * Naive form: one warp per position, o_t = sum_{s = start_t .. t} gamma^(t-s) (q_t . k_s) v_s,
 * and in the backward dq of row t plus dk, dv of row t as a key. Sums are in double like the
 * CPU reference: a correct reference, not a fast kernel. */
#include "cuda_ops.cuh"

#define LT_MAX_D 256
#define LT_R     (LT_MAX_D / 32) /* dims per lane */
#define LT_WARPS 8

struct lt_dims {
    int B, T, H, D;
};

__device__ inline void lt_load(float (&r)[LT_R], const float *p, int D, int lane) {
#pragma unroll
    for (int i = 0; i < LT_R; i++) {
        int d = lane + 32 * i;
        r[i] = d < D ? p[d] : 0.0f;
    }
}

__device__ inline double lt_dot(const float (&a)[LT_R], const float *p, int D, int lane) {
    double s = 0;
#pragma unroll
    for (int i = 0; i < LT_R; i++) {
        int d = lane + 32 * i;
        if (d < D) s += (double)a[i] * (double)p[d];
    }
    return cuda_warp_sum(s);
}

/* The last reset position in (lo, hi], or lo when none: where row hi's visible keys start
 * within a block starting at lo. A reset at r means seg[r] != seg[r-1]. */
__device__ inline int lt_row_start(const int32_t *sg, int lo, int hi, int lane) {
    int best = lo;
    if (sg)
        for (int r = lo + 1 + lane; r <= hi; r += 32)
            if (sg[r] != sg[r - 1]) best = max(best, r);
    return cuda_warp_max(best);
}

/* The first reset position in (lo, hi], or hi + 1 when none: one past the last query row that
 * sees key lo within a block ending at hi. */
__device__ inline int lt_row_end(const int32_t *sg, int lo, int hi, int lane) {
    int best = hi + 1;
    if (sg)
        for (int r = lo + 1 + lane; r <= hi; r += 32)
            if (sg[r] != sg[r - 1]) best = min(best, r);
    return cuda_warp_min(best);
}

/* One warp per position (b,t,h): o_t = sum_{j = start_t .. t} gamma^(t-j) (q_t . k_j) v_j. */
__global__ void lt_fwd_rows_kernel(float *out, const float *qkv, const float *decay,
                                   const int32_t *seg, lt_dims a) {
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31, D = a.D;
    if (row >= (int64_t)a.B * a.T * a.H) return;
    const int b = (int)(row / ((int64_t)a.T * a.H)), t = (int)((row / a.H) % a.T),
              h = (int)(row % a.H);
    const int32_t *sg = seg ? seg + (size_t)b * a.T : NULL;
    const double lam = decay[h];
    const size_t row3 = (size_t)a.H * 3 * D;
    const float *base = qkv + ((size_t)b * a.T * a.H + h) * 3 * D;
    float qr[LT_R];
    lt_load(qr, base + t * row3, D, lane);
    double acc[LT_R];
#pragma unroll
    for (int r = 0; r < LT_R; r++) acc[r] = 0;
    for (int j = lt_row_start(sg, 0, t, lane); j <= t; j++) {
        const float *kj = base + j * row3 + D, *vj = kj + D;
        double w = exp(-lam * (t - j)) * lt_dot(qr, kj, D, lane);
#pragma unroll
        for (int r = 0; r < LT_R; r++) {
            int d = lane + 32 * r;
            if (d < D) acc[r] += w * vj[d];
        }
    }
    float *o = out + row * D;
#pragma unroll
    for (int r = 0; r < LT_R; r++) {
        int d = lane + 32 * r;
        if (d < D) o[d] = (float)acc[r];
    }
}

/* One warp per position (b,t,h): dq of row t, then dk and dv of row t as a key. */
__global__ void lt_bwd_rows_kernel(float *dqkv, const float *dout, const float *qkv,
                                   const float *decay, const int32_t *seg, lt_dims a) {
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31, D = a.D;
    if (row >= (int64_t)a.B * a.T * a.H) return;
    const int b = (int)(row / ((int64_t)a.T * a.H)), t = (int)((row / a.H) % a.T),
              h = (int)(row % a.H);
    const int32_t *sg = seg ? seg + (size_t)b * a.T : NULL;
    const double lam = decay[h];
    const size_t row3 = (size_t)a.H * 3 * D, rowg = (size_t)a.H * D;
    const float *base = qkv + ((size_t)b * a.T * a.H + h) * 3 * D;
    const float *gbase = dout + ((size_t)b * a.T * a.H + h) * D;
    float *dbase = dqkv + ((size_t)b * a.T * a.H + h) * 3 * D;

    /* dq_t = sum_j A[t,j] (do_t . v_j) k_j */
    float dor[LT_R];
    lt_load(dor, gbase + t * rowg, D, lane);
    double acc[LT_R];
#pragma unroll
    for (int r = 0; r < LT_R; r++) acc[r] = 0;
    for (int j = lt_row_start(sg, 0, t, lane); j <= t; j++) {
        const float *kj = base + j * row3 + D, *vj = kj + D;
        double w = exp(-lam * (t - j)) * lt_dot(dor, vj, D, lane);
#pragma unroll
        for (int r = 0; r < LT_R; r++) {
            int c = lane + 32 * r;
            if (c < D) acc[r] += w * kj[c];
        }
    }
    float *dq = dbase + t * row3;
#pragma unroll
    for (int r = 0; r < LT_R; r++) {
        int c = lane + 32 * r;
        if (c < D) dq[c] += (float)acc[r];
    }

    /* dk_t = sum_i A[i,t] (do_i . v_t) q_i,  dv_t = sum_i A[i,t] (q_i . k_t) do_i */
    const float *kt = base + t * row3 + D, *vt = kt + D;
    float kr[LT_R], vr[LT_R];
    lt_load(kr, kt, D, lane);
    lt_load(vr, vt, D, lane);
    double acc_k[LT_R], acc_v[LT_R];
#pragma unroll
    for (int r = 0; r < LT_R; r++) acc_k[r] = acc_v[r] = 0;
    const int end = lt_row_end(sg, t, a.T - 1, lane);
    for (int i = t; i < end; i++) {
        const float *qi = base + i * row3, *doi = gbase + i * rowg;
        const double g = exp(-lam * (i - t));
        const double wk = g * lt_dot(vr, doi, D, lane), wv = g * lt_dot(kr, qi, D, lane);
#pragma unroll
        for (int r = 0; r < LT_R; r++) {
            int c = lane + 32 * r;
            if (c < D) {
                acc_k[r] += wk * qi[c];
                acc_v[r] += wv * doi[c];
            }
        }
    }
    float *dk = dbase + t * row3 + D, *dv = dk + D;
#pragma unroll
    for (int r = 0; r < LT_R; r++) {
        int c = lane + 32 * r;
        if (c < D) {
            dk[c] += (float)acc_k[r];
            dv[c] += (float)acc_v[r];
        }
    }
}

static lt_dims lt_node_dims(const mt_node *n) {
    const mt_tensor *qkv = n->in[0];
    lt_dims a;
    a.B = (int)qkv->shape[0];
    a.T = (int)qkv->shape[1];
    a.H = (int)qkv->shape[2];
    a.D = (int)(qkv->shape[3] / 3);
    MT_CHECK(a.B >= 1 && a.T >= 1 && a.H >= 1 && a.D >= 1 && a.D <= LT_MAX_D,
             "lightning (cuda): B=%d T=%d H=%d D=%d (each must be >= 1, D <= %d)", a.B, a.T, a.H,
             a.D, LT_MAX_D);
    return a;
}

static unsigned lt_row_blocks(const lt_dims &a) {
    return (unsigned)(((int64_t)a.B * a.T * a.H + LT_WARPS - 1) / LT_WARPS);
}

/* the block form, lightning_block.cu */
void cuda_lightning_block_fwd(const mt_node *n);
void cuda_lightning_block_bwd(const mt_node *n);

void cuda_lightning_fwd_node(const mt_node *n) {
    lt_dims a = lt_node_dims(n);
    if (n->ip[0] > 0) {
        cuda_lightning_block_fwd(n);
        return;
    }
    lt_fwd_rows_kernel<<<lt_row_blocks(a), 32 * LT_WARPS>>>(
        cuda_f32(n->out), cuda_f32(n->in[0]), cuda_f32(n->in[1]),
        n->in[2] ? cuda_i32(n->in[2]) : NULL, a);
    CUDA_LAUNCH_CHECK("lightning forward (naive)");
}

void cuda_lightning_bwd_node(const mt_node *n) {
    if (!n->in[0]->grad) return;
    lt_dims a = lt_node_dims(n);
    if (n->ip[0] > 0) {
        cuda_lightning_block_bwd(n);
        return;
    }
    lt_bwd_rows_kernel<<<lt_row_blocks(a), 32 * LT_WARPS>>>(
        cuda_grad(n->in[0]), cuda_grad(n->out), cuda_f32(n->in[0]), cuda_f32(n->in[1]),
        n->in[2] ? cuda_i32(n->in[2]) : NULL, a);
    CUDA_LAUNCH_CHECK("lightning backward (naive)");
}

/* ---- generation's caches (mt_backend.decode; kernels/cpu/lightning.h): the prefill's final
 * state and the recurrent step, each element in the CPU's order of operations. ---- */

/* state (B,H,D,D) = sum over the last segment's s of exp(-lambda (T-1-s)) k_s^T v_s, in double.
 * One block per (b, h), its threads over the D*D elements. */
__global__ void lightning_state_kernel(float *state, const float *qkv, const float *decay,
                                       const int32_t *seg, int T, int H, int D) {
    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int64_t row3 = (int64_t)H * 3 * D;
    const float *base = qkv + ((int64_t)b * T * H + h) * 3 * D;
    const int32_t *sg = seg ? seg + (int64_t)b * T : NULL;
    int start = 0;
    for (int t = 1; t < T; t++)
        if (sg && sg[t] != sg[t - 1]) start = t;
    const double lam = decay[h];
    float *S = state + (int64_t)bh * D * D;
    for (int i = threadIdx.x; i < D * D; i += blockDim.x) {
        const int c = i / D, d = i % D;
        double acc = 0;
        for (int s = start; s < T; s++) {
            const float *k = base + s * row3 + D, *v = k + D;
            const double w = exp(-lam * (T - 1 - s)) * k[c];
            acc += w * v[d];
        }
        S[i] = (float)acc;
    }
}

/* S = exp(-lambda) S + k^T v (fp32 state, each element in double), then o = q S. One block per
 * (b, h), thread d owns column d of S. */
__global__ void lightning_step_kernel(float *state, const float *qkv_t, const float *decay,
                                      float *out, int H, int D) {
    const int bh = blockIdx.x, h = bh % H;
    const float *q = qkv_t + (int64_t)bh * 3 * D, *k = q + D, *v = k + D;
    float *S = state + (int64_t)bh * D * D;
    const double g = exp(-(double)decay[h]);
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        double acc = 0;
        for (int c = 0; c < D; c++) {
            float *Scd = S + (int64_t)c * D + d;
            *Scd = (float)(g * *Scd + (double)k[c] * v[d]);
            acc += (double)q[c] * *Scd;
        }
        out[(int64_t)bh * D + d] = (float)acc;
    }
}

void cuda_lightning_state(float *state, const float *qkv, const float *decay, const int32_t *seg,
                          int B, int T, int H, int D) {
    MT_CHECK(B >= 0 && T >= 1 && H >= 1 && D >= 1 && D <= 256,
             "lightning state: B %d, T %d, H %d, D %d", B, T, H, D);
    if (B == 0) return;
    lightning_state_kernel<<<(unsigned)(B * H), CUDA_THREADS>>>(state, qkv, decay, seg, T, H, D);
    CUDA_LAUNCH_CHECK("lightning state");
}

void cuda_lightning_decode_step(float *state, const float *qkv_t, const float *decay, float *out,
                                int B, int H, int D) {
    MT_CHECK(B >= 0 && H >= 1 && D >= 1 && D <= 256, "lightning decode step: B %d, H %d, D %d", B,
             H, D);
    if (B == 0) return;
    lightning_step_kernel<<<(unsigned)(B * H), (D + 31) / 32 * 32>>>(state, qkv_t, decay, out, H,
                                                                     D);
    CUDA_LAUNCH_CHECK("lightning decode step");
}
