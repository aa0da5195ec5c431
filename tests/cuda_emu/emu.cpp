/* emu.cpp: the CPU emulator behind tests/cuda_emu/cuda_runtime.h (see there for what it models
 * and what it cannot show; cuBLAS is emu_blas.cpp, NCCL and created streams emu_nccl.cpp).
 * Threads of a block are fibers on the calling thread, scheduled round-robin (strict mode:
 * highest first) and switched only at barriers (warp shuffles, __syncthreads), so a run is
 * deterministic. On x86-64 a fiber switch is a few instructions (emu_switch below: the
 * callee-saved registers and the stack pointer); elsewhere swapcontext, which also makes a
 * signal-mask system call per switch. The AddressSanitizer fiber hooks are called when the
 * emulator is built with ASan, so sanitised builds follow the stack switches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <vector>

#include "cuda_runtime.h"
#include "emu_internal.h"
#include "emu_schedule.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
#define EMU_FAST_SWITCH 1
/* emu_switch(save, to): pushes the System V callee-saved registers, stores the stack pointer
 * in *save, loads `to` and pops the registers saved there (the control words in MXCSR and the
 * x87 FPU are never changed by the kernels, so they need no saving). */
extern "C" void emu_switch(void **save_sp, void *new_sp);
asm(".text\n"
    ".globl emu_switch\n"
    ".type emu_switch,@function\n"
    "emu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size emu_switch,.-emu_switch\n");
#endif

emu_thread_state *emu_current = nullptr;
uint3 emu_block_idx = {0, 0, 0};
dim3 emu_block_dim, emu_grid_dim;

namespace {

/* Per fiber; kernels keep small frames. Small also because ASan unpoisons the whole target
 * stack at every switch. */
const size_t EMU_STACK = (size_t)64 << 10;
const int EMU_MAX_THREADS = 1024;
/* Stacks a page and a cache line apart beyond their size: a round over a block's threads
 * touches the top of every stack, and tops a power of two apart share a few cache sets (malloc's
 * 64 KiB + 16 apart measured 6 % slower on an emulated training run than this). */
const size_t EMU_STACK_STRIDE = EMU_STACK + 4096 + 64;

struct group { /* a barrier over the live threads of a warp or of the block */
    int live, arrived;
    uint64_t gen;
};
/* barriers opened so far, any group: only an opening makes a blocked thread runnable again */
uint64_t n_opened = 0;

/* One cache line a fiber (64 bytes on the emu_switch path): a round over the block's threads
 * reads each one's state, and the 1 KiB ucontext_t in every fiber had spread them over 17 lines
 * (an emulated training run 8 % slower); the swapcontext path keeps its context apart. */
struct alignas(64) fiber {
    emu_thread_state st;
    unsigned shuffles; /* shuffles this thread made: which half of slots the next one uses */
    void *sp;          /* emu_switch path: the saved stack pointer */
    char *stack;
    group *waiting; /* the barrier it waits at, or NULL */
    uint64_t wait_gen;
    void *fake_stack; /* ASan bookkeeping */
    bool done;
#ifndef EMU_FAST_SWITCH
    ucontext_t ctx; /* swapcontext path */
#endif
};

/* The fibers' stacks: one mapping of EMU_MAX_THREADS stacks (EMU_STACK_STRIDE apart), its
 * pages touched as used. */
struct fiber_pool : std::vector<fiber> {
    char *stacks = nullptr;
    char *stack_of(size_t i) {
        if (!stacks) {
            const size_t bytes = EMU_STACK_STRIDE * (size_t)EMU_MAX_THREADS;
            void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) return nullptr;
            stacks = (char *)p;
        }
        return stacks + i * EMU_STACK_STRIDE;
    }
    ~fiber_pool() { /* at exit */
        if (stacks) munmap(stacks, EMU_STACK_STRIDE * (size_t)EMU_MAX_THREADS);
    }
};
fiber_pool fibers;
std::vector<group> warps;
group block_group;
#ifdef EMU_FAST_SWITCH
void *sched_sp = nullptr;
#else
ucontext_t sched_ctx;
#endif
fiber *cur = nullptr;
int n_threads = 0;
/* a shuffle's values, in alternate halves (emu_shfl_bits) */
uint64_t slots[2][EMU_MAX_THREADS];
const std::function<void()> *kernel_fn = nullptr;
cudaError_t last_error = cudaSuccess;
#ifdef EMU_ASAN
const void *sched_stack_bottom = nullptr;
size_t sched_stack_size = 0;
#endif

