/* cast.cu: fp32 -> bf16 casts for the bf16 GEMM mode (mt_ctx.compute_dtype = MT_BF16): the
 * GEMM adapters (matmul.cu, moe_experts.cu) cast each operand into node scratch and hand the
 * copies to cuda_gemm_bf16_rm. __float2bfloat16_rn rounds to nearest even, like the CPU
 * reference's mt_bf16_round (kernels/cpu/bf16.h), so both backends see the same operands.
 *
 * With bf16 parameter gathers (dist.gather_dtype) a gathered bucket arrives as bf16 and is
 * widened into its fp32 slot; train/zero.c registers the bf16 values as the slot's shadow, and
 * a weight inside the slot is then taken from there instead of cast again: the same bits (the
 * cast of a widened bf16 is that bf16), without the cast's 6 bytes of traffic per weight
 * element and GEMM, or its scratch. */
#include "cuda_ops.cuh"

__global__ void cast_bf16_kernel(__nv_bfloat16 *dst, const float *src, int64_t count) {
    CUDA_FOR(i, count) dst[i] = __float2bfloat16_rn(src[i]);
}

void cuda_cast_bf16(const char *op, __nv_bfloat16 *dst, const float *src, int64_t count) {
    if (count == 0) return;
    cast_bf16_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(dst, src, count);
    CUDA_LAUNCH_CHECK(op);
}

/* The registered shadows (mt_backend.bf16_shadow): the bf16 values of gather slots. */
static struct {
    const float *base;
    const __nv_bfloat16 *shadow;
    int64_t n;
} cast_shadows[2];

void cuda_bf16_shadow(int slot, const float *base, const uint16_t *shadow, int64_t n) {
    MT_CHECK(slot >= 0 && slot < 2, "bf16_shadow: slot %d (0 or 1)", slot);
    /* MT_BF16_SHADOW=0: always cast (tests compare the two; the values are the same bits) */
    static int enabled = -1;
    if (enabled < 0)
        enabled = !(getenv("MT_BF16_SHADOW") && !strcmp(getenv("MT_BF16_SHADOW"), "0"));
    const bool on = shadow && enabled;
    cast_shadows[slot].base = on ? base : NULL;
    cast_shadows[slot].shadow = on ? (const __nv_bfloat16 *)shadow : NULL;
    cast_shadows[slot].n = on ? n : 0;
}

/* An operand inside a registered slot is its shadow, a view (the weights of a gathered bucket);
 * anything else is cast into node scratch. The returned memory is read only either way. */
const __nv_bfloat16 *cuda_bf16_operand(const mt_node *n, const float *src, int64_t count,
                                       const char *what) {
    for (int s = 0; s < 2; s++) {
        const float *b = cast_shadows[s].base;
        if (b && src >= b && src + count <= b + cast_shadows[s].n)
            return cast_shadows[s].shadow + (src - b);
    }
    __nv_bfloat16 *dst = (__nv_bfloat16 *)mt_node_scratch(
        n, sizeof(__nv_bfloat16) * (size_t)(count ? count : 1), what);
    cuda_cast_bf16(what, dst, src, count);
    return dst;
}
