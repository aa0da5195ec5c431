/* attention.cu: causal GQA softmax attention (spec section 5), forward with the log-sum-exp
 * saved and the flash-style backward from it, mirroring kernels/cpu/attention.c.
 * Node (autograd/op_attention.c): in[0..3] q (B,T,H,D), k, v (B,T,Hkv,D), seg (B,T) I32 or
 * NULL; saved[0] lse (B,H,T) (only when a backward will run); fp[0] scale. Query head h reads
 * kv head h / (H/Hkv); with seg, position t sees s <= t only where seg[s] == seg[t].
 *
 * This is the straightforward correct version: one warp per query row (or kv row in the
 * backward) walking the visible positions one at a time, dims spread over the lanes, online
 * softmax and every sum in double. It is O(T^2 D) with no tiling or tensor cores: the fp32
 * mode's kernel and the GPU reference.
 *
 * bf16 mode (node ip[0] == MT_BF16; rounding points in kernels/cpu/attention.c's header): cuDNN's
 * fused flash attention (attention_cudnn.cu) by default on a 9.x device (MT_ATTENTION selects;
 * attention_cudnn.h), else, or when cuDNN declines the call, the own kernels: head dims 64 and
 * 128 run the tensor-core flash kernels (attention_flash.cu); other head dims run the kernels
 * below on rounded fp32 copies of q, k, v (and dout), with p~ (against the row maximum, found in
 * a first pass: the CPU's exact rule), p and ds rounded where the mode says (attn_dims.bf16):
 * correct and slow, for the small test models. */
#include "attention_cudnn.h"
#include "cuda_ops.cuh"
#include "attention_flash.cuh"

#define ATTN_MAX_D 256
#define ATTN_R     (ATTN_MAX_D / 32) /* dims per lane */
#define ATTN_WARPS 8                 /* warps per block */

struct attn_dims {
    int64_t B, T, H, Hkv, D;
    double scale;
    int bf16;    /* round p and ds through bf16 before their products */
    int64_t win; /* sliding window (0: none): query t sees keys t - win < s <= t */
};

/* The first key position query t sees (kernels/cpu/attention.c, attn_lo). */
__device__ inline int64_t attn_lo(int64_t t, int64_t win) {
    return win > 0 && t - win + 1 > 0 ? t - win + 1 : 0;
}

/* x through bf16 (double -> fp32 -> bf16, as on the CPU) when the mode rounds */
__device__ inline double attn_r(double x, int bf16) {
    return bf16 ? (double)__bfloat162float(__float2bfloat16_rn((float)x)) : x;
}

/* Loads row p (D floats) into the lane's slots: dim lane + 32 r. */
__device__ inline void attn_load(float (&r)[ATTN_R], const float *p, int D, int lane) {
#pragma unroll
    for (int i = 0; i < ATTN_R; i++) {
        int d = lane + 32 * i;
        r[i] = d < D ? p[d] : 0.0f;
    }
}

/* Dot product of a lane-distributed row with row p, in double, known to every lane. */
__device__ inline double attn_dot(const float (&a)[ATTN_R], const float *p, int D, int lane) {
    double s = 0;
#pragma unroll
    for (int i = 0; i < ATTN_R; i++) {
        int d = lane + 32 * i;
        if (d < D) s += (double)a[i] * (double)p[d];
    }
    return cuda_warp_sum(s);
}

__device__ inline int64_t attn_warp_id() {
    return ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
}

/* One warp per row (b,t,h) of (B,T,H): online softmax over the visible s <= t. */
__global__ void attn_fwd_kernel(float *out, float *lse, const float *q, const float *k,
                                const float *v, const int32_t *seg, attn_dims a) {
    const int64_t row = attn_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.T * a.H) return;
    const int64_t b = row / (a.T * a.H), t = (row / a.H) % a.T, h = row % a.H;
    const int64_t g = h / (a.H / a.Hkv), kv_stride = a.Hkv * a.D;
    const float *kb = k + (b * a.T * a.Hkv + g) * a.D, *vb = v + (b * a.T * a.Hkv + g) * a.D;
    const int32_t *segb = seg ? seg + b * a.T : NULL;
    const int32_t seg_t = segb ? segb[t] : 0;
    float qr[ATTN_R];
    attn_load(qr, q + row * a.D, D, lane);
    double acc[ATTN_R];
