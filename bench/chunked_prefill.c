/* bench/chunked_prefill.c: what a chunked prefill costs against one prefill (models/generate.h,
 * mt_minimax_forward_cached extending one filled row, what minimax-serve's chunked prefill
 * runs). One prompt of N random tokens: one cached forward of all N, against a first chunk of C
 * then extensions of C (the last shorter). Median of `reps` runs of each after one warm-up;
 * threads from OMP_NUM_THREADS. The CPU backend's extension runs each mixer's core in one
 * backend call per chunk (decode.attention_chunk, lightning_chunk, msa_chunk); the same backend
 * without them (the model's fallback, one decode step per token, as on the CUDA backend) is timed
 * too.
 *
 * Usage: bench-chunked-prefill [config.json] [N] [C] [reps]
 *        (default recipes/configs/tiny.json: run it from the repository root; 2000, 128, 5)
 *
 * Random weights (transformers' initialisation, mt_weights_init_random). */
#include <stdio.h>
#include <stdlib.h>

#include "core/check.h"
#include "bench/bench_util.h"
#include "models/config.h"
#include "models/generate.h"
#include "models/minimax.h"
#include "models/weights.h"

/* Seconds of one prompt of n tokens in chunks of `chunk` (chunk >= n: one prefill). */
static double cp_run(mt_minimax *m, mt_ctx *c, const int32_t *ids, int n, int chunk) {
    mt_minimax_cache kv;
    mt_minimax_cache_init(&kv, c->be, &m->cfg, 1, n);
    const double t0 = bench_now();
    for (int p = 0; p < n; p += chunk) {
        const int len = n - p < chunk ? n - p : chunk;
        mt_ctx_reset(c);
        mt_tensor *x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){1, len}, "chunk");
        c->be->to_device(x->data, ids + p, (size_t)len * sizeof(int32_t));
        mt_minimax_forward_cached(m, c, x, &kv, NULL, false);
    }
    c->be->sync();
    const double dt = bench_now() - t0;
    mt_minimax_cache_free(&kv);
    return dt;
}

/* Medians of `reps` runs of the three ways after one warm-up, interleaved (one rep of each in
 * turn), so a slower spell of a shared machine weighs on all three alike: t[0] one prefill,
 * t[1] chunks on be, t[2] chunks on steps (be without its chunk ops). */
static void cp_medians(mt_minimax *m, mt_ctx *c, const mt_backend *be, const mt_backend *steps,
                       const int32_t *ids, int n, int chunk, int reps, double med[3]) {
    double *t = mt_malloc(sizeof(double) * 3 * (size_t)reps, "bench times");
    for (int r = -1; r < reps; r++)
        for (int w = 0; w < 3; w++) {
            c->be = w == 2 ? steps : be;
            const double dt = cp_run(m, c, ids, n, w == 0 ? n : chunk);
            if (r >= 0) t[w * reps + r] = dt;
        }
    c->be = be;
    for (int w = 0; w < 3; w++) med[w] = bench_median(t + w * reps, reps);
    free(t);
}

int main(int argc, char **argv) {
    const char *config = argc > 1 ? argv[1] : "recipes/configs/tiny.json";
    const int n = argc > 2 ? atoi(argv[2]) : 2000, chunk = argc > 3 ? atoi(argv[3]) : 128;
    const int reps = argc > 4 ? atoi(argv[4]) : 5;
    MT_CHECK(n >= 1 && chunk >= 1 && reps >= 1,
             "bench-chunked-prefill: N %d, C %d and reps %d must be >= 1", n, chunk, reps);

    mt_minimax_config cfg;
    mt_minimax_config_load(config, &cfg);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    float **data = mt_malloc(sizeof(float *) * (size_t)m.n_buckets, "bench buckets");
    for (int b = 0; b < m.n_buckets; b++) {
        data[b] = mt_malloc(sizeof(float) * (size_t)m.bucket_numel[b], "bench bucket");
        mt_minimax_bind_bucket(&m, b, data[b], NULL);
    }
    mt_weights_init_random(&m, 7);
    int32_t *ids = mt_malloc(sizeof(int32_t) * (size_t)n, "bench prompt");
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int t = 0; t < n; t++)
        ids[t] = (int32_t)(bench_uniform(&s) * (float)cfg.vocab_size) % cfg.vocab_size;

    mt_ctx c;
    mt_ctx_init(&c, mt_backend_cpu(), mt_minimax_generate_arena_bytes(&cfg, 1, n),
                64 * (cfg.num_hidden_layers + 4));
    /* the same backend without the chunk ops: the model's fallback, one step per token */
    mt_backend steps = *mt_backend_cpu();
    steps.decode.attention_chunk = NULL;
    steps.decode.lightning_chunk = NULL;
    steps.decode.msa_chunk = NULL;
    double med[3];
    cp_medians(&m, &c, mt_backend_cpu(), &steps, ids, n, chunk, reps, med);
    const double t_one = med[0], t_chunked = med[1], t_steps = med[2];
    printf("%s: %d layers, one prompt of %d tokens, median of %d\n", config, cfg.num_hidden_layers,
           n, reps);
    printf("  one prefill            %8.3f s\n", t_one);
    printf("  chunks of %-4d         %8.3f s  (%d forwards)\n", chunk, t_chunked,
           (n + chunk - 1) / chunk);
    printf("  same, one step a token %8.3f s  (the fallback without the chunk ops)\n", t_steps);
    printf("  chunked / one: %.2fx (one step a token: %.2fx)\n", t_chunked / t_one,
           t_steps / t_one);

    mt_ctx_free(&c);
    free(ids);
    for (int b = 0; b < m.n_buckets; b++) free(data[b]);
    free(data);
    mt_minimax_free(&m);
    return 0;
}
