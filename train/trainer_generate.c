/* trainer_generate.c: accuracy by generation in a training run (eval.generate_*; docs/training.md,
 * "Evaluation by generation"): the problems of eval.generate_data, sample i on rank i % N,
 * decoded from the weights of that step and scored as minimax-eval scores them
 * (eval/gsm8k_eval.h: the same prompt, decoding, extraction and result lines).
 *
 * The weights live in ZeRO-3 shards. A rank decodes its share in one of two ways
 * (eval.generate_weights):
 *  - "replica": it gathers the buckets one after the other, as a forward does, copies each into a
 *    full replica in host memory, decodes with it on the CPU backend, and frees it. The replica
 *    holds what the training forward computes with (the fp32 master weights, or their bf16
 *    rounding with dist.gather_dtype = "bf16"), so the tokens equal minimax-eval's on the export.
 *  - "gathered": every forward of the decoding enters its buckets through the sharded model's
 *    hooks, so no rank ever holds more than the training's gather slots; the ranks decode in step
 *    (models/generate.h, mt_gen_sync): prompts prefilled one by one, then one gather of each
 *    bucket per decode step for the rank's whole batch. It runs on the training backend (a GPU's
 *    decode kernels) and gives the CPU replica's tokens bit for bit on the CPU backend.
 *  - "auto" (the default): on the CPU the replica when it fits in the node's memory, else the
 *    gathers; on a device the gathers (unless the backend lacked a decode step the model needs:
 *    then the replica).
 * What each takes (replica: 4 bytes a parameter; both: the caches and the arena) is checked
 * against the memory at the start. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/synth.h"
#include "eval/gsm8k_answer.h"
#include "eval/gsm8k_eval.h"
#include "models/family.h"
#include "models/safetensors.h"
#include "data/chat_cli.h"
#include "train/env.h"
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

/* eval.generate_shots_file into g->shots (g->msg_shots: the messages task) (n-shot), or why
 * not. */
static bool trainer_generate_load_shots(const mt_recipe *rc, trainer_gen *g, char *why, size_t n) {
    if (rc->eval_generate_shots == 0) return true;
    char err[MT_ERR_LEN + MT_PATH_MAX];
    if (g->messages
            ? mt_msgs_read(rc->eval_generate_shots_file, &g->msg_shots, err, sizeof(err)) != 0
            : mt_gsm8k_read(rc->eval_generate_shots_file, false, &g->shots, err) != 0) {
        snprintf(why, n, "eval.generate_shots_file: %s", err);
        return false;
    }
    const int64_t have = g->messages ? g->msg_shots.n : g->shots.n;
    if (have < rc->eval_generate_shots) {
        snprintf(why, n, "eval.generate_shots = %d but %s has %lld examples",
                 rc->eval_generate_shots, rc->eval_generate_shots_file, (long long)have);
        return false;
    }
    return true;
}

/* eval.generate_task = "messages": the conversations of eval.generate_data (the first
 * eval.generate_samples), the shots and the metrics, or why not. */
static bool trainer_generate_load_msgs(const mt_recipe *rc, trainer_gen *g, char *why, size_t n) {
    char err[MT_ERR_LEN + MT_PATH_MAX];
    static const char *const keys[2] = {"eval.generate_metric", "eval.generate_answer_regex"};
    if (mt_match_init(&g->match, rc->eval_generate_metric[0] ? rc->eval_generate_metric : NULL,
                      rc->eval_generate_answer_regex[0] ? rc->eval_generate_answer_regex : NULL,
                      keys, err, sizeof(err)) != 0) {
        snprintf(why, n, "%s", err);
        return false;
    }
    if (mt_msgs_read(rc->eval_generate_data, &g->msgs, err, sizeof(err)) != 0) {
        snprintf(why, n, "eval.generate_data: %s", err);
        return false;
    }
    if (g->msgs.n == 0) {
        snprintf(why, n, "eval.generate_data: %s: no conversations in the file",
                 rc->eval_generate_data);
        return false;
    }
    if (rc->eval_generate_samples > 0) mt_msgs_set_truncate(&g->msgs, rc->eval_generate_samples);
    g->n = g->msgs.n;
    return trainer_generate_load_shots(rc, g, why, n);
}

