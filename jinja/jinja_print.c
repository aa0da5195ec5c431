/* jinja_print.c: Python's printing (str() and repr()), equality and ordering of values, as
 * jinja2 sees them through Python's objects.
 *
 * What has no Python text of its own here prints as jinja2's object would, minus what the
 * engine does not keep: a namespace as "<Namespace {...}>" (jinja2.utils.Namespace), a callable
 * (macro, global function, bound method) as "<function>" (Python would name it and print an
 * address), a loop variable as "<LoopContext>" (Python: "<LoopContext 1/3>"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja_internal.h"

/* ---- floats ---- */

/* Digits and decimal exponent of |f| written with p significant digits ("%.{p-1}e"). */
static int sci_digits(double f, int p, char *digits, int *exp10) {
    char tmp[40];
    snprintf(tmp, sizeof(tmp), "%.*e", p - 1, f);
    int n = 0;
    const char *s = tmp;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9') digits[n++] = *s;
    digits[n] = 0;
    *exp10 = atoi(s + 1);
    return n;
}

static double digits_value(const char *digits, int n, int exp10) {
    char tmp[48];
    snprintf(tmp, sizeof(tmp), "%c.%se%d", digits[0], n > 1 ? digits + 1 : "", exp10);
    return strtod(tmp, NULL);
}

/* Adds one unit in the last place of the digit string (carry into a new leading digit moves
 * the exponent). */
static void digits_increment(char *digits, int n, int *exp10) {
    int i = n - 1;
    while (i >= 0 && digits[i] == '9') digits[i--] = '0';
    if (i >= 0) {
        digits[i]++;
        return;
    }
    digits[0] = '1';
    *exp10 += 1;
}

/* The shortest digits that read back as f > 0 (finite), as David Gay's dtoa mode 0, which
 * Python's repr uses: the fewest significant digits, and among those the nearest to f. The
 * correctly rounded p-digit value is the nearest; it fails where a shorter string exists only
 * at a power of two, whose rounding interval is twice as wide above f as below, so there the
 * next p-digit value above is tried as well. */
static int shortest_digits(double f, char *digits, int *exp10) {
    int mexp;
    bool pow2 = frexp(f, &mexp) == 0.5 && f >= 2.2250738585072014e-308;
    for (int p = 1; p < 17; p++) {
        int n = sci_digits(f, p, digits, exp10);
        if (digits_value(digits, n, *exp10) == f) return n;
        if (pow2 && digits_value(digits, n, *exp10) < f) {
            char up[24];
            int e = *exp10;
            memcpy(up, digits, (size_t)n + 1);
            digits_increment(up, n, &e);
            if (digits_value(up, n, e) == f) {
                memcpy(digits, up, (size_t)n + 1);
                *exp10 = e;
                return n;
            }
        }
    }
    return sci_digits(f, 17, digits, exp10);
}

int jinja_float_repr(double f, char buf[32]) {
    if (isnan(f)) return snprintf(buf, 32, "nan");
    if (isinf(f)) return snprintf(buf, 32, f < 0 ? "-inf" : "inf");
    int o = 0;
    if (signbit(f)) buf[o++] = '-', f = -f;
    if (f == 0) return o + snprintf(buf + o, 32 - (size_t)o, "0.0");
    char d[24];
    int e, n = shortest_digits(f, d, &e);
    while (n > 1 && d[n - 1] == '0') d[--n] = 0;
    if (e < -4 || e >= 16) { /* float_repr_style 'short', repr mode: d.ddde+XX */
        buf[o++] = d[0];
        if (n > 1) {
            buf[o++] = '.';
            memcpy(buf + o, d + 1, (size_t)n - 1);
            o += n - 1;
        }
        return o + snprintf(buf + o, 32 - (size_t)o, "e%c%02d", e < 0 ? '-' : '+', abs(e));
    }
    if (e < 0) { /* 0.000ddd */
        buf[o++] = '0', buf[o++] = '.';
        for (int i = 0; i < -e - 1; i++) buf[o++] = '0';
        memcpy(buf + o, d, (size_t)n);
        o += n;
    } else { /* ddd.ddd, at least one digit after the point */
        for (int i = 0; i <= e; i++) buf[o++] = i < n ? d[i] : '0';
        buf[o++] = '.';
        if (n > e + 1) {
            memcpy(buf + o, d + e + 1, (size_t)(n - e - 1));
            o += n - e - 1;
        } else {
            buf[o++] = '0';
        }
    }
    buf[o] = 0;
    return o;
}

