/* attention_flash.cu: causal GQA softmax attention with segment ids in the bf16 mode
 * (mt_ctx.compute_dtype = MT_BF16, node ip[0]), flash-attention-2 style on tensor cores
 * (nvcuda::wmma m16n16k16, bf16 operands, fp32 accumulation). The rounding points are those of
 * the CPU reference (kernels/cpu/attention.c, header): q, k, v, dout, p and ds are bf16; scores,
 * softmax statistics, lse, delta, dp, ds before rounding and every accumulation are fp32.
 *
 * Forward: one block of 4 warps per 64 query rows of one (b, h), each warp 16 rows; the loop
 * walks K/V tiles of BC rows (64 at D = 64, 32 at D = 128, for the 48 KiB static shared limit)
 * up to the diagonal (causal tile skipping; a warp whose rows all precede a tile skips its
 * math). S = Q K^T per warp on tensor cores, then the online softmax in fp32 through shared
 * memory (fragment layouts are unspecified, so per-row work always goes through memory): two
 * lanes per row, the running maximum m is updated lazily (only when a tile's maximum exceeds it
 * by more than 2^8, so p~ = exp(x - m) <= 256 stays exact in range and the O rescale, a round
 * trip of O through shared memory, is rare). With segment ids, a K/V tile whose id range does
 * not meet the query tile's is skipped by the whole block (packed samples: the tiles of other
 * samples; the backward skips query tiles the same way). p~ is rounded to bf16 for O += P V; l sums
 * the unrounded p~. So p~ is rounded against the running maximum, not the final one as on the CPU:
 * rounding-level differences that the bf16 rule of tests/gpu/gpu_ops.c allows.
 *
 * Backward: delta = rowsum(bf16(dout) o out) first (one warp per row), then one block per 64
 * kv rows of one (b, kv head), looping over the H/Hkv query heads of the group and the query
 * tiles (32 rows) from the diagonal on: P^T = exp(K Q^T - lse) (recomputed), dV += P^T dO,
 * dP^T = V dO^T, dS^T = P^T (dP^T - delta), dK += dS^T Q, all per warp on 16 kv rows, with
 * dK and dV kept in fp32 fragments until the end (one writer per row: plain +=). dQ = dS K by
 * default comes from a second kernel (flash_dq_kernel: per query tile, the K/V tiles in a fixed
 * order, S and dP recomputed, one writer per row), so every gradient is summed in an order fixed
 * by the shapes and a run repeats its bits (40% more tensor work in the backward; see the
 * kernel for the alternatives' cost). MT_ATTENTION_DETERMINISTIC=0 takes the flash-attention-2
 * choice instead: dQ summed over the kv tiles with fp32 atomicAdd inside the kv kernel, in an
 * order that changes from run to run.
 *
 * Scratch (node scratch, per call): bf16 copies of q, k, v (and dout in the backward) and B*H*T
 * floats of delta. Static shared memory only (the emulator turns __shared__ into a static). */
#include <mma.h>
#include <stdlib.h>
#include <string.h>

#include "attention_flash.cuh"
#include "wmma_tile.cuh"

using namespace nvcuda;

#define FLASH_WARPS   4
#define FLASH_THREADS (32 * FLASH_WARPS)
#define FLASH_BR      (16 * FLASH_WARPS) /* query rows per forward block */
#define FLASH_BKV     (16 * FLASH_WARPS) /* kv rows per backward block */
#define FLASH_BQ      32                 /* query rows per backward step */
#define FLASH_TAU     8.0f               /* lazy rescale threshold, log2 units */
#define FLASH_LOG2E   1.4426950408889634f
#define FLASH_LN2     0.6931471805599453f

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major> flash_a_col;

struct flash_dims {
    int64_t B, T, H, Hkv;
    float scale, scale_log2; /* scale and scale log2(e): scores in log2 units for exp2f */
};

/* K/V tile rows per forward (and dQ) step: 64 at D = 64; 32 at D = 128 keeps the block under
 * 48 KiB. Shared rows are padded by 16 bytes (LDT for the bf16 operand tiles, LDS for fp32
 * scores, LDP for bf16 P or dS), as in lightning_fused.cu: a row of D = 64 or 128 bf16 (or of 32
 * or 64 floats) is a multiple of 128 bytes, so the rows a fragment load or store touches would
 * all start in the same bank; padded, consecutive rows start 4 banks apart. Each stays a
 * multiple of 16 bytes and 16 rows a multiple of 32 bytes (wmma's ldm and pointer rules). The
 * kv kernel's fp32 buffer (LDB) stays unpadded: padded it would take that kernel past 48 KiB at
 * D = 128. Fragments only store to it, and its per-element passes read it a lane per column
 * (BQ = 32 columns), so those reads hit 32 banks; the forward and dQ kernels' two lanes per
 * row read their padded buffers 4 ways conflicted (16 rows over 8 bank offsets). */
template <int D> struct flash_cfg {
    static constexpr int BC = D <= 64 ? 64 : 32;
    static constexpr int LDT = D + 8;  /* bf16 q, k, v, dout tiles */
    static constexpr int LDS = BC + 4; /* fp32 scores (forward, dQ kernel) */
    static constexpr int LDP = BC + 8; /* bf16 P (forward), dS (dQ kernel) */
};
#define FLASH_LDPB (FLASH_BQ + 8) /* bf16 P^T / dS^T of the kv kernel */
#define FLASH_LDB  FLASH_BQ       /* its fp32 buffer, unpadded (see flash_cfg) */

