/* msa_attention.cu: softmax attention restricted to the MSA selection (spec 4.3) on the
 * device, mirroring kernels/cpu/msa_attention.c: forward with the lse saved, the backward from
 * it, and the selection's inverse (which queries chose a key block) that the backward's dk, dv
 * and msa_kl.cu's dik go through.
 *
 * fp32 mode only (the node carries no GEMM mode), the attention.cu form restricted to the
 * support: one warp per row, dims over the lanes, products summed in double (exact fp32
 * products), online softmax and every sum in double; the cost is topk*block keys per query,
 * never T^2, and no mask is built:
 *   forward: warp per query row (b, t, h): its selected blocks' keys j <= t; O = sum p V / l,
 *            lse = m + log l.
 *   dq:      warp per query row: p = exp(S - lse), ds = p (dO.v - delta), dq += scale ds k.
 *   dk, dv:  warp per key row (b, j, kv head g): the queries that chose j's block (the inverse,
 *            in increasing t), those with t >= j, each of the group's G heads: dv += p dO,
 *            dk += scale ds q. One writer per row: no atomics, a fixed order, deterministic;
 *            a key no query sees is left untouched, as on the CPU. */
#include "msa.cuh"

struct msa_dims {
    int64_t B, T, H, Hkv, D;
    int block, topk;
    double scale;
};

/* ---- the inverse of a selection ---- */