/* The problems into g->set (eval.generate_samples: the first N), or why not. */
static bool trainer_generate_load(const mt_recipe *rc, trainer_gen *g, char *why, size_t n) {
    g->messages = !strcmp(rc->eval_generate_task, "messages");
    if (g->messages) return trainer_generate_load_msgs(rc, g, why, n);
    if (!strcmp(rc->eval_generate_data, "synthetic")) {
        trainer_generate_synthetic(rc, &g->set);
        g->n = g->set.n;
        return trainer_generate_load_shots(rc, g, why, n);
    }
    char err[MT_ERR_LEN];
    if (mt_gsm8k_read(rc->eval_generate_data, false, &g->set, err) != 0) {
        snprintf(why, n, "eval.generate_data: %s", err);
        return false;
    }
    if (g->set.n == 0) {
        snprintf(why, n, "eval.generate_data: %s: no problems in the file", rc->eval_generate_data);
        return false;
    }
    if (!trainer_generate_load_shots(rc, g, why, n)) return false;
    mt_gsm8k_set *s = &g->set;
    for (; rc->eval_generate_samples > 0 && s->n > rc->eval_generate_samples; s->n--) {
        free(s->question[s->n - 1]);
        free(s->answer[s->n - 1]);
    }
    /* a gold answer the scorer cannot read would score every sample of it as wrong */
    if (mt_gsm8k_check_golds(s, rc->eval_generate_data, s->n, err, sizeof(err)) != 0) {
        snprintf(why, n, "eval.generate_data: %s", err);
        return false;
    }
    g->n = s->n;
    return true;
}

/* The template of the prompts into g->chat: the one training renders its data with (the
 * tokenizer directory's, data.tokenizer_dir or model.path; data.chat_template; with
 * data.template_kwargs), so that the accuracy is that of the prompts the model learned; or why
 * not. Opened once. */
static bool trainer_generate_template(const mt_recipe *rc, trainer_gen *g, char *why, size_t n) {
    if (g->chat) return true;
    const mt_chat_source src = {
        .dir = rc->data_tokenizer_dir[0] ? rc->data_tokenizer_dir : rc->model_path,
        .file = rc->data_chat_template[0] ? rc->data_chat_template : NULL,
        .kwargs_json = rc->data_template_kwargs[0] ? rc->data_template_kwargs : NULL};
    char err[MT_ERR_LEN + MT_PATH_MAX];
    g->chat = mt_chat_template_open(&src, err, sizeof(err));
    if (!g->chat) snprintf(why, n, "eval.generate_data: the chat template: %s", err);
    return g->chat != NULL;
}

/* n-shot and decoding from the recipe into ev (eval/gsm8k_eval.h, as minimax-eval's flags). */
static void trainer_generate_opts(const mt_recipe *rc, const trainer_gen *g, mt_gsm8k_eval *ev) {
    ev->shots = rc->eval_generate_shots > 0 ? &g->shots : NULL;
    ev->n_shots = rc->eval_generate_shots;
    ev->n_new = rc->eval_generate_max_new_tokens;
    if (g->messages) {
        ev->msgs = &g->msgs;
        ev->msg_shots = rc->eval_generate_shots > 0 ? &g->msg_shots : NULL;
        ev->shots = NULL;
        ev->match = &g->match;
    }
    ev->opts = (mt_gen_opts){.temperature = (float)rc->eval_generate_temperature,
                             .top_k = rc->eval_generate_top_k,
                             .top_p = (float)rc->eval_generate_top_p,
                             .seed = (uint64_t)rc->eval_generate_seed,
                             .eos = mt_chat_cli_eos(g->chat, g->tok, -1)};
}

void trainer_generate_read(const mt_recipe *rc, const mt_comm *comm, trainer_gen *g, char *why,
                           size_t n) {
    g->generates = rc->eval_generate_data[0] != 0;
    if (!g->generates || comm->rank != 0 || why[0]) return;
    /* rank 0 refuses a template that does not open before the model is built */
    if (trainer_generate_load(rc, g, why, n)) trainer_generate_template(rc, g, why, n);
}

