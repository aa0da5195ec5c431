/* gpu_compare.c: see gpu_compare.h; the rules are stated in gpu_ops.c's header. */
#include "gpu_compare.h"

#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#ifdef MT_CUDA_EMU
#include "emu_schedule.h"
#endif

#define GPU_NODES 64

const mt_backend *dev_be; /* the backend under test */
void *poison;             /* GPU_ARENA bytes of 0xff: NaN as f32 */
bool gpu_self_compare;    /* the comparisons check the device against itself (gpu_compare.h) */

/* ---- inputs ---- */

int64_t gpu_numel(const gpu_input *g) {
    int64_t n = 1;
    for (int i = 0; i < g->ndim; i++) n *= g->shape[i];
    return n;
}

gpu_input gpu_f32(mt_rng *r, int ndim, const int64_t *shape, float amp, bool grad,
                  const char *name) {
    gpu_input g = {.present = true, .dt = MT_F32, .ndim = ndim, .grad = grad, .name = name};
    memcpy(g.shape, shape, sizeof(int64_t) * (size_t)ndim);
    int64_t n = gpu_numel(&g);
    g.host = mt_malloc(sizeof(float) * (size_t)(n ? n : 1), name);
    mt_fill_normal(g.host, n, amp, r);
    return g;
}

gpu_input gpu_i32(int ndim, const int64_t *shape, const int32_t *vals, const char *name) {
    gpu_input g = {.present = true, .dt = MT_I32, .ndim = ndim, .name = name};
    memcpy(g.shape, shape, sizeof(int64_t) * (size_t)ndim);
    int64_t n = gpu_numel(&g);
    g.host = mt_malloc(sizeof(int32_t) * (size_t)(n ? n : 1), name);
    memcpy(g.host, vals, sizeof(int32_t) * (size_t)n);
    return g;
}

gpu_input gpu_none(void) { return (gpu_input){.present = false}; }

void gpu_inputs_free(gpu_input *ins, int n) {
    for (int i = 0; i < n; i++) free(ins[i].host);
}

/* ---- comparison ---- */

/* Downloads t's data (or grad) from the device backend into a new host buffer. */
static void *gpu_download(const mt_tensor *t, bool grad) {
    size_t nb = mt_nbytes(t);
    void *h = mt_malloc(nb ? nb : 4, "download");
    dev_be->to_host(h, grad ? t->grad : t->data, nb);
    return h;
}

static void gpu_check(const char *label, const char *what, const mt_tensor *dev_t,
                      const void *cpu_data, bool grad, bool bitwise) {
    char full[160];
    snprintf(full, sizeof(full), "%s %s", label, what);
    void *got = gpu_download(dev_t, grad);
    int64_t n = mt_numel(dev_t);
    if (dev_t->dtype == MT_F32) {
        /* Non-finite values must match in place (a diverged router row propagates NaN on both
         * backends); they are then left out of the norm. */
        float *a = got, *b = mt_malloc(sizeof(float) * (size_t)(n ? n : 1), "reference copy");
        memcpy(b, cpu_data, sizeof(float) * (size_t)n);
        int64_t odd = 0, same = 0;
        for (int64_t i = 0; i < n; i++) {
            if (isfinite(a[i]) && isfinite(b[i])) continue;
            bool match = (isnan(a[i]) && isnan(b[i])) || a[i] == b[i];
            if (!match && odd++ < 5)
                printf("  %s[%lld]: got %g want %g\n", full, (long long)i, (double)a[i],
                       (double)b[i]);
            same += match;
            a[i] = b[i] = 0.0f;
        }
        EXPECT(odd == 0, "%s: %lld non-finite values differ", full, (long long)odd);
        if (bitwise) { /* the CPU's summation order: the same bits */
            int64_t differ = 0;
            for (int64_t i = 0; i < n; i++) differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
            EXPECT(differ == 0, "%s: %lld of %lld values differ from the CPU's bits", full,
                   (long long)differ, (long long)n);
            printf("  %-32s n=%-8lld %s\n", full, (long long)n,
                   differ ? "MISMATCH" : "bit-identical to the CPU");
        }
        if (same) printf("  %-32s %lld matching non-finite values\n", full, (long long)same);
        mt_check_rel_l2(full, a, b, n, GPU_TOL);
        free(b);
    } else {
        int64_t bad = 0;
        const int32_t *a = got, *b = cpu_data;
        for (int64_t i = 0; i < n; i++)
            if (a[i] != b[i] && bad++ < 5)
                printf("  %s[%lld]: got %d want %d\n", full, (long long)i, a[i], b[i]);
        EXPECT(bad == 0, "%s: %lld of %lld integers differ", full, (long long)bad, (long long)n);
        printf("  %-32s n=%-8lld %s\n", full, (long long)n, bad ? "MISMATCH" : "exact");
    }
    free(got);
}

