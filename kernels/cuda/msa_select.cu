/* msa_select.cu: MSA block selection (spec 4.1-4.2) on the device, mirroring
 * kernels/cpu/msa_select.c: block scores max over the keys j <= t of t's sample of
 * iq_h(t) . ik(j), then the local block first and the topk-1 best earlier blocks in descending
 * score, ties to the lower block id, -1 padding; a NaN (or keyless) block is never chosen.
 * Also the row and selection checks every MSA forward runs (cuda_msa_check).
 *
 * One block of 256 threads per tile of SEL_Q queries of one (b, h) (grid-stride over tiles):
 * key tiles of SEL_K keys from the tile's earliest sample start, iq and ik in shared memory by
 * SEL_DC dims at a time; each thread sums 4 products (query, key) in double, rounded to fp32
 * once (the CPU's fp32 sgemm is within a few ulps of it, so idx is identical unless two block
 * scores tie to a few ulps); then one thread per query folds the tile into its row of block
 * scores (scratch, nb floats), in key order. The top-k: one warp per query, topk-1 rounds of
 * a warp argmax (highest score, then lowest id: the CPU's insertion order), each lane owning
 * the blocks blk = lane mod 32 so a chosen block is retired by its owner.
 * Queries apart from keys (msa.cuh): a tile is SEL_Q query rows, their slots increasing, and its
 * keys run from the first row's sample start to the last row's slot; a tile across the gap
 * between a context-parallel rank's two chunks computes the gap's products too (its fold skips
 * what a query does not see), at most one such tile per (b, h).
 * Cost: the indexer is dense by definition, O(T^2 Di / 2) per (b, h) (spec 4.1). */
#include <limits.h>
#include <stdlib.h>

#include "cuda_ops.cuh"
#include "msa.cuh"

#define SEL_Q        32
#define SEL_K        32
#define SEL_DC       64
#define SEL_MAX_CTAS 1024

/* ---- checks ---- */

__global__ void msa_check_kernel(unsigned long long *flag, const int32_t *pos, const int32_t *seg,
                                 const int32_t *q_slot, const int32_t *idx, int64_t B, int64_t Hs,
                                 int64_t Tq, int64_t Tk, int block, int topk) {
    CUDA_FOR(i, B * Tk) {
        const int64_t t = i % Tk;
        const bool first = t == 0 || (seg && seg[i] != seg[i - 1]);
        if (pos[i] != (first ? 0 : pos[i - 1] + 1)) cuda_flag_raise(flag, i);
    }
    if (q_slot) {
        CUDA_FOR(i, Tq) {
            if (q_slot[i] < 0 || q_slot[i] >= Tk || (i > 0 && q_slot[i] <= q_slot[i - 1]))
                cuda_flag_raise(flag, B * Tk + i);
        }
    }
    if (!idx) return;
    CUDA_FOR(r, B * Hs * Tq) {
        const int64_t b = r / (Hs * Tq), t = msa_q_slot(q_slot, r % Tq);
        if (t < 0 || t >= Tk) continue; /* a bad slot, flagged above (a lower position) */
        const int32_t local = pos[b * Tk + t] / block, *sel = idx + r * topk;
        bool ok = true, has_local = false;
        for (int s = 0; s < topk; s++) {
            ok = ok && sel[s] >= -1 && sel[s] <= local &&
                 (sel[s] >= 0 || s == topk - 1 || sel[s + 1] < 0);
            for (int u = 0; u < s && sel[s] >= 0; u++) ok = ok && sel[u] != sel[s];
            has_local = has_local || sel[s] == local;
        }
        if (!ok || !has_local) cuda_flag_raise(flag, B * Tk + Tq + r);
    }
}

void cuda_msa_check(const char *op, const int32_t *pos, const int32_t *seg, const int32_t *q_slot,
                    const int32_t *idx, int64_t B, int64_t Hs, int64_t Tq, int64_t Tk, int block,
                    int topk) {
    if (B * Tk == 0) return;
    cuda_flag_reset(op);
    msa_check_kernel<<<cuda_blocks(B * Hs * Tq + B * Tk + Tq, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_err_flag, pos, seg, q_slot, idx, B, Hs, Tq, Tk, block, topk);
    CUDA_LAUNCH_CHECK(op);
    const int64_t bad = cuda_flag_read(op);
    if (bad < 0) return;
    if (bad < B * Tk)
        MT_DIE("%s: pos[%lld,%lld] breaks the row rule (positions restart at 0 with each sample, "
               "a run of equal segment ids, and count up by one)",
               op, (long long)(bad / Tk), (long long)(bad % Tk));
    if (bad < B * Tk + Tq)
        MT_DIE("%s: q_slot[%lld] is not a key slot in [0, %lld) above the previous query's "
               "(the slots of the query rows must increase)",
               op, (long long)(bad - B * Tk), (long long)Tk);
    const int64_t r = bad - B * Tk - Tq;
    MT_DIE("%s: idx[%lld,%lld,%lld,:] is not distinct blocks in [0, pos/block] holding the local "
           "block, then only -1",
           op, (long long)(r / (Hs * Tq)), (long long)(r / Tq % Hs), (long long)(r % Tq));
}

