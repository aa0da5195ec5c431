/* linear_cross_entropy.cu: the lm_head and the cross-entropy fused over chunks of labelled rows,
 * as kernels/cpu/linear_cross_entropy.c (node layout, and the chain of vocabulary parts:
 * autograd/op_linear_cross_entropy.c).
 * Per chunk of r <= R rows: gather xc (r,C), one GEMM to z (r,V), one block per row for the
 * log-sum-exp (double) and, in the backward, dz (in place, or as bf16 in bf16 mode); then dx rows
 * (scattered: rows are distinct) and dw (accumulated, beta = 1). fp32 GEMMs, or bf16 operands with
 * fp32 accumulation in bf16 mode (the same rounding points as the CPU). The row losses are summed
 * by one block in row order, so the loss does not depend on R. No host synchronisation. When
 * the node kept the forward's logits (saved[2]: one chunk, a small vocabulary), the forward
 * writes them there and the backward skips their GEMM, as on the CPU. */
#include <string.h>

#include "cuda_ops.cuh"

/* xc[i,:] = x[rows[r0+i],:], i < r. */
__global__ void lce_gather_kernel(float *xc, const float *x, const int32_t *rows, int64_t r0,
                                  int64_t r, int64_t C) {
    CUDA_FOR(k, r * C) xc[k] = x[(int64_t)rows[r0 + k / C] * C + k % C];
}

/* dx[rows[r0+i],:] += dxc[i,:], i < r. */
__global__ void lce_scatter_kernel(float *dx, const float *dxc, const int32_t *rows, int64_t r0,
                                   int64_t r, int64_t C) {
    CUDA_FOR(k, r * C) dx[(int64_t)rows[r0 + k / C] * C + k % C] += dxc[k];
}

/* A chunk's rows: the node's labelled rows, the part's vocabulary rows [row0, row0 + V). */
struct lce_rows {
    const int32_t *labels, *rows;
    int64_t r0, r, V, row0, M;
    const float *prev; /* (2,M) lse, t of the chain's previous part, or NULL */
};

/* The label's column of row j in this part, or -1. */
__device__ int64_t lce_label_col(const lce_rows &a, int64_t j) {
    const int64_t v = (int64_t)a.labels[a.rows[j]] - a.row0;
    return v >= 0 && v < a.V ? v : -1;
}

/* One block per row: lse = logaddexp(prev lse, lse(z)) (or lse(z)), t = prev t + the label's
 * logit; the final part's row loss lse - t, else (lse, t) into out (2,M). */
__global__ void lce_fwd_rows_kernel(float *lse, double *row_loss, float *out, const float *z,
                                    lce_rows a) {
    for (int64_t i = blockIdx.x; i < a.r; i += gridDim.x) {
        const float *zi = z + i * a.V;
        float mx;
        double log_sum = cuda_block_row_logsumexp(zi, a.V, &mx);
        if (threadIdx.x != 0) continue;
        const int64_t j = a.r0 + i, col = lce_label_col(a, j);
        if (!a.prev) { /* the first part, or all of the lm_head */
            lse[j] = (float)(mx + log_sum);
            if (!out) /* = lse - z[label] */
                row_loss[j] = log_sum - ((double)zi[col] - mx);
            else
                out[j] = lse[j], out[a.M + j] = col >= 0 ? zi[col] : 0.0f;
            continue;
        }
        const double s = mx + log_sum, pl = a.prev[j], hi = s > pl ? s : pl;
        const double l = hi + log(exp(pl - hi) + exp(s - hi));
        const double t = (double)a.prev[a.M + j] + (col >= 0 ? (double)zi[col] : 0.0);
        lse[j] = (float)l;
        if (!out)
            row_loss[j] = l - t;
        else
            out[j] = lse[j], out[a.M + j] = (float)t;
    }
}

__global__ void lce_fwd_total_kernel(float *loss, const double *row_loss, int64_t M, double scale) {
    double total = 0;
    /* each thread adds a contiguous stretch, the stretches in thread order: fixed order */
    int64_t per = (M + blockDim.x - 1) / blockDim.x;
    for (int64_t i = threadIdx.x * per; i < M && i < (int64_t)(threadIdx.x + 1) * per; i++)
        total += row_loss[i];
    total = cuda_block_sum(total);
    if (threadIdx.x == 0) *loss = (float)(total * scale);
}

/* z -> dz = g_l exp(z - lse) + g_t [v == label], with (g_l, g_t) = (g, -g), g = dloss * scale
 * read on the device (the final part), else dout's rows (2,M); the label's element gets both
 * terms from one thread, in the CPU's order. Into dz (fp32 GEMMs: z itself unless z holds the
 * kept logits, which a second backward on the same tape reads again), or rounded straight into zb
 * (bf16 GEMMs, the products' operand: the fp32 dz would only be cast, a write and a read of
 * (r,V) floats saved per chunk). With a predecessor, dprev += (g_l exp(prev lse - lse), g_t). */
