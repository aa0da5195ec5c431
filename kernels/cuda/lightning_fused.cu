/* lightning_fused.cu: lightning's block form in the bf16 mode at D = 64 or 128 as fused
 * tensor-core kernels (nvcuda::wmma m16n16k16, bf16 operands, fp32 accumulation). They read q,
 * k, v and dout where they lie (fp32, rounded to bf16 with their decays as they are staged in
 * shared memory) and write out and dqkv directly: no packed operands, no (L, L) scores and no
 * row buffers in device memory. lightning_block.cu runs them when the node is bf16 and D is 64
 * or 128 (cuda_lightning_fused_on) and keeps its GEMM form otherwise (and for
 * MT_LIGHTNING_FUSED=0). Its header has the formulas; per block of L positions [b0, e]
 * (m = e - b0 + 1 real rows, the rest padding) the steps are:
 *   forward   dS = K~^T V (ltf_state_kernel), the scan (lightning_block.cu), then per row
 *             o = Q~ R(S) + Pm V (ltf_kernel, query rows)
 *   backward  dS = K~^T V and dG = Q~^T dO, both scans, then (ltf_kernel)
 *             dq += dO~ R(S)^T + dPm K      (query rows: a = dO, b = V, c = K)
 *             dk += V~ R(G)^T + dPm^T Q     (key rows:   a = V,  b = dO, c = Q)
 *             dv += K~ R(G) + Pm^T dO       (key rows:   a = K,  b = Q,  c = dO)
 * with the decayed operands X~ rounded exactly as the pack kernel rounds them (R(fl(g x)), the
 * product in double), so every operand is the bits of the GEMM form's.
 *
 * ltf_kernel: with A[i,j] = g^(i-j) where key j is visible from query i (j <= i, no reset in
 * (j, i], both real: j >= start_i, start_i = vis[b0 + i] - b0) and 0 elsewhere, every intra
 * product is out_x = sum_y R(fl(fl(a_x . b_y) A)) c_y over the rows x of one operand and the rows
 * y of two others (KEYS: x are keys and A is transposed), so one template serves all four. A
 * block of 4 warps owns 64 rows x of one (b, h, block), each warp 16. It stages its a rows and
 * keeps them as fragments, then stages the inter operand r~ in the same place and starts its
 * accumulators with r~ op(R(St)) (St's fragments read from device memory: D x D bf16 per block,
 * shared by the block's 4 row tiles through L2). It then walks the b/c tiles of BC rows (64 at
 * D = 64, 32 at D = 128, for the 48 KiB static shared limit) that can be visible (causal: up to
 * / from the diagonal; a reset: from the first row's start), and per tile computes S = a b^T
 * (fp32), masks and rounds it through shared memory (the lanes walk the columns of each row, so
 * the accesses are conflict-free) and adds P~ c to the same accumulators. The real rows go out
 * by plain stores (=, or += into dqkv). Against the CPU reference (kernels/cpu/lightning_bf16.c)
 * only the order of fp32 sums differs: the inter and intra products share one accumulator where
 * the reference rounds each and adds them, and sums run in fragment order, not in double.
 *
 * Work: the visible (lower-triangle) tiles only, 62% of the full L x L squares at L = 256;
 * forward 2 intra products, backward 6 (S for dV and dP for dK recomputed in their key-row
 * kernels: no (L, L) buffer, no atomics, a fixed summation order). Device memory traffic per
 * position and head: the operands' fp32 rows once per kernel (plus L2-served re-reads of the
 * b/c tiles), the result row once, and the D x D states. Static shared memory only (the
 * emulator turns __shared__ into a static). */
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

struct alignas(16) ltf_u128 {
    unsigned w[4];
};
struct alignas(16) ltf_f4 {
    float v[4];
};

/* Where one block (b, h, n) of the node lies, and its decay rules. */
struct ltf_blk {
    int b, h, b0, m, e;
    int first, from;  /* first reset (e + 1: none); start of the k decay (last reset, else b0) */
    const double *gh; /* g^n of head h */
};

__device__ inline ltf_blk ltf_blk_at(const ltf_geom &g, int blk) {
    ltf_blk k;
    const int bh = blk / g.nblk, n = blk % g.nblk;
    k.b = bh / g.H;
    k.h = bh % g.H;
    k.b0 = n * g.L;
    k.m = min(g.L, g.T - k.b0);
    k.e = k.b0 + k.m - 1;
    const int2 inf = g.info[(size_t)k.b * g.nblk + n];
    k.first = inf.x;
    k.from = inf.y >= 0 ? inf.y : k.b0;
    k.gh = g.tab + (size_t)k.h * (g.L + 1);
    return k;
}

