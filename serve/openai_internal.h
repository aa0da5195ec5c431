/* openai_internal.h: what the request side of serve/openai.h shares (serve/openai_request.c,
 * serve/openai_chat.c). */
#pragma once
#include "serve/openai.h"

/* A chat request's conversation rendered by the model's template (messages, tools,
 * tool_choice, documents, chat_template_kwargs, add_generation_prompt,
 * continue_final_message; control tokens sanitized when env->sanitize). */
typedef struct {
    int32_t *ids; /* malloc'ed */
    int n;
    char *text;          /* the rendered prompt, malloc'ed */
    struct cJSON *tools; /* the request's tools (owned), NULL when absent or empty */
    bool tool_calls_off; /* tool_choice "none" */
} mt_api_chat_out;

/* 0, or -1 with err (400 naming the field). */
int mt_api_chat_render(const mt_api_env *env, const struct cJSON *body, mt_api_chat_out *out,
                       mt_api_error *err);
