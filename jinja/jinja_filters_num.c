/* jinja_filters_num.c: the filters int, float, abs, round (Python's int() / float() of
 * strings, round() half to even on the exact value) and tojson (transformers': json.dumps(x,
 * ensure_ascii=False, indent=None, separators=None, sort_keys=False)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jinja/jinja_filters.h"

/* ---- numbers ---- */

/* Python's int(s, base) of a str: whitespace around, a sign, '_' between digits, a 0x / 0o /
 * 0b prefix matching the base (or any with base 0). false when Python raises ValueError. */
static bool parse_int(const char *s, size_t n, int base, int64_t *out, bool *overflow) {
    size_t i = 0, e = n;
    *overflow = false;
    while (i < e && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) i++;
    while (e > i && (s[e - 1] == ' ' || (s[e - 1] >= '\t' && s[e - 1] <= '\r'))) e--;
    bool neg = false;
    if (i < e && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i + 1 < e && s[i] == '0') {
        char c = (char)(s[i + 1] | 0x20);
        int b = c == 'x' ? 16 : c == 'o' ? 8 : c == 'b' ? 2 : 0;
        if (b && (base == b || base == 0)) {
            base = b;
            i += 2;
            if (i < e && s[i] == '_') i++;
        }
    }
    if (base == 0) base = 10;
    if (i >= e) return false;
    __int128 v = 0;
    bool prev_digit = false;
    for (; i < e; i++) {
        char c = s[i];
        if (c == '_') {
            if (!prev_digit || i + 1 >= e) return false;
            prev_digit = false;
            continue;
        }
        int d = c >= '0' && c <= '9'                     ? c - '0'
                : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10
                                                         : 99;
        if (d >= base) return false;
        v = v * base + d;
        if (v > (__int128)INT64_MAX + 1) *overflow = true;
        prev_digit = true;
    }
    if (neg) v = -v;
    if (v > INT64_MAX || v < INT64_MIN) *overflow = true;
    *out = (int64_t)v;
    return true;
}

/* Python's float() of a str: false when it raises ValueError. */
static bool parse_float(const char *s, size_t n, double *out) {
    char buf[512];
    size_t i = 0, e = n, k = 0;
    while (i < e && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) i++;
    while (e > i && (s[e - 1] == ' ' || (s[e - 1] >= '\t' && s[e - 1] <= '\r'))) e--;
    if (e - i >= sizeof(buf) || i == e) return false;
    size_t j = i;
    if (s[j] == '+' || s[j] == '-') buf[k++] = s[j++];
    static const char *const specials[] = {"inf", "infinity", "nan"};
    for (int t = 0; t < 3; t++) {
        size_t L = strlen(specials[t]);
        if (e - j == L && !strncasecmp(s + j, specials[t], L)) {
            *out = t == 2 ? (buf[0] == '-' ? -NAN : NAN) : (buf[0] == '-' ? -INFINITY : INFINITY);
            return true;
        }
    }
    bool digits = false, dot = false, exp = false, prev_digit = false;
    for (; j < e; j++) {
        char c = s[j];
        if (c >= '0' && c <= '9') {
            digits = prev_digit = true;
            buf[k++] = c;
        } else if (c == '_' && prev_digit && j + 1 < e && s[j + 1] >= '0' && s[j + 1] <= '9') {
            continue;
        } else if (c == '.' && !dot && !exp) {
            dot = true;
            prev_digit = false;
            buf[k++] = c;
        } else if ((c == 'e' || c == 'E') && digits && !exp) {
            exp = true;
            prev_digit = false;
            buf[k++] = c;
            if (j + 1 < e && (s[j + 1] == '+' || s[j + 1] == '-')) buf[k++] = s[++j];
            if (j + 1 >= e) return false;
        } else {
            return false;
        }
    }
    if (!digits) return false;
    buf[k] = 0;
    char *end;
    *out = strtod(buf, &end);
    return *end == 0;
}

jinja_value jinja_f_int(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"default", "base", NULL};
    jinja_args_check(vm, a, 2, kws, "int");
    const jinja_value *d = jinja_arg(a, 0, "default");
    const jinja_value dflt = d ? *d : jinja_int(0);
    const int64_t base = jinja_fa_arg_int(vm, a, 1, "base", 10);
    jinja_fa_undefined_raises(vm, x);
    int64_t v;
    bool over;
    switch (x.type) {
    case JINJA_INT:
        return x;
    case JINJA_BOOL:
        return jinja_int(x.u.b);
    case JINJA_FLOAT:
        if (!isfinite(x.u.f)) return dflt;
        if (fabs(x.u.f) >= 9.2e18) jinja_vm_fail(vm, "an integer beyond 64 bits (not supported)");
        return jinja_int((int64_t)x.u.f);
    case JINJA_STR: {
        if (parse_int(x.u.s.p, x.u.s.len, (int)base, &v, &over)) {
            if (over) jinja_vm_fail(vm, "an integer beyond 64 bits (not supported)");
            return jinja_int(v);
        }
        double f;
        if (!parse_float(x.u.s.p, x.u.s.len, &f) || !isfinite(f)) return dflt;
        if (fabs(f) >= 9.2e18) jinja_vm_fail(vm, "an integer beyond 64 bits (not supported)");
        return jinja_int((int64_t)f);
    }
    default:
        return dflt;
    }
}

