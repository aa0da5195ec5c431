/* cast.cu: fp32 -> bf16 casts for the bf16 GEMM mode (mt_ctx.compute_dtype = MT_BF16): the
 * GEMM adapters (matmul.cu, moe_experts.cu) cast each operand into node scratch and hand the
 * copies to cuda_gemm_bf16_rm. __float2bfloat16_rn rounds to nearest even, like the CPU
 * reference's mt_bf16_round (kernels/cpu/bf16.h), so both backends see the same operands. */
#include "cuda_ops.cuh"

__global__ void cast_bf16_kernel(__nv_bfloat16 *dst, const float *src, int64_t count) {
    CUDA_FOR(i, count) dst[i] = __float2bfloat16_rn(src[i]);
}

void cuda_cast_bf16(const char *op, __nv_bfloat16 *dst, const float *src, int64_t count) {
    if (count == 0) return;
    cast_bf16_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(dst, src, count);
    CUDA_LAUNCH_CHECK(op);
}

__nv_bfloat16 *cuda_bf16_operand(const mt_node *n, const float *src, int64_t count,
                                 const char *what) {
    __nv_bfloat16 *dst = (__nv_bfloat16 *)mt_node_scratch(
        n, sizeof(__nv_bfloat16) * (size_t)(count ? count : 1), what);
    cuda_cast_bf16(what, dst, src, count);
    return dst;
}
