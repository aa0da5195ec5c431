/* reply_value.c: a tool call's parameter values typed by the tool's JSON schema, as vLLM's
 * minimax_m2 tool parser types them (vllm/tool_parsers/minimax_m2_tool_parser.py:
 * _extract_types_from_schema, _convert_param_value_with_types), and the arguments' JSON text as
 * Python's json.dumps(ensure_ascii=False) writes it (models/reply.h). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/file_io.h"
#include "models/reply_internal.h"

const cJSON *mt_reply_tool_props(const cJSON *tools, const char *name, size_t n) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(nm) || strlen(nm->valuestring) != n || memcmp(nm->valuestring, name, n))
            continue;
        const cJSON *pa = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        const cJSON *pr =
            cJSON_IsObject(pa) ? cJSON_GetObjectItemCaseSensitive(pa, "properties") : NULL;
        return cJSON_IsObject(pr) ? pr : NULL; /* the first tool of that name decides */
    }
    return NULL;
}

static unsigned type_bit(const char *t) {
    static const struct {
        const char *name;
        unsigned bit;
    } map[] = {{"integer", MT_REPLY_T_INTEGER}, {"int", MT_REPLY_T_INTEGER},
               {"number", MT_REPLY_T_NUMBER},   {"float", MT_REPLY_T_NUMBER},
               {"boolean", MT_REPLY_T_BOOLEAN}, {"bool", MT_REPLY_T_BOOLEAN},
               {"object", MT_REPLY_T_OBJECT},   {"array", MT_REPLY_T_ARRAY},
               {"string", MT_REPLY_T_STRING},   {"str", MT_REPLY_T_STRING},
               {"text", MT_REPLY_T_STRING},     {"null", MT_REPLY_T_NULL}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (!strcasecmp(t, map[i].name)) return map[i].bit;
    return MT_REPLY_T_OTHER;
}

static unsigned schema_types(const cJSON *schema) {
    if (!cJSON_IsObject(schema)) return 0;
    unsigned bits = 0;
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(schema, "type"), *e;
    if (cJSON_IsString(ty)) bits |= type_bit(ty->valuestring);
    const cJSON *tl = cJSON_IsArray(ty) ? ty : NULL;
    cJSON_ArrayForEach(e, tl) {
        if (cJSON_IsString(e)) bits |= type_bit(e->valuestring);
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    if (!cJSON_IsArray(en)) en = NULL;
    cJSON_ArrayForEach(e, en) {
        bits |= cJSON_IsNull(e)     ? MT_REPLY_T_NULL
                : cJSON_IsBool(e)   ? MT_REPLY_T_BOOLEAN
                : cJSON_IsNumber(e) ? (e->valuedouble == floor(e->valuedouble) ? MT_REPLY_T_INTEGER
                                                                               : MT_REPLY_T_NUMBER)
                : cJSON_IsString(e) ? MT_REPLY_T_STRING
                : cJSON_IsArray(e)  ? MT_REPLY_T_ARRAY
                                    : MT_REPLY_T_OBJECT;
    }
    static const char *const choices[] = {"anyOf", "oneOf", "allOf"};
    for (int c = 0; c < 3; c++) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(schema, choices[c]);
        if (!cJSON_IsArray(l)) l = NULL;
        cJSON_ArrayForEach(e, l) bits |= schema_types(e);
    }
    return bits;
}

unsigned mt_reply_schema_types(const cJSON *schema) {
    const unsigned bits = schema_types(schema);
    return bits ? bits : MT_REPLY_T_STRING; /* no type found: a string */
}

/* Python's str.strip() of ASCII white space: [*b, *e). */
static void strip_ws(const char **b, const char **e) {
    while (*b < *e && isspace((unsigned char)**b)) ++*b;
    while (*e > *b && isspace((unsigned char)(*e)[-1])) --*e;
}

/* Digits with single underscores between them (Python's int() and float() literals) copied to
 * out without them; the count, or -1. */
static int digits(const char **p, const char *e, char *out, size_t cap, size_t *o) {
    int n = 0;
    while (*p < e && (isdigit((unsigned char)**p) ||
                      (**p == '_' && n && *p + 1 < e && isdigit((unsigned char)(*p)[1])))) {
        if (**p != '_') {
            if (*o + 1 >= cap) return -1;
            out[(*o)++] = **p;
            n++;
        }
        ++*p;
    }
    return n;
}

/* int(value): the integer's JSON text, or NULL. */
static cJSON *as_int(const char *b, const char *e) {
    strip_ws(&b, &e);
    char buf[400];
    size_t o = 0;
    if (b < e && (*b == '+' || *b == '-')) {
        if (*b == '-') buf[o++] = '-';
        b++;
    }
    const size_t d0 = o;
    if (digits(&b, e, buf, sizeof(buf), &o) <= 0 || b != e) return NULL;
    buf[o] = 0;
    size_t z = d0; /* leading zeros dropped */
    while (z + 1 < o && buf[z] == '0') z++;
    memmove(buf + d0, buf + z, o - z + 1);
    if (!strcmp(buf, "-0")) strcpy(buf, "0");
    return cJSON_CreateRaw(buf);
}

/* Python's repr of a finite double (its shortest round-trip digits). */
static void float_repr(double v, char *out, size_t n) {
    for (int p = 1; p <= 17; p++) {
        snprintf(out, n, "%.*g", p, v);
        if (strtod(out, NULL) == v) break;
    }
    if (!strpbrk(out, ".en")) strncat(out, ".0", n - strlen(out) - 1);
}

/* float(value), an integral value as an integer; NULL when it is not a finite number. */
static cJSON *as_number(const char *b, const char *e) {
    strip_ws(&b, &e);
    char buf[400];
    size_t o = 0;
    if (b < e && (*b == '+' || *b == '-')) buf[o++] = *b++;
    const int ni = digits(&b, e, buf, sizeof(buf), &o);
    int nf = 0;
    if (ni < 0) return NULL;
    if (b < e && *b == '.') {
        buf[o++] = *b++;
        if ((nf = digits(&b, e, buf, sizeof(buf) - 8, &o)) < 0) return NULL;
    }
    if (ni + nf == 0) return NULL;
    if (b < e && (*b == 'e' || *b == 'E')) {
        buf[o++] = *b++;
        if (b < e && (*b == '+' || *b == '-')) buf[o++] = *b++;
        if (digits(&b, e, buf, sizeof(buf), &o) <= 0) return NULL;
    }
    if (b != e) return NULL;
    buf[o] = 0;
    const double v = strtod(buf, NULL);
    if (!isfinite(v)) return NULL;
    char txt[64];
    if (v == floor(v))
        snprintf(txt, sizeof(txt), "%.0f", v == 0 ? 0.0 : v);
    else
        float_repr(v, txt, sizeof(txt));
    return cJSON_CreateRaw(txt);
}

static cJSON *as_bool(const char *b, const char *e) {
    strip_ws(&b, &e);
    static const char *const yes[] = {"true", "1", "yes", "on"}, *const no[] = {"false", "0", "no",
                                                                                "off"};
    const size_t n = (size_t)(e - b);
    for (int i = 0; i < 4; i++) {
        if (strlen(yes[i]) == n && !strncasecmp(b, yes[i], n)) return cJSON_CreateTrue();
        if (strlen(no[i]) == n && !strncasecmp(b, no[i], n)) return cJSON_CreateFalse();
    }
    return NULL;
}

/* json.loads(value), or NULL. */
static cJSON *as_json(const char *b, const char *e) {
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(b, (size_t)(e - b), &end, false);
    if (!v) return NULL;
    const char *rest = end, *stop = e;
    strip_ws(&rest, &stop);
    if (rest != stop) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

cJSON *mt_reply_value(const char *v, size_t n, const cJSON *schema, bool null_words) {
    const char *e = v + n;
    if (null_words) {
        static const char *const nulls[] = {"null", "none", "nil"};
        for (int i = 0; i < 3; i++)
            if (strlen(nulls[i]) == n && !strncasecmp(v, nulls[i], n)) return cJSON_CreateNull();
    }
    const unsigned t = mt_reply_schema_types(schema);
    cJSON *r = NULL;
    if (t & MT_REPLY_T_INTEGER && (r = as_int(v, e))) return r;
    if (t & MT_REPLY_T_NUMBER && (r = as_number(v, e))) return r;
    if (t & MT_REPLY_T_BOOLEAN && (r = as_bool(v, e))) return r;
    if (t & (MT_REPLY_T_OBJECT | MT_REPLY_T_ARRAY) && (r = as_json(v, e))) return r;
    if (!(t & MT_REPLY_T_STRING) && (r = as_json(v, e))) return r; /* the fallback */
    char *s = mt_malloc(n + 1, "parameter value");
    memcpy(s, v, n);
    s[n] = 0;
    r = cJSON_CreateString(s);
    free(s);
    return r;
}

static void json_str(mt_strbuf *b, const char *s) {
    mt_strbuf_append(b, "\"", 1);
    for (const char *p = s; *p; p++) {
        const unsigned char c = (unsigned char)*p;
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                          : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f"
                                      : NULL;
        char u[8];
        if (!esc && c < 0x20) {
            snprintf(u, sizeof(u), "\\u%04x", c);
            esc = u;
        }
        if (esc)
            mt_strbuf_append(b, esc, strlen(esc));
        else
            mt_strbuf_append(b, p, 1);
    }
    mt_strbuf_append(b, "\"", 1);
}

static void json_put(mt_strbuf *b, const cJSON *v) {
    char num[64];
    const cJSON *c;
    if (cJSON_IsRaw(v)) {
        mt_strbuf_append(b, v->valuestring, strlen(v->valuestring));
    } else if (cJSON_IsNull(v)) {
        mt_strbuf_append(b, "null", 4);
    } else if (cJSON_IsTrue(v)) {
        mt_strbuf_append(b, "true", 4);
    } else if (cJSON_IsFalse(v)) {
        mt_strbuf_append(b, "false", 5);
    } else if (cJSON_IsNumber(v)) {
        if (!isfinite(v->valuedouble))
            snprintf(num, sizeof(num), "%s",
                     isnan(v->valuedouble) ? "NaN"
                     : v->valuedouble > 0  ? "Infinity"
                                           : "-Infinity");
        else if (v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 1e16)
            snprintf(num, sizeof(num), "%.0f", v->valuedouble == 0 ? 0.0 : v->valuedouble);
        else
            float_repr(v->valuedouble, num, sizeof(num));
        mt_strbuf_append(b, num, strlen(num));
    } else if (cJSON_IsString(v)) {
        json_str(b, v->valuestring);
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        const bool obj = cJSON_IsObject(v);
        mt_strbuf_append(b, obj ? "{" : "[", 1);
        cJSON_ArrayForEach(c, v) {
            if (c != v->child) mt_strbuf_append(b, ", ", 2);
            if (obj) {
                json_str(b, c->string);
                mt_strbuf_append(b, ": ", 2);
            }
            json_put(b, c);
        }
        mt_strbuf_append(b, obj ? "}" : "]", 1);
    }
}

char *mt_reply_json(const cJSON *v) {
    mt_strbuf b = {0};
    json_put(&b, v);
    return b.p;
}
