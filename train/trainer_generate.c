/* trainer_generate.c: accuracy by generation in a training run (eval.generate_*; docs/training.md,
 * "Evaluation by generation"): the problems of eval.generate_data, sample i on rank i % N,
 * decoded greedily from the weights of that step and scored as minimax-eval scores them
 * (models/gsm8k_eval.h: the same prompt, decoding, extraction and result lines).
 *
 * The weights live in ZeRO-3 shards; generation's cached forward reads whole parameters from
 * host memory (models/generate.h). So each rank gathers the buckets one after the other, as a
 * forward does (every rank the same collectives, whatever its share of the problems), copies
 * each into a full replica in host memory, decodes its share with it on the CPU backend, and
 * frees it. The replica holds what the training forward computes with: the fp32 master weights
 * with fp32 gathers, their bf16 rounding with dist.gather_dtype = "bf16" (what an export of that
 * dtype holds). Its size (4 bytes a parameter) plus the caches and the arena is checked against
 * the node's memory at the start. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/synth.h"
#include "models/gsm8k_eval.h"
#include "models/safetensors.h"
#include "train/trainer_internal.h"

/* eval.generate_data = "synthetic": problems data.synthetic_samples, ... of data.seed's stream,
 * after the ones data.path = "synthetic" trains on (never seen in training). */
static void trainer_generate_synthetic(const mt_recipe *rc, mt_gsm8k_set *set) {
    const int64_t n = rc->eval_generate_samples, first = rc->data_synthetic_samples;
    set->n = n;
    set->question = mt_calloc((size_t)n, sizeof(char *), "problems");
    set->answer = mt_calloc((size_t)n, sizeof(char *), "answers");
    set->line = mt_calloc((size_t)n, sizeof(int64_t), "lines");
    mt_strbuf q = {0}, a = {0};
    for (int64_t i = 0; i < n; i++) {
        mt_synth_problem((uint64_t)rc->data_seed, first + i, &q, &a);
        set->question[i] = strdup(q.p);
        set->answer[i] = strdup(a.p);
        MT_CHECK(set->question[i] && set->answer[i], "out of memory for the problems");
        set->line[i] = i + 1;
    }
    mt_strbuf_free(&q);
    mt_strbuf_free(&a);
}

/* eval.generate_shots_file into t->gen_shots (n-shot), or why not. */
static bool trainer_generate_load_shots(trainer *t, char *why, size_t n) {
    const mt_recipe *rc = &t->rc;
    if (rc->eval_generate_shots == 0) return true;
    char err[MT_ERR_LEN];
    if (mt_gsm8k_read(rc->eval_generate_shots_file, false, &t->gen_shots, err) != 0) {
        snprintf(why, n, "eval.generate_shots_file: %s", err);
        return false;
    }
    if (t->gen_shots.n < rc->eval_generate_shots) {
        snprintf(why, n, "eval.generate_shots = %d but %s has %lld examples",
                 rc->eval_generate_shots, rc->eval_generate_shots_file, (long long)t->gen_shots.n);
        return false;
    }
    return true;
}

/* The problems into t->gen_set (eval.generate_samples: the first N), or why not. */
static bool trainer_generate_load(trainer *t, char *why, size_t n) {
    const mt_recipe *rc = &t->rc;
    if (!strcmp(rc->eval_generate_data, "synthetic")) {
        trainer_generate_synthetic(rc, &t->gen_set);
        return trainer_generate_load_shots(t, why, n);
    }
    char err[MT_ERR_LEN];
    if (mt_gsm8k_read(rc->eval_generate_data, false, &t->gen_set, err) != 0) {
        snprintf(why, n, "eval.generate_data: %s", err);
        return false;
    }
    if (t->gen_set.n == 0) {
        snprintf(why, n, "eval.generate_data: %s: no problems in the file", rc->eval_generate_data);
        return false;
    }
    if (!trainer_generate_load_shots(t, why, n)) return false;
    mt_gsm8k_set *s = &t->gen_set;
    for (; rc->eval_generate_samples > 0 && s->n > rc->eval_generate_samples; s->n--) {
        free(s->question[s->n - 1]);
        free(s->answer[s->n - 1]);
    }
    return true;
}

/* n-shot and decoding from the recipe into ev (models/gsm8k_eval.h, as minimax-eval's flags). */
static void trainer_generate_opts(const trainer *t, mt_gsm8k_eval *ev) {
    const mt_recipe *rc = &t->rc;
    ev->shots = rc->eval_generate_shots > 0 ? &t->gen_shots : NULL;
    ev->n_shots = rc->eval_generate_shots;
    ev->n_new = rc->eval_generate_max_new_tokens;
    ev->opts = (mt_gen_opts){.temperature = (float)rc->eval_generate_temperature,
                             .top_k = rc->eval_generate_top_k,
                             .top_p = (float)rc->eval_generate_top_p,
                             .seed = (uint64_t)rc->eval_generate_seed,
                             .eos = mt_tokenizer_token_to_id(t->gen_tok, "<end_of_sentence>")};
}

