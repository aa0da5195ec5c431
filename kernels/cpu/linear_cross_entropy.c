/* linear_cross_entropy.c: the lm_head and the cross-entropy fused over chunks of labelled rows
 * (node layout, and the chain of vocabulary parts: autograd/op_linear_cross_entropy.c).
 *   forward, per chunk of r <= R labelled rows: xc (r,C) = x[rows]; z = xc w^T (r,V);
 *     a = log sum exp z (max subtracted, fp32 exp terms summed in fp32 blocks of 256, the
 *     blocks in double); with a predecessor lse = logaddexp(prev lse, a), else a;
 *     t = prev t + z[label - row0] (label in the part); final: row loss = lse - t, else
 *     out = (lse, t)
 *   backward, per chunk: z again (or the forward's, when the node kept them);
 *     dz = g_l exp(z - lse) + g_t [v == label - row0], with (g_l, g_t) = (g, -g),
 *     g = dloss * scale, for the final op, else dout's rows;
 *     dx[rows] += dz w;  dw += dz^T xc;  dprev = (g_l exp(prev lse - lse), g_t)
 * Row losses are added in row order, so the loss does not depend on R or the thread count.
 * bf16 mode rounds xc, w and dz through bf16 as matmul does, so the result equals
 * cross_entropy(matmul(x, w)) in either mode up to fp32 summation order. */
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "bf16.h"
#include "cpu_math.h"
#include "cpu_ops.h"

/* terms of a row's exp sum added in fp32 lanes before the double total */
#define LCE_SUM_BLOCK 256

typedef struct {
    int64_t N, C, V, M, R, row0;
    bool bf16, final;
    const float *x, *w; /* w rounded through bf16 in bf16 mode */
    const int32_t *labels, *rows;
    float *xc, *z; /* (R,C) scratch, (R,V) scratch or the kept logits (saved[2]) */
    bool kept;     /* z holds the forward's logits (one chunk): read only, as a backward may run
                    * again on the same tape */
} lce_plan;

static lce_plan lce_plan_make(const mt_node *n) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    lce_plan p = {.C = x->shape[x->ndim - 1],
                  .V = w->shape[0],
                  .M = n->ip[1],
                  .R = n->ip[2],
                  .row0 = n->ip[3],
                  .bf16 = n->ip[0] == MT_BF16,
                  .final = n->ip[5] != 0,
                  .x = x->data,
                  .w = w->data,
                  .labels = n->in[2]->data,
                  .rows = n->saved[1]->data};
    p.N = mt_numel(x) / p.C;
    p.xc = mt_node_scratch(n, sizeof(float) * (size_t)(p.R * p.C), "linear_cross_entropy rows");
    p.kept = n->saved[2] != NULL;
    p.z = p.kept ? n->saved[2]->data
                 : mt_node_scratch(n, sizeof(float) * (size_t)(p.R * p.V), "lce logits");
    if (p.bf16 && p.M > 0) {
        float *wr = mt_node_scratch(n, sizeof(float) * (size_t)(p.V * p.C), "lce w bf16");
        mt_bf16_round_n(wr, p.w, p.V * p.C);
        p.w = wr;
    }
    return p;
}

/* xc = x[rows[r0 .. r0+r)] (rounded in bf16 mode), z = xc w^T (with_z; a backward that kept
 * the forward's logits needs only xc). */
static void lce_chunk_logits(const lce_plan *p, int64_t r0, int64_t r, bool with_z) {
    for (int64_t i = 0; i < r; i++) {
        const float *src = p->x + (int64_t)p->rows[r0 + i] * p->C;
        float *dst = p->xc + i * p->C;
        if (p->bf16)
            mt_bf16_round_n(dst, src, p->C);
        else
            memcpy(dst, src, sizeof(float) * (size_t)p->C);
    }
    if (!with_z) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)r, (int)p->V, (int)p->C, 1.0f, p->xc,
                (int)p->C, p->w, (int)p->C, 0.0f, p->z, (int)p->V);
}

/* 1/denom, else 1/M, else 0: mt_cross_entropy's rule. */
static double lce_scale(int64_t M, float denom) {
    if (denom > 0.0f) return 1.0 / denom;
    return M ? 1.0 / (double)M : 0.0;
}

/* The label's column in this part, or -1. */
static int64_t lce_label_col(const lce_plan *p, int64_t j) {
    const int64_t v = (int64_t)p->labels[p->rows[j]] - p->row0;
    return v >= 0 && v < p->V ? v : -1;
}

