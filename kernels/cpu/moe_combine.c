/* moe_combine.c: expert rows back to tokens (spec 6.2): the weighted sum the fused experts end
 * with (moe_experts.c), and the last of the split ops (autograd/ops.h, mt_moe_combine), whose
 * rows arrive already weighted: y[n] = sum_j ys[inv[n*K+j]].
 *
 * Node layout (autograd/op_moe.c): in = {ys (N*K,C), inv (N*K) I32}; out y (N,C); ip[0] = K. */
#include <string.h>

#include "cpu_ops.h"
#include "moe.h"

void cpu_moe_rows_combine(const float *yp, const int32_t *inv, const float *weight, int64_t N,
                          int K, int64_t C, float *out) {
#pragma omp parallel for
    for (int64_t n = 0; n < N; n++) {
        float *o = out + n * C;
        for (int j = 0; j < K; j++) {
            const float *y = yp + (int64_t)inv[n * K + j] * C;
            float wj = weight ? weight[n * K + j] : 1.0f;
            for (int64_t c = 0; c < C; c++) o[c] += wj * y[c];
        }
    }
}

void cpu_moe_combine_fwd_node(const mt_node *n) {
    const int K = (int)n->ip[0];
    const int64_t N = n->out->shape[0], C = n->out->shape[1];
    memset(n->out->data, 0, mt_nbytes(n->out));
    cpu_moe_rows_combine(n->in[0]->data, n->in[1]->data, NULL, N, K, C, n->out->data);
}

/* dys[inv[n*K+j]] += dy[n]: inv is a bijection, so every slot has one writer. */
void cpu_moe_combine_bwd_node(const mt_node *n) {
    float *dys = n->in[0]->grad;
    if (!dys) return;
    const int K = (int)n->ip[0];
    const int64_t N = n->out->shape[0], C = n->out->shape[1];
    const int32_t *inv = n->in[1]->data;
    const float *dy = n->out->grad;
#pragma omp parallel for
    for (int64_t n_ = 0; n_ < N; n_++)
        for (int j = 0; j < K; j++) {
            float *d = dys + (int64_t)inv[n_ * K + j] * C;
            for (int64_t c = 0; c < C; c++) d[c] += dy[n_ * C + c];
        }
}
