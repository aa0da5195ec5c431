/* cuda_runtime.h (emulator): the subset of the CUDA runtime and device built-ins that
 * kernels/cuda use, implemented on the CPU, so the kernels' logic (indexing, node
 * semantics, launch geometry, reductions, the cuBLAS row-major mapping) runs in CI on machines
 * without a GPU: tests/gpu/gpu.cmake compiles each of their .cu files as C++ against these headers
 * (after turning `k<<<grid, block>>>(args)` into `emu_launcher(k, grid, block)(args)`) and runs the
 * GPU parity tests through it (ctest op_cuda_emu_*).
 *
 * Model: one launch runs its blocks one after another; the threads of a block are fibers
 * (ucontext) switched at warp shuffles and __syncthreads, so warp- and block-level cooperation
 * behaves as on the GPU (exited threads release barriers; a shuffle from an exited lane, a
 * deadlocked barrier or an invalid launch configuration is an error). Device memory is host
 * memory. Strict mode (MT_EMU_STRICT=1, emu.cpp) reverses the schedule and poisons shared and
 * fresh device memory, so a missing barrier or a read of uninitialised memory shows. What this
 * cannot show: races that need true concurrency or the memory model, performance, resource
 * limits (registers, shared memory), and the last bits of device math (host libm is used). It
 * is a test device, not a GPU: docs/cuda.md. */
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
/* Blocks run one at a time, so a function-local static is the block's shared memory. The
 * translation of a CUDA source (tests/gpu/gpu.cmake) turns `__shared__ T name...;` into
 * `static T name...;` plus a once-only emu_shared_register(&name, sizeof name), so strict mode
 * can poison all shared memory at each block start (emu.cpp); the macro covers the rest. */
#define __shared__ static
bool emu_shared_register(void *p, size_t bytes);

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x, y, z;
};
struct int2 {
    int x, y;
};
static inline int2 make_int2(int x, int y) { return int2{x, y}; }

/* ---- built-in variables of the running fiber ---- */
struct emu_thread_state {
    uint3 tid;
};
extern emu_thread_state *emu_current;
extern uint3 emu_block_idx;
extern dim3 emu_block_dim, emu_grid_dim;
#define threadIdx (emu_current->tid)
#define blockIdx  emu_block_idx
#define blockDim  emu_block_dim
#define gridDim   emu_grid_dim

/* ---- synchronisation and warp shuffles ---- */
/* The call's source line names the barrier: strict mode checks all threads meet at one. */
void emu_syncthreads(const char *file, int line);
#define __syncthreads() emu_syncthreads(__FILE__, __LINE__)
/* A warp shuffle: every lane of the warp publishes bits and gets those of lane src_lane (0..31)
 * of its warp; a rendezvous of the warp. */
uint64_t emu_shfl_bits(uint64_t bits, int src_lane);
template <typename T> static inline T emu_shfl(T v, int src_lane) {
    static_assert(sizeof(T) <= 8, "emulated shuffle of a type wider than 8 bytes");
    uint64_t bits = 0;
    __builtin_memcpy(&bits, &v, sizeof(T));
    bits = emu_shfl_bits(bits, src_lane);
    T r;
    __builtin_memcpy(&r, &bits, sizeof(T));
    return r;
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
    (void)mask;
    return emu_shfl(v, (int)(threadIdx.x % 32) ^ lane_mask);
}
template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src_lane) {
    (void)mask;
    return emu_shfl(v, src_lane & 31);
}
/* the value of lane - delta; lanes below delta keep their own (width 32) */
template <typename T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta) {
    (void)mask;
    const int lane = (int)(threadIdx.x % 32);
    return emu_shfl(v, lane >= (int)delta ? lane - (int)delta : lane);
}

/* A warp barrier: a shuffle with the lane itself (the shuffle is a rendezvous of the warp). */
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    (void)mask;
    (void)emu_shfl_bits(0, (int)(threadIdx.x % 32));
}

/* bit l set when lane l's predicate is non-zero: one rendezvous of the warp (every lane of
 * it takes part; one that has exited is an error) */
unsigned emu_ballot(int pred);
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    (void)mask;
    return emu_ballot(pred);
}
static inline int __popc(unsigned v) { return __builtin_popcount(v); }

/* Fibers of one block never run at the same time: plain read-modify-write is atomic here. */
static inline float atomicAdd(float *p, float v) {
    float old = *p;
    *p = old + v;
    return old;
}
static inline int atomicAdd(int *p, int v) {
    int old = *p;
    *p = old + v;
    return old;
}
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v) {
    unsigned long long old = *p;
    if (v < old) *p = v;
    return old;
}

static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

/* ---- runtime API ---- */
typedef enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInsufficientDriver = 35,
    cudaErrorInvalidDevice = 101,
    cudaErrorNotReady = 600,
    cudaErrorLaunchFailure = 719
} cudaError_t;
typedef enum {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;
struct cudaUUID_t {
    char bytes[16];
};
struct cudaDeviceProp {
    char name[256];
    cudaUUID_t uuid; /* all zero: every rank shares the one emulated device */
    int major, minor, multiProcessorCount;
    size_t totalGlobalMem;
};
typedef struct emu_event *cudaEvent_t;
typedef struct emu_stream *cudaStream_t;

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
/* MT_CUDA_EMU_DEVICES=N (1 to 8, default 1) devices, sharing host memory. The current device
 * is per host thread, as in the CUDA runtime (cudaSetDevice; 0 until set), and each cudaMalloc
 * block belongs to the device current at its allocation: a copy or memset that touches a block
 * of another device than the calling thread's is refused (cudaErrorInvalidDevice, with a
 * message). Stricter than a GPU, where it runs, but on the calling thread's device: unordered
 * with the owner's default stream, and with a context on the wrong GPU. */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int dev);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaMalloc(void **p, size_t bytes);
template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t bytes) {
    return cudaMalloc((void **)p, bytes);
}
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
/* free = the emulated device's size (MT_CUDA_EMU_MEM_MB, else 16 GiB) less the live cudaMalloc
 * blocks; cudaMalloc itself does not enforce it */
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s = 0);
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t s = 0);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
/* cudaErrorNotReady while the work before an event recorded on a created stream is queued;
 * safe from another host thread (the NCCL watchdog) */
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
/* Streams (emu_nccl.cpp): the default stream runs everything at once; a
 * created stream queues the emulated NCCL collectives and the GEMMs of a cuBLAS handle bound to
 * it until the default stream waits on an event recorded there, the stream is synchronised or
 * the device is (tests/cuda_emu/nccl.h, emu_blas.cpp). */
#define cudaStreamNonBlocking  0x01
#define cudaEventDisableTiming 0x02
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);

/* ---- launches ---- */
/* Runs fn once per thread of every block; records cudaErrorInvalidConfiguration for an empty
 * or oversized grid or block (as a real launch would) and runs nothing then. */
void emu_run(dim3 grid, dim3 block, const std::function<void()> &fn);

template <typename... P> struct emu_launch {
    void (*kernel)(P...);
    dim3 grid, block;
    /* the kernel's own parameter types, so arguments convert as in a real launch */
    void operator()(P... args) const {
        emu_run(grid, block, [&]() { kernel(args...); });
    }
};
template <typename... P>
static inline emu_launch<P...> emu_launcher(void (*kernel)(P...), dim3 grid, dim3 block) {
    return emu_launch<P...>{kernel, grid, block};
}
