/* lightning_block.cu: the block form of lightning attention (node ip[0] = block > 0) as cuBLAS
 * strided-batched GEMMs over every (b, h, block) at once, forward and backward; lightning.cu
 * keeps the naive form and dispatches here. The formulas (and resets: first, from, keep) are
 * those of kernels/cpu/lightning_block.c; the rounding points in the bf16 mode are those of
 * kernels/cpu/lightning_bf16.c's header, which is this file's CPU reference in that mode.
 *
 * Per block of L = min(block, T) positions (the last block padded with zero rows), N = B*H*nblk
 * blocks, operands packed block-contiguous (N, L, W) with the decays folded in:
 *   forward   X = [Q | K | V | Qd | Kd]              (W = 5D)
 *             dS = Kd^T V (D,D), scan -> S_n (fp32), P = Q K^T (L,L), Pm = mask(P),
 *             O = Pm V + Qd S_n, then O's rows to out (B,T,H,D)
 *   backward  X = [Q | K | V | Qd | Kd | Vd | dO | dOd] (W = 8D)
 *             S_n as above; dG = Qd^T dO, reverse scan -> G_n; Pm = mask(Q K^T),
 *             dPm = mask(dO V^T); dQ = dPm K + dOd S_n^T, dK = dPm^T Q + Vd G_n^T,
 *             dV = Pm^T dO + Kd G_n, then dqkv += those rows
 * Operands are bf16 (CUDA_R_16BF, tensor cores) when the node is bf16, else fp32 (CUDA_R_32F,
 * the handle's default math: no TF32); C is always fp32 and every sum is accumulated in fp32
 * (CUBLAS_COMPUTE_32F). The state and its gradient stay fp32 between blocks (the scan), and a
 * bf16 copy is only the readout operand. fp32 mode therefore differs from the CPU reference
 * (the same GEMM form in fp32 sgemm, tiled differently: kernels/cpu/lightning_block.c) by the
 * order of fp32 sums: well inside the 1e-5 rule (sums of at most max(L, D) terms).
 *
 * GEMM FLOPs per block: forward 4 L^2 D + 4 L D^2, backward 10 L^2 D + 10 L D^2 (the state
 * recompute included); the (L,L) products are full squares (the causal half is masked, not
 * skipped). Scratch (bytes, s = 2 in bf16 and 4 in fp32, R = N L = B*H*nblk*L rows):
 *   forward   R (5 D s + 4 L + 4 D) + [bf16] 2 R L + N D^2 (4 + [bf16] 2)
 *   backward  R (8 D s + 8 L + 12 D) + 2 N D^2 (4 + [bf16] 2)
 *   both      + 8 H (L + 1) (decay powers) + 4 B T (visible starts) + 8 B nblk (block info)
 * The scores are materialised in fp32 between the two GEMMs. In bf16 mode at D = 64 or 128 the
 * fused form (the end of this file, kernels in lightning_fused.cu) replaces all of it but the
 * setup and the scans: the state deltas and the rows are tensor-core kernels that read qkv and
 * dout in place and write out and dqkv directly, the scores on chip; its scratch is the states,
 * N D^2 (4 + 2) forward and twice that backward. MT_LIGHTNING_FUSED=0 selects the GEMM form
 * there too. */
#include "cuda_ops.cuh"
#include "lightning_fused.cuh"

struct ltb_dims {
    int B, T, H, D, L, nblk, N; /* N = B*H*nblk blocks, batch index ((b*H + h)*nblk + n) */
};

template <typename T> __device__ inline T ltb_cvt(float x);
template <> __device__ inline float ltb_cvt<float>(float x) { return x; }
template <> __device__ inline __nv_bfloat16 ltb_cvt<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

__device__ inline int ltb_end(const ltb_dims &d, int b0) {
    return (b0 + d.L < d.T ? b0 + d.L : d.T) - 1;
}

/* tab[h, n] = exp(-lambda_h n), n = 0 .. L: every decay power a block uses, in double. */
__global__ void ltb_pow_kernel(double *tab, const float *decay, ltb_dims d) {
    CUDA_FOR(i, (int64_t)d.H * (d.L + 1)) {
        const int h = (int)(i / (d.L + 1)), n = (int)(i % (d.L + 1));
        tab[i] = exp(-(double)decay[h] * n);
    }
}

