/* emu_cublas.cpp: the emulator's cublasGemmGroupedBatchedEx (tests/cuda_emu) against its
 * cublasGemmEx, problem by problem, and against a double reference rounded to bf16 for the all-
 * bf16 form; and the refusals that a real GPU would give too: bf16 A/B with an fp32 C
 * (CUBLAS_STATUS_NOT_SUPPORTED, cuBLAS's documented type table), a pointer array in host memory,
 * a too small leading dimension and overlapping outputs (CUBLAS_STATUS_INVALID_VALUE); then a
 * GEMM queued on a created stream, and the backend's GEMM pair with identical, overlapping and
 * disjoint outputs. Built only with the emulator (ctest
 * op_cuda_emu_cublas_grouped; with the argument "race", op_cuda_emu_cublas_race). */
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda_common.cuh"

static int failures = 0;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* device memory filled with small integers (exact in bf16 and in every product sum here) */
static void *dev_fill(size_t count, bool bf16, int seed) {
    void *p = NULL;
    cudaMalloc(&p, count * (bf16 ? 2 : 4));
    for (size_t i = 0; i < count; i++) {
        float v = (float)((int)((i * 7 + (size_t)seed * 13) % 9) - 4);
        if (bf16)
            ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
        else
            ((float *)p)[i] = v;
    }
    return p;
}

static cublasHandle_t h, hs; /* static: reachable at exit (the emulator has no cublasDestroy) */

/* A handle bound to a created stream (the GEMM lanes, kernels/cuda/backend_cuda.cu) queues its
 * GEMMs there: the output is untouched until the default stream waits on an event recorded on
 * that stream after them, and then equals the default stream's GEMM. */
