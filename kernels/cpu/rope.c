/* rope.c: partial NeoX rotary embedding (spec section 5.1) on the CPU, forward and backward.
 * Each head's first rotary_dim dims are rotated as rotate_half pairs (j, j + rotary_dim/2):
 *   y1 = x1 cos - x2 sin,  y2 = x2 cos + x1 sin,  j < rotary_dim/2,
 * the rest pass through. Angles are rounded like HF's fp32 RotaryEmbedding (see attention.h) so
 * long positions carry the same fp32 angle error as the reference the model is checked against. */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "cpu_ops.h"

void cpu_rope_inv_freq(float *inv_freq, int64_t rotary_dim, float theta) {
    for (int64_t i = 0; i < rotary_dim / 2; i++) {
        /* HF: 1.0 / (base ** (arange(0, rd, 2).float() / rd)), every step in fp32 */
        float e = (float)(2 * i) / (float)rotary_dim;
        float p = (float)pow((double)theta, (double)e);
        inv_freq[i] = 1.0f / p;
    }
}

static void rope_check(int64_t H, int64_t D, int64_t rotary_dim, float theta) {
    MT_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= D &&
                 rotary_dim <= CPU_ROPE_MAX_ROTARY,
             "rope: rotary_dim %lld must be even, in (0, D=%lld] and <= %d", (long long)rotary_dim,
             (long long)D, CPU_ROPE_MAX_ROTARY);
    MT_CHECK(theta > 0 && H > 0, "rope: theta %g, H %lld", (double)theta, (long long)H);
}

/* cos/sin of one row's angles: fp32 angle (HF's fp32 product), cos/sin via double, rounded. */
static void rope_cos_sin(float *c, float *s, const float *inv_freq, int32_t pos, int64_t half) {
    for (int64_t i = 0; i < half; i++) {
        float angle = (float)pos * inv_freq[i];
        c[i] = (float)cos((double)angle);
        s[i] = (float)sin((double)angle);
    }
}

void cpu_rope_fwd(float *y, const float *x, const int32_t *pos, int64_t N, int64_t H, int64_t D,
                  int64_t rotary_dim, float theta) {
    rope_check(H, D, rotary_dim, theta);
    int64_t half = rotary_dim / 2;
    float inv_freq[CPU_ROPE_MAX_ROTARY / 2];
    cpu_rope_inv_freq(inv_freq, rotary_dim, theta);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        float c[CPU_ROPE_MAX_ROTARY / 2], s[CPU_ROPE_MAX_ROTARY / 2];
        rope_cos_sin(c, s, inv_freq, pos[n], half);
        for (int64_t h = 0; h < H; h++) {
            const float *xh = x + (n * H + h) * D;
            float *yh = y + (n * H + h) * D;
            for (int64_t j = 0; j < half; j++) {
                float x1 = xh[j], x2 = xh[j + half]; /* both read first: y may alias x */
                /* HF order: (x * cos) + (rotate_half(x) * sin), each product rounded in fp32 */
                yh[j] = x1 * c[j] - x2 * s[j];
                yh[j + half] = x2 * c[j] + x1 * s[j];
            }
            if (yh != xh)
                memcpy(yh + rotary_dim, xh + rotary_dim, sizeof(float) * (size_t)(D - rotary_dim));
        }
    }
}

void cpu_rope_bwd(float *dx, const float *dy, const int32_t *pos, int64_t N, int64_t H, int64_t D,
                  int64_t rotary_dim, float theta) {
    rope_check(H, D, rotary_dim, theta);
    int64_t half = rotary_dim / 2;
    float inv_freq[CPU_ROPE_MAX_ROTARY / 2];
    cpu_rope_inv_freq(inv_freq, rotary_dim, theta);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        float c[CPU_ROPE_MAX_ROTARY / 2], s[CPU_ROPE_MAX_ROTARY / 2];
        rope_cos_sin(c, s, inv_freq, pos[n], half);
        for (int64_t h = 0; h < H; h++) {
            const float *dyh = dy + (n * H + h) * D;
            float *dxh = dx + (n * H + h) * D;
            /* transpose of [[c, -s], [s, c]] */
            for (int64_t j = 0; j < half; j++) {
                float g1 = dyh[j], g2 = dyh[j + half];
                dxh[j] += g1 * c[j] + g2 * s[j];
                dxh[j + half] += g2 * c[j] - g1 * s[j];
            }
            for (int64_t j = rotary_dim; j < D; j++) dxh[j] += dyh[j];
        }
    }
}

/* ---- node adapters: in[0] x (B,T,H,D), in[1] pos (B,T) I32; ip[0] rotary_dim, fp[0] theta ---- */

void cpu_rope_fwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0];
    cpu_rope_fwd(n->out->data, x->data, n->in[1]->data, x->shape[0] * x->shape[1], x->shape[2],
                 x->shape[3], n->ip[0], n->fp[0]);
}

void cpu_rope_bwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0];
    if (!x->grad) return;
    cpu_rope_bwd(x->grad, n->out->grad, n->in[1]->data, x->shape[0] * x->shape[1], x->shape[2],
                 x->shape[3], n->ip[0], n->fp[0]);
}
