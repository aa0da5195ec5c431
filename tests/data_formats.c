/* data_formats.c: the dataset formats (data/dataset.h) against transformers' renderings of the
 * fixture files (tests/fixtures/formats, tools/make_format_fixtures.py), their errors, and the
 * token cache over several files. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>

#include "data/dataset.h"
#include "data/token_cache.h"
#include "data_util.h"

static const char *role_name(mt_chat_role r) {
    return r == MT_CHAT_SYSTEM ? "system" : r == MT_CHAT_USER ? "user" : "assistant";
}

static int jint(const cJSON *a, int64_t i) { return cJSON_GetArrayItem(a, (int)i)->valueint; }

/* The labels HF's mask implies: the masked tokens of the trained turns (every run of the mask,
 * or the last run only) and the <end_of_sentence> right after each run. */
static int64_t expected_labels(const cJSON *ids, const cJSON *mask, int64_t n, int32_t eos,
                               bool last_only, int32_t *lab) {
    int64_t last_run = -1, n_lab = 0;
    for (int64_t i = 0; i < n; i++)
        if (jint(mask, i) && (i == 0 || !jint(mask, i - 1))) last_run = i;
    for (int64_t i = 0; i < n; i++) {
        const bool in = jint(mask, i), after = !in && i > 0 && jint(mask, i - 1);
        bool trained = (in || (after && jint(ids, i) == eos));
        if (last_only) {
            int64_t run = in ? i : i - 1; /* the run this token belongs to or closes */
            while (run > 0 && jint(mask, run - 1)) run--;
            trained = trained && run == last_run;
        }
        lab[i] = trained ? jint(ids, i) : MT_IGNORE_INDEX;
        n_lab += trained;
    }
    return n_lab;
}

