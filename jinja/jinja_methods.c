/* jinja_methods.c: the Python methods templates call on strings, dicts and lists, with
 * Python 3's semantics (indices count code points; split() and strip() without arguments use
 * Unicode whitespace). Every method name Python's type has is known: the engine's are run, the
 * sandbox's unsafe ones (list.append, dict.update, ...) raise its SecurityError, the others
 * (str.format, str.encode, ...) are refused, never approximated. */
#include <stdio.h>
#include <string.h>

#include "jinja/jinja_vm.h"

typedef enum {
    /* str */
    M_SPLIT,
    M_RSPLIT,
    M_STRIP,
    M_LSTRIP,
    M_RSTRIP,
    M_STARTSWITH,
    M_ENDSWITH,
    M_REPLACE,
    M_UPPER,
    M_LOWER,
    M_TITLE,
    M_CAPITALIZE,
    M_FIND,
    M_RFIND,
    M_INDEX,
    M_RINDEX,
    M_COUNT,
    M_JOIN,
    M_ISALPHA,
    M_ISDIGIT,
    M_ISDECIMAL,
    M_ISNUMERIC,
    M_ISALNUM,
    M_ISSPACE,
    M_ISLOWER,
    M_ISUPPER,
    M_SPLITLINES,
    M_REMOVEPREFIX,
    M_REMOVESUFFIX,
    M_PARTITION,
    M_RPARTITION,
    M_CENTER,
    M_LJUST,
    M_RJUST,
    M_ZFILL,
    M_EXPANDTABS,
    M_ISASCII,
    /* dict */
    M_GET,
    M_ITEMS,
    M_KEYS,
    M_VALUES,
    M_COPY,
    /* list (count, index, copy above are shared names: by receiver type) */
    M_UNSAFE,      /* the sandbox refuses (mutation) */
    M_UNSUPPORTED, /* Python has it, the engine does not */
} method_id;

typedef struct {
    const char *name;
    method_id id;
} method_entry;

static const method_entry str_methods[] = {{"split", M_SPLIT},
                                           {"rsplit", M_RSPLIT},
                                           {"strip", M_STRIP},
                                           {"lstrip", M_LSTRIP},
                                           {"rstrip", M_RSTRIP},
                                           {"startswith", M_STARTSWITH},
                                           {"endswith", M_ENDSWITH},
                                           {"replace", M_REPLACE},
                                           {"upper", M_UPPER},
                                           {"lower", M_LOWER},
                                           {"title", M_TITLE},
                                           {"capitalize", M_CAPITALIZE},
                                           {"find", M_FIND},
                                           {"rfind", M_RFIND},
                                           {"index", M_INDEX},
                                           {"rindex", M_RINDEX},
                                           {"count", M_COUNT},
                                           {"join", M_JOIN},
                                           {"isalpha", M_ISALPHA},
                                           {"isdigit", M_ISDIGIT},
                                           {"isdecimal", M_ISDECIMAL},
                                           {"isnumeric", M_ISNUMERIC},
                                           {"isalnum", M_ISALNUM},
                                           {"isspace", M_ISSPACE},
                                           {"islower", M_ISLOWER},
                                           {"isupper", M_ISUPPER},
                                           {"splitlines", M_SPLITLINES},
                                           {"removeprefix", M_REMOVEPREFIX},
                                           {"removesuffix", M_REMOVESUFFIX},
                                           {"partition", M_PARTITION},
                                           {"rpartition", M_RPARTITION},
                                           {"casefold", M_UNSUPPORTED},
                                           {"center", M_CENTER},
                                           {"encode", M_UNSUPPORTED},
                                           {"expandtabs", M_EXPANDTABS},
                                           {"format", M_UNSUPPORTED},
                                           {"format_map", M_UNSUPPORTED},
                                           {"isascii", M_ISASCII},
                                           {"isidentifier", M_UNSUPPORTED},
                                           {"isprintable", M_UNSUPPORTED},
                                           {"istitle", M_UNSUPPORTED},
                                           {"ljust", M_LJUST},
                                           {"maketrans", M_UNSUPPORTED},
                                           {"rjust", M_RJUST},
                                           {"swapcase", M_UNSUPPORTED},
                                           {"translate", M_UNSUPPORTED},
                                           {"zfill", M_ZFILL},
                                           {NULL, 0}};

