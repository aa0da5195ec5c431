/* nonfinite.c: see nonfinite.h. */
#include "train/nonfinite.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parameter whose data (grad false) or gradient (grad true) holds address x, or -1; its
 * element in *elem. Tensors built over several parameters (the stacked experts) resolve to the
 * one the element belongs to. Buckets of a parity share a gather slot: only the parameters of
 * the bucket its slot holds now are there. */
static int nf_param_at(const mt_sharded *s, const float *x, bool grad, int64_t *elem) {
    const mt_minimax *m = s->model;
    for (int p = 0; p < m->n_params; p++) {
        const float *base = grad ? m->params[p].grad : m->params[p].data;
        const int b = m->info[p].bucket;
        if (base && x >= base && x < base + m->info[p].numel &&
            (grad ? mt_zero_grad_holds(s->zero, b) : mt_zero_slot_holds(s->zero, b))) {
            *elem = m->info[p].src_offset + (x - base); /* a vocabulary part: the whole's */
            return p;
        }
    }
    return -1;
}

/* snprintf for names and messages that may not fit: a cut one ends in "..." so that it does not
 * read as whole. */
__attribute__((format(printf, 3, 4))) static void nf_format(char *out, size_t n, const char *fmt,
                                                            ...) {
    va_list ap;
    va_start(ap, fmt);
    const int len = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    if (len >= (int)n && n > 4) memcpy(out + n - 4, "...", 4);
}

/* "model.layers.2" for a bucket: the common prefix of its parameters' names up to a '.', else
 * (the final norm with the lm_head) its first two names. */
static void nf_bucket_name(const mt_minimax *m, int bucket, char *out, size_t n) {
    if (bucket < 0) {
        snprintf(out, n, "no parameter bucket");
        return;
    }
    const char *first = NULL, *second = NULL;
    size_t common = 0;
    for (int p = 0; p < m->n_params; p++) {
        if (m->info[p].bucket != bucket) continue;
        const char *name = m->info[p].name;
        if (!first) {
            first = name;
            common = strlen(name);
            continue;
        }
        if (!second) second = name;
        size_t k = 0;
        while (k < common && name[k] == first[k]) k++;
        common = k;
    }
    if (!first) {
        snprintf(out, n, "bucket %d", bucket);
        return;
    }
    while (common > 0 && first[common] != '.' && first[common] != 0) common--;
    if (common > 0)
        snprintf(out, n, "%.*s", (int)common, first);
    else
        nf_format(out, n, "%s, %s", first, second ? second : "");
}

/* ---- a loaded state ---- */

bool mt_sharded_check_finite(const mt_sharded *s, char *err, size_t n) {
    static const char *const what[3] = {"master weights", "AdamW first moments (m)",
                                        "AdamW second moments (v)"};
    const mt_minimax *m = s->model;
    for (int b = 0; b < s->zero->n_buckets; b++)
        for (int a = 0; a < 3; a++) {
            const int64_t i = mt_zero_first_nonfinite(s->zero, a, b);
            if (i < 0) continue;
            int p = -1;
            for (int q = 0; q < m->n_params && p < 0; q++)
                if (m->info[q].bucket == b && i >= m->info[q].offset &&
                    i < m->info[q].offset + m->info[q].numel)
                    p = q;
            if (p >= 0)
                snprintf(err, n, "the %s of %s hold a non-finite value at element %lld", what[a],
                         m->info[p].name, (long long)(i - m->info[p].offset));
            else
                snprintf(err, n,
                         "the %s of bucket %d hold a non-finite value at element %lld "
                         "(alignment padding)",
                         what[a], b, (long long)i);
            return false;
        }
    return true;
}

/* ---- a step ---- */

typedef struct {
    const mt_sharded *s;
    const mt_minimax *m;
    const mt_backend *be;
    int64_t seq;   /* kernels checked so far in this micro-batch */
    int64_t found; /* seq of the first finding, or -1 */
    char what[768];
} nf_watch;

static const char *nf_value(const mt_backend *be, const float *x, char *buf, size_t n) {
    float v = 0;
    be->to_host(&v, x, sizeof(v));
    snprintf(buf, n, "%g", (double)v);
    return buf;
}

/* The first element of t's [lo, lo + count) that is not finite, named: "parameter P element e"
 * when t's memory is a parameter's (or its gradient), else "tensor 'name' (shape) element e". */
static bool nf_check_range(nf_watch *w, const mt_tensor *t, bool grad, int64_t lo, int64_t count,
                           char *out, size_t n) {
    const float *x = grad ? t->grad : t->data;
    if (!x || t->dtype != MT_F32) return false;
    const int64_t i = mt_backend_first_nonfinite(w->be, x + lo, count);
    if (i < 0) return false;
    int64_t e = 0;
    char v[32];
    const int p = nf_param_at(w->s, x + lo + i, grad, &e);
    if (p >= 0)
        snprintf(out, n, "%sparameter %s element %lld = %s", grad ? "the gradient of " : "",
                 w->m->info[p].name, (long long)e, nf_value(w->be, x + lo + i, v, sizeof(v)));
    else
        snprintf(out, n, "%stensor '%s' %s element %lld = %s", grad ? "the gradient of " : "",
                 t->name ? t->name : "?", mt_shape_str(t), (long long)(lo + i),
                 nf_value(w->be, x + lo + i, v, sizeof(v)));
    return true;
}

