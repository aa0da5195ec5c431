/* msa_attention.cu: softmax attention restricted to the MSA selection (spec 4.3) on the
 * device, mirroring kernels/cpu/msa_attention.c: forward with the lse saved, the backward from
 * it, and the selection's inverse (which queries chose a key block) that the backward's dk, dv
 * and msa_kl.cu's dik go through.
 *
 * fp32 mode only (the node carries no GEMM mode). Warp kernels over the support, products exact
 * in fp32 and summed in double, softmax and every sum in double; the cost is topk*block keys
 * per query, never T^2, and no mask is built. The scores go one key per lane (the warp's row
 * staged in shared memory, each lane a whole dot product: no shuffle per key, one exp per lane
 * per 32 keys), the products with V, K or the gathered rows dims over the lanes with p or ds
 * broadcast by a shuffle:
 *   forward: warp per query row (b, t, h), its selected blocks' keys j <= t in chunks of 32;
 *            the running maximum per chunk, O = sum p V / l, lse = m + log l.
 *   dq:      warp per query row: p = exp(S - lse), ds = p (dO.v - delta), dq += scale ds k.
 *   dk, dv:  warp per key row (b, j, kv head g): the (query, head) pairs of the queries that
 *            chose j's block (the inverse, in increasing t) with t >= j, times the group's G
 *            heads, 32 at a time: dv += p dO, dk += scale ds q. One writer per row: no atomics,
 *            a fixed order, deterministic; a key no query sees is left untouched, as on the
 *            CPU.
 * Queries apart from keys (msa.cuh): the forward and dq warps go over the Tq query rows, each
 * at its slot q_slot[i]; dk, dv over the Tk key slots, through an inverse that lists query rows. */
#include "cuda_ops.cuh"
#include "msa.cuh"

struct msa_dims {
    int64_t B, Tq, Tk, H, Hkv, D;
    int block, topk;
    double scale;
};

/* ---- the inverse of a selection ---- */

__global__ void msa_inv_count_kernel(int32_t *off, const int32_t *idx, const int32_t *pos,
                                     const int32_t *q_slot, int64_t B, int64_t Hs, int64_t Tq,
                                     int64_t Tk, int block, int topk) {
    CUDA_FOR(r, B * Hs * Tq) {
        const int64_t bh = r / Tq, t = msa_q_slot(q_slot, r % Tq), b = bh / Hs;
        const int32_t *sel = idx + r * topk;
        const int64_t rs = t - pos[b * Tk + t];
        for (int s = 0; s < topk && sel[s] >= 0; s++)
            atomicAdd(&off[bh * (Tk + 1) + rs + (int64_t)sel[s] * block + 1], 1); /* exact */
    }
}

/* in-place inclusive scan of off[1 .. T] of one (b, h) per block: a chunk per thread */
__global__ void msa_inv_scan_kernel(int32_t *off_all, int64_t T) {
    __shared__ int32_t part[CUDA_THREADS];
    int32_t *off = off_all + (int64_t)blockIdx.x * (T + 1) + 1;
    const int64_t chunk = (T + CUDA_THREADS - 1) / CUDA_THREADS;
    const int64_t lo = threadIdx.x * chunk, hi = lo + chunk < T ? lo + chunk : T;
    int32_t s = 0;
    for (int64_t j = lo; j < hi; j++) s += off[j];
    part[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int i = 1; i < CUDA_THREADS; i++) part[i] += part[i - 1];
    __syncthreads();
    s = threadIdx.x ? part[threadIdx.x - 1] : 0;
    for (int64_t j = lo; j < hi; j++) {
        s += off[j];
        off[j] = s;
    }
}

/* warp per slot (b, h, jb) of Tk: at a block start, the query rows of its sample that chose it
 * in order, from the first row whose slot is jb or later (every chooser's: a query selects
 * blocks that start at or before its slot) */
