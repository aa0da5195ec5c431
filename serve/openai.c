/* openai.c: OpenAI request bodies in, response objects out (serve/openai.h). */
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

/* The handlers run on the server's threads, and a template with its heap is not thread-safe
 * (jinja/jinja.h): renders take turns (they are short next to the decoding). */
static pthread_mutex_t api_chat_mu = PTHREAD_MUTEX_INITIALIZER;

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

/* ---- fields ---- */

/* An optional number field: absent or null keeps *out; another type is an error. */
static int api_number(const cJSON *o, const char *key, double lo, double hi, double *out,
                      mt_api_error *err) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsNumber(x) || !(x->valuedouble >= lo && x->valuedouble <= hi))
        return mt_api_fail(err, 400, NULL, key, "'%s' must be a number in [%g, %g]", key, lo, hi);
    *out = x->valuedouble;
    return 0;
}

static int api_int(const cJSON *o, const char *key, long lo, long hi, long *out,
                   mt_api_error *err) {
    double v = (double)*out;
    if (api_number(o, key, (double)lo, (double)hi, &v, err)) {
        snprintf(err->message, sizeof(err->message), "'%s' must be an integer in [%ld, %ld]", key,
                 lo, hi);
        return -1;
    }
    if (v != floor(v))
        return mt_api_fail(err, 400, NULL, key, "'%s' must be an integer, not %g", key, v);
    *out = (long)v;
    return 0;
}

static int api_bool(const cJSON *o, const char *key, bool *out, mt_api_error *err) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsBool(x)) return mt_api_fail(err, 400, NULL, key, "'%s' must be a boolean", key);
    *out = cJSON_IsTrue(x);
    return 0;
}

/* stop: a string or a list of up to 4, none empty (an empty stop string is found at once: every
 * completion would end after its first token). */
static int api_stops(const cJSON *o, mt_serve_req *r, mt_api_error *err) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (!x || cJSON_IsNull(x)) return 0;
    if (cJSON_IsString(x)) {
        if (!*x->valuestring)
            return mt_api_fail(err, 400, NULL, "stop", "'stop' must not be an empty string");
        r->stops[r->n_stops++] = strdup(x->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) > MT_SERVE_MAX_STOPS)
        return mt_api_fail(err, 400, NULL, "stop", "'stop' must be a string or a list of up to %d",
                           MT_SERVE_MAX_STOPS);
    int i = 0;
    for (const cJSON *s = x->child; s; s = s->next, i++) {
        if (!cJSON_IsString(s))
            return mt_api_fail(err, 400, NULL, "stop", "'stop' must hold strings");
        if (!*s->valuestring)
            return mt_api_fail(err, 400, NULL, "stop", "stop[%d] must not be an empty string", i);
        r->stops[r->n_stops++] = strdup(s->valuestring);
    }
    return 0;
}

/* The byte offset of the first NUL character in body's strings (a raw 0 byte, or the escape
 * \u0000), or -1. cJSON would keep it and every C string of the request would end there: a
 * prompt cut short without a word. */
static long api_nul_at(const char *body, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (body[i] == '\0') return (long)i;
        if (body[i] != '\\' || i + 1 >= len) continue;
        if (body[i + 1] == 'u' && i + 6 <= len && !memcmp(body + i + 2, "0000", 4)) return (long)i;
        i++; /* the escaped character: a backslash escapes the next one only */
    }
    return -1;
}

/* Text to ids as training tokenizes (no BOS added); NULL after err. */
static int32_t *api_tokenize(const mt_api_env *env, const char *text, size_t len, int *n,
                             const char *param, mt_api_error *err) {
    mt_token_buf buf = {0};
    char msg[MT_ERR_LEN];
    if (mt_tokenizer_encode_err(env->tok, text, len, &buf, msg, sizeof(msg)) < 0) {
        mt_api_fail(err, 400, NULL, param, "'%s' does not tokenize: %s", param, msg);
        mt_token_buf_free(&buf);
        return NULL;
    }
    int32_t *ids = mt_malloc(sizeof(int32_t) * (size_t)(buf.n > 0 ? buf.n : 1), "prompt ids");
    if (buf.n > 0) memcpy(ids, buf.ids, sizeof(int32_t) * (size_t)buf.n); /* "": no buffer */
    *n = (int)buf.n;
    mt_token_buf_free(&buf);
    return ids;
}

/* A chat message's content: a string, or a list of {"type": "text", "text": ...} parts (their
 * texts joined). Returns a malloc'ed string or NULL after err. */
