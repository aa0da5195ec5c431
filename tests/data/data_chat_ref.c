/* data_chat_ref.c: the training samples of MiniMax-M2 and MiniMax-M3 against transformers: the
 * released templates (../shared/templates) with the test tokenizers carrying their special
 * tokens (tests/fixtures/tokenizer_m2, _m3), over all of GSM8K (digests) and over multi-turn
 * conversations with reasoning, tool calls and "loss" keys in both reasoning_history modes (ids
 * and labels token by token). Fixtures: tools/make_chat_fixtures.py (its docstring states the
 * rule it applies to apply_chat_template's output). Skipped where ../shared is absent. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>

#include "data/chat.h"
#include "data/dataset.h"
#include "data/sample.h"
#include "tests/support/data_util.h"

/* ../shared/templates/NAME into out; false when absent. */
static bool shared_template(const char *name, char *out, size_t n) {
    const char *s = getenv("MT_SHARED_DIR");
    snprintf(out, n, "%s/templates/%s", s && *s ? s : "../shared", name);
    return file_exists(out);
}

/* FNV-1a 64 over whole 32-bit words (tools/make_chat_fixtures.py). */
static uint64_t fnv_words(const int32_t *v, int64_t n) {
    uint64_t h = MT_HASH64_INIT;
    for (int64_t i = 0; i < n; i++) h = (h ^ (uint32_t)v[i]) * 0x100000001B3ull;
    return h;
}

/* A builder for family `fam` ("m2", "m3") with kwargs (NULL: none). NULL when ../shared lacks
 * the template. */
static mt_chat_template *open_family(const char *fam, const char *kwargs, mt_tokenizer **tok) {
    char tmpl[4200], dir[4200], path[4300], err[MT_ERR_LEN];
    if (!shared_template(!strcmp(fam, "m2") ? "MiniMax-M2.jinja" : "MiniMax-M3.jinja", tmpl,
                         sizeof(tmpl)))
        return NULL;
    snprintf(dir, sizeof(dir), "%s/tests/fixtures/tokenizer_%s", source_dir(), fam);
    const mt_chat_source src = {.dir = dir, .file = tmpl, .kwargs_json = kwargs};
    mt_chat_template *t = mt_chat_template_open(&src, err, sizeof(err));
    EXPECT(t, "%s", err);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    *tok = mt_tokenizer_load(path);
    return t;
}

/* ---------------- data_chat_gsm8k_m2, data_chat_gsm8k_m3 ---------------- */

