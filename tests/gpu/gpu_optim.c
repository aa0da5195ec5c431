/* gpu_optim.c: the sharded optimizer's vector kernels on the device backend (kernels/cuda/optim.cu)
 * against the CPU reference (kernels/cpu/optim.c) on the same inputs: accumulation and scaling
 * bit-exact, the sum of squares to 1e-12 (double, another order), the non-finite count exact,
 * AdamW to 4 fp32 ulps of the magnitude of each value's terms (the device fuses multiply-adds),
 * the bf16 casts of the bf16 parameter gathers bit-exact.
 * Case gpu_optim runs on a GPU (skipped without one); op_cuda_emu_optim runs the same case through
 * the CPU emulator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"

static const mt_backend *dev;

static float *dev_upload(const float *host, int64_t n) {
    float *d = dev->alloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    MT_CHECK(d, "gpu_optim: out of device memory");
    dev->to_device(d, host, sizeof(float) * (size_t)n);
    return d;
}

static void dev_download(float *host, const float *d, int64_t n) {
    dev->to_host(host, d, sizeof(float) * (size_t)n);
    dev->free((void *)d);
}

/* Worst |a - b| / scale over elements, in units of fp32 epsilon. The scale is the sum of the
 * magnitudes of the terms that formed the value: where terms cancel, a fused multiply-add (the
 * device, or the emulator's C++) moves the result by ulps of the terms, not of the result. */
static double max_term_ulps(const float *a, const float *b, const double *scale, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (scale[i] * 1.1920929e-7 + 1e-37);
        if (d > worst) worst = d;
    }
    return worst;
}

