/* moe_common.cu: the kernels the MoE expert ops share (see moe_common.cuh), mirroring the CPU
 * helpers of kernels/cpu/moe_dispatch.c, moe_combine.c and moe_expert_ffn.c. */
#include <string.h>

#include "moe_common.cuh"
#include "sort.cuh"

/* ---- the permutation: one pass of the block-parallel stable counting sort (sort.cuh) ---- */

const int32_t *cuda_moe_perm_build(const mt_node *n, int64_t N, int K, int E, const char *op) {
    MT_CHECK(E >= 1 && E <= CUDA_SORT_MAX_BUCKETS,
             "%s: %d experts; the device's expert sort takes 1 to %d", op, E,
             CUDA_SORT_MAX_BUCKETS);
    int bits = 0;
    while ((1 << bits) < E) bits++;
    const int64_t A = N * K, nchunks = cuda_sort_chunks(A);
    int32_t *counts =
        (int32_t *)mt_node_scratch(n, sizeof(int32_t) * (size_t)(nchunks * E), "moe counts");
    int32_t *totals = (int32_t *)mt_node_scratch(n, sizeof(int32_t) * (size_t)E, "moe sizes");
    const size_t vbytes = sizeof(unsigned long long) + sizeof(int32_t) * (size_t)(E + 1);
    unsigned long long *view = (unsigned long long *)mt_node_scratch(n, vbytes, "moe offsets view");
    unsigned long long *hview =
        (unsigned long long *)mt_arena_alloc(&n->ctx->host, vbytes, "moe host offsets");
    int32_t *offsets = (int32_t *)n->saved[0]->data, *perm = (int32_t *)n->saved[1]->data;
    int32_t *inv = (int32_t *)n->saved[2]->data;
    const int32_t *idx = cuda_i32(n->in[1]);
    cuda_flag_reset(op);
    /* an id outside [0,E) is flagged and left out, so nothing is indexed by it */
    cuda_sort_pass(op, perm, inv, NULL, idx, NULL, A, 0, bits, E, counts, totals, offsets,
                   cuda_err_flag, view);
    cudaCheck(op, cudaMemcpy(hview, view, vbytes, cudaMemcpyDeviceToHost));
    if (hview[0] != ~0ull) {
        const int64_t bad = (int64_t)hview[0];
        int32_t e = 0;
        cudaCheck(op, cudaMemcpy(&e, idx + bad, sizeof(e), cudaMemcpyDeviceToHost));
        MT_DIE("%s: idx[%lld,%lld] = %d is outside [0,%d)", op, (long long)(bad / K),
               (long long)(bad % K), (int)e, E);
    }
    MT_CHECK(n->host, "%s: the node has no host offsets (op_moe.c allocates them)", op);
    memcpy(n->host, hview + 1, sizeof(int32_t) * (size_t)(E + 1));
    return (const int32_t *)n->host;
}

/* ---- rows between token order and slot order ---- */

__global__ void moe_gather_kernel(float *xp, const float *x, const int32_t *perm, int64_t rows,
                                  int K, int64_t C) {
    CUDA_FOR(i, rows * C) {
        int64_t s = i / C, c = i % C;
        xp[i] = x[(int64_t)(perm[s] / K) * C + c];
    }
}

void cuda_moe_gather(float *xp, const float *x, const int32_t *perm, int64_t rows, int K, int64_t C,
                     const char *op) {
    if (rows * C == 0) return;
    moe_gather_kernel<<<cuda_blocks(rows * C, CUDA_THREADS), CUDA_THREADS>>>(xp, x, perm, rows, K,
                                                                             C);
    CUDA_LAUNCH_CHECK(op);
}

__global__ void moe_combine_kernel(float *out, const float *yp, const int32_t *inv,
                                   const float *weight, int64_t N, int K, int64_t C,
                                   bool accumulate) {
    CUDA_FOR(i, N * C) {
        int64_t n = i / C, c = i % C;
        float acc = accumulate ? out[i] : 0.0f;
        for (int j = 0; j < K; j++) {
            float wj = weight ? weight[n * K + j] : 1.0f;
            acc += wj * yp[(int64_t)inv[n * K + j] * C + c];
        }
        out[i] = acc;
    }
}

void cuda_moe_combine_rows(float *out, const float *yp, const int32_t *inv, const float *weight,
                           int64_t N, int K, int64_t C, bool accumulate, const char *op) {
    if (N * C == 0) return;
    moe_combine_kernel<<<cuda_blocks(N * C, CUDA_THREADS), CUDA_THREADS>>>(out, yp, inv, weight, N,
                                                                           K, C, accumulate);
    CUDA_LAUNCH_CHECK(op);
}

/* ---- the SwiGLU's elementwise steps ---- */

/* The CPU's sigmoid form for the experts (kernels/cpu/moe_expert_ffn.c). */
__device__ inline float moe_sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

/* The clamped SwiGLU (mt_act, spec 7) and its partial derivatives, the CPU's expressions
 * (kernels/cpu/cpu_math.h) with the experts' sigmoid form; comparisons, so NaN passes. */
__device__ inline float moe_oai(float g, float u, const mt_act &a) {
    const float gc = g > a.limit ? a.limit : g;
    const float uc = u > a.limit ? a.limit : u < -a.limit ? -a.limit : u;
    return gc * moe_sigmoid(a.alpha * gc) * (uc + a.beta);
}

