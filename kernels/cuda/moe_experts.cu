/* moe_experts.cu: the SwiGLU experts (spec 6.2) with sparse dispatch on the GPU, mirroring
 * kernels/cpu/moe_experts.c: assignments are permuted by expert with a stable counting sort on
 * the device, each expert runs cuBLAS fp32 GEMMs on its contiguous rows in the fixed order
 * e = 0..E-1 (an expert without rows is skipped: exactly zero output and gradient), and the
 * weighted rows are combined back per token by one writer per row (deterministic).
 *
 * Node (autograd/op_moe.c): in = {x (N,C), idx (N,K) I32, weight (N,K), w1 (E,F,C),
 * w3 (E,F,C), w2 (E,C,F)}; saved[0] offsets (E+1) I32, saved[1] perm (N*K) I32 (slot ->
 * assignment n*K+j), saved[2] inv (N*K) I32 (assignment -> slot), saved[3] h1 and saved[4] h3
 * (N*K,F) pre-activations by slot (NULL when no backward will run). Same saved-vs-recomputed
 * choices as the CPU (see there).
 *
 * Host synchronisation: the per-expert GEMM sizes come from the offsets, copied to the host
 * once per forward and once per backward (E+1 ints). Later (issue 6): one grouped GEMM
 * (cublasGemmGroupedBatchedEx or cuBLASLt) per weight instead of E calls.
 *
 * bf16 mode (node ip[0] == MT_BF16): every GEMM operand is cast to a bf16 scratch copy at the
 * points where the CPU reference rounds (kernels/cpu/moe_experts.c): the gathered x and dout,
 * each expert's weights (one expert's worth of scratch, reused in stream order), g (after the
 * dw2 path's row scaling) and dh1, dh3; cuda_gemm_bf16_rm accumulates in fp32. h1, h3, u, y,
 * the activations and dweight stay fp32. */
#include "cuda_ops.cuh"

#define MOE_CHUNK 256 /* assignments per chunk of the counting sort */

/* counts[ch, e]: how many assignments of chunk ch chose expert e; an expert id outside [0,E)
 * raises the flag at its assignment and is not counted. */
__global__ void moe_count_kernel(int32_t *counts, const int32_t *idx, int64_t A, int E,
                                 int64_t nchunks, unsigned long long *flag) {
    CUDA_FOR(ch, nchunks) {
        int32_t *cnt = counts + ch * E;
        for (int e = 0; e < E; e++) cnt[e] = 0;
        int64_t a1 = (ch + 1) * MOE_CHUNK < A ? (ch + 1) * MOE_CHUNK : A;
        for (int64_t a = ch * MOE_CHUNK; a < a1; a++) {
            int32_t e = idx[a];
            if (e < 0 || e >= E) {
                cuda_flag_raise(flag, a);
                continue;
            }
            cnt[e]++;
        }
    }
}

/* One thread: offsets[e] = first slot of expert e, and counts[ch, e] becomes the first slot of
 * chunk ch's rows of expert e (expert-major, then chunk order: stable). */
__global__ void moe_scan_kernel(int32_t *offsets, int32_t *counts, int E, int64_t nchunks) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    int32_t run = 0;
    for (int e = 0; e < E; e++) {
        offsets[e] = run;
        for (int64_t ch = 0; ch < nchunks; ch++) {
            int32_t c = counts[ch * E + e];
            counts[ch * E + e] = run;
            run += c;
        }
    }
    offsets[E] = run;
}

/* Each chunk places its assignments in order: ascending assignment within an expert. */
__global__ void moe_place_kernel(int32_t *perm, int32_t *inv, const int32_t *idx, int32_t *base,
                                 int64_t A, int E, int64_t nchunks) {
    CUDA_FOR(ch, nchunks) {
        int32_t *pos = base + ch * E;
        int64_t a1 = (ch + 1) * MOE_CHUNK < A ? (ch + 1) * MOE_CHUNK : A;
        for (int64_t a = ch * MOE_CHUNK; a < a1; a++) {
            int32_t s = pos[idx[a]]++;
            perm[s] = (int32_t)a;
            inv[a] = s;
        }
    }
}

