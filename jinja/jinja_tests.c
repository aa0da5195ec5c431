/* jinja_tests.c: jinja2's tests (jinja2/tests.py) and the globals of transformers' chat
 * template environment: range (the sandbox's, at most 100,000 items), dict, namespace (no
 * underscore-prefixed attributes), raise_exception, strftime_now; lipsum, cycler and joiner are
 * jinja2's too and refused when called. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "jinja/jinja_vm.h"

/* ---- tests ---- */

static bool is_int(jinja_value v) { return v.type == JINJA_INT || v.type == JINJA_BOOL; }
static int64_t ival(jinja_value v) { return v.type == JINJA_BOOL ? v.u.b : v.u.i; }

static jinja_value arg1(jinja_vm *vm, const jinja_args *a, const char *test) {
    if (a->n != 1 || a->n_kw) jinja_vm_fail(vm, "the test '%s' takes exactly one argument", test);
    return a->pos[0];
}

static void no_args(jinja_vm *vm, const jinja_args *a, const char *test) {
    if (a->n || a->n_kw) jinja_vm_fail(vm, "the test '%s' takes no arguments", test);
}

/* Python's str.islower() / isupper() of a value printed as str (the tests lower and upper). */
static bool str_case(jinja_vm *vm, jinja_value x, bool upper) {
    jinja_value s = jinja_vm_to_str(vm, x);
    bool any = false;
    for (size_t i = 0; i < s.u.s.len;) {
        uint32_t cp;
        i += (size_t)jinja_utf8_next(s.u.s.p + i, s.u.s.len - i, &cp);
        if (upper ? jinja_cp_islower(cp) || jinja_cp_istitle(cp)
                  : jinja_cp_isupper(cp) || jinja_cp_istitle(cp))
            return false;
        any |= upper ? jinja_cp_isupper(cp) : jinja_cp_islower(cp);
    }
    return any;
}

static bool modulo_zero(jinja_vm *vm, jinja_value x, jinja_value y) {
    if (!is_int(x) || !is_int(y) || ival(y) == 0) {
        if (x.type == JINJA_FLOAT || y.type == JINJA_FLOAT)
            jinja_vm_fail(vm, "divisibleby / even / odd on a float is not supported");
        if (is_int(y) && ival(y) == 0) jinja_vm_fail(vm, "integer division or modulo by zero");
        jinja_vm_fail(vm, "unsupported operand type(s) for %%: '%s' and '%s'", jinja_type_name(x),
                      jinja_type_name(y));
    }
    return ival(x) % ival(y) == 0;
}

typedef enum {
    T_DEFINED,
    T_UNDEFINED,
    T_NONE,
    T_BOOLEAN,
    T_FALSE,
    T_TRUE,
    T_INTEGER,
    T_FLOAT,
    T_NUMBER,
    T_STRING,
    T_MAPPING,
    T_ITERABLE,
    T_SEQUENCE,
    T_CALLABLE,
    T_EQ,
    T_NE,
    T_LT,
    T_LE,
    T_GT,
    T_GE,
    T_IN,
    T_DIVISIBLEBY,
    T_EVEN,
    T_ODD,
    T_LOWER,
    T_UPPER,
    T_SAMEAS,
} test_id;

static const struct {
    const char *name;
    test_id id;
} tests[] = {
    {"defined", T_DEFINED},
    {"undefined", T_UNDEFINED},
    {"none", T_NONE},
    {"boolean", T_BOOLEAN},
    {"false", T_FALSE},
    {"true", T_TRUE},
    {"integer", T_INTEGER},
    {"float", T_FLOAT},
    {"number", T_NUMBER},
    {"string", T_STRING},
    {"mapping", T_MAPPING},
    {"iterable", T_ITERABLE},
    {"sequence", T_SEQUENCE},
    {"callable", T_CALLABLE},
    {"eq", T_EQ},
    {"equalto", T_EQ},
    {"==", T_EQ},
    {"ne", T_NE},
    {"!=", T_NE},
    {"lt", T_LT},
    {"lessthan", T_LT},
    {"<", T_LT},
    {"le", T_LE},
    {"<=", T_LE},
    {"gt", T_GT},
    {"greaterthan", T_GT},
    {">", T_GT},
    {"ge", T_GE},
    {">=", T_GE},
    {"in", T_IN},
    {"divisibleby", T_DIVISIBLEBY},
    {"even", T_EVEN},
    {"odd", T_ODD},
    {"lower", T_LOWER},
    {"upper", T_UPPER},
    {"sameas", T_SAMEAS},
};

int jinja_test_find(const char *name) {
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
        if (!strcmp(tests[i].name, name)) return (int)i;
    return -1;
}