__device__ inline void moe_oai_grad(float g, float u, const mt_act &a, float *dg, float *du) {
    const float gc = g > a.limit ? a.limit : g;
    const float uc = u > a.limit ? a.limit : u < -a.limit ? -a.limit : u;
    const float s = moe_sigmoid(a.alpha * gc);
    *dg = g <= a.limit ? (uc + a.beta) * s * (1.0f + a.alpha * gc * (1.0f - s)) : 0.0f;
    *du = (u >= -a.limit && u <= a.limit) ? gc * s : 0.0f;
}

__global__ void moe_act_kernel(float *g, __nv_bfloat16 *gb, const float *h1, const float *h3,
                               int64_t count, mt_act act) {
    CUDA_FOR(i, count) {
        const float v = act.clamp ? moe_oai(h1[i], h3[i], act) : h1[i] * moe_sigmoid(h1[i]) * h3[i];
        if (gb)
            gb[i] = __float2bfloat16_rn(v);
        else
            g[i] = v;
    }
}

void cuda_moe_act(float *g, __nv_bfloat16 *gb, const float *h1, const float *h3, int64_t count,
                  mt_act act, const char *op) {
    if (count == 0) return;
    moe_act_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(g, gb, h1, h3, count, act);
    CUDA_LAUNCH_CHECK(op);
}

/* one warp per slot s */
__global__ void moe_dweight_kernel(float *dweight, const float *u, const float *g,
                                   const int32_t *perm, int64_t rows, int64_t F) {
    int64_t s = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (s >= rows) return;
    double acc = 0;
    for (int64_t f = lane; f < F; f += 32) acc += (double)u[s * F + f] * g[s * F + f];
    acc = cuda_warp_sum(acc);
    if (lane == 0) dweight[perm[s]] += (float)acc;
}

void cuda_moe_dweight(float *dweight, const float *u, const float *g, const int32_t *perm,
                      int64_t rows, int64_t F, const char *op) {
    if (rows == 0) return;
    moe_dweight_kernel<<<(unsigned)((rows + 7) / 8), 256>>>(dweight, u, g, perm, rows, F);
    CUDA_LAUNCH_CHECK(op);
}

__global__ void moe_scale_rows_kernel(float *g, __nv_bfloat16 *gb, const float *weight,
                                      const int32_t *perm, int64_t rows, int64_t F) {
    CUDA_FOR(i, rows * F) {
        const float v = g[i] * weight[perm[i / F]];
        if (gb)
            gb[i] = __float2bfloat16_rn(v);
        else
            g[i] = v;
    }
}

void cuda_moe_scale_rows(float *g, __nv_bfloat16 *gb, const float *weight, const int32_t *perm,
                         int64_t rows, int64_t F, const char *op) {
    if (rows * F == 0) return;
    moe_scale_rows_kernel<<<cuda_blocks(rows * F, CUDA_THREADS), CUDA_THREADS>>>(g, gb, weight,
                                                                                 perm, rows, F);
    CUDA_LAUNCH_CHECK(op);
}

__global__ void moe_dh_kernel(float *u, float *dh3, __nv_bfloat16 *dh1b, __nv_bfloat16 *dh3b,
                              const float *h1, const float *h3, const float *weight,
                              const int32_t *perm, int64_t rows, int64_t F, mt_act act) {
    CUDA_FOR(i, rows * F) {
        float ws = weight[perm[i / F]];
        float d1, d3;
        if (act.clamp) {
            float a1, a3;
            moe_oai_grad(h1[i], h3[i], act, &a1, &a3);
            d3 = ws * u[i] * a3;
            d1 = ws * u[i] * a1;
        } else {
            float z = h1[i], sg = moe_sigmoid(z), dg = ws * u[i];
            d3 = dg * z * sg;
            d1 = dg * h3[i] * sg * (1.0f + z * (1.0f - sg));
        }
        if (dh1b) {
            dh3b[i] = __float2bfloat16_rn(d3);
            dh1b[i] = __float2bfloat16_rn(d1);
        } else {
            dh3[i] = d3;
            u[i] = d1;
        }
    }
}

void cuda_moe_dh(float *u, float *dh3, __nv_bfloat16 *dh1b, __nv_bfloat16 *dh3b, const float *h1,
                 const float *h3, const float *weight, const int32_t *perm, int64_t rows, int64_t F,
                 mt_act act, const char *op) {
    if (rows * F == 0) return;
    moe_dh_kernel<<<cuda_blocks(rows * F, CUDA_THREADS), CUDA_THREADS>>>(
        u, dh3, dh1b, dh3b, h1, h3, weight, perm, rows, F, act);
    CUDA_LAUNCH_CHECK(op);
}

/* ---- operands and scratch ---- */

const void *cuda_moe_operand(const mt_node *n, const float *src, int64_t count, const char *what) {
    if (n->ip[0] != MT_BF16) return src;
    return cuda_bf16_operand(n, src, count, what);
}

__nv_bfloat16 *cuda_moe_bf16_scratch(const mt_node *n, int64_t count, const char *what) {
    return (__nv_bfloat16 *)mt_node_scratch(
        n, sizeof(__nv_bfloat16) * (size_t)(count > 0 ? count : 1), what);
}

float *cuda_moe_f32_scratch(const mt_node *n, int64_t count, const char *what) {
    return (float *)mt_node_scratch(n, sizeof(float) * (size_t)(count > 0 ? count : 1), what);
}
