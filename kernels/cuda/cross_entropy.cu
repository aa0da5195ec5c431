/* cross_entropy.cu: token cross-entropy, loss_n = lse(logits_n) - logits_n[label_n], over the
 * rows whose label is not MT_IGNORE_INDEX, scaled to a mean (denom <= 0) or by 1/denom.
 * Node (autograd/op_cross_entropy.c): in[0] = logits (..., V) as N rows, in[1] = labels (N);
 * saved[0] = lse (N) (0 for ignored rows); fp[0] = denom; out is a scalar.
 * One block per row, log-sum-exp in double; the row losses are summed in a fixed order by a
 * single block, so the loss is deterministic. Still a full (N,V) fp32 logits pass: the
 * vocabulary-chunked, bf16 form of issue 6 is later work. */
#include "cuda_ops.cuh"

/* lse[n] and row_loss[n] (double); a label outside [0,V) and not ignored raises the flag. */
__global__ void ce_fwd_rows_kernel(float *lse, double *row_loss, const float *logits,
                                   const int32_t *labels, int64_t N, int64_t V,
                                   unsigned long long *flag) {
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        int32_t lab = labels[n];
        bool bad = lab != MT_IGNORE_INDEX && (lab < 0 || lab >= V);
        if (lab == MT_IGNORE_INDEX || bad) {
            if (threadIdx.x == 0) {
                lse[n] = 0.0f;
                row_loss[n] = 0.0;
                if (bad) cuda_flag_raise(flag, n);
            }
            continue; /* uniform over the block */
        }
        const float *x = logits + n * V;
        float mx;
        double log_sum = cuda_block_row_logsumexp(x, V, &mx);
        if (threadIdx.x == 0) {
            lse[n] = (float)(mx + log_sum);
            row_loss[n] = log_sum - ((double)x[lab] - mx); /* = lse - x[label], no rounding */
        }
    }
}

/* The factor applied to the summed row losses: 1/denom, else 1/(counted rows), else 0.
 * One block; every thread returns it. */
__device__ double ce_scale(const int32_t *labels, int64_t N, float denom) {
    double count = 0;
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x) count += labels[n] != MT_IGNORE_INDEX;
    count = cuda_block_sum(count);
    if (denom > 0.0f) return 1.0 / denom;
    return count > 0 ? 1.0 / count : 0.0;
}

__global__ void ce_fwd_total_kernel(float *loss, const double *row_loss, const int32_t *labels,
                                    int64_t N, float denom) {
    double total = 0;
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x) total += row_loss[n];
    total = cuda_block_sum(total);
    double scale = ce_scale(labels, N, denom);
    if (threadIdx.x == 0) *loss = (float)(total * scale);
}

/* g = dloss * scale, with dloss read from the device (the output's gradient). */
__global__ void ce_bwd_scale_kernel(double *g, const float *dloss, const int32_t *labels, int64_t N,
                                    float denom) {
    double scale = ce_scale(labels, N, denom);
    if (threadIdx.x == 0) *g = (double)*dloss * scale;
}

/* dlogits[n,v] += g (softmax(logits_n)[v] - [v == label_n]) for counted rows, softmax from the
 * saved lse. The label's element gets both terms from one thread, in the CPU's order. */
__global__ void ce_bwd_rows_kernel(float *dlogits, const double *g_ptr, const float *logits,
                                   const int32_t *labels, const float *lse, int64_t N, int64_t V) {
    double g = *g_ptr;
    if (g == 0.0) return;
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        int32_t lab = labels[n];
        if (lab == MT_IGNORE_INDEX) continue;
        const float *x = logits + n * V;
        float *dx = dlogits + n * V;
        double l = lse[n];
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            dx[v] += (float)(g * exp((double)x[v] - l));
            if (v == lab) dx[v] -= (float)g;
        }
    }
}

static unsigned ce_row_blocks(int64_t N) { return (unsigned)(N < 65536 ? N : 65536); }

void cuda_cross_entropy_fwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0], *labels = n->in[1];
    int64_t V = logits->shape[logits->ndim - 1], N = mt_numel(labels);
    double *row_loss = (double *)mt_node_scratch(n, sizeof(double) * (size_t)(N ? N : 1),
                                                 "cross_entropy row losses");
    cuda_flag_reset("cross_entropy forward");
    if (N > 0) {
        ce_fwd_rows_kernel<<<ce_row_blocks(N), CUDA_THREADS>>>(cuda_f32(n->saved[0]), row_loss,
                                                               cuda_f32(logits), cuda_i32(labels),
                                                               N, V, cuda_err_flag);
        CUDA_LAUNCH_CHECK("cross_entropy forward (rows)");
    }
    ce_fwd_total_kernel<<<1, CUDA_THREADS>>>(cuda_f32(n->out), row_loss, cuda_i32(labels), N,
                                             n->fp[0]);
    CUDA_LAUNCH_CHECK("cross_entropy forward (total)");
    int64_t bad = cuda_flag_read("cross_entropy forward"); /* one small synchronising copy */
    if (bad >= 0) {
        int32_t lab = 0;
        cudaCheck("cross_entropy forward",
                  cudaMemcpy(&lab, cuda_i32(labels) + bad, sizeof(lab), cudaMemcpyDeviceToHost));
        MT_DIE("cross_entropy: %s[%lld] = %d is neither %d nor in [0,%lld) for logits %s %s",
               labels->name, (long long)bad, lab, MT_IGNORE_INDEX, (long long)V, logits->name,
               mt_shape_str(logits));
    }
}

void cuda_cross_entropy_bwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0], *labels = n->in[1];
    if (!logits->grad) return;
    int64_t V = logits->shape[logits->ndim - 1], N = mt_numel(labels);
    if (N == 0) return;
    double *g = (double *)mt_node_scratch(n, sizeof(double), "cross_entropy grad scale");
    ce_bwd_scale_kernel<<<1, CUDA_THREADS>>>(g, cuda_grad(n->out), cuda_i32(labels), N, n->fp[0]);
    CUDA_LAUNCH_CHECK("cross_entropy backward (scale)");
    ce_bwd_rows_kernel<<<ce_row_blocks(N), CUDA_THREADS>>>(
        cuda_grad(logits), g, cuda_f32(logits), cuda_i32(labels), cuda_f32(n->saved[0]), N, V);
    CUDA_LAUNCH_CHECK("cross_entropy backward (rows)");
}