/* Stages rows [r0, r0 + rows) of the block (x = r0 + r at t = b0 + x), columns [c0, c0 + COLS)
 * of operand s, into dst (row r at dst + r ld) as bf16 with the decay of `kind`; rows past the
 * block's real ones, and rows the decay's reset rule cuts, become zeros. */
template <int COLS>
__device__ inline void ltf_stage(__nv_bfloat16 *dst, int ld, const ltf_rows &s, const ltf_blk &k,
                                 const ltf_geom &g, int r0, int rows, int c0, int kind) {
    constexpr int V = COLS / 8;
    for (int i = threadIdx.x; i < rows * V; i += blockDim.x) {
        const int r = i / V, c = c0 + 8 * (i % V), x = r0 + r, t = k.b0 + x;
        bool on = x < k.m;
        double gx = 1.0;
        if (on && kind == LTF_DECAY_Q) {
            on = t < k.first;
            gx = k.gh[x + 1];
        } else if (on && kind == LTF_DECAY_K) {
            on = t >= k.from;
            gx = k.gh[k.e - t];
        }
        __nv_bfloat16 h[8];
        if (on) {
            const float *src = s.p + ((size_t)(k.b * g.T + t) * g.H + k.h) * s.W + s.off + c;
            const ltf_f4 lo = *(const ltf_f4 *)src, hi = *(const ltf_f4 *)(src + 4);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float v = j < 4 ? lo.v[j] : hi.v[j - 4];
                h[j] = __float2bfloat16_rn(kind == LTF_RAW ? v : (float)(gx * (double)v));
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++) h[j] = __float2bfloat16_rn(0.0f);
        }
        ltf_u128 u;
        memcpy(&u, h, sizeof(u));
        *(ltf_u128 *)(dst + r * ld + c - c0) = u;
    }
}

/* ---- the state deltas: St = A~^T B per block ---- */

#define LTF_LC 32 /* block rows per step of the state kernel */

struct ltf_state_args {
    float *St;
    ltf_rows a, b;
    int akind;
    ltf_geom g;
};

/* One thread block per (block, 64 rows of St): its 4 warps own 16 rows each, all D columns, and
 * walk the block's real rows LTF_LC at a time (A~'s 64 columns and B staged as bf16). */
template <int D> struct ltf_state_smem {
    static constexpr int LDA = 64 + 8, LDB = D + 8;
    alignas(32) __nv_bfloat16 a[LTF_LC * LDA];
    alignas(32) __nv_bfloat16 b[LTF_LC * LDB];
};

template <int D> __global__ void ltf_state_kernel(ltf_state_args p) {
    constexpr int ND = D / 16, CT = D / 64;
    constexpr int LDA = ltf_state_smem<D>::LDA, LDB = ltf_state_smem<D>::LDB;
    __shared__ ltf_state_smem<D> sm;
    const int warp = threadIdx.x >> 5;
    const int blk = (int)(blockIdx.x / CT), c0 = 64 * (int)(blockIdx.x % CT);
    const ltf_blk k = ltf_blk_at(p.g, blk);
    wt_acc acc[ND];
#pragma unroll
    for (int n = 0; n < ND; n++) wmma::fill_fragment(acc[n], 0.0f);
    for (int l0 = 0; l0 < k.m; l0 += LTF_LC) {
        __syncthreads(); /* the previous rows are no longer read */
        ltf_stage<64>(sm.a, LDA, p.a, k, p.g, l0, LTF_LC, c0, p.akind);
        ltf_stage<D>(sm.b, LDB, p.b, k, p.g, l0, LTF_LC, 0, LTF_RAW);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < LTF_LC / 16; kk++) {
            wt_a_col af; /* (A~^T)[d, l] = A~[l, d]: A~'s staged rows read column-major */
            wmma::load_matrix_sync(af, sm.a + 16 * kk * LDA + 16 * warp, LDA);
#pragma unroll
            for (int n = 0; n < ND; n++) {
                wt_b_row bf;
                wmma::load_matrix_sync(bf, sm.b + 16 * kk * LDB + 16 * n, LDB);
                wmma::mma_sync(acc[n], af, bf, acc[n]);
            }
        }
    }
    float *dst = p.St + (size_t)blk * D * D + (size_t)(c0 + 16 * warp) * D;
