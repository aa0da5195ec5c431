/* backend_cuda.cu: the CUDA backend table, its device probe, and the helpers every CUDA op
 * shares (launch checks, the argument-error flag, the row-major GEMM, the phase profiler).
 *
 * The probe treats ANY error of cudaGetDeviceCount as "no GPU": on a machine without a driver
 * it returns cudaErrorInsufficientDriver, not cudaErrorNoDevice (docs/cuda.md). It uses the
 * current device (0 unless the caller chose another with cudaSetDevice before the first call).
 * Checked on an H200 through every gpu_* case: docs/cuda.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.cuh"

cublasHandle_t cuda_blas = NULL;
unsigned long long *cuda_err_flag = NULL;
static bool cuda_sync_each = false;

void cuda_launch_check(const char *op, const char *file, int line) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && cuda_sync_each) e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        mt_die_at(file, line, "cuda %s: kernel failed: %s (%s)", op, cudaGetErrorString(e),
                  cudaGetErrorName(e));
}

void cuda_flag_reset(const char *op) {
    cudaCheck(op, cudaMemsetAsync(cuda_err_flag, 0xff, sizeof(*cuda_err_flag)));
}

int64_t cuda_flag_read(const char *op) {
    unsigned long long v = 0;
    cudaCheck(op, cudaMemcpy(&v, cuda_err_flag, sizeof(v), cudaMemcpyDeviceToHost));
    return v == ~0ull ? -1 : (int64_t)v;
}

/* cuda_sgemm_rm for A and B of type abt (CUDA_R_32F or CUDA_R_16BF) on handle h; C is fp32.
 * k = 0 (C = beta C) runs on the default stream: only with h = cuda_blas. */
