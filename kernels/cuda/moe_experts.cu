/* moe_experts.cu: the SwiGLU experts (spec 6.2) with sparse dispatch on the GPU, mirroring
 * kernels/cpu/moe_experts.c: assignments are permuted by expert with a stable counting sort on
 * the device, the experts' GEMMs run on their contiguous rows (an expert without rows is left
 * out: exactly zero output and untouched gradients), and the weighted rows are combined back per
 * token by one writer per row (deterministic). The sort, gather, combine and elementwise kernels
 * are moe_common.cu's, shared with the split ops (moe_dispatch.cu, moe_expert_ffn.cu,
 * moe_combine.cu); the grouped GEMM machinery below is this op's alone.
 *
 * Node (autograd/op_moe.c): in = {x (N,C), idx (N,K) I32, weight (N,K), w1 (E,F,C),
 * w3 (E,F,C), w2 (E,C,F)}; saved[0] offsets (E+1) I32, saved[1] perm (N*K) I32 (slot ->
 * assignment n*K+j), saved[2] inv (N*K) I32 (assignment -> slot), saved[3] h1 and saved[4] h3
 * (N*K,F) pre-activations by slot (NULL when no backward will run). Same saved-vs-recomputed
 * choices as the CPU (see there).
 *
 * Order: phase by phase over all experts (each GEMM kind for every expert, then each elementwise
 * step over all A = N*K slots at once), not expert by expert as on the CPU. Every element sees
 * the same operations, so the results are those of the expert loop.
 *
 * GEMMs (fp32 mode): one cublasGemmGroupedBatchedEx per GEMM kind, one group per non-empty
 * expert (group_size 2 where two products share a shape: h1 and h3, dw1 and dw3), CUDA_R_32F
 * with CUBLAS_COMPUTE_32F (no TF32). Its m/n/k, leading dimensions, alpha/beta and group sizes
 * are host arrays, which is why the expert offsets come to the host; the A/B/C pointer arrays
 * must be device arrays: moe_ptr_kernel writes them, once per forward and once per backward,
 * from the device offsets, so no pointer upload is needed.
 *
 * bf16 mode (node ip[0] == MT_BF16): cuBLAS documents cublasGemmGroupedBatchedEx for A/B/C all
 * CUDA_R_16BF (or all CUDA_R_16F, all CUDA_R_32F, CUDA_R_64F) but not for bf16 A/B with an fp32
 * C; a bf16 C would round h1, h3, u, y, dx and dw, which this mode keeps fp32 (docs/cuda.md
 * "bf16 mixed precision"). Not taken either: fp32 copies of the rounded operands through a
 * grouped TF32 GEMM (exact products, but half the bf16 tensor-core rate and twice the bytes),
 * and cublasGemmBatchedEx (every problem the same shape; expert row counts differ). So bf16 mode
 * keeps one cublasGemmEx (bf16 A/B, fp32 C, CUBLAS_COMPUTE_32F) per non-empty expert and GEMM
 * kind (a strided-batched pair where a kind has two problems), with no host synchronisation
 * between them, and spreads the experts over the GEMM lanes (cuda_common.cuh: concurrent
 * streams) so that experts of a few hundred rows together fill the GPU as one grouped call
 * would (that type table is the documentation's, not checked on a GPU here; a cuBLAS that
 * takes bf16 A/B with an fp32 C would let bf16 mode use the grouped path, changing only the
 * types). Every operand is rounded to bf16 at the points where the CPU reference rounds
 * (kernels/cpu/moe_experts.c): the gathered x and dout and all of w1, w3, w2 (3 E F C bf16 of
 * scratch) by one cast launch each over all experts; g (after the dw2 path's row scaling), dh1
 * and dh3 by the kernels that compute them, which then write only the bf16 copy. h1, h3, u, y,
 * the activations and dweight stay fp32.
 *
 * Host synchronisation: forward 1 (the bad-id flag and the offsets in one copy), backward none
 * (the GEMM sizes come from the offsets the forward left in n->host). */
