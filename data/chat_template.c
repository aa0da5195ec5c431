/* chat_template.c: the MiniMax-Text-01 chat template (check + render + assistant mask). */
#include "data/chat_template.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/check.h"
#include "data/data_io.h"
#include "data/tokenizer.h"

/* The end both templates below share: the assistant turn's close, the function role, the
 * tools and the generation prompt. */
#define MINIMAX_TEMPLATE_TAIL                                                                      \
    "{{ '<end_of_sentence>\\n' }}{% elif message['role'] == 'function' %}"                         \
    "{{ '<beginning_of_sentence>system function_response=functions\\n' + '{\"name\": \"' + me"     \
    "ssage['name'] + '\", \"response\": ' + message['content'][0]['text'] + '}' + '<end_of_se"     \
    "ntence>\\n'}}{% endif %}{% endfor %}{% if tools %}{% for function in tools %}"                \
    "{{ '<beginning_of_sentence>system function_setting=functions\\n' + function | tojson + '"     \
    "<end_of_sentence>\\n'}}{% endfor %}{% endif %}{% if add_generation_prompt %}"                 \
    "{{ '<beginning_of_sentence>ai name=assistant\\n' }}{% endif %}"

/* Spec section 9, verbatim (one line; the \n inside the Jinja literals are escapes). */
static const char minimax_template[] =
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<beginning_of_sentence>system ai_setting=assistant\\n' + message['content'][0]['text"
    "'] + '<end_of_sentence>\\n'}}{% elif message['role'] == 'user' %}"
    "{{ '<beginning_of_sentence>user name=user\\n' + message['content'][0]['text'] + '<end_of"
    "_sentence>\\n'}}{% elif message['role'] == 'assistant' %}"
    "{{ '<beginning_of_sentence>ai name=assistant\\n' }}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] }}{% endgeneration %}{% endfor %}" MINIMAX_TEMPLATE_TAIL;

/* The same template, made to take a message's content as a string as well as a list of parts
 * (the original indexes content[0]['text'], which fails on a string in transformers): what an
 * export writes, so that both message forms render there. For part lists both templates render
 * the same bytes. */
static const char minimax_template_ext[] =
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<beginning_of_sentence>system ai_setting=assistant\\n' + (message['content'] if "
    "message['content'] is string else message['content'][0]['text']) + '<end_of_sentence>\\n'}}"
    "{% elif message['role'] == 'user' %}"
    "{{ '<beginning_of_sentence>user name=user\\n' + (message['content'] if message['content'] "
    "is string else message['content'][0]['text']) + '<end_of_sentence>\\n'}}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ '<beginning_of_sentence>ai name=assistant\\n' }}"
    "{% if message['content'] is string %}"
    "{% generation %}{{ message['content'] }}{% endgeneration %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] }}{% endgeneration %}{% endfor %}{% endif "
    "%}" MINIMAX_TEMPLATE_TAIL;

const char *mt_chat_template_minimax(void) { return minimax_template; }
const char *mt_chat_template_minimax_ext(void) { return minimax_template_ext; }

static bool is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Copies the Jinja string literal starting at t[i] (a quote) to out in a canonical spelling
 * ('...' with \\, \' and \n, \t, \r escaped), so that "a\nb", 'a\nb' and a literal with a raw
 * newline compare equal. Returns the index after the closing quote. */
static size_t copy_literal(const char *t, size_t n, size_t i, mt_strbuf *out) {
    char q = t[i++];
    mt_strbuf_append(out, "'", 1);
    while (i < n && t[i] != q) {
        char c = t[i++];
        if (c == '\\' && i < n) {
            char e = t[i++];
            switch (e) {
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case '\\':
            case '\'':
            case '"':
                c = e;
                break;
            default:
                /* other escapes (\x, \u, ...) are kept marked, so they only equal themselves */
                mt_strbuf_append(out, "\x01", 1);
                mt_strbuf_append(out, &e, 1);
                continue;
            }
        }
        switch (c) {
        case '\n':
            mt_strbuf_append(out, "\\n", 2);
            break;
        case '\t':
            mt_strbuf_append(out, "\\t", 2);
            break;
        case '\r':
            mt_strbuf_append(out, "\\r", 2);
            break;
        case '\\':
            mt_strbuf_append(out, "\\\\", 2);
            break;
        case '\'':
            mt_strbuf_append(out, "\\'", 2);
            break;
        default:
            mt_strbuf_append(out, &c, 1);
        }
    }
    mt_strbuf_append(out, "'", 1);
    return i < n ? i + 1 : n;
}

char *mt_chat_template_normalize(const char *t) {
    size_t n = strlen(t);
    if (n > 0 && t[n - 1] == '\n') n--; /* Jinja drops one trailing newline */
    mt_strbuf out = {0};
    mt_strbuf_append(&out, "", 0);
    size_t i = 0;
    while (i < n) {
        char k = i + 1 < n && t[i] == '{' ? t[i + 1] : 0;
        if (k == '#') { /* comment: dropped */
            const char *end = strstr(t + i + 2, "#}");
            i = end && (size_t)(end - t) + 2 <= n ? (size_t)(end - t) + 2 : n;
            continue;
        }
        if (k != '{' && k != '%') {
            mt_strbuf_append(&out, t + i, 1);
            i++;
            continue;
        }
        char close = k == '{' ? '}' : '%';
        mt_strbuf_append(&out, t + i, 2);
        i += 2;
        bool space = false;
        while (i < n && !(t[i] == close && i + 1 < n && t[i + 1] == '}')) {
            char c = t[i];
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                space = true;
                i++;
                continue;
            }
            if (c == '\'' || c == '"') {
                i = copy_literal(t, n, i, &out);
            } else {
                if (space && out.len > 0 && is_ident(out.p[out.len - 1]) && is_ident(c))
                    mt_strbuf_append(&out, " ", 1);
                mt_strbuf_append(&out, &c, 1);
                i++;
            }
            space = false;
        }
        if (i < n) {
            mt_strbuf_append(&out, t + i, 2);
            i += 2;
        }
    }
    return out.p;
}

