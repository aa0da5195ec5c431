/* data_pipeline.c: GSM8K reader, synthetic problems, token cache. The chat template
 * (tests/data/data_chat.c), the sampler (tests/data/data_sampler.c) and the CLI + full GSM8K file
 * (tests/apps/data_cli.c) have their own files. */
/* Paths here are temporary directories far below the buffer sizes; snprintf truncation cannot
 * happen and would only shorten a message. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>

#include "data/gsm8k.h"
#include "data/synth.h"
#include "data/token_cache.h"
#include "tests/support/data_util.h"

/* ---------------- data_gsm8k_reader ---------------- */

/* Reads `content` as a jsonl file and expects an error naming the file and `line` with `what`. */
static void expect_bad(const char *dir, const char *content, int line, const char *what) {
    char path[4200], err[MT_ERR_LEN] = "", loc[4300];
    snprintf(path, sizeof(path), "%s/bad.jsonl", dir);
    write_text(path, content);
    mt_gsm8k_set s;
    int rc = mt_gsm8k_read(path, false, &s, err);
    snprintf(loc, sizeof(loc), "%s:%d: ", path, line);
    EXPECT(rc != 0 && has(err, loc) && has(err, what), "want \"%s...%s\", got rc %d \"%s\"", loc,
           what, rc, err);
    EXPECT(s.n == 0, "records left after an error");
}

