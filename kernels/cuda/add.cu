/* add.cu: y = a + b. */
#include "cuda_ops.cuh"

__global__ void add_fwd_kernel(float *y, const float *a, const float *b, int64_t count) {
    CUDA_FOR(i, count) y[i] = a[i] + b[i];
}

/* da += dy; db += dy. Either may be NULL. da == db (a + a) accumulates twice, as it must: the
 * two updates of an element happen one after the other in the same thread. */
__global__ void add_bwd_kernel(float *da, float *db, const float *dy, int64_t count) {
    CUDA_FOR(i, count) {
        if (da) da[i] += dy[i];
        if (db) db[i] += dy[i];
    }
}

void cuda_add_fwd_node(const mt_node *n) {
    int64_t count = mt_numel(n->out);
    if (count == 0) return;
    add_fwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_f32(n->out), cuda_f32(n->in[0]), cuda_f32(n->in[1]), count);
    CUDA_LAUNCH_CHECK("add forward");
}

void cuda_add_bwd_node(const mt_node *n) {
    float *da = cuda_grad(n->in[0]), *db = cuda_grad(n->in[1]);
    int64_t count = mt_numel(n->out);
    if ((!da && !db) || count == 0) return;
    add_bwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(da, db, cuda_grad(n->out),
                                                                       count);
    CUDA_LAUNCH_CHECK("add backward");
}
