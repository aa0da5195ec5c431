/* attention_cudnn.cu: the attention op's bf16 mode on cuDNN's fused flash attention (the SDPA
 * graphs of attention_cudnn_graph.cu), with the project's flash kernels as the fallback.
 * Node layout as kernels/cuda/attention.cu: q (B,T,H,D), k, v (B,T,Hkv,D) fp32, seg (B,T) or
 * NULL, saved lse (B,H,T) fp32, fp[0] scale.
 *
 * Per call: q, k, v (and out, dout in the backward) are cast to bf16 copies in node scratch; the
 * plan runs on the legacy default stream (the handle's stream) with its workspace and the
 * graph's fp32 buffers carved from the same scratch (the arena: nothing is allocated per call);
 * then out = fp32(O) and dq, dk, dv += fp32(bf16 gradients). cuDNN's statistics are the natural
 * log-sum-exp of the scaled scores (max + log sum exp), the lse the node saves: the dense
 * graph writes them into the saved lse itself (same (B,H,T) layout), the ragged one in
 * token-major order (position, head), transposed here.
 *
 * Packed samples (seg): each run of equal ids in a row is one sequence of a ragged (THD) batch:
 * its ragged offset is its first position (times H D, Hkv D or H elements), its length both
 * seq_q and seq_kv, and the causal mask applies inside it; this is the op's meaning when a row's
 * ids increase at every boundary (data/sampler.c numbers a row's samples 0, 1, 2, ...); other
 * ids (one repeated after a gap) fall back. The sequence table is built on the device; the host
 * needs its length to pick the graph's batch: one 16-byte copy (a sync) per call with seg. The
 * batch is the next power of two (so a handful of plans serve every packing), the extra
 * sequences have length 0 (TransformerEngine's bucketing does the same), the buffers carry 256
 * zero positions past the last one. When every row is one sample the dense graph runs.
 *
 * Plans: built at the first call of a shape and kept (SDPA_CACHE of them, oldest replaced), so
 * the step loop never builds a graph; a shape cuDNN rejects is remembered, logged once and runs
 * on the own kernels from then on. docs/cuda.md, "cuDNN attention". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_cudnn.cuh"

#define SDPA_CACHE        32
#define SDPA_PAD          256 /* zero positions past a ragged buffer's last one */
#define SDPA_SCAN_THREADS 512

/* ---- selection and statistics ---- */

static int attn_override = -1, attn_env = -1, attn_major = -1;
static cuda_attention_stats attn_stats;
static char attn_last[1024];

extern "C" void cuda_attention_impl_set(int impl) {
    MT_CHECK(impl >= -1 && impl <= CUDA_ATTN_CUDNN, "cuda_attention_impl_set(%d)", impl);
    attn_override = impl;
}

static int attn_device_major(void);

extern "C" void cuda_attention_stats_get(cuda_attention_stats *s) {
    *s = attn_stats;
    s->last_reason = attn_last;
    s->device_major = attn_device_major();
#ifndef MT_NO_CUDNN
    s->cudnn_version = (int64_t)cudnnGetVersion();
#endif
}

static int attn_impl(void) {
    if (attn_override >= 0) return attn_override;
    if (attn_env < 0) {
        const char *v = getenv("MT_ATTENTION");
        if (!v || !*v || !strcmp(v, "auto"))
            attn_env = CUDA_ATTN_AUTO;
        else if (!strcmp(v, "flash"))
            attn_env = CUDA_ATTN_FLASH;
        else if (!strcmp(v, "cudnn"))
            attn_env = CUDA_ATTN_CUDNN;
        else
            MT_DIE("MT_ATTENTION=%s: expected flash, cudnn or auto", v);
    }
    return attn_env;
}

static int attn_device_major(void) {
    if (attn_major < 0) {
        int dev = 0;
        cudaDeviceProp prop;
        cudaCheck("attention", cudaGetDevice(&dev));
        cudaCheck("attention", cudaGetDeviceProperties(&prop, dev));
        attn_major = prop.major;
    }
    return attn_major;
}

