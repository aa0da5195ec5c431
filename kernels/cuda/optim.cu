/* optim.cu: the sharded optimizer's vector kernels on device fp32 shards (train/zero.c calls
 * them through the backend table; kernels/cpu/optim.c is the reference): gradient accumulation,
 * norm and finiteness in one pass, clipping, PyTorch's fp32 AdamW, and the bf16 casts of the
 * bf16 parameter gathers. */
#include "cuda_ops.cuh"

__global__ void vec_add_kernel(float *dst, const float *src, int64_t n) {
    CUDA_FOR(i, n) dst[i] += src[i];
}

/* Pass 1: block b sums squares (double) and counts non-finite values over its grid-stride
 * share; pass 2: one block adds the partials in block order, so the result is deterministic. */
__global__ void vec_stats_part_kernel(double *part, const float *x, int64_t n) {
    double ss = 0, bad = 0;
    CUDA_FOR(i, n) {
        float v = x[i];
        ss += (double)v * v;
        bad += isfinite(v) ? 0.0 : 1.0;
    }
    ss = cuda_block_sum(ss);
    bad = cuda_block_sum(bad);
    if (threadIdx.x == 0) {
        part[2 * blockIdx.x] = ss;
        part[2 * blockIdx.x + 1] = bad;
    }
}

__global__ void vec_stats_total_kernel(double *part, int n_part) {
    double ss = 0, bad = 0;
    for (int b = threadIdx.x; b < n_part; b += blockDim.x) {
        ss += part[2 * b];
        bad += part[2 * b + 1];
    }
    ss = cuda_block_sum(ss);
    bad = cuda_block_sum(bad);
    if (threadIdx.x == 0) {
        part[0] = ss;
        part[1] = bad;
    }
}

/* torch.optim.adamw's fp32 arithmetic on the gradient times gscale, as kernels/cpu/optim.c;
 * __fmul_rn keeps that product rounded on its own (no fused multiply-add into gi - mi). */
__global__ void adamw_kernel(float *p, float *m, float *v, const float *g, int64_t n,
                             mt_adamw_args a) {
    const float gs = a.gscale != 0.0f ? a.gscale : 1.0f;
    CUDA_FOR(i, n) {
        float gi = __fmul_rn(g[i], gs), mi = m[i], vi = v[i];
        float pi = p[i] * a.keep;
        mi += (gi - mi) * (1.0f - a.b1);
        vi = vi * a.b2 + (1.0f - a.b2) * gi * gi;
        float denom = sqrtf(vi) / a.bc2_sqrt + a.eps;
        p[i] = pi - a.step_size * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

void cuda_vec_add(float *dst, const float *src, int64_t n) {
    if (n <= 0) return;
    vec_add_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(dst, src, n);
    CUDA_LAUNCH_CHECK("optim vec_add");
}

#define VEC_STATS_BLOCKS 1024
void cuda_vec_stats(const float *x, int64_t n, double *sumsq, int64_t *nonfinite) {
    static double *part = NULL; /* 2 doubles per block, allocated once */
    if (!part)
        cudaCheck("optim vec_stats", cudaMalloc(&part, 2 * VEC_STATS_BLOCKS * sizeof(double)));
    *sumsq = 0;
    *nonfinite = 0;
    if (n <= 0) return;
    unsigned blocks = cuda_blocks(n, CUDA_THREADS);
    if (blocks > VEC_STATS_BLOCKS) blocks = VEC_STATS_BLOCKS;
    vec_stats_part_kernel<<<blocks, CUDA_THREADS>>>(part, x, n);
    CUDA_LAUNCH_CHECK("optim vec_stats");
    vec_stats_total_kernel<<<1, CUDA_THREADS>>>(part, (int)blocks);
    CUDA_LAUNCH_CHECK("optim vec_stats");
    double host[2];
    cudaCheck("optim vec_stats", cudaMemcpy(host, part, sizeof(host), cudaMemcpyDeviceToHost));
    *sumsq = host[0];
    *nonfinite = (int64_t)host[1];
}

void cuda_adamw(float *p, float *m, float *v, const float *g, int64_t n, const mt_adamw_args *a) {
    MT_CHECK(!a->p_copy, "adamw: p_copy is the CPU backend's (node-shared parameters)");
    if (n <= 0) return;
    adamw_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(p, m, v, g, n, *a);
    CUDA_LAUNCH_CHECK("optim adamw");
}

/* __float2bfloat16_rn: nearest even, NaN stays NaN, as the CPU's mt_bf16_bits */
__global__ void vec_to_bf16_kernel(__nv_bfloat16 *dst, const float *src, int64_t n) {
    CUDA_FOR(i, n) dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void vec_from_bf16_kernel(float *dst, const __nv_bfloat16 *src, int64_t n) {
    CUDA_FOR(i, n) dst[i] = __bfloat162float(src[i]);
}

void cuda_vec_to_bf16(uint16_t *dst, const float *src, int64_t n) {
    if (n <= 0) return;
    vec_to_bf16_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>((__nv_bfloat16 *)dst, src,
                                                                       n);
    CUDA_LAUNCH_CHECK("optim vec_to_bf16");
}

void cuda_vec_from_bf16(float *dst, const uint16_t *src, int64_t n) {
    if (n <= 0) return;
    vec_from_bf16_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(
        dst, (const __nv_bfloat16 *)src, n);
    CUDA_LAUNCH_CHECK("optim vec_from_bf16");
}
