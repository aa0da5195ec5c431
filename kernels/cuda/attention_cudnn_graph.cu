/* attention_cudnn_graph.cu: the scaled-dot-product-attention graphs of cuDNN 9, forward and
 * backward, built through the backend API (cudnnBackendCreateDescriptor / SetAttribute /
 * Finalize), and their execution plans. cuDNN has no single fused-attention call in 9.19 that
 * takes a causal mask: it recognises the attention pattern in a graph of matmul, pointwise,
 * reduction and reshape operations (its "fused flash attention" support surface) and runs it
 * as one fused kernel. The graphs below are the ones NVIDIA's cudnn-frontend (v1.18, the
 * release that goes with cuDNN 9.18/9.19) lowers its sdpa and sdpa_backward nodes to for this
 * configuration: causal (top-left diagonal), GQA, bf16 in and out, fp32 intermediates and
 * softmax statistics, no bias, no dropout; packed samples as ragged (THD) tensors with a padding
 * mask from per-sequence lengths (no T x T mask exists anywhere: the masks are index
 * comparisons inside the fused kernel). Every tensor is 4-D (b, h, s, d) with explicit
 * strides; K (and V in the backward) enter transposed, (b, h, d, s), as the backend expects.
 *
 *   forward:  S = Q K^T; S *= scale; [padding mask: S = -inf where row >= seq_q or col >= seq_kv];
 *             causal: S = -inf where row < col; M = max_row S; E = exp(S - M); L = sum_row E;
 *             Stats = M + log L (fp32; natural log, of the scaled scores: the node's lse);
 *             P = bf16(E / L); O = P V.
 *   backward: softmax_sum = rowsum(dO o O) * 1; S = scale Q K^T, [padding], S - Stats, causal,
 *             P = exp(.); dV = P^T dO (summed over each kv head's group); dP = dO V^T;
 *             dS = scale P (dP - softmax_sum); dK = dS^T Q (group sum); dQ = dS K, in fp32
 *             (dq_accum) then rounded to bf16.
 *
 * Ran on an H200 with cuDNN 9.14.0: every graph kind gets a plan and matches the CPU under the
 * bf16 rule (docs/cuda.md, "cuDNN attention"). */
#include <stdio.h>
#include <string.h>

#include "attention_cudnn.cuh"

#ifndef MT_NO_CUDNN

/* ---- descriptors ---- */

struct sdpa_builder {
    sdpa_plan *p;
    int64_t next_uid; /* virtual tensors */
    cudnnBackendDescriptor_t ops[64];
    int n_ops;
    char *why;
    size_t len;
    bool failed;
};

/* Records the first failure: file:line, the call, cuDNN's status string and last message. */
static void sdpa_fail(sdpa_builder *g, const char *file, int line, const char *call,
                      cudnnStatus_t st) {
    if (!g->failed) {
        char last[256] = "";
        cudnnGetLastErrorString(last, sizeof(last));
        snprintf(g->why, g->len, "%s:%d: %s: %s%s%s", file, line, call, cudnnGetErrorString(st),
                 last[0] ? ": " : "", last);
    }
    g->failed = true;
}

