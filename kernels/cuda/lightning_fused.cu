/* lightning_fused.cu: the intra-block part of lightning's block form in the bf16 mode as one
 * fused tensor-core kernel per product (nvcuda::wmma m16n16k16, bf16 operands, fp32
 * accumulation), so the (L, L) masked scores never leave the chip. lightning_block.cu calls it
 * in place of its scores GEMM, mask kernel and intra GEMM when the node is bf16 and D is 64 or
 * 128 (cuda_lightning_fused_on); the packing, the state deltas, the scans and the readout stay
 * GEMMs there (they are small: D x D per block).
 *
 * Per block of L positions [b0, e] (m = e - b0 + 1 real rows), with A[i,j] = g^(i-j) where key j
 * is visible from query i (j <= i, no reset in (j, i], both real: j >= start_i with start_i =
 * vis[b0 + i] - b0, the rule of lightning_block.cu's mask kernel) and 0 elsewhere, every
 * intra product has the one shape
 *   out_x = sum_y R(fl(fl(a_x . b_y) A)) c_y    (R = bf16 rounding; the product in double,
 *                                               as in the CPU reference and the mask kernel)
 * over the rows x of one operand a and the rows y of two others b, c:
 *   forward   O_intra  = Pm V:      x = query i, a = Q,  b = K,  c = V    (query rows)
 *   backward  dQ_intra = dPm K:     x = query i, a = dO, b = V,  c = K    (query rows)
 *             dV_intra = Pm^T dO:   x = key j,   a = K,  b = Q,  c = dO   (key rows: A^T)
 *             dK_intra = dPm^T Q:   x = key j,   a = V,  b = dO, c = Q    (key rows: A^T)
 * so one kernel template (KEYS = the rows are keys) serves all four. A block of 4 warps owns
 * 64 rows of one (b, h, block), each warp 16, with its a rows as wmma fragments; it walks the
 * b/c tiles of BC rows (64 at D = 64, 32 at D = 128, for the 48 KiB static shared limit) that
 * can be visible (causal: up to / from the diagonal; a reset: from the first row's start), and
 * per tile computes S = a b^T (fp32), masks and rounds it through shared memory (fragment
 * layouts are unspecified; the lanes walk the columns of each row, so the shared accesses are
 * conflict-free and the row stores coalesced) and adds P~ c to its fp32 accumulators. The rows go
 * to the output (N, L, ldo) by plain stores (=), padding rows as 0: lightning_block.cu then adds
 * the inter-block GEMM onto the same fp32 buffer (beta = 1), so o = fl(fl(Pm V) + Qd R(S)) keeps
 * the CPU reference's order of the two additions; only the sum inside each product differs (fp32 in
 * fragment order here, double in the reference).
 *
 * Work: the visible (lower-triangle) tiles only, 62% of the GEMM form's full L x L squares at
 * L = 256 (the diagonal tiles are whole): forward 2 products, backward 6 (S for dV and dP for dK
 * are recomputed in their key row kernels instead of kept: no (L, L) buffer, no atomics, a fixed
 * summation order). Nothing is allocated: the caller's packed operands and output rows. Static
 * shared memory only (the emulator turns __shared__ into a static). */
#include <mma.h>
#include <string.h>

#include "cuda_ops.cuh"
#include "lightning_fused.cuh"
#include "wmma_tile.cuh"

using namespace nvcuda;

#define LTF_WARPS   4
#define LTF_THREADS (32 * LTF_WARPS)
#define LTF_BR      (16 * LTF_WARPS) /* rows x per block */

/* b/c tile rows per step: 64 at D = 64; 32 at D = 128 keeps the block under 48 KiB. Shared rows
 * are padded (LDT, LDS, LDP: 16 bytes more per row) so the fragment loads and stores of 16 rows
 * do not all start in the same bank; each stays a multiple of 16 bytes, and 16 rows a multiple
 * of 32 bytes (wmma's pointer and ldm rules). */
template <int D> struct ltf_cfg {
    static constexpr int BC = D <= 64 ? 64 : 32;
    static constexpr int LDT = D + 8;  /* bf16 operand tiles */
    static constexpr int LDS = BC + 4; /* fp32 scores */
    static constexpr int LDP = BC + 8; /* bf16 P~ */
};

struct ltf_args {
    float *out;                     /* (N, L, ldo) fp32 rows, written (=) */
    const __nv_bfloat16 *a, *b, *c; /* packed operands (N, L, ldx), bf16 */
    const int32_t *vis;             /* (B, T): first visible key of each position */
    const double *tab;              /* (H, L + 1): g^n */
    int ldo, ldx, T, H, L, nblk, ntile;
};

struct alignas(16) ltf_u128 {
    unsigned w[4];
};

/* The block copies rows [0, rows) of D bf16 (row r at src + r ld) into dst (ld LDT); rows at or
 * past n_valid (the next block's rows, or past the buffer) become zeros. */
