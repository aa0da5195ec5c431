/* openai_request.c: OpenAI request bodies into engine requests (serve/openai.h); the
 * responses: serve/openai.c. */
#include "serve/openai_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/file_io.h"
#include "data/chat.h"

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

/* ---- the fields each endpoint knows: anything else is refused by name ---- */

enum { K_CHAT = 1, K_COMPL = 2, K_BOTH = 3 };
typedef enum {
    F_IMPL,     /* implemented (read by the parser) */
    F_IDENTITY, /* accepted and not used: the caller's id (a string) */
    F_ZERO,     /* only 0 (or null): the no-op value */
    F_EMPTY,    /* only {} (or null) */
    F_ONE,      /* only 1 (or null) */
    F_NOSTR,    /* only "" (or null) */
    F_TRUE,     /* only true (or null) */
    F_TEXTFMT,  /* only {"type": "text"} (or null) */
} api_rule;

static const struct {
    const char *name;
    int kinds;
    api_rule rule;
} api_fields[] = {
    {"model", K_BOTH, F_IMPL},
    {"temperature", K_BOTH, F_IMPL},
    {"top_p", K_BOTH, F_IMPL},
    {"top_k", K_BOTH, F_IMPL},
    {"max_tokens", K_BOTH, F_IMPL},
    {"n", K_BOTH, F_IMPL},
    {"stream", K_BOTH, F_IMPL},
    {"stream_options", K_BOTH, F_IMPL},
    {"stop", K_BOTH, F_IMPL},
    {"seed", K_BOTH, F_IMPL},
    {"logprobs", K_BOTH, F_IMPL},
    {"user", K_BOTH, F_IDENTITY},
    {"presence_penalty", K_BOTH, F_ZERO},
    {"frequency_penalty", K_BOTH, F_ZERO},
    {"logit_bias", K_BOTH, F_EMPTY},
    {"messages", K_CHAT, F_IMPL},
    {"max_completion_tokens", K_CHAT, F_IMPL},
    {"top_logprobs", K_CHAT, F_IMPL},
    {"tools", K_CHAT, F_IMPL},
    {"tool_choice", K_CHAT, F_IMPL},
    {"documents", K_CHAT, F_IMPL},
    {"chat_template_kwargs", K_CHAT, F_IMPL},
    {"add_generation_prompt", K_CHAT, F_IMPL},
    {"continue_final_message", K_CHAT, F_IMPL},
    {"parallel_tool_calls", K_CHAT, F_TRUE},
    {"response_format", K_CHAT, F_TEXTFMT},
    {"prompt", K_COMPL, F_IMPL},
    {"echo", K_COMPL, F_IMPL},
    {"best_of", K_COMPL, F_ONE},
    {"suffix", K_COMPL, F_NOSTR},
};

/* 400 unsupported_field naming the body's key (copied: the body is freed before the answer). */
__attribute__((format(printf, 3, 4))) static int api_fail_key(mt_api_error *err, const char *key,
                                                              const char *fmt, ...) {
    err->status = 400;
    err->type = "invalid_request_error";
    err->code = "unsupported_field";
    snprintf(err->param_own, sizeof(err->param_own), "%s", key);
    err->param = err->param_own;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return -1;
}

/* Whether x holds the value that does nothing under rule. */
static bool api_noop(const cJSON *x, api_rule rule) {
    if (cJSON_IsNull(x)) return true;
    switch (rule) {
    case F_ZERO:
        return cJSON_IsNumber(x) && x->valuedouble == 0;
    case F_ONE:
        return cJSON_IsNumber(x) && x->valuedouble == 1;
    case F_EMPTY:
        return cJSON_IsObject(x) && !x->child;
    case F_NOSTR:
        return cJSON_IsString(x) && !x->valuestring[0];
    case F_TRUE:
        return cJSON_IsTrue(x);
    case F_TEXTFMT: {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(x, "type");
        return cJSON_IsObject(x) && cJSON_GetArraySize(x) == 1 && cJSON_IsString(t) &&
               !strcmp(t->valuestring, "text");
    }
    case F_IDENTITY:
        return cJSON_IsString(x);
    default:
        return true;
    }
}

/* Every key of the body known to this endpoint, and the ones known but not implemented at
 * their no-op value; otherwise 400 naming the field. */
