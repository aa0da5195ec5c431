/* jinja_filters.c: jinja2 3.1's builtin filters (jinja2/filters.py) with transformers' tojson
 * (json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)), in a
 * sandbox without autoescaping. Filters jinja2 returns as generators (select, map, reverse,
 * batch, items) give lists here. What jinja2 has and the engine does not (format, truncate,
 * wordwrap, urlize, groupby, random, ...) is not in the table: the parser refuses it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja_filters.h"

typedef jinja_value (*filter_fn)(jinja_vm *vm, jinja_value x, const jinja_args *a);

/* ---- shared pieces ---- */

static jinja_value soft_str(jinja_vm *vm, jinja_value x) { return jinja_vm_to_str(vm, x); }

jinja_value jinja_fa_buf_value(jinja_vm *vm, jinja_buf *b) {
    jinja_value v = jinja_vm_str(vm, b->p ? b->p : "", b->len);
    jinja_buf_free(b);
    return v;
}

void jinja_fa_undefined_raises(jinja_vm *vm, jinja_value x) {
    if (x.type == JINJA_UNDEFINED) jinja_vm_undefined_fail(vm, x);
}

bool jinja_fa_arg_bool(const jinja_args *a, int i, const char *kw, bool def) {
    const jinja_value *v = jinja_arg(a, i, kw);
    return v ? jinja_truthy(*v) : def;
}

int64_t jinja_fa_arg_int(jinja_vm *vm, const jinja_args *a, int i, const char *kw, int64_t def) {
    const jinja_value *v = jinja_arg(a, i, kw);
    if (!v) return def;
    if (v->type == JINJA_BOOL) return v->u.b;
    if (v->type != JINJA_INT)
        jinja_vm_fail(vm, "'%s' object cannot be interpreted as an integer", jinja_type_name(*v));
    return v->u.i;
}

/* jinja2's _prepare_attribute_parts + make_attrgetter: "a.b.0" looked up item by item
 * (environment.getitem: the key first, then the attribute). */
static jinja_value attr_get(jinja_vm *vm, jinja_value item, jinja_value attribute,
                            const jinja_value *dflt) {
    if (attribute.type == JINJA_NONE || attribute.type == JINJA_UNDEFINED) return item;
    if (attribute.type == JINJA_INT) return jinja_vm_getitem(vm, item, attribute);
    if (attribute.type != JINJA_STR)
        jinja_vm_fail(vm, "an attribute must be a string or an integer, not %s",
                      jinja_type_name(attribute));
    const char *p = attribute.u.s.p;
    size_t n = attribute.u.s.len, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '.') continue;
        jinja_value part = jinja_vm_str(vm, p + start, i - start);
        bool digits = i > start;
        for (size_t j = start; j < i; j++) digits &= p[j] >= '0' && p[j] <= '9';
        if (digits) {
            int64_t v = 0;
            for (size_t j = start; j < i && v < INT64_MAX / 10 - 10; j++) v = v * 10 + (p[j] - '0');
            part = jinja_int(v);
        }
        item = jinja_vm_getitem(vm, item, part);
        if (dflt && dflt->type != JINJA_NONE && item.type == JINJA_UNDEFINED) item = *dflt;
        start = i + 1;
    }
    return item;
}

/* jinja2's ignore_case: strings lowercased, others as they are. */
static jinja_value ignore_case(jinja_vm *vm, jinja_value v) {
    if (v.type != JINJA_STR) return v;
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    jinja_str_lower(v.u.s.p, v.u.s.len, &b);
    return jinja_fa_buf_value(vm, &b);
}

/* ---- sorting: stable merge sort of items by keys, Python's < (TypeError as jinja2's) ---- */

