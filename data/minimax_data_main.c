/* minimax_data_main.c: the `minimax-data` tool: tokenize a GSM8K-style jsonl into the token
 * cache, show one rendered sample with its loss mask, encode a text, write synthetic problems.
 * Exit status: 0 success, 1 bad input or failed write, 2 bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/data_io.h"
#include "data/gsm8k.h"
#include "data/synth.h"
#include "data/token_cache.h"
#include "data/tokenizer.h"
#include "kernels/version.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: minimax-data <command> [options]   (minimax-data --help | --version)\n"
        "  tokenize --data FILE.jsonl --tokenizer DIR --out CACHE.h5 [sample options]\n"
        "           [--skip-bad] [--force]\n"
        "      render, tokenize and label every line; reuse CACHE.h5 when it matches\n"
        "  show     --data FILE.jsonl --tokenizer DIR [--index I] [sample options]\n"
        "           [--tokens] [--color | --no-color]\n"
        "      print sample I (0-based) with untrained tokens (label -100) dimmed, or\n"
        "      inside \xe2\x9f\xa6 \xe2\x9f\xa7 without color\n"
        "  encode   --tokenizer DIR (--text S | --file F) [--tokens]\n"
        "      print the ids of S (or of the bytes of F) and their byte offsets, as one JSON\n"
        "      object {\"ids\": [...], \"offsets\": [[start, end], ...]} (no special tokens\n"
        "      added, as HF encode(add_special_tokens=False)); --tokens: a table instead\n"
        "  synth    --out FILE.jsonl [--n N (1000)] [--seed S (1234)]\n"
        "      write N synthetic GSM8K-style problems\n"
        "sample options: --max-length N (512) --policy drop|truncate (drop)\n"
        "                --strip-annotations --system TEXT\n"
        "DIR holds tokenizer.json and tokenizer_config.json (a Hugging Face model directory).\n");
}

typedef struct {
    const char *data, *tokenizer, *out, *system, *text, *file;
    long long max_length, index, n, seed;
    const char *policy;
    int strip, skip_bad, force, tokens, color; /* color: -1 auto */
} args;