static __device__ inline int64_t flash_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* 16 bytes: eight bf16 values moved at once */
struct alignas(16) flash_u128 {
    unsigned w[4];
};

/* The block copies rows [0, rows) of D bf16 (row r at src + r stride) into dst (ld LDT); rows at
 * or past n_valid become zeros (a padded tile must hold finite values: 0 * garbage may be NaN).
 * The 8 padding bf16 of a row are never read. */
template <int D>
__device__ inline void flash_load_tile(__nv_bfloat16 *dst, const __nv_bfloat16 *src, int64_t stride,
                                       int rows, int64_t n_valid) {
    constexpr int V = D / 8, LDT = flash_cfg<D>::LDT;
    for (int i = threadIdx.x; i < rows * V; i += blockDim.x) {
        const int r = i / V, c = i % V;
        flash_u128 val = {{0u, 0u, 0u, 0u}};
        if (r < n_valid) val = *(const flash_u128 *)(src + r * stride + 8 * c);
        *(flash_u128 *)(dst + r * LDT + 8 * c) = val;
    }
}

/* 1 when any lane of the warp passes a non-zero flag, on every lane */
static __device__ inline int flash_warp_any(int v) {
    for (int o = 16; o > 0; o >>= 1) v |= __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Packed segments: the smallest and largest id among positions [start, start + n), on every
 * lane (every warp of a block computes the same, so a skip decided from it is block-uniform). */
static __device__ inline int2 flash_seg_range(const int32_t *segb, int64_t start, int64_t n,
                                              int lane) {
    int lo = 0x7fffffff, hi = -0x7fffffff - 1;
    for (int64_t i = lane; i < n; i += 32) {
        lo = min(lo, (int)segb[start + i]);
        hi = max(hi, (int)segb[start + i]);
    }
    return make_int2(cuda_warp_min(lo), cuda_warp_max(hi));
}

/* Id ranges that do not meet: no position of one tile shares a segment with the other, so the
 * tile pair is fully masked (exact for any ids: equal ids lie in both ranges). */
static __device__ inline bool flash_seg_apart(int2 a, int2 b) { return a.y < b.x || b.y < a.x; }

/* ---- forward ---- */

template <int D> struct flash_fwd_smem {
    static constexpr int BC = flash_cfg<D>::BC, LDT = flash_cfg<D>::LDT;
    union alignas(32) tiles {
        struct {
            alignas(32) __nv_bfloat16 k[BC * LDT];
            alignas(32) __nv_bfloat16 v[BC * LDT];
        } kv;
        alignas(32) __nv_bfloat16 q[FLASH_BR * LDT]; /* the Q (and dO) staging before the loop */
    } t;
    alignas(32) float s[FLASH_WARPS][16 * flash_cfg<D>::LDS];         /* scores; O staging */
    alignas(32) __nv_bfloat16 p[FLASH_WARPS][16 * flash_cfg<D>::LDP]; /* bf16(p~), or dS */
    int seg_k[BC];
};

/* K/V tile kv0 (BC rows) and its segment ids into the block's shared memory, between two
 * barriers (before: the previous tile, or the Q and dO staging, is no longer read), for the
 * forward and the dQ kernel; false, with nothing loaded and no barrier, when its id range does
 * not meet the query tile's (packed batches: a tile of other samples only, skipped by the whole
 * block). */
template <int D>
__device__ inline bool flash_stage_kv(flash_fwd_smem<D> &sm, const __nv_bfloat16 *kb,
                                      const __nv_bfloat16 *vb, int64_t kv_stride,
                                      const int32_t *segb, int2 q_ids, int64_t kv0, int64_t T,
                                      int lane) {
    constexpr int BC = flash_cfg<D>::BC;
    if (segb && flash_seg_apart(q_ids, flash_seg_range(segb, kv0, flash_min(BC, T - kv0), lane)))
        return false;
    __syncthreads();
    flash_load_tile<D>(sm.t.kv.k, kb + kv0 * kv_stride, kv_stride, BC, T - kv0);
    flash_load_tile<D>(sm.t.kv.v, vb + kv0 * kv_stride, kv_stride, BC, T - kv0);
    for (int i = threadIdx.x; i < BC; i += blockDim.x)
        sm.seg_k[i] = segb && kv0 + i < T ? segb[kv0 + i] : 0;
    __syncthreads();
    return true;
}

/* Block (query tile, b h): out rows and lse (B,H,T) or NULL. q (B,T,H,D), k, v (B,T,Hkv,D) in
 * bf16; seg (B,T) or NULL. */
template <int D>
__global__ void flash_fwd_kernel(float *out, float *lse, const __nv_bfloat16 *q,
                                 const __nv_bfloat16 *k, const __nv_bfloat16 *v, const int32_t *seg,
                                 flash_dims a) {
    constexpr int BC = flash_cfg<D>::BC, NB = BC / 16, ND = D / 16, HC = BC / 2;
    constexpr int LDT = flash_cfg<D>::LDT, LDS = flash_cfg<D>::LDS, LDP = flash_cfg<D>::LDP;
    static_assert(FLASH_BR <= 2 * BC, "the Q staging must fit in the K/V tiles");
    static_assert(ND % NB == 0, "O goes through the score buffer in whole chunks");
    static_assert(sizeof(flash_fwd_smem<D>) <= 48 * 1024, "static shared memory limit");
    __shared__ flash_fwd_smem<D> sm;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t n_qt = (a.T + FLASH_BR - 1) / FLASH_BR;
    const int64_t q0 = (n_qt - 1 - (int64_t)blockIdx.x) * FLASH_BR; /* longest rows first */
    const int64_t b = blockIdx.y / a.H, h = blockIdx.y % a.H, g = h / (a.H / a.Hkv);
    const int64_t row0 = q0 + 16 * warp, q_stride = a.H * D, kv_stride = a.Hkv * D;
    const __nv_bfloat16 *qb = q + (b * a.T * a.H + h) * D;
    const __nv_bfloat16 *kb = k + (b * a.T * a.Hkv + g) * D, *vb = v + (b * a.T * a.Hkv + g) * D;
    const int32_t *segb = seg ? seg + b * a.T : NULL;

    flash_load_tile<D>(sm.t.q, qb + q0 * q_stride, q_stride, FLASH_BR, a.T - q0);
    __syncthreads();
    wt_a_row qa[ND];
#pragma unroll
    for (int kk = 0; kk < ND; kk++)
        wmma::load_matrix_sync(qa[kk], sm.t.q + 16 * warp * LDT + 16 * kk, LDT);
    wt_acc o[ND];
#pragma unroll
    for (int n = 0; n < ND; n++) wmma::fill_fragment(o[n], 0.0f);

    /* lanes 2r and 2r+1 own row r of the warp's 16: columns [c0, c0 + HC) each */
    const int r = lane >> 1, c0 = (lane & 1) * HC;
    const int64_t t = row0 + r;
    const bool row_ok = t < a.T; /* padding rows see nothing and are never written */
    const int32_t seg_t = segb && row_ok ? segb[t] : 0;
    float m = -INFINITY, l = 0.0f; /* running (lazy) maximum in log2 units; sum of p~ */
    bool o_live = false;           /* O holds a product: a rescale must touch it */
    float *sw = sm.s[warp];
    __nv_bfloat16 *pw = sm.p[warp];
    const int64_t kv_end = flash_min(a.T, q0 + FLASH_BR);
    const int2 q_ids =
        segb ? flash_seg_range(segb, q0, flash_min(FLASH_BR, a.T - q0), lane) : make_int2(0, 0);
    for (int64_t kv0 = 0; kv0 < kv_end; kv0 += BC) {
        if (!flash_stage_kv<D>(sm, kb, vb, kv_stride, segb, q_ids, kv0, a.T, lane)) continue;
        if (kv0 > row0 + 15) continue; /* every row of this warp precedes the tile */

        /* S (16 x BC) = Q K^T */
        wt_scores<NB, ND>(sw, LDS, qa, sm.t.kv.k, LDT);
        __syncwarp();

        /* online softmax of the lane's half row, fp32 */
        float x[HC], tmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < HC; j++) {
            const int c = c0 + j;
            const int64_t s = kv0 + c;
            const bool vis = row_ok && s <= t && (!segb || sm.seg_k[c] == seg_t);
            x[j] = vis ? sw[r * LDS + c] * a.scale_log2 : -INFINITY;
            tmax = fmaxf(tmax, x[j]);
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        float alpha = 1.0f;
        if (tmax > m + FLASH_TAU) {  /* also the row's first visible tile (m = -inf) */
            alpha = exp2f(m - tmax); /* 0 when m = -inf */
            m = tmax;
        }
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < HC; j++) {
            const float p = x[j] == -INFINITY ? 0.0f : exp2f(x[j] - m);
            pw[r * LDP + c0 + j] = __float2bfloat16_rn(p);
            sum += p;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * alpha + sum;
        const int rescale = flash_warp_any(alpha != 1.0f) && o_live;
        __syncwarp(); /* P written, S read */

        /* O rows times alpha, a chunk of BC columns at a time through the score buffer */
        if (rescale) {
#pragma unroll
            for (int c = 0; c < ND; c += NB) {
#pragma unroll
                for (int n = 0; n < NB; n++)
                    wmma::store_matrix_sync(sw + 16 * n, o[c + n], LDS, wmma::mem_row_major);
                __syncwarp();
#pragma unroll
                for (int j = 0; j < HC; j++) sw[r * LDS + c0 + j] *= alpha;
                __syncwarp();
#pragma unroll
                for (int n = 0; n < NB; n++)
                    wmma::load_matrix_sync(o[c + n], sw + 16 * n, LDS, wmma::mem_row_major);
                __syncwarp();
            }
        }

        /* O += P V */
        wt_accumulate<NB, ND>(o, pw, LDP, sm.t.kv.v, LDT);
        o_live = true;
    }

    /* out = O / l, lse = (m + log2 l) ln 2; l >= 2^-8: the row sees itself */
    __syncwarp();
    float *orow = out + ((b * a.T + t) * a.H + h) * D;
#pragma unroll
    for (int c = 0; c < ND; c += NB) {
#pragma unroll
        for (int n = 0; n < NB; n++)
            wmma::store_matrix_sync(sw + 16 * n, o[c + n], LDS, wmma::mem_row_major);
        __syncwarp();
        if (row_ok)
#pragma unroll
            for (int j = 0; j < HC; j++) orow[16 * c + c0 + j] = sw[r * LDS + c0 + j] / l;
        __syncwarp();
    }
    if (lse && row_ok && c0 == 0) lse[(b * a.H + h) * a.T + t] = (m + log2f(l)) * FLASH_LN2;
}

/* ---- backward ---- */

/* delta[b,h,t] = sum_d bf16(dout) out (fp32): one warp per row (b,t,h) */
__global__ void flash_delta_kernel(float *delta, const __nv_bfloat16 *dout, const float *out,
                                   int64_t rows, int64_t T, int64_t H, int D) {
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    float s = 0.0f;
    for (int d = lane; d < D; d += 32) s += __bfloat162float(dout[row * D + d]) * out[row * D + d];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const int64_t b = row / (T * H), t = (row / H) % T, h = row % H;
    if (lane == 0) delta[(b * H + h) * T + t] = s;
}

/* grow[0..D) += row r of the warp's 16 x D accumulator tiles (lanes 2r, 2r+1: columns c0 ..
 * c0 + BQ/2 of each BQ-column chunk), staged through the warp's buffer sw (16 x BQ floats).
 * A function over the whole array, fully unrolled: selecting dK or dV through a pointer would
 * put the fragments in local memory. */
template <int D>
__device__ inline void flash_add_rows(float *grow, wt_acc (&acc)[D / 16], float *sw, bool ok, int r,
                                      int c0) {
    constexpr int NQ = FLASH_BQ / 16, HC = FLASH_BQ / 2;
#pragma unroll
    for (int c = 0; c < D / 16; c += NQ) {
        __syncwarp(); /* the previous chunk is read */
#pragma unroll
        for (int n = 0; n < NQ; n++)
            wmma::store_matrix_sync(sw + 16 * n, acc[c + n], FLASH_BQ, wmma::mem_row_major);
        __syncwarp();
        if (ok)
#pragma unroll
            for (int jj = 0; jj < HC; jj++) grow[16 * c + c0 + jj] += sw[r * FLASH_BQ + c0 + jj];
    }
}

template <int D> struct flash_bwd_smem {
    static constexpr int LDT = flash_cfg<D>::LDT;
    alignas(32) __nv_bfloat16 k[FLASH_BKV * LDT];
    union alignas(32) tiles {
        struct {
            alignas(32) __nv_bfloat16 q[FLASH_BQ * LDT];
            alignas(32) __nv_bfloat16 dout[FLASH_BQ * LDT];
        } qd;
        alignas(32) __nv_bfloat16 v[FLASH_BKV * LDT]; /* the V staging before the loop */
    } u;
    alignas(32) float s[FLASH_WARPS][16 * FLASH_LDB];      /* S^T, dP^T; dQ, dK, dV staging */
    alignas(32) __nv_bfloat16 pds[FLASH_BKV * FLASH_LDPB]; /* P^T, then dS^T (kv x query) */
    float lse2[FLASH_BQ], delta[FLASH_BQ];                 /* lse in log2 units */
    int seg_q[FLASH_BQ], seg_k[FLASH_BKV];
};

/* Block (kv tile, b g). Gradients may be NULL (skipped); dk and dv +=; dq gets atomicAdd when
 * DQ (MT_ATTENTION_DETERMINISTIC=0), else it is left to flash_dq_kernel (dq ignored). */
template <int D, bool DQ>
__global__ void flash_bwd_kernel(float *dq, float *dk, float *dv, const __nv_bfloat16 *q,
                                 const __nv_bfloat16 *k, const __nv_bfloat16 *v,
                                 const __nv_bfloat16 *dout, const float *lse, const float *delta,
                                 const int32_t *seg, flash_dims a) {
    constexpr int ND = D / 16, NQ = FLASH_BQ / 16, LDT = flash_cfg<D>::LDT;
    static_assert(FLASH_BQ == 32, "a lane per query column");
    static_assert(FLASH_BKV == 2 * FLASH_BQ, "the V staging must fit in the Q and dO tiles");
    static_assert(ND % NQ == 0, "dK and dV go through the score buffer in whole chunks");
    static_assert(sizeof(flash_bwd_smem<D>) <= 48 * 1024, "static shared memory limit");
    __shared__ flash_bwd_smem<D> sm;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t b = blockIdx.y / a.Hkv, g = blockIdx.y % a.Hkv, rep = a.H / a.Hkv;
    const int kv0 = (int)blockIdx.x * FLASH_BKV, j0 = kv0 + 16 * warp, T = (int)a.T;
    const int64_t q_stride = a.H * D, kv_stride = a.Hkv * D;
    const int32_t *segb = seg ? seg + b * a.T : NULL;
    const __nv_bfloat16 *kb = k + ((b * a.T + kv0) * a.Hkv + g) * D;
    const __nv_bfloat16 *vb = v + ((b * a.T + kv0) * a.Hkv + g) * D;

    flash_load_tile<D>(sm.k, kb, kv_stride, FLASH_BKV, a.T - kv0);
    flash_load_tile<D>(sm.u.v, vb, kv_stride, FLASH_BKV, a.T - kv0);
    for (int i = threadIdx.x; i < FLASH_BKV; i += blockDim.x)
        sm.seg_k[i] = segb && kv0 + i < a.T ? segb[kv0 + i] : 0;
    __syncthreads();
    wt_a_row va[ND]; /* the warp's 16 V rows, as the left operand of dP^T = V dO^T */
#pragma unroll
    for (int kk = 0; kk < ND; kk++)
        wmma::load_matrix_sync(va[kk], sm.u.v + 16 * warp * LDT + 16 * kk, LDT);
    wt_acc dka[ND], dva[ND];
#pragma unroll
    for (int n = 0; n < ND; n++) {
        wmma::fill_fragment(dka[n], 0.0f);
        wmma::fill_fragment(dva[n], 0.0f);
    }

    /* lane l owns query column l of each query tile, for all 16 kv rows of the warp: its reads
     * of the fp32 buffer (ld BQ = 32 floats, unpadded: see flash_cfg) hit 32 banks, and lse,
     * delta and the segment id are one value per lane and step */
    const int32_t *seg_w = sm.seg_k + 16 * warp;
    const int2 kv_ids =
        segb ? flash_seg_range(segb, kv0, flash_min(FLASH_BKV, a.T - kv0), lane) : make_int2(0, 0);
    float *sw = sm.s[warp];
    __nv_bfloat16 *pw = sm.pds + 16 * warp * FLASH_LDPB;
    for (int64_t h = g * rep; h < (g + 1) * rep; h++) {
        const __nv_bfloat16 *qh = q + (b * a.T * a.H + h) * D;
        const __nv_bfloat16 *dh = dout + (b * a.T * a.H + h) * D;
        const float *lse_h = lse + (b * a.H + h) * a.T, *delta_h = delta + (b * a.H + h) * a.T;
        for (int i0 = kv0 / FLASH_BQ * FLASH_BQ; i0 < T; i0 += FLASH_BQ) {
            /* a query tile of other samples only: skipped by the whole block */
            if (segb && flash_seg_apart(
                            kv_ids, flash_seg_range(segb, i0, flash_min(FLASH_BQ, a.T - i0), lane)))
                continue;
            __syncthreads(); /* the previous step (or the V staging) is no longer read */
            flash_load_tile<D>(sm.u.qd.q, qh + i0 * q_stride, q_stride, FLASH_BQ, a.T - i0);
            flash_load_tile<D>(sm.u.qd.dout, dh + i0 * q_stride, q_stride, FLASH_BQ, a.T - i0);
            for (int i = threadIdx.x; i < FLASH_BQ; i += blockDim.x) {
                const bool in = i0 + i < a.T;
                sm.lse2[i] = in ? lse_h[i0 + i] * FLASH_LOG2E : 0.0f;
                sm.delta[i] = in ? delta_h[i0 + i] : 0.0f;
                sm.seg_q[i] = segb && in ? segb[i0 + i] : 0;
            }
            __syncthreads();
            /* the warp's kv rows see some query row of this tile */
            const bool active = j0 < a.T && j0 <= i0 + FLASH_BQ - 1;
            if (active) {
                /* S^T (16 x BQ) = K_w Q^T (K_w from shared memory: registers are short) */
                wt_scores_mem<NQ, ND>(sw, FLASH_LDB, sm.k + 16 * warp * LDT, LDT, sm.u.qd.q, LDT);
                __syncwarp();
                /* P^T = exp(S^T scale - lse), masked; bf16 copy for the products */
                const int i = i0 + lane;
                const float lse2_i = sm.lse2[lane];
                const int32_t seg_i = sm.seg_q[lane];
                float p[16];
#pragma unroll
                for (int rr = 0; rr < 16; rr++) {
                    const bool vis = j0 + rr <= i && i < T && (!segb || seg_w[rr] == seg_i);
                    p[rr] = vis ? exp2f(sw[rr * FLASH_LDB + lane] * a.scale_log2 - lse2_i) : 0.0f;
                    pw[rr * FLASH_LDPB + lane] = __float2bfloat16_rn(p[rr]);
                }
                __syncwarp();
                /* dV += P^T dO */
                wt_accumulate<NQ, ND>(dva, pw, FLASH_LDPB, sm.u.qd.dout, LDT);
                /* dP^T (16 x BQ) = V_w dO^T */
                wt_scores<NQ, ND>(sw, FLASH_LDB, va, sm.u.qd.dout, LDT);
                __syncwarp(); /* dP^T stored, and P^T read by every lane before it is replaced */
                              /* dS^T = P^T (dP^T - delta) */
                const float delta_i = sm.delta[lane];
#pragma unroll
                for (int rr = 0; rr < 16; rr++) {
                    const float ds = p[rr] * (sw[rr * FLASH_LDB + lane] - delta_i);
                    pw[rr * FLASH_LDPB + lane] = __float2bfloat16_rn(ds);
                }
                __syncwarp();
                /* dK += dS^T Q (scaled at the end) */
                wt_accumulate<NQ, ND>(dka, pw, FLASH_LDPB, sm.u.qd.q, LDT);
            } else {
                /* no visible pair: the warp's dS^T rows are zero for the dQ product */
#pragma unroll
                for (int rr = 0; rr < 16; rr++)
                    pw[rr * FLASH_LDPB + lane] = __float2bfloat16_rn(0.0f);
            }
            if (!DQ || !dq) continue; /* uniform: the next step starts with a barrier */
            __syncthreads();          /* dS^T complete */
            /* dQ (BQ x D) += scale dS K: dS is dS^T read column-major; one 16x16 tile per
             * warp at a time, added atomically (other kv tiles add to the same rows) */
            for (int f = warp; f < NQ * ND; f += FLASH_WARPS) {
                const int mi = f / ND, ni = f % ND;
                wt_acc acc;
                wmma::fill_fragment(acc, 0.0f);
#pragma unroll
                for (int kk = 0; kk < FLASH_BKV / 16; kk++) {
                    flash_a_col dsa;
                    wmma::load_matrix_sync(dsa, sm.pds + 16 * kk * FLASH_LDPB + 16 * mi,
                                           FLASH_LDPB);
                    wt_b_row kf;
                    wmma::load_matrix_sync(kf, sm.k + 16 * kk * LDT + 16 * ni, LDT);
                    wmma::mma_sync(acc, dsa, kf, acc);
                }
                for (int e = 0; e < acc.num_elements; e++) acc.x[e] *= a.scale;
                __syncwarp(); /* the previous tile's atomics have read sw */
                wmma::store_matrix_sync(sw, acc, 16, wmma::mem_row_major);
                __syncwarp();
                float *dq_tile = dq + ((b * a.T + i0 + 16 * mi) * a.H + h) * D + 16 * ni;
                for (int e = lane; e < 256; e += 32)
                    if (i0 + 16 * mi + e / 16 < T)
                        atomicAdd(dq_tile + (e / 16) * q_stride + e % 16, sw[e]);
            }
        }
    }

    /* dK (times scale) and dV into the gradients */
    if (j0 >= a.T) return; /* uniform: no barrier follows */
    const int r = lane >> 1, c0 = (lane & 1) * (FLASH_BQ / 2), j = j0 + r;
    const int64_t kv_row = ((b * a.T + j) * a.Hkv + g) * D;
    if (dk) {
#pragma unroll
        for (int n = 0; n < ND; n++)
            for (int e = 0; e < dka[n].num_elements; e++) dka[n].x[e] *= a.scale;
        flash_add_rows<D>(dk + kv_row, dka, sw, j < a.T, r, c0);
    }
    if (dv) flash_add_rows<D>(dv + kv_row, dva, sw, j < a.T, r, c0);
}

/* dQ alone, in a fixed order (the default; MT_ATTENTION_DETERMINISTIC=0 takes the atomics
 * above instead): the forward's geometry, a block of 4 warps per 64 query rows of one (b, h),
 * each warp 16 rows with Q and dO as fragments, walking the K/V tiles up to the diagonal in
 * order: S = Q K^T and dP = dO V^T recomputed, P = exp(S scale - lse), dS = P (dP - delta) in
 * fp32 rounded to bf16 (the kv kernel's rounding points), dQ += dS K in fp32 fragments; then
 * dq += scale dQ, one writer per row.
 * Cost: per (query tile, kv tile) pair the fused kernel makes 5 products (S, dV, dP, dK, dQ);
 * the kv kernel without dQ makes 4 and this one 3: 7 against 5, 40% more tensor work in the
 * backward (9 against 7 with the forward's 2). The alternative, per-tile partials reduced in a
 * fixed order, would store what the atomics add: a D-float partial per query row and kv tile
 * at or below it, T^2/128 rows per (b, h): 4.3 GB per head at T = 32k, D = 128 (206 GB for
 * 48 heads), where dq itself is 16 MiB per head. The atomics' read-modify-writes of those same
 * rows in L2 are gone too. */
template <int D>
__global__ void flash_dq_kernel(float *dq, const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                                const __nv_bfloat16 *v, const __nv_bfloat16 *dout, const float *lse,
                                const float *delta, const int32_t *seg, flash_dims a) {
    constexpr int BC = flash_cfg<D>::BC, NB = BC / 16, ND = D / 16, HC = BC / 2;
    constexpr int LDT = flash_cfg<D>::LDT, LDS = flash_cfg<D>::LDS, LDP = flash_cfg<D>::LDP;
    static_assert(ND % NB == 0, "dQ goes through the score buffer in whole chunks");
    __shared__ flash_fwd_smem<D> sm;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t n_qt = (a.T + FLASH_BR - 1) / FLASH_BR;
    const int64_t q0 = (n_qt - 1 - (int64_t)blockIdx.x) * FLASH_BR; /* longest rows first */
    const int64_t b = blockIdx.y / a.H, h = blockIdx.y % a.H, g = h / (a.H / a.Hkv);
    const int64_t row0 = q0 + 16 * warp, q_stride = a.H * D, kv_stride = a.Hkv * D;
    const __nv_bfloat16 *qb = q + (b * a.T * a.H + h) * D, *db = dout + (b * a.T * a.H + h) * D;
    const __nv_bfloat16 *kb = k + (b * a.T * a.Hkv + g) * D, *vb = v + (b * a.T * a.Hkv + g) * D;
    const int32_t *segb = seg ? seg + b * a.T : NULL;

    /* Q, then dO, staged through the K/V tiles into fragments */
    wt_a_row qa[ND], da[ND];
    flash_load_tile<D>(sm.t.q, qb + q0 * q_stride, q_stride, FLASH_BR, a.T - q0);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < ND; kk++)
        wmma::load_matrix_sync(qa[kk], sm.t.q + 16 * warp * LDT + 16 * kk, LDT);
    __syncthreads();
    flash_load_tile<D>(sm.t.q, db + q0 * q_stride, q_stride, FLASH_BR, a.T - q0);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < ND; kk++)
        wmma::load_matrix_sync(da[kk], sm.t.q + 16 * warp * LDT + 16 * kk, LDT);
    wt_acc dqa[ND];