static void check_size(int64_t n, mt_rng *r) {
    const mt_backend *cpu = mt_backend_cpu();
    size_t bytes = sizeof(float) * (size_t)(n > 0 ? n : 1);
    float *x = malloc(bytes), *y = malloc(bytes), *got = malloc(bytes), *p = malloc(bytes),
          *m = malloc(bytes), *v = malloc(bytes), *g = malloc(bytes), *gp = malloc(bytes),
          *gm = malloc(bytes), *gv = malloc(bytes);
    mt_fill_normal(x, n, 1.0f, r);
    mt_fill_normal(y, n, 3.0f, r);

    /* dst += src: the same fp32 operations on both sides */
    float *dx = dev_upload(x, n), *dy = dev_upload(y, n);
    dev->vec_add(dx, dy, n);
    cpu->vec_add(x, y, n);
    dev_download(got, dx, n);
    dev->free(dy);
    EXPECT(n == 0 || memcmp(got, x, sizeof(float) * (size_t)n) == 0,
           "n=%lld: vec_add differs from the CPU", (long long)n);

    /* the bf16 gathers' casts: rounding bit-exact (ties to even, NaN, inf, large values), and
     * back exactly; the ties are planted: fp32 values halfway between two bf16 values */
    if (n > 0) {
        uint16_t *h16 = malloc(sizeof(uint16_t) * (size_t)n),
                 *c16 = malloc(sizeof(uint16_t) * (size_t)n);
        float *t = malloc(bytes);
        memcpy(t, x, bytes);
        for (int64_t i = 0; i < n; i += 7) { /* halfway: the 16 low bits 0x8000 */
            uint32_t u;
            memcpy(&u, &t[i], 4);
            u = (u & 0xffff0000u) | 0x8000u;
            memcpy(&t[i], &u, 4);
        }
        if (n > 5) t[1] = NAN, t[2] = INFINITY, t[4] = 3.4e38f;
        float *dt = dev_upload(t, n);
        uint16_t *d16 = dev->alloc(sizeof(uint16_t) * (size_t)n);
        dev->vec_to_bf16(d16, dt, n);
        dev->to_host(h16, d16, sizeof(uint16_t) * (size_t)n);
        cpu->vec_to_bf16(c16, t, n);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) /* any NaN is a NaN: compare the class there */
            bad += isnan(t[i]) ? (h16[i] & 0x7fff) <= 0x7f80 : h16[i] != c16[i];
        dev->vec_from_bf16(dt, d16, n);
        dev_download(got, dt, n);
        cpu->vec_from_bf16(t, c16, n);
        for (int64_t i = 0; i < n; i++) bad += !isnan(t[i]) && memcmp(&got[i], &t[i], 4) != 0;
        EXPECT(bad == 0, "n=%lld: %d bf16 casts differ from the CPU", (long long)n, bad);
        dev->free(d16);
        free(h16), free(c16), free(t);
    }

    /* norm and non-finite count, with a few inf/nan planted */
    if (n > 10) {
        x[3] = INFINITY;
        x[n / 2] = NAN;
        x[n - 1] = -INFINITY;
    }
    double ss_cpu, ss_dev;
    int64_t bad_cpu, bad_dev;
    cpu->vec_stats(x, n, &ss_cpu, &bad_cpu);
    dx = dev_upload(x, n);
    dev->vec_stats(dx, n, &ss_dev, &bad_dev);
    dev->free(dx);
    EXPECT(bad_dev == bad_cpu && bad_cpu == (n > 10 ? 3 : 0), "n=%lld: non-finite %lld vs %lld",
           (long long)n, (long long)bad_dev, (long long)bad_cpu);
    if (n > 10) { /* the finite part */
        x[3] = x[n / 2] = x[n - 1] = 0.5f;
        cpu->vec_stats(x, n, &ss_cpu, &bad_cpu);
        dx = dev_upload(x, n);
        dev->vec_stats(dx, n, &ss_dev, &bad_dev);
        dev->free(dx);
    }
    EXPECT(fabs(ss_dev - ss_cpu) <= 1e-12 * ss_cpu, "n=%lld: sum of squares %.17g vs %.17g",
           (long long)n, ss_dev, ss_cpu);

    /* AdamW with decay on a mid-training state (step 7), on the gradient as it is and times a
     * clipping factor (gscale) */
    for (int pass = 0; pass < 2; pass++) {
        mt_fill_normal(p, n, 0.02f, r);
        mt_fill_normal(m, n, 1e-3f, r);
        mt_fill_uniform(v, n, 0.0f, 1e-5f, r);
        mt_fill_normal(g, n, 1e-2f, r);
        mt_adamw_args a = {.keep = 1.0f - 3e-4f * 0.1f,
                           .b1 = 0.9f,
                           .b2 = 0.95f,
                           .step_size = (float)(3e-4 / (1 - pow(0.9, 7))),
                           .bc2_sqrt = (float)sqrt(1 - pow(0.95, 7)),
                           .eps = 1e-8f,
                           .gscale = pass ? 0.37f : 0.0f};
        const float gs = pass ? 0.37f : 1.0f;
        float *dp = dev_upload(p, n), *dm = dev_upload(m, n), *dv = dev_upload(v, n),
              *dg = dev_upload(g, n);
        double *sp = malloc(sizeof(double) * (size_t)(n + 1)),
               *sm = malloc(sizeof(double) * (size_t)(n + 1)),
               *sv = malloc(sizeof(double) * (size_t)(n + 1));
        for (int64_t i = 0; i < n; i++) { /* term magnitudes, from the state before the update */
            const double gi = (double)(g[i] * gs);
            double mn = m[i] + (gi - m[i]) * (1.0 - a.b1), vn = v[i] * a.b2 + (1 - a.b2) * gi * gi;
            sm[i] = fabs(m[i]) + fabs((gi - m[i]) * (1.0 - a.b1));
            sv[i] = fabs(v[i] * a.b2) + fabs((1 - a.b2) * gi * gi);
            sp[i] = fabs(p[i]) + fabs(a.step_size * mn / (sqrt(vn) / a.bc2_sqrt + a.eps)) *
                                     (1 + sm[i] / (fabs(mn) + 1e-30));
        }
        /* the CPU's gscale is the gradient scaled in place first (what clipping did), bit for bit
         */
        float *p2 = NULL, *m2 = NULL, *v2 = NULL, *g2 = NULL;
        if (pass) {
            p2 = malloc(bytes), m2 = malloc(bytes), v2 = malloc(bytes), g2 = malloc(bytes);
            for (int64_t i = 0; i < n; i++) p2[i] = p[i], m2[i] = m[i], v2[i] = v[i];
            for (int64_t i = 0; i < n; i++) g2[i] = g[i] * gs;
        }
        dev->adamw(dp, dm, dv, dg, n, &a);
        cpu->adamw(p, m, v, g, n, &a);
        if (pass) {
            mt_adamw_args a1 = a;
            a1.gscale = 1.0f;
            cpu->adamw(p2, m2, v2, g2, n, &a1);
            EXPECT(n == 0 || (memcmp(p2, p, sizeof(float) * (size_t)n) == 0 &&
                              memcmp(m2, m, sizeof(float) * (size_t)n) == 0 &&
                              memcmp(v2, v, sizeof(float) * (size_t)n) == 0),
                   "n=%lld: adamw with gscale differs from adamw on the scaled gradient",
                   (long long)n);
            free(p2), free(m2), free(v2), free(g2);
        }
        dev_download(gp, dp, n);
        dev_download(gm, dm, n);
        dev_download(gv, dv, n);
        dev->free(dg); /* dev_download freed the others */
        double up = max_term_ulps(gp, p, sp, n), um = max_term_ulps(gm, m, sm, n),
               uv = max_term_ulps(gv, v, sv, n);
        printf("  n=%lld: adamw%s max diff in ulps of the terms: p %.2f m %.2f v %.2f\n",
               (long long)n, pass ? " (gscale 0.37)" : "", up, um, uv);
        EXPECT(up <= 4 && um <= 4 && uv <= 4,
               "n=%lld: adamw%s differs by more than 4 ulps of its terms", (long long)n,
               pass ? " (gscale 0.37)" : "");
        free(sp), free(sm), free(sv);
    }
    free(x), free(y), free(got), free(p), free(m), free(v), free(g), free(gp), free(gm), free(gv);
}

static int case_optim(void) {
    dev = mt_backend_cuda();
    if (!dev) {
        printf("no usable CUDA device (or the CUDA backend was not built)\n");
        return MT_TEST_SKIP;
    }
    mt_backend_validate(dev);
    mt_rng r;
    mt_rng_seed(&r, 11);
    const int64_t sizes[] = {0, 1, 17, 1000, 300001};
    for (int i = 0; i < (int)(sizeof(sizes) / sizeof(sizes[0])); i++) check_size(sizes[i], &r);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {{"gpu_optim", case_optim}};
MT_TEST_MAIN(cases)