/* The one line about a fallback (its caller decides it is the first of its kind). */
static void sdpa_log(const char *dir, const char *shape, const char *why) {
    snprintf(attn_last, sizeof(attn_last), "attention %s%s: cuDNN not used: %s", dir, shape, why);
    attn_stats.log_lines++;
    fprintf(stderr, "mt cuda: %s; the own kernels run instead (MT_ATTENTION, docs/cuda.md)\n",
            attn_last);
}

static bool attn_verbose(void) {
    static int v = -1;
    if (v < 0) v = getenv("MT_CUDA_VERBOSE") && atoi(getenv("MT_CUDA_VERBOSE"));
    return v > 0;
}

#ifdef MT_NO_CUDNN
/* Built without cuDNN (launch/gpu-check.sh's standalone build when it finds none): every call
 * that wants cuDNN falls back, with the usual line, once. */
static bool attn_nocudnn(const char *dir, int64_t *fallbacks) {
    if (attn_impl() == CUDA_ATTN_FLASH ||
        (attn_impl() == CUDA_ATTN_AUTO && attn_device_major() != 9))
        return false;
    static bool logged;
    if (!logged) sdpa_log(dir, "", "this build has no cuDNN (MT_NO_CUDNN)");
    logged = true;
    (*fallbacks)++;
    (void)attn_verbose;
    return false;
}
bool cuda_attention_cudnn_fwd(const mt_node *) {
    return attn_nocudnn("forward", &attn_stats.fallback_fwd);
}
bool cuda_attention_cudnn_bwd(const mt_node *) {
    return attn_nocudnn("backward", &attn_stats.fallback_bwd);
}
#else

/* ---- the handle and the plan cache ---- */

static cudnnHandle_t sdpa_handle;
static int sdpa_handle_state; /* 0 not tried, 1 ready, -1 unavailable (logged) */

/* The graphs are cudnn-frontend's as it builds them for cuDNN 9.10.2 and later (with the one
 * version-tied change below, sdpa_pad_workaround). The frontend refuses the bf16 SDPA on 9.10.0
 * and 9.10.1 ("known bugs") and builds other graphs below 9.10 (-FLT_MAX fills, the padding mask
 * applied again after the statistics): those versions run the own kernels. */
#define SDPA_MIN_VERSION 91002

/* cudnn-frontend, sdpa_backward on cuDNN <= 9.15: a dense (not ragged) backward whose s_kv is
 * not a multiple of 128 gets a padding mask with every sequence's lengths s_q and s_kv (the
 * mask keeps every score); from 9.16 the graph runs as it is. */
static bool sdpa_pad_workaround(bool bwd, int64_t T) {
    return bwd && cudnnGetVersion() <= 91500 && T % 128 != 0;
}

static bool sdpa_handle_ready(const char *dir) {
    if (sdpa_handle_state) return sdpa_handle_state > 0;
    sdpa_handle_state = -1;
    char why[384];
    const size_t ver = cudnnGetVersion();
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    if (ver < SDPA_MIN_VERSION) {
        snprintf(why, sizeof(why),
                 "cuDNN %zu.%zu.%zu: the SDPA graphs need 9.10.2 or later (cudnn-frontend refuses "
                 "9.10.0 and 9.10.1, known bugs; below 9.10 it builds other graphs)",
                 ver / 10000, ver / 100 % 100, ver % 100);
    } else if ((st = cudnnCreate(&sdpa_handle)) != CUDNN_STATUS_SUCCESS) {
        char last[256] = "";
        cudnnGetLastErrorString(last, sizeof(last));
        snprintf(why, sizeof(why), "%s:%d: cudnnCreate: %s%s%s", __FILE__, __LINE__,
                 cudnnGetErrorString(st), last[0] ? ": " : "", last);
    } else if ((st = cudnnSetStream(sdpa_handle, 0)) != CUDNN_STATUS_SUCCESS) {
        snprintf(why, sizeof(why), "%s:%d: cudnnSetStream(handle, 0): %s", __FILE__, __LINE__,
                 cudnnGetErrorString(st));
        cudnnDestroy(sdpa_handle);
    } else {
        sdpa_handle_state = 1;
        return true;
    }
    sdpa_log(dir, "", why);
    return false;
}