__global__ void msa_inv_fill_kernel(int32_t *list_all, const int32_t *off_all, const int32_t *idx,
                                    const int32_t *pos, const int32_t *q_slot, int64_t B,
                                    int64_t Hs, int64_t Tq, int64_t Tk, int block, int topk) {
    const int64_t w = msa_warp_id();
    const int lane = threadIdx.x & 31;
    if (w >= B * Hs * Tk) return;
    const int64_t bh = w / Tk, jb = w % Tk, b = bh / Hs;
    const int32_t *pb = pos + b * Tk, *off = off_all + bh * (Tk + 1);
    if (pb[jb] % block != 0 || off[jb] == off[jb + 1]) return;
    const int32_t blk = pb[jb] / block, want = off[jb + 1] - off[jb];
    const int64_t rs = jb - pb[jb];
    const int32_t *sel_bh = idx + bh * Tq * topk;
    int32_t *list = list_all + bh * Tq * topk + off[jb];
    int32_t got = 0;
    for (int64_t i0 = msa_first_row(q_slot, Tq, jb); got < want && i0 < Tq; i0 += 32) {
        const int64_t i = i0 + lane;
        bool chose = false;
        if (i < Tq) {
            const int64_t t = msa_q_slot(q_slot, i);
            if (t - pb[t] == rs)
                for (int s = 0; s < topk && sel_bh[i * topk + s] >= 0; s++)
                    chose = chose || sel_bh[i * topk + s] == blk;
        }
        const unsigned m = __ballot_sync(0xffffffffu, chose);
        if (chose) list[got + __popc(m & ((1u << lane) - 1u))] = (int32_t)i;
        got += __popc(m);
    }
}

int32_t *cuda_msa_inverse(const mt_node *n, const int32_t *idx, const int32_t *pos,
                          const int32_t *q_slot, int64_t B, int64_t Hs, int64_t Tq, int64_t Tk,
                          int block, int topk) {
    const int64_t n_off = B * Hs * (Tk + 1);
    int32_t *inv = (int32_t *)mt_node_scratch(
        n, sizeof(int32_t) * (size_t)(n_off + B * Hs * Tq * topk), "msa inverse");
    cudaCheck("msa inverse", cudaMemsetAsync(inv, 0, sizeof(int32_t) * (size_t)n_off));
    if (B * Hs * Tq == 0) return inv;
    msa_inv_count_kernel<<<cuda_blocks(B * Hs * Tq, CUDA_THREADS), CUDA_THREADS>>>(
        inv, idx, pos, q_slot, B, Hs, Tq, Tk, block, topk);
    CUDA_LAUNCH_CHECK("msa inverse (count)");
    msa_inv_scan_kernel<<<(unsigned)(B * Hs), CUDA_THREADS>>>(inv, Tk);
    CUDA_LAUNCH_CHECK("msa inverse (scan)");
    msa_inv_fill_kernel<<<msa_warp_blocks(B * Hs * Tk), 32 * MSA_WARPS>>>(
        inv + n_off, inv, idx, pos, q_slot, B, Hs, Tq, Tk, block, topk);
    CUDA_LAUNCH_CHECK("msa inverse (fill)");
    return inv;
}

/* ---- forward ---- */

/* warp per query row (b, t, h); the support in chunks of 32 keys, one per lane: scores, the
 * chunk's maximum (the running maximum and the sums rescaled when it grows), p, then
 * O += p V with p broadcast key by key and dims over the lanes */