[[noreturn]] void emu_die(const char *msg) {
    fprintf(stderr, "cuda emulator: %s (block %u,%u,%u thread %u)\n", msg, emu_block_idx.x,
            emu_block_idx.y, emu_block_idx.z, cur ? cur->st.tid.x : 0u);
    abort();
}

/* ---- stack switches, with the ASan fiber protocol ---- */

void switch_raw_to_fiber(fiber *f) {
#ifdef EMU_FAST_SWITCH
    emu_switch(&sched_sp, f->sp);
#else
    swapcontext(&sched_ctx, &f->ctx);
#endif
}

void switch_raw_to_scheduler(fiber *f) {
#ifdef EMU_FAST_SWITCH
    emu_switch(&f->sp, sched_sp);
#else
    swapcontext(&f->ctx, &sched_ctx);
#endif
}

void switch_raw_between(fiber *from, fiber *to) {
#ifdef EMU_FAST_SWITCH
    emu_switch(&from->sp, to->sp);
#else
    swapcontext(&from->ctx, &to->ctx);
#endif
}

/* whether the fiber now starting or resuming was switched to by the scheduler (ASan: only then is
 * the stack it came from the scheduler's) */
bool from_scheduler = false;

void switch_to_fiber(fiber *f) {
    cur = f;
    emu_current = &f->st;
    from_scheduler = true;
#ifdef EMU_ASAN
    void *save = nullptr;
    __sanitizer_start_switch_fiber(&save, f->stack, EMU_STACK);
    switch_raw_to_fiber(f);
    __sanitizer_finish_switch_fiber(save, nullptr, nullptr);
#else
    switch_raw_to_fiber(f);
#endif
    cur = nullptr;
    emu_current = nullptr;
}

/* from one fiber straight to another (final: `from` has finished and is never resumed) */
void switch_between(fiber *from, fiber *to, bool final) {
    cur = to;
    emu_current = &to->st;
    from_scheduler = false;
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(final ? nullptr : &from->fake_stack, to->stack, EMU_STACK);
    switch_raw_between(from, to);
    __sanitizer_finish_switch_fiber(from->fake_stack, nullptr, nullptr);
#else
    (void) final;
    switch_raw_between(from, to);
#endif
}

/* the block's last thread, finished: back to run_block, never to be resumed */
void switch_to_scheduler(fiber *f) {
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(nullptr, sched_stack_bottom, sched_stack_size);
#endif
    switch_raw_to_scheduler(f);
}

/* Strict mode (MT_EMU_STRICT=1): the grid's blocks run in reverse order and the block's highest
 * runnable thread always runs next (also after it opens a barrier), shared memory is poisoned
 * at every block start, cudaMalloc memory at allocation, and the threads meeting at a
 * __syncthreads must all come from the same call (its source line). A kernel that is
 * correct on a GPU computes the same either way (floating-point atomics aside: their order
 * changes); one that reads another thread's write without a barrier between them, relies on
 * zeroed or left-over shared or device memory, or diverges at a barrier, gets other values or
 * stops here. The op_cuda_emu_strict_* tests run every case in it. */
bool strict_mode() {
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("MT_EMU_STRICT");
        on = v && atoi(v) ? 1 : 0;
    }
    return on != 0;
}

/* Which thread runs next. The round robin (every mode but strict without a seed): passes over
 * thread_order, each runnable thread in turn running until it blocks at a barrier or finishes.
 * Strict order: always the highest runnable thread, so the last warp runs as far as it can
 * (through its warp barriers) before a lower one moves: its writes land before the lower threads'
 * reads of the same barrier interval. The threads above the last one chosen stay blocked or done
 * until a barrier opens, so its search goes on downwards from there until then.
 * A thread that stops hands over straight to the next one, and only the last returns to the
 * scheduler (run_block): one stack switch per thread and barrier instead of two. */