/* Per (b, block n): info = (first, last) resets in the block ((e + 1, -1) when none), and for
 * each position t of the block vis[b, t] = its first visible key (the last reset in (b0, t], or
 * b0). A reset at r: seg[r] != seg[r-1]. */
__global__ void ltb_info_kernel(int2 *info, int32_t *vis, const int32_t *seg, ltb_dims d) {
    CUDA_FOR(i, (int64_t)d.B * d.nblk) {
        const int b = (int)(i / d.nblk), b0 = (int)(i % d.nblk) * d.L, e = ltb_end(d, b0);
        const int32_t *sg = seg ? seg + (size_t)b * d.T : NULL;
        int first = e + 1, last = -1, start = b0;
        for (int t = b0; t <= e; t++) {
            if (sg && t > 0 && sg[t] != sg[t - 1]) {
                if (first > e) first = t;
                last = t;
                start = t;
            }
            vis[(size_t)b * d.T + t] = start;
        }
        info[i] = make_int2(first, last);
    }
}

/* Operand o of the packed layout: its source (0 q, 1 k, 2 v, 3 dout) and decay (0 none;
 * 1 g^(t-b0+1) where t < first; 2 g^(e-t) where t >= from). */
__device__ inline int ltb_src(int o) { return o < 3 ? o : o < 6 ? o - 3 : 3; }
__device__ inline int ltb_kind(int o) { return o < 3 || o == 6 ? 0 : o == 3 || o == 7 ? 1 : 2; }

/* The row kernels below run one thread block per row (grid-stride over rows), its threads over
 * the row's columns: the index arithmetic is per row, not per element. */
#define LTB_FOR_ROWS(r, rows) for (int64_t r = blockIdx.x; r < (rows); r += gridDim.x)

/* Where row r = (blk, i) of a packed block lies: batch b, head h, block start b0, position t,
 * block end e. */
struct ltb_row {
    int b, h, n, i, b0, t, e;
};

__device__ inline ltb_row ltb_row_at(const ltb_dims &d, int64_t r) {
    ltb_row w;
    w.i = (int)(r % d.L);
    const int blk = (int)(r / d.L), bh = blk / d.nblk;
    w.n = blk % d.nblk;
    w.b = bh / d.H;
    w.h = bh % d.H;
    w.b0 = w.n * d.L;
    w.t = w.b0 + w.i;
    w.e = ltb_end(d, w.b0);
    return w;
}

/* X (N, L, nops*D) from qkv and dout (padding rows 0), rounded to T. */
template <typename T>
__global__ void ltb_pack_kernel(T *X, int nops, const float *qkv, const float *dout,
                                const double *tab, const int2 *info, ltb_dims d) {
    const int W = nops * d.D;
    LTB_FOR_ROWS(r, (int64_t)d.N * d.L) {
        const ltb_row w = ltb_row_at(d, r);
        const bool real = w.t <= w.e;
        const int2 inf = info[(size_t)w.b * d.nblk + w.n];
        const int from = inf.y >= 0 ? inf.y : w.b0;
        const double *g = tab + (size_t)w.h * (d.L + 1);
        const double gq = g[w.i + 1], gk = real ? g[w.e - w.t] : 0.0;
        const bool onq = real && w.t < inf.x, onk = real && w.t >= from;
        const size_t pos = ((size_t)w.b * d.T + (real ? w.t : 0)) * d.H + w.h;
        T *row = X + r * W;
        for (int col = threadIdx.x; col < W; col += blockDim.x) {
            const int o = col / d.D, c = col % d.D, src = ltb_src(o), kind = ltb_kind(o);
            float x = 0.0f;
            if (real)
                x = src == 3 ? dout[pos * d.D + c] : qkv[pos * 3 * d.D + (size_t)src * d.D + c];
            if (kind == 1) x = onq ? (float)(gq * x) : 0.0f;
            if (kind == 2) x = onk ? (float)(gk * x) : 0.0f;
            row[col] = ltb_cvt<T>(x);
        }
    }
}

/* Pm[blk, i, j] = T(fl(P g^(i-j))) where key j is visible from row i (j <= i, no reset in
 * (j, i], both rows real), else 0. Pm may be P itself (fp32). */
