/* cp_attention.cu: context parallelism's attention on the device (autograd/op_cp_attention.c;
 * the CPU twin kernels/cpu/cp_attention.c with cpu_attention_pos_*). The exchange is the
 * backend-independent node work (device buffers, the group's hooks); the kernels attend the Tq
 * local query rows at global positions q_pos to the Tk = C Tq gathered keys at positions
 * 0 .. Tk-1: row i sees key s <= q_pos[i] with seg_k[s] == seg_q[i].
 *
 * The straightforward correct version, as attention.cu's reference kernels: one warp per query
 * row (or key row in the backward's dk, dv) walking the visible keys one at a time, dims over
 * the lanes, online softmax and every sum in double; in bf16 mode q, k, v, dout arrive rounded
 * and p~ (against the row maximum, a first pass), p and ds are rounded before their products
 * (kernels/cpu/attention.c's header). O(Tq Tk D) with no tiling or tensor cores: the device
 * reference, not the fast path (which, for one rank, is mt_attention's flash / cuDNN path). */
#include "cuda_ops.cuh"

#define CP_ATTN_MAX_D 256
#define CP_ATTN_R     (CP_ATTN_MAX_D / 32) /* dims per lane */
#define CP_ATTN_WARPS 8                    /* warps per block */

struct cp_attn_dims {
    int64_t B, Tq, Tk, H, Hkv, D;
    double scale;
    int bf16; /* round p and ds through bf16 before their products */
};

__device__ inline double cp_attn_r(double x, int bf16) {
    return bf16 ? (double)__bfloat162float(__float2bfloat16_rn((float)x)) : x;
}

__device__ inline void cp_attn_load(float (&r)[CP_ATTN_R], const float *p, int D, int lane) {
#pragma unroll
    for (int i = 0; i < CP_ATTN_R; i++) {
        int d = lane + 32 * i;
        r[i] = d < D ? p[d] : 0.0f;
    }
}

/* Dot product of a lane-distributed row with row p, in double, known to every lane. */
__device__ inline double cp_attn_dot(const float (&a)[CP_ATTN_R], const float *p, int D, int lane) {
    double s = 0;
#pragma unroll
    for (int i = 0; i < CP_ATTN_R; i++) {
        int d = lane + 32 * i;
        if (d < D) s += (double)a[i] * (double)p[d];
    }
    return cuda_warp_sum(s);
}

__device__ inline int64_t cp_attn_warp_id() {
    return ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
}

/* One warp per query row (b, i, h) of (B,Tq,H): online softmax over the visible keys. */
static __global__ void cp_attn_fwd_kernel(float *out, float *lse, const float *q, const float *k,
                                          const float *v, const int32_t *sq, const int32_t *sk,
                                          const int32_t *q_pos, cp_attn_dims a) {
    const int64_t row = cp_attn_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.Tq * a.H) return;
    const int64_t b = row / (a.Tq * a.H), i = (row / a.H) % a.Tq, h = row % a.H;
    const int64_t g = h / (a.H / a.Hkv), stride = a.Hkv * a.D, t = q_pos[i];
    const float *kb = k + (b * a.Tk * a.Hkv + g) * a.D, *vb = v + (b * a.Tk * a.Hkv + g) * a.D;
    const int32_t *skb = sk ? sk + b * a.Tk : NULL;
    const int32_t st = sq ? sq[b * a.Tq + i] : 0;
    float qr[CP_ATTN_R];
    cp_attn_load(qr, q + row * a.D, D, lane);
    double acc[CP_ATTN_R];
