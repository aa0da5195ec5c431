/* serve_reply.c: minimax-serve's split chat replies over loopback, on a tiny M2 and a tiny M3
 * trained by the test to answer one conversation with reasoning and a tool call.
 *
 * serve_reply_m2, serve_reply_m3: minimax-train (recipes/tiny-m2.toml / tiny-m3.toml, one
 * layer, 150 steps on one record: {"messages": [user "Weather in Paris?", assistant with
 * reasoning_content "Call the tool." and a tool call get_weather(city "Paris", days 2)], tools},
 * rendered by the released template from ../shared: skipped where it is absent) learns the
 * reply; minimax-serve on the export (the family's default --reasoning-parser) answers the
 * same user turn (greedy) with message.reasoning_content "Call the tool.", content null,
 * tool_calls [{id "call_...", type "function", function {name "get_weather", arguments
 * {"city": "Paris", "days": 2}}}] (days typed by the request's tools, the record's, as vLLM's
 * minimax_m2 parser types it) and finish_reason "tool_calls"; the streamed answer (role chunk,
 * reasoning_content deltas, a tool_calls delta with index 0, the finish chunk "tool_calls",
 * [DONE]) joins to the same, and its chat logprobs, joined, are the response's; with
 * --reasoning-parser none the reply is content only (no reasoning_content, no tool_calls),
 * finish_reason "stop"; an unknown name stops the start with one line listing the names. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "tests/support/data_util.h"
#include "tests/support/harness.h"
#include "tests/support/serve_http.h"

#define TOOLS                                                                                      \
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "         \
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": "         \
    "{\"type\": \"integer\"}}}}}]"

static const char *const record =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": "
    "\"assistant\", \"reasoning_content\": \"Call the tool.\", \"content\": \"\", "
    "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"arguments\": {\"city\": \"Paris\", \"days\": 2}}}]}], \"tools\": " TOOLS "}\n";

/* %s: the tools (with: as trained; the typed arguments) and stream */
static const char *const request =
    "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"Weather in "
    "Paris?\"}], \"max_tokens\": 200, \"temperature\": 0, \"logprobs\": true%s%s}";
static const char *const with_tools = ", \"tools\": " TOOLS;

/* The trained export in dir/run/checkpoint-150; false (skip) without the template. */
static bool train(const char *dir, const char *fam) {
    const char *s = getenv("MT_SHARED_DIR");
    char tmpl[4200], data[4200], cmd[20000];
    snprintf(tmpl, sizeof(tmpl), "%s/templates/MiniMax-%s.jinja", s && *s ? s : "../shared",
             !strcmp(fam, "m2") ? "M2" : "M3");
    if (!file_exists(tmpl)) return false;
    snprintf(data, sizeof(data), "%s/one.jsonl", dir);
    FILE *f = fopen(data, "w");
    MT_CHECK(f, "cannot write %s", data);
    fputs(record, f);
    fclose(f);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1); /* a singleton rank, in containers run as root */
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    snprintf(cmd, sizeof(cmd),
             "'%s' recipes/tiny-%s.toml --set output.dir='%s/run' --set data.path='%s' --set "
             "data.chat_template='%s' --set data.cache_dir='%s/cache' --set data.eval_samples=0 "
             "--set train.eval_steps=0 --set train.eval_on_start=false --set train.max_steps=150 "
             "--set train.warmup_steps=2 --set data.packing=false --set data.shuffle=false --set "
             "train.per_device_train_batch_size=1 --set model.num_hidden_layers=1 > '%s/train.log' "
             "2>&1",
             getenv("MT_TRAIN_CLI"), fam, dir, data, tmpl, dir, dir);
    const int rc = system(cmd);
    EXPECT(rc == 0, "minimax-train failed (%s/train.log)", dir);
    return true;
}

typedef struct {
    char *reasoning, *content;
    cJSON *calls;
    cJSON *lp; /* logprobs.content: one entry per completion token, joined over the stream */
    char finish[32];
} reply;

