/* dataset_formats.c: one reader per dataset format (data/dataset.h), each turning one JSON
 * record into a conversation {"messages", "tools"?, "documents"?} for the chat template. */
#include <stdio.h>
#include <string.h>

#include "data/dataset_internal.h"

static jinja_value *field(jinja_value obj, const char *k) { return jinja_dict_get_str(obj, k); }
static bool has_key(jinja_value obj, const char *k) { return field(obj, k) != NULL; }

static bool blank(jinja_value s) {
    for (size_t i = 0; i < s.u.s.len; i++)
        if (s.u.s.p[i] != ' ' && s.u.s.p[i] != '\t' && s.u.s.p[i] != '\r' && s.u.s.p[i] != '\n')
            return false;
    return true;
}

static bool str_is(jinja_value v, const char *s) {
    return v.type == JINJA_STR && v.u.s.len == strlen(s) && !memcmp(v.u.s.p, s, v.u.s.len);
}

/* A required text field: present, a string, not blank. */
static const jinja_value *text_field(jinja_value obj, const char *name, const mt_rec_ctx *r) {
    jinja_value *f = field(obj, name);
    if (!f) {
        mt_rec_fail(r, "missing field \"%s\"", name);
        return NULL;
    }
    if (f->type != JINJA_STR) {
        mt_rec_fail(r, "field \"%s\" is not a string", name);
        return NULL;
    }
    if (blank(*f)) {
        mt_rec_fail(r, "empty %s", name);
        return NULL;
    }
    return f;
}

/* An optional string field: "" when absent or null; NULL (err set) when something else. */
static const char *optional_string(jinja_value obj, const char *name, const mt_rec_ctx *r) {
    jinja_value *f = field(obj, name);
    if (!f || f->type == JINJA_NONE) return "";
    if (f->type == JINJA_STR) return f->u.s.p;
    mt_rec_fail(r, "field \"%s\" is not a string", name);
    return NULL;
}

static jinja_value msg(jinja_heap *h, const char *role, jinja_value content) {
    jinja_value m = jinja_dict_new(h);
    jinja_dict_set_str(h, m, "role", jinja_cstr(h, role));
    jinja_dict_set_str(h, m, "content", content);
    return m;
}

static jinja_value conv_new(jinja_heap *h, jinja_value messages) {
    jinja_value c = jinja_dict_new(h);
    jinja_dict_set_str(h, c, "messages", messages);
    return c;
}

/* ---- gsm8k: {"question", "answer"} ---- */

static bool gsm8k_fits(jinja_value o) { return has_key(o, "question") && has_key(o, "answer"); }

static int gsm8k_read(jinja_heap *h, jinja_value o, jinja_value *conv, const mt_rec_ctx *r) {
    const jinja_value *q = text_field(o, "question", r), *a = q ? text_field(o, "answer", r) : NULL;
    if (!a) return -1;
    jinja_value m = jinja_list_new(h);
    jinja_list_push(h, m, msg(h, "user", *q));
    jinja_list_push(h, m, msg(h, "assistant", *a));
    *conv = conv_new(h, m);
    return 0;
}

/* ---- messages: OpenAI's chat format ---- */

static bool messages_fits(jinja_value o) { return has_key(o, "messages"); }

/* content: a string, or a list of {"type": "text", "text"} parts. */
static int check_content(jinja_value c, const char *what, const mt_rec_ctx *r) {
    if (c.type == JINJA_STR) return 0;
    if (c.type != JINJA_LIST)
        return mt_rec_fail(r, "%s must be a string or a list of text parts", what);
    for (int64_t k = 0; k < c.u.list->n; k++) {
        jinja_value p = c.u.list->items[k];
        jinja_value *type = p.type == JINJA_DICT ? field(p, "type") : NULL;
        jinja_value *text = p.type == JINJA_DICT ? field(p, "text") : NULL;
        if (!type || type->type != JINJA_STR || !text || text->type != JINJA_STR) {
            if (type && type->type == JINJA_STR && !str_is(*type, "text"))
                return mt_rec_fail(r, "%s[%lld] is a \"%.40s\" part: only text parts are supported",
                                   what, (long long)k, type->u.s.p);
            return mt_rec_fail(r, "%s[%lld] is not a {\"type\": \"text\", \"text\": ...} part",
                               what, (long long)k);
        }
        if (!str_is(*type, "text"))
            return mt_rec_fail(r, "%s[%lld] is a \"%.40s\" part: only text parts are supported",
                               what, (long long)k, type->u.s.p);
    }
    return 0;
}