static void cuda_gemm_rm(cublasHandle_t h, const char *op, bool trans_a, bool trans_b, int m, int n,
                         int k, float alpha, const void *A, int lda, const void *B, int ldb,
                         cudaDataType abt, float beta, float *C, int ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) { /* an empty sum: C = beta C (C not read when beta = 0, as in BLAS) */
        MT_CHECK(h == cuda_blas, "cuda %s: an empty GEMM on a GEMM lane", op);
        if (beta == 0.0f) {
            cudaCheck(op, cudaMemset2DAsync(C, sizeof(float) * (size_t)ldc, 0,
                                            sizeof(float) * (size_t)n, (size_t)m));
        } else if (beta != 1.0f) { /* in place: column-major view of C is (n,m), ld ldc */
            const float zero = 0.0f;
            cublasCheck(op, cublasSgeam(cuda_blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, &beta, C, ldc,
                                        &zero, C, ldc, C, ldc));
        }
        return;
    }
    cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(op, cublasGemmEx(h, tb, ta, n, m, k, &alpha, B, abt, ldb, A, abt, lda, &beta, C,
                                 CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void cuda_sgemm_rm(const char *op, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C,
                   int ldc) {
    cuda_gemm_rm(cuda_blas, op, trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, CUDA_R_32F, beta,
                 C, ldc);
}

/* The element distance b - a, when a whole number of elements of `elem` bytes. */
static bool cuda_elem_delta(const void *a, const void *b, size_t elem, long long *d) {
    const long long bytes = (long long)((const char *)b - (const char *)a);
    *d = bytes / (long long)elem;
    return bytes % (long long)elem == 0;
}

/* cuda_gemm_rm_pair on handle h */
static void cuda_gemm_rm_pair_on(cublasHandle_t h, const char *op, bool bf16, bool trans_a,
                                 bool trans_b, int m, int n, int k, float alpha, const void *A0,
                                 const void *A1, int lda, const void *B0, const void *B1, int ldb,
                                 float beta, float *C0, float *C1, int ldc) {
    const cudaDataType abt = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const size_t elem = bf16 ? 2 : 4;
    long long da, db, dc;
    /* one call writes both outputs at once on a GPU: only when C1 starts past C0's last element
     * (C0 spans (m-1) ldc + n floats); overlapping or identical outputs take two calls */
    const bool one = m > 0 && n > 0 && k > 0 && cuda_elem_delta(A0, A1, elem, &da) &&
                     cuda_elem_delta(B0, B1, elem, &db) && cuda_elem_delta(C0, C1, 4, &dc) &&
                     da >= 0 && db >= 0 && dc >= (long long)(m - 1) * ldc + n;
    if (!one) {
        cuda_gemm_rm(h, op, trans_a, trans_b, m, n, k, alpha, A0, lda, B0, ldb, abt, beta, C0, ldc);
        cuda_gemm_rm(h, op, trans_a, trans_b, m, n, k, alpha, A1, lda, B1, ldb, abt, beta, C1, ldc);
        return;
    }
    cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(op, cublasGemmStridedBatchedEx(h, tb, ta, n, m, k, &alpha, B0, abt, ldb, db, A0,
                                               abt, lda, da, &beta, C0, CUDA_R_32F, ldc, dc, 2,
                                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void cuda_gemm_rm_pair(const char *op, bool bf16, bool trans_a, bool trans_b, int m, int n, int k,
                       float alpha, const void *A0, const void *A1, int lda, const void *B0,
                       const void *B1, int ldb, float beta, float *C0, float *C1, int ldc) {
    cuda_gemm_rm_pair_on(cuda_blas, op, bf16, trans_a, trans_b, m, n, k, alpha, A0, A1, lda, B0, B1,
                         ldb, beta, C0, C1, ldc);
}

void cuda_gemm_bf16_rm(const char *op, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                       const __nv_bfloat16 *A, int lda, const __nv_bfloat16 *B, int ldb, float beta,
                       float *C, int ldc) {
    cuda_gemm_rm(cuda_blas, op, trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, CUDA_R_16BF, beta,
                 C, ldc);
}

/* ---- GEMM lanes ---- */

static int lanes_want = -1; /* -1: MT_CUDA_GEMM_LANES not read yet */
static int lanes_open = 0;  /* lanes of the open fork; 0: none open */
static int lanes_made = 0;  /* lanes with a stream, handle and event so far */
static cudaStream_t lane_stream[CUDA_LANES_MAX];
static cublasHandle_t lane_blas[CUDA_LANES_MAX];
static cudaEvent_t lane_fork, lane_join[CUDA_LANES_MAX];

void cuda_lanes_set(int lanes) {
    MT_CHECK(lanes >= 0 && lanes <= CUDA_LANES_MAX && lanes_open == 0,
             "cuda GEMM lanes: %d lanes (0..%d), not inside a fork", lanes, CUDA_LANES_MAX);
    lanes_want = lanes > 0 ? lanes : -1;
}

int cuda_lanes_fork(const char *op) {
    MT_CHECK(lanes_open == 0, "cuda %s: GEMM lanes forked while a fork is open", op);
    if (lanes_want < 0) {
        const char *v = getenv("MT_CUDA_GEMM_LANES");
        char *end = NULL;
        const long n = v ? strtol(v, &end, 10) : CUDA_LANES_DEFAULT;
        MT_CHECK(!v || (*v && !*end && n >= 1 && n <= CUDA_LANES_MAX),
                 "MT_CUDA_GEMM_LANES=%s: expected a whole number of lanes from 1 to %d", v,
                 CUDA_LANES_MAX);
        lanes_want = (int)n;
    }
    lanes_open = lanes_want;
    if (lanes_open == 1) return 1; /* cuda_blas on the default stream: nothing to fork */
    for (; lanes_made < lanes_open; lanes_made++) {
        const int i = lanes_made;
        if (!lane_fork) cudaCheck(op, cudaEventCreateWithFlags(&lane_fork, cudaEventDisableTiming));
        cudaCheck(op, cudaStreamCreateWithFlags(&lane_stream[i], cudaStreamNonBlocking));
        cudaCheck(op, cudaEventCreateWithFlags(&lane_join[i], cudaEventDisableTiming));
        cublasCheck(op, cublasCreate(&lane_blas[i]));
        cublasCheck(op, cublasSetMathMode(lane_blas[i], CUBLAS_DEFAULT_MATH)); /* as cuda_blas */
        cublasCheck(op, cublasSetStream(lane_blas[i], lane_stream[i]));
    }
    cudaCheck(op, cudaEventRecord(lane_fork, 0));
    for (int i = 0; i < lanes_open; i++)
        cudaCheck(op, cudaStreamWaitEvent(lane_stream[i], lane_fork, 0));
    return lanes_open;
}

void cuda_lanes_join(const char *op) {
    MT_CHECK(lanes_open > 0, "cuda %s: GEMM lanes joined without a fork", op);
    if (lanes_open > 1)
        for (int i = 0; i < lanes_open; i++) {
            cudaCheck(op, cudaEventRecord(lane_join[i], lane_stream[i]));
            cudaCheck(op, cudaStreamWaitEvent(0, lane_join[i], 0));
        }
    lanes_open = 0;
}

void cuda_gemm_rm_lane(int lane, const char *op, bool bf16, bool trans_a, bool trans_b, int m,
                       int n, int k, float alpha, const void *A0, const void *A1, int lda,
                       const void *B0, const void *B1, int ldb, float beta, float *C0, float *C1,
                       int ldc) {
    MT_CHECK(lane >= 0 && lane < lanes_open && m > 0 && n > 0 && k > 0,
             "cuda %s: GEMM lane %d of %d open, sizes %d x %d x %d (lanes take non-empty GEMMs)",
             op, lane, lanes_open, m, n, k);
    cublasHandle_t h = lanes_open == 1 ? cuda_blas : lane_blas[lane];
    if (A1)
        cuda_gemm_rm_pair_on(h, op, bf16, trans_a, trans_b, m, n, k, alpha, A0, A1, lda, B0, B1,
                             ldb, beta, C0, C1, ldc);
    else
        cuda_gemm_rm(h, op, trans_a, trans_b, m, n, k, alpha, A0, lda, B0, ldb,
                     bf16 ? CUDA_R_16BF : CUDA_R_32F, beta, C0, ldc);
}

/* ---- phase profiler ---- */

#define CUDA_PROF_MAX 8192
static bool prof_on = false;
static int prof_n = 0, prof_open = -1;
static int prof_slot[CUDA_PROF_MAX];
static cudaEvent_t prof_ev[CUDA_PROF_MAX][2];

void cuda_prof_enable(bool on) {
    if (on && !prof_ev[0][0])
        for (int i = 0; i < CUDA_PROF_MAX; i++)
            for (int j = 0; j < 2; j++) cudaCheck("profiler", cudaEventCreate(&prof_ev[i][j]));
    prof_on = on;
    prof_n = 0;
    prof_open = -1;
}

void cuda_prof_begin(int slot) {
    if (!prof_on) return;
    MT_CHECK(prof_open < 0 && prof_n < CUDA_PROF_MAX,
             "cuda profiler: region %d opened inside region %d or more than %d regions", slot,
             prof_open, CUDA_PROF_MAX);
    prof_slot[prof_n] = slot;
    prof_open = slot;
    cudaCheck("profiler", cudaEventRecord(prof_ev[prof_n][0]));
}

void cuda_prof_end(int slot) {
    if (!prof_on) return;
    MT_CHECK(prof_open == slot, "cuda profiler: closing region %d, open is %d", slot, prof_open);
    cudaCheck("profiler", cudaEventRecord(prof_ev[prof_n][1]));
    prof_n++;
    prof_open = -1;
}

void cuda_prof_read(double *ms) {
    cudaCheck("profiler", cudaDeviceSynchronize());
    for (int i = 0; i < prof_n; i++) {
        float t = 0;
        cudaCheck("profiler", cudaEventElapsedTime(&t, prof_ev[i][0], prof_ev[i][1]));
        ms[prof_slot[i]] += t;
    }
    prof_n = 0;
}

/* ---- the backend table ---- */

static void *cuda_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is not sticky: let the caller report it */
        return NULL;
    }
    return p;
}
static void cuda_free(void *p) { cudaCheck("free", cudaFree(p)); }
/* page-locked: copies from and to it run at full PCIe speed, and a copy to the device from it
 * has finished when cudaMemcpy returns */
static void *cuda_host_alloc(size_t bytes) {
    void *p = NULL;
    cudaCheck("host_alloc", cudaMallocHost(&p, bytes ? bytes : 256));
    return p;
}
static void cuda_host_free(void *p) { cudaCheck("host_free", cudaFreeHost(p)); }
static size_t cuda_mem_available(void) {
    size_t free_b = 0, total_b = 0;
    cudaCheck("mem_available", cudaMemGetInfo(&free_b, &total_b));
    return free_b;
}
static void cuda_zero(void *p, size_t bytes) {
    if (bytes) cudaCheck("zero", cudaMemsetAsync(p, 0, bytes));
}
/* cudaMemcpy from pageable host memory returns once the source may be reused, and it is
 * ordered after every kernel queued before it on the default stream. */
static void cuda_to_device(void *dst, const void *src_host, size_t bytes) {
    if (bytes) cudaCheck("to_device", cudaMemcpy(dst, src_host, bytes, cudaMemcpyHostToDevice));
}
static void cuda_to_host(void *dst_host, const void *src, size_t bytes) {
    if (bytes) cudaCheck("to_host", cudaMemcpy(dst_host, src, bytes, cudaMemcpyDeviceToHost));
}
/* device to device: queued on the default stream, no host synchronisation */
static void cuda_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) cudaCheck("copy", cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}
static void cuda_sync(void) { cudaCheck("sync", cudaDeviceSynchronize()); }
static int cuda_thread_device(void) {
    int dev = 0;
    cudaCheck("thread_device", cudaGetDevice(&dev));
    return dev;
}
static void cuda_thread_bind(int device) { cudaCheck("thread_bind", cudaSetDevice(device)); }

static mt_backend cuda_backend;
static int cuda_probed = 0; /* 0: not yet; 1: usable; -1: no usable device */

extern "C" const mt_backend *mt_cuda_backend_probe(void) {
    if (cuda_probed) return cuda_probed > 0 ? &cuda_backend : NULL;
    cuda_probed = -1;
    bool verbose = getenv("MT_CUDA_VERBOSE") && atoi(getenv("MT_CUDA_VERBOSE"));
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        if (verbose)
            fprintf(stderr, "mt cuda: no usable device (cudaGetDeviceCount: %s, count %d)\n",
                    cudaGetErrorString(e), e == cudaSuccess ? count : 0);
        (void)cudaGetLastError();
        return NULL;
    }
    int dev = 0;
    cudaDeviceProp prop;
    cudaCheck("probe", cudaGetDevice(&dev));
    cudaCheck("probe", cudaGetDeviceProperties(&prop, dev));
    if (prop.major < 8) { /* built for sm_80 and sm_90 (+ PTX): no code for older chips */
        fprintf(stderr, "mt cuda: device %d (%s) has compute capability %d.%d < 8.0; not used\n",
                dev, prop.name, prop.major, prop.minor);
        return NULL;
    }
    cublasCheck("probe", cublasCreate(&cuda_blas));
    cublasCheck("probe", cublasSetMathMode(cuda_blas, CUBLAS_DEFAULT_MATH)); /* fp32: no TF32 */
    cudaCheck("probe", cudaMalloc(&cuda_err_flag, sizeof(*cuda_err_flag)));
    cuda_sync_each = getenv("MT_CUDA_SYNC") && atoi(getenv("MT_CUDA_SYNC"));
    if (verbose)
        fprintf(stderr, "mt cuda: device %d: %s, compute capability %d.%d, %d SMs, %.1f GiB%s\n",
                dev, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                (double)prop.totalGlobalMem / (1 << 30),
                cuda_sync_each ? ", synchronising after every kernel (MT_CUDA_SYNC)" : "");

    memset(&cuda_backend, 0, sizeof(cuda_backend));
    cuda_backend.name = "cuda";
    cuda_backend.dev = MT_CUDA;
    cuda_backend.alloc = cuda_alloc;
    cuda_backend.free = cuda_free;
    cuda_backend.zero = cuda_zero;
    cuda_backend.to_device = cuda_to_device;
    cuda_backend.to_host = cuda_to_host;
    cuda_backend.copy = cuda_copy;
    cuda_backend.host_alloc = cuda_host_alloc;
    cuda_backend.host_free = cuda_host_free;
    cuda_backend.mem_available = cuda_mem_available;
    cuda_backend.sync = cuda_sync;
    /* the fused loss: 1 GiB of fp32 logits per chunk (R = 1341 rows at V = 200,064). At the
     * CPU's 64 MiB (R = 83) each chunk's logits GEMM would read all of w (2.5 GB in bf16) for
     * 83 rows, and its dw GEMM (beta = 1) read and write all of dw (9.8 GB): memory-bound far
     * below the tensor cores' rate, 50 times per micro-step at 4096 labelled tokens */
    cuda_backend.logits_chunk_bytes = (size_t)1 << 30;
#define MT_OP(E, name)                                                                             \
    cuda_backend.ops[MT_OP_##E].fwd = cuda_##name##_fwd_node;                                      \
    cuda_backend.ops[MT_OP_##E].bwd = cuda_##name##_bwd_node;
#include "../../autograd/ops.def"
#undef MT_OP
    cuda_backend.vec_add = cuda_vec_add;
    cuda_backend.vec_stats = cuda_vec_stats;
    cuda_backend.adamw = cuda_adamw;
    cuda_backend.vec_to_bf16 = cuda_vec_to_bf16;
    cuda_backend.vec_from_bf16 = cuda_vec_from_bf16;
    cuda_backend.bf16_shadow = cuda_bf16_shadow;
    cuda_backend.thread_device = cuda_thread_device;
    cuda_backend.thread_bind = cuda_thread_bind;
    cuda_backend.decode.attention = cuda_attention_decode;
    cuda_backend.decode.lightning_state = cuda_lightning_state;
    cuda_backend.decode.lightning_step = cuda_lightning_decode_step;
    cuda_backend.decode.msa_select = cuda_msa_select_decode;
    cuda_backend.decode.msa_select_work = cuda_msa_select_decode_work;
    cuda_backend.decode.msa_attention = cuda_msa_attention_decode;
    cuda_probed = 1;
    return &cuda_backend;
}
