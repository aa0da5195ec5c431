/* openai_chat.c: a chat request's conversation (messages, tools, tool_choice, documents,
 * chat_template_kwargs, add_generation_prompt, continue_final_message) rendered by the model's
 * template into prompt ids (serve/openai.h), for /v1/chat/completions and /tokenize. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "serve/openai_internal.h"

/* The handlers run on the server's threads, and a template with its heap is not thread-safe
 * (jinja/jinja.h): renders take turns (they are short next to the decoding). */
static pthread_mutex_t api_chat_mu = PTHREAD_MUTEX_INITIALIZER;

/* A message's content as the template gets it: a string stays, null is dropped (transformers
 * drops null keys), a list of text parts becomes their texts joined by "\n" (vLLM's string
 * content format). 0, or -1 after err. */
static int chat_content(cJSON *m, int i, mt_api_error *err) {
    cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!c || cJSON_IsString(c) || cJSON_IsNull(c)) return 0;
    if (!cJSON_IsArray(c))
        return mt_api_fail(err, 400, NULL, "messages",
                           "messages[%d].content must be a string, null or a list of text parts",
                           i);
    mt_strbuf b = {0};
    int j = 0;
    for (const cJSON *p = c->child; p; p = p->next, j++) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "type"));
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!type || strcmp(type, "text") || !cJSON_IsString(t)) {
            mt_strbuf_free(&b);
            return mt_api_fail(err, 400, NULL, "messages",
                               "messages[%d].content[%d]: only {\"type\": \"text\", \"text\": ...} "
                               "parts are supported (type %s)",
                               i, j, type ? type : "missing");
        }
        if (j) mt_strbuf_append(&b, "\n", 1);
        mt_strbuf_append(&b, t->valuestring, strlen(t->valuestring));
    }
    cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(b.p ? b.p : ""));
    mt_strbuf_free(&b);
    return 0;
}

/* messages: a non-empty list of objects with a role string; the template judges the roles. */
static int chat_messages(cJSON *ms, mt_api_error *err) {
    if (!cJSON_IsArray(ms) || !ms->child)
        return mt_api_fail(err, 400, NULL, "messages", "'messages' must be a non-empty list");
    int i = 0;
    for (cJSON *m = ms->child; m; m = m->next, i++) {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
        if (!cJSON_IsObject(m) || !role)
            return mt_api_fail(err, 400, NULL, "messages",
                               "messages[%d] must be an object with a \"role\" string", i);
        /* OpenAI's roles ("function" is the deprecated function calling); which of them the
         * model takes is its template's to say */
        static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
        bool known = false;
        for (size_t r = 0; r < sizeof(roles) / sizeof(roles[0]); r++)
            known |= !strcmp(role, roles[r]);
        if (!known)
            return mt_api_fail(err, 400, NULL, "messages",
                               "messages[%d].role \"%.40s\" is not one of \"system\", "
                               "\"developer\", \"user\", \"assistant\", \"tool\"",
                               i, role);
        if (chat_content(m, i, err)) return -1;
        const cJSON *rc = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
        if (rc && !cJSON_IsString(rc) && !cJSON_IsNull(rc))
            return mt_api_fail(err, 400, NULL, "messages",
                               "messages[%d].reasoning_content must be a string or null", i);
    }
    return 0;
}

/* tools: OpenAI function tools [{"type": "function", "function": {"name", "description"?,
 * "parameters"?, "strict"?}}]. */