static const method_entry dict_methods[] = {{"get", M_GET},
                                            {"items", M_ITEMS},
                                            {"keys", M_KEYS},
                                            {"values", M_VALUES},
                                            {"copy", M_COPY},
                                            {"clear", M_UNSAFE},
                                            {"pop", M_UNSAFE},
                                            {"popitem", M_UNSAFE},
                                            {"setdefault", M_UNSAFE},
                                            {"update", M_UNSAFE},
                                            {"fromkeys", M_UNSUPPORTED},
                                            {NULL, 0}};

static const method_entry list_methods[] = {
    {"count", M_COUNT},   {"index", M_INDEX},    {"copy", M_COPY},     {"append", M_UNSAFE},
    {"clear", M_UNSAFE},  {"extend", M_UNSAFE},  {"insert", M_UNSAFE}, {"pop", M_UNSAFE},
    {"remove", M_UNSAFE}, {"reverse", M_UNSAFE}, {"sort", M_UNSAFE},   {NULL, 0}};

static const method_entry tuple_methods[] = {{"count", M_COUNT}, {"index", M_INDEX}, {NULL, 0}};

bool jinja_vm_method(jinja_vm *vm, jinja_value self, const char *name, jinja_value *out) {
    const method_entry *table = NULL;
    if (self.type == JINJA_STR) table = str_methods;
    if (self.type == JINJA_DICT) table = dict_methods;
    if (self.type == JINJA_LIST)
        table = self.u.list->kind == JINJA_SEQ_LIST    ? list_methods
                : self.u.list->kind == JINJA_SEQ_TUPLE ? tuple_methods
                                                       : NULL;
    for (int i = 0; table && table[i].name; i++) {
        if (strcmp(table[i].name, name)) continue;
        if (table[i].id == M_UNSAFE) {
            *out = jinja_vm_undef(vm, "access to attribute '%s' of '%s' object is unsafe.", name,
                                  jinja_type_name(self));
            return true;
        }
        struct jinja_obj *m = jinja_alloc(vm->h, sizeof(*m));
        memset(m, 0, sizeof(*m));
        m->kind = JOBJ_METHOD;
        m->id = table[i].id;
        m->name = table[i].name;
        m->self = self;
        out->type = JINJA_CALLABLE;
        out->u.obj = m;
        return true;
    }
    return false;
}

/* ---- helpers ---- */

static jinja_value str_of(jinja_vm *vm, const jinja_value *v, const char *what) {
    if (!v || v->type != JINJA_STR)
        jinja_vm_fail(vm, "%s: expected a str argument, got %s", what,
                      v ? jinja_type_name(*v) : "none");
    return *v;
}

static bool find_bytes(const char *h, size_t hn, const char *n, size_t nn, size_t from,
                       size_t *at) {
    if (nn == 0) {
        if (from > hn) return false;
        *at = from;
        return true;
    }
    for (size_t i = from; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i, n, nn)) {
            *at = i;
            return true;
        }
    return false;
}

static bool rfind_bytes(const char *h, size_t hn, const char *n, size_t nn, size_t lo, size_t hi,
                        size_t *at) {
    if (nn > hi - lo || hi > hn) return false;
    for (size_t i = hi - nn + 1; i-- > lo;)
        if (!memcmp(h + i, n, nn)) {
            *at = i;
            return true;
        }
    return false;
}

/* Python's start/end arguments of find / count / startswith, as byte offsets of s. */
static void span_args(jinja_vm *vm, jinja_value s, const jinja_args *a, int first, size_t *lo,
                      size_t *hi) {
    const int64_t n = jinja_cp_count(s.u.s.p, s.u.s.len);
    int64_t b[2] = {0, n};
    for (int k = 0; k < 2; k++) {
        const jinja_value *v = jinja_arg(a, first + k, NULL);
        if (!v || v->type == JINJA_NONE) continue;
        if (v->type != JINJA_INT && v->type != JINJA_BOOL)
            jinja_vm_fail(vm, "slice indices must be integers or None");
        int64_t x = v->type == JINJA_BOOL ? v->u.b : v->u.i;
        if (x < 0) x = x + n < 0 ? 0 : x + n;
        b[k] = x > n ? n : x;
    }
    *lo = jinja_cp_offset(s.u.s.p, s.u.s.len, b[0]);
    *hi = b[1] < b[0] ? *lo : jinja_cp_offset(s.u.s.p, s.u.s.len, b[1]);
}

/* Whether s[i] starts a whitespace character; *k its length. */
static bool is_space_at(const char *s, size_t n, size_t i, int *k) {
    uint32_t cp;
    *k = jinja_utf8_next(s + i, n - i, &cp);
    return jinja_cp_isspace(cp);
}

