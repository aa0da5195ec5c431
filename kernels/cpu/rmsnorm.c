/* rmsnorm.c: y = w' * x * rstd with rstd = 1/sqrt(mean(x^2) + eps) per row, w' = w or 1 + w
 * (gemma). Statistics are accumulated in double and rstd is kept in fp32 for the backward. */
#include <math.h>

#include "cpu_ops.h"

/* out, x (N,C); w (C); rstd (N). */
void cpu_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int64_t N, int C,
                         float eps, bool gemma) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *xr = x + n * C;
        double ss = 0.0;
#pragma omp simd reduction(+ : ss) /* in double vector lanes: strict order kept it scalar */
        for (int c = 0; c < C; c++) ss += (double)xr[c] * xr[c];
        float r = (float)(1.0 / sqrt(ss / (C ? C : 1) + (double)eps));
        rstd[n] = r;
        float *yr = out + n * C;
        for (int c = 0; c < C; c++) yr[c] = (gemma ? 1.0f + w[c] : w[c]) * (xr[c] * r);
    }
}

/* With x_hat = x * rstd and g = dy * w':
 *   dx += rstd * (g - x_hat * mean(g * x_hat))     (mean over the row)
 *   dw += sum over rows of dy * x_hat
 * dx or dw may be NULL. dw is reduced per block of columns in double, so the result does not
 * depend on the thread count. */
#define RMSNORM_DW_BLOCK 64
void cpu_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                          const float *rstd, int64_t N, int C, bool gemma) {
    if (dx) {
#pragma omp parallel for schedule(static)
        for (int64_t n = 0; n < N; n++) {
            const float *xr = x + n * C, *dyr = dy + n * C;
            float r = rstd[n];
            double dot = 0.0;
#pragma omp simd reduction(+ : dot)
            for (int c = 0; c < C; c++) {
                double g = (double)dyr[c] * (gemma ? 1.0f + w[c] : w[c]);
                dot += g * ((double)xr[c] * r);
            }
            /* the dot in double (above); each element's update in fp32 vector lanes, the
             * scale's two forms in their own loops so that no branch sits inside one */
            const float rm = C ? (float)(dot / C) * r : 0.0f;
            float *dxr = dx + n * C;
            if (gemma) {
#pragma omp simd
                for (int c = 0; c < C; c++) dxr[c] += r * (dyr[c] * (1.0f + w[c]) - xr[c] * rm);
            } else {
#pragma omp simd
                for (int c = 0; c < C; c++) dxr[c] += r * (dyr[c] * w[c] - xr[c] * rm);
            }
        }
    }
    if (dw) {
        int n_blocks = (C + RMSNORM_DW_BLOCK - 1) / RMSNORM_DW_BLOCK;
#pragma omp parallel for schedule(static)
        for (int b = 0; b < n_blocks; b++) {
            int c0 = b * RMSNORM_DW_BLOCK;
            int c1 = c0 + RMSNORM_DW_BLOCK < C ? c0 + RMSNORM_DW_BLOCK : C;
            double acc[RMSNORM_DW_BLOCK] = {0};
            for (int64_t n = 0; n < N; n++) {
                const float *xr = x + n * C, *dyr = dy + n * C;
                double r = rstd[n];
                for (int c = c0; c < c1; c++) acc[c - c0] += (double)dyr[c] * xr[c] * r;
            }
            for (int c = c0; c < c1; c++) dw[c] += (float)acc[c - c0];
        }
    }
}

void cpu_rmsnorm_fwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    int C = (int)w->shape[0];
    int64_t N = C ? mt_numel(x) / C : 0;
    cpu_rmsnorm_forward(n->out->data, n->saved[0]->data, x->data, w->data, N, C, n->fp[0],
                        n->ip[0] != 0);
}

void cpu_rmsnorm_bwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    int C = (int)w->shape[0];
    int64_t N = C ? mt_numel(x) / C : 0;
    cpu_rmsnorm_backward(x->grad, w->grad, n->out->grad, x->data, w->data, n->saved[0]->data, N, C,
                         n->ip[0] != 0);
}
