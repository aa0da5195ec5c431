/* dataset_formats.c: one reader per dataset format (data/dataset.h), each turning one JSON
 * record into system / user / assistant messages. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "data/data_io.h"
#include "data/dataset_internal.h"

static bool has_key(const cJSON *obj, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(obj, k) != NULL;
}

static bool blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') return false;
    return true;
}

/* Checks one message text (what: its place, "messages[1].content") and appends it: valid UTF-8,
 * and not blank unless it is a system message (an empty system turn renders as one). */
static int add_text(mt_conv_build *b, mt_chat_role role, const char *text, size_t len,
                    const char *what, const char *path, int64_t line_no, char *err) {
    size_t bad;
    if (!mt_utf8_valid(text, len, &bad)) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: %s is not valid UTF-8 (byte %zu)", path,
                 (long long)line_no, what, bad);
        return -1;
    }
    if (role != MT_CHAT_SYSTEM && blank(text)) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: %s is empty", path, (long long)line_no, what);
        return -1;
    }
    mt_conv_add_msg(b, role, text, len);
    return 0;
}

/* An optional string field (alpaca's input and system, sharegpt's system): "" when absent or
 * null; NULL with err set when it is something else. */
static const char *optional_string(const cJSON *obj, const char *name, const char *path,
                                   int64_t line_no, char *err) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!f || cJSON_IsNull(f)) return "";
    if (cJSON_IsString(f)) return f->valuestring;
    snprintf(err, MT_ERR_LEN, "%s:%lld: field \"%s\" is not a string", path, (long long)line_no,
             name);
    return NULL;
}

/* ---- gsm8k: {"question", "answer"} ---- */

static bool gsm8k_fits(const cJSON *o) { return has_key(o, "question") && has_key(o, "answer"); }

static int gsm8k_read(mt_conv_build *b, const cJSON *o, const char *path, int64_t line_no,
                      char *err) {
    const char *q = mt_json_text_field(o, "question", path, line_no, err);
    const char *a = q ? mt_json_text_field(o, "answer", path, line_no, err) : NULL;
    if (!a) return -1;
    mt_conv_add_msg(b, MT_CHAT_USER, q, strlen(q));
    mt_conv_add_msg(b, MT_CHAT_ASSISTANT, a, strlen(a));
    return 0;
}

/* ---- messages: {"messages": [{"role", "content"}]} ---- */

static bool messages_fits(const cJSON *o) { return has_key(o, "messages"); }

/* content: a string, or a list of {"type": "text", "text"} parts. The template renders part 0
 * of a system or user message and every text part of an assistant message (joined), so a
 * system or user list of several parts (the rest would be dropped) is refused. */
static int add_content(mt_conv_build *b, mt_chat_role role, const cJSON *c, const char *what,
                       const char *path, int64_t line_no, char *err) {
    if (cJSON_IsString(c))
        return add_text(b, role, c->valuestring, strlen(c->valuestring), what, path, line_no, err);
    if (!cJSON_IsArray(c)) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: %s must be a string or a list of text parts", path,
                 (long long)line_no, what);
        return -1;
    }
    const int n = cJSON_GetArraySize(c);
    if (n == 0 || (role != MT_CHAT_ASSISTANT && n > 1)) {
        snprintf(err, MT_ERR_LEN,
                 "%s:%lld: %s has %d parts; a %s message takes %s (the chat template renders "
                 "only the first)",
                 path, (long long)line_no, what, n,
                 role == MT_CHAT_ASSISTANT ? "assistant" : "system or user",
                 role == MT_CHAT_ASSISTANT ? "at least one" : "exactly one");
        return -1;
    }
    mt_strbuf joined = {0};
    mt_strbuf_append(&joined, "", 0);
    int k = 0, rc = 0;
    for (const cJSON *p = c->child; p; p = p->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
            snprintf(err, MT_ERR_LEN,
                     "%s:%lld: %s[%d] is not a {\"type\": \"text\", \"text\": ...} part%s%.40s%s",
                     path, (long long)line_no, what, k, cJSON_IsString(type) ? " (type \"" : "",
                     cJSON_IsString(type) ? type->valuestring : "",
                     cJSON_IsString(type) ? "\": only text is supported)" : "");
            rc = -1;
            break;
        }
        mt_strbuf_append(&joined, text->valuestring, strlen(text->valuestring));
    }
    if (rc == 0) rc = add_text(b, role, joined.p, joined.len, what, path, line_no, err);
    mt_strbuf_free(&joined);
    return rc;
}

static int messages_read(mt_conv_build *b, const cJSON *o, const char *path, int64_t line_no,
                         char *err) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: \"messages\" must be a non-empty list", path,
                 (long long)line_no);
        return -1;
    }
    int i = 0;
    for (const cJSON *m = msgs->child; m; m = m->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        mt_chat_role r;
        if (!cJSON_IsString(role) || !content) {
            snprintf(err, MT_ERR_LEN, "%s:%lld: messages[%d] needs \"role\" and \"content\"", path,
                     (long long)line_no, i);
            return -1;
        }
        if (!strcmp(role->valuestring, "system")) {
            r = MT_CHAT_SYSTEM;
        } else if (!strcmp(role->valuestring, "user")) {
            r = MT_CHAT_USER;
        } else if (!strcmp(role->valuestring, "assistant")) {
            r = MT_CHAT_ASSISTANT;
        } else {
            snprintf(err, MT_ERR_LEN,
                     "%s:%lld: messages[%d] has role \"%.40s\" (system, user or assistant)", path,
                     (long long)line_no, i, role->valuestring);
            return -1;
        }
        char what[64];
        snprintf(what, sizeof(what), "messages[%d].content", i);
        if (add_content(b, r, content, what, path, line_no, err) != 0) return -1;
    }
    return 0;
}

