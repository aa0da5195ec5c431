/* minimax_data_main.c: the `minimax-data` tool: tokenize a data set into the token cache, show
 * one record's samples with their loss mask, render a conversation with the chat template,
 * encode a text, write synthetic problems.
 * Exit status: 0 success, 1 bad input or failed write, 2 bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/file_io.h"
#include "data/chat.h"
#include "core/cli_flags.h"
#include "data/synth.h"
#include "data/token_cache.h"
#include "data/tokenizer.h"
#include "core/version.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: minimax-data <command> [options]   (minimax-data --help | --version)\n"
        "  tokenize --data FILE --tokenizer DIR --out CACHE.h5 [sample options]\n"
        "           [--skip-bad] [--force]\n"
        "      render, tokenize and label every record; reuse CACHE.h5 when it matches\n"
        "  show     --data FILE --tokenizer DIR [--index I] [sample options]\n"
        "           [--tokens] [--color | --no-color]\n"
        "      print the samples of record I (0-based) with untrained tokens (label -100)\n"
        "      dimmed, or inside \xe2\x9f\xa6 \xe2\x9f\xa7 without color\n"
        "  render   --conversation CONV.json (--tokenizer DIR | --chat-template FILE)\n"
        "           [--template-kwargs JSON]\n"
        "           [--add-generation-prompt | --spans]\n"
        "      print what the chat template renders for CONV.json ({\"messages\": [...],\n"
        "      \"tools\"?, \"documents\"?, other keys as template variables}), byte for byte as\n"
        "      transformers' apply_chat_template(tokenize=False); --spans: JSON {\"text\",\n"
        "      \"trained\": [[start, end] byte ranges]} (every assistant message, less \"loss\":\n"
        "      false)\n"
        "  encode   --tokenizer DIR (--text S | --file F) [--tokens]\n"
        "      print the ids of S (or of the bytes of F) and their byte offsets, as one JSON\n"
        "      object {\"ids\": [...], \"offsets\": [[start, end], ...]} (no special tokens\n"
        "      added, as HF encode(add_special_tokens=False)); --tokens: a table instead\n"
        "  synth    --out FILE.jsonl [--n N (1000)] [--seed S (1234)]\n"
        "           [--kind gsm8k|agentic|pairs]\n"
        "      write N synthetic GSM8K-style problems, or (agentic) conversations solving them\n"
        "      with a calculator tool, with reasoning (the messages format), or (pairs)\n"
        "      preference pairs {\"chosen\", \"rejected\"} for a reward model (TRL's format)\n"
        "template options (docs/templates.md): --chat-template FILE (instead of DIR's)\n"
        "                --template-kwargs JSON (template variables, e.g. {\"thinking_mode\": "
        "...})\n"
        "sample options: template options, --format F (auto) --max-length N (512)\n"
        "                --policy drop|truncate (drop) --strip-annotations --system TEXT\n"
        "                --train-on all_assistant|last_assistant (all_assistant)\n"
        "                --reasoning-history as_template|split (as_template)\n"
        "DIR holds tokenizer.json and tokenizer_config.json (a Hugging Face model directory).\n");
}

typedef struct {
    const char *data, *tokenizer, *out, *system, *text, *file, *conversation, *chat_template,
        *template_kwargs, *format, *train_on, *history, *kind;
    long long max_length, index, n, seed;
    const char *policy;
    int strip, skip_bad, force, tokens, color, agp, spans; /* color: -1 auto */
} args;

/* A number flag through core/cli_flags.h: each its own range, one line naming it. */
static int parse_int(const char *flag, const char *v, long long *out) {
    const long long lo = !strcmp(flag, "--max-length") ? 2 : !strcmp(flag, "--n") ? 1 : 0;
    char err[256];
    if (mt_flag_int(flag, v, lo, INT64_MAX, out, err, sizeof(err))) return 0;
    fprintf(stderr, "minimax-data: %s\n", err);
    return -1;
}