__global__ void msa_attn_fwd_kernel(float *out, float *lse, const float *q, const float *k,
                                    const float *v, const int32_t *idx, const int32_t *pos,
                                    const int32_t *q_slot, msa_dims a) {
    __shared__ float qsh[MSA_WARPS][MSA_MAX_D];
    const int64_t row = msa_warp_id();
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, D = (int)a.D;
    if (row >= a.B * a.Tq * a.H) return;
    const int64_t b = row / (a.Tq * a.H), i = (row / a.H) % a.Tq, h = row % a.H;
    const int64_t g = h / (a.H / a.Hkv), ldk = a.Hkv * a.D, t = msa_q_slot(q_slot, i);
    const int32_t pt = pos[b * a.Tk + t], *sel = idx + ((b * a.Hkv + g) * a.Tq + i) * a.topk;
    const float *kb = k + (b * a.Tk * a.Hkv + g) * a.D, *vb = v + (b * a.Tk * a.Hkv + g) * a.D;
    float *qs = qsh[wib];
    msa_stage(qs, q + row * a.D, D, lane);
    double acc[MSA_R];
#pragma unroll
    for (int i = 0; i < MSA_R; i++) acc[i] = 0;
    double m = -INFINITY, l = 0; /* l: this lane's part of the row sum */
    for (int s = 0; s < a.topk && sel[s] >= 0; s++) {
        int64_t j0, j1;
        msa_keys(t, pt, sel[s], a.block, &j0, &j1);
        for (int64_t c0 = j0; c0 <= j1; c0 += 32) {
            const int64_t j = c0 + lane;
            const int nc = (int)(j1 - c0 + 1 < 32 ? j1 - c0 + 1 : 32);
            const double x = j <= j1 ? a.scale * msa_dot_lane(qs, kb + j * ldk, D) : -INFINITY;
            const double cm = msa_warp_max(x);
            if (cm > m) { /* rescale what came before (0 at the first chunk) */
                const double r = exp(m - cm);
                l *= r;
#pragma unroll
                for (int i = 0; i < MSA_R; i++) acc[i] *= r;
                m = cm;
            }
            const double p = j <= j1 ? exp(x - m) : 0.0;
            l += p;
            for (int u = 0; u < nc; u++) {
                const double pu = __shfl_sync(0xffffffffu, p, u);
                const float *vj = vb + (c0 + u) * ldk;
#pragma unroll
                for (int i = 0; i < MSA_R; i++) {
                    const int d = lane + 32 * i;
                    if (d < D) acc[i] += pu * (double)vj[d];
                }
            }
        }
    }
    l = cuda_warp_sum(l); /* >= 1: the local block holds t itself */
#pragma unroll
    for (int i = 0; i < MSA_R; i++) {
        const int d = lane + 32 * i;
        if (d < D) out[row * a.D + d] = (float)(acc[i] / l);
    }
    if (lse && lane == 0) lse[(b * a.H + h) * a.Tq + i] = (float)(m + log(l));
}

/* ---- backward ---- */

/* delta[b,h,t] = dO . O */
__global__ void msa_attn_delta_kernel(double *delta, const float *dout, const float *out,
                                      msa_dims a) {
    const int64_t row = msa_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.Tq * a.H) return;
    const int64_t b = row / (a.Tq * a.H), i = (row / a.H) % a.Tq, h = row % a.H;
    float o[MSA_R];
    msa_load(o, out + row * a.D, D, lane);
    const double s = msa_dot(o, dout + row * a.D, D, lane);
    if (lane == 0) delta[(b * a.H + h) * a.Tq + i] = s;
}

/* warp per query row, 32 keys per chunk, one per lane: p = exp(S - lse),
 * ds = p (dO.v - delta); then dq += scale ds k with ds broadcast key by key */