static int test_data_gsm8k_reader(void) {
    char dir[4096], path[4200], err[MT_ERR_LEN];
    make_tmpdir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/ok.jsonl", dir);
    write_text(path,
               "{\"question\": \"Q1?\", \"answer\": \"a = <<1+2=3>>3\\n#### 3\"}\n"
               "\n"
               "   \n"
               "{\"answer\": \"caf\\u00e9 \\u4e2d\\n#### 0\", \"id\": 7, \"question\": \"Q2\"}\r\n"
               "{\"question\":\"x\",\"answer\":\"<<no end\\n#### 1\"}");
    mt_gsm8k_set s;
    int rc = mt_gsm8k_read(path, false, &s, err);
    EXPECT(rc == 0, "read failed: %s", err);
    EXPECT(s.n == 3 && s.n_lines == 3 && s.n_skipped == 0, "n %lld lines %lld", (long long)s.n,
           (long long)s.n_lines);
    if (s.n == 3) {
        EXPECT(!strcmp(s.question[0], "Q1?") && !strcmp(s.answer[0], "a = <<1+2=3>>3\n#### 3"),
               "record 0: \"%s\" / \"%s\"", s.question[0], s.answer[0]);
        EXPECT(!strcmp(s.question[1], "Q2") &&
                   !strcmp(s.answer[1], "caf\xc3\xa9 \xe4\xb8\xad\n#### 0"),
               "record 1 (escapes, field order, CRLF): \"%s\"", s.answer[1]);
        EXPECT(s.line[0] == 1 && s.line[1] == 4 && s.line[2] == 5, "line numbers %lld %lld %lld",
               (long long)s.line[0], (long long)s.line[1], (long long)s.line[2]);
    }
    mt_gsm8k_set_free(&s);

    /* annotation stripping (GSM8K's calculator calls) */
    struct {
        const char *in, *out;
    } strip[] = {
        {"Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72",
         "Natalia sold 48/2 = 24 clips in May.\n#### 72"},
        {"$<<12/60=0.2>>0.2 and <<0.2*50=10>>10", "$0.2 and 10"},
        {"keep <<no equals>> and <<a=b\nc>> and <<x=1",
         "keep <<no equals>> and <<a=b\nc>> and <<x=1"},
        {"<<1+1=2>><<2+2=4>>4", "4"},
        {"#### 5", "#### 5"},
    };
    for (size_t i = 0; i < sizeof(strip) / sizeof(strip[0]); i++) {
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", strip[i].in);
        size_t n = mt_gsm8k_strip_annotations(buf);
        EXPECT(!strcmp(buf, strip[i].out) && n == strlen(strip[i].out), "strip %zu: \"%s\"", i,
               buf);
    }

    /* bad lines: each error names the file and the line */
    const char *good = "{\"question\": \"q\", \"answer\": \"a\\n#### 1\"}\n";
    char buf[512];
    snprintf(buf, sizeof(buf), "%s\n%s{\"question\": \"q\", \"answer\": }\n", good, good);
    expect_bad(dir, buf, 4, "malformed JSON: offset 28: expecting value");
    snprintf(buf, sizeof(buf), "%s{\"question\": \"q\"}\n", good);
    expect_bad(dir, buf, 2, "missing field \"answer\"");
    snprintf(buf, sizeof(buf), "%s{\"answer\": \"a\"}\n", good);
    expect_bad(dir, buf, 2, "missing field \"question\"");
    snprintf(buf, sizeof(buf), "{\"question\": \"q\", \"answer\": 5}\n");
    expect_bad(dir, buf, 1, "not a string");
    snprintf(buf, sizeof(buf), "%s%s{\"question\": \"q\xff\", \"answer\": \"a\"}\n", good, good);
    expect_bad(dir, buf, 3, "invalid UTF-8");
    snprintf(buf, sizeof(buf), "{\"question\": \"\\ud800\", \"answer\": \"a\"}\n");
    expect_bad(dir, buf, 1, "malformed JSON: offset 14: lone surrogate"); /* a \u escape */
    snprintf(buf, sizeof(buf), "%s{\"question\": \"q\", \"answer\": \"\"}\n", good);
    expect_bad(dir, buf, 2, "empty answer");
    snprintf(buf, sizeof(buf), "{\"question\": \"q\", \"answer\": \" \\n \"}\n");
    expect_bad(dir, buf, 1, "empty answer");
    snprintf(buf, sizeof(buf), "[1, 2]\n");
    expect_bad(dir, buf, 1, "not a JSON object");
    snprintf(buf, sizeof(buf), "%s {\"question\": \"q\", \"answer\": \"a\"} x\n", good);
    expect_bad(dir, buf, 2, "malformed JSON: offset 34: extra data");
    /* a NUL would end the C string: the text cut silently */
    snprintf(buf, sizeof(buf), "%s{\"question\": \"q\\u0000 and more\", \"answer\": \"a\"}\n",
             good);
    expect_bad(dir, buf, 2, "a NUL character (\\u0000) at column 16");
    snprintf(path, sizeof(path), "%s/bad.jsonl", dir);
    static const char nul_line[] = "{\"question\": \"q\", \"answer\": \"a\0b\"}\n";
    write_bytes(path, nul_line, sizeof(nul_line) - 1);
    rc = mt_gsm8k_read(path, false, &s, err);
    EXPECT(rc != 0 && has(err, ":1: a NUL character (a zero byte) at column 31"), "a NUL byte: %s",
           err);
    /* a repeated key: Python's json takes the last silently; refused */
    snprintf(buf, sizeof(buf), "%s{\"question\": \"q\", \"answer\": \"a\", \"question\": \"r\"}\n",
             good);
    expect_bad(dir, buf, 2, "malformed JSON: offset 33: duplicate key \"question\"");
    /* an escaped backslash before "u0000" is text, not a NUL */
    snprintf(path, sizeof(path), "%s/ok2.jsonl", dir);
    write_text(path, "{\"question\": \"q\\\\u0000\", \"answer\": \"a\"}\n");
    rc = mt_gsm8k_read(path, false, &s, err);
    EXPECT(rc == 0 && s.n == 1 && !strcmp(s.question[0], "q\\u0000"), "\\\\u0000: rc %d %s", rc,
           rc ? err : s.question[0]);
    mt_gsm8k_set_free(&s);

    snprintf(path, sizeof(path), "%s/absent.jsonl", dir);
    rc = mt_gsm8k_read(path, false, &s, err);
    EXPECT(rc != 0 && has(err, path) && has(err, "cannot open"), "unreadable file: \"%s\"", err);
    rc = mt_gsm8k_read(dir, false, &s, err);
    EXPECT(rc != 0 && has(err, dir) && has(err, "is a directory, not a file"),
           "a directory: \"%s\"", err);

    /* skip_bad counts and goes on */
    snprintf(path, sizeof(path), "%s/mixed.jsonl", dir);
    snprintf(buf, sizeof(buf), "%s{bad\n%s{\"question\": 1, \"answer\": \"a\"}\n[]\n", good, good);
    write_text(path, buf);
    rc = mt_gsm8k_read(path, true, &s, err);
    char loc[4300];
    snprintf(loc, sizeof(loc), "%s:2: ", path);
    EXPECT(rc == 0 && s.n == 2 && s.n_skipped == 3 && s.n_lines == 5,
           "skip: rc %d n %lld skipped %lld", rc, (long long)s.n, (long long)s.n_skipped);
    EXPECT(has(s.first_skip, loc), "first skipped line: \"%s\"", s.first_skip);
    mt_gsm8k_set_free(&s);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* ---------------- data_synth ---------------- */

/* Exact integer evaluation of + - * / ( ) (left to right, usual precedence); *ok turns false
 * on a syntax error or an inexact division. */
typedef struct {
    const char *p;
    bool ok;
} expr;
static long long ex_sum(expr *e);
static long long ex_atom(expr *e) {
    if (*e->p == '(') {
        e->p++;
        long long v = ex_sum(e);
        if (*e->p++ != ')') e->ok = false;
        return v;
    }
    if (!isdigit((unsigned char)*e->p)) {
        e->ok = false;
        return 0;
    }
    long long v = 0;
    while (isdigit((unsigned char)*e->p)) v = 10 * v + (*e->p++ - '0');
    return v;
}
static long long ex_prod(expr *e) {
    long long v = ex_atom(e);
    while (*e->p == '*' || *e->p == '/') {
        char op = *e->p++;
        long long w = ex_atom(e);
        if (op == '*')
            v *= w;
        else if (w == 0 || v % w != 0)
            e->ok = false;
        else
            v /= w;
    }
    return v;
}
static long long ex_sum(expr *e) {
    long long v = ex_prod(e);
    while (*e->p == '+' || *e->p == '-') {
        char op = *e->p++;
        long long w = ex_prod(e);
        v = op == '+' ? v + w : v - w;
    }
    return v;
}

/* Checks one answer: every <<expr=value>> is exact and followed by its value, and the last
 * line is "#### <last value>". Returns the number of annotations. */
static int check_answer(const char *a, long long *final) {
    int n = 0;
    long long last = -1;
    for (const char *p = strstr(a, "<<"); p; p = strstr(p, "<<")) {
        const char *eq = strchr(p, '='), *end = strstr(p, ">>");
        if (!eq || !end || eq > end) return -1;
        char e[128], v[64];
        snprintf(e, sizeof(e), "%.*s", (int)(eq - p - 2), p + 2);
        snprintf(v, sizeof(v), "%.*s", (int)(end - eq - 1), eq + 1);
        expr x = {e, true};
        long long got = ex_sum(&x);
        char *vend;
        long long want = strtoll(v, &vend, 10);
        if (!x.ok || *x.p || *vend || got != want || want < 0) return -1;
        size_t vl = strlen(v);
        if (strncmp(end + 2, v, vl) != 0) return -1; /* the text repeats the value */
        last = want;
        n++;
        p = end + 2;
    }
    const char *h = strstr(a, "\n#### ");
    if (!h || strchr(h + 1, '\n') || n == 0) return -1;
    *final = strtoll(h + 6, NULL, 10);
    return *final == last ? n : -1;
}

static int test_data_synth(void) {
    mt_strbuf q = {0}, a = {0}, q2 = {0}, a2 = {0};
    int n_bad = 0, n_steps = 0, kinds = 0;
    char first_words[16][16] = {{0}};
    for (int64_t i = 0; i < 4000; i++) {
        mt_synth_problem(42, i, &q, &a);
        mt_synth_problem(42, i, &q2, &a2);
        EXPECT(!strcmp(q.p, q2.p) && !strcmp(a.p, a2.p), "problem %lld not deterministic",
               (long long)i);
        long long fin;
        int steps = check_answer(a.p, &fin);
        if (steps < 2) {
            if (n_bad++ < 3) printf("bad answer %lld:\n%s\n", (long long)i, a.p);
            continue;
        }
        n_steps += steps;
        EXPECT(q.len > 20 && q.p[q.len - 1] == '?', "question %lld: \"%s\"", (long long)i, q.p);
        char w[16];
        snprintf(w, sizeof(w), "%.*s", (int)strcspn(a.p, " "), a.p);
        int k = 0;
        while (k < kinds && strcmp(first_words[k], w)) k++;
        if (k == kinds && kinds < 16) snprintf(first_words[kinds++], 16, "%s", w);
    }
    EXPECT(n_bad == 0, "%d synthetic answers are not arithmetic-correct", n_bad);
    EXPECT(kinds >= 6, "only %d distinct answer openings: templates missing", kinds);
    mt_synth_problem(43, 0, &q2, &a2);
    mt_synth_problem(42, 0, &q, &a);
    EXPECT(strcmp(q.p, q2.p) || strcmp(a.p, a2.p), "seeds 42 and 43 give the same problem 0");
    printf("synth: 4000 problems, %d annotated steps, all exact\n", n_steps);

    /* the jsonl is deterministic, atomic and reads back through the GSM8K reader */
    char dir[4096], p1[4200], p2[4200], err[MT_ERR_LEN];
    make_tmpdir(dir, sizeof(dir));
    snprintf(p1, sizeof(p1), "%s/a.jsonl", dir);
    snprintf(p2, sizeof(p2), "%s/b.jsonl", dir);
    EXPECT(mt_synth_write_jsonl(p1, 42, 300, err) == 0, "%s", err);
    EXPECT(mt_synth_write_jsonl(p2, 42, 300, err) == 0, "%s", err);
    size_t n1, n2;
    char *b1 = mt_file_read(p1, &n1, err), *b2 = mt_file_read(p2, &n2, err);
    EXPECT(b1 && b2 && n1 == n2 && !memcmp(b1, b2, n1), "the same seed wrote different files");
    free(b1);
    free(b2);
    EXPECT(count_entries(dir, ".tmp.") == 0, "temporary files left in %s", dir);
    mt_gsm8k_set s;
    EXPECT(mt_gsm8k_read(p1, false, &s, err) == 0 && s.n == 300, "read back: %s", err);
    for (int64_t i = 0; i < s.n; i++) {
        mt_synth_problem(42, i, &q, &a);
        EXPECT(!strcmp(s.question[i], q.p) && !strcmp(s.answer[i], a.p), "record %lld differs",
               (long long)i);
    }
    mt_gsm8k_set_free(&s);
    snprintf(p2, sizeof(p2), "%s/no/such/dir/x.jsonl", dir);
    EXPECT(mt_synth_write_jsonl(p2, 1, 3, err) != 0 && has(err, "no/such/dir"),
           "unwritable path: \"%s\"", err);
    rm_tree(dir);
    mt_strbuf_free(&q);
    mt_strbuf_free(&a);
    mt_strbuf_free(&q2);
    mt_strbuf_free(&a2);
    return MT_TEST_OK;
}

/* ---------------- data_cache ---------------- */

static bool same_data(const mt_token_data *a, const mt_token_data *b) {
    return a->n_samples == b->n_samples && a->n_tokens == b->n_tokens &&
           !memcmp(a->ids, b->ids, sizeof(int32_t) * (size_t)a->n_tokens) &&
           !memcmp(a->labels, b->labels, sizeof(int32_t) * (size_t)a->n_tokens) &&
           !memcmp(a->offsets, b->offsets, sizeof(int64_t) * (size_t)(a->n_samples + 1)) &&
           a->n_lines == b->n_lines && a->n_skipped == b->n_skipped &&
           a->n_truncated == b->n_truncated && a->n_dropped == b->n_dropped &&
           a->n_targets == b->n_targets;
}

/* Opens the cache and reports whether it was reused (-1: error). */
static int open_cache(const mt_token_cache_cfg *cfg, mt_token_data *d, char *err) {
    bool reused = false;
    if (mt_token_cache_open(cfg, d, &reused, err) != 0) return -1;
    return reused;
}

/* A temporary directory with 200 synthetic problems (data.jsonl) and the configuration of a
 * cache for them (cache.h5, not built yet). */
static mt_token_cache_cfg cache_fixture(char *dir, char *data, char *cache) {
    char err[MT_ERR_LEN];
    make_tmpdir(dir, 4096);
    snprintf(data, 4200, "%s/data.jsonl", dir);
    snprintf(cache, 4200, "%s/cache.h5", dir);
    MT_CHECK(mt_synth_write_jsonl(data, 9, 200, err) == 0, "%s", err);
    mt_token_cache_cfg cfg = {
        .data_path = data, .tokenizer_dir = tokenizer_dir(), .cache_path = cache};
    mt_sample_opts_default(&cfg.sample);
    return cfg;
}

static char *replace_all(const char *s, const char *from, const char *to) {
    mt_strbuf b = {0};
    mt_strbuf_append(&b, "", 0);
    const size_t nf = strlen(from);
    for (const char *p = s; *p;) {
        if (!strncmp(p, from, nf)) {
            mt_strbuf_append(&b, to, strlen(to));
            p += nf;
        } else
            mt_strbuf_append(&b, p++, 1);
    }
    return b.p;
}

/* The chat template is part of the key: another template (chat_template.jinja in the
 * tokenizer directory, which replaces tokenizer_config.json's) rebuilds, then is reused; one
 * that is not valid Jinja is an error naming its file, before anything is built. */
static void check_template_change(const mt_token_cache_cfg *cfg, const char *tok_dir) {
    char jinja[4200], err[MT_ERR_LEN];
    mt_token_data d;
    snprintf(jinja, sizeof(jinja), "%s/chat_template.jinja", tok_dir);
    char *other = replace_all(mt_chat_template_minimax_ext(), "user name=user", "user name=human");
    MT_CHECK(strcmp(other, mt_chat_template_minimax_ext()), "test setup: no \"user name=user\"");
    write_text(jinja, other);
    free(other);
    EXPECT(open_cache(cfg, &d, err) == 0, "another chat template: rebuild expected (%s)", err);
    EXPECT(d.n_samples == 201 && d.n_targets > 0, "another template: %lld samples, %lld targets",
           (long long)d.n_samples, (long long)d.n_targets);
    mt_token_data_free(&d);
    EXPECT(open_cache(cfg, &d, err) == 1, "another chat template: reuse expected (%s)", err);
    mt_token_data_free(&d);
    char saved[4200];
    snprintf(saved, sizeof(saved), "%s/saved.jinja", tok_dir);
    MT_CHECK(rename(jinja, saved) == 0, "rename %s", jinja);
    write_text(jinja, "{% for m in messages %}{{ m.content }\n{% endfor %}");
    err[0] = 0;
    EXPECT(open_cache(cfg, &d, err) < 0 && has(err, jinja), "a template that is not Jinja: \"%s\"",
           err);
    MT_CHECK(rename(saved, jinja) == 0, "rename %s", saved);
}

static int test_data_cache(void) {
    char dir[4096], data[4200], cache[4200], tok2[4200], err[MT_ERR_LEN], cmd[9000];
    mt_token_cache_cfg cfg = cache_fixture(dir, data, cache);
    mt_token_data d0, d1, ref;
    EXPECT(open_cache(&cfg, &d0, err) == 0, "first open: built expected (%s)", err);
    EXPECT(file_exists(cache) && count_entries(dir, ".tmp.") == 0, "cache file / temp files");
    EXPECT(d0.n_lines == 200 && d0.n_samples == 200 && d0.n_dropped == 0 && d0.n_targets > 0,
           "counts: lines %lld samples %lld dropped %lld", (long long)d0.n_lines,
           (long long)d0.n_samples, (long long)d0.n_dropped);

    /* the cache holds exactly what a direct build produces */
    char tj[4200];
    snprintf(tj, sizeof(tj), "%s/tokenizer.json", tokenizer_dir());
    mt_tokenizer *tok = mt_tokenizer_load(tj);
    mt_chat_template *tmpl = mt_token_cache_template(&cfg, err);
    MT_CHECK(tmpl, "%s", err);
    EXPECT(mt_token_data_build(data, tok, tmpl, &cfg.sample, false, &ref, err) == 0, "%s", err);
    mt_chat_template_free(tmpl);
    EXPECT(open_cache(&cfg, &d1, err) == 1, "second open: reuse expected (%s)", err);
    EXPECT(same_data(&d0, &ref) && same_data(&d1, &ref), "cached data differ from a fresh build");
    mt_token_data_free(&d1);

    /* every option that changes tokens forces a rebuild, then is reused */
    mt_token_cache_cfg c2 = cfg;
    c2.sample.strip_annotations = true;
    EXPECT(open_cache(&c2, &d1, err) == 0, "strip_annotations: rebuild expected");
    EXPECT(d1.n_tokens < d0.n_tokens, "stripping did not shorten the samples");
    mt_token_data_free(&d1);
    EXPECT(open_cache(&c2, &d1, err) == 1, "strip_annotations: reuse expected");
    mt_token_data_free(&d1);
    c2 = cfg;
    c2.sample.system = "You are a careful math tutor.";
    EXPECT(open_cache(&c2, &d1, err) == 0, "system: rebuild expected");
    mt_token_data_free(&d1);
    c2.sample.system = "You are a careful math tutor!";
    EXPECT(open_cache(&c2, &d1, err) == 0, "system text: rebuild expected");
    mt_token_data_free(&d1);
    c2 = cfg;
    c2.skip_bad = true;
    EXPECT(open_cache(&c2, &d1, err) == 0, "skip_bad: rebuild expected");
    mt_token_data_free(&d1);

    /* max_length and policy: counts from the full-length samples */
    int64_t cut = 0;
    for (int64_t i = 0; i < ref.n_samples; i++) cut += ref.offsets[i + 1] - ref.offsets[i];
    cut /= ref.n_samples; /* the mean length: some samples are longer */
    int64_t n_long = 0, kept_tokens = 0;
    for (int64_t i = 0; i < ref.n_samples; i++) {
        int64_t len = ref.offsets[i + 1] - ref.offsets[i];
        n_long += len > cut;
        kept_tokens += len > cut ? cut : len;
    }
    c2 = cfg;
    c2.sample.max_length = cut;
    EXPECT(open_cache(&c2, &d1, err) == 0, "max_length: rebuild expected");
    EXPECT(n_long > 0 && d1.n_dropped == n_long && d1.n_samples == ref.n_samples - n_long &&
               d1.n_truncated == 0,
           "drop: dropped %lld, want %lld", (long long)d1.n_dropped, (long long)n_long);
    mt_token_data_free(&d1);
    c2.sample.policy = MT_TRUNC_TRUNCATE;
    EXPECT(open_cache(&c2, &d1, err) == 0, "policy: rebuild expected");
    EXPECT(d1.n_truncated == n_long && d1.n_dropped == 0 && d1.n_tokens == kept_tokens,
           "truncate: truncated %lld, tokens %lld, want %lld and %lld", (long long)d1.n_truncated,
           (long long)d1.n_tokens, (long long)n_long, (long long)kept_tokens);
    for (int64_t i = 0; i < d1.n_samples; i++) {
        int64_t o = d1.offsets[i], len = d1.offsets[i + 1] - o, o0 = ref.offsets[i];
        EXPECT(len <= cut && !memcmp(d1.ids + o, ref.ids + o0, sizeof(int32_t) * (size_t)len),
               "truncated sample %lld is not the prefix", (long long)i);
    }
    mt_token_data_free(&d1);

    /* the data file changes */
    FILE *f = fopen(data, "ab");
    fputs("{\"question\": \"What is 2+2?\", \"answer\": \"2+2 = <<2+2=4>>4\\n#### 4\"}\n", f);
    fclose(f);
    EXPECT(open_cache(&cfg, &d1, err) == 0 && d1.n_lines == 201, "data change: rebuild expected");
    mt_token_data_free(&d1);

    /* tokenizer.json: the same bytes elsewhere are reused, changed bytes rebuild */
    snprintf(tok2, sizeof(tok2), "%s/tok", dir);
    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", tokenizer_dir(), tok2);
    MT_CHECK(system(cmd) == 0, "%s failed", cmd);
    c2 = cfg;
    c2.tokenizer_dir = tok2;
    EXPECT(open_cache(&c2, &d1, err) == 1, "copied tokenizer: reuse expected (%s)", err);
    mt_token_data_free(&d1);
    snprintf(tj, sizeof(tj), "%s/tokenizer.json", tok2);
    f = fopen(tj, "ab");
    fputs("\n", f);
    fclose(f);
    EXPECT(open_cache(&c2, &d1, err) == 0, "changed tokenizer.json: rebuild expected");
    mt_token_data_free(&d1);
    check_template_change(&c2, tok2);
    size_t before_n;
    char *before = mt_file_read(cache, &before_n, err);

    /* atomic: a failed build leaves no file behind and an old cache untouched */
    char bad[4200], cache2[4200];
    snprintf(bad, sizeof(bad), "%s/bad.jsonl", dir);
    write_text(bad, "{\"question\": \"q\", \"answer\": \"a\\n#### 1\"}\n{\"question\": \n");
    snprintf(cache2, sizeof(cache2), "%s/cache2.h5", dir);
    c2 = cfg;
    c2.data_path = bad;
    c2.cache_path = cache2;
    char want[4300];
    snprintf(want, sizeof(want), "%s:2: ", bad);
    EXPECT(open_cache(&c2, &d1, err) < 0 && has(err, want), "bad data: \"%s\"", err);
    EXPECT(!file_exists(cache2) && count_entries(dir, ".tmp.") == 0, "a failed build left files");
    c2.cache_path = cache;
    EXPECT(open_cache(&c2, &d1, err) < 0, "bad data over an old cache: error expected");
    size_t after_n;
    char *after = mt_file_read(cache, &after_n, err);
    EXPECT(before && after && before_n == after_n && !memcmp(before, after, before_n),
           "a failed rebuild changed the old cache");
    free(before);
    free(after);

    /* the rename fails (the cache path is a directory): the temporary file goes away */
    snprintf(cache2, sizeof(cache2), "%s/adir.h5", dir);
    mkdir(cache2, 0755);
    c2 = cfg;
    c2.cache_path = cache2;
    EXPECT(open_cache(&c2, &d1, err) < 0 && has(err, cache2), "cache path is a directory: \"%s\"",
           err);
    EXPECT(count_entries(dir, ".tmp.") == 0, "a failed rename left the temporary file");

    /* a damaged cache is rebuilt */
    write_text(cache, "not an HDF5 file");
    EXPECT(open_cache(&cfg, &d1, err) == 0 && d1.n_lines == 201, "damaged cache: rebuild");
    mt_token_data_free(&d1);
    EXPECT(count_entries(dir, ".tmp.") == 0, "temporary files left");

    mt_token_data_free(&d0);
    mt_token_data_free(&ref);
    mt_tokenizer_free(tok);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* A cache write that fails (here: a file size limit of 16 KiB, as a full disk or a quota would
 * make it fail) names the file and HDF5's reason, and leaves neither a cache nor a temporary
 * file behind. */
static int test_data_cache_write_error(void) {
    char dir[4096], data[4200], cache[4200], err[MT_ERR_LEN];
    mt_token_cache_cfg cfg = cache_fixture(dir, data, cache);
    struct rlimit old;
    MT_CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0, "getrlimit");
    struct rlimit small = {16 << 10, old.rlim_max};
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN); /* the write fails with EFBIG instead */
    MT_CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0, "setrlimit");
    mt_token_data d;
    err[0] = '\0';
    const int rc = open_cache(&cfg, &d, err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
    printf("error: %s\n", err);
    EXPECT(rc == -1, "a cache larger than the file size limit was written (rc %d)", rc);
    EXPECT(strstr(err, "cache.h5.tmp.") && strstr(err, ": cannot write the token cache (HDF5: ") &&
               strstr(err, strerror(EFBIG)),
           "the error names neither the file nor HDF5's reason (%s): %s", strerror(EFBIG), err);
    EXPECT(!file_exists(cache) && count_entries(dir, ".tmp.") == 0,
           "a cache or a temporary file was left behind");
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_gsm8k_reader", test_data_gsm8k_reader},
    {"data_synth", test_data_synth},
    {"data_cache", test_data_cache},
    {"data_cache_write_error", test_data_cache_write_error},
};
MT_TEST_MAIN(cases)