static bool content_blank(jinja_value c) {
    if (c.type == JINJA_STR) return blank(c);
    for (int64_t k = 0; k < c.u.list->n; k++)
        if (!blank(*field(c.u.list->items[k], "text"))) return false;
    return true;
}

static int check_tool_calls(jinja_value calls, int i, const mt_rec_ctx *r) {
    if (calls.type != JINJA_LIST)
        return mt_rec_fail(r, "messages[%d].tool_calls must be a list", i);
    for (int64_t j = 0; j < calls.u.list->n; j++) {
        jinja_value c = calls.u.list->items[j];
        jinja_value *fn = c.type == JINJA_DICT ? field(c, "function") : NULL;
        if (!fn || fn->type != JINJA_DICT)
            return mt_rec_fail(r,
                               "messages[%d].tool_calls[%lld] needs a \"function\" object "
                               "({\"name\", \"arguments\"})",
                               i, (long long)j);
        jinja_value *name = field(*fn, "name"), *args = field(*fn, "arguments");
        if (!name || name->type != JINJA_STR || blank(*name))
            return mt_rec_fail(
                r, "messages[%d].tool_calls[%lld].function.name must be a non-empty string", i,
                (long long)j);
        if (!args || (args->type != JINJA_DICT && args->type != JINJA_STR))
            return mt_rec_fail(r,
                               "messages[%d].tool_calls[%lld].function.arguments must be an object "
                               "or a JSON string",
                               i, (long long)j);
    }
    return 0;
}

static const char *const roles[] = {"system",    "developer", "root",     "user",
                                    "assistant", "tool",      "function", NULL};

static int check_message(jinja_value m, int i, const mt_rec_ctx *r) {
    if (m.type != JINJA_DICT) return mt_rec_fail(r, "messages[%d] is not an object", i);
    jinja_value *role = field(m, "role"), *content = field(m, "content");
    if (!role || role->type != JINJA_STR)
        return mt_rec_fail(r, "messages[%d] needs a \"role\" string", i);
    int k = 0;
    while (roles[k] && !str_is(*role, roles[k])) k++;
    if (!roles[k])
        return mt_rec_fail(r,
                           "messages[%d] has role \"%.40s\" (system, developer, root, user, "
                           "assistant, tool, function)",
                           i, role->u.s.p);
    const bool assistant = str_is(*role, "assistant");
    char what[64];
    snprintf(what, sizeof(what), "messages[%d].content", i);
    if (content && content->type != JINJA_NONE && check_content(*content, what, r) != 0) return -1;
    jinja_value *calls = field(m, "tool_calls");
    if (calls && calls->type != JINJA_NONE) {
        if (!assistant)
            return mt_rec_fail(r, "messages[%d].tool_calls: only assistant messages call tools", i);
        if (check_tool_calls(*calls, i, r) != 0) return -1;
    }
    static const char *const reasoning[] = {"reasoning_content", "reasoning", "thinking"};
    bool has_reasoning = false;
    for (int f = 0; f < 3; f++) {
        jinja_value *x = field(m, reasoning[f]);
        if (!x || x->type == JINJA_NONE) continue;
        if (x->type != JINJA_STR)
            return mt_rec_fail(r, "messages[%d].%s must be a string", i, reasoning[f]);
        has_reasoning = true;
    }
    jinja_value *loss = field(m, "loss");
    if (loss && loss->type != JINJA_BOOL)
        return mt_rec_fail(r, "messages[%d].loss must be true or false", i);
    const bool empty = !content || content->type == JINJA_NONE || content_blank(*content);
    if (assistant && empty && !(calls && calls->type == JINJA_LIST && calls->u.list->n) &&
        !has_reasoning)
        return mt_rec_fail(r, "%s is empty (and no tool_calls or reasoning_content)", what);
    if (!assistant && (!content || content->type == JINJA_NONE))
        return mt_rec_fail(r, "messages[%d] needs a \"content\"", i);
    if ((str_is(*role, "user")) && empty) return mt_rec_fail(r, "%s is empty", what);
    return 0;
}

