/* data_formats.c: the dataset formats (data/dataset.h) against transformers' renderings of the
 * fixture files (tests/fixtures/formats, tools/make_format_fixtures.py), their errors, and the
 * token cache over several files. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>

#include "data/chat.h"
#include "data/dataset.h"
#include "data/token_cache.h"
#include "tests/support/data_util.h"

/* A message's content as text: the string, or its text parts joined (as Text-01's template
 * renders an assistant message's parts). false when it is neither. */
static bool content_text(jinja_value m, jinja_buf *out) {
    const jinja_value *c = jinja_dict_get_str(m, "content");
    out->len = 0;
    jinja_buf_append(out, "", 0);
    if (c && c->type == JINJA_STR) {
        jinja_buf_append(out, c->u.s.p, c->u.s.len);
        return true;
    }
    if (!c || c->type != JINJA_LIST) return false;
    for (int64_t k = 0; k < c->u.list->n; k++) {
        const jinja_value *t = c->u.list->items[k].type == JINJA_DICT
                                   ? jinja_dict_get_str(c->u.list->items[k], "text")
                                   : NULL;
        if (!t || t->type != JINJA_STR) return false;
        jinja_buf_append(out, t->u.s.p, t->u.s.len);
    }
    return true;
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

typedef struct {
    const mt_tokenizer *tok;
    mt_chat_template *tmpl;
    jinja_heap *heap;
    int32_t eos;
    int n_parts, n_multi, n_sys;
} formats_ctx;

/* Record rec of set (file) against fixture case c: the messages (role, text), the rendering,
 * and the sample's ids and labels under both train_on settings. */
static void check_record(formats_ctx *x, const mt_conv_set *set, const char *file, int rec,
                         const cJSON *c) {
    char err[MT_ERR_LEN];
    jinja_heap_reset(x->heap);
    mt_chat_conv conv;
    const int parsed = mt_chat_conv_parse(x->heap, set->json[rec], set->json_len[rec], false, &conv,
                                          err, sizeof(err));
    EXPECT(parsed == 0, "%s[%d]: the record's conversation does not parse: %s", file, rec, err);
    if (parsed != 0) return;
    const int n = mt_chat_conv_len(&conv);
    /* the conversation, message by message */
    const cJSON *want_conv = cJSON_GetObjectItemCaseSensitive(c, "conversation");
    EXPECT(cJSON_GetArraySize(want_conv) == n, "%s[%d]: %d messages, HF has %d", file, rec, n,
           cJSON_GetArraySize(want_conv));
    jinja_buf text = {0};
    for (int i = 0; i < n && i < cJSON_GetArraySize(want_conv); i++) {
        const cJSON *m = cJSON_GetArrayItem(want_conv, i);
        const char *role = cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring;
        const char *want = cJSON_GetObjectItemCaseSensitive(m, "text")->valuestring;
        const bool ok = content_text(conv.messages.u.list->items[i], &text);
        EXPECT(ok && !strcmp(role, mt_chat_conv_role(&conv, i)) && text.len == strlen(want) &&
                   !memcmp(text.p, want, text.len),
               "%s[%d] message %d: %s \"%s\", HF %s \"%s\"", file, rec, i,
               mt_chat_conv_role(&conv, i), ok ? text.p : "(no text)", role, want);
        x->n_sys += !strcmp(mt_chat_conv_role(&conv, i), "system");
    }
    jinja_buf_free(&text);
    x->n_multi += n > 3;
    const cJSON *forms = cJSON_GetObjectItemCaseSensitive(c, "content"), *f;
    cJSON_ArrayForEach(f, forms) x->n_parts += !strcmp(f->valuestring, "parts");
    /* the rendering by the engine, with the template of the test tokenizer */
    const char *want = cJSON_GetObjectItemCaseSensitive(c, "rendered")->valuestring;
    mt_chat_rendered r = {0};
    const int rc_r = mt_chat_render_conv(x->tmpl, x->heap, &conv, -1, false, &r, err, sizeof(err));
    EXPECT(rc_r == 0 && r.len == strlen(want) && !memcmp(r.text, want, r.len),
           "%s[%d]: rendering differs from apply_chat_template (%s)", file, rec,
           rc_r ? err : "rendered");
    mt_chat_rendered_free(&r);
    /* ids and labels under both train_on settings */
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
        mt_sample_builder_init(&sb, x->tok, x->tmpl, &o);
        const int k = mt_sample_conv_open(&sb, set->json[rec], set->json_len[rec], err);
        const int rc = k == 1 ? mt_sample_build_piece(&sb, 0, err) : MT_SAMPLE_ERROR;
        EXPECT(k == 1 && rc == MT_SAMPLE_OK && sb.n == nt,
               "%s[%d]: %d samples, rc %d, %lld tokens, HF %lld (%s)", file, rec, k, rc,
               (long long)sb.n, (long long)nt, rc == MT_SAMPLE_OK ? "" : err);
        const int64_t n_lab = expected_labels(ids, mask, nt, x->eos, last, lab);
        int id_miss = 0, lab_miss = 0;
        for (int64_t i = 0; rc == MT_SAMPLE_OK && i < nt && i < sb.n; i++) {
            id_miss += sb.ids[i] != jint(ids, i);
            lab_miss += sb.lab[i] != lab[i];
        }
        EXPECT(rc == MT_SAMPLE_OK && id_miss == 0 && lab_miss == 0 && sb.n_targets == n_lab,
               "%s[%d] %s: %d ids and %d labels differ from HF's ids and mask (+ closing "
               "eos), %lld targets, want %lld",
               file, rec, last ? "last_assistant" : "all_assistant", id_miss, lab_miss,
               (long long)sb.n_targets, (long long)n_lab);
        mt_sample_builder_free(&sb);
    }
    free(lab);
}

