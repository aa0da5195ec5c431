/* cpu_math.h: exp and the sigmoid for the CPU kernels' elementwise loops, written so that the
 * loops vectorise: libm's expf is a call per element (it was 28% of the fp32 attention kernels'
 * time at D = 32, and SiLU, SwiGLU and the sigmoids spent most of theirs in it). Their selects
 * (the clamps, the sign test) become blends only under -fno-trapping-math (CMakeLists.txt): on
 * an AVX2 machine GCC otherwise kept every such loop scalar, 8x slower (AVX-512 masks hid it).
 * tests/kernels/op_cpu_math.c checks both against double libm. */
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__FMA__)
#include <immintrin.h>
#endif

/* c += a b on 8-float vectors (GCC vector types of 32 bytes), one rounding where the machine
 * has FMA: ISO C mode (-std=c11) leaves GCC's contraction of a * b + c off, and the register
 * tiles of products (gemm_small.c, msa_attention.c) ran at half their rate with a separate
 * multiply and add. A macro, so that no vector crosses a call (-Wpsabi). */
#if defined(__FMA__)
#define CPU_FMA8(c, a, b)                                                                          \
    ((c) = (__typeof__(c))_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#else
#define CPU_FMA8(c, a, b) ((c) += (a) * (b))
#endif

/* exp(x) in fp32. x = n ln2 + r with n = round(x / ln2) (the 1.5 * 2^23 trick, exact for
 * |n| < 2^22), |r| <= ln2 / 2, ln2 split in two so n ln2 is exact; e^r by its Taylor series to
 * r^7 (truncation < 5e-9 relative, below fp32's 6e-8), 2^n from the exponent bits. Within 1.3
 * ulp of exp over [-87, 1]; below -87 (e^x < 1.7e-38) it returns 0, exp(-inf) = 0, NaN stays
 * NaN. Meant for x <= ~0 (softmax terms, exp(-|x|)): above 1 it is not checked. */
static inline float cpu_expf(float x) {
    const float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float t = xc * 1.44269504f + 12582912.0f;
    const float n = t - 12582912.0f;
    int32_t ti;
    memcpy(&ti, &t, sizeof ti);
    const float r = (xc - n * 0.693145751953125f) - n * 1.42860677e-6f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n, n in [-126, 127]; unsigned, so a NaN's garbage exponent is no overflow */
    const uint32_t bits = (uint32_t)(ti - 0x4B400000 + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.0f ? 0.0f : p * scale;
}

/* exp(x) in double, the same way: n = round(x / ln2) (the 1.5 * 2^52 trick), r = x - n ln2
 * with ln2 in two parts (the first's 32 bits make n ln2 exact for |n| < 2^21), |r| <= ln2 / 2,
 * e^r by its Taylor series to r^13 (truncation < 5e-18 relative), 2^n from the exponent bits.
 * Within 1 ulp of libm's exp over [-708, 1] (op_cpu_exp); below -708 (e^x < 3.3e-308) it
 * returns 0, exp(-inf) = 0, NaN stays NaN. For the KL's softmaxes in double (msa_kl.c), whose
 * libm calls were a third of its time. */
static inline double cpu_exp(double x) {
    const double xc = x < -708.0 ? -708.0 : (x > 709.0 ? 709.0 : x);
    const double t = xc * 1.4426950408889634 + 6755399441055744.0;
    const double n = t - 6755399441055744.0;
    int64_t ti;
    memcpy(&ti, &t, sizeof ti);
    const double r = (xc - n * 0.6931471803691238) - n * 1.9082149292705877e-10;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* 2^n, n in [-1022, 1023]: n is the low bits of t less those of 1.5 * 2^52 */
    const uint64_t bits = (uint64_t)(ti - 0x4338000000000000LL + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -708.0 ? 0.0 : p * scale;
}

/* 1 / (1 + e^-x) from e = exp(-|x|) <= 1, so nothing overflows for either sign: within 2.5 ulp
 * for x >= -87 (op_cpu_sigmoid), below it 0 (the true value is under 1.65e-38). */
static inline float cpu_sigmoidf(float x) {
    const float e = cpu_expf(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

/* The clamped SwiGLU (mt_act, spec 7): g' sigmoid(alpha g') (u' + beta). The clamps are
 * comparisons, not fminf/fmaxf, so that a NaN propagates as through torch.clamp. */
static inline float cpu_swiglu_oai(float g, float u, float alpha, float limit, float beta) {
    const float gc = g > limit ? limit : g;
    const float uc = u > limit ? limit : u < -limit ? -limit : u;
    return gc * cpu_sigmoidf(alpha * gc) * (uc + beta);
}

/* Its partial derivatives: dy/dg = (u' + beta) s (1 + alpha g' (1 - s)) where g <= limit,
 * dy/du = g' s where -limit <= u <= limit, else 0 (s = sigmoid(alpha g'); the gradient passes
 * at equality, as torch.clamp's). */
static inline void cpu_swiglu_oai_grad(float g, float u, float alpha, float limit, float beta,
                                       float *dg, float *du) {
    const float gc = g > limit ? limit : g;
    const float uc = u > limit ? limit : u < -limit ? -limit : u;
    const float s = cpu_sigmoidf(alpha * gc);
    *dg = g <= limit ? (uc + beta) * s * (1.0f + alpha * gc * (1.0f - s)) : 0.0f;
    *du = (u >= -limit && u <= limit) ? gc * s : 0.0f;
}
