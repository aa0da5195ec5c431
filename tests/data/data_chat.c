/* data_chat.c: where a chat template comes from (data/chat.h), what an export writes, the rule
 * of the trained bytes on small templates whose answers are known by construction, and
 * MiniMax-Text-01's template against transformers (tests/fixtures/template/chat_cases.json).
 * The released M2 / M3 templates against transformers: tests/data/data_chat_ref.c. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>

#include "data/chat.h"
#include "data/sample.h"
#include "tests/support/data_util.h"

/* A directory holding tokenizer_config.json = cfg_json (and the test tokenizer.json). */
static void make_dir(char *dir, size_t n, const char *cfg_json) {
    char path[4200];
    make_tmpdir(dir, n);
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    write_text(path, cfg_json);
}

static mt_chat_template *open_src(const char *dir, const char *file, const char *kwargs,
                                  char *err) {
    const mt_chat_source src = {.dir = dir, .file = file, .kwargs_json = kwargs};
    err[0] = 0;
    return mt_chat_template_open(&src, err, MT_ERR_LEN);
}

/* Renders conversation JSON with t; the text (malloc'ed) or NULL with err set. */
static char *render(mt_chat_template *t, const char *conv, bool agp, char *err) {
    jinja_heap *h = jinja_heap_new(0);
    mt_chat_conv c;
    mt_chat_rendered r = {0};
    char *out = NULL;
    if (mt_chat_conv_parse(h, conv, strlen(conv), true, &c, err, MT_ERR_LEN) == 0 &&
        mt_chat_render_conv(t, h, &c, -1, agp, &r, err, MT_ERR_LEN) == 0)
        out = strdup(r.text);
    mt_chat_rendered_free(&r);
    jinja_heap_free(h);
    return out;
}

/* Renders t on conv and expects `want`. */
static void expect_render(mt_chat_template *t, const char *conv, bool agp, const char *want,
                          const char *what) {
    char err[MT_ERR_LEN];
    char *got = t ? render(t, conv, agp, err) : NULL;
    EXPECT(got && !strcmp(got, want), "%s: rendered \"%s\", want \"%s\" (%s)", what,
           got ? got : "(error)", want, got ? "" : err);
    free(got);
}

static const char *const user_conv = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}";

/* ---------------- data_chat_sources ---------------- */