std::vector<int> thread_order; /* 0..n-1, or a drawn permutation (emu_schedule_seed) */
bool order_strict = false;     /* this block runs in strict order */
int pos = -1;           /* the running thread's position: in thread_order, or its index (strict) */
bool progress = false;  /* round robin: a thread ran in this pass */
uint64_t opened_at = 0; /* strict: n_opened when the running thread was chosen */
int remaining = 0;      /* threads not finished */

bool runnable(const fiber &f) { return !f.done && !(f.waiting && f.waiting->gen == f.wait_gen); }

/* the next thread to run; NULL when every one finished */
fiber *next_runnable() {
    if (order_strict) {
        if (remaining == 0) return nullptr;
        if (n_opened != opened_at) pos = n_threads - 1;
        while (pos >= 0 && !runnable(fibers[pos])) pos--;
        if (pos < 0) emu_die("deadlock: threads wait at a barrier the others never reach");
        opened_at = n_opened;
        return &fibers[pos];
    }
    for (;;) { /* after pos in this pass, or in the next */
        for (int k = pos + 1; k < n_threads; k++) {
            fiber &f = fibers[thread_order[k]];
            if (!runnable(f)) continue;
            pos = k;
            progress = true;
            return &f;
        }
        if (remaining == 0) return nullptr;
        if (!progress) emu_die("deadlock: threads wait at a barrier the others never reach");
        pos = -1;
        progress = false;
    }
}

/* the thread f stops (final: it finished): the next one runs, or the scheduler after the last */
void hand_over(fiber *f, bool final) {
    fiber *next = next_runnable();
    if (!next) /* only once every thread finished: f too */
        switch_to_scheduler(f);
    else if (next != f)
        switch_between(f, next, final);
}

/* A finished thread leaves its barriers; a barrier whose other live threads all wait opens. */
void group_leave(group &g) {
    g.live--;
    if (g.live > 0 && g.arrived == g.live) {
        g.arrived = 0;
        g.gen++;
        n_opened++;
    }
}

void group_wait(group &g) {
    fiber *f = cur;
    if (!f) emu_die("a barrier outside a kernel");
    uint64_t gen = g.gen;
    if (++g.arrived == g.live) { /* the last to arrive opens it and runs on */
        g.arrived = 0;
        g.gen++;
        n_opened++;
        if (strict_mode()) hand_over(f, false); /* strict: the highest runs on */
        return;
    }
    f->waiting = &g;
    f->wait_gen = gen;
    while (g.gen == gen) hand_over(f, false);
    f->waiting = nullptr;
}

void fiber_entry() {
#ifdef EMU_ASAN
    if (from_scheduler)
        __sanitizer_finish_switch_fiber(nullptr, &sched_stack_bottom, &sched_stack_size);
    else
        __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    fiber *f = cur;
    (*kernel_fn)();
    f->done = true;
    group_leave(warps[f->st.tid.x / 32]);
    group_leave(block_group);
    remaining--;
    hand_over(f, true);
    emu_die("a finished fiber was resumed");
}

/* Not inlined: getcontext "returns twice" for the compiler, which would otherwise warn that
 * the caller's loop variable might be clobbered. */
__attribute__((noinline)) void fiber_init(fiber &f, unsigned tid) {
    f.st.tid = uint3{tid, 0, 0};
    f.done = false;
    f.waiting = nullptr;
    f.fake_stack = nullptr;
    f.shuffles = 0;
#ifdef EMU_FAST_SWITCH
    /* A stack that emu_switch "returns" into fiber_entry from: six register slots, then the
     * entry address for its ret, then a null return address for fiber_entry itself (which
     * never returns), so fiber_entry starts with the stack aligned as after a call. */
    void **sp = (void **)(((uintptr_t)f.stack + EMU_STACK) & ~(uintptr_t)15);
    *--sp = nullptr;
    *--sp = reinterpret_cast<void *>(&fiber_entry);
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = EMU_STACK;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_entry, 0);
#endif
}

/* the __shared__ variables met so far (emu_shared_register) */
std::vector<std::pair<void *, size_t>> shared_vars;

void shared_poison() {
    for (auto &v : shared_vars) memset(v.first, 0xff, v.second);
}

