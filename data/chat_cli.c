/* chat_cli.c: see chat_cli.h. */
#include "data/chat_cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

/* Replaces every `from` in s (a buffer of n bytes) by `to`, cutting what no longer fits. */
static void replace_all(char *s, size_t n, const char *from, const char *to) {
    const size_t lf = strlen(from), lt = strlen(to);
    char *tmp = mt_malloc(n, "error text");
    for (char *at = strstr(s, from); at; at = strstr(at + lt, from)) {
        const size_t head = (size_t)(at - s);
        if (head + lt >= n) break;
        snprintf(tmp, n, "%s", at + lf);
        snprintf(at, n - head, "%s%s", to, tmp);
    }
    free(tmp);
}

mt_chat_template *mt_chat_cli_open(const char *dir, const char *file, const char *kwargs, char *err,
                                   size_t n) {
    /* checked here so that the line names the flag; the reserved names data/chat.c refuses */
    if (kwargs) {
        cJSON *o = cJSON_Parse(kwargs);
        const bool object = cJSON_IsObject(o);
        cJSON_Delete(o);
        if (!object) {
            snprintf(err, n,
                     "--template-kwargs: %s is not a JSON object of template variables (e.g. "
                     "'{\"thinking_mode\": \"enabled\"}')",
                     *kwargs ? "the value" : "an empty value");
            return NULL;
        }
    }
    const mt_chat_source src = {.dir = dir, .file = file, .kwargs_json = kwargs};
    char msg[MT_ERR_LEN + 8192];
    mt_chat_template *t = mt_chat_template_open(&src, msg, sizeof(msg));
    if (t) return t;
    /* data/chat.h words its errors for recipes: a tool's user set flags */
    replace_all(msg, sizeof(msg), "data.template_kwargs", "--template-kwargs");
    replace_all(msg, sizeof(msg), "set data.chat_template to", "give --chat-template");
    replace_all(msg, sizeof(msg), "data.chat_template", "--chat-template");
    const bool in_file = file && !strncmp(msg, file, strlen(file));
    snprintf(err, n, "%s%s", in_file ? "--chat-template " : "", msg);
    return NULL;
}

int32_t *mt_chat_cli_ids(const mt_tokenizer *tok, const mt_chat_rendered *r, int *T, char *err,
                         size_t errlen) {
    mt_token_buf buf = {0};
    int32_t *ids = NULL;
    char why[MT_ERR_LEN];
    if (mt_tokenizer_encode_err(tok, r->text, r->len, &buf, why, sizeof(why)) < 0)
        snprintf(err, errlen, "the rendered conversation does not tokenize: %s", why);
    else {
        ids = mt_malloc(sizeof(int32_t) * (size_t)(buf.n > 0 ? buf.n : 1), "prompt ids");
        memcpy(ids, buf.ids, sizeof(int32_t) * (size_t)buf.n);
        *T = (int)buf.n;
    }
    mt_token_buf_free(&buf);
    return ids;
}

int32_t *mt_chat_cli_prompt(mt_chat_template *t, const mt_tokenizer *tok, const mt_chat_msg *msgs,
                            int n, int *T, char *err, size_t errlen) {
    mt_chat_rendered r = {0};
    int32_t *ids = NULL;
    char why[MT_ERR_LEN];
    if (mt_chat_render_msgs(t, msgs, n, &r, why, sizeof(why)) != 0)
        snprintf(err, errlen, "the chat template cannot render the conversation: %s", why);
    else
        ids = mt_chat_cli_ids(tok, &r, T, err, errlen);
    mt_chat_rendered_free(&r);
    return ids;
}

int32_t mt_chat_cli_eos(const mt_chat_template *t, const mt_tokenizer *tok, int32_t config_eos) {
    const char *eot = t ? mt_chat_template_eot(t) : NULL;
    int32_t id = eot ? mt_tokenizer_token_to_id(tok, eot) : -1;
    if (id < 0) id = mt_tokenizer_token_to_id(tok, "<end_of_sentence>");
    return id >= 0 ? id : config_eos;
}
