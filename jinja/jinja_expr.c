/* jinja_expr.c: expressions with Python's semantics as jinja2 evaluates them in the sandbox:
 * arithmetic (int within 64 bits, an overflow an error, never a wrap), comparisons, `in`,
 * `and`/`or` returning an operand, `~`, literals, attribute and item lookup
 * (jinja2/sandbox.py's getattr and getitem), slices, calls, filters and tests. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jinja/jinja_vm.h"

/* ---- arithmetic ---- */

static bool is_num(jinja_value v) {
    return v.type == JINJA_INT || v.type == JINJA_FLOAT || v.type == JINJA_BOOL;
}
static bool is_intlike(jinja_value v) { return v.type == JINJA_INT || v.type == JINJA_BOOL; }
static int64_t as_int(jinja_value v) { return v.type == JINJA_BOOL ? v.u.b : v.u.i; }
static double as_float(jinja_value v) { return v.type == JINJA_FLOAT ? v.u.f : (double)as_int(v); }
static bool is_seq(jinja_value v) {
    return v.type == JINJA_LIST &&
           (v.u.list->kind == JINJA_SEQ_LIST || v.u.list->kind == JINJA_SEQ_TUPLE);
}

static const char *op_symbol(int op) {
    switch (op) {
    case JOP_ADD:
        return "+";
    case JOP_SUB:
        return "-";
    case JOP_MUL:
        return "*";
    case JOP_DIV:
        return "/";
    case JOP_FLOORDIV:
        return "//";
    case JOP_MOD:
        return "%";
    case JOP_POW:
        return "** or pow()";
    default:
        return "?";
    }
}

static void type_error(jinja_vm *vm, int op, jinja_value a, jinja_value b) {
    jinja_vm_fail(vm, "unsupported operand type(s) for %s: '%s' and '%s'", op_symbol(op),
                  jinja_type_name(a), jinja_type_name(b));
}

static jinja_value checked_int(jinja_vm *vm, __int128 r) {
    if (r > INT64_MAX || r < INT64_MIN)
        jinja_vm_fail(vm, "an integer beyond 64 bits (not supported)");
    return jinja_int((int64_t)r);
}

/* Python's float divmod (Objects/floatobject.c float_floor_div / float_rem). */
static double py_fmod(double a, double b) {
    double mod = fmod(a, b);
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) mod += b;
    } else {
        mod = copysign(0.0, b);
    }
    return mod;
}
static double py_floordiv(double a, double b) {
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0.0 && (b < 0) != (mod < 0)) div -= 1.0;
    if (div == 0.0) return copysign(0.0, a / b);
    double f = floor(div);
    return div - f > 0.5 ? f + 1.0 : f;
}

static jinja_value repeat(jinja_vm *vm, jinja_value seq, int64_t k) {
    if (k < 0) k = 0;
    if (seq.type == JINJA_STR) {
        if (seq.u.s.len && (uint64_t)k > vm->max_output / seq.u.s.len)
            jinja_vm_fail(vm, "a string repeated past %zu bytes (the render's limit)",
                          vm->max_output);
        char *p = jinja_alloc(vm->h, seq.u.s.len * (size_t)k + 1);
        for (int64_t i = 0; i < k; i++) memcpy(p + (size_t)i * seq.u.s.len, seq.u.s.p, seq.u.s.len);
        jinja_value v = {.type = JINJA_STR};
        v.u.s.p = p;
        v.u.s.len = seq.u.s.len * (size_t)k;
        return v;
    }
    const jinja_list *l = seq.u.list;
    if (l->n && (uint64_t)k > (uint64_t)vm->max_steps / (uint64_t)l->n)
        jinja_vm_fail(vm, "a list repeated past %lld items (the render's limit)",
                      (long long)vm->max_steps);
    jinja_value r = jinja_vm_list(vm, l->n * k, (jinja_seq_kind)l->kind);
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < l->n; j++) jinja_vm_push(vm, r, l->items[j]);
    return r;
}