struct sdpa_entry {
    bool used, ok, scratch_logged;
    sdpa_plan plan;
};
static sdpa_entry sdpa_cache[SDPA_CACHE];
static int sdpa_next_slot;

static bool sdpa_same(const sdpa_shape &a, const sdpa_shape &b) {
    return a.bwd == b.bwd && a.ragged == b.ragged && a.lens == b.lens && a.b == b.b && a.s == b.s &&
           a.H == b.H && a.Hkv == b.Hkv && a.D == b.D;
}

static void sdpa_shape_str(const sdpa_shape &sh, char *buf, size_t len) {
    snprintf(buf, len, " (%s b=%lld s=%lld H=%lld Hkv=%lld D=%lld)",
             sh.ragged ? "ragged"
             : sh.lens ? "dense, padding-mask workaround"
                       : "dense",
             (long long)sh.b, (long long)sh.s, (long long)sh.H, (long long)sh.Hkv, (long long)sh.D);
}

/* The cached plan of shape sh, built on first use; a failed build is cached (and logged) too. */
static sdpa_entry *sdpa_entry_get(const sdpa_shape &sh, const char *dir) {
    for (int i = 0; i < SDPA_CACHE; i++)
        if (sdpa_cache[i].used && sdpa_same(sdpa_cache[i].plan.shape, sh)) return &sdpa_cache[i];
    sdpa_entry *e = &sdpa_cache[sdpa_next_slot];
    sdpa_next_slot = (sdpa_next_slot + 1) % SDPA_CACHE;
    if (e->used) sdpa_plan_free(&e->plan);
    memset(e, 0, sizeof(*e));
    e->used = true;
    char why[640], shape[128];
    attn_stats.workaround_graphs += sh.lens && !sh.ragged;
    e->ok = sdpa_plan_build(sdpa_handle, sh, &e->plan, why, sizeof(why));
    e->plan.shape = sh;
    sdpa_shape_str(sh, shape, sizeof(shape));
    if (!e->ok) {
        sdpa_log(dir, shape, why);
    } else if (attn_verbose()) {
        const size_t v = cudnnGetVersion();
        fprintf(
            stderr,
            "mt cuda: attention %s%s: cuDNN %zu.%zu.%zu plan, engine %lld, workspace %.1f MiB\n",
            dir, shape, v / 10000, v / 100 % 100, v % 100, (long long)e->plan.engine,
            (double)e->plan.workspace / (1 << 20));
    }
    return e;
}

/* ---- packed samples: the ragged sequence table ---- */

/* One block: the positions where a sequence starts (t = 0, or an id other than the previous
 * one) in order into starts, then starts[count] = N; info[0] = count, info[1] = the first
 * position whose id is below its predecessor's, -1 when there is none. */
__global__ void sdpa_seg_scan_kernel(const int32_t *seg, int64_t N, int64_t T, int32_t *starts,
                                     int64_t *info) {
    __shared__ int32_t part[SDPA_SCAN_THREADS];
    __shared__ int64_t first_bad[SDPA_SCAN_THREADS];
    const int tid = threadIdx.x;
    int64_t carry = 0, bad = -1;
    for (int64_t base = 0; base < N; base += SDPA_SCAN_THREADS) {
        const int64_t i = base + tid;
        int f = 0;
        if (i < N) {
            const bool row_start = i % T == 0;
            f = row_start || seg[i] != seg[i - 1];
            if (!row_start && seg[i] < seg[i - 1] && bad < 0) bad = i;
        }
        part[tid] = f; /* inclusive scan over the block (Hillis-Steele) */
        __syncthreads();
        for (int o = 1; o < SDPA_SCAN_THREADS; o <<= 1) {
            const int32_t v = tid >= o ? part[tid - o] : 0;
            __syncthreads();
            part[tid] += v;
            __syncthreads();
        }
        if (f) starts[carry + part[tid] - 1] = (int32_t)i;
        carry += part[SDPA_SCAN_THREADS - 1];
        __syncthreads(); /* part is rewritten by the next chunk */
    }
    first_bad[tid] = bad;
    __syncthreads();
    if (tid == 0) {
        int64_t b = -1;
        for (int k = 0; k < SDPA_SCAN_THREADS; k++)
            if (first_bad[k] >= 0 && (b < 0 || first_bad[k] < b)) b = first_bad[k];
        starts[carry] = (int32_t)N;
        info[0] = carry;
        info[1] = b;
    }
}