static void merge_sort(jinja_vm *vm, jinja_value *items, jinja_value *keys, int64_t n, bool reverse,
                       jinja_value *tmp_i, jinja_value *tmp_k) {
    if (n < 2) return;
    const int64_t h = n / 2;
    merge_sort(vm, items, keys, h, reverse, tmp_i, tmp_k);
    merge_sort(vm, items + h, keys + h, n - h, reverse, tmp_i, tmp_k);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        /* Python's sorted(reverse=True) keeps equal items in their order: take the right one
         * only when it is strictly before the left one in the wanted order */
        bool right =
            reverse ? jinja_vm_less(vm, keys[i], keys[j]) : jinja_vm_less(vm, keys[j], keys[i]);
        tmp_i[k] = right ? items[j] : items[i];
        tmp_k[k++] = right ? keys[j++] : keys[i++];
    }
    while (i < h) {
        tmp_i[k] = items[i];
        tmp_k[k++] = keys[i++];
    }
    while (j < n) {
        tmp_i[k] = items[j];
        tmp_k[k++] = keys[j++];
    }
    memcpy(items, tmp_i, sizeof(jinja_value) * (size_t)n);
    memcpy(keys, tmp_k, sizeof(jinja_value) * (size_t)n);
}

static jinja_value sorted(jinja_vm *vm, jinja_value items, jinja_value *keys, bool reverse) {
    const int64_t n = items.u.list->n;
    jinja_value out = jinja_vm_list(vm, n, JINJA_SEQ_LIST);
    for (int64_t i = 0; i < n; i++) jinja_vm_push(vm, out, items.u.list->items[i]);
    jinja_value *ti = jinja_alloc(vm->h, sizeof(jinja_value) * (size_t)(n + 1));
    jinja_value *tk = jinja_alloc(vm->h, sizeof(jinja_value) * (size_t)(n + 1));
    merge_sort(vm, out.u.list->items, keys, n, reverse, ti, tk);
    return out;
}

/* make_multi_attrgetter's key: [getitem chain of each comma-separated attribute] */
static jinja_value multi_key(jinja_vm *vm, jinja_value item, const jinja_value *attribute,
                             bool case_sensitive) {
    jinja_value key = jinja_vm_list(vm, 1, JINJA_SEQ_LIST);
    if (!attribute || attribute->type != JINJA_STR) {
        jinja_value v = attribute ? attr_get(vm, item, *attribute, NULL) : item;
        jinja_vm_push(vm, key, case_sensitive ? v : ignore_case(vm, v));
        return key;
    }
    const char *p = attribute->u.s.p;
    size_t n = attribute->u.s.len, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != ',') continue;
        jinja_value v = attr_get(vm, item, jinja_vm_str(vm, p + start, i - start), NULL);
        jinja_vm_push(vm, key, case_sensitive ? v : ignore_case(vm, v));
        start = i + 1;
    }
    return key;
}

static jinja_value f_sort(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"reverse", "case_sensitive", "attribute", NULL};
    jinja_args_check(vm, a, 3, kws, "sort");
    jinja_value items = jinja_vm_iterate(vm, x);
    const bool reverse = jinja_fa_arg_bool(a, 0, "reverse", false),
               cs = jinja_fa_arg_bool(a, 1, "case_sensitive", false);
    const jinja_value *attr = jinja_arg(a, 2, "attribute");
    jinja_value *keys = jinja_alloc(vm->h, sizeof(jinja_value) * (size_t)(items.u.list->n + 1));
    for (int64_t i = 0; i < items.u.list->n; i++)
        keys[i] = multi_key(vm, items.u.list->items[i], attr, cs);
    return sorted(vm, items, keys, reverse);
}

static jinja_value f_dictsort(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"case_sensitive", "by", "reverse", NULL};
    jinja_args_check(vm, a, 3, kws, "dictsort");
    jinja_fa_undefined_raises(vm, x);
    if (x.type != JINJA_DICT)
        jinja_vm_fail(vm, "dictsort: '%s' object has no attribute 'items'", jinja_type_name(x));
    const bool cs = jinja_fa_arg_bool(a, 0, "case_sensitive", false),
               reverse = jinja_fa_arg_bool(a, 2, "reverse", false);
    const jinja_value *by = jinja_arg(a, 1, "by");
    int pos = 0;
    if (by) {
        if (by->type == JINJA_STR && by->u.s.len == 5 && !memcmp(by->u.s.p, "value", 5))
            pos = 1;
        else if (!(by->type == JINJA_STR && by->u.s.len == 3 && !memcmp(by->u.s.p, "key", 3)))
            jinja_vm_fail(vm, "You can only sort by either \"key\" or \"value\"");
    }
    const jinja_dict *d = x.u.dict;
    jinja_value items = jinja_vm_list(vm, d->n, JINJA_SEQ_LIST);
    jinja_value *keys = jinja_alloc(vm->h, sizeof(jinja_value) * (size_t)(d->n + 1));
    for (int64_t i = 0; i < d->n; i++) {
        jinja_value t = jinja_vm_list(vm, 2, JINJA_SEQ_TUPLE);
        jinja_vm_push(vm, t, d->keys[i]);
        jinja_vm_push(vm, t, d->vals[i]);
        jinja_vm_push(vm, items, t);
        keys[i] =
            cs ? (pos ? d->vals[i] : d->keys[i]) : ignore_case(vm, pos ? d->vals[i] : d->keys[i]);
    }
    return sorted(vm, items, keys, reverse);
}