jinja_value jinja_vm_binop(jinja_vm *vm, int op, jinja_value a, jinja_value b) {
    if (a.type == JINJA_UNDEFINED) jinja_vm_undefined_fail(vm, a);
    if (b.type == JINJA_UNDEFINED) jinja_vm_undefined_fail(vm, b);
    if (is_intlike(a) && is_intlike(b)) {
        const __int128 x = as_int(a), y = as_int(b);
        switch (op) {
        case JOP_ADD:
            return checked_int(vm, x + y);
        case JOP_SUB:
            return checked_int(vm, x - y);
        case JOP_MUL:
            return checked_int(vm, x * y);
        case JOP_DIV:
            if (y == 0) jinja_vm_fail(vm, "division by zero");
            return jinja_float((double)x / (double)y);
        case JOP_FLOORDIV:
        case JOP_MOD: {
            if (y == 0) jinja_vm_fail(vm, "integer division or modulo by zero");
            __int128 q = x / y, r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) {
                q -= 1;
                r += y;
            }
            return checked_int(vm, op == JOP_FLOORDIV ? q : r);
        }
        case JOP_POW: {
            if (y < 0) return jinja_float(pow((double)x, (double)y));
            __int128 r = 1, base = x;
            for (int64_t e = (int64_t)y; e > 0; e >>= 1) {
                if (e & 1) {
                    r *= base;
                    if (r > INT64_MAX || r < INT64_MIN) checked_int(vm, r);
                }
                if (e > 1) {
                    base *= base;
                    if (base > INT64_MAX || base < INT64_MIN) checked_int(vm, base);
                }
            }
            return checked_int(vm, r);
        }
        }
    }
    if (is_num(a) && is_num(b)) {
        const double x = as_float(a), y = as_float(b);
        switch (op) {
        case JOP_ADD:
            return jinja_float(x + y);
        case JOP_SUB:
            return jinja_float(x - y);
        case JOP_MUL:
            return jinja_float(x * y);
        case JOP_DIV:
            if (y == 0) jinja_vm_fail(vm, "float division by zero");
            return jinja_float(x / y);
        case JOP_FLOORDIV:
            if (y == 0) jinja_vm_fail(vm, "float floor division by zero");
            return jinja_float(py_floordiv(x, y));
        case JOP_MOD:
            if (y == 0) jinja_vm_fail(vm, "float modulo");
            return jinja_float(py_fmod(x, y));
        case JOP_POW:
            if (x == 0 && y < 0) jinja_vm_fail(vm, "0.0 cannot be raised to a negative power");
            if (x < 0 && y != floor(y))
                jinja_vm_fail(vm,
                              "a negative number to a fractional power (complex: not supported)");
            return jinja_float(pow(x, y));
        }
    }
    if (op == JOP_ADD && a.type == JINJA_STR && b.type == JINJA_STR) {
        char *p = jinja_alloc(vm->h, a.u.s.len + b.u.s.len + 1);
        memcpy(p, a.u.s.p, a.u.s.len);
        memcpy(p + a.u.s.len, b.u.s.p, b.u.s.len);
        jinja_value v = {.type = JINJA_STR};
        v.u.s.p = p;
        v.u.s.len = a.u.s.len + b.u.s.len;
        return v;
    }
    if (op == JOP_ADD && is_seq(a) && is_seq(b) && a.u.list->kind == b.u.list->kind) {
        jinja_value r =
            jinja_vm_list(vm, a.u.list->n + b.u.list->n, (jinja_seq_kind)a.u.list->kind);
        for (int64_t i = 0; i < a.u.list->n; i++) jinja_vm_push(vm, r, a.u.list->items[i]);
        for (int64_t i = 0; i < b.u.list->n; i++) jinja_vm_push(vm, r, b.u.list->items[i]);
        return r;
    }
    if (op == JOP_MUL && (a.type == JINJA_STR || is_seq(a)) && is_intlike(b))
        return repeat(vm, a, as_int(b));
    if (op == JOP_MUL && is_intlike(a) && (b.type == JINJA_STR || is_seq(b)))
        return repeat(vm, b, as_int(a));
    if (op == JOP_MOD && a.type == JINJA_STR)
        jinja_vm_fail(vm, "printf-style string formatting (str %% args) is not supported");
    type_error(vm, op, a, b);
    return a;
}