/* xp[s,:] = x[perm[s] / K, :] for slots s < rows. */
__global__ void moe_gather_kernel(float *xp, const float *x, const int32_t *perm, int64_t rows,
                                  int K, int64_t C) {
    CUDA_FOR(i, rows * C) {
        int64_t s = i / C, c = i % C;
        xp[i] = x[(int64_t)(perm[s] / K) * C + c];
    }
}

/* out[n,:] (+)= sum_j weight[n,j] * yp[inv[n*K+j], :], j in order; weight NULL means 1. */
__global__ void moe_combine_kernel(float *out, const float *yp, const int32_t *inv,
                                   const float *weight, int64_t N, int K, int64_t C,
                                   bool accumulate) {
    CUDA_FOR(i, N * C) {
        int64_t n = i / C, c = i % C;
        float acc = accumulate ? out[i] : 0.0f;
        for (int j = 0; j < K; j++) {
            float wj = weight ? weight[n * K + j] : 1.0f;
            acc += wj * yp[(int64_t)inv[n * K + j] * C + c];
        }
        out[i] = acc;
    }
}

/* The CPU's sigmoid form for the experts (kernels/cpu/moe_experts.c). */
__device__ inline float moe_sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

/* g = silu(h1) * h3 over count elements. */
__global__ void moe_act_kernel(float *g, const float *h1, const float *h3, int64_t count) {
    CUDA_FOR(i, count) g[i] = h1[i] * moe_sigmoid(h1[i]) * h3[i];
}

/* dweight[perm[s]] += <u_s, g_s> (double), one warp per row s of the expert. */
__global__ void moe_dweight_kernel(float *dweight, const float *u, const float *g,
                                   const int32_t *pe, int64_t rows, int64_t F) {
    int64_t s = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (s >= rows) return;
    double acc = 0;
    for (int64_t f = lane; f < F; f += 32) acc += (double)u[s * F + f] * g[s * F + f];
    acc = cuda_warp_sum(acc);
    if (lane == 0) dweight[pe[s]] += (float)acc;
}

/* g[s,:] *= weight[perm[s]]. */
__global__ void moe_scale_rows_kernel(float *g, const float *weight, const int32_t *pe,
                                      int64_t rows, int64_t F) {
    CUDA_FOR(i, rows * F) g[i] *= weight[pe[i / F]];
}

/* With dg = w_s u: dh3 = dg silu(h1) and, in place of u, dh1 = dg h3 silu'(h1). */
__global__ void moe_dh_kernel(float *u, float *dh3, const float *h1, const float *h3,
                              const float *weight, const int32_t *pe, int64_t rows, int64_t F) {
    CUDA_FOR(i, rows * F) {
        float ws = weight[pe[i / F]];
        float z = h1[i], sg = moe_sigmoid(z), dg = ws * u[i];
        dh3[i] = dg * z * sg;
        u[i] = dg * h3[i] * sg * (1.0f + z * (1.0f - sg));
    }
}

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

/* The expert offsets on the host (a synchronising copy), carved from the host arena. */
static int32_t *moe_host_offsets(const mt_node *n, int E, const char *op) {
    int32_t *h = (int32_t *)mt_arena_alloc(&n->ctx->host, sizeof(int32_t) * (size_t)(E + 1),
                                           "moe_experts host offsets");
    cudaCheck(op, cudaMemcpy(h, n->saved[0]->data, sizeof(int32_t) * (size_t)(E + 1),
                             cudaMemcpyDeviceToHost));
    return h;
}

static int64_t moe_max_rows(const int32_t *off, int E) {
    int64_t m = 0;
    for (int e = 0; e < E; e++)
        if (off[e + 1] - off[e] > m) m = off[e + 1] - off[e];
    return m;
}