template <typename T>
__global__ void ltb_mask_kernel(T *Pm, const float *P, const int32_t *vis, const double *tab,
                                ltb_dims d) {
    LTB_FOR_ROWS(r, (int64_t)d.N * d.L) {
        const ltb_row w = ltb_row_at(d, r);
        const int start = w.t <= w.e ? vis[(size_t)w.b * d.T + w.t] - w.b0 : d.L; /* first j */
        const double *g = tab + (size_t)w.h * (d.L + 1);
        for (int j = threadIdx.x; j < d.L; j += blockDim.x) {
            const size_t at = (size_t)r * d.L + j;
            const float y = j <= w.i && j >= start ? (float)((double)P[at] * g[w.i - j]) : 0.0f;
            Pm[at] = ltb_cvt<T>(y);
        }
    }
}

/* Per (b,h) and state element, the scan over blocks: forward, block n's state at its start;
 * reverse, the state gradient at block n's end. carry (B,H,D,D) or NULL (zero): the state before
 * the row (forward) or the gradient of the state at its end (reverse; context parallelism's
 * chunks, kernels/cuda/cp_lightning.cu). carry = fl(keep g^m carry + delta), the fp32
 * state between blocks. The states replace the deltas in buf, or, when op is not NULL (bf16),
 * go to op as T only: the GEMM operand, and all that reads them (buf keeps the deltas). */
template <typename T>
__global__ void ltb_scan_kernel(float *buf, T *op, const int2 *info, const double *tab, ltb_dims d,
                                bool reverse, const float *carry) {
    const int64_t DD = (int64_t)d.D * d.D;
    CUDA_FOR(i, (int64_t)d.B * d.H * DD) {
        const int64_t bh = i / DD, el = i % DD;
        const int b = (int)(bh / d.H), h = (int)(bh % d.H);
        float S = carry ? carry[i] : 0.0f;
        for (int step = 0; step < d.nblk; step++) {
            const int n = reverse ? d.nblk - 1 - step : step;
            const int b0 = n * d.L, m = ltb_end(d, b0) - b0 + 1;
            const bool keep = info[(size_t)b * d.nblk + n].y < 0;
            const size_t at = ((size_t)bh * d.nblk + n) * DD + el;
            const float delta = buf[at];
            if (op)
                op[at] = ltb_cvt<T>(S);
            else
                buf[at] = S;
            const double gm = keep ? tab[(size_t)h * (d.L + 1) + m] : 0.0;
            S = (float)(gm * (double)S + (double)delta);
        }
    }
}

/* out (B,T,H,D) = the real rows of Ob (N, L, D); one thread block per position and head. */
__global__ void ltb_out_kernel(float *out, const float *Ob, ltb_dims d) {
    LTB_FOR_ROWS(r, (int64_t)d.B * d.T * d.H) {
        const int h = (int)(r % d.H), t = (int)((r / d.H) % d.T),
                  b = (int)(r / ((int64_t)d.H * d.T));
        const float *src = Ob + ((((size_t)b * d.H + h) * d.nblk + t / d.L) * d.L + t % d.L) * d.D;
        for (int c = threadIdx.x; c < d.D; c += blockDim.x) out[r * d.D + c] = src[c];
    }
}

/* dqkv (B,T,H,3D) += the real rows of dB (N, L, 3D). */
__global__ void ltb_dqkv_kernel(float *dqkv, const float *dB, ltb_dims d) {
    const int W = 3 * d.D;
    LTB_FOR_ROWS(r, (int64_t)d.B * d.T * d.H) {
        const int h = (int)(r % d.H), t = (int)((r / d.H) % d.T),
                  b = (int)(r / ((int64_t)d.H * d.T));
        const float *src = dB + ((((size_t)b * d.H + h) * d.nblk + t / d.L) * d.L + t % d.L) * W;
        for (int c = threadIdx.x; c < W; c += blockDim.x) dqkv[r * W + c] += src[c];
    }
}

/* Launch geometry of the row kernels: one block per row (at most 2^20 blocks, then grid-stride),
 * whole warps up to CUDA_THREADS across the row's width. */