/* ---- comparisons ---- */

bool jinja_vm_contains(jinja_vm *vm, jinja_value needle, jinja_value hay) {
    switch (hay.type) {
    case JINJA_UNDEFINED:
        return false;
    case JINJA_STR:
        if (needle.type != JINJA_STR)
            jinja_vm_fail(vm, "'in <string>' requires string as left operand, not %s",
                          jinja_type_name(needle));
        if (needle.u.s.len == 0) return true;
        for (size_t i = 0; i + needle.u.s.len <= hay.u.s.len; i++)
            if (!memcmp(hay.u.s.p + i, needle.u.s.p, needle.u.s.len)) return true;
        return false;
    case JINJA_DICT:
    case JINJA_NAMESPACE:
        if (hay.type == JINJA_NAMESPACE)
            jinja_vm_fail(vm, "argument of type 'Namespace' is not iterable");
        if (!jinja_hashable(needle))
            jinja_vm_fail(vm, "unhashable type: '%s'", jinja_type_name(needle));
        return jinja_dict_find(hay.u.dict, needle) >= 0;
    case JINJA_LIST: {
        const jinja_list *l = hay.u.list;
        if (l->kind == JINJA_SEQ_RANGE) { /* range's fast containment: integers only */
            if (!is_intlike(needle) && !(needle.type == JINJA_FLOAT)) return false;
        }
        for (int64_t i = 0; i < l->n; i++)
            if (jinja_equal(l->items[i], needle)) return true;
        return false;
    }
    default:
        jinja_vm_fail(vm, "argument of type '%s' is not iterable", jinja_type_name(hay));
    }
}

bool jinja_vm_less(jinja_vm *vm, jinja_value a, jinja_value b) {
    if (a.type == JINJA_UNDEFINED) jinja_vm_undefined_fail(vm, a);
    if (b.type == JINJA_UNDEFINED) jinja_vm_undefined_fail(vm, b);
    bool ok = true;
    bool r = jinja_less(a, b, &ok);
    if (!ok)
        jinja_vm_fail(vm, "'<' not supported between instances of '%s' and '%s'",
                      jinja_type_name(a), jinja_type_name(b));
    return r;
}

static bool compare(jinja_vm *vm, int op, jinja_value a, jinja_value b) {
    switch (op) {
    case JOP_EQ:
        return jinja_equal(a, b);
    case JOP_NE:
        return !jinja_equal(a, b);
    case JOP_LT:
        return jinja_vm_less(vm, a, b);
    case JOP_GT:
        return jinja_vm_less(vm, b, a);
    case JOP_LTEQ:
        return jinja_vm_less(vm, a, b) || jinja_equal(a, b);
    case JOP_GTEQ:
        return jinja_vm_less(vm, b, a) || jinja_equal(a, b);
    case JCMP_IN:
        return jinja_vm_contains(vm, a, b);
    case JCMP_NOTIN:
        return !jinja_vm_contains(vm, a, b);
    default:
        jinja_vm_fail(vm, "internal error: comparison %d", op);
    }
}

/* ---- attribute and item lookup (jinja2's sandboxed getattr / getitem) ---- */

/* jinja2's object_type_repr: how an undefined's message names the object. */
static const char *obj_repr(jinja_value v) {
    switch (v.type) {
    case JINJA_NONE:
        return "None";
    case JINJA_STR:
        return "str object";
    case JINJA_INT:
        return "int object";
    case JINJA_FLOAT:
        return "float object";
    case JINJA_BOOL:
        return "bool object";
    case JINJA_DICT:
        return "dict object";
    case JINJA_NAMESPACE:
        return "jinja2.utils.Namespace object";
    case JINJA_LIST:
        return v.u.list->kind == JINJA_SEQ_TUPLE ? "tuple object" : "list object";
    default:
        return "object";
    }
}

static jinja_value no_attribute(jinja_vm *vm, jinja_value obj, const char *name) {
    return jinja_vm_undef(vm, "'%s' has no attribute '%s'", obj_repr(obj), name);
}