#pragma unroll
    for (int r = 0; r < CP_ATTN_R; r++) acc[r] = 0;
    double m = -INFINITY, l = 0;
    if (a.bf16) /* the row maximum first: p~ is rounded against it, as on the CPU */
        for (int64_t s = 0; s <= t; s++)
            if (!skb || skb[s] == st)
                m = fmax(m, a.scale * cp_attn_dot(qr, kb + s * stride, D, lane));
    for (int64_t s = 0; s <= t; s++) {
        if (skb && skb[s] != st) continue;
        const float *vs = vb + s * stride;
        double x = a.scale * cp_attn_dot(qr, kb + s * stride, D, lane);
        if (x > m) {
            double r = exp(m - x); /* 0 on the first key (m = -inf) */
            l *= r;
#pragma unroll
            for (int c = 0; c < CP_ATTN_R; c++) acc[c] *= r;
            m = x;
        }
        double p = exp(x - m), pr = cp_attn_r(p, a.bf16);
        l += p;
#pragma unroll
        for (int c = 0; c < CP_ATTN_R; c++) {
            int d = lane + 32 * c;
            if (d < D) acc[c] += pr * (double)vs[d];
        }
    }
    /* l >= 1: the row sees its own key */
#pragma unroll
    for (int c = 0; c < CP_ATTN_R; c++) {
        int d = lane + 32 * c;
        if (d < D) out[row * a.D + d] = (float)(acc[c] / l);
    }
    if (lse && lane == 0) lse[(b * a.H + h) * a.Tq + i] = (float)(m + log(l));
}

/* delta[b,h,i] = rowsum(dO o O). */
static __global__ void cp_attn_delta_kernel(double *delta, const float *dout, const float *out,
                                            cp_attn_dims a) {
    const int64_t row = cp_attn_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.Tq * a.H) return;
    const int64_t b = row / (a.Tq * a.H), i = (row / a.H) % a.Tq, h = row % a.H;
    float o[CP_ATTN_R];
    cp_attn_load(o, out + row * a.D, D, lane);
    double s = cp_attn_dot(o, dout + row * a.D, D, lane);
    if (lane == 0) delta[(b * a.H + h) * a.Tq + i] = s;
}

/* dq: one warp per query row, summing scale dS k over its visible keys. */
static __global__ void cp_attn_dq_kernel(float *dq, const float *dout, const float *lse,
                                         const double *delta, const float *q, const float *k,
                                         const float *v, const int32_t *sq, const int32_t *sk,
                                         const int32_t *q_pos, cp_attn_dims a) {
    const int64_t row = cp_attn_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.Tq * a.H) return;
    const int64_t b = row / (a.Tq * a.H), i = (row / a.H) % a.Tq, h = row % a.H;
    const int64_t g = h / (a.H / a.Hkv), bhi = (b * a.H + h) * a.Tq + i, t = q_pos[i];
    const int32_t *skb = sk ? sk + b * a.Tk : NULL;
    const int32_t st = sq ? sq[b * a.Tq + i] : 0;
    float qr[CP_ATTN_R], dor[CP_ATTN_R];
    cp_attn_load(qr, q + row * a.D, D, lane);
    cp_attn_load(dor, dout + row * a.D, D, lane);
    const double l = lse[bhi], dl = delta[bhi];
    double acc[CP_ATTN_R];
#pragma unroll
    for (int c = 0; c < CP_ATTN_R; c++) acc[c] = 0;
    for (int64_t s = 0; s <= t; s++) {
        if (skb && skb[s] != st) continue;
        const float *ks = k + ((b * a.Tk + s) * a.Hkv + g) * a.D;
        const float *vs = v + ((b * a.Tk + s) * a.Hkv + g) * a.D;
        double p = exp(a.scale * cp_attn_dot(qr, ks, D, lane) - l);
        double ds = cp_attn_r(p * (cp_attn_dot(dor, vs, D, lane) - dl), a.bf16);
#pragma unroll
        for (int c = 0; c < CP_ATTN_R; c++) {
            int d = lane + 32 * c;
            if (d < D) acc[c] += ds * (double)ks[d];
        }
    }
#pragma unroll
    for (int c = 0; c < CP_ATTN_R; c++) {
        int d = lane + 32 * c;
        if (d < D) dq[row * a.D + d] += (float)(a.scale * acc[c]);
    }
}

/* dk, dv: one warp per key row (b, s, g), summing over the query rows that see it, of every
 * head of its group (P recomputed, no atomics: each output row has one writer). */