void jinja_str_strip(const char *p, size_t n, bool left, bool right, size_t *a, size_t *b) {
    *a = 0;
    *b = n;
    while (left && *a < *b) {
        uint32_t cp;
        const int k = jinja_utf8_next(p + *a, *b - *a, &cp);
        if (!jinja_cp_isspace(cp)) break;
        *a += (size_t)k;
    }
    while (right && *b > *a) {
        size_t q = *b - 1;
        while (q > *a && ((unsigned char)p[q] & 0xC0) == 0x80) q--;
        uint32_t cp;
        jinja_utf8_next(p + q, *b - q, &cp);
        if (!jinja_cp_isspace(cp)) break;
        *b = q;
    }
}

/* Python's str.strip / lstrip / rstrip: chars NULL or None strips whitespace
 * (jinja_str_strip), else any of the code points of chars. */
static jinja_value strip(jinja_vm *vm, jinja_value s, const jinja_value *chars, bool left,
                         bool right) {
    const char *p = s.u.s.p;
    size_t a = 0, b = s.u.s.len;
    if (!chars || chars->type == JINJA_NONE) {
        jinja_str_strip(p, b, left, right, &a, &b);
        return jinja_vm_str(vm, p + a, b - a);
    }
    jinja_value c = str_of(vm, chars, "strip");
    uint32_t cps[256];
    int nc = 0;
    for (size_t i = 0; i < c.u.s.len && nc < 256;) {
        i += (size_t)jinja_utf8_next(c.u.s.p + i, c.u.s.len - i, &cps[nc]);
        nc++;
    }
    if (c.u.s.len && nc == 256) jinja_vm_fail(vm, "strip(): more than 256 characters to strip");
    while (left && a < b) {
        uint32_t cp;
        int k = jinja_utf8_next(p + a, b - a, &cp);
        bool hit = false;
        for (int i = 0; i < nc; i++) hit |= cps[i] == cp;
        if (!hit) break;
        a += (size_t)k;
    }
    while (right && b > a) {
        size_t q = b - 1;
        while (q > a && ((unsigned char)p[q] & 0xC0) == 0x80) q--;
        uint32_t cp;
        jinja_utf8_next(p + q, b - q, &cp);
        bool hit = false;
        for (int i = 0; i < nc; i++) hit |= cps[i] == cp;
        if (!hit) break;
        b = q;
    }
    return jinja_vm_str(vm, p + a, b - a);
}

/* The start of the character that ends at byte i (> 0). */
static size_t char_start_before(const char *p, size_t i) {
    size_t q = i - 1;
    while (q > 0 && ((unsigned char)p[q] & 0xC0) == 0x80) q--;
    return q;
}
static bool char_is_space_at(const char *p, size_t n, size_t i) {
    int k;
    return is_space_at(p, n, i, &k);
}

/* Python's maxsplit argument (-1: no limit). */
static int64_t maxsplit_arg(jinja_vm *vm, const jinja_args *a) {
    const jinja_value *m = jinja_arg(a, 1, "maxsplit");
    if (!m) return -1;
    if (m->type != JINJA_INT && m->type != JINJA_BOOL)
        jinja_vm_fail(vm, "'%s' object cannot be interpreted as an integer", jinja_type_name(*m));
    return m->type == JINJA_BOOL ? m->u.b : m->u.i;
}