void trainer_generate_setup(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                            const char *tokenizer_dir, trainer_gen *g) {
    if (!g->generates) return;
    char why[MT_ERR_LEN + MT_PATH_MAX + 64] = "";
    if (d->comm->rank != 0) /* rank 0 read it before the model was built */
        MT_CHECK(trainer_generate_load(rc, g, why, sizeof(why)) &&
                     trainer_generate_template(rc, g, why, sizeof(why)),
                 "%s", why);
    char path[MT_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/tokenizer.json", tokenizer_dir);
    g->tok = mt_tokenizer_load(path);
    /* what each way needs of the memory, sized for the longest prompt of any rank's share
     * (every rank decides alike) */
    int64_t params = 0;
    for (int b = 0; b < m->model.n_buckets; b++) params += m->model.bucket_numel[b];
    g->replica_bytes = 4 * params;
    mt_gsm8k_eval ev = {.model = &m->model, .tok = g->tok, .chat = g->chat, .set = &g->set};
    trainer_generate_opts(rc, g, &ev);
    const mt_minimax_config *cfg = &m->cfg;
    /* every prompt, every rank alike: a template that refuses one stops the run here */
    const int longest = mt_gsm8k_eval_longest(&ev, 0, 1, g->n, why, sizeof(why));
    if (longest < 0) {
        if (d->comm->rank == 0) fprintf(stderr, "error: eval.generate_data: %s\n", why);
        mt_comm_finalize(d->host);
        exit(2);
    }
    const int64_t t_max = longest + (int64_t)rc->eval_generate_max_new_tokens;
    const int64_t decode =
        (int64_t)mt_minimax_cache_bytes(cfg, rc->eval_generate_batch, (int)t_max) +
        (int64_t)mt_minimax_generate_arena_bytes(cfg, 1, t_max);
    const bool cpu = d->be->dev == MT_CPU;
    /* on the CPU the training arena's pages are host memory too, touched from the first step */
    const int64_t later = cpu ? m->planned_activations : 0;
    const int local = mt_env_local_ranks(d->comm->size);
    const size_t host = mt_backend_cpu()->mem_available();
    const size_t dev = cpu ? host : d->be->mem_available ? d->be->mem_available() : 0;
    const int64_t host_share = (int64_t)(host / (size_t)local),
                  dev_share = cpu ? host_share : (int64_t)dev;
    const int64_t replica_need = g->replica_bytes + decode + later, gathered_need = decode + later;
    int64_t short_of[2] = {host && replica_need > host_share, dev && gathered_need > dev_share};
    d->host->allreduce_i64(d->host, short_of, 2);
    char lacks[160] = "";
    const bool can_gather = mt_gen_backend_can_decode(&m->model, d->be, lacks, sizeof(lacks));
    const char *mode = rc->eval_generate_weights;
    g->gathered =
        !strcmp(mode, "gathered") || (!strcmp(mode, "auto") && can_gather && (!cpu || short_of[0]));
    const double gib = 1.0 / (1 << 30);
    if (g->gathered && !can_gather)
        snprintf(why, sizeof(why),
                 "eval.generate_weights = \"gathered\": %s; use \"replica\" (the CPU backend)",
                 lacks);
    else if (g->gathered && short_of[1])
        snprintf(why, sizeof(why),
                 "eval.generate_data: decoding through the gathers needs %.2f GiB (caches of "
                 "eval.generate_batch = %d rows, arena%s) but a rank has %.2f GiB; lower "
                 "eval.generate_batch or eval.generate_max_new_tokens",
                 (double)gathered_need * gib, rc->eval_generate_batch,
                 later ? ", the training's activations" : "", (double)dev_share * gib);
    else if (!g->gathered && short_of[0])
        snprintf(why, sizeof(why),
                 "eval.generate_data: a full replica of the model on each rank needs %.2f GiB of "
                 "host memory (weights %.2f GiB, caches of eval.generate_batch = %d rows, arena) "
                 "but a rank has %.2f GiB; %s",
                 (double)replica_need * gib, (double)g->replica_bytes * gib,
                 rc->eval_generate_batch, (double)host_share * gib,
                 can_gather ? "set eval.generate_weights = \"gathered\" (decode through the "
                              "ZeRO-3 gathers), lower eval.generate_batch or use fewer ranks "
                              "per node"
                            : "lower eval.generate_batch or use fewer ranks per node");
    if (why[0]) {
        if (d->comm->rank == 0) fprintf(stderr, "error: %s\n", why);
        mt_comm_finalize(d->host);
        exit(2);
    }
    char how[96] = "greedy";
    if (rc->eval_generate_temperature > 0)
        snprintf(how, sizeof(how), "sampled (temperature %g, top-k %d, top-p %g, seed %lld)",
                 rc->eval_generate_temperature, rc->eval_generate_top_k, rc->eval_generate_top_p,
                 (long long)rc->eval_generate_seed);
    int64_t first;
    const int64_t overlap = mt_gsm8k_eval_overlap(&ev, g->n, &first);
    if (overlap > 0)
        LOG0(d->comm,
             "warning: eval.generate_data: %lld of the %lld samples (the first: line %lld) have "
             "the question of one of the eval.generate_shots of %s: the answer is in their "
             "prompt\n",
             (long long)overlap, (long long)g->n, (long long)mt_gsm8k_eval_line(&ev, first),
             rc->eval_generate_shots_file);
    LOG0(d->comm, "eval.generate: %lld %s of %s, %d-shot, %d new tokens at most, %s; ",
         (long long)g->n, g->messages ? "conversations" : "problems", rc->eval_generate_data,
         rc->eval_generate_shots, rc->eval_generate_max_new_tokens, how);
    if (g->gathered)
        LOG0(d->comm,
             "the ranks decode in step through the ZeRO-3 gathers on the %s backend (no "
             "replica; eval.generate_weights = \"%s\"): %.2f MiB of caches and arena\n",
             d->be->name, mode, (double)decode / (1 << 20));
    else
        LOG0(d->comm,
             "a rank decodes its share with a full replica in host memory, gathered bucket by "
             "bucket (eval.generate_weights = \"%s\"): %.2f MiB with the caches and arena "
             "(weights %.2f MiB) of %.2f GiB available to each rank\n",
             mode, (double)(g->replica_bytes + decode) / (1 << 20),
             (double)g->replica_bytes / (1 << 20), (double)host_share * gib);
}

bool trainer_generate_due(const mt_recipe *rc, const trainer_gen *g, int step, bool last) {
    return g->generates && ((last && rc->eval_generate_at_end) ||
                            (rc->eval_generate_every > 0 && step % rc->eval_generate_every == 0));
}

/* The whole model into host buffers bound to a replica of the same layout: bucket by bucket
 * through the gathers (every rank, the same order). */
static void trainer_generate_replica(const trainer_device *d, trainer_model *m, mt_minimax *rep,
                                     float **data) {
    mt_minimax_init_unit(rep, &m->cfg, m->model.unit);
    mt_zero_expert_parallel_pause(&m->zero, true); /* every expert to every rank */
    for (int b = 0; b < rep->n_buckets; b++) {
        MT_CHECK(rep->bucket_numel[b] == m->model.bucket_numel[b],
                 "replica bucket %d: %lld elements, the model's %lld", b,
                 (long long)rep->bucket_numel[b], (long long)m->model.bucket_numel[b]);
        data[b] = mt_malloc(sizeof(float) * (size_t)rep->bucket_numel[b], "replica bucket");
        mt_zero_gather(&m->zero, b, false);
        d->be->to_host(data[b], mt_zero_slot_data(&m->zero, b),
                       sizeof(float) * (size_t)rep->bucket_numel[b]);
        mt_zero_release(&m->zero, b);
        mt_minimax_bind_bucket(rep, b, data[b], NULL);
    }
    mt_zero_expert_parallel_pause(&m->zero, false);
}

typedef struct {
    mt_comm *host;
    int32_t *all; /* (P) */
} trainer_gen_sync;

static int trainer_generate_max_all(void *user, int v) {
    trainer_gen_sync *s = user;
    const int32_t mine = v;
    s->host->allgather(s->host, &mine, s->all, 1, sizeof(int32_t));
    int best = 0;
    for (int r = 0; r < s->host->size; r++) best = s->all[r] > best ? s->all[r] : best;
    return best;
}

void trainer_generate(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                      trainer_gen *g, const trainer_watchdog *w, int step, mt_eval_row *row) {
    const double t0 = mt_time_now();
    const int P = d->comm->size, rank = d->comm->rank;
    const int64_t n = g->n, n_mine = n > rank ? (n - rank - 1) / P + 1 : 0;
    mt_minimax rep;
    float **data = NULL;
    const mt_exchange *ep = m->model.ep;
    mt_bucket_hooks hooks = mt_sharded_forward_hooks(&m->sharded);
    trainer_gen_sync ss = {.host = d->host};
    const mt_gen_sync sync = {.hooks = &hooks, .max_all = trainer_generate_max_all, .user = &ss};
    mt_gsm8k_eval ev = {.model = &rep,
                        .tok = g->tok,
                        .chat = g->chat,
                        .set = &g->set,
                        .reply = mt_reply_format_of(mt_config_family(&m->cfg))};
    trainer_generate_opts(rc, g, &ev);
    if (g->gathered) {
        /* every expert to every rank, computed where its rows are: no expert parallelism */
        mt_zero_expert_parallel_pause(&m->zero, true);
        m->model.ep = NULL;
        mt_sharded_bind(&m->sharded, false);
        ss.all = mt_calloc((size_t)d->host->size, sizeof(int32_t), "ranks' rows");
        ev.model = &m->model;
        ev.opts.sync = &sync;
    } else {
        data = mt_calloc((size_t)m->model.n_buckets, sizeof(float *), "replica buckets");
        trainer_generate_replica(d, m, &rep, data);
        /* the ranks' shares take different times: the collecting below waits for the slowest,
         * which the watchdog's step-based limit does not measure */
        mt_comm_mpi_watch(d->host, 0);
    }
    mt_ctx c;
    mt_ctx_init(&c, g->gathered ? d->be : mt_backend_cpu(),
                mt_gsm8k_eval_arena_bytes(&ev, rank, P, n_mine),
                64 * (m->cfg.num_hidden_layers + 4));
    ev.ctx = &c;
    mt_strbuf lines = {0};
    mt_gsm8k_counts cnt = {0};
    const int B = rc->eval_generate_batch;
    /* in step, every rank runs as many batches as the one with the most samples */
    const int64_t n_runs = g->gathered ? (n + P - 1) / P : n_mine;
    int64_t *ids = mt_calloc((size_t)B, sizeof(int64_t), "sample ids");
    for (int64_t j0 = 0; j0 < n_runs; j0 += B) {
        const int64_t left = n_mine - j0 > 0 ? n_mine - j0 : 0;
        const int nb = (int)(left < B ? left : B);
        for (int r = 0; r < nb; r++) ids[r] = rank + (j0 + r) * P;
        mt_gsm8k_eval_batch(&ev, ids, nb, &lines, &cnt);
    }
    free(ids);
    mt_ctx_free(&c);
    if (g->gathered) {
        mt_sharded_bind(&m->sharded, true);
        m->model.ep = ep;
        mt_zero_expert_parallel_pause(&m->zero, false);
        free(ss.all);
    } else {
        for (int b = 0; b < rep.n_buckets; b++) free(data[b]);
        free(data);
        mt_minimax_free(&rep);
    }

    /* the counts and every rank's lines (padded to the longest, 4-byte words) to every rank */
    int64_t counts[3] = {cnt.correct, cnt.tokens, cnt.in_reasoning};
    d->host->allreduce_i64(d->host, counts, 3);
    int64_t *len = mt_calloc((size_t)P, sizeof(int64_t), "line lengths");
    len[rank] = (int64_t)lines.len;
    d->host->allreduce_i64(d->host, len, P);
    int64_t words = 1;
    for (int r = 0; r < P; r++) words = len[r] / 4 + 1 > words ? len[r] / 4 + 1 : words;
    char *mine = mt_calloc((size_t)words, 4, "result lines"),
         *all = mt_malloc((size_t)(words * 4 * P), "gathered result lines");
    if (lines.len) memcpy(mine, lines.p, lines.len);
    d->host->allgather(d->host, mine, all, words, 4);
    /* (the gathered decoding ran in step: the watchdog kept watching) */
    if (!g->gathered) trainer_watch_start(w, d);
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
        char unfinished[96] = ""; /* the answer is read after the reasoning */
        if (counts[2] > 0)
            snprintf(unfinished, sizeof(unfinished), "; %lld ended inside their reasoning",
                     (long long)counts[2]);
        char what[48] = "accuracy";
        if (g->messages)
            snprintf(what, sizeof(what), "%s match", mt_match_metric_name(g->match.metric));
        printf("eval %s: %s %.2f%% (%lld / %lld), 95%% Wilson interval [%.2f%%, %.2f%%], "
               "by generation (%lld tokens, %.1f s%s); %s\n",
               when, what, 100.0 * (double)counts[0] / (double)n, (long long)counts[0],
               (long long)n, 100 * lo, 100 * hi, (long long)counts[1], dt, unfinished, path);
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

void trainer_generate_free(trainer_gen *g) {
    if (!g->generates) return;
    mt_gsm8k_set_free(&g->set);
    mt_gsm8k_set_free(&g->shots);
    mt_msgs_set_free(&g->msgs);
    mt_msgs_set_free(&g->msg_shots);
    mt_match_free(&g->match);
    mt_tokenizer_free(g->tok);
    mt_chat_template_free(g->chat);
}