static int test_data_formats(void) {
    char path[4200], err[MT_ERR_LEN];
    cJSON *root = read_json_fixture("tests/fixtures/formats/expected.json");
    if (!root) return MT_TEST_OK;
    /* the fixtures were rendered with the template exports write */
    const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(root, "template");
    char *a = mt_chat_template_normalize(tmpl->valuestring);
    char *b = mt_chat_template_normalize(mt_chat_template_minimax_ext());
    EXPECT(!strcmp(a, b), "expected.json was made with another template than data/chat_template.c");
    free(a);
    free(b);
    snprintf(path, sizeof(path), "%s/tokenizer.json", tokenizer_dir());
    mt_tokenizer *tok = mt_tokenizer_load(path);
    const int32_t eos = mt_tokenizer_token_to_id(tok, "<end_of_sentence>");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    mt_conv_set set = {0};
    char loaded[64] = "";
    mt_chat_rendered r = {0};
    int n_cases = 0, seen_format[MT_FORMAT_COUNT] = {0}, n_parts = 0, n_multi = 0, n_sys = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *file = cJSON_GetObjectItemCaseSensitive(c, "file")->valuestring;
        const char *fmt = cJSON_GetObjectItemCaseSensitive(c, "format")->valuestring;
        const int rec = cJSON_GetObjectItemCaseSensitive(c, "record")->valueint;
        if (strcmp(loaded, file)) { /* each file read once, its format detected */
            mt_conv_set_free(&set);
            snprintf(path, sizeof(path), "%s/tests/fixtures/formats/%s", source_dir(), file);
            EXPECT(mt_conv_read(path, MT_FORMAT_AUTO, false, &set, err) == 0, "%s", err);
            EXPECT(!strcmp(mt_data_format_name(set.format), fmt), "%s: detected %s, not %s", file,
                   mt_data_format_name(set.format), fmt);
            snprintf(loaded, sizeof(loaded), "%s", file);
            seen_format[set.format]++;
        }
        EXPECT(rec < set.n, "%s: %lld records, the fixture has record %d", file, (long long)set.n,
               rec);
        if (rec >= set.n) continue;
        const mt_chat_msg *ms = set.msgs + set.first[rec];
        const int n = (int)(set.first[rec + 1] - set.first[rec]);
        /* the conversation, message by message */
        const cJSON *conv = cJSON_GetObjectItemCaseSensitive(c, "conversation");
        EXPECT(cJSON_GetArraySize(conv) == n, "%s[%d]: %d messages, HF has %d", file, rec, n,
               cJSON_GetArraySize(conv));
        for (int i = 0; i < n && i < cJSON_GetArraySize(conv); i++) {
            const cJSON *m = cJSON_GetArrayItem(conv, i);
            const char *role = cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring;
            const char *want = cJSON_GetObjectItemCaseSensitive(m, "text")->valuestring;
            EXPECT(!strcmp(role, role_name(ms[i].role)) && ms[i].len == strlen(want) &&
                       !memcmp(ms[i].text, want, ms[i].len),
                   "%s[%d] message %d: %s \"%s\", HF %s \"%s\"", file, rec, i,
                   role_name(ms[i].role), ms[i].text, role, want);
            n_sys += ms[i].role == MT_CHAT_SYSTEM;
        }
        n_multi += n > 3;
        const cJSON *forms = cJSON_GetObjectItemCaseSensitive(c, "content"), *f;
        cJSON_ArrayForEach(f, forms) n_parts += !strcmp(f->valuestring, "parts");
        /* rendering, ids, labels under both train_on settings */
        const char *want = cJSON_GetObjectItemCaseSensitive(c, "rendered")->valuestring;
        mt_chat_render(ms, n, false, &r);
        EXPECT(r.len == strlen(want) && !memcmp(r.text, want, r.len),
               "%s[%d]: rendering differs from apply_chat_template", file, rec);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "input_ids");
        const cJSON *mask = cJSON_GetObjectItemCaseSensitive(c, "assistant_masks");
        const int64_t nt = cJSON_GetArraySize(ids);
        int32_t *lab = mt_malloc(sizeof(int32_t) * (size_t)nt, "labels");
        for (int last = 0; last < 2; last++) {
            mt_sample_opts o;
            mt_sample_opts_default(&o);
            o.max_length = 1 << 20;
            o.last_assistant_only = last;
            mt_sample_builder sb;
            mt_sample_builder_init(&sb, tok, &o);
            int rc = mt_sample_build_chat(&sb, ms, n, err);
            EXPECT(rc == MT_SAMPLE_OK && sb.n == nt, "%s[%d]: rc %d, %lld tokens, HF %lld", file,
                   rec, rc, (long long)sb.n, (long long)nt);
            const int64_t n_lab = expected_labels(ids, mask, nt, eos, last, lab);
            int id_miss = 0, lab_miss = 0;
            for (int64_t i = 0; rc == MT_SAMPLE_OK && i < nt && i < sb.n; i++) {
                id_miss += sb.ids[i] != jint(ids, i);
                lab_miss += sb.lab[i] != lab[i];
            }
            EXPECT(id_miss == 0 && lab_miss == 0 && sb.n_targets == n_lab,
                   "%s[%d] %s: %d ids and %d labels differ from HF's ids and mask (+ closing "
                   "eos), %lld targets, want %lld",
                   file, rec, last ? "last_assistant" : "all_assistant", id_miss, lab_miss,
                   (long long)sb.n_targets, (long long)n_lab);
            mt_sample_builder_free(&sb);
        }
        free(lab);
        n_cases++;
    }
    for (int f = MT_FORMAT_GSM8K; f < MT_FORMAT_COUNT; f++)
        EXPECT(seen_format[f] == 1, "no fixture file of format %s",
               mt_data_format_name((mt_data_format)f));
    EXPECT(n_parts >= 2 && n_multi >= 3 && n_sys >= 4,
           "fixtures too thin: %d with part lists, %d multi-turn, %d system messages", n_parts,
           n_multi, n_sys);
    printf("formats: %d records of 4 formats equal to transformers (rendering, ids, labels; %d "
           "multi-turn, %d with part lists, %d system messages)\n",
           n_cases, n_multi, n_parts, n_sys);
    mt_conv_set_free(&set);
    mt_chat_rendered_free(&r);
    mt_tokenizer_free(tok);
    cJSON_Delete(root);
    return MT_TEST_OK;
}

/* `content` read as a file named `name` in format fmt must fail naming name:line and `what`. */
static void expect_bad(const char *dir, const char *name, const char *content, mt_data_format fmt,
                       int line, const char *what) {
    char path[4200], err[MT_ERR_LEN] = "", where[4300];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    write_text(path, content);
    snprintf(where, sizeof(where), "%s:%d: ", path, line);
    mt_conv_set s;
    int rc = mt_conv_read(path, fmt, false, &s, err);
    EXPECT(rc != 0 && has(err, where) && has(err, what), "%s: want \"%s%s\", got rc %d \"%s\"",
           name, where, what, rc, err);
    if (rc == 0) mt_conv_set_free(&s);
}