#pragma unroll
    for (int i = 0; i < ATTN_R; i++) acc[i] = 0;
    double m = -INFINITY, l = 0;
    /* bf16: the row maximum first, so p~ is rounded against it as on the CPU (the online
     * update below then never fires) */
    const int64_t lo = attn_lo(t, a.win);
    if (a.bf16)
        for (int64_t s = lo; s <= t; s++)
            if (!segb || segb[s] == seg_t)
                m = fmax(m, a.scale * attn_dot(qr, kb + s * kv_stride, D, lane));
    for (int64_t s = lo; s <= t; s++) {
        if (segb && segb[s] != seg_t) continue;
        const float *vs = vb + s * kv_stride;
        double x = a.scale * attn_dot(qr, kb + s * kv_stride, D, lane);
        if (x > m) {
            double r = exp(m - x); /* 0 on the first position (m = -inf) */
            l *= r;
#pragma unroll
            for (int i = 0; i < ATTN_R; i++) acc[i] *= r;
            m = x;
        }
        double p = exp(x - m), pr = attn_r(p, a.bf16);
        l += p;
#pragma unroll
        for (int i = 0; i < ATTN_R; i++) {
            int d = lane + 32 * i;
            if (d < D) acc[i] += pr * (double)vs[d];
        }
    }
    /* l >= 1: the row always sees itself */
#pragma unroll
    for (int i = 0; i < ATTN_R; i++) {
        int d = lane + 32 * i;
        if (d < D) out[row * a.D + d] = (float)(acc[i] / l);
    }
    if (lse && lane == 0) lse[(b * a.H + h) * a.T + t] = (float)(m + log(l));
}

/* delta[b,h,t] = rowsum(dO o O), the softmax backward's per-row term. */
__global__ void attn_delta_kernel(double *delta, const float *dout, const float *out, attn_dims a) {
    const int64_t row = attn_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.T * a.H) return;
    const int64_t b = row / (a.T * a.H), t = (row / a.H) % a.T, h = row % a.H;
    float o[ATTN_R];
    attn_load(o, out + row * a.D, D, lane);
    double s = attn_dot(o, dout + row * a.D, D, lane);
    if (lane == 0) delta[(b * a.H + h) * a.T + t] = s;
}

/* dq: one warp per query row, summing scale dS k over its visible kv positions. */
__global__ void attn_dq_kernel(float *dq, const float *dout, const float *lse, const double *delta,
                               const float *q, const float *k, const float *v, const int32_t *seg,
                               attn_dims a) {
    const int64_t row = attn_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.T * a.H) return;
    const int64_t b = row / (a.T * a.H), t = (row / a.H) % a.T, h = row % a.H;
    const int64_t g = h / (a.H / a.Hkv), bht = (b * a.H + h) * a.T + t;
    const int32_t *segb = seg ? seg + b * a.T : NULL;
    float qr[ATTN_R], dor[ATTN_R];
    attn_load(qr, q + row * a.D, D, lane);
    attn_load(dor, dout + row * a.D, D, lane);
    const double l = lse[bht], dl = delta[bht];
    double acc[ATTN_R];
#pragma unroll
    for (int i = 0; i < ATTN_R; i++) acc[i] = 0;
    for (int64_t s = attn_lo(t, a.win); s <= t; s++) {
        if (segb && segb[s] != segb[t]) continue;
        const float *ks = k + ((b * a.T + s) * a.Hkv + g) * a.D;
        const float *vs = v + ((b * a.T + s) * a.Hkv + g) * a.D;
        double p = exp(a.scale * attn_dot(qr, ks, D, lane) - l);
        double ds = attn_r(p * (attn_dot(dor, vs, D, lane) - dl), a.bf16);
#pragma unroll
        for (int i = 0; i < ATTN_R; i++) {
            int d = lane + 32 * i;
            if (d < D) acc[i] += ds * (double)ks[d];
        }
    }
#pragma unroll
    for (int i = 0; i < ATTN_R; i++) {
        int d = lane + 32 * i;
        if (d < D) dq[row * a.D + d] += (float)(a.scale * acc[i]);
    }
}

/* dk, dv: one warp per kv row (b,s,g), summing over the later query rows of every head in its
 * group (P recomputed, no atomics: each output row has one writer). */
__global__ void attn_dkv_kernel(float *dk, float *dv, const float *dout, const float *lse,
                                const double *delta, const float *q, const float *k, const float *v,
                                const int32_t *seg, attn_dims a) {
    const int64_t row = attn_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.T * a.Hkv) return;
    const int64_t b = row / (a.T * a.Hkv), s = (row / a.Hkv) % a.T, g = row % a.Hkv;
    const int64_t rep = a.H / a.Hkv;
    const int32_t *segb = seg ? seg + b * a.T : NULL;
    float kr[ATTN_R], vr[ATTN_R];
    attn_load(kr, k + row * a.D, D, lane);
    attn_load(vr, v + row * a.D, D, lane);
    double acc_k[ATTN_R], acc_v[ATTN_R];
