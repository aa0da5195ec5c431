/* reply_m2.c: MiniMax-M2's reply format ("minimax_m2", vLLM's parser name): reasoning in
 * <think> ... </think> (the generation prompt opens it), tool calls as
 *   <minimax:tool_call>
 *   <invoke name="NAME">
 *   <parameter name="KEY">VALUE</parameter>
 *   </invoke>
 *   </minimax:tool_call>
 * (../shared/templates/MiniMax-M2.jinja; values are strings as they are, anything else its
 * JSON), read as vLLM's minimax_m2 tool parser reads them
 * (vllm/tool_parsers/minimax_m2_tool_parser.py: the name up to '>' stripped of white space and
 * quotes, a value up to the first </parameter> stripped of white space, typed by the schema
 * with "null"/"none"/"nil" null). Stricter than vLLM: anything but white space between invokes
 * or parameters makes the block content (vLLM skips it). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "models/reply_internal.h"

/* s[0, n) at *i starts with lit: consumed. */
static bool eat(const char *s, size_t n, size_t *i, const char *lit) {
    const size_t k = strlen(lit);
    if (*i + k > n || memcmp(s + *i, lit, k)) return false;
    *i += k;
    return true;
}

static void skip_ws(const char *s, size_t n, size_t *i) {
    while (*i < n && isspace((unsigned char)s[*i])) ++*i;
}

/* The first lit in s[from, n), or n. */
static size_t find(const char *s, size_t n, size_t from, const char *lit) {
    const size_t k = strlen(lit);
    for (size_t j = from; j + k <= n; j++)
        if (!memcmp(s + j, lit, k)) return j;
    return n;
}

/* A name attribute's text s[b, e) stripped of white space, then of one pair of quotes. */
static void name_span(const char *s, size_t *b, size_t *e) {
    while (*b < *e && isspace((unsigned char)s[*b])) ++*b;
    while (*e > *b && isspace((unsigned char)s[*e - 1])) --*e;
    if (*e - *b >= 2 && (s[*b] == '"' || s[*b] == '\'') && s[*e - 1] == s[*b]) {
        ++*b;
        --*e;
    }
}

/* The parameters of one invoke, s[0, n) (the text after its name's '>'), into args. */
static bool m2_params(const char *s, size_t n, const cJSON *props, cJSON *args) {
    size_t i = 0;
    for (;;) {
        skip_ws(s, n, &i);
        if (i == n) return true;
        if (!eat(s, n, &i, "<parameter name=")) return false;
        const size_t gt = find(s, n, i, ">"), end = find(s, n, i, "</parameter>");
        if (gt >= end || end == n) return false;
        size_t nb = i, ne = gt;
        name_span(s, &nb, &ne);
        if (nb == ne) return false;
        size_t vb = gt + 1, ve = end;
        while (vb < ve && isspace((unsigned char)s[vb])) vb++;
        while (ve > vb && isspace((unsigned char)s[ve - 1])) ve--;
        char key[512];
        if (ne - nb >= sizeof(key)) return false;
        memcpy(key, s + nb, ne - nb);
        key[ne - nb] = 0;
        const cJSON *schema = props ? cJSON_GetObjectItemCaseSensitive(props, key) : NULL;
        cJSON *v = mt_reply_value(s + vb, ve - vb, cJSON_IsObject(schema) ? schema : NULL, true);
        if (cJSON_GetObjectItemCaseSensitive(args, key)) /* a dict keeps the last value */
            cJSON_ReplaceItemInObjectCaseSensitive(args, key, v);
        else
            cJSON_AddItemToObject(args, key, v);
        i = end + strlen("</parameter>");
    }
}

static bool m2_block(const char *s, size_t n, const cJSON *tools, mt_reply_calls *out) {
    mt_reply_calls got = {0};
    size_t i = 0;
    bool ok = true;
    for (;;) {
        skip_ws(s, n, &i);
        if (i == n) break;
        if (!eat(s, n, &i, "<invoke name=")) {
            ok = false;
            break;
        }
        const size_t gt = find(s, n, i, ">"), end = find(s, n, i, "</invoke>");
        size_t nb = i, ne = gt;
        if (gt >= end || end == n || (name_span(s, &nb, &ne), nb == ne)) {
            ok = false;
            break;
        }
        const cJSON *props = mt_reply_tool_props(tools, s + nb, ne - nb);
        cJSON *args = cJSON_CreateObject();
        ok = m2_params(s + gt + 1, end - gt - 1, props, args);
        if (ok) mt_reply_calls_push(&got, s + nb, ne - nb, mt_reply_json(args));
        cJSON_Delete(args);
        if (!ok) break;
        i = end + strlen("</invoke>");
    }
    if (!ok || got.n == 0) { /* vLLM: a block without calls is content */
        mt_reply_calls_trim(&got, 0);
        free(got.v);
        return false;
    }
    for (int k = 0; k < got.n; k++) {
        mt_reply_calls_push(out, got.v[k].name, strlen(got.v[k].name), got.v[k].arguments);
        free(got.v[k].name);
    }
    free(got.v);
    return true;
}

const mt_reply_format mt_reply_minimax_m2 = {
    .name = "minimax_m2",
    .think_open = "<think>",
    .think_close = "</think>",
    .tool_open = "<minimax:tool_call>",
    .tool_close = "</minimax:tool_call>",
    .block = m2_block,
};
