/* op_cached_extend.c: the cached forward's extension (models/generate.h,
 * mt_minimax_forward_cached on one filled row with T > 1: a prompt prefilled in chunks, what
 * minimax-serve's chunked prefill runs). On the transformers fixtures of each mixer kind --
 * tiny_released8 (Text-01: lightning and softmax layers), tiny_m2 (softmax attention with the
 * whole-width QK norm), tiny_m3 (MSA: 4-token blocks, top-3, so the prompt is block-sparse
 * from position 12 on) -- the logits of every position of one prefill of the prompt (ids_b's
 * rows one after the other: 140 tokens, 46 for tiny_m3) against a short prefill followed by
 * chunks of 1 (a decode step), 3, 7 and the rest: max |diff| <= 1e-4 and <= 1e-5 max |logit|,
 * the bounds the cached decode is held to against the plain forward (tests/models/parity_model.c,
 * pm_check_decode). A prefill asking for its last position's logits only (last_only), then a
 * decode step, holds the same bounds against positions N - 2 and N - 1. Filled rows with B > 1
 * and T > 1 stay refused in one line.
 *
 * op_cached_extend_<fixture> runs on the CPU backend, through its chunk ops (one call per layer:
 * decode.attention_chunk, lightning_chunk, msa_chunk); gpu_cached_extend_<fixture> on the CUDA
 * backend, which has none, through the model's fallback (the decode step once per token;
 * skipped without a device), and as op_cuda_emu_cached_extend_<fixture> on the CUDA emulator
 * (tests/models/cached_extend.cmake). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"
#include "models/config.h"
#include "models/generate.h"
#include "models/minimax.h"
#include "models/safetensors.h"
#include "models/weights.h"
#include "parity_model.h" /* the bounds: PM_LOGIT_ATOL, PM_LOGIT_RTOL */

static void ce_fixture_path(char *out, size_t n, const char *name, const char *suffix) {
    const char *src = getenv("MT_SOURCE_DIR");
    snprintf(out, n, "%s/tests/fixtures/models/%s%s", src ? src : ".", name, suffix);
}

/* The fixture's ids_b, its rows one after the other as one prompt (*T tokens, malloc'ed). */
static int32_t *ce_prompt(const char *name, int *T) {
    char path[1200];
    ce_fixture_path(path, sizeof(path), name, ".ref.safetensors");
    mt_safetensors *st = mt_safetensors_open(path);
    const mt_st_tensor *t = mt_safetensors_find(st, "ids_b");
    MT_CHECK(t && t->ndim == 2, "%s: no (B,T) ids_b", path);
    float *f = mt_malloc((size_t)t->numel * sizeof(float), "ids_b");
    mt_safetensors_read(st, t, 0, t->numel, f);
    *T = (int)t->numel;
    int32_t *ids = mt_malloc((size_t)*T * sizeof(int32_t), "prompt");
    for (int i = 0; i < *T; i++) ids[i] = (int32_t)f[i];
    free(f);
    mt_safetensors_close(st);
    return ids;
}

/* One cached forward of ids[0..n) on kv (row 0); its logits copied into host (n V floats). */
static void ce_forward(mt_minimax *m, mt_ctx *c, mt_minimax_cache *kv, const int32_t *ids, int n,
                       float *host) {
    mt_ctx_reset(c);
    mt_tensor *x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){1, n}, "chunk");
    c->be->to_device(x->data, ids, (size_t)n * sizeof(int32_t));
    const mt_tensor *lg = mt_minimax_forward_cached(m, c, x, kv, NULL, false);
    EXPECT(lg->shape[0] == 1 && lg->shape[1] == n, "logits %s for %d tokens", mt_shape_str(lg), n);
    const float *y = mt_gen_logits_host(c, lg, 0, n, host);
    if (y != host) memcpy(host, y, (size_t)n * (size_t)m->cfg.vocab_size * sizeof(float));
}

/* A prefill of ids[0..n) on kv (row 0) that returns its last position's logits only
 * (last_only), copied into host (V floats). */