#pragma unroll
    for (int i = 0; i < ATTN_R; i++) acc_k[i] = acc_v[i] = 0;
    for (int64_t h = g * rep; h < (g + 1) * rep; h++) {
        const int64_t t_end = a.win > 0 && s + a.win < a.T ? s + a.win : a.T;
        for (int64_t t = s; t < t_end; t++) {
            if (segb && segb[t] != segb[s]) continue;
            const int64_t bht = (b * a.H + h) * a.T + t;
            const float *qt = q + ((b * a.T + t) * a.H + h) * a.D;
            const float *do_t = dout + ((b * a.T + t) * a.H + h) * a.D;
            double p = exp(a.scale * attn_dot(kr, qt, D, lane) - (double)lse[bht]);
            double ds = attn_r(p * (attn_dot(vr, do_t, D, lane) - delta[bht]), a.bf16);
            const double pr = attn_r(p, a.bf16);
#pragma unroll
            for (int i = 0; i < ATTN_R; i++) {
                int d = lane + 32 * i;
                if (d < D) {
                    acc_v[i] += pr * (double)do_t[d];
                    acc_k[i] += ds * (double)qt[d];
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < ATTN_R; i++) {
        int d = lane + 32 * i;
        if (d >= D) continue;
        if (dk) dk[row * a.D + d] += (float)(a.scale * acc_k[i]);
        if (dv) dv[row * a.D + d] += (float)acc_v[i];
    }
}

static attn_dims attn_node_dims(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1];
    attn_dims a;
    a.B = q->shape[0];
    a.T = q->shape[1];
    a.H = q->shape[2];
    a.Hkv = k->shape[2];
    a.D = q->shape[3];
    a.scale = (double)n->fp[0];
    a.bf16 = n->ip[0] == MT_BF16;
    a.win = n->ip[1];
    MT_CHECK(a.Hkv > 0 && a.H % a.Hkv == 0 && a.D >= 1 && a.D <= ATTN_MAX_D,
             "attention (cuda): H=%lld, Hkv=%lld, D=%lld: H must be a multiple of Hkv and D in "
             "[1, %d]",
             (long long)a.H, (long long)a.Hkv, (long long)a.D, ATTN_MAX_D);
    return a;
}

static unsigned attn_warp_blocks(int64_t rows) {
    return (unsigned)((rows + ATTN_WARPS - 1) / ATTN_WARPS);
}

__global__ void attn_round_kernel(float *dst, const float *src, int64_t count) {
    CUDA_FOR(i, count) dst[i] = __bfloat162float(__float2bfloat16_rn(src[i]));
}

/* bf16 mode on the reference kernels: a scratch copy of src (count floats) rounded through bf16;
 * fp32 mode: src itself. */
static const float *attn_operand(const mt_node *n, const attn_dims &a, const float *src,
                                 int64_t count, const char *what) {
    if (!a.bf16 || count == 0) return src;
    float *dst = (float *)mt_node_scratch(n, sizeof(float) * (size_t)count, what);
    attn_round_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(dst, src, count);
    CUDA_LAUNCH_CHECK(what);
    return dst;
}

void cuda_attention_fwd_node(const mt_node *n) {
    attn_dims a = attn_node_dims(n);
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    int64_t rows = a.B * a.T * a.H;
    if (rows == 0) return;
    /* cuDNN's and the flash kernels' masks are causal + segments only: a sliding window runs
     * on the reference kernels below */
    const bool fast = a.bf16 && a.win == 0;
    if (fast && cuda_attention_cudnn_fwd(n)) return;
    if (fast && cuda_attention_flash_supported(a.D)) {
        cuda_attention_flash_fwd(n);
        return;
    }
    const float *qd = attn_operand(n, a, cuda_f32(q), mt_numel(q), "attention q bf16");
    const float *kd = attn_operand(n, a, cuda_f32(k), mt_numel(k), "attention k bf16");
    const float *vd = attn_operand(n, a, cuda_f32(v), mt_numel(v), "attention v bf16");
    attn_fwd_kernel<<<attn_warp_blocks(rows), 32 * ATTN_WARPS>>>(
        cuda_f32(n->out), n->saved[0] ? cuda_f32(n->saved[0]) : NULL, qd, kd, vd,
        seg ? cuda_i32(seg) : NULL, a);
    CUDA_LAUNCH_CHECK("attention forward");
}

void cuda_attention_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    if (!q->grad && !k->grad && !v->grad) return;
    attn_dims a = attn_node_dims(n);
    int64_t rows = a.B * a.T * a.H, kv_rows = a.B * a.T * a.Hkv;
    if (rows == 0) return;
    const bool fast = a.bf16 && a.win == 0;
    if (fast && cuda_attention_cudnn_bwd(n)) return;
    if (fast && cuda_attention_flash_supported(a.D)) {
        cuda_attention_flash_bwd(n);
        return;
    }
    const int32_t *sg = seg ? cuda_i32(seg) : NULL;
    const float *lse = cuda_f32(n->saved[0]);
    const float *dout = attn_operand(n, a, cuda_grad(n->out), rows * a.D, "attention dout bf16");
    const float *qd = attn_operand(n, a, cuda_f32(q), mt_numel(q), "attention q bf16");
    const float *kd = attn_operand(n, a, cuda_f32(k), mt_numel(k), "attention k bf16");
    const float *vd = attn_operand(n, a, cuda_f32(v), mt_numel(v), "attention v bf16");
    double *delta = (double *)mt_node_scratch(n, sizeof(double) * (size_t)rows, "attention delta");
    attn_delta_kernel<<<attn_warp_blocks(rows), 32 * ATTN_WARPS>>>(delta, dout, cuda_f32(n->out),
                                                                   a);
    CUDA_LAUNCH_CHECK("attention backward (delta)");
    if (q->grad) {
        attn_dq_kernel<<<attn_warp_blocks(rows), 32 * ATTN_WARPS>>>(cuda_grad(q), dout, lse, delta,
                                                                    qd, kd, vd, sg, a);
        CUDA_LAUNCH_CHECK("attention backward (dq)");
    }
    if (k->grad || v->grad) {
        attn_dkv_kernel<<<attn_warp_blocks(kv_rows), 32 * ATTN_WARPS>>>(
            cuda_grad(k), cuda_grad(v), dout, lse, delta, qd, kd, vd, sg, a);
        CUDA_LAUNCH_CHECK("attention backward (dk, dv)");
    }
}