static int check_gsm8k(const char *fam) {
    const char *data = gsm8k_path();
    mt_tokenizer *tok = NULL;
    mt_chat_template *t = data ? open_family(fam, NULL, &tok) : NULL;
    if (!t) {
        printf("skipped: ../shared (GSM8K, the %s template) is absent\n", fam);
        return MT_TEST_SKIP;
    }
    char path[4200], err[MT_ERR_LEN];
    snprintf(path, sizeof(path), "%s/tests/fixtures/chat/gsm8k_%s_digest.txt", source_dir(), fam);
    size_t len;
    char *want = mt_file_read(path, &len, err);
    EXPECT(want, "%s", err);
    mt_conv_set set;
    EXPECT(mt_conv_read(data, MT_FORMAT_GSM8K, false, &set, err) == 0, "%s", err);
    mt_sample_opts o;
    mt_sample_opts_default(&o);
    o.max_length = 1 << 20;
    mt_sample_builder b;
    mt_sample_builder_init(&b, tok, t, &o);
    int64_t n_bad = 0, n_targets = 0;
    const char *line = want;
    for (int64_t i = 0; want && i < set.n; i++) {
        int rc = mt_sample_conv_open(&b, set.json[i], set.json_len[i], err) == 1
                     ? mt_sample_build_piece(&b, 0, err)
                     : -1;
        char got[160];
        snprintf(got, sizeof(got), "%lld %016llx %lld %016llx %016llx", (long long)b.n,
                 (unsigned long long)fnv_words(b.ids, b.n), (long long)b.n_targets,
                 (unsigned long long)fnv_words(b.lab, b.n),
                 (unsigned long long)mt_hash64(b.rendered.text, b.rendered.len, MT_HASH64_INIT));
        const char *nl = line ? strchr(line, '\n') : NULL;
        const bool same = rc == MT_SAMPLE_OK && nl && (size_t)(nl - line) == strlen(got) &&
                          !memcmp(line, got, strlen(got));
        if (!same && ++n_bad <= 3)
            printf("FAIL record %lld (line %lld): \"%s\", transformers \"%.*s\" %s\n", (long long)i,
                   (long long)set.line[i], got, nl ? (int)(nl - line) : 0, line ? line : "",
                   rc == MT_SAMPLE_OK ? "" : err);
        n_targets += b.n_targets;
        line = nl ? nl + 1 : NULL;
    }
    EXPECT(n_bad == 0 && line && !*line, "%s: %lld of %lld GSM8K samples differ from transformers",
           fam, (long long)n_bad, (long long)set.n);
    printf("gsm8k %s: %lld samples equal to transformers (text, ids, labels; %lld trained "
           "tokens)\n",
           fam, (long long)set.n, (long long)n_targets);
    mt_sample_builder_free(&b);
    mt_conv_set_free(&set);
    free(want);
    mt_chat_template_free(t);
    mt_tokenizer_free(tok);
    return MT_TEST_OK;
}

static int test_gsm8k_m2(void) { return check_gsm8k("m2"); }
static int test_gsm8k_m3(void) { return check_gsm8k("m3"); }

/* ---------------- data_chat_multiturn ---------------- */

/* The ids (or labels) of a fixture sample against ours: the number of positions that differ
 * (the length difference counts). */
static int64_t diff_ints(const cJSON *want, const int32_t *got, int64_t n) {
    const int64_t nw = cJSON_GetArraySize(want);
    int64_t d = nw > n ? nw - n : n - nw;
    for (int64_t i = 0; i < n && i < nw; i++)
        d += cJSON_GetArrayItem(want, (int)i)->valueint != got[i];
    return d;
}

/* One fixture item (a record under one config and mode) against the builder. */
static void check_item(mt_sample_builder *b, const mt_conv_set *set, const cJSON *item,
                       const char *where, int *n_samples) {
    char err[MT_ERR_LEN];
    const int rec = cJSON_GetObjectItemCaseSensitive(item, "record")->valueint;
    const cJSON *samples = cJSON_GetObjectItemCaseSensitive(item, "samples"), *s;
    EXPECT(rec >= 1 && rec <= set->n && set->line[rec - 1] == rec, "%s: no record %d", where, rec);
    if (rec < 1 || rec > set->n) return;
    const int k = mt_sample_conv_open(b, set->json[rec - 1], set->json_len[rec - 1], err);
    EXPECT(k == cJSON_GetArraySize(samples), "%s: %d samples, transformers %d %s", where, k,
           cJSON_GetArraySize(samples), k < 0 ? err : "");
    int p = 0;
    cJSON_ArrayForEach(s, samples) {
        if (p >= k) break;
        const int rc = mt_sample_build_piece(b, p, err);
        const char *text = cJSON_GetObjectItemCaseSensitive(s, "text")->valuestring;
        const bool same_text = rc == MT_SAMPLE_OK && b->rendered.len == strlen(text) &&
                               !memcmp(b->rendered.text, text, b->rendered.len);
        const int64_t d_ids =
            rc == MT_SAMPLE_OK ? diff_ints(cJSON_GetObjectItemCaseSensitive(s, "ids"), b->ids, b->n)
                               : -1;
        const int64_t d_lab =
            rc == MT_SAMPLE_OK
                ? diff_ints(cJSON_GetObjectItemCaseSensitive(s, "labels"), b->lab, b->n)
                : -1;
        EXPECT(same_text && d_ids == 0 && d_lab == 0,
               "%s sample %d: rc %d, text %s, %lld ids and %lld labels differ %s", where, p, rc,
               same_text ? "equal" : "differs", (long long)d_ids, (long long)d_lab,
               rc == MT_SAMPLE_ERROR ? err : "");
        (*n_samples)++;
        p++;
    }
}