/* The test tokenizer's template (the released Text-01 template in its tokenizer_config.json),
 * which the engine replaces by the extension the fixtures were rendered with. */
static mt_chat_template *open_test_template(const cJSON *root) {
    char err[MT_ERR_LEN];
    mt_chat_template *t = mt_chat_template_open(
        &(mt_chat_source){.dir = tokenizer_dir(), .file = NULL, .kwargs_json = NULL}, err,
        sizeof(err));
    MT_CHECK(t, "the test tokenizer's chat template: %s", err);
    const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(root, "template");
    char *a = mt_chat_template_normalize(tmpl->valuestring);
    char *b = mt_chat_template_normalize(mt_chat_template_minimax_ext());
    char *c = mt_chat_template_normalize(mt_chat_template_text(t));
    EXPECT(!strcmp(a, b), "expected.json was made with another template than data/chat_template.c");
    EXPECT(!strcmp(c, b), "the test tokenizer's template is not replaced by the extension");
    free(a);
    free(b);
    free(c);
    return t;
}

static int test_data_formats(void) {
    char path[4200], err[MT_ERR_LEN];
    cJSON *root = read_json_fixture("tests/fixtures/formats/expected.json");
    if (!root) return MT_TEST_OK;
    snprintf(path, sizeof(path), "%s/tokenizer.json", tokenizer_dir());
    mt_tokenizer *tok = mt_tokenizer_load(path);
    formats_ctx x = {.tok = tok,
                     .tmpl = open_test_template(root),
                     .heap = jinja_heap_new(0),
                     .eos = mt_tokenizer_token_to_id(tok, "<end_of_sentence>")};
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    mt_conv_set set = {0};
    char loaded[64] = "";
    int n_cases = 0, seen_format[MT_FORMAT_COUNT] = {0};
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
        check_record(&x, &set, file, rec, c);
        n_cases++;
    }
    for (int f = MT_FORMAT_GSM8K; f < MT_FORMAT_COUNT; f++)
        EXPECT(seen_format[f] == 1, "no fixture file of format %s",
               mt_data_format_name((mt_data_format)f));
    EXPECT(x.n_parts >= 2 && x.n_multi >= 3 && x.n_sys >= 4,
           "fixtures too thin: %d with part lists, %d multi-turn, %d system messages", x.n_parts,
           x.n_multi, x.n_sys);
    printf("formats: %d records of 4 formats equal to transformers (rendering, ids, labels; %d "
           "multi-turn, %d with part lists, %d system messages)\n",
           n_cases, x.n_multi, x.n_parts, x.n_sys);
    mt_conv_set_free(&set);
    jinja_heap_free(x.heap);
    mt_chat_template_free(x.tmpl);
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

/* What an export of the test tokenizer's template writes: one file, its tokenizer_config.json
 * with the released Text-01 template replaced by the extension (every other key as it was),
 * which opens to the same template (hash) as the original directory. */
