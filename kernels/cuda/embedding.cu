/* embedding.cu: row gather from the table, and its scatter-add backward.
 * Node (autograd/op_embedding.c): in[0] = ids (I32, any shape), in[1] = table (R,C), the rows
 * [row0, row0 + R) of a vocabulary of V ids (ip[0] = row0, ip[1] = V); ip[2]: write every row
 * of the output (zeros outside the table) or only the table's. */
#include "cuda_ops.cuh"

/* out (N,C) = table[ids[n] - row0] where that is in [0,R), other rows zero (all) or untouched;
 * an id outside [0,V) raises the error flag (when given) at its position and its row is left
 * unwritten (the adapter dies before anything reads it). */
__global__ void embedding_fwd_kernel(float *out, const int32_t *ids, const float *table, int64_t N,
                                     int64_t C, int64_t V, int64_t row0, int64_t R, bool all,
                                     unsigned long long *flag) {
    CUDA_FOR(i, N * C) {
        int64_t n = i / C, c = i % C;
        int32_t id = ids[n];
        if (id < 0 || id >= V) {
            if (flag && c == 0) cuda_flag_raise(flag, n);
            continue;
        }
        const int64_t r = (int64_t)id - row0;
        if (r >= 0 && r < R)
            out[i] = table[r * C + c];
        else if (all)
            out[i] = 0.0f;
    }
}

/* dtable[ids[n] - row0] += dout[n] for the ids inside the table. Repeated ids meet in
 * atomicAdd, so the order of their sum (and its last bit) is not fixed; bf16/deterministic
 * variants can sort by id later. */
__global__ void embedding_bwd_kernel(float *dtable, const float *dout, const int32_t *ids,
                                     int64_t N, int64_t C, int64_t row0, int64_t R) {
    CUDA_FOR(i, N * C) {
        int64_t n = i / C, c = i % C;
        const int64_t r = (int64_t)ids[n] - row0;
        if (r >= 0 && r < R) atomicAdd(dtable + r * C + c, dout[i]);
    }
}

void cuda_embedding_fwd_node(const mt_node *n) {
    const mt_tensor *ids = n->in[0], *table = n->in[1];
    int64_t N = mt_numel(ids), V = n->ip[1], C = table->shape[1];
    if (N == 0) return;
    /* the ids are checked once, by the node that writes every row (a vocabulary split's first
     * part; its other parts look up the same ids) */
    const bool first = n->ip[2] != 0;
    if (first) cuda_flag_reset("embedding forward");
    if (C > 0) {
        embedding_fwd_kernel<<<cuda_blocks(N * C, CUDA_THREADS), CUDA_THREADS>>>(
            cuda_f32(n->out), cuda_i32(ids), cuda_f32(table), N, C, V, n->ip[0], table->shape[0],
            first, first ? cuda_err_flag : NULL);
        CUDA_LAUNCH_CHECK("embedding forward");
    }
    if (!first) return;
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
        cuda_grad(table), cuda_grad(n->out), cuda_i32(ids), N, C, n->ip[0], table->shape[0]);
    CUDA_LAUNCH_CHECK("embedding backward");
}