/* Builds offsets, perm, inv (saved[0..2]) from idx on the device; dies on a bad expert id. */
static void moe_perm_build(const mt_node *n, const moe_dims &d) {
    const char *op = "moe_experts forward (permutation)";
    int64_t A = d.N * d.K, nchunks = (A + MOE_CHUNK - 1) / MOE_CHUNK;
    int32_t *counts = (int32_t *)mt_node_scratch(
        n, sizeof(int32_t) * (size_t)((nchunks ? nchunks : 1) * d.E), "moe_experts counts");
    int32_t *offsets = (int32_t *)n->saved[0]->data, *perm = (int32_t *)n->saved[1]->data;
    int32_t *inv = (int32_t *)n->saved[2]->data;
    const int32_t *idx = cuda_i32(n->in[1]);
    cuda_flag_reset(op);
    if (nchunks > 0) {
        moe_count_kernel<<<cuda_blocks(nchunks, 128), 128>>>(counts, idx, A, d.E, nchunks,
                                                             cuda_err_flag);
        CUDA_LAUNCH_CHECK(op);
    }
    int64_t bad = cuda_flag_read(op);
    if (bad >= 0) {
        int32_t e = 0;
        cudaCheck(op, cudaMemcpy(&e, idx + bad, sizeof(e), cudaMemcpyDeviceToHost));
        MT_DIE("moe_experts: idx[%lld,%lld] = %d is outside [0,%d)", (long long)(bad / d.K),
               (long long)(bad % d.K), (int)e, d.E);
    }
    moe_scan_kernel<<<1, 1>>>(offsets, counts, d.E, nchunks);
    CUDA_LAUNCH_CHECK(op);
    if (nchunks > 0) {
        moe_place_kernel<<<cuda_blocks(nchunks, 128), 128>>>(perm, inv, idx, counts, A, d.E,
                                                             nchunks);
        CUDA_LAUNCH_CHECK(op);
    }
}

static void moe_gather(float *xp, const float *x, const int32_t *perm, const moe_dims &d,
                       const char *op) {
    int64_t A = d.N * d.K;
    if (A * d.C == 0) return;
    moe_gather_kernel<<<cuda_blocks(A * d.C, CUDA_THREADS), CUDA_THREADS>>>(xp, x, perm, A, d.K,
                                                                            d.C);
    CUDA_LAUNCH_CHECK(op);
}

static void moe_combine(float *out, const float *yp, const int32_t *inv, const float *weight,
                        const moe_dims &d, bool accumulate, const char *op) {
    if (d.N * d.C == 0) return;
    cuda_prof_begin(CUDA_PROF_COMBINE);
    moe_combine_kernel<<<cuda_blocks(d.N * d.C, CUDA_THREADS), CUDA_THREADS>>>(
        out, yp, inv, weight, d.N, d.K, d.C, accumulate);
    CUDA_LAUNCH_CHECK(op);
    cuda_prof_end(CUDA_PROF_COMBINE);
}

/* A GEMM operand: fp32, or its bf16 copy in bf16 mode (b non-NULL). */
struct moe_opnd {
    const float *f;
    const __nv_bfloat16 *b;
};
static moe_opnd moe_at(moe_opnd o, int64_t offset) {
    moe_opnd r = {o.f ? o.f + offset : NULL, o.b ? o.b + offset : NULL};
    return r;
}
/* The operand src (count floats) for a GEMM: in bf16 mode cast into dst (count bf16). */
static moe_opnd moe_opnd_of(const float *src, __nv_bfloat16 *dst, int64_t count, const char *op) {
    moe_opnd r = {src, NULL};
    if (dst) {
        cuda_cast_bf16(op, dst, src, count);
        r.b = dst;
    }
    return r;
}