static int parse_int(const char *flag, const char *v, long long *out) {
    char *end;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end) {
        fprintf(stderr, "minimax-data: %s wants an integer, got \"%s\"\n", flag, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, args *a) {
    *a = (args){.max_length = 512, .n = 1000, .seed = 1234, .policy = "drop", .color = -1};
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **str = !strcmp(f, "--data")        ? &a->data
                           : !strcmp(f, "--tokenizer") ? &a->tokenizer
                           : !strcmp(f, "--out")       ? &a->out
                           : !strcmp(f, "--system")    ? &a->system
                           : !strcmp(f, "--policy")    ? &a->policy
                           : !strcmp(f, "--text")      ? &a->text
                           : !strcmp(f, "--file")      ? &a->file
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
        else {
            fprintf(stderr, "minimax-data: unknown option %s\n", f);
            return -1;
        }
    }
    if (strcmp(a->policy, "drop") && strcmp(a->policy, "truncate")) {
        fprintf(stderr, "minimax-data: --policy is drop or truncate, got \"%s\"\n", a->policy);
        return -1;
    }
    if (a->max_length < 2) {
        fprintf(stderr, "minimax-data: --max-length must be >= 2\n");
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
    return o;
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
    mt_token_cache_cfg cfg = {.data_path = a->data,
                              .tokenizer_dir = a->tokenizer,
                              .cache_path = a->out,
                              .sample = sample_opts(a),
                              .skip_bad = a->skip_bad,
                              .force = a->force};
    double t0 = now_s();
    mt_token_data d;
    bool reused;
    char err[MT_ERR_LEN];
    if (mt_token_cache_open(&cfg, &d, &reused, err) != 0) {
        fprintf(stderr, "minimax-data tokenize: %s\n", err);
        return 1;
    }
    double dt = now_s() - t0;
    printf("cache      %s (%s)\n", a->out, reused ? "reused" : "built");
    printf("lines      %lld\n", (long long)d.n_lines);
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

static int cmd_show(const args *a) {
    if (need("show", "--data", a->data) || need("show", "--tokenizer", a->tokenizer)) return 2;
    char err[MT_ERR_LEN], path[4096];
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", a->tokenizer);
    if (mt_chat_template_check(path, NULL, err) != 0) {
        fprintf(stderr, "minimax-data show: %s\n", err);
        return 1;
    }
    mt_conv_set set;
    if (mt_conv_read(a->data, MT_FORMAT_AUTO, a->skip_bad, &set, err) != 0) {
        fprintf(stderr, "minimax-data show: %s\n", err);
        return 1;
    }
    if (a->index < 0 || a->index >= set.n) {
        fprintf(stderr, "minimax-data show: --index %lld is outside the %lld samples of %s\n",
                a->index, (long long)set.n, a->data);
        mt_conv_set_free(&set);
        return 1;
    }
    snprintf(path, sizeof(path), "%s/tokenizer.json", a->tokenizer);
    mt_tokenizer *tok = mt_tokenizer_load(path);
    mt_sample_opts o = sample_opts(a);
    mt_sample_builder b;
    mt_sample_builder_init(&b, tok, &o);
    int64_t i = a->index;
    if (o.strip_annotations) mt_conv_set_strip_annotations(&set);
    int rc = mt_sample_build_chat(&b, set.msgs + set.first[i],
                                  (int)(set.first[i + 1] - set.first[i]), err);
    int status = 0;
    if (rc == MT_SAMPLE_ERROR) {
        fprintf(stderr, "minimax-data show: %s:%lld: %s\n", a->data, (long long)set.line[i], err);
        status = 1;
    } else if (rc == MT_SAMPLE_DROPPED) {
        printf("sample %lld (%s line %lld): %lld tokens > --max-length %lld: dropped\n",
               (long long)i, a->data, (long long)set.line[i], (long long)b.n_full, a->max_length);
    } else {
        bool color = a->color < 0 ? isatty(STDOUT_FILENO) : a->color;
        printf("sample %lld (%s line %lld): %lld tokens%s, %lld with a label\n", (long long)i,
               a->data, (long long)set.line[i], (long long)b.n,
               rc == MT_SAMPLE_TRUNCATED ? " (truncated)" : "", (long long)b.n_targets);
        printf("%s\n", color ? "untrained tokens are dimmed:"
                             : "untrained tokens are inside \xe2\x9f\xa6 \xe2\x9f\xa7:");
        const int64_t *off = b.tokens.offsets;
        const char *text = b.rendered.text;
        int64_t printed = 0; /* byte offsets of neighbours can overlap inside one character */
        for (int64_t t = 0; t < b.n;) {
            bool masked = b.lab[t] == MT_IGNORE_INDEX;
            int64_t e = t;
            while (e < b.n && (b.lab[e] == MT_IGNORE_INDEX) == masked) e++;
            int64_t from = off[2 * t] > printed ? off[2 * t] : printed, to = off[2 * (e - 1) + 1];
            if (masked) printf("%s", color ? "\x1b[2m" : "\xe2\x9f\xa6");
            put_text(text, from, to);
            if (masked) printf("%s", color ? "\x1b[0m" : "\xe2\x9f\xa7");
            printed = to > printed ? to : printed;
            t = e;
        }
        printf("\n");
        if (a->tokens) {
            printf("%6s %8s %8s  %s\n", "index", "id", "label", "text");
            for (int64_t t = 0; t < b.n; t++) {
                printf("%6lld %8d %8d  \"", (long long)t, b.ids[t], b.lab[t]);
                put_text(text, off[2 * t], off[2 * t + 1]);
                printf("\"\n");
            }
        }
    }
    mt_sample_builder_free(&b);
    mt_tokenizer_free(tok);
    mt_conv_set_free(&set);
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
    if (a->n < 1) {
        fprintf(stderr, "minimax-data synth: --n must be >= 1\n");
        return 2;
    }
    char err[MT_ERR_LEN];
    if (mt_synth_write_jsonl(a->out, (uint64_t)a->seed, a->n, err) != 0) {
        fprintf(stderr, "minimax-data synth: %s\n", err);
        return 1;
    }
    printf("wrote %lld problems (seed %lld) to %s\n", a->n, a->seed, a->out);
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
    if (!strcmp(argv[1], "synth")) return cmd_synth(&a);
    if (!strcmp(argv[1], "encode")) return cmd_encode(&a);
    fprintf(stderr, "minimax-data: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