#pragma unroll
    for (int n = 0; n < ND; n++) wmma::fill_fragment(dqa[n], 0.0f);

    /* lanes 2r and 2r+1 own row r of the warp's 16: columns [c0, c0 + HC) each */
    const int r = lane >> 1, c0 = (lane & 1) * HC;
    const int64_t t = row0 + r;
    const bool row_ok = t < a.T;
    const int32_t seg_t = segb && row_ok ? segb[t] : 0;
    const float lse2 = row_ok ? lse[(b * a.H + h) * a.T + t] * FLASH_LOG2E : 0.0f;
    const float dlt = row_ok ? delta[(b * a.H + h) * a.T + t] : 0.0f;
    float *sw = sm.s[warp];
    __nv_bfloat16 *pw = sm.p[warp];
    const int64_t kv_end = flash_min(a.T, q0 + FLASH_BR);
    const int2 q_ids =
        segb ? flash_seg_range(segb, q0, flash_min(FLASH_BR, a.T - q0), lane) : make_int2(0, 0);
    for (int64_t kv0 = 0; kv0 < kv_end; kv0 += BC) {
        if (!flash_stage_kv<D>(sm, kb, vb, kv_stride, segb, q_ids, kv0, a.T, lane)) continue;
        if (kv0 > row0 + 15) continue; /* every row of this warp precedes the tile */

        /* P = exp(S scale - lse), masked, S = Q K^T */
        wt_scores<NB, ND>(sw, LDS, qa, sm.t.kv.k, LDT);
        __syncwarp();
        float p[HC];
#pragma unroll
        for (int j = 0; j < HC; j++) {
            const int c = c0 + j;
            const int64_t s = kv0 + c;
            const bool vis = row_ok && s <= t && (!segb || sm.seg_k[c] == seg_t);
            p[j] = vis ? exp2f(sw[r * LDS + c] * a.scale_log2 - lse2) : 0.0f;
        }
        __syncwarp(); /* S read by every lane before dP replaces it */
        /* dP = dO V^T, then dS = P (dP - delta), bf16 */
        wt_scores<NB, ND>(sw, LDS, da, sm.t.kv.v, LDT);
        __syncwarp();
#pragma unroll
        for (int j = 0; j < HC; j++)
            pw[r * LDP + c0 + j] = __float2bfloat16_rn(p[j] * (sw[r * LDS + c0 + j] - dlt));
        __syncwarp();
        /* dQ += dS K (scaled at the end) */
        wt_accumulate<NB, ND>(dqa, pw, LDP, sm.t.kv.k, LDT);
    }

    /* dq rows += scale dQ, a chunk of BC columns at a time through the score buffer */
    __syncwarp();
    float *grow = dq + ((b * a.T + t) * a.H + h) * D;