/* The graph's per-sequence tables for nb sequences (count real ones): lengths, and the ragged
 * offsets of Q/O, K/V and the statistics (element offsets: start times mq, mk, ms); the unused
 * sequences (and entry nb) start at N with length 0. */
__global__ void sdpa_ragged_fill_kernel(const int32_t *starts, int64_t count, int64_t nb, int64_t N,
                                        int64_t mq, int64_t mk, int64_t ms, int32_t *seqlen,
                                        int64_t *off_q, int64_t *off_k, int64_t *off_s) {
    CUDA_FOR(j, nb + 1) {
        const int64_t start = j < count ? starts[j] : N;
        if (j < nb) seqlen[j] = j < count ? starts[j + 1] - starts[j] : 0;
        off_q[j] = start * mq;
        off_k[j] = start * mk;
        off_s[j] = start * ms;
    }
}

/* every sequence's length n: the dense graph's padding-mask workaround */
__global__ void sdpa_lens_fill_kernel(int32_t *seqlen, int64_t nb, int32_t n) {
    CUDA_FOR(j, nb) seqlen[j] = n;
}

/* lse (B,H,T) from token-major statistics (B T, H), and back */
__global__ void sdpa_lse_from_tokens_kernel(float *lse, const float *st, int64_t B, int64_t T,
                                            int64_t H) {
    CUDA_FOR(i, B * H * T) {
        const int64_t t = i % T, h = i / T % H, b = i / (T * H);
        lse[i] = st[(b * T + t) * H + h];
    }
}
__global__ void sdpa_lse_to_tokens_kernel(float *st, const float *lse, int64_t B, int64_t T,
                                          int64_t H) {
    CUDA_FOR(i, B * H * T) {
        const int64_t t = i % T, h = i / T % H, b = i / (T * H);
        st[(b * T + t) * H + h] = lse[i];
    }
}

/* g += fp32(d): the gradients accumulate */
__global__ void sdpa_add_bf16_kernel(float *g, const __nv_bfloat16 *d, int64_t n) {
    CUDA_FOR(i, n) g[i] += __bfloat162float(d[i]);
}

/* ---- one call ---- */

/* What a call needs beyond the node: its graph's shape and, when ragged, the device tables. */
struct sdpa_call {
    const mt_node *n;
    int64_t B, T, H, Hkv, D, N; /* N = B T positions */
    sdpa_shape sh;
    int32_t *seqlen;
    int64_t *off_q, *off_k, *off_s;
};

static bool sdpa_once_segments, sdpa_once_shape, sdpa_once_ragged_d16;

/* The dense graph (one sample per row), with the lengths of the padding-mask workaround where
 * the version needs it (sdpa_pad_workaround): B lengths T in node scratch. */
static bool sdpa_call_dense(sdpa_call *c, const mt_node *n) {
    if (!sdpa_pad_workaround(c->sh.bwd, c->T)) return true;
    const int64_t B = c->B;
    c->sh.lens = true;
    c->seqlen = (int32_t *)mt_node_scratch(n, sizeof(int32_t) * (size_t)B, "attention cudnn lens");
    sdpa_lens_fill_kernel<<<cuda_blocks(B, CUDA_THREADS), CUDA_THREADS>>>(c->seqlen, B,
                                                                          (int32_t)c->T);
    CUDA_LAUNCH_CHECK("attention cudnn (workaround lengths)");
    return true;
}

/* Reads the node, decides dense or ragged (with seg: the sequence table, one host sync) and
 * checks the shapes cuDNN takes; false (logged once per reason) when the call falls back. */