static void moe_gemm(const char *op, bool ta, bool tb, int64_t m, int64_t nn, int64_t k, moe_opnd A,
                     int64_t lda, moe_opnd B, int64_t ldb, float beta, float *C, int64_t ldc) {
    MT_CHECK(!A.b == !B.b, "%s: a GEMM with one bf16 and one fp32 operand", op);
    cuda_prof_begin(CUDA_PROF_GEMM);
    if (A.b)
        cuda_gemm_bf16_rm(op, ta, tb, (int)m, (int)nn, (int)k, 1.0f, A.b, (int)lda, B.b, (int)ldb,
                          beta, C, (int)ldc);
    else
        cuda_sgemm_rm(op, ta, tb, (int)m, (int)nn, (int)k, 1.0f, A.f, (int)lda, B.f, (int)ldb, beta,
                      C, (int)ldc);
    cuda_prof_end(CUDA_PROF_GEMM);
}

/* bf16 mode: count bf16 of node scratch; NULL in fp32 mode (then no cast happens). */
static __nv_bfloat16 *moe_bf16_scratch(const mt_node *n, int64_t count, const char *what) {
    if (n->ip[0] != MT_BF16) return NULL;
    return (__nv_bfloat16 *)mt_node_scratch(n, sizeof(__nv_bfloat16) * (size_t)(count ? count : 1),
                                            what);
}

void cuda_moe_experts_fwd_node(const mt_node *n) {
    const char *op = "moe_experts forward";
    moe_dims d = moe_node_dims(n);
    const int64_t A = d.N * d.K, C = d.C, F = d.F;
    cuda_prof_begin(CUDA_PROF_ROUTE);
    moe_perm_build(n, d);
    const int32_t *off = moe_host_offsets(n, d.E, op);
    const int64_t max_rows = moe_max_rows(off, d.E);
    const bool keep_h = n->saved[3] != NULL;
    float *h1, *h3;
    if (keep_h) {
        h1 = cuda_f32(n->saved[3]);
        h3 = cuda_f32(n->saved[4]);
    } else {
        h1 = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(max_rows * F), "moe h1");
        h3 = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(max_rows * F), "moe h3");
    }
    float *xp = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(A * C), "moe_experts xp");
    float *yp = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(A * C), "moe_experts yp");
    float *g = (float *)mt_node_scratch(n, sizeof(float) * (size_t)(max_rows * F), "moe g");
    const int32_t *perm = cuda_i32(n->saved[1]);
    moe_gather(xp, cuda_f32(n->in[0]), perm, d, op);
    cuda_prof_end(CUDA_PROF_ROUTE);
    /* bf16 mode: copies of x by slot, of one expert's weights and of g */
    const moe_opnd xo = moe_opnd_of(xp, moe_bf16_scratch(n, A * C, "moe xp bf16"), A * C, op);
    __nv_bfloat16 *wb = moe_bf16_scratch(n, 3 * F * C, "moe w bf16");
    __nv_bfloat16 *gb = moe_bf16_scratch(n, max_rows * F, "moe g bf16");
    const float *w1 = cuda_f32(n->in[3]), *w3 = cuda_f32(n->in[4]), *w2 = cuda_f32(n->in[5]);
    for (int e = 0; e < d.E; e++) {
        const int64_t o = off[e], rows = off[e + 1] - o;
        if (rows == 0) continue; /* visited in order; contributes nothing */
        const moe_opnd w1e = moe_opnd_of(w1 + e * F * C, wb, F * C, op);
        const moe_opnd w3e = moe_opnd_of(w3 + e * F * C, wb ? wb + F * C : NULL, F * C, op);
        const moe_opnd w2e = moe_opnd_of(w2 + e * C * F, wb ? wb + 2 * F * C : NULL, C * F, op);
        const moe_opnd xe = moe_at(xo, o * C);
        float *h1e = keep_h ? h1 + o * F : h1, *h3e = keep_h ? h3 + o * F : h3;
        /* h (rows,F) = xe (rows,C) w^T, w (F,C) */
        moe_gemm(op, false, true, rows, F, C, xe, C, w1e, C, 0.0f, h1e, F);
        moe_gemm(op, false, true, rows, F, C, xe, C, w3e, C, 0.0f, h3e, F);
        if (rows * F > 0) {
            cuda_prof_begin(CUDA_PROF_ACT);
            moe_act_kernel<<<cuda_blocks(rows * F, CUDA_THREADS), CUDA_THREADS>>>(g, h1e, h3e,
                                                                                  rows * F);
            CUDA_LAUNCH_CHECK(op);
            cuda_prof_end(CUDA_PROF_ACT);
        }
        /* y (rows,C) = g (rows,F) w2e^T, w2e (C,F) */
        moe_gemm(op, false, true, rows, C, F, moe_opnd_of(g, gb, rows * F, op), F, w2e, F, 0.0f,
                 yp + o * C, C);
    }
    moe_combine(cuda_f32(n->out), yp, cuda_i32(n->saved[2]), cuda_f32(n->in[2]), d, false, op);
}

