/* jinja_json.c: JSON in (Python's json.loads, stricter where the project refuses what Python
 * would take silently) and out (json.dumps byte for byte, the way transformers' tojson calls
 * it). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja_internal.h"

#define JSON_MAX_DEPTH 512

/* ---- parse ---- */

typedef struct {
    jinja_heap *h;
    const char *s;
    size_t n, i;
    char *err;
    size_t errlen;
} json_parser;

static int perr(json_parser *p, size_t at, const char *fmt, ...) {
    int k = snprintf(p->err, p->errlen, "offset %zu: ", at);
    if (k >= 0 && (size_t)k < p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + k, p->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void skip_ws(json_parser *p) {
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->i++;
    }
}

static bool has_word(json_parser *p, const char *w) {
    size_t k = strlen(w);
    return p->n - p->i >= k && memcmp(p->s + p->i, w, k) == 0;
}

/* The length of the well-formed UTF-8 sequence at s[0, n), or 0 (overlong forms, surrogates
 * and code points above U+10FFFF are not well-formed). */
static int utf8_valid_seq(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    int len = c < 0x80                 ? 1
              : c >= 0xC2 && c <= 0xDF ? 2
              : c >= 0xE0 && c <= 0xEF ? 3
              : c >= 0xF0 && c <= 0xF4 ? 4
                                       : 0;
    if (!len || (size_t)len > n) return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
    if (c == 0xED && s[1] > 0x9F) return 0; /* surrogate */
    if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
    if (c == 0xF4 && s[1] > 0x8F) return 0; /* above U+10FFFF */
    return len;
}

static size_t utf8_encode(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        return o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    }
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    return o[2] = (char)(0x80 | (cp >> 6 & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F)), 4;
}

static int hex4(const char *s, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* A string from the opening quote at p->i. Decoded text is never longer than its escaped
 * form, so a heap string of the raw length is written in place. */
static int parse_string(json_parser *p, jinja_value *out) {
    size_t start = ++p->i, end = start;
    bool escapes = false;
    while (end < p->n && p->s[end] != '"') {
        unsigned char c = (unsigned char)p->s[end];
        if (c < 0x20) return perr(p, end, "invalid control character in string");
        if (c == '\\') {
            escapes = true;
            end += end + 1 < p->n ? 2 : 1;
            continue;
        }
        int k = c < 0x80 ? 1 : utf8_valid_seq((const unsigned char *)p->s + end, p->n - end);
        if (!k) return perr(p, end, "invalid UTF-8");
        end += (size_t)k;
    }
    if (end >= p->n) return perr(p, start - 1, "unterminated string");
    p->i = end + 1;
    if (!escapes) {
        *out = jinja_str(p->h, p->s + start, end - start);
        return out->type == JINJA_STR ? 0 : perr(p, start, "memory limit");
    }
    char *d = jinja_str_alloc(p->h, end - start, out);
    if (!d) return perr(p, start, "memory limit");
    size_t o = 0;
    for (size_t i = start; i < end;) {
        if (p->s[i] != '\\') {
            d[o++] = p->s[i++];
            continue;
        }
        char e = p->s[i + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            d[o++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            i += 2;
            continue;
        }
        uint32_t cp, lo;
        if (e != 'u' || end - i < 6 || hex4(p->s + i + 2, &cp)) return perr(p, i, "invalid escape");
        size_t at = i;
        i += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return perr(p, at, "lone surrogate in \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end - i < 6 || p->s[i] != '\\' || p->s[i + 1] != 'u' || hex4(p->s + i + 2, &lo) ||
                lo < 0xDC00 || lo > 0xDFFF)
                return perr(p, at, "lone surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
        }
        o += utf8_encode(d + o, cp);
    }
    d[o] = 0;
    out->u.s.len = o;
    return 0;
}

/* Python's NUMBER_RE: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? */
static int parse_number(json_parser *p, jinja_value *out) {
    size_t start = p->i, i = p->i;
    const char *s = p->s;
    if (i < p->n && s[i] == '-') i++;
    if (i < p->n && s[i] == '0') {
        i++;
    } else if (i < p->n && s[i] >= '1' && s[i] <= '9') {
        while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return perr(p, start, "expecting value");
    }
    bool is_float = false;
    if (i + 1 < p->n && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
        is_float = true;
        for (i++; i < p->n && s[i] >= '0' && s[i] <= '9';) i++;
    }
    if (i < p->n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < p->n && (s[j] == '+' || s[j] == '-')) j++;
        if (j < p->n && s[j] >= '0' && s[j] <= '9') {
            is_float = true;
            for (i = j; i < p->n && s[i] >= '0' && s[i] <= '9';) i++;
        }
    }
    p->i = i;
    char tmp[64], *buf = tmp;
    size_t len = i - start;
    if (len >= sizeof(tmp)) buf = malloc(len + 1);
    if (!buf) return perr(p, start, "out of memory");
    memcpy(buf, s + start, len);
    buf[len] = 0;
    int rc = 0;
    if (is_float) {
        *out = jinja_float(strtod(buf, NULL)); /* beyond the range: inf, as float() */
    } else {
        bool neg = buf[0] == '-';
        uint64_t v = 0, lim = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
        for (const char *c = buf + neg; *c && rc == 0; c++) {
            if (v > (lim - (uint64_t)(*c - '0')) / 10) rc = perr(p, start, "integer beyond int64");
            v = v * 10 + (uint64_t)(*c - '0');
        }
        *out = jinja_int(neg ? (int64_t)(0 - v) : (int64_t)v);
    }
    if (buf != tmp) free(buf);
    return rc;
}

static int parse_value(json_parser *p, jinja_value *out, int depth);

static int parse_array(json_parser *p, jinja_value *out, int depth) {
    size_t at = p->i++;
    *out = jinja_list_new(p->h);
    if (out->type != JINJA_LIST) return perr(p, at, "memory limit");
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == ']') return p->i++, 0;
    for (;;) {
        jinja_value item;
        if (parse_value(p, &item, depth + 1)) return -1;
        if (!jinja_list_push(p->h, *out, item)) return perr(p, at, "memory limit");
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == ']') return p->i++, 0;
        return perr(p, p->i, "expecting ',' delimiter");
    }
}