jinja_value jinja_f_float(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"default", NULL};
    jinja_args_check(vm, a, 1, kws, "float");
    const jinja_value *d = jinja_arg(a, 0, "default");
    jinja_fa_undefined_raises(vm, x);
    double f;
    switch (x.type) {
    case JINJA_FLOAT:
        return x;
    case JINJA_INT:
        return jinja_float((double)x.u.i);
    case JINJA_BOOL:
        return jinja_float(x.u.b);
    case JINJA_STR:
        if (parse_float(x.u.s.p, x.u.s.len, &f)) return jinja_float(f);
        break;
    default:
        break;
    }
    return d ? *d : jinja_float(0.0);
}

jinja_value jinja_f_abs(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "abs");
    jinja_fa_undefined_raises(vm, x);
    if (x.type == JINJA_INT) {
        if (x.u.i == INT64_MIN) jinja_vm_fail(vm, "an integer beyond 64 bits (not supported)");
        return jinja_int(x.u.i < 0 ? -x.u.i : x.u.i);
    }
    if (x.type == JINJA_BOOL) return jinja_int(x.u.b);
    if (x.type == JINJA_FLOAT) return jinja_float(fabs(x.u.f));
    jinja_vm_fail(vm, "bad operand type for abs(): '%s'", jinja_type_name(x));
}

jinja_value jinja_f_round(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"precision", "method", NULL};
    jinja_args_check(vm, a, 2, kws, "round");
    const int64_t prec = jinja_fa_arg_int(vm, a, 0, "precision", 0);
    const jinja_value *m = jinja_arg(a, 1, "method");
    int method = 0; /* common, ceil, floor */
    if (m) {
        if (m->type == JINJA_STR && m->u.s.len == 4 && !memcmp(m->u.s.p, "ceil", 4))
            method = 1;
        else if (m->type == JINJA_STR && m->u.s.len == 5 && !memcmp(m->u.s.p, "floor", 5))
            method = 2;
        else if (!(m->type == JINJA_STR && m->u.s.len == 6 && !memcmp(m->u.s.p, "common", 6)))
            jinja_vm_fail(vm, "method must be common, ceil or floor");
    }
    jinja_fa_undefined_raises(vm, x);
    if (x.type != JINJA_INT && x.type != JINJA_BOOL && x.type != JINJA_FLOAT)
        jinja_vm_fail(vm, "type %s doesn't define __round__ method", jinja_type_name(x));
    if (prec < 0 || prec > 300)
        jinja_vm_fail(vm, "round(): precision %lld is not supported", (long long)prec);
    if (method == 0 && x.type != JINJA_FLOAT)
        return jinja_int(x.type == JINJA_BOOL ? x.u.b : x.u.i);
    const double v = x.type == JINJA_FLOAT ? x.u.f : (double)(x.type == JINJA_BOOL ? x.u.b : x.u.i);
    if (method) { /* math.ceil / floor(value * 10**precision) / 10**precision */
        double p = pow(10.0, (double)prec);
        return jinja_float((method == 1 ? ceil(v * p) : floor(v * p)) / p);
    }
    if (!isfinite(v)) return jinja_float(v);
    /* Python's round(x, n): the correctly rounded decimal (half to even on the exact value) */
    char buf[512];
    snprintf(buf, sizeof(buf), "%.*f", (int)prec, v);
    return jinja_float(strtod(buf, NULL));
}

/* ---- tojson ---- */

/* transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
jinja_value jinja_f_tojson(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    jinja_args_check(vm, a, 4, kws, "tojson");
    jinja_json_opts o = {.indent = -1};
    o.ensure_ascii = jinja_fa_arg_bool(a, 0, "ensure_ascii", false);
    o.sort_keys = jinja_fa_arg_bool(a, 3, "sort_keys", false);
    const jinja_value *ind = jinja_arg(a, 1, "indent"), *sep = jinja_arg(a, 2, "separators");
    if (ind && ind->type != JINJA_NONE) {
        if (ind->type != JINJA_INT || ind->u.i < 0 || ind->u.i > 64)
            jinja_vm_fail(vm, "tojson: indent other than an integer from 0 to 64 is not supported");
        o.indent = (int)ind->u.i;
    }
    char item_sep[64], key_sep[64];
    if (sep && sep->type != JINJA_NONE) {
        const jinja_value *p =
            sep->type == JINJA_LIST && sep->u.list->n == 2 ? sep->u.list->items : NULL;
        if (!p || p[0].type != JINJA_STR || p[1].type != JINJA_STR ||
            p[0].u.s.len >= sizeof(item_sep) || p[1].u.s.len >= sizeof(key_sep) ||
            memchr(p[0].u.s.p, 0, p[0].u.s.len) || memchr(p[1].u.s.p, 0, p[1].u.s.len))
            jinja_vm_fail(vm, "tojson: separators must be two strings");
        memcpy(item_sep, p[0].u.s.p, p[0].u.s.len);
        item_sep[p[0].u.s.len] = 0;
        memcpy(key_sep, p[1].u.s.p, p[1].u.s.len);
        key_sep[p[1].u.s.len] = 0;
        o.item_sep = item_sep;
        o.key_sep = key_sep;
    }
    if (x.type == JINJA_UNDEFINED)
        jinja_vm_fail(vm, "Object of type Undefined is not JSON serializable");
    jinja_buf b = {.heap = vm->h};
    char err[256];
    if (jinja_json_dump(x, &o, &b, err, sizeof(err)) != 0) {
        jinja_buf_free(&b);
        jinja_vm_fail(vm, "tojson: %s", err);
    }
    if (b.len > vm->max_output) {
        jinja_buf_free(&b);
        jinja_vm_fail(vm, "tojson: the text passes %zu bytes (the render's limit)", vm->max_output);
    }
    return jinja_fa_buf_value(vm, &b);
}
