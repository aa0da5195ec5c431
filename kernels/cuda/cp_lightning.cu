/* cp_lightning.cu: lightning attention under context parallelism on the GPU, the CUDA twin of
 * kernels/cpu/cp_lightning.c: the node work is autograd/op_cp_lightning.c's; this file gives it
 * the chunk state (lightning.cu's cuda_lightning_state), the state gradient and the mix below,
 * and the block form from an initial state (lightning_block.cu: the state scan starts from s0
 * and the state-gradient scan from dsT, in every GEMM mode, the fused one included). The state
 * gradient and the mix sum in double in the CPU's order of operations. */
#include "cuda_ops.cuh"

/* g (B,H,D,D) = sum over t before the row's first reset of exp(-lambda (t+1)) q_t^T do_t. One
 * block per (b, h), its threads over the D*D elements. */
__global__ void cp_state_grad_kernel(float *g, const float *dout, const float *qkv,
                                     const float *decay, const int32_t *seg, int T, int H, int D) {
    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int64_t row3 = (int64_t)H * 3 * D, row = (int64_t)H * D;
    const float *base = qkv + ((int64_t)b * T * H + h) * 3 * D;
    const float *gbase = dout + ((int64_t)b * T * H + h) * D;
    const int32_t *sg = seg ? seg + (int64_t)b * T : NULL;
    int first = 1;
    while (first < T && !(sg && sg[first] != sg[first - 1])) first++;
    const double lam = decay[h];
    float *G = g + (int64_t)bh * D * D;
    for (int i = threadIdx.x; i < D * D; i += blockDim.x) {
        const int c = i / D, d = i % D;
        double acc = 0;
        for (int t = 0; t < first; t++) {
            const double w = exp(-lam * (t + 1)) * base[t * row3 + c];
            acc += w * gbase[t * row + d];
        }
        G[i] = (float)acc;
    }
}

static void cp_state_grad(float *g, const float *dout, const float *qkv, const float *decay,
                          const int32_t *seg, int B, int T, int H, int D) {
    MT_CHECK(B >= 1 && T >= 1 && H >= 1 && D >= 1 && D <= 256,
             "cp lightning state gradient: B %d, T %d, H %d, D %d", B, T, H, D);
    cp_state_grad_kernel<<<(unsigned)(B * H), CUDA_THREADS>>>(g, dout, qkv, decay, seg, T, H, D);
    CUDA_LAUNCH_CHECK("cp lightning state gradient");
}

/* y[p*DD + e] = fl(sum_i w[p*ni + i] x[off[p*ni + i] + e]), terms with w = 0 skipped. */
__global__ void cp_mix_kernel(float *y, const float *x, const double *w, const int64_t *off, int np,
                              int ni, int64_t DD) {
    CUDA_FOR(idx, (int64_t)np * DD) {
        const int64_t p = idx / DD, e = idx % DD;
        double acc = 0;
        for (int i = 0; i < ni; i++) {
            const double wi = w[p * ni + i];
            if (wi != 0.0) acc += wi * x[off[p * ni + i] + e];
        }
        y[idx] = (float)acc;
    }
}

static void cp_mix(float *y, const float *x, const double *w, const int64_t *off, int np, int ni,
                   int64_t DD) {
    const int64_t count = (int64_t)np * DD;
    cp_mix_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(y, x, w, off, np, ni, DD);
    CUDA_LAUNCH_CHECK("cp lightning state mix");
}

static const mt_cp_lightning_kernels cuda_cp_kernels = {
    cuda_lightning_state,          cp_state_grad, cp_mix, cuda_lightning_block_fwd_from,
    cuda_lightning_block_bwd_from,
};

void cuda_cp_lightning_fwd_node(const mt_node *n) { mt_cp_lightning_node_fwd(n, &cuda_cp_kernels); }
void cuda_cp_lightning_bwd_node(const mt_node *n) { mt_cp_lightning_node_bwd(n, &cuda_cp_kernels); }