static jinja_value f_unique(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"case_sensitive", "attribute", NULL};
    jinja_args_check(vm, a, 2, kws, "unique");
    const bool cs = jinja_fa_arg_bool(a, 0, "case_sensitive", false);
    const jinja_value *attr = jinja_arg(a, 1, "attribute");
    jinja_value items = jinja_vm_iterate(vm, x), out = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
    jinja_value seen = jinja_dict_new(vm->h);
    for (int64_t i = 0; i < items.u.list->n; i++) {
        jinja_value it = items.u.list->items[i];
        jinja_value key = attr ? attr_get(vm, it, *attr, NULL) : it;
        if (!cs) key = ignore_case(vm, key);
        if (!jinja_hashable(key)) jinja_vm_fail(vm, "unhashable type: '%s'", jinja_type_name(key));
        if (jinja_dict_find(seen.u.dict, key) >= 0) continue;
        jinja_dict_set(vm->h, seen, key, jinja_none());
        jinja_vm_push(vm, out, it);
    }
    return out;
}

/* min / max: the first item with the least / greatest key; an empty sequence is undefined. */
static jinja_value min_max(jinja_vm *vm, jinja_value x, const jinja_args *a, bool max) {
    static const char *const kws[] = {"case_sensitive", "attribute", NULL};
    jinja_args_check(vm, a, 2, kws, max ? "max" : "min");
    const bool cs = jinja_fa_arg_bool(a, 0, "case_sensitive", false);
    const jinja_value *attr = jinja_arg(a, 1, "attribute");
    jinja_value items = jinja_vm_iterate(vm, x);
    if (items.u.list->n == 0) return jinja_vm_undef(vm, "No aggregated item, sequence was empty.");
    jinja_value best = items.u.list->items[0], bk = attr ? attr_get(vm, best, *attr, NULL) : best;
    if (!cs) bk = ignore_case(vm, bk);
    for (int64_t i = 1; i < items.u.list->n; i++) {
        jinja_value it = items.u.list->items[i], k = attr ? attr_get(vm, it, *attr, NULL) : it;
        if (!cs) k = ignore_case(vm, k);
        if (max ? jinja_vm_less(vm, bk, k) : jinja_vm_less(vm, k, bk)) {
            best = it;
            bk = k;
        }
    }
    return best;
}
static jinja_value f_min(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    return min_max(vm, x, a, false);
}
static jinja_value f_max(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    return min_max(vm, x, a, true);
}

static jinja_value f_sum(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"attribute", "start", NULL};
    jinja_args_check(vm, a, 2, kws, "sum");
    const jinja_value *attr = jinja_arg(a, 0, "attribute"), *start = jinja_arg(a, 1, "start");
    jinja_value acc = start ? *start : jinja_int(0);
    if (acc.type == JINJA_STR)
        jinja_vm_fail(vm, "sum() can't sum strings [use ''.join(seq) instead]");
    jinja_value items = jinja_vm_iterate(vm, x);
    for (int64_t i = 0; i < items.u.list->n; i++) {
        jinja_value it =
            attr ? attr_get(vm, items.u.list->items[i], *attr, NULL) : items.u.list->items[i];
        acc = jinja_vm_binop(vm, JOP_ADD, acc, it);
    }
    return acc;
}

static jinja_value f_length(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "length");
    switch (x.type) {
    case JINJA_UNDEFINED:
        return jinja_int(0);
    case JINJA_STR:
        return jinja_int(jinja_cp_count(x.u.s.p, x.u.s.len));
    case JINJA_LIST:
        return jinja_int(x.u.list->n);
    case JINJA_DICT:
        return jinja_int(x.u.dict->n);
    default:
        jinja_vm_fail(vm, "object of type '%s' has no len()", jinja_type_name(x));
    }
}

