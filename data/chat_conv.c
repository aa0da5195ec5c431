/* chat_conv.c: conversations as a chat template sees them (normalised as transformers and
 * vLLM do), their renders, and the trained bytes of a render (the rule of data/chat.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "data/chat_internal.h"

/* ---- conversations ---- */

static bool key_is(jinja_value k, const char *s) {
    return k.type == JINJA_STR && k.u.s.len == strlen(s) && !memcmp(k.u.s.p, s, k.u.s.len);
}

int mt_chat_conv_len(const mt_chat_conv *c) {
    return c->messages.type == JINJA_LIST ? (int)c->messages.u.list->n : 0;
}

const char *mt_chat_conv_role(const mt_chat_conv *c, int i) {
    jinja_value *r = jinja_dict_get_str(c->messages.u.list->items[i], "role");
    return r && r->type == JINJA_STR ? r->u.s.p : "";
}

/* tool_calls[j].function.arguments given as a JSON string: the object it holds (vLLM parses
 * them for the templates, which iterate arguments.items()). */
static int parse_arguments(jinja_heap *h, jinja_value calls, int i, char *err, size_t errlen) {
    if (calls.type != JINJA_LIST) {
        snprintf(err, errlen, "messages[%d].tool_calls must be a list", i);
        return -1;
    }
    for (int64_t j = 0; j < calls.u.list->n; j++) {
        jinja_value call = calls.u.list->items[j];
        jinja_value *fn = call.type == JINJA_DICT ? jinja_dict_get_str(call, "function") : NULL;
        if (!fn || fn->type != JINJA_DICT) {
            snprintf(err, errlen,
                     "messages[%d].tool_calls[%lld] needs a \"function\" object (OpenAI's shape)",
                     i, (long long)j);
            return -1;
        }
        jinja_value *name = jinja_dict_get_str(*fn, "name"),
                    *args = jinja_dict_get_str(*fn, "arguments");
        if (!name || name->type != JINJA_STR) {
            snprintf(err, errlen, "messages[%d].tool_calls[%lld].function.name must be a string", i,
                     (long long)j);
            return -1;
        }
        if (args && args->type == JINJA_STR) {
            jinja_value parsed;
            char why[200] = "";
            const bool json =
                jinja_json_parse(h, args->u.s.p, args->u.s.len, &parsed, why, sizeof(why)) == 0;
            if (!json || parsed.type != JINJA_DICT) {
                snprintf(err, errlen,
                         "messages[%d].tool_calls[%lld].function.arguments is a string but not a "
                         "JSON object (%s)",
                         i, (long long)j, json ? "another JSON value" : why);
                return -1;
            }
            *args = parsed;
        } else if (args && args->type != JINJA_DICT) {
            snprintf(err, errlen,
                     "messages[%d].tool_calls[%lld].function.arguments must be an object or a JSON "
                     "string",
                     i, (long long)j);
            return -1;
        }
    }
    return 0;
}

int mt_chat_conv_normalize(jinja_heap *h, mt_chat_conv *c, char *err, size_t errlen) {
    if (c->messages.type != JINJA_LIST || c->messages.u.list->n == 0) {
        snprintf(err, errlen, "\"messages\" must be a non-empty list");
        return -1;
    }
    const int n = mt_chat_conv_len(c);
    jinja_value out = jinja_list_new(h);
    c->loss = jinja_heap_alloc(h, (size_t)n);
    MT_CHECK(c->loss, "the conversation's heap is full");
    for (int i = 0; i < n; i++) {
        jinja_value m = c->messages.u.list->items[i];
        if (m.type != JINJA_DICT) {
            snprintf(err, errlen, "messages[%d] is not an object", i);
            return -1;
        }
        jinja_value *role = jinja_dict_get_str(m, "role");
        if (!role || role->type != JINJA_STR || role->u.s.len == 0) {
            snprintf(err, errlen, "messages[%d] needs a \"role\" string", i);
            return -1;
        }
        c->loss[i] = -1;
        /* transformers: keys whose value is None dropped; "loss" is the pipeline's */
        jinja_value d = jinja_dict_new(h);
        const jinja_value *reasoning = NULL;
        for (int64_t k = 0; k < m.u.dict->n; k++) {
            jinja_value key = m.u.dict->keys[k], v = m.u.dict->vals[k];
            if (v.type == JINJA_NONE) continue;
            if (key_is(key, "loss")) {
                if (v.type != JINJA_BOOL) {
                    snprintf(err, errlen, "messages[%d].loss must be true or false", i);
                    return -1;
                }
                c->loss[i] = v.u.b;
                continue;
            }
            jinja_dict_set(h, d, key, v);
        }
        static const char *const fields[] = {"reasoning_content", "thinking", "reasoning"};
        for (int f = 0; f < 3 && !reasoning; f++) reasoning = jinja_dict_get_str(d, fields[f]);
        if (reasoning) { /* {"thinking": R, **message, "reasoning_content": R} */
            const jinja_value r = *reasoning;
            jinja_value a = jinja_dict_new(h);
            jinja_dict_set_str(h, a, "thinking", r);
            for (int64_t k = 0; k < d.u.dict->n; k++)
                jinja_dict_set(h, a, d.u.dict->keys[k], d.u.dict->vals[k]);
            jinja_dict_set_str(h, a, "reasoning_content", r);
            d = a;
        }
        jinja_value *calls = jinja_dict_get_str(d, "tool_calls");
        if (calls && parse_arguments(h, *calls, i, err, errlen) != 0) return -1;
        if (c->loss[i] >= 0 && strcmp(role->u.s.p, "assistant")) {
            snprintf(err, errlen,
                     "messages[%d].loss: only assistant messages are trained (role \"%s\")", i,
                     role->u.s.p);
            return -1;
        }
        jinja_list_push(h, out, d);
    }
    c->messages = out;
    return 0;
}