static void check_export(const char *dir) {
    char err[MT_ERR_LEN], path[4200];
    mt_chat_template *t = mt_chat_template_open(
        &(mt_chat_source){.dir = tokenizer_dir(), .file = NULL, .kwargs_json = NULL}, err,
        sizeof(err));
    MT_CHECK(t, "%s", err);
    mt_chat_file files[MT_CHAT_EXPORT_MAX];
    const int n = mt_chat_template_export(t, files, err, sizeof(err));
    EXPECT(n == 1 && !strcmp(files[0].name, "tokenizer_config.json"),
           "export: %d files (%s), want tokenizer_config.json alone", n,
           n > 0 ? files[0].name : err);
    if (n != 1) {
        if (n > 0) mt_chat_files_free(files, n);
        mt_chat_template_free(t);
        return;
    }
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", tokenizer_dir());
    size_t len;
    char *orig_text = mt_file_read(path, &len, err);
    MT_CHECK(orig_text, "%s", err);
    cJSON *orig = cJSON_ParseWithLength(orig_text, len);
    free(orig_text);
    cJSON *exp = cJSON_ParseWithLength(files[0].text, files[0].len);
    const cJSON *ot = cJSON_GetObjectItemCaseSensitive(orig, "chat_template");
    const cJSON *et = cJSON_GetObjectItemCaseSensitive(exp, "chat_template");
    MT_CHECK(cJSON_IsString(ot), "the test tokenizer's config has no chat_template string");
    char *released = mt_chat_template_normalize(mt_chat_template_minimax());
    char *ext = mt_chat_template_normalize(mt_chat_template_minimax_ext());
    char *o_norm = mt_chat_template_normalize(ot->valuestring);
    char *e_norm = cJSON_IsString(et) ? mt_chat_template_normalize(et->valuestring) : NULL;
    EXPECT(!strcmp(o_norm, released), "the test tokenizer's template is not the released one");
    EXPECT(e_norm && !strcmp(e_norm, ext), "the export does not write the extended template");
    cJSON_DeleteItemFromObjectCaseSensitive(orig, "chat_template");
    cJSON_DeleteItemFromObjectCaseSensitive(exp, "chat_template");
    EXPECT(exp && cJSON_Compare(orig, exp, true), "the export changed other keys of the config");
    /* the exported directory: the same template */
    snprintf(path, sizeof(path), "%s/export", dir);
    MT_CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
    char cfg[4300];
    snprintf(cfg, sizeof(cfg), "%s/tokenizer_config.json", path);
    write_bytes(cfg, files[0].text, files[0].len);
    mt_chat_template *u = mt_chat_template_open(
        &(mt_chat_source){.dir = path, .file = NULL, .kwargs_json = NULL}, err, sizeof(err));
    EXPECT(u && mt_chat_template_hash(u) == mt_chat_template_hash(t),
           "the exported directory opens to another template (%s)", u ? "hash" : err);
    mt_chat_template_free(u);
    free(released);
    free(ext);
    free(o_norm);
    free(e_norm);
    cJSON_Delete(orig);
    cJSON_Delete(exp);
    mt_chat_files_free(files, n);
    mt_chat_template_free(t);
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
    /* a tool call whose arguments string is not a JSON object */
    expect_bad(dir, "c2.jsonl",
               "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}, {\"role\": "
               "\"assistant\", \"tool_calls\": [{\"type\": \"function\", \"function\": "
               "{\"name\": \"f\", \"arguments\": \"{x\"}}]}]}\n",
               A, 1,
               "messages[1].tool_calls[0].function.arguments is a string but not a JSON object");
    /* an unknown role (tool, function, developer and root are OpenAI's) */
    expect_bad(dir, "c.jsonl", "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}\n", A,
               1, "messages[0] has role \"robot\"");
    expect_bad(dir, "d.jsonl",
               "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
               "\"a\"}, {\"type\": \"text\"}]}, {\"role\": \"assistant\", \"content\": \"c\"}]}\n",
               A, 1, "messages[0].content[1] is not a {\"type\": \"text\", \"text\": ...} part");
    expect_bad(dir, "e.jsonl",
               "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}, {\"role\": "
               "\"assistant\", \"content\": [{\"type\": \"image\", \"url\": \"x\"}]}]}\n",
               A, 1, "messages[1].content[0] is a \"image\" part: only text parts are supported");
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
               "\"gpt\", \"value\": \"a\"}]},\n\n{\"conversations\": [{\"from\": \"robot\", "
               "\"value\": \"q\"}]}\n]\n",
               A, 4, "conversations[0] is from \"robot\"");
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
    /* OpenAI's tool calls and tool messages are read */
    snprintf(path, sizeof(path), "%s/tools.jsonl", dir);
    write_text(path, "{\"messages\": [{\"role\": \"developer\", \"content\": \"d\"}, {\"role\": "
                     "\"user\", \"content\": \"u\"}, {\"role\": \"assistant\", \"content\": null, "
                     "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                     "\"arguments\": \"{\\\"x\\\": 1}\"}}]}, {\"role\": \"tool\", \"content\": "
                     "\"2\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}\n");
    mt_conv_set s;
    EXPECT(mt_conv_read(path, A, false, &s, err) == 0 && s.n == 1 && s.format == MT_FORMAT_MESSAGES,
           "a conversation with tool calls: %s", err);
    mt_conv_set_free(&s);
    /* skip_bad in a JSON array: the bad element counted, the rest read */
    snprintf(path, sizeof(path), "%s/ok.json", dir);
    write_text(path, "[{\"question\": \"q\", \"answer\": \"a\"}, {\"question\": \"\", \"answer\": "
                     "\"a\"},\n {\"question\": \"q2\", \"answer\": \"a2\"}]");
    EXPECT(mt_conv_read(path, A, true, &s, err) == 0 && s.n == 2 && s.n_skipped == 1 &&
               s.line[1] == 2 && has(s.first_skip, "empty question"),
           "skip_bad in an array: %s", err);
    mt_conv_set_free(&s);
    check_export(dir);
    /* formats by name; an unknown one is -1 */
    EXPECT(mt_data_format_parse("sharegpt") == MT_FORMAT_SHAREGPT &&
               mt_data_format_parse("chatml") == -1,
           "format names");
    rm_tree(dir);
    return MT_TEST_OK;
}