/* ---- strings ---- */

static const char hexd[] = "0123456789abcdef";

void jinja_str_repr(const char *s, size_t len, jinja_buf *out) {
    bool squote = memchr(s, '\'', len) != NULL, dquote = memchr(s, '"', len) != NULL;
    char q = squote && !dquote ? '"' : '\'';
    jinja_buf_append(out, &q, 1);
    size_t run = 0; /* bytes copied as they are, flushed in one append */
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = jinja_utf8_next(s + i, len - i, &cp);
        char esc[12];
        int ne = 0;
        if (cp == (uint32_t)q || cp == '\\') {
            esc[0] = '\\', esc[1] = (char)cp, ne = 2;
        } else if (cp == '\n' || cp == '\r' || cp == '\t') {
            esc[0] = '\\', esc[1] = cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't', ne = 2;
        } else if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && !jinja_cp_printable(cp))) {
            int digits = cp < 0x100 ? 2 : cp < 0x10000 ? 4 : 8;
            esc[ne++] = '\\';
            esc[ne++] = digits == 2 ? 'x' : digits == 4 ? 'u' : 'U';
            for (int d = digits - 1; d >= 0; d--) esc[ne++] = hexd[(cp >> (4 * d)) & 15];
        }
        if (ne) {
            jinja_buf_append(out, s + i - run, run);
            jinja_buf_append(out, esc, (size_t)ne);
            run = 0;
        } else {
            run += (size_t)k;
        }
        i += (size_t)k;
    }
    jinja_buf_append(out, s + len - run, run);
    jinja_buf_append(out, &q, 1);
}

/* ---- values ---- */

/* The containers being printed, innermost first: Python prints a container that contains
 * itself as [...] or {...} (Py_ReprEnter). */
typedef struct print_frame {
    const void *obj;
    const struct print_frame *up;
} print_frame;

static bool print_active(const print_frame *f, const void *obj) {
    for (; f; f = f->up)
        if (f->obj == obj) return true;
    return false;
}

static void put(jinja_buf *out, const char *s) { jinja_buf_append(out, s, strlen(s)); }

static void value_print(jinja_value v, bool repr, jinja_buf *out, const print_frame *up);

static void dict_print(const jinja_dict *d, jinja_buf *out, const print_frame *up) {
    if (print_active(up, d)) return put(out, "{...}");
    print_frame f = {d, up};
    put(out, "{");
    for (int64_t i = 0; i < d->n; i++) {
        if (i) put(out, ", ");
        value_print(d->keys[i], true, out, &f);
        put(out, ": ");
        value_print(d->vals[i], true, out, &f);
    }
    put(out, "}");
}

static void value_print(jinja_value v, bool repr, jinja_buf *out, const print_frame *up) {
    char num[32];
    switch ((jinja_type)v.type) {
    case JINJA_UNDEFINED: /* str(Undefined) is '', repr(Undefined) is 'Undefined' */
        if (repr) put(out, "Undefined");
        return;
    case JINJA_NONE:
        return put(out, "None");
    case JINJA_BOOL:
        return put(out, v.u.b ? "True" : "False");
    case JINJA_INT:
        snprintf(num, sizeof(num), "%lld", (long long)v.u.i);
        return put(out, num);
    case JINJA_FLOAT:
        jinja_float_repr(v.u.f, num);
        return put(out, num);
    case JINJA_STR:
        if (repr) return jinja_str_repr(v.u.s.p, v.u.s.len, out);
        return jinja_buf_append(out, v.u.s.p, v.u.s.len);
    case JINJA_LIST: {
        const jinja_list *l = v.u.list;
        if (l->kind == JINJA_SEQ_RANGE) { /* range(start, stop[, step]) */
            snprintf(num, sizeof(num), "range(%lld, ", (long long)l->r[0]);
            put(out, num);
            snprintf(num, sizeof(num), l->r[2] == 1 ? "%lld)" : "%lld, ", (long long)l->r[1]);
            put(out, num);
            if (l->r[2] != 1) {
                snprintf(num, sizeof(num), "%lld)", (long long)l->r[2]);
                put(out, num);
            }
            return;
        }
        static const char *const open[] = {"[", "(", "dict_items([", "dict_keys([",
                                           "dict_values(["};
        static const char *const close[] = {"]", ")", "])", "])", "])"};
        if (print_active(up, l)) return put(out, l->kind == JINJA_SEQ_TUPLE ? "(...)" : "[...]");
        print_frame f = {l, up};
        put(out, open[l->kind]);
        for (int64_t i = 0; i < l->n; i++) {
            if (i) put(out, ", ");
            value_print(l->items[i], true, out, &f);
        }
        if (l->kind == JINJA_SEQ_TUPLE && l->n == 1) put(out, ",");
        return put(out, close[l->kind]);
    }
    case JINJA_DICT:
        return dict_print(v.u.dict, out, up);
    case JINJA_NAMESPACE:
        put(out, "<Namespace ");
        dict_print(v.u.dict, out, up);
        return put(out, ">");
    case JINJA_CALLABLE:
        return put(out, "<function>");
    case JINJA_LOOP:
        return put(out, "<LoopContext>");
    }
}

