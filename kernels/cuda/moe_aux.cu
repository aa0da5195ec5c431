/* moe_aux.cu: the differentiable part of the load-balancing loss (spec 7.2):
 * sum_n sum_e coef[e] * softmax(logits[n])[e], softmax recomputed in the backward, mirroring
 * kernels/cpu/moe_aux.c. Node (autograd/op_moe.c): in = {logits (N,E), coef (E)}, out scalar.
 * One thread per row; the row terms are summed by one block in a fixed order. */
#include "cuda_ops.cuh"

__device__ inline void moe_aux_stats(const float *l, int E, double *mx_out, double *sum_out) {
    double mx = l[0];
    for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
    double sum = 0;
    for (int e = 0; e < E; e++) sum += exp((double)l[e] - mx);
    *mx_out = mx;
    *sum_out = sum;
}

__global__ void moe_aux_rows_kernel(double *row_val, const float *logits, const float *coef,
                                    int64_t N, int E, unsigned long long *flag) {
    CUDA_FOR(n, N) {
        const float *l = logits + n * E;
        double mx, sum, v = 0;
        moe_aux_stats(l, E, &mx, &sum);
        if (!isfinite(mx) || !isfinite(sum)) cuda_flag_raise(flag, n);
        for (int e = 0; e < E; e++) v += coef[e] * (exp((double)l[e] - mx) / sum);
        row_val[n] = v;
    }
}

__global__ void moe_aux_total_kernel(float *out, const double *row_val, int64_t N) {
    double total = 0;
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x) total += row_val[n];
    total = cuda_block_sum(total);
    if (threadIdx.x == 0) *out = (float)total;
}

/* dlogits[n,e] += dloss * p[e] * (coef[e] - sum_e' coef[e'] p[e']); dloss read on the device. */
__global__ void moe_aux_bwd_kernel(float *dlogits, const float *dloss_ptr, const float *logits,
                                   const float *coef, int64_t N, int E) {
    const double dloss = *dloss_ptr;
    CUDA_FOR(n, N) {
        const float *l = logits + n * E;
        double mx, sum, dot = 0;
        moe_aux_stats(l, E, &mx, &sum);
        for (int e = 0; e < E; e++) dot += coef[e] * (exp((double)l[e] - mx) / sum);
        for (int e = 0; e < E; e++) {
            double p = exp((double)l[e] - mx) / sum;
            dlogits[n * E + e] += (float)(dloss * p * (coef[e] - dot));
        }
    }
}

void cuda_moe_aux_fwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0];
    int64_t N = logits->shape[0];
    int E = (int)logits->shape[1];
    double *row_val =
        (double *)mt_node_scratch(n, sizeof(double) * (size_t)(N ? N : 1), "moe_aux rows");
    cuda_flag_reset("moe_aux forward");
    if (N > 0) {
        moe_aux_rows_kernel<<<cuda_blocks(N, 128), 128>>>(row_val, cuda_f32(logits),
                                                          cuda_f32(n->in[1]), N, E, cuda_err_flag);
        CUDA_LAUNCH_CHECK("moe_aux forward (rows)");
    }
    moe_aux_total_kernel<<<1, CUDA_THREADS>>>(cuda_f32(n->out), row_val, N);
    CUDA_LAUNCH_CHECK("moe_aux forward (total)");
    int64_t bad = cuda_flag_read("moe_aux forward"); /* one small synchronising copy */
    MT_CHECK(bad < 0, "moe_aux: router logits row %lld is not finite (%s %s)", (long long)bad,
             logits->name, mt_shape_str(logits));
}

void cuda_moe_aux_bwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0];
    int64_t N = logits->shape[0];
    if (!logits->grad || N == 0) return;
    moe_aux_bwd_kernel<<<cuda_blocks(N, 128), 128>>>(cuda_grad(logits), cuda_grad(n->out),
                                                     cuda_f32(logits), cuda_f32(n->in[1]), N,
                                                     (int)logits->shape[1]);
    CUDA_LAUNCH_CHECK("moe_aux backward");
}