static char *api_content(const cJSON *m, int i, mt_api_error *err) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (!cJSON_IsArray(c)) {
        mt_api_fail(err, 400, NULL, "messages", "messages[%d].content must be a string or parts",
                    i);
        return NULL;
    }
    mt_strbuf b = {0};
    for (const cJSON *p = c->child; p; p = p->next) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(t)) {
            mt_api_fail(err, 400, NULL, "messages", "messages[%d].content: a part without text", i);
            mt_strbuf_free(&b);
            return NULL;
        }
        mt_strbuf_append(&b, t->valuestring, strlen(t->valuestring));
    }
    char *s = strdup(b.p ? b.p : "");
    mt_strbuf_free(&b);
    return s;
}

/* messages rendered with the chat template and the generation prompt, tokenized. A template
 * that refuses them (raise_exception, a role it does not know) is the request's error. */
static int32_t *api_chat_prompt(const mt_api_env *env, const cJSON *body, int *n,
                                char **prompt_text, mt_api_error *err) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(body, "messages");
    const int nm = cJSON_IsArray(ms) ? cJSON_GetArraySize(ms) : 0;
    if (nm == 0) {
        mt_api_fail(err, 400, NULL, "messages", "'messages' must be a non-empty list");
        return NULL;
    }
    mt_chat_msg *msgs = mt_calloc((size_t)nm, sizeof(mt_chat_msg), "chat messages");
    int i = 0;
    int32_t *ids = NULL;
    for (const cJSON *m = ms->child; m; m = m->next, i++) {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
        if (!role ||
            (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))) {
            mt_api_fail(err, 400, NULL, "messages",
                        "messages[%d].role must be \"system\", \"user\" or \"assistant\"", i);
            goto done;
        }
        char *text = api_content(m, i, err);
        if (!text) goto done;
        msgs[i] = (mt_chat_msg){.role = role[0] == 's'   ? MT_CHAT_SYSTEM
                                        : role[0] == 'u' ? MT_CHAT_USER
                                                         : MT_CHAT_ASSISTANT,
                                .text = text,
                                .len = strlen(text)};
    }
    mt_chat_rendered r = {0};
    char why[MT_ERR_LEN];
    pthread_mutex_lock(&api_chat_mu);
    const int rc = mt_chat_render_msgs(env->chat, msgs, nm, &r, why, sizeof(why));
    pthread_mutex_unlock(&api_chat_mu);
    /* the client is told the problem, not where the server keeps its template */
    const char *origin = mt_chat_template_origin(env->chat), *at = why;
    if (!strncmp(why, origin, strlen(origin)) && why[strlen(origin)] == ':')
        at = why + strlen(origin);
    if (rc != 0)
        mt_api_fail(err, 400, NULL, "messages",
                    "the model's chat template cannot render 'messages': %s%s",
                    at == why ? "" : "template", at);
    else if ((ids = api_tokenize(env, r.text, r.len, n, "messages", err)))
        *prompt_text = strdup(r.text);
    mt_chat_rendered_free(&r);
done:
    for (int j = 0; j < nm; j++) free((char *)msgs[j].text);
    free(msgs);
    return ids;
}

/* One prompt of /v1/completions: a string or a list of token ids. */
static int32_t *api_prompt(const mt_api_env *env, const cJSON *p, int *n, mt_api_error *err) {
    if (cJSON_IsString(p))
        return api_tokenize(env, p->valuestring, strlen(p->valuestring), n, "prompt", err);
    const int k = cJSON_GetArraySize(p);
    int32_t *ids = mt_malloc(sizeof(int32_t) * (size_t)(k > 0 ? k : 1), "prompt ids");
    int i = 0;
    for (const cJSON *x = p->child; x; x = x->next, i++)
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
            x->valuedouble >= env->vocab_size) {
            free(ids);
            mt_api_fail(err, 400, NULL, "prompt", "prompt token %d is not an id in [0, %d)", i,
                        env->vocab_size);
            return NULL;
        } else
            ids[i] = (int32_t)x->valuedouble;
    *n = k;
    return ids;
}

/* The prompts of a /v1/completions body: one string or id list, or a list of them. */
static int api_prompts(const cJSON *body, const cJSON **out, int *n, mt_api_error *err) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "prompt");
    if (cJSON_IsString(p) || (cJSON_IsArray(p) && p->child && cJSON_IsNumber(p->child))) {
        out[0] = p;
        *n = 1;
        return 0;
    }
    if (!cJSON_IsArray(p) || !p->child || cJSON_GetArraySize(p) > MT_API_MAX_PROMPTS)
        return mt_api_fail(err, 400, NULL, "prompt",
                           "'prompt' must be a string, a list of token ids, or a list of up to %d "
                           "of those",
                           MT_API_MAX_PROMPTS);
    *n = 0;
    for (const cJSON *x = p->child; x; x = x->next) {
        if (!cJSON_IsString(x) && !(cJSON_IsArray(x) && x->child))
            return mt_api_fail(err, 400, NULL, "prompt",
                               "prompt[%d] must be a string or a non-empty list of ids", *n);
        out[(*n)++] = x;
    }
    return 0;
}

