/* zero_adamw.c: the owned state's step (zero.h): the gradients' clearing marks, their norm,
 * the non-finite checks of the owned arrays, and AdamW in place or offloaded to the host
 * through the staging pipeline and its copy thread. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/check.h"
#include "train/zero.h"

void mt_zero_zero_grad(mt_zero *z) {
    if (!z->grad_unset) { /* one aliased rank: the backward adds into the shard itself */
        z->be->zero(z->grad, sizeof(float) * (size_t)z->total_shard);
        return;
    }
    for (int b = 0; b < z->n_buckets; b++) z->grad_unset[b] = true;
}

/* The owned gradients whole: the buckets still marked unset are cleared (zero.h, grad_unset). */
static void zero_grad_settle(mt_zero *z) {
    for (int b = 0; z->grad_unset && b < z->n_buckets; b++) {
        if (!z->grad_unset[b]) continue;
        z->be->zero(z->grad + z->shard_offset[b], sizeof(float) * (size_t)z->shard_numel[b]);
        z->grad_unset[b] = false;
    }
}

int64_t mt_zero_first_nonfinite(const mt_zero *z, int array, int bucket) {
    MT_CHECK(array >= 0 && array < 3 && bucket >= 0 && bucket < z->n_buckets,
             "zero: array %d of bucket %d", array, bucket);
    const float *base = array == 0 ? z->master : array == 1 ? z->m : z->v;
    const bool host = array == 0 ? z->master_on_host : z->offload;
    int64_t lo, hi;
    mt_zero_owned_range(z, bucket, &lo, &hi);
    const int64_t i = mt_backend_first_nonfinite(host ? mt_backend_cpu() : z->be,
                                                 base + z->shard_offset[bucket], hi - lo);
    return i < 0 ? -1 : lo + i;
}

double mt_zero_grad_norm(mt_zero *z, bool *finite) {
    double stats[2] = {0, 0}; /* sum of squares, non-finite count */
    int64_t bad = 0;
    zero_grad_settle(z);
    z->be->vec_stats(z->grad, z->total_shard, &stats[0], &bad);
    stats[1] = (double)bad;
    z->comm->allreduce_f64(z->comm, stats, 2);
    if (finite) *finite = stats[1] == 0;
    return sqrt(stats[0]);
}

/* Does element i (bucket coordinates) of bucket b get weight decay? *frozen: it is a buffer
 * the update skips. */
static bool zero_decays(const mt_zero *z, int b, int64_t i, int64_t *run_end, bool *frozen) {
    *frozen = false;
    if (!z->n_ranges[b]) {
        *run_end = z->numel[b];
        return true;
    }
    for (int k = 0; k < z->n_ranges[b]; k++) {
        const mt_zero_range *r = &z->ranges[b][k];
        if (i >= r->offset && i < r->offset + r->numel) {
            /* extend over the following adjacent ranges with the same flags: one kernel each */
            *run_end = r->offset + r->numel;
            for (int j = k + 1;
                 j < z->n_ranges[b] && z->ranges[b][j].offset == *run_end &&
                 z->ranges[b][j].decay == r->decay && z->ranges[b][j].frozen == r->frozen;
                 j++)
                *run_end += z->ranges[b][j].numel;
            *frozen = r->frozen;
            return r->decay;
        }
    }
    *run_end = i + 1; /* padding or a gap: no decay; its gradient is zero anyway */
    return false;
}

/* Offload on a device backend: the owned elements go through the host in chunks (a bucket's
 * owned range cut at stage_numel). zero_chunk_next advances *c to the next non-empty chunk in
 * bucket order (c->b = -1 before the first), false after the last. */
typedef struct {
    int b;
    int64_t c0, c1; /* bucket coordinates */
} zero_chunk;

static bool zero_chunk_next(const mt_zero *z, zero_chunk *c) {
    int64_t lo, hi;
    if (c->b >= 0) {
        mt_zero_owned_range(z, c->b, &lo, &hi);
        if (c->c1 < hi) {
            c->c0 = c->c1;
            c->c1 = hi - c->c0 > z->stage_numel ? c->c0 + z->stage_numel : hi;
            return true;
        }
    }
    for (c->b++; c->b < z->n_buckets; c->b++) {
        mt_zero_owned_range(z, c->b, &lo, &hi);
        if (hi > lo) {
            c->c0 = lo;
            c->c1 = hi - lo > z->stage_numel ? lo + z->stage_numel : hi;
            return true;
        }
    }
    return false;
}