#pragma unroll
    for (int c = 0; c < ND; c += NB) {
#pragma unroll
        for (int n = 0; n < NB; n++)
            wmma::store_matrix_sync(sw + 16 * n, dqa[c + n], LDS, wmma::mem_row_major);
        __syncwarp();
        if (row_ok)
#pragma unroll
            for (int j = 0; j < HC; j++) grow[16 * c + c0 + j] += a.scale * sw[r * LDS + c0 + j];
        __syncwarp();
    }
}

/* ---- adapters ---- */

bool cuda_attention_flash_supported(int64_t D) { return D == 64 || D == 128; }

/* MT_ATTENTION_DETERMINISTIC: 1 (default) dq by flash_dq_kernel, a fixed summation order; 0 by
 * the kv kernel's atomics (an order that changes from run to run). Read once. */
static bool flash_deterministic(void) {
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("MT_ATTENTION_DETERMINISTIC");
        MT_CHECK(!v || !*v || !strcmp(v, "0") || !strcmp(v, "1"),
                 "MT_ATTENTION_DETERMINISTIC=%s: expected 0 (dq by atomics) or 1 (the default: a "
                 "fixed order)",
                 v);
        on = !v || !*v || strcmp(v, "0") != 0;
    }
    return on != 0;
}

static flash_dims flash_node_dims(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1];
    const float scale = n->fp[0];
    flash_dims a = {q->shape[0], q->shape[1], q->shape[2], k->shape[2], scale, scale * FLASH_LOG2E};
    MT_CHECK(a.Hkv > 0 && a.H % a.Hkv == 0 && cuda_attention_flash_supported(q->shape[3]),
             "attention (cuda flash): H=%lld, Hkv=%lld, D=%lld", (long long)a.H, (long long)a.Hkv,
             (long long)q->shape[3]);
    MT_CHECK(a.B * a.H <= 65535 && a.B * a.Hkv <= 65535,
             "attention (cuda flash): B*H = %lld exceeds the grid's y range",
             (long long)(a.B * a.H));
    MT_CHECK(a.T < ((int64_t)1 << 30),
             "attention (cuda flash): T = %lld positions (tile indices "
             "are 32-bit)",
             (long long)a.T);
    return a;
}