static int parse_args(int argc, char **argv, args *a) {
    *a = (args){.max_length = 512,
                .n = 1000,
                .seed = 1234,
                .policy = "drop",
                .color = -1,
                .format = "auto",
                .train_on = "all_assistant",
                .history = "as_template",
                .kind = "gsm8k"};
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **str = !strcmp(f, "--data")                ? &a->data
                           : !strcmp(f, "--tokenizer")         ? &a->tokenizer
                           : !strcmp(f, "--out")               ? &a->out
                           : !strcmp(f, "--system")            ? &a->system
                           : !strcmp(f, "--policy")            ? &a->policy
                           : !strcmp(f, "--text")              ? &a->text
                           : !strcmp(f, "--file")              ? &a->file
                           : !strcmp(f, "--conversation")      ? &a->conversation
                           : !strcmp(f, "--chat-template")     ? &a->chat_template
                           : !strcmp(f, "--template-kwargs")   ? &a->template_kwargs
                           : !strcmp(f, "--format")            ? &a->format
                           : !strcmp(f, "--train-on")          ? &a->train_on
                           : !strcmp(f, "--reasoning-history") ? &a->history
                           : !strcmp(f, "--kind")              ? &a->kind
                                                               : NULL;
        long long *num = !strcmp(f, "--max-length") ? &a->max_length
                         : !strcmp(f, "--index")    ? &a->index
                         : !strcmp(f, "--n")        ? &a->n
                         : !strcmp(f, "--seed")     ? &a->seed
                                                    : NULL;
        if (str || num) {
            if (!v) {
                fprintf(stderr, "minimax-data: %s needs a value\n", f);
                return -1;
            }
            if (str)
                *str = v;
            else if (parse_int(f, v, num) != 0)
                return -1;
            i++;
        } else if (!strcmp(f, "--strip-annotations"))
            a->strip = 1;
        else if (!strcmp(f, "--skip-bad"))
            a->skip_bad = 1;
        else if (!strcmp(f, "--force"))
            a->force = 1;
        else if (!strcmp(f, "--tokens"))
            a->tokens = 1;
        else if (!strcmp(f, "--color"))
            a->color = 1;
        else if (!strcmp(f, "--no-color"))
            a->color = 0;
        else if (!strcmp(f, "--add-generation-prompt"))
            a->agp = 1;
        else if (!strcmp(f, "--spans"))
            a->spans = 1;
        else {
            fprintf(stderr, "minimax-data: unknown option %s\n", f);
            return -1;
        }
    }
    if (strcmp(a->policy, "drop") && strcmp(a->policy, "truncate")) {
        fprintf(stderr, "minimax-data: --policy is drop or truncate, got \"%s\"\n", a->policy);
        return -1;
    }
    if (mt_data_format_parse(a->format) < 0) {
        fprintf(stderr, "minimax-data: --format is one of %s, got \"%s\"\n", mt_data_format_list(),
                a->format);
        return -1;
    }
    if (strcmp(a->train_on, "all_assistant") && strcmp(a->train_on, "last_assistant")) {
        fprintf(stderr, "minimax-data: --train-on is all_assistant or last_assistant, got \"%s\"\n",
                a->train_on);
        return -1;
    }
    if (mt_reasoning_history_parse(a->history) < 0) {
        fprintf(stderr, "minimax-data: --reasoning-history is as_template or split, got \"%s\"\n",
                a->history);
        return -1;
    }
    if (a->agp && a->spans) {
        fprintf(stderr,
                "minimax-data: --spans shows a training sample: no --add-generation-prompt\n");
        return -1;
    }
    return 0;
}

static int need(const char *cmd, const char *flag, const char *v) {
    if (v) return 0;
    fprintf(stderr, "minimax-data %s: %s is required\n", cmd, flag);
    return -1;
}

static mt_sample_opts sample_opts(const args *a) {
    mt_sample_opts o;
    mt_sample_opts_default(&o);
    o.system = a->system;
    o.strip_annotations = a->strip;
    o.max_length = a->max_length;
    o.policy = strcmp(a->policy, "drop") ? MT_TRUNC_TRUNCATE : MT_TRUNC_DROP;
    o.last_assistant_only = !strcmp(a->train_on, "last_assistant");
    o.history = (mt_reasoning_history)mt_reasoning_history_parse(a->history);
    return o;
}