static bool sdpa_call_init(sdpa_call *c, const mt_node *n, bool bwd, const char *dir) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *seg = n->in[3];
    c->n = n;
    c->B = q->shape[0];
    c->T = q->shape[1];
    c->H = q->shape[2];
    c->Hkv = k->shape[2];
    c->D = q->shape[3];
    c->N = c->B * c->T;
    char why[256] = "";
    if (c->D % 8 || c->D > 256)
        snprintf(why, sizeof(why), "head dim %lld (cuDNN takes multiples of 8 up to 256)",
                 (long long)c->D);
    else if (c->T < 2)
        snprintf(why, sizeof(why), "T = %lld (cuDNN's backward needs 2 positions)",
                 (long long)c->T);
    else if (c->N + SDPA_PAD >= INT32_MAX)
        snprintf(why, sizeof(why), "%lld positions (int32 sequence tables)", (long long)c->N);
    if (why[0]) {
        if (!sdpa_once_shape) sdpa_log(dir, "", why);
        sdpa_once_shape = true;
        return false;
    }
    c->sh = {bwd, false, false, c->B, c->T, c->H, c->Hkv, c->D};
    if (!seg) return sdpa_call_dense(c, n);
    int32_t *starts = (int32_t *)mt_node_scratch(n, sizeof(int32_t) * (size_t)(c->N + 1),
                                                 "attention cudnn starts");
    int64_t *info = (int64_t *)mt_node_scratch(n, 2 * sizeof(int64_t), "attention cudnn info");
    sdpa_seg_scan_kernel<<<1, SDPA_SCAN_THREADS>>>(cuda_i32(seg), c->N, c->T, starts, info);
    CUDA_LAUNCH_CHECK("attention cudnn (sequence table)");
    int64_t h[2];
    cudaCheck("attention cudnn", cudaMemcpy(h, info, sizeof(h), cudaMemcpyDeviceToHost));
    if (h[1] >= 0) {
        if (!sdpa_once_segments) {
            snprintf(why, sizeof(why),
                     "the segment ids of row %lld decrease at position %lld (cuDNN needs each "
                     "row's samples as runs of increasing ids)",
                     (long long)(h[1] / c->T), (long long)(h[1] % c->T));
            sdpa_log(dir, "", why);
        }
        sdpa_once_segments = true;
        return false;
    }
    const int64_t count = h[0];
    if (count == c->B) return sdpa_call_dense(c, n); /* one sample per row */
    if (bwd && c->D % 16) {
        /* the frontend keeps the ragged backward's scratch sized by tokens (max_total_seq_len)
         * only for head dims that are multiples of 16: "a known functional issue" otherwise */
        if (!sdpa_once_ragged_d16) {
            snprintf(why, sizeof(why),
                     "packed samples with head dim %lld (cuDNN's ragged backward needs a multiple "
                     "of 16)",
                     (long long)c->D);
            sdpa_log(dir, "", why);
        }
        sdpa_once_ragged_d16 = true;
        return false;
    }
    int64_t nb = 1;
    while (nb < count) nb *= 2;
    c->sh = {bwd, true, true, nb, c->N + SDPA_PAD, c->H, c->Hkv, c->D};
    c->seqlen = (int32_t *)mt_node_scratch(n, sizeof(int32_t) * (size_t)nb, "attention cudnn lens");
    int64_t **offs[3] = {&c->off_q, &c->off_k, &c->off_s};
    for (int i = 0; i < 3; i++)
        *offs[i] = (int64_t *)mt_node_scratch(n, sizeof(int64_t) * (size_t)(nb + 1),
                                              "attention cudnn offsets");
    sdpa_ragged_fill_kernel<<<cuda_blocks(nb + 1, CUDA_THREADS), CUDA_THREADS>>>(
        starts, count, nb, c->N, c->H * c->D, c->Hkv * c->D, c->H, c->seqlen, c->off_q, c->off_k,
        c->off_s);
    CUDA_LAUNCH_CHECK("attention cudnn (ragged offsets)");
    return true;
}