static dim3 ltb_grid(int64_t rows) { return dim3((unsigned)(rows < (1 << 20) ? rows : (1 << 20))); }
static dim3 ltb_block(int width) {
    const int w = (width + 31) / 32 * 32;
    return dim3((unsigned)(w < CUDA_THREADS ? w : CUDA_THREADS));
}

/* Row-major C_x (m,n) = op(A_x) op(B_x) + beta C_x for the N blocks x (A_x = A + x sa, ...),
 * through column-major cuBLAS as C^T = op(B)^T op(A)^T (like cuda_sgemm_rm). ta: A stored
 * (k,m); tb: B stored (n,k). */
template <typename T>
static void ltb_gemm(const char *what, bool ta, bool tb, int m, int n, int k, const T *A, int lda,
                     int64_t sa, const T *B, int ldb, int64_t sb, float beta, float *C, int ldc,
                     int64_t sc, const ltb_dims &d) {
    const float one = 1.0f;
    const cudaDataType t = sizeof(T) == 2 ? CUDA_R_16BF : CUDA_R_32F;
    cublasCheck(what, cublasGemmStridedBatchedEx(cuda_blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                 ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, B,
                                                 t, ldb, (long long)sb, A, t, lda, (long long)sa,
                                                 &beta, C, CUDA_R_32F, ldc, (long long)sc, d.N,
                                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* rows of `chunks` equal chunks taken as B*chunks rows of T/chunks positions (the same memory) */
static ltb_dims ltb_node_dims(const mt_node *n, int chunks) {
    const mt_tensor *qkv = n->in[0];
    ltb_dims d;
    d.B = (int)qkv->shape[0] * chunks;
    d.T = (int)qkv->shape[1] / chunks;
    d.H = (int)qkv->shape[2];
    d.D = (int)(qkv->shape[3] / 3);
    const int block = (int)n->ip[0];
    MT_CHECK(block >= 1, "lightning (cuda, block form): block = %d must be >= 1", block);
    d.L = block < d.T ? block : d.T;
    d.nblk = (d.T + d.L - 1) / d.L;
    const int64_t N = (int64_t)d.B * d.H * d.nblk;
    MT_CHECK(N <= INT32_MAX && N * d.L * 8 * d.D < ((int64_t)1 << 62),
             "lightning (cuda, block form): B=%d H=%d T=%d block=%d: too many blocks", d.B, d.H,
             d.T, block);
    d.N = (int)N;
    return d;
}

/* The decay powers, block info and visible starts, in scratch. */
struct ltb_setup {
    double *tab;
    int2 *info;
    int32_t *vis;
};

static ltb_setup ltb_prepare(const mt_node *n, const ltb_dims &d) {
    ltb_setup s;
    s.tab = (double *)mt_node_scratch(n, sizeof(double) * (size_t)d.H * (d.L + 1),
                                      "lightning decay powers");
    s.info = (int2 *)mt_node_scratch(n, sizeof(int2) * (size_t)d.B * d.nblk, "lightning info");
    s.vis = (int32_t *)mt_node_scratch(n, sizeof(int32_t) * (size_t)d.B * d.T, "lightning vis");
    const int64_t np = (int64_t)d.H * (d.L + 1), nb = (int64_t)d.B * d.nblk;
    ltb_pow_kernel<<<cuda_blocks(np, CUDA_THREADS), CUDA_THREADS>>>(s.tab, cuda_f32(n->in[1]), d);
    CUDA_LAUNCH_CHECK("lightning decay powers");
    ltb_info_kernel<<<cuda_blocks(nb, CUDA_THREADS), CUDA_THREADS>>>(
        s.info, s.vis, n->in[2] ? cuda_i32(n->in[2]) : NULL, d);
    CUDA_LAUNCH_CHECK("lightning block info");
    return s;
}

template <typename T>
static T *ltb_pack(const mt_node *n, const ltb_dims &d, const ltb_setup &s, int nops,
                   const float *dout) {
    const int64_t count = (int64_t)d.N * d.L * nops * d.D;
    T *X = (T *)mt_node_scratch(n, sizeof(T) * (size_t)count, "lightning operands");
    void (*pack)(T *, int, const float *, const float *, const double *, const int2 *, ltb_dims) =
        ltb_pack_kernel<T>; /* a plain name for the launch (the emulator rewrites name<<<...>>>) */
    pack<<<ltb_grid((int64_t)d.N * d.L), ltb_block(nops * d.D)>>>(X, nops, cuda_f32(n->in[0]), dout,
                                                                  s.tab, s.info, d);
    CUDA_LAUNCH_CHECK("lightning pack");
    return X;
}

/* The scan of buf (N, D, D) in place; returns the operand copy (buf itself in fp32). */
template <typename T>
static T *ltb_scan(const mt_node *n, const ltb_dims &d, const ltb_setup &s, float *buf,
                   bool reverse, const float *carry) {
    const bool bf16 = sizeof(T) == 2;
    const size_t count = (size_t)d.N * d.D * d.D;
    T *op = bf16 ? (T *)mt_node_scratch(n, sizeof(T) * count, "lightning state operand") : NULL;
    const int64_t elems = (int64_t)d.B * d.H * d.D * d.D;
    void (*scan)(float *, T *, const int2 *, const double *, ltb_dims, bool, const float *) =
        ltb_scan_kernel<T>;
    scan<<<cuda_blocks(elems, CUDA_THREADS), CUDA_THREADS>>>(buf, op, s.info, s.tab, d, reverse,
                                                             carry);
    CUDA_LAUNCH_CHECK(reverse ? "lightning state-gradient scan" : "lightning state scan");
    return bf16 ? op : (T *)(void *)buf;
}

/* Pm = mask(P); in fp32 in place. */
template <typename T>
static T *ltb_mask(const mt_node *n, const ltb_dims &d, const ltb_setup &s, float *P) {
    const bool bf16 = sizeof(T) == 2;
    const int64_t count = (int64_t)d.N * d.L * d.L;
    T *Pm = bf16 ? (T *)mt_node_scratch(n, sizeof(T) * (size_t)count, "lightning masked scores")
                 : (T *)(void *)P;
    void (*mask)(T *, const float *, const int32_t *, const double *, ltb_dims) =
        ltb_mask_kernel<T>;
    mask<<<ltb_grid((int64_t)d.N * d.L), ltb_block(d.L)>>>(Pm, P, s.vis, s.tab, d);
    CUDA_LAUNCH_CHECK("lightning mask");
    return Pm;
}

/* The block states of the scan: per block the delta A_b^T B_b (D,D) of the packed operands (row
 * stride W), then their decayed scan, reversed for the state gradients. */
template <typename T>
static const T *ltb_states(const mt_node *n, const ltb_dims &d, const ltb_setup &s, const T *A,
                           const T *Bm, int W, bool reverse, const float *carry, const char *what) {
    const int64_t DD = (int64_t)d.D * d.D, LW = (int64_t)d.L * W;
    float *St = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(d.N * DD), what);
    ltb_gemm<T>(what, true, false, d.D, d.D, d.L, A, W, LW, Bm, W, LW, 0.0f, St, d.D, DD, d);
    return ltb_scan<T>(n, d, s, St, reverse, carry);
}

template <typename T>
static void ltb_forward(const mt_node *n, const ltb_dims &d, const float *s0) {
    const ltb_setup s = ltb_prepare(n, d);
    const int D = d.D, L = d.L, W = 5 * D;
    const int64_t LW = (int64_t)L * W, LL = (int64_t)L * L, LD = (int64_t)L * D,
                  DD = (int64_t)D * D;
    const T *X = ltb_pack<T>(n, d, s, 5, NULL);
    const T *Q = X, *K = X + D, *V = X + 2 * D, *Qd = X + 3 * D, *Kd = X + 4 * D;
    const T *S = ltb_states<T>(n, d, s, Kd, V, W, false, s0, "lightning state deltas");
    float *Ob = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(d.N * LD), "lightning rows");
    float *P = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(d.N * LL), "lightning scores");
    ltb_gemm<T>("lightning scores", false, true, L, L, D, Q, W, LW, K, W, LW, 0.0f, P, L, LL, d);
    const T *Pm = ltb_mask<T>(n, d, s, P);
    ltb_gemm<T>("lightning intra", false, false, L, D, L, Pm, L, LL, V, W, LW, 0.0f, Ob, D, LD, d);
    ltb_gemm<T>("lightning readout", false, false, L, D, D, Qd, W, LW, S, D, DD, 1.0f, Ob, D, LD,
                d);
    const int64_t rows = (int64_t)d.B * d.T * d.H;
    ltb_out_kernel<<<ltb_grid(rows), ltb_block(D)>>>(cuda_f32(n->out), Ob, d);
    CUDA_LAUNCH_CHECK("lightning rows out");
}

