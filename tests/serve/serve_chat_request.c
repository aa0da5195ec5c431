/* serve_chat_request.c: the request side of minimax-serve over loopback, on random 1-layer
 * models of recipes/configs/tiny-m2.json and tiny-m3.json with the tiny M2 / M3 tokenizers and
 * the released templates (../shared/templates; skipped where absent).
 *
 * serve_tokenize_m2 / _m3: POST /tokenize of conversations whose text spells control tokens
 * gives the ids transformers 5.24 gives with apply_chat_template(sanitize_control_tokens=True)
 * (tests/fixtures/chat/sanitize_expected.json), and with --no-sanitize-control-tokens those of
 * sanitize_control_tokens=False; continue_final_message included.
 * serve_chat_tools_m2 / _m3: a chat request with tools, an assistant tool call (arguments as a
 * JSON string), reasoning_content, content null and a tool result renders byte for byte as
 * `minimax-data render --add-generation-prompt` of the same conversation (the /tokenize ids
 * decoded, and the ids of that text), and the chat completion's prompt is those ids.
 * serve_fields: every request field the server does not implement gets 400 naming it, its no-op
 * value is accepted; tool_choice "required" / named refused, "none" accepted; /tokenize of a
 * prompt gives the text's ids (not sanitized), its unknown fields refused.
 * serve_logprobs_stream: chat logprobs (greedy: each token's logprob is the top one's), streamed
 * ones concatenated equal the non-streamed ones; stream_options.include_usage ends the stream
 * with a usage chunk; a streamed completion with echo and logprobs joins to the non-streamed
 * text and logprobs. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "data/tokenizer.h"
#include "tests/support/data_util.h"
#include "tests/support/eval_util.h"
#include "tests/support/harness.h"
#include "tests/support/serve_http.h"

static char cr_dir[4096], cr_model[4200], cr_tmpl[4200], cr_tokdir[4200];
static mt_tokenizer *cr_tok;

/* A tiny model of family fam ("m2", "m3") with its tokenizer; false (skip) without ../shared. */
static bool cr_setup(const char *fam) {
    const char *s = getenv("MT_SHARED_DIR");
    snprintf(cr_tmpl, sizeof(cr_tmpl), "%s/templates/MiniMax-%s.jinja", s && *s ? s : "../shared",
             !strcmp(fam, "m2") ? "M2" : "M3");
    if (!file_exists(cr_tmpl)) return false;
    snprintf(cr_tokdir, sizeof(cr_tokdir), "%s/tests/fixtures/tokenizer_%s", source_dir(), fam);
    char config[64];
    snprintf(config, sizeof(config), "tiny-%s.json", fam);
    make_tmpdir(cr_dir, sizeof(cr_dir));
    eval_make_model_tok(config, cr_tokdir, 0, cr_dir, 1, 2048, cr_model, sizeof(cr_model));
    char path[4400];
    snprintf(path, sizeof(path), "%s/tokenizer.json", cr_model);
    cr_tok = mt_tokenizer_load(path);
    return true;
}

static void cr_teardown(void) {
    mt_tokenizer_free(cr_tok);
    rm_tree(cr_dir);
}

static void cr_serve(srv_proc *s, const char *flags) {
    char args[9000];
    snprintf(args, sizeof(args), "--model '%s' --chat-template '%s' --max-context 2048 %s",
             cr_model, cr_tmpl, flags);
    srv_start(s, cr_dir, args);
}

static cJSON *cr_post(int port, const char *path, const char *body, int *status) {
    http_resp r = http_request(port, "POST", path, NULL, body);
    *status = r.status;
    cJSON *o = r.body ? cJSON_Parse(r.body) : NULL;
    http_resp_free(&r);
    return o;
}

/* Whether the JSON list a holds the same numbers as b. */
static bool same_ids(const cJSON *a, const cJSON *b) {
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return false;
    for (const cJSON *x = a ? a->child : NULL, *y = b ? b->child : NULL; x && y;
         x = x->next, y = y->next)
        if (x->valuedouble != y->valuedouble) return false;
    return true;
}

/* ---- /tokenize against transformers ---- */