void jinja_value_print(jinja_value v, jinja_buf *out) { value_print(v, false, out, NULL); }
void jinja_value_repr(jinja_value v, jinja_buf *out) { value_print(v, true, out, NULL); }

/* ---- comparison ---- */

static bool is_number(jinja_value v) {
    return v.type == JINJA_BOOL || v.type == JINJA_INT || v.type == JINJA_FLOAT;
}

static int64_t as_int(jinja_value v) { return v.type == JINJA_BOOL ? (int64_t)v.u.b : v.u.i; }

/* Python compares an int with a float exactly (2**53 + 1 != 2.0**53): the sign of i - f, or 2
 * when f is NaN (every comparison false). */
static int cmp_int_float(int64_t i, double f) {
    if (isnan(f)) return 2;
    if (f >= 9223372036854775808.0) return -1;
    if (f < -9223372036854775808.0) return 1;
    double t = trunc(f); /* exact, and within int64 */
    int64_t ti = (int64_t)t;
    if (i != ti) return i < ti ? -1 : 1;
    return f > t ? -1 : f < t ? 1 : 0;
}

/* -1, 0, 1, or 2 (unordered: NaN) for two numbers. */
static int cmp_numbers(jinja_value a, jinja_value b) {
    if (a.type == JINJA_FLOAT && b.type == JINJA_FLOAT) {
        if (isnan(a.u.f) || isnan(b.u.f)) return 2;
        return a.u.f < b.u.f ? -1 : a.u.f > b.u.f ? 1 : 0;
    }
    if (a.type == JINJA_FLOAT) {
        int c = cmp_int_float(as_int(b), a.u.f);
        return c == 2 ? 2 : -c;
    }
    if (b.type == JINJA_FLOAT) return cmp_int_float(as_int(a), b.u.f);
    int64_t x = as_int(a), y = as_int(b);
    return x < y ? -1 : x > y ? 1 : 0;
}

static bool str_eq(jinja_value a, jinja_value b) {
    return a.u.s.len == b.u.s.len && memcmp(a.u.s.p, b.u.s.p, a.u.s.len) == 0;
}