template <typename T>
static void ltb_backward(const mt_node *n, const ltb_dims &d, const float *s0, const float *dsT) {
    const ltb_setup s = ltb_prepare(n, d);
    const bool bf16 = sizeof(T) == 2;
    const int D = d.D, L = d.L, W = 8 * D, W3 = 3 * D;
    const int64_t LW = (int64_t)L * W, LL = (int64_t)L * L, L3 = (int64_t)L * W3,
                  DD = (int64_t)D * D;
    const T *X = ltb_pack<T>(n, d, s, 8, cuda_grad(n->out));
    const T *Q = X, *K = X + D, *V = X + 2 * D, *Qd = X + 3 * D, *Kd = X + 4 * D, *Vd = X + 5 * D,
            *dO = X + 6 * D, *dOd = X + 7 * D;
    const T *S = ltb_states<T>(n, d, s, Kd, V, W, false, s0, "lightning state deltas");
    const T *G = ltb_states<T>(n, d, s, Qd, dO, W, true, dsT, "lightning state-gradient deltas");

    float *dB = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(d.N * L3), "lightning dqkv");
    /* bf16: one fp32 score buffer serves both products (each is masked into its own operand
     * before the next GEMM); fp32: each is masked in place */
    float *P = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(d.N * LL), "lightning scores");
    ltb_gemm<T>("lightning scores", false, true, L, L, D, Q, W, LW, K, W, LW, 0.0f, P, L, LL, d);
    const T *Pm = ltb_mask<T>(n, d, s, P);
    float *dP = bf16 ? P
                     : (float *)mt_node_scratch(n, sizeof(float) * (size_t)(d.N * LL),
                                                "lightning score grads");
    ltb_gemm<T>("lightning score grads", false, true, L, L, D, dO, W, LW, V, W, LW, 0.0f, dP, L, LL,
                d);
    const T *dPm = ltb_mask<T>(n, d, s, dP);
    ltb_gemm<T>("lightning dq intra", false, false, L, D, L, dPm, L, LL, K, W, LW, 0.0f, dB, W3, L3,
                d);
    ltb_gemm<T>("lightning dk intra", true, false, L, D, L, dPm, L, LL, Q, W, LW, 0.0f, dB + D, W3,
                L3, d);
    ltb_gemm<T>("lightning dv intra", true, false, L, D, L, Pm, L, LL, dO, W, LW, 0.0f, dB + 2 * D,
                W3, L3, d);
    /* the inter-block terms onto the intra ones (beta = 1): dq = fl(fl(dPm K) + dOd R(S)^T) */
    ltb_gemm<T>("lightning dq inter", false, true, L, D, D, dOd, W, LW, S, D, DD, 1.0f, dB, W3, L3,
                d);
    ltb_gemm<T>("lightning dk inter", false, true, L, D, D, Vd, W, LW, G, D, DD, 1.0f, dB + D, W3,
                L3, d);
    ltb_gemm<T>("lightning dv inter", false, false, L, D, D, Kd, W, LW, G, D, DD, 1.0f, dB + 2 * D,
                W3, L3, d);
    const int64_t rows = (int64_t)d.B * d.T * d.H;
    ltb_dqkv_kernel<<<ltb_grid(rows), ltb_block(W3)>>>(cuda_grad(n->in[0]), dB, d);
    CUDA_LAUNCH_CHECK("lightning dqkv rows");
}

