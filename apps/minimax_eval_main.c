/* minimax-eval: GSM8K accuracy of a MiniMax checkpoint by generation (docs/evaluation.md).
 *
 *   mpirun -np N minimax-eval --model DIR --data test.jsonl [--limit N] [--max-new-tokens N]
 *       [--batch B] [--out results.jsonl] [--temperature T] [--top-k K] [--top-p P] [--seed S]
 *       [--stop STR]... [--tokenizer TOK] [--chat-template FILE] [--template-kwargs JSON]
 *       [--shots N --shots-file TRAIN.jsonl] [--backend cpu|cuda]
 *       [--weights auto|replica|gathered]
 *
 * Each question is a user turn rendered with the generation prompt by the model's chat template
 * (TOK's, or --chat-template FILE, with the variables of --template-kwargs: data/chat_cli.h)
 * (zero-shot; with --shots N the first N solved examples of the shots file come first, as
 * earlier user/assistant turns: eval/gsm8k_eval.h); sample i runs on rank i % N, B prompts at
 * a time as one ragged batch (models/generate.h), in host memory or with --backend cuda on the
 * rank's GPU. Every rank holds a full replica of the model (--weights replica), or only its
 * ZeRO-3 shards (--weights gathered, train/sharded.h): every forward then gathers each bucket
 * as it goes and the ranks decode in step (mt_gen_sync: one gather per bucket and decode step
 * for a rank's whole batch); --weights auto takes the replica when it fits the rank's memory.
 * What does not fit is refused at the start with the sizes. The
 * completion (special tokens left out; with a reply format, --reasoning-parser, its content after
 * the reasoning, models/reply.h) is scored by eval/gsm8k_answer.h against the gold answer.
 * Rank 0 prints the accuracy with its 95 % Wilson interval, and with --out writes one JSON line per
 * sample (index, prompt, completion, extracted, gold, correct), in data-set order, through a
 * temporary file renamed into place.
 * --task messages: the samples are conversations whose last assistant message is the reference,
 * the prompt the conversation before it, the answer scored by exact, normalized, contains and
 * regex match (--metric, --answer-regex; eval/messages_eval.h). With --shots, a warning when
 * evaluated questions are among the shots. */
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/chat.h"
#include "core/cli_flags.h"
#include "core/file_io.h"
#include "data/gsm8k.h"
#include "data/tokenizer.h"
#include "core/version.h"
#include "data/chat_cli.h"
#include "models/config.h"
#include "models/generate.h"
#include "eval/gsm8k_answer.h"
#include "eval/gsm8k_eval.h"
#include "models/minimax.h"
#include "models/family.h"
#include "models/reply.h"
#include "models/safetensors.h"
#include "models/weights.h"
#include "train/comm.h"
#include "train/profile_report.h"
#include "train/sharded.h"
#include "train/zero.h"

#define EV_MAX_STOPS 8

static int ev_rank = 0;
static mt_comm *ev_host; /* MPI_COMM_WORLD: an error on any rank aborts the job */