static int list_field(jinja_value o, const char *name, jinja_value conv, jinja_heap *h,
                      const mt_rec_ctx *r) {
    jinja_value *v = field(o, name);
    if (!v || v->type == JINJA_NONE) return 0;
    if (v->type != JINJA_LIST) return mt_rec_fail(r, "\"%s\" must be a list", name);
    for (int64_t k = 0; k < v->u.list->n; k++)
        if (v->u.list->items[k].type != JINJA_DICT)
            return mt_rec_fail(r, "%s[%lld] is not an object", name, (long long)k);
    jinja_dict_set_str(h, conv, name, *v);
    return 0;
}

static int messages_read(jinja_heap *h, jinja_value o, jinja_value *conv, const mt_rec_ctx *r) {
    jinja_value *msgs = field(o, "messages");
    if (!msgs || msgs->type != JINJA_LIST || msgs->u.list->n == 0)
        return mt_rec_fail(r, "\"messages\" must be a non-empty list");
    for (int64_t i = 0; i < msgs->u.list->n; i++)
        if (check_message(msgs->u.list->items[i], (int)i, r) != 0) return -1;
    *conv = conv_new(h, *msgs);
    if (list_field(o, "tools", *conv, h, r) != 0 || list_field(o, "documents", *conv, h, r) != 0)
        return -1;
    return 0;
}

/* ---- sharegpt: {"conversations": [{"from", "value"}], "system"?, "tools"?} ---- */

static bool sharegpt_fits(jinja_value o) { return has_key(o, "conversations"); }

/* function_call's value: {"name", "arguments"} or a list of them, as JSON text. */
static int sharegpt_call(jinja_heap *h, jinja_value value, int i, jinja_value *m,
                         const mt_rec_ctx *r) {
    jinja_value v;
    char why[200];
    if (jinja_json_parse(h, value.u.s.p, value.u.s.len, &v, why, sizeof(why)) != 0)
        return mt_rec_fail(r, "conversations[%d] (function_call): the value is not JSON: %s", i,
                           why);
    jinja_value calls = jinja_list_new(h), one = v;
    const int64_t n = v.type == JINJA_LIST ? v.u.list->n : 1;
    for (int64_t k = 0; k < n; k++) {
        if (v.type == JINJA_LIST) one = v.u.list->items[k];
        jinja_value *name = one.type == JINJA_DICT ? field(one, "name") : NULL;
        jinja_value *args = one.type == JINJA_DICT ? field(one, "arguments") : NULL;
        if (!name || name->type != JINJA_STR || !args)
            return mt_rec_fail(
                r,
                "conversations[%d] (function_call): the value must hold {\"name\", \"arguments\"}",
                i);
        jinja_value fn = jinja_dict_new(h), call = jinja_dict_new(h);
        jinja_dict_set_str(h, fn, "name", *name);
        jinja_dict_set_str(h, fn, "arguments", *args);
        jinja_dict_set_str(h, call, "type", jinja_cstr(h, "function"));
        jinja_dict_set_str(h, call, "function", fn);
        jinja_list_push(h, calls, call);
    }
    *m = msg(h, "assistant", jinja_cstr(h, ""));
    jinja_dict_set_str(h, *m, "tool_calls", calls);
    return 0;
}