static jinja_value unsafe(jinja_vm *vm, jinja_value obj, const char *name) {
    return jinja_vm_undef(vm, "access to attribute '%s' of '%s' object is unsafe.", name,
                          jinja_type_name(obj));
}

/* The attributes Python's int and float have: refused rather than read as undefined. */
static bool number_attribute(const char *name) {
    static const char *const names[] = {
        "as_integer_ratio", "bit_count", "bit_length", "conjugate", "denominator",
        "from_bytes",       "imag",      "numerator",  "real",      "to_bytes",
        "fromhex",          "hex",       "is_integer", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

static jinja_value loop_attr(jinja_vm *vm, jinja_value lv, const char *name) {
    struct jinja_obj *l = lv.u.obj;
    const int64_t n = l->items->n, i = l->index0;
    if (!strcmp(name, "index")) return jinja_int(i + 1);
    if (!strcmp(name, "index0")) return jinja_int(i);
    if (!strcmp(name, "revindex")) return jinja_int(n - i);
    if (!strcmp(name, "revindex0")) return jinja_int(n - i - 1);
    if (!strcmp(name, "first")) return jinja_bool(i == 0);
    if (!strcmp(name, "last")) return jinja_bool(i == n - 1);
    if (!strcmp(name, "length")) return jinja_int(n);
    if (!strcmp(name, "depth")) return jinja_int(1);
    if (!strcmp(name, "depth0")) return jinja_int(0);
    if (!strcmp(name, "previtem"))
        return i > 0 ? l->items->items[i - 1] : jinja_vm_undef(vm, "there is no previous item");
    if (!strcmp(name, "nextitem"))
        return i + 1 < n ? l->items->items[i + 1] : jinja_vm_undef(vm, "there is no next item");
    if (!strcmp(name, "cycle") || !strcmp(name, "changed")) {
        struct jinja_obj *m = jinja_alloc(vm->h, sizeof(*m));
        memset(m, 0, sizeof(*m));
        m->kind = name[1] == 'y' ? JOBJ_LOOP_CYCLE : JOBJ_LOOP_CHANGED;
        m->loop = l;
        m->name = name[1] == 'y' ? "loop.cycle" : "loop.changed";
        jinja_value v = {.type = JINJA_CALLABLE};
        v.u.obj = m;
        return v;
    }
    return jinja_vm_undef(vm, "'LoopContext' object has no attribute '%s'", name);
}

jinja_value jinja_vm_getattr(jinja_vm *vm, jinja_value obj, const char *name) {
    jinja_value v;
    switch (obj.type) {
    case JINJA_UNDEFINED:
        jinja_vm_undefined_fail(vm, obj);
    case JINJA_DICT:
        if (name[0] == '_' && name[1] == '_') return unsafe(vm, obj, name);
        if (jinja_vm_method(vm, obj, name, &v)) return v;
        {
            jinja_value *x = jinja_dict_get_str(obj, name);
            return x ? *x : no_attribute(vm, obj, name);
        }
    case JINJA_NAMESPACE: {
        jinja_value d = {.type = JINJA_DICT};
        d.u.dict = obj.u.dict;
        jinja_value *x = jinja_dict_get_str(d, name);
        return x ? *x : no_attribute(vm, obj, name);
    }
    case JINJA_STR:
    case JINJA_LIST:
        if (name[0] == '_' && name[1] == '_') return unsafe(vm, obj, name);
        if (jinja_vm_method(vm, obj, name, &v)) return v;
        return no_attribute(vm, obj, name);
    case JINJA_INT:
    case JINJA_FLOAT:
    case JINJA_BOOL:
        if (number_attribute(name))
            jinja_vm_fail(vm, "the attribute '%s' of %s is not supported", name,
                          jinja_type_name(obj));
        return no_attribute(vm, obj, name);
    case JINJA_LOOP:
        return loop_attr(vm, obj, name);
    case JINJA_CALLABLE:
        if (name[0] == '_') return unsafe(vm, obj, name);
        jinja_vm_fail(vm, "attributes of %s (%s.%s) are not supported", obj.u.obj->name,
                      obj.u.obj->name, name);
    default:
        return no_attribute(vm, obj, name);
    }
}

/* Python's index normalisation: the position of i in a sequence of n, or -1 outside it. */
static int64_t seq_index(jinja_value key, int64_t n) {
    int64_t i = as_int(key);
    if (i < 0) i += n;
    return i >= 0 && i < n ? i : -1;
}

jinja_value jinja_vm_getitem(jinja_vm *vm, jinja_value obj, jinja_value key) {
    if (obj.type == JINJA_UNDEFINED) jinja_vm_undefined_fail(vm, obj);
    if (obj.type == JINJA_DICT && jinja_hashable(key)) {
        int64_t k = jinja_dict_find(obj.u.dict, key);
        if (k >= 0) return obj.u.dict->vals[k];
    } else if (obj.type == JINJA_STR && is_intlike(key)) {
        int64_t n = jinja_cp_count(obj.u.s.p, obj.u.s.len), i = seq_index(key, n);
        if (i >= 0) {
            size_t a = jinja_cp_offset(obj.u.s.p, obj.u.s.len, i);
            uint32_t cp;
            int k = jinja_utf8_next(obj.u.s.p + a, obj.u.s.len - a, &cp);
            return jinja_vm_str(vm, obj.u.s.p + a, (size_t)k);
        }
        /* an IndexError: jinja2 returns an undefined */
    } else if (obj.type == JINJA_LIST && is_intlike(key) && obj.u.list->kind != JINJA_SEQ_ITEMS &&
               obj.u.list->kind != JINJA_SEQ_KEYS && obj.u.list->kind != JINJA_SEQ_VALUES) {
        int64_t i = seq_index(key, obj.u.list->n);
        if (i >= 0) return obj.u.list->items[i];
    }
    if (key.type == JINJA_STR) { /* a failed item lookup tries the attribute */
        char name[256];
        if (key.u.s.len < sizeof(name) && !memchr(key.u.s.p, 0, key.u.s.len)) {
            memcpy(name, key.u.s.p, key.u.s.len);
            name[key.u.s.len] = 0;
            jinja_value v;
            if (obj.type == JINJA_DICT || obj.type == JINJA_STR || obj.type == JINJA_LIST) {
                if (name[0] == '_' && name[1] == '_') return unsafe(vm, obj, name);
                if (jinja_vm_method(vm, obj, name, &v)) return v;
            } else if (obj.type == JINJA_NAMESPACE || obj.type == JINJA_LOOP) {
                return jinja_vm_getattr(vm, obj, name);
            } else if (is_num(obj) && number_attribute(name)) {
                return jinja_vm_getattr(vm, obj, name);
            }
            return no_attribute(vm, obj, name);
        }
    }
    jinja_buf b = {.heap = vm->h};
    jinja_value_repr(key, &b);
    jinja_value u = jinja_vm_undef(vm, "%s has no element %s", obj_repr(obj), b.p ? b.p : "");
    jinja_buf_free(&b);
    return u;
}

/* obj[a:b:c] on a string (by code point), list or tuple; anything else, or parts that are not
 * integers, give jinja2's undefined. */
static jinja_value slice(jinja_vm *vm, jinja_value obj, const jinja_node *n, jinja_scope *s) {
    jinja_value part[3];
    const jinja_node *nodes[3] = {n->a, n->b, n->c};
    for (int i = 0; i < 3; i++) {
        part[i] = nodes[i] ? jinja_eval(vm, nodes[i], s) : jinja_none();
        if (part[i].type != JINJA_NONE && !is_intlike(part[i]))
            return jinja_vm_undef(vm, "slice indices must be integers or None");
    }
    if (obj.type == JINJA_UNDEFINED) jinja_vm_undefined_fail(vm, obj);
    const bool str = obj.type == JINJA_STR;
    if (!str && !is_seq(obj))
        return jinja_vm_undef(vm, "'%s' object is not subscriptable", jinja_type_name(obj));
    const int64_t len = str ? jinja_cp_count(obj.u.s.p, obj.u.s.len) : obj.u.list->n;
    const int64_t step = part[2].type == JINJA_NONE ? 1 : as_int(part[2]);
    if (step == 0) jinja_vm_fail(vm, "slice step cannot be zero");
    /* PySlice_AdjustIndices */
    int64_t start, stop;
    if (part[0].type == JINJA_NONE) {
        start = step < 0 ? len - 1 : 0;
    } else {
        start = as_int(part[0]);
        if (start < 0)
            start = start + len < 0 ? (step < 0 ? -1 : 0) : start + len;
        else if (start >= len)
            start = step < 0 ? len - 1 : len;
    }
    if (part[1].type == JINJA_NONE) {
        stop = step < 0 ? -1 : len;
    } else {
        stop = as_int(part[1]);
        if (stop < 0)
            stop = stop + len < 0 ? (step < 0 ? -1 : 0) : stop + len;
        else if (stop >= len)
            stop = step < 0 ? len - 1 : len;
    }
    if (str && step == 1) {
        if (stop <= start) return jinja_vm_str(vm, "", 0);
        size_t a = jinja_cp_offset(obj.u.s.p, obj.u.s.len, start);
        size_t b = a + jinja_cp_offset(obj.u.s.p + a, obj.u.s.len - a, stop - start);
        return jinja_vm_str(vm, obj.u.s.p + a, b - a);
    }
    if (str) {
        jinja_buf b = {.heap = vm->h};
        jinja_buf_append(&b, "", 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            size_t a = jinja_cp_offset(obj.u.s.p, obj.u.s.len, i);
            uint32_t cp;
            int k = jinja_utf8_next(obj.u.s.p + a, obj.u.s.len - a, &cp);
            jinja_buf_append(&b, obj.u.s.p + a, (size_t)k);
        }
        jinja_value v = jinja_vm_str(vm, b.p, b.len);
        jinja_buf_free(&b);
        return v;
    }
    jinja_value r = jinja_vm_list(vm, 0, (jinja_seq_kind)obj.u.list->kind);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        jinja_vm_push(vm, r, obj.u.list->items[i]);
    return r;
}

/* ---- iteration ---- */

jinja_value jinja_vm_iterate(jinja_vm *vm, jinja_value v) {
    switch (v.type) {
    case JINJA_UNDEFINED:
        return jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
    case JINJA_LIST:
        return v;
    case JINJA_DICT: {
        jinja_value r = jinja_vm_list(vm, v.u.dict->n, JINJA_SEQ_LIST);
        for (int64_t i = 0; i < v.u.dict->n; i++) jinja_vm_push(vm, r, v.u.dict->keys[i]);
        return r;
    }
    case JINJA_STR: {
        jinja_value r = jinja_vm_list(vm, 0, JINJA_SEQ_LIST);
        for (size_t i = 0; i < v.u.s.len;) {
            uint32_t cp;
            int k = jinja_utf8_next(v.u.s.p + i, v.u.s.len - i, &cp);
            jinja_vm_push(vm, r, jinja_vm_str(vm, v.u.s.p + i, (size_t)k));
            i += (size_t)k;
        }
        return r;
    }
    default:
        jinja_vm_fail(vm, "'%s' object is not iterable", jinja_type_name(v));
    }
}

/* ---- calls ---- */

jinja_args jinja_eval_args(jinja_vm *vm, const jinja_node *n, jinja_scope *s) {
    jinja_args a = {0};
    a.n = n->args.n;
    a.pos = jinja_alloc(vm->h, sizeof(jinja_value) * (size_t)(a.n + 1));
    for (int i = 0; i < a.n; i++) a.pos[i] = jinja_eval(vm, n->args.v[i], s);
    a.n_kw = n->kw_values.n;
    a.kw = n->kw_names;
    a.kwv = jinja_alloc(vm->h, sizeof(jinja_value) * (size_t)(a.n_kw + 1));
    for (int i = 0; i < a.n_kw; i++) a.kwv[i] = jinja_eval(vm, n->kw_values.v[i], s);
    return a;
}

const jinja_value *jinja_arg(const jinja_args *a, int i, const char *kw) {
    if (i >= 0 && i < a->n) return &a->pos[i];
    for (int k = 0; kw && k < a->n_kw; k++)
        if (!strcmp(a->kw[k], kw)) return &a->kwv[k];
    return NULL;
}

void jinja_args_check(jinja_vm *vm, const jinja_args *a, int max_pos, const char *const *kws,
                      const char *what) {
    if (a->n > max_pos)
        jinja_vm_fail(vm, "%s takes at most %d positional argument(s) (%d given)", what, max_pos,
                      a->n);
    for (int k = 0; k < a->n_kw; k++) {
        int i = 0;
        while (kws && kws[i] && strcmp(kws[i], a->kw[k])) i++;
        if (!kws || !kws[i])
            jinja_vm_fail(vm, "%s got an unexpected keyword argument '%s'", what, a->kw[k]);
        if (i < a->n) jinja_vm_fail(vm, "%s got multiple values for argument '%s'", what, a->kw[k]);
    }
}

jinja_value jinja_vm_call(jinja_vm *vm, jinja_value f, const jinja_args *a) {
    if (f.type == JINJA_UNDEFINED) jinja_vm_undefined_fail(vm, f);
    if (f.type != JINJA_CALLABLE)
        jinja_vm_fail(vm, "'%s' object is not callable", jinja_type_name(f));
    const struct jinja_obj *o = f.u.obj;
    switch (o->kind) {
    case JOBJ_MACRO:
        return jinja_macro_call(vm, o, a);
    case JOBJ_GLOBAL:
        return jinja_vm_call_global(vm, o, a);
    case JOBJ_METHOD:
        return jinja_vm_call_method(vm, o, a);
    case JOBJ_LOOP_CYCLE:
        if (a->n_kw) jinja_vm_fail(vm, "loop.cycle() takes no keyword arguments");
        if (a->n == 0) jinja_vm_fail(vm, "no items for cycling given");
        return a->pos[o->loop->index0 % a->n];
    case JOBJ_LOOP_CHANGED: {
        struct jinja_obj *l = o->loop;
        jinja_value cur = jinja_vm_list(vm, a->n, JINJA_SEQ_TUPLE);
        for (int i = 0; i < a->n; i++) jinja_vm_push(vm, cur, a->pos[i]);
        if (l->changed_set && jinja_equal(l->changed_last, cur)) return jinja_bool(false);
        l->changed_set = true;
        l->changed_last = cur;
        return jinja_bool(true);
    }
    default:
        jinja_vm_fail(vm, "internal error: a callable of kind %d", o->kind);
    }
}

/* ---- expressions ---- */

static jinja_value literal(jinja_vm *vm, const jinja_node *n, jinja_scope *s) {
    if (n->kind == JN_DICT) {
        jinja_value d = jinja_dict_new(vm->h);
        for (int i = 0; i + 1 < n->args.n; i += 2) {
            jinja_value k = jinja_eval(vm, n->args.v[i], s);
            if (!jinja_hashable(k)) jinja_vm_fail(vm, "unhashable type: '%s'", jinja_type_name(k));
            jinja_dict_set(vm->h, d, k, jinja_eval(vm, n->args.v[i + 1], s));
        }
        return d;
    }
    jinja_value l =
        jinja_vm_list(vm, n->args.n, n->kind == JN_TUPLE ? JINJA_SEQ_TUPLE : JINJA_SEQ_LIST);
    for (int i = 0; i < n->args.n; i++) jinja_vm_push(vm, l, jinja_eval(vm, n->args.v[i], s));
    return l;
}

static jinja_value concat(jinja_vm *vm, const jinja_node *n, jinja_scope *s) {
    jinja_buf b = {.heap = vm->h};
    jinja_buf_append(&b, "", 0);
    for (int i = 0; i < n->args.n; i++) {
        jinja_value v = jinja_eval(vm, n->args.v[i], s);
        if (v.type == JINJA_STR)
            jinja_buf_append(&b, v.u.s.p, v.u.s.len);
        else if (v.type != JINJA_UNDEFINED)
            jinja_value_print(v, &b);
        if (b.len > vm->max_output) {
            jinja_buf_free(&b);
            jinja_vm_fail(vm, "a string passes %zu bytes (the render's limit)", vm->max_output);
        }
    }
    jinja_value r = jinja_vm_str(vm, b.p, b.len);
    jinja_buf_free(&b);
    return r;
}

static jinja_value negate(jinja_vm *vm, jinja_value v, bool neg) {
    if (v.type == JINJA_UNDEFINED) jinja_vm_undefined_fail(vm, v);
    if (is_intlike(v)) return neg ? checked_int(vm, -(__int128)as_int(v)) : jinja_int(as_int(v));
    if (v.type == JINJA_FLOAT) return jinja_float(neg ? -v.u.f : v.u.f);
    jinja_vm_fail(vm, "bad operand type for unary %c: '%s'", neg ? '-' : '+', jinja_type_name(v));
}

jinja_value jinja_eval(jinja_vm *vm, const jinja_node *n, jinja_scope *s) {
    vm->line = n->line;
    switch (n->kind) {
    case JN_CONST:
        return n->value;
    case JN_NAME:
        return jinja_scope_get(vm, s, n->name);
    case JN_GETATTR: {
        jinja_value o = jinja_eval(vm, n->a, s);
        vm->line = n->line;
        return jinja_vm_getattr(vm, o, n->name);
    }
    case JN_GETITEM: {
        jinja_value o = jinja_eval(vm, n->a, s);
        if (n->b->kind == JN_SLICE) return slice(vm, o, n->b, s);
        jinja_value k = jinja_eval(vm, n->b, s);
        vm->line = n->line;
        return jinja_vm_getitem(vm, o, k);
    }
    case JN_CALL: {
        jinja_value f = jinja_eval(vm, n->a, s);
        jinja_args a = jinja_eval_args(vm, n, s);
        vm->line = n->line;
        return jinja_vm_call(vm, f, &a);
    }
    case JN_FILTER: {
        jinja_value x = jinja_eval(vm, n->a, s);
        jinja_args a = jinja_eval_args(vm, n, s);
        vm->line = n->line;
        return jinja_vm_filter(vm, n->builtin, x, &a);
    }
    case JN_TEST: {
        jinja_value x = jinja_eval(vm, n->a, s);
        jinja_args a = jinja_eval_args(vm, n, s);
        vm->line = n->line;
        return jinja_bool(jinja_vm_test(vm, n->builtin, x, &a));
    }
    case JN_NOT:
        return jinja_bool(!jinja_truthy(jinja_eval(vm, n->a, s)));
    case JN_NEG:
        return negate(vm, jinja_eval(vm, n->a, s), true);
    case JN_POS:
        return negate(vm, jinja_eval(vm, n->a, s), false);
    case JN_BINOP: {
        jinja_value a = jinja_eval(vm, n->a, s), b = jinja_eval(vm, n->b, s);
        vm->line = n->line;
        return jinja_vm_binop(vm, n->op, a, b);
    }
    case JN_AND: {
        jinja_value a = jinja_eval(vm, n->a, s);
        return jinja_truthy(a) ? jinja_eval(vm, n->b, s) : a;
    }
    case JN_OR: {
        jinja_value a = jinja_eval(vm, n->a, s);
        return jinja_truthy(a) ? a : jinja_eval(vm, n->b, s);
    }
    case JN_CONCAT:
        return concat(vm, n, s);
    case JN_COMPARE: {
        jinja_value left = jinja_eval(vm, n->args.v[0], s);
        for (int i = 0; i + 1 < n->args.n; i++) {
            jinja_value right = jinja_eval(vm, n->args.v[i + 1], s);
            vm->line = n->line;
            if (!compare(vm, n->ops[i], left, right)) return jinja_bool(false);
            left = right;
        }
        return jinja_bool(true);
    }
    case JN_CONDEXPR:
        if (jinja_truthy(jinja_eval(vm, n->a, s))) return jinja_eval(vm, n->b, s);
        return n->c ? jinja_eval(vm, n->c, s)
                    : jinja_vm_undef(vm,
                                     "the inline if-expression on line %d evaluated to false "
                                     "and no else section was defined.",
                                     n->line);
    case JN_LIST:
    case JN_TUPLE:
    case JN_DICT:
        return literal(vm, n, s);
    default:
        jinja_vm_fail(vm, "internal error: an expression of kind %d", n->kind);
    }
}
