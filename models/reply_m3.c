/* reply_m3.c: MiniMax-M3's reply format ("minimax_m3"): reasoning in <mm:think> ...
 * </mm:think>, whose opening depends on thinking_mode (models/reply.h), and tool calls as
 * (NS: the namespace token ]<]minimax[>[)
 *   NS<tool_call>
 *   NS<invoke name="NAME">NS<KEY>VALUE NS</KEY>...NS</invoke>
 *   NS</tool_call>
 * where a VALUE that is an object or a list is nested elements (NS<k>...NS</k>, list entries
 * NS<item>...NS</item>) and a scalar is printed as the template prints it: booleans as JSON,
 * numbers as Python prints them, strings raw; null values are left out
 * (../shared/templates/MiniMax-M3.jinja's to_xml). No vLLM or SGLang parser of this form was
 * found; this reads back what the template writes: nested elements rebuilt into objects and
 * arrays by the schema (an element whose schema allows only an array is a list of its
 * children, only an object a dict; without one, children all named "item" make a list),
 * scalars typed as vLLM's minimax_m2 parser types values (models/reply_value.c) but without
 * its null words and without stripping white space (the template writes none; a null never
 * reaches the markup). An empty element is {} or [] when its schema allows that, else "". */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "models/reply_internal.h"

#define NS "]<]minimax[>["

typedef struct {
    const char *s;
    size_t n, i;
} m3_in;

static bool m3_eat(m3_in *in, const char *lit) {
    const size_t k = strlen(lit);
    if (in->i + k > in->n || memcmp(in->s + in->i, lit, k)) return false;
    in->i += k;
    return true;
}

static void m3_ws(m3_in *in) {
    while (in->i < in->n && isspace((unsigned char)in->s[in->i])) in->i++;
}

/* At an opening tag NS<name> (not NS</...)? */
static bool m3_at_open(const m3_in *in, size_t at) {
    const size_t k = strlen(NS);
    return at + k + 2 <= in->n && !memcmp(in->s + at, NS "<", k + 1) && in->s[at + k + 1] != '/';
}

static cJSON *m3_value(m3_in *in, const char *name, size_t name_len, const cJSON *schema,
                       int depth);

/* An element NS<name>VALUE NS</name> at in->i, its value typed by the schema of its name in
 * props (object) or by item (array). */
static bool m3_element(m3_in *in, const char **name, size_t *name_len, cJSON **value,
                       const cJSON *props, const cJSON *item, int depth) {
    if (depth > 64 || !m3_eat(in, NS "<")) return false;
    const size_t b = in->i;
    while (in->i < in->n && in->s[in->i] != '>' && in->s[in->i] != '<') in->i++;
    if (in->i == in->n || in->s[in->i] != '>' || in->i == b) return false;
    *name = in->s + b;
    *name_len = in->i - b;
    in->i++;
    const cJSON *schema = item;
    if (props) {
        char key[512];
        if (*name_len >= sizeof(key)) return false;
        memcpy(key, *name, *name_len);
        key[*name_len] = 0;
        schema = cJSON_GetObjectItemCaseSensitive(props, key);
    }
    *value = m3_value(in, *name, *name_len, cJSON_IsObject(schema) ? schema : NULL, depth);
    return *value != NULL;
}

/* The closing tag NS</name>. */
static bool m3_close(m3_in *in, const char *name, size_t name_len) {
    if (!m3_eat(in, NS "</")) return false;
    if (in->i + name_len + 1 > in->n || memcmp(in->s + in->i, name, name_len) ||
        in->s[in->i + name_len] != '>')
        return false;
    in->i += name_len + 1;
    return true;
}

