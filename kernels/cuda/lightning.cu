/* lightning.cu: lightning attention (spec section 4) on the GPU, naive and block form, forward
 * and backward, mirroring kernels/cpu/lightning.c and kernels/cpu/lightning_block.c (whose
 * header comment derives every formula used here).
 * Node (autograd/op_lightning.c): in = {qkv (B,T,H,3D) with q|k|v per head, decay (H) lambda
 * per head, seg (B,T) I32 or NULL}, ip[0] = block (0: the naive O(T^2) form). Nothing saved.
 *
 * Block form, per (b,h) and block n = [b0, e] (first/last: the block's first and last reset,
 * from = last or b0, keep = no reset in the block):
 *   dS_n   = sum_{j = from .. e} gamma^(e-j) k_j^T v_j                    (state delta)
 *   S_0    = 0,  S_{n+1} = keep_n gamma^m S_n + dS_n                        (scan over blocks)
 *   o_i    = intra_i + [i < first] gamma^(i-b0+1) q_i S_n                   (rows)
 * and in the backward, with G the state gradient at a block's end:
 *   dG_n   = sum_{i = b0 .. first-1} gamma^(i-b0+1) q_i^T do_i
 *   G_last = 0,  G_{n-1} = keep_n gamma^m G_n + dG_n                        (reverse scan)
 *   dq_i  += intra + [i < first] gamma^(i-b0+1) do_i S_n^T
 *   dk_j  += intra + [j >= from] gamma^(e-j) v_j G_n^T,  dv_j += ... k_j G_n
 * So the GPU form has three parallel phases instead of the CPU's sequential sweep: the deltas
 * of every block at once (B*H*nblk blocks of D*D threads), one sequential scan per state
 * element over the blocks (fp32 state between blocks, as on the CPU), and the rows (one warp
 * per position, every block at once). The states of all blocks are kept: B*H*nblk*D*D floats
 * of scratch per direction (more than the CPU's B*H*D*D; a tiled kernel keeping them on chip is
 * the next step). Sums are in double like the CPU reference; no tensor cores yet (issue 6
 * wants the intra-block part on tensor cores in bf16: later, once this is verified). */
#include "cuda_ops.cuh"

#define LT_MAX_D 256
#define LT_R     (LT_MAX_D / 32) /* dims per lane */
#define LT_WARPS 8