static int test_data_formats_errors(void) {
    char dir[4096], path[4200], err[MT_ERR_LEN];
    make_tmpdir(dir, sizeof(dir));
    const mt_data_format A = MT_FORMAT_AUTO;
    /* auto: a record that fits no format names its keys */
    expect_bad(dir, "a.jsonl", "\n{\"prompt\": \"x\", \"completion\": \"y\"}\n", A, 2,
               "fits no format (keys: \"prompt\", \"completion\"");
    /* a later record of another shape: the file's format, the keys it lacks and has */
    expect_bad(dir, "b.jsonl",
               "{\"question\": \"q\", \"answer\": \"a\"}\n{\"instruction\": \"i\", \"output\": "
               "\"o\"}\n",
               A, 2,
               "missing field \"question\" (a gsm8k record needs question+answer; this one "
               "has \"instruction\", \"output\")");
    expect_bad(dir, "c.jsonl", "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}\n", A, 1,
               "messages[0] has role \"tool\"");
    expect_bad(dir, "d.jsonl",
               "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
               "\"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}, {\"role\": \"assistant\", "
               "\"content\": \"c\"}]}\n",
               A, 1, "messages[0].content has 2 parts");
    expect_bad(dir, "e.jsonl",
               "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}, {\"role\": "
               "\"assistant\", \"content\": [{\"type\": \"image\", \"url\": \"x\"}]}]}\n",
               A, 1, "messages[1].content[0] is not a {\"type\": \"text\"");
    expect_bad(dir, "f.jsonl",
               "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", "
               "\"content\": \"u\"}]}\n",
               A, 1, "no assistant message");
    expect_bad(dir, "g.jsonl",
               "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}, {\"role\": "
               "\"assistant\", \"content\": \" \\n\"}]}\n",
               A, 1, "messages[1].content is empty");
    expect_bad(dir, "h.json",
               "[\n{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}, {\"from\": "
               "\"gpt\", \"value\": \"a\"}]},\n\n{\"conversations\": [{\"from\": \"observation\", "
               "\"value\": \"q\"}]}\n]\n",
               A, 4, "conversations[0] is from \"observation\"");
    expect_bad(dir, "i.json", "[\n{\"question\": \"q\", \"answer\": \"a\"}\n{\"question\": 1}]", A,
               3, "malformed JSON array: expected ',' or ']'");
    expect_bad(dir, "j.json", "[{\"question\": \"q\", \"answer\": \"a\"},\n 7]", A, 2,
               "not a JSON object");
    expect_bad(dir, "k.jsonl",
               "{\"instruction\": \"i\", \"output\": \"o\", \"history\": [[\"q\"]]}", A, 1,
               "history[0] must be [query, response]");
    expect_bad(dir, "l.jsonl", "{\"instruction\": \"i\", \"output\": \"o\", \"input\": 3}", A, 1,
               "field \"input\" is not a string");
    expect_bad(dir, "m.json", "[{\"question\": \"q\", \"answer\": \"a\"}] x", A, 1,
               "extra text after the JSON array");
    /* a fixed format that the file is not in */
    expect_bad(dir, "n.jsonl", "{\"question\": \"q\", \"answer\": \"a\"}\n", MT_FORMAT_MESSAGES, 1,
               "(a messages record needs messages; this one has \"question\", \"answer\")");
    /* skip_bad in a JSON array: the bad element counted, the rest read */
    snprintf(path, sizeof(path), "%s/ok.json", dir);
    write_text(path, "[{\"question\": \"q\", \"answer\": \"a\"}, {\"question\": \"\", \"answer\": "
                     "\"a\"},\n {\"question\": \"q2\", \"answer\": \"a2\"}]");
    mt_conv_set s;
    EXPECT(mt_conv_read(path, A, true, &s, err) == 0 && s.n == 2 && s.n_skipped == 1 &&
               s.line[1] == 2 && has(s.first_skip, "empty question"),
           "skip_bad in an array: %s", err);
    mt_conv_set_free(&s);
    /* what an export writes: the extended template, accepted by the check */
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", tokenizer_dir());
    char *cfg = mt_chat_template_export_config(path, err), *norm = NULL;
    EXPECT(cfg, "%s", err);
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    if (cfg) write_text(path, cfg);
    EXPECT(mt_chat_template_check(path, &norm, err) == 0, "exported template rejected: %s", err);
    char *want = mt_chat_template_normalize(mt_chat_template_minimax_ext());
    EXPECT(norm && !strcmp(norm, want), "the export does not write the extended template");
    free(want);
    free(norm);
    free(cfg);
    /* formats by name; an unknown one is -1 */
    EXPECT(mt_data_format_parse("sharegpt") == MT_FORMAT_SHAREGPT &&
               mt_data_format_parse("chatml") == -1,
           "format names");
    rm_tree(dir);
    return MT_TEST_OK;
}