/* str.split / str.rsplit (sep None: runs of whitespace, no empty strings). */
static jinja_value split(jinja_vm *vm, jinja_value s, const jinja_args *a, bool from_right) {
    static const char *const kws[] = {"sep", "maxsplit", NULL};
    jinja_args_check(vm, a, 2, kws, from_right ? "str.rsplit()" : "str.split()");
    const jinja_value *sepv = jinja_arg(a, 0, "sep");
    int64_t max = maxsplit_arg(vm, a);
    const char *p = s.u.s.p;
    const size_t n = s.u.s.len;
    jinja_value parts = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
    if (!sepv || sepv->type == JINJA_NONE) { /* CPython's split_whitespace / rsplit_whitespace */
        int k;
        if (!from_right) {
            size_t i = 0;
            while (max-- != 0) {
                while (i < n && is_space_at(p, n, i, &k)) i += (size_t)k;
                if (i == n) break;
                size_t j = i;
                while (i < n && !is_space_at(p, n, i, &k)) i += (size_t)k;
                jinja_vm_push(vm, parts, jinja_vm_str(vm, p + j, i - j));
            }
            while (i < n && is_space_at(p, n, i, &k)) i += (size_t)k;
            if (i < n) jinja_vm_push(vm, parts, jinja_vm_str(vm, p + i, n - i));
            return parts;
        }
        jinja_value rev = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
        size_t i = n; /* the end of what is left */
        while (max-- != 0) {
            while (i > 0 && char_is_space_at(p, n, char_start_before(p, i)))
                i = char_start_before(p, i);
            if (i == 0) break;
            size_t j = i;
            while (i > 0 && !char_is_space_at(p, n, char_start_before(p, i)))
                i = char_start_before(p, i);
            jinja_vm_push(vm, rev, jinja_vm_str(vm, p + i, j - i));
        }
        while (i > 0 && char_is_space_at(p, n, char_start_before(p, i)))
            i = char_start_before(p, i);
        if (i > 0) jinja_vm_push(vm, rev, jinja_vm_str(vm, p, i));
        for (int64_t j = rev.u.list->n - 1; j >= 0; j--)
            jinja_vm_push(vm, parts, rev.u.list->items[j]);
        return parts;
    }
    jinja_value sep = str_of(vm, sepv, "split");
    if (sep.u.s.len == 0) jinja_vm_fail(vm, "empty separator");
    if (!from_right) {
        size_t from = 0, at;
        while ((max < 0 || max-- > 0) && find_bytes(p, n, sep.u.s.p, sep.u.s.len, from, &at)) {
            jinja_vm_push(vm, parts, jinja_vm_str(vm, p + from, at - from));
            from = at + sep.u.s.len;
        }
        jinja_vm_push(vm, parts, jinja_vm_str(vm, p + from, n - from));
        return parts;
    }
    jinja_value rev = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
    size_t to = n, at;
    while ((max < 0 || max-- > 0) && rfind_bytes(p, n, sep.u.s.p, sep.u.s.len, 0, to, &at)) {
        jinja_vm_push(vm, rev, jinja_vm_str(vm, p + at + sep.u.s.len, to - at - sep.u.s.len));
        to = at;
    }
    jinja_vm_push(vm, rev, jinja_vm_str(vm, p, to));
    for (int64_t j = rev.u.list->n - 1; j >= 0; j--) jinja_vm_push(vm, parts, rev.u.list->items[j]);
    return parts;
}

/* startswith / endswith: a str or a tuple of them, optional start and end. */
static bool affix(jinja_vm *vm, jinja_value s, const jinja_args *a, bool end) {
    const jinja_value *x = jinja_arg(a, 0, NULL);
    if (!x) jinja_vm_fail(vm, "%s() takes at least 1 argument", end ? "endswith" : "startswith");
    size_t lo, hi;
    span_args(vm, s, a, 1, &lo, &hi);
    jinja_value opts = *x;
    if (x->type == JINJA_STR) {
        opts = jinja_vm_list(vm, 1, JINJA_SEQ_TUPLE);
        jinja_vm_push(vm, opts, *x);
    } else if (x->type != JINJA_LIST || x->u.list->kind != JINJA_SEQ_TUPLE) {
        jinja_vm_fail(vm, "%s first arg must be str or a tuple of str, not %s",
                      end ? "endswith" : "startswith", jinja_type_name(*x));
    }
    for (int64_t i = 0; i < opts.u.list->n; i++) {
        jinja_value o = str_of(vm, &opts.u.list->items[i], end ? "endswith" : "startswith");
        if (o.u.s.len > hi - lo) continue;
        if (!memcmp(s.u.s.p + (end ? hi - o.u.s.len : lo), o.u.s.p, o.u.s.len)) return true;
    }
    return false;
}

static jinja_value replace(jinja_vm *vm, jinja_value s, jinja_value old, jinja_value new,
                           int64_t count) {
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    const char *p = s.u.s.p;
    size_t n = s.u.s.len, from = 0, at;
    if (old.u.s.len == 0) { /* Python inserts new before every character and at the end */
        for (size_t i = 0; i <= n;) {
            if (count >= 0 && count-- == 0) {
                jinja_buf_append(&b, p + i, n - i);
                break;
            }
            jinja_buf_append(&b, new.u.s.p, new.u.s.len);
            if (i == n) break;
            uint32_t cp;
            int k = jinja_utf8_next(p + i, n - i, &cp);
            jinja_buf_append(&b, p + i, (size_t)k);
            i += (size_t)k;
        }
    } else {
        while ((count < 0 || count-- > 0) && find_bytes(p, n, old.u.s.p, old.u.s.len, from, &at)) {
            jinja_buf_append(&b, p + from, at - from);
            jinja_buf_append(&b, new.u.s.p, new.u.s.len);
            from = at + old.u.s.len;
        }
        jinja_buf_append(&b, p + from, n - from);
    }
    if (b.len > vm->max_output) {
        jinja_buf_free(&b);
        jinja_vm_fail(vm, "replace() result passes %zu bytes (the render's limit)", vm->max_output);
    }
    jinja_value v = jinja_vm_str(vm, b.p, b.len);
    jinja_buf_free(&b);
    return v;
}

