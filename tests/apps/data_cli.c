/* data_cli.c: the minimax-data tool end to end (synth, tokenize, show, encode and their error
 * paths), minimax-generate --prompt (the chat template and the tokenizer around the model), and
 * all of GSM8K's training set when ../shared has it. */
/* Paths here are temporary directories far below the buffer sizes; snprintf truncation cannot
 * happen and would only shorten a message. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <sys/wait.h>
#include <time.h>

#include "data/gsm8k.h"
#include "data/synth.h"
#include "data/tokenizer.h"
#include "data/token_cache.h"
#include "tests/support/data_util.h"
#include "models/minimax.h"
#include "models/weights.h"

/* ---------------- data_cli ---------------- */

static char cli_out[1 << 16], cli_err[1 << 16];

/* Runs `<the binary of env var> <args>` with stdout/stderr captured in cli_out/cli_err;
 * returns the exit status. */
static int cli_run(const char *var, const char *dir, const char *args) {
    const char *exe = getenv(var);
    MT_CHECK(exe && *exe, "%s (the binary) is not set; run through ctest", var);
    char cmd[16384], po[4200], pe[4200], err[MT_ERR_LEN];
    snprintf(po, sizeof(po), "%s/cli.out", dir);
    snprintf(pe, sizeof(pe), "%s/cli.err", dir);
    snprintf(cmd, sizeof(cmd), "'%s' %s >'%s' 2>'%s'", exe, args, po, pe);
    int st = system(cmd);
    char *o = mt_file_read(po, NULL, err), *e = mt_file_read(pe, NULL, err);
    snprintf(cli_out, sizeof(cli_out), "%s", o ? o : "");
    snprintf(cli_err, sizeof(cli_err), "%s", e ? e : "");
    free(o);
    free(e);
    remove(po);
    remove(pe);
    /* under -DMT_SANITIZE a sanitizer report also exits with 1: never mistake it for ours */
    EXPECT(!has(cli_err, "Sanitizer") && !has(cli_err, "runtime error"), "%s %s:\n%s", exe, args,
           cli_err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `minimax-data <args>` */
static int cli(const char *dir, const char *args) { return cli_run("MT_DATA_CLI", dir, args); }

/* minimax-data's error paths: each a one-line message naming the file (and line) at fault. */
static void cli_errors(const char *dir, const char *tk) {
    char a[12000], p[4300], q[4300];
    snprintf(p, sizeof(p), "%s/bad.jsonl", dir);
    write_text(p, "{\"question\": \"q\", \"answer\": \"a\\n#### 1\"}\n\n{\"question\": \"q\"\n"
                  "{\"question\": \"q2\", \"answer\": \"b\\n#### 2\"}\n");
    snprintf(a, sizeof(a), "tokenize --data '%s' --tokenizer '%s' --out '%s/c2.h5'", p, tk, dir);
    snprintf(q, sizeof(q), "%s:3: malformed JSON", p);
    EXPECT(cli(dir, a) == 1 && has(cli_err, q), "bad line: %s", cli_err);
    snprintf(q, sizeof(q), "%s/c2.h5", dir);
    EXPECT(!file_exists(q) && count_entries(dir, ".tmp.") == 0, "files left after an error");
    snprintf(q, sizeof(q), "%s --skip-bad", a);
    EXPECT(cli(dir, q) == 0 && has(cli_out, "skipped    1") && has(cli_out, "samples    2") &&
               has(cli_out, "records    3") && has(cli_err, "skipped 1 bad line"),
           "--skip-bad: %s%s", cli_out, cli_err);
    /* a tokenizer directory that is absent, or that has a config but no tokenizer.json */
    snprintf(a, sizeof(a), "tokenize --data '%s/s.jsonl' --tokenizer '%s/none' --out '%s/c3.h5'",
             dir, dir, dir);
    EXPECT(cli(dir, a) == 1 && has(cli_err, "none/tokenizer_config.json: cannot open"),
           "no tokenizer: %s", cli_err);
    snprintf(q, sizeof(q), "%s/tok", dir);
    mkdir(q, 0755);
    snprintf(p, sizeof(p), "%s/tokenizer_config.json", tk);
    size_t n = 0;
    char err[MT_ERR_LEN], *bytes = mt_file_read(p, &n, err);
    MT_CHECK(bytes, "%s", err);
    snprintf(p, sizeof(p), "%s/tok/tokenizer_config.json", dir);
    write_bytes(p, bytes, n);
    free(bytes);
    snprintf(a, sizeof(a), "tokenize --data '%s/s.jsonl' --tokenizer '%s/tok' --out '%s/c3.h5'",
             dir, dir, dir);
    EXPECT(cli(dir, a) == 1 && has(cli_err, "tok/tokenizer.json"), "no tokenizer.json: %s",
           cli_err);
    snprintf(a, sizeof(a), "tokenize --data '%s/absent.jsonl' --tokenizer '%s' --out '%s/c3.h5'",
             dir, tk, dir);
    EXPECT(cli(dir, a) == 1 && has(cli_err, "absent.jsonl"), "no data: %s", cli_err);
    /* a chat template that is not Jinja: named with its line and column */
    write_config(q, "{% for m in messages %}{{ m.content }\n{% endfor %}");
    snprintf(a, sizeof(a), "tokenize --data '%s/s.jsonl' --tokenizer '%s/tok' --out '%s/c3.h5'",
             dir, dir, dir);
    EXPECT(cli(dir, a) == 1 && has(cli_err, "tok/tokenizer_config.json:1:"),
           "a template that is not Jinja: %s", cli_err);
    /* one whose trained bytes cannot be told (no loop over the messages): the record named */
    write_config(q, "{{ messages }}");
    snprintf(p, sizeof(p), "%s/tokenizer.json", tk);
    bytes = mt_file_read(p, &n, err);
    MT_CHECK(bytes, "%s", err);
    snprintf(p, sizeof(p), "%s/tok/tokenizer.json", dir);
    write_bytes(p, bytes, n);
    free(bytes);
    snprintf(q, sizeof(q), "%s/s.jsonl:1: the chat template: assistant message 1", dir);
    EXPECT(cli(dir, a) == 1 && has(cli_err, q), "a template without turns: %s", cli_err);
    snprintf(a, sizeof(a), "show --data '%s/s.jsonl' --tokenizer '%s' --index 120", dir, tk);
    EXPECT(cli(dir, a) == 1 && has(cli_err, "outside"), "show out of range: %s", cli_err);
    snprintf(a, sizeof(a), "synth --out '%s/no/such/x.jsonl'", dir);
    EXPECT(cli(dir, a) == 1 && has(cli_err, "no/such"), "synth unwritable: %s", cli_err);
    EXPECT(cli(dir, "tokenize --data x.jsonl") == 2 && has(cli_err, "--tokenizer is required"),
           "usage: %s", cli_err);
    EXPECT(cli(dir, "tokenize --policy maybe") == 2, "bad policy accepted");
    EXPECT(cli(dir, "tokenize --train-on some") == 2 && has(cli_err, "--train-on"),
           "bad --train-on accepted");
    EXPECT(cli(dir, "tokenize --reasoning-history x") == 2 && has(cli_err, "--reasoning-history"),
           "bad --reasoning-history accepted");
    EXPECT(cli(dir, "tokenize --format csv") == 2 && has(cli_err, "--format"),
           "bad --format accepted");
    EXPECT(cli(dir, "frobnicate") == 2 && has(cli_err, "unknown command"), "unknown command");
    EXPECT(cli(dir, "synth --out x --n ten") == 2, "bad integer accepted");
    EXPECT(count_entries(dir, ".tmp.") == 0, "temporary files left");
}

/* Counts the occurrences of needle in haystack. */
static int count_of(const char *haystack, const char *needle) {
    int n = 0;
    for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* show on the two-turn sharegpt record: --train-on last_assistant trains the second answer
 * only; --reasoning-history split makes a sample per user message, each training its own
 * answer (the first answer untrained context in the second). */
static void check_show_options(const char *dir, const char *tk) {
    char a[12000];
    const char *first =
                   "\xe2\x9f\xa7There are 1000 grams in a kilogram.<end_of_sentence>\xe2\x9f\xa6",
               *second = "\xe2\x9f\xa7"
                         "A tonne is 1000 kg, so 1,000,000 grams.<end_of_sentence>\xe2\x9f\xa6";
    snprintf(a, sizeof(a),
             "show --data '%s/tests/fixtures/formats/sharegpt.json' --tokenizer '%s' --index 0 "
             "--no-color --train-on last_assistant",
             source_dir(), tk);
    EXPECT(cli(dir, a) == 0 && has(cli_out, "sample 1 of 1: ") && !has(cli_out, first) &&
               count_of(cli_out, second) == 1,
           "show --train-on last_assistant:\n%s%s", cli_out, cli_err);
    snprintf(a, sizeof(a),
             "show --data '%s/tests/fixtures/formats/sharegpt.json' --tokenizer '%s' --index 0 "
             "--no-color --reasoning-history split",
             source_dir(), tk);
    EXPECT(cli(dir, a) == 0 && has(cli_out, "sample 1 of 2: ") && has(cli_out, "sample 2 of 2: ") &&
               count_of(cli_out, first) == 1 && count_of(cli_out, second) == 1 &&
               strstr(cli_out, first) < strstr(cli_out, "sample 2 of 2: ") &&
               count_of(cli_out, "There are 1000 grams in a kilogram.") == 2,
           "show --reasoning-history split:\n%s%s", cli_out, cli_err);
}

static int test_data_cli(void) {
    char dir[4096], a[12000], p[4300], q[4300];
    make_tmpdir(dir, sizeof(dir));
    const char *tk = tokenizer_dir();
    snprintf(a, sizeof(a), "synth --out '%s/s.jsonl' --n 120 --seed 5", dir);
    EXPECT(cli(dir, a) == 0 && has(cli_out, "wrote 120"), "synth: %s%s", cli_out, cli_err);
    mt_gsm8k_set s;
    char err[MT_ERR_LEN];
    snprintf(p, sizeof(p), "%s/s.jsonl", dir);
    EXPECT(mt_gsm8k_read(p, false, &s, err) == 0 && s.n == 120, "synth output: %s", err);
    mt_gsm8k_set_free(&s);

    snprintf(a, sizeof(a), "tokenize --data '%s/s.jsonl' --tokenizer '%s' --out '%s/c.h5'", dir, tk,
             dir);
    EXPECT(cli(dir, a) == 0 && has(cli_out, "(built)") && has(cli_out, "records    120") &&
               has(cli_out, "samples    120") && has(cli_out, "assistant") && has(cli_out, "time"),
           "tokenize: %s%s", cli_out, cli_err);
    EXPECT(cli(dir, a) == 0 && has(cli_out, "(reused)"), "tokenize again: %s%s", cli_out, cli_err);
    snprintf(q, sizeof(q), "%s --strip-annotations", a);
    EXPECT(cli(dir, q) == 0 && has(cli_out, "(built)"), "tokenize --strip: %s", cli_out);
    snprintf(q, sizeof(q), "%s --max-length 40 --policy truncate", a);
    EXPECT(cli(dir, q) == 0 && has(cli_out, "truncated  120"), "truncate: %s", cli_out);

    /* show: the exact text with untrained parts bracketed */
    mt_strbuf qq = {0}, aa = {0};
    mt_synth_problem(5, 3, &qq, &aa);
    char *want = mt_malloc(qq.len + aa.len + 512, "expected show");
    sprintf(want,
            "\xe2\x9f\xa6<beginning_of_sentence>user name=user\n%s<end_of_sentence>\n"
            "<beginning_of_sentence>ai name=assistant\n\xe2\x9f\xa7%s<end_of_sentence>"
            "\xe2\x9f\xa6\n\xe2\x9f\xa7\n",
            qq.p, aa.p);
    snprintf(a, sizeof(a), "show --data '%s/s.jsonl' --tokenizer '%s' --index 3 --no-color", dir,
             tk);
    EXPECT(cli(dir, a) == 0 && has(cli_out, want), "show:\n%s\nwant:\n%s", cli_out, want);
    snprintf(want, qq.len + aa.len + 512, "record 3 (%s/s.jsonl line 4), sample 1 of 1: ", dir);
    EXPECT(has(cli_out, want) && has(cli_out, " with a label\n"), "show's header:\n%s", cli_out);
    free(want);
    mt_strbuf_free(&qq);
    mt_strbuf_free(&aa);
    snprintf(q, sizeof(q), "%s --tokens", a);
    EXPECT(cli(dir, q) == 0 && has(cli_out, "label") && has(cli_out, "-100"), "show --tokens");
    /* another format: a multi-turn sharegpt record of a JSON array, both answers trained */
    snprintf(a, sizeof(a),
             "show --data '%s/tests/fixtures/formats/sharegpt.json' --tokenizer '%s' --index 0 "
             "--no-color",
             source_dir(), tk);
    EXPECT(cli(dir, a) == 0 && has(cli_err, "format sharegpt (auto") &&
               has(cli_out, "\xe2\x9f\xa7"
                            "There are 1000 grams in a kilogram.<end_of_sentence>"
                            "\xe2\x9f\xa6") &&
               has(cli_out, "\xe2\x9f\xa7"
                            "A tonne is 1000 kg, so 1,000,000 grams."
                            "<end_of_sentence>\xe2\x9f\xa6"),
           "show sharegpt:\n%s%s", cli_out, cli_err);
    check_show_options(dir, tk);

    cli_errors(dir, tk);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* ---------------- data_cli_encode ---------------- */

/* Whether a JSON list of numbers holds exactly want[0, n). */
static bool json_ints_equal(const cJSON *list, const cJSON *want) {
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != cJSON_GetArraySize(want)) return false;
    for (int i = 0; i < cJSON_GetArraySize(want); i++)
        if (cJSON_GetArrayItem(list, i)->valuedouble != cJSON_GetArrayItem(want, i)->valuedouble)
            return false;
    return true;
}

/* `minimax-data encode` against HF tokenizers 0.23.3: the ids and byte offsets of the first
 * 25 strings of tests/fixtures/tokenizer/cases.json (variant A: tokenizer.json unpatched;
 * whitespace runs, CJK, emoji, combining marks, special tokens and their look-alikes) read
 * with --file; --text, the --tokens table and the error paths. */
static int test_data_cli_encode(void) {
    char dir[4096], a[12000], f[4300], tk[4200];
    make_tmpdir(dir, sizeof(dir));
    snprintf(tk, sizeof(tk), "%s/tests/fixtures/tokenizer", source_dir());
    cJSON *root = read_json_fixture("tests/fixtures/tokenizer/cases.json");
    if (!root) return MT_TEST_OK; /* the failed check ends the case */
    const cJSON *strings = cJSON_GetObjectItem(root, "strings"),
                *variant = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "variants"), 0);
    MT_CHECK(!strcmp(cJSON_GetObjectItem(variant, "name")->valuestring, "A"),
             "cases.json: the first variant is not A");
    const cJSON *cases = cJSON_GetObjectItem(variant, "cases");
    int n = 0;
    for (int c = 0; c < cJSON_GetArraySize(cases) && n < 25; c++) {
        const cJSON *cs = cJSON_GetArrayItem(cases, c);
        const int si = cJSON_GetArrayItem(cs, 0)->valueint;
        if (si >= 25) continue;
        const char *text = cJSON_GetArrayItem(strings, si)->valuestring;
        snprintf(f, sizeof(f), "%s/in.txt", dir);
        write_text(f, text);
        snprintf(a, sizeof(a), "encode --tokenizer '%s' --file '%s'", tk, f);
        EXPECT(cli(dir, a) == 0, "encode string %d: %s", si, cli_err);
        cJSON *got = cJSON_Parse(cli_out);
        /* HF offsets: a flat list of start, end pairs; ours: [[start, end], ...] */
        cJSON *flat = cJSON_CreateArray();
        const cJSON *offs = cJSON_GetObjectItem(got, "offsets");
        for (int t = 0; t < cJSON_GetArraySize(offs); t++)
            for (int k = 0; k < 2; k++)
                cJSON_AddItemToArray(
                    flat, cJSON_CreateNumber(
                              cJSON_GetArrayItem(cJSON_GetArrayItem(offs, t), k)->valuedouble));
        EXPECT(got && json_ints_equal(cJSON_GetObjectItem(got, "ids"), cJSON_GetArrayItem(cs, 1)) &&
                   json_ints_equal(flat, cJSON_GetArrayItem(cs, 2)),
               "encode string %d: got %s", si, cli_out);
        cJSON_Delete(flat);
        cJSON_Delete(got);
        n++;
    }
    EXPECT(n == 25, "cases.json: %d of the first 25 strings in variant A", n);
    cJSON_Delete(root);
    /* --text: case 4 of cases.json ("Hello world"), as JSON and as a table */
    snprintf(a, sizeof(a), "encode --tokenizer '%s' --text 'Hello world'", tk);
    EXPECT(cli(dir, a) == 0 && !strcmp(cli_out, "{\"ids\": [555, 301, 83, 545, 378], "
                                                "\"offsets\": [[0, 2], [2, 4], [4, 5], [5, 9], "
                                                "[9, 11]]}\n"),
           "encode --text: %s%s", cli_out, cli_err);
    snprintf(a, sizeof(a), "encode --tokenizer '%s' --text 'Hello world' --tokens", tk);
    EXPECT(cli(dir, a) == 0 && has(cli_out, "     4      378        9       11  \"ld\""),
           "encode --tokens: %s", cli_out);
    /* bad input: one line each, naming what is wrong */
    snprintf(a, sizeof(a), "encode --tokenizer '%s'", tk);
    EXPECT(cli(dir, a) == 2 && has(cli_err, "--text S or --file F"), "no text: %s", cli_err);
    snprintf(a, sizeof(a), "encode --tokenizer '%s' --text x --file '%s'", tk, f);
    EXPECT(cli(dir, a) == 2 && has(cli_err, "one of them"), "both: %s", cli_err);
    EXPECT(cli(dir, "encode --text x") == 2 && has(cli_err, "--tokenizer is required"),
           "no tokenizer: %s", cli_err);
    write_bytes(f, "ok \xff", 4);
    snprintf(a, sizeof(a), "encode --tokenizer '%s' --file '%s'", tk, f);
    EXPECT(cli(dir, a) == 1 && has(cli_err, "in.txt: the text is not valid UTF-8 (byte 3)"),
           "bad UTF-8: %s", cli_err);
    snprintf(a, sizeof(a), "encode --tokenizer '%s/none' --text x", dir);
    EXPECT(cli(dir, a) == 1 && has(cli_err, "none/tokenizer.json"), "no tokenizer.json: %s",
           cli_err);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* ---------------- data_cli_render ---------------- */

/* The messages of a tests/fixtures/template/chat_cases.json case as a conversation file
 * {"messages": [{"role", "content"}...]}. Returns the number of assistant messages. */
static int write_conversation(const char *path, const cJSON *msgs) {
    cJSON *conv = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(conv, "messages");
    const cJSON *m;
    int n_assistant = 0;
    cJSON_ArrayForEach(m, msgs) {
        const char *role = cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", role);
        cJSON_AddStringToObject(o, "content",
                                cJSON_GetObjectItemCaseSensitive(m, "text")->valuestring);
        cJSON_AddItemToArray(list, o);
        n_assistant += !strcmp(role, "assistant");
    }
    char *text = cJSON_PrintUnformatted(conv);
    write_text(path, text);
    free(text);
    cJSON_Delete(conv);
    return n_assistant;
}

/* render --spans on a case without the generation prompt: the text transformers rendered, and
 * one trained range per assistant message, its text + <end_of_sentence>, in order. */
static void check_spans(const char *dir, const char *args, const char *name, const cJSON *msgs,
                        const char *want, int n_assistant) {
    char a[12000];
    snprintf(a, sizeof(a), "%s --spans", args);
    EXPECT(cli(dir, a) == 0, "%s: render --spans: %s", name, cli_err);
    cJSON *got = cJSON_Parse(cli_out);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(got, "text");
    const cJSON *trained = cJSON_GetObjectItemCaseSensitive(got, "trained");
    EXPECT(cJSON_IsString(text) && !strcmp(text->valuestring, want),
           "%s: render --spans text differs from transformers': %s", name, cli_out);
    EXPECT(cJSON_GetArraySize(trained) == n_assistant, "%s: %d trained ranges, %d assistant turns",
           name, cJSON_GetArraySize(trained), n_assistant);
    const cJSON *m;
    int k = 0;
    const int64_t len = (int64_t)strlen(want);
    cJSON_ArrayForEach(m, msgs) {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring, "assistant")) continue;
        const cJSON *range = cJSON_GetArrayItem(trained, k++);
        if (cJSON_GetArraySize(range) != 2) break;
        const int64_t s = (int64_t)cJSON_GetArrayItem(range, 0)->valuedouble,
                      e = (int64_t)cJSON_GetArrayItem(range, 1)->valuedouble;
        char expect[8192];
        snprintf(expect, sizeof(expect), "%s<end_of_sentence>",
                 cJSON_GetObjectItemCaseSensitive(m, "text")->valuestring);
        const int64_t n = (int64_t)strlen(expect);
        EXPECT(s >= 0 && e == s + n && e <= len && !memcmp(want + s, expect, (size_t)n),
               "%s: trained range %d [%lld, %lld) is not the assistant text + <end_of_sentence>",
               name, k - 1, (long long)s, (long long)e);
    }
    cJSON_Delete(got);
}