/* The template text from a parsed tokenizer_config.json: "chat_template" as a string or as a
 * list of {name, template} with "default" chosen; NULL when absent. */
static const char *config_template(const cJSON *cfg) {
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsString(ct)) return ct->valuestring;
    if (cJSON_IsArray(ct)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, ct) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
            const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(e, "template");
            if (cJSON_IsString(name) && strcmp(name->valuestring, "default") == 0 &&
                cJSON_IsString(tmpl))
                return tmpl->valuestring;
        }
    }
    return NULL;
}

int mt_chat_template_check(const char *config_path, char **normalized, char *err) {
    size_t len;
    char *text = mt_file_read(config_path, &len, err);
    if (!text) return -1;
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cfg || !cJSON_IsObject(cfg)) {
        snprintf(err, MT_ERR_LEN, "%s: not a JSON object (tokenizer_config.json expected)",
                 config_path);
        cJSON_Delete(cfg);
        return -1;
    }
    char dup[256]; /* transformers takes the last of a repeated key, cJSON's lookups the first */
    if (mt_json_duplicate_key(cfg, NULL, dup, sizeof(dup))) {
        snprintf(err, MT_ERR_LEN,
                 "%.200s: key \"%.200s\" appears twice (transformers would take "
                 "the last)",
                 config_path, dup);
        cJSON_Delete(cfg);
        return -1;
    }
    const char *tmpl = config_template(cfg);
    char *side = NULL; /* transformers >= 4.47 may save the template as chat_template.jinja */
    const char *source = config_path;
    char jinja_path[4096];
    if (!tmpl) {
        const char *slash = strrchr(config_path, '/');
        int dir_len = slash ? (int)(slash - config_path) + 1 : 0;
        snprintf(jinja_path, sizeof(jinja_path), "%.*schat_template.jinja", dir_len, config_path);
        char ignored[MT_ERR_LEN];
        side = mt_file_read(jinja_path, NULL, ignored);
        if (!side) {
            snprintf(err, MT_ERR_LEN,
                     "%.200s: no \"chat_template\" (and no chat_template.jinja "
                     "next to it)",
                     config_path);
            cJSON_Delete(cfg);
            return -1;
        }
        tmpl = side;
        source = jinja_path;
    }
    char *got = mt_chat_template_normalize(tmpl);
    char *want = mt_chat_template_normalize(minimax_template);
    char *want_ext = mt_chat_template_normalize(minimax_template_ext);
    int rc = 0;
    if (strcmp(got, want) != 0 && strcmp(got, want_ext) != 0) {
        size_t at = 0;
        while (got[at] && got[at] == want[at]) at++;
        snprintf(err, MT_ERR_LEN,
                 "%.200s: chat template not implemented by this renderer (only MiniMax-Text-01's "
                 "template is; the normalized text differs at byte %zu: \"%.40s\")",
                 source, at, got + at);
        rc = -1;
    }
    free(want);
    free(want_ext);
    if (rc == 0 && normalized)
        *normalized = got;
    else
        free(got);
    free(side);
    cJSON_Delete(cfg);
    return rc;
}

static void put(mt_chat_rendered *r, const char *s, size_t n) {
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 1024;
        while (cap < r->len + n + 1) cap *= 2;
        char *p = realloc(r->text, cap);
        MT_CHECK(p, "out of memory rendering a chat (%zu bytes)", cap);
        r->text = p;
        r->cap = cap;
    }
    memcpy(r->text + r->len, s, n);
    r->len += n;
    r->text[r->len] = 0;
}