/* Per expert with rows s (weight w_s), U = dout_perm w2_e (rows,F), as on the CPU:
 *   dweight[a_s] += <U_s, g_s>        dw2_e += sum_s (w_s dout_{n_s}) g_s^T
 *   dg_s = w_s U_s;  dh1 = dg h3 silu'(h1);  dh3 = dg silu(h1)
 *   dw1_e += dh1^T xp;  dw3_e += dh3^T xp;  dxp = dh1 w1_e + dh3 w3_e;  dx[n] += sum_j dxp. */
void cuda_moe_experts_bwd_node(const mt_node *n) {
    const char *op = "moe_experts backward";
    moe_dims d = moe_node_dims(n);
    MT_CHECK(n->saved[3] && n->saved[4], "moe_experts backward: hidden activations were not saved");
    const int64_t A = d.N * d.K, C = d.C, F = d.F;
    float *dx = cuda_grad(n->in[0]), *dweight = cuda_grad(n->in[2]);
    float *dw1 = cuda_grad(n->in[3]), *dw3 = cuda_grad(n->in[4]), *dw2 = cuda_grad(n->in[5]);
    const bool need_dh = dx || dw1 || dw3, need_u = need_dh || dweight;
    if (!need_u && !dw2) return;
    const int32_t *off = moe_host_offsets(n, d.E, op);
    const int64_t max_rows = moe_max_rows(off, d.E);
    const size_t bc = sizeof(float) * (size_t)(A * C), bf = sizeof(float) * (size_t)(max_rows * F);
    float *xp = (dw1 || dw3) ? (float *)mt_node_scratch(n, bc, "moe_experts xp") : NULL;
    float *dp = (float *)mt_node_scratch(n, bc, "moe_experts dout perm");
    float *dxp = dx ? (float *)mt_node_scratch(n, bc, "moe_experts dx perm") : NULL;
    float *g = (float *)mt_node_scratch(n, bf, "moe_experts g");
    float *u = (float *)mt_node_scratch(n, bf, "moe_experts u");
    float *dh3 = (float *)mt_node_scratch(n, bf, "moe_experts dh3");
    const int32_t *perm = cuda_i32(n->saved[1]);
    const float *weight = cuda_f32(n->in[2]);
    cuda_prof_begin(CUDA_PROF_ROUTE);
    if (xp) moe_gather(xp, cuda_f32(n->in[0]), perm, d, op);
    moe_gather(dp, cuda_grad(n->out), perm, d, op);
    cuda_prof_end(CUDA_PROF_ROUTE);
    /* bf16 mode: copies of x and dout by slot, of one expert's weights, of g, dh1 and dh3 */
    moe_opnd xo = {xp, NULL};
    if (xp) xo = moe_opnd_of(xp, moe_bf16_scratch(n, A * C, "moe xp bf16"), A * C, op);
    const moe_opnd dpo = moe_opnd_of(dp, moe_bf16_scratch(n, A * C, "moe dp bf16"), A * C, op);
    __nv_bfloat16 *wb = moe_bf16_scratch(n, 3 * F * C, "moe w bf16");
    __nv_bfloat16 *gb = moe_bf16_scratch(n, max_rows * F, "moe g bf16");
    __nv_bfloat16 *ub = moe_bf16_scratch(n, max_rows * F, "moe dh1 bf16");
    __nv_bfloat16 *dh3b = moe_bf16_scratch(n, max_rows * F, "moe dh3 bf16");
    const float *w1 = cuda_f32(n->in[3]), *w3 = cuda_f32(n->in[4]), *w2 = cuda_f32(n->in[5]);
    const float *h1 = cuda_f32(n->saved[3]), *h3 = cuda_f32(n->saved[4]);
    for (int e = 0; e < d.E; e++) {
        const int64_t o = off[e], rows = off[e + 1] - o;
        if (rows == 0) continue; /* no rows: every gradient of this expert stays untouched */
        /* cast only the weights a requested product reads (as the CPU does) */
        moe_opnd w1e = {w1 + e * F * C, NULL}, w3e = {w3 + e * F * C, NULL};
        moe_opnd w2e = {w2 + e * C * F, NULL};
        if (dx) {
            w1e = moe_opnd_of(w1e.f, wb, F * C, op);
            w3e = moe_opnd_of(w3e.f, wb ? wb + F * C : NULL, F * C, op);
        }
        if (need_u) w2e = moe_opnd_of(w2e.f, wb ? wb + 2 * F * C : NULL, C * F, op);
        const float *h1e = h1 + o * F, *h3e = h3 + o * F;
        const moe_opnd dpe = moe_at(dpo, o * C);
        const int32_t *pe = perm + o;
        const int64_t count = rows * F;
        cuda_prof_begin(CUDA_PROF_ACT);
        if (count > 0) {
            moe_act_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(g, h1e, h3e, count);
            CUDA_LAUNCH_CHECK(op);
        }
        cuda_prof_end(CUDA_PROF_ACT);
        if (need_u) /* u (rows,F) = dpe (rows,C) w2e (C,F) */
            moe_gemm(op, false, false, rows, F, C, dpe, C, w2e, F, 0.0f, u, F);
        cuda_prof_begin(CUDA_PROF_ACT);
        if (dweight) {
            moe_dweight_kernel<<<(unsigned)((rows + 7) / 8), 256>>>(dweight, u, g, pe, rows, F);
            CUDA_LAUNCH_CHECK(op);
        }
        if (dw2 && count > 0) { /* g's rows scaled by w_s (g is not needed afterwards) */
            moe_scale_rows_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(g, weight, pe,
                                                                                      rows, F);
            CUDA_LAUNCH_CHECK(op);
        }
        cuda_prof_end(CUDA_PROF_ACT);
        if (dw2) /* dw2e (C,F) += dpe^T g */
            moe_gemm(op, true, false, C, F, rows, dpe, C, moe_opnd_of(g, gb, count, op), F, 1.0f,
                     dw2 + e * C * F, F);
        if (!need_dh) continue;
        cuda_prof_begin(CUDA_PROF_ACT);
        if (count > 0) {
            moe_dh_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(u, dh3, h1e, h3e,
                                                                              weight, pe, rows, F);
            CUDA_LAUNCH_CHECK(op);
        }
        cuda_prof_end(CUDA_PROF_ACT);
        const moe_opnd xe = moe_at(xo, o * C), dh1o = moe_opnd_of(u, ub, count, op);
        const moe_opnd dh3o = moe_opnd_of(dh3, dh3b, count, op);
        if (dw1) /* dw1e (F,C) += dh1^T (F,rows) xe (rows,C) */
            moe_gemm(op, true, false, F, C, rows, dh1o, F, xe, C, 1.0f, dw1 + e * F * C, C);
        if (dw3) moe_gemm(op, true, false, F, C, rows, dh3o, F, xe, C, 1.0f, dw3 + e * F * C, C);
        if (dx) { /* dxp (rows,C) = dh1 w1e + dh3 w3e, w (F,C) */
            float *dxe = dxp + o * C;
            moe_gemm(op, false, false, rows, C, F, dh1o, F, w1e, C, 0.0f, dxe, C);
            moe_gemm(op, false, false, rows, C, F, dh3o, F, w3e, C, 1.0f, dxe, C);
        }
    }
    if (dx) moe_combine(dx, dxp, cuda_i32(n->saved[2]), NULL, d, true, op);
}