static void cr_tokenize_cases(int port, const char *fam, const char *key, int *n) {
    cJSON *root = read_json_fixture("tests/fixtures/chat/sanitize_expected.json");
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        if (strcmp(cJSON_GetObjectItem(c, "family")->valuestring, fam)) continue;
        cJSON *b = cJSON_Duplicate(cJSON_GetObjectItem(c, "conversation"), true);
        cJSON_AddStringToObject(b, "model", "model");
        cJSON_AddItemToObject(b, "chat_template_kwargs",
                              cJSON_Duplicate(cJSON_GetObjectItem(c, "kwargs"), true));
        cJSON_AddItemToObject(b, "add_generation_prompt",
                              cJSON_Duplicate(cJSON_GetObjectItem(c, "add_generation_prompt"), 1));
        cJSON_AddItemToObject(b, "continue_final_message",
                              cJSON_Duplicate(cJSON_GetObjectItem(c, "continue_final_message"), 1));
        char *body = cJSON_PrintUnformatted(b);
        int st;
        cJSON *o = cr_post(port, "/tokenize", body, &st);
        const cJSON *toks = cJSON_GetObjectItem(o, "tokens");
        EXPECT(st == 200 && same_ids(toks, cJSON_GetObjectItem(c, key)) &&
                   cJSON_GetNumberValue(cJSON_GetObjectItem(o, "count")) ==
                       cJSON_GetArraySize(toks),
               "%s %s: /tokenize status %d, %d ids, transformers' %s %d", fam,
               cJSON_GetObjectItem(c, "name")->valuestring, st, cJSON_GetArraySize(toks), key,
               cJSON_GetArraySize(cJSON_GetObjectItem(c, key)));
        (*n)++;
        cJSON_Delete(o);
        free(body);
        cJSON_Delete(b);
    }
    cJSON_Delete(root);
}

static int cr_tokenize(const char *fam) {
    if (!cr_setup(fam)) {
        printf("skipped: ../shared/templates is absent\n");
        return MT_TEST_SKIP;
    }
    srv_proc s;
    int n = 0;
    cr_serve(&s, "");
    cr_tokenize_cases(s.port, fam, "ids_sanitized", &n);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    cr_serve(&s, "--no-sanitize-control-tokens");
    cr_tokenize_cases(s.port, fam, "ids_plain", &n);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    EXPECT(n >= 14, "%d cases", n);
    printf("%s: %d /tokenize answers equal to transformers' (sanitized, then not)\n", fam, n);
    cr_teardown();
    return MT_TEST_OK;
}

static int test_tokenize_m2(void) { return cr_tokenize("m2"); }
static int test_tokenize_m3(void) { return cr_tokenize("m3"); }

/* ---- a chat request with tools against minimax-data render ---- */

static const char *CONV =
    "\"messages\": [{\"role\": \"system\", \"content\": \"You help with the weather.\"}, "
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Weather in Paris?\"}]}, "
    "{\"role\": \"assistant\", \"content\": null, \"reasoning_content\": \"I should call it.\", "
    "\"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": "
    "\"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": 2, "
    "\\\"metric\\\": true, \\\"extra\\\": null}\"}}]}, "
    "{\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"sunny, 21 C\"}], "
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"description\": \"The weather of a city\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}, "
    "\"metric\": {\"type\": \"boolean\"}}, \"required\": [\"city\"]}}}]";

