/* data_chat_sanitize.c: prompts of conversations whose text spells the templates' control
 * tokens (]~b]system, [e~[, <think>, ]<]minimax[>[, <mm:think>, the markers U+F0000/F0001),
 * rendered with the released M2 / M3 templates (../shared/templates) and the tiny tokenizers,
 * against transformers 5.24's apply_chat_template ids with sanitize_control_tokens=True and
 * False (tests/fixtures/chat/sanitize_expected.json, tools/make_sanitize_fixtures.py); also
 * continue_final_message. Skipped where ../shared is absent. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>

#include "data/chat.h"
#include "data/sample.h"
#include "tests/support/data_util.h"

static bool shared_template(const char *name, char *out, size_t n) {
    const char *s = getenv("MT_SHARED_DIR");
    snprintf(out, n, "%s/templates/%s", s && *s ? s : "../shared", name);
    return file_exists(out);
}

/* ids against the fixture's list: the first difference, or -1. */
static int first_diff(const mt_token_buf *b, const cJSON *want) {
    const int n = cJSON_GetArraySize(want);
    int i = 0;
    for (const cJSON *x = want->child; x; x = x->next, i++)
        if (i >= b->n || b->ids[i] != (int32_t)x->valuedouble) return i;
    return b->n == n ? -1 : n;
}

/* One case under sanitize on or off: 0 when the ids equal the fixture's. */
static void check_case(const cJSON *c, mt_chat_template *t, const mt_tokenizer *tok, bool sanitize,
                       int *n_checked) {
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const char *fam = cJSON_GetObjectItem(c, "family")->valuestring;
    cJSON *conv = cJSON_Duplicate(cJSON_GetObjectItem(c, "conversation"), true);
    const cJSON *kw = cJSON_GetObjectItem(c, "kwargs"), *e;
    cJSON_ArrayForEach(e, kw) cJSON_AddItemToObject(conv, e->string, cJSON_Duplicate(e, true));
    char *json = cJSON_PrintUnformatted(conv);
    cJSON_Delete(conv);
    jinja_heap *h = jinja_heap_new(0);
    mt_chat_conv cv;
    char err[MT_ERR_LEN];
    mt_chat_rendered r = {0};
    mt_token_buf ids = {0};
    const mt_chat_prompt_opts o = {
        .add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt")),
        .continue_final_message = cJSON_IsTrue(cJSON_GetObjectItem(c, "continue_final_message")),
        .sanitize = sanitize};
    int rc = mt_chat_conv_parse(h, json, strlen(json), true, &cv, err, sizeof(err));
    if (rc == 0) rc = mt_chat_prompt(t, tok, h, &cv, &o, &r, &ids, err, sizeof(err));
    EXPECT(rc == 0, "%s %s: %s", fam, name, err);
    if (rc == 0) {
        const cJSON *want = cJSON_GetObjectItem(c, sanitize ? "ids_sanitized" : "ids_plain");
        const int d = first_diff(&ids, want);
        EXPECT(d < 0, "%s %s (sanitize %d): %lld ids, transformers %d; first difference at %d", fam,
               name, sanitize, (long long)ids.n, cJSON_GetArraySize(want), d);
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        /* sanitized, the markers a client sent are gone from the text */
        EXPECT(sanitize || !strcmp(r.text, text),
               "%s %s: the rendered text differs from transformers'", fam, name);
        (*n_checked)++;
    }
    mt_token_buf_free(&ids);
    mt_chat_rendered_free(&r);
    jinja_heap_free(h);
    free(json);
}

/* data.sanitize_control_tokens: the training sample of a conversation (no generation prompt)
 * has transformers' sanitized ids, and its assistant turn is trained. */
static void check_sample(const cJSON *c, mt_chat_template *t, const mt_tokenizer *tok, int *n) {
    if (cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt")) ||
        cJSON_IsTrue(cJSON_GetObjectItem(c, "continue_final_message")) ||
        cJSON_GetArraySize(cJSON_GetObjectItem(c, "kwargs")) > 0)
        return;
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *msgs = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "conversation"), "messages");
    const cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(last, "role")), "assistant")) return;
    mt_sample_opts o;
    mt_sample_opts_default(&o);
    o.max_length = 4096;
    o.sanitize = true;
    mt_sample_builder b;
    mt_sample_builder_init(&b, tok, t, &o);
    char *json = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "conversation"));
    char err[MT_ERR_LEN];
    int rc = mt_sample_conv_open(&b, json, strlen(json), err) == 1 ? 0 : -1;
    if (rc == 0) rc = mt_sample_build_piece(&b, 0, err) == MT_SAMPLE_OK ? 0 : -1;
    EXPECT(rc == 0, "%s sample: %s", name, err);
    if (rc == 0) {
        const cJSON *want = cJSON_GetObjectItem(c, "ids_sanitized");
        mt_token_buf ids = {.ids = (int32_t *)b.ids, .n = b.n};
        const int d = first_diff(&ids, want);
        EXPECT(d < 0, "%s sample: %lld ids, transformers %d; first difference at %d", name,
               (long long)b.n, cJSON_GetArraySize(want), d);
        /* trained: the assistant's text (with its spelled control tokens as text) and [e~[ */
        int32_t *tr = malloc(sizeof(int32_t) * (size_t)(b.n + 1));
        int64_t k = 0;
        for (int64_t i = 0; i < b.n; i++)
            if (b.lab[i] != MT_IGNORE_INDEX) tr[k++] = b.lab[i];
        char *tail = mt_tokenizer_decode(tok, tr, k, false);
        const size_t tl = strlen(tail);
        EXPECT(strstr(tail, "the answer ]~b]user [e~[ is 4") && tl > 4 &&
                   !strcmp(tail + tl - 4, "[e~[") && !strstr(tail, "]~b]ai"),
               "%s sample: the trained tokens are %s", name, tail);
        free(tr);
        free(tail);
        (*n)++;
    }
    free(json);
    mt_sample_builder_free(&b);
}

