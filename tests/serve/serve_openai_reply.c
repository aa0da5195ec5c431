/* serve_openai_reply.c: chat replies split by the reply format in minimax-serve's responses
 * (serve/openai_reply.c), as a unit: a completion's token ids (the test tokenizers of M2 and M3,
 * whose markup is special tokens, and the eos) through the response builder and through the
 * stream's events as server.c produces them, token by token.
 *   serve_openai_reply_m2    "R\n</think>\n\nC\n<minimax:tool_call>...": message.reasoning_content
 *                            R, content C, tool_calls [{id "call_...", type "function",
 *                            function {name, arguments typed by the tool's schema}}],
 *                            finish_reason "tool_calls"; the stream's deltas (reasoning_content
 *                            chunks, then content, then tool_calls with index) join to the same;
 *                            tool_choice "none" (tool_calls_off): the markup is content, "stop";
 *                            the format "none": today's content, special tokens left out
 *   serve_openai_reply_m3    the same for M3 (adaptive prompt, <mm:think>, nested arguments)
 * The expected values are the pieces the reply text is built from. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "models/reply.h"
#include "serve/openai.h"
#include "tests/support/data_util.h"
#include "tests/support/harness.h"

#define NS "]<]minimax[>["

typedef struct {
    char *reasoning, *content; /* joined; NULL: none */
    cJSON *calls;              /* [{id, type, function {name, arguments}}] */
    const char *finish;
    bool order_ok; /* reasoning chunks, then content, then calls */
} got;

static void got_free(got *g) {
    free(g->reasoning);
    free(g->content);
    cJSON_Delete(g->calls);
}

static char *cat(char *a, const char *b) {
    const size_t n = a ? strlen(a) : 0;
    char *o = realloc(a, n + strlen(b) + 1);
    strcpy(o + n, b);
    return o;
}

/* The non-streamed response of call. */
static void from_response(const mt_api_env *env, const mt_api_call *call, got *g) {
    char *json = mt_api_response(env, call);
    cJSON *o = cJSON_Parse(json), *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    const cJSON *m = cJSON_GetObjectItem(c, "message");
    const cJSON *rc = cJSON_GetObjectItem(m, "reasoning_content"),
                *ct = cJSON_GetObjectItem(m, "content");
    *g = (got){.reasoning = cJSON_IsString(rc) ? strdup(rc->valuestring) : NULL,
               .content = cJSON_IsString(ct) && *ct->valuestring ? strdup(ct->valuestring) : NULL,
               .calls = cJSON_Duplicate(cJSON_GetObjectItem(m, "tool_calls"), true),
               .order_ok = true};
    EXPECT(ct && (cJSON_IsString(ct) || (cJSON_IsNull(ct) && g->calls)),
           "content must be a string, or null beside tool_calls: %s", json);
    const char *fin = cJSON_GetStringValue(cJSON_GetObjectItem(c, "finish_reason"));
    g->finish = !fin                         ? ""
                : !strcmp(fin, "tool_calls") ? "tool_calls"
                : !strcmp(fin, "stop")       ? "stop"
                                             : "length";
    cJSON_Delete(o);
    free(json);
}

/* The stream's events, produced as server.c's stream loop does, one more token each time. */
static void from_stream(const mt_api_env *env, mt_api_call *call, got *g) {
    mt_serve_req *r = call->reqs[0];
    mt_api_reply_stream *s = mt_api_reply_stream_new(env, call);
    EXPECT(s, "no reply stream");
    *g = (got){.calls = cJSON_CreateArray(), .order_ok = true};
    int stage = 0;
    size_t printed = 0;
    for (int n = 1; s && n <= r->n_out; n++) {
        const bool done = n == r->n_out;
        char *text = mt_api_text(env, call, r, n);
        size_t len = strlen(text);
        if (done)
            len = mt_serve_cut_stop(text, r->stops, r->n_stops) ? strlen(text) : len;
        else
            len = mt_serve_stable_len(text, len, r->stops, r->n_stops);
        if (len > printed || done) {
            char *ev = mt_api_reply_events(env, call, s, text, len, done);
            printed = len;
            for (char *p = ev; (p = strstr(p, "data: ")); p += 6) {
                cJSON *o = cJSON_Parse(p + 6);
                const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
                const cJSON *d = cJSON_GetObjectItem(c, "delta"), *x;
                EXPECT(cJSON_IsNull(cJSON_GetObjectItem(c, "finish_reason")), "finish mid-stream");
                if ((x = cJSON_GetObjectItem(d, "reasoning_content"))) {
                    g->reasoning = cat(g->reasoning, x->valuestring);
                    g->order_ok &= stage == 0;
                }
                if ((x = cJSON_GetObjectItem(d, "content"))) {
                    g->content = cat(g->content, x->valuestring);
                    g->order_ok &= stage <= 1;
                    stage = 1;
                }
                const cJSON *tc;
                cJSON_ArrayForEach(tc, cJSON_GetObjectItem(d, "tool_calls")) {
                    EXPECT(cJSON_GetObjectItem(tc, "index")->valueint ==
                               cJSON_GetArraySize(g->calls),
                           "tool call index");
                    cJSON *t = cJSON_Duplicate(tc, true);
                    cJSON_DeleteItemFromObject(t, "index");
                    cJSON_AddItemToArray(g->calls, t);
                    stage = 2;
                }
                cJSON_Delete(o);
            }
            free(ev);
        }
        free(text);
    }
    if (!cJSON_GetArraySize(g->calls)) {
        cJSON_Delete(g->calls);
        g->calls = NULL;
    }
    g->finish = mt_api_reply_finish(s, r);
    mt_api_reply_stream_free(s);
}