__global__ void lce_bwd_rows_kernel(const float *z, float *dz, __nv_bfloat16 *zb,
                                    const float *dloss, const float *dout, double scale,
                                    const float *lse, float *dprev, lce_rows a) {
    const double g = dloss ? (double)*dloss * scale : 0.0;
    for (int64_t i = blockIdx.x; i < a.r; i += gridDim.x) {
        const float *zi = z + i * a.V;
        const int64_t j = a.r0 + i, col = lce_label_col(a, j);
        const double l = lse[j], gl = dloss ? g : dout[j], gt = dloss ? -g : dout[a.M + j];
        for (int64_t v = threadIdx.x; v < a.V; v += blockDim.x) {
            float d = (float)(gl * exp((double)zi[v] - l));
            if (v == col) d += (float)gt;
            if (zb)
                zb[i * a.V + v] = __float2bfloat16_rn(d);
            else
                dz[i * a.V + v] = d;
        }
        if (dprev && threadIdx.x == 0) {
            dprev[j] += (float)(gl * exp((double)a.prev[j] - l));
            dprev[a.M + j] += (float)gt;
        }
    }
}

static double lce_scale(int64_t M, float denom) {
    if (denom > 0.0f) return 1.0 / denom;
    return M ? 1.0 / (double)M : 0.0;
}

static unsigned lce_row_blocks(int64_t r) { return (unsigned)(r < 65536 ? r : 65536); }

typedef struct {
    int64_t C, V, M, R, row0;
    bool bf16, final;
    const float *x, *w;
    const int32_t *labels, *rows;
    float *xc, *z; /* z: scratch, or the kept logits (saved[2]) */
    bool kept;
    const __nv_bfloat16 *wb; /* bf16 mode: w cast once per call */
    __nv_bfloat16 *xcb, *zb;
} lce_plan;

static lce_plan lce_plan_make(const mt_node *n, bool need_zb) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    lce_plan p;
    memset(&p, 0, sizeof(p));
    p.C = x->shape[x->ndim - 1];
    p.V = w->shape[0];
    p.M = n->ip[1];
    p.R = n->ip[2];
    p.row0 = n->ip[3];
    p.bf16 = n->ip[0] == MT_BF16;
    p.final = n->ip[5] != 0;
    p.x = cuda_f32(x);
    p.w = cuda_f32(w);
    p.labels = cuda_i32(n->in[2]);
    p.rows = cuda_i32(n->saved[1]);
    p.xc = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(p.R * p.C), "lce rows");
    p.kept = n->saved[2] != NULL;
    p.z = p.kept ? cuda_f32(n->saved[2])
                 : (float *)mt_node_scratch(n, sizeof(float) * (size_t)(p.R * p.V), "lce logits");
    if (p.bf16) {
        p.wb = cuda_bf16_operand(n, p.w, p.V * p.C, "linear_cross_entropy w bf16");
        p.xcb = (__nv_bfloat16 *)mt_node_scratch(n, sizeof(__nv_bfloat16) * (size_t)(p.R * p.C),
                                                 "lce rows bf16");
        if (need_zb)
            p.zb = (__nv_bfloat16 *)mt_node_scratch(n, sizeof(__nv_bfloat16) * (size_t)(p.R * p.V),
                                                    "lce dz bf16");
    }
    return p;
}

/* xc = x[rows[r0 .. r0+r)], z = xc w^T (bf16 operands in bf16 mode; with_z: a backward that
 * kept the forward's logits needs only xc). */
static void lce_chunk_logits(const lce_plan *p, int64_t r0, int64_t r, bool with_z) {
    const unsigned blocks = cuda_blocks(r * p->C, CUDA_THREADS);
    lce_gather_kernel<<<blocks, CUDA_THREADS>>>(p->xc, p->x, p->rows, r0, r, p->C);
    CUDA_LAUNCH_CHECK("linear_cross_entropy gather");
    if (p->bf16) cuda_cast_bf16("linear_cross_entropy xc bf16", p->xcb, p->xc, r * p->C);
    if (!with_z) return;
    if (p->bf16) {
        cuda_gemm_bf16_rm("linear_cross_entropy logits", false, true, (int)r, (int)p->V, (int)p->C,
                          1.0f, p->xcb, (int)p->C, p->wb, (int)p->C, 0.0f, p->z, (int)p->V);
    } else {
        cuda_sgemm_rm("linear_cross_entropy logits", false, true, (int)r, (int)p->V, (int)p->C,
                      1.0f, p->xc, (int)p->C, p->w, (int)p->C, 0.0f, p->z, (int)p->V);
    }
}