__global__ void msa_inv_count_kernel(int32_t *off, const int32_t *idx, const int32_t *pos,
                                     int64_t B, int64_t Hs, int64_t T, int block, int topk) {
    CUDA_FOR(r, B * Hs * T) {
        const int64_t bh = r / T, t = r % T, b = bh / Hs;
        const int32_t *sel = idx + r * topk;
        const int64_t rs = t - pos[b * T + t];
        for (int s = 0; s < topk && sel[s] >= 0; s++)
            atomicAdd(&off[bh * (T + 1) + rs + (int64_t)sel[s] * block + 1], 1); /* exact */
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

/* warp per slot (b, h, jb): at a block start, its choosers t >= jb of its sample in order */
__global__ void msa_inv_fill_kernel(int32_t *list_all, const int32_t *off_all, const int32_t *idx,
                                    const int32_t *pos, int64_t B, int64_t Hs, int64_t T, int block,
                                    int topk) {
    const int64_t w = msa_warp_id();
    const int lane = threadIdx.x & 31;
    if (w >= B * Hs * T) return;
    const int64_t bh = w / T, jb = w % T, b = bh / Hs;
    const int32_t *pb = pos + b * T, *off = off_all + bh * (T + 1);
    if (pb[jb] % block != 0 || off[jb] == off[jb + 1]) return;
    const int32_t blk = pb[jb] / block, want = off[jb + 1] - off[jb];
    const int64_t rs = jb - pb[jb];
    const int32_t *sel_bh = idx + bh * T * topk;
    int32_t *list = list_all + bh * T * topk + off[jb];
    int32_t got = 0;
    for (int64_t t0 = jb; got < want && t0 < T; t0 += 32) {
        const int64_t t = t0 + lane;
        bool chose = false;
        if (t < T && t - pb[t] == rs)
            for (int s = 0; s < topk && sel_bh[t * topk + s] >= 0; s++)
                chose = chose || sel_bh[t * topk + s] == blk;
        const unsigned m = __ballot_sync(0xffffffffu, chose);
        if (chose) list[got + __popc(m & ((1u << lane) - 1u))] = (int32_t)t;
        got += __popc(m);
    }
}

int32_t *cuda_msa_inverse(const mt_node *n, const int32_t *idx, const int32_t *pos, int64_t B,
                          int64_t Hs, int64_t T, int block, int topk) {
    const int64_t n_off = B * Hs * (T + 1);
    int32_t *inv = (int32_t *)mt_node_scratch(
        n, sizeof(int32_t) * (size_t)(n_off + B * Hs * T * topk), "msa inverse");
    cudaCheck("msa inverse", cudaMemsetAsync(inv, 0, sizeof(int32_t) * (size_t)n_off));
    if (B * Hs * T == 0) return inv;
    msa_inv_count_kernel<<<cuda_blocks(B * Hs * T, CUDA_THREADS), CUDA_THREADS>>>(
        inv, idx, pos, B, Hs, T, block, topk);
    CUDA_LAUNCH_CHECK("msa inverse (count)");
    msa_inv_scan_kernel<<<(unsigned)(B * Hs), CUDA_THREADS>>>(inv, T);
    CUDA_LAUNCH_CHECK("msa inverse (scan)");
    msa_inv_fill_kernel<<<msa_warp_blocks(B * Hs * T), 32 * MSA_WARPS>>>(inv + n_off, inv, idx, pos,
                                                                         B, Hs, T, block, topk);
    CUDA_LAUNCH_CHECK("msa inverse (fill)");
    return inv;
}

/* ---- forward ---- */

__global__ void msa_attn_fwd_kernel(float *out, float *lse, const float *q, const float *k,
                                    const float *v, const int32_t *idx, const int32_t *pos,
                                    msa_dims a) {
    const int64_t row = msa_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.T * a.H) return;
    const int64_t b = row / (a.T * a.H), t = (row / a.H) % a.T, h = row % a.H;
    const int64_t g = h / (a.H / a.Hkv), ldk = a.Hkv * a.D;
    const int32_t pt = pos[b * a.T + t], *sel = idx + ((b * a.Hkv + g) * a.T + t) * a.topk;
    const float *kb = k + (b * a.T * a.Hkv + g) * a.D, *vb = v + (b * a.T * a.Hkv + g) * a.D;
    float qr[MSA_R];
    msa_load(qr, q + row * a.D, D, lane);
    double acc[MSA_R];
#pragma unroll
    for (int i = 0; i < MSA_R; i++) acc[i] = 0;
    double m = -INFINITY, l = 0;
    for (int s = 0; s < a.topk && sel[s] >= 0; s++) {
        int64_t j0, j1;
        msa_keys(t, pt, sel[s], a.block, &j0, &j1);
        for (int64_t j = j0; j <= j1; j++) {
            const double x = a.scale * msa_dot(qr, kb + j * ldk, D, lane);
            if (x > m) { /* online softmax: rescale what came before (0 at the first key) */
                const double r = exp(m - x);
                l *= r;
#pragma unroll
                for (int i = 0; i < MSA_R; i++) acc[i] *= r;
                m = x;
            }
            const double p = exp(x - m);
            const float *vj = vb + j * ldk;
            l += p;
#pragma unroll
            for (int i = 0; i < MSA_R; i++) {
                const int d = lane + 32 * i;
                if (d < D) acc[i] += p * (double)vj[d];
            }
        }
    }
    /* l >= 1: the local block holds t itself */
#pragma unroll
    for (int i = 0; i < MSA_R; i++) {
        const int d = lane + 32 * i;
        if (d < D) out[row * a.D + d] = (float)(acc[i] / l);
    }
    if (lse && lane == 0) lse[(b * a.H + h) * a.T + t] = (float)(m + log(l));
}

/* ---- backward ---- */

/* delta[b,h,t] = dO . O */
__global__ void msa_attn_delta_kernel(double *delta, const float *dout, const float *out,
                                      msa_dims a) {
    const int64_t row = msa_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.T * a.H) return;
    const int64_t b = row / (a.T * a.H), t = (row / a.H) % a.T, h = row % a.H;
    float o[MSA_R];
    msa_load(o, out + row * a.D, D, lane);
    const double s = msa_dot(o, dout + row * a.D, D, lane);
    if (lane == 0) delta[(b * a.H + h) * a.T + t] = s;
}