static jinja_value f_string(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "string");
    return soft_str(vm, x);
}

static jinja_value f_list(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "list");
    jinja_value items = jinja_vm_iterate(vm, x);
    jinja_value out = jinja_vm_list(vm, items.u.list->n, JINJA_SEQ_LIST);
    for (int64_t i = 0; i < items.u.list->n; i++) jinja_vm_push(vm, out, items.u.list->items[i]);
    return out;
}

static jinja_value f_first(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "first");
    jinja_value items = jinja_vm_iterate(vm, x);
    return items.u.list->n ? items.u.list->items[0]
                           : jinja_vm_undef(vm, "No first item, sequence was empty.");
}

static jinja_value f_last(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "last");
    jinja_value items = jinja_vm_iterate(vm, x);
    const int64_t n = items.u.list->n;
    return n ? items.u.list->items[n - 1] : jinja_vm_undef(vm, "No last item, sequence was empty.");
}

static jinja_value f_reverse(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "reverse");
    if (x.type == JINJA_STR) {
        jinja_buf b = {.heap = vm->h};
        jinja_buf_append(&b, "", 0);
        for (size_t i = x.u.s.len; i > 0;) {
            size_t q = i - 1;
            while (q > 0 && ((unsigned char)x.u.s.p[q] & 0xC0) == 0x80) q--;
            jinja_buf_append(&b, x.u.s.p + q, i - q);
            i = q;
        }
        return jinja_fa_buf_value(vm, &b);
    }
    jinja_value items = jinja_vm_iterate(vm, x);
    jinja_value out = jinja_vm_list(vm, items.u.list->n, JINJA_SEQ_LIST);
    for (int64_t i = items.u.list->n - 1; i >= 0; i--)
        jinja_vm_push(vm, out, items.u.list->items[i]);
    return out;
}

static jinja_value f_join(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"d", "attribute", NULL};
    jinja_args_check(vm, a, 2, kws, "join");
    const jinja_value *d = jinja_arg(a, 0, "d"), *attr = jinja_arg(a, 1, "attribute");
    jinja_value sep = d ? soft_str(vm, *d) : jinja_vm_str(vm, "", 0);
    jinja_value items = jinja_vm_iterate(vm, x);
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    for (int64_t i = 0; i < items.u.list->n; i++) {
        jinja_value it =
            attr ? attr_get(vm, items.u.list->items[i], *attr, NULL) : items.u.list->items[i];
        if (i) jinja_buf_append(&b, sep.u.s.p, sep.u.s.len);
        if (it.type == JINJA_STR)
            jinja_buf_append(&b, it.u.s.p, it.u.s.len);
        else if (it.type != JINJA_UNDEFINED)
            jinja_value_print(it, &b);
        if (b.len > vm->max_output) {
            jinja_buf_free(&b);
            jinja_vm_fail(vm, "join() result passes %zu bytes (the render's limit)",
                          vm->max_output);
        }
    }
    return jinja_fa_buf_value(vm, &b);
}

static jinja_value f_default(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"default_value", "boolean", NULL};
    jinja_args_check(vm, a, 2, kws, "default");
    const jinja_value *d = jinja_arg(a, 0, "default_value");
    if (x.type == JINJA_UNDEFINED ||
        (jinja_fa_arg_bool(a, 1, "boolean", false) && !jinja_truthy(x)))
        return d ? *d : jinja_vm_str(vm, "", 0);
    return x;
}

static jinja_value f_items(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "items");
    jinja_value out = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
    if (x.type == JINJA_UNDEFINED) return out;
    if (x.type != JINJA_DICT) jinja_vm_fail(vm, "Can only get item pairs from a mapping.");
    for (int64_t i = 0; i < x.u.dict->n; i++) {
        jinja_value t = jinja_vm_list(vm, 2, JINJA_SEQ_TUPLE);
        jinja_vm_push(vm, t, x.u.dict->keys[i]);
        jinja_vm_push(vm, t, x.u.dict->vals[i]);
        jinja_vm_push(vm, out, t);
    }
    return out;
}

/* ---- strings ---- */