static int cr_chat_tools(const char *fam) {
    if (!cr_setup(fam)) {
        printf("skipped: ../shared/templates is absent\n");
        return MT_TEST_SKIP;
    }
    /* minimax-data render of the conversation (the text part joined: one part) */
    char conv[4400], path[4400], cmd[16000], err[MT_ERR_LEN];
    snprintf(path, sizeof(path), "%s/conv.json", cr_dir);
    snprintf(conv, sizeof(conv), "{%s}", CONV);
    char *plain = strdup(conv);
    char *part = strstr(plain, "[{\"type\": \"text\", \"text\": \"Weather in Paris?\"}]");
    const char *rest = part + strlen("[{\"type\": \"text\", \"text\": \"Weather in Paris?\"}]");
    snprintf(conv, sizeof(conv), "%.*s\"Weather in Paris?\"%s", (int)(part - plain), plain, rest);
    free(plain);
    write_text(path, conv);
    const char *exe = getenv("MT_DATA_CLI");
    MT_CHECK(exe && *exe, "MT_DATA_CLI not set; run through ctest");
    snprintf(cmd, sizeof(cmd),
             "'%s' render --conversation '%s' --tokenizer '%s' --chat-template '%s' "
             "--add-generation-prompt >'%s/render.txt'",
             exe, path, cr_tokdir, cr_tmpl, cr_dir);
    EXPECT(system(cmd) == 0, "%s", cmd);
    snprintf(path, sizeof(path), "%s/render.txt", cr_dir);
    size_t len = 0;
    char *want = mt_file_read(path, &len, err);
    EXPECT(want && len > 100, "%s", err);
    mt_token_buf b = {0};
    mt_tokenizer_encode(cr_tok, want ? want : "", want ? len : 0, &b);

    srv_proc s;
    cr_serve(&s, "");
    char body[8192];
    snprintf(body, sizeof(body), "{\"model\": \"model\", %s}", CONV);
    int st;
    cJSON *o = cr_post(s.port, "/tokenize", body, &st);
    const cJSON *toks = cJSON_GetObjectItem(o, "tokens");
    const int n = cJSON_GetArraySize(toks);
    int32_t *ids = calloc((size_t)n + 1, sizeof(int32_t));
    int i = 0;
    for (const cJSON *x = toks ? toks->child : NULL; x; x = x->next)
        ids[i++] = (int32_t)x->valuedouble;
    char *got = mt_tokenizer_decode(cr_tok, ids, n, false);
    EXPECT(st == 200 && want && !strcmp(got, want),
           "%s: the request's prompt differs from minimax-data render's:\n%s\n---\n%s", fam, got,
           want);
    bool same = n == b.n;
    for (int k = 0; same && k < n; k++) same = ids[k] == b.ids[k];
    EXPECT(same, "%s: %d ids, the render's text encodes as %lld", fam, n, (long long)b.n);
    /* the chat completion itself: its prompt is those ids */
    snprintf(body, sizeof(body),
             "{\"model\": \"model\", %s, \"max_tokens\": 3, \"temperature\": 0, "
             "\"tool_choice\": \"auto\"}",
             CONV);
    cJSON *c = cr_post(s.port, "/v1/chat/completions", body, &st);
    const int prompt_tokens = (int)cJSON_GetNumberValue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(c, "usage"), "prompt_tokens"));
    EXPECT(st == 200 && prompt_tokens == n, "%s: chat status %d, %d prompt tokens (want %d)", fam,
           st, prompt_tokens, n);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    printf("%s: a chat request with tools renders as minimax-data render (%d ids)\n", fam, n);
    cJSON_Delete(c);
    cJSON_Delete(o);
    free(got);
    free(ids);
    free(want);
    mt_token_buf_free(&b);
    cr_teardown();
    return MT_TEST_OK;
}

static int test_chat_tools_m2(void) { return cr_chat_tools("m2"); }
static int test_chat_tools_m3(void) { return cr_chat_tools("m3"); }

/* ---- fields: 400 naming them, or accepted at their no-op value ---- */

typedef struct {
    const char *path, *extra; /* the body's fields besides model and messages / prompt */
    int status;
    const char *param; /* the error's param (400) */
} field_case;