#include <stdlib.h>
#include <string.h>

#include "moe_common.cuh"

/* ---- the experts' GEMMs ---- */

/* A matrix of every expert: expert e's starts at p + (e * per_expert + off[e] * per_row)
 * elements (per_expert for the weights, per_row for the slot-major activations). */
struct moe_mat {
    const void *p;
    int64_t per_expert, per_row;
};

#define MOE_ROWS        (-1) /* in a GEMM kind's m, n or k: the expert's row count */
#define MOE_MAX_KINDS   6    /* GEMM kinds per forward or backward */
#define MOE_MAX_PROBLEM 2    /* products per expert in one kind (same shape) */

/* One GEMM kind: for each non-empty expert e and problem j < nprob, row-major
 * C_ej (m,n) = op(A_ej) op(B_ej) + beta C_ej with op(A) (m,k) and op(B) (k,n), as cuda_sgemm_rm;
 * exactly one of m, n, k is MOE_ROWS. */
struct moe_kind {
    bool ta, tb;
    int64_t m, n, k, lda, ldb, ldc;
    float beta;
    int nprob;
    moe_mat A[MOE_MAX_PROBLEM], B[MOE_MAX_PROBLEM], C[MOE_MAX_PROBLEM];
};

/* The pointer arrays of up to MOE_MAX_KINDS kinds: per kind and operand (A, B, C), one array of
 * E * MOE_MAX_PROBLEM device pointers, filled in group order (non-empty experts ascending, the
 * problems of an expert adjacent). Passed by value to moe_ptr_kernel. */
struct moe_ptr_plan {
    struct {
        const char *p;
        int64_t per_expert, per_row; /* bytes */
    } src[MOE_MAX_KINDS * 3][MOE_MAX_PROBLEM];
    int nprob[MOE_MAX_KINDS * 3];
    int narrays;
};

/* Thread i fills array i from the device offsets, skipping empty experts as the host does. */
__global__ void moe_ptr_kernel(const void **table, moe_ptr_plan plan, const int32_t *off, int E) {
    const int i = threadIdx.x;
    if (blockIdx.x != 0 || i >= plan.narrays) return;
    const void **out = table + (int64_t)i * E * MOE_MAX_PROBLEM;
    int64_t q = 0;
    for (int e = 0; e < E; e++) {
        if (off[e + 1] == off[e]) continue;
        for (int j = 0; j < plan.nprob[i]; j++)
            out[q++] = plan.src[i][j].p + e * plan.src[i][j].per_expert +
                       (int64_t)off[e] * plan.src[i][j].per_row;
    }
}

/* The host arrays of one grouped call: grown to E groups when E first grows, never per call.
 * They are pageable host memory, which the device cannot read, so cuBLAS consumes them during
 * the call (as host-mode alpha and beta), and one set serves every call. */
static struct {
    int cap;
    cublasOperation_t *ta, *tb;
    int *m, *n, *k, *lda, *ldb, *ldc, *size;
    float *alpha, *beta;
} moe_host;

static void moe_host_reserve(int E) {
    if (E <= moe_host.cap) return;
    free(moe_host.ta); /* one block holds every array */
    const size_t g = (size_t)E;
    char *b =
        (char *)mt_malloc(g * (2 * sizeof(cublasOperation_t) + 7 * sizeof(int) + 2 * sizeof(float)),
                          "moe_experts grouped GEMM arrays");
    moe_host.ta = (cublasOperation_t *)b;
    moe_host.tb = moe_host.ta + g;
    int *ints = (int *)(moe_host.tb + g);
    int **arr[7] = {&moe_host.m,   &moe_host.n,   &moe_host.k,   &moe_host.lda,
                    &moe_host.ldb, &moe_host.ldc, &moe_host.size};
    for (int i = 0; i < 7; i++) *arr[i] = ints + (size_t)i * g;
    moe_host.alpha = (float *)(ints + 7 * g);
    moe_host.beta = moe_host.alpha + g;
    moe_host.cap = E;
}