static jinja_value case_filter(jinja_vm *vm, jinja_value x, const jinja_args *a, int which) {
    jinja_args_check(vm, a, 0, NULL, "a case filter");
    jinja_value s = soft_str(vm, x);
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    if (which == 0) jinja_str_lower(s.u.s.p, s.u.s.len, &b);
    if (which == 1) jinja_str_upper(s.u.s.p, s.u.s.len, &b);
    if (which == 2) jinja_str_capitalize(s.u.s.p, s.u.s.len, &b);
    if (which == 3) { /* jinja2's do_title: each run between [-\s({\[<] separators */
        bool start = true;
        for (size_t i = 0; i < s.u.s.len;) {
            uint32_t cp;
            int k = jinja_utf8_next(s.u.s.p + i, s.u.s.len - i, &cp);
            bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' ||
                       jinja_cp_isspace(cp);
            if (sep) {
                jinja_buf_append(&b, s.u.s.p + i, (size_t)k);
                start = true;
            } else if (start) {
                jinja_cp_upper(cp, &b);
                start = false;
            } else {
                jinja_str_lower(s.u.s.p + i, (size_t)k, &b);
            }
            i += (size_t)k;
        }
    }
    return jinja_fa_buf_value(vm, &b);
}
static jinja_value f_lower(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    return case_filter(vm, x, a, 0);
}
static jinja_value f_upper(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    return case_filter(vm, x, a, 1);
}
static jinja_value f_capitalize(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    return case_filter(vm, x, a, 2);
}
static jinja_value f_title(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    return case_filter(vm, x, a, 3);
}

static jinja_value f_trim(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"chars", NULL};
    jinja_args_check(vm, a, 1, kws, "trim");
    jinja_value s = soft_str(vm, x), m;
    jinja_vm_method(vm, s, "strip", &m);
    return jinja_vm_call(vm, m, a);
}

static jinja_value f_replace(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"old", "new", "count", NULL};
    jinja_args_check(vm, a, 3, kws, "replace");
    const jinja_value *o = jinja_arg(a, 0, "old"), *n = jinja_arg(a, 1, "new");
    if (!o || !n) jinja_vm_fail(vm, "replace needs the old and the new text");
    int64_t count = -1;
    const jinja_value *c = jinja_arg(a, 2, "count");
    if (c && c->type != JINJA_NONE) count = jinja_fa_arg_int(vm, a, 2, "count", -1);
    return jinja_vm_str_replace(vm, soft_str(vm, x), soft_str(vm, *o), soft_str(vm, *n), count);
}

static jinja_value f_center(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"width", NULL};
    jinja_args_check(vm, a, 1, kws, "center");
    jinja_value s = soft_str(vm, x);
    int64_t width = jinja_fa_arg_int(vm, a, 0, "width", 80),
            len = jinja_cp_count(s.u.s.p, s.u.s.len);
    if (len >= width) return s;
    if (width > (int64_t)vm->max_output)
        jinja_vm_fail(vm, "center(): width beyond the output limit");
    const int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
    jinja_buf b = {.heap = vm->h};
    for (int64_t i = 0; i < left; i++) jinja_buf_append(&b, " ", 1);
    jinja_buf_append(&b, s.u.s.p, s.u.s.len);
    for (int64_t i = 0; i < marg - left; i++) jinja_buf_append(&b, " ", 1);
    return jinja_fa_buf_value(vm, &b);
}

static jinja_value f_indent(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"width", "first", "blank", NULL};
    jinja_args_check(vm, a, 3, kws, "indent");
    jinja_value s = soft_str(vm, x), ind;
    const jinja_value *w = jinja_arg(a, 0, "width");
    if (w && w->type == JINJA_STR) {
        ind = *w;
    } else {
        int64_t n = jinja_fa_arg_int(vm, a, 0, "width", 4);
        if (n > 4096) jinja_vm_fail(vm, "indent(): width %lld is too large", (long long)n);
        char sp[4097];
        memset(sp, ' ', (size_t)(n > 0 ? n : 0));
        ind = jinja_vm_str(vm, sp, (size_t)(n > 0 ? n : 0));
    }
    const bool first = jinja_fa_arg_bool(a, 1, "first", false),
               blank = jinja_fa_arg_bool(a, 2, "blank", false);
    jinja_buf t = {.heap = vm->h}; /* s + "\n", then Python's splitlines() */
    jinja_buf_append(&t, s.u.s.p, s.u.s.len);
    jinja_buf_append(&t, "\n", 1);
    jinja_value lines = jinja_vm_splitlines(vm, jinja_vm_str(vm, t.p, t.len), false);
    jinja_buf_free(&t);
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    if (first) jinja_buf_append(&b, ind.u.s.p, ind.u.s.len);
    for (int64_t i = 0; i < lines.u.list->n; i++) {
        jinja_value line = lines.u.list->items[i];
        if (i) {
            jinja_buf_append(&b, "\n", 1);
            if (blank || line.u.s.len) jinja_buf_append(&b, ind.u.s.p, ind.u.s.len);
        }
        jinja_buf_append(&b, line.u.s.p, line.u.s.len);
    }
    return jinja_fa_buf_value(vm, &b);
}