static __global__ void cp_attn_dkv_kernel(float *dk, float *dv, const float *dout, const float *lse,
                                          const double *delta, const float *q, const float *k,
                                          const float *v, const int32_t *sq, const int32_t *sk,
                                          const int32_t *q_pos, cp_attn_dims a) {
    const int64_t row = cp_attn_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D;
    if (row >= a.B * a.Tk * a.Hkv) return;
    const int64_t b = row / (a.Tk * a.Hkv), s = (row / a.Hkv) % a.Tk, g = row % a.Hkv;
    const int64_t rep = a.H / a.Hkv;
    const int32_t *sqb = sq ? sq + b * a.Tq : NULL;
    const int32_t ss = sk ? sk[b * a.Tk + s] : 0;
    float kr[CP_ATTN_R], vr[CP_ATTN_R];
    cp_attn_load(kr, k + row * a.D, D, lane);
    cp_attn_load(vr, v + row * a.D, D, lane);
    double acc_k[CP_ATTN_R], acc_v[CP_ATTN_R];
#pragma unroll
    for (int c = 0; c < CP_ATTN_R; c++) acc_k[c] = acc_v[c] = 0;
    for (int64_t h = g * rep; h < (g + 1) * rep; h++)
        for (int64_t i = 0; i < a.Tq; i++) {
            if (q_pos[i] < s || (sqb && sqb[i] != ss)) continue;
            const int64_t bhi = (b * a.H + h) * a.Tq + i;
            const float *qt = q + ((b * a.Tq + i) * a.H + h) * a.D;
            const float *do_t = dout + ((b * a.Tq + i) * a.H + h) * a.D;
            double p = exp(a.scale * cp_attn_dot(kr, qt, D, lane) - (double)lse[bhi]);
            double ds = cp_attn_r(p * (cp_attn_dot(vr, do_t, D, lane) - delta[bhi]), a.bf16);
            const double pr = cp_attn_r(p, a.bf16);
#pragma unroll
            for (int c = 0; c < CP_ATTN_R; c++) {
                int d = lane + 32 * c;
                if (d < D) {
                    acc_v[c] += pr * (double)do_t[d];
                    acc_k[c] += ds * (double)qt[d];
                }
            }
        }
#pragma unroll
    for (int c = 0; c < CP_ATTN_R; c++) {
        int d = lane + 32 * c;
        if (d >= D) continue;
        if (dk) dk[row * a.D + d] += (float)(a.scale * acc_k[c]);
        if (dv) dv[row * a.D + d] += (float)acc_v[c];
    }
}

static __global__ void cp_attn_round_kernel(float *dst, const float *src, int64_t count) {
    CUDA_FOR(i, count) dst[i] = __bfloat162float(__float2bfloat16_rn(src[i]));
}

static cp_attn_dims cp_attn_node_dims(const mt_node *n, int64_t Tk) {
    const mt_tensor *q = n->in[0], *k = n->in[1];
    cp_attn_dims a;
    a.B = q->shape[0];
    a.Tq = q->shape[1];
    a.Tk = Tk;
    a.H = q->shape[2];
    a.Hkv = k->shape[2];
    a.D = q->shape[3];
    a.scale = (double)n->fp[0];
    a.bf16 = n->ip[0] == MT_BF16;
    MT_CHECK(a.Hkv > 0 && a.H % a.Hkv == 0 && a.D >= 1 && a.D <= CP_ATTN_MAX_D,
             "cp_attention (cuda): H=%lld, Hkv=%lld, D=%lld: H must be a multiple of Hkv and D "
             "in [1, %d]",
             (long long)a.H, (long long)a.Hkv, (long long)a.D, CP_ATTN_MAX_D);
    return a;
}

static unsigned cp_attn_blocks(int64_t rows) {
    return (unsigned)((rows + CP_ATTN_WARPS - 1) / CP_ATTN_WARPS);
}

/* bf16 mode: a scratch copy of src (count floats) rounded through bf16; fp32: src itself. */
static const float *cp_attn_operand(const mt_node *n, const float *src, int64_t count,
                                    const char *what) {
    if (n->ip[0] != MT_BF16 || count == 0) return src;
    float *dst = (float *)mt_node_scratch(n, sizeof(float) * (size_t)count, what);
    cp_attn_round_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(dst, src, count);
    CUDA_LAUNCH_CHECK(what);
    return dst;
}