/* Every cuDNN call: on an error, record it and return ret. */
#define SDPA_TRY(g, ret, call)                                                                     \
    do {                                                                                           \
        cudnnStatus_t sdpa_st_ = (call);                                                           \
        if (sdpa_st_ != CUDNN_STATUS_SUCCESS) {                                                    \
            sdpa_fail((g), __FILE__, __LINE__, #call, sdpa_st_);                                   \
            return ret;                                                                            \
        }                                                                                          \
    } while (0)

#define SDPA_SET(g, d, name, type, count, ptr)                                                     \
    SDPA_TRY(g, NULL, cudnnBackendSetAttribute((d), (name), (type), (count), (ptr)))

/* A descriptor the plan owns (freed with it). */
static cudnnBackendDescriptor_t sdpa_new(sdpa_builder *g, cudnnBackendDescriptorType_t type) {
    if (g->failed) return NULL;
    if (g->p->n_desc == SDPA_MAX_DESC) {
        snprintf(g->why, g->len, "more than %d cuDNN descriptors in one graph", SDPA_MAX_DESC);
        g->failed = true;
        return NULL;
    }
    cudnnBackendDescriptor_t d = NULL;
    SDPA_TRY(g, NULL, cudnnBackendCreateDescriptor(type, &d));
    g->p->desc[g->p->n_desc++] = d;
    return d;
}

/* A 4-D tensor: 16-byte aligned (every buffer here is), virtual (inside the fused kernel) or
 * the caller's memory (then one variant pack entry), by value (a host scalar at execution). */
static cudnnBackendDescriptor_t sdpa_tensor(sdpa_builder *g, int64_t uid, cudnnDataType_t dt,
                                            const int64_t dim[4], const int64_t stride[4],
                                            bool is_virtual, bool by_value,
                                            cudnnBackendDescriptor_t ragged) {
    cudnnBackendDescriptor_t t = sdpa_new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    if (!t) return NULL;
    const int64_t align = 16;
    const bool yes = true;
    SDPA_SET(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    SDPA_SET(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim);
    SDPA_SET(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride);
    SDPA_SET(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    SDPA_SET(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    if (is_virtual) SDPA_SET(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
    if (by_value) SDPA_SET(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
    if (ragged)
        SDPA_SET(g, t, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                 &ragged);
    SDPA_TRY(g, NULL, cudnnBackendFinalize(t));
    if (is_virtual) return t;
    for (int i = 0; i < g->p->n_uids; i++)
        if (g->p->uids[i] == uid) {
            snprintf(g->why, g->len, "tensor uid %lld made twice", (long long)uid);
            g->failed = true;
            return NULL;
        }
    g->p->uids[g->p->n_uids++] = uid; /* uid < SDPA_N_UID: at most one slot each */
    return t;
}

static cudnnBackendDescriptor_t sdpa_virt(sdpa_builder *g, cudnnDataType_t dt, const int64_t d[4],
                                          const int64_t s[4]) {
    return sdpa_tensor(g, g->next_uid++, dt, d, s, true, false, NULL);
}

/* A host fp32 scalar passed at execution (cuDNN's "pass by value" tensor), shape (1,1,1,1). */
static cudnnBackendDescriptor_t sdpa_scalar(sdpa_builder *g, int64_t uid) {
    static const int64_t one[4] = {1, 1, 1, 1};
    return sdpa_tensor(g, uid, CUDNN_DATA_FLOAT, one, one, false, true, NULL);
}

/* y = mode(x [, b [, t]]) elementwise with broadcasting; axis: GEN_INDEX's dimension. Returns y
 * (NULL after a failure, which every later call passes on). */
static cudnnBackendDescriptor_t sdpa_pw(sdpa_builder *g, cudnnPointwiseMode_t mode,
                                        cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                                        cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                                        cudnnBackendDescriptor_t y, int64_t axis = -1) {
    if (g->failed || !x || !y) return NULL;
    cudnnBackendDescriptor_t pw = sdpa_new(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    if (!pw) return NULL;
    SDPA_SET(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    SDPA_SET(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (mode == CUDNN_POINTWISE_GEN_INDEX)
        SDPA_SET(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    SDPA_TRY(g, NULL, cudnnBackendFinalize(pw));
    cudnnBackendDescriptor_t op = sdpa_new(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    if (!op) return NULL;
    const float alpha = 1.0f;
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
             &pw);
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b)
        SDPA_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t)
        SDPA_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &alpha);
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha);
    SDPA_TRY(g, NULL, cudnnBackendFinalize(op));
    g->ops[g->n_ops++] = op;
    return y;
}

/* c = a b over the last two dims, batch dims broadcast (GQA: a kv head serves H/Hkv query
 * heads), fp32 accumulation; m, n, k: per-sequence GEMM sizes (the padding mask's lengths). */
static cudnnBackendDescriptor_t sdpa_matmul(sdpa_builder *g, cudnnBackendDescriptor_t a,
                                            cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                                            cudnnBackendDescriptor_t m, cudnnBackendDescriptor_t n,
                                            cudnnBackendDescriptor_t k) {
    if (g->failed || !a || !b || !c) return NULL;
    cudnnBackendDescriptor_t mm = sdpa_new(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    if (!mm) return NULL;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    SDPA_SET(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    SDPA_TRY(g, NULL, cudnnBackendFinalize(mm));
    cudnnBackendDescriptor_t op = sdpa_new(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    if (!op) return NULL;
    const cudnnBackendAttributeType_t bd = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, bd, 1, &a);
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, bd, 1, &b);
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, bd, 1, &c);
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, bd, 1, &mm);
    if (m) SDPA_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, bd, 1, &m);
    if (n) SDPA_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, bd, 1, &n);
    if (k) SDPA_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, bd, 1, &k);
    SDPA_TRY(g, NULL, cudnnBackendFinalize(op));
    g->ops[g->n_ops++] = op;
    return c;
}

/* y = reduce(x) over the dims where y is 1 (and over each group where y has Hkv heads for H). */
static cudnnBackendDescriptor_t sdpa_reduce(sdpa_builder *g, cudnnReduceTensorOp_t mode,
                                            cudnnBackendDescriptor_t x,
                                            cudnnBackendDescriptor_t y) {
    if (g->failed || !x || !y) return NULL;
    cudnnBackendDescriptor_t rd = sdpa_new(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    if (!rd) return NULL;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    SDPA_SET(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    SDPA_SET(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    if (cudnnGetVersion() >= 91100) { /* the frontend sets the default explicitly from 9.11 on */
        const bool no = false;
        SDPA_SET(g, rd, CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &no);
    }
    SDPA_TRY(g, NULL, cudnnBackendFinalize(rd));
    cudnnBackendDescriptor_t op = sdpa_new(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    if (!op) return NULL;
    const cudnnBackendAttributeType_t bd = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, bd, 1, &x);
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, bd, 1, &y);
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, bd, 1, &rd);
    SDPA_TRY(g, NULL, cudnnBackendFinalize(op));
    g->ops[g->n_ops++] = op;
    return y;
}

/* y = x seen with other dims / strides (a transpose of the score matrix, K back from K^T). */
static cudnnBackendDescriptor_t sdpa_reshape(sdpa_builder *g, cudnnBackendDescriptor_t x,
                                             cudnnBackendDescriptor_t y) {
    if (g->failed || !x || !y) return NULL;
    cudnnBackendDescriptor_t op = sdpa_new(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    if (!op) return NULL;
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    SDPA_SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    SDPA_TRY(g, NULL, cudnnBackendFinalize(op));
    g->ops[g->n_ops++] = op;
    return y;
}

/* ---- layouts ---- */

/* Dims (b, h, s, d) and strides of every tensor of shape sh. Q-like tensors (Q, O, dO, dQ) are
 * the node's (B, T, H, D) rows: stride D between heads, H D between positions (BSHD), T H D
 * between sequences (nominal when ragged: the ragged offsets place each sequence). */
struct sdpa_layout {
    int64_t q[4], q_st[4];              /* (b, H, s, D) */
    int64_t kv[4], kv_st[4];            /* (b, Hkv, s, D) */
    int64_t kvt[4], kvt_st[4];          /* (b, Hkv, D, s): K^T, V^T */
    int64_t row[4], row_st[4];          /* (b, H, s, 1): per-row values inside the graph */
    int64_t stats_st[4];                /* the statistics: (b,H,s) dense, (token, H) ragged */
    int64_t sc[4], sc_st[4], sct_st[4]; /* (b, H, s, s) scores; transposed strides */
    int64_t acc[4], acc_st[4];          /* (b, H, s, D) dq_accum and the GQA full-head sums */
    int64_t seq[4], off[4], unit[4];    /* (b,1,1,1) lengths, (b+1,1,1,1) offsets, strides 1 */
};

static void sdpa_layout_of(const sdpa_shape &sh, sdpa_layout *L) {
    const int64_t b = sh.b, s = sh.s, H = sh.H, G = sh.Hkv, D = sh.D;
    const int64_t q[4] = {b, H, s, D}, q_st[4] = {s * H * D, D, H * D, 1};
    const int64_t kv[4] = {b, G, s, D}, kv_st[4] = {s * G * D, D, G * D, 1};
    const int64_t kvt[4] = {b, G, D, s}, kvt_st[4] = {s * G * D, D, 1, G * D};
    const int64_t row[4] = {b, H, s, 1}, row_st[4] = {H * s, s, 1, 1};
    const int64_t st_dense[4] = {H * s, s, 1, 1}, st_ragged[4] = {H * s, 1, H, 1};
    const int64_t sc[4] = {b, H, s, s}, sc_st[4] = {H * s * s, s * s, s, 1};
    const int64_t sct_st[4] = {H * s * s, s * s, 1, s};
    /* dense: (b, H, s, D) packed; ragged: dQ's strides (cudnn-frontend's "sized THD" buffers) */
    const int64_t acc_dense[4] = {H * s * D, s * D, D, 1};
    const int64_t seq[4] = {b, 1, 1, 1}, off[4] = {b + 1, 1, 1, 1}, unit[4] = {1, 1, 1, 1};
    memcpy(L->q, q, sizeof(q));
    memcpy(L->q_st, q_st, sizeof(q_st));
    memcpy(L->kv, kv, sizeof(kv));
    memcpy(L->kv_st, kv_st, sizeof(kv_st));
    memcpy(L->kvt, kvt, sizeof(kvt));
    memcpy(L->kvt_st, kvt_st, sizeof(kvt_st));
    memcpy(L->row, row, sizeof(row));
    memcpy(L->row_st, row_st, sizeof(row_st));
    memcpy(L->stats_st, sh.ragged ? st_ragged : st_dense, sizeof(st_dense));
    memcpy(L->sc, sc, sizeof(sc));
    memcpy(L->sc_st, sc_st, sizeof(sc_st));
    memcpy(L->sct_st, sct_st, sizeof(sct_st));
    memcpy(L->acc, q, sizeof(q));
    memcpy(L->acc_st, sh.ragged ? q_st : acc_dense, sizeof(q_st));
    memcpy(L->seq, seq, sizeof(seq));
    memcpy(L->off, off, sizeof(off));
    memcpy(L->unit, unit, sizeof(unit));
}

void sdpa_bwd_buffers(const sdpa_shape &sh, int64_t bytes[4]) {
    bytes[0] = sh.b * sh.H * sh.s * 4;         /* softmax_sum: (b, H, s) fp32 */
    bytes[1] = sh.b * sh.H * sh.s * sh.D * 4;  /* dq_accum: (b, H, s, D) fp32 */
    if (sh.ragged) bytes[0] = sh.s * sh.H * 4; /* sized by tokens (max_total_seq_len = s) */
    if (sh.ragged) bytes[1] = sh.s * sh.H * sh.D * 4;
    /* ragged GQA: per query head, sized in fp32 as the frontend does */
    bytes[2] = bytes[3] = sh.ragged && sh.H != sh.Hkv ? sh.s * sh.H * sh.D * 4 : 0;
}

/* ---- the two graphs ---- */

/* S = -inf outside each sequence's seq_q x seq_kv corner (graphs with lengths: sh.lens). */
static cudnnBackendDescriptor_t sdpa_padding_mask(sdpa_builder *g, const sdpa_layout &L,
                                                  cudnnBackendDescriptor_t s,
                                                  cudnnBackendDescriptor_t seq_q,
                                                  cudnnBackendDescriptor_t seq_kv) {
    const cudnnDataType_t i32 = CUDNN_DATA_INT32, b8 = CUDNN_DATA_BOOLEAN, f32 = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t row = sdpa_pw(g, CUDNN_POINTWISE_GEN_INDEX, i32, s, NULL, NULL,
                                           sdpa_virt(g, i32, L.sc, L.sc_st), 2);
    cudnnBackendDescriptor_t col = sdpa_pw(g, CUDNN_POINTWISE_GEN_INDEX, i32, s, NULL, NULL,
                                           sdpa_virt(g, i32, L.sc, L.sc_st), 3);
    cudnnBackendDescriptor_t in_q =
        sdpa_pw(g, CUDNN_POINTWISE_CMP_LT, b8, row, seq_q, NULL, sdpa_virt(g, b8, L.sc, L.sc_st));
    cudnnBackendDescriptor_t in_kv =
        sdpa_pw(g, CUDNN_POINTWISE_CMP_LT, b8, col, seq_kv, NULL, sdpa_virt(g, b8, L.sc, L.sc_st));
    cudnnBackendDescriptor_t in = sdpa_pw(g, CUDNN_POINTWISE_LOGICAL_AND, b8, in_q, in_kv, NULL,
                                          sdpa_virt(g, b8, L.sc, L.sc_st));
    return sdpa_pw(g, CUDNN_POINTWISE_BINARY_SELECT, f32, s, sdpa_scalar(g, SDPA_NEG_INF_PAD), in,
                   sdpa_virt(g, f32, L.sc, L.sc_st));
}

/* S = -inf where the key follows the query (top-left diagonal: position-wise inside each
 * sequence, whose query and key ranges coincide). */
static cudnnBackendDescriptor_t sdpa_causal_mask(sdpa_builder *g, const sdpa_layout &L,
                                                 cudnnBackendDescriptor_t s) {
    const cudnnDataType_t i32 = CUDNN_DATA_INT32, b8 = CUDNN_DATA_BOOLEAN, f32 = CUDNN_DATA_FLOAT;
    /* the frontend leaves these two at the graph's compute type (fp32), outputs int32 */
    cudnnBackendDescriptor_t row = sdpa_pw(g, CUDNN_POINTWISE_GEN_INDEX, f32, s, NULL, NULL,
                                           sdpa_virt(g, i32, L.sc, L.sc_st), 2);
    cudnnBackendDescriptor_t col = sdpa_pw(g, CUDNN_POINTWISE_GEN_INDEX, f32, s, NULL, NULL,
                                           sdpa_virt(g, i32, L.sc, L.sc_st), 3);
    cudnnBackendDescriptor_t keep =
        sdpa_pw(g, CUDNN_POINTWISE_CMP_GE, b8, row, col, NULL, sdpa_virt(g, b8, L.sc, L.sc_st));
    return sdpa_pw(g, CUDNN_POINTWISE_BINARY_SELECT, f32, s, sdpa_scalar(g, SDPA_NEG_INF_CAUSAL),
                   keep, sdpa_virt(g, f32, L.sc, L.sc_st));
}

/* The inputs both graphs share: ragged offsets (ragged only) and lengths (sh.lens), Q, K^T,
 * V or V^T, O, the statistics, the scale. */
struct sdpa_io {
    cudnnBackendDescriptor_t off_q, off_k, off_v, off_o, off_st, seq_q, seq_kv;
    cudnnBackendDescriptor_t q, kt, v, o, stats, scale;
};

static void sdpa_io_make(sdpa_builder *g, const sdpa_shape &sh, const sdpa_layout &L, sdpa_io *io) {
    const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, i64 = CUDNN_DATA_INT64;
    memset(io, 0, sizeof(*io));
    if (sh.ragged) {
        io->off_q = sdpa_tensor(g, SDPA_OFF_Q, i64, L.off, L.unit, false, false, NULL);
        io->off_k = sdpa_tensor(g, SDPA_OFF_K, i64, L.off, L.unit, false, false, NULL);
        io->off_v = sdpa_tensor(g, SDPA_OFF_V, i64, L.off, L.unit, false, false, NULL);
        io->off_o = sdpa_tensor(g, SDPA_OFF_O, i64, L.off, L.unit, false, false, NULL);
        io->off_st = sdpa_tensor(g, SDPA_OFF_STATS, i64, L.off, L.unit, false, false, NULL);
    }
    if (sh.lens) { /* the matmuls take them as their per-sequence sizes too (the frontend's) */
        io->seq_q = sdpa_tensor(g, SDPA_SEQ_Q, CUDNN_DATA_INT32, L.seq, L.unit, false, false, NULL);
        io->seq_kv =
            sdpa_tensor(g, SDPA_SEQ_KV, CUDNN_DATA_INT32, L.seq, L.unit, false, false, NULL);
    }
    io->q = sdpa_tensor(g, SDPA_Q, bf, L.q, L.q_st, false, false, io->off_q);
    io->kt = sdpa_tensor(g, SDPA_K, bf, L.kvt, L.kvt_st, false, false, io->off_k);
    /* the forward multiplies P V; the backward takes V^T (dP = dO V^T) */
    io->v = sh.bwd ? sdpa_tensor(g, SDPA_V, bf, L.kvt, L.kvt_st, false, false, io->off_v)
                   : sdpa_tensor(g, SDPA_V, bf, L.kv, L.kv_st, false, false, io->off_v);
    io->o = sdpa_tensor(g, SDPA_O, bf, L.q, L.q_st, false, false, io->off_o);
    io->stats =
        sdpa_tensor(g, SDPA_STATS, CUDNN_DATA_FLOAT, L.row, L.stats_st, false, false, io->off_st);
    io->scale = sdpa_scalar(g, SDPA_SCALE);
}

static void sdpa_graph_fwd(sdpa_builder *g, const sdpa_shape &sh, const sdpa_layout &L) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    sdpa_io io;
    sdpa_io_make(g, sh, L, &io);
    cudnnBackendDescriptor_t s =
        sdpa_matmul(g, io.q, io.kt, sdpa_virt(g, f32, L.sc, L.sc_st), io.seq_q, io.seq_kv, NULL);
    s = sdpa_pw(g, CUDNN_POINTWISE_MUL, f32, s, io.scale, NULL, sdpa_virt(g, f32, L.sc, L.sc_st));
    if (sh.lens) s = sdpa_padding_mask(g, L, s, io.seq_q, io.seq_kv);
    s = sdpa_causal_mask(g, L, s);
    /* softmax with its statistics: max, exp(S - max), sum, stats = max + log(sum), P = E / sum */
    cudnnBackendDescriptor_t mx =
        sdpa_reduce(g, CUDNN_REDUCE_TENSOR_MAX, s, sdpa_virt(g, f32, L.row, L.row_st));
    cudnnBackendDescriptor_t e =
        sdpa_pw(g, CUDNN_POINTWISE_SUB, f32, s, mx, NULL, sdpa_virt(g, f32, L.sc, L.sc_st));
    e = sdpa_pw(g, CUDNN_POINTWISE_EXP, f32, e, NULL, NULL, sdpa_virt(g, f32, L.sc, L.sc_st));
    cudnnBackendDescriptor_t sum =
        sdpa_reduce(g, CUDNN_REDUCE_TENSOR_ADD, e, sdpa_virt(g, f32, L.row, L.row_st));
    cudnnBackendDescriptor_t lg =
        sdpa_pw(g, CUDNN_POINTWISE_LOG, f32, sum, NULL, NULL, sdpa_virt(g, f32, L.row, L.row_st));
    sdpa_pw(g, CUDNN_POINTWISE_ADD, f32, mx, lg, NULL, io.stats);
    /* P in the inputs' type: the second matmul's operand */
    cudnnBackendDescriptor_t p = sdpa_pw(g, CUDNN_POINTWISE_DIV, f32, e, sum, NULL,
                                         sdpa_virt(g, CUDNN_DATA_BFLOAT16, L.sc, L.sc_st));
    sdpa_matmul(g, p, io.v, io.o, io.seq_q, NULL, io.seq_kv);
}

static void sdpa_graph_bwd(sdpa_builder *g, const sdpa_shape &sh, const sdpa_layout &L) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, bf = CUDNN_DATA_BFLOAT16;
    const bool gqa = sh.H != sh.Hkv;
    sdpa_io io;
    sdpa_io_make(g, sh, L, &io);
    cudnnBackendDescriptor_t d_o = sdpa_tensor(g, SDPA_DO, bf, L.q, L.q_st, false, false, io.off_o);
    cudnnBackendDescriptor_t dq = sdpa_tensor(g, SDPA_DQ, bf, L.q, L.q_st, false, false, io.off_q);
    cudnnBackendDescriptor_t dk =
        sdpa_tensor(g, SDPA_DK, bf, L.kv, L.kv_st, false, false, io.off_k);
    cudnnBackendDescriptor_t dv =
        sdpa_tensor(g, SDPA_DV, bf, L.kv, L.kv_st, false, false, io.off_v);

    /* softmax_sum = rowsum(dO o O) (times 1: no dropout), kept in the caller's memory */
    cudnnBackendDescriptor_t t =
        sdpa_pw(g, CUDNN_POINTWISE_MUL, f32, d_o, io.o, NULL, sdpa_virt(g, f32, L.q, L.q_st));
    t = sdpa_reduce(g, CUDNN_REDUCE_TENSOR_ADD, t, sdpa_virt(g, f32, L.row, L.row_st));
    cudnnBackendDescriptor_t ssum =
        sdpa_pw(g, CUDNN_POINTWISE_MUL, f32, t, sdpa_scalar(g, SDPA_ONE), NULL,
                sdpa_tensor(g, SDPA_SOFTMAX_SUM, f32, L.row, L.stats_st, false, false, io.off_st));

    /* P = exp(scale Q K^T - stats), masked */
    cudnnBackendDescriptor_t s =
        sdpa_matmul(g, io.q, io.kt, sdpa_virt(g, f32, L.sc, L.sc_st), io.seq_q, io.seq_kv, NULL);
    s = sdpa_pw(g, CUDNN_POINTWISE_MUL, f32, s, io.scale, NULL, sdpa_virt(g, f32, L.sc, L.sc_st));
    if (sh.lens) s = sdpa_padding_mask(g, L, s, io.seq_q, io.seq_kv);
    s = sdpa_pw(g, CUDNN_POINTWISE_SUB, f32, s, io.stats, NULL, sdpa_virt(g, f32, L.sc, L.sc_st));
    s = sdpa_causal_mask(g, L, s);
    cudnnBackendDescriptor_t p =
        sdpa_pw(g, CUDNN_POINTWISE_EXP, f32, s, NULL, NULL, sdpa_virt(g, f32, L.sc, L.sc_st));

    /* one query-head-wide product, then the sum over each kv head's group (GQA) */
    cudnnBackendDescriptor_t dk_full = NULL, dv_full = NULL;
    if (gqa && sh.ragged) { /* cuDNN's hack: dK's ragged offsets, H/Hkv implicit, in our memory */
        int64_t st[4] = {L.kv_st[0] * (sh.H / sh.Hkv), L.kv_st[1], L.kv_st[2] * (sh.H / sh.Hkv),
                         L.kv_st[3]};
        dk_full = sdpa_tensor(g, SDPA_DK_FULL, bf, L.acc, st, false, false, io.off_k);
        dv_full = sdpa_tensor(g, SDPA_DV_FULL, bf, L.acc, st, false, false, io.off_v);
    } else if (gqa) {
        dk_full = sdpa_virt(g, bf, L.acc, L.acc_st);
        dv_full = sdpa_virt(g, bf, L.acc, L.acc_st);
    }

    /* dV = P^T dO */
    cudnnBackendDescriptor_t pt = sdpa_reshape(g, p, sdpa_virt(g, bf, L.sc, L.sct_st));
    sdpa_matmul(g, pt, d_o, gqa ? dv_full : dv, io.seq_kv, NULL, io.seq_q);
    if (gqa) sdpa_reduce(g, CUDNN_REDUCE_TENSOR_ADD, dv_full, dv);

    /* dS = scale P (dO V^T - softmax_sum) */
    cudnnBackendDescriptor_t ds =
        sdpa_matmul(g, d_o, io.v, sdpa_virt(g, f32, L.sc, L.sc_st), io.seq_q, io.seq_kv, NULL);
    ds = sdpa_pw(g, CUDNN_POINTWISE_SUB, f32, ds, ssum, NULL, sdpa_virt(g, f32, L.sc, L.sc_st));
    ds = sdpa_pw(g, CUDNN_POINTWISE_MUL, f32, ds, p, NULL, sdpa_virt(g, f32, L.sc, L.sc_st));
    ds = sdpa_pw(g, CUDNN_POINTWISE_MUL, f32, ds, io.scale, NULL, sdpa_virt(g, f32, L.sc, L.sc_st));

    /* dK = dS^T Q */
    cudnnBackendDescriptor_t dst = sdpa_reshape(g, ds, sdpa_virt(g, bf, L.sc, L.sct_st));
    sdpa_matmul(g, dst, io.q, gqa ? dk_full : dk, io.seq_kv, NULL, io.seq_q);
    if (gqa) sdpa_reduce(g, CUDNN_REDUCE_TENSOR_ADD, dk_full, dk);

    /* dQ = dS K: K back from K^T (the frontend leaves this view at the compute type), the
     * product in fp32 (dq_accum), then dQ = bf16(dq_accum) */
    cudnnBackendDescriptor_t k = sdpa_reshape(
        g, io.kt, sdpa_tensor(g, g->next_uid++, f32, L.kv, L.kv_st, true, false, io.off_k));
    cudnnBackendDescriptor_t acc =
        sdpa_tensor(g, SDPA_DQ_ACCUM, f32, L.acc, L.acc_st, false, false, io.off_q);
    sdpa_matmul(g, ds, k, acc, io.seq_q, NULL, io.seq_kv);
    sdpa_pw(g, CUDNN_POINTWISE_IDENTITY, f32, acc, NULL, NULL, dq);
}

/* ---- plans ---- */

void sdpa_plan_free(sdpa_plan *p) {
    if (p->plan) cudnnBackendDestroyDescriptor(p->plan);
    for (int i = p->n_desc - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(p->desc[i]);
    memset(p, 0, sizeof(*p));
}

/* The operation graph's plans, best first by mode's heuristics: the first one cuDNN finalizes. */
static bool sdpa_plan_pick(sdpa_builder *g, cudnnHandle_t h, cudnnBackendDescriptor_t opg,
                           cudnnBackendHeurMode_t mode) {
    const cudnnBackendAttributeType_t bd = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    cudnnBackendDescriptor_t heur = sdpa_new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    if (!heur) return false;
    SDPA_TRY(g, false,
             cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, bd, 1, &opg));
    SDPA_TRY(
        g, false,
        cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
    SDPA_TRY(g, false, cudnnBackendFinalize(heur));
    cudnnBackendDescriptor_t cfg[8];
    for (int i = 0; i < 8; i++)
        if (!(cfg[i] = sdpa_new(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR))) return false;
    int64_t n_cfg = 0;
    SDPA_TRY(g, false,
             cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, bd, 8, &n_cfg, cfg));
    char first[384] = "";
    for (int64_t i = 0; i < n_cfg && i < 8; i++) {
        cudnnBackendDescriptor_t plan = NULL;
        SDPA_TRY(g, false,
                 cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
        cudnnStatus_t st = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                                    CUDNN_TYPE_HANDLE, 1, &h);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, bd, 1,
                                          &cfg[i]);
        if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(plan);
        if (st != CUDNN_STATUS_SUCCESS) { /* this engine declines the graph: try the next */
            char last[256] = "";
            cudnnGetLastErrorString(last, sizeof(last));
            if (!first[0])
                snprintf(first, sizeof(first), "engine config %lld of %lld: %s%s%s", (long long)i,
                         (long long)n_cfg, cudnnGetErrorString(st), last[0] ? ": " : "", last);
            cudnnBackendDestroyDescriptor(plan);
            continue;
        }
        g->p->plan = plan;
        int64_t n = 0;
        SDPA_TRY(g, false,
                 cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                          CUDNN_TYPE_INT64, 1, &n, &g->p->workspace));
        cudnnBackendDescriptor_t eng = sdpa_new(g, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        if (!eng) return false;
        SDPA_TRY(g, false,
                 cudnnBackendGetAttribute(cfg[i], CUDNN_ATTR_ENGINECFG_ENGINE, bd, 1, &n, &eng));
        SDPA_TRY(g, false,
                 cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                          &n, &g->p->engine));
        return true;
    }
    snprintf(g->why, g->len, "heuristics mode %s: %lld engine configs, none finalized%s%s",
             mode == CUDNN_HEUR_MODE_A ? "A" : "FALLBACK", (long long)n_cfg, first[0] ? "; " : "",
             first);
    return false;
}