static int test_multiturn(void) {
    char path[4200], err[MT_ERR_LEN], probe[4200];
    if (!shared_template("MiniMax-M2.jinja", probe, sizeof(probe))) {
        printf("skipped: ../shared/templates is absent\n");
        return MT_TEST_SKIP;
    }
    cJSON *root = read_json_fixture("tests/fixtures/chat/multiturn_expected.json");
    if (!root) return MT_TEST_OK;
    snprintf(path, sizeof(path), "%s/tests/fixtures/chat/multiturn.jsonl", source_dir());
    mt_conv_set set;
    EXPECT(mt_conv_read(path, MT_FORMAT_MESSAGES, false, &set, err) == 0, "%s", err);
    const cJSON *configs = cJSON_GetObjectItemCaseSensitive(root, "configs"), *cfg;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items"), *it;
    int n_items = 0, n_samples = 0, n_configs = 0;
    cJSON_ArrayForEach(cfg, configs) {
        const char *name = cJSON_GetObjectItemCaseSensitive(cfg, "name")->valuestring;
        const char *tmpl = cJSON_GetObjectItemCaseSensitive(cfg, "template")->valuestring;
        char *kw = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cfg, "template_kwargs"));
        mt_tokenizer *tok = NULL;
        mt_chat_template *t = open_family(!strcmp(tmpl, "MiniMax-M2.jinja") ? "m2" : "m3",
                                          strcmp(kw, "{}") ? kw : NULL, &tok);
        free(kw);
        if (!t) continue;
        for (int mode = 0; mode < 2; mode++) {
            mt_sample_opts o;
            mt_sample_opts_default(&o);
            o.max_length = 1 << 20;
            o.history = mode ? MT_HISTORY_SPLIT : MT_HISTORY_AS_TEMPLATE;
            mt_sample_builder b;
            mt_sample_builder_init(&b, tok, t, &o);
            cJSON_ArrayForEach(it, items) {
                const char *c = cJSON_GetObjectItemCaseSensitive(it, "config")->valuestring;
                const char *h =
                    cJSON_GetObjectItemCaseSensitive(it, "reasoning_history")->valuestring;
                if (strcmp(c, name) || strcmp(h, mode ? "split" : "as_template")) continue;
                char where[200];
                snprintf(where, sizeof(where), "%s %s record %d", name, h,
                         cJSON_GetObjectItemCaseSensitive(it, "record")->valueint);
                check_item(&b, &set, it, where, &n_samples);
                n_items++;
            }
            mt_sample_builder_free(&b);
        }
        mt_chat_template_free(t);
        mt_tokenizer_free(tok);
        n_configs++;
    }
    EXPECT(n_configs == 3 && n_items == cJSON_GetArraySize(items) && n_samples > 100,
           "%d configs, %d of %d items, %d samples checked", n_configs, n_items,
           cJSON_GetArraySize(items), n_samples);
    printf("multiturn: %d samples of %d records under %d template settings x 2 "
           "reasoning_history modes equal to transformers (text, ids, labels)\n",
           n_samples, (int)set.n, n_configs);
    mt_conv_set_free(&set);
    cJSON_Delete(root);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_chat_gsm8k_m2", test_gsm8k_m2},
    {"data_chat_gsm8k_m3", test_gsm8k_m3},
    {"data_chat_multiturn", test_multiturn},
};
MT_TEST_MAIN(cases)