static void check_stream_queue(void) {
    cudaStream_t s;
    cudaEvent_t fork, join;
    EXPECT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    cudaEventCreate(&fork);
    cudaEventCreate(&join);
    cublasCreate(&hs);
    EXPECT(cublasSetStream(hs, s) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
    float *a = (float *)dev_fill(6, false, 1), *b = (float *)dev_fill(6, false, 2);
    float *c = (float *)dev_fill(4, false, 0), *ref = (float *)dev_fill(4, false, 0);
    float before[4] = {100, 100, 100, 100}; /* no product here is that large */
    memcpy(c, before, sizeof(before));
    const float one = 1.0f, zero = 0.0f;
    cudaEventRecord(fork, 0);
    cudaStreamWaitEvent(s, fork, 0);
    /* C (2,2) = A (2,3) B^T, B (2,3) */
    EXPECT(cublasGemmEx(hs, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &one, a, CUDA_R_32F, 2, b,
                        CUDA_R_32F, 2, &zero, c, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
           "queued GEMM");
    EXPECT(memcmp(before, c, sizeof(before)) == 0,
           "a queued GEMM ran before its stream was waited for");
    EXPECT(cublasSgeam(hs, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, &one, a, 2, &zero, a, 2, c, 2) ==
               CUBLAS_STATUS_NOT_SUPPORTED,
           "cublasSgeam on a created stream");
    cudaEventRecord(join, s);
    cudaStreamWaitEvent(0, join, 0);
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &one, a, CUDA_R_32F, 2, b, CUDA_R_32F, 2,
                 &zero, ref, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    for (int i = 0; i < 4; i++)
        EXPECT(c[i] == ref[i] && ref[i] != before[i], "joined GEMM C[%d] = %g, want %g", i, c[i],
               ref[i]);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFree(ref);
    cudaEventDestroy(fork);
    cudaEventDestroy(join);
    cudaStreamDestroy(s);
}

/* "race": two created streams, one GEMM writing C on the first and, still queued, one reading C
 * on the second: the emulator must stop (a race on a GPU). Before that, two GEMMs that only
 * share their inputs, one per stream, are no race. */
static int run_race(void) {
    static cublasHandle_t h1, h2; /* reachable at exit */
    cudaStream_t s1, s2;
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    cublasCreate(&h1);
    cublasCreate(&h2);
    cublasSetStream(h1, s1);
    cublasSetStream(h2, s2);
    float *a = (float *)dev_fill(4, false, 1), *b = (float *)dev_fill(4, false, 2);
    float *c = (float *)dev_fill(4, false, 3), *d = (float *)dev_fill(4, false, 4);
    const float one = 1.0f, zero = 0.0f;
    cublasGemmEx(h1, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, CUDA_R_32F, 2, b, CUDA_R_32F, 2,
                 &zero, c, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cublasGemmEx(h2, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, CUDA_R_32F, 2, b, CUDA_R_32F, 2,
                 &zero, d, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    printf("shared inputs on two streams: no race\n");
    fflush(stdout);
    cublasGemmEx(h2, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, c, CUDA_R_32F, 2, b, CUDA_R_32F, 2,
                 &zero, d, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    printf("FAILED: a read of another stream's pending output went through\n");
    return 1;
}

/* cuda_gemm_rm_pair (kernels/cuda/backend_cuda.cu), C_i += A_i B_i^T with C_1 at C_0 + dc:
 * identical (dc 0) and overlapping (dc 1) outputs must run as two GEMMs in order, C_0 first (one
 * strided-batched call would write both at once on a GPU; the emulator refuses such a call, so a
 * pair that took it stops here), disjoint ones (dc 4 = C_0's span) as one call, the same values. */
static void check_gemm_pair(void) {
    if (!cuda_blas) cublasCreate(&cuda_blas);
    const int m = 2, n = 2, k = 3;
    float *a = (float *)dev_fill(2 * m * k, false, 5), *b = (float *)dev_fill(2 * n * k, false, 6);
    float *c = (float *)dev_fill(8, false, 7);
    const int dcs[3] = {0, 1, 4};
    for (int t = 0; t < 3; t++) {
        float want[8];
        for (int i = 0; i < 8; i++) want[i] = c[i] = (float)(i + 1);
        for (int g = 0; g < 2; g++) /* the reference: GEMM 0, then GEMM 1 on its result */
            for (int r = 0; r < m; r++)
                for (int col = 0; col < n; col++) {
                    float sum = 0.0f;
                    for (int j = 0; j < k; j++)
                        sum += a[g * m * k + r * k + j] * b[g * n * k + col * k + j];
                    want[g * dcs[t] + r * n + col] += sum;
                }
        cuda_gemm_rm_pair("gemm pair", false, false, true, m, n, k, 1.0f, a, a + m * k, k, b,
                          b + n * k, k, 1.0f, c, c + dcs[t], n);
        for (int i = 0; i < 8; i++)
            EXPECT(c[i] == want[i], "GEMM pair, C_1 = C_0 + %d: C[%d] = %g, want %g", dcs[t], i,
                   c[i], want[i]);
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "race")) return run_race();
    cublasCreate(&h);
    /* group 0: 2 problems, C (3,4) = A (3,5) B^T, B (4,5); group 1: 1 problem, C (2,3) =
     * A^T B + 0.5 C with A (4,2), B (4,3) */
    const cublasOperation_t ta[2] = {CUBLAS_OP_N, CUBLAS_OP_T}, tb[2] = {CUBLAS_OP_T, CUBLAS_OP_N};
    const int m[2] = {3, 2}, n[2] = {4, 3}, k[2] = {5, 4}, lda[2] = {3, 4}, ldb[2] = {4, 4},
              ldc[2] = {3, 2}, size[2] = {2, 1};
    const float alpha[2] = {1.0f, 2.0f}, beta[2] = {0.0f, 0.5f};
    const size_t na[3] = {15, 15, 8}, nb[3] = {20, 20, 12}, nc[3] = {12, 12, 6};
    const int grp[3] = {0, 0, 1};
    for (int pass = 0; pass < 2; pass++) {
        const bool bf16 = pass == 1;
        const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_32F;
        void **arr = NULL; /* A, B, C pointer arrays of 3 problems each, device memory */
        cudaMalloc(&arr, 9 * sizeof(void *));
        float *ref[3];
        for (int p = 0; p < 3; p++) {
            arr[p] = dev_fill(na[p], bf16, 3 * p);
            arr[3 + p] = dev_fill(nb[p], bf16, 3 * p + 1);
            arr[6 + p] = dev_fill(nc[p], bf16, 3 * p + 2);
            /* the reference: cublasGemmEx on fp32 copies of the inputs, then rounded like C */
            float *a = (float *)dev_fill(na[p], false, 3 * p),
                  *b = (float *)dev_fill(nb[p], false, 3 * p + 1);
            ref[p] = (float *)dev_fill(nc[p], false, 3 * p + 2);
            const int g = grp[p];
            EXPECT(cublasGemmEx(h, ta[g], tb[g], m[g], n[g], k[g], &alpha[g], a, CUDA_R_32F, lda[g],
                                b, CUDA_R_32F, ldb[g], &beta[g], ref[p], CUDA_R_32F, ldc[g],
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
                   "reference GEMM %d", p);
            cudaFree(a);
            cudaFree(b);
        }
        cublasStatus_t s =
            cublasGemmGroupedBatchedEx(h, ta, tb, m, n, k, alpha, arr, t, lda, arr + 3, t, ldb,
                                       beta, arr + 6, t, ldc, 2, size, CUBLAS_COMPUTE_32F);
        EXPECT(s == CUBLAS_STATUS_SUCCESS, "grouped %s: status %d", bf16 ? "bf16" : "fp32", (int)s);
        for (int p = 0; p < 3; p++)
            for (size_t i = 0; i < nc[p]; i++) {
                float got = bf16 ? __bfloat162float(((__nv_bfloat16 *)arr[6 + p])[i])
                                 : ((float *)arr[6 + p])[i];
                float want = bf16 ? __bfloat162float(__float2bfloat16_rn(ref[p][i])) : ref[p][i];
                EXPECT(got == want, "%s problem %d C[%zu] = %g, want %g", bf16 ? "bf16" : "fp32", p,
                       i, got, want);
            }
        if (bf16) { /* bf16 A/B with an fp32 C: fine for cublasGemmEx, not for the grouped call */
            s = cublasGemmGroupedBatchedEx(h, ta, tb, m, n, k, alpha, arr, CUDA_R_16BF, lda,
                                           arr + 3, CUDA_R_16BF, ldb, beta, arr + 6, CUDA_R_32F,
                                           ldc, 2, size, CUBLAS_COMPUTE_32F);
            EXPECT(s == CUBLAS_STATUS_NOT_SUPPORTED, "bf16 A/B, fp32 C: status %d", (int)s);
        } else {
            void *host_arr[3] = {arr[0], arr[1], arr[2]}; /* a host pointer array */
            s = cublasGemmGroupedBatchedEx(h, ta, tb, m, n, k, alpha, host_arr, t, lda, arr + 3, t,
                                           ldb, beta, arr + 6, t, ldc, 2, size, CUBLAS_COMPUTE_32F);
            EXPECT(s == CUBLAS_STATUS_INVALID_VALUE, "host pointer array: status %d", (int)s);
            const int small_lda[2] = {2, 4};
            s = cublasGemmGroupedBatchedEx(h, ta, tb, m, n, k, alpha, arr, t, small_lda, arr + 3, t,
                                           ldb, beta, arr + 6, t, ldc, 2, size, CUBLAS_COMPUTE_32F);
            EXPECT(s == CUBLAS_STATUS_INVALID_VALUE, "lda < m: status %d", (int)s);
            void *c1 = arr[7];
            arr[7] = arr[6]; /* group 0's two problems write the same C */
            s = cublasGemmGroupedBatchedEx(h, ta, tb, m, n, k, alpha, arr, t, lda, arr + 3, t, ldb,
                                           beta, arr + 6, t, ldc, 2, size, CUBLAS_COMPUTE_32F);
            EXPECT(s == CUBLAS_STATUS_INVALID_VALUE, "overlapping outputs: status %d", (int)s);
            arr[7] = c1;
        }
        for (int p = 0; p < 9; p++) cudaFree(arr[p]);
        for (int p = 0; p < 3; p++) cudaFree(ref[p]);
        cudaFree(arr);
    }
    check_stream_queue();
    check_gemm_pair();
    if (failures) {
        printf("FAILED emu cublasGemmGroupedBatchedEx (%d checks)\n", failures);
        return 1;
    }
    printf("PASSED emu cublasGemmGroupedBatchedEx\n");
    return 0;
}
