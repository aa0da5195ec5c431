/* openai.c: response objects and stream chunks out, and the error object (serve/openai.h);
 * the requests: serve/openai_request.c. */
#include "serve/openai.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/chat.h"
#include "core/file_io.h"
#include "data/chat_cli.h"

int mt_api_fail(mt_api_error *err, int status, const char *code, const char *param, const char *fmt,
                ...) {
    err->status = status;
    err->type = status == 401   ? "authentication_error"
                : status == 404 ? "not_found_error"
                                : "invalid_request_error";
    err->code = code;
    err->param = param;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return -1;
}

char *mt_api_error_json(const mt_api_error *err) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", err->message);
    cJSON_AddStringToObject(e, "type", err->type);
    if (err->param)
        cJSON_AddStringToObject(e, "param", err->param);
    else
        cJSON_AddNullToObject(e, "param");
    if (err->code)
        cJSON_AddStringToObject(e, "code", err->code);
    else
        cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    MT_CHECK(s, "serve: cannot format an error");
    return s;
}

char *mt_api_completion_text(const mt_api_env *env, const mt_serve_req *r) {
    char *text = mt_tokenizer_decode(env->tok, r->out, r->n_out, true);
    mt_serve_cut_stop(text, r->stops, r->n_stops);
    return text;
}

/* ---- responses ---- */

static void api_usage(cJSON *o, const mt_api_call *call) {
    long p = 0, c = 0;
    for (int i = 0; i < call->n; i++) {
        p += call->reqs[i]->n_prompt;
        c += call->reqs[i]->n_out;
    }
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)p);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)c);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(p + c));
}

static cJSON *api_head(const mt_api_env *env, const mt_api_call *call, const char *object) {
    cJSON *o = cJSON_CreateObject();
    char id[64];
    snprintf(id, sizeof(id), "%s-%ld", call->kind == MT_API_CHAT ? "chatcmpl" : "cmpl", call->id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)call->created);
    cJSON_AddStringToObject(o, "model", env->model_name);
    return o;
}

/* One token's entries in the legacy logprobs object. */
static void api_lp_token(const mt_api_env *env, cJSON *lp, int32_t id, float value,
                         const int32_t *top, const float *top_lp, int k, long *offset) {
    char *s = mt_tokenizer_decode(env->tok, &id, 1, false);
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "tokens"), cJSON_CreateString(s));
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "text_offset"),
                         cJSON_CreateNumber((double)*offset));
    *offset += (long)strlen(s);
    free(s);
    cJSON *tl = cJSON_GetObjectItem(lp, "token_logprobs"),
          *tt = cJSON_GetObjectItem(lp, "top_logprobs");
    if (isnan(value)) { /* the prompt's first token: nothing predicts it */
        cJSON_AddItemToArray(tl, cJSON_CreateNull());
        cJSON_AddItemToArray(tt, cJSON_CreateNull());
        return;
    }
    cJSON_AddItemToArray(tl, cJSON_CreateNumber(value));
    cJSON *d = cJSON_CreateObject();
    for (int j = 0; j < k; j++) {
        char *t = mt_tokenizer_decode(env->tok, &top[j], 1, false);
        if (!cJSON_GetObjectItemCaseSensitive(d, t)) cJSON_AddNumberToObject(d, t, top_lp[j]);
        free(t);
    }
    cJSON_AddItemToArray(tt, d);
}

/* The legacy logprobs object of r's prompt tokens (with prompt) and output tokens [from, to),
 * text offsets counted from *offset. */
static cJSON *api_logprobs(const mt_api_env *env, const mt_serve_req *r, bool prompt, int from,
                           int to, long *offset) {
    cJSON *lp = cJSON_CreateObject();
    cJSON_AddArrayToObject(lp, "tokens");
    cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON_AddArrayToObject(lp, "top_logprobs");
    cJSON_AddArrayToObject(lp, "text_offset");
    const int k = r->logprobs;
    for (int t = 0; prompt && t < r->n_prompt; t++)
        api_lp_token(env, lp, r->prompt[t], r->prompt_lp[t], r->prompt_top + t * MT_SERVE_MAX_TOP,
                     r->prompt_top_lp + t * MT_SERVE_MAX_TOP, k, offset);
    for (int t = from; t < to; t++)
        api_lp_token(env, lp, r->out[t], r->out_lp[t], r->out_top + t * MT_SERVE_MAX_TOP,
                     r->out_top_lp + t * MT_SERVE_MAX_TOP, k, offset);
    return lp;
}

/* One token as OpenAI's chat logprobs give it: {token, logprob, bytes}. */
static cJSON *api_chat_token(const mt_api_env *env, int32_t id, float value) {
    cJSON *e = cJSON_CreateObject();
    char *s = mt_tokenizer_decode(env->tok, &id, 1, false);
    cJSON_AddStringToObject(e, "token", s);
    cJSON_AddNumberToObject(e, "logprob", value);
    cJSON *b = cJSON_AddArrayToObject(e, "bytes");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        cJSON_AddItemToArray(b, cJSON_CreateNumber(*c));
    free(s);
    return e;
}

/* The chat logprobs of r's output tokens [from, to): {"content": [{token, logprob, bytes,
 * top_logprobs: [{token, logprob, bytes}]}]}. */