/* Children up to NS</name>: an object or an array by the schema (models/reply_m3.c's top). */
static cJSON *m3_children(m3_in *in, const char *name, size_t name_len, const cJSON *schema,
                          int depth) {
    const unsigned t = schema ? mt_reply_schema_types(schema) : 0;
    bool array;
    if ((t & MT_REPLY_T_ARRAY) && !(t & MT_REPLY_T_OBJECT))
        array = true;
    else if ((t & MT_REPLY_T_OBJECT) && !(t & MT_REPLY_T_ARRAY))
        array = false;
    else { /* look ahead: are the children all <item>? */
        m3_in probe = *in;
        array = true;
        for (;;) {
            m3_ws(&probe);
            if (!m3_at_open(&probe, probe.i)) break;
            const char *nm;
            size_t nl;
            cJSON *v = NULL;
            const bool ok = m3_element(&probe, &nm, &nl, &v, NULL, NULL, depth + 1);
            cJSON_Delete(v);
            if (!ok) break;
            if (nl != 4 || memcmp(nm, "item", 4)) {
                array = false;
                break;
            }
            m3_ws(&probe);
            if (!m3_close(&probe, nm, nl)) break;
        }
    }
    const cJSON *props = array ? NULL : cJSON_GetObjectItemCaseSensitive(schema, "properties");
    const cJSON *item = array ? cJSON_GetObjectItemCaseSensitive(schema, "items") : NULL;
    cJSON *out = array ? cJSON_CreateArray() : cJSON_CreateObject();
    for (;;) {
        m3_ws(in);
        if (!m3_at_open(in, in->i)) break;
        const char *nm;
        size_t nl;
        cJSON *v = NULL;
        if (!m3_element(in, &nm, &nl, &v,
                        array                   ? NULL
                        : cJSON_IsObject(props) ? props
                                                : NULL,
                        cJSON_IsObject(item) ? item : NULL, depth + 1) ||
            (m3_ws(in), !m3_close(in, nm, nl))) {
            cJSON_Delete(v);
            cJSON_Delete(out);
            return NULL;
        }
        if (array) {
            cJSON_AddItemToArray(out, v);
        } else {
            char key[512];
            if (nl >= sizeof(key)) {
                cJSON_Delete(v);
                cJSON_Delete(out);
                return NULL;
            }
            memcpy(key, nm, nl);
            key[nl] = 0;
            if (cJSON_GetObjectItemCaseSensitive(out, key))
                cJSON_ReplaceItemInObjectCaseSensitive(out, key, v);
            else
                cJSON_AddItemToObject(out, key, v);
        }
    }
    (void)name;
    (void)name_len;
    return out;
}

/* The value of element `name` (after its opening tag), up to (not through) its closing tag. */
static cJSON *m3_value(m3_in *in, const char *name, size_t name_len, const cJSON *schema,
                       int depth) {
    m3_in look = *in;
    m3_ws(&look);
    if (m3_at_open(&look, look.i)) {
        *in = look;
        return m3_children(in, name, name_len, schema, depth);
    }
    const size_t b = in->i;
    const size_t k = strlen(NS);
    while (in->i + k <= in->n && memcmp(in->s + in->i, NS, k)) in->i++;
    if (in->i + k > in->n) return NULL;
    const unsigned t = schema ? mt_reply_schema_types(schema) : 0;
    if (in->i == b && (t & MT_REPLY_T_OBJECT)) return cJSON_CreateObject();
    if (in->i == b && (t & MT_REPLY_T_ARRAY)) return cJSON_CreateArray();
    return mt_reply_value(in->s + b, in->i - b, schema, false);
}

static bool m3_invoke(m3_in *in, const cJSON *tools, mt_reply_calls *out) {
    if (!m3_eat(in, NS "<invoke name=")) return false;
    const size_t b0 = in->i;
    while (in->i < in->n && in->s[in->i] != '>') in->i++;
    if (in->i == in->n) return false;
    size_t b = b0, e = in->i;
    while (b < e && isspace((unsigned char)in->s[b])) b++;
    while (e > b && isspace((unsigned char)in->s[e - 1])) e--;
    if (e - b >= 2 && (in->s[b] == '"' || in->s[b] == '\'') && in->s[e - 1] == in->s[b]) {
        b++;
        e--;
    }
    if (b == e) return false;
    in->i++;
    const cJSON *props = mt_reply_tool_props(tools, in->s + b, e - b);
    cJSON *args = cJSON_CreateObject();
    for (;;) {
        m3_ws(in);
        if (m3_eat(in, NS "</invoke>")) break;
        const char *nm;
        size_t nl;
        cJSON *v = NULL;
        if (!m3_element(in, &nm, &nl, &v, props ? props : NULL, NULL, 0) || !m3_close(in, nm, nl)) {
            cJSON_Delete(v);
            cJSON_Delete(args);
            return false;
        }
        char key[512];
        if (nl >= sizeof(key)) {
            cJSON_Delete(v);
            cJSON_Delete(args);
            return false;
        }
        memcpy(key, nm, nl);
        key[nl] = 0;
        if (cJSON_GetObjectItemCaseSensitive(args, key))
            cJSON_ReplaceItemInObjectCaseSensitive(args, key, v);
        else
            cJSON_AddItemToObject(args, key, v);
    }
    mt_reply_calls_push(out, in->s + b, e - b, mt_reply_json(args));
    cJSON_Delete(args);
    return true;
}

static bool m3_block(const char *s, size_t n, const cJSON *tools, mt_reply_calls *out) {
    m3_in in = {.s = s, .n = n};
    const int first = out->n;
    for (;;) {
        m3_ws(&in);
        if (in.i == in.n) break;
        if (!m3_invoke(&in, tools, out)) {
            mt_reply_calls_trim(out, first);
            return false;
        }
    }
    return out->n > first;
}

const mt_reply_format mt_reply_minimax_m3 = {
    .name = "minimax_m3",
    .think_open = "<mm:think>",
    .think_close = "</mm:think>",
    .tool_open = NS "<tool_call>",
    .tool_close = NS "</tool_call>",
    .block = m3_block,
};