void cuda_cp_attention_fwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    const float *qd = cp_attn_operand(n, cuda_f32(q), mt_numel(q), "cp_attention q bf16");
    mt_cp_kv kv;
    mt_cp_attention_gather(n, cp_attn_operand(n, cuda_f32(k), mt_numel(k), "cp_attention k bf16"),
                           cp_attn_operand(n, cuda_f32(v), mt_numel(v), "cp_attention v bf16"),
                           &kv);
    const cp_attn_dims a = cp_attn_node_dims(n, kv.T);
    const int64_t rows = a.B * a.Tq * a.H;
    if (rows == 0) return;
    cp_attn_fwd_kernel<<<cp_attn_blocks(rows), 32 * CP_ATTN_WARPS>>>(
        cuda_f32(n->out), n->saved[0] ? cuda_f32(n->saved[0]) : NULL, qd, kv.k, kv.v,
        seg ? cuda_i32(seg) : NULL, kv.seg, kv.q_pos, a);
    CUDA_LAUNCH_CHECK("cp_attention forward");
}

void cuda_cp_attention_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *seg = n->in[3];
    const bool alone = n->ip[1] == 1;
    /* with a group every rank takes part in the exchanges, gradients or not */
    if (alone && !q->grad && !k->grad && !v->grad) return;
    const float *qd = cp_attn_operand(n, cuda_f32(q), mt_numel(q), "cp_attention q bf16");
    const float *dout =
        cp_attn_operand(n, cuda_grad(n->out), mt_numel(q), "cp_attention dout bf16");
    mt_cp_kv kv;
    mt_cp_attention_gather(n, cp_attn_operand(n, cuda_f32(k), mt_numel(k), "cp_attention k bf16"),
                           cp_attn_operand(n, cuda_f32(v), mt_numel(v), "cp_attention v bf16"),
                           &kv);
    const cp_attn_dims a = cp_attn_node_dims(n, kv.T);
    const int64_t kv_rows = a.B * a.Tk * a.Hkv, kvn = kv_rows * a.D;
    float *dk = cuda_grad(k), *dv = cuda_grad(v), *dkv = NULL;
    if (!alone) { /* the gathered keys' gradients, exchanged below */
        dkv = (float *)mt_node_scratch(n, sizeof(float) * 2 * (size_t)kvn, "cp_attention dkv");
        n->ctx->be->zero(dkv, sizeof(float) * 2 * (size_t)kvn);
        dk = dkv;
        dv = dkv + kvn;
    }
    const int32_t *sq = seg ? cuda_i32(seg) : NULL;
    const float *lse = cuda_f32(n->saved[0]);
    const int64_t qrows = a.B * a.Tq * a.H;
    if (qrows > 0) {
        double *delta =
            (double *)mt_node_scratch(n, sizeof(double) * (size_t)qrows, "cp_attention delta");
        cp_attn_delta_kernel<<<cp_attn_blocks(qrows), 32 * CP_ATTN_WARPS>>>(delta, dout,
                                                                            cuda_f32(n->out), a);
        CUDA_LAUNCH_CHECK("cp_attention backward (delta)");
        if (q->grad) {
            cp_attn_dq_kernel<<<cp_attn_blocks(qrows), 32 * CP_ATTN_WARPS>>>(
                cuda_grad(q), dout, lse, delta, qd, kv.k, kv.v, sq, kv.seg, kv.q_pos, a);
            CUDA_LAUNCH_CHECK("cp_attention backward (dq)");
        }
        if (dk || dv) {
            cp_attn_dkv_kernel<<<cp_attn_blocks(kv_rows), 32 * CP_ATTN_WARPS>>>(
                dk, dv, dout, lse, delta, qd, kv.k, kv.v, sq, kv.seg, kv.q_pos, a);
            CUDA_LAUNCH_CHECK("cp_attention backward (dk, dv)");
        }
    }
    if (!alone) mt_cp_attention_scatter(n, dkv, &kv);
}
