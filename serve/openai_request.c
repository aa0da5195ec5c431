/* openai_request.c: OpenAI request bodies into engine requests (serve/openai.h); the
 * responses: serve/openai.c. */
#include "serve/openai.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/file_io.h"
#include "data/chat.h"
#include "data/chat_cli.h"

/* The handlers run on the server's threads, and a template with its heap is not thread-safe
 * (jinja/jinja.h): renders take turns (they are short next to the decoding). */
static pthread_mutex_t api_chat_mu = PTHREAD_MUTEX_INITIALIZER;

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