struct lt_dims {
    int B, T, H, D, block, nblk;
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

__device__ inline int lt_block_end(const lt_dims &a, int b0) {
    return (b0 + a.block < a.T ? b0 + a.block : a.T) - 1;
}

/* info[b, n] = (first, last) reset positions of block n of row b: (e + 1, -1) when none. */
__global__ void lt_info_kernel(int2 *info, const int32_t *seg, lt_dims a) {
    CUDA_FOR(i, (int64_t)a.B * a.nblk) {
        const int b = (int)(i / a.nblk), b0 = (int)(i % a.nblk) * a.block;
        const int e = lt_block_end(a, b0);
        int first = e + 1, last = -1;
        if (seg) {
            const int32_t *sg = seg + (size_t)b * a.T;
            for (int r = b0 > 0 ? b0 : 1; r <= e; r++) {
                if (sg[r] == sg[r - 1]) continue;
                if (first > e) first = r;
                last = r;
            }
        }
        info[i] = make_int2(first, last);
    }
}

/* Per (b,h,n) block x, per state element (c,d) on y: the state delta of the forward
 * (dgrad false) or the state-gradient delta of the backward (dgrad true), see the header. */
__global__ void lt_delta_kernel(float *delta, const float *qkv, const float *dout,
                                const float *decay, const int2 *info, lt_dims a, bool dgrad) {
    const int el = blockIdx.y * blockDim.x + threadIdx.x;
    if (el >= a.D * a.D) return;
    const int c = el / a.D, d = el % a.D;
    const int64_t bhn = blockIdx.x;
    const int n = (int)(bhn % a.nblk), bh = (int)(bhn / a.nblk), b = bh / a.H, h = bh % a.H;
    const int b0 = n * a.block, e = lt_block_end(a, b0);
    const int2 inf = info[(size_t)b * a.nblk + n];
    const double lam = decay[h];
    const size_t row3 = (size_t)a.H * 3 * a.D, row = (size_t)a.H * a.D;
    const float *base = qkv + ((size_t)b * a.T * a.H + h) * 3 * a.D;
    double acc = 0;
    if (!dgrad) {
        const int from = inf.y >= 0 ? inf.y : b0;
        for (int j = from; j <= e; j++) {
            const float *kj = base + j * row3 + a.D, *vj = kj + a.D;
            double w = exp(-lam * (e - j)) * kj[c];
            acc += w * vj[d];
        }
    } else {
        const float *gbase = dout + ((size_t)b * a.T * a.H + h) * a.D;
        for (int i = b0; i < inf.x; i++) {
            double w = exp(-lam * (i - b0 + 1)) * base[i * row3 + c];
            acc += w * gbase[i * row + d];
        }
    }
    delta[bhn * a.D * a.D + el] = (float)acc;
}

/* Per (b,h) and state element: the scan over blocks, in place. Forward: buf[n] becomes the
 * state at block n's start. Reverse: buf[n] becomes the state gradient at block n's end. */
__global__ void lt_scan_kernel(float *buf, const int2 *info, const float *decay, lt_dims a,
                               bool reverse) {
    const int64_t DD = (int64_t)a.D * a.D;
    CUDA_FOR(i, (int64_t)a.B * a.H * DD) {
        const int64_t bh = i / DD, el = i % DD;
        const int b = (int)(bh / a.H), h = (int)(bh % a.H);
        const double lam = decay[h];
        float S = 0.0f;
        for (int step = 0; step < a.nblk; step++) {
            const int n = reverse ? a.nblk - 1 - step : step;
            const int b0 = n * a.block, m = lt_block_end(a, b0) - b0 + 1;
            const bool keep = info[(size_t)b * a.nblk + n].y < 0;
            const size_t at = ((size_t)bh * a.nblk + n) * DD + el;
            const float tmp = buf[at];
            buf[at] = S;
            const double gm = keep ? exp(-lam * m) : 0.0;
            S = (float)(gm * (double)S + (double)tmp);
        }
    }
}

/* One warp per position (b,t,h): the intra-block sum plus, with states, the inter-block
 * readout. The naive form is one block spanning T without states. */
__global__ void lt_fwd_rows_kernel(float *out, const float *qkv, const float *decay,
                                   const int32_t *seg, const int2 *info, const float *states,
                                   lt_dims a) {
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31, D = a.D;
    if (row >= (int64_t)a.B * a.T * a.H) return;
    const int b = (int)(row / ((int64_t)a.T * a.H)), t = (int)((row / a.H) % a.T),
              h = (int)(row % a.H);
    const int n = t / a.block, b0 = n * a.block;
    const int32_t *sg = seg ? seg + (size_t)b * a.T : NULL;
    const double lam = decay[h];
    const size_t row3 = (size_t)a.H * 3 * D;
    const float *base = qkv + ((size_t)b * a.T * a.H + h) * 3 * D;
    const float *qt = base + t * row3;
    float qr[LT_R];
    lt_load(qr, qt, D, lane);
    double acc[LT_R];
#pragma unroll
    for (int r = 0; r < LT_R; r++) acc[r] = 0;
    for (int j = lt_row_start(sg, b0, t, lane); j <= t; j++) {
        const float *kj = base + j * row3 + D, *vj = kj + D;
        double w = exp(-lam * (t - j)) * lt_dot(qr, kj, D, lane);
#pragma unroll
        for (int r = 0; r < LT_R; r++) {
            int d = lane + 32 * r;
            if (d < D) acc[r] += w * vj[d];
        }
    }
    if (states && t < info[(size_t)b * a.nblk + n].x) {
        const float *S = states + (((size_t)b * a.H + h) * a.nblk + n) * D * D;
        const double qd = exp(-lam * (t - b0 + 1));
        for (int c = 0; c < D; c++) {
            const double w = qd * qt[c];
            const float *Sc = S + (size_t)c * D;
#pragma unroll
            for (int r = 0; r < LT_R; r++) {
                int d = lane + 32 * r;
                if (d < D) acc[r] += w * Sc[d];
            }
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
                                   const float *decay, const int32_t *seg, const int2 *info,
                                   const float *states, const float *dstates, lt_dims a) {
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31, D = a.D;
    if (row >= (int64_t)a.B * a.T * a.H) return;
    const int b = (int)(row / ((int64_t)a.T * a.H)), t = (int)((row / a.H) % a.T),
              h = (int)(row % a.H);
    const int n = t / a.block, b0 = n * a.block, e = lt_block_end(a, b0);
    const int32_t *sg = seg ? seg + (size_t)b * a.T : NULL;
    const double lam = decay[h];
    const size_t row3 = (size_t)a.H * 3 * D, rowg = (size_t)a.H * D;
    const float *base = qkv + ((size_t)b * a.T * a.H + h) * 3 * D;
    const float *gbase = dout + ((size_t)b * a.T * a.H + h) * D;
    float *dbase = dqkv + ((size_t)b * a.T * a.H + h) * 3 * D;
    const size_t sidx = (((size_t)b * a.H + h) * a.nblk + n) * D * D;
    const int2 inf = info ? info[(size_t)b * a.nblk + n] : make_int2(e + 1, -1);

    /* dq_t = sum_j A[t,j] (do_t . v_j) k_j + [t < first] gamma^(t-b0+1) do_t S^T */
    const float *dot_ = gbase + t * rowg;
    float dor[LT_R];
    lt_load(dor, dot_, D, lane);
    double acc[LT_R];
#pragma unroll
    for (int r = 0; r < LT_R; r++) acc[r] = 0;
    for (int j = lt_row_start(sg, b0, t, lane); j <= t; j++) {
        const float *kj = base + j * row3 + D, *vj = kj + D;
        double w = exp(-lam * (t - j)) * lt_dot(dor, vj, D, lane);
#pragma unroll
        for (int r = 0; r < LT_R; r++) {
            int c = lane + 32 * r;
            if (c < D) acc[r] += w * kj[c];
        }
    }
    if (states && t < inf.x) {
        const float *S = states + sidx;
        const double qd = exp(-lam * (t - b0 + 1));
        double sdot[LT_R];
#pragma unroll
        for (int r = 0; r < LT_R; r++) sdot[r] = 0;
        for (int x = 0; x < D; x++) {
            const double gx = dot_[x];
#pragma unroll
            for (int r = 0; r < LT_R; r++) {
                int c = lane + 32 * r;
                if (c < D) sdot[r] += gx * S[(size_t)c * D + x];
            }
        }
#pragma unroll
        for (int r = 0; r < LT_R; r++) acc[r] += qd * sdot[r];
    }
    float *dq = dbase + t * row3;
#pragma unroll
    for (int r = 0; r < LT_R; r++) {
        int c = lane + 32 * r;
        if (c < D) dq[c] += (float)acc[r];
    }

    /* dk_t = sum_i A[i,t] (do_i . v_t) q_i + [t >= from] gamma^(e-t) v_t G^T
     * dv_t = sum_i A[i,t] (q_i . k_t) do_i + [t >= from] gamma^(e-t) k_t G */
    const float *kt = base + t * row3 + D, *vt = kt + D;
    float kr[LT_R], vr[LT_R];
    lt_load(kr, kt, D, lane);
    lt_load(vr, vt, D, lane);
    double acc_k[LT_R], acc_v[LT_R];
#pragma unroll
    for (int r = 0; r < LT_R; r++) acc_k[r] = acc_v[r] = 0;
    const int end = lt_row_end(sg, t, e, lane);
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
    const int from = inf.y >= 0 ? inf.y : b0;
    if (dstates && t >= from) {
        const float *G = dstates + sidx;
        const double kd = exp(-lam * (e - t));
        double gdot[LT_R];
#pragma unroll
        for (int r = 0; r < LT_R; r++) gdot[r] = 0;
        for (int x = 0; x < D; x++) {
            const double vx = vt[x], a_x = kd * kt[x];
#pragma unroll
            for (int r = 0; r < LT_R; r++) {
                int c = lane + 32 * r;
                if (c < D) {
                    gdot[r] += G[(size_t)c * D + x] * vx; /* (G v_t)[c] */
                    acc_v[r] += a_x * G[(size_t)x * D + c];
                }
            }
        }
#pragma unroll
        for (int r = 0; r < LT_R; r++) acc_k[r] += kd * gdot[r];
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
    const int block = (int)n->ip[0];
    a.block = block > 0 ? block : a.T; /* naive: one block, no state */
    a.nblk = (a.T + a.block - 1) / a.block;
    return a;
}

static unsigned lt_row_blocks(const lt_dims &a) {
    return (unsigned)(((int64_t)a.B * a.T * a.H + LT_WARPS - 1) / LT_WARPS);
}

/* Block info and the states at every block's start (forward direction), in scratch. */
static float *lt_states(const mt_node *n, const lt_dims &a, int2 **info_out) {
    const float *qkv = cuda_f32(n->in[0]), *decay = cuda_f32(n->in[1]);
    const int32_t *seg = n->in[2] ? cuda_i32(n->in[2]) : NULL;
    int2 *info =
        (int2 *)mt_node_scratch(n, sizeof(int2) * (size_t)a.B * a.nblk, "lightning block info");
    lt_info_kernel<<<cuda_blocks((int64_t)a.B * a.nblk, CUDA_THREADS), CUDA_THREADS>>>(info, seg,
                                                                                       a);
    CUDA_LAUNCH_CHECK("lightning block info");
    size_t nstate = (size_t)a.B * a.H * a.nblk * a.D * a.D;
    float *states = (float *)mt_node_scratch(n, sizeof(float) * nstate, "lightning states");
    dim3 grid((unsigned)((int64_t)a.B * a.H * a.nblk),
              (unsigned)((a.D * a.D + CUDA_THREADS - 1) / CUDA_THREADS));
    lt_delta_kernel<<<grid, CUDA_THREADS>>>(states, qkv, NULL, decay, info, a, false);
    CUDA_LAUNCH_CHECK("lightning state deltas");
    int64_t elems = (int64_t)a.B * a.H * a.D * a.D;
    lt_scan_kernel<<<cuda_blocks(elems, CUDA_THREADS), CUDA_THREADS>>>(states, info, decay, a,
                                                                       false);
    CUDA_LAUNCH_CHECK("lightning state scan");
    *info_out = info;
    return states;
}

void cuda_lightning_fwd_node(const mt_node *n) {
    lt_dims a = lt_node_dims(n);
    int2 *info = NULL;
    float *states = n->ip[0] > 0 ? lt_states(n, a, &info) : NULL;
    lt_fwd_rows_kernel<<<lt_row_blocks(a), 32 * LT_WARPS>>>(
        cuda_f32(n->out), cuda_f32(n->in[0]), cuda_f32(n->in[1]),
        n->in[2] ? cuda_i32(n->in[2]) : NULL, info, states, a);
    CUDA_LAUNCH_CHECK("lightning forward");
}

void cuda_lightning_bwd_node(const mt_node *n) {
    if (!n->in[0]->grad) return;
    lt_dims a = lt_node_dims(n);
    const float *qkv = cuda_f32(n->in[0]), *decay = cuda_f32(n->in[1]);
    const float *dout = cuda_grad(n->out);
    int2 *info = NULL;
    float *states = NULL, *dstates = NULL;
    if (n->ip[0] > 0) {
        states = lt_states(n, a, &info);
        size_t nstate = (size_t)a.B * a.H * a.nblk * a.D * a.D;
        dstates = (float *)mt_node_scratch(n, sizeof(float) * nstate, "lightning state grads");
        dim3 grid((unsigned)((int64_t)a.B * a.H * a.nblk),
                  (unsigned)((a.D * a.D + CUDA_THREADS - 1) / CUDA_THREADS));
        lt_delta_kernel<<<grid, CUDA_THREADS>>>(dstates, qkv, dout, decay, info, a, true);
        CUDA_LAUNCH_CHECK("lightning backward state-gradient deltas");
        int64_t elems = (int64_t)a.B * a.H * a.D * a.D;
        lt_scan_kernel<<<cuda_blocks(elems, CUDA_THREADS), CUDA_THREADS>>>(dstates, info, decay, a,
                                                                           true);
        CUDA_LAUNCH_CHECK("lightning backward state-gradient scan");
    }
    lt_bwd_rows_kernel<<<lt_row_blocks(a), 32 * LT_WARPS>>>(cuda_grad(n->in[0]), dout, qkv, decay,
                                                            n->in[2] ? cuda_i32(n->in[2]) : NULL,
                                                            info, states, dstates, a);
    CUDA_LAUNCH_CHECK("lightning backward");
}