/* The rows r0 .. r0 + r of a chunk, for the row kernels. */
static lce_rows lce_rows_of(const lce_plan *p, const mt_node *n, int64_t r0, int64_t r) {
    lce_rows a = {p->labels, p->rows, r0,   r,
                  p->V,      p->row0, p->M, n->in[3] ? cuda_f32(n->in[3]) : NULL};
    return a;
}

void cuda_linear_cross_entropy_fwd_node(const mt_node *n) {
    lce_plan p = lce_plan_make(n, false);
    double *row_loss =
        (double *)mt_node_scratch(n, sizeof(double) * (size_t)(p.M ? p.M : 1), "lce row losses");
    for (int64_t r0 = 0; r0 < p.M; r0 += p.R) {
        int64_t r = p.M - r0 < p.R ? p.M - r0 : p.R;
        lce_chunk_logits(&p, r0, r, true);
        lce_fwd_rows_kernel<<<lce_row_blocks(r), CUDA_THREADS>>>(cuda_f32(n->saved[0]), row_loss,
                                                                 p.final ? NULL : cuda_f32(n->out),
                                                                 p.z, lce_rows_of(&p, n, r0, r));
        CUDA_LAUNCH_CHECK("linear_cross_entropy forward (rows)");
    }
    if (!p.final) return;
    lce_fwd_total_kernel<<<1, CUDA_THREADS>>>(cuda_f32(n->out), row_loss, p.M,
                                              lce_scale(p.M, n->fp[0]));
    CUDA_LAUNCH_CHECK("linear_cross_entropy forward (total)");
}

void cuda_linear_cross_entropy_bwd_node(const mt_node *n) {
    float *dx = cuda_grad(n->in[0]), *dw = cuda_grad(n->in[1]);
    float *dprev = n->in[3] ? cuda_grad(n->in[3]) : NULL;
    const bool final = n->ip[5] != 0;
    double scale = lce_scale(n->ip[1], n->fp[0]);
    if ((!dx && !dw && !dprev) || (final && scale == 0.0) || n->ip[1] == 0) return;
    lce_plan p = lce_plan_make(n, true);
    float *dxc =
        dx ? (float *)mt_node_scratch(n, sizeof(float) * (size_t)(p.R * p.C), "lce dx rows") : NULL;
    float *dz = p.kept && !p.bf16
                    ? (float *)mt_node_scratch(n, sizeof(float) * (size_t)(p.R * p.V), "lce dz")
                    : p.z;
    for (int64_t r0 = 0; r0 < p.M; r0 += p.R) {
        int64_t r = p.M - r0 < p.R ? p.M - r0 : p.R;
        lce_chunk_logits(&p, r0, r, !p.kept);
        lce_bwd_rows_kernel<<<lce_row_blocks(r), CUDA_THREADS>>>(
            p.z, dz, p.zb, final ? cuda_grad(n->out) : NULL, final ? NULL : cuda_grad(n->out),
            scale, cuda_f32(n->saved[0]), dprev, lce_rows_of(&p, n, r0, r));
        CUDA_LAUNCH_CHECK("linear_cross_entropy backward (rows)");
        if (dx) {
            if (p.bf16)
                cuda_gemm_bf16_rm("linear_cross_entropy dx", false, false, (int)r, (int)p.C,
                                  (int)p.V, 1.0f, p.zb, (int)p.V, p.wb, (int)p.C, 0.0f, dxc,
                                  (int)p.C);
            else
                cuda_sgemm_rm("linear_cross_entropy dx", false, false, (int)r, (int)p.C, (int)p.V,
                              1.0f, dz, (int)p.V, p.w, (int)p.C, 0.0f, dxc, (int)p.C);
            const unsigned blocks = cuda_blocks(r * p.C, CUDA_THREADS);
            lce_scatter_kernel<<<blocks, CUDA_THREADS>>>(dx, dxc, p.rows, r0, r, p.C);
            CUDA_LAUNCH_CHECK("linear_cross_entropy scatter");
        }
        if (dw) {
            if (p.bf16)
                cuda_gemm_bf16_rm("linear_cross_entropy dw", true, false, (int)p.V, (int)p.C,
                                  (int)r, 1.0f, p.zb, (int)p.V, p.xcb, (int)p.C, 1.0f, dw,
                                  (int)p.C);
            else
                cuda_sgemm_rm("linear_cross_entropy dw", true, false, (int)p.V, (int)p.C, (int)r,
                              1.0f, dz, (int)p.V, p.xc, (int)p.C, 1.0f, dw, (int)p.C);
        }
    }
}
