/* sort.cu: the stable counting sort of sort.cuh (the design is described there). */
#include "sort.cuh"

#define SORT_WARPS   8
#define SORT_THREADS (32 * SORT_WARPS)
#define SORT_ROUNDS  (CUDA_SORT_CHUNK / SORT_THREADS) /* 32 elements per warp and round */

int64_t cuda_sort_chunks(int64_t n) {
    const int64_t c = (n + CUDA_SORT_CHUNK - 1) / CUDA_SORT_CHUNK;
    return c > 0 ? c : 1;
}

/* Inclusive prefix sum over the warp's 32 lanes in lane order. */
__device__ inline int32_t sort_warp_scan(int32_t x) {
    const int lane = threadIdx.x & 31;
    for (int o = 1; o < 32; o <<= 1) {
        const int32_t y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}

/* Exclusive prefix sum over the block's SORT_THREADS threads in thread order; *total gets the
 * block's sum on every thread. */
__device__ inline int32_t sort_block_scan(int32_t v, int32_t *total) {
    __shared__ int32_t warp_sum[SORT_WARPS];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int32_t x = sort_warp_scan(v);
    __syncthreads(); /* warp_sum may still be read by a previous call */
    if (lane == 31) warp_sum[w] = x;
    __syncthreads();
    int32_t before = 0, all = 0;
    for (int k = 0; k < SORT_WARPS; k++) {
        const int32_t s = warp_sum[k];
        before += k < w ? s : 0;
        all += s;
    }
    *total = all;
    return before + x - v;
}

/* 1. counts[d, ch] = the elements of chunk ch (the block) with digit d. */
__global__ void sort_count_kernel(int32_t *counts, const int32_t *keys, const int32_t *order,
                                  int64_t n, int shift, unsigned mask, int nb, int64_t nchunks,
                                  unsigned long long *flag) {
    __shared__ int32_t hist[CUDA_SORT_MAX_BUCKETS];
    for (int d = threadIdx.x; d < nb; d += blockDim.x) hist[d] = 0;
    __syncthreads();
    const int64_t c0 = (int64_t)blockIdx.x * CUDA_SORT_CHUNK;
    const int64_t c1 = c0 + CUDA_SORT_CHUNK < n ? c0 + CUDA_SORT_CHUNK : n;
    for (int64_t i = c0 + threadIdx.x; i < c1; i += blockDim.x) {
        const int32_t key = keys[order ? order[i] : i];
        if (flag && (key < 0 || key >= nb)) {
            cuda_flag_raise(flag, i);
            continue;
        }
        atomicAdd(&hist[((uint32_t)key >> shift) & mask], 1); /* integer: any order, one sum */
    }
    __syncthreads();
    for (int d = threadIdx.x; d < nb; d += blockDim.x)
        counts[(int64_t)d * nchunks + blockIdx.x] = hist[d];
}

/* 2. A warp per bucket d: counts[d, :] becomes its exclusive prefix sum (32 chunks a step, the
 * carry from lane 31), totals[d] the bucket's size. */
__global__ void sort_scan_kernel(int32_t *counts, int32_t *totals, int nb, int64_t nchunks) {
    const int lane = threadIdx.x & 31, d = blockIdx.x * SORT_WARPS + (threadIdx.x >> 5);
    if (d >= nb) return; /* whole warps: no block barrier follows */
    int32_t *col = counts + (int64_t)d * nchunks;
    int32_t carry = 0;
    for (int64_t t0 = 0; t0 < nchunks; t0 += 32) {
        const int64_t ch = t0 + lane;
        const int32_t v = ch < nchunks ? col[ch] : 0;
        const int32_t x = sort_warp_scan(v);
        if (ch < nchunks) col[ch] = carry + x - v;
        carry += __shfl_sync(0xffffffffu, x, 31); /* the step's sum */
    }
    if (lane == 0) totals[d] = carry;
}

/* 3. The chunk's elements into their slots (see sort.cuh); block 0 also writes the offsets and
 * the view. */
__global__ void sort_place_kernel(int32_t *perm, int32_t *inv, int32_t *sorted, const int32_t *keys,
                                  const int32_t *order, const int32_t *counts,
                                  const int32_t *totals, int64_t n, int shift, int bits, int nb,
                                  int64_t nchunks, int32_t *offsets, const unsigned long long *flag,
                                  unsigned long long *view) {
    __shared__ int32_t first[CUDA_SORT_MAX_BUCKETS + 1];        /* each bucket's first slot */
    __shared__ int32_t base[SORT_WARPS][CUDA_SORT_MAX_BUCKETS]; /* per warp: its next slot */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const unsigned mask = (1u << bits) - 1u;
    int32_t run = 0;
    for (int d0 = 0; d0 < nb; d0 += SORT_THREADS) {
        const int d = d0 + threadIdx.x;
        int32_t tile;
        const int32_t ex = sort_block_scan(d < nb ? totals[d] : 0, &tile);
        if (d < nb) first[d] = run + ex;
        run += tile;
    }
    if (threadIdx.x == 0) first[nb] = run;
    for (int i = threadIdx.x; i < SORT_WARPS * nb; i += blockDim.x) base[i / nb][i % nb] = 0;
    __syncthreads();
    if (blockIdx.x == 0 && (offsets || view)) {
        int32_t *voff = view ? (int32_t *)(view + 1) : NULL;
        for (int d = threadIdx.x; d <= nb; d += blockDim.x) {
            if (offsets) offsets[d] = first[d];
            if (voff) voff[d] = first[d];
        }
        if (view && threadIdx.x == 0) view[0] = *flag;
    }

    /* warp w's elements [w0, w1): 32 per round, in order */
    const int64_t c0 = (int64_t)blockIdx.x * CUDA_SORT_CHUNK + (int64_t)w * 32 * SORT_ROUNDS;
    const int64_t w0 = c0 < n ? c0 : n, w1 = w0 + 32 * SORT_ROUNDS < n ? w0 + 32 * SORT_ROUNDS : n;
    const bool check = flag != NULL; /* keys outside [0, nb) were flagged: left out */
    for (int64_t i = w0 + lane; i < w1; i += 32) {
        const int32_t key = keys[order ? order[i] : i];
        if (!check || (key >= 0 && key < nb))
            atomicAdd(&base[w][((uint32_t)key >> shift) & mask], 1);
    }
    __syncthreads();
    for (int d = threadIdx.x; d < nb; d += blockDim.x) {
        int32_t next = first[d] + counts[(int64_t)d * nchunks + blockIdx.x];
        for (int k = 0; k < SORT_WARPS; k++) {
            const int32_t c = base[k][d];
            base[k][d] = next;
            next += c;
        }
    }
    __syncthreads();
    for (int64_t r0 = w0; r0 < w1; r0 += 32) { /* uniform over the warp */
        const int64_t i = r0 + lane;
        const int32_t elem = i < w1 ? (order ? order[i] : (int32_t)i) : 0;
        const int32_t key = i < w1 ? keys[elem] : 0;
        const bool ok = i < w1 && (!check || (key >= 0 && key < nb));
        const int d = ok ? (int)(((uint32_t)key >> shift) & mask) : 0;
        /* the lanes of this round with digit d: the ballots of its bits */
        unsigned peers = __ballot_sync(0xffffffffu, ok);
        for (int b = 0; b < bits; b++) {
            const int on = (d >> b) & 1;
            const unsigned set = __ballot_sync(0xffffffffu, on);
            peers &= on ? set : ~set;
        }
        const int32_t slot = ok ? base[w][d] + __popc(peers & ((1u << lane) - 1u)) : 0;
        __syncwarp();                                           /* every lane read its base */
        if (ok && (peers >> lane) == 1u) base[w][d] = slot + 1; /* the group's last lane */
        __syncwarp();
        if (ok) {
            perm[slot] = elem;
            if (inv) inv[elem] = slot;
            if (sorted) sorted[slot] = key;
        }
    }
}

void cuda_sort_pass(const char *op, int32_t *perm, int32_t *inv, int32_t *sorted,
                    const int32_t *keys, const int32_t *order, int64_t n, int shift, int bits,
                    int nb, int32_t *counts, int32_t *totals, int32_t *offsets,
                    unsigned long long *flag, unsigned long long *view) {
    MT_CHECK(nb >= 1 && nb <= CUDA_SORT_MAX_BUCKETS && bits >= 0 && bits <= CUDA_SORT_MAX_BITS &&
                 nb <= (1 << bits) && n < ((int64_t)1 << 31),
             "%s: sort pass of %lld elements into %d buckets (%d bits)", op, (long long)n, nb,
             bits);
    const int64_t nchunks = cuda_sort_chunks(n);
    const unsigned mask = (1u << bits) - 1u;
    sort_count_kernel<<<(unsigned)nchunks, SORT_THREADS>>>(counts, keys, order, n, shift, mask, nb,
                                                           nchunks, flag);
    CUDA_LAUNCH_CHECK(op);
    sort_scan_kernel<<<(unsigned)((nb + SORT_WARPS - 1) / SORT_WARPS), SORT_THREADS>>>(
        counts, totals, nb, nchunks);
    CUDA_LAUNCH_CHECK(op);
    sort_place_kernel<<<(unsigned)nchunks, SORT_THREADS>>>(perm, inv, sorted, keys, order, counts,
                                                           totals, n, shift, bits, nb, nchunks,
                                                           offsets, flag, view);
    CUDA_LAUNCH_CHECK(op);
}

void cuda_sort_stable(const char *op, const mt_node *n_scratch, int32_t *perm, int32_t *sorted,
                      const int32_t *keys, int64_t n, int64_t bound) {
    if (n == 0) return;
    int bits = 0;
    while (((int64_t)1 << bits) < bound) bits++;
    const int passes = bits > 0 ? (bits + CUDA_SORT_MAX_BITS - 1) / CUDA_SORT_MAX_BITS : 1;
    const int pb = (bits + passes - 1) / passes; /* bits per pass, at most 10 */
    const int64_t nchunks = cuda_sort_chunks(n);
    int32_t *counts = (int32_t *)mt_node_scratch(
        n_scratch, sizeof(int32_t) * (size_t)(nchunks << pb), "sort counts");
    int32_t *totals =
        (int32_t *)mt_node_scratch(n_scratch, sizeof(int32_t) << pb, "sort bucket sizes");
    int32_t *tmp = passes > 1 ? (int32_t *)mt_node_scratch(n_scratch, sizeof(int32_t) * (size_t)n,
                                                           "sort order")
                              : NULL;
    /* the passes alternate between perm and tmp, ending in perm */
    const int32_t *order = NULL;
    for (int p = 0; p < passes; p++) {
        int32_t *dst = (passes - 1 - p) % 2 == 0 ? perm : tmp;
        const int shift = p * pb;
        const int64_t left = ((bound - 1) >> shift) + 1; /* digits the keys reach */
        const int nb = left < ((int64_t)1 << pb) ? (int)left : 1 << pb;
        cuda_sort_pass(op, dst, NULL, p == passes - 1 ? sorted : NULL, keys, order, n, shift, pb,
                       nb, counts, totals, NULL, NULL, NULL);
        order = dst;
    }
}
