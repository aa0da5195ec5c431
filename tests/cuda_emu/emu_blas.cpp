/* emu_blas.cpp: the emulator's cuBLAS (cublas_v2.h): GEMMs on the CPU with cuBLAS's column-major
 * semantics and argument checks.
 *
 * Streams (cublasSetStream): a handle bound to the default stream (0, the default) runs each
 * call at once, as the rest of the emulator does. A handle bound to a created stream queues its
 * GEMMs there, like the emulated collectives (emu_nccl.cpp): they run, in order, when the
 * default stream waits on an event recorded on that stream after them, when the stream is
 * synchronised or destroyed, or at cudaDeviceSynchronize. So a result read without that wait
 * is stale here (on a GPU it may be). Only cublasGemmEx and cublasGemmStridedBatchedEx are
 * queued; the other calls on such a handle are CUBLAS_STATUS_NOT_SUPPORTED here. Strict mode
 * (MT_EMU_STRICT=1) also requires the stream to have waited for all the default stream's earlier
 * work before a call is queued (else the GEMM could read operands kernels still write), and stops
 * the run otherwise. In any mode two GEMMs queued on different created streams at once must not
 * touch the same bytes where one of them writes (emu_span below). */
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "cuda_runtime.h"
#include "emu_internal.h"

struct emu_blas {
    cudaStream_t stream = nullptr;
};

const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS:
        return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE (emulator)";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED (emulator)";
    default:
        return "CUBLAS_STATUS_NOT_INITIALIZED (emulator)";
    }
}
cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = new emu_blas();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

/* What a GEMM queued on a created stream reads and writes, until it runs: [lo, hi) bytes. On a
 * GPU created streams run concurrently, so a queued GEMM that writes what a GEMM still queued on
 * another stream reads or writes (or reads what that one writes) races. The emulator runs the
 * queues one after the other, where such a race would go unseen, so it stops at the second
 * call instead. */
struct emu_span {
    cudaStream_t s;
    uintptr_t lo, hi;
    bool write;
    uint64_t call; /* the queued call: its spans go when it runs */
};
static std::vector<emu_span> emu_spans;
static uint64_t emu_calls = 0;

/* The bytes of a column-major rows x cols matrix at p with leading dimension ld. */
static emu_span emu_matrix(const void *p, int rows, int cols, int ld, size_t es, bool write) {
    const uintptr_t lo = (uintptr_t)p;
    const size_t n = rows > 0 && cols > 0 ? ((size_t)(cols - 1) * ld + rows) * es : 0;
    return emu_span{nullptr, lo, lo + n, write, 0};
}

/* Runs op now on the default stream (counted as its work), else queues it on the handle's with
 * the spans it touches (n of them). */