/* emu_schedule_seed (emu_schedule.h): 0 runs the mode's own order; another seed runs each
 * launch's blocks in a permutation drawn from (seed, launch number) and each block's threads
 * round-robin in a permutation drawn after it, so a kernel whose result depends on the order
 * of its blocks or threads (floating-point atomics) gives other bits under another seed. */
uint64_t sched_seed = 0, sched_state = 0;

uint64_t sched_next() { /* splitmix64 */
    uint64_t z = (sched_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* order[0..n) = 0..n-1, shuffled (Fisher-Yates) when a seed is set */
template <typename T> void sched_order(std::vector<T> &order, size_t n) {
    order.resize(n);
    for (size_t i = 0; i < n; i++) order[i] = (T)i;
    if (!sched_seed) return;
    for (size_t i = n; i > 1; i--) std::swap(order[i - 1], order[sched_next() % i]);
}

/* the __syncthreads the threads now waiting at the block barrier called */
const char *barrier_file = "";
int barrier_line = 0;

void run_block() {
    const bool strict = strict_mode();
    if (strict) shared_poison();
    for (int i = 0; i < n_threads; i++) fiber_init(fibers[i], (unsigned)i);
    int n_warps = (n_threads + 31) / 32;
    warps.assign((size_t)n_warps, group{0, 0, 0});
    for (int w = 0; w < n_warps; w++)
        warps[w].live = n_threads - 32 * w < 32 ? n_threads - 32 * w : 32;
    block_group = group{n_threads, 0, 0};
    order_strict = strict && !sched_seed;
    if (!order_strict) sched_order(thread_order, (size_t)n_threads); /* 0..n-1 unless shuffled */
    pos = order_strict ? n_threads - 1 : -1;
    progress = false;
    opened_at = n_opened;
    remaining = n_threads;
    switch_to_fiber(next_runnable()); /* back when the last thread finished */
}

double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

} // namespace

struct emu_event {
    double ms = 0;
    uint64_t work = 0; /* recorded on the default stream after this much of its work, else 0 */
    cudaStream_t stream = nullptr; /* recorded on this created stream, else nullptr */
    /* records on a created stream and the last of them that ran there: pending while fewer */
    std::atomic<uint64_t> recorded{0}, reached{0};
};

/* The default stream's work so far (launches, copies, memsets, cuBLAS calls): strict mode checks
 * that a created stream waited for all of it before a collective or a cuBLAS call is queued
 * there (emu_nccl.cpp, emu_blas.cpp). */
static uint64_t default_work = 0;
uint64_t emu_default_work(void) { return default_work; }
void emu_default_work_add(void) { default_work++; }
uint64_t emu_event_work(cudaEvent_t e) { return e->work; }
cudaStream_t emu_event_stream(cudaEvent_t e) { return e->stream; }
bool emu_strict(void) { return strict_mode(); }

extern "C" void emu_schedule_seed(uint64_t seed) {
    sched_seed = seed;
    sched_state = seed;
}

bool emu_shared_register(void *p, size_t bytes) {
    shared_vars.push_back({p, bytes});
    if (strict_mode()) memset(p, 0xff, bytes); /* first reached: poison it for this block too */
    return true;
}

void emu_syncthreads(const char *file, int line) {
    if (strict_mode()) { /* every thread of a barrier comes from the same __syncthreads */
        if (block_group.arrived == 0) {
            barrier_file = file;
            barrier_line = line;
        } else if (line != barrier_line || strcmp(file, barrier_file) != 0) {
            fprintf(stderr, "cuda emulator: __syncthreads at %s:%d meets one at %s:%d\n", file,
                    line, barrier_file, barrier_line);
            emu_die("divergent __syncthreads: threads of the block wait at different calls");
        }
    }
    group_wait(block_group);
}

uint64_t emu_shfl_bits(uint64_t bits, int src_lane) {
    if (!cur) emu_die("a shuffle outside a kernel");
    const int t = (int)cur->st.tid.x, w = t / 32;
    const int partner = 32 * w + src_lane;
    if (partner >= n_threads) emu_die("a shuffle from a lane outside the block");
    /* One barrier per shuffle: the next shuffle writes the other half, and the one after it
     * this half again only after the next barrier, which every lane reaches after its read. */
    const unsigned n = ++cur->shuffles;
    uint64_t *half = slots[n & 1u];
    half[t] = bits;
    group_wait(warps[w]);
    /* the partner made this shuffle unless it exited before (it may have exited since) */
    if (fibers[partner].shuffles < n) emu_die("a shuffle from a lane that has exited");
    return half[partner];
}

unsigned emu_ballot(int pred) {
    if (!cur) emu_die("a ballot outside a kernel");
    const int t = (int)cur->st.tid.x, w = t / 32;
    if (32 * w + 32 > n_threads) emu_die("a ballot in a warp with lanes outside the block");
    const unsigned n = ++cur->shuffles; /* the shuffles' slots and their rule (above) */
    uint64_t *half = slots[n & 1u];
    half[t] = pred != 0;
    group_wait(warps[w]);
    unsigned bits = 0;
    for (int l = 0; l < 32; l++) {
        if (fibers[32 * w + l].shuffles < n) emu_die("a ballot with a lane that has exited");
        bits |= (unsigned)half[32 * w + l] << l;
    }
    return bits;
}

void emu_run(dim3 grid, dim3 block, const std::function<void()> &fn) {
    if (cur) emu_die("a launch from inside a kernel");
    const uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (threads == 0 || threads > (uint64_t)EMU_MAX_THREADS || block.y != 1 || block.z != 1 ||
        grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535u ||
        grid.z > 65535u) {
        if (block.y != 1 || block.z != 1)
            fprintf(stderr, "cuda emulator: 2-D blocks unsupported\n");
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    n_threads = (int)threads;
    while ((int)fibers.size() < n_threads) {
        fiber f = {};
        f.stack = fibers.stack_of(fibers.size());
        if (!f.stack) emu_die("cannot allocate a fiber stack");
        fibers.push_back(f);
    }
    emu_block_dim = block;
    emu_grid_dim = grid;
    kernel_fn = &fn;
    default_work++;
    if (sched_seed) { /* every block once, in a drawn order */
        static std::vector<uint64_t> blocks;
        sched_order(blocks, (size_t)grid.x * grid.y * grid.z);
        for (uint64_t b : blocks) {
            emu_block_idx = uint3{(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                                  (unsigned)(b / grid.x / grid.y)};
            run_block();
        }
        kernel_fn = nullptr;
        return;
    }
    const bool rev = strict_mode(); /* blocks in reverse order too */
    for (unsigned zi = 0; zi < grid.z; zi++)
        for (unsigned yi = 0; yi < grid.y; yi++)
            for (unsigned xi = 0; xi < grid.x; xi++) {
                emu_block_idx = rev ? uint3{grid.x - 1 - xi, grid.y - 1 - yi, grid.z - 1 - zi}
                                    : uint3{xi, yi, zi};
                run_block();
            }
    kernel_fn = nullptr;
}

/* ---- runtime API ---- */

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
        return "cudaErrorInvalidConfiguration";
    case cudaErrorInsufficientDriver:
        return "cudaErrorInsufficientDriver";
    case cudaErrorInvalidDevice:
        return "cudaErrorInvalidDevice";
    case cudaErrorNotReady:
        return "cudaErrorNotReady";
    default:
        return "cudaErrorUnknown";
    }
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidConfiguration:
        return "invalid configuration argument (emulator)";
    case cudaErrorInsufficientDriver:
        return "no device (emulator, MT_CUDA_EMU_NO_DEVICE=1)";
    case cudaErrorInvalidDevice:
        return "memory of another device than the calling thread's current one (emulator)";
    case cudaErrorNotReady:
        return "device not ready (emulator)";
    default:
        return "error (emulator)";
    }
}
cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaGetDeviceCount(int *count) {
    const char *off = getenv("MT_CUDA_EMU_NO_DEVICE");
    if (off && atoi(off)) return cudaErrorInsufficientDriver; /* as on a machine without driver */
    const char *n = getenv("MT_CUDA_EMU_DEVICES");
    *count = n && atoi(n) >= 1 && atoi(n) <= 8 ? atoi(n) : 1;
    return cudaSuccess;
}
static thread_local int emu_device_current = 0; /* per host thread, as the runtime's */
cudaError_t cudaGetDevice(int *dev) {
    *dev = emu_device_current;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return e;
    if (dev < 0 || dev >= n) return cudaErrorInvalidDevice;
    emu_device_current = dev;
    return cudaSuccess;
}
/* the emulated device size: MT_CUDA_EMU_MEM_MB, else 16 GiB */
static size_t emu_total_mem(void) {
    const char *mb = getenv("MT_CUDA_EMU_MEM_MB");
    return mb && atoll(mb) > 0 ? (size_t)atoll(mb) << 20 : (size_t)16 << 30;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev) {
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "CPU emulator %d (tests/cuda_emu)", dev);
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->totalGlobalMem = emu_total_mem();
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { /* every stream's work, the created ones' too */
    emu_streams_run_all();
    return cudaGetLastError();
}
/* the live cudaMalloc blocks (start -> bytes, device): lets cuBLAS calls check that what must
 * be device memory is (emu_is_device), and copies that it is the calling thread's device's */