int mt_chat_conv_parse(jinja_heap *h, const char *json, size_t len, bool with_vars,
                       mt_chat_conv *out, char *err, size_t errlen) {
    jinja_value v;
    char why[256];
    if (jinja_json_parse(h, json, len, &v, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "not valid JSON: %s", why);
        return -1;
    }
    return mt_chat_conv_from_value(h, v, with_vars, out, err, errlen);
}

int mt_chat_conv_from_value(jinja_heap *h, jinja_value v, bool with_vars, mt_chat_conv *out,
                            char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    out->tools = out->documents = jinja_none();
    out->vars.type = JINJA_UNDEFINED;
    if (v.type != JINJA_DICT) {
        snprintf(err, errlen, "a conversation must be a JSON object");
        return -1;
    }
    out->messages.type = JINJA_UNDEFINED;
    for (int64_t i = 0; i < v.u.dict->n; i++) {
        jinja_value k = v.u.dict->keys[i], x = v.u.dict->vals[i];
        if (key_is(k, "messages")) {
            out->messages = x;
        } else if (key_is(k, "tools") || key_is(k, "documents")) {
            if (x.type != JINJA_LIST && x.type != JINJA_NONE) {
                snprintf(err, errlen, "\"%.*s\" must be a list", (int)k.u.s.len, k.u.s.p);
                return -1;
            }
            *(key_is(k, "tools") ? &out->tools : &out->documents) = x;
        } else if (with_vars) {
            if (out->vars.type != JINJA_DICT) out->vars = jinja_dict_new(h);
            jinja_dict_set(h, out->vars, k, x);
        } else {
            snprintf(err, errlen,
                     "unknown key \"%.*s\" (a conversation has messages, tools, documents)",
                     (int)(k.u.s.len > 60 ? 60 : k.u.s.len), k.u.s.p);
            return -1;
        }
    }
    if (out->messages.type == JINJA_UNDEFINED) {
        snprintf(err, errlen, "missing \"messages\"");
        return -1;
    }
    return mt_chat_conv_normalize(h, out, err, errlen);
}

void mt_chat_conv_from_msgs(jinja_heap *h, const mt_chat_msg *msgs, int n, mt_chat_conv *out) {
    static const char *const roles[] = {"system", "user", "assistant"};
    memset(out, 0, sizeof(*out));
    out->messages = jinja_list_new(h);
    out->tools = out->documents = jinja_none();
    out->vars.type = JINJA_UNDEFINED;
    out->loss = jinja_heap_alloc(h, (size_t)(n ? n : 1));
    MT_CHECK(out->loss, "the conversation's heap is full");
    for (int i = 0; i < n; i++) {
        jinja_value m = jinja_dict_new(h);
        jinja_dict_set_str(h, m, "role", jinja_cstr(h, roles[msgs[i].role]));
        jinja_dict_set_str(h, m, "content", jinja_str(h, msgs[i].text, msgs[i].len));
        if (msgs[i].reasoning)
            jinja_dict_set_str(h, m, "reasoning_content",
                               jinja_str(h, msgs[i].reasoning, msgs[i].reasoning_len));
        jinja_list_push(h, out->messages, m);
        out->loss[i] = -1;
    }
}

/* ---- renders ---- */

static void rendered_set(mt_chat_rendered *r, const char *s, size_t n) {
    if (n + 1 > r->cap) {
        r->cap = n + 1 + n / 2;
        r->text = realloc(r->text, r->cap);
        MT_CHECK(r->text, "out of memory for a rendered conversation of %zu bytes", n);
    }
    memcpy(r->text, s, n);
    r->text[n] = 0;
    r->len = n;
    r->n_spans = 0;
}

