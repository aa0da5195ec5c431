/* reply_roundtrip.c: every assistant message of tests/fixtures/chat/multiturn.jsonl rendered by
 * the family's released template (../shared/templates/MiniMax-M2.jinja, MiniMax-M3.jinja,
 * through data/chat.h) and parsed back by the family's reply parser (models/reply.h) gives the
 * message's reasoning_content, content and tool_calls (arguments compared as JSON values); the
 * same text parsed streamed, cut at every byte boundary, gives the same (reply_check.h).
 *
 * The reply of message i is the rendering of messages [0, i] after the rendering of messages
 * [0, i) with the generation prompt (what the model is given), less the end of turn the
 * template writes after every assistant message ("[e~[" "\n": M2's '[e~[' ~ '\n', M3's
 * eos_token ~ '\n'). M3 is rendered with thinking_mode undefined, "enabled", "disabled" and
 * "adaptive"; a mode whose generation prompt the turn does not start with (enabled: "<mm:think>"
 * before a turn without reasoning, which the template starts with "</mm:think>"; disabled: the
 * reverse) is not a reply the model could give there and is left out: each message is checked
 * in exactly three modes. M2's generation prompt always opens "<think>\n" while the template
 * writes no think block for a message without reasoning: such a message is checked after the
 * prompt without that opening (the reply then starts in content, models/reply.h).
 *
 * The message as the template sees it (the expected values), from the templates' text:
 * - content: visible_text(content) (a missing or null content renders as ""); reasoning:
 *   reasoning_content when it is a string, else, when content holds the close think tag
 *   (M2 "</think>", M3 "</mm:think>"), content.split(close)[0].strip('\n').split(open)[-1]
 *   .strip('\n') and content.split(close)[-1].strip('\n'). M2 renders reasoning only after the
 *   last user turn: message i is the last message of its rendering, so always.
 * - Both are compared with line breaks at their ends dropped (models/reply.h's rule, the same
 *   strip('\n') the templates apply when they split), an empty one as none.
 * - M3 leaves out null values of mappings at every depth (to_xml's "if v is not none" and the
 *   top-level loop's): they are dropped from the expected arguments. M2 writes null as tojson
 *   "null", which vLLM's parser reads back as null. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "data/chat.h"
#include "models/reply.h"
#include "tests/models/reply_check.h"
#include "tests/support/data_util.h"
#include "tests/support/harness.h"

#define TURN_END  "[e~[\n"
#define M2_OPENED "<think>\n"

static mt_chat_template *open_tmpl(const char *file, const char *fam, const char *kwargs) {
    const char *s = getenv("MT_SHARED_DIR");
    char tmpl[4200], dir[4200], err[MT_ERR_LEN];
    snprintf(tmpl, sizeof(tmpl), "%s/templates/%s", s && *s ? s : "../shared", file);
    if (!file_exists(tmpl)) return NULL;
    snprintf(dir, sizeof(dir), "%s/tests/fixtures/tokenizer_%s", source_dir(), fam);
    const mt_chat_source src = {.dir = dir, .file = tmpl, .kwargs_json = kwargs};
    mt_chat_template *t = mt_chat_template_open(&src, err, sizeof(err));
    EXPECT(t, "%s", err);
    return t;
}

/* s with line breaks at both ends dropped; NULL when nothing is left. malloc'ed. */
static char *strip_nl(const char *s, size_t n) {
    while (n && *s == '\n') s++, n--;
    while (n && s[n - 1] == '\n') n--;
    if (!n) return NULL;
    char *o = malloc(n + 1);
    memcpy(o, s, n);
    o[n] = 0;
    return o;
}

/* visible_text(content): a string, the text parts of a list, "" for none. */
static void visible_text(const cJSON *c, mt_strbuf *b) {
    mt_strbuf_append(b, "", 0);
    if (cJSON_IsString(c)) {
        mt_strbuf_append(b, c->valuestring, strlen(c->valuestring));
        return;
    }
    const cJSON *p, *list = cJSON_IsArray(c) ? c : NULL;
    cJSON_ArrayForEach(p, list) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (cJSON_IsString(p))
            mt_strbuf_append(b, p->valuestring, strlen(p->valuestring));
        else if (cJSON_IsString(t))
            mt_strbuf_append(b, t->valuestring, strlen(t->valuestring));
    }
}