/* ---- the fused form (bf16, D = 64 or 128): lightning_fused.cu ---- */

static ltf_geom ltb_geom(const ltb_dims &d, const ltb_setup &s) {
    const ltf_geom g = {s.vis, s.info, s.tab, d.B, d.T, d.H, d.D, d.L, d.nblk};
    return g;
}

/* The block states from A~^T B per block, read in place, scanned (reversed for the state
 * gradients); returns the bf16 states, the readout operand. */
static const __nv_bfloat16 *ltb_fused_states(const mt_node *n, const ltb_dims &d,
                                             const ltb_setup &s, ltf_rows a, int akind, ltf_rows b,
                                             bool reverse, const float *carry, const char *what) {
    float *St = (float *)mt_node_scratch(n, sizeof(float) * (size_t)d.N * d.D * d.D, what);
    cuda_lightning_fused_state(what, St, a, akind, b, ltb_geom(d, s));
    return ltb_scan<__nv_bfloat16>(n, d, s, St, reverse, carry);
}

static void ltb_forward_fused(const mt_node *n, const ltb_dims &d, const float *s0) {
    const ltb_setup s = ltb_prepare(n, d);
    const int D = d.D, W = 3 * D;
    const float *qkv = cuda_f32(n->in[0]);
    const ltf_rows q = {qkv, W, 0}, k = {qkv, W, D}, v = {qkv, W, 2 * D};
    const __nv_bfloat16 *S =
        ltb_fused_states(n, d, s, k, LTF_DECAY_K, v, false, s0, "lightning state deltas (fused)");
    const ltf_out out = {cuda_f32(n->out), D, 0, false}; /* o = Q~ R(S) + Pm V */
    cuda_lightning_fused_rows("lightning rows (fused)", out, q, k, v, false, q, LTF_DECAY_Q, S,
                              false, ltb_geom(d, s));
}