/* ---- selection ---- */

struct sel_dims {
    int64_t B, Tq, Tk, Hi, Di, nb;
    int block, topk;
};

__global__ void msa_select_kernel(int32_t *idx, float *bs_all, const float *iq, const float *ik,
                                  const int32_t *pos, const int32_t *q_slot, sel_dims a) {
    __shared__ float qs[SEL_Q][SEL_DC + 1];
    __shared__ float ks[SEL_K][SEL_DC + 1];
    __shared__ float S[SEL_Q][SEL_K + 1];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t nt = (a.Tq + SEL_Q - 1) / SEL_Q, Di = a.Di;
    float *bs_cta = bs_all + (int64_t)blockIdx.x * SEL_Q * a.nb;
    for (int64_t w = blockIdx.x; w < a.B * a.Hi * nt; w += gridDim.x) {
        const int64_t b = w / (a.Hi * nt), h = (w / nt) % a.Hi, i0 = (w % nt) * SEL_Q;
        const int ni = (int)(a.Tq - i0 < SEL_Q ? a.Tq - i0 : SEL_Q);
        const int32_t *pb = pos + b * a.Tk;
        const float *iqb = iq + (b * a.Tq * a.Hi + h) * Di, *ikb = ik + b * a.Tk * Di;
        /* the tile's query slots s0 .. s1 (increasing): keys from s0's sample start to s1 */
        const int64_t s0 = msa_q_slot(q_slot, i0), s1 = msa_q_slot(q_slot, i0 + ni - 1);
        __syncthreads(); /* the previous tile's top-k is done with bs_cta */
        if (tid < ni)
            for (int32_t blk = 0; blk <= pb[msa_q_slot(q_slot, i0 + tid)] / a.block; blk++)
                bs_cta[tid * a.nb + blk] = -INFINITY;
        /* thread: query qa, keys kc + 8 u (u < 4) */
        const int qa = tid >> 3, kc = tid & 7;
        for (int64_t j0 = s0 - pb[s0]; j0 <= s1; j0 += SEL_K) {
            const int nj = (int)(s1 + 1 - j0 < SEL_K ? s1 + 1 - j0 : SEL_K);
            double acc[4] = {0, 0, 0, 0};
            for (int64_t d0 = 0; d0 < Di; d0 += SEL_DC) {
                const int nd = (int)(Di - d0 < SEL_DC ? Di - d0 : SEL_DC);
                __syncthreads();
                for (int e = tid; e < SEL_Q * SEL_DC; e += blockDim.x) {
                    const int r = e / SEL_DC, d = e % SEL_DC;
                    qs[r][d] = r < ni && d < nd ? iqb[(i0 + r) * a.Hi * Di + d0 + d] : 0.0f;
                    ks[r][d] = r < nj && d < nd ? ikb[(j0 + r) * Di + d0 + d] : 0.0f;
                }
                __syncthreads();
                for (int d = 0; d < nd; d++) {
                    const double x = qs[qa][d];
#pragma unroll
                    for (int u = 0; u < 4; u++) acc[u] += x * (double)ks[kc + 8 * u][d];
                }
            }
#pragma unroll
            for (int u = 0; u < 4; u++) S[qa][kc + 8 * u] = (float)acc[u];
            __syncthreads();
            if (tid < ni) { /* fold into row tid: keys rs .. t of its sample, in key order */
                const int64_t t = msa_q_slot(q_slot, i0 + tid), rs = t - pb[t];
                float *row = bs_cta + tid * a.nb;
                for (int c = 0; c < nj; c++) {
                    const int64_t j = j0 + c;
                    if (j < rs || j > t) continue;
                    const int32_t blk = pb[j] / a.block;
                    if (S[tid][c] > row[blk]) row[blk] = S[tid][c];
                }
            }
        }
        __syncthreads();
        /* the top-k of each row: warp per row */
        for (int r = warp; r < ni; r += blockDim.x / 32) {
            const int32_t local = pb[msa_q_slot(q_slot, i0 + r)] / a.block;
            float *row = bs_cta + r * a.nb;
            int32_t *out = idx + ((b * a.Hi + h) * a.Tq + i0 + r) * a.topk;
            if (lane == 0) out[0] = local;
            int s = 1;
            for (; s < a.topk; s++) {
                float bv = -INFINITY;
                int bi = INT_MAX;
                for (int32_t blk = lane; blk < local; blk += 32) /* ascending: a tie keeps blk */
                    if (row[blk] > bv) {
                        bv = row[blk];
                        bi = blk;
                    }
                for (int o = 16; o > 0; o >>= 1) {
                    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
                    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
                    if (ov > bv || (ov == bv && oi < bi)) {
                        bv = ov;
                        bi = oi;
                    }
                }
                if (bi == INT_MAX) break; /* no visible block left (-inf, NaN never pass) */
                if (lane == 0) out[s] = bi;
                if ((bi & 31) == lane) row[bi] = -INFINITY; /* retired by its owner lane */
            }
            for (int u = s + lane; u < a.topk; u += 32) out[u] = -1;
        }
    }
}