static void emu_blas_issue(cublasHandle_t h, std::function<void()> op, const emu_span *spans,
                           int n) {
    if (!h->stream) {
        emu_default_work_add();
        op();
        return;
    }
    if (emu_strict() && !emu_stream_waited_all(h->stream)) {
        fprintf(stderr, "cublas emulator: a call queued on a created stream that has not waited "
                        "for the default stream's earlier work (strict mode)\n");
        abort();
    }
    const uint64_t call = ++emu_calls;
    for (int i = 0; i < n; i++) {
        if (spans[i].hi == spans[i].lo) continue;
        for (const emu_span &o : emu_spans)
            if (o.s != h->stream && (o.write || spans[i].write) && spans[i].lo < o.hi &&
                o.lo < spans[i].hi) {
                fprintf(stderr,
                        "cublas emulator: a GEMM queued on one created stream %s bytes "
                        "[%#lx, %#lx) that a GEMM still queued on another %s: a race on a GPU\n",
                        spans[i].write ? "writes" : "reads", (unsigned long)spans[i].lo,
                        (unsigned long)spans[i].hi, o.write ? "writes" : "reads");
                abort();
            }
        emu_spans.push_back(emu_span{h->stream, spans[i].lo, spans[i].hi, spans[i].write, call});
    }
    emu_stream_enqueue(h->stream, [op, call]() {
        op();
        emu_spans.erase(std::remove_if(emu_spans.begin(), emu_spans.end(),
                                       [call](const emu_span &x) { return x.call == call; }),
                        emu_spans.end());
    });
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
    (void)mode;
    return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

static int emu_max1(int v) { return v > 1 ? v : 1; }

/* op(X)'s rows (trans: row r is X[r ld ..], else X[r + l ld] over l) as rows of k fp32 values
 * at out + r k. These loads of device memory stay checked by the sanitizers. */
static void emu_gemm_pack(bool trans, int rows, int k, const void *X, bool bf16, int ld,
                          float *out) {
    for (int r = 0; r < rows; r++)
        for (int l = 0; l < k; l++) {
            const size_t ix = trans ? l + (size_t)r * ld : r + (size_t)l * ld;
            out[(size_t)r * k + l] =
                bf16 ? __bfloat162float(((const __nv_bfloat16 *)X)[ix]) : ((const float *)X)[ix];
        }
}

/* acc[i + m c] = sum over l = 0 .. k-1, in that order, of Ap[i k + l] Bp[(j + c) k + l] in
 * double, for the columns c < nc <= 4 from j. The columns are interleaved into bq (in double,
 * unused ones 0) so that one vector holds a row's four sums, and four rows run at once: sixteen
 * independent sums per pass. Each product of two floats is exact in double, so any fused
 * multiply-add gives the bits of a multiply and an add. Only the packed copies are read, so the
 * sanitizers are left out of this loop (the tests' hot spot). */
typedef double emu_v4d __attribute__((vector_size(32)));
__attribute__((no_sanitize("address", "undefined"))) static void
emu_gemm_dots(int m, int k, int nc, const float *Ap, const float *Bp, double *bq, double *acc) {
    for (int l = 0; l < k; l++)
        for (int c = 0; c < 4; c++) bq[4 * (size_t)l + c] = c < nc ? Bp[(size_t)c * k + l] : 0.0;
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        const float *a0 = Ap + (size_t)i * k, *a1 = a0 + k, *a2 = a1 + k, *a3 = a2 + k;
        emu_v4d s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
        for (int l = 0; l < k; l++) {
            emu_v4d b;
            __builtin_memcpy(&b, bq + 4 * (size_t)l, sizeof(b));
            s0 += (double)a0[l] * b;
            s1 += (double)a1[l] * b;
            s2 += (double)a2[l] * b;
            s3 += (double)a3[l] * b;
        }
        for (int c = 0; c < nc; c++) {
            double *out = acc + i + (size_t)m * c;
            out[0] = s0[c];
            out[1] = s1[c];
            out[2] = s2[c];
            out[3] = s3[c];
        }
    }
    for (; i < m; i++) {
        const float *a = Ap + (size_t)i * k;
        emu_v4d s = {0, 0, 0, 0};
        for (int l = 0; l < k; l++) {
            emu_v4d b;
            __builtin_memcpy(&b, bq + 4 * (size_t)l, sizeof(b));
            s += (double)a[l] * b;
        }
        for (int c = 0; c < nc; c++) acc[i + (size_t)m * c] = s[c];
    }
}

/* One column-major problem C = alpha op(A) op(B) + beta C; A and B fp32 or bf16 (the products
 * exact in double, summed in double in the order of k), C fp32 or bf16 (rounded to nearest
 * even when stored; read only when beta != 0). */