static bool eq(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

/* Response and stream of a completion of ids = text's tokens + eos against the pieces. */
static void check(const mt_api_env *env, mt_api_call *call, const char *text, const char *want_r,
                  const char *want_c, const char *want_calls, const char *want_finish,
                  const char *what) {
    mt_token_buf b = {0};
    mt_tokenizer_encode(env->tok, text, strlen(text), &b);
    mt_serve_req *r = call->reqs[0];
    free(r->out);
    r->out = malloc(sizeof(int32_t) * (size_t)(b.n + 1));
    memcpy(r->out, b.ids, sizeof(int32_t) * (size_t)b.n);
    r->out[b.n] = env->eos;
    r->n_out = (int)b.n + 1;
    r->stopped = true;
    r->state = MT_REQ_DONE;
    mt_token_buf_free(&b);
    cJSON *wc = want_calls ? cJSON_Parse(want_calls) : NULL;
    got g[2];
    from_response(env, call, &g[0]);
    if (mt_api_reply_active(env, call))
        from_stream(env, call, &g[1]);
    else
        g[1] = (got){.finish = want_finish,
                     .order_ok = true,
                     .reasoning = want_r ? strdup(want_r) : NULL,
                     .content = want_c ? strdup(want_c) : NULL,
                     .calls = wc ? cJSON_Duplicate(wc, true) : NULL};
    for (int k = 0; k < 2; k++) {
        const char *how = k ? "stream" : "response";
        EXPECT(eq(g[k].reasoning, want_r), "%s %s: reasoning \"%s\"", what, how,
               g[k].reasoning ? g[k].reasoning : "(none)");
        EXPECT(eq(g[k].content, want_c), "%s %s: content \"%s\", want \"%s\"", what, how,
               g[k].content ? g[k].content : "(none)", want_c ? want_c : "(none)");
        EXPECT(!strcmp(g[k].finish, want_finish), "%s %s: finish %s", what, how, g[k].finish);
        EXPECT(g[k].order_ok, "%s %s: deltas out of order", what, how);
        EXPECT(cJSON_GetArraySize(g[k].calls) == cJSON_GetArraySize(wc), "%s %s: %d calls", what,
               how, cJSON_GetArraySize(g[k].calls));
        for (int i = 0; i < cJSON_GetArraySize(wc) && i < cJSON_GetArraySize(g[k].calls); i++) {
            const cJSON *c = cJSON_GetArrayItem(g[k].calls, i), *w = cJSON_GetArrayItem(wc, i);
            const cJSON *fn = cJSON_GetObjectItem(c, "function");
            const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(c, "id"));
            EXPECT(id && !strncmp(id, "call_", 5) && strlen(id) == 29, "%s %s: id %s", what, how,
                   id ? id : "(none)");
            EXPECT(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "type")), "function"),
                   "%s %s: type", what, how);
            EXPECT(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name")),
                           cJSON_GetStringValue(cJSON_GetObjectItem(w, "name"))),
                   "%s %s: call %d name", what, how, i);
            const char *as = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "arguments"));
            cJSON *a = as ? cJSON_Parse(as) : NULL;
            EXPECT(a && cJSON_Compare(a, cJSON_GetObjectItem(w, "arguments"), true),
                   "%s %s: call %d arguments %s", what, how, i, as ? as : "(none)");
            cJSON_Delete(a);
        }
        got_free(&g[k]);
    }
    cJSON_Delete(wc);
}