template <int D>
__device__ inline void ltf_load_tile(__nv_bfloat16 *dst, const __nv_bfloat16 *src, int ld, int rows,
                                     int n_valid) {
    constexpr int V = D / 8, LDT = ltf_cfg<D>::LDT;
    for (int i = threadIdx.x; i < rows * V; i += blockDim.x) {
        const int r = i / V, c = i % V;
        ltf_u128 val = {{0u, 0u, 0u, 0u}};
        if (r < n_valid) val = *(const ltf_u128 *)(src + (size_t)r * ld + 8 * c);
        *(ltf_u128 *)(dst + r * LDT + 8 * c) = val;
    }
}

template <int D> struct ltf_smem {
    static constexpr int BC = ltf_cfg<D>::BC, LDT = ltf_cfg<D>::LDT;
    union alignas(32) tiles {
        struct {
            alignas(32) __nv_bfloat16 b[BC * LDT];
            alignas(32) __nv_bfloat16 c[BC * LDT];
        } bc;
        alignas(32) __nv_bfloat16 a[LTF_BR * LDT]; /* the a staging before the loop */
    } t;
    alignas(32) float s[LTF_WARPS][16 * ltf_cfg<D>::LDS];         /* S; output staging */
    alignas(32) __nv_bfloat16 p[LTF_WARPS][16 * ltf_cfg<D>::LDP]; /* R(fl(S A)) */
    double g[LTF_BR + BC]; /* the decay powers the tile pair uses */
    int col_start[BC];     /* KEYS: start of each query column */
    int row_start[LTF_BR]; /* queries: start of each row (L: none) */
};

/* Block (blk, row tile), flattened; see the header for the four uses. */
template <int D, bool KEYS> __global__ void ltf_kernel(ltf_args p) {
    constexpr int BC = ltf_cfg<D>::BC, NB = BC / 16, ND = D / 16;
    constexpr int LDT = ltf_cfg<D>::LDT, LDS = ltf_cfg<D>::LDS, LDP = ltf_cfg<D>::LDP;
    static_assert(LTF_BR <= 2 * BC, "the a staging must fit in the b and c tiles");
    static_assert(ND % NB == 0, "the output goes through the score buffer in whole chunks");
    static_assert(sizeof(ltf_smem<D>) <= 48 * 1024, "static shared memory limit");
    __shared__ ltf_smem<D> sm;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    /* the longest rows first: late query tiles, early key tiles see the most */
    const int blk = (int)(blockIdx.x / p.ntile), tix = (int)(blockIdx.x % p.ntile);
    const int tile = KEYS ? tix : p.ntile - 1 - tix;
    const int x0 = tile * LTF_BR, xw = x0 + 16 * warp;
    const int bh = blk / p.nblk, b = bh / p.H, h = bh % p.H, b0 = (blk % p.nblk) * p.L;
    const int m = min(p.L, p.T - b0); /* real rows of the block */
    const size_t base = (size_t)blk * p.L;
    const int32_t *visb = p.vis + (size_t)b * p.T + b0; /* visb[i] - b0: row i's first key */
    const double *gh = p.tab + (size_t)h * (p.L + 1);

    ltf_load_tile<D>(sm.t.a, p.a + (base + x0) * p.ldx, p.ldx, LTF_BR, p.L - x0);
    if (!KEYS)
        for (int k = threadIdx.x; k < LTF_BR; k += blockDim.x)
            sm.row_start[k] = x0 + k < m ? visb[x0 + k] - b0 : p.L; /* L: sees nothing */
    __syncthreads();
    wt_a_row af[ND];
#pragma unroll
    for (int kk = 0; kk < ND; kk++)
        wmma::load_matrix_sync(af[kk], sm.t.a + 16 * warp * LDT + 16 * kk, LDT);
    wt_acc o[ND];
#pragma unroll
    for (int n = 0; n < ND; n++) wmma::fill_fragment(o[n], 0.0f);

    float *sw = sm.s[warp];
    __nv_bfloat16 *pw = sm.p[warp];

    /* the column tiles [y0, y0 + BC) that can be visible (block-uniform bounds). Query rows:
     * from the first row's start (starts grow with the row) up to the last real row. Key
     * rows: from the diagonal on, while the tile's first query (the smallest start) can see
     * the last row of this block */
    int y0 = 0, y_end = 0;
    if (x0 < m) {
        y0 = KEYS ? x0 : (visb[x0] - b0) / BC * BC;
        y_end = KEYS ? m : min(x0 + LTF_BR, m);
    }
    for (; y0 < y_end; y0 += BC) {
        if (KEYS && visb[y0] - b0 > x0 + LTF_BR - 1) break; /* uniform: no later tile either */
        __syncthreads(); /* the previous tiles and the a staging are no longer read */
        ltf_load_tile<D>(sm.t.bc.b, p.b + (base + y0) * p.ldx, p.ldx, BC, p.L - y0);
        ltf_load_tile<D>(sm.t.bc.c, p.c + (base + y0) * p.ldx, p.ldx, BC, p.L - y0);
        /* g[k] = g^n for n = i - j = k + w0 */
        const int w0 = KEYS ? y0 - x0 - (LTF_BR - 1) : x0 - y0 - (BC - 1);
        for (int k = threadIdx.x; k < LTF_BR + BC - 1; k += blockDim.x) {
            const int nn = k + w0;
            sm.g[k] = nn >= 0 && nn <= p.L ? gh[nn] : 0.0;
        }
        if (KEYS)
            for (int k = threadIdx.x; k < BC; k += blockDim.x)
                sm.col_start[k] = y0 + k < m ? visb[y0 + k] - b0 : p.L; /* L: sees nothing */
        __syncthreads();
        /* warp-uniform skips: a tile no row of this warp can see */
        if (xw >= m) continue;
        if (!KEYS && (y0 > xw + 15 || y0 + BC - 1 < sm.row_start[16 * warp])) continue;
        if (KEYS && (y0 + BC - 1 < xw || sm.col_start[0] > xw + 15)) continue;

        /* S (16 x BC) = a_w b^T */
        wt_scores<NB, ND>(sw, LDS, af, sm.t.bc.b, LDT);
        __syncwarp();

        /* P~ = R(fl(S g^(i-j))) where visible, else 0: row rr (x = xw + rr), column c */
        for (int rr = 0; rr < 16; rr++) {
            const int x = xw + rr;
#pragma unroll
            for (int c = lane; c < BC; c += 32) {
                const int y = y0 + c, qi = KEYS ? y : x, kj = KEYS ? x : y;
                const int start = KEYS ? sm.col_start[c] : sm.row_start[16 * warp + rr];
                const bool vis = x < m && kj <= qi && kj >= start;
                const int k = KEYS ? c - 16 * warp - rr + LTF_BR - 1 : 16 * warp + rr - c + BC - 1;
                const float v = vis ? (float)((double)sw[rr * LDS + c] * sm.g[k]) : 0.0f;
                pw[rr * LDP + c] = __float2bfloat16_rn(v);
            }
        }
        __syncwarp(); /* P~ written, S read */

        /* out += P~ c */
        wt_accumulate<NB, ND>(o, pw, LDP, sm.t.bc.c, LDT);
    }

    /* the rows out (padding rows of the block as zeros), BC columns at a time through sw */
    __syncwarp();
    const int rows = min(16, p.L - xw); /* rows of this block (the tile may run past L) */
#pragma unroll
    for (int c = 0; c < ND; c += NB) {
#pragma unroll
        for (int n = 0; n < NB; n++)
            wmma::store_matrix_sync(sw + 16 * n, o[c + n], LDS, wmma::mem_row_major);
        __syncwarp();
        for (int rr = 0; rr < rows; rr++)
            for (int j = lane; j < BC; j += 32)
                p.out[(base + xw + rr) * p.ldo + 16 * c + j] = sw[rr * LDS + j];
        __syncwarp();
    }
}