static void emu_gemm_one(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         float alpha, const void *A, bool abf16, int lda, const void *B, int ldb,
                         float beta, void *C, bool cbf16, int ldc) {
    if (m == 0 || n == 0) return; /* nothing read, nothing written */
    static thread_local std::vector<float> ap, bp;
    static thread_local std::vector<double> acc, bq;
    ap.resize((size_t)m * k);
    bp.resize((size_t)n * k);
    acc.resize((size_t)m * 4);
    bq.resize((size_t)k * 4);
    emu_gemm_pack(ta != CUBLAS_OP_N, m, k, A, abf16, lda, ap.data());
    emu_gemm_pack(tb == CUBLAS_OP_N, n, k, B, abf16, ldb, bp.data());
    for (int j0 = 0; j0 < n; j0 += 4) {
        const int nc = n - j0 < 4 ? n - j0 : 4;
        emu_gemm_dots(m, k, nc, ap.data(), bp.data() + (size_t)j0 * k, bq.data(), acc.data());
        for (int c = 0; c < nc; c++)
            for (int i = 0; i < m; i++) {
                const double a = acc[i + (size_t)m * c];
                const size_t ic = i + (size_t)(j0 + c) * ldc;
                float old = 0.0f;
                if (beta != 0.0f)
                    old = cbf16 ? __bfloat162float(((__nv_bfloat16 *)C)[ic]) : ((float *)C)[ic];
                float v =
                    beta == 0.0f ? (float)(alpha * a) : (float)(alpha * a + (double)beta * old);
                if (cbf16)
                    ((__nv_bfloat16 *)C)[ic] = __float2bfloat16_rn(v);
                else
                    ((float *)C)[ic] = v;
            }
    }
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha_p, const void *A, cudaDataType at,
                            int lda, const void *B, cudaDataType bt, int ldb, const void *beta_p,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
    (void)algo;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    /* the two combinations the kernels use: fp32, and bf16 inputs with fp32 output */
    if (at != bt || (at != CUDA_R_32F && at != CUDA_R_16BF) || ct != CUDA_R_32F ||
        compute != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const bool bf16 = at == CUDA_R_16BF;
    if (m < 0 || n < 0 || k < 0 || lda < emu_max1(ta == CUBLAS_OP_N ? m : k) ||
        ldb < emu_max1(tb == CUBLAS_OP_N ? k : n) || ldc < emu_max1(m))
        return CUBLAS_STATUS_INVALID_VALUE;
    const float alpha = *(const float *)alpha_p, beta = *(const float *)beta_p; /* host mode */
    const size_t es = bf16 ? 2 : 4;
    const emu_span spans[3] = {
        emu_matrix(A, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda, es, false),
        emu_matrix(B, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb, es, false),
        emu_matrix(C, m, n, ldc, sizeof(float), true)};
    emu_blas_issue(
        h,
        [=]() { emu_gemm_one(ta, tb, m, n, k, alpha, A, bf16, lda, B, ldb, beta, C, false, ldc); },
        spans, 3);
    return CUBLAS_STATUS_SUCCESS;
}

/* One cublasGemmEx per batch entry. Stricter than cuBLAS, to catch wrong strides: a negative
 * batch or stride, or outputs that overlap (undefined in cuBLAS), is CUBLAS_STATUS_INVALID_VALUE.
 */
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, long long strideA, const void *B,
    cudaDataType bt, int ldb, long long strideB, const void *beta, void *C, cudaDataType ct,
    int ldc, long long strideC, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (batch < 0 || strideA < 0 || strideB < 0 || strideC < 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (batch > 1 && m > 0 && n > 0 && strideC < (long long)ldc * (n - 1) + m)
        return CUBLAS_STATUS_INVALID_VALUE;
    const size_t ea = at == CUDA_R_16BF ? 2 : 4, eb = bt == CUDA_R_16BF ? 2 : 4;
    for (int i = 0; i < batch; i++) {
        cublasStatus_t s =
            cublasGemmEx(h, ta, tb, m, n, k, alpha, (const char *)A + (size_t)i * strideA * ea, at,
                         lda, (const char *)B + (size_t)i * strideB * eb, bt, ldb, beta,
                         (float *)C + (size_t)i * strideC, ct, ldc, compute, algo);
        if (s != CUBLAS_STATUS_SUCCESS) return s;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgeam(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, const float *alpha, const float *A, int lda, const float *beta,
                           const float *B, int ldb, float *C, int ldc) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (h->stream) return CUBLAS_STATUS_NOT_SUPPORTED; /* the emulator queues GEMMs only */
    emu_default_work_add();
    if (m < 0 || n < 0 || lda < emu_max1(ta == CUBLAS_OP_N ? m : n) ||
        ldb < emu_max1(tb == CUBLAS_OP_N ? m : n) || ldc < emu_max1(m))
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float x = *alpha == 0.0f
                          ? 0.0f
                          : (ta == CUBLAS_OP_N ? A[i + (size_t)j * lda] : A[j + (size_t)i * lda]);
            float y = *beta == 0.0f
                          ? 0.0f
                          : (tb == CUBLAS_OP_N ? B[i + (size_t)j * ldb] : B[j + (size_t)i * ldb]);
            C[i + (size_t)j * ldc] = *alpha * x + *beta * y;
        }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- grouped GEMM ---- */

/* cuBLAS's documented combinations for this call (scale type fp32): A, B and C all CUDA_R_32F or
 * all CUDA_R_16BF with CUBLAS_COMPUTE_32F (the emulator has no CUDA_R_16F, TF32 or fp64 types).
 * bf16 A/B with an fp32 C, which cublasGemmEx accepts, is CUBLAS_STATUS_NOT_SUPPORTED here as in
 * cuBLAS. The host arrays are read during the call; Aarray, Barray and Carray must be device
 * memory (cudaMalloc blocks), as must every matrix, else CUBLAS_STATUS_INVALID_VALUE. Stricter
 * than cuBLAS, to catch a wrong plan: two problems whose C regions overlap (undefined in cuBLAS:
 * they may run concurrently) are CUBLAS_STATUS_INVALID_VALUE. */
cublasStatus_t cublasGemmGroupedBatchedEx(
    cublasHandle_t h, const cublasOperation_t ta[], const cublasOperation_t tb[], const int m[],
    const int n[], const int k[], const void *alpha, const void *const Aarray[], cudaDataType at,
    const int lda[], const void *const Barray[], cudaDataType bt, const int ldb[], const void *beta,
    void *const Carray[], cudaDataType ct, const int ldc[], int group_count, const int group_size[],
    cublasComputeType_t compute) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (h->stream) return CUBLAS_STATUS_NOT_SUPPORTED; /* the emulator queues GEMMs only */
    emu_default_work_add();
    if (compute != CUBLAS_COMPUTE_32F || at != bt || bt != ct ||
        (at != CUDA_R_32F && at != CUDA_R_16BF))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (group_count < 0) return CUBLAS_STATUS_INVALID_VALUE;
    const bool bf16 = at == CUDA_R_16BF;
    const size_t es = bf16 ? 2 : 4;
    int64_t problems = 0;
    for (int g = 0; g < group_count; g++) {
        if (group_size[g] < 0 || m[g] < 0 || n[g] < 0 || k[g] < 0 ||
            lda[g] < emu_max1(ta[g] == CUBLAS_OP_N ? m[g] : k[g]) ||
            ldb[g] < emu_max1(tb[g] == CUBLAS_OP_N ? k[g] : n[g]) || ldc[g] < emu_max1(m[g]))
            return CUBLAS_STATUS_INVALID_VALUE;
        problems += group_size[g];
    }
    if (problems == 0) return CUBLAS_STATUS_SUCCESS;
    const size_t pb = sizeof(void *) * (size_t)problems;
    if (!emu_is_device(Aarray, pb) || !emu_is_device(Barray, pb) || !emu_is_device(Carray, pb))
        return CUBLAS_STATUS_INVALID_VALUE;
    /* the extent of each problem's matrices, in elements: (cols - 1) * ld + rows */
    std::vector<std::pair<uintptr_t, uintptr_t>> outs;
    int64_t p = 0;
    for (int g = 0; g < group_count; g++) {
        const int ar = ta[g] == CUBLAS_OP_N ? m[g] : k[g], ac = ta[g] == CUBLAS_OP_N ? k[g] : m[g];
        const int br = tb[g] == CUBLAS_OP_N ? k[g] : n[g], bc = tb[g] == CUBLAS_OP_N ? n[g] : k[g];
        const size_t asz = ar && ac ? es * ((size_t)(ac - 1) * lda[g] + ar) : 0;
        const size_t bsz = br && bc ? es * ((size_t)(bc - 1) * ldb[g] + br) : 0;
        const size_t csz = m[g] && n[g] ? es * ((size_t)(n[g] - 1) * ldc[g] + m[g]) : 0;
        for (int i = 0; i < group_size[g]; i++, p++) {
            if ((asz && !emu_is_device(Aarray[p], asz)) ||
                (bsz && !emu_is_device(Barray[p], bsz)) || (csz && !emu_is_device(Carray[p], csz)))
                return CUBLAS_STATUS_INVALID_VALUE;
            if (csz) outs.push_back({(uintptr_t)Carray[p], (uintptr_t)Carray[p] + csz});
        }
    }
    std::sort(outs.begin(), outs.end());
    for (size_t i = 1; i < outs.size(); i++)
        if (outs[i].first < outs[i - 1].second) return CUBLAS_STATUS_INVALID_VALUE;
    p = 0;
    for (int g = 0; g < group_count; g++)
        for (int i = 0; i < group_size[g]; i++, p++)
            emu_gemm_one(ta[g], tb[g], m[g], n[g], k[g], ((const float *)alpha)[g], Aarray[p], bf16,
                         lda[g], Barray[p], ldb[g], ((const float *)beta)[g], Carray[p], bf16,
                         ldc[g]);
    return CUBLAS_STATUS_SUCCESS;
}