#define CHAT "/v1/chat/completions"
#define COMP "/v1/completions"
static const field_case field_cases[] = {
    {CHAT, "\"response_format\": {\"type\": \"json_object\"}", 400, "response_format"},
    {CHAT, "\"response_format\": {\"type\": \"text\"}", 200, NULL},
    {CHAT, "\"logit_bias\": {\"17\": 5}", 400, "logit_bias"},
    {CHAT, "\"logit_bias\": {}", 200, NULL},
    {CHAT, "\"presence_penalty\": 0.5", 400, "presence_penalty"},
    {CHAT, "\"presence_penalty\": 0", 200, NULL},
    {COMP, "\"frequency_penalty\": -1", 400, "frequency_penalty"},
    {COMP, "\"frequency_penalty\": 0", 200, NULL},
    {COMP, "\"best_of\": 2", 400, "best_of"},
    {COMP, "\"best_of\": 1", 200, NULL},
    {COMP, "\"suffix\": \"end\"", 400, "suffix"},
    {COMP, "\"suffix\": null", 200, NULL},
    {CHAT, "\"n\": 2", 400, "n"},
    {COMP, "\"n\": 3", 400, "n"},
    {CHAT, "\"functions\": [{\"name\": \"f\"}]", 400, "functions"},
    {CHAT, "\"function_call\": \"auto\"", 400, "function_call"},
    {CHAT, "\"min_p\": 0.1", 400, "min_p"},
    {COMP, "\"tools\": []", 400, "tools"},
    {CHAT, "\"echo\": true", 400, "echo"},
    {CHAT, "\"user\": \"me\"", 200, NULL},
    {CHAT, "\"user\": 5", 400, "user"},
    {CHAT, "\"parallel_tool_calls\": false", 400, "parallel_tool_calls"},
    {CHAT, "\"tool_choice\": \"required\"", 400, "tool_choice"},
    {CHAT, "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"f\"}}", 400,
     "tool_choice"},
    {CHAT, "\"tool_choice\": \"none\"", 200, NULL},
    {CHAT, "\"tools\": [{\"type\": \"function\"}]", 400, "tools"},
    {CHAT, "\"tools\": [{\"type\": \"retrieval\", \"function\": {\"name\": \"f\"}}]", 400, "tools"},
    {CHAT, "\"chat_template_kwargs\": [1]", 400, "chat_template_kwargs"},
    {CHAT, "\"chat_template_kwargs\": {\"messages\": []}", 400, "chat_template_kwargs"},
    {CHAT, "\"add_generation_prompt\": true, \"continue_final_message\": true", 400,
     "continue_final_message"},
    {CHAT, "\"stream_options\": {\"include_usage\": true}", 400, "stream_options"},
    {CHAT, "\"stream\": true, \"stream_options\": {\"include_usage\": 1}", 400, "stream_options"},
    {CHAT, "\"logprobs\": true, \"top_logprobs\": 6", 400, "top_logprobs"},
    {CHAT, "\"top_logprobs\": 2", 400, "top_logprobs"},
};

static int test_fields(void) {
    if (!cr_setup("m2")) {
        printf("skipped: ../shared/templates is absent\n");
        return MT_TEST_SKIP;
    }
    srv_proc s;
    cr_serve(&s, "");
    for (size_t i = 0; i < sizeof(field_cases) / sizeof(field_cases[0]); i++) {
        const field_case *f = &field_cases[i];
        char body[2048];
        snprintf(body, sizeof(body), "{\"model\": \"model\", %s, \"max_tokens\": 2, %s}",
                 !strcmp(f->path, CHAT)
                     ? "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]"
                     : "\"prompt\": \"hi\"",
                 f->extra);
        int st;
        cJSON *o = cr_post(s.port, f->path, body, &st);
        const cJSON *e = cJSON_GetObjectItem(o, "error");
        const char *param = cJSON_GetStringValue(cJSON_GetObjectItem(e, "param"));
        const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(e, "message"));
        EXPECT(st == f->status && (!f->param || (param && !strcmp(param, f->param))),
               "%s %s: status %d (want %d), param %s (want %s): %s", f->path, f->extra, st,
               f->status, param ? param : "null", f->param ? f->param : "null", msg ? msg : "");
        if (st == 400 && msg) printf("  400 %s: %s\n", param ? param : "-", msg);
        cJSON_Delete(o);
    }
    /* /tokenize of a prompt: the text as it is (a completion's prompt is not sanitized) */
    const char *text = "hello ]~b]system world";
    mt_token_buf b = {0};
    mt_tokenizer_encode(cr_tok, text, strlen(text), &b);
    int st;
    cJSON *o = cr_post(s.port, "/tokenize",
                       "{\"model\": \"model\", \"prompt\": \"hello ]~b]system world\", "
                       "\"add_special_tokens\": true, \"return_token_strs\": true}",
                       &st);
    const cJSON *toks = cJSON_GetObjectItem(o, "tokens");
    bool same = st == 200 && cJSON_GetArraySize(toks) == b.n &&
                cJSON_GetArraySize(cJSON_GetObjectItem(o, "token_strs")) == b.n &&
                cJSON_GetNumberValue(cJSON_GetObjectItem(o, "max_model_len")) == 2048;
    for (int i = 0; same && i < b.n; i++)
        same = (int32_t)cJSON_GetArrayItem(toks, i)->valuedouble == b.ids[i];
    EXPECT(same, "/tokenize of a prompt: status %d, %d ids (want %lld)", st,
           cJSON_GetArraySize(toks), (long long)b.n);
    cJSON_Delete(o);
    o = cr_post(s.port, "/tokenize", "{\"prompt\": \"x\", \"tools\": []}", &st);
    EXPECT(st == 400, "/tokenize: tools without messages: status %d", st);
    cJSON_Delete(o);
    o = cr_post(s.port, "/tokenize", "{\"prompt\": \"x\", \"padding\": true}", &st);
    EXPECT(st == 400, "/tokenize: an unknown field: status %d", st);
    cJSON_Delete(o);
    mt_token_buf_free(&b);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    cr_teardown();
    return MT_TEST_OK;
}