static void usage(int status) {
    fprintf(
        status ? stderr : stdout,
        "usage: minimax-eval --model DIR --data FILE.jsonl [--task gsm8k|messages]\n"
        "         [--metric exact|normalized|contains|regex] [--answer-regex RE]\n"
        "         [--limit N] [--max-new-tokens N]\n"
        "         [--batch B] [--out RESULTS.jsonl] [--tokenizer TOK] [--temperature T]\n"
        "         [--top-k K] [--top-p P] [--seed S] [--stop STR]...\n"
        "         [--chat-template FILE] [--template-kwargs JSON]\n"
        "         [--shots N --shots-file TRAIN.jsonl] [--backend cpu|cuda]\n"
        "         [--weights auto|replica|gathered] [--no-verify] [--profile]\n"
        "       minimax-eval --help | --version\n"
        "  run under mpirun -np N for N ranks (without it: one rank)\n"
        "  GSM8K accuracy by generation: each question of FILE.jsonl ({\"question\", "
        "\"answer\"} lines)\n"
        "  as a user turn with the generation prompt (zero-shot), the answer taken from the "
        "completion\n"
        "  (the number after ####, else the last number) and matched exactly with the "
        "gold's.\n"
        "  --task messages: each record of FILE.jsonl (any format of minimax-data: messages,\n"
        "    sharegpt, alpaca) ends with an assistant message, the reference; the prompt is\n"
        "    the conversation before it. Metrics: exact (byte for byte), normalized (ASCII\n"
        "    lowercase, whitespace runs to one space, whitespace and punctuation stripped at\n"
        "    the ends), contains (the normalised reference inside the normalised answer),\n"
        "    regex (--answer-regex RE, POSIX extended: its first group, or the whole match,\n"
        "    taken from answer and reference, equal); --metric picks the one reported as\n"
        "    accuracy (default: regex with --answer-regex, else exact)\n"
        "  Samples are split across the MPI ranks; each holds the whole model (--weights\n"
        "  replica), or 1/N of it and the ranks decode in step through ZeRO-3 gathers\n"
        "  (--weights gathered); auto (default): the replica when it fits\n"
        "  --backend cuda: decode on the rank's GPU (default cpu)\n"
        "  --tokenizer TOK: the directory of tokenizer.json and the chat template (default "
        "DIR)\n" MT_CHAT_CLI_HELP
        "  --reasoning-parser NAME: how the completion's reasoning is told from its answer\n"
        "    (%s; default: the model's family's); the answer is read after the reasoning\n"
        "  --limit N: the first N questions; --max-new-tokens (default 256); --batch "
        "(default 8)\n"
        "  --temperature 0 (default): greedy; else sampling, with --top-k, --top-p, --seed\n"
        "  --stop STR: also stop a completion when its text contains STR (up to %d)\n"
        "  --shots N: n-shot: the first N examples of --shots-file (question, answer; the\n"
        "    messages task: conversations) as earlier turns before each question (default 0:\n"
        "    zero-shot); a warning when evaluated questions are among them\n"
        "  --out: one JSON line per sample, written by rank 0 through a temporary file\n"
        "    (not --data or --shots-file; checked writable before the evaluation)\n"
        "  a prompt longer than the model's context (max_position_embeddings) is refused;\n"
        "  a completion stops where prompt and completion fill it\n"
        "  --no-verify: skip the check of the weights against the digests their files\n"
        "    record (docs/checkpoints.md)\n"
        "  --profile (or MT_PROFILE=1): rank 0's op profiles of the prefills and of the\n"
        "    decode steps, printed at the end (docs/evaluation.md, \"Speed on this machine\")\n",
        mt_reply_format_names(), EV_MAX_STOPS);
    exit(status);
}

/* A bad input: one line (rank 0 only, every rank sees the same input), then exit 1. */
static void ev_fail(const char *msg) {
    if (ev_rank == 0) fprintf(stderr, "minimax-eval: %s\n", msg);
    mt_comm_finalize(ev_host);
    exit(1);
}

/* A failure that only some ranks may meet (their own samples): every rank learns of it, the
 * lowest failing rank prints its line, all exit 1. */
static void ev_fail_any(bool failed, const char *msg) {
    int n_ranks = ev_host->size, first = failed ? ev_rank : n_ranks;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == n_ranks) return;
    if (ev_rank == first) fprintf(stderr, "minimax-eval: %s\n", msg);
    mt_comm_finalize(ev_host);
    exit(1);
}

typedef struct {
    const mt_tokenizer *tok;
    const char *const *stops;
    int n_stops;
} ev_stop_ctx;

/* The stop strings, on the decoded text of the row's tokens so far. */
static bool ev_stop(void *user, int b, const int32_t *toks, int n) {
    (void)b;
    const ev_stop_ctx *s = user;
    if (s->n_stops == 0) return false;
    char *text = mt_tokenizer_decode(s->tok, toks, n, true);
    bool hit = false;
    for (int i = 0; i < s->n_stops && !hit; i++) hit = strstr(text, s->stops[i]) != NULL;
    free(text);
    return hit;
}

/* --weights gathered: the ranks' watchdog (a collective waiting longer ends the job) */
#define EV_WATCH_S 1800.0