static void rendered_span(mt_chat_rendered *r, int64_t a, int64_t b) {
    if (r->n_spans == r->span_cap) {
        r->span_cap = r->span_cap ? 2 * r->span_cap : 8;
        r->spans = realloc(r->spans, sizeof(int64_t) * 2 * (size_t)r->span_cap);
        MT_CHECK(r->spans, "out of memory for spans");
    }
    r->spans[2 * r->n_spans] = a;
    r->spans[2 * r->n_spans++ + 1] = b;
}

/* Renders messages [0, n) into o (track: tag the messages' turns). */
static int render(mt_chat_template *t, jinja_heap *h, const mt_chat_conv *c, int n, bool agp,
                  bool track, jinja_output *o, char *err, size_t errlen) {
    const jinja_template *jt = mt_chat_pick(t, c, err, errlen);
    if (!jt) return -1;
    jinja_value vars = mt_chat_vars(t, h, c, n, agp);
    jinja_render_opts opts = {.now = -1};
    if (track) {
        opts.track = c->messages.u.list->items;
        opts.n_track = n < 0 ? mt_chat_conv_len(c) : n;
    }
    return jinja_render(jt, h, vars, &opts, o, err, errlen);
}

int mt_chat_render_conv(mt_chat_template *t, jinja_heap *h, const mt_chat_conv *c, int n,
                        bool add_generation_prompt, mt_chat_rendered *out, char *err,
                        size_t errlen) {
    jinja_output o = {0};
    int rc = render(t, h, c, n, add_generation_prompt, false, &o, err, errlen);
    if (rc == 0) rendered_set(out, o.text.p, o.text.len);
    jinja_output_free(&o);
    return rc;
}

int mt_chat_render_msgs(mt_chat_template *t, const mt_chat_msg *msgs, int n, mt_chat_rendered *out,
                        char *err, size_t errlen) {
    jinja_heap *h = jinja_heap_new(0);
    mt_chat_conv c;
    mt_chat_conv_from_msgs(h, msgs, n, &c);
    int rc = mt_chat_render_conv(t, h, &c, -1, true, out, err, errlen);
    jinja_heap_free(h);
    return rc;
}

/* The generation prompt after messages [0, i): render(agp) minus render(no agp). */
static int generation_prompt(mt_chat_template *t, jinja_heap *h, const mt_chat_conv *c, int i,
                             jinja_buf *gp, char *err, size_t errlen) {
    jinja_output a = {0}, b = {0};
    int rc = render(t, h, c, i, false, false, &a, err, errlen);
    if (rc == 0) rc = render(t, h, c, i, true, false, &b, err, errlen);
    if (rc == 0 && (b.text.len < a.text.len || memcmp(a.text.p, b.text.p, a.text.len))) {
        snprintf(err, errlen,
                 "the rendering of messages[:%d] with the generation prompt does not start with "
                 "the one without: the template's header of message %d cannot be told",
                 i, i);
        rc = -1;
    }
    if (rc == 0) jinja_buf_append(gp, b.text.p + a.text.len, b.text.len - a.text.len);
    jinja_output_free(&a);
    jinja_output_free(&b);
    return rc;
}

static bool find_last(const char *s, size_t n, const char *needle, size_t *end) {
    const size_t k = strlen(needle);
    for (size_t i = n >= k ? n - k + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, needle, k)) {
            *end = i + k;
            return true;
        }
    return false;
}

/* Trained bytes without {% generation %} marks: message i's turn after its common prefix
 * with the generation prompt (cut back to its last line break when it is only part of the
 * prompt), through its last end-of-turn token. */