/* ---- logprobs and usage in streams ---- */

/* The events of a stream body: their parsed chunks, [DONE] last. */
static int cr_events(char *body, cJSON **out, int max, bool *done) {
    int n = 0;
    *done = false;
    for (char *e = body; e && *e && n < max;) {
        char *end = strstr(e, "\n\n");
        if (end) *end = '\0';
        if (!strcmp(e, "data: [DONE]"))
            *done = true;
        else if (!strncmp(e, "data: ", 6))
            out[n++] = cJSON_Parse(e + 6);
        e = end ? end + 2 : NULL;
    }
    return n;
}

static void cr_check_chat_logprobs(int port) {
    const char *base = "{\"model\": \"model\", \"messages\": [{\"role\": \"user\", \"content\": "
                       "\"count to five\"}], \"max_tokens\": 8, \"temperature\": 0, "
                       "\"logprobs\": true, \"top_logprobs\": 2";
    char body[1024];
    snprintf(body, sizeof(body), "%s}", base);
    int st;
    cJSON *o = cr_post(port, CHAT, body, &st);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    const cJSON *content = cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "logprobs"), "content");
    const int n = cJSON_GetArraySize(content);
    EXPECT(st == 200 &&
               n == (int)cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "usage"),
                                                                  "completion_tokens")) &&
               n > 0,
           "chat logprobs: status %d, %d entries", st, n);
    const cJSON *e;
    cJSON_ArrayForEach(e, content) {
        const cJSON *top = cJSON_GetObjectItem(e, "top_logprobs");
        const double lp = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "logprob"));
        const double lp0 =
            cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(top, 0), "logprob"));
        EXPECT(cJSON_GetArraySize(top) == 2 && lp <= 0 && fabs(lp - lp0) < 1e-5 &&
                   cJSON_IsArray(cJSON_GetObjectItem(e, "bytes")) &&
                   cJSON_IsString(cJSON_GetObjectItem(e, "token")),
               "a greedy token's logprob %g is the top one's %g", lp, lp0);
    }
    /* streamed, with include_usage */
    snprintf(body, sizeof(body),
             "%s, \"stream\": true, \"stream_options\": {\"include_usage\": true}}", base);
    http_resp r = http_request(port, "POST", CHAT, NULL, body);
    cJSON *ev[256];
    bool done;
    const int ne = cr_events(r.body ? r.body : "", ev, 256, &done);
    cJSON *joined = cJSON_CreateArray();
    for (int i = 0; i < ne; i++) {
        const cJSON *lp = cJSON_GetObjectItem(
            cJSON_GetArrayItem(cJSON_GetObjectItem(ev[i], "choices"), 0), "logprobs");
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(lp, "content"))
            cJSON_AddItemToArray(joined, cJSON_Duplicate(e, true));
    }
    EXPECT(r.status == 200 && done && cJSON_Compare(joined, content, true),
           "the stream's logprobs joined differ from the response's (%d of %d)",
           cJSON_GetArraySize(joined), n);
    const cJSON *last = ne ? ev[ne - 1] : NULL;
    EXPECT(last && cJSON_GetArraySize(cJSON_GetObjectItem(last, "choices")) == 0 &&
               cJSON_Compare(cJSON_GetObjectItem(last, "usage"), cJSON_GetObjectItem(o, "usage"),
                             true),
           "include_usage: the last chunk has no choices and the usage");
    int with_usage = 0;
    for (int i = 0; i < ne; i++) with_usage += cJSON_GetObjectItem(ev[i], "usage") != NULL;
    EXPECT(with_usage == 1, "%d chunks with usage", with_usage);
    for (int i = 0; i < ne; i++) cJSON_Delete(ev[i]);
    cJSON_Delete(joined);
    http_resp_free(&r);
    cJSON_Delete(o);
    printf("chat logprobs: %d tokens, the stream's equal\n", n);
}