static int chat_tools(const cJSON *tools, mt_api_error *err) {
    if (!cJSON_IsArray(tools))
        return mt_api_fail(err, 400, NULL, "tools", "'tools' must be a list of function tools");
    int i = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function"), *x;
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "type"));
        if (!cJSON_IsObject(t) || !type || strcmp(type, "function"))
            return mt_api_fail(err, 400, NULL, "tools", "tools[%d].type must be \"function\"", i);
        if (!cJSON_IsObject(f))
            return mt_api_fail(err, 400, NULL, "tools", "tools[%d].function must be an object", i);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(name) || !name->valuestring[0])
            return mt_api_fail(err, 400, NULL, "tools",
                               "tools[%d].function.name must be a non-empty string", i);
        if ((x = cJSON_GetObjectItemCaseSensitive(f, "description")) && !cJSON_IsString(x) &&
            !cJSON_IsNull(x))
            return mt_api_fail(err, 400, NULL, "tools",
                               "tools[%d].function.description must be a string", i);
        if ((x = cJSON_GetObjectItemCaseSensitive(f, "parameters")) && !cJSON_IsObject(x) &&
            !cJSON_IsNull(x))
            return mt_api_fail(err, 400, NULL, "tools",
                               "tools[%d].function.parameters must be a JSON Schema object", i);
        if ((x = cJSON_GetObjectItemCaseSensitive(f, "strict")) && !cJSON_IsBool(x) &&
            !cJSON_IsNull(x))
            return mt_api_fail(err, 400, NULL, "tools",
                               "tools[%d].function.strict must be a boolean", i);
        for (const cJSON *k = f->child; k; k = k->next)
            if (strcmp(k->string, "name") && strcmp(k->string, "description") &&
                strcmp(k->string, "parameters") && strcmp(k->string, "strict"))
                return mt_api_fail(err, 400, NULL, "tools",
                                   "tools[%d].function.%s: unsupported field", i, k->string);
    }
    return 0;
}

/* tool_choice: "auto" (the default) and "none" (the markup stays content); "required" and a
 * named function would need constrained decoding: refused. */
static int chat_tool_choice(const cJSON *body, bool *off, mt_api_error *err) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(body, "tool_choice");
    *off = false;
    if (!tc || cJSON_IsNull(tc)) return 0;
    if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "auto")) return 0;
    if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "none")) {
        *off = true;
        return 0;
    }
    if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "required"))
        return mt_api_fail(err, 400, NULL, "tool_choice",
                           "tool_choice \"required\" is not supported (\"auto\" or \"none\")");
    if (cJSON_IsObject(tc))
        return mt_api_fail(err, 400, NULL, "tool_choice",
                           "tool_choice naming a function is not supported (\"auto\" or \"none\")");
    return mt_api_fail(err, 400, NULL, "tool_choice", "tool_choice must be \"auto\" or \"none\"");
}

/* The conversation object the data room parses: {"messages", "tools"?, "documents"?, and the
 * request's chat_template_kwargs as template variables}. NULL after err. */
static cJSON *chat_conversation(const cJSON *body, mt_api_error *err) {
    cJSON *conv = cJSON_CreateObject();
    cJSON *ms = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(body, "messages"), true);
    cJSON_AddItemToObject(conv, "messages", ms ? ms : cJSON_CreateNull());
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
    const cJSON *docs = cJSON_GetObjectItemCaseSensitive(body, "documents");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(body, "chat_template_kwargs");
    if (chat_messages(ms, err) || (tools && !cJSON_IsNull(tools) && chat_tools(tools, err)))
        goto fail;
    if (tools && !cJSON_IsNull(tools))
        cJSON_AddItemToObject(conv, "tools", cJSON_Duplicate(tools, true));
    if (docs && !cJSON_IsNull(docs)) {
        for (const cJSON *d = cJSON_IsArray(docs) ? docs->child : docs; d; d = d->next)
            if (!cJSON_IsArray(docs) || !cJSON_IsObject(d)) {
                mt_api_fail(err, 400, NULL, "documents", "'documents' must be a list of objects");
                goto fail;
            }
        cJSON_AddItemToObject(conv, "documents", cJSON_Duplicate(docs, true));
    }
    if (kw && !cJSON_IsNull(kw)) {
        if (!cJSON_IsObject(kw)) {
            mt_api_fail(err, 400, NULL, "chat_template_kwargs",
                        "'chat_template_kwargs' must be an object of template variables");
            goto fail;
        }
        static const char *const reserved[] = {"messages", "tools", "documents",
                                               "add_generation_prompt", "continue_final_message"};
        for (const cJSON *k = kw->child; k; k = k->next) {
            for (size_t r = 0; r < sizeof(reserved) / sizeof(reserved[0]); r++)
                if (!strcmp(k->string, reserved[r])) {
                    mt_api_fail(err, 400, NULL, "chat_template_kwargs",
                                "chat_template_kwargs.%s: a request field, not a template variable",
                                k->string);
                    goto fail;
                }
            cJSON_AddItemToObject(conv, k->string, cJSON_Duplicate(k, true));
        }
    }
    return conv;