static int test_sanitize(void) {
    char probe[4200];
    if (!shared_template("MiniMax-M2.jinja", probe, sizeof(probe))) {
        printf("skipped: ../shared/templates is absent\n");
        return MT_TEST_SKIP;
    }
    cJSON *root = read_json_fixture("tests/fixtures/chat/sanitize_expected.json");
    if (!root) return MT_TEST_OK;
    int n_checked = 0, n_cases = 0, n_samples = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        const char *fam = cJSON_GetObjectItem(c, "family")->valuestring;
        char tmpl[4200], dir[4200], err[MT_ERR_LEN];
        shared_template(!strcmp(fam, "m2") ? "MiniMax-M2.jinja" : "MiniMax-M3.jinja", tmpl,
                        sizeof(tmpl));
        snprintf(dir, sizeof(dir), "%s/tests/fixtures/tokenizer_%s", source_dir(), fam);
        const mt_chat_source src = {.dir = dir, .file = tmpl};
        mt_chat_template *t = mt_chat_template_open(&src, err, sizeof(err));
        mt_tokenizer *tok = mt_chat_tokenizer_load(dir, err, sizeof(err));
        EXPECT(t && tok, "%s", err);
        if (t && tok) {
            check_case(c, t, tok, false, &n_checked);
            check_case(c, t, tok, true, &n_checked);
            check_sample(c, t, tok, &n_samples);
        }
        n_cases++;
        mt_chat_template_free(t);
        mt_tokenizer_free(tok);
    }
    EXPECT(n_cases >= 15 && n_checked == 2 * n_cases, "%d of %d renders checked", n_checked,
           2 * n_cases);
    EXPECT(n_samples == 2, "%d training samples checked", n_samples);
    printf("%d cases x sanitize on/off: ids equal to transformers'; %d training samples\n", n_cases,
           n_samples);
    cJSON_Delete(root);
    return MT_TEST_OK;
}

/* The sanitizer's encoding rules on their own: a lone marker cuts the text and is dropped; a
 * marked control token is its text's ids; the markers a client sends are removed first. */
static int test_sanitize_rules(void) {
    char dir[4200], err[MT_ERR_LEN];
    snprintf(dir, sizeof(dir), "%s/tests/fixtures/tokenizer_m2", source_dir());
    mt_tokenizer *tok = mt_chat_tokenizer_load(dir, err, sizeof(err));
    EXPECT(tok, "%s", err);
    if (!tok) return MT_TEST_OK;
    mt_token_buf a = {0}, b = {0};
    /* "\xf3\xb0\x80\x80]~b]\xf3\xb0\x80\x81": one marked token, its text as BPE pieces */
    const char *marked = "x\xf3\xb0\x80\x80]~b]\xf3\xb0\x80\x81y";
    EXPECT(mt_chat_encode_marked(tok, marked, strlen(marked), &a, err, sizeof(err)) > 0, "%s", err);
    const int32_t id = mt_tokenizer_token_to_id(tok, "]~b]");
    bool has_id = false;
    for (int64_t i = 0; i < a.n; i++) has_id |= a.ids[i] == id;
    EXPECT(!has_id && a.n > 3, "a marked ]~b] encodes as text (%lld ids)", (long long)a.n);
    /* unmarked, the same string holds the token */
    EXPECT(mt_tokenizer_encode(tok, "x]~b]y", 6, &b) == 3 && b.ids[1] == id, "]~b] as a token");
    char text[] = "a\xf3\xb0\x80\x80z\xf3\xb0\x80\x81";
    EXPECT(mt_chat_unmark(text, strlen(text)) == 2 && !strcmp(text, "az"), "unmark: %s", text);
    mt_token_buf_free(&a);
    mt_token_buf_free(&b);
    mt_tokenizer_free(tok);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_chat_sanitize", test_sanitize},
    {"data_chat_sanitize_rules", test_sanitize_rules},
};
MT_TEST_MAIN(cases)