static void ce_forward_last(mt_minimax *m, mt_ctx *c, mt_minimax_cache *kv, const int32_t *ids,
                            int n, float *host) {
    mt_ctx_reset(c);
    mt_tensor *x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){1, n}, "prompt");
    c->be->to_device(x->data, ids, (size_t)n * sizeof(int32_t));
    const mt_tensor *lg = mt_minimax_forward_cached(m, c, x, kv, NULL, true);
    EXPECT(lg->shape[0] == 1 && lg->shape[1] == 1, "last-only logits %s for %d tokens",
           mt_shape_str(lg), n);
    const float *y = mt_gen_logits_host(c, lg, 0, 1, host);
    if (y != host) memcpy(host, y, (size_t)m->cfg.vocab_size * sizeof(float));
}

/* The largest |a - b| over n floats (and the largest |b| into *ref). */
static double ce_max_diff(const float *a, const float *b, int64_t n, double *ref) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        *ref = fmax(*ref, fabs((double)b[i]));
    }
    return d;
}

/* For the refusal: two filled rows extended by 3 tokens each. */
static void ce_two_rows(void *arg) {
    mt_minimax *m = arg;
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_minimax_cache kv;
    mt_minimax_cache_init(&kv, mt_backend_cpu(), &m->cfg, 2, 16);
    kv.t_len[0] = kv.t_len[1] = 4;
    mt_tensor *x = mt_test_tensor(MT_I32, 2, (int64_t[]){2, 3}, false, "ids");
    memset(x->data, 0, 6 * sizeof(int32_t));
    mt_minimax_forward_cached(m, &c, x, &kv, NULL, false);
}

/* The prompt prefilled whole, and prefilled as `first` tokens then chunks of 1, 3, 7 and the
 * rest, on backend be: every position's logits compared. */
static int ce_case(const char *name, const mt_backend *be, int first) {
    if (!be) {
        printf("  no CUDA backend (a build without -DMT_CUDA=ON, or no device): skipped\n");
        return MT_TEST_SKIP;
    }
    char dir[1200];
    ce_fixture_path(dir, sizeof(dir), name, "");
    mt_minimax_config cfg;
    mt_minimax_config_load(dir, &cfg);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    char why[512];
    MT_CHECK(mt_gen_backend_can_decode(&m, be, why, sizeof(why)), "%s", why);
    float **data = mt_weights_load_backend(dir, &m, be);
    int N;
    int32_t *ids = ce_prompt(name, &N);
    const int64_t V = cfg.vocab_size;
    mt_ctx c;
    mt_ctx_init(&c, be, (size_t)256 << 20, 16384);

    float *whole = mt_malloc((size_t)(N * V) * sizeof(float), "whole");
    float *part = mt_malloc((size_t)(N * V) * sizeof(float), "chunked");
    mt_minimax_cache kv;
    mt_minimax_cache_init(&kv, be, &cfg, 1, N);
    ce_forward(&m, &c, &kv, ids, N, whole);
    mt_minimax_cache_free(&kv);

    /* a prefill of all but the last token asking for its last position only, then a decode
     * step: positions N - 2 and N - 1 of the whole prefill (the cache filled as without) */
    float *lastp = mt_malloc((size_t)(2 * V) * sizeof(float), "last-only logits");
    mt_minimax_cache_init(&kv, be, &cfg, 1, N);
    ce_forward_last(&m, &c, &kv, ids, N - 1, lastp);
    ce_forward(&m, &c, &kv, ids + N - 1, 1, lastp + V);
    mt_minimax_cache_free(&kv);
    double lref = 0;
    const double ldiff = ce_max_diff(lastp, whole + (size_t)(N - 2) * V, 2 * V, &lref);
    printf("  %-10s %s backend: last-only prefill of %d tokens and a step, max|diff| %.3e\n", name,
           be->name, N - 1, ldiff);
    EXPECT(ldiff <= PM_LOGIT_ATOL && ldiff <= PM_LOGIT_RTOL * lref,
           "%s: last-only prefill and step differ from one prefill by %.3e (max |logit| %.3f)",
           name, ldiff, lref);
    free(lastp);

    /* chunked, into row 1 of a two-row cache through its one-row view, as a server fills the
     * row of one request while the others decode */
    const int steps[] = {first, 1, 3, 7, N}; /* the last: the rest */
    mt_minimax_cache_init(&kv, be, &cfg, 2, N);
    mt_minimax_cache view;
    mt_minimax_cache_view_alloc(&view, cfg.num_hidden_layers);
    mt_minimax_cache_row(&kv, 1, &view);
    int t0 = 0, n_calls = 0;
    for (int s = 0; s < 5 && t0 < N; s++) {
        const int n = t0 + steps[s] < N && s < 4 ? steps[s] : N - t0;
        ce_forward(&m, &c, &view, ids + t0, n, part + (size_t)t0 * V);
        t0 += n;
        n_calls++;
        EXPECT(kv.t_len[1] == t0 && kv.t_len[0] == 0,
               "after %d calls the rows hold %d and %d positions, expected 0 and %d", n_calls,
               kv.t_len[0], kv.t_len[1], t0);
    }
    mt_minimax_cache_view_free(&view);
    mt_minimax_cache_free(&kv);

    double dmax = 0, rmax = 0;
    int worst = 0;
    for (int64_t t = 0; t < N; t++)
        for (int64_t v = 0; v < V; v++) {
            const double d = fabs((double)part[t * V + v] - whole[t * V + v]);
            if (d > dmax) dmax = d, worst = (int)t;
            rmax = fmax(rmax, fabs((double)whole[t * V + v]));
        }
    const int cover = cfg.msa_topk * cfg.msa_block;
    printf("  %-10s %s backend: %d tokens as %d + 1 + 3 + 7 + %d; max|diff| %.3e (position %d) "
           "max|ref| %.3f ratio %.3e",
           name, be->name, N, first, N - first - 11, dmax, worst, rmax, dmax / rmax);
    if (cover > 0) printf("; MSA dense up to %d positions", cover);
    printf("\n");
    EXPECT(dmax <= PM_LOGIT_ATOL && dmax <= PM_LOGIT_RTOL * rmax,
           "%s: chunked prefill logits differ from one prefill by %.3e (max |logit| %.3f)", name,
           dmax, rmax);

    if (be == mt_backend_cpu()) /* filled rows: one row per extension, refused in one line */
        EXPECT(mt_expect_death(ce_two_rows, &m, "an extension (T > 1) one filled row (B = 1)"),
               "two filled rows extended by 3 tokens: not refused as expected");

    free(whole);
    free(part);
    free(ids);
    mt_ctx_free(&c);
    mt_weights_backend_free(&m, be, data);
    mt_minimax_free(&m);
    return MT_TEST_OK;
}