/* Scratch bytes, rounded as the arena carves them */
static size_t sdpa_bytes(int64_t n) { return ((size_t)n + 63) & ~(size_t)63; }

/* bf16 copy of count fp32 values with `pad` zero values after them (ragged buffers) */
static __nv_bfloat16 *sdpa_bf16_copy(const sdpa_call &c, const float *src, int64_t count,
                                     int64_t pad, const char *what) {
    __nv_bfloat16 *dst =
        (__nv_bfloat16 *)mt_node_scratch(c.n, sizeof(__nv_bfloat16) * (size_t)(count + pad), what);
    cuda_cast_bf16(what, dst, src, count);
    if (pad) cudaCheck(what, cudaMemsetAsync(dst + count, 0, sizeof(__nv_bfloat16) * (size_t)pad));
    return dst;
}

/* Whether the entry's plan and its scratch fit; logs a shape's first failure of each kind. */
static bool sdpa_entry_usable(sdpa_entry *e, const sdpa_call &c, size_t need, const char *dir) {
    if (!e->ok) return false;
    const mt_arena *a = &c.n->ctx->arena;
    if (a->used + need <= a->cap) return true;
    if (!e->scratch_logged) {
        char shape[128], why[192];
        sdpa_shape_str(c.sh, shape, sizeof(shape));
        snprintf(why, sizeof(why), "needs %.1f MiB of scratch, the arena has %.1f MiB free",
                 (double)need / (1 << 20), (double)(a->cap - a->used) / (1 << 20));
        sdpa_log(dir, shape, why);
    }
    e->scratch_logged = true;
    return false;
}

/* Everything up to the plan: the selection, the handle, the call's shape and cached plan. NULL
 * when the call runs on the own kernels; *wanted: it was meant for cuDNN (a fallback). */
static sdpa_entry *sdpa_begin(sdpa_call *c, const mt_node *n, bool bwd, const char *dir,
                              bool *wanted) {
    memset(c, 0, sizeof(*c));
    *wanted = false;
    if (n->ip[0] != MT_BF16) return NULL; /* fp32 mode: the reference kernels, always */
    const int impl = attn_impl();
    if (impl == CUDA_ATTN_FLASH || (impl == CUDA_ATTN_AUTO && attn_device_major() != 9))
        return NULL;
    *wanted = true;
    if (!sdpa_handle_ready(dir) || !sdpa_call_init(c, n, bwd, dir)) return NULL;
    sdpa_entry *e = sdpa_entry_get(c->sh, dir);
    return e->ok ? e : NULL;
}

/* The scalars passed by value (host memory, read when the plan is queued), each as aligned as
 * its tensor descriptor says (16 bytes, as every tensor of the graphs) */
struct sdpa_scalars {
    alignas(16) float scale;
    alignas(16) float neg_inf;
    alignas(16) float one;
};

/* The variant pack's entries both directions share: the scalars, the ragged tables and bf16
 * copies of q, k, v (ragged: with the padding positions). */
static void sdpa_ptrs_common(const sdpa_call &c, sdpa_scalars *v, void *ptr[SDPA_N_UID]) {
    const int64_t pad = c.sh.ragged ? SDPA_PAD : 0;
    const mt_tensor *q = c.n->in[0], *k = c.n->in[1], *vv = c.n->in[2];
    ptr[SDPA_Q] =
        sdpa_bf16_copy(c, cuda_f32(q), c.N * c.H * c.D, pad * c.H * c.D, "attention q bf16");
    ptr[SDPA_K] =
        sdpa_bf16_copy(c, cuda_f32(k), c.N * c.Hkv * c.D, pad * c.Hkv * c.D, "attention k bf16");
    ptr[SDPA_V] =
        sdpa_bf16_copy(c, cuda_f32(vv), c.N * c.Hkv * c.D, pad * c.Hkv * c.D, "attention v bf16");
    v->scale = c.n->fp[0];
    v->neg_inf = -INFINITY;
    v->one = 1.0f;
    ptr[SDPA_SCALE] = &v->scale;
    ptr[SDPA_NEG_INF_CAUSAL] = ptr[SDPA_NEG_INF_PAD] = &v->neg_inf;
    ptr[SDPA_ONE] = &v->one;
    if (c.sh.lens) ptr[SDPA_SEQ_Q] = ptr[SDPA_SEQ_KV] = c.seqlen;
    if (!c.sh.ragged) return;
    ptr[SDPA_OFF_Q] = ptr[SDPA_OFF_O] = c.off_q;
    ptr[SDPA_OFF_K] = ptr[SDPA_OFF_V] = c.off_k;
    ptr[SDPA_OFF_STATS] = c.off_s;
}