/* MT_MSA_SELECT_BLOCKS: the most thread blocks of the selection (default SEL_MAX_CTAS); fewer
 * make each block loop over more query tiles (op_cuda_emu_msa_select_blocks1 runs it at 1).
 * Read once. */
static int64_t sel_max_ctas(void) {
    static int64_t cap = -1;
    if (cap < 0) {
        const char *v = getenv("MT_MSA_SELECT_BLOCKS");
        char *end = NULL;
        const long x = v && *v ? strtol(v, &end, 10) : SEL_MAX_CTAS;
        MT_CHECK(!v || !*v || (*end == 0 && x >= 1 && x <= SEL_MAX_CTAS),
                 "MT_MSA_SELECT_BLOCKS=%s: expected a whole number from 1 to %d", v, SEL_MAX_CTAS);
        cap = x;
    }
    return cap;
}

/* ---- node adapter: in[0] iq (B,Tq,Hi,Di), in[1] ik (B,Tk,1,Di), in[2] pos (B,Tk) I32, in[3]
 * seg (B,Tk) I32 or NULL, in[4] q_slot (Tq) I32 or NULL (Tq = Tk); out idx (B,Hi,Tq,topk) I32;
 * ip[0] block, ip[1] topk (autograd/op_msa.c); no saved buffers, no gradient ---- */

void cuda_msa_select_fwd_node(const mt_node *n) {
    const mt_tensor *iq = n->in[0], *ik = n->in[1], *pos = n->in[2], *seg = n->in[3];
    const int32_t *q_slot = n->in[4] ? cuda_i32(n->in[4]) : NULL;
    sel_dims a;
    a.B = iq->shape[0];
    a.Tq = iq->shape[1];
    a.Tk = ik->shape[1];
    a.Hi = iq->shape[2];
    a.Di = iq->shape[3];
    a.block = (int)n->ip[0];
    a.topk = (int)n->ip[1];
    MT_CHECK(a.block >= 1 && a.topk >= 1 && a.topk <= 4096,
             "msa_select (cuda): block %d, topk %d (at most 4096)", a.block, a.topk);
    MT_CHECK(q_slot || a.Tq == a.Tk, "msa_select (cuda): %lld query rows, %lld keys, no q_slot",
             (long long)a.Tq, (long long)a.Tk);
    cuda_msa_check("msa_select (cuda)", cuda_i32(pos), seg ? cuda_i32(seg) : NULL, q_slot, NULL,
                   a.B, 1, a.Tq, a.Tk, a.block, a.topk);
    if (a.B * a.Tq * a.Hi == 0) return;
    a.nb = (a.Tk - 1) / a.block + 1;
    const int64_t tiles = a.B * a.Hi * ((a.Tq + SEL_Q - 1) / SEL_Q);
    /* at most sel_max_ctas() blocks, and block scores of at most 256 MiB (small blocks, long T) */
    const int64_t cap = sel_max_ctas();
    int64_t ctas = tiles < cap ? tiles : cap;
    const int64_t fit = ((int64_t)1 << 26) / (SEL_Q * a.nb);
    if (ctas > fit) ctas = fit > 1 ? fit : 1;
    float *bs = (float *)mt_node_scratch(n, sizeof(float) * (size_t)ctas * SEL_Q * (size_t)a.nb,
                                         "msa_select block scores");
    msa_select_kernel<<<(unsigned)ctas, 256>>>((int32_t *)n->out->data, bs, cuda_f32(iq),
                                               cuda_f32(ik), cuda_i32(pos), q_slot, a);
    CUDA_LAUNCH_CHECK("msa_select forward");
}

