/* rmsnorm.cu: y = w' * x * rstd with rstd = 1/sqrt(mean(x^2) + eps) per row, w' = w or 1 + w
 * (gemma). Node (autograd/op_rmsnorm.c): in[0] = x (..., C) as N rows, in[1] = w (C);
 * saved[0] = rstd (N) written by the forward; fp[0] = eps; ip[0] = 1 for gemma.
 * One block per row; row statistics in double like the CPU reference. */
#include "cuda_ops.cuh"

__device__ inline float rmsnorm_weight(const float *w, int c, bool gemma) {
    return gemma ? 1.0f + w[c] : w[c];
}

__global__ void rmsnorm_fwd_kernel(float *out, float *rstd, const float *x, const float *w,
                                   int64_t N, int C, float eps, bool gemma) {
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        const float *xr = x + n * C;
        double ss = 0.0;
        for (int c = threadIdx.x; c < C; c += blockDim.x) ss += (double)xr[c] * xr[c];
        ss = cuda_block_sum(ss);
        float r = (float)(1.0 / sqrt(ss / (C ? C : 1) + (double)eps));
        if (threadIdx.x == 0) rstd[n] = r;
        float *yr = out + n * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            yr[c] = rmsnorm_weight(w, c, gemma) * (xr[c] * r);
    }
}

/* dx += rstd * (g - x_hat * mean(g * x_hat)), g = dy * w', x_hat = x * rstd. */
__global__ void rmsnorm_bwd_dx_kernel(float *dx, const float *dy, const float *x, const float *w,
                                      const float *rstd, int64_t N, int C, bool gemma) {
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        const float *xr = x + n * C, *dyr = dy + n * C;
        float r = rstd[n];
        double dot = 0.0;
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            double g = (double)dyr[c] * rmsnorm_weight(w, c, gemma);
            dot += g * ((double)xr[c] * r);
        }
        dot = cuda_block_sum(dot);
        double mean = C ? dot / C : 0.0;
        float *dxr = dx + n * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            double g = (double)dyr[c] * rmsnorm_weight(w, c, gemma);
            dxr[c] += (float)(r * (g - (double)xr[c] * r * mean));
        }
    }
}

/* dw = sum over rows of dy * x_hat, in two deterministic passes: partial sums over chunks of
 * rows (part (chunks, C), double), then the chunks in order per column. */
__global__ void rmsnorm_bwd_dw_partial_kernel(double *part, const float *dy, const float *x,
                                              const float *rstd, int64_t N, int C,
                                              int64_t rows_per_chunk) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int64_t n0 = (int64_t)blockIdx.y * rows_per_chunk;
    if (c >= C) return;
    int64_t n1 = n0 + rows_per_chunk < N ? n0 + rows_per_chunk : N;
    double acc = 0.0;
    for (int64_t n = n0; n < n1; n++) acc += (double)dy[n * C + c] * x[n * C + c] * (double)rstd[n];
    part[(int64_t)blockIdx.y * C + c] = acc;
}

__global__ void rmsnorm_bwd_dw_reduce_kernel(float *dw, const double *part, int chunks, int C) {
    CUDA_FOR(c, C) {
        double acc = 0.0;
        for (int k = 0; k < chunks; k++) acc += part[(int64_t)k * C + c];
        dw[c] += (float)acc;
    }
}

static unsigned rmsnorm_row_blocks(int64_t N) { return (unsigned)(N < 65536 ? N : 65536); }

void cuda_rmsnorm_fwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    int C = (int)w->shape[0];
    int64_t N = C ? mt_numel(x) / C : 0;
    if (N == 0) return;
    rmsnorm_fwd_kernel<<<rmsnorm_row_blocks(N), CUDA_THREADS>>>(
        cuda_f32(n->out), cuda_f32(n->saved[0]), cuda_f32(x), cuda_f32(w), N, C, n->fp[0],
        n->ip[0] != 0);
    CUDA_LAUNCH_CHECK("rmsnorm forward");
}

void cuda_rmsnorm_bwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    int C = (int)w->shape[0];
    int64_t N = C ? mt_numel(x) / C : 0;
    if (N == 0) return;
    const float *dy = cuda_grad(n->out), *rstd = cuda_f32(n->saved[0]);
    bool gemma = n->ip[0] != 0;
    if (x->grad) {
        rmsnorm_bwd_dx_kernel<<<rmsnorm_row_blocks(N), CUDA_THREADS>>>(
            cuda_grad(x), dy, cuda_f32(x), cuda_f32(w), rstd, N, C, gemma);
        CUDA_LAUNCH_CHECK("rmsnorm backward dx");
    }
    if (w->grad) {
        int chunks = (int)(N < 256 ? N : 256);
        int64_t rows_per_chunk = (N + chunks - 1) / chunks;
        chunks = (int)((N + rows_per_chunk - 1) / rows_per_chunk);
        double *part = (double *)mt_node_scratch(n, sizeof(double) * (size_t)chunks * (size_t)C,
                                                 "rmsnorm dw partial sums");
        dim3 grid((unsigned)((C + CUDA_THREADS - 1) / CUDA_THREADS), (unsigned)chunks);
        rmsnorm_bwd_dw_partial_kernel<<<grid, CUDA_THREADS>>>(part, dy, cuda_f32(x), rstd, N, C,
                                                              rows_per_chunk);
        CUDA_LAUNCH_CHECK("rmsnorm backward dw (partial)");
        rmsnorm_bwd_dw_reduce_kernel<<<cuda_blocks(C, CUDA_THREADS), CUDA_THREADS>>>(
            cuda_grad(w), part, chunks, C);
        CUDA_LAUNCH_CHECK("rmsnorm backward dw (reduce)");
    }
}
