/* embedding.cu: row gather from the table, and its scatter-add backward.
 * Node (autograd/op_embedding.c): in[0] = ids (I32, any shape), in[1] = table (R,C), the rows
 * [row0, row0 + R) of a vocabulary of V ids (ip[0] = row0, ip[1] = V); ip[2]: write every row
 * of the output (zeros outside the table) or only the table's. */
#include "cuda_ops.cuh"
#include "sort.cuh"

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

/* The backward in a fixed order, the CPU's: the positions are sorted stably by their table row
 * (sort.cuh, an LSD radix sort), then each row adds its positions' dout rows in position order,
 * dtable[r] = ((dtable[r] + dout[n1]) + dout[n2]) + ... with n1 < n2 < ..., as the CPU's loop
 * over positions does: the same bits on every run and the CPU's bits (no atomics). */

/* keys[n] = ids[n] - row0 for the ids inside the table, R for the others (sorted last, skipped) */
__global__ void embedding_keys_kernel(int32_t *keys, const int32_t *ids, int64_t N, int64_t row0,
                                      int64_t R) {
    CUDA_FOR(n, N) {
        const int64_t r = (int64_t)ids[n] - row0;
        keys[n] = (int32_t)(r >= 0 && r < R ? r : R);
    }
}

/* Block (x, y): the sorted positions i = x, x + gridDim.x, ...; one that starts a run of equal
 * rows r < R (sorted[i] = keys[perm[i]], ascending) adds the run's dout rows into dtable[r] in
 * position order, thread t its column 128 y + t. The run's end is found by bisection, so a row
 * met m times costs m dependent adds per column, with no scan over the run. */
__global__ void embedding_bwd_rows_kernel(float *dtable, const float *dout, const int32_t *sorted,
                                          const int32_t *perm, int64_t N, int64_t C, int64_t R) {
    const int64_t c = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
        const int32_t r = sorted[i];
        if (r >= R || (i > 0 && sorted[i - 1] == r)) continue;
        int64_t lo = i + 1, hi = N; /* the first j > i with sorted[j] != r */
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (sorted[mid] == r)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (c >= C) continue;
        float acc = dtable[r * C + c];
#pragma unroll 4
        for (int64_t j = i; j < lo; j++) acc += dout[(int64_t)perm[j] * C + c];
        dtable[r * C + c] = acc;
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
    const int64_t N = mt_numel(ids), C = table->shape[1], R = table->shape[0];
    if (!table->grad || N * C == 0) return;
    const char *op = "embedding backward";
    MT_CHECK(N < ((int64_t)1 << 31) && R < ((int64_t)1 << 31) - 1,
             "%s: %lld positions into %s %s: the device sort takes fewer than 2^31", op,
             (long long)N, table->name, mt_shape_str(table));
    int32_t *keys = (int32_t *)mt_node_scratch(n, sizeof(int32_t) * (size_t)N, "embedding rows");
    int32_t *perm = (int32_t *)mt_node_scratch(n, sizeof(int32_t) * (size_t)N, "embedding order");
    int32_t *sorted =
        (int32_t *)mt_node_scratch(n, sizeof(int32_t) * (size_t)N, "embedding sorted rows");
    embedding_keys_kernel<<<cuda_blocks(N, CUDA_THREADS), CUDA_THREADS>>>(keys, cuda_i32(ids), N,
                                                                          n->ip[0], R);
    CUDA_LAUNCH_CHECK(op);
    cuda_sort_stable(op, n, perm, sorted, keys, N, R + 1);
    const int64_t tiles = (C + 127) / 128;
    MT_CHECK(tiles <= 65535, "%s: %s %s is too wide for the grid", op, table->name,
             mt_shape_str(table));
    dim3 grid((unsigned)(N < 2048 ? N : 2048), (unsigned)tiles);
    embedding_bwd_rows_kernel<<<grid, 128>>>(cuda_grad(table), cuda_grad(n->out), sorted, perm, N,
                                             C, R);
    CUDA_LAUNCH_CHECK(op);
}