/* ---- generation's decode step (mt_backend.decode.attention; kernels/cpu/attention.h,
 * cpu_attention_decode): one block per (b, h), thread d owns output dim d; positions in order,
 * each score a block-wide double sum of q[d] k[s][d], the online softmax in double as the CPU's
 * attn_row (the same maximum updates; only the order of each dot product's sum differs). ---- */

__global__ void attn_decode_kernel(float *out, const float *q, const float *k_cache,
                                   const float *v_cache, const int32_t *t_len, int64_t t_max, int H,
                                   int Hkv, int D, double scale) {
    const int row = blockIdx.x, b = row / H, h = row % H, g = h / (H / Hkv), d = threadIdx.x;
    const int64_t stride = (int64_t)Hkv * D;
    const float *kb = k_cache + ((int64_t)b * t_max * Hkv + g) * D;
    const float *vb = v_cache + ((int64_t)b * t_max * Hkv + g) * D;
    const double qd = d < D ? (double)q[(int64_t)row * D + d] : 0.0;
    double m = -INFINITY, l = 0, acc = 0;
    for (int s = 0; s < t_len[b]; s++)
        cuda_decode_attend(kb + s * stride, vb + s * stride, qd, D, scale, &m, &l, &acc);
    if (d < D) out[(int64_t)row * D + d] = (float)(acc / l); /* l >= 1: the row sees itself */
}

/* The decode steps' per-row lengths arrive in host memory (mt_backend.decode): copied into a
 * device buffer that grows to the largest batch and is kept (no allocation per step). */
const int32_t *cuda_decode_t_len(const int32_t *t_len, int64_t B) {
    static int32_t *dev = NULL;
    static int64_t cap = 0;
    if (B > cap) {
        if (dev) cudaCheck("decode lengths", cudaFree(dev));
        cudaCheck("decode lengths", cudaMalloc((void **)&dev, sizeof(int32_t) * (size_t)B));
        cap = B;
    }
    cudaCheck("decode lengths",
              cudaMemcpy(dev, t_len, sizeof(int32_t) * (size_t)B, cudaMemcpyHostToDevice));
    return dev;
}

void cuda_attention_decode(float *out, const float *q, const float *k_cache, const float *v_cache,
                           const int32_t *t_len, int64_t B, int64_t t_max, int64_t H, int64_t Hkv,
                           int64_t D, float scale) {
    MT_CHECK(H % Hkv == 0 && D >= 1 && D <= 1024, "attention decode: H %lld, Hkv %lld, D %lld",
             (long long)H, (long long)Hkv, (long long)D);
    for (int64_t b = 0; b < B; b++)
        MT_CHECK(t_len[b] >= 1 && t_len[b] <= t_max,
                 "attention decode: row %lld: t_len %d not in [1, Tmax=%lld]", (long long)b,
                 t_len[b], (long long)t_max);
    if (B == 0) return;
    const int threads = (int)((D + 31) / 32 * 32);
    attn_decode_kernel<<<(unsigned)(B * H), threads>>>(out, q, k_cache, v_cache,
                                                       cuda_decode_t_len(t_len, B), t_max, (int)H,
                                                       (int)Hkv, (int)D, (double)scale);
    CUDA_LAUNCH_CHECK("attention decode");
}