__global__ void msa_attn_dq_kernel(float *dq, const float *dout, const float *lse,
                                   const double *delta, const float *q, const float *k,
                                   const float *v, const int32_t *idx, const int32_t *pos,
                                   msa_dims a) {
    const int64_t row = msa_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.T * a.H) return;
    const int64_t b = row / (a.T * a.H), t = (row / a.H) % a.T, h = row % a.H;
    const int64_t g = h / (a.H / a.Hkv), ldk = a.Hkv * a.D, bht = (b * a.H + h) * a.T + t;
    const int32_t pt = pos[b * a.T + t], *sel = idx + ((b * a.Hkv + g) * a.T + t) * a.topk;
    const float *kb = k + (b * a.T * a.Hkv + g) * a.D, *vb = v + (b * a.T * a.Hkv + g) * a.D;
    float qr[MSA_R], dor[MSA_R];
    msa_load(qr, q + row * a.D, D, lane);
    msa_load(dor, dout + row * a.D, D, lane);
    const double ls = lse[bht], dl = delta[bht];
    double acc[MSA_R];
#pragma unroll
    for (int i = 0; i < MSA_R; i++) acc[i] = 0;
    for (int s = 0; s < a.topk && sel[s] >= 0; s++) {
        int64_t j0, j1;
        msa_keys(t, pt, sel[s], a.block, &j0, &j1);
        for (int64_t j = j0; j <= j1; j++) {
            const float *kj = kb + j * ldk;
            const double p = exp(a.scale * msa_dot(qr, kj, D, lane) - ls);
            const double ds = p * (msa_dot(dor, vb + j * ldk, D, lane) - dl);
#pragma unroll
            for (int i = 0; i < MSA_R; i++) {
                const int d = lane + 32 * i;
                if (d < D) acc[i] += ds * (double)kj[d];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < MSA_R; i++) {
        const int d = lane + 32 * i;
        if (d < D) dq[row * a.D + d] += (float)(a.scale * acc[i]);
    }
}

__global__ void msa_attn_dkv_kernel(float *dk, float *dv, const float *dout, const float *lse,
                                    const double *delta, const float *q, const float *k,
                                    const float *v, const int32_t *inv, const int32_t *pos,
                                    msa_dims a) {
    const int64_t row = msa_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.T * a.Hkv) return;
    const int64_t b = row / (a.T * a.Hkv), j = (row / a.Hkv) % a.T, g = row % a.Hkv;
    const int64_t G = a.H / a.Hkv, bg = b * a.Hkv + g;
    const int64_t jb = j - pos[b * a.T + j] % a.block; /* the first slot of j's block */
    const int32_t *off = inv + bg * (a.T + 1);
    const int32_t *list = inv + a.B * a.Hkv * (a.T + 1) + bg * a.T * a.topk;
    float kr[MSA_R], vr[MSA_R];
    msa_load(kr, k + row * a.D, D, lane);
    msa_load(vr, v + row * a.D, D, lane);
    double acc_k[MSA_R], acc_v[MSA_R];
#pragma unroll
    for (int i = 0; i < MSA_R; i++) acc_k[i] = acc_v[i] = 0;
    bool any = false;
    for (int32_t e = off[jb]; e < off[jb + 1]; e++) {
        const int64_t t = list[e];
        if (t < j) continue; /* a chooser before j does not see it */
        any = true;
        for (int64_t h = g * G; h < (g + 1) * G; h++) {
            const int64_t bht = (b * a.H + h) * a.T + t, r = (b * a.T + t) * a.H + h;
            const float *qt = q + r * a.D, *dot = dout + r * a.D;
            const double p = exp(a.scale * msa_dot(kr, qt, D, lane) - (double)lse[bht]);
            const double ds = p * (msa_dot(vr, dot, D, lane) - delta[bht]);
#pragma unroll
            for (int i = 0; i < MSA_R; i++) {
                const int d = lane + 32 * i;
                if (d < D) {
                    acc_v[i] += p * (double)dot[d];
                    acc_k[i] += ds * (double)qt[d];
                }
            }
        }
    }
    if (!any) return;
#pragma unroll
    for (int i = 0; i < MSA_R; i++) {
        const int d = lane + 32 * i;
        if (d >= D) continue;
        if (dk) dk[row * a.D + d] += (float)(a.scale * acc_k[i]);
        if (dv) dv[row * a.D + d] += (float)acc_v[i];
    }
}