jinja_value jinja_vm_str_replace(jinja_vm *vm, jinja_value s, jinja_value old, jinja_value new,
                                 int64_t count) {
    return replace(vm, s, old, new, count);
}

static jinja_value case_map(jinja_vm *vm, jinja_value s, method_id id) {
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    switch (id) {
    case M_UPPER:
        jinja_str_upper(s.u.s.p, s.u.s.len, &b);
        break;
    case M_LOWER:
        jinja_str_lower(s.u.s.p, s.u.s.len, &b);
        break;
    case M_TITLE:
        jinja_str_title(s.u.s.p, s.u.s.len, &b);
        break;
    default:
        jinja_str_capitalize(s.u.s.p, s.u.s.len, &b);
        break;
    }
    jinja_value v = jinja_vm_str(vm, b.p, b.len);
    jinja_buf_free(&b);
    return v;
}

/* find / rfind / index / rindex / count: a code point index (or the count). */
static jinja_value search(jinja_vm *vm, jinja_value s, const jinja_args *a, method_id id) {
    jinja_value sub = str_of(vm, jinja_arg(a, 0, NULL), "find");
    size_t lo, hi, at;
    span_args(vm, s, a, 1, &lo, &hi);
    if (id == M_COUNT) {
        if (sub.u.s.len == 0) return jinja_int(jinja_cp_count(s.u.s.p + lo, hi - lo) + 1);
        int64_t c = 0;
        size_t from = lo;
        while (find_bytes(s.u.s.p, hi, sub.u.s.p, sub.u.s.len, from, &at)) {
            c++;
            from = at + sub.u.s.len;
        }
        return jinja_int(c);
    }
    bool found = id == M_FIND || id == M_INDEX
                     ? find_bytes(s.u.s.p, hi, sub.u.s.p, sub.u.s.len, lo, &at)
                     : rfind_bytes(s.u.s.p, s.u.s.len, sub.u.s.p, sub.u.s.len, lo, hi, &at);
    if (!found) {
        if (id == M_INDEX || id == M_RINDEX) jinja_vm_fail(vm, "substring not found");
        return jinja_int(-1);
    }
    return jinja_int(jinja_cp_count(s.u.s.p, at));
}

/* isalpha, isdigit, ...: every character in the class, and at least one. */
static bool char_class(jinja_value s, method_id id) {
    if (!s.u.s.len) return false;
    bool any_cased = false;
    for (size_t i = 0; i < s.u.s.len;) {
        uint32_t cp;
        i += (size_t)jinja_utf8_next(s.u.s.p + i, s.u.s.len - i, &cp);
        bool ok;
        switch (id) {
        case M_ISALPHA:
            ok = jinja_cp_isalpha(cp);
            break;
        case M_ISDIGIT:
            ok = jinja_cp_isdigit(cp);
            break;
        case M_ISDECIMAL:
            ok = jinja_cp_isdecimal(cp);
            break;
        case M_ISNUMERIC:
            ok = jinja_cp_isnumeric(cp);
            break;
        case M_ISALNUM:
            ok = jinja_cp_isalpha(cp) || jinja_cp_isdecimal(cp) || jinja_cp_isdigit(cp) ||
                 jinja_cp_isnumeric(cp);
            break;
        case M_ISSPACE:
            ok = jinja_cp_isspace(cp);
            break;
        case M_ISLOWER:
            if (jinja_cp_isupper(cp) || jinja_cp_istitle(cp)) return false;
            any_cased |= jinja_cp_islower(cp);
            ok = true;
            break;
        default: /* M_ISUPPER */
            if (jinja_cp_islower(cp) || jinja_cp_istitle(cp)) return false;
            any_cased |= jinja_cp_isupper(cp);
            ok = true;
            break;
        }
        if (!ok) return false;
    }
    return id == M_ISLOWER || id == M_ISUPPER ? any_cased : true;
}