bool jinja_vm_test(jinja_vm *vm, int id, jinja_value x, const jinja_args *a) {
    const char *name = tests[id].name;
    switch (tests[id].id) {
    case T_DEFINED:
        no_args(vm, a, name);
        return x.type != JINJA_UNDEFINED;
    case T_UNDEFINED:
        no_args(vm, a, name);
        return x.type == JINJA_UNDEFINED;
    case T_NONE:
        no_args(vm, a, name);
        return x.type == JINJA_NONE;
    case T_BOOLEAN:
        no_args(vm, a, name);
        return x.type == JINJA_BOOL;
    case T_FALSE:
        no_args(vm, a, name);
        return x.type == JINJA_BOOL && !x.u.b;
    case T_TRUE:
        no_args(vm, a, name);
        return x.type == JINJA_BOOL && x.u.b;
    case T_INTEGER:
        no_args(vm, a, name);
        return x.type == JINJA_INT;
    case T_FLOAT:
        no_args(vm, a, name);
        return x.type == JINJA_FLOAT;
    case T_NUMBER:
        no_args(vm, a, name);
        return x.type == JINJA_INT || x.type == JINJA_FLOAT || x.type == JINJA_BOOL;
    case T_STRING:
        no_args(vm, a, name);
        return x.type == JINJA_STR;
    case T_MAPPING:
        no_args(vm, a, name);
        return x.type == JINJA_DICT;
    case T_ITERABLE: /* Undefined defines __iter__ */
        no_args(vm, a, name);
        return x.type == JINJA_STR || x.type == JINJA_LIST || x.type == JINJA_DICT ||
               x.type == JINJA_UNDEFINED;
    case T_SEQUENCE: /* len() and __getitem__: Undefined has both */
        no_args(vm, a, name);
        return x.type == JINJA_STR || x.type == JINJA_DICT || x.type == JINJA_UNDEFINED ||
               (x.type == JINJA_LIST && x.u.list->kind != JINJA_SEQ_ITEMS &&
                x.u.list->kind != JINJA_SEQ_KEYS && x.u.list->kind != JINJA_SEQ_VALUES);
    case T_CALLABLE:
        no_args(vm, a, name);
        return x.type == JINJA_CALLABLE;
    case T_EQ:
        return jinja_equal(x, arg1(vm, a, name));
    case T_NE:
        return !jinja_equal(x, arg1(vm, a, name));
    case T_LT:
        return jinja_vm_less(vm, x, arg1(vm, a, name));
    case T_LE: {
        jinja_value y = arg1(vm, a, name);
        return jinja_vm_less(vm, x, y) || jinja_equal(x, y);
    }
    case T_GT:
        return jinja_vm_less(vm, arg1(vm, a, name), x);
    case T_GE: {
        jinja_value y = arg1(vm, a, name);
        return jinja_vm_less(vm, y, x) || jinja_equal(x, y);
    }
    case T_IN:
        return jinja_vm_contains(vm, x, arg1(vm, a, name));
    case T_DIVISIBLEBY:
        return modulo_zero(vm, x, arg1(vm, a, name));
    case T_EVEN:
        no_args(vm, a, name);
        return modulo_zero(vm, x, jinja_int(2));
    case T_ODD:
        no_args(vm, a, name);
        return !modulo_zero(vm, x, jinja_int(2));
    case T_LOWER:
        no_args(vm, a, name);
        return str_case(vm, x, false);
    case T_UPPER:
        no_args(vm, a, name);
        return str_case(vm, x, true);
    case T_SAMEAS: {
        jinja_value y = arg1(vm, a, name);
        if (x.type != y.type) return false;
        switch (x.type) { /* Python's `is`: singletons, and the same container */
        case JINJA_NONE:
        case JINJA_UNDEFINED:
            return true;
        case JINJA_BOOL:
            return x.u.b == y.u.b;
        case JINJA_LIST:
        case JINJA_DICT:
        case JINJA_NAMESPACE:
            return x.u.dict == y.u.dict;
        default:
            jinja_vm_fail(vm, "'sameas' on a %s (object identity) is not supported",
                          jinja_type_name(x));
        }
    }
    }
    jinja_vm_fail(vm, "internal error: test %d", id);
}

/* ---- globals ---- */

typedef enum {
    G_RANGE,
    G_DICT,
    G_NAMESPACE,
    G_RAISE,
    G_STRFTIME,
    G_LIPSUM,
    G_CYCLER,
    G_JOINER
} global_id;
static const char *const global_names[] = {"range",        "dict",   "namespace", "raise_exception",
                                           "strftime_now", "lipsum", "cycler",    "joiner"};

bool jinja_vm_global(jinja_vm *vm, const char *name, jinja_value *out) {
    for (int i = 0; i < (int)(sizeof(global_names) / sizeof(global_names[0])); i++)
        if (!strcmp(global_names[i], name)) {
            struct jinja_obj *g = jinja_alloc(vm->h, sizeof(*g));
            memset(g, 0, sizeof(*g));
            g->kind = JOBJ_GLOBAL;
            g->id = i;
            g->name = global_names[i];
            out->type = JINJA_CALLABLE;
            out->u.obj = g;
            return true;
        }
    return false;
}