/* The operation graph of the ops built so far, then a plan: heuristics mode A, else FALLBACK. */
static bool sdpa_graph_finish(sdpa_builder *g, cudnnHandle_t h) {
    if (g->failed) return false;
    cudnnBackendDescriptor_t opg = sdpa_new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (!opg) return false;
    SDPA_TRY(g, false,
             cudnnBackendSetAttribute(opg, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops));
    SDPA_TRY(
        g, false,
        cudnnBackendSetAttribute(opg, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
    SDPA_TRY(g, false, cudnnBackendFinalize(opg));
    if (sdpa_plan_pick(g, h, opg, CUDNN_HEUR_MODE_A)) return true;
    if (g->failed) return false;
    char a[384];
    snprintf(a, sizeof(a), "%s", g->why);
    if (sdpa_plan_pick(g, h, opg, CUDNN_HEUR_MODE_FALLBACK)) return true;
    if (g->failed) return false;
    char b[384];
    snprintf(b, sizeof(b), "%s", g->why);
    snprintf(g->why, g->len, "%s; %s", a, b);
    return false;
}

bool sdpa_plan_build(cudnnHandle_t h, const sdpa_shape &sh, sdpa_plan *p, char *why, size_t len) {
    memset(p, 0, sizeof(*p));
    p->shape = sh;
    sdpa_builder g;
    memset(&g, 0, sizeof(g));
    g.p = p;
    g.next_uid = SDPA_N_UID;
    g.why = why;
    g.len = len;
    why[0] = 0;
    sdpa_layout L;
    sdpa_layout_of(sh, &L);
    if (sh.bwd)
        sdpa_graph_bwd(&g, sh, L);
    else
        sdpa_graph_fwd(&g, sh, L);
    if (sdpa_graph_finish(&g, h)) return true;
    const sdpa_shape keep = p->shape;
    sdpa_plan_free(p);
    p->shape = keep;
    return false;
}

bool sdpa_plan_run(cudnnHandle_t h, const sdpa_plan &p, void *const ptr[SDPA_N_UID],
                   void *workspace, char *why, size_t len) {
    sdpa_builder g; /* only for the error record */
    memset(&g, 0, sizeof(g));
    g.why = why;
    g.len = len;
    void *data[SDPA_N_UID];
    for (int i = 0; i < p.n_uids; i++) {
        data[i] = ptr[p.uids[i]];
        if (!data[i]) {
            snprintf(why, len, "no pointer for the variant pack's tensor %lld",
                     (long long)p.uids[i]);
            return false;
        }
    }
    cudnnBackendDescriptor_t vp = NULL;
    SDPA_TRY(&g, false, cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
#define SDPA_STEP(call)                                                                            \
    if (st == CUDNN_STATUS_SUCCESS && (st = (call)) != CUDNN_STATUS_SUCCESS)                       \
    sdpa_fail(&g, __FILE__, __LINE__, #call, st)
    SDPA_STEP(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                       p.n_uids, p.uids));
    SDPA_STEP(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                       CUDNN_TYPE_VOID_PTR, p.n_uids, data));
    SDPA_STEP(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
                                       1, &workspace));
    SDPA_STEP(cudnnBackendFinalize(vp));
    SDPA_STEP(cudnnBackendExecute(h, p.plan, vp));
#undef SDPA_STEP
    cudnnBackendDestroyDescriptor(vp);
    return st == CUDNN_STATUS_SUCCESS;
}
#endif /* MT_NO_CUDNN */