static void check_config_sources(void) {
    char dir[4096], path[4200], err[MT_ERR_LEN];
    /* a string template, the special tokens as variables */
    make_dir(
        dir, sizeof(dir),
        "{\"bos_token\": \"<s>\", \"eos_token\": {\"content\": \"</s>\", \"lstrip\": false},"
        " \"chat_template\": \"{{ bos_token }}Hi {{ messages[0].content }}{{ eos_token }}{% if "
        "add_generation_prompt %}!{% endif %}\"}");
    mt_chat_template *t = open_src(dir, NULL, NULL, err);
    EXPECT(t, "a string template: %s", err);
    expect_render(t, user_conv, true, "<s>Hi x</s>!", "config string");
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    EXPECT(t && !strcmp(mt_chat_template_origin(t), path) &&
               !strcmp(mt_chat_template_eot(t), "</s>"),
           "origin / eos_token");
    const uint64_t h0 = t ? mt_chat_template_hash(t) : 0;
    mt_chat_template_free(t);
    /* kwargs: template variables, part of the hash; what the pipeline sets is refused */
    t = open_src(dir, NULL, "{\"eos_token\": \"[E]\", \"mode\": 1}", err);
    expect_render(t, user_conv, false, "<s>Hi x[E]", "kwargs override a special token");
    EXPECT(t && mt_chat_template_hash(t) != h0, "kwargs not in the template hash");
    mt_chat_template_free(t);
    EXPECT(!open_src(dir, NULL, "[1]", err) && has(err, "data.template_kwargs"),
           "kwargs not an object: \"%s\"", err);
    EXPECT(!open_src(dir, NULL, "{\"messages\": []}", err) &&
               has(err, "data.template_kwargs.messages: set by the pipeline"),
           "reserved kwarg: \"%s\"", err);
    EXPECT(!open_src(dir, NULL, "{\"a\": ", err) && has(err, "data.template_kwargs"),
           "kwargs not JSON: \"%s\"", err);
    rm_tree(dir);

    /* the list form: tool_use for a conversation with tools (even empty), else default */
    make_dir(dir, sizeof(dir),
             "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T{{ tools | length "
             "}}\"}, {\"name\": \"default\", \"template\": \"D\"}]}");
    t = open_src(dir, NULL, NULL, err);
    expect_render(t, user_conv, false, "D", "list form, no tools");
    expect_render(t, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": []}",
                  false, "T0", "list form, tools []");
    mt_chat_template_free(t);
    rm_tree(dir);
    make_dir(dir, sizeof(dir),
             "{\"chat_template\": [{\"name\": \"a\", \"template\": \"A\"}, {\"name\": \"b\", "
             "\"template\": \"B\"}]}");
    t = open_src(dir, NULL, NULL, err);
    char *got = t ? render(t, user_conv, false, err) : NULL;
    EXPECT(t && !got && has(err, "none is named \"default\""), "no default: \"%s\"", err);
    free(got);
    mt_chat_template_free(t);
    rm_tree(dir);

    /* refusals: each one line naming the file */
    make_dir(dir, sizeof(dir), "{\"eos_token\": \"</s>\"}");
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    EXPECT(!open_src(dir, NULL, NULL, err) && has(err, path) && has(err, "data.chat_template"),
           "no template: \"%s\"", err);
    write_text(path, "{\"chat_template\": \"a\", \"chat_template\": \"b\"}");
    EXPECT(!open_src(dir, NULL, NULL, err) && has(err, path) &&
               has(err, "\"chat_template\" appears twice"),
           "a key twice: \"%s\"", err);
    write_text(path, "{\"chat_template\": ");
    EXPECT(!open_src(dir, NULL, NULL, err) && has(err, path), "bad JSON: \"%s\"", err);
    write_text(path, "{\"chat_template\": \"{% for m in messages %}{{ m }\"}");
    EXPECT(!open_src(dir, NULL, NULL, err) && has(err, path), "bad Jinja: \"%s\"", err);
    rm_tree(dir);
    EXPECT(!open_src(dir, NULL, NULL, err) && has(err, dir), "no directory: \"%s\"", err);
}