/* Where bucket coordinate 0 of a chunk's bucket sits in the owned arrays (master, grad,
 * master16, m, v are indexed by bucket coordinates from there), and staging buffer k of three:
 * p (fp32, or bf16 with a host master) and g, stage_numel floats each. */
static int64_t zero_chunk_base(const mt_zero *z, const zero_chunk *c) {
    int64_t lo, hi;
    mt_zero_owned_range(z, c->b, &lo, &hi);
    return z->shard_offset[c->b] - lo;
}
static float *zero_stage_buf(const mt_zero *z, int k) { return z->stage + 2 * k * z->stage_numel; }

/* A chunk's gradients (and without a host master its master weights) to staging buffer k. */
static void zero_chunk_fetch(const mt_zero *z, const zero_chunk *c, int k) {
    const int64_t at = zero_chunk_base(z, c) + c->c0;
    const size_t bytes = sizeof(float) * (size_t)(c->c1 - c->c0);
    if (!z->master_on_host) z->be->to_host(zero_stage_buf(z, k), z->master + at, bytes);
    z->be->to_host(zero_stage_buf(z, k) + z->stage_numel, z->grad + at, bytes);
}
/* Staging buffer k's updated master weights (with a host master: their bf16 rounding) of a
 * chunk to the device. */
static void zero_chunk_store(const mt_zero *z, const zero_chunk *c, int k) {
    const int64_t at = zero_chunk_base(z, c) + c->c0, n = c->c1 - c->c0;
    if (z->master_on_host)
        z->be->to_device(z->master16 + at, zero_stage_buf(z, k), sizeof(uint16_t) * (size_t)n);
    else
        z->be->to_device(z->master + at, zero_stage_buf(z, k), sizeof(float) * (size_t)n);
}

/* Host master: master16 from the host master after it changed (loading), chunk by chunk
 * through the first staging buffer, rounded as the step's pipeline rounds. */
void mt_zero_master16_refresh(mt_zero *z) {
    if (!z->master16_stale) return;
    uint16_t *h16 = (uint16_t *)zero_stage_buf(z, 0);
    zero_chunk c = {-1, 0, 0};
    while (zero_chunk_next(z, &c)) {
        const int64_t at = zero_chunk_base(z, &c) + c.c0, n = c.c1 - c.c0;
        mt_backend_cpu()->vec_to_bf16(h16, z->master + at, n);
        z->be->to_device(z->master16 + at, h16, sizeof(uint16_t) * (size_t)n);
    }
    z->master16_stale = false;
}

/* AdamW over [c0, c1) of bucket b: p, g, m, v indexed by bucket coordinates, one call per run
 * of elements with the same weight-decay flag. */
static void zero_adamw_range(const mt_zero *z, const mt_backend *run, int b, int64_t c0, int64_t c1,
                             float *p, float *m, float *v, const float *g, const mt_adamw *o,
                             mt_adamw_args *a) {
    float *copy = a->p_copy; /* bucket coordinates too, or NULL */
    for (int64_t i = c0; i < c1;) {
        int64_t end;
        bool frozen;
        bool decay = zero_decays(z, b, i, &end, &frozen);
        if (end > c1) end = c1;
        a->keep = decay ? (float)(1.0 - o->lr * o->weight_decay) : 1.0f;
        a->p_copy = copy ? copy + i : NULL;
        if (!frozen) run->adamw(p + i, m + i, v + i, g + i, end - i, a);
        i = end;
    }
    a->p_copy = copy;
}

/* The copies of a pipeline step, done by the copy thread while the host updates chunk cur:
 * chunk prev's master weights back to the device, chunk next's master weights and gradients
 * to the host. */
typedef struct {
    zero_chunk prev, next;
    int prev_buf, next_buf; /* -1: nothing */
} zero_copy_job;

/* One copy thread per offloading mt_zero, started at init and stopped at free (no thread is
 * created in a step): it waits for a job, runs it, reports it done. */
struct zero_copier {
    const mt_zero *z;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    zero_copy_job job;
    int state;  /* 0 idle, 1 a job waits or runs, 2 quit */
    int device; /* the starting thread's device (-1: none), the thread's too */
};

static void *zero_copier_main(void *arg) {
    struct zero_copier *c = arg;
    if (c->device >= 0) c->z->be->thread_bind(c->device); /* this rank's GPU, not device 0 */
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->state == 0) pthread_cond_wait(&c->cv, &c->mu);
        if (c->state == 2) break;
        const zero_copy_job j = c->job;
        pthread_mutex_unlock(&c->mu);
        if (j.prev_buf >= 0) zero_chunk_store(c->z, &j.prev, j.prev_buf);
        if (j.next_buf >= 0) zero_chunk_fetch(c->z, &j.next, j.next_buf);
        pthread_mutex_lock(&c->mu);
        c->state = 0;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