/* mt_gen_sync: the largest v of any rank */
static int ev_max_all(void *user, int v) {
    (void)user;
    int all = v;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

static double ev_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The command line (after MPI's): the flags into a; numbers and texts through
 * core/cli_flags.h (one line naming a refused one). Returns false on an unknown flag. */
typedef struct {
    const char *model_dir, *data_path, *out_path, *tok_dir, *shots_path, *backend, *weights,
        *chat_file, *kwargs, *reasoning_parser, *task, *metric, *answer_regex;
    const char *stops[EV_MAX_STOPS];
    int n_stops;
    long long limit, n_new, batch, top_k, n_shots;
    double temperature, top_p;
    uint64_t seed;
    bool verify;
    bool profile; /* --profile or MT_PROFILE: the op profiles of prefill and decode */
} ev_args;

static bool ev_parse(int argc, char **argv, ev_args *a) {
    *a = (ev_args){.backend = "cpu",
                   .task = "gsm8k",
                   .weights = "auto",
                   .limit = -1,
                   .n_new = 256,
                   .batch = 8,
                   .top_p = 1,
                   .verify = true};
    char msg[8400];
    for (int i = 1; i < argc; i++) {
        const bool more = i + 1 < argc;
        const char *f = argv[i], *v = more ? argv[i + 1] : NULL;
        bool ok = true; /* a number or text refused by core/cli_flags.h: its line in msg */
        if (!strcmp(f, "--model") && more)
            a->model_dir = argv[++i];
        else if (!strcmp(f, "--data") && more)
            a->data_path = argv[++i];
        else if (!strcmp(f, "--out") && more)
            a->out_path = argv[++i];
        else if (!strcmp(f, "--tokenizer") && more)
            a->tok_dir = argv[++i];
        else if (!strcmp(f, "--chat-template") && more)
            a->chat_file = argv[++i];
        else if (!strcmp(f, "--template-kwargs") && more)
            a->kwargs = argv[++i];
        else if (!strcmp(f, "--reasoning-parser") && more)
            a->reasoning_parser = argv[++i];
        else if (!strcmp(f, "--task") && more)
            a->task = argv[++i];
        else if (!strcmp(f, "--metric") && more)
            a->metric = argv[++i];
        else if (!strcmp(f, "--answer-regex") && more)
            a->answer_regex = argv[++i];
        else if (!strcmp(f, "--backend") && more)
            a->backend = argv[++i];
        else if (!strcmp(f, "--weights") && more)
            a->weights = argv[++i];
        else if (!strcmp(f, "--shots-file") && more)
            a->shots_path = argv[++i];
        else if (!strcmp(f, "--no-verify"))
            a->verify = false;
        else if (!strcmp(f, "--profile"))
            a->profile = true;
        else if (!strcmp(f, "--shots") && more)
            ok = mt_flag_int(argv[i++], v, 0, 64, &a->n_shots, msg, sizeof(msg));
        else if (!strcmp(f, "--limit") && more)
            ok = mt_flag_int(argv[i++], v, 1, INT64_MAX, &a->limit, msg, sizeof(msg));
        else if (!strcmp(f, "--max-new-tokens") && more)
            ok = mt_flag_int(argv[i++], v, 1, 100000, &a->n_new, msg, sizeof(msg));
        else if (!strcmp(f, "--batch") && more)
            ok = mt_flag_int(argv[i++], v, 1, MT_GEN_BATCH_MAX, &a->batch, msg, sizeof(msg));
        else if (!strcmp(f, "--top-k") && more)
            ok = mt_flag_int(argv[i++], v, 0, INT_MAX, &a->top_k, msg, sizeof(msg));
        else if (!strcmp(f, "--temperature") && more)
            ok = mt_flag_double(argv[i++], v, 0, false, HUGE_VAL, true, &a->temperature, msg,
                                sizeof(msg));
        else if (!strcmp(f, "--top-p") && more)
            ok = mt_flag_double(argv[i++], v, 0, true, 1, false, &a->top_p, msg, sizeof(msg));
        else if (!strcmp(f, "--seed") && more)
            ok = mt_flag_u64(argv[i++], v, &a->seed, msg, sizeof(msg));
        else if (!strcmp(f, "--stop") && more)
            ok = mt_flag_list_add(argv[i++], v, a->stops, &a->n_stops, EV_MAX_STOPS, msg,
                                  sizeof(msg));
        else
            return false;
        if (!ok) ev_fail(msg);
    }
    return true;
}

/* What the evaluation reads besides the model: the tokenizer, the template, the questions and
 * the solved examples (each refused in one line naming the file). */
typedef struct {
    const char *tok_dir;
    mt_tokenizer *tok;
    mt_chat_template *chat;
    mt_gsm8k_set set, shots;     /* --task gsm8k */
    mt_msgs_set msgs, msg_shots; /* --task messages */
    int64_t n;                   /* samples in the file */
} ev_inputs;

static void ev_inputs_load(const ev_args *a, ev_inputs *in) {
    char msg[8400], err[MT_ERR_LEN + 8400];
    const char *model_dir = a->model_dir, *data_path = a->data_path, *shots_path = a->shots_path,
               *tok_dir = a->tok_dir ? a->tok_dir : a->model_dir;
    const long long n_shots = a->n_shots;
    in->tok_dir = tok_dir;
    if (!mt_minimax_config_readable(model_dir, err, sizeof(err))) ev_fail(err);
    in->tok = mt_chat_tokenizer_load(tok_dir, err, sizeof(err));
    if (!in->tok) ev_fail(err);
    in->chat = mt_chat_cli_open(tok_dir, a->chat_file, a->kwargs, err, sizeof(err));
    if (!in->chat) ev_fail(err);
    in->set = in->shots = (mt_gsm8k_set){0};
    in->msgs = in->msg_shots = (mt_msgs_set){0};
    const bool msgs = !strcmp(a->task, "messages");
    if (msgs ? mt_msgs_read(data_path, &in->msgs, err, sizeof(err)) != 0
             : mt_gsm8k_read(data_path, false, &in->set, err) != 0)
        ev_fail(err);
    in->n = msgs ? in->msgs.n : in->set.n;
    if (in->n == 0) {
        snprintf(msg, sizeof(msg), "%s:1: no %s in the file", data_path,
                 msgs ? "conversations" : "questions");
        ev_fail(msg);
    }
    if (n_shots > 0 && (msgs ? mt_msgs_read(shots_path, &in->msg_shots, err, sizeof(err)) != 0
                             : mt_gsm8k_read(shots_path, false, &in->shots, err) != 0))
        ev_fail(err);
    const int64_t have = msgs ? in->msg_shots.n : in->shots.n;
    if (n_shots > have) {
        snprintf(msg, sizeof(msg), "%s: --shots %lld but the file has %lld examples", shots_path,
                 n_shots, (long long)have);
        ev_fail(msg);
    }
}

/* Rank 0 warns when the shots hold questions that are evaluated: their answers are then in the
 * prompt, and the accuracy is not that of unseen questions. */
static void ev_warn_overlap(const mt_gsm8k_eval *e, int64_t n, const char *shots_path) {
    int64_t first;
    const int64_t k = e->n_shots > 0 ? mt_gsm8k_eval_overlap(e, n, &first) : 0;
    if (ev_rank == 0 && k > 0)
        fprintf(stderr,
                "minimax-eval: warning: %lld of the %lld samples evaluated (the first: sample "
                "%lld, line %lld) have the question of one of the %d shots of %s: the answer is "
                "in their prompt (give the shots from another split)\n",
                (long long)k, (long long)n, (long long)first,
                (long long)mt_gsm8k_eval_line(e, first), e->n_shots, shots_path);
}

/* Whether this rank decodes through the ZeRO-3 gathers (--weights gathered, or auto when a
 * replica does not fit) rather than from a replica: what a rank holds against its memory (on the
 * CPU its share of the node's), every rank deciding alike: a full replica, or (gathered) its ZeRO-3
 * shards of the weights and two gather slots; both the caches and the arena */
static bool ev_plan_weights(const ev_args *a, const mt_minimax *m, const mt_minimax_config *cfg,
                            const mt_backend *be, size_t arena, int t_cache, int n_ranks) {
    char msg[8400];
    int64_t params = 0;
    for (int b = 0; b < m->n_buckets; b++) params += m->bucket_numel[b];
    const mt_zero_sizes zs = mt_zero_plan(n_ranks, m->n_buckets, m->bucket_numel, MT_F32, false);
    const int64_t decode =
        (int64_t)arena + (int64_t)mt_minimax_cache_bytes(cfg, (int)a->batch, t_cache);
    long need[2] = {(long)(4 * params + decode), (long)(4 * zs.owned + zs.slot_bytes + decode)};
    long have = be->mem_available ? (long)be->mem_available() : 0;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int n_local = n_ranks; /* the ranks sharing this node's memory (Open MPI says; else all) */
    if (local &&
        !mt_flag_int32("OMPI_COMM_WORLD_LOCAL_SIZE", local, 1, INT_MAX, &n_local, msg, sizeof(msg)))
        n_local = n_ranks;
    if (be->dev == MT_CPU) have /= n_local;
    /* the largest needs, the smallest have */
    long worst[3] = {need[0], need[1], have > 0 ? -have : -LONG_MAX};
    MPI_Allreduce(MPI_IN_PLACE, worst, 3, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    const bool known = worst[2] != -LONG_MAX;
    const bool gathered = !strcmp(a->weights, "gathered") ||
                          (!strcmp(a->weights, "auto") && known && worst[0] > -worst[2]);
    if (known && worst[gathered] > -worst[2]) {
        snprintf(msg, sizeof(msg),
                 "%s: %s needs %.2f GiB of %s memory (weights %.2f GiB, caches of --batch %d, "
                 "arena) but a rank has %.2f GiB; lower --batch%s",
                 a->model_dir,
                 gathered ? "decoding through the ZeRO-3 gathers (--weights gathered)"
                          : "a replica of the model on each rank (--weights replica)",
                 (double)worst[gathered] / (1 << 30), be->name,
                 (double)(gathered ? 4 * zs.owned + zs.slot_bytes : 4 * params) / (1 << 30),
                 (int)a->batch, (double)-worst[2] / (1 << 30),
                 gathered ? " or add ranks (each holds 1/N of the model)"
                          : ", use fewer ranks per node, or --weights gathered");
        ev_fail(msg);
    }
    if (ev_rank == 0 && gathered)
        fprintf(stderr,
                "minimax-eval: decoding through the ZeRO-3 gathers (--weights %s): %.2f GiB a "
                "rank instead of a %.2f GiB replica\n",
                a->weights, (double)worst[1] / (1 << 30), (double)worst[0] / (1 << 30));
    return gathered;
}

/* Rank 0 gathers the counts and the lines, rebuilds the data-set order, prints the accuracy
 * and writes --out. */
static void ev_report(const ev_args *a, const mt_strbuf *lines, int64_t n,
                      const mt_gsm8k_counts *cnt, const mt_match *match, double t0) {
    const int n_ranks = ev_host->size;
    const char *out_path = a->out_path;
    long total[3 + MT_MATCH_COUNT] = {0},
                   mine[3 + MT_MATCH_COUNT] = {(long)cnt->correct, (long)cnt->tokens,
                                               (long)cnt->in_reasoning};
    for (int k = 0; k < MT_MATCH_COUNT; k++) mine[3 + k] = (long)cnt->hits[k];
    MPI_Reduce(mine, total, 3 + MT_MATCH_COUNT, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    const long total_correct = total[0];
    int my_len = (int)lines->len;
    int *all_len = ev_rank == 0 ? mt_calloc((size_t)n_ranks, sizeof(int), "lengths") : NULL;
    int *displ = ev_rank == 0 ? mt_calloc((size_t)n_ranks, sizeof(int), "offsets") : NULL;
    MPI_Gather(&my_len, 1, MPI_INT, all_len, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char *all = NULL;
    int all_n = 0;
    if (ev_rank == 0) {
        for (int r = 0; r < n_ranks; r++) {
            displ[r] = all_n;
            all_n += all_len[r];
        }
        all = mt_malloc((size_t)all_n + 1, "gathered lines");
    }
    MPI_Gatherv(lines->p ? lines->p : "", my_len, MPI_CHAR, all, all_len, displ, MPI_CHAR, 0,
                MPI_COMM_WORLD);
    if (ev_rank == 0) {
        double lo, hi;
        mt_gsm8k_eval_wilson(total_correct, n, &lo, &hi);
        const double el = ev_now() - t0;
        if (match) { /* the chosen metric, then every one */
            printf("messages %s %.2f%% (%ld / %lld), 95%% Wilson interval [%.2f%%, %.2f%%]; ",
                   mt_match_metric_name(match->metric), 100.0 * (double)total_correct / (double)n,
                   total_correct, (long long)n, 100 * lo, 100 * hi);
            for (int k = 0; k < MT_MATCH_COUNT; k++)
                if (k != MT_MATCH_REGEX || match->has_regex)
                    printf("%s %.2f%% (%ld), ", mt_match_metric_name((mt_match_metric)k),
                           100.0 * (double)total[3 + k] / (double)n, total[3 + k]);
        } else {
            printf("gsm8k accuracy %.2f%% (%ld / %lld), 95%% Wilson interval [%.2f%%, %.2f%%]; ",
                   100.0 * (double)total_correct / (double)n, total_correct, (long long)n, 100 * lo,
                   100 * hi);
        }
        printf("%ld tokens generated in %.2f s on %d ranks (%.1f tokens/s)\n", total[1], el,
               n_ranks, (double)total[1] / el);
        /* the answer is read from the content after the reasoning: none when it never ended */
        if (total[2] > 0)
            printf("%ld of %lld completions ended inside their reasoning (no answer after it; "
                   "a larger --max-new-tokens may help)\n",
                   total[2], (long long)n);
        if (out_path) {
            int64_t *d64 = mt_calloc((size_t)n_ranks, sizeof(int64_t), "offsets");
            int64_t *l64 = mt_calloc((size_t)n_ranks, sizeof(int64_t), "lengths");
            for (int r = 0; r < n_ranks; r++) {
                d64[r] = displ[r];
                l64[r] = all_len[r];
            }
            mt_strbuf ordered = {0};
            mt_gsm8k_eval_order(all, d64, l64, n_ranks, n, &ordered);
            mt_file_write_atomic(out_path, ordered.p ? ordered.p : "", ordered.len);
            mt_strbuf_free(&ordered);
            free(d64);
            free(l64);
        }
        free(all);
        free(all_len);
        free(displ);
    }
}

/* The weights a rank decodes with: a replica (data), or with --weights gathered its ZeRO-3 shards
 * (each rank loads what it owns; the forwards gather the rest through sync). */
typedef struct {
    bool gathered;
    float **data; /* the replica's buckets */
    mt_comm *comm;
    mt_zero z;
    mt_sharded sh;
    mt_bucket_hooks hooks;
    mt_gen_sync sync;
} ev_weights;

static void ev_weights_load(ev_weights *w, const ev_args *a, mt_minimax *m, const mt_backend *be,
                            mt_ctx *c) {
    if (!w->gathered) {
        w->data = mt_weights_load_backend_checked(a->model_dir, m, be, a->verify);
        return;
    }
    mt_comm_mpi_watch(ev_host, EV_WATCH_S);
    w->comm = be->dev == MT_CPU ? ev_host : mt_comm_nccl_init(ev_host, EV_WATCH_S);
    MT_CHECK(w->comm, "--weights gathered --backend %s: no NCCL communicator", a->backend);
    mt_zero_init_inference(&w->z, w->comm, be, m->n_buckets, m->bucket_numel);
    mt_zero_share_node(&w->z); /* one node: the weights once, no gathers per step (zero.h) */
    mt_weights_reader *reader = mt_weights_open(a->model_dir, m);
    if (a->verify) mt_weights_verify(reader, a->model_dir, ev_rank, ev_host->size); /* split */
    mt_sharded_load(&w->z, m, reader, 0);
    mt_weights_close(reader);
    mt_sharded_init(&w->sh, m, &w->z, c);
    mt_sharded_bind(&w->sh, false);
    w->hooks = mt_sharded_forward_hooks(&w->sh);
    w->sync = (mt_gen_sync){.hooks = &w->hooks, .max_all = ev_max_all};
}

static void ev_weights_free(ev_weights *w, mt_minimax *m, const mt_backend *be) {
    if (w->gathered) {
        mt_zero_free(&w->z);
        if (w->comm != ev_host) mt_comm_nccl_free(w->comm);
    } else {
        mt_weights_backend_free(m, be, w->data);
    }
}

/* The flags that need no file: refused in one line each (rank 0), and --out checked writable
 * before the evaluation rather than after it. Returns whether the task is messages (match
 * then set up from --metric / --answer-regex). */
static bool ev_check_args(const ev_args *a, mt_match *match) {
    char msg[8400];
    const char *model_dir = a->model_dir, *data_path = a->data_path, *out_path = a->out_path,
               *shots_path = a->shots_path, *weights = a->weights;
    if (!model_dir || !data_path) ev_fail("--model DIR and --data FILE are required (--help)");
    if (strcmp(weights, "auto") && strcmp(weights, "replica") && strcmp(weights, "gathered"))
        ev_fail("--weights auto, replica or gathered");
    if (a->n_shots > 0 && !shots_path)
        ev_fail("--shots N needs --shots-file FILE.jsonl (the solved examples: a train split)");
    const bool task_msgs = !strcmp(a->task, "messages");
    if (!task_msgs && strcmp(a->task, "gsm8k"))
        ev_fail("--task gsm8k (the default: GSM8K problems) or messages (conversations whose "
                "last assistant message is the reference)");
    if (!task_msgs && (a->metric || a->answer_regex))
        ev_fail(a->metric ? "--metric is for --task messages (GSM8K compares the numbers)"
                          : "--answer-regex is for --task messages (GSM8K compares the numbers)");
    static const char *const match_flags[2] = {"--metric", "--answer-regex"};
    if (task_msgs &&
        mt_match_init(match, a->metric, a->answer_regex, match_flags, msg, sizeof(msg)) != 0)
        ev_fail(msg);
    /* the results never overwrite an input, and a place that cannot take them is refused
     * before the evaluation rather than after it (rank 0 writes them) */
    if (out_path) {
        bool ok = mt_out_not_input("--out", out_path, "--data", data_path, msg, sizeof(msg)) &&
                  mt_out_not_input("--out", out_path, "--shots-file", shots_path, msg, sizeof(msg));
        if (!ok) ev_fail(msg);
        ev_fail_any(ev_rank == 0 && !mt_out_writable("--out", out_path, msg, sizeof(msg)), msg);
    }
    return task_msgs;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) usage(0);
        if (!strcmp(argv[i], "--version")) {
            mt_version_print(stdout, "minimax-eval");
            return 0;
        }
    }
    ev_host = mt_comm_mpi_init(&argc, &argv);
    const int n_ranks = ev_host->size;
    ev_rank = ev_host->rank;
    ev_args a;
    if (!ev_parse(argc, argv, &a)) {
        if (ev_rank == 0) usage(2);
        mt_comm_finalize(ev_host);
        return 2;
    }
    const char *model_dir = a.model_dir, *data_path = a.data_path, *shots_path = a.shots_path;
    const long long limit = a.limit, n_new = a.n_new, n_shots = a.n_shots;
    mt_match match = {0};
    const bool task_msgs = ev_check_args(&a, &match);
    ev_inputs in;
    ev_inputs_load(&a, &in);
    const char *tok_dir = in.tok_dir;
    mt_tokenizer *tok = in.tok;
    mt_chat_template *chat = in.chat;
    mt_gsm8k_set set = in.set, shots = in.shots;
    mt_msgs_set msgs = in.msgs, msg_shots = in.msg_shots;
    char err[MT_ERR_LEN + 8400];
    mt_minimax_config cfg;
    mt_minimax_config_load(model_dir, &cfg);
    if (!mt_chat_tokenizer_fits(tok, tok_dir, cfg.vocab_size, err, sizeof(err))) ev_fail(err);
    if (!mt_chat_template_tokens_fit(chat, tok, tok_dir, err, sizeof(err))) ev_fail(err);
    const mt_reply_format *reply =
        mt_reply_format_pick(a.reasoning_parser, mt_config_family(&cfg), err, sizeof(err));
    if (!reply) ev_fail(err);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    const mt_backend *be = mt_gen_backend_named(a.backend, &m, err, sizeof(err));
    if (!be) ev_fail(err);

    const int64_t n = limit >= 0 && limit < in.n ? limit : in.n;
    /* every gold evaluated is one number the scorer reads, or the file:line is refused (the
     * messages task: the prompt check below refuses a reference --answer-regex cannot read) */
    if (!task_msgs && mt_gsm8k_check_golds(&set, data_path, n, err, sizeof(err)) != 0) ev_fail(err);
    /* this rank's samples: i = rank, rank + N, ... (balanced, and the order rank 0 rebuilds) */
    const int64_t n_mine = n > ev_rank ? (n - ev_rank - 1) / n_ranks + 1 : 0;
    const int32_t eos = mt_chat_cli_eos(chat, tok, cfg.eos_token_id);
    ev_stop_ctx sc = {.tok = tok, .stops = a.stops, .n_stops = a.n_stops};
    mt_gen_opts o = {.temperature = (float)a.temperature,
                     .top_k = (int)a.top_k,
                     .top_p = (float)a.top_p,
                     .seed = a.seed,
                     .eos = eos,
                     .stop = a.n_stops ? ev_stop : NULL,
                     .stop_user = &sc};
    mt_gsm8k_eval ev = {.model = &m,
                        .tok = tok,
                        .chat = chat,
                        .set = &set,
                        .shots = n_shots ? &shots : NULL,
                        .n_shots = (int)n_shots,
                        .n_new = (int)n_new,
                        .opts = o,
                        .reply = reply,
                        .msgs = task_msgs ? &msgs : NULL,
                        .msg_shots = task_msgs && n_shots ? &msg_shots : NULL,
                        .match = &match};
    mt_strbuf lines = {0}; /* this rank's JSON lines, in its samples' order */
    mt_gsm8k_counts cnt = {0};
    const int B = (int)a.batch;
    int64_t *row_ids = mt_calloc((size_t)B, sizeof(int64_t), "row ids");
    /* the arena holds one prompt forward: sized for this rank's longest */
    const int longest = mt_gsm8k_eval_longest(&ev, ev_rank, n_ranks, n_mine, err, sizeof(err));
    ev_fail_any(longest < 0, err);
    ev_warn_overlap(&ev, n, shots_path);
    if (ev_rank == 0)
        fprintf(stderr,
                "minimax-eval: %lld samples on %d ranks, %lld-shot prompts of up to %d "
                "tokens on rank 0\n",
                (long long)n, n_ranks, n_shots, longest);
    /* a completion stops where prompt and completion fill the context (models/generate.h):
     * said once, with the longest prompt of any rank */
    int longest_all = longest;
    MPI_Allreduce(MPI_IN_PLACE, &longest_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const int ctx_len = cfg.max_position_embeddings;
    if (ev_rank == 0 && ctx_len > 0 && longest_all + n_new > ctx_len)
        fprintf(stderr,
                "minimax-eval: --max-new-tokens %lld: prompts of up to %d tokens leave %d of the "
                "model's context (max_position_embeddings %d); a completion stops there\n",
                n_new, longest_all, ctx_len - longest_all, ctx_len);
    const int t_cache = ctx_len > 0 && longest + n_new > ctx_len ? ctx_len : longest + (int)n_new;
    const size_t arena = mt_minimax_generate_arena_bytes(&cfg, 1, longest);
    const bool gathered = ev_plan_weights(&a, &m, &cfg, be, arena, t_cache, n_ranks);
    mt_ctx c;
    mt_ctx_init(&c, be, arena, 64 * (cfg.num_hidden_layers + 4));
    ev_weights w = {.gathered = gathered};
    ev_weights_load(&w, &a, &m, be, &c);
    if (gathered) ev.opts.sync = &w.sync;
    ev.ctx = &c;
    mt_profile prof[2] = {0}; /* the prefills, the decode steps */
    if (mt_profile_wanted(a.profile)) {
        ev.opts.prof_prefill = &prof[0];
        ev.opts.prof_decode = &prof[1];
    }
    const double t0 = ev_now();
    /* through the gathers the ranks run in step: as many batches as the rank with the most */
    const int64_t n_runs = gathered ? (n + n_ranks - 1) / n_ranks : n_mine;
    for (int64_t j0 = 0; j0 < n_runs; j0 += B) {
        const int64_t left = n_mine - j0 > 0 ? n_mine - j0 : 0;
        const int nb = (int)(left < B ? left : B);
        for (int r = 0; r < nb; r++) row_ids[r] = ev_rank + (j0 + r) * n_ranks;
        mt_gsm8k_eval_batch(&ev, row_ids, nb, &lines, &cnt);
        if (ev_rank == 0 && nb > 0) { /* rank 0's share, a proxy for the whole: ranks run alike */
            const int64_t done = j0 + nb;
            const double el = ev_now() - t0, eta = el / (double)done * (double)(n_mine - done);
            fprintf(stderr, "minimax-eval: rank 0 %lld/%lld samples, %.1f s, ETA %.1f s\n",
                    (long long)done, (long long)n_mine, el, eta);
        }
    }

    ev_report(&a, &lines, n, &cnt, task_msgs ? &match : NULL, t0);
    if (ev_rank == 0 && ev.opts.prof_decode) {
        mt_profile_print(stdout, &prof[0], "rank 0's prefills, one prompt a step");
        mt_profile_print(stdout, &prof[1], "rank 0's decode steps");
    }
    mt_ctx_free(&c);
    free(row_ids);
    mt_strbuf_free(&lines);
    ev_weights_free(&w, &m, be);
    mt_minimax_free(&m);
    mt_tokenizer_free(tok);
    mt_chat_template_free(chat);
    mt_gsm8k_set_free(&set);
    mt_gsm8k_set_free(&shots);
    mt_msgs_set_free(&msgs);
    mt_msgs_set_free(&msg_shots);
    mt_match_free(&match);
    mt_comm_finalize(ev_host);
    return 0;
}