static int parse_object(json_parser *p, jinja_value *out, int depth) {
    size_t at = p->i++;
    *out = jinja_dict_new(p->h);
    if (out->type != JINJA_DICT) return perr(p, at, "memory limit");
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') return p->i++, 0;
    for (;;) {
        skip_ws(p);
        size_t key_at = p->i;
        if (p->i >= p->n || p->s[p->i] != '"')
            return perr(p, p->i, "expecting property name enclosed in double quotes");
        jinja_value key, val;
        if (parse_string(p, &key)) return -1;
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') return perr(p, p->i, "expecting ':' delimiter");
        p->i++;
        if (parse_value(p, &val, depth + 1)) return -1;
        int64_t before = out->u.dict->n;
        if (!jinja_dict_set(p->h, *out, key, val)) return perr(p, at, "memory limit");
        if (out->u.dict->n == before) /* replaced: the key was there */
            return perr(p, key_at, "duplicate key \"%.*s\"",
                        (int)(key.u.s.len > 64 ? 64 : key.u.s.len), key.u.s.p);
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == '}') return p->i++, 0;
        return perr(p, p->i, "expecting ',' delimiter");
    }
}

static int parse_value(json_parser *p, jinja_value *out, int depth) {
    skip_ws(p);
    if (p->i >= p->n) return perr(p, p->i, "expecting value");
    char c = p->s[p->i];
    if ((c == '[' || c == '{') && depth >= JSON_MAX_DEPTH)
        return perr(p, p->i, "nesting deeper than %d", JSON_MAX_DEPTH);
    if (c == '[') return parse_array(p, out, depth);
    if (c == '{') return parse_object(p, out, depth);
    if (c == '"') return parse_string(p, out);
    static const struct {
        const char *word;
        int type;
        double f;
    } words[] = {{"null", JINJA_NONE, 0},
                 {"true", JINJA_BOOL, 1},
                 {"false", JINJA_BOOL, 0},
                 {"NaN", JINJA_FLOAT, NAN},
                 {"Infinity", JINJA_FLOAT, INFINITY},
                 {"-Infinity", JINJA_FLOAT, -INFINITY}};
    for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++) {
        if (!has_word(p, words[k].word)) continue;
        p->i += strlen(words[k].word);
        if (words[k].type == JINJA_NONE)
            *out = jinja_none();
        else if (words[k].type == JINJA_BOOL)
            *out = jinja_bool(words[k].f != 0);
        else
            *out = jinja_float(words[k].f);
        return 0;
    }
    return parse_number(p, out);
}