void cuda_attention_flash_fwd(const mt_node *n) {
    flash_dims a = flash_node_dims(n);
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    const int D = (int)q->shape[3];
    if (a.B * a.T * a.H == 0) return;
    const __nv_bfloat16 *qb = cuda_bf16_operand(n, cuda_f32(q), mt_numel(q), "attention q bf16");
    const __nv_bfloat16 *kb = cuda_bf16_operand(n, cuda_f32(k), mt_numel(k), "attention k bf16");
    const __nv_bfloat16 *vb = cuda_bf16_operand(n, cuda_f32(v), mt_numel(v), "attention v bf16");
    /* launched through a pointer: the emulator's <<< >>> rewrite needs a plain name */
    void (*kern)(float *, float *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                 const __nv_bfloat16 *, const int32_t *, flash_dims) =
        D == 64 ? flash_fwd_kernel<64> : flash_fwd_kernel<128>;
    dim3 grid((unsigned)((a.T + FLASH_BR - 1) / FLASH_BR), (unsigned)(a.B * a.H));
    kern<<<grid, FLASH_THREADS>>>(cuda_f32(n->out), n->saved[0] ? cuda_f32(n->saved[0]) : NULL, qb,
                                  kb, vb, seg ? cuda_i32(seg) : NULL, a);
    CUDA_LAUNCH_CHECK("attention forward (flash bf16)");
}