/* The expected reasoning and content of message m (the rule at the top). */
static void expected_text(const cJSON *m, const char *open, const char *close, char **reasoning,
                          char **content) {
    mt_strbuf c = {0};
    visible_text(cJSON_GetObjectItemCaseSensitive(m, "content"), &c);
    static const char *const alias[] = {"reasoning_content", "thinking", "reasoning"};
    const cJSON *rc = NULL;
    for (int k = 0; k < 3 && !cJSON_IsString(rc); k++)
        rc = cJSON_GetObjectItemCaseSensitive(m, alias[k]);
    const char *at = strstr(c.p, close);
    if (cJSON_IsString(rc)) {
        *reasoning = strip_nl(rc->valuestring, strlen(rc->valuestring));
        *content = strip_nl(c.p, c.len);
    } else if (at) {
        char *head = strip_nl(c.p, (size_t)(at - c.p)); /* split(close)[0].strip('\n') */
        const char *r = head ? head : "";
        for (const char *q; (q = strstr(r, open));) r = q + strlen(open); /* .split(open)[-1] */
        *reasoning = strip_nl(r, strlen(r));
        free(head);
        const char *last = at; /* split(close)[-1] */
        for (const char *q; (q = strstr(last + strlen(close), close));) last = q;
        last += strlen(close);
        *content = strip_nl(last, strlen(last));
    } else {
        *reasoning = NULL;
        *content = strip_nl(c.p, c.len);
    }
    mt_strbuf_free(&c);
}

static void drop_nulls(cJSON *v) {
    cJSON *c = v ? v->child : NULL;
    while (c) {
        cJSON *next = c->next;
        if (cJSON_IsObject(v) && cJSON_IsNull(c))
            cJSON_Delete(cJSON_DetachItemViaPointer(v, c));
        else
            drop_nulls(c);
        c = next;
    }
}

/* Python's str() of a number as the M3 template prints it ({{ val }}). */
static cJSON *py_number_text(double v) {
    char b[64];
    if (v == (double)(long long)v)
        snprintf(b, sizeof(b), "%lld", (long long)v);
    else
        for (int p = 1; p <= 17; p++) {
            snprintf(b, sizeof(b), "%.*g", p, v);
            if (strtod(b, NULL) == v) break;
        }
    return cJSON_CreateString(b);
}

/* M3's expected value of v (in place) where schema (NULL: none) does not type it: a scalar is
 * the text the template prints (a string), a null list entry the empty text. */
static void m3_untyped(cJSON *v, const cJSON *schema) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
    for (cJSON *c = v->child, *next; c; c = next) {
        next = c->next;
        const cJSON *sc =
            cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(props, c->string) : items;
        cJSON *r = NULL;
        if (cJSON_IsArray(c) || cJSON_IsObject(c))
            m3_untyped(c, sc);
        else if (sc)
            continue;
        else if (cJSON_IsBool(c))
            r = cJSON_CreateString(cJSON_IsTrue(c) ? "true" : "false");
        else if (cJSON_IsNumber(c))
            r = py_number_text(c->valuedouble);
        else if (cJSON_IsNull(c))
            r = cJSON_CreateString("");
        if (r && cJSON_IsObject(v))
            cJSON_ReplaceItemInObjectCaseSensitive(v, c->string, r);
        else if (r)
            cJSON_ReplaceItemViaPointer(v, c, r);
    }
}

/* M2 writes a value that is not a string as its JSON (tojson); a parameter the tool's schema
 * does not name is read back as that text (vLLM: no schema, a string): equal when the text's
 * JSON value is the message's. */
