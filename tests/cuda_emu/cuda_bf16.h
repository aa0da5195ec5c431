/* cuda_bf16.h (emulator): the part of CUDA's bf16 header that kernels/cuda uses. __nv_bfloat16
 * is the upper 16 bits of an fp32 (sign, 8 exponent bits, 7 mantissa bits), stored in a 16-bit
 * struct as on the device. __float2bfloat16_rn rounds to nearest, ties to even, on the bits (a
 * mantissa carry moves into the exponent: the next binade, or infinity past the largest bf16)
 * and returns the canonical NaN 0x7fff for any NaN, as CUDA's host path does. The project's own
 * CPU rounding (kernels/cpu/bf16.h) is separate code; the tests compare the two paths. */
#pragma once
#include <stdint.h>
#include <string.h>

#include "cuda_runtime.h"

struct __nv_bfloat16 {
    unsigned short __x;
};
static_assert(sizeof(__nv_bfloat16) == 2, "__nv_bfloat16 must be 16 bits");

__host__ __device__ static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.__x = 0x7fffu;
    } else {
        uint32_t lsb = (u >> 16) & 1u;
        r.__x = (unsigned short)((u + 0x7fffu + lsb) >> 16);
    }
    return r;
}

__host__ __device__ static inline float __bfloat162float(__nv_bfloat16 b) {
    uint32_t u = (uint32_t)b.__x << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}
