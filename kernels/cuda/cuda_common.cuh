/* cuda_common.cuh: what every CUDA kernel file shares: the C headers (inside extern "C"),
 * error checks that name the op, launch geometry, warp/block reductions in double, the
 * device-side argument-error flag, the row-major GEMM helper and the phase profiler.
 *
 * Status: these kernels compile for sm_80 and sm_90 and match the CPU reference on an H200
 * (tests/gpu/gpu_ops.c, launch/gpu-check.sh; docs/cuda.md, "Measured on an H200").
 *
 * Conventions: one stream (the legacy default stream), so kernels, cuBLAS calls and the
 * backend's memcpys are ordered (the GEMM lanes below fork from it and join it again inside
 * one op; the NCCL communicator has its own stream); fp32 storage; sums over a row or a sequence
 * are accumulated in double where the CPU reference does so, which keeps fp32 parity at 1e-5 (speed
 * comes later, with bf16 and tensor cores). Backwards ACCUMULATE into input gradients, exactly like
 * the CPU adapters, and read the same node fields (ip/fp/saved) with the same meaning. */
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "../../autograd/ops.h"
}

/* ---- errors ---- */

/* Dies with file:line, the op, the failing call and the runtime's error string. */
#define cudaCheck(op, call)                                                                        \
    do {                                                                                           \
        cudaError_t cuda_err_ = (call);                                                            \
        if (cuda_err_ != cudaSuccess)                                                              \
            MT_DIE("cuda %s: %s failed: %s (%s)", (op), #call, cudaGetErrorString(cuda_err_),      \
                   cudaGetErrorName(cuda_err_));                                                   \
    } while (0)

#define cublasCheck(op, call)                                                                      \
    do {                                                                                           \
        cublasStatus_t blas_err_ = (call);                                                         \
        if (blas_err_ != CUBLAS_STATUS_SUCCESS)                                                    \
            MT_DIE("cuda %s: %s failed: %s (%d)", (op), #call, cublasGetStatusString(blas_err_),   \
                   (int)blas_err_);                                                                \
    } while (0)

/* After every launch: the launch error, and with MT_CUDA_SYNC=1 in the environment also the
 * kernel's execution error (a synchronisation per launch, for debugging and the GPU tests). */
void cuda_launch_check(const char *op, const char *file, int line);
#define CUDA_LAUNCH_CHECK(op) cuda_launch_check((op), __FILE__, __LINE__)

/* ---- state owned by backend_cuda.cu, valid once mt_cuda_backend_probe returned non-NULL ---- */

extern cublasHandle_t cuda_blas;
/* One device word for argument errors found inside kernels (an id out of range, a non-finite
 * router row): kernels atomicMin the offending position into it; see cuda_flag_*. */
extern unsigned long long *cuda_err_flag;

/* Sets the flag to "no error" (asynchronously, in stream order). */
void cuda_flag_reset(const char *op);
/* Waits for the stream and returns the smallest flagged position, or -1. */
int64_t cuda_flag_read(const char *op);

__device__ inline void cuda_flag_raise(unsigned long long *flag, int64_t pos) {
    atomicMin(flag, (unsigned long long)pos);
}

/* ---- launch geometry ---- */

#define CUDA_THREADS 256
/* Blocks for a grid-stride loop over n items (n > 0). */
static inline unsigned cuda_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < (1 << 20) ? b : (1 << 20));
}
#define CUDA_FOR(i, n)                                                                             \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* ---- tensor access (device pointers) ---- */

static inline float *cuda_f32(const mt_tensor *t) { return (float *)t->data; }
static inline const int32_t *cuda_i32(const mt_tensor *t) { return (const int32_t *)t->data; }
static inline float *cuda_grad(const mt_tensor *t) { return t ? (float *)t->grad : NULL; }

/* ---- math shared by several ops ---- */