static jinja_value partition(jinja_vm *vm, jinja_value s, const jinja_args *a, bool right) {
    jinja_value sep = str_of(vm, jinja_arg(a, 0, NULL), "partition");
    if (!sep.u.s.len) jinja_vm_fail(vm, "empty separator");
    size_t at;
    bool found = right ? rfind_bytes(s.u.s.p, s.u.s.len, sep.u.s.p, sep.u.s.len, 0, s.u.s.len, &at)
                       : find_bytes(s.u.s.p, s.u.s.len, sep.u.s.p, sep.u.s.len, 0, &at);
    jinja_value t = jinja_vm_list(vm, 3, JINJA_SEQ_TUPLE), empty = jinja_vm_str(vm, "", 0);
    if (!found) {
        jinja_vm_push(vm, t, right ? empty : s);
        jinja_vm_push(vm, t, empty);
        jinja_vm_push(vm, t, right ? s : empty);
        return t;
    }
    jinja_vm_push(vm, t, jinja_vm_str(vm, s.u.s.p, at));
    jinja_vm_push(vm, t, sep);
    jinja_vm_push(vm, t,
                  jinja_vm_str(vm, s.u.s.p + at + sep.u.s.len, s.u.s.len - at - sep.u.s.len));
    return t;
}

static jinja_value join(jinja_vm *vm, jinja_value sep, const jinja_args *a) {
    const jinja_value *it = jinja_arg(a, 0, NULL);
    if (!it || a->n != 1) jinja_vm_fail(vm, "str.join() takes exactly one argument");
    jinja_value items = jinja_vm_iterate(vm, *it);
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    for (int64_t i = 0; i < items.u.list->n; i++) {
        jinja_value x = items.u.list->items[i];
        if (x.type != JINJA_STR) {
            jinja_buf_free(&b);
            jinja_vm_fail(vm, "sequence item %lld: expected str instance, %s found", (long long)i,
                          jinja_type_name(x));
        }
        if (i) jinja_buf_append(&b, sep.u.s.p, sep.u.s.len);
        jinja_buf_append(&b, x.u.s.p, x.u.s.len);
    }
    jinja_value v = jinja_vm_str(vm, b.p, b.len);
    jinja_buf_free(&b);
    return v;
}

/* center / ljust / rjust(width, fillchar=' ') and zfill(width), by code points. */
static jinja_value pad(jinja_vm *vm, jinja_value s, const jinja_args *a, method_id id) {
    const jinja_value *w = jinja_arg(a, 0, NULL), *f = jinja_arg(a, 1, NULL);
    if (!w || (w->type != JINJA_INT && w->type != JINJA_BOOL) || a->n_kw ||
        a->n > (id == M_ZFILL ? 1 : 2))
        jinja_vm_fail(vm, "str.%s() takes a width%s", id == M_ZFILL ? "zfill" : "pad",
                      id == M_ZFILL ? "" : " and an optional fill character");
    int64_t width = w->type == JINJA_BOOL ? w->u.b : w->u.i;
    const int64_t len = jinja_cp_count(s.u.s.p, s.u.s.len);
    const char *fill = " ";
    size_t flen = 1;
    if (f) {
        if (f->type != JINJA_STR || jinja_cp_count(f->u.s.p, f->u.s.len) != 1)
            jinja_vm_fail(vm, "The fill character must be exactly one character long");
        fill = f->u.s.p;
        flen = f->u.s.len;
    }
    if (width <= len) return s;
    if ((uint64_t)width * flen > vm->max_output)
        jinja_vm_fail(vm, "padding beyond the output limit");
    const int64_t marg = width - len;
    int64_t left = id == M_LJUST ? 0 : id == M_CENTER ? marg / 2 + (marg & width & 1) : marg;
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    size_t body = 0;
    if (id == M_ZFILL) { /* zeros after a leading sign */
        fill = "0";
        if (s.u.s.len && (s.u.s.p[0] == '+' || s.u.s.p[0] == '-')) {
            jinja_buf_append(&b, s.u.s.p, 1);
            body = 1;
        }
    }
    for (int64_t i = 0; i < left; i++) jinja_buf_append(&b, fill, flen);
    jinja_buf_append(&b, s.u.s.p + body, s.u.s.len - body);
    for (int64_t i = 0; i < marg - left; i++) jinja_buf_append(&b, fill, flen);
    jinja_value v = jinja_vm_str(vm, b.p, b.len);
    jinja_buf_free(&b);
    return v;
}

