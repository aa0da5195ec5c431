/* msa.cuh: what the MSA kernels (msa_select.cu, msa_attention.cu, msa_kl.cu) share: the block
 * rule of kernels/cpu/msa.h on the device, the lane-distributed rows of the warp kernels, the
 * argument checks of the CPU reference (by the device flag), and the selection's inverse.
 *
 * Layouts and rules are kernels/cpu/msa.h's, queries apart from keys: iq (B,Tq,Hi,Di), ik
 * (B,Tk,1,Di); q (B,Tq,H,D), k, v (B,Tk,Hkv,D); idx (B,Hkv,Tq,topk) I32; lse (B,H,Tq); pos, seg
 * (B,Tk) I32; q_slot (Tq) I32 in device memory, increasing, the key slot of each query row (NULL:
 * Tq = Tk, row i at slot i), which stands for the query in every rule (its block, its sample
 * start slot - pos[slot], causality). fp32 mode only: the MSA nodes carry no GEMM mode
 * (autograd/op_msa.c), so there is no bf16 path. */
#pragma once
#include "cuda_common.cuh"

/* head dims of the warp kernels: 32 lanes x MSA_R registers */
#define MSA_MAX_D 256
#define MSA_R     (MSA_MAX_D / 32)
#define MSA_WARPS 8 /* warps per block of the warp kernels */

/* The key slot of query row i (msa_slot of kernels/cpu/msa.h). */
__device__ inline int64_t msa_q_slot(const int32_t *q_slot, int64_t i) {
    return q_slot ? q_slot[i] : i;
}

/* The first query row whose slot is at least j (Tq when none): a binary search of the
 * increasing q_slot, j itself (clamped to Tq) without it. */
__device__ inline int64_t msa_first_row(const int32_t *q_slot, int64_t Tq, int64_t j) {
    if (!q_slot) return j < Tq ? j : Tq;
    int64_t lo = 0, hi = Tq;
    while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (q_slot[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The slots [*j0, *j1] of block blk that query t (at position pos_t) sees (msa_block_keys). */
__device__ inline void msa_keys(int64_t t, int32_t pos_t, int32_t blk, int block, int64_t *j0,
                                int64_t *j1) {
    *j0 = t - pos_t + (int64_t)blk * block;
    const int64_t hi = *j0 + block - 1;
    *j1 = hi < t ? hi : t;
}

__device__ inline int64_t msa_warp_id() {
    return ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
}

static inline unsigned msa_warp_blocks(int64_t rows) {
    return (unsigned)((rows + MSA_WARPS - 1) / MSA_WARPS);
}

/* Row p (D floats) into the lane's slots: dim lane + 32 i. */
__device__ inline void msa_load(float (&r)[MSA_R], const float *p, int D, int lane) {
#pragma unroll
    for (int i = 0; i < MSA_R; i++) {
        const int d = lane + 32 * i;
        r[i] = d < D ? p[d] : 0.0f;
    }
}

/* Dot product of a lane-distributed row with row p: fp32 products summed in double (exact
 * products, so within the CPU's fp32 sgemm rounding of the exact value), known to every lane. */
__device__ inline double msa_dot(const float (&a)[MSA_R], const float *p, int D, int lane) {
    double s = 0;
#pragma unroll
    for (int i = 0; i < MSA_R; i++) {
        const int d = lane + 32 * i;
        if (d < D) s += (double)a[i] * (double)p[d];
    }
    return cuda_warp_sum(s);
}

/* Per lane, the dot product of the warp's staged row a (shared) with row p (global): exact fp32
 * products summed in double. The lanes-over-keys form: one key per lane, no shuffles. */
__device__ inline double msa_dot_lane(const float *a, const float *p, int D) {
    double s = 0;
    for (int d = 0; d < D; d++) s += (double)a[d] * (double)p[d];
    return s;
}

__device__ inline double msa_warp_max(double v) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Row src (D floats) into the warp's shared slot dst, read by every lane after it returns (the
 * leading __syncwarp: the slot's previous row is no longer being read). */
__device__ inline void msa_stage(float *dst, const float *src, int D, int lane) {
    __syncwarp();
    for (int d = lane; d < D; d += 32) dst[d] = src[d];
    __syncwarp();
}

/* Dies unless pos, seg (B,Tk) (seg NULL: one sample) follow the row rule (cpu_msa_check_rows),
 * q_slot (when not NULL) holds strictly increasing slots in [0, Tk), and, when idx is not NULL,
 * every idx[b,h,i,:] (B,Hs,Tq,topk) holds distinct blocks 0 .. pos[slot]/block, the local block
 * among them, then only -1 (cpu_msa_check_idx). One synchronising read of the device flag. */
void cuda_msa_check(const char *op, const int32_t *pos, const int32_t *seg, const int32_t *q_slot,
                    const int32_t *idx, int64_t B, int64_t Hs, int64_t Tq, int64_t Tk, int block,
                    int topk);

/* The inverse of a selection (cpu_msa_inverse's layout and order: for each block-start slot jb
 * of (b, h), the query rows that chose it in increasing order; off (B*Hs*(Tk+1)) then list
 * (B*Hs*Tq*topk)), in scratch of node n: the counts by integer atomics (exact), a scan per
 * (b, h), then one warp per block start writing its query rows in order by ballots:
 * deterministic. */
int32_t *cuda_msa_inverse(const mt_node *n, const int32_t *idx, const int32_t *pos,
                          const int32_t *q_slot, int64_t B, int64_t Hs, int64_t Tq, int64_t Tk,
                          int block, int topk);