static void reply_free(reply *r) {
    free(r->reasoning);
    free(r->content);
    cJSON_Delete(r->calls);
    cJSON_Delete(r->lp);
}

/* The logprobs.content entries of choice c appended to *lp. */
static void lp_join(cJSON **lp, const cJSON *c) {
    const cJSON *x;
    if (!*lp) *lp = cJSON_CreateArray();
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(cJSON_GetObjectItem(c, "logprobs"), "content"))
        cJSON_AddItemToArray(*lp, cJSON_Duplicate(x, true));
}

static char *cat(char *a, const char *b) {
    const size_t n = a ? strlen(a) : 0;
    char *o = realloc(a, n + strlen(b) + 1);
    strcpy(o + n, b);
    return o;
}

static reply ask(int port, bool stream) {
    char body[2048];
    snprintf(body, sizeof(body), request, with_tools, stream ? ", \"stream\": true" : "");
    http_resp h = http_request(port, "POST", "/v1/chat/completions", NULL, body);
    EXPECT(h.status == 200, "status %d: %s", h.status, h.body ? h.body : "");
    reply r = {0};
    if (!stream) {
        cJSON *o = cJSON_Parse(h.body ? h.body : "");
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
        const cJSON *m = cJSON_GetObjectItem(c, "message");
        const cJSON *rc = cJSON_GetObjectItem(m, "reasoning_content"),
                    *ct = cJSON_GetObjectItem(m, "content");
        r.reasoning = cJSON_IsString(rc) ? strdup(rc->valuestring) : NULL;
        r.content = cJSON_IsString(ct) ? strdup(ct->valuestring) : NULL;
        r.calls = cJSON_Duplicate(cJSON_GetObjectItem(m, "tool_calls"), true);
        const char *fin = cJSON_GetStringValue(cJSON_GetObjectItem(c, "finish_reason"));
        snprintf(r.finish, sizeof(r.finish), "%s", fin ? fin : "");
        lp_join(&r.lp, c);
        cJSON_Delete(o);
    } else {
        bool done = false;
        for (char *p = h.body; p && (p = strstr(p, "data: ")); p += 6) {
            if (!strncmp(p + 6, "[DONE]", 6)) {
                done = true;
                break;
            }
            cJSON *o = cJSON_Parse(p + 6);
            const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
            const cJSON *d = cJSON_GetObjectItem(c, "delta"), *x;
            if ((x = cJSON_GetObjectItem(d, "reasoning_content")))
                r.reasoning = cat(r.reasoning, x->valuestring);
            if ((x = cJSON_GetObjectItem(d, "content")) && *x->valuestring)
                r.content = cat(r.content, x->valuestring);
            cJSON_ArrayForEach(x, cJSON_GetObjectItem(d, "tool_calls")) {
                if (!r.calls) r.calls = cJSON_CreateArray();
                EXPECT(cJSON_GetObjectItem(x, "index")->valueint == cJSON_GetArraySize(r.calls),
                       "tool call index");
                cJSON *t = cJSON_Duplicate(x, true);
                cJSON_DeleteItemFromObject(t, "index");
                cJSON_AddItemToArray(r.calls, t);
            }
            const char *fin = cJSON_GetStringValue(cJSON_GetObjectItem(c, "finish_reason"));
            if (fin) snprintf(r.finish, sizeof(r.finish), "%s", fin);
            lp_join(&r.lp, c);
            cJSON_Delete(o);
        }
        EXPECT(done, "the stream did not end with [DONE]");
    }
    http_resp_free(&h);
    return r;
}