void cpu_linear_cross_entropy_fwd_node(const mt_node *n) {
    lce_plan p = lce_plan_make(n);
    float *lse = n->saved[0]->data, *out = n->out->data;
    const float *prev = n->in[3] ? n->in[3]->data : NULL; /* (2,M): lse, t */
    double *row_loss = mt_node_scratch(n, sizeof(double) * (size_t)(p.M ? p.M : 1), "lce loss");
    for (int64_t r0 = 0; r0 < p.M; r0 += p.R) {
        int64_t r = p.M - r0 < p.R ? p.M - r0 : p.R;
        lce_chunk_logits(&p, r0, r, true);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < r; i++) {
            const float *z = p.z + i * p.V;
            float mx = z[0];
#pragma omp simd reduction(max : mx)
            for (int64_t v = 1; v < p.V; v++) mx = z[v] > mx ? z[v] : mx;
            /* cpu_expf of an fp32 difference (<= 0): within 1.3 ulp of the double exp per term
             * and a fraction of the cost; this loop is the op's only non-GEMM work. Summed in
             * fp32 vector lanes over blocks of LCE_SUM_BLOCK terms (each below 1), the blocks in
             * double: a double reduction over the whole row stayed scalar (measured: 6 of the
             * op's 13 ms a step on the bench model) */
            double sum = 0.0;
            for (int64_t v0 = 0; v0 < p.V; v0 += LCE_SUM_BLOCK) {
                const int64_t v1 = v0 + LCE_SUM_BLOCK < p.V ? v0 + LCE_SUM_BLOCK : p.V;
                float part = 0.0f;
#pragma omp simd reduction(+ : part)
                for (int64_t v = v0; v < v1; v++) part += cpu_expf(z[v] - mx);
                sum += (double)part;
            }
            double log_sum = log(sum);
            const int64_t j = r0 + i, col = lce_label_col(&p, j);
            if (!prev) { /* the first part, or all of the lm_head */
                lse[j] = (float)(mx + log_sum);
                if (p.final) /* = lse - z[label] */
                    row_loss[j] = log_sum - ((double)z[col] - mx);
                else
                    out[j] = lse[j], out[p.M + j] = col >= 0 ? z[col] : 0.0f;
                continue;
            }
            const double a = mx + log_sum, pl = prev[j], hi = a > pl ? a : pl;
            const double l = hi + log(exp(pl - hi) + exp(a - hi));
            const double t = (double)prev[p.M + j] + (col >= 0 ? (double)z[col] : 0.0);
            lse[j] = (float)l;
            if (p.final)
                row_loss[j] = l - t;
            else
                out[j] = lse[j], out[p.M + j] = (float)t;
        }
    }
    if (!p.final) return;
    double total = 0.0;
    for (int64_t i = 0; i < p.M; i++) total += row_loss[i];
    *(float *)n->out->data = (float)(total * lce_scale(p.M, n->fp[0]));
}

/* dx rows r0 .. r0+r (scattered by p->rows) += dz w, through the chunk's dxc (r, C) */
static void lce_chunk_dx(const lce_plan *p, const float *dz, float *dxc, float *dx, int64_t r0,
                         int64_t r) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)r, (int)p->C, (int)p->V, 1.0f, dz,
                (int)p->V, p->w, (int)p->C, 0.0f, dxc, (int)p->C);
    for (int64_t i = 0; i < r; i++) {
        float *d = dx + (int64_t)p->rows[r0 + i] * p->C;
        const float *s = dxc + i * p->C;
        for (int64_t k = 0; k < p->C; k++) d[k] += s[k];
    }
}

/* dw (V, C) += dz^T x over the chunk's r rows */
static void lce_chunk_dw(const lce_plan *p, const float *dz, float *dw, int64_t r) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)p->V, (int)p->C, (int)r, 1.0f, dz,
                (int)p->V, p->xc, (int)p->C, 1.0f, dw, (int)p->C);
}

void cpu_linear_cross_entropy_bwd_node(const mt_node *n) {
    float *dx = n->in[0]->grad, *dw = n->in[1]->grad;
    const mt_tensor *pv = n->in[3];
    float *dprev = pv ? pv->grad : NULL;
    const bool final = n->ip[5] != 0;
    /* the final op: one g for every row; a part before it: its rows of dout */
    const double g = final ? *(const float *)n->out->grad * lce_scale(n->ip[1], n->fp[0]) : 0.0;
    const float *dout = final ? NULL : n->out->grad;
    if ((!dx && !dw && !dprev) || (final && g == 0.0) || n->ip[1] == 0) return;
    lce_plan p = lce_plan_make(n);
    const float *lse = n->saved[0]->data, *prev = pv ? pv->data : NULL;
    float *dxc = dx ? mt_node_scratch(n, sizeof(float) * (size_t)(p.R * p.C), "lce dx rows") : NULL;
    float *dz = p.kept ? mt_node_scratch(n, sizeof(float) * (size_t)(p.R * p.V), "lce dz") : p.z;
    for (int64_t r0 = 0; r0 < p.M; r0 += p.R) {
        int64_t r = p.M - r0 < p.R ? p.M - r0 : p.R;
        lce_chunk_logits(&p, r0, r, !p.kept);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < r; i++) { /* dz: in place of recomputed logits */
            const float *z = p.z + i * p.V;
            float *d = dz + i * p.V;
            const int64_t j = r0 + i, col = lce_label_col(&p, j);
            const double gl = final ? g : dout[j], gt = final ? -g : dout[p.M + j];
            const float lf = lse[j], glf = (float)gl; /* in fp32 vector lanes */
#pragma omp simd
            for (int64_t v = 0; v < p.V; v++) d[v] = glf * cpu_expf(z[v] - lf);
            if (col >= 0) d[col] += (float)gt;
            if (p.bf16) mt_bf16_round_n(d, d, p.V);
            if (dprev) {
                dprev[j] += (float)(gl * exp((double)prev[j] - (double)lf));
                dprev[p.M + j] += (float)gt;
            }
        }
        /* on exactly 2 threads dx's and dw's products (the same FLOPs) run side by side, one a
         * thread, as in matmul.c: one-thread BLAS's bits */
        if (dx && dw && omp_get_max_threads() == 2 && !omp_in_parallel()) {
#pragma omp parallel num_threads(2)
            {
                if (omp_get_thread_num() == 0)
                    lce_chunk_dx(&p, dz, dxc, dx, r0, r);
                else
                    lce_chunk_dw(&p, dz, dw, r);
            }
            continue;
        }
        if (dx) lce_chunk_dx(&p, dz, dxc, dx, r0, r);
        if (dw) lce_chunk_dw(&p, dz, dw, r);
    }
}