static jinja_value f_wordcount(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "wordcount");
    jinja_value s = soft_str(vm, x);
    int64_t words = 0;
    bool in = false;
    for (size_t i = 0; i < s.u.s.len;) {
        uint32_t cp;
        i += (size_t)jinja_utf8_next(s.u.s.p + i, s.u.s.len - i, &cp);
        bool w = cp == '_' || jinja_cp_isalpha(cp) || jinja_cp_isdecimal(cp) ||
                 jinja_cp_isdigit(cp) || jinja_cp_isnumeric(cp);
        words += w && !in;
        in = w;
    }
    return jinja_int(words);
}

static jinja_value f_escape(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "escape");
    jinja_value s = soft_str(vm, x);
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    for (size_t i = 0; i < s.u.s.len; i++) {
        const char c = s.u.s.p[i];
        const char *e = c == '&'    ? "&amp;"
                        : c == '<'  ? "&lt;"
                        : c == '>'  ? "&gt;"
                        : c == '"'  ? "&#34;"
                        : c == '\'' ? "&#39;"
                                    : NULL;
        if (e)
            jinja_buf_append(&b, e, strlen(e));
        else
            jinja_buf_append(&b, &c, 1);
    }
    return jinja_fa_buf_value(vm, &b);
}

static jinja_value f_safe(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_args_check(vm, a, 0, NULL, "safe");
    return soft_str(vm, x);
}

/* ---- select, reject, selectattr, rejectattr, map ---- */

/* The items of x (when x is truthy) kept when the test (by name, args after `first`) on each
 * (or its attribute) is `want`; no test name: the item's truthiness. */
static jinja_value select_reject(jinja_vm *vm, jinja_value x, const jinja_args *a, bool want,
                                 bool by_attr) {
    jinja_value out = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
    if (!jinja_truthy(x)) return out;
    int first = 0;
    jinja_value attr = jinja_none();
    if (by_attr) {
        if (a->n < 1) jinja_vm_fail(vm, "Missing parameter for attribute name");
        attr = a->pos[0];
        first = 1;
    }
    int test = -1;
    if (a->n > first) {
        jinja_value name = a->pos[first];
        char buf[64];
        if (name.type != JINJA_STR || name.u.s.len >= sizeof(buf))
            jinja_vm_fail(vm, "a test name must be a string");
        memcpy(buf, name.u.s.p, name.u.s.len);
        buf[name.u.s.len] = 0;
        test = jinja_test_find(buf);
        if (test < 0) jinja_vm_fail(vm, "No test named '%s'.", buf);
    }
    jinja_args targs = *a;
    targs.pos = a->pos + (test >= 0 ? first + 1 : a->n);
    targs.n = test >= 0 ? a->n - first - 1 : 0;
    jinja_value items = jinja_vm_iterate(vm, x);
    for (int64_t i = 0; i < items.u.list->n; i++) {
        jinja_value it = items.u.list->items[i], v = by_attr ? attr_get(vm, it, attr, NULL) : it;
        bool r = test >= 0 ? jinja_vm_test(vm, test, v, &targs) : jinja_truthy(v);
        if (r == want) jinja_vm_push(vm, out, it);
    }
    return out;
}
static jinja_value f_select(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    return select_reject(vm, x, a, true, false);
}
static jinja_value f_reject(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    return select_reject(vm, x, a, false, false);
}
static jinja_value f_selectattr(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    return select_reject(vm, x, a, true, true);
}
static jinja_value f_rejectattr(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    return select_reject(vm, x, a, false, true);
}