void cuda_msa_select_bwd_node(const mt_node *n) { (void)n; }

/* ---- generation's decode step (mt_backend.decode.msa_select; kernels/cpu/msa.h,
 * cpu_msa_select_decode): one block per (b, h). Thread blk owns block blk's score, the maximum
 * over its keys j < t_len of the fp32 dot iq . ik(j) summed in the CPU's order (d ascending,
 * products and sums rounded apart: no fused multiply-add), so the scores are the CPU's bit for
 * bit; then topk - 1 rounds of a block-wide argmax over the earlier blocks (the highest score,
 * then the lowest id: the CPU's insertion order), the chosen one retired to -inf, -1 once none
 * is left (a NaN or keyless block is never chosen). work (B,Hi,nb) holds the scores. ---- */

#define SEL_DEC_THREADS 128

__global__ void msa_select_decode_kernel(int32_t *idx, float *work, const float *iq,
                                         const float *ik_cache, const int32_t *t_len, int64_t t_max,
                                         int Hi, int Di, int block, int topk, int64_t nb) {
    __shared__ float top_s[SEL_DEC_THREADS];
    __shared__ int top_b[SEL_DEC_THREADS];
    const int64_t row = blockIdx.x, b = row / Hi, n = t_len[b];
    const int local = (int)((n - 1) / block), tid = threadIdx.x;
    float *bs = work + row * nb;
    const float *qr = iq + row * Di, *kb = ik_cache + b * t_max * Di;
    for (int blk = tid; blk <= local; blk += SEL_DEC_THREADS) {
        float m = -INFINITY;
        const int64_t j1 = (int64_t)(blk + 1) * block < n ? (int64_t)(blk + 1) * block : n;
        for (int64_t j = (int64_t)blk * block; j < j1; j++) {
            const float *kj = kb + j * Di;
            float s = 0.0f;
            for (int d = 0; d < Di; d++) s = __fadd_rn(s, __fmul_rn(qr[d], kj[d]));
            if (s > m) m = s;
        }
        bs[blk] = m;
    }
    __syncthreads();
    int32_t *out = idx + row * topk;
    if (tid == 0) out[0] = local;
    for (int r = 1; r < topk; r++) {
        float best = -INFINITY;
        int at = -1;
        for (int blk = tid; blk < local;
             blk += SEL_DEC_THREADS) /* ascending: ties keep the lower */
            if (bs[blk] > best) best = bs[blk], at = blk;
        top_s[tid] = best;
        top_b[tid] = at;
        __syncthreads();
        for (int w = SEL_DEC_THREADS / 2; w > 0; w >>= 1) {
            if (tid < w) {
                const float so = top_s[tid + w];
                const int bo = top_b[tid + w];
                if (bo >= 0 &&
                    (top_b[tid] < 0 || so > top_s[tid] || (so == top_s[tid] && bo < top_b[tid]))) {
                    top_s[tid] = so;
                    top_b[tid] = bo;
                }
            }
            __syncthreads();
        }
        if (tid == 0) {
            out[r] = top_b[0];
            if (top_b[0] >= 0) bs[top_b[0]] = -INFINITY;
        }
        __syncthreads();
    }
}

int64_t cuda_msa_select_decode_work(int64_t B, int64_t Hi, int64_t t_max, int block) {
    return B * Hi * ((t_max - 1) / block + 1);
}

void cuda_msa_select_decode(int32_t *idx, float *work, const float *iq, const float *ik_cache,
                            const int32_t *t_len, int64_t B, int64_t t_max, int64_t Hi, int64_t Di,
                            int block, int topk) {
    MT_CHECK(block >= 1 && topk >= 1 && topk <= 4096,
             "msa_select decode (cuda): block %d, topk %d (at most 4096)", block, topk);
    for (int64_t b = 0; b < B; b++)
        MT_CHECK(t_len[b] >= 1 && t_len[b] <= t_max,
                 "msa_select decode (cuda): row %lld: t_len %d not in [1, Tmax=%lld]", (long long)b,
                 t_len[b], (long long)t_max);
    if (B * Hi == 0) return;
    msa_select_decode_kernel<<<(unsigned)(B * Hi), SEL_DEC_THREADS>>>(
        idx, work, iq, ik_cache, cuda_decode_t_len(t_len, B), t_max, (int)Hi, (int)Di, block, topk,
        (t_max - 1) / block + 1);
    CUDA_LAUNCH_CHECK("msa_select decode");
}
