/* bf16.h: fp32 -> bf16 rounding for the bf16 GEMM mode (mt_ctx.compute_dtype = MT_BF16).
 * bf16 is the upper half of an fp32 (sign, 8 exponent bits, 7 mantissa bits), so rounding is an
 * integer operation on the fp32 bits: add 0x7fff plus the lowest kept bit, then drop the low 16
 * bits. That is round to nearest, ties to even; a carry out of the mantissa moves into the
 * exponent, which is exactly the next binade (and infinity above the largest bf16). NaN is
 * handled first: the addition could otherwise carry a NaN's payload into infinity. */
#pragma once
#include <stdint.h>
#include <string.h>

/* The bf16 bits of x, rounded to nearest even; a NaN stays a (quiet) NaN with x's sign. */
static inline uint16_t mt_bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float mt_bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

/* x rounded through bf16, kept as an fp32 value. */
static inline float mt_bf16_round(float x) { return mt_bf16_to_f32(mt_bf16_bits(x)); }

/* dst[i] = bf16(src[i]) as fp32, i < n; dst == src rounds in place. */
static inline void mt_bf16_round_n(float *dst, const float *src, int64_t n) {
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; i++) dst[i] = mt_bf16_round(src[i]);
}
