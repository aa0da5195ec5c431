/* zero.c: see zero.h. Host memory (MPI); the NCCL build swaps the buffers and collectives. */
#include "zero.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/check.h"

static float *zero_alloc(int64_t n, const char *what) {
    void *p = NULL;
    if (posix_memalign(&p, 64, sizeof(float) * (size_t)(n > 0 ? n : 1)))
        MT_DIE("out of memory: %s needs %lld floats", what, (long long)n);
    memset(p, 0, sizeof(float) * (size_t)(n > 0 ? n : 1));
    return p;
}

void mt_zero_init(mt_zero *z, mt_comm *comm, int n_buckets, const int64_t *bucket_numel) {
    memset(z, 0, sizeof(*z));
    z->comm = comm;
    z->n_buckets = n_buckets;
    int P = comm->size;
    z->numel = mt_calloc(n_buckets, sizeof(int64_t), "zero numel");
    z->shard_numel = mt_calloc(n_buckets, sizeof(int64_t), "zero shard numel");
    z->shard_offset = mt_calloc(n_buckets, sizeof(int64_t), "zero shard offset");
    z->ranges = mt_calloc(n_buckets, sizeof(mt_zero_range *), "zero ranges");
    z->n_ranges = mt_calloc(n_buckets, sizeof(int), "zero ranges");
    for (int b = 0; b < n_buckets; b++) {
        /* pad to a multiple of 16*P so every shard starts 64-byte aligned */
        int64_t align = 16 * (int64_t)P;
        int64_t padded = (bucket_numel[b] + align - 1) / align * align;
        z->numel[b] = bucket_numel[b];
        z->shard_numel[b] = padded / P;
        z->shard_offset[b] = z->total_shard;
        z->total_shard += z->shard_numel[b];
        if (padded > z->slot_numel) z->slot_numel = padded;
    }
    z->master = zero_alloc(z->total_shard, "master weights");
    z->grad = zero_alloc(z->total_shard, "gradients");
    z->m = zero_alloc(z->total_shard, "adam m");
    z->v = zero_alloc(z->total_shard, "adam v");
    for (int s = 0; s < 2; s++) {
        z->slot_data[s] = zero_alloc(z->slot_numel, "gather slot");
        z->slot_grad[s] = zero_alloc(z->slot_numel, "gradient slot");
        z->slot_bucket[s] = -1;
    }
    z->recv_numel = z->slot_numel / P;
    z->recv = zero_alloc(z->recv_numel, "reduce-scatter landing");
}

void mt_zero_free(mt_zero *z) {
    free(z->numel);
    free(z->shard_numel);
    free(z->shard_offset);
    for (int b = 0; b < z->n_buckets; b++) free(z->ranges[b]);
    free(z->ranges);
    free(z->n_ranges);
    free(z->master);
    free(z->grad);
    free(z->m);
    free(z->v);
    for (int s = 0; s < 2; s++) {
        free(z->slot_data[s]);
        free(z->slot_grad[s]);
    }
    free(z->recv);
    memset(z, 0, sizeof(*z));
}

void mt_zero_set_ranges(mt_zero *z, int bucket, const mt_zero_range *ranges, int n) {
    free(z->ranges[bucket]);
    z->ranges[bucket] = mt_malloc(sizeof(mt_zero_range) * (size_t)(n ? n : 1), "zero ranges");
    memcpy(z->ranges[bucket], ranges, sizeof(mt_zero_range) * (size_t)n);
    z->n_ranges[bucket] = n;
}

float *mt_zero_slot_data(const mt_zero *z, int bucket) { return z->slot_data[bucket % 2]; }
float *mt_zero_slot_grad(const mt_zero *z, int bucket) { return z->slot_grad[bucket % 2]; }

void mt_zero_owned_range(const mt_zero *z, int bucket, int64_t *lo, int64_t *hi) {
    int64_t s = z->shard_numel[bucket];
    *lo = z->comm->rank * s;
    *hi = *lo + s < z->numel[bucket] ? *lo + s : z->numel[bucket];
    if (*hi < *lo) *hi = *lo;
}

void mt_zero_gather(mt_zero *z, int bucket, bool with_grad) {
    int s = bucket % 2;
    if (z->slot_bucket[s] != bucket) {
        z->comm->allgather(z->comm, z->master + z->shard_offset[bucket], z->slot_data[s],
                           z->shard_numel[bucket]);
        z->slot_bucket[s] = bucket;
        z->gathers++;
    }
    if (with_grad) memset(z->slot_grad[s], 0, sizeof(float) * (size_t)z->slot_numel);
}