bool jinja_equal(jinja_value a, jinja_value b) {
    if (is_number(a) && is_number(b)) return cmp_numbers(a, b) == 0;
    if (a.type != b.type) return false;
    switch ((jinja_type)a.type) {
    case JINJA_UNDEFINED: /* jinja2: Undefined.__eq__ is type(self) is type(other) */
    case JINJA_NONE:
        return true;
    case JINJA_STR:
        return str_eq(a, b);
    case JINJA_LIST: {
        const jinja_list *x = a.u.list, *y = b.u.list;
        if (x == y) return true; /* Python compares items by identity first: [nan] == itself */
        /* a list never equals a tuple; views and ranges compare as Python's do: keys and items
         * views as sets (not supported: refused by the engine's callers), ranges by value */
        if (x->kind != y->kind) return false;
        if (x->kind == JINJA_SEQ_VALUES) return false; /* dict_values: identity only */
        if (x->kind == JINJA_SEQ_KEYS || x->kind == JINJA_SEQ_ITEMS) { /* as sets */
            if (x->n != y->n) return false;
            for (int64_t i = 0; i < x->n; i++) {
                bool found = false;
                for (int64_t j = 0; j < y->n && !found; j++)
                    found = jinja_equal(x->items[i], y->items[j]);
                if (!found) return false;
            }
            return true;
        }
        if (x->n != y->n) return false;
        for (int64_t i = 0; i < x->n; i++)
            if (!jinja_equal(x->items[i], y->items[i])) return false;
        return true;
    }
    case JINJA_DICT: {
        const jinja_dict *x = a.u.dict, *y = b.u.dict;
        if (x == y) return true;
        if (x->n != y->n) return false;
        for (int64_t i = 0; i < x->n; i++) {
            int64_t j = jinja_dict_find(y, x->keys[i]);
            if (j < 0 || !jinja_equal(x->vals[i], y->vals[j])) return false;
        }
        return true;
    }
    case JINJA_NAMESPACE:
        return a.u.dict == b.u.dict;
    case JINJA_CALLABLE:
    case JINJA_LOOP:
        return a.u.obj == b.u.obj;
    default:
        return false; /* numbers were handled above */
    }
}

bool jinja_less(jinja_value a, jinja_value b, bool *ok) {
    *ok = true;
    if (is_number(a) && is_number(b)) return cmp_numbers(a, b) == -1;
    if (a.type == JINJA_STR && b.type == JINJA_STR) {
        /* UTF-8 byte order is code point order */
        size_t n = a.u.s.len < b.u.s.len ? a.u.s.len : b.u.s.len;
        int c = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
        return c < 0 || (c == 0 && a.u.s.len < b.u.s.len);
    }
    if (a.type == JINJA_LIST && b.type == JINJA_LIST && a.u.list->kind == b.u.list->kind &&
        (a.u.list->kind == JINJA_SEQ_LIST || a.u.list->kind == JINJA_SEQ_TUPLE)) {
        /* the first items that differ decide, else the shorter list is less */
        const jinja_list *x = a.u.list, *y = b.u.list;
        int64_t n = x->n < y->n ? x->n : y->n;
        for (int64_t i = 0; i < n; i++)
            if (!jinja_equal(x->items[i], y->items[i]))
                return jinja_less(x->items[i], y->items[i], ok);
        return x->n < y->n;
    }
    *ok = false;
    return false;
}

bool jinja_hashable(jinja_value v) {
    if (v.type == JINJA_LIST) { /* a tuple of hashable items is */
        if (v.u.list->kind != JINJA_SEQ_TUPLE) return false;
        for (int64_t i = 0; i < v.u.list->n; i++)
            if (!jinja_hashable(v.u.list->items[i])) return false;
        return true;
    }
    return v.type != JINJA_DICT && v.type != JINJA_NAMESPACE;
}

int64_t jinja_dict_find(const jinja_dict *d, jinja_value key) {
    if (key.type == JINJA_STR) { /* the common case: only strings can equal a string */
        for (int64_t i = 0; i < d->n; i++)
            if (d->keys[i].type == JINJA_STR && str_eq(d->keys[i], key)) return i;
        return -1;
    }
    for (int64_t i = 0; i < d->n; i++)
        if (jinja_equal(d->keys[i], key)) return i;
    return -1;
}

const char *jinja_type_name(jinja_value v) {
    switch ((jinja_type)v.type) {
    case JINJA_UNDEFINED:
        return "Undefined";
    case JINJA_NONE:
        return "NoneType";
    case JINJA_BOOL:
        return "bool";
    case JINJA_INT:
        return "int";
    case JINJA_FLOAT:
        return "float";
    case JINJA_STR:
        return "str";
    case JINJA_LIST: {
        static const char *const names[] = {"list",      "tuple",       "dict_items",
                                            "dict_keys", "dict_values", "range"};
        return names[v.u.list->kind];
    }
    case JINJA_DICT:
        return "dict";
    case JINJA_NAMESPACE:
        return "Namespace";
    case JINJA_CALLABLE:
        return "function";
    case JINJA_LOOP:
        return "LoopContext";
    }
    return "object";
}