struct emu_block {
    size_t bytes;
    int dev;
};
static std::map<uintptr_t, emu_block> emu_device_blocks;
static const emu_block *emu_block_of(const void *p, size_t bytes) {
    auto it = emu_device_blocks.upper_bound((uintptr_t)p);
    if (it == emu_device_blocks.begin()) return nullptr;
    --it;
    return (uintptr_t)p + bytes <= it->first + it->second.bytes ? &it->second : nullptr;
}
bool emu_is_device(const void *p, size_t bytes) { return emu_block_of(p, bytes) != nullptr; }
/* cudaErrorInvalidDevice (and why, on stderr) when p is device memory of another device */
static cudaError_t emu_check_device(const char *api, const void *p) {
    const emu_block *b = emu_block_of(p, 1);
    if (!b || b->dev == emu_device_current) return cudaSuccess;
    fprintf(stderr,
            "cuda emulator: %s on memory of device %d from a host thread whose current device "
            "is %d (the current device is per thread: cudaSetDevice)\n",
            api, b->dev, emu_device_current);
    return cudaErrorInvalidDevice;
}
cudaError_t cudaMalloc(void **p, size_t bytes) {
    size_t rounded = (bytes + 255) / 256 * 256;
    *p = rounded ? aligned_alloc(256, rounded) : nullptr;
    if (*p) emu_device_blocks[(uintptr_t)*p] = emu_block{rounded, emu_device_current};
    if (*p && strict_mode()) memset(*p, 0xff, rounded); /* NaN floats, -1 ints: never zero */
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    size_t used = 0;
    for (auto &b : emu_device_blocks) used += b.second.bytes;
    *total_bytes = emu_total_mem();
    *free_bytes = used < *total_bytes ? *total_bytes - used : 0;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) { /* plain host memory (not device) */
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void *p) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    emu_device_blocks.erase((uintptr_t)p);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    (void)kind;
    cudaError_t e = emu_check_device("cudaMemcpy", dst);
    if (e == cudaSuccess) e = emu_check_device("cudaMemcpy", src);
    if (e != cudaSuccess) return e;
    default_work++;
    if (bytes) memcpy(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s) {
    const cudaError_t e = emu_check_device("cudaMemsetAsync", p);
    if (e != cudaSuccess) return e;
    default_work += s == nullptr;
    if (bytes) memset(p, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t s) {
    const cudaError_t e = emu_check_device("cudaMemset2DAsync", p);
    if (e != cudaSuccess) return e;
    default_work += s == nullptr;
    if (width > pitch) return cudaErrorInvalidValue;
    for (size_t r = 0; r < height; r++) memset((char *)p + r * pitch, value, width);
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = new emu_event();
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    e->work = s ? 0 : default_work;
    e->stream = s;
    e->ms = now_ms();
    if (s) { /* complete when the stream's queue reaches it */
        const uint64_t n = ++e->recorded;
        emu_stream_enqueue(s, [e, n]() {
            if (e->reached < n) e->reached = n;
        });
    } else {
        e->reached = e->recorded.load();
    }
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    return e->reached.load() < e->recorded.load() ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    (void)e;
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    *ms = (float)(b->ms - a->ms);
    return cudaSuccess;
}