static bool m2_untyped_same(const cJSON *want, const cJSON *got, const cJSON *props) {
    if (!cJSON_IsObject(want) || !cJSON_IsObject(got)) return false;
    if (cJSON_GetArraySize(want) != cJSON_GetArraySize(got)) return false;
    const cJSON *w;
    cJSON_ArrayForEach(w, want) {
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(got, w->string);
        if (!g) return false;
        if (cJSON_Compare(w, g, true)) continue;
        if (cJSON_GetObjectItemCaseSensitive(props, w->string) || !cJSON_IsString(g)) return false;
        cJSON *pg = cJSON_Parse(g->valuestring);
        const bool same = pg && cJSON_Compare(w, pg, true);
        cJSON_Delete(pg);
        if (!same) return false;
    }
    return true;
}

static const cJSON *tool_props(const cJSON *tools, const char *name) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, name))
            return cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(fn, "parameters"), "properties");
    }
    return NULL;
}

static bool eq(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

/* Message m against the parse of its reply text; returns the failures. */
static int check_message(const mt_reply_format *f, bool m3, const char *prompt, const char *text,
                         size_t n, const cJSON *tools, const cJSON *m, const char *what) {
    int bad = 0;
    char *want_r, *want_c;
    expected_text(m, m3 ? "<mm:think>" : "<think>", m3 ? "</mm:think>" : "</think>", &want_r,
                  &want_c);
    mt_reply r;
    mt_reply_parse(f, prompt, text, n, tools, false, &r);
    if (!eq(r.reasoning, want_r) || !eq(r.content, want_c) || r.in_reasoning) {
        bad++;
        printf("FAIL %s: reasoning \"%s\" content \"%s\", the message's \"%s\" and \"%s\"\n", what,
               r.reasoning ? r.reasoning : "(none)", r.content ? r.content : "(none)",
               want_r ? want_r : "(none)", want_c ? want_c : "(none)");
    }
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), *tc;
    if (cJSON_GetArraySize(calls) != r.n_calls) {
        bad++;
        printf("FAIL %s: %d tool calls, the message has %d\n", what, r.n_calls,
               cJSON_GetArraySize(calls));
    }
    int i = 0;
    cJSON_ArrayForEach(tc, calls) {
        if (i >= r.n_calls) break;
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        if (!fn) fn = tc;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        cJSON *want =
            cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : cJSON_Duplicate(args, true);
        const cJSON *props = tool_props(tools, name->valuestring);
        if (m3) {
            drop_nulls(want);
            cJSON *ps = cJSON_CreateObject();
            if (props) cJSON_AddItemReferenceToObject(ps, "properties", (cJSON *)props);
            m3_untyped(want, ps);
            cJSON_Delete(ps);
        }
        cJSON *got = cJSON_Parse(r.calls[i].arguments);
        if (strcmp(name->valuestring, r.calls[i].name) || !got ||
            !(cJSON_Compare(want, got, true) || (!m3 && m2_untyped_same(want, got, props)))) {
            bad++;
            char *w = cJSON_PrintUnformatted(want);
            printf("FAIL %s: call %d %s(%s), the message's %s(%s)\n", what, i, r.calls[i].name,
                   r.calls[i].arguments, name->valuestring, w);
            free(w);
        }
        cJSON_Delete(want);
        cJSON_Delete(got);
        i++;
    }
    mt_reply_free(&r);
    free(want_r);
    free(want_c);
    mt_test_failures += bad;
    return bad + reply_check_stream(f, prompt, text, n, tools, false, what);
}