static void check_file_sources(void) {
    char dir[4096], path[4200], file[4200], err[MT_ERR_LEN];
    make_dir(dir, sizeof(dir), "{\"chat_template\": \"C\", \"eos_token\": \"</s>\"}");
    /* chat_template.jinja and additional_chat_templates/ replace the config's */
    snprintf(path, sizeof(path), "%s/chat_template.jinja", dir);
    write_text(path, "J{{ eos_token }}\n");
    snprintf(path, sizeof(path), "%s/additional_chat_templates", dir);
    MT_CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
    snprintf(path, sizeof(path), "%s/additional_chat_templates/tool_use.jinja", dir);
    write_text(path, "U");
    mt_chat_template *t = open_src(dir, NULL, NULL, err);
    expect_render(t, user_conv, false, "J</s>",
                  "chat_template.jinja (one trailing newline dropped)");
    expect_render(t,
                  "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": "
                  "[{\"type\": \"function\"}]}",
                  false, "U", "additional_chat_templates/tool_use.jinja");
    mt_chat_file files[MT_CHAT_EXPORT_MAX];
    int n = t ? mt_chat_template_export(t, files, err, sizeof(err)) : -1;
    EXPECT(n == 3 && !strcmp(files[0].name, "tokenizer_config.json") &&
               !strcmp(files[1].name, "chat_template.jinja") &&
               !strcmp(files[1].text, "J{{ eos_token }}\n") &&
               !strcmp(files[2].name, "additional_chat_templates/tool_use.jinja"),
           "export of a directory with template files: %d files", n);
    if (n > 0) mt_chat_files_free(files, n);
    mt_chat_template_free(t);
    /* data.chat_template: a file over everything in the directory; exported as
     * chat_template.jinja, byte for byte, beside the directory's config as it is */
    snprintf(file, sizeof(file), "%s/mine.jinja", dir);
    const char *text = "F{{ messages | length }}{% if add_generation_prompt %}+{% endif %}\n\n";
    write_text(file, text);
    t = open_src(dir, file, NULL, err);
    /* trim_blocks takes the newline after a tag, then one trailing newline goes (jinja2) */
    expect_render(t, user_conv, true, "F1+", "data.chat_template");
    EXPECT(t && !strcmp(mt_chat_template_origin(t), file), "origin of a file");
    n = t ? mt_chat_template_export(t, files, err, sizeof(err)) : -1;
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    size_t len;
    char *cfg = mt_file_read(path, &len, err);
    EXPECT(n == 2 && cfg && files[0].len == len && !memcmp(files[0].text, cfg, len) &&
               !strcmp(files[1].name, "chat_template.jinja") && !strcmp(files[1].text, text),
           "export of data.chat_template: %d files", n);
    free(cfg);
    if (n > 0) mt_chat_files_free(files, n);
    mt_chat_template_free(t);
    write_text(file, "{% if %}");
    EXPECT(!open_src(dir, file, NULL, err) && has(err, file), "bad file: \"%s\"", err);
    snprintf(file, sizeof(file), "%s/absent.jinja", dir);
    EXPECT(!open_src(dir, file, NULL, err) && has(err, file), "missing file: \"%s\"", err);
    rm_tree(dir);
}

/* Text-01's released template (and a whitespace variant of it) runs as its extension; the
 * export writes the extension into tokenizer_config.json. */
static void check_text01_sources(void) {
    char dir[4096], path[4200], err[MT_ERR_LEN];
    make_tmpdir(dir, sizeof(dir));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "eos_token", "<end_of_sentence>");
    cJSON_AddStringToObject(o, "chat_template", mt_chat_template_minimax());
    char *js = cJSON_Print(o);
    cJSON_Delete(o);
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    write_text(path, js);
    free(js);
    mt_chat_template *t = open_src(dir, NULL, NULL, err);
    EXPECT(t && !strcmp(mt_chat_template_text(t), mt_chat_template_minimax_ext()),
           "Text-01's template not replaced by its extension: %s", err);
    /* a string content renders (the released template fails on it in transformers) */
    expect_render(t, user_conv, true,
                  "<beginning_of_sentence>user name=user\nx<end_of_sentence>\n"
                  "<beginning_of_sentence>ai name=assistant\n",
                  "Text-01, string content");
    mt_chat_file files[MT_CHAT_EXPORT_MAX];
    int n = t ? mt_chat_template_export(t, files, err, sizeof(err)) : -1;
    cJSON *cfg = n == 1 ? cJSON_Parse(files[0].text) : NULL;
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    EXPECT(cJSON_IsString(ct) && !strcmp(ct->valuestring, mt_chat_template_minimax_ext()) &&
               cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cfg, "eos_token")),
           "the export's tokenizer_config.json: %d files", n);
    cJSON_Delete(cfg);
    if (n > 0) mt_chat_files_free(files, n);
    mt_chat_template_free(t);
    /* whitespace inside tags and a raw newline in a literal are the same template */
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "eos_token", "<end_of_sentence>");
    mt_strbuf b = {0};
    for (const char *p = mt_chat_template_minimax(); *p; p++)
        mt_strbuf_append(&b, !strncmp(p, " %}", 3) ? "  " : p, 1);
    cJSON_AddStringToObject(o, "chat_template", b.p);
    mt_strbuf_free(&b);
    js = cJSON_Print(o);
    cJSON_Delete(o);
    write_text(path, js);
    free(js);
    t = open_src(dir, NULL, NULL, err);
    EXPECT(t && !strcmp(mt_chat_template_text(t), mt_chat_template_minimax_ext()),
           "a whitespace variant of Text-01's template not recognised: %s", err);
    mt_chat_template_free(t);
    rm_tree(dir);
}