/* The key of cfg, its template opened from cfg (mt_token_cache_open's way). */
static int cache_key(const mt_token_cache_cfg *cfg, mt_cache_key *key, char *err) {
    mt_chat_template *t = mt_token_cache_template(cfg, err);
    if (!t) return -1;
    const int rc = mt_token_cache_key(cfg, t, key, err);
    mt_chat_template_free(t);
    return rc;
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
    EXPECT(cache_key(&cfg, &k0, err) == 0, "%s", err);
    const double w2[3] = {1, 1, 1};
    mt_token_cache_cfg c2 = cfg;
    c2.weights = w2;
    EXPECT(cache_key(&c2, &k, err) == 0 && k.options_hash != k0.options_hash,
           "weights not in the key");
    c2 = cfg;
    c2.format = MT_FORMAT_GSM8K;
    EXPECT(cache_key(&c2, &k, err) == 0 && k.options_hash != k0.options_hash,
           "data.format not in the key");
    c2 = cfg;
    c2.sample.last_assistant_only = true;
    EXPECT(cache_key(&c2, &k, err) == 0 && k.options_hash != k0.options_hash,
           "data.train_on not in the key");
    c2 = cfg;
    c2.sample.history = MT_HISTORY_SPLIT;
    EXPECT(cache_key(&c2, &k, err) == 0 && k.options_hash != k0.options_hash &&
               k.template_hash == k0.template_hash,
           "data.reasoning_history not in the key");
    c2 = cfg;
    c2.template_kwargs = "{\"thinking_mode\": true}";
    EXPECT(cache_key(&c2, &k, err) == 0 && k.template_hash != k0.template_hash &&
               k.options_hash == k0.options_hash,
           "data.template_kwargs not in the key (%s)", err);
    c2.template_kwargs = "{\"thinking_mode\": false}";
    mt_cache_key k2;
    EXPECT(cache_key(&c2, &k2, err) == 0 && k2.template_hash != k.template_hash,
           "the value of a template kwarg not in the key");
    c2 = cfg;
    const char *swapped[3] = {p[1], p[0], p[2]};
    c2.data_paths = swapped;
    EXPECT(cache_key(&c2, &k, err) == 0 && k.data_hash != k0.data_hash,
           "the order of the files not in the key");
    c2.n_data_paths = 2;
    EXPECT(cache_key(&c2, &k, err) == 0 && k.data_hash != k0.data_hash,
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