static bool nf_check(nf_watch *w, const mt_tensor *t, bool grad, char *out, size_t n) {
    return nf_check_range(w, t, grad, 0, mt_numel(t), out, n);
}

/* What a forward kernel wrote of its output: all of it, but an expert's rows of the experts'
 * shared output (ip[1] = first row, ip[2] = rows; the other rows hold what the arena held). */
static void nf_written(const mt_node *node, int64_t *lo, int64_t *count) {
    *lo = 0;
    *count = mt_numel(node->out);
    if (node->op == MT_OP_MOE_EXPERT_FFN) {
        const int64_t C = node->out->shape[1];
        *lo = node->ip[1] * C;
        *count = node->ip[2] * C;
    }
}

/* The node hook: after a forward kernel its inputs (a leaf's non-finite value shows here; any
 * other input was an output checked before) and its output; after a backward kernel the
 * gradients of its inputs. */
static void nf_hook(void *user, const mt_node *node, bool forward) {
    nf_watch *w = user;
    w->seq++;
    if (w->found >= 0) return;
    char bucket[200], bad[400];
    nf_bucket_name(w->m, node->tag, bucket, sizeof(bucket));
    const char *op = mt_op_name(node->op);
    for (int j = 0; j < node->n_in; j++) {
        if (!node->in[j] || !nf_check(w, node->in[j], !forward, bad, sizeof(bad))) continue;
        if (forward)
            snprintf(w->what, sizeof(w->what), "%s, read by the forward of %s (%s)", bad, op,
                     bucket);
        else
            snprintf(w->what, sizeof(w->what), "%s, from the backward of %s (%s)", bad, op, bucket);
        w->found = w->seq;
        return;
    }
    int64_t lo, count;
    nf_written(node, &lo, &count);
    if (forward && nf_check_range(w, node->out, false, lo, count, bad, sizeof(bad))) {
        char params[300] = ""; /* the parameters it read: what a layer's op is named by */
        for (int j = 0; j < node->n_in; j++) {
            int64_t e;
            const int p = node->in[j] && node->in[j]->dtype == MT_F32
                              ? nf_param_at(w->s, node->in[j]->data, false, &e)
                              : -1;
            if (p >= 0 && strlen(params) + strlen(w->m->info[p].name) + 3 < sizeof(params))
                snprintf(params + strlen(params), sizeof(params) - strlen(params), "%s%s",
                         params[0] ? ", " : " (with ", w->m->info[p].name);
        }
        nf_format(w->what, sizeof(w->what),
                  "the forward of %s (%s) computed %s from finite inputs%s%s", op, bucket, bad,
                  params, params[0] ? ")" : "");
        w->found = w->seq;
    }
}

bool mt_sharded_find_nonfinite(mt_sharded *s, int64_t n_micro, mt_micro_batch_fn batch, void *user,
                               char *msg, size_t n) {
    mt_comm *comm = s->zero->comm;
    nf_watch w = {.s = s, .m = s->model, .be = s->ctx->be, .found = -1};
    int64_t at = INT64_MAX, micro = -1; /* this rank's first finding: micro-batch, kernel */
    mt_zero_zero_grad(s->zero);         /* the rejected step's gradients would show in the checks */
    s->ctx->node_hook = nf_hook;
    s->ctx->node_user = &w;
    for (int64_t mb = 0; mb < n_micro; mb++) {
        mt_minimax_batch b = batch(user, mb);
        w.seq = 0;
        mt_sharded_micro_step(s, &b, NULL);
        if (w.found >= 0 && micro < 0) micro = mb, at = w.found; /* later ones: not checked */
    }
    s->ctx->node_hook = NULL;
    s->ctx->node_user = NULL;
    /* the earliest finding over the ranks (micro-batch, then kernel), its text from its rank */
    const int P = comm->size;
    int64_t *keys = mt_calloc((size_t)P, sizeof(int64_t), "non-finite findings");
    keys[comm->rank] = micro < 0 ? INT64_MAX : micro * ((int64_t)1 << 40) + at;
    comm->allreduce_i64(comm, keys, P); /* each rank's slot is its own key, the others 0 */
    int root = 0;
    for (int r = 1; r < P; r++)
        if (keys[r] < keys[root]) root = r;
    const bool any = keys[root] != INT64_MAX;
    free(keys);
    char text[1024] = "";
    if (comm->rank == root && any)
        snprintf(text, sizeof(text),
                 "the first non-finite value (rank %d, micro-batch %lld of "
                 "%lld, run again with checks): %s",
                 root, (long long)micro + 1, (long long)n_micro, w.what);
    comm->bcast(comm, text, sizeof(text), root);
    if (!any)
        snprintf(text, sizeof(text),
                 "run again with checks, every activation and gradient of every rank was finite "
                 "(the sums over the ranks and micro-batches may overflow: the losses, the "
                 "gradients)");
    snprintf(msg, n, "%s", text);
    return any;
}
