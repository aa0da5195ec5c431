/* optim.c: the sharded optimizer's vector kernels on host fp32 buffers (train/zero.c calls them
 * through the backend table): gradient accumulation, norm and finiteness in one pass, clipping,
 * PyTorch's fp32 AdamW, and the bf16 casts of the bf16 parameter gathers. Loops vectorise and
 * split over OpenMP threads. */
#include <math.h>

#include "bf16.h"
#include "cpu_ops.h"

void cpu_vec_add(float *dst, const float *src, int64_t n) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

void cpu_vec_stats(const float *x, int64_t n, double *sumsq, int64_t *nonfinite) {
    double ss = 0;
    int64_t bad = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : ss, bad)
    for (int64_t i = 0; i < n; i++) {
        ss += (double)x[i] * x[i];
        bad += !isfinite(x[i]);
    }
    *sumsq = ss;
    *nonfinite = bad;
}

/* torch.optim.adamw's single-tensor fp32 path, element by element, on the gradient times gscale
 * (clip_grad_norm_'s in-place scaling, one rounding, folded into this pass); the new p also
 * stored at p_copy when set (else stored twice in p). */
void cpu_adamw(float *p, float *m, float *v, const float *g, int64_t n, const mt_adamw_args *a) {
    const float keep = a->keep, b1 = a->b1, b2 = a->b2, step_size = a->step_size,
                bc2_sqrt = a->bc2_sqrt, eps = a->eps, gs = a->gscale != 0.0f ? a->gscale : 1.0f;
    float *q = a->p_copy ? a->p_copy : p;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float gi = g[i] * gs;
        float pi = p[i] * keep;
        m[i] += (gi - m[i]) * (1.0f - b1);
        v[i] = v[i] * b2 + (1.0f - b2) * gi * gi;
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        pi -= step_size * m[i] / denom;
        p[i] = pi;
        q[i] = pi;
    }
}

void cpu_vec_to_bf16(uint16_t *dst, const float *src, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] = mt_bf16_bits(src[i]);
}

void cpu_vec_from_bf16(float *dst, const uint16_t *src, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] = mt_bf16_to_f32(src[i]);
}