/* A failed render: status 1, nothing on stdout, one line on stderr naming `what`. */
static void expect_render_error(const char *dir, const char *args, const char *what) {
    const int rc = cli(dir, args);
    const char *nl = strchr(cli_err, '\n');
    EXPECT(rc == 1 && !cli_out[0] && nl && !nl[1] && has(cli_err, what),
           "render %s: status %d, want 1 and one line naming %s: \"%s\"", args, rc, what, cli_err);
}

/* minimax-data render against transformers' apply_chat_template(tokenize=False)
 * (tests/fixtures/template/chat_cases.json): byte for byte, with the generation prompt where
 * the case has it; the trained ranges of --spans; and its errors. */
static int test_data_cli_render(void) {
    char dir[4096], a[12000], conv[4300], tmpl[4300];
    make_tmpdir(dir, sizeof(dir));
    const char *tk = tokenizer_dir();
    cJSON *root = read_json_fixture("tests/fixtures/template/chat_cases.json");
    if (!root) return MT_TEST_OK;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    snprintf(conv, sizeof(conv), "%s/conv.json", dir);
    int n_cases = 0, n_agp = 0, n_spans = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        const char *want = cJSON_GetObjectItemCaseSensitive(c, "rendered")->valuestring;
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(c, "messages");
        const bool agp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt"));
        const int n_assistant = write_conversation(conv, msgs);
        snprintf(a, sizeof(a), "render --conversation '%s' --tokenizer '%s'", conv, tk);
        char args[12100];
        snprintf(args, sizeof(args), "%s%s", a, agp ? " --add-generation-prompt" : "");
        EXPECT(cli(dir, args) == 0 && !strcmp(cli_out, want),
               "%s: render differs from apply_chat_template:\n%s\nwant:\n%s\n%s", name, cli_out,
               want, cli_err);
        n_cases++;
        n_agp += agp;
        if (!agp && n_assistant > 0) {
            check_spans(dir, a, name, msgs, want, n_assistant);
            n_spans++;
        }
    }
    EXPECT(n_cases >= 5 && n_agp >= 1 && n_spans >= 2,
           "chat_cases.json: %d cases, %d with the "
           "generation prompt, %d with assistant turns",
           n_cases, n_agp, n_spans);
    printf("render: %d cases byte-identical to transformers (%d with the generation prompt), "
           "--spans on %d\n",
           n_cases, n_agp, n_spans);
    cJSON_Delete(root);
    /* errors: one line naming the file at fault */
    snprintf(a, sizeof(a), "render --conversation '%s/absent.json' --tokenizer '%s'", dir, tk);
    expect_render_error(dir, a, "absent.json");
    write_text(conv, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}");
    snprintf(a, sizeof(a), "render --conversation '%s' --tokenizer '%s'", conv, tk);
    expect_render_error(dir, a, conv);
    write_text(conv, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}");
    snprintf(tmpl, sizeof(tmpl), "%s/bad.jinja", dir);
    write_text(tmpl, "{% for m in messages %}{{ m.content }\n{% endfor %}");
    snprintf(a, sizeof(a), "render --conversation '%s' --tokenizer '%s' --chat-template '%s'", conv,
             tk, tmpl);
    char where[4400];
    snprintf(where, sizeof(where), "%s:1:", tmpl);
    expect_render_error(dir, a, where);
    /* the same conversation renders with a good template file */
    write_text(tmpl, "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}");
    EXPECT(cli(dir, a) == 0 && !strcmp(cli_out, "[user] hi\n"), "--chat-template: \"%s\" %s",
           cli_out, cli_err);
    snprintf(a, sizeof(a),
             "render --conversation '%s' --tokenizer '%s' --spans "
             "--add-generation-prompt",
             conv, tk);
    EXPECT(cli(dir, a) == 2, "--spans with --add-generation-prompt accepted");
    EXPECT(cli(dir, "render --tokenizer x") == 2 && has(cli_err, "--conversation is required"),
           "render without --conversation: %s", cli_err);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* ---------------- data_gsm8k_full (../shared only) ---------------- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* All of GSM8K's training set: read, rendered, tokenized; the labelled tokens decode to exactly
 * the answer + <end_of_sentence> for every sample. */