int jinja_json_parse(jinja_heap *h, const char *text, size_t len, jinja_value *out, char *err,
                     size_t errlen) {
    json_parser p = {h, text, len, 0, err, errlen};
    *out = jinja_undefined(NULL);
    jinja_value v;
    if (parse_value(&p, &v, 0)) return -1;
    skip_ws(&p);
    if (p.i != len) return perr(&p, p.i, "extra data");
    *out = v;
    return 0;
}

/* ---- dump ---- */

typedef struct dump_frame {
    const void *obj;
    const struct dump_frame *up;
} dump_frame;

typedef struct {
    const jinja_json_opts *o;
    const char *item_sep, *key_sep;
    jinja_buf *out;
    char *err;
    size_t errlen;
} json_dumper;

static int derr(json_dumper *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, d->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static void dput(json_dumper *d, const char *s) { jinja_buf_append(d->out, s, strlen(s)); }

/* Python's encode_basestring(_ascii): the escapes json.dumps writes, with ensure_ascii every
 * code point outside ' '..'~' as \uXXXX (UTF-16 surrogate pairs above U+FFFF). */
static void dump_string(json_dumper *d, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    jinja_buf *out = d->out;
    jinja_buf_append(out, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && (c < 0x7F || !d->o->ensure_ascii)) {
            run++, i++;
            continue;
        }
        jinja_buf_append(out, s + i - run, run);
        run = 0;
        uint32_t cp;
        int k = jinja_utf8_next(s + i, n - i, &cp);
        i += (size_t)k;
        const char *named = cp == '"'    ? "\\\""
                            : cp == '\\' ? "\\\\"
                            : cp == '\n' ? "\\n"
                            : cp == '\r' ? "\\r"
                            : cp == '\t' ? "\\t"
                            : cp == '\b' ? "\\b"
                            : cp == '\f' ? "\\f"
                                         : NULL;
        if (named) {
            jinja_buf_append(out, named, 2);
            continue;
        }
        uint32_t units[2] = {cp, 0};
        int nu = 1;
        if (cp >= 0x10000) {
            units[0] = 0xD800 + ((cp - 0x10000) >> 10);
            units[1] = 0xDC00 + ((cp - 0x10000) & 0x3FF);
            nu = 2;
        }
        for (int u = 0; u < nu; u++) {
            char e[6] = {'\\',
                         'u',
                         hex[units[u] >> 12 & 15],
                         hex[units[u] >> 8 & 15],
                         hex[units[u] >> 4 & 15],
                         hex[units[u] & 15]};
            jinja_buf_append(out, e, 6);
        }
    }
    jinja_buf_append(out, s + n - run, run);
    jinja_buf_append(out, "\"", 1);
}

/* int.__repr__, float.__repr__ with allow_nan's NaN / Infinity / -Infinity, true / false,
 * null: the JSON of a scalar, also what a dict key of that type becomes. */
static const char *scalar_text(jinja_value v, char num[32]) {
    if (v.type == JINJA_NONE) return "null";
    if (v.type == JINJA_BOOL) return v.u.b ? "true" : "false";
    if (v.type == JINJA_INT)
        snprintf(num, 32, "%lld", (long long)v.u.i);
    else if (isnan(v.u.f))
        return "NaN";
    else if (isinf(v.u.f))
        return v.u.f < 0 ? "-Infinity" : "Infinity";
    else
        jinja_float_repr(v.u.f, num);
    return num;
}