/* ---- host side ---- */

static int ltf_mode = -1; /* -1: MT_LIGHTNING_FUSED not read yet */

void cuda_lightning_fused_select(int on) { ltf_mode = on ? 1 : 0; }

bool cuda_lightning_fused_on(int D) {
    if (ltf_mode < 0) { /* read once: "0" selects the GEMM form */
        const char *e = getenv("MT_LIGHTNING_FUSED");
        ltf_mode = e && !strcmp(e, "0") ? 0 : 1;
    }
    return ltf_mode == 1 && (D == 64 || D == 128);
}

void cuda_lightning_fused_intra(const char *what, float *out, int ldo, const __nv_bfloat16 *a,
                                const __nv_bfloat16 *b, const __nv_bfloat16 *c, int ldx,
                                bool key_rows, const int32_t *vis, const double *tab, int B, int T,
                                int H, int D, int L, int nblk) {
    MT_CHECK(D == 64 || D == 128, "lightning (cuda fused): D = %d (64 or 128)", D);
    const int ntile = (L + LTF_BR - 1) / LTF_BR;
    const int64_t blocks = (int64_t)B * H * nblk * ntile;
    MT_CHECK(blocks <= INT32_MAX, "lightning (cuda fused): B=%d H=%d T=%d: %lld blocks", B, H, T,
             (long long)blocks);
    if (blocks == 0) return;
    const ltf_args p = {out, a, b, c, vis, tab, ldo, ldx, T, H, L, nblk, ntile};
    /* launched through a pointer: the emulator's <<< >>> rewrite needs a plain name */
    void (*kern)(ltf_args) = D == 64 ? (key_rows ? ltf_kernel<64, true> : ltf_kernel<64, false>)
                                     : (key_rows ? ltf_kernel<128, true> : ltf_kernel<128, false>);
    kern<<<(unsigned)blocks, LTF_THREADS>>>(p);
    CUDA_LAUNCH_CHECK(what);
}