static void check_reply(const reply *r, const char *how) {
    EXPECT(r->reasoning && !strcmp(r->reasoning, "Call the tool."), "%s: reasoning %s", how,
           r->reasoning ? r->reasoning : "(none)");
    EXPECT(!r->content, "%s: content %s", how, r->content);
    EXPECT(!strcmp(r->finish, "tool_calls"), "%s: finish_reason %s", how, r->finish);
    EXPECT(cJSON_GetArraySize(r->calls) == 1, "%s: %d tool calls", how,
           cJSON_GetArraySize(r->calls));
    const cJSON *c = cJSON_GetArrayItem(r->calls, 0), *fn = cJSON_GetObjectItem(c, "function");
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(c, "id"));
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(c, "type"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"));
    const char *args = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "arguments"));
    EXPECT(id && !strncmp(id, "call_", 5), "%s: id %s", how, id ? id : "(none)");
    EXPECT(type && !strcmp(type, "function"), "%s: type", how);
    EXPECT(name && !strcmp(name, "get_weather"), "%s: name %s", how, name ? name : "(none)");
    cJSON *a = args ? cJSON_Parse(args) : NULL,
          *w = cJSON_Parse("{\"city\": \"Paris\", \"days\": 2}");
    EXPECT(a && cJSON_Compare(a, w, true), "%s: arguments %s", how, args ? args : "(none)");
    cJSON_Delete(a);
    cJSON_Delete(w);
}

static int run(const char *fam) {
    char dir[4096], model[4200], args[8400], err[2048];
    make_tmpdir(dir, sizeof(dir));
    if (!train(dir, fam)) {
        printf("skipped: ../shared/templates is absent\n");
        rm_tree(dir);
        return MT_TEST_SKIP;
    }
    snprintf(model, sizeof(model), "%s/run/checkpoint-150", dir);
    srv_proc s;
    snprintf(args, sizeof(args), "--model '%s' --served-model-name m", model);
    srv_start(&s, dir, args);
    reply a = ask(s.port, false), b = ask(s.port, true);
    check_reply(&a, "response");
    check_reply(&b, "stream");
    EXPECT(cJSON_GetArraySize(a.lp) > 0 && cJSON_Compare(a.lp, b.lp, true),
           "the stream's logprobs (%d tokens) are not the response's (%d)",
           cJSON_GetArraySize(b.lp), cJSON_GetArraySize(a.lp));
    reply_free(&a);
    reply_free(&b);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");

    snprintf(args, sizeof(args), "--model '%s' --served-model-name m --reasoning-parser none",
             model);
    srv_start(&s, dir, args);
    char body[2048];
    snprintf(body, sizeof(body), request, with_tools, "");
    http_resp h = http_request(s.port, "POST", "/v1/chat/completions", NULL, body);
    cJSON *o = cJSON_Parse(h.body ? h.body : "");
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    const cJSON *m = cJSON_GetObjectItem(c, "message");
    const char *content = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
    EXPECT(content && strstr(content, "Call the tool.") && strstr(content, "get_weather") &&
               !cJSON_GetObjectItem(m, "reasoning_content") &&
               !cJSON_GetObjectItem(m, "tool_calls"),
           "--reasoning-parser none: %s", h.body ? h.body : "");
    EXPECT(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "finish_reason")), "stop"),
           "--reasoning-parser none: finish_reason");
    cJSON_Delete(o);
    http_resp_free(&h);
    EXPECT(srv_stop(&s, SIGTERM, 30) == 0, "not exit 0 after SIGTERM");

    const int rc = srv_refused(dir, model, "--reasoning-parser hermes", err, sizeof(err));
    EXPECT(rc != 0 && strstr(err, "--reasoning-parser hermes") &&
               strstr(err, "none|minimax_m2|minimax_m3"),
           "an unknown --reasoning-parser: exit %d, %s", rc, err);
    if (!mt_test_failures) rm_tree(dir);
    return MT_TEST_OK;
}

static int test_m2(void) { return run("m2"); }
static int test_m3(void) { return run("m3"); }

static const mt_test_case cases[] = {
    {"serve_reply_m2", test_m2},
    {"serve_reply_m3", test_m3},
};
MT_TEST_MAIN(cases)