/* ---- node adapters: in[0] q (B,T,H,D), in[1] k, in[2] v (B,T,Hkv,D), in[3] idx (B,Hkv,T,topk)
 * I32, in[4] pos (B,T) I32, in[5] seg (B,T) I32 or NULL; saved[0] lse (B,H,T) (only when a
 * backward will run); fp[0] scale; ip[0] block (autograd/op_msa.c) ---- */

static msa_dims msa_node_dims(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *idx = n->in[3];
    msa_dims a;
    a.B = q->shape[0];
    a.T = q->shape[1];
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
    return a;
}

void cuda_msa_attention_fwd_node(const mt_node *n) {
    const msa_dims a = msa_node_dims(n);
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *idx = n->in[3];
    const mt_tensor *pos = n->in[4], *seg = n->in[5];
    cuda_msa_check("msa_attention (cuda)", cuda_i32(pos), seg ? cuda_i32(seg) : NULL, cuda_i32(idx),
                   a.B, a.Hkv, a.T, a.block, a.topk);
    const int64_t rows = a.B * a.T * a.H;
    if (rows == 0) return;
    msa_attn_fwd_kernel<<<msa_warp_blocks(rows), 32 * MSA_WARPS>>>(
        cuda_f32(n->out), n->saved[0] ? cuda_f32(n->saved[0]) : NULL, cuda_f32(q), cuda_f32(k),
        cuda_f32(v), cuda_i32(idx), cuda_i32(pos), a);
    CUDA_LAUNCH_CHECK("msa_attention forward");
}

void cuda_msa_attention_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *idx = n->in[3];
    const mt_tensor *pos = n->in[4];
    if (!q->grad && !k->grad && !v->grad) return;
    const msa_dims a = msa_node_dims(n);
    const int64_t rows = a.B * a.T * a.H;
    if (rows == 0) return;
    const float *lse = cuda_f32(n->saved[0]), *dout = cuda_grad(n->out);
    double *delta = (double *)mt_node_scratch(n, sizeof(double) * (size_t)rows, "msa delta");
    msa_attn_delta_kernel<<<msa_warp_blocks(rows), 32 * MSA_WARPS>>>(delta, dout, cuda_f32(n->out),
                                                                     a);
    CUDA_LAUNCH_CHECK("msa_attention backward (delta)");
    if (q->grad) {
        msa_attn_dq_kernel<<<msa_warp_blocks(rows), 32 * MSA_WARPS>>>(
            cuda_grad(q), dout, lse, delta, cuda_f32(q), cuda_f32(k), cuda_f32(v), cuda_i32(idx),
            cuda_i32(pos), a);
        CUDA_LAUNCH_CHECK("msa_attention backward (dq)");
    }
    if (!k->grad && !v->grad) return;
    const int32_t *inv =
        cuda_msa_inverse(n, cuda_i32(idx), cuda_i32(pos), a.B, a.Hkv, a.T, a.block, a.topk);
    msa_attn_dkv_kernel<<<msa_warp_blocks(a.B * a.T * a.Hkv), 32 * MSA_WARPS>>>(
        cuda_grad(k), cuda_grad(v), dout, lse, delta, cuda_f32(q), cuda_f32(k), cuda_f32(v), inv,
        cuda_i32(pos), a);
    CUDA_LAUNCH_CHECK("msa_attention backward (dk, dv)");
}