static int test_sources(void) {
    check_config_sources();
    check_file_sources();
    check_text01_sources();
    return MT_TEST_OK;
}

/* ---------------- data_chat_rule ---------------- */

/* ChatML without generation marks: the trained bytes by the header rule of data/chat.h. */
#define CHATML                                                                                     \
    "{% for m in messages %}<|im_start|>{{ m.role }}\\n{{ m.content }}<|im_end|>\\n{% endfor "     \
    "%}{% if add_generation_prompt %}<|im_start|>assistant\\n{{ gp_tail }}{% endif %}"

/* The text of r's trained byte ranges joined by '|' (malloc'ed). */
static char *spans_text(const mt_chat_rendered *r) {
    mt_strbuf b = {0};
    mt_strbuf_append(&b, "", 0);
    for (int s = 0; s < r->n_spans; s++) {
        if (s) mt_strbuf_append(&b, "|", 1);
        mt_strbuf_append(&b, r->text + r->spans[2 * s],
                         (size_t)(r->spans[2 * s + 1] - r->spans[2 * s]));
    }
    return b.p;
}

/* Trained byte ranges of conv (every assistant message, less "loss": false) as text pieces
 * joined by '|', or NULL with err. */
static char *trained(mt_chat_template *t, const char *conv, char *err) {
    jinja_heap *h = jinja_heap_new(0);
    mt_chat_conv c;
    mt_chat_rendered r = {0};
    char *out = NULL;
    if (mt_chat_conv_parse(h, conv, strlen(conv), true, &c, err, MT_ERR_LEN) == 0) {
        bool train[32] = {0};
        for (int i = 0; i < mt_chat_conv_len(&c) && i < 32; i++)
            train[i] = !strcmp(mt_chat_conv_role(&c, i), "assistant") && c.loss[i] != 0;
        if (mt_chat_render_trained(t, h, &c, -1, train, &r, err, MT_ERR_LEN) == 0)
            out = spans_text(&r);
    }
    mt_chat_rendered_free(&r);
    jinja_heap_free(h);
    return out;
}

static void expect_trained(mt_chat_template *t, const char *conv, const char *want,
                           const char *what) {
    char err[MT_ERR_LEN];
    char *got = t ? trained(t, conv, err) : NULL;
    EXPECT(got && !strcmp(got, want), "%s: trained \"%s\", want \"%s\" %s", what,
           got ? got : "(error)", want, got ? "" : err);
    free(got);
}

/* The template of tokenizer_config.json cfg_json refuses to tell the trained bytes of conv,
 * saying `why`. */
static void expect_untrainable(const char *cfg_json, const char *conv, const char *why,
                               const char *what) {
    char dir[4096], err[MT_ERR_LEN];
    make_dir(dir, sizeof(dir), cfg_json);
    mt_chat_template *t = open_src(dir, NULL, NULL, err);
    char *got = t ? trained(t, conv, err) : NULL;
    EXPECT(t && !got && has(err, why), "%s: want an error with \"%s\", got \"%s\"", what, why,
           got ? got : err);
    free(got);
    mt_chat_template_free(t);
    rm_tree(dir);
}

static const char *const two_turns =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"q1\"}, {\"role\": \"assistant\", "
    "\"content\": \"a1\"}, {\"role\": \"user\", \"content\": \"q2\"}, {\"role\": \"assistant\", "
    "\"content\": \"<b\", \"loss\": true}]}";