/* How the GEMMs of one forward or backward run: the host offsets, and in fp32 mode the device
 * pointer table (3 arrays per kind). */
struct moe_gemms {
    const int32_t *off; /* host */
    int E, groups;      /* groups: non-empty experts */
    bool bf16;
    size_t es;          /* operand element size */
    const void **table; /* device; NULL in bf16 mode */
};

static int64_t moe_dim(int64_t d, int64_t rows) { return d == MOE_ROWS ? rows : d; }

static const void *moe_mat_at(const moe_mat &a, int e, int64_t o, size_t es) {
    return (const char *)a.p + (size_t)(e * a.per_expert + o * a.per_row) * es;
}

/* Builds the pointer table of kinds[0..nk) with one launch (fp32 mode only). */
static moe_gemms moe_gemms_plan(const mt_node *n, const int32_t *off, int E, const moe_kind *kinds,
                                int nk, const char *op) {
    moe_gemms gs = {off, E, 0, n->ip[0] == MT_BF16, 0, NULL};
    gs.es = gs.bf16 ? sizeof(__nv_bfloat16) : sizeof(float);
    for (int e = 0; e < E; e++) gs.groups += off[e + 1] > off[e];
    if (gs.bf16 || gs.groups == 0) return gs;
    MT_CHECK(nk <= MOE_MAX_KINDS, "%s: %d GEMM kinds, at most %d", op, nk, MOE_MAX_KINDS);
    moe_ptr_plan plan;
    memset(&plan, 0, sizeof(plan));
    plan.narrays = 3 * nk;
    for (int t = 0; t < nk; t++)
        for (int o = 0; o < 3; o++) {
            const int i = 3 * t + o;
            const moe_mat *mats = o == 0 ? kinds[t].A : o == 1 ? kinds[t].B : kinds[t].C;
            plan.nprob[i] = kinds[t].nprob;
            for (int j = 0; j < kinds[t].nprob; j++) {
                plan.src[i][j].p = (const char *)mats[j].p;
                plan.src[i][j].per_expert = mats[j].per_expert * (int64_t)sizeof(float);
                plan.src[i][j].per_row = mats[j].per_row * (int64_t)sizeof(float); /* fp32 */
            }
        }
    gs.table = (const void **)mt_node_scratch(
        n, sizeof(void *) * (size_t)(3 * nk) * (size_t)E * MOE_MAX_PROBLEM,
        "moe_experts GEMM pointers");
    moe_ptr_kernel<<<1, 32>>>(gs.table, plan, cuda_i32(n->saved[0]), E);
    CUDA_LAUNCH_CHECK(op);
    moe_host_reserve(E);
    return gs;
}

/* Kind g for every non-empty expert, one call per expert and problem on the default stream:
 * used when a fixed dimension is 0 (cuda_gemm_rm's zero-size rules then apply). */
static void moe_gemms_each(const moe_gemms &gs, const moe_kind &g, const char *op) {
    for (int e = 0; e < gs.E; e++) {
        const int64_t o = gs.off[e], rows = gs.off[e + 1] - o;
        if (rows == 0) continue; /* left out: its output or gradient stays as it is */
        const int m = (int)moe_dim(g.m, rows), nn = (int)moe_dim(g.n, rows);
        const int k = (int)moe_dim(g.k, rows);
        for (int j = 0; j < g.nprob; j++) {
            const void *a = moe_mat_at(g.A[j], e, o, gs.es), *b = moe_mat_at(g.B[j], e, o, gs.es);
            float *c = (float *)moe_mat_at(g.C[j], e, o, sizeof(float));
            if (gs.bf16)
                cuda_gemm_bf16_rm(op, g.ta, g.tb, m, nn, k, 1.0f, (const __nv_bfloat16 *)a,
                                  (int)g.lda, (const __nv_bfloat16 *)b, (int)g.ldb, g.beta, c,
                                  (int)g.ldc);
            else
                cuda_sgemm_rm(op, g.ta, g.tb, m, nn, k, 1.0f, (const float *)a, (int)g.lda,
                              (const float *)b, (int)g.ldb, g.beta, c, (int)g.ldc);
        }
    }
}