static mt_chat_template *open_template(const args *a, const char *cmd) {
    const mt_chat_source src = {
        .dir = a->tokenizer, .file = a->chat_template, .kwargs_json = a->template_kwargs};
    char err[MT_ERR_LEN];
    mt_chat_template *t = mt_chat_template_open(&src, err, sizeof(err));
    if (!t) fprintf(stderr, "minimax-data %s: %s\n", cmd, err);
    return t;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmd_tokenize(const args *a) {
    if (need("tokenize", "--data", a->data) || need("tokenize", "--tokenizer", a->tokenizer) ||
        need("tokenize", "--out", a->out))
        return 2;
    /* the cache never replaces its data, and a place that cannot take it is refused before the
     * tokenizing rather than after it */
    char err[MT_ERR_LEN];
    if (!mt_out_not_input("--out", a->out, "--data", a->data, err, sizeof(err)) ||
        !mt_out_writable("--out", a->out, err, sizeof(err))) {
        fprintf(stderr, "minimax-data tokenize: %s\n", err);
        return 1;
    }
    mt_token_cache_cfg cfg = {.data_path = a->data,
                              .tokenizer_dir = a->tokenizer,
                              .cache_path = a->out,
                              .chat_template = a->chat_template,
                              .template_kwargs = a->template_kwargs,
                              .format = (mt_data_format)mt_data_format_parse(a->format),
                              .sample = sample_opts(a),
                              .skip_bad = a->skip_bad,
                              .force = a->force};
    double t0 = now_s();
    mt_token_data d;
    bool reused;
    if (mt_token_cache_open(&cfg, &d, &reused, err) != 0) {
        fprintf(stderr, "minimax-data tokenize: %s\n", err);
        return 1;
    }
    double dt = now_s() - t0;
    printf("cache      %s (%s)\n", a->out, reused ? "reused" : "built");
    printf("records    %lld\n", (long long)d.n_lines);
    printf("samples    %lld\n", (long long)d.n_samples);
    printf("skipped    %lld\n", (long long)d.n_skipped);
    printf("dropped    %lld\n", (long long)d.n_dropped);
    printf("truncated  %lld\n", (long long)d.n_truncated);
    printf("tokens     %lld\n", (long long)d.n_tokens);
    printf("assistant  %lld (%.2f%% of tokens have a label)\n", (long long)d.n_targets,
           d.n_tokens ? 100.0 * (double)d.n_targets / (double)d.n_tokens : 0.0);
    printf("time       %.3f s\n", dt);
    if (d.n_skipped > 0)
        fprintf(stderr, "minimax-data tokenize: skipped %lld bad line(s) of %s\n",
                (long long)d.n_skipped, a->data);
    mt_token_data_free(&d);
    return 0;
}

/* Prints text[from, to) with control characters other than newline made visible. */
static void put_text(const char *s, int64_t from, int64_t to) {
    for (int64_t i = from; i < to; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 && c != '\n')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

/* One sample built in b: the rendering with untrained tokens marked, then the token table. */
static void show_sample(const args *a, const mt_sample_builder *b) {
    bool color = a->color < 0 ? isatty(STDOUT_FILENO) : a->color;
    printf("%s\n", color ? "untrained tokens are dimmed:"
                         : "untrained tokens are inside \xe2\x9f\xa6 \xe2\x9f\xa7:");
    const int64_t *off = b->tokens.offsets;
    const char *text = b->rendered.text;
    int64_t printed = 0; /* byte offsets of neighbours can overlap inside one character */
    for (int64_t t = 0; t < b->n;) {
        bool masked = b->lab[t] == MT_IGNORE_INDEX;
        int64_t e = t;
        while (e < b->n && (b->lab[e] == MT_IGNORE_INDEX) == masked) e++;
        int64_t from = off[2 * t] > printed ? off[2 * t] : printed, to = off[2 * (e - 1) + 1];
        if (masked) printf("%s", color ? "\x1b[2m" : "\xe2\x9f\xa6");
        put_text(text, from, to);
        if (masked) printf("%s", color ? "\x1b[0m" : "\xe2\x9f\xa7");
        printed = to > printed ? to : printed;
        t = e;
    }
    printf("\n");
    if (!a->tokens) return;
    printf("%6s %8s %8s  %s\n", "index", "id", "label", "text");
    for (int64_t t = 0; t < b->n; t++) {
        printf("%6lld %8d %8d  \"", (long long)t, b->ids[t], b->lab[t]);
        put_text(text, off[2 * t], off[2 * t + 1]);
        printf("\"\n");
    }
}

static int cmd_show(const args *a) {
    if (need("show", "--data", a->data) || need("show", "--tokenizer", a->tokenizer)) return 2;
    char err[MT_ERR_LEN], path[4096];
    mt_chat_template *tmpl = open_template(a, "show");
    if (!tmpl) return 1;
    mt_conv_set set;
    if (mt_conv_read(a->data, (mt_data_format)mt_data_format_parse(a->format), a->skip_bad, &set,
                     err) != 0) {
        fprintf(stderr, "minimax-data show: %s\n", err);
        mt_chat_template_free(tmpl);
        return 1;
    }
    if (a->index < 0 || a->index >= set.n) {
        fprintf(stderr, "minimax-data show: --index %lld is outside the %lld records of %s\n",
                a->index, (long long)set.n, a->data);
        mt_conv_set_free(&set);
        mt_chat_template_free(tmpl);
        return 1;
    }
    snprintf(path, sizeof(path), "%s/tokenizer.json", a->tokenizer);
    mt_tokenizer *tok = mt_tokenizer_load(path);
    mt_sample_opts o = sample_opts(a);
    mt_sample_builder b;
    mt_sample_builder_init(&b, tok, tmpl, &o);
    const int64_t i = a->index, line = set.line[i];
    const int k = mt_sample_conv_open(&b, set.json[i], set.json_len[i], err);
    int status = k < 0;
    if (k < 0) fprintf(stderr, "minimax-data show: %s:%lld: %s\n", a->data, (long long)line, err);
    if (k == 0)
        printf("record %lld (%s line %lld): no trained message\n", (long long)i, a->data,
               (long long)line);
    for (int p = 0; p < k && !status; p++) {
        const int rc = mt_sample_build_piece(&b, p, err);
        printf("%srecord %lld (%s line %lld), sample %d of %d: ", p ? "\n" : "", (long long)i,
               a->data, (long long)line, p + 1, k);
        if (rc == MT_SAMPLE_ERROR) {
            printf("error\n");
            fprintf(stderr, "minimax-data show: %s:%lld: %s\n", a->data, (long long)line, err);
            status = 1;
        } else if (rc == MT_SAMPLE_DROPPED) {
            printf("%lld tokens > --max-length %lld: dropped\n", (long long)b.n_full,
                   a->max_length);
        } else {
            printf("%lld tokens%s, %lld with a label\n", (long long)b.n,
                   rc == MT_SAMPLE_TRUNCATED ? " (truncated)" : "", (long long)b.n_targets);
            show_sample(a, &b);
        }
    }
    mt_sample_builder_free(&b);
    mt_tokenizer_free(tok);
    mt_conv_set_free(&set);
    mt_chat_template_free(tmpl);
    return status;
}

/* JSON string of s[0, n) to stdout. */
static void put_json_string(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            printf("\\n");
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static int cmd_render(const args *a) {
    if (need("render", "--conversation", a->conversation)) return 2;
    if (!a->tokenizer && !a->chat_template) {
        fprintf(stderr,
                "minimax-data render: --tokenizer DIR or --chat-template FILE is required\n");
        return 2;
    }
    char err[MT_ERR_LEN + 64];
    size_t len;
    char *json = mt_file_read_max(a->conversation, &len, (size_t)256 << 20, err, sizeof(err));
    if (!json) {
        fprintf(stderr, "minimax-data render: %s\n", err);
        return 1;
    }
    mt_chat_template *tmpl = open_template(a, "render");
    jinja_heap *h = jinja_heap_new(0);
    mt_chat_conv c;
    mt_chat_rendered r = {0};
    int status = !tmpl;
    if (!status && mt_chat_conv_parse(h, json, len, true, &c, err, sizeof(err)) != 0) {
        fprintf(stderr, "minimax-data render: %s: %s\n", a->conversation, err);
        status = 1;
    }
    bool *train = NULL;
    if (!status && a->spans) {
        const int n = mt_chat_conv_len(&c);
        train = calloc((size_t)n + 1, sizeof(bool));
        for (int i = 0; i < n; i++)
            train[i] = !strcmp(mt_chat_conv_role(&c, i), "assistant") && c.loss[i] != 0;
    }
    const int rc = status     ? -1
                   : a->spans ? mt_chat_render_trained(tmpl, h, &c, -1, train, &r, err, sizeof(err))
                              : mt_chat_render_conv(tmpl, h, &c, -1, a->agp, &r, err, sizeof(err));
    if (!status && rc != 0) {
        fprintf(stderr, "minimax-data render: %s: %s\n", a->conversation, err);
        status = 1;
    }
    if (!status && !a->spans) fwrite(r.text, 1, r.len, stdout);
    if (!status && a->spans) {
        printf("{\"text\": ");
        put_json_string(r.text, r.len);
        printf(", \"trained\": [");
        for (int s = 0; s < r.n_spans; s++)
            printf("%s[%lld, %lld]", s ? ", " : "", (long long)r.spans[2 * s],
                   (long long)r.spans[2 * s + 1]);
        printf("]}\n");
    }
    free(train);
    mt_chat_rendered_free(&r);
    jinja_heap_free(h);
    mt_chat_template_free(tmpl);
    free(json);
    return status;
}

/* The text to encode: --text, or the bytes of --file (at most 1 GiB). */
static char *encode_input(const args *a, size_t *len) {
    if (a->text) {
        *len = strlen(a->text);
        return strdup(a->text);
    }
    char err[MT_ERR_LEN];
    char *s = mt_file_read_max(a->file, len, (size_t)1 << 30, err, sizeof(err));
    if (!s) fprintf(stderr, "minimax-data encode: %s\n", err);
    return s;
}

static int cmd_encode(const args *a) {
    if (need("encode", "--tokenizer", a->tokenizer)) return 2;
    if (!a->text == !a->file) {
        fprintf(stderr, "minimax-data encode: give --text S or --file F (one of them)\n");
        return 2;
    }
    char err[MT_ERR_LEN], path[4096];
    snprintf(path, sizeof(path), "%s/tokenizer.json", a->tokenizer);
    mt_tokenizer *tok = mt_tokenizer_try_load(path, err, sizeof(err));
    if (!tok) {
        fprintf(stderr, "minimax-data encode: %s\n", err);
        return 1;
    }
    size_t len;
    char *text = encode_input(a, &len);
    mt_token_buf b = {0};
    int status = 0;
    if (!text) {
        status = 1;
    } else if (mt_tokenizer_encode_err(tok, text, len, &b, err, sizeof(err)) < 0) {
        fprintf(stderr, "minimax-data encode: %s: %s\n", a->file ? a->file : "--text", err);
        status = 1;
    } else if (a->tokens) {
        printf("%6s %8s %8s %8s  %s\n", "index", "id", "start", "end", "text");
        for (int64_t t = 0; t < b.n; t++) {
            printf("%6lld %8d %8lld %8lld  \"", (long long)t, b.ids[t], (long long)b.offsets[2 * t],
                   (long long)b.offsets[2 * t + 1]);
            put_text(text, b.offsets[2 * t], b.offsets[2 * t + 1]);
            printf("\"\n");
        }
    } else {
        printf("{\"ids\": [");
        for (int64_t t = 0; t < b.n; t++) printf(t ? ", %d" : "%d", b.ids[t]);
        printf("], \"offsets\": [");
        for (int64_t t = 0; t < b.n; t++)
            printf("%s[%lld, %lld]", t ? ", " : "", (long long)b.offsets[2 * t],
                   (long long)b.offsets[2 * t + 1]);
        printf("]}\n");
    }
    mt_token_buf_free(&b);
    free(text);
    mt_tokenizer_free(tok);
    return status;
}

static int cmd_synth(const args *a) {
    if (need("synth", "--out", a->out)) return 2;
    static const char *kinds[] = {"gsm8k", "agentic", "pairs"},
                      *what[] = {"problems", "conversations", "preference pairs"};
    int kind = 0;
    while (kind < 3 && strcmp(a->kind, kinds[kind])) kind++;
    if (kind == 3) {
        fprintf(stderr, "minimax-data synth: --kind is gsm8k, agentic or pairs, got \"%s\"\n",
                a->kind);
        return 2;
    }
    char err[MT_ERR_LEN];
    if (!mt_out_writable("--out", a->out, err, sizeof(err))) {
        fprintf(stderr, "minimax-data synth: %s\n", err);
        return 1;
    }
    int (*const writers[])(const char *, uint64_t, int64_t, char *) = {
        mt_synth_write_jsonl, mt_synth_write_chat_jsonl, mt_synth_write_pairs_jsonl};
    if (writers[kind](a->out, (uint64_t)a->seed, a->n, err) != 0) {
        fprintf(stderr, "minimax-data synth: %s\n", err);
        return 1;
    }
    printf("wrote %lld %s (seed %lld) to %s\n", a->n, what[kind], a->seed, a->out);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    for (int i = 1; i < argc && i < 3; i++) /* after a command too: `minimax-data show --help` */
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    if (!strcmp(argv[1], "--version")) {
        mt_version_print(stdout, "minimax-data");
        return 0;
    }
    args a;
    if (parse_args(argc, argv, &a) != 0) return 2;
    if (!strcmp(argv[1], "tokenize")) return cmd_tokenize(&a);
    if (!strcmp(argv[1], "show")) return cmd_show(&a);
    if (!strcmp(argv[1], "render")) return cmd_render(&a);
    if (!strcmp(argv[1], "synth")) return cmd_synth(&a);
    if (!strcmp(argv[1], "encode")) return cmd_encode(&a);
    fprintf(stderr, "minimax-data: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