static int test_rule(void) {
    char dir[4096], err[MT_ERR_LEN];
    make_dir(dir, sizeof(dir),
             "{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"" CHATML "\"}");
    /* the header is the whole generation prompt: the reply and its end-of-turn are trained */
    mt_chat_template *t = open_src(dir, NULL, NULL, err);
    expect_trained(t, two_turns, "a1<|im_end|>|<b<|im_end|>", "ChatML");
    const char *no_loss = "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": "
                          "\"assistant\", \"content\": \"a\", \"loss\": false}, {\"role\": "
                          "\"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": "
                          "\"b\"}]}";
    expect_trained(t, no_loss, "b<|im_end|>", "\"loss\": false");
    mt_chat_template_free(t);
    /* a prompt that goes on past the role line ("<think>" after it): a reply that starts like
     * it keeps its first character, the role line alone is the header */
    t = open_src(dir, NULL, "{\"gp_tail\": \"<think>\\n\"}", err);
    expect_trained(t, two_turns, "a1<|im_end|>|<b<|im_end|>", "partial prompt");
    mt_chat_template_free(t);
    /* the whole prompt when the turn has it */
    t = open_src(dir, NULL, "{\"gp_tail\": \"<b\"}", err);
    expect_trained(t, two_turns, "a1<|im_end|>|<|im_end|>", "whole prompt");
    mt_chat_template_free(t);
    rm_tree(dir);

    /* what cannot be told is refused, naming the message */
    expect_untrainable("{\"chat_template\": \"" CHATML "\"}", two_turns, "no eos_token",
                       "no end-of-turn token");
    expect_untrainable(
        "{\"eos_token\": \"E\", \"chat_template\": \"{% for m in messages %}{{ "
        "m.content }}E{% endfor %}{% for m in messages %}{{ m.role }}{% endfor %}\"}",
        two_turns, "assistant message 1 is rendered in pieces", "two loops");
    expect_untrainable(
        "{\"eos_token\": \"E\", \"chat_template\": \"{% for m in messages %}{{ "
        "m.content }}E{% endfor %}{% if not add_generation_prompt %}END{% endif %}\"}",
        two_turns, "does not start with the one without", "prompt not a suffix");
    expect_untrainable("{\"eos_token\": \"E\", \"chat_template\": \"{% for m in messages %}{% if "
                       "m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}\"}",
                       two_turns, "renders nothing inside", "assistant not rendered");
    expect_untrainable("{\"eos_token\": \"E\", \"chat_template\": \"{% for m in messages %}[{{ "
                       "m.content }}]{% endfor %}\"}",
                       two_turns, "no end-of-turn token (eos_token \"E\")", "no eos in turn");

    /* {% generation %} marks: the marked text and the eos right after it */
    make_dir(dir, sizeof(dir),
             "{\"eos_token\": \"E\", \"chat_template\": \"{% for m in messages %}{{ m.role }}:{% "
             "if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else "
             "%}{{ m.content }}{% endif %}E{% endfor %}\"}");
    t = open_src(dir, NULL, NULL, err);
    expect_trained(t, two_turns, "a1E|<bE", "generation marks");
    mt_chat_template_free(t);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* ---------------- data_chat_samples ---------------- */

/* Sample k of conv under opts: its trained text pieces joined by '|'. */
static char *sample_trained(mt_sample_builder *b, const char *conv, int k, int *n_samples) {
    char err[MT_ERR_LEN];
    *n_samples = mt_sample_conv_open(b, conv, strlen(conv), err);
    if (*n_samples <= k) return NULL;
    if (mt_sample_build_piece(b, k, err) != MT_SAMPLE_OK) return NULL;
    return spans_text(&b->rendered);
}

static void expect_sample(mt_sample_builder *b, const char *conv, int k, int n_want,
                          const char *want, const char *what) {
    int n = -1;
    char *got = sample_trained(b, conv, k, &n);
    EXPECT(n == n_want && (want ? got && !strcmp(got, want) : !got),
           "%s: %d samples (want %d), sample %d trains \"%s\", want \"%s\"", what, n, n_want, k,
           got ? got : "-", want ? want : "-");
    free(got);
}

static int test_samples(void) {
    char dir[4096], path[4200], err[MT_ERR_LEN];
    make_dir(dir, sizeof(dir),
             "{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"" CHATML "\"}");
    snprintf(path, sizeof(path), "%s/tokenizer.json", tokenizer_dir());
    mt_tokenizer *tok = mt_tokenizer_load(path);
    mt_chat_template *t = open_src(dir, NULL, NULL, err);
    EXPECT(t, "%s", err);
    if (!t) return MT_TEST_OK;
    const char *conv =
        "{\"messages\": [{\"role\": \"assistant\", \"content\": \"a0\"}, {\"role\": \"user\", "
        "\"content\": \"q1\"}, {\"role\": \"assistant\", \"content\": \"a1\"}, {\"role\": "
        "\"assistant\", \"content\": \"a2\"}, {\"role\": \"user\", \"content\": \"q2\"}, "
        "{\"role\": \"assistant\", \"content\": \"a3\", \"loss\": false}, {\"role\": \"user\", "
        "\"content\": \"q3\"}, {\"role\": \"assistant\", \"content\": \"a4\"}]}";
    mt_sample_opts o;
    mt_sample_opts_default(&o);
    mt_sample_builder b;
    mt_sample_builder_init(&b, tok, t, &o);
    expect_sample(&b, conv, 0, 1, "a0<|im_end|>|a1<|im_end|>|a2<|im_end|>|a4<|im_end|>",
                  "as_template");
    mt_sample_builder_free(&b);
    o.last_assistant_only = true;
    mt_sample_builder_init(&b, tok, t, &o);
    expect_sample(&b, conv, 0, 1, "a4<|im_end|>", "as_template, last_assistant");
    mt_sample_builder_free(&b);
    /* split: one sample per user message whose assistant messages are trained: q2's only one
     * is "loss": false, the greeting before q1 is context only */
    o.last_assistant_only = false;
    o.history = MT_HISTORY_SPLIT;
    mt_sample_builder_init(&b, tok, t, &o);
    expect_sample(&b, conv, 0, 2, "a1<|im_end|>|a2<|im_end|>", "split, sample 0");
    expect_sample(&b, conv, 1, 2, "a4<|im_end|>", "split, sample 1");
    EXPECT(b.rendered.len > 0 && has(b.rendered.text, "q3") && has(b.rendered.text, "a3"),
           "split: the last sample lacks its history: %s", b.rendered.text);
    mt_sample_builder_free(&b);
    o.last_assistant_only = true;
    mt_sample_builder_init(&b, tok, t, &o);
    expect_sample(&b, conv, 0, 2, "a2<|im_end|>", "split, last_assistant");
    mt_sample_builder_free(&b);
    /* the recipe's system text goes first unless the conversation has one */
    mt_sample_opts_default(&o);
    o.system = "S";
    mt_sample_builder_init(&b, tok, t, &o);
    expect_sample(&b,
                  "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": "
                  "\"assistant\", \"content\": \"a\"}]}",
                  0, 1, "a<|im_end|>", "system text");
    EXPECT(!strncmp(b.rendered.text, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user", 47),
           "system text not first: %s", b.rendered.text);
    expect_sample(&b,
                  "{\"messages\": [{\"role\": \"system\", \"content\": \"own\"}, {\"role\": "
                  "\"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": "
                  "\"a\"}]}",
                  0, 1, "a<|im_end|>", "own system message");
    EXPECT(!has(b.rendered.text, "system\nS<"), "the recipe's system text beside the record's");
    /* the labels are the tokens of the trained bytes */
    EXPECT(b.n_targets > 0 && b.lab[b.n - 1] == MT_IGNORE_INDEX, "the final newline is trained");
    mt_sample_builder_free(&b);
    /* a conversation the pipeline refuses, naming the field */
    mt_sample_opts_default(&o);
    mt_sample_builder_init(&b, tok, t, &o);
    const char *bad = "{\"messages\": [{\"role\": \"user\", \"content\": \"q\", \"loss\": true}]}";
    EXPECT(mt_sample_conv_open(&b, bad, strlen(bad), err) < 0 &&
               has(err, "messages[0].loss: only assistant messages are trained"),
           "loss on a user message: \"%s\"", err);
    bad = "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
          "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"[1]\"}}]}]}";
    EXPECT(mt_sample_conv_open(&b, bad, strlen(bad), err) < 0 &&
               has(err, "messages[0].tool_calls[0].function.arguments is a string but not a JSON "
                        "object"),
           "arguments not an object: \"%s\"", err);
    mt_sample_builder_free(&b);
    mt_chat_template_free(t);
    /* a part list the template renders only the first part of (Text-01 for user messages):
     * refused, never trained without the rest */
    t = open_src(tokenizer_dir(), NULL, NULL, err);
    mt_sample_builder_init(&b, tok, t, &o);
    bad = "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
          "\"first\"}, {\"type\": \"text\", \"text\": \" SECOND\"}]}, {\"role\": \"assistant\", "
          "\"content\": \"a\"}]}";
    int rc = mt_sample_conv_open(&b, bad, strlen(bad), err) == 1 ? mt_sample_build_piece(&b, 0, err)
                                                                 : -2;
    EXPECT(rc == MT_SAMPLE_ERROR && has(err, "messages[0].content[1]: its text is not in"),
           "a part dropped by the template: rc %d \"%s\"", rc, err);
    mt_sample_builder_free(&b);
    mt_chat_template_free(t);
    mt_tokenizer_free(tok);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* ---------------- data_chat_text01 ---------------- */

static mt_chat_role role_of(const char *s) {
    return !strcmp(s, "system") ? MT_CHAT_SYSTEM
           : !strcmp(s, "user") ? MT_CHAT_USER
                                : MT_CHAT_ASSISTANT;
}

/* One case of chat_cases.json: rendering, HF's assistant mask from the rendering's spans, and
 * the labels of the samples (mask + the closing <end_of_sentence>). Returns whether it had
 * labels checked. */
static bool check_text01_case(mt_chat_template *t, const mt_tokenizer *tok, const cJSON *c) {
    const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(c, "messages"), *m;
    mt_chat_msg ms[16];
    int n = 0;
    cJSON_ArrayForEach(m, msgs) {
        MT_CHECK(n < 16, "fixture %s: too many messages", name);
        const char *text = cJSON_GetObjectItemCaseSensitive(m, "text")->valuestring;
        /* every field set: the ones the fixture has not (reasoning) are none */
        ms[n++] =
            (mt_chat_msg){.role = role_of(cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring),
                          .text = text,
                          .len = strlen(text)};
    }
    const bool agp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt"));
    const char *want = cJSON_GetObjectItemCaseSensitive(c, "rendered")->valuestring;
    char err[MT_ERR_LEN];
    jinja_heap *h = jinja_heap_new(0);
    mt_chat_conv conv;
    mt_chat_conv_from_msgs(h, ms, n, &conv);
    mt_chat_rendered r = {0};
    bool train[16];
    for (int i = 0; i < n; i++) train[i] = ms[i].role == MT_CHAT_ASSISTANT;
    int rc = agp ? mt_chat_render_conv(t, h, &conv, -1, true, &r, err, sizeof(err))
                 : mt_chat_render_trained(t, h, &conv, -1, train, &r, err, sizeof(err));
    EXPECT(rc == 0 && r.len == strlen(want) && !memcmp(r.text, want, r.len),
           "%s: rendering differs from apply_chat_template %s", name, rc ? err : "");
    /* HF's mask is the {% generation %} text; the spans here add the eos after it */
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "input_ids");
    const cJSON *hoff = cJSON_GetObjectItemCaseSensitive(c, "offsets");
    const cJSON *hmask = cJSON_GetObjectItemCaseSensitive(c, "assistant_masks");
    const int64_t nt = cJSON_GetArraySize(ids);
    MT_CHECK(cJSON_GetArraySize(hmask) == nt && cJSON_GetArraySize(hoff) == 2 * nt,
             "fixture %s: inconsistent sizes", name);
    int64_t *off = mt_malloc(sizeof(int64_t) * (size_t)(2 * nt + 1), "offsets");
    uint8_t *mask = mt_malloc((size_t)nt + 1, "mask");
    for (int64_t i = 0; i < 2 * nt; i++) off[i] = cJSON_GetArrayItem(hoff, (int)i)->valueint;
    mt_chat_token_mask(&r, off, nt, mask);
    int miss = 0, n_eos = 0;
    for (int64_t i = 0; !agp && rc == 0 && i < nt; i++) {
        const int hm = cJSON_GetArrayItem(hmask, (int)i)->valueint;
        const int prev = i > 0 ? cJSON_GetArrayItem(hmask, (int)i - 1)->valueint : 0;
        const bool closing = !hm && prev && off[2 * i] < (int64_t)r.len &&
                             !strncmp(r.text + off[2 * i], "<end_of_sentence>", 17);
        n_eos += closing;
        miss += mask[i] != (hm || closing);
    }
    bool has_assistant = false;
    for (int i = 0; i < n; i++) has_assistant |= ms[i].role == MT_CHAT_ASSISTANT;
    EXPECT(miss == 0 && (agp || n_eos == (has_assistant ? r.n_spans : 0)),
           "%s: %d tokens differ from HF's mask + closing eos (%d closing)", name, miss, n_eos);
    bool labelled = false;
    if (!agp && has_assistant &&
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "test_tokenizer"))) {
        /* the sample builder's ids and labels from our tokenizer */
        mt_sample_opts o;
        mt_sample_opts_default(&o);
        o.max_length = 1 << 20;
        mt_sample_builder b;
        mt_sample_builder_init(&b, tok, t, &o);
        rc = mt_sample_conv_open_msgs(&b, ms, n, err) == 1 ? mt_sample_build_piece(&b, 0, err) : -1;
        int id_miss = 0, lab_miss = 0;
        for (int64_t i = 0; rc == MT_SAMPLE_OK && b.n == nt && i < nt; i++) {
            const int32_t id = cJSON_GetArrayItem(ids, (int)i)->valueint;
            id_miss += b.ids[i] != id;
            lab_miss += b.lab[i] != (mask[i] ? id : MT_IGNORE_INDEX);
        }
        EXPECT(rc == MT_SAMPLE_OK && b.n == nt && id_miss == 0 && lab_miss == 0,
               "%s: sample rc %d, %lld tokens (HF %lld), %d ids and %d labels differ", name, rc,
               (long long)b.n, (long long)nt, id_miss, lab_miss);
        mt_sample_builder_free(&b);
        labelled = true;
    }
    free(off);
    free(mask);
    mt_chat_rendered_free(&r);
    jinja_heap_free(h);
    return labelled;
}