static int roundtrip(const char *fam) {
    const bool m3 = !strcmp(fam, "m3");
    const char *file = m3 ? "MiniMax-M3.jinja" : "MiniMax-M2.jinja";
    static const char *const modes[] = {NULL, "{\"thinking_mode\": \"enabled\"}",
                                        "{\"thinking_mode\": \"disabled\"}",
                                        "{\"thinking_mode\": \"adaptive\"}"};
    const int n_modes = m3 ? 4 : 1;
    mt_chat_template *t[4] = {0};
    for (int k = 0; k < n_modes; k++) t[k] = open_tmpl(file, fam, modes[k]);
    if (!t[0]) {
        printf("skipped: ../shared/templates/%s is absent\n", file);
        return MT_TEST_SKIP;
    }
    const mt_reply_format *f = mt_reply_format_find(m3 ? "minimax_m3" : "minimax_m2");
    char path[4200], err[MT_ERR_LEN], what[300];
    snprintf(path, sizeof(path), "%s/tests/fixtures/chat/multiturn.jsonl", source_dir());
    size_t len;
    char *data = mt_file_read(path, &len, err);
    EXPECT(data, "%s", err);
    int n_msgs = 0, n_texts = 0, n_calls = 0, bad = 0;
    jinja_heap *h = jinja_heap_new(0);
    char *line = data;
    for (int rec = 1; line && *line; rec++) {
        char *nl = strchr(line, '\n');
        const size_t ll = nl ? (size_t)(nl - line) : strlen(line);
        cJSON *o = cJSON_ParseWithLength(line, ll);
        mt_chat_conv c;
        EXPECT(o && mt_chat_conv_parse(h, line, ll, false, &c, err, sizeof(err)) == 0,
               "record %d: %s", rec, err);
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(o, "tools");
        for (int i = 0; o && i < cJSON_GetArraySize(msgs); i++) {
            const cJSON *m = cJSON_GetArrayItem(msgs, i);
            if (strcmp(cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring, "assistant"))
                continue;
            n_msgs++;
            n_calls += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "tool_calls"));
            int checked = 0;
            for (int k = 0; k < n_modes; k++) {
                mt_chat_rendered full = {0}, prompt = {0};
                EXPECT(
                    mt_chat_render_conv(t[k], h, &c, i + 1, false, &full, err, sizeof(err)) == 0 &&
                        mt_chat_render_conv(t[k], h, &c, i, true, &prompt, err, sizeof(err)) == 0,
                    "record %d message %d: %s", rec, i, err);
                const size_t tl = strlen(TURN_END), ol = strlen(M2_OPENED);
                bool cut = false; /* M2: the generation prompt's opened think left out */
                if (!m3 && (full.len < prompt.len || memcmp(full.text, prompt.text, prompt.len)) &&
                    prompt.len >= ol && !strcmp(prompt.text + prompt.len - ol, M2_OPENED)) {
                    prompt.text[prompt.len -= ol] = 0;
                    cut = true;
                }
                if (full.len >= prompt.len + tl && !memcmp(full.text, prompt.text, prompt.len) &&
                    !memcmp(full.text + full.len - tl, TURN_END, tl)) {
                    snprintf(what, sizeof(what), "%s record %d message %d%s%s%s", fam, rec, i,
                             modes[k] ? " " : "", modes[k] ? modes[k] : "",
                             cut ? " (prompt without <think>)" : "");
                    bad += check_message(f, m3, prompt.text, full.text + prompt.len,
                                         full.len - prompt.len - tl, tools, m, what) != 0;
                    checked++;
                    n_texts++;
                }
                mt_chat_rendered_free(&full);
                mt_chat_rendered_free(&prompt);
            }
            EXPECT(checked == (m3 ? 3 : 1), "%s record %d message %d: checked in %d modes", fam,
                   rec, i, checked);
        }
        cJSON_Delete(o);
        jinja_heap_reset(h);
        line = nl ? nl + 1 : NULL;
    }
    printf("%s: %d assistant messages (%d tool calls) in %d rendered replies, %d differ; each "
           "also streamed at every cut\n",
           fam, n_msgs, n_calls, n_texts, bad);
    EXPECT(n_msgs > 20 && n_calls > 10, "too few messages");
    jinja_heap_free(h);
    free(data);
    for (int k = 0; k < n_modes; k++) mt_chat_template_free(t[k]);
    return MT_TEST_OK;
}

static int test_m2(void) { return roundtrip("m2"); }
static int test_m3(void) { return roundtrip("m3"); }

static const mt_test_case cases[] = {
    {"data_reply_roundtrip_m2", test_m2},
    {"data_reply_roundtrip_m3", test_m3},
};
MT_TEST_MAIN(cases)