void mt_zero_release(mt_zero *z, int bucket) {
    /* Slots are planned memory: nothing is freed. The slot keeps its contents, so gathering the
     * same bucket again before the next optimizer step (forward end -> backward start) is
     * skipped; the other buckets of its parity overwrite it. */
    (void)z;
    (void)bucket;
}

void mt_zero_reduce_grad(mt_zero *z, int bucket) {
    int s = bucket % 2;
    MT_CHECK(z->slot_bucket[s] == bucket, "zero: reduce_grad of bucket %d, but its slot holds %d",
             bucket, z->slot_bucket[s]);
    int64_t n = z->shard_numel[bucket];
    z->comm->reduce_scatter(z->comm, z->slot_grad[s], z->recv, n);
    float *g = z->grad + z->shard_offset[bucket];
    for (int64_t i = 0; i < n; i++) g[i] += z->recv[i];
    z->reduce_scatters++;
}

void mt_zero_zero_grad(mt_zero *z) { memset(z->grad, 0, sizeof(float) * (size_t)z->total_shard); }

double mt_zero_grad_norm(mt_zero *z) {
    double ss = 0;
    for (int64_t i = 0; i < z->total_shard; i++) ss += (double)z->grad[i] * z->grad[i];
    z->comm->allreduce_f64(z->comm, &ss, 1);
    return sqrt(ss);
}

void mt_zero_scale_grad(mt_zero *z, float s) {
    for (int64_t i = 0; i < z->total_shard; i++) z->grad[i] *= s;
}

bool mt_zero_grad_finite(mt_zero *z) {
    int64_t bad = 0;
    for (int64_t i = 0; i < z->total_shard; i++) bad += !isfinite(z->grad[i]);
    z->comm->allreduce_i64(z->comm, &bad, 1);
    return bad == 0;
}

/* Does element i (bucket coordinates) of bucket b get weight decay? */
static bool zero_decays(const mt_zero *z, int b, int64_t i, int64_t *run_end) {
    if (!z->n_ranges[b]) {
        *run_end = z->numel[b];
        return true;
    }
    for (int k = 0; k < z->n_ranges[b]; k++) {
        const mt_zero_range *r = &z->ranges[b][k];
        if (i >= r->offset && i < r->offset + r->numel) {
            *run_end = r->offset + r->numel;
            return r->decay;
        }
    }
    *run_end = i + 1; /* padding or a gap: no decay; its gradient is zero anyway */
    return false;
}

/* One run of elements with the same decay flag; PyTorch's fp32 AdamW arithmetic
 * (torch.optim.adamw, single-tensor path): the loop vectorises and splits over threads. */
static void zero_adamw_run(float *p, float *m, float *v, const float *g, int64_t n, float keep,
                           float b1, float b2, float step_size, float bc2_sqrt, float eps) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) {
        p[i] *= keep;
        m[i] += (g[i] - m[i]) * (1.0f - b1);
        v[i] = v[i] * b2 + (1.0f - b2) * g[i] * g[i];
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] -= step_size * m[i] / denom;
    }
}

void mt_zero_adamw_step(mt_zero *z, const mt_adamw *o) {
    MT_CHECK(o->step >= 1, "adamw: step must be >= 1");
    double bc1 = 1.0 - pow(o->beta1, (double)o->step), bc2 = 1.0 - pow(o->beta2, (double)o->step);
    float step_size = (float)(o->lr / bc1), bc2_sqrt = (float)sqrt(bc2), eps = (float)o->eps;
    float b1 = (float)o->beta1, b2 = (float)o->beta2;
    for (int b = 0; b < z->n_buckets; b++) {
        int64_t lo, hi;
        mt_zero_owned_range(z, b, &lo, &hi);
        float *p = z->master + z->shard_offset[b] - lo, *g = z->grad + z->shard_offset[b] - lo;
        float *m = z->m + z->shard_offset[b] - lo, *v = z->v + z->shard_offset[b] - lo;
        for (int64_t i = lo; i < hi;) {
            int64_t end;
            bool decay = zero_decays(z, b, i, &end);
            if (end > hi) end = hi;
            float keep = decay ? (float)(1.0 - o->lr * o->weight_decay) : 1.0f;
            zero_adamw_run(p + i, m + i, v + i, g + i, end - i, keep, b1, b2, step_size, bc2_sqrt,
                           eps);
            i = end;
        }
    }
    z->slot_bucket[0] = z->slot_bucket[1] = -1; /* parameters changed: slots are stale */
}

int64_t mt_zero_owned_bytes(const mt_zero *z) {
    return 4 * (int64_t)sizeof(float) * z->total_shard;
}

int64_t mt_zero_slot_bytes(const mt_zero *z) {
    return 4 * (int64_t)sizeof(float) * z->slot_numel + (int64_t)sizeof(float) * z->recv_numel;
}