static void cr_check_completion_stream(int port) {
    const char *base = "{\"model\": \"model\", \"prompt\": \"one two three\", \"max_tokens\": 6, "
                       "\"temperature\": 0, \"echo\": true, \"logprobs\": 1";
    char body[1024];
    snprintf(body, sizeof(body), "%s}", base);
    int st;
    cJSON *o = cr_post(port, COMP, body, &st);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(c0, "text"));
    const cJSON *lp = cJSON_GetObjectItem(c0, "logprobs");
    snprintf(body, sizeof(body), "%s, \"stream\": true}", base);
    http_resp r = http_request(port, "POST", COMP, NULL, body);
    cJSON *ev[256];
    bool done;
    const int ne = cr_events(r.body ? r.body : "", ev, 256, &done);
    mt_strbuf t = {0};
    static const char *const keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    cJSON *joined = cJSON_CreateObject();
    for (int k = 0; k < 4; k++) cJSON_AddArrayToObject(joined, keys[k]);
    for (int i = 0; i < ne; i++) {
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(ev[i], "choices"), 0);
        const char *piece = cJSON_GetStringValue(cJSON_GetObjectItem(c, "text"));
        if (piece) mt_strbuf_append(&t, piece, strlen(piece));
        const cJSON *l = cJSON_GetObjectItem(c, "logprobs"), *x;
        for (int k = 0; k < 4; k++)
            cJSON_ArrayForEach(x, cJSON_GetObjectItem(l, keys[k]))
                cJSON_AddItemToArray(cJSON_GetObjectItem(joined, keys[k]), cJSON_Duplicate(x, 1));
    }
    EXPECT(st == 200 && text && t.p && !strcmp(t.p, text) && !strncmp(text, "one two three", 13),
           "the streamed echo + text %s, not %s", t.p, text);
    EXPECT(done && cJSON_Compare(joined, lp, true),
           "the stream's legacy logprobs joined differ from the response's");
    printf("completion stream: echo and logprobs as the response (%d events)\n", ne);
    for (int i = 0; i < ne; i++) cJSON_Delete(ev[i]);
    cJSON_Delete(joined);
    mt_strbuf_free(&t);
    http_resp_free(&r);
    cJSON_Delete(o);
}

static int test_logprobs_stream(void) {
    if (!cr_setup("m2")) {
        printf("skipped: ../shared/templates is absent\n");
        return MT_TEST_SKIP;
    }
    srv_proc s;
    cr_serve(&s, "");
    cr_check_chat_logprobs(s.port);
    cr_check_completion_stream(s.port);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");
    cr_teardown();
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"serve_tokenize_m2", test_tokenize_m2},
    {"serve_tokenize_m3", test_tokenize_m3},
    {"serve_chat_tools_m2", test_chat_tools_m2},
    {"serve_chat_tools_m3", test_chat_tools_m3},
    {"serve_fields", test_fields},
    {"serve_logprobs_stream", test_logprobs_stream},
};
MT_TEST_MAIN(cases)