static int sharegpt_read(jinja_heap *h, jinja_value o, jinja_value *conv, const mt_rec_ctx *r) {
    jinja_value *c = field(o, "conversations");
    if (!c || c->type != JINJA_LIST || c->u.list->n == 0)
        return mt_rec_fail(r, "\"conversations\" must be a non-empty list");
    const char *sys = optional_string(o, "system", r);
    if (!sys) return -1;
    jinja_value m = jinja_list_new(h);
    if (sys[0]) jinja_list_push(h, m, msg(h, "system", jinja_cstr(h, sys)));
    for (int64_t i = 0; i < c->u.list->n; i++) {
        jinja_value t = c->u.list->items[i];
        jinja_value *from = t.type == JINJA_DICT ? field(t, "from") : NULL;
        jinja_value *value = t.type == JINJA_DICT ? field(t, "value") : NULL;
        if (!from || from->type != JINJA_STR || !value || value->type != JINJA_STR)
            return mt_rec_fail(r, "conversations[%lld] needs string \"from\" and \"value\"",
                               (long long)i);
        jinja_value one;
        if (str_is(*from, "human") || str_is(*from, "user")) {
            one = msg(h, "user", *value);
        } else if (str_is(*from, "gpt") || str_is(*from, "assistant")) {
            one = msg(h, "assistant", *value);
        } else if (str_is(*from, "system") && i == 0 && !sys[0]) {
            one = msg(h, "system", *value);
        } else if (str_is(*from, "function_call")) {
            if (sharegpt_call(h, *value, (int)i, &one, r) != 0) return -1;
        } else if (str_is(*from, "observation")) {
            one = msg(h, "tool", *value);
        } else {
            return mt_rec_fail(r,
                               "conversations[%lld] is from \"%.40s\" (human/user, gpt/assistant, "
                               "function_call, observation, or system as the first turn without a "
                               "\"system\" key)",
                               (long long)i, from->u.s.p);
        }
        jinja_list_push(h, m, one);
    }
    for (int64_t i = 0; i < m.u.list->n; i++)
        if (check_message(m.u.list->items[i], (int)i, r) != 0) return -1;
    *conv = conv_new(h, m);
    jinja_value *tools = field(o, "tools");
    if (tools && tools->type == JINJA_STR &&
        !blank(*tools)) { /* LLaMA-Factory keeps them as JSON text */
        jinja_value v;
        char why[200];
        if (jinja_json_parse(h, tools->u.s.p, tools->u.s.len, &v, why, sizeof(why)) != 0 ||
            v.type != JINJA_LIST)
            return mt_rec_fail(r, "\"tools\" is a string but not a JSON list");
        jinja_dict_set_str(h, *conv, "tools", v);
        return 0;
    }
    if (tools && tools->type == JINJA_STR) return 0;
    return list_field(o, "tools", *conv, h, r);
}

/* ---- alpaca: {"instruction", "input"?, "output", "system"?, "history"?} ---- */

static bool alpaca_fits(jinja_value o) { return has_key(o, "instruction") && has_key(o, "output"); }

static int alpaca_read(jinja_heap *h, jinja_value o, jinja_value *conv, const mt_rec_ctx *r) {
    const jinja_value *ins = text_field(o, "instruction", r);
    const jinja_value *out = ins ? text_field(o, "output", r) : NULL;
    const char *in = out ? optional_string(o, "input", r) : NULL;
    const char *sys = in ? optional_string(o, "system", r) : NULL;
    if (!sys) return -1;
    jinja_value m = jinja_list_new(h);
    if (sys[0]) jinja_list_push(h, m, msg(h, "system", jinja_cstr(h, sys)));
    jinja_value *hist = field(o, "history");
    if (hist && hist->type != JINJA_NONE) {
        if (hist->type != JINJA_LIST)
            return mt_rec_fail(r, "\"history\" must be a list of [query, response]");
        for (int64_t i = 0; i < hist->u.list->n; i++) {
            jinja_value pair = hist->u.list->items[i];
            if (pair.type != JINJA_LIST || pair.u.list->n != 2 ||
                pair.u.list->items[0].type != JINJA_STR || pair.u.list->items[1].type != JINJA_STR)
                return mt_rec_fail(r, "history[%lld] must be [query, response] strings",
                                   (long long)i);
            if (blank(pair.u.list->items[0]) || blank(pair.u.list->items[1]))
                return mt_rec_fail(r, "history[%lld] is empty", (long long)i);
            jinja_list_push(h, m, msg(h, "user", pair.u.list->items[0]));
            jinja_list_push(h, m, msg(h, "assistant", pair.u.list->items[1]));
        }
    }
    /* LLaMA-Factory's query: the instruction, then the input when not empty, joined by "\n" */
    jinja_buf q = {0};
    jinja_buf_append(&q, ins->u.s.p, ins->u.s.len);
    if (in[0]) {
        jinja_buf_append(&q, "\n", 1);
        jinja_buf_append(&q, in, strlen(in));
    }
    jinja_list_push(h, m, msg(h, "user", jinja_str(h, q.p, q.len)));
    jinja_buf_free(&q);
    jinja_list_push(h, m, msg(h, "assistant", *out));
    *conv = conv_new(h, m);
    return 0;
}

const mt_format_reader mt_format_readers[MT_FORMAT_COUNT] = {
    [MT_FORMAT_GSM8K] = {"gsm8k", "question+answer", gsm8k_fits, gsm8k_read},
    [MT_FORMAT_MESSAGES] = {"messages", "messages", messages_fits, messages_read},
    [MT_FORMAT_SHAREGPT] = {"sharegpt", "conversations", sharegpt_fits, sharegpt_read},
    [MT_FORMAT_ALPACA] = {"alpaca", "instruction+output", alpaca_fits, alpaca_read},
};