static jinja_value f_map(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    jinja_value out = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
    if (!jinja_truthy(x)) return out;
    jinja_value items = jinja_vm_iterate(vm, x);
    const jinja_value *attr = jinja_arg(a, -1, "attribute");
    if (a->n == 0 && attr) {
        const jinja_value *dflt = jinja_arg(a, -1, "default");
        for (int k = 0; k < a->n_kw; k++)
            if (strcmp(a->kw[k], "attribute") && strcmp(a->kw[k], "default"))
                jinja_vm_fail(vm, "Unexpected keyword argument '%s'", a->kw[k]);
        for (int64_t i = 0; i < items.u.list->n; i++)
            jinja_vm_push(vm, out, attr_get(vm, items.u.list->items[i], *attr, dflt));
        return out;
    }
    if (a->n == 0) jinja_vm_fail(vm, "map requires a filter argument");
    jinja_value name = a->pos[0];
    char buf[64];
    if (name.type != JINJA_STR || name.u.s.len >= sizeof(buf))
        jinja_vm_fail(vm, "a filter name must be a string");
    memcpy(buf, name.u.s.p, name.u.s.len);
    buf[name.u.s.len] = 0;
    const int f = jinja_filter_find(buf);
    if (f < 0) jinja_vm_fail(vm, "No filter named '%s'.", buf);
    jinja_args fa = *a;
    fa.pos = a->pos + 1;
    fa.n = a->n - 1;
    for (int64_t i = 0; i < items.u.list->n; i++)
        jinja_vm_push(vm, out, jinja_vm_filter(vm, f, items.u.list->items[i], &fa));
    return out;
}

static jinja_value f_batch(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    static const char *const kws[] = {"linecount", "fill_with", NULL};
    jinja_args_check(vm, a, 2, kws, "batch");
    const int64_t n = jinja_fa_arg_int(vm, a, 0, "linecount", 0);
    if (n <= 0) jinja_vm_fail(vm, "batch: linecount must be positive");
    const jinja_value *fill = jinja_arg(a, 1, "fill_with");
    jinja_value items = jinja_vm_iterate(vm, x), out = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
    jinja_value cur = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
    for (int64_t i = 0; i < items.u.list->n; i++) {
        if (cur.u.list->n == n) {
            jinja_vm_push(vm, out, cur);
            cur = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
        }
        jinja_vm_push(vm, cur, items.u.list->items[i]);
    }
    if (cur.u.list->n) {
        if (fill && fill->type != JINJA_NONE)
            while (cur.u.list->n < n) jinja_vm_push(vm, cur, *fill);
        jinja_vm_push(vm, out, cur);
    }
    return out;
}

/* attr(name): the attribute alone, never the item (jinja2's getattr_static check). */
static jinja_value f_attr(jinja_vm *vm, jinja_value x, const jinja_args *a) {
    const jinja_value *n = jinja_arg(a, 0, "name");
    char buf[256];
    if (!n || n->type != JINJA_STR || n->u.s.len >= sizeof(buf))
        jinja_vm_fail(vm, "attr needs a name");
    memcpy(buf, n->u.s.p, n->u.s.len);
    buf[n->u.s.len] = 0;
    jinja_value m;
    if (x.type == JINJA_DICT || x.type == JINJA_STR || x.type == JINJA_LIST) {
        if (jinja_vm_method(vm, x, buf, &m)) return m;
        return jinja_vm_undef(vm, "'%s object' has no attribute '%s'", jinja_type_name(x), buf);
    }
    return jinja_vm_getattr(vm, x, buf);
}

/* ---- the table ---- */

static const struct {
    const char *name;
    filter_fn fn;
} filters[] = {
    {"abs", jinja_f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", jinja_f_float},
    {"forceescape", f_escape},
    {"indent", f_indent},
    {"int", jinja_f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", jinja_f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", jinja_f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

int jinja_filter_find(const char *name) {
    for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
        if (!strcmp(filters[i].name, name)) return (int)i;
    return -1;
}

jinja_value jinja_vm_filter(jinja_vm *vm, int id, jinja_value x, const jinja_args *a) {
    jinja_vm_step(vm);
    return filters[id].fn(vm, x, a);
}