/* Queues the plan with its workspace; false (the plan dropped, logged) when cuDNN refuses. */
static bool sdpa_run(sdpa_entry *e, const sdpa_call &c, void *const ptr[SDPA_N_UID],
                     const char *dir) {
    void *ws = e->plan.workspace
                   ? mt_node_scratch(c.n, (size_t)e->plan.workspace, "attention cudnn workspace")
                   : NULL;
    char why[640];
    if (sdpa_plan_run(sdpa_handle, e->plan, ptr, ws, why, sizeof(why))) return true;
    char shape[128];
    sdpa_shape_str(c.sh, shape, sizeof(shape));
    sdpa_log(dir, shape, why);
    e->ok = false;
    return false;
}

bool cuda_attention_cudnn_fwd(const mt_node *n) {
    sdpa_call c;
    bool wanted;
    sdpa_entry *e = sdpa_begin(&c, n, false, "forward", &wanted);
    const bool rg = c.sh.ragged;
    const int64_t P = rg ? c.sh.s : c.N; /* buffer positions */
    float *lse = n->saved[0] ? cuda_f32(n->saved[0]) : NULL;
    const size_t need = sdpa_bytes(2 * P * (2 * c.H + 2 * c.Hkv) * c.D) +
                        (rg || !lse ? sdpa_bytes(4 * P * c.H) : 0) +
                        (e ? sdpa_bytes(e->plan.workspace) : 0) + 8 * 64;
    if (!e || !sdpa_entry_usable(e, c, need, "forward")) {
        attn_stats.fallback_fwd += wanted;
        return false;
    }
    const int64_t nq = c.N * c.H * c.D;
    void *ptr[SDPA_N_UID] = {0};
    sdpa_scalars sc;
    sdpa_ptrs_common(c, &sc, ptr);
    __nv_bfloat16 *o = (__nv_bfloat16 *)mt_node_scratch(
        n, sizeof(__nv_bfloat16) * (size_t)(P * c.H * c.D), "attention cudnn O");
    ptr[SDPA_O] = o;
    /* dense: cuDNN's (b, H, s, 1) statistics are the saved lse itself */
    float *stats = !rg && lse ? lse
                              : (float *)mt_node_scratch(n, sizeof(float) * (size_t)(P * c.H),
                                                         "attention cudnn stats");
    ptr[SDPA_STATS] = stats;
    if (!sdpa_run(e, c, ptr, "forward")) {
        attn_stats.fallback_fwd++;
        return false;
    }
    CUDA_LAUNCH_CHECK("attention forward (cudnn)");
    cuda_vec_from_bf16(cuda_f32(n->out), (const uint16_t *)o, nq);
    if (rg && lse) {
        sdpa_lse_from_tokens_kernel<<<cuda_blocks(c.N * c.H, CUDA_THREADS), CUDA_THREADS>>>(
            lse, stats, c.B, c.T, c.H);
        CUDA_LAUNCH_CHECK("attention forward (cudnn lse)");
    }
    attn_stats.cudnn_fwd++;
    return true;
}