/* fp32: kind g (position t in the plan) as one grouped call over the non-empty experts. */
static void moe_gemms_grouped(const moe_gemms &gs, int t, const moe_kind &g, const char *op) {
    const int E = gs.E;
    /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first (as
     * cuda_sgemm_rm) */
    int q = 0;
    for (int e = 0; e < E; e++) {
        const int64_t rows = gs.off[e + 1] - gs.off[e];
        if (rows == 0) continue;
        moe_host.ta[q] = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        moe_host.tb[q] = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
        moe_host.m[q] = (int)moe_dim(g.n, rows);
        moe_host.n[q] = (int)moe_dim(g.m, rows);
        moe_host.k[q] = (int)moe_dim(g.k, rows);
        moe_host.lda[q] = (int)g.ldb;
        moe_host.ldb[q] = (int)g.lda;
        moe_host.ldc[q] = (int)g.ldc;
        moe_host.size[q] = g.nprob;
        moe_host.alpha[q] = 1.0f;
        moe_host.beta[q] = g.beta;
        q++;
    }
    const void **tab = gs.table + (size_t)3 * t * E * MOE_MAX_PROBLEM;
    const void *const *A = tab, *const *B = tab + (size_t)E * MOE_MAX_PROBLEM;
    void *const *C = (void *const *)(tab + (size_t)2 * E * MOE_MAX_PROBLEM);
    cublasCheck(op, cublasGemmGroupedBatchedEx(cuda_blas, moe_host.ta, moe_host.tb, moe_host.m,
                                               moe_host.n, moe_host.k, moe_host.alpha, B,
                                               CUDA_R_32F, moe_host.lda, A, CUDA_R_32F,
                                               moe_host.ldb, moe_host.beta, C, CUDA_R_32F,
                                               moe_host.ldc, q, moe_host.size, CUBLAS_COMPUTE_32F));
}

/* bf16: kind g for expert e (rows from o) on a GEMM lane, both problems of a two-problem kind
 * in one call where cuda_gemm_rm_pair can. */
static void moe_gemms_lane(const moe_gemms &gs, const moe_kind &g, int e, int64_t o, int64_t rows,
                           int lane, const char *op) {
    const bool two = g.nprob == 2;
    cuda_gemm_rm_lane(lane, op, true, g.ta, g.tb, (int)moe_dim(g.m, rows), (int)moe_dim(g.n, rows),
                      (int)moe_dim(g.k, rows), 1.0f, moe_mat_at(g.A[0], e, o, gs.es),
                      two ? moe_mat_at(g.A[1], e, o, gs.es) : NULL, (int)g.lda,
                      moe_mat_at(g.B[0], e, o, gs.es), two ? moe_mat_at(g.B[1], e, o, gs.es) : NULL,
                      (int)g.ldb, g.beta, (float *)moe_mat_at(g.C[0], e, o, sizeof(float)),
                      two ? (float *)moe_mat_at(g.C[1], e, o, sizeof(float)) : NULL, (int)g.ldc);
}

/* Runs the kinds ts[0..nt) (positions in the plan, in this order) for every non-empty expert.
 * fp32: one grouped call per kind. bf16: one fork of the GEMM lanes for all of them, the
 * experts dealt round-robin to the lanes and each expert's kinds in order on its lane, so kinds
 * that write the same rows of one expert (dx1, then dx3 adding to it) stay ordered while the
 * experts run concurrently. A kind with a fixed dimension 0 makes the set run kind by kind on
 * the default stream. */