static void ltb_backward_fused(const mt_node *n, const ltb_dims &d, const float *s0,
                               const float *dsT) {
    const ltb_setup s = ltb_prepare(n, d);
    const ltf_geom g = ltb_geom(d, s);
    const int D = d.D, W = 3 * D;
    const float *qkv = cuda_f32(n->in[0]);
    const ltf_rows q = {qkv, W, 0}, k = {qkv, W, D}, v = {qkv, W, 2 * D},
                   dO = {cuda_grad(n->out), D, 0};
    const __nv_bfloat16 *S =
        ltb_fused_states(n, d, s, k, LTF_DECAY_K, v, false, s0, "lightning state deltas (fused)");
    const __nv_bfloat16 *G = ltb_fused_states(n, d, s, q, LTF_DECAY_Q, dO, true, dsT,
                                              "lightning state-gradient deltas (fused)");
    float *dqkv = cuda_grad(n->in[0]);
    /* dq += dO~ R(S)^T + dPm K;  dk += V~ R(G)^T + dPm^T Q;  dv += K~ R(G) + Pm^T dO */
    cuda_lightning_fused_rows("lightning dq (fused)", ltf_out{dqkv, W, 0, true}, dO, v, k, false,
                              dO, LTF_DECAY_Q, S, true, g);
    cuda_lightning_fused_rows("lightning dk (fused)", ltf_out{dqkv, W, D, true}, v, dO, q, true, v,
                              LTF_DECAY_K, G, true, g);
    cuda_lightning_fused_rows("lightning dv (fused)", ltf_out{dqkv, W, 2 * D, true}, k, q, dO, true,
                              k, LTF_DECAY_K, G, false, g);
}

void cuda_lightning_block_fwd_from(const mt_node *n, int chunks, const float *s0) {
    const ltb_dims d = ltb_node_dims(n, chunks);
    if (n->ip[1] != MT_BF16)
        ltb_forward<float>(n, d, s0);
    else if (cuda_lightning_fused_on(d.D))
        ltb_forward_fused(n, d, s0);
    else
        ltb_forward<__nv_bfloat16>(n, d, s0);
}

void cuda_lightning_block_bwd_from(const mt_node *n, int chunks, const float *s0,
                                   const float *dsT) {
    const ltb_dims d = ltb_node_dims(n, chunks);
    if (n->ip[1] != MT_BF16)
        ltb_backward<float>(n, d, s0, dsT);
    else if (cuda_lightning_fused_on(d.D))
        ltb_backward_fused(n, d, s0, dsT);
    else
        ltb_backward<__nv_bfloat16>(n, d, s0, dsT);
}

void cuda_lightning_block_fwd(const mt_node *n) { cuda_lightning_block_fwd_from(n, 1, NULL); }

void cuda_lightning_block_bwd(const mt_node *n) { cuda_lightning_block_bwd_from(n, 1, NULL, NULL); }