#pragma unroll
    for (int n = 0; n < ND; n++)
        wmma::store_matrix_sync(dst + 16 * n, acc[n], D, wmma::mem_row_major);
}

/* ---- the rows: inter-block term and intra-block products ---- */

struct ltf_args {
    ltf_out out;
    ltf_rows a, b, c, r;
    int rkind;
    const __nv_bfloat16 *state;
    bool state_t;
    ltf_geom g;
    int ntile;
};

template <int D> struct ltf_smem {
    static constexpr int BC = ltf_cfg<D>::BC, LDT = ltf_cfg<D>::LDT;
    union alignas(32) tiles {
        struct {
            alignas(32) __nv_bfloat16 b[BC * LDT];
            alignas(32) __nv_bfloat16 c[BC * LDT];
        } bc;
        alignas(32) __nv_bfloat16 a[LTF_BR * LDT]; /* the a rows, then r~, before the loop */
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
    const ltf_blk k = ltf_blk_at(p.g, blk);
    const int m = k.m, L = p.g.L;
    const int32_t *visb = p.g.vis + (size_t)k.b * p.g.T + k.b0; /* visb[i] - b0: row i's start */

    ltf_stage<D>(sm.t.a, LDT, p.a, k, p.g, x0, LTF_BR, 0, LTF_RAW);
    if (!KEYS)
        for (int i = threadIdx.x; i < LTF_BR; i += blockDim.x)
            sm.row_start[i] = x0 + i < m ? visb[x0 + i] - k.b0 : L; /* L: sees nothing */
    __syncthreads();
    wt_a_row af[ND];
#pragma unroll
    for (int kk = 0; kk < ND; kk++)
        wmma::load_matrix_sync(af[kk], sm.t.a + 16 * warp * LDT + 16 * kk, LDT);
    __syncthreads(); /* every warp holds its a rows: r~ goes in their place */

    /* the inter-block term: o = r~ op(St) */
    ltf_stage<D>(sm.t.a, LDT, p.r, k, p.g, x0, LTF_BR, 0, p.rkind);
    __syncthreads();
    wt_acc o[ND];
#pragma unroll
    for (int n = 0; n < ND; n++) wmma::fill_fragment(o[n], 0.0f);
    if (xw < m) {
        const __nv_bfloat16 *st = p.state + (size_t)blk * D * D;
#pragma unroll
        for (int kk = 0; kk < ND; kk++) {
            wt_a_row rf;
            wmma::load_matrix_sync(rf, sm.t.a + 16 * warp * LDT + 16 * kk, LDT);
#pragma unroll
            for (int n = 0; n < ND; n++) {
                if (p.state_t) { /* St^T[kk, n] = St[n, kk] */
                    wt_b_col sf;
                    wmma::load_matrix_sync(sf, st + 16 * n * D + 16 * kk, D);
                    wmma::mma_sync(o[n], rf, sf, o[n]);
                } else {
                    wt_b_row sf;
                    wmma::load_matrix_sync(sf, st + 16 * kk * D + 16 * n, D);
                    wmma::mma_sync(o[n], rf, sf, o[n]);
                }
            }
        }
    }

    float *sw = sm.s[warp];
    __nv_bfloat16 *pw = sm.p[warp];

    /* the column tiles [y0, y0 + BC) that can be visible (block-uniform bounds). Query rows:
     * from the first row's start (starts grow with the row) up to the last real row. Key
     * rows: from the diagonal on, while the tile's first query (the smallest start) can see
     * the last row of this block */
    int y0 = 0, y_end = 0;
    if (x0 < m) {
        y0 = KEYS ? x0 : (visb[x0] - k.b0) / BC * BC;
        y_end = KEYS ? m : min(x0 + LTF_BR, m);
    }
    for (; y0 < y_end; y0 += BC) {
        if (KEYS && visb[y0] - k.b0 > x0 + LTF_BR - 1) break; /* uniform: no later tile either */
        __syncthreads(); /* the previous tiles and the r~ staging are no longer read */
        ltf_stage<D>(sm.t.bc.b, LDT, p.b, k, p.g, y0, BC, 0, LTF_RAW);
        ltf_stage<D>(sm.t.bc.c, LDT, p.c, k, p.g, y0, BC, 0, LTF_RAW);
        /* g[j] = g^n for n = i - j = j + w0 */
        const int w0 = KEYS ? y0 - x0 - (LTF_BR - 1) : x0 - y0 - (BC - 1);
        for (int j = threadIdx.x; j < LTF_BR + BC - 1; j += blockDim.x) {
            const int nn = j + w0;
            sm.g[j] = nn >= 0 && nn <= L ? k.gh[nn] : 0.0;
        }
        if (KEYS)
            for (int j = threadIdx.x; j < BC; j += blockDim.x)
                sm.col_start[j] = y0 + j < m ? visb[y0 + j] - k.b0 : L; /* L: sees nothing */
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
                const int j = KEYS ? c - 16 * warp - rr + LTF_BR - 1 : 16 * warp + rr - c + BC - 1;
                const float v = vis ? (float)((double)sw[rr * LDS + c] * sm.g[j]) : 0.0f;
                pw[rr * LDP + c] = __float2bfloat16_rn(v);
            }
        }
        __syncwarp(); /* P~ written, S read */

        /* out += P~ c */
        wt_accumulate<NB, ND>(o, pw, LDP, sm.t.bc.c, LDT);
    }

    /* the real rows out, BC columns at a time through sw */
    __syncwarp();
    const int rows = max(0, min(16, m - xw));
    const ltf_out &out = p.out;
