/* op_attention_runs.c: the fp32 attention kernels (kernels/cpu/attention.c) on packed samples
 * whose ids rise along the row, which run each sample as a sequence of its own (tiles from the
 * sample's first row). A sample must get, wherever it is packed, the bits it gets alone in a
 * row without segments: output, lse and its rows' dq, dk, dv. Samples of 37, 83 (across the
 * 64-row tiles from row 37), 1 and 29 rows, and one of 150 rows after 5; D = 8 and 16 (the
 * register products), GQA 2:1. The kernels' values against references are checked elsewhere
 * (op_attention_forward, grad_attention, op_attention_window). */
#include "tests/support/harness.h"
#include "kernels/cpu/attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *zalloc(size_t bytes) { return calloc(bytes ? bytes : 1, 1); }

/* Forward and backward of (B, T) rows: out (B T H D), lse (B H T), dq (B T H D), dk, dv
 * (B T Hkv D), the gradients accumulated into zeros. */
typedef struct {
    float *out, *lse, *dq, *dk, *dv;
} attn_result;

static attn_result run(const float *q, const float *k, const float *v, const float *dout,
                       const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                       int64_t D) {
    const size_t nq = (size_t)(B * T * H * D), nk = (size_t)(B * T * Hkv * D);
    attn_result r = {zalloc(4 * nq), zalloc(4 * (size_t)(B * H * T)), zalloc(4 * nq),
                     zalloc(4 * nk), zalloc(4 * nk)};
    double *delta = zalloc(sizeof(double) * (size_t)(B * H * T));
    const float scale = 1.0f / sqrtf((float)D);
    cpu_attention_fwd(r.out, r.lse, q, k, v, seg, B, T, H, Hkv, D, scale);
    cpu_attention_bwd(r.dq, r.dk, r.dv, delta, dout, r.out, r.lse, q, k, v, seg, B, T, H, Hkv, D,
                      scale);
    free(delta);
    return r;
}

static void result_free(attn_result *r) {
    free(r->out), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
}

/* Rows [s0, s0 + L) of batch row b of the packed (B, T) run against the lone (1, L) run. */
static void check_sample(const char *label, const attn_result *p, const attn_result *a, int64_t b,
                         int64_t T, int64_t s0, int64_t L, int64_t H, int64_t Hkv, int64_t D) {
    const size_t rq = (size_t)(H * D), rk = (size_t)(Hkv * D);
    const size_t oq = (size_t)(b * T + s0) * rq, ok = (size_t)(b * T + s0) * rk;
    EXPECT(!memcmp(p->out + oq, a->out, 4 * rq * (size_t)L), "%s: out differs", label);
    EXPECT(!memcmp(p->dq + oq, a->dq, 4 * rq * (size_t)L), "%s: dq differs", label);
    EXPECT(!memcmp(p->dk + ok, a->dk, 4 * rk * (size_t)L), "%s: dk differs", label);
    EXPECT(!memcmp(p->dv + ok, a->dv, 4 * rk * (size_t)L), "%s: dv differs", label);
    for (int64_t h = 0; h < H; h++)
        EXPECT(!memcmp(p->lse + (b * H + h) * T + s0, a->lse + h * L, 4 * (size_t)L),
               "%s: lse of head %lld differs", label, (long long)h);
}

/* The inputs of rows [s0, s0 + L) of batch row b, copied out into a (1, L) row. */
static float *rows_of(const float *x, int64_t b, int64_t T, int64_t s0, int64_t L, int64_t w) {
    float *r = zalloc(4 * (size_t)(L * w));
    memcpy(r, x + (size_t)((b * T + s0) * w), 4 * (size_t)(L * w));
    return r;
}

static void check_runs(int64_t D, uint64_t seed) {
    const int64_t B = 2, T = 150, H = 4, Hkv = 2;
    const int64_t starts[2][5] = {{0, 37, 120, 121, 150}, {0, 5, 150, 150, 150}};
    mt_rng rng;
    mt_rng_seed(&rng, seed);
    const int64_t nq = B * T * H * D, nk = B * T * Hkv * D;
    float *q = zalloc(4 * (size_t)nq), *dout = zalloc(4 * (size_t)nq);
    float *k = zalloc(4 * (size_t)nk), *v = zalloc(4 * (size_t)nk);
    mt_fill_normal(q, nq, 1.0f, &rng);
    mt_fill_normal(dout, nq, 1.0f, &rng);
    mt_fill_normal(k, nk, 1.0f, &rng);
    mt_fill_normal(v, nk, 1.0f, &rng);
    int32_t *seg = zalloc(sizeof(int32_t) * (size_t)(B * T));
    for (int64_t b = 0; b < B; b++)
        for (int s = 0; s < 4; s++)
            for (int64_t t = starts[b][s]; t < starts[b][s + 1]; t++)
                seg[b * T + t] = (int32_t)(3 * s + b); /* rising, not consecutive */
    attn_result packed = run(q, k, v, dout, seg, B, T, H, Hkv, D);
    for (int64_t b = 0; b < B; b++)
        for (int s = 0; s < 4; s++) {
            const int64_t s0 = starts[b][s], L = starts[b][s + 1] - s0;
            if (L == 0) continue;
            float *ql = rows_of(q, b, T, s0, L, H * D), *dl = rows_of(dout, b, T, s0, L, H * D);
            float *kl = rows_of(k, b, T, s0, L, Hkv * D), *vl = rows_of(v, b, T, s0, L, Hkv * D);
            attn_result alone = run(ql, kl, vl, dl, NULL, 1, L, H, Hkv, D);
            char label[96];
            snprintf(label, sizeof label, "D=%lld row %lld sample [%lld, %lld)", (long long)D,
                     (long long)b, (long long)s0, (long long)(s0 + L));
            check_sample(label, &packed, &alone, b, T, s0, L, H, Hkv, D);
            result_free(&alone);
            free(ql), free(dl), free(kl), free(vl);
        }
    result_free(&packed);
    free(q), free(dout), free(k), free(v), free(seg);
}

static int test_runs(void) {
    check_runs(8, 1);
    check_runs(16, 2);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_attention_runs", test_runs},
};
MT_TEST_MAIN(cases)
