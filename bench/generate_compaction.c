/* bench/generate_compaction.c: what a finished row costs a batched decode
 * (models/generate.h, mt_minimax_generate_batch). A batch of B prompts where row r stops after
 * (r + 1) * N / B tokens (a stop rule, as a stop string or eos would) against the same batch
 * where every row runs all N tokens: the work a masked batch would do, since a masked row is
 * still computed at every step. With compaction the finished rows leave the step batch, so the
 * decode time should follow the rows still running. The prefill (the same in both) is timed
 * alone (N = 1) and taken off. Median of `reps` runs after one warm-up; threads from
 * OMP_NUM_THREADS.
 *
 * Usage: bench-generate-compaction [config.json] [reps]
 *        (default bench/configs/bench-small.json: run it from the repository root; 3 reps)
 *
 * Shape: B = 8 prompts of 32 random tokens, N = 64 new tokens, greedy, random weights
 * (transformers' initialisation, mt_weights_init_random). */
#include <stdio.h>
#include <stdlib.h>

#include "core/check.h"
#include "bench/bench_util.h"
#include "models/config.h"
#include "models/generate.h"
#include "models/weights.h"

#define GC_B 8
#define GC_T 32
#define GC_N 64

/* Row b stops after (b + 1) * N / B tokens. */
static bool gc_stop_ragged(void *user, int b, const int32_t *toks, int n) {
    (void)user;
    (void)toks;
    return n >= (b + 1) * GC_N / GC_B;
}

/* Median seconds of one batch of n_new tokens; *rows gets the tokens decoded (the row-steps). */
static double gc_time(mt_minimax *m, mt_ctx *c, const int32_t *const *prompts, const int *lens,
                      int n_new, bool ragged, int reps, long *rows) {
    const mt_gen_opts o = {.eos = -1, .stop = ragged ? gc_stop_ragged : NULL};
    int32_t *out = mt_malloc(sizeof(int32_t) * GC_B * (size_t)n_new, "bench tokens");
    int n_out[GC_B];
    double *t = mt_malloc(sizeof(double) * (size_t)reps, "bench times");
    for (int r = -1; r < reps; r++) {
        const double t0 = bench_now();
        mt_minimax_generate_batch(m, c, prompts, lens, GC_B, n_new, &o, out, n_out);
        if (r >= 0) t[r] = bench_now() - t0;
    }
    *rows = 0;
    for (int b = 0; b < GC_B; b++) *rows += n_out[b];
    const double med = bench_median(t, reps);
    free(t);
    free(out);
    return med;
}

int main(int argc, char **argv) {
    const char *config = argc > 1 ? argv[1] : "bench/configs/bench-small.json";
    const int reps = argc > 2 ? atoi(argv[2]) : 3;
    MT_CHECK(reps >= 1, "bench-generate-compaction: reps %d must be >= 1", reps);

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

    int32_t ids[GC_B][GC_T];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int b = 0; b < GC_B; b++)
        for (int t = 0; t < GC_T; t++)
            ids[b][t] = (int32_t)(bench_uniform(&s) * (float)cfg.vocab_size) % cfg.vocab_size;
    const int32_t *prompts[GC_B];
    int lens[GC_B];
    for (int b = 0; b < GC_B; b++) prompts[b] = ids[b], lens[b] = GC_T;

    mt_ctx c;
    mt_ctx_init(&c, mt_backend_cpu(), mt_minimax_generate_arena_bytes(&cfg, 1, GC_T),
                64 * (cfg.num_hidden_layers + 4));
    long rows_fill, rows_ragged, rows_full;
    const double t_fill = gc_time(&m, &c, prompts, lens, 1, false, reps, &rows_fill);
    const double t_ragged = gc_time(&m, &c, prompts, lens, GC_N, true, reps, &rows_ragged);
    const double t_full = gc_time(&m, &c, prompts, lens, GC_N, false, reps, &rows_full);
    /* the first token of each row comes from its prefill: the decode steps made the rest */
    const long steps_ragged = rows_ragged - rows_fill, steps_full = rows_full - rows_fill;
    const double d_ragged = t_ragged - t_fill, d_full = t_full - t_fill;

    printf("%s: B = %d prompts of %d tokens, %d new tokens, %d layers, median of %d\n", config,
           GC_B, GC_T, GC_N, cfg.num_hidden_layers, reps);
    printf("  prefill alone          %8.3f s\n", t_fill);
    printf("  rows stop at %d..%d     decode %8.3f s  %4ld row-steps  %.2f ms per row-step\n",
           GC_N / GC_B, GC_N, d_ragged, steps_ragged, 1e3 * d_ragged / (double)steps_ragged);
    printf("  every row runs %d      decode %8.3f s  %4ld row-steps  %.2f ms per row-step\n", GC_N,
           d_full, steps_full, 1e3 * d_full / (double)steps_full);
    printf("  masked / compacted: %.2fx the row-steps, %.2fx the decode time\n",
           (double)steps_full / (double)steps_ragged, d_full / d_ragged);

    mt_ctx_free(&c);
    for (int b = 0; b < m.n_buckets; b++) free(data[b]);
    free(data);
    mt_minimax_free(&m);
    return 0;
}
