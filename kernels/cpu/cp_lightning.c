/* cp_lightning.c: lightning attention under context parallelism on the CPU: the node work is
 * autograd/op_cp_lightning.c's; this file gives it the CPU kernels (kernels/cpu/lightning.h's
 * state, state gradient and block form from an initial state) and the mix of gathered states.
 * The CPU's bf16 GEMM mode runs the fp32 block form here (lightning_bf16.c takes no state). */
#include <string.h>

#include "../../autograd/ops.h"
#include "cpu_ops.h"
#include "lightning.h"

static void cp_mix(float *y, const float *x, const double *w, const int64_t *off, int np, int ni,
                   int64_t DD) {
#pragma omp parallel for schedule(static)
    for (int p = 0; p < np; p++) {
        float *yp = y + (size_t)p * DD;
        for (int64_t e = 0; e < DD; e++) {
            double acc = 0;
            for (int i = 0; i < ni; i++) {
                const double wi = w[(size_t)p * ni + i];
                if (wi != 0.0) acc += wi * x[off[(size_t)p * ni + i] + e];
            }
            yp[e] = (float)acc;
        }
    }
}

static void cp_dims(const mt_node *n, int chunks, int *B, int *T, int *H, int *D) {
    const mt_tensor *qkv = n->in[0];
    *B = (int)qkv->shape[0] * chunks;
    *T = (int)qkv->shape[1] / chunks;
    *H = (int)qkv->shape[2];
    *D = (int)(qkv->shape[3] / 3);
}

static void cp_forward(const mt_node *n, int chunks, const float *s0) {
    int B, T, H, D;
    cp_dims(n, chunks, &B, &T, &H, &D);
    float *state = mt_node_scratch(n, sizeof(float) * B * H * D * D, "cp lightning state");
    cpu_lightning_forward_block_from(n->out->data, state, s0, n->in[0]->data, n->in[1]->data,
                                     n->in[2] ? n->in[2]->data : NULL, B, T, H, D, (int)n->ip[0]);
}

static void cp_backward(const mt_node *n, int chunks, const float *s0, const float *dsT) {
    int B, T, H, D;
    cp_dims(n, chunks, &B, &T, &H, &D);
    const size_t nstate = (size_t)B * H * D * D;
    float *state = mt_node_scratch(n, sizeof(float) * 2 * nstate, "cp lightning state");
    cpu_lightning_backward_block_from(n->in[0]->grad, state, state + nstate, s0, dsT, n->out->grad,
                                      n->in[0]->data, n->in[1]->data,
                                      n->in[2] ? n->in[2]->data : NULL, B, T, H, D, (int)n->ip[0]);
}

static const mt_cp_lightning_kernels cpu_cp_kernels = {
    .state = cpu_lightning_state,
    .state_grad = cpu_lightning_state_grad,
    .mix = cp_mix,
    .forward = cp_forward,
    .backward = cp_backward,
};

void cpu_cp_lightning_fwd_node(const mt_node *n) { mt_cp_lightning_node_fwd(n, &cpu_cp_kernels); }
void cpu_cp_lightning_bwd_node(const mt_node *n) { mt_cp_lightning_node_bwd(n, &cpu_cp_kernels); }