/* Never evaluates exp of a large positive number (the CPU kernels' formula). */
__device__ inline float cuda_sigmoidf(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

__device__ inline double cuda_warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ inline int cuda_warp_min(int v) {
    for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ inline int cuda_warp_max(int v) {
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over a block of CUDA_THREADS threads; every thread gets the result. The tree order is
 * fixed, so the result is deterministic. */
__device__ inline double cuda_block_sum(double v) {
    __shared__ double part[CUDA_THREADS / 32];
    __syncthreads(); /* part may still be read by a previous call */
    v = cuda_warp_sum(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    double s = 0;
    for (int w = 0; w < CUDA_THREADS / 32; w++) s += part[w];
    return s;
}
__device__ inline float cuda_block_max(float v) {
    __shared__ float part[CUDA_THREADS / 32];
    __syncthreads();
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    float m = part[0];
    for (int w = 1; w < CUDA_THREADS / 32; w++) m = fmaxf(m, part[w]);
    return m;
}

/* One cached key of generation's attention decode step (attention.cu, msa_attention.cu), for a
 * block of ceil(D / 32) warps whose thread d holds qd = q[d]: the score scale * (q . k) a
 * block-wide double sum (warp shuffles, then the warps in order) folded into the online softmax
 * (m, l, acc) in double, as the CPU's attention row; thread d accumulates v[d]. k, v: D floats. */
__device__ inline void cuda_decode_attend(const float *k, const float *v, double qd, int D,
                                          double scale, double *m, double *l, double *acc) {
    __shared__ double part[32];
    const int d = threadIdx.x, n_warps = (blockDim.x + 31) / 32;
    const double p = cuda_warp_sum(d < D ? qd * (double)k[d] : 0.0);
    if ((d & 31) == 0) part[d >> 5] = p;
    __syncthreads();
    double dot = 0;
    for (int w = 0; w < n_warps; w++) dot += part[w];
    __syncthreads(); /* part is rewritten by the next key */
    const double x = scale * dot;
    if (x > *m) {
        const double r = exp(*m - x); /* 0 on the first key (m = -inf) */
        *l *= r;
        *acc *= r;
        *m = x;
    }
    const double e = exp(x - *m);
    *l += e;
    if (d < D) *acc += e * (double)v[d];
}

/* log sum exp(z[v] - mx) over a row of V logits, in double, with mx = max z; one block per
 * row, every thread gets both. The cross-entropy kernels' row reduction: lse = mx + result. */
__device__ inline double cuda_block_row_logsumexp(const float *z, int64_t V, float *mx_out) {
    float mx = -INFINITY;
    for (int64_t v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, z[v]);
    mx = cuda_block_max(mx);
    double sum = 0.0;
    for (int64_t v = threadIdx.x; v < V; v += blockDim.x) sum += exp((double)z[v] - mx);
    *mx_out = mx;
    return log(cuda_block_sum(sum));
}

/* ---- GEMM ---- */

/* Row-major C (m,n) = alpha op(A) op(B) + beta C through cuBLAS in fp32 (CUBLAS_COMPUTE_32F:
 * no TF32), where op(A) is (m,k) and op(B) is (k,n); lda, ldb, ldc are the row lengths of the
 * matrices as stored. A row-major matrix is its transpose in column-major, so this computes
 * C^T = op(B)^T op(A)^T with the operands swapped. m, n or k = 0 is handled (k = 0 scales C). */
void cuda_sgemm_rm(const char *op, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* The same with bf16 A and B (CUDA_R_16BF), fp32 C and fp32 accumulation (CUBLAS_COMPUTE_32F):
 * the tensor-core GEMM of the bf16 mode (mt_ctx.compute_dtype). */
void cuda_gemm_bf16_rm(const char *op, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                       const __nv_bfloat16 *A, int lda, const __nv_bfloat16 *B, int ldb, float beta,
                       float *C, int ldc);

/* Two GEMMs of one shape, C_i = alpha op(A_i) op(B_i) + beta C_i (i = 0, 1; row-major as
 * above, fp32 operands or bf16 ones when bf16), as one strided-batched cuBLAS call when the
 * pointer differences A_1 - A_0, B_1 - B_0 are >= 0 (a shared operand has 0) and C_1 lies past
 * the end of C_0 (disjoint outputs: a GPU writes the two batches concurrently), else as two
 * calls in order, C_0 first: the pair fills twice the tiles of one call (an expert's GEMMs of
 * a few hundred rows occupy part of the GPU alone). Each C_i is the single call's result. */
void cuda_gemm_rm_pair(const char *op, bool bf16, bool trans_a, bool trans_b, int m, int n, int k,
                       float alpha, const void *A0, const void *A1, int lda, const void *B0,
                       const void *B1, int ldb, float beta, float *C0, float *C1, int ldc);

/* ---- GEMM lanes: one phase's independent GEMMs on concurrent streams (backend_cuda.cu) ---- */

/* An expert's GEMM of a few hundred rows fills part of the GPU, and the experts' GEMMs of one
 * kind are independent (disjoint outputs): on lanes they run concurrently. A fork makes every
 * lane (a created stream with its own cuBLAS handle) wait for the default stream's work so far;
 * the join makes the default stream wait for every lane. Between the two only lane GEMMs may be
 * issued, and two GEMMs that write the same output must share a lane (a lane runs in order).
 * The number of lanes is MT_CUDA_GEMM_LANES (default CUDA_LANES_DEFAULT; 1 runs every GEMM on
 * the default stream, as before lanes existed), read at the first fork. */
#define CUDA_LANES_DEFAULT 4
#define CUDA_LANES_MAX     16
/* Opens a fork; returns the number of lanes L (lanes 0 .. L-1), at least 1. */
int cuda_lanes_fork(const char *op);
void cuda_lanes_join(const char *op);
/* Sets the lanes of later forks (1 .. CUDA_LANES_MAX) over MT_CUDA_GEMM_LANES; 0 goes back to
 * the variable (benchmarks). */
void cuda_lanes_set(int lanes);
/* cuda_gemm_rm_pair's product(s) on a lane of the open fork: C0 only when A1 is NULL (B1 and
 * C1 ignored then); m, n, k > 0. */
void cuda_gemm_rm_lane(int lane, const char *op, bool bf16, bool trans_a, bool trans_b, int m,
                       int n, int k, float alpha, const void *A0, const void *A1, int lda,
                       const void *B0, const void *B1, int ldb, float beta, float *C0, float *C1,
                       int ldc);

/* ---- bf16 casts (cast.cu) ---- */

/* dst[i] = bf16(src[i]), round to nearest even (__float2bfloat16_rn), i < count. */
void cuda_cast_bf16(const char *op, __nv_bfloat16 *dst, const float *src, int64_t count);
/* src (count floats) as bf16, a GEMM operand in bf16 mode, read only: a copy in scratch carved
 * for node n, or, inside a gather slot expanded from bf16, the slot's bf16 values themselves. */
const __nv_bfloat16 *cuda_bf16_operand(const mt_node *n, const float *src, int64_t count,
                                       const char *what);
/* mt_backend.bf16_shadow: operands inside [base, base + n) are taken from shadow (cast.cu). */
void cuda_bf16_shadow(int slot, const float *base, const uint16_t *shadow, int64_t n);

/* ---- phase profiler (bench/gpu_ops.cu): event pairs around regions, off by default ---- */

enum { CUDA_PROF_ROUTE, CUDA_PROF_GEMM, CUDA_PROF_COMBINE, CUDA_PROF_ACT, CUDA_PROF_SLOTS };
void cuda_prof_enable(bool on);
void cuda_prof_begin(int slot);
void cuda_prof_end(int slot);
/* Synchronises, adds each slot's milliseconds since the last read into ms[CUDA_PROF_SLOTS]. */
void cuda_prof_read(double *ms);