void cuda_attention_flash_bwd(const mt_node *n) {
    flash_dims a = flash_node_dims(n);
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    const int D = (int)q->shape[3];
    const int64_t rows = a.B * a.T * a.H;
    if (rows == 0) return;
    const __nv_bfloat16 *qb = cuda_bf16_operand(n, cuda_f32(q), mt_numel(q), "attention q bf16");
    const __nv_bfloat16 *kb = cuda_bf16_operand(n, cuda_f32(k), mt_numel(k), "attention k bf16");
    const __nv_bfloat16 *vb = cuda_bf16_operand(n, cuda_f32(v), mt_numel(v), "attention v bf16");
    const __nv_bfloat16 *dob =
        cuda_bf16_operand(n, cuda_grad(n->out), rows * D, "attention dout bf16");
    float *delta = (float *)mt_node_scratch(n, sizeof(float) * (size_t)rows, "attention delta");
    flash_delta_kernel<<<(unsigned)((rows + 7) / 8), 256>>>(delta, dob, cuda_f32(n->out), rows, a.T,
                                                            a.H, D);
    CUDA_LAUNCH_CHECK("attention backward (flash delta)");
    const bool atomic = !flash_deterministic();
    float *dq = cuda_grad(q), *dk = cuda_grad(k), *dv = cuda_grad(v);
    const int32_t *segd = seg ? cuda_i32(seg) : NULL;
    const float *lse = cuda_f32(n->saved[0]);
    if (dk || dv || (dq && atomic)) {
        void (*kern)(float *, float *, float *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                     const __nv_bfloat16 *, const __nv_bfloat16 *, const float *, const float *,
                     const int32_t *, flash_dims) =
            D == 64 ? (atomic ? flash_bwd_kernel<64, true> : flash_bwd_kernel<64, false>)
                    : (atomic ? flash_bwd_kernel<128, true> : flash_bwd_kernel<128, false>);
        dim3 grid((unsigned)((a.T + FLASH_BKV - 1) / FLASH_BKV), (unsigned)(a.B * a.Hkv));
        kern<<<grid, FLASH_THREADS>>>(atomic ? dq : NULL, dk, dv, qb, kb, vb, dob, lse, delta, segd,
                                      a);
        CUDA_LAUNCH_CHECK("attention backward (flash bf16, dk dv)");
    }
    if (dq && !atomic) {
        void (*kern)(float *, const __nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                     const __nv_bfloat16 *, const float *, const float *, const int32_t *,
                     flash_dims) = D == 64 ? flash_dq_kernel<64> : flash_dq_kernel<128>;
        dim3 grid((unsigned)((a.T + FLASH_BR - 1) / FLASH_BR), (unsigned)(a.B * a.H));
        kern<<<grid, FLASH_THREADS>>>(dq, qb, kb, vb, dob, lse, delta, segd, a);
        CUDA_LAUNCH_CHECK("attention backward (flash bf16, dq)");
    }
}