static cJSON *api_chat_logprobs(const mt_api_env *env, const mt_serve_req *r, int from, int to) {
    cJSON *lp = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(lp, "content");
    for (int t = from; t < to; t++) {
        cJSON *e = api_chat_token(env, r->out[t], r->out_lp[t]);
        cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int j = 0; j < r->logprobs; j++)
            cJSON_AddItemToArray(top, api_chat_token(env, r->out_top[t * MT_SERVE_MAX_TOP + j],
                                                     r->out_top_lp[t * MT_SERVE_MAX_TOP + j]));
        cJSON_AddItemToArray(content, e);
    }
    return lp;
}

static char *api_print(cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    MT_CHECK(s, "serve: cannot format a response");
    return s;
}

char *mt_api_response(const mt_api_env *env, const mt_api_call *call) {
    const bool chat = call->kind == MT_API_CHAT;
    cJSON *o = api_head(env, call, chat ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    for (int i = 0; i < call->n; i++) {
        const mt_serve_req *r = call->reqs[i];
        char *text = mt_api_completion_text(env, r);
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", i);
        const char *finish = NULL; /* a split reply's (serve/openai_reply.c) */
        if (chat) {
            cJSON *m = cJSON_AddObjectToObject(c, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            if (!(finish = mt_api_reply_message(env, call, r, m)))
                cJSON_AddStringToObject(m, "content", text);
            if (r->logprobs >= 0)
                cJSON_AddItemToObject(c, "logprobs", api_chat_logprobs(env, r, 0, r->n_out));
            else
                cJSON_AddNullToObject(c, "logprobs");
        } else {
            mt_strbuf t = {0};
            if (r->echo) mt_strbuf_append(&t, call->prompt_text[i], strlen(call->prompt_text[i]));
            mt_strbuf_append(&t, text, strlen(text));
            cJSON_AddStringToObject(c, "text", t.p ? t.p : "");
            mt_strbuf_free(&t);
            long offset = 0;
            if (r->logprobs >= 0)
                cJSON_AddItemToObject(c, "logprobs",
                                      api_logprobs(env, r, r->echo, 0, r->n_out, &offset));
            else
                cJSON_AddNullToObject(c, "logprobs");
        }
        cJSON_AddStringToObject(c, "finish_reason",
                                finish       ? finish
                                : r->stopped ? "stop"
                                             : "length");
        cJSON_AddItemToArray(choices, c);
        free(text);
    }
    api_usage(o, call);
    return api_print(o);
}

/* `data: JSON\n\n` of json (freed). */
static char *api_event(char *json) {
    const size_t n = strlen(json);
    char *event = mt_malloc(n + 9, "stream event");
    memcpy(event, "data: ", 6);
    memcpy(event + 6, json, n);
    memcpy(event + 6 + n, "\n\n", 3);
    free(json);
    return event;
}

/* A stream chunk's end: choice c's finish_reason into o's choices, the usage with the finish
 * (unless include_usage sends it in a chunk of its own), o as an event (o freed). */
static char *api_chunk_event(const mt_api_call *call, cJSON *o, cJSON *c, const char *finish) {
    if (finish)
        cJSON_AddStringToObject(c, "finish_reason", finish);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
    if (finish && !call->include_usage) api_usage(o, call);
    return api_event(api_print(o));
}

char *mt_api_chunk(const mt_api_env *env, mt_api_call *call, const char *delta, bool first,
                   const char *finish) {
    if (call->kind == MT_API_CHAT) {
        cJSON *d = cJSON_CreateObject();
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        if (!finish) cJSON_AddStringToObject(d, "content", delta);
        return mt_api_chunk_delta(env, call, d, finish);
    }
    const mt_serve_req *r = call->reqs[0];
    cJSON *o = api_head(env, call, "text_completion");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    /* echo: the prompt (and its logprobs) goes out with the first chunk */
    const bool echo = r->echo && !call->echo_sent;
    mt_strbuf t = {0};
    if (echo) mt_strbuf_append(&t, call->prompt_text[0], strlen(call->prompt_text[0]));
    mt_strbuf_append(&t, delta, strlen(delta));
    cJSON_AddStringToObject(c, "text", t.p ? t.p : "");
    mt_strbuf_free(&t);
    if (r->logprobs >= 0 && (call->lp_to > call->lp_from || echo))
        cJSON_AddItemToObject(
            c, "logprobs",
            api_logprobs(env, r, echo, call->lp_from, call->lp_to, &call->lp_offset));
    else
        cJSON_AddNullToObject(c, "logprobs");
    call->echo_sent = true;
    call->lp_from = call->lp_to;
    return api_chunk_event(call, o, c, finish);
}

char *mt_api_chunk_delta(const mt_api_env *env, mt_api_call *call, cJSON *delta,
                         const char *finish) {
    cJSON *o = api_head(env, call, "chat.completion.chunk");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON_AddItemToObject(c, "delta", delta);
    const mt_serve_req *r = call->reqs[0];
    if (r->logprobs >= 0 && call->lp_to > call->lp_from) /* the tokens decoded since the last */
        cJSON_AddItemToObject(c, "logprobs", api_chat_logprobs(env, r, call->lp_from, call->lp_to));
    call->lp_from = call->lp_to;
    return api_chunk_event(call, o, c, finish);
}

char *mt_api_usage_chunk(const mt_api_env *env, const mt_api_call *call) {
    cJSON *o = api_head(env, call,
                        call->kind == MT_API_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(o, "choices");
    api_usage(o, call);
    return api_event(api_print(o));
}