bool cuda_attention_cudnn_bwd(const mt_node *n) {
    sdpa_call c;
    bool wanted;
    sdpa_entry *e = sdpa_begin(&c, n, true, "backward", &wanted);
    const bool rg = c.sh.ragged;
    const int64_t P = rg ? c.sh.s : c.N, pad = rg ? SDPA_PAD : 0;
    int64_t buf[4] = {0, 0, 0, 0};
    if (e) sdpa_bwd_buffers(c.sh, buf);
    const int64_t rows = P * c.H * c.D, kv_rows = P * c.Hkv * c.D;
    /* bf16 q, k, v, out, dout and dq, dk, dv; the statistics; the graph's fp32 buffers */
    size_t need = sdpa_bytes(2 * (4 * rows + 4 * kv_rows)) + (rg ? sdpa_bytes(4 * P * c.H) : 0) +
                  (e ? sdpa_bytes(e->plan.workspace) : 0) + 16 * 64;
    for (int i = 0; i < 4; i++) need += sdpa_bytes(buf[i]);
    if (!e || !sdpa_entry_usable(e, c, need, "backward")) {
        attn_stats.fallback_bwd += wanted;
        return false;
    }
    const int64_t nq = c.N * c.H * c.D, nkv = c.N * c.Hkv * c.D;
    void *ptr[SDPA_N_UID] = {0};
    sdpa_scalars sc;
    sdpa_ptrs_common(c, &sc, ptr);
    ptr[SDPA_O] = sdpa_bf16_copy(c, cuda_f32(n->out), nq, pad * c.H * c.D, "attention out bf16");
    ptr[SDPA_DO] = sdpa_bf16_copy(c, cuda_grad(n->out), nq, pad * c.H * c.D, "attention dout bf16");
    float *lse = cuda_f32(n->saved[0]);
    ptr[SDPA_STATS] = lse; /* dense: the saved lse is cuDNN's (b, H, s, 1) statistics */
    if (rg) {
        float *st =
            (float *)mt_node_scratch(n, sizeof(float) * (size_t)(P * c.H), "attention cudnn stats");
        sdpa_lse_to_tokens_kernel<<<cuda_blocks(c.N * c.H, CUDA_THREADS), CUDA_THREADS>>>(
            st, lse, c.B, c.T, c.H);
        CUDA_LAUNCH_CHECK("attention backward (cudnn stats)");
        cudaCheck("attention cudnn",
                  cudaMemsetAsync(st + c.N * c.H, 0, sizeof(float) * (size_t)(SDPA_PAD * c.H)));
        ptr[SDPA_STATS] = st;
    }
    const int g_uid[3] = {SDPA_DQ, SDPA_DK, SDPA_DV};
    const int64_t g_rows[3] = {rows, kv_rows, kv_rows}, g_n[3] = {nq, nkv, nkv};
    for (int i = 0; i < 3; i++)
        ptr[g_uid[i]] = mt_node_scratch(n, sizeof(__nv_bfloat16) * (size_t)g_rows[i],
                                        "attention cudnn gradient");
    const int b_uid[4] = {SDPA_SOFTMAX_SUM, SDPA_DQ_ACCUM, SDPA_DK_FULL, SDPA_DV_FULL};
    for (int i = 0; i < 4; i++)
        if (buf[i]) ptr[b_uid[i]] = mt_node_scratch(n, (size_t)buf[i], "attention cudnn buffer");
    /* cuDNN clears dq_accum itself from 9.6 on (the frontend stopped doing it); cheap to be sure */
    cudaCheck("attention cudnn", cudaMemsetAsync(ptr[SDPA_DQ_ACCUM], 0, (size_t)buf[1]));
    if (!sdpa_run(e, c, ptr, "backward")) {
        attn_stats.fallback_bwd++;
        return false;
    }
    CUDA_LAUNCH_CHECK("attention backward (cudnn)");
    float *dst[3] = {cuda_grad(n->in[0]), cuda_grad(n->in[1]), cuda_grad(n->in[2])};
    for (int i = 0; i < 3; i++) {
        if (!dst[i]) continue;
        sdpa_add_bf16_kernel<<<cuda_blocks(g_n[i], CUDA_THREADS), CUDA_THREADS>>>(
            dst[i], (const __nv_bfloat16 *)ptr[g_uid[i]], g_n[i]);
        CUDA_LAUNCH_CHECK("attention backward (cudnn gradients)");
    }
    attn_stats.cudnn_bwd++;
    return true;
}
#endif /* MT_NO_CUDNN */