static void newline_indent(json_dumper *d, int level) {
    static const char spaces[] = "                                ";
    jinja_buf_append(d->out, "\n", 1);
    for (int64_t k = (int64_t)d->o->indent * level; k > 0; k -= 32)
        jinja_buf_append(d->out, spaces, k < 32 ? (size_t)k : 32);
}

/* One comparison of the sort: k[a] < k[b]; the first that Python refuses is kept in *bad. */
typedef struct {
    const jinja_value *k;
    int64_t bad_a, bad_b; /* -1: none yet */
} key_cmp;

static bool key_less(key_cmp *c, int64_t a, int64_t b) {
    if (c->bad_a >= 0) return false;
    bool ok;
    bool lt = jinja_less(c->k[a], c->k[b], &ok);
    if (!ok) c->bad_a = a, c->bad_b = b;
    return ok && lt;
}

/* Python's sorted(dct.items()): CPython's list.sort on (key, value) tuples, which compares the
 * keys (distinct in a dict) by <. For a total order any sort gives the same; the steps of
 * CPython's sort (count_run, then binary insertion: all it does below 64 items) are followed
 * so that NaN keys and the first incomparable pair come out as in Python. Returns 0, or -1 with
 * Python's TypeError (jinja2's UndefinedError for an undefined key). */
static int sort_keys(json_dumper *d, const jinja_dict *dict, int64_t *ord) {
    int64_t n = dict->n;
    for (int64_t i = 0; i < n; i++) ord[i] = i;
    if (n < 2) return 0;
    key_cmp c = {dict->keys, -1, -1};
    int64_t run = 2;
    if (key_less(&c, ord[1], ord[0])) { /* a strictly descending run, reversed */
        while (run < n && key_less(&c, ord[run], ord[run - 1])) run++;
        for (int64_t i = 0, j = run - 1; i < j; i++, j--) {
            int64_t t = ord[i];
            ord[i] = ord[j], ord[j] = t;
        }
    } else {
        while (run < n && c.bad_a < 0 && !key_less(&c, ord[run], ord[run - 1])) run++;
    }
    for (int64_t s = run; s < n && c.bad_a < 0; s++) {
        int64_t pivot = ord[s], l = 0, r = s;
        do {
            int64_t m = l + ((r - l) >> 1);
            if (key_less(&c, pivot, ord[m]))
                r = m;
            else
                l = m + 1;
        } while (l < r);
        memmove(ord + l + 1, ord + l, (size_t)(s - l) * sizeof(int64_t));
        ord[l] = pivot;
    }
    if (c.bad_a < 0) return 0;
    jinja_value a = dict->keys[c.bad_a], b = dict->keys[c.bad_b];
    if (a.type == JINJA_UNDEFINED || b.type == JINJA_UNDEFINED) { /* "{name!r} is undefined" */
        jinja_value u = a.type == JINJA_UNDEFINED ? a : b;
        jinja_buf name = {0};
        if (u.u.s.p) jinja_str_repr(u.u.s.p, u.u.s.len, &name);
        derr(d, "%s is undefined", u.u.s.p ? name.p : "None");
        jinja_buf_free(&name);
        return -1;
    }
    return derr(d, "'<' not supported between instances of '%s' and '%s'", jinja_type_name(a),
                jinja_type_name(b));
}

static int dump_value(json_dumper *d, jinja_value v, int level, const dump_frame *up);

/* A dict key as json.dumps converts it: str as is; float, bool, None and int as their JSON. */
static int dump_key(json_dumper *d, jinja_value key) {
    char num[32];
    if (key.type == JINJA_STR) return dump_string(d, key.u.s.p, key.u.s.len), 0;
    if (key.type == JINJA_NONE || key.type == JINJA_BOOL || key.type == JINJA_INT ||
        key.type == JINJA_FLOAT) {
        const char *t = scalar_text(key, num);
        return dump_string(d, t, strlen(t)), 0;
    }
    return derr(d, "keys must be str, int, float, bool or None, not %s", jinja_type_name(key));
}