__global__ void msa_attn_dq_kernel(float *dq, const float *dout, const float *lse,
                                   const double *delta, const float *q, const float *k,
                                   const float *v, const int32_t *idx, const int32_t *pos,
                                   const int32_t *q_slot, msa_dims a) {
    __shared__ float qsh[MSA_WARPS][MSA_MAX_D];
    __shared__ float dosh[MSA_WARPS][MSA_MAX_D];
    const int64_t row = msa_warp_id();
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, D = (int)a.D;
    if (row >= a.B * a.Tq * a.H) return;
    const int64_t b = row / (a.Tq * a.H), i = (row / a.H) % a.Tq, h = row % a.H;
    const int64_t g = h / (a.H / a.Hkv), ldk = a.Hkv * a.D, bht = (b * a.H + h) * a.Tq + i;
    const int64_t t = msa_q_slot(q_slot, i);
    const int32_t pt = pos[b * a.Tk + t], *sel = idx + ((b * a.Hkv + g) * a.Tq + i) * a.topk;
    const float *kb = k + (b * a.Tk * a.Hkv + g) * a.D, *vb = v + (b * a.Tk * a.Hkv + g) * a.D;
    float *qs = qsh[wib], *dos = dosh[wib];
    for (int d = lane; d < D; d += 32) dos[d] = dout[row * a.D + d];
    msa_stage(qs, q + row * a.D, D, lane);
    const double ls = lse[bht], dl = delta[bht];
    double acc[MSA_R];
#pragma unroll
    for (int i = 0; i < MSA_R; i++) acc[i] = 0;
    for (int s = 0; s < a.topk && sel[s] >= 0; s++) {
        int64_t j0, j1;
        msa_keys(t, pt, sel[s], a.block, &j0, &j1);
        for (int64_t c0 = j0; c0 <= j1; c0 += 32) {
            const int64_t j = c0 + lane;
            const int nc = (int)(j1 - c0 + 1 < 32 ? j1 - c0 + 1 : 32);
            double ds = 0;
            if (j <= j1) {
                const double p = exp(a.scale * msa_dot_lane(qs, kb + j * ldk, D) - ls);
                ds = p * (msa_dot_lane(dos, vb + j * ldk, D) - dl);
            }
            for (int u = 0; u < nc; u++) {
                const double du = __shfl_sync(0xffffffffu, ds, u);
                const float *kj = kb + (c0 + u) * ldk;
#pragma unroll
                for (int i = 0; i < MSA_R; i++) {
                    const int d = lane + 32 * i;
                    if (d < D) acc[i] += du * (double)kj[d];
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < MSA_R; i++) {
        const int d = lane + 32 * i;
        if (d < D) dq[row * a.D + d] += (float)(a.scale * acc[i]);
    }
}

/* warp per key row (b, j, g) of Tk: the (chooser at slot t >= j, head) pairs of j's block 32 at
 * a time, one per lane (p and ds from k_j, v_j staged in shared memory), then dv += p dO and
 * dk += scale ds q with p, ds broadcast pair by pair */
__global__ void msa_attn_dkv_kernel(float *dk, float *dv, const float *dout, const float *lse,
                                    const double *delta, const float *q, const float *k,
                                    const float *v, const int32_t *inv, const int32_t *pos,
                                    const int32_t *q_slot, msa_dims a) {
    __shared__ float ksh[MSA_WARPS][MSA_MAX_D];
    __shared__ float vsh[MSA_WARPS][MSA_MAX_D];
    const int64_t row = msa_warp_id();
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, D = (int)a.D;
    if (row >= a.B * a.Tk * a.Hkv) return;
    const int64_t b = row / (a.Tk * a.Hkv), j = (row / a.Hkv) % a.Tk, g = row % a.Hkv;
    const int64_t G = a.H / a.Hkv, bg = b * a.Hkv + g;
    const int64_t jb = j - pos[b * a.Tk + j] % a.block; /* the first slot of j's block */
    const int32_t *off = inv + bg * (a.Tk + 1);
    const int32_t *list = inv + a.B * a.Hkv * (a.Tk + 1) + bg * a.Tq * a.topk;
    int32_t e0 = off[jb];
    while (e0 < off[jb + 1] && msa_q_slot(q_slot, list[e0]) < j)
        e0++; /* choosers before j do not see it */
    const int64_t n_pairs = (int64_t)(off[jb + 1] - e0) * G;
    if (n_pairs == 0) return; /* no query sees j: untouched, as on the CPU */
    float *ks = ksh[wib], *vs = vsh[wib];
    for (int d = lane; d < D; d += 32) vs[d] = v[row * a.D + d];
    msa_stage(ks, k + row * a.D, D, lane);
    double acc_k[MSA_R], acc_v[MSA_R];
#pragma unroll
    for (int i = 0; i < MSA_R; i++) acc_k[i] = acc_v[i] = 0;
    for (int64_t c0 = 0; c0 < n_pairs; c0 += 32) {
        const int64_t e = c0 + lane;
        const int nc = (int)(n_pairs - c0 < 32 ? n_pairs - c0 : 32);
        double p = 0, ds = 0;
        int64_t r = 0; /* the pair's (b, i, h) row of q and dout */
        if (e < n_pairs) {
            const int64_t i = list[e0 + e / G], h = g * G + e % G;
            const int64_t bht = (b * a.H + h) * a.Tq + i;
            r = (b * a.Tq + i) * a.H + h;
            p = exp(a.scale * msa_dot_lane(ks, q + r * a.D, D) - (double)lse[bht]);
            ds = p * (msa_dot_lane(vs, dout + r * a.D, D) - delta[bht]);
        }
        for (int u = 0; u < nc; u++) {
            const double pu = __shfl_sync(0xffffffffu, p, u), du = __shfl_sync(0xffffffffu, ds, u);
            const int64_t ru = __shfl_sync(0xffffffffu, r, u);
            const float *qt = q + ru * a.D, *dot = dout + ru * a.D;
#pragma unroll
            for (int i = 0; i < MSA_R; i++) {
                const int d = lane + 32 * i;
                if (d < D) {
                    acc_v[i] += pu * (double)dot[d];
                    acc_k[i] += du * (double)qt[d];
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < MSA_R; i++) {
        const int d = lane + 32 * i;
        if (d >= D) continue;
        if (dk) dk[row * a.D + d] += (float)(a.scale * acc_k[i]);
        if (dv) dv[row * a.D + d] += (float)acc_v[i];
    }
}

/* ---- node adapters: in[0] q (B,Tq,H,D), in[1] k, in[2] v (B,Tk,Hkv,D), in[3] idx
 * (B,Hkv,Tq,topk) I32, in[4] pos (B,Tk) I32, in[5] seg (B,Tk) I32 or NULL, in[6] q_slot (Tq)
 * I32 or NULL (Tq = Tk); saved[0] lse (B,H,Tq) (only when a backward will run); fp[0] scale;
 * ip[0] block (autograd/op_msa.c) ---- */

static msa_dims msa_node_dims(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *idx = n->in[3];
    msa_dims a;
    a.B = q->shape[0];
    a.Tq = q->shape[1];
    a.Tk = k->shape[1];
    a.H = q->shape[2];
    a.Hkv = k->shape[2];
    a.D = q->shape[3];
    a.block = (int)n->ip[0];
    a.topk = (int)idx->shape[3];
    a.scale = (double)n->fp[0];
    MT_CHECK(a.Hkv > 0 && a.H % a.Hkv == 0 && a.D >= 1 && a.D <= MSA_MAX_D && a.block >= 1 &&
                 a.topk >= 1,
             "msa_attention (cuda): H=%lld Hkv=%lld D=%lld block=%d topk=%d (H a multiple of "
             "Hkv, D in [1, %d])",
             (long long)a.H, (long long)a.Hkv, (long long)a.D, a.block, a.topk, MSA_MAX_D);
    MT_CHECK(n->in[6] || a.Tq == a.Tk,
             "msa_attention (cuda): %lld query rows, %lld keys, no q_slot", (long long)a.Tq,
             (long long)a.Tk);
    return a;
}

void cuda_msa_attention_fwd_node(const mt_node *n) {
    const msa_dims a = msa_node_dims(n);
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *idx = n->in[3];
    const mt_tensor *pos = n->in[4], *seg = n->in[5];
    const int32_t *q_slot = n->in[6] ? cuda_i32(n->in[6]) : NULL;
    cuda_msa_check("msa_attention (cuda)", cuda_i32(pos), seg ? cuda_i32(seg) : NULL, q_slot,
                   cuda_i32(idx), a.B, a.Hkv, a.Tq, a.Tk, a.block, a.topk);
    const int64_t rows = a.B * a.Tq * a.H;
    if (rows == 0) return;
    msa_attn_fwd_kernel<<<msa_warp_blocks(rows), 32 * MSA_WARPS>>>(
        cuda_f32(n->out), n->saved[0] ? cuda_f32(n->saved[0]) : NULL, cuda_f32(q), cuda_f32(k),
        cuda_f32(v), cuda_i32(idx), cuda_i32(pos), q_slot, a);
    CUDA_LAUNCH_CHECK("msa_attention forward");
}

void cuda_msa_attention_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *idx = n->in[3];
    const mt_tensor *pos = n->in[4];
    const int32_t *q_slot = n->in[6] ? cuda_i32(n->in[6]) : NULL;
    if (!q->grad && !k->grad && !v->grad) return;
    const msa_dims a = msa_node_dims(n);
    const int64_t rows = a.B * a.Tq * a.H;
    if (rows == 0) return;
    const float *lse = cuda_f32(n->saved[0]), *dout = cuda_grad(n->out);
    double *delta = (double *)mt_node_scratch(n, sizeof(double) * (size_t)rows, "msa delta");
    msa_attn_delta_kernel<<<msa_warp_blocks(rows), 32 * MSA_WARPS>>>(delta, dout, cuda_f32(n->out),
                                                                     a);
    CUDA_LAUNCH_CHECK("msa_attention backward (delta)");
    if (q->grad) {
        msa_attn_dq_kernel<<<msa_warp_blocks(rows), 32 * MSA_WARPS>>>(
            cuda_grad(q), dout, lse, delta, cuda_f32(q), cuda_f32(k), cuda_f32(v), cuda_i32(idx),
            cuda_i32(pos), q_slot, a);
        CUDA_LAUNCH_CHECK("msa_attention backward (dq)");
    }
    if (!k->grad && !v->grad) return;
    const int32_t *inv = cuda_msa_inverse(n, cuda_i32(idx), cuda_i32(pos), q_slot, a.B, a.Hkv, a.Tq,
                                          a.Tk, a.block, a.topk);
    msa_attn_dkv_kernel<<<msa_warp_blocks(a.B * a.Tk * a.Hkv), 32 * MSA_WARPS>>>(
        cuda_grad(k), cuda_grad(v), dout, lse, delta, cuda_f32(q), cuda_f32(k), cuda_f32(v), inv,
        cuda_i32(pos), q_slot, a);
    CUDA_LAUNCH_CHECK("msa_attention backward (dk, dv)");
}

/* ---- generation's decode step (mt_backend.decode.msa_attention; kernels/cpu/msa.h,
 * cpu_msa_attention_decode): the cached attention step of attention.cu over the selected blocks
 * only (cuda_decode_attend): one block per (b, h), thread d owns output dim d; the selected
 * blocks in idx's order, each one's keys in order (the CPU rounds each dot product to fp32
 * first, the device sums the exact products in double: the outputs differ by fp32
 * rounding). ---- */

__global__ void msa_attention_decode_kernel(float *out, const float *q, const float *k_cache,
                                            const float *v_cache, const int32_t *idx,
                                            const int32_t *t_len, int64_t t_max, int H, int Hkv,
                                            int D, int block, int topk, double scale) {
    const int row = blockIdx.x, b = row / H, h = row % H, g = h / (H / Hkv), d = threadIdx.x;
    const int64_t stride = (int64_t)Hkv * D, t = t_len[b] - 1;
    const int32_t *sel = idx + ((int64_t)b * Hkv + g) * topk;
    const float *kb = k_cache + ((int64_t)b * t_max * Hkv + g) * D;
    const float *vb = v_cache + ((int64_t)b * t_max * Hkv + g) * D;
    const double qd = d < D ? (double)q[(int64_t)row * D + d] : 0.0;
    double m = -INFINITY, l = 0, acc = 0;
    for (int s = 0; s < topk && sel[s] >= 0; s++) {
        int64_t j0, j1;
        msa_keys(t, (int32_t)t, sel[s], block, &j0, &j1);
        for (int64_t j = j0; j <= j1; j++)
            cuda_decode_attend(kb + j * stride, vb + j * stride, qd, D, scale, &m, &l, &acc);
    }
    if (d < D) out[(int64_t)row * D + d] = (float)(acc / l); /* the local block: l >= 1 */
}

void cuda_msa_attention_decode(float *out, const float *q, const float *k_cache,
                               const float *v_cache, const int32_t *idx, const int32_t *t_len,
                               int64_t B, int64_t t_max, int64_t H, int64_t Hkv, int64_t D,
                               int block, int topk, float scale) {
    MT_CHECK(Hkv > 0 && H % Hkv == 0 && D >= 1 && D <= 1024 && block >= 1 && topk >= 1,
             "msa_attention decode (cuda): H %lld, Hkv %lld, D %lld, block %d, topk %d",
             (long long)H, (long long)Hkv, (long long)D, block, topk);
    for (int64_t b = 0; b < B; b++)
        MT_CHECK(t_len[b] >= 1 && t_len[b] <= t_max,
                 "msa_attention decode (cuda): row %lld: t_len %d not in [1, %lld]", (long long)b,
                 t_len[b], (long long)t_max);
    if (B == 0) return;
    const int threads = (int)((D + 31) / 32 * 32);
    msa_attention_decode_kernel<<<(unsigned)(B * H), threads>>>(
        out, q, k_cache, v_cache, idx, cuda_decode_t_len(t_len, B), t_max, (int)H, (int)Hkv, (int)D,
        block, topk, (double)scale);
    CUDA_LAUNCH_CHECK("msa_attention decode");
}