static int api_known_fields(const cJSON *o, mt_api_kind kind, mt_api_error *err) {
    const int k = kind == MT_API_CHAT ? K_CHAT : K_COMPL;
    for (const cJSON *x = o->child; x; x = x->next) {
        int f = -1;
        for (int i = 0; i < (int)(sizeof(api_fields) / sizeof(api_fields[0])) && f < 0; i++)
            if ((api_fields[i].kinds & k) && !strcmp(api_fields[i].name, x->string)) f = i;
        if (f < 0)
            return api_fail_key(err, x->string, "unsupported field '%.100s'%s", x->string,
                                !strcmp(x->string, "functions") ||
                                        !strcmp(x->string, "function_call")
                                    ? " (the deprecated function calling: use 'tools' and "
                                      "'tool_choice')"
                                    : " (this server refuses what it does not implement)");
        if (!api_noop(x, api_fields[f].rule)) {
            /* what each rule accepts: the value that changes nothing */
            static const char *const noop[] = {"",  "",     "0",    "{}",
                                               "1", "\"\"", "true", "{\"type\": \"text\"}"};
            if (api_fields[f].rule == F_IDENTITY)
                return mt_api_fail(err, 400, NULL, api_fields[f].name, "'%s' must be a string",
                                   api_fields[f].name);
            return mt_api_fail(err, 400, "unsupported_field", api_fields[f].name,
                               "'%s' is not supported: only %s (or null), which changes nothing, "
                               "is accepted",
                               api_fields[f].name, noop[api_fields[f].rule]);
        }
    }
    return 0;
}

/* stream_options: {"include_usage": bool} (vLLM's continuous_usage_stats only false). */
static int api_stream_options(const cJSON *o, mt_api_call *call, mt_api_error *err) {
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "stream_options");
    if (!so || cJSON_IsNull(so)) return 0;
    if (!call->stream)
        return mt_api_fail(err, 400, NULL, "stream_options",
                           "'stream_options' is only allowed with \"stream\": true");
    if (!cJSON_IsObject(so))
        return mt_api_fail(err, 400, NULL, "stream_options", "'stream_options' must be an object");
    for (const cJSON *x = so->child; x; x = x->next) {
        if (!strcmp(x->string, "include_usage") && (cJSON_IsBool(x) || cJSON_IsNull(x)))
            call->include_usage = cJSON_IsTrue(x);
        else if (!strcmp(x->string, "continuous_usage_stats") && !cJSON_IsTrue(x) &&
                 (cJSON_IsBool(x) || cJSON_IsNull(x)))
            continue;
        else
            return strcmp(x->string, "include_usage")
                       ? mt_api_fail(err, 400, "unsupported_field", "stream_options",
                                     "stream_options.%.100s is not supported (include_usage is)",
                                     x->string)
                       : mt_api_fail(err, 400, NULL, "stream_options",
                                     "stream_options.include_usage must be a boolean");
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

/* The body as a JSON object without NUL characters or repeated keys; NULL after err. */
static cJSON *api_body(const char *body, size_t len, mt_api_error *err) {
    const long nul = api_nul_at(body, len);
    if (nul >= 0) {
        mt_api_fail(err, 400, NULL, NULL,
                    "the body holds a NUL character (\\u0000) at byte %ld: no text of a "
                    "request may contain one",
                    nul);
        return NULL;
    }
    cJSON *o = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        mt_api_fail(err, 400, NULL, NULL, "the body is not a JSON object");
        return NULL;
    }
    char dup[256];
    if (mt_json_duplicate_key(o, NULL, dup, sizeof(dup))) {
        /* cJSON would take the first, Python's json the last: neither is surely what was meant */
        cJSON_Delete(o);
        mt_api_fail(err, 400, NULL, NULL, "the body repeats the key '%s'", dup);
        return NULL;
    }
    return o;
}