static int test_text01(void) {
    char path[4200], err[MT_ERR_LEN];
    mt_chat_template *t = open_src(tokenizer_dir(), NULL, NULL, err);
    EXPECT(t, "the test tokenizer's template: %s", err);
    cJSON *root = read_json_fixture("tests/fixtures/template/chat_cases.json");
    if (!root || !t) return MT_TEST_OK;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    EXPECT(cJSON_GetArraySize(cases) >= 5, "too few template fixtures");
    snprintf(path, sizeof(path), "%s/tokenizer.json", tokenizer_dir());
    mt_tokenizer *tok = mt_tokenizer_load(path);
    int n_cases = 0, n_labelled = 0;
    cJSON_ArrayForEach(c, cases) {
        n_labelled += check_text01_case(t, tok, c);
        n_cases++;
    }
    EXPECT(n_labelled >= 2, "only %d fixtures with labels", n_labelled);
    printf("text-01: %d fixtures byte-identical to transformers, masks equal (%d with labels)\n",
           n_cases, n_labelled);
    mt_tokenizer_free(tok);
    mt_chat_template_free(t);
    cJSON_Delete(root);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_chat_sources", test_sources},
    {"data_chat_rule", test_rule},
    {"data_chat_samples", test_samples},
    {"data_chat_text01", test_text01},
};
MT_TEST_MAIN(cases)