static int test_data_gsm8k_full(void) {
    const char *path = gsm8k_path();
    if (!path) {
        printf("no ../shared/data/gsm8k/train.jsonl\n");
        return MT_TEST_SKIP;
    }
    char err[MT_ERR_LEN];
    mt_gsm8k_set s;
    double t0 = now_s();
    EXPECT(mt_gsm8k_read(path, false, &s, err) == 0, "%s", err);
    double t_read = now_s() - t0;
    EXPECT(s.n == 7473 && s.n_lines == 7473, "GSM8K train has %lld records", (long long)s.n);
    int no_final = 0, left = 0;
    for (int64_t i = 0; i < s.n; i++) {
        const char *h = strstr(s.answer[i], "\n#### ");
        no_final += !h || strchr(h + 1, '\n') != NULL;
        char *c = strdup(s.answer[i]);
        mt_gsm8k_strip_annotations(c);
        left += strstr(c, "<<") != NULL || strstr(c, ">>") != NULL;
        free(c);
    }
    EXPECT(no_final == 0 && left == 0, "%d answers without a final #### line, %d unstripped",
           no_final, left);

    char tj[4200];
    snprintf(tj, sizeof(tj), "%s/tokenizer.json", tokenizer_dir());
    mt_tokenizer *tok = mt_tokenizer_load(tj);
    mt_sample_opts o;
    mt_sample_opts_default(&o);
    o.max_length = 1 << 20; /* keep all: every sample is checked */
    mt_chat_template *tmpl = mt_chat_template_open(
        &(mt_chat_source){.dir = tokenizer_dir(), .file = NULL, .kwargs_json = NULL}, err,
        sizeof(err));
    MT_CHECK(tmpl, "%s", err);
    mt_token_data d;
    t0 = now_s();
    EXPECT(mt_token_data_build(path, tok, tmpl, &o, false, &d, err) == 0, "%s", err);
    mt_chat_template_free(tmpl);
    double t_build = now_s() - t0;
    EXPECT(d.n_samples == s.n, "%lld samples built of %lld", (long long)d.n_samples,
           (long long)s.n);
    int bad = 0;
    int64_t over512 = 0, longest = 0;
    int32_t *sel = mt_malloc(sizeof(int32_t) * (size_t)(d.n_tokens + 1), "labelled ids");
    for (int64_t i = 0; i < d.n_samples && d.n_samples == s.n; i++) {
        int64_t o0 = d.offsets[i], len = d.offsets[i + 1] - o0, n = 0;
        over512 += len > 512;
        longest = len > longest ? len : longest;
        for (int64_t t = 0; t < len; t++)
            if (d.labels[o0 + t] != MT_IGNORE_INDEX) sel[n++] = d.ids[o0 + t];
        char *txt = mt_tokenizer_decode(tok, sel, n, false);
        size_t al = strlen(s.answer[i]);
        if ((strncmp(txt, s.answer[i], al) || strcmp(txt + al, "<end_of_sentence>")) && bad++ < 3)
            printf("sample %lld: labels decode to \"%s\"\n", (long long)i, txt);
        free(txt);
    }
    EXPECT(bad == 0, "%d samples whose labels are not exactly answer + <end_of_sentence>", bad);
    printf("GSM8K train: %lld samples, %lld tokens, %lld labelled (%.1f%%), longest %lld, "
           "%lld over 512; read %.3f s, render+tokenize+label %.3f s\n",
           (long long)d.n_samples, (long long)d.n_tokens, (long long)d.n_targets,
           100.0 * (double)d.n_targets / (double)d.n_tokens, (long long)longest, (long long)over512,
           t_read, t_build);
    free(sel);
    mt_token_data_free(&d);
    mt_tokenizer_free(tok);
    mt_gsm8k_set_free(&s);
    return MT_TEST_OK;
}