static jinja_value call_range(jinja_vm *vm, const jinja_args *a) {
    if (a->n_kw) jinja_vm_fail(vm, "range() takes no keyword arguments");
    if (a->n < 1 || a->n > 3) jinja_vm_fail(vm, "range expected 1 to 3 arguments, got %d", a->n);
    for (int i = 0; i < a->n; i++)
        if (!is_int(a->pos[i]))
            jinja_vm_fail(vm, "'%s' object cannot be interpreted as an integer",
                          jinja_type_name(a->pos[i]));
    int64_t start = 0, stop, step = 1;
    if (a->n == 1) {
        stop = ival(a->pos[0]);
    } else {
        start = ival(a->pos[0]);
        stop = ival(a->pos[1]);
        if (a->n == 3) step = ival(a->pos[2]);
    }
    if (step == 0) jinja_vm_fail(vm, "range() arg 3 must not be zero");
    __int128 n = step > 0 ? ((__int128)stop - start + step - 1) / step
                          : ((__int128)start - stop - step - 1) / -step;
    if (n < 0) n = 0;
    if (n > 100000)
        jinja_vm_fail(vm,
                      "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    jinja_value r = jinja_vm_list(vm, (int64_t)n, JINJA_SEQ_RANGE);
    r.u.list->r[0] = start;
    r.u.list->r[1] = stop;
    r.u.list->r[2] = step;
    for (int64_t i = 0; i < (int64_t)n; i++) jinja_vm_push(vm, r, jinja_int(start + i * step));
    return r;
}

/* dict(*args, **kwargs): at most one positional (a mapping or an iterable of pairs). */
static jinja_value make_dict(jinja_vm *vm, const jinja_args *a, const char *what) {
    if (a->n > 1) jinja_vm_fail(vm, "%s expected at most 1 argument, got %d", what, a->n);
    jinja_value d = jinja_dict_new(vm->h);
    if (a->n == 1) {
        jinja_value src = a->pos[0];
        if (src.type == JINJA_DICT) {
            for (int64_t i = 0; i < src.u.dict->n; i++)
                jinja_dict_set(vm->h, d, src.u.dict->keys[i], src.u.dict->vals[i]);
        } else {
            jinja_value items = jinja_vm_iterate(vm, src);
            for (int64_t i = 0; i < items.u.list->n; i++) {
                jinja_value pair = jinja_vm_iterate(vm, items.u.list->items[i]);
                if (pair.u.list->n != 2)
                    jinja_vm_fail(
                        vm,
                        "dictionary update sequence element #%lld has length %lld; 2 is required",
                        (long long)i, (long long)pair.u.list->n);
                if (!jinja_hashable(pair.u.list->items[0]))
                    jinja_vm_fail(vm, "unhashable type: '%s'",
                                  jinja_type_name(pair.u.list->items[0]));
                jinja_dict_set(vm->h, d, pair.u.list->items[0], pair.u.list->items[1]);
            }
        }
    }
    for (int k = 0; k < a->n_kw; k++) jinja_dict_set_str(vm->h, d, a->kw[k], a->kwv[k]);
    return d;
}

jinja_value jinja_vm_call_global(jinja_vm *vm, const struct jinja_obj *g, const jinja_args *a) {
    jinja_vm_step(vm);
    switch ((global_id)g->id) {
    case G_RANGE:
        return call_range(vm, a);
    case G_DICT:
        return make_dict(vm, a, "dict");
    case G_NAMESPACE: {
        jinja_value d = make_dict(vm, a, "namespace");
        for (int64_t i = 0; i < d.u.dict->n; i++) {
            jinja_value k = d.u.dict->keys[i];
            if (k.type == JINJA_STR && k.u.s.len && k.u.s.p[0] == '_')
                jinja_vm_fail(vm,
                              "chat templates cannot store underscore-prefixed attributes on "
                              "a namespace, but got '%.*s'",
                              (int)k.u.s.len, k.u.s.p);
        }
        d.type = JINJA_NAMESPACE;
        return d;
    }
    case G_RAISE: {
        if (a->n != 1 || a->n_kw) jinja_vm_fail(vm, "raise_exception() takes one argument");
        jinja_value m = jinja_vm_to_str(vm, a->pos[0]);
        jinja_vm_fail(vm, "raise_exception: %.*s", (int)m.u.s.len, m.u.s.p);
    }
    case G_STRFTIME: {
        if (a->n != 1 || a->n_kw || a->pos[0].type != JINJA_STR)
            jinja_vm_fail(vm, "strftime_now() takes one string argument");
        time_t now = vm->now >= 0 ? (time_t)vm->now : time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char fmt[512], buf[1024];
        jinja_value f = a->pos[0];
        if (f.u.s.len >= sizeof(fmt)) jinja_vm_fail(vm, "strftime_now(): the format is too long");
        memcpy(fmt, f.u.s.p, f.u.s.len);
        fmt[f.u.s.len] = 0;
        size_t n = strftime(buf, sizeof(buf), fmt, &tm);
        if (n == 0 && fmt[0]) jinja_vm_fail(vm, "strftime_now(): the formatted time is too long");
        return jinja_vm_str(vm, buf, n);
    }
    default:
        jinja_vm_fail(vm, "%s() is not supported", g->name);
    }
}