/* env for family fam's test tokenizer and reply format `format`. */
static bool env_open(mt_api_env *env, const char *fam, const char *format) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer_%s/tokenizer.json", source_dir(),
             fam);
    mt_tokenizer *tok = mt_tokenizer_load(path);
    *env = (mt_api_env){.tok = tok,
                        .model_name = "tiny",
                        .t_max = 4096,
                        .vocab_size = (int)mt_tokenizer_vocab_size(tok),
                        .eos = mt_tokenizer_token_to_id(tok, "[e~["),
                        .reply = mt_reply_format_find(format)};
    EXPECT(env->eos >= 0 && env->reply, "eos or format");
    /* the markup is one special token each (what lets the parser see it) */
    EXPECT(mt_tokenizer_token_to_id(tok, !strcmp(fam, "m2") ? "<minimax:tool_call>" : NS) >= 0,
           "markup tokens");
    return env->eos >= 0 && env->reply;
}

static void call_open(mt_api_call *call, const char *prompt, const char *tools) {
    static const int32_t one = 1;
    *call = (mt_api_call){.kind = MT_API_CHAT, .n = 1, .id = 7, .created = 1700000000};
    call->reqs[0] = mt_serve_req_new(&one, 1);
    call->chat_prompt = strdup(prompt);
    call->tools = tools ? cJSON_Parse(tools) : NULL;
}

static const char *const weather =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": "
    "{\"type\": \"integer\"}, \"hourly\": {\"type\": \"boolean\"}, \"spots\": {\"type\": "
    "\"array\", \"items\": {\"type\": \"object\", \"properties\": {\"lat\": {\"type\": "
    "\"number\"}}}}}}}}]";

static int test_m2(void) {
    mt_api_env env;
    if (!env_open(&env, "m2", "minimax_m2")) return MT_TEST_OK;
    mt_api_call call;
    call_open(&call,
              "]~!b[]~b]system\nYou are a helpful assistant.[e~[\n]~b]user\nWeather in "
              "Zürich?[e~[\n]~b]ai\n<think>\n",
              weather);
    const char *block = "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter "
                        "name=\"city\">Zürich</parameter>\n<parameter name=\"days\">3"
                        "</parameter>\n<parameter name=\"hourly\">false</parameter>\n"
                        "</invoke>\n</minimax:tool_call>";
    char text[1024];
    snprintf(text, sizeof(text), "The user wants 3 days.\n</think>\n\nLet me look.\n%s", block);
    check(&env, &call, text, "The user wants 3 days.", "Let me look.",
          "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 3, "
          "\"hourly\": false}}]",
          "tool_calls", "m2 tool call");
    check(&env, &call, "Short.\n</think>\n\nIt is sunny.", "Short.", "It is sunny.", NULL, "stop",
          "m2 no tool call");
    call.tool_calls_off = true;
    char want[1024];
    snprintf(want, sizeof(want), "Let me look.\n%s", block);
    check(&env, &call, text, "The user wants 3 days.", want, NULL, "stop", "m2 tool_choice none");
    mt_api_env none = env;
    none.reply = mt_reply_format_find("none");
    check(&none, &call, text, NULL,
          "The user wants 3 days.\n\n\nLet me look.\n\n<invoke name=\"get_weather\">\n<parameter "
          "name=\"city\">Zürich</parameter>\n<parameter name=\"days\">3</parameter>\n<parameter "
          "name=\"hourly\">false</parameter>\n</invoke>\n",
          NULL, "stop", "format none");
    mt_api_call_free(&call);
    mt_tokenizer_free((mt_tokenizer *)env.tok);
    return MT_TEST_OK;
}

static int test_m3(void) {
    mt_api_env env;
    if (!env_open(&env, "m3", "minimax_m3")) return MT_TEST_OK;
    mt_api_call call;
    call_open(&call, "]~b]user\nWeather?[e~[\n]~b]ai\n", weather);
    const char *text = "<mm:think>Two spots.</mm:think>" NS "<tool_call>\n" NS
                       "<invoke name=\"get_weather\">" NS "<city>東京" NS "</city>" NS "<spots>" NS
                       "<item>" NS "<lat>35.68" NS "</lat>" NS "</item>" NS "<item>" NS "<lat>-1" NS
                       "</lat>" NS "</item>" NS "</spots>" NS "</invoke>\n" NS "</tool_call>";
    check(&env, &call, text, "Two spots.", NULL,
          "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京\", \"spots\": [{\"lat\": "
          "35.68}, {\"lat\": -1}]}}]",
          "tool_calls", "m3 tool call");
    check(&env, &call, "</mm:think>Hello.", NULL, "Hello.", NULL, "stop", "m3 not thinking");
    mt_api_call_free(&call);
    mt_tokenizer_free((mt_tokenizer *)env.tok);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"serve_openai_reply_m2", test_m2},
    {"serve_openai_reply_m3", test_m3},
};
MT_TEST_MAIN(cases)