struct zero_copier *mt_zero_copier_start(const mt_zero *z) {
    struct zero_copier *c = mt_calloc(1, sizeof(*c), "offload copy thread");
    c->z = z;
    c->device = z->be->thread_device ? z->be->thread_device() : -1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    MT_CHECK(pthread_create(&c->thread, NULL, zero_copier_main, c) == 0,
             "zero: cannot start the offload copy thread");
    return c;
}

static void zero_copier_set(struct zero_copier *c, int state) {
    pthread_mutex_lock(&c->mu);
    c->state = state;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void zero_copier_wait(struct zero_copier *c) {
    pthread_mutex_lock(&c->mu);
    while (c->state == 1) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

void mt_zero_copier_stop(struct zero_copier *c) {
    zero_copier_set(c, 2);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Offload: chunk k is fetched into staging buffer k % 3 while chunk k - 1 is updated and chunk
 * k - 2 stored, so PCIe transfers overlap the host's AdamW. The same chunks, the same kernel
 * and the same order per element as one chunk at a time: the same bits. */
static void zero_adamw_offloaded(mt_zero *z, const mt_adamw *o, mt_adamw_args *a) {
    zero_chunk cur = {-1, 0, 0};
    if (!zero_chunk_next(z, &cur)) return;
    zero_chunk_fetch(z, &cur, 0);
    struct zero_copier *c = z->copier;
    zero_copy_job job = {cur, cur, -1, -1};
    for (int k = 0;; k++) {
        zero_chunk next = cur;
        const bool more = zero_chunk_next(z, &next);
        job.next = next;
        job.next_buf = more ? (k + 1) % 3 : -1;
        c->job = job; /* the thread is idle: no lock needed to fill it */
        zero_copier_set(c, 1);
        float *hp = zero_stage_buf(z, k % 3), *hg = hp + z->stage_numel;
        const int64_t base = zero_chunk_base(z, &cur);
        /* bucket coordinates: the staged master weights, or the host master */
        float *p = z->master_on_host ? z->master + base : hp - cur.c0;
        zero_adamw_range(z, mt_backend_cpu(), cur.b, cur.c0, cur.c1, p, z->m + base, z->v + base,
                         hg - cur.c0, o, a);
        if (z->master_on_host) /* what the device keeps and the gathers send */
            mt_backend_cpu()->vec_to_bf16((uint16_t *)hp, p + cur.c0, cur.c1 - cur.c0);
        zero_copier_wait(c);
        job.prev = cur;
        job.prev_buf = k % 3;
        if (!more) break;
        cur = next;
    }
    zero_chunk_store(z, &job.prev, job.prev_buf);
}

void mt_zero_adamw_step(mt_zero *z, const mt_adamw *o) {
    MT_CHECK(o->step >= 1, "adamw: step must be >= 1");
    double bc1 = 1.0 - pow(o->beta1, (double)o->step), bc2 = 1.0 - pow(o->beta2, (double)o->step);
    mt_adamw_args a = {.b1 = (float)o->beta1,
                       .b2 = (float)o->beta2,
                       .step_size = (float)(o->lr / bc1),
                       .bc2_sqrt = (float)sqrt(bc2),
                       .eps = (float)o->eps,
                       .gscale = o->grad_scale > 0.0f ? o->grad_scale : 1.0f};
    mt_zero_slots_wait(z); /* no transfer may still read the master weights */
    zero_grad_settle(z);
    if (z->stage) {
        zero_adamw_offloaded(z, o, &a);
        z->master16_stale = false; /* every owned element was rounded and stored */
    } else { /* the backend's AdamW in place (offloaded moments on the CPU backend too) */
        /* node-shared parameters: AdamW stores the new values there too, in the same pass,
         * once every rank is done reading the old ones (zero_node.c) */
        const bool node = z->node && !z->node_stale;
        if (node) mt_zero_node_begin_write(z);
        for (int b = 0; b < z->n_buckets; b++) {
            int64_t lo, hi;
            mt_zero_owned_range(z, b, &lo, &hi);
            const int64_t off = z->shard_offset[b] - lo;
            a.p_copy = node ? z->node + z->node_offset[b] : NULL;
            zero_adamw_range(z, z->be, b, lo, hi, z->master + off, z->m + off, z->v + off,
                             z->grad + off, o, &a);
        }
        if (node) {
            mt_zero_slots_stale(z);
            mt_zero_node_end_write(z);
            return;
        }
    }
    mt_zero_slots_stale(z);
}