int mt_api_parse(const mt_api_env *env, mt_api_kind kind, const char *body, size_t len,
                 mt_api_call *call, mt_api_error *err) {
    static long next_id = 1;
    memset(call, 0, sizeof(*call));
    call->kind = kind;
    call->id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
    call->created = (long)time(NULL);
    const long nul = api_nul_at(body, len);
    if (nul >= 0)
        return mt_api_fail(err, 400, NULL, NULL,
                           "the body holds a NUL character (\\u0000) at byte %ld: no text of a "
                           "request may contain one",
                           nul);
    cJSON *o = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return mt_api_fail(err, 400, NULL, NULL, "the body is not a JSON object");
    }
    char dup[256];
    if (mt_json_duplicate_key(o, NULL, dup, sizeof(dup))) {
        /* cJSON would take the first, Python's json the last: neither is surely what was meant */
        cJSON_Delete(o);
        return mt_api_fail(err, 400, NULL, NULL, "the body repeats the key '%s'", dup);
    }
    int rc = -1;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    double temperature = 1, top_p = 1;
    long max_tokens = -1, n = 1, top_k = 0, logprobs = -1;
    long seed = (long)(time(NULL) ^ (call->id * 0x9e3779b9L));
    bool echo = false, want_lp = false;
    if (!cJSON_IsString(model)) {
        mt_api_fail(err, 400, NULL, "model", "'model' must be a string (GET /v1/models)");
        goto done;
    }
    if (strcmp(model->valuestring, env->model_name)) {
        mt_api_fail(err, 404, "model_not_found", "model",
                    "the model '%s' does not exist; this server has '%s'", model->valuestring,
                    env->model_name);
        goto done;
    }
    const char *mt_key = kind == MT_API_CHAT && cJSON_GetObjectItem(o, "max_completion_tokens")
                             ? "max_completion_tokens"
                             : "max_tokens";
    if (api_number(o, "temperature", 0, 2, &temperature, err) ||
        api_number(o, "top_p", 1e-9, 1, &top_p, err) ||
        api_int(o, mt_key, 0, 1000000000L, &max_tokens, err) || api_int(o, "n", 1, 1, &n, err) ||
        api_int(o, "top_k", 0, 1L << 30, &top_k, err) ||
        api_int(o, "seed", -(1L << 62), 1L << 62, &seed, err) ||
        api_bool(o, "stream", &call->stream, err))
        goto done;
    if (kind == MT_API_COMPLETION) {
        if (api_bool(o, "echo", &echo, err) ||
            api_int(o, "logprobs", 0, MT_SERVE_MAX_TOP, &logprobs, err))
            goto done;
    } else if (api_bool(o, "logprobs", &want_lp, err) || want_lp) {
        if (want_lp) mt_api_fail(err, 400, NULL, "logprobs", "chat logprobs are not supported");
        goto done;
    }
    if (max_tokens == 0 && !echo) { /* -1: absent or null, the default below */
        mt_api_fail(err, 400, NULL, mt_key, "'%s' must be at least 1 (0 only with echo)", mt_key);
        goto done;
    }
    const cJSON *prompts[MT_API_MAX_PROMPTS];
    int np = 1;
    if (kind == MT_API_COMPLETION && api_prompts(o, prompts, &np, err)) goto done;
    if (call->stream && np > 1) {
        mt_api_fail(err, 400, NULL, "stream", "'stream' takes one prompt");
        goto done;
    }
    for (int i = 0; i < np; i++) {
        int T = 0;
        int32_t *ids = kind == MT_API_CHAT ? api_chat_prompt(env, o, &T, &call->chat_prompt, err)
                                           : api_prompt(env, prompts[i], &T, err);
        if (!ids) goto done;
        if (T < 1 || T >= env->t_max) {
            free(ids);
            mt_api_fail(err, 400, "context_length_exceeded",
                        kind == MT_API_CHAT ? "messages" : "prompt",
                        "the prompt is %d tokens; this server's context is %d (1 to %d prompt "
                        "tokens)",
                        T, env->t_max, env->t_max - 1);
            goto done;
        }
        /* default: OpenAI's 16 for completions, the rest of the context for chat */
        long mt = max_tokens >= 0 ? max_tokens : kind == MT_API_COMPLETION ? 16 : env->t_max - T;
        if (T + mt > env->t_max) {
            free(ids);
            mt_api_fail(err, 400, "context_length_exceeded", mt_key,
                        "%d prompt tokens + %ld completion tokens exceed this server's context "
                        "of %d",
                        T, mt, env->t_max);
            goto done;
        }
        mt_serve_req *r = mt_serve_req_new(ids, T);
        call->reqs[call->n++] = r;
        if (echo) call->prompt_text[i] = mt_tokenizer_decode(env->tok, ids, T, false);
        free(ids);
        r->max_tokens = (int)mt;
        r->opts = (mt_gen_opts){.temperature = (float)temperature,
                                .top_k = (int)top_k,
                                .top_p = (float)top_p,
                                .seed = (uint64_t)seed,
                                .eos = env->eos};
        r->logprobs = (int)logprobs;
        r->echo = echo;
        r->group = call->id;
        if (api_stops(o, r, err)) goto done;
    }
    rc = 0;