/* ---- MT_GPU_COMPARE_ONLY ---- */

static int filter_state = -1; /* -1: not read yet; 0: no filter; 1: filter_re compiled */
static regex_t filter_re;
static int filter_ran, filter_left;

static bool gpu_selected(const char *label) {
    if (filter_state < 0) {
        const char *f = getenv("MT_GPU_COMPARE_ONLY");
        filter_state = f && *f;
        if (filter_state && regcomp(&filter_re, f, REG_EXTENDED | REG_NOSUB) != 0)
            MT_DIE("MT_GPU_COMPARE_ONLY='%s' is not an extended regular expression", f);
    }
    if (!filter_state) return true;
    if (regexec(&filter_re, label, 0, NULL, 0) == 0) {
        filter_ran++;
        return true;
    }
    filter_left++;
    printf("%s: not run (MT_GPU_COMPARE_ONLY)\n", label);
    return false;
}

void gpu_filter_done(void) {
    if (filter_state <= 0) return;
    printf("MT_GPU_COMPARE_ONLY=%s: %d comparisons run, %d left out\n",
           getenv("MT_GPU_COMPARE_ONLY"), filter_ran, filter_left);
    EXPECT(filter_ran > 0, "MT_GPU_COMPARE_ONLY matches none of this case's %d comparisons",
           filter_left);
}

/* Runs build on the CPU backend and on the device backend with the same inputs and compares
 * outputs, saved buffers and input gradients. */
static void gpu_identical_runs(const char *label, gpu_build build, gpu_input *ins, int n_in,
                               void *user, mt_dtype cd);