/* expandtabs(tabsize=8): columns counted in code points, reset by \n and \r. */
static jinja_value expandtabs(jinja_vm *vm, jinja_value s, const jinja_args *a) {
    const jinja_value *t = jinja_arg(a, 0, "tabsize");
    int64_t tab = 8;
    if (t) {
        if (t->type != JINJA_INT) jinja_vm_fail(vm, "expandtabs(): tabsize must be an integer");
        tab = t->u.i;
    }
    if (tab > 4096) jinja_vm_fail(vm, "expandtabs(): tabsize %lld is too large", (long long)tab);
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    int64_t col = 0;
    for (size_t i = 0; i < s.u.s.len;) {
        uint32_t cp;
        int k = jinja_utf8_next(s.u.s.p + i, s.u.s.len - i, &cp);
        if (cp == '\t') {
            if (tab > 0) {
                int64_t spaces = tab - col % tab;
                for (int64_t j = 0; j < spaces; j++) jinja_buf_append(&b, " ", 1);
                col += spaces;
            }
        } else {
            jinja_buf_append(&b, s.u.s.p + i, (size_t)k);
            col = cp == '\n' || cp == '\r' ? 0 : col + 1;
        }
        if (b.len > vm->max_output) {
            jinja_buf_free(&b);
            jinja_vm_fail(vm, "expandtabs() passes the output limit");
        }
        i += (size_t)k;
    }
    jinja_value v = jinja_vm_str(vm, b.p, b.len);
    jinja_buf_free(&b);
    return v;
}

static jinja_value str_method(jinja_vm *vm, const struct jinja_obj *m, const jinja_args *a) {
    const jinja_value s = m->self;
    switch ((method_id)m->id) {
    case M_SPLIT:
        return split(vm, s, a, false);
    case M_RSPLIT:
        return split(vm, s, a, true);
    case M_STRIP:
        return strip(vm, s, jinja_arg(a, 0, "chars"), true, true);
    case M_LSTRIP:
        return strip(vm, s, jinja_arg(a, 0, "chars"), true, false);
    case M_RSTRIP:
        return strip(vm, s, jinja_arg(a, 0, "chars"), false, true);
    case M_STARTSWITH:
        return jinja_bool(affix(vm, s, a, false));
    case M_ENDSWITH:
        return jinja_bool(affix(vm, s, a, true));
    case M_REPLACE: {
        jinja_value old = str_of(vm, jinja_arg(a, 0, NULL), "replace");
        jinja_value new = str_of(vm, jinja_arg(a, 1, NULL), "replace");
        const jinja_value *c = jinja_arg(a, 2, "count");
        int64_t count = c && (c->type == JINJA_INT) ? c->u.i : -1;
        if (c && c->type != JINJA_INT) jinja_vm_fail(vm, "replace(): count must be an integer");
        return replace(vm, s, old, new, count);
    }
    case M_UPPER:
    case M_LOWER:
    case M_TITLE:
    case M_CAPITALIZE:
        if (a->n || a->n_kw) jinja_vm_fail(vm, "str.%s() takes no arguments", m->name);
        return case_map(vm, s, (method_id)m->id);
    case M_FIND:
    case M_RFIND:
    case M_INDEX:
    case M_RINDEX:
    case M_COUNT:
        return search(vm, s, a, (method_id)m->id);
    case M_JOIN:
        return join(vm, s, a);
    case M_ISALPHA:
    case M_ISDIGIT:
    case M_ISDECIMAL:
    case M_ISNUMERIC:
    case M_ISALNUM:
    case M_ISSPACE:
    case M_ISLOWER:
    case M_ISUPPER:
        if (a->n || a->n_kw) jinja_vm_fail(vm, "str.%s() takes no arguments", m->name);
        return jinja_bool(char_class(s, (method_id)m->id));
    case M_SPLITLINES: {
        const jinja_value *k = jinja_arg(a, 0, "keepends");
        return jinja_vm_splitlines(vm, s, k && jinja_truthy(*k));
    }
    case M_REMOVEPREFIX:
    case M_REMOVESUFFIX: {
        jinja_value x = str_of(vm, jinja_arg(a, 0, NULL), m->name);
        bool pre = m->id == M_REMOVEPREFIX;
        if (x.u.s.len <= s.u.s.len &&
            !memcmp(s.u.s.p + (pre ? 0 : s.u.s.len - x.u.s.len), x.u.s.p, x.u.s.len))
            return jinja_vm_str(vm, s.u.s.p + (pre ? x.u.s.len : 0), s.u.s.len - x.u.s.len);
        return s;
    }
    case M_CENTER:
    case M_LJUST:
    case M_RJUST:
    case M_ZFILL:
        return pad(vm, s, a, (method_id)m->id);
    case M_EXPANDTABS:
        return expandtabs(vm, s, a);
    case M_ISASCII: {
        if (a->n || a->n_kw) jinja_vm_fail(vm, "str.isascii() takes no arguments");
        bool ascii = true;
        for (size_t i = 0; i < s.u.s.len; i++) ascii &= (unsigned char)s.u.s.p[i] < 0x80;
        return jinja_bool(ascii);
    }
    case M_PARTITION:
        return partition(vm, s, a, false);
    case M_RPARTITION:
        return partition(vm, s, a, true);
    default:
        jinja_vm_fail(vm, "str.%s() is not supported", m->name);
    }
}

