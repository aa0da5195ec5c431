/* embedding.cu: row gather from the table, and its scatter-add backward.
 * Node (autograd/op_embedding.c): in[0] = ids (I32, any shape), in[1] = table (V,C). */
#include "cuda_ops.cuh"

/* out (N,C) = table[ids[n]]; an id outside [0,V) raises the error flag at its position and its
 * row is left unwritten (the adapter dies before anything reads it). */
__global__ void embedding_fwd_kernel(float *out, const int32_t *ids, const float *table, int64_t N,
                                     int64_t C, int64_t V, unsigned long long *flag) {
    CUDA_FOR(i, N * C) {
        int64_t n = i / C, c = i % C;
        int32_t id = ids[n];
        if (id < 0 || id >= V) {
            if (c == 0) cuda_flag_raise(flag, n);
            continue;
        }
        out[i] = table[(int64_t)id * C + c];
    }
}

/* dtable[ids[n]] += dout[n]. Repeated ids meet in atomicAdd, so the order of their sum (and
 * its last bit) is not fixed; bf16/deterministic variants can sort by id later. */
__global__ void embedding_bwd_kernel(float *dtable, const float *dout, const int32_t *ids,
                                     int64_t N, int64_t C) {
    CUDA_FOR(i, N * C) {
        int64_t n = i / C, c = i % C;
        atomicAdd(dtable + (int64_t)ids[n] * C + c, dout[i]);
    }
}

void cuda_embedding_fwd_node(const mt_node *n) {
    const mt_tensor *ids = n->in[0], *table = n->in[1];
    int64_t N = mt_numel(ids), V = table->shape[0], C = table->shape[1];
    if (N == 0) return;
    cuda_flag_reset("embedding forward");
    if (C > 0) {
        embedding_fwd_kernel<<<cuda_blocks(N * C, CUDA_THREADS), CUDA_THREADS>>>(
            cuda_f32(n->out), cuda_i32(ids), cuda_f32(table), N, C, V, cuda_err_flag);
        CUDA_LAUNCH_CHECK("embedding forward");
    }
    int64_t bad = cuda_flag_read("embedding forward"); /* one small synchronising copy */
    if (bad >= 0) {
        int32_t id = 0;
        cudaCheck("embedding forward",
                  cudaMemcpy(&id, cuda_i32(ids) + bad, sizeof(id), cudaMemcpyDeviceToHost));
        MT_DIE("embedding: %s[%lld] = %d is outside [0,%lld) of %s %s", ids->name, (long long)bad,
               id, (long long)V, table->name, mt_shape_str(table));
    }
}

void cuda_embedding_bwd_node(const mt_node *n) {
    const mt_tensor *ids = n->in[0], *table = n->in[1];
    int64_t N = mt_numel(ids), C = table->shape[1];
    if (!table->grad || N * C == 0) return;
    embedding_bwd_kernel<<<cuda_blocks(N * C, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_grad(table), cuda_grad(n->out), cuda_i32(ids), N, C);
    CUDA_LAUNCH_CHECK("embedding backward");
}