done:
    cJSON_Delete(o);
    if (rc) mt_api_call_free(call);
    return rc;
}

void mt_api_call_free(mt_api_call *call) {
    for (int i = 0; i < call->n; i++) {
        mt_serve_req_free(call->reqs[i]);
        free(call->prompt_text[i]);
    }
    call->n = 0;
    free(call->chat_prompt);
    cJSON_Delete(call->tools);
    call->chat_prompt = NULL;
    call->tools = NULL;
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

static cJSON *api_logprobs(const mt_api_env *env, const mt_serve_req *r) {
    cJSON *lp = cJSON_CreateObject();
    cJSON_AddArrayToObject(lp, "tokens");
    cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON_AddArrayToObject(lp, "top_logprobs");
    cJSON_AddArrayToObject(lp, "text_offset");
    long offset = 0;
    const int k = r->logprobs;
    for (int t = 0; r->echo && t < r->n_prompt; t++)
        api_lp_token(env, lp, r->prompt[t], r->prompt_lp[t], r->prompt_top + t * MT_SERVE_MAX_TOP,
                     r->prompt_top_lp + t * MT_SERVE_MAX_TOP, k, &offset);
    for (int t = 0; t < r->n_out; t++)
        api_lp_token(env, lp, r->out[t], r->out_lp[t], r->out_top + t * MT_SERVE_MAX_TOP,
                     r->out_top_lp + t * MT_SERVE_MAX_TOP, k, &offset);
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
        } else {
            mt_strbuf t = {0};
            if (r->echo) mt_strbuf_append(&t, call->prompt_text[i], strlen(call->prompt_text[i]));
            mt_strbuf_append(&t, text, strlen(text));
            cJSON_AddStringToObject(c, "text", t.p ? t.p : "");
            mt_strbuf_free(&t);
            if (r->logprobs >= 0)
                cJSON_AddItemToObject(c, "logprobs", api_logprobs(env, r));
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

/* o as a server-sent event `data: {json}\n\n` (o freed). */
static char *api_event(cJSON *o) {
    char *json = api_print(o);
    const size_t n = strlen(json);
    char *event = mt_malloc(n + 9, "stream event");
    memcpy(event, "data: ", 6);
    memcpy(event + 6, json, n);
    memcpy(event + 6 + n, "\n\n", 3);
    free(json);
    return event;
}

char *mt_api_chunk(const mt_api_env *env, const mt_api_call *call, const char *delta, bool first,
                   const char *finish) {
    const bool chat = call->kind == MT_API_CHAT;
    cJSON *o = api_head(env, call, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        if (!finish) cJSON_AddStringToObject(d, "content", delta);
    } else {
        cJSON_AddStringToObject(c, "text", delta);
        cJSON_AddNullToObject(c, "logprobs");
    }
    if (finish)
        cJSON_AddStringToObject(c, "finish_reason", finish);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
    if (finish) api_usage(o, call);
    return api_event(o);
}

char *mt_api_chunk_delta(const mt_api_env *env, const mt_api_call *call, cJSON *delta,
                         const char *finish) {
    cJSON *o = api_head(env, call, "chat.completion.chunk");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON_AddItemToObject(c, "delta", delta);
    if (finish)
        cJSON_AddStringToObject(c, "finish_reason", finish);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
    if (finish) api_usage(o, call);
    return api_event(o);
}