/* ---- sharegpt: {"conversations": [{"from", "value"}], "system"?} ---- */

static bool sharegpt_fits(const cJSON *o) { return has_key(o, "conversations"); }

static int sharegpt_read(mt_conv_build *b, const cJSON *o, const char *path, int64_t line_no,
                         char *err) {
    const cJSON *conv = cJSON_GetObjectItemCaseSensitive(o, "conversations");
    if (!cJSON_IsArray(conv) || cJSON_GetArraySize(conv) == 0) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: \"conversations\" must be a non-empty list", path,
                 (long long)line_no);
        return -1;
    }
    const char *sys = optional_string(o, "system", path, line_no, err);
    if (!sys) return -1;
    if (sys[0] && add_text(b, MT_CHAT_SYSTEM, sys, strlen(sys), "system", path, line_no, err))
        return -1;
    int i = 0;
    for (const cJSON *m = conv->child; m; m = m->next, i++) {
        const cJSON *from = cJSON_GetObjectItemCaseSensitive(m, "from");
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(m, "value");
        if (!cJSON_IsString(from) || !cJSON_IsString(value)) {
            snprintf(err, MT_ERR_LEN,
                     "%s:%lld: conversations[%d] needs string \"from\" and \"value\"", path,
                     (long long)line_no, i);
            return -1;
        }
        const char *f = from->valuestring;
        mt_chat_role r;
        if (!strcmp(f, "human") || !strcmp(f, "user")) {
            r = MT_CHAT_USER;
        } else if (!strcmp(f, "gpt") || !strcmp(f, "assistant")) {
            r = MT_CHAT_ASSISTANT;
        } else if (!strcmp(f, "system") && i == 0 && !sys[0]) {
            r = MT_CHAT_SYSTEM;
        } else {
            snprintf(err, MT_ERR_LEN,
                     "%s:%lld: conversations[%d] is from \"%.40s\" (human/user, gpt/assistant, "
                     "or system as the first turn without a \"system\" key)",
                     path, (long long)line_no, i, f);
            return -1;
        }
        char what[64];
        snprintf(what, sizeof(what), "conversations[%d].value", i);
        if (add_text(b, r, value->valuestring, strlen(value->valuestring), what, path, line_no,
                     err) != 0)
            return -1;
    }
    return 0;
}

/* ---- alpaca: {"instruction", "input"?, "output", "system"?, "history"?} ---- */

static bool alpaca_fits(const cJSON *o) {
    return has_key(o, "instruction") && has_key(o, "output");
}

static int alpaca_read(mt_conv_build *b, const cJSON *o, const char *path, int64_t line_no,
                       char *err) {
    const char *ins = mt_json_text_field(o, "instruction", path, line_no, err);
    const char *out = ins ? mt_json_text_field(o, "output", path, line_no, err) : NULL;
    const char *in = out ? optional_string(o, "input", path, line_no, err) : NULL;
    const char *sys = in ? optional_string(o, "system", path, line_no, err) : NULL;
    if (!sys) return -1;
    if (sys[0] && add_text(b, MT_CHAT_SYSTEM, sys, strlen(sys), "system", path, line_no, err))
        return -1;
    const cJSON *hist = cJSON_GetObjectItemCaseSensitive(o, "history");
    if (hist && !cJSON_IsNull(hist)) {
        if (!cJSON_IsArray(hist)) {
            snprintf(err, MT_ERR_LEN, "%s:%lld: \"history\" must be a list of [query, response]",
                     path, (long long)line_no);
            return -1;
        }
        int i = 0;
        for (const cJSON *h = hist->child; h; h = h->next, i++) {
            const cJSON *q = cJSON_GetArrayItem(h, 0), *a = cJSON_GetArrayItem(h, 1);
            char what[64];
            snprintf(what, sizeof(what), "history[%d]", i);
            if (!cJSON_IsArray(h) || cJSON_GetArraySize(h) != 2 || !cJSON_IsString(q) ||
                !cJSON_IsString(a)) {
                snprintf(err, MT_ERR_LEN, "%s:%lld: %s must be [query, response] strings", path,
                         (long long)line_no, what);
                return -1;
            }
            if (add_text(b, MT_CHAT_USER, q->valuestring, strlen(q->valuestring), what, path,
                         line_no, err) ||
                add_text(b, MT_CHAT_ASSISTANT, a->valuestring, strlen(a->valuestring), what, path,
                         line_no, err))
                return -1;
        }
    }
    /* LLaMA-Factory's query: the instruction, then the input when not empty, joined by "\n" */
    mt_strbuf q = {0};
    mt_strbuf_append(&q, ins, strlen(ins));
    if (in[0]) {
        mt_strbuf_append(&q, "\n", 1);
        mt_strbuf_append(&q, in, strlen(in));
    }
    int rc = add_text(b, MT_CHAT_USER, q.p, q.len, "instruction", path, line_no, err);
    mt_strbuf_free(&q);
    return rc ? rc : add_text(b, MT_CHAT_ASSISTANT, out, strlen(out), "output", path, line_no, err);
}

const mt_format_reader mt_format_readers[MT_FORMAT_COUNT] = {
    [MT_FORMAT_GSM8K] = {"gsm8k", "question+answer", gsm8k_fits, gsm8k_read},
    [MT_FORMAT_MESSAGES] = {"messages", "messages", messages_fits, messages_read},
    [MT_FORMAT_SHAREGPT] = {"sharegpt", "conversations", sharegpt_fits, sharegpt_read},
    [MT_FORMAT_ALPACA] = {"alpaca", "instruction+output", alpaca_fits, alpaca_read},
};