static void moe_gemms_run(const moe_gemms &gs, const int *ts, int nt, const moe_kind *kinds,
                          const char *op) {
    if (gs.groups == 0 || nt == 0) return;
    cuda_prof_begin(CUDA_PROF_GEMM);
    bool degenerate = false;
    for (int i = 0; i < nt; i++) {
        const moe_kind &g = kinds[ts[i]];
        degenerate = degenerate || g.m == 0 || g.n == 0 || g.k == 0;
    }
    if (degenerate) {
        for (int i = 0; i < nt; i++) moe_gemms_each(gs, kinds[ts[i]], op);
    } else if (gs.bf16) {
        const int lanes = cuda_lanes_fork(op);
        int q = 0;
        for (int e = 0; e < gs.E; e++) {
            const int64_t o = gs.off[e], rows = gs.off[e + 1] - o;
            if (rows == 0) continue;
            const int lane = q++ % lanes;
            for (int i = 0; i < nt; i++) moe_gemms_lane(gs, kinds[ts[i]], e, o, rows, lane, op);
        }
        cuda_lanes_join(op);
    } else {
        for (int i = 0; i < nt; i++) moe_gemms_grouped(gs, ts[i], kinds[ts[i]], op);
    }
    cuda_prof_end(CUDA_PROF_GEMM);
}

/* ---- the node adapters ---- */

struct moe_dims {
    int64_t N, C, F;
    int E, K;
};

static moe_dims moe_node_dims(const mt_node *n) {
    moe_dims d;
    d.N = n->in[0]->shape[0];
    d.C = n->in[0]->shape[1];
    d.F = n->in[3]->shape[1];
    d.E = (int)n->in[3]->shape[0];
    d.K = (int)n->in[1]->shape[1];
    return d;
}

static void moe_gather(float *xp, const float *x, const int32_t *perm, const moe_dims &d,
                       const char *op) {
    cuda_moe_gather(xp, x, perm, d.N * d.K, d.K, d.C, op);
}

static void moe_combine(float *out, const float *yp, const int32_t *inv, const float *weight,
                        const moe_dims &d, bool accumulate, const char *op) {
    if (d.N * d.C == 0) return;
    cuda_prof_begin(CUDA_PROF_COMBINE);
    cuda_moe_combine_rows(out, yp, inv, weight, d.N, d.K, d.C, accumulate, op);
    cuda_prof_end(CUDA_PROF_COMBINE);
}

static void moe_elementwise_act(float *g, __nv_bfloat16 *gb, const float *h1, const float *h3,
                                int64_t count, mt_act act, const char *op) {
    if (count == 0) return;
    cuda_prof_begin(CUDA_PROF_ACT);
    cuda_moe_act(g, gb, h1, h3, count, act, op);
    cuda_prof_end(CUDA_PROF_ACT);
}

static moe_mat moe_rows(const void *p, int64_t ld) { return moe_mat{p, 0, ld}; }
static moe_mat moe_weights(const void *p, int64_t per_expert) { return moe_mat{p, per_expert, 0}; }