int mt_api_parse(const mt_api_env *env, mt_api_kind kind, const char *body, size_t len,
                 mt_api_call *call, mt_api_error *err) {
    static long next_id = 1;
    memset(call, 0, sizeof(*call));
    call->kind = kind;
    call->id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
    call->created = (long)time(NULL);
    cJSON *o = api_body(body, len, err);
    if (!o) return -1;
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
    if (api_known_fields(o, kind, err)) goto done;
    const char *mt_key = kind == MT_API_CHAT && cJSON_GetObjectItem(o, "max_completion_tokens")
                             ? "max_completion_tokens"
                             : "max_tokens";
    if (api_number(o, "temperature", 0, 2, &temperature, err) ||
        api_number(o, "top_p", 1e-9, 1, &top_p, err) ||
        api_int(o, mt_key, 0, 1000000000L, &max_tokens, err) ||
        api_int(o, "n", 1, 1L << 30, &n, err) || api_int(o, "top_k", 0, 1L << 30, &top_k, err) ||
        api_int(o, "seed", -(1L << 62), 1L << 62, &seed, err) ||
        api_bool(o, "stream", &call->stream, err) || api_stream_options(o, call, err))
        goto done;
    if (n != 1) {
        mt_api_fail(err, 400, NULL, "n", "'n' > 1 is not supported (one choice per prompt)");
        goto done;
    }
    if (kind == MT_API_COMPLETION) {
        if (api_bool(o, "echo", &echo, err) ||
            api_int(o, "logprobs", 0, MT_SERVE_MAX_TOP, &logprobs, err))
            goto done;
    } else {
        long top = 0;
        if (api_bool(o, "logprobs", &want_lp, err) ||
            api_int(o, "top_logprobs", 0, MT_SERVE_MAX_TOP, &top, err))
            goto done;
        if (cJSON_GetObjectItemCaseSensitive(o, "top_logprobs") && top > 0 && !want_lp) {
            mt_api_fail(err, 400, NULL, "top_logprobs", "'top_logprobs' needs \"logprobs\": true");
            goto done;
        }
        logprobs = want_lp ? top : -1;
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
        int32_t *ids = NULL;
        if (kind == MT_API_CHAT) {
            mt_api_chat_out co;
            if (mt_api_chat_render(env, o, &co, err)) goto done;
            ids = co.ids;
            T = co.n;
            call->chat_prompt = co.text;
            call->tools = co.tools;
            call->tool_calls_off = co.tool_calls_off;
        } else if (!(ids = api_prompt(env, prompts[i], &T, err))) {
            goto done;
        }
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

/* ---- POST /tokenize ---- */

static const char *const tokenize_fields[] = {"model",
                                              "prompt",
                                              "messages",
                                              "add_generation_prompt",
                                              "continue_final_message",
                                              "chat_template_kwargs",
                                              "tools",
                                              "tool_choice",
                                              "documents",
                                              "add_special_tokens",
                                              "return_token_strs"};

char *mt_api_tokenize(const mt_api_env *env, const char *body, size_t len, mt_api_error *err) {
    cJSON *o = api_body(body, len, err);
    if (!o) return NULL;
    char *json = NULL;
    int32_t *ids = NULL;
    int n = 0;
    bool strs = false, special = true;
    for (const cJSON *x = o->child; x; x = x->next) {
        bool known = false;
        for (size_t i = 0; i < sizeof(tokenize_fields) / sizeof(tokenize_fields[0]); i++)
            known |= !strcmp(x->string, tokenize_fields[i]);
        if (!known) {
            api_fail_key(err, x->string, "unsupported field '%.100s' of /tokenize", x->string);
            goto done;
        }
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (model && !cJSON_IsNull(model) &&
        (!cJSON_IsString(model) || strcmp(model->valuestring, env->model_name))) {
        mt_api_fail(err, 404, "model_not_found", "model", "this server has the model '%s'",
                    env->model_name);
        goto done;
    }
    /* add_special_tokens: the tokenizers of this server add no BOS / EOS (tokenizer_config's
     * add_bos_token), so both values give the same ids */
    if (api_bool(o, "return_token_strs", &strs, err) ||
        api_bool(o, "add_special_tokens", &special, err))
        goto done;
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    const bool chat = cJSON_GetObjectItemCaseSensitive(o, "messages") != NULL;
    if (chat == (prompt != NULL)) {
        mt_api_fail(err, 400, NULL, chat ? "prompt" : "messages",
                    "/tokenize takes either 'prompt' (a string) or 'messages'");
        goto done;
    }
    if (chat) {
        mt_api_chat_out co;
        if (mt_api_chat_render(env, o, &co, err)) goto done;
        ids = co.ids;
        n = co.n;
        free(co.text);
        cJSON_Delete(co.tools);
    } else {
        static const char *const chat_only[] = {"add_generation_prompt", "continue_final_message",
                                                "chat_template_kwargs",  "tools",
                                                "tool_choice",           "documents"};
        for (size_t i = 0; i < sizeof(chat_only) / sizeof(chat_only[0]); i++)
            if (cJSON_GetObjectItemCaseSensitive(o, chat_only[i])) {
                mt_api_fail(err, 400, NULL, chat_only[i], "'%s' goes with 'messages'",
                            chat_only[i]);
                goto done;
            }
        if (!cJSON_IsString(prompt)) {
            mt_api_fail(err, 400, NULL, "prompt", "'prompt' must be a string");
            goto done;
        }
        ids =
            api_tokenize(env, prompt->valuestring, strlen(prompt->valuestring), &n, "prompt", err);
        if (!ids) goto done;
    }
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "count", n);
    cJSON_AddNumberToObject(r, "max_model_len", env->t_max);
    cJSON *t = cJSON_AddArrayToObject(r, "tokens");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(t, cJSON_CreateNumber(ids[i]));
    if (strs) {
        cJSON *ts = cJSON_AddArrayToObject(r, "token_strs");
        for (int i = 0; i < n; i++) {
            const char *tk = mt_tokenizer_id_to_token(env->tok, ids[i]);
            cJSON_AddItemToArray(ts, cJSON_CreateString(tk ? tk : ""));
        }
    } else {
        cJSON_AddNullToObject(r, "token_strs");
    }
    json = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    MT_CHECK(json, "serve: cannot format a /tokenize response");
done:
    free(ids);
    cJSON_Delete(o);
    return json;
}