/* The token cache over several files: sources recorded, read back, and every mixing-relevant
 * option in the key. */
static int test_data_cache_files(void) {
    char dir[4096], cache[4200], paths[3][4200], err[MT_ERR_LEN];
    make_tmpdir(dir, sizeof(dir));
    const char *names[3] = {"gsm8k.jsonl", "messages.jsonl", "alpaca.jsonl"};
    const char *p[3];
    for (int i = 0; i < 3; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/tests/fixtures/formats/%s", source_dir(),
                 names[i]);
        p[i] = paths[i];
    }
    snprintf(cache, sizeof(cache), "%s/tokens.h5", dir);
    const double w[3] = {2, 1, 1};
    mt_token_cache_cfg cfg = {.data_paths = p,
                              .n_data_paths = 3,
                              .weights = w,
                              .tokenizer_dir = tokenizer_dir(),
                              .cache_path = cache};
    mt_sample_opts_default(&cfg.sample);
    mt_token_data d, e;
    bool reused;
    EXPECT(mt_token_cache_open(&cfg, &d, &reused, err) == 0 && !reused, "%s", err);
    EXPECT(d.n_samples == 8, "%lld samples, want 2 + 3 + 3", (long long)d.n_samples);
    int count[3] = {0};
    for (int64_t i = 0; i < d.n_samples; i++)
        count[d.source[i] >= 0 && d.source[i] < 3 ? d.source[i] : 0]++;
    EXPECT(count[0] == 2 && count[1] == 3 && count[2] == 3, "sources %d %d %d", count[0], count[1],
           count[2]);
    EXPECT(mt_token_cache_read(cache, NULL, &e, err) == 0 && e.n_samples == d.n_samples &&
               !memcmp(e.source, d.source, sizeof(int32_t) * (size_t)d.n_samples),
           "sources read back: %s", err);
    mt_token_data_free(&e);
    mt_cache_key k0, k;
    EXPECT(mt_token_cache_key(&cfg, &k0, err) == 0, "%s", err);
    const double w2[3] = {1, 1, 1};
    mt_token_cache_cfg c2 = cfg;
    c2.weights = w2;
    EXPECT(mt_token_cache_key(&c2, &k, err) == 0 && k.options_hash != k0.options_hash,
           "weights not in the key");
    c2 = cfg;
    c2.format = MT_FORMAT_GSM8K;
    EXPECT(mt_token_cache_key(&c2, &k, err) == 0 && k.options_hash != k0.options_hash,
           "data.format not in the key");
    c2 = cfg;
    c2.sample.last_assistant_only = true;
    EXPECT(mt_token_cache_key(&c2, &k, err) == 0 && k.options_hash != k0.options_hash,
           "data.train_on not in the key");
    c2 = cfg;
    const char *swapped[3] = {p[1], p[0], p[2]};
    c2.data_paths = swapped;
    EXPECT(mt_token_cache_key(&c2, &k, err) == 0 && k.data_hash != k0.data_hash,
           "the order of the files not in the key");
    c2.n_data_paths = 2;
    EXPECT(mt_token_cache_key(&c2, &k, err) == 0 && k.data_hash != k0.data_hash,
           "the number of files not in the key");
    /* train_on = last_assistant: fewer targets (the fixtures have multi-turn records) */
    c2 = cfg;
    c2.sample.last_assistant_only = true;
    c2.force = true;
    EXPECT(mt_token_cache_open(&c2, &e, &reused, err) == 0 && e.n_targets < d.n_targets &&
               e.n_tokens == d.n_tokens,
           "last_assistant: %lld targets of %lld", (long long)e.n_targets, (long long)d.n_targets);
    mt_token_data_free(&e);
    mt_token_data_free(&d);
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_formats", test_data_formats},
    {"data_formats_errors", test_data_formats_errors},
    {"data_cache_files", test_data_cache_files},
};
MT_TEST_MAIN(cases)