#define PUT_LIT(r, s) put((r), (s), sizeof(s) - 1)

void mt_chat_render(const mt_chat_msg *msgs, int n_msgs, bool add_generation_prompt,
                    mt_chat_rendered *r) {
    r->len = 0;
    r->n_spans = 0;
    put(r, "", 0);
    for (int m = 0; m < n_msgs; m++) {
        const mt_chat_msg *g = &msgs[m];
        switch (g->role) {
        case MT_CHAT_SYSTEM:
            PUT_LIT(r, "<beginning_of_sentence>system ai_setting=assistant\n");
            break;
        case MT_CHAT_USER:
            PUT_LIT(r, "<beginning_of_sentence>user name=user\n");
            break;
        case MT_CHAT_ASSISTANT:
            PUT_LIT(r, "<beginning_of_sentence>ai name=assistant\n");
            break;
        default:
            MT_DIE("chat render: message %d has an unknown role %d", m, (int)g->role);
        }
        if (g->role == MT_CHAT_ASSISTANT) {
            if (r->n_spans == r->span_cap) {
                r->span_cap = r->span_cap ? 2 * r->span_cap : 8;
                int64_t *p = realloc(r->spans, sizeof(int64_t) * 2 * (size_t)r->span_cap);
                MT_CHECK(p, "out of memory for %d assistant spans", r->span_cap);
                r->spans = p;
            }
            r->spans[2 * r->n_spans] = (int64_t)r->len;
            r->spans[2 * r->n_spans + 1] = (int64_t)(r->len + g->len);
            r->n_spans++;
        }
        put(r, g->text, g->len);
        PUT_LIT(r, "<end_of_sentence>\n");
    }
    if (add_generation_prompt) PUT_LIT(r, "<beginning_of_sentence>ai name=assistant\n");
}

void mt_chat_rendered_free(mt_chat_rendered *r) {
    free(r->text);
    free(r->spans);
    *r = (mt_chat_rendered){0};
}

void mt_chat_token_mask(const mt_chat_rendered *r, const int64_t *offsets, int64_t n_tokens,
                        uint8_t *mask) {
    /* spans and tokens are both in order: one pass, as transformers does */
    int s = 0;
    for (int64_t i = 0; i < n_tokens; i++) {
        int64_t start = offsets[2 * i], end = offsets[2 * i + 1];
        while (s < r->n_spans && start >= r->spans[2 * s + 1]) s++;
        mask[i] = s < r->n_spans && end > r->spans[2 * s] && start < r->spans[2 * s + 1];
    }
}

char *mt_chat_template_export_config(const char *src_config, char *err) {
    size_t len;
    char *text = mt_file_read(src_config, &len, err);
    if (!text) return NULL;
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(cfg)) {
        snprintf(err, MT_ERR_LEN, "%s: not a JSON object (tokenizer_config.json expected)",
                 src_config);
        cJSON_Delete(cfg);
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "chat_template");
    cJSON_AddStringToObject(cfg, "chat_template", minimax_template_ext);
    char *out = cJSON_Print(cfg);
    cJSON_Delete(cfg);
    MT_CHECK(out, "out of memory exporting %s", src_config);
    return out;
}

mt_tokenizer *mt_chat_tokenizer_load(const char *dir, char *err, size_t n) {
    char tpath[4200], cpath[4200], msg[MT_ERR_LEN + 4400];
    snprintf(tpath, sizeof(tpath), "%s/tokenizer.json", dir);
    snprintf(cpath, sizeof(cpath), "%s/tokenizer_config.json", dir);
    if (access(tpath, R_OK) != 0 || access(cpath, R_OK) != 0) {
        snprintf(err, n,
                 "%s: cannot read tokenizer.json and tokenizer_config.json (--tokenizer TOK)", dir);
        return NULL;
    }
    if (mt_chat_template_check(cpath, NULL, msg) != 0) {
        snprintf(err, n, "%s", msg);
        return NULL;
    }
    mt_tokenizer *tok = mt_tokenizer_try_load(tpath, msg, sizeof(msg));
    if (!tok) snprintf(err, n, "%s", msg);
    return tok;
}

bool mt_chat_tokenizer_fits(const mt_tokenizer *tok, const char *dir, int64_t vocab_size, char *err,
                            size_t n) {
    const int32_t size = mt_tokenizer_vocab_size(tok);
    if (size <= vocab_size) return true;
    snprintf(err, n,
             "%s/tokenizer.json: ids up to %d but the model's vocab_size is %lld (the tokenizer "
             "of another model? --tokenizer TOK)",
             dir, size - 1, (long long)vocab_size);
    return false;
}