#pragma unroll
    for (int c = 0; c < ND; c += NB) {
#pragma unroll
        for (int n = 0; n < NB; n++)
            wmma::store_matrix_sync(sw + 16 * n, o[c + n], LDS, wmma::mem_row_major);
        __syncwarp();
        for (int rr = 0; rr < rows; rr++) {
            const int t = k.b0 + xw + rr;
            float *dst =
                out.p + ((size_t)(k.b * p.g.T + t) * p.g.H + k.h) * out.W + out.off + 16 * c;
            for (int j = lane; j < BC; j += 32)
                dst[j] = out.add ? dst[j] + sw[rr * LDS + j] : sw[rr * LDS + j];
        }
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

static int64_t ltf_blocks(const ltf_geom &g) {
    MT_CHECK(g.D == 64 || g.D == 128, "lightning (cuda fused): D = %d (64 or 128)", g.D);
    return (int64_t)g.B * g.H * g.nblk;
}

void cuda_lightning_fused_state(const char *what, float *St, ltf_rows a, int akind, ltf_rows b,
                                const ltf_geom &g) {
    const int64_t grid = ltf_blocks(g) * (g.D / 64);
    MT_CHECK(grid <= INT32_MAX, "lightning (cuda fused): B=%d H=%d T=%d: %lld blocks", g.B, g.H,
             g.T, (long long)grid);
    if (grid == 0) return;
    const ltf_state_args p = {St, a, b, akind, g};
    /* launched through a pointer: the emulator's <<< >>> rewrite needs a plain name */
    void (*kern)(ltf_state_args) = g.D == 64 ? ltf_state_kernel<64> : ltf_state_kernel<128>;
    kern<<<(unsigned)grid, LTF_THREADS>>>(p);
    CUDA_LAUNCH_CHECK(what);
}

void cuda_lightning_fused_rows(const char *what, ltf_out out, ltf_rows a, ltf_rows b, ltf_rows c,
                               bool key_rows, ltf_rows r, int rkind, const __nv_bfloat16 *state,
                               bool state_t, const ltf_geom &g) {
    const int ntile = (g.L + LTF_BR - 1) / LTF_BR;
    const int64_t grid = ltf_blocks(g) * ntile;
    MT_CHECK(grid <= INT32_MAX, "lightning (cuda fused): B=%d H=%d T=%d: %lld blocks", g.B, g.H,
             g.T, (long long)grid);
    if (grid == 0) return;
    const ltf_args p = {out, a, b, c, r, rkind, state, state_t, g, ntile};
    void (*kern)(ltf_args) = g.D == 64
                                 ? (key_rows ? ltf_kernel<64, true> : ltf_kernel<64, false>)
                                 : (key_rows ? ltf_kernel<128, true> : ltf_kernel<128, false>);
    kern<<<(unsigned)grid, LTF_THREADS>>>(p);
    CUDA_LAUNCH_CHECK(what);
}