void gpu_compare(const char *label, gpu_build build, gpu_input *ins, int n_in, void *user,
                 gpu_opts opts) {
    if (!gpu_selected(label)) return;
    if (gpu_self_compare) {
        gpu_identical_runs(label, build, ins, n_in, user, MT_F32);
        return;
    }
    mt_rng r;
    uint64_t h = 1469598103934665603ull;
    for (const char *p = label; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    mt_rng_seed(&r, h);

    mt_ctx cc, dc;
    mt_ctx_init(&cc, mt_backend_cpu(), GPU_ARENA, GPU_NODES);
    mt_ctx_init(&dc, dev_be, GPU_ARENA, GPU_NODES);
    dev_be->to_device(dc.arena.base, poison, GPU_ARENA);

    mt_tensor tc[MT_MAX_IN], td[MT_MAX_IN];
    mt_tensor *pc[MT_MAX_IN] = {0}, *pd[MT_MAX_IN] = {0};
    float *g0[MT_MAX_IN] = {0};
    for (int i = 0; i < n_in; i++) {
        gpu_input *g = &ins[i];
        if (!g->present) continue;
        int64_t n = gpu_numel(g);
        size_t nb = (size_t)n * mt_dtype_size(g->dt);
        void *hc = mt_malloc(nb ? nb : 4, "cpu input");
        memcpy(hc, g->host, nb);
        void *dd = dev_be->alloc(nb);
        MT_CHECK(dd, "%s: cannot allocate input %s on %s", label, g->name, dev_be->name);
        dev_be->to_device(dd, g->host, nb);
        float *gc = NULL;
        void *dg = NULL;
        if (g->grad) {
            g0[i] = mt_malloc(nb ? nb : 4, "initial grad");
            mt_fill_normal(g0[i], n, 0.5f, &r);
            gc = mt_malloc(nb ? nb : 4, "cpu grad");
            memcpy(gc, g0[i], nb);
            dg = dev_be->alloc(nb);
            MT_CHECK(dg, "%s: cannot allocate the gradient of %s", label, g->name);
            dev_be->to_device(dg, g0[i], nb);
        }
        mt_tensor_wrap(&tc[i], g->dt, g->ndim, g->shape, hc, gc, g->name);
        mt_tensor_wrap(&td[i], g->dt, g->ndim, g->shape, dd, dg, g->name);
        td[i].dev = dev_be->dev;
        pc[i] = &tc[i];
        pd[i] = &td[i];
    }

    mt_tensor *ec = NULL, *ed = NULL;
    mt_tensor *oc = build(&cc, pc, user, &ec);
    mt_tensor *od = build(&dc, pd, user, &ed);
    printf("%s: out %s on %s\n", label, mt_shape_str(oc), dev_be->name);
    gpu_check(label, "out", od, oc->data, false, opts.bitwise);
    if (ec) gpu_check(label, ec->name, ed, ec->data, false, opts.bitwise);
    if (oc->requires_grad) { /* the op's own node is the last one on each tape */
        const mt_node *nc = &cc.nodes[cc.n_nodes - 1], *nd = &dc.nodes[dc.n_nodes - 1];
        for (int k = 0; k < MT_MAX_SAVED; k++) {
            EXPECT(!nc->saved[k] == !nd->saved[k], "%s: saved[%d] present on one backend only",
                   label, k);
            if (nc->saved[k] && nd->saved[k])
                gpu_check(label, nc->saved[k]->name, nd->saved[k], nc->saved[k]->data, false,
                          opts.bitwise);
        }

        int64_t no = mt_numel(oc);
        float *seed = mt_malloc(sizeof(float) * (size_t)(no ? no : 1), "seed");
        mt_fill_normal(seed, no, 1.0f, &r);
        mt_backward(&cc, oc, seed);
        mt_backward(&dc, od, seed);
        free(seed);
        for (int i = 0; i < n_in; i++) {
            if (!pc[i] || !pc[i]->grad) continue;
            char what[64];
            snprintf(what, sizeof(what), "d%s", pc[i]->name);
            gpu_check(label, what, pd[i], pc[i]->grad, true, opts.bitwise);
            if (!opts.exact_untouched) continue;
            float *got = gpu_download(pd[i], true);
            const float *want = pc[i]->grad;
            int64_t n = mt_numel(pc[i]), untouched = 0, moved = 0;
            for (int64_t j = 0; j < n; j++) {
                if (memcmp(&want[j], &g0[i][j], sizeof(float)) != 0) continue;
                untouched++;
                moved += memcmp(&got[j], &g0[i][j], sizeof(float)) != 0;
            }
            EXPECT(moved == 0,
                   "%s: %lld of the %lld elements of %s the CPU leaves untouched "
                   "were changed",
                   label, (long long)moved, (long long)untouched, what);
            printf("  %-32s %lld untouched elements, %lld changed\n", what, (long long)untouched,
                   (long long)moved);
            free(got);
        }
    }

    for (int i = 0; i < n_in; i++) {
        if (!pc[i]) continue;
        free(tc[i].data);
        free(tc[i].grad);
        free(g0[i]);
        dev_be->free(td[i].data);
        if (td[i].grad) dev_be->free(td[i].grad);
    }
    mt_ctx_free(&cc);
    mt_ctx_free(&dc);
}

/* ---- bf16 mode ---- */

#define SNAP_MAX 16

/* Host copies of what one run produced: out, the saved buffers, the input gradients. */
typedef struct {
    int n;
    char name[SNAP_MAX][48];
    mt_dtype dt[SNAP_MAX];
    int64_t numel[SNAP_MAX];
    void *host[SNAP_MAX];
    float *init[SNAP_MAX]; /* a gradient's value before the backward, else NULL */
} gpu_snap;

static void snap_add(gpu_snap *s, const mt_backend *be, const char *name, const mt_tensor *t,
                     bool grad, const float *init) {
    MT_CHECK(s->n < SNAP_MAX, "gpu_snap: more than %d tensors", SNAP_MAX);
    int i = s->n++;
    snprintf(s->name[i], sizeof(s->name[i]), "%s", name);
    s->dt[i] = t->dtype;
    s->numel[i] = mt_numel(t);
    size_t nb = mt_nbytes(t);
    s->host[i] = mt_malloc(nb ? nb : 4, "snapshot");
    be->to_host(s->host[i], grad ? t->grad : t->data, nb);
    s->init[i] = NULL;
    if (init) {
        s->init[i] = mt_malloc(nb ? nb : 4, "snapshot init");
        memcpy(s->init[i], init, nb);
    }
}

static void snap_free(gpu_snap *s) {
    for (int i = 0; i < s->n; i++) {
        free(s->host[i]);
        free(s->init[i]);
    }
}

/* Runs build forward and backward on backend be with the given GEMM precision; the random
 * initial gradients and the seed come from label, so every run of a label sees the same. all:
 * also the builder's extra output, and a forward without backward is allowed (the determinism
 * runs); else the op must have a backward (the bf16 rule). */
static void gpu_exec(const mt_backend *be, mt_dtype cd, const char *label, gpu_build build,
                     gpu_input *ins, int n_in, void *user, gpu_snap *s, bool all) {
    mt_rng r;
    uint64_t h = 1469598103934665603ull;
    for (const char *p = label; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    mt_rng_seed(&r, h);
    mt_ctx c;
    mt_ctx_init(&c, be, GPU_ARENA, GPU_NODES);
    c.compute_dtype = cd;
    if (be == dev_be) be->to_device(c.arena.base, poison, GPU_ARENA);
    mt_tensor t[MT_MAX_IN];
    mt_tensor *p[MT_MAX_IN] = {0};
    float *g0[MT_MAX_IN] = {0};
    for (int i = 0; i < n_in; i++) {
        gpu_input *g = &ins[i];
        if (!g->present) continue;
        int64_t n = gpu_numel(g);
        size_t nb = (size_t)n * mt_dtype_size(g->dt);
        void *d = be->alloc(nb), *dg = NULL;
        MT_CHECK(d, "%s: cannot allocate input %s on %s", label, g->name, be->name);
        be->to_device(d, g->host, nb);
        if (g->grad) {
            g0[i] = mt_malloc(nb ? nb : 4, "initial grad");
            mt_fill_normal(g0[i], n, 0.5f, &r);
            dg = be->alloc(nb);
            MT_CHECK(dg, "%s: cannot allocate the gradient of %s", label, g->name);
            be->to_device(dg, g0[i], nb);
        }
        mt_tensor_wrap(&t[i], g->dt, g->ndim, g->shape, d, dg, g->name);
        t[i].dev = be->dev;
        p[i] = &t[i];
    }
    mt_tensor *extra = NULL;
    mt_tensor *out = build(&c, p, user, &extra);
    memset(s, 0, sizeof(*s));
    snap_add(s, be, "out", out, false, NULL);
    if (all && extra) snap_add(s, be, extra->name, extra, false, NULL);
    MT_CHECK(all || out->requires_grad, "%s: the bf16 cases need a backward", label);
    if (out->requires_grad) {
        const mt_node *node = &c.nodes[c.n_nodes - 1];
        for (int k = 0; k < MT_MAX_SAVED; k++)
            if (node->saved[k]) snap_add(s, be, node->saved[k]->name, node->saved[k], false, NULL);
        int64_t no = mt_numel(out);
        float *seed = mt_malloc(sizeof(float) * (size_t)(no ? no : 1), "seed");
        mt_fill_normal(seed, no, 1.0f, &r);
        mt_backward(&c, out, seed);
        free(seed);
    }
    for (int i = 0; i < n_in; i++) {
        if (!p[i]) continue;
        if (p[i]->grad) {
            char what[48];
            snprintf(what, sizeof(what), "d%s", p[i]->name);
            snap_add(s, be, what, p[i], true, g0[i]);
            be->free(p[i]->grad);
        }
        be->free(p[i]->data);
        free(g0[i]);
    }
    mt_ctx_free(&c);
}

static double rel_l2(const float *a, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The bf16 rule of the header on every output, saved buffer and gradient. */
void gpu_compare_bf16(const char *label, gpu_build build, gpu_input *ins, int n_in, void *user) {
    gpu_compare_bf16_opts(label, build, ins, n_in, user, exact);
}

void gpu_compare_bf16_opts(const char *label, gpu_build build, gpu_input *ins, int n_in, void *user,
                           gpu_opts opts) {
    if (!gpu_selected(label)) return;
    if (gpu_self_compare) {
        gpu_identical_runs(label, build, ins, n_in, user, MT_BF16);
        return;
    }
    gpu_snap r32, r16, d16;
    gpu_exec(mt_backend_cpu(), MT_F32, label, build, ins, n_in, user, &r32, false);
    gpu_exec(mt_backend_cpu(), MT_BF16, label, build, ins, n_in, user, &r16, false);
    gpu_exec(dev_be, MT_BF16, label, build, ins, n_in, user, &d16, false);
    printf("%s (bf16 GEMMs) on %s\n", label, dev_be->name);
    EXPECT(r32.n == r16.n && r32.n == d16.n, "%s: %d, %d and %d tensors", label, r32.n, r16.n,
           d16.n);
    for (int i = 0; i < r32.n && i < r16.n && i < d16.n; i++) {
        char full[120];
        snprintf(full, sizeof(full), "%s %s", label, r32.name[i]);
        EXPECT(!strcmp(r32.name[i], d16.name[i]), "%s: tensor %d is %s on the device", full, i,
               d16.name[i]);
        int64_t n = r32.numel[i];
        if (r32.dt[i] != MT_F32) { /* integer buffers: exact on all three runs */
            bool same = !memcmp(r32.host[i], r16.host[i], sizeof(int32_t) * (size_t)n) &&
                        !memcmp(r32.host[i], d16.host[i], sizeof(int32_t) * (size_t)n);
            EXPECT(same, "%s: integer buffers differ", full);
            printf("  %-36s n=%-8lld %s\n", full, (long long)n, same ? "exact" : "MISMATCH");
            continue;
        }
        const float *a32 = r32.host[i], *a16 = r16.host[i], *dv = d16.host[i];
        int64_t nonfinite = 0, moved = 0, untouched = 0;
        for (int64_t j = 0; j < n; j++) {
            nonfinite += !isfinite(a32[j]) || !isfinite(a16[j]) || !isfinite(dv[j]);
            /* an element the bf16 CPU run left at its initial value (an empty expert) */
            if (opts.exact_untouched && r16.init[i] &&
                !memcmp(&a16[j], &r16.init[i][j], sizeof(float))) {
                untouched++;
                moved += memcmp(&dv[j], &r16.init[i][j], sizeof(float)) != 0;
            }
        }
        EXPECT(nonfinite == 0, "%s: %lld non-finite values", full, (long long)nonfinite);
        EXPECT(moved == 0, "%s: %lld of %lld untouched elements changed on the device", full,
               (long long)moved, (long long)untouched);
        double e_ref = rel_l2(a16, a32, n), e_dev = rel_l2(dv, a32, n);
        double e_cpu = rel_l2(dv, a16, n);
        printf("  %-36s e_ref %.3e  e_dev %.3e  (dev vs cpu bf16 %.3e)", full, e_ref, e_dev, e_cpu);
        if (untouched) printf("  %lld untouched", (long long)untouched);
        printf("\n");
        EXPECT(e_ref > 0, "%s: the bf16 run equals the fp32 run: nothing was rounded", full);
        EXPECT(e_dev <= 2 * e_ref, "%s: e_dev %.3e > 2 e_ref %.3e", full, e_dev, 2 * e_ref);
        EXPECT(e_dev >= 0.5 * e_ref, "%s: e_dev %.3e < e_ref / 2 = %.3e: the device did not round",
               full, e_dev, 0.5 * e_ref);
    }
    snap_free(&r32);
    snap_free(&r16);
    snap_free(&d16);
}

/* ---- bit-identical device runs ---- */

/* Run b against run a of the same label, tensor by tensor: every element must have the same
 * bits (for fp32 ones that differ, the count and the worst relative difference are printed). */
static void gpu_expect_same_bits(const char *label, const char *what, const gpu_snap *a,
                                 const gpu_snap *b) {
    EXPECT(a->n == b->n, "%s: %d and %d tensors (%s)", label, a->n, b->n, what);
    for (int i = 0; i < a->n && i < b->n; i++) {
        const size_t es = mt_dtype_size(a->dt[i]);
        const bool same_n = a->numel[i] == b->numel[i];
        int64_t differ = same_n ? 0 : a->numel[i];
        double worst = 0;
        for (int64_t j = 0; same_n && j < a->numel[i]; j++) {
            const char *x = (const char *)a->host[i] + j * es,
                       *y = (const char *)b->host[i] + j * es;
            if (!memcmp(x, y, es)) continue;
            differ++;
            if (a->dt[i] == MT_F32) {
                const double u = *(const float *)x, v = *(const float *)y;
                const double d = fabs(u - v) / fmax(fabs(u), 1e-30);
                worst = isnan(d) ? INFINITY : fmax(worst, d);
            }
        }
        printf("  %-36s n=%-8lld %s", a->name[i], (long long)a->numel[i],
               differ ? "DIFFERENT" : "same bits");
        if (differ) printf(" (%lld elements, worst relative %.2e)", (long long)differ, worst);
        printf("\n");
        EXPECT(!differ, "%s %s: %lld elements differ (%s; worst relative %.2e)", label, a->name[i],
               (long long)differ, what, worst);
    }
}

/* Two bf16 device runs that must agree bit for bit (a fallback path against the path it falls
 * back to): before_a and before_b select what differs. */
void gpu_compare_same_bf16(const char *label, gpu_build build, gpu_input *ins, int n_in, void *user,
                           void (*before_a)(void), void (*before_b)(void)) {
    if (!gpu_selected(label)) return;
    gpu_snap a, b;
    before_a();
    gpu_exec(dev_be, MT_BF16, label, build, ins, n_in, user, &a, false);
    before_b();
    gpu_exec(dev_be, MT_BF16, label, build, ins, n_in, user, &b, false);
    gpu_expect_same_bits(label, "the two runs", &a, &b);
    snap_free(&a);
    snap_free(&b);
}

/* The emulator's schedule (emu_schedule.h); a GPU picks its own order, differently from run to
 * run as it pleases, and has no switch. */
static void gpu_schedule(uint64_t seed) {
#ifdef MT_CUDA_EMU
    emu_schedule_seed(seed);
#else
    (void)seed;
#endif
}

/* On the emulator one shuffled schedule already reorders every block and thread; a GPU's order
 * varies only as it happens to, so it gets one run more. */
#ifdef MT_CUDA_EMU
#define GPU_RUNS 2
#else
#define GPU_RUNS 3
#endif

/* The device run GPU_RUNS times, each time from the same inputs, initial gradients and seed:
 * first in the emulator's own order, then with its blocks and threads shuffled. Every output,
 * saved buffer, extra output and gradient must be bit-identical to the first run's. A kernel
 * whose sums depend on the order its blocks or threads run in (floating-point atomics) differs
 * in the last bits here. */
static void gpu_identical_runs(const char *label, gpu_build build, gpu_input *ins, int n_in,
                               void *user, mt_dtype cd) {
    gpu_snap runs[GPU_RUNS];
    for (int k = 0; k < GPU_RUNS; k++) {
        gpu_schedule((uint64_t)k * 0x9e3779b97f4a7c15ull); /* 0 first: the emulator's own order */
        gpu_exec(dev_be, cd, label, build, ins, n_in, user, &runs[k], true);
    }
    gpu_schedule(0);
    for (int k = 1; k < GPU_RUNS; k++) {
        char what[64];
        snprintf(what, sizeof what, "run %d against run 0", k);
        printf("%s (%s GEMMs) on %s: %s\n", label, cd == MT_BF16 ? "bf16" : "fp32", dev_be->name,
               what);
        gpu_expect_same_bits(label, what, &runs[0], &runs[k]);
    }
    for (int k = 0; k < GPU_RUNS; k++) snap_free(&runs[k]);
}

/* Selects the device backend; MT_TEST_SKIP when there is none. */
int gpu_setup(void) {
    dev_be = mt_backend_cuda();
    if (!dev_be) {
#ifdef MT_WITH_CUDA
        printf("no usable CUDA device (no driver, no GPU, or compute capability < 8.0)\n");
#else
        printf("CUDA backend not built (configure with -DMT_CUDA=ON)\n");
#endif
        return MT_TEST_SKIP;
    }
    if (!poison) {
        poison = mt_malloc(GPU_ARENA, "poison");
        memset(poison, 0xff, GPU_ARENA);
    }
    return MT_TEST_OK;
}