/* Text-01: the first 17 tokens cross a lightning block (16), so the chunks step the state the
 * block-form prefill left. */
static int op_cached_extend_text01(void) { return ce_case("tiny_released8", mt_backend_cpu(), 17); }
static int op_cached_extend_m2(void) { return ce_case("tiny_m2", mt_backend_cpu(), 9); }
/* M3: 5 tokens (dense), the 7-token chunk crosses the dense/sparse switch at 12, the rest is
 * sparse */
static int op_cached_extend_m3(void) { return ce_case("tiny_m3", mt_backend_cpu(), 5); }
static int gpu_cached_extend_text01(void) {
    return ce_case("tiny_released8", mt_backend_cuda(), 17);
}
static int gpu_cached_extend_m2(void) { return ce_case("tiny_m2", mt_backend_cuda(), 9); }
static int gpu_cached_extend_m3(void) { return ce_case("tiny_m3", mt_backend_cuda(), 5); }
/* sliding_window 3 (tools/make_fixtures_window_jitter.py): each chunk's tokens see the last 3
 * cache positions only, the prompt's and the earlier chunks' */
static int op_cached_extend_window(void) { return ce_case("tiny_window", mt_backend_cpu(), 17); }
static int gpu_cached_extend_window(void) { return ce_case("tiny_window", mt_backend_cuda(), 17); }

static const mt_test_case cases[] = {
    {"op_cached_extend_text01", op_cached_extend_text01},
    {"op_cached_extend_m2", op_cached_extend_m2},
    {"op_cached_extend_m3", op_cached_extend_m3},
    {"gpu_cached_extend_text01", gpu_cached_extend_text01},
    {"gpu_cached_extend_m2", gpu_cached_extend_m2},
    {"gpu_cached_extend_m3", gpu_cached_extend_m3},
    {"op_cached_extend_window", op_cached_extend_window},
    {"gpu_cached_extend_window", gpu_cached_extend_window},
};
MT_TEST_MAIN(cases)