static int turn_span(mt_chat_template *t, jinja_heap *h, const mt_chat_conv *c, int i,
                     const jinja_output *o, mt_chat_rendered *out, char *err, size_t errlen) {
    int64_t a = -1, b = -1;
    for (int k = 0; k < o->n_tagged; k++) {
        if (o->tagged[k].tag != i) continue;
        if (a >= 0) {
            snprintf(err, errlen,
                     "assistant message %d is rendered in pieces (the template's loop over the "
                     "messages visits it more than once): its trained bytes cannot be told",
                     i);
            return -1;
        }
        a = o->tagged[k].start;
        b = o->tagged[k].end;
    }
    if (a < 0) {
        snprintf(err, errlen,
                 "assistant message %d renders nothing inside the template's loop over the "
                 "messages: its trained bytes cannot be told",
                 i);
        return -1;
    }
    if (!t->eot) {
        snprintf(err, errlen,
                 "the tokenizer sets no eos_token: the end of assistant turns cannot be told");
        return -1;
    }
    jinja_buf gp = {0};
    jinja_buf_append(&gp, "", 0);
    if (generation_prompt(t, h, c, i, &gp, err, errlen) != 0) {
        jinja_buf_free(&gp);
        return -1;
    }
    const char *turn = o->text.p + a;
    size_t head = 0;
    while (head < gp.len && (int64_t)head < b - a && turn[head] == gp.p[head]) head++;
    if (head <
        gp.len) { /* a partial match: its role line only (a reply "<..." against "<think>") */
        size_t nl = head;
        while (nl > 0 && turn[nl - 1] != '\n') nl--;
        if (nl > 0) head = nl;
    }
    while (head > 0 && ((unsigned char)turn[head] & 0xC0) == 0x80) head--; /* a character's start */
    jinja_buf_free(&gp);
    size_t end;
    if (!find_last(turn + head, (size_t)(b - a) - head, t->eot, &end)) {
        snprintf(err, errlen,
                 "assistant message %d: no end-of-turn token (eos_token \"%s\") in its turn after "
                 "the header",
                 i, t->eot);
        return -1;
    }
    rendered_span(out, a + (int64_t)head, a + (int64_t)head + (int64_t)end);
    return 0;
}

int mt_chat_render_trained(mt_chat_template *t, jinja_heap *h, const mt_chat_conv *c, int n,
                           const bool *train, mt_chat_rendered *out, char *err, size_t errlen) {
    jinja_output o = {0};
    if (n < 0) n = mt_chat_conv_len(c);
    int rc = render(t, h, c, n, false, true, &o, err, errlen);
    if (rc == 0) rendered_set(out, o.text.p, o.text.len);
    const jinja_template *jt = rc == 0 ? mt_chat_pick(t, c, err, errlen) : NULL;
    if (rc == 0 && jinja_template_has_generation(jt)) {
        /* the marked spans inside a trained message's turn, each with the eos after it */
        const size_t k = t->eot ? strlen(t->eot) : 0;
        for (int g = 0; g < o.n_gen; g++) {
            int msg = -1;
            for (int r = 0; r < o.n_tagged; r++)
                if (o.gen[g].start >= o.tagged[r].start && o.gen[g].end <= o.tagged[r].end)
                    msg = o.tagged[r].tag;
            if (msg < 0 || !train[msg]) continue;
            int64_t e = o.gen[g].end;
            if (k && (size_t)e + k <= o.text.len && !memcmp(o.text.p + e, t->eot, k))
                e += (int64_t)k;
            if (e > o.gen[g].start) rendered_span(out, o.gen[g].start, e);
        }
    } else if (rc == 0) {
        for (int i = 0; i < n && rc == 0; i++)
            if (train[i]) rc = turn_span(t, h, c, i, &o, out, err, errlen);
    }
    jinja_output_free(&o);
    return rc;
}

/* The number of leading system messages of c among its first n. */
static int conv_leading_system(const mt_chat_conv *c, int n) {
    int k = 0;
    while (k < n && !strcmp(mt_chat_conv_role(c, k), "system")) k++;
    return k;
}

int mt_chat_render_prompt_json(mt_chat_template *t, const char *json, size_t len, int upto,
                               const char *const *shots, int n_shots, mt_chat_rendered *out,
                               char *err, size_t errlen) {
    jinja_heap *h = jinja_heap_new(0);
    mt_chat_conv c, s;
    int rc = mt_chat_conv_parse(h, json, len, false, &c, err, errlen);
    const int n = rc == 0 ? mt_chat_conv_len(&c) : 0;
    if (rc == 0 && (upto < 0 || upto > n)) {
        snprintf(err, errlen, "messages[:%d] of a conversation of %d messages", upto, n);
        rc = -1;
    }
    if (rc == 0) {
        const int sys = conv_leading_system(&c, upto);
        jinja_value msgs = jinja_list_new(h);
        for (int i = 0; i < sys; i++) jinja_list_push(h, msgs, c.messages.u.list->items[i]);
        for (int k = 0; rc == 0 && k < n_shots; k++) {
            rc = mt_chat_conv_parse(h, shots[k], strlen(shots[k]), false, &s, err, errlen);
            const int m = rc == 0 ? mt_chat_conv_len(&s) : 0;
            for (int i = rc == 0 ? conv_leading_system(&s, m) : m; i < m; i++)
                jinja_list_push(h, msgs, s.messages.u.list->items[i]);
        }
        for (int i = sys; i < upto; i++) jinja_list_push(h, msgs, c.messages.u.list->items[i]);
        c.messages = msgs;
        c.loss = NULL;
        if (rc == 0) rc = mt_chat_render_conv(t, h, &c, -1, true, out, err, errlen);
    }
    jinja_heap_free(h);
    return rc;
}
