/* openai_reply.c: chat replies split into reasoning_content, content and tool_calls by the
 * model's reply format (models/reply.h), in responses and in streams (serve/openai.h). The
 * completion is decoded with its markup tokens (special tokens of the tokenizer) kept, the
 * final eos left out, cut before a stop string, then parsed with the request's rendered prompt
 * (whether the reply starts inside reasoning), its tools (the parameters' types) and
 * tool_choice "none" (markup stays content). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/file_io.h"
#include "models/reply.h"
#include "serve/openai.h"

bool mt_api_reply_active(const mt_api_env *env, const mt_api_call *call) {
    return call->kind == MT_API_CHAT && env->reply && mt_reply_format_active(env->reply);
}

char *mt_api_text(const mt_api_env *env, const mt_api_call *call, const mt_serve_req *r, int n) {
    return mt_reply_decode(mt_api_reply_active(env, call) ? env->reply : NULL, env->tok, r->out, n,
                           env->eos);
}

/* "call_" and 24 hex digits, distinct per call and index. */
static void call_id(const mt_api_call *call, int index, char out[32]) {
    uint64_t h = (uint64_t)call->id * 0x9E3779B97F4A7C15ull ^ (uint64_t)call->created;
    uint64_t a = h + (uint64_t)index * 0xBF58476D1CE4E5B9ull, b;
    a = (a ^ (a >> 30)) * 0xBF58476D1CE4E5B9ull;
    a = (a ^ (a >> 27)) * 0x94D049BB133111EBull;
    b = (a ^ (a >> 31)) * 0x9E3779B97F4A7C15ull;
    snprintf(out, 32, "call_%016llx%08llx", (unsigned long long)(a ^ (a >> 31)),
             (unsigned long long)(b >> 32));
}

/* One tool_calls entry; with_index: a stream delta's. */
static cJSON *tool_call(const mt_api_call *call, const mt_reply_call *c, int index,
                        bool with_index) {
    cJSON *o = cJSON_CreateObject();
    if (with_index) cJSON_AddNumberToObject(o, "index", index);
    char id[32];
    call_id(call, index, id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "type", "function");
    cJSON *f = cJSON_AddObjectToObject(o, "function");
    cJSON_AddStringToObject(f, "name", c->name);
    cJSON_AddStringToObject(f, "arguments", c->arguments);
    return o;
}

/* The reply's text: decoded with markup, cut before a stop string. */
static char *reply_text(const mt_api_env *env, const mt_api_call *call, const mt_serve_req *r) {
    char *text = mt_api_text(env, call, r, r->n_out);
    mt_serve_cut_stop(text, r->stops, r->n_stops);
    return text;
}

const char *mt_api_reply_message(const mt_api_env *env, const mt_api_call *call,
                                 const mt_serve_req *r, cJSON *m) {
    if (!mt_api_reply_active(env, call)) return NULL;
    char *text = reply_text(env, call, r);
    mt_reply p;
    mt_reply_parse(env->reply, call->chat_prompt, text, strlen(text), call->tools,
                   call->tool_calls_off, &p);
    free(text);
    if (p.reasoning)
        cJSON_AddStringToObject(m, "reasoning_content", p.reasoning);
    else
        cJSON_AddNullToObject(m, "reasoning_content");
    if (p.content || !p.n_calls)
        cJSON_AddStringToObject(m, "content", p.content ? p.content : "");
    else
        cJSON_AddNullToObject(m, "content");
    if (p.n_calls) {
        cJSON *tc = cJSON_AddArrayToObject(m, "tool_calls");
        for (int i = 0; i < p.n_calls; i++)
            cJSON_AddItemToArray(tc, tool_call(call, &p.calls[i], i, false));
    }
    const char *finish = p.n_calls ? "tool_calls" : r->stopped ? "stop" : "length";
    mt_reply_free(&p);
    return finish;
}

struct mt_api_reply_stream {
    mt_reply_stream *p;
    int n_calls;
};

mt_api_reply_stream *mt_api_reply_stream_new(const mt_api_env *env, const mt_api_call *call) {
    if (!mt_api_reply_active(env, call)) return NULL;
    mt_api_reply_stream *s = mt_calloc(1, sizeof(*s), "reply stream");
    s->p = mt_reply_stream_new(env->reply, call->chat_prompt, call->tools, call->tool_calls_off);
    return s;
}

static void add_event(mt_strbuf *b, char *ev) {
    mt_strbuf_append(b, ev, strlen(ev));
    free(ev);
}

/* A delta with one text field. */
static cJSON *text_delta(const char *key, const char *s, size_t n) {
    char *t = mt_malloc(n + 1, "stream delta");
    memcpy(t, s, n);
    t[n] = 0;
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, key, t);
    free(t);
    return d;
}

char *mt_api_reply_events(const mt_api_env *env, mt_api_call *call, mt_api_reply_stream *s,
                          const char *text, size_t len, bool done) {
    mt_reply_delta d;
    mt_reply_stream_feed(s->p, text, len, done, &d);
    mt_strbuf b = {0};
    mt_strbuf_append(&b, "", 0);
    if (d.reasoning_len)
        add_event(&b, mt_api_chunk_delta(
                          env, call, text_delta("reasoning_content", d.reasoning, d.reasoning_len),
                          NULL));
    if (d.content_len)
        add_event(&b, mt_api_chunk_delta(env, call, text_delta("content", d.content, d.content_len),
                                         NULL));
    for (int i = 0; i < d.n_calls; i++) {
        cJSON *delta = cJSON_CreateObject(), *tc = cJSON_AddArrayToObject(delta, "tool_calls");
        cJSON_AddItemToArray(tc, tool_call(call, &d.calls[i], d.first_call + i, true));
        add_event(&b, mt_api_chunk_delta(env, call, delta, NULL));
    }
    s->n_calls += d.n_calls;
    return b.p;
}

const char *mt_api_reply_finish(const mt_api_reply_stream *s, const mt_serve_req *r) {
    return s && s->n_calls ? "tool_calls" : r->stopped ? "stop" : "length";
}

void mt_api_reply_stream_free(mt_api_reply_stream *s) {
    if (!s) return;
    mt_reply_stream_free(s->p);
    free(s);
}