static int dump_dict(json_dumper *d, const jinja_dict *dict, int level, const dump_frame *f) {
    if (dict->n == 0) return dput(d, "{}"), 0;
    int64_t small[16], *ord = dict->n <= 16 ? small : malloc((size_t)dict->n * sizeof(int64_t));
    if (!ord) return derr(d, "out of memory");
    int rc = 0;
    if (d->o->sort_keys)
        rc = sort_keys(d, dict, ord);
    else
        for (int64_t i = 0; i < dict->n; i++) ord[i] = i;
    dput(d, "{");
    bool indent = d->o->indent >= 0;
    if (indent) newline_indent(d, level + 1);
    for (int64_t i = 0; i < dict->n && rc == 0; i++) {
        if (i) {
            dput(d, d->item_sep);
            if (indent) newline_indent(d, level + 1);
        }
        rc = dump_key(d, dict->keys[ord[i]]);
        if (rc == 0) dput(d, d->key_sep);
        if (rc == 0) rc = dump_value(d, dict->vals[ord[i]], level + 1, f);
    }
    if (rc == 0 && indent) newline_indent(d, level);
    if (rc == 0) dput(d, "}");
    if (ord != small) free(ord);
    return rc;
}

static int dump_value(json_dumper *d, jinja_value v, int level, const dump_frame *up) {
    switch ((jinja_type)v.type) {
    case JINJA_NONE:
    case JINJA_BOOL:
    case JINJA_INT:
    case JINJA_FLOAT: {
        char num[32];
        return dput(d, scalar_text(v, num)), 0;
    }
    case JINJA_STR:
        return dump_string(d, v.u.s.p, v.u.s.len), 0;
    case JINJA_LIST: /* lists and tuples; views and ranges are not JSON */
        if (v.u.list->kind != JINJA_SEQ_LIST && v.u.list->kind != JINJA_SEQ_TUPLE)
            return derr(d, "Object of type %s is not JSON serializable", jinja_type_name(v));
        break;
    case JINJA_DICT:
        break;
    default:
        return derr(d, "Object of type %s is not JSON serializable", jinja_type_name(v));
    }
    const void *obj = v.type == JINJA_LIST ? (const void *)v.u.list : (const void *)v.u.dict;
    for (const dump_frame *f = up; f; f = f->up)
        if (f->obj == obj) return derr(d, "Circular reference detected");
    dump_frame f = {obj, up};
    if (v.type == JINJA_DICT) return dump_dict(d, v.u.dict, level, &f);
    const jinja_list *l = v.u.list;
    if (l->n == 0) return dput(d, "[]"), 0;
    bool indent = d->o->indent >= 0;
    dput(d, "[");
    if (indent) newline_indent(d, level + 1);
    for (int64_t i = 0; i < l->n; i++) {
        if (i) {
            dput(d, d->item_sep);
            if (indent) newline_indent(d, level + 1);
        }
        if (dump_value(d, l->items[i], level + 1, &f)) return -1;
    }
    if (indent) newline_indent(d, level);
    dput(d, "]");
    return 0;
}

int jinja_json_dump(jinja_value v, const jinja_json_opts *o, jinja_buf *out, char *err,
                    size_t errlen) {
    json_dumper d = {o, o->item_sep, o->key_sep, out, err, errlen};
    if (!d.item_sep) d.item_sep = o->indent >= 0 ? "," : ", ";
    if (!d.key_sep) d.key_sep = ": ";
    size_t start = out->len;
    if (dump_value(&d, v, 0, NULL) == 0) return 0;
    if (out->p) out->p[out->len = start] = 0; /* as Python: an error, no partial text */
    return -1;
}

int jinja_json_parse_prefix(jinja_heap *h, const char *text, size_t len, jinja_value *out,
                            size_t *used, char *err, size_t errlen) {
    json_parser p = {h, text, len, 0, err, errlen};
    *out = jinja_undefined(NULL);
    *used = 0;
    jinja_value v;
    if (parse_value(&p, &v, 0)) {
        *used = p.i;
        return -1;
    }
    *out = v;
    *used = p.i;
    return 0;
}