void cuda_moe_experts_fwd_node(const mt_node *n) {
    const char *op = "moe_experts forward";
    moe_dims d = moe_node_dims(n);
    const int64_t A = d.N * d.K, C = d.C, F = d.F;
    cuda_prof_begin(CUDA_PROF_ROUTE);
    const int32_t *off = cuda_moe_perm_build(n, d.N, d.K, d.E, "moe_experts");
    const bool keep_h = n->saved[3] != NULL;
    float *h1 = keep_h ? cuda_f32(n->saved[3]) : cuda_moe_f32_scratch(n, A * F, "moe h1");
    float *h3 = keep_h ? cuda_f32(n->saved[4]) : cuda_moe_f32_scratch(n, A * F, "moe h3");
    float *xp = cuda_moe_f32_scratch(n, A * C, "moe_experts xp");
    float *yp = cuda_moe_f32_scratch(n, A * C, "moe_experts yp");
    moe_gather(xp, cuda_f32(n->in[0]), cuda_i32(n->saved[1]), d, op);
    cuda_prof_end(CUDA_PROF_ROUTE);
    /* bf16 mode: copies of x by slot, of all experts' weights, and g rounded where computed
     * (only the bf16 g exists then) */
    const bool bf16 = n->ip[0] == MT_BF16;
    float *g = bf16 ? NULL : cuda_moe_f32_scratch(n, A * F, "moe g");
    __nv_bfloat16 *gb = bf16 ? cuda_moe_bf16_scratch(n, A * F, "moe g bf16") : NULL;
    const void *xo = cuda_moe_operand(n, xp, A * C, "moe xp bf16");
    const int64_t W = (int64_t)d.E * F * C;
    const void *w1 = cuda_moe_operand(n, cuda_f32(n->in[3]), W, "moe w1 bf16");
    const void *w3 = cuda_moe_operand(n, cuda_f32(n->in[4]), W, "moe w3 bf16");
    const void *w2 = cuda_moe_operand(n, cuda_f32(n->in[5]), W, "moe w2 bf16");
    /* h (rows,F) = xe (rows,C) w^T, w (F,C), for w1 and w3; y (rows,C) = g (rows,F) w2^T */
    moe_kind kinds[2];
    memset(kinds, 0, sizeof(kinds));
    kinds[0] = moe_kind{false, true, MOE_ROWS, F, C, C, C, F, 0.0f, 2, {}, {}, {}};
    kinds[0].A[0] = kinds[0].A[1] = moe_rows(xo, C);
    kinds[0].B[0] = moe_weights(w1, F * C);
    kinds[0].B[1] = moe_weights(w3, F * C);
    kinds[0].C[0] = moe_rows(h1, F);
    kinds[0].C[1] = moe_rows(h3, F);
    kinds[1] = moe_kind{false, true, MOE_ROWS, C, F, F, F, C, 0.0f, 1, {}, {}, {}};
    kinds[1].A[0] = bf16 ? moe_rows(gb, F) : moe_rows(g, F);
    kinds[1].B[0] = moe_weights(w2, C * F);
    kinds[1].C[0] = moe_rows(yp, C);
    const moe_gemms gs = moe_gemms_plan(n, off, d.E, kinds, 2, op);
    const int k_h = 0, k_y = 1;
    moe_gemms_run(gs, &k_h, 1, kinds, op);
    moe_elementwise_act(g, gb, h1, h3, A * F, mt_node_act(n, 4), op);
    moe_gemms_run(gs, &k_y, 1, kinds, op);
    moe_combine(cuda_f32(n->out), yp, cuda_i32(n->saved[2]), cuda_f32(n->in[2]), d, false, op);
}

/* Per expert with rows s (weight w_s), U = dout_perm w2_e (rows,F), as on the CPU:
 *   dweight[a_s] += <U_s, g_s>        dw2_e += sum_s (w_s dout_{n_s}) g_s^T
 *   dg_s = w_s U_s;  dh1 = dg h3 silu'(h1);  dh3 = dg silu(h1)
 *   dw1_e += dh1^T xp;  dw3_e += dh3^T xp;  dxp = dh1 w1_e + dh3 w3_e;  dx[n] += sum_j dxp.
 * Each step runs over all slots at once; the GEMM kinds: u, dw2, dw1 + dw3 (one call), and dxp
 * in two calls (the dh3 product adds into the dh1 product: one call would race on dxp). */