fail:
    cJSON_Delete(conv);
    return NULL;
}

static int chat_flag(const cJSON *body, const char *key, bool *out, mt_api_error *err) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(body, key);
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsBool(x)) return mt_api_fail(err, 400, NULL, key, "'%s' must be a boolean", key);
    *out = cJSON_IsTrue(x);
    return 0;
}

/* The client is told the template's problem, not where the server keeps its template. */
static const char *chat_why(const mt_api_env *env, const char *why) {
    const char *origin = mt_chat_template_origin(env->chat);
    const size_t n = strlen(origin);
    return n && !strncmp(why, origin, n) && why[n] == ':' ? why + n + 1 : why;
}

int mt_api_chat_render(const mt_api_env *env, const cJSON *body, mt_api_chat_out *out,
                       mt_api_error *err) {
    memset(out, 0, sizeof(*out));
    mt_chat_prompt_opts o = {.add_generation_prompt = true, .sanitize = env->sanitize};
    if (chat_flag(body, "add_generation_prompt", &o.add_generation_prompt, err) ||
        chat_flag(body, "continue_final_message", &o.continue_final_message, err) ||
        chat_tool_choice(body, &out->tool_calls_off, err))
        return -1;
    if (o.add_generation_prompt && o.continue_final_message)
        return mt_api_fail(err, 400, NULL, "continue_final_message",
                           "continue_final_message and add_generation_prompt are not compatible: "
                           "set add_generation_prompt false to continue the final message");
    cJSON *conv = chat_conversation(body, err);
    if (!conv) return -1;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(conv, "tools");
    if (cJSON_GetArraySize(tools) > 0) out->tools = cJSON_Duplicate(tools, true);
    char *json = cJSON_PrintUnformatted(conv);
    cJSON_Delete(conv);
    MT_CHECK(json, "serve: cannot format a conversation");
    jinja_heap *h = jinja_heap_new(0);
    mt_chat_conv c;
    mt_chat_rendered r = {0};
    mt_token_buf ids = {0};
    char why[MT_ERR_LEN];
    int rc = mt_chat_conv_parse(h, json, strlen(json), true, &c, why, sizeof(why));
    if (rc) {
        mt_api_fail(err, 400, NULL, "messages", "%s", why);
    } else {
        pthread_mutex_lock(&api_chat_mu);
        rc = mt_chat_prompt(env->chat, env->tok, h, &c, &o, &r, &ids, why, sizeof(why));
        pthread_mutex_unlock(&api_chat_mu);
        if (rc)
            mt_api_fail(err, 400, NULL, "messages",
                        "the model's chat template cannot render 'messages': %s",
                        chat_why(env, why));
    }
    if (rc == 0) {
        out->n = (int)ids.n;
        out->ids = mt_malloc(sizeof(int32_t) * (size_t)(ids.n > 0 ? ids.n : 1), "prompt ids");
        if (ids.n > 0) memcpy(out->ids, ids.ids, sizeof(int32_t) * (size_t)ids.n);
        out->text = strdup(r.text ? r.text : "");
    } else {
        cJSON_Delete(out->tools);
        out->tools = NULL;
    }
    mt_token_buf_free(&ids);
    mt_chat_rendered_free(&r);
    jinja_heap_free(h);
    free(json);
    return rc;
}
