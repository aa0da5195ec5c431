/* moe_dispatch.c: tokens to expert order (spec 6.2): the counting sort of the N*K assignments
 * by expert and the row gather, used by the fused experts (moe_experts.c) and as the first of
 * the split ops (autograd/ops.h, mt_moe_dispatch), whose backward adds every slot's gradient
 * back to its token.
 *
 * Node layout (autograd/op_moe.c): in = {x (N,C), idx (N,K) I32}; out xs (N*K,C); ip[0] = E;
 * saved[0] offsets (E+1), saved[1] perm (N*K), saved[2] inv (N*K), all I32; host: the offsets
 * (E+1) again, on the host (the expert ops' GEMM sizes). */
#include <string.h>

#include "cpu_ops.h"
#include "moe.h"

int64_t cpu_moe_perm_build(const int32_t *idx, int64_t N, int K, int E, int32_t *offsets,
                           int32_t *perm, int32_t *inv) {
    int64_t A = N * K;
    /* counts land in offsets[e+1], then become starts shifted by one; placing advances
     * offsets[e+1] to the end of e, which is the start of e+1: offsets[e] = start of e. */
    memset(offsets, 0, sizeof(int32_t) * (size_t)(E + 1));
    for (int64_t a = 0; a < A; a++) {
        int32_t e = idx[a];
        MT_CHECK(e >= 0 && e < E, "moe: expert id idx[%lld,%lld] = %d is outside [0,%d)",
                 (long long)(a / K), (long long)(a % K), (int)e, E);
        offsets[e + 1]++;
    }
    int32_t run = 0;
    int64_t max_rows = 0;
    for (int e = 0; e < E; e++) {
        int32_t cnt = offsets[e + 1];
        if (cnt > max_rows) max_rows = cnt;
        offsets[e + 1] = run;
        run += cnt;
    }
    for (int64_t a = 0; a < A; a++) {
        int32_t s = offsets[idx[a] + 1]++;
        perm[s] = (int32_t)a;
        inv[a] = s;
    }
    return max_rows;
}

int64_t cpu_moe_perm_max_rows(const int32_t *offsets, int E) {
    int64_t m = 0;
    for (int e = 0; e < E; e++)
        if (offsets[e + 1] - offsets[e] > m) m = offsets[e + 1] - offsets[e];
    return m;
}

void cpu_moe_rows_gather(const float *x, const int32_t *perm, int64_t rows, int K, int64_t C,
                         float *xp) {
#pragma omp parallel for
    for (int64_t s = 0; s < rows; s++)
        memcpy(xp + s * C, x + (int64_t)(perm[s] / K) * C, sizeof(float) * (size_t)C);
}

void cpu_moe_dispatch_fwd_node(const mt_node *n) {
    const int64_t N = n->in[0]->shape[0], C = n->in[0]->shape[1];
    const int K = (int)n->in[1]->shape[1], E = (int)n->ip[0];
    int32_t *offsets = n->saved[0]->data, *perm = n->saved[1]->data, *inv = n->saved[2]->data;
    cpu_moe_perm_build(n->in[1]->data, N, K, E, offsets, perm, inv);
    memcpy(n->host, offsets, sizeof(int32_t) * (size_t)(E + 1));
    cpu_moe_rows_gather(n->in[0]->data, perm, N * K, K, C, n->out->data);
}

void cpu_moe_dispatch_bwd_node(const mt_node *n) {
    float *dx = n->in[0]->grad;
    if (!dx) return;
    const int64_t N = n->in[0]->shape[0], C = n->in[0]->shape[1];
    cpu_moe_rows_combine(n->out->grad, n->saved[2]->data, NULL, N, (int)n->in[1]->shape[1], C, dx);
}