void cuda_moe_experts_bwd_node(const mt_node *n) {
    const char *op = "moe_experts backward";
    moe_dims d = moe_node_dims(n);
    MT_CHECK(n->saved[3] && n->saved[4], "moe_experts backward: hidden activations were not saved");
    const int64_t A = d.N * d.K, C = d.C, F = d.F, W = (int64_t)d.E * F * C;
    float *dx = cuda_grad(n->in[0]), *dweight = cuda_grad(n->in[2]);
    float *dw1 = cuda_grad(n->in[3]), *dw3 = cuda_grad(n->in[4]), *dw2 = cuda_grad(n->in[5]);
    const bool need_dh = dx || dw1 || dw3, need_u = need_dh || dweight;
    if (!need_u && !dw2) return;
    const bool bf16 = n->ip[0] == MT_BF16;
    const int32_t *off = (const int32_t *)n->host; /* the forward's: no copy back, no sync */
    float *xp = (dw1 || dw3) ? cuda_moe_f32_scratch(n, A * C, "moe_experts xp") : NULL;
    float *dp = cuda_moe_f32_scratch(n, A * C, "moe_experts dout perm");
    float *dxp = dx ? cuda_moe_f32_scratch(n, A * C, "moe_experts dx perm") : NULL;
    float *g = (dweight || dw2) ? cuda_moe_f32_scratch(n, A * F, "moe_experts g") : NULL;
    float *u = need_u ? cuda_moe_f32_scratch(n, A * F, "moe_experts u") : NULL;
    float *dh3 = need_dh && !bf16 ? cuda_moe_f32_scratch(n, A * F, "moe_experts dh3") : NULL;
    const int32_t *perm = cuda_i32(n->saved[1]);
    const float *weight = cuda_f32(n->in[2]);
    cuda_prof_begin(CUDA_PROF_ROUTE);
    if (xp) moe_gather(xp, cuda_f32(n->in[0]), perm, d, op);
    moe_gather(dp, cuda_grad(n->out), perm, d, op);
    cuda_prof_end(CUDA_PROF_ROUTE);
    /* bf16 mode: copies of x and dout by slot, of the weights a requested product reads (as
     * the CPU does); g (after the row scaling), dh1 and dh3 rounded where they are computed */
    const void *xo = xp ? cuda_moe_operand(n, xp, A * C, "moe xp bf16") : NULL;
    const void *dpo = cuda_moe_operand(n, dp, A * C, "moe dp bf16");
    const void *w1 = dx ? cuda_moe_operand(n, cuda_f32(n->in[3]), W, "moe w1 bf16") : NULL;
    const void *w3 = dx ? cuda_moe_operand(n, cuda_f32(n->in[4]), W, "moe w3 bf16") : NULL;
    const void *w2 = need_u ? cuda_moe_operand(n, cuda_f32(n->in[5]), W, "moe w2 bf16") : NULL;
    __nv_bfloat16 *gb = bf16 && dw2 ? cuda_moe_bf16_scratch(n, A * F, "moe g bf16") : NULL;
    __nv_bfloat16 *dh1b = bf16 && need_dh ? cuda_moe_bf16_scratch(n, A * F, "moe dh1 bf16") : NULL;
    __nv_bfloat16 *dh3b = bf16 && need_dh ? cuda_moe_bf16_scratch(n, A * F, "moe dh3 bf16") : NULL;
    /* the GEMM operands g, dh1 (in u's place in fp32 mode), dh3 */
    const void *go = bf16 ? (const void *)gb : g, *dh1o = bf16 ? (const void *)dh1b : u;
    const void *dh3o = bf16 ? (const void *)dh3b : dh3;
    /* the GEMM kinds in the order they run; ids of the requested ones */
    moe_kind kinds[MOE_MAX_KINDS];
    memset(kinds, 0, sizeof(kinds));
    int nk = 0, k_u = -1, k_dw2 = -1, k_dw13 = -1, k_dx1 = -1, k_dx3 = -1;
    if (need_u) { /* u (rows,F) = dpe (rows,C) w2e (C,F) */
        kinds[k_u = nk++] = moe_kind{false, false, MOE_ROWS, F, C, C, F, F, 0.0f, 1, {}, {}, {}};
        kinds[k_u].A[0] = moe_rows(dpo, C);
        kinds[k_u].B[0] = moe_weights(w2, C * F);
        kinds[k_u].C[0] = moe_rows(u, F);
    }
    if (dw2) { /* dw2e (C,F) += dpe^T (C,rows) g (rows,F) */
        kinds[k_dw2 = nk++] = moe_kind{true, false, C, F, MOE_ROWS, C, F, F, 1.0f, 1, {}, {}, {}};
        kinds[k_dw2].A[0] = moe_rows(dpo, C);
        kinds[k_dw2].B[0] = moe_rows(go, F);
        kinds[k_dw2].C[0] = moe_weights(dw2, C * F);
    }
    if (dw1 || dw3) { /* dw1e (F,C) += dh1^T (F,rows) xe (rows,C); the same for dw3 with dh3 */
        moe_kind &kd = kinds[k_dw13 = nk++];
        kd = moe_kind{true, false, F, C, MOE_ROWS, F, C, C, 1.0f, 0, {}, {}, {}};
        if (dw1) {
            kd.A[kd.nprob] = moe_rows(dh1o, F);
            kd.B[kd.nprob] = moe_rows(xo, C);
            kd.C[kd.nprob++] = moe_weights(dw1, F * C);
        }
        if (dw3) {
            kd.A[kd.nprob] = moe_rows(dh3o, F);
            kd.B[kd.nprob] = moe_rows(xo, C);
            kd.C[kd.nprob++] = moe_weights(dw3, F * C);
        }
    }
    if (dx) { /* dxp (rows,C) = dh1 w1e + dh3 w3e, w (F,C) */
        kinds[k_dx1 = nk++] = moe_kind{false, false, MOE_ROWS, C, F, F, C, C, 0.0f, 1, {}, {}, {}};
        kinds[k_dx1].A[0] = moe_rows(dh1o, F);
        kinds[k_dx1].B[0] = moe_weights(w1, F * C);
        kinds[k_dx1].C[0] = moe_rows(dxp, C);
        kinds[k_dx3 = nk++] = moe_kind{false, false, MOE_ROWS, C, F, F, C, C, 1.0f, 1, {}, {}, {}};
        kinds[k_dx3].A[0] = moe_rows(dh3o, F);
        kinds[k_dx3].B[0] = moe_weights(w3, F * C);
        kinds[k_dx3].C[0] = moe_rows(dxp, C);
    }
    const moe_gemms gs = moe_gemms_plan(n, off, d.E, kinds, nk, op);
    const float *h1 = cuda_f32(n->saved[3]), *h3 = cuda_f32(n->saved[4]);
    const int64_t count = A * F;
    if (g) moe_elementwise_act(g, NULL, h1, h3, count, mt_node_act(n, 4), op);
    if (need_u) moe_gemms_run(gs, &k_u, 1, kinds, op);
    cuda_prof_begin(CUDA_PROF_ACT);
    if (dweight) cuda_moe_dweight(dweight, u, g, perm, A, F, op);
    if (dw2) cuda_moe_scale_rows(g, gb, weight, perm, A, F, op); /* g is not needed afterwards */
    cuda_prof_end(CUDA_PROF_ACT);
    if (dw2) moe_gemms_run(gs, &k_dw2, 1, kinds, op);
    if (!need_dh) return;
    cuda_prof_begin(CUDA_PROF_ACT);
    cuda_moe_dh(u, dh3, dh1b, dh3b, h1, h3, weight, perm, A, F, mt_node_act(n, 4), op);
    cuda_prof_end(CUDA_PROF_ACT);
    /* dw1 + dw3, then dxp (dh1 w1, then dh3 w3 added): one set, so in bf16 mode one fork */
    int last[3], nl = 0;
    if (k_dw13 >= 0) last[nl++] = k_dw13;
    if (dx) {
        last[nl++] = k_dx1;
        last[nl++] = k_dx3;
    }
    moe_gemms_run(gs, last, nl, kinds, op);
    if (dx) moe_combine(dx, dxp, cuda_i32(n->saved[2]), NULL, d, true, op);
}