/* ---------------- data_generate_prompt ---------------- */

/* minimax-generate --prompt on a random 1-layer model of recipes/configs/tiny.json (the test
 * tokenizer's vocabulary): the prompt ids are transformers' apply_chat_template ids of the same
 * user turn with add_generation_prompt=True (tests/fixtures/template/chat_cases.json, case
 * generation_prompt_no_system, tools/make_template_fixtures.py); the generated ids are those of
 * the IDS.json mode on those ids; the printed text is their decode (special tokens left out),
 * with the tokenizer from the model directory or from --tokenizer; and a model directory
 * without a tokenizer is refused naming the file. */
static int test_data_generate_prompt(void) {
    char dir[4096], model[4200], bare[4200], a[16384], path[4400], tk[4200];
    make_tmpdir(dir, sizeof(dir));
    snprintf(tk, sizeof(tk), "%s/tests/fixtures/tokenizer", source_dir());
    cJSON *root = read_json_fixture("tests/fixtures/template/chat_cases.json");
    if (!root) return MT_TEST_OK;
    const cJSON *cs = NULL, *cases = cJSON_GetObjectItem(root, "cases");
    for (int c = 0; c < cJSON_GetArraySize(cases); c++)
        if (!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(cases, c), "name")->valuestring,
                    "generation_prompt_no_system"))
            cs = cJSON_GetArrayItem(cases, c);
    MT_CHECK(cs && cJSON_IsTrue(cJSON_GetObjectItem(cs, "add_generation_prompt")),
             "chat_cases.json: no case generation_prompt_no_system with the generation prompt");
    const cJSON *msgs = cJSON_GetObjectItem(cs, "messages");
    MT_CHECK(cJSON_GetArraySize(msgs) == 1, "generation_prompt_no_system: one user turn");
    const char *question = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 0), "text")->valuestring;
    MT_CHECK(!strchr(question, '\''), "the question must not hold a single quote");

    /* the model: random weights, fp32, with and without the tokenizer files beside them */
    snprintf(path, sizeof(path), "%s/recipes/configs/tiny.json", source_dir());
    mt_minimax_config cfg;
    mt_minimax_config_load(path, &cfg);
    mt_minimax_config_keep_layers(&cfg, 1);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    float **data = calloc((size_t)m.n_buckets, sizeof(float *));
    for (int b = 0; b < m.n_buckets; b++) {
        data[b] = calloc((size_t)m.bucket_numel[b], sizeof(float));
        mt_minimax_bind_bucket(&m, b, data[b], NULL);
    }
    mt_weights_init_random(&m, 7);
    snprintf(model, sizeof(model), "%s/model", dir);
    snprintf(bare, sizeof(bare), "%s/bare", dir);
    mt_weights_save(model, &m, MT_NAMING_HF_V4, MT_F32, 0);
    mt_weights_save(bare, &m, MT_NAMING_HF_V4, MT_F32, 0);
    for (int b = 0; b < m.n_buckets; b++) free(data[b]);
    free(data);
    mt_minimax_free(&m);
    const char *files[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        char src[4400], dst[4400], err[MT_ERR_LEN];
        snprintf(src, sizeof(src), "%s/%s", tk, files[i]);
        snprintf(dst, sizeof(dst), "%s/%s", model, files[i]);
        size_t n = 0;
        char *bytes = mt_file_read(src, &n, err);
        MT_CHECK(bytes, "%s", err);
        write_bytes(dst, bytes, n);
        free(bytes);
    }

    /* --json: the prompt ids against transformers', the ids, the text */
    const int n_new = 12;
    snprintf(a, sizeof(a), "--model '%s' --prompt '%s' --max-new-tokens %d --json", model, question,
             n_new);
    EXPECT(cli_run("MT_GENERATE_CLI", dir, a) == 0, "generate --prompt --json: %s", cli_err);
    cJSON *got = cJSON_Parse(cli_out);
    MT_CHECK(got, "generate --json printed no JSON: %s", cli_out);
    EXPECT(
        json_ints_equal(cJSON_GetObjectItem(got, "prompt_ids"),
                        cJSON_GetObjectItem(cs, "input_ids")),
        "the prompt ids differ from transformers' apply_chat_template(add_generation_prompt=True)");
    const cJSON *gids = cJSON_GetObjectItem(got, "ids");
    const int n_ids = cJSON_GetArraySize(gids);
    EXPECT(n_ids > 0 && n_ids <= n_new, "%d generated ids", n_ids);
    int32_t ids[64];
    for (int i = 0; i < n_ids && i < 64; i++) ids[i] = cJSON_GetArrayItem(gids, i)->valueint;
    snprintf(path, sizeof(path), "%s/tokenizer.json", tk);
    mt_tokenizer *tok = mt_tokenizer_load(path);
    char *want = mt_tokenizer_decode(tok, ids, n_ids, true);
    const cJSON *text = cJSON_GetObjectItem(got, "text");
    EXPECT(cJSON_IsString(text) && !strcmp(text->valuestring, want),
           "--json text \"%s\", decode \"%s\"", cJSON_IsString(text) ? text->valuestring : "?",
           want);

    /* the IDS.json mode on the prompt ids generates the same ids */
    char *prompt_json = cJSON_PrintUnformatted(cJSON_GetObjectItem(got, "prompt_ids"));
    snprintf(a, sizeof(a), "[%s]", prompt_json);
    snprintf(path, sizeof(path), "%s/ids.json", dir);
    write_text(path, a);
    free(prompt_json);
    snprintf(a, sizeof(a), "--model '%s' --ids '%s' --max-new-tokens %d", model, path, n_new);
    EXPECT(cli_run("MT_GENERATE_CLI", dir, a) == 0, "generate --ids: %s", cli_err);
    cJSON *rows = cJSON_Parse(cli_out);
    EXPECT(rows && json_ints_equal(cJSON_GetArrayItem(rows, 0), gids),
           "--ids on the prompt ids generates other ids: %s", cli_out);
    cJSON_Delete(rows);

    /* the plain output: the decoded text and a newline, with the tokenizer of the model
     * directory or of --tokenizer */
    char want_line[8192];
    snprintf(want_line, sizeof(want_line), "%s\n", want);
    snprintf(a, sizeof(a), "--model '%s' --prompt '%s' --max-new-tokens %d", model, question,
             n_new);
    EXPECT(cli_run("MT_GENERATE_CLI", dir, a) == 0 && !strcmp(cli_out, want_line),
           "generate --prompt printed \"%s\", want \"%s\" (%s)", cli_out, want_line, cli_err);
    snprintf(a, sizeof(a), "--model '%s' --tokenizer '%s' --prompt '%s' --max-new-tokens %d", bare,
             tk, question, n_new);
    EXPECT(cli_run("MT_GENERATE_CLI", dir, a) == 0 && !strcmp(cli_out, want_line),
           "generate --tokenizer printed \"%s\", want \"%s\" (%s)", cli_out, want_line, cli_err);
    /* no tokenizer: refused, naming the file and --tokenizer */
    snprintf(a, sizeof(a), "--model '%s' --prompt 'hi' --max-new-tokens 2", bare);
    EXPECT(cli_run("MT_GENERATE_CLI", dir, a) != 0 && has(cli_err, "bare/tokenizer.json") &&
               has(cli_err, "--tokenizer"),
           "generate without a tokenizer: %s", cli_err);
    printf("minimax-generate --prompt: %d prompt ids as transformers renders them, %d generated: "
           "\"%s\"\n",
           cJSON_GetArraySize(cJSON_GetObjectItem(got, "prompt_ids")), n_ids, want);
    free(want);
    mt_tokenizer_free(tok);
    cJSON_Delete(got);
    cJSON_Delete(root);
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_cli", test_data_cli},
    {"data_cli_encode", test_data_cli_encode},
    {"data_cli_render", test_data_cli_render},
    {"data_generate_prompt", test_data_generate_prompt},
    {"data_gsm8k_full", test_data_gsm8k_full},
};
MT_TEST_MAIN(cases)
