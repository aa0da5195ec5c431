/* chat_internal.h: what data/chat.c (templates, variables) and data/chat_conv.c
 * (conversations, renders, trained bytes) share. */
#pragma once
#include "data/chat.h"

#define MT_CHAT_MAX_CONTROLS 64

struct mt_chat_template {
    int n; /* named templates */
    char *names[MT_CHAT_MAX_TEMPLATES], *texts[MT_CHAT_MAX_TEMPLATES];
    jinja_template *tmpl[MT_CHAT_MAX_TEMPLATES];
    int def, tool_use;     /* their indices (-1: none; def -2: several and none default) */
    jinja_heap *heap;      /* the special tokens' and kwargs' values */
    jinja_value base_vars; /* special tokens, then data.template_kwargs */
    char *eot;             /* eos_token, or NULL */
    uint64_t hash;
    char origin[4500];
    /* for exports: where the templates came from */
    enum { MT_CHAT_FROM_CONFIG, MT_CHAT_FROM_DIR_FILES, MT_CHAT_FROM_FILE } from;
    char *dir;        /* the tokenizer directory, or NULL */
    bool replaced;    /* a released template was replaced (mt_chat_template_fixed) */
    bool config_list; /* tokenizer_config.json's chat_template is a list */
    /* the control tokens a tokenizer must encode as single ids (mt_chat_template_tokens_fit):
     * text, and the tokenizer_config.json key it comes from */
    char *controls[MT_CHAT_MAX_CONTROLS];
    const char *control_keys[MT_CHAT_MAX_CONTROLS];
    int n_controls;
    /* tokenizer_config.json's chat_control_tokens (-1: absent), and data.template_kwargs (a dict,
     * or undefined): what a sanitized render marks (data/chat_sanitize.c) */
    char **listed_controls;
    int n_listed_controls;
    jinja_value kwargs;
};

const jinja_template *mt_chat_pick(const mt_chat_template *t, const mt_chat_conv *c, char *err,
                                   size_t errlen);
jinja_value mt_chat_vars(const mt_chat_template *t, jinja_heap *h, const mt_chat_conv *c, int n,
                         bool agp);