static jinja_value dict_method(jinja_vm *vm, const struct jinja_obj *m, const jinja_args *a) {
    const jinja_value d = m->self;
    const jinja_dict *dd = d.u.dict;
    switch ((method_id)m->id) {
    case M_GET: {
        if (a->n < 1 || a->n > 2 || a->n_kw) jinja_vm_fail(vm, "dict.get() takes 1 or 2 arguments");
        if (!jinja_hashable(a->pos[0]))
            jinja_vm_fail(vm, "unhashable type: '%s'", jinja_type_name(a->pos[0]));
        int64_t k = jinja_dict_find(dd, a->pos[0]);
        return k >= 0 ? dd->vals[k] : a->n == 2 ? a->pos[1] : jinja_none();
    }
    case M_ITEMS:
    case M_KEYS:
    case M_VALUES: {
        if (a->n || a->n_kw) jinja_vm_fail(vm, "dict.%s() takes no arguments", m->name);
        jinja_seq_kind kind = m->id == M_ITEMS  ? JINJA_SEQ_ITEMS
                              : m->id == M_KEYS ? JINJA_SEQ_KEYS
                                                : JINJA_SEQ_VALUES;
        jinja_value r = jinja_vm_list(vm, dd->n, kind);
        for (int64_t i = 0; i < dd->n; i++) {
            if (m->id == M_ITEMS) {
                jinja_value t = jinja_vm_list(vm, 2, JINJA_SEQ_TUPLE);
                jinja_vm_push(vm, t, dd->keys[i]);
                jinja_vm_push(vm, t, dd->vals[i]);
                jinja_vm_push(vm, r, t);
            } else {
                jinja_vm_push(vm, r, m->id == M_KEYS ? dd->keys[i] : dd->vals[i]);
            }
        }
        return r;
    }
    case M_COPY: {
        jinja_value c = jinja_dict_new(vm->h);
        for (int64_t i = 0; i < dd->n; i++) jinja_dict_set(vm->h, c, dd->keys[i], dd->vals[i]);
        return c;
    }
    default:
        jinja_vm_fail(vm, "dict.%s() is not supported", m->name);
    }
}

static jinja_value list_method(jinja_vm *vm, const struct jinja_obj *m, const jinja_args *a) {
    const jinja_list *l = m->self.u.list;
    switch ((method_id)m->id) {
    case M_COUNT:
    case M_INDEX: {
        if (a->n != 1 || a->n_kw) jinja_vm_fail(vm, "%s() takes exactly one argument", m->name);
        int64_t c = 0;
        for (int64_t i = 0; i < l->n; i++)
            if (jinja_equal(l->items[i], a->pos[0])) {
                if (m->id == M_INDEX) return jinja_int(i);
                c++;
            }
        if (m->id == M_INDEX) jinja_vm_fail(vm, "the value is not in the list");
        return jinja_int(c);
    }
    case M_COPY: {
        jinja_value c = jinja_vm_list(vm, l->n, JINJA_SEQ_LIST);
        for (int64_t i = 0; i < l->n; i++) jinja_vm_push(vm, c, l->items[i]);
        return c;
    }
    default:
        jinja_vm_fail(vm, "list.%s() is not supported", m->name);
    }
}

jinja_value jinja_vm_call_method(jinja_vm *vm, const struct jinja_obj *m, const jinja_args *a) {
    jinja_vm_step(vm);
    if (m->id == M_UNSUPPORTED)
        jinja_vm_fail(vm, "%s.%s() is not supported", jinja_type_name(m->self), m->name);
    switch (m->self.type) {
    case JINJA_STR:
        return str_method(vm, m, a);
    case JINJA_DICT:
        return dict_method(vm, m, a);
    default:
        return list_method(vm, m, a);
    }
}