void trainer_generate_read(trainer *t, char *why, size_t n) {
    t->generates = t->rc.eval_generate_data[0] != 0;
    if (!t->generates || t->comm->rank != 0 || why[0]) return;
    trainer_generate_load(t, why, n);
}

void trainer_generate_setup(trainer *t) {
    if (!t->generates) return;
    const mt_recipe *rc = &t->rc;
    char why[MT_ERR_LEN + 64] = "";
    if (t->comm->rank != 0) /* rank 0 read it before the model was built */
        MT_CHECK(trainer_generate_load(t, why, sizeof(why)), "%s", why);
    char path[MT_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/tokenizer.json", t->tokenizer_dir);
    t->gen_tok = mt_tokenizer_load(path);
    /* a rank's replica (4 bytes a parameter), caches and arena, against its share of the node:
     * sized for the longest prompt of any rank's share (every rank decides alike) */
    int64_t params = 0;
    for (int b = 0; b < t->model.n_buckets; b++) params += t->model.bucket_numel[b];
    t->gen_replica_bytes = 4 * params;
    mt_gsm8k_eval ev = {.model = &t->model, .tok = t->gen_tok, .set = &t->gen_set};
    trainer_generate_opts(t, &ev);
    const mt_minimax_config *cfg = &t->cfg;
    const int64_t t_max =
        mt_gsm8k_eval_longest(&ev, 0, 1, t->gen_set.n) + (int64_t)rc->eval_generate_max_new_tokens;
    /* on the CPU the training arena's pages are host memory too, touched from the first step */
    const int64_t later = t->be->dev == MT_CPU ? t->planned_activations : 0;
    const int64_t need = t->gen_replica_bytes +
                         (int64_t)mt_minimax_cache_bytes(cfg, rc->eval_generate_batch, (int)t_max) +
                         (int64_t)mt_minimax_generate_arena_bytes(cfg, 1, t_max);
    const size_t avail = mt_backend_cpu()->mem_available();
    const int local = trainer_local_ranks(t);
    int64_t bad = avail && need + later > (int64_t)(avail / (size_t)local);
    t->host->allreduce_i64(t->host, &bad, 1);
    const double gib = 1.0 / (1 << 30);
    if (bad) {
        if (t->comm->rank == 0)
            fprintf(stderr,
                    "error: eval.generate_data: generation decodes with a full replica of the "
                    "model on each rank: %.2f GiB of host memory (weights %.2f GiB, caches of "
                    "eval.generate_batch = %d rows, arena) but a rank has %.2f GiB; lower "
                    "eval.generate_batch or use fewer ranks per node\n",
                    (double)need * gib, (double)params * 4 * gib, rc->eval_generate_batch,
                    (double)avail / local * gib);
        mt_comm_finalize(t->host);
        exit(2);
    }
    char how[96] = "greedy";
    if (rc->eval_generate_temperature > 0)
        snprintf(how, sizeof(how), "sampled (temperature %g, top-k %d, top-p %g, seed %lld)",
                 rc->eval_generate_temperature, rc->eval_generate_top_k, rc->eval_generate_top_p,
                 (long long)rc->eval_generate_seed);
    LOG0(t,
         "eval.generate: %lld problems of %s, %d-shot, %d new tokens at most, %s; a rank "
         "decodes its share with a full replica in host memory, gathered bucket by bucket: "
         "%.2f MiB with the caches and arena (weights %.2f MiB) of %.2f GiB available to each "
         "rank\n",
         (long long)t->gen_set.n, rc->eval_generate_data, rc->eval_generate_shots,
         rc->eval_generate_max_new_tokens, how, (double)need / (1 << 20),
         (double)t->gen_replica_bytes / (1 << 20), (double)avail / (double)local * gib);
}

bool trainer_generate_due(const trainer *t, int step, bool last) {
    const mt_recipe *rc = &t->rc;
    return t->generates && ((last && rc->eval_generate_at_end) ||
                            (rc->eval_generate_every > 0 && step % rc->eval_generate_every == 0));
}

/* The whole model into host buffers bound to a replica of the same layout: bucket by bucket
 * through the gathers (every rank, the same order). */
static void trainer_generate_replica(trainer *t, mt_minimax *rep, float **data) {
    mt_minimax_init_unit(rep, &t->cfg, t->model.unit);
    mt_zero_expert_parallel_pause(&t->zero, true); /* every expert to every rank */
    for (int b = 0; b < rep->n_buckets; b++) {
        MT_CHECK(rep->bucket_numel[b] == t->model.bucket_numel[b],
                 "replica bucket %d: %lld elements, the model's %lld", b,
                 (long long)rep->bucket_numel[b], (long long)t->model.bucket_numel[b]);
        data[b] = mt_malloc(sizeof(float) * (size_t)rep->bucket_numel[b], "replica bucket");
        mt_zero_gather(&t->zero, b, false);
        t->be->to_host(data[b], mt_zero_slot_data(&t->zero, b),
                       sizeof(float) * (size_t)rep->bucket_numel[b]);
        mt_zero_release(&t->zero, b);
        mt_minimax_bind_bucket(rep, b, data[b], NULL);
    }
    mt_zero_expert_parallel_pause(&t->zero, false);
}

void trainer_generate(trainer *t, int step, mt_eval_row *row) {
    const mt_recipe *rc = &t->rc;
    const double t0 = mt_time_now();
    mt_minimax rep;
    float **data = mt_calloc((size_t)t->model.n_buckets, sizeof(float *), "replica buckets");
    trainer_generate_replica(t, &rep, data);
    /* the ranks' shares take different times: the collecting below waits for the slowest, which
     * the watchdog's step-based limit does not measure */
    mt_comm_mpi_watch(t->host, 0);

    const int P = t->comm->size, rank = t->comm->rank;
    const int64_t n = t->gen_set.n, n_mine = n > rank ? (n - rank - 1) / P + 1 : 0;
    mt_gsm8k_eval ev = {.model = &rep, .tok = t->gen_tok, .set = &t->gen_set};
    trainer_generate_opts(t, &ev);
    mt_ctx c;
    mt_ctx_init(&c, mt_backend_cpu(), mt_gsm8k_eval_arena_bytes(&ev, rank, P, n_mine),
                64 * (t->cfg.num_hidden_layers + 4));
    ev.ctx = &c;
    mt_strbuf lines = {0};
    int64_t counts[2] = {0, 0}; /* correct, tokens */
    const int B = rc->eval_generate_batch;
    int64_t *ids = mt_calloc((size_t)B, sizeof(int64_t), "sample ids");
    for (int64_t j0 = 0; j0 < n_mine; j0 += B) {
        const int nb = (int)(n_mine - j0 < B ? n_mine - j0 : B);
        for (int r = 0; r < nb; r++) ids[r] = rank + (j0 + r) * P;
        mt_gsm8k_eval_batch(&ev, ids, nb, &lines, &counts[0], &counts[1]);
    }
    free(ids);
    mt_ctx_free(&c);
    for (int b = 0; b < rep.n_buckets; b++) free(data[b]);
    free(data);
    mt_minimax_free(&rep);

    /* the counts and every rank's lines (padded to the longest, 4-byte words) to every rank */
    t->host->allreduce_i64(t->host, counts, 2);
    int64_t *len = mt_calloc((size_t)P, sizeof(int64_t), "line lengths");
    len[rank] = (int64_t)lines.len;
    t->host->allreduce_i64(t->host, len, P);
    int64_t words = 1;
    for (int r = 0; r < P; r++) words = len[r] / 4 + 1 > words ? len[r] / 4 + 1 : words;
    char *mine = mt_calloc((size_t)words, 4, "result lines"),
         *all = mt_malloc((size_t)(words * 4 * P), "gathered result lines");
    if (lines.len) memcpy(mine, lines.p, lines.len);
    t->host->allgather(t->host, mine, all, words, 4);
    if (rc->dist_timeout >= 0)
        mt_comm_mpi_watch(t->host, rc->dist_timeout);
    else
        trainer_watch(t, false);
    const double dt = mt_time_now() - t0;
    if (rank == 0) {
        int64_t *displ = mt_calloc((size_t)P, sizeof(int64_t), "offsets");
        for (int r = 0; r < P; r++) displ[r] = (int64_t)r * words * 4;
        mt_strbuf ordered = {0};
        mt_gsm8k_eval_order(all, displ, len, P, n, &ordered);
        char path[MT_PATH_MAX + 64];
        snprintf(path, sizeof(path), "%s/eval-generate-%d.jsonl", rc->output_dir, step);
        mt_file_write_atomic(path, ordered.p ? ordered.p : "", ordered.len);
        mt_strbuf_free(&ordered);
        free(displ);
        double lo, hi;
        mt_gsm8k_eval_wilson(counts[0], n, &lo, &hi);
        char when[32] = "of the model as loaded"; /* --eval-only */
        if (step > 0) snprintf(when, sizeof(when), "after step %d", step);
        printf("eval %s: accuracy %.2f%% (%lld / %lld), 95%% Wilson interval [%.2f%%, %.2f%%], "
               "by generation (%lld tokens, %.1f s); %s\n",
               when, 100.0 * (double)counts[0] / (double)n, (long long)counts[0], (long long)n,
               100 * lo, 100 * hi, (long long)counts[1], dt, path);
        fflush(stdout);
    }
    free(mine);
    free(all);
    free(len);
    mt_strbuf_free(&lines);
    row->has_gen = true;
    row->correct = counts[0];
    row->samples = n;
    row->gen_seconds = dt;
}

void trainer_generate_free(trainer *t) {
    if (!t->generates) return;
    mt_gsm8k_set_free(&t->gen_set);
    mt_gsm8k_set_free(&t->gen_shots);
    mt_tokenizer_free(t->gen_tok);
}
