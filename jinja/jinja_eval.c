/* jinja_eval.c: running a template's statements: output, if, for, set, macros, with, filter
 * blocks, {% generation %}; scopes, limits and errors of a render (jinja/jinja_vm.h).
 *
 * Scopes follow jinja2's: a for loop's body gets a fresh scope for every iteration (a set
 * inside it is gone at the next one and after the loop, hence namespace()); a macro call gets
 * one whose parent is the scope the macro was defined in; if blocks get none. Output goes to
 * the render's buffer, or while a macro, set block or filter block runs, to that one's own
 * buffer (its value). Only output into the render's buffer is tagged (provenance) and may be
 * inside {% generation %}. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "jinja/jinja_vm.h"

enum { EXEC_NORMAL = 0, EXEC_BREAK, EXEC_CONTINUE };

/* ---- errors and limits ---- */

void jinja_vm_fail(jinja_vm *vm, const char *fmt, ...) {
    int k = snprintf(vm->err, vm->errlen, "%s:%d: ", vm->t->name, vm->line);
    va_list ap;
    va_start(ap, fmt);
    if (k >= 0 && (size_t)k < vm->errlen) vsnprintf(vm->err + k, vm->errlen - (size_t)k, fmt, ap);
    va_end(ap);
    longjmp(vm->fail, 1);
}

/* An undefined value's u.s holds either the name it was looked up by, or (first byte \x01) the
 * whole message its use raises. */
jinja_value jinja_vm_undef(jinja_vm *vm, const char *fmt, ...) {
    char msg[512];
    msg[0] = '\x01';
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(msg + 1, sizeof(msg) - 1, fmt, ap);
    va_end(ap);
    size_t n = 1 + (k < 0 ? 0 : (size_t)k < sizeof(msg) - 1 ? (size_t)k : sizeof(msg) - 2);
    jinja_value u = {.type = JINJA_UNDEFINED};
    char *p = jinja_alloc(vm->h, n + 1);
    memcpy(p, msg, n);
    p[n] = 0;
    u.u.s.p = p;
    u.u.s.len = n;
    return u;
}

void jinja_vm_undefined_fail(jinja_vm *vm, jinja_value u) {
    const char *p = u.u.s.p ? u.u.s.p : "";
    if (p[0] == '\x01') jinja_vm_fail(vm, "%.*s", (int)u.u.s.len - 1, p + 1);
    jinja_vm_fail(vm, "'%.*s' is undefined", (int)u.u.s.len, p);
}

void jinja_vm_step(jinja_vm *vm) {
    if (++vm->steps > vm->max_steps)
        jinja_vm_fail(vm, "more than %lld loop iterations and calls (the render's limit)",
                      (long long)vm->max_steps);
}

/* ---- values ---- */

jinja_value jinja_vm_str(jinja_vm *vm, const char *s, size_t n) {
    jinja_value v = jinja_str(vm->h, s, n);
    return v;
}

jinja_value jinja_vm_to_str(jinja_vm *vm, jinja_value v) {
    if (v.type == JINJA_STR) return v;
    if (v.type == JINJA_UNDEFINED) return jinja_vm_str(vm, "", 0);
    jinja_buf b = {.heap = vm->h};
    jinja_value_print(v, &b);
    jinja_value s = jinja_vm_str(vm, b.p ? b.p : "", b.len);
    jinja_buf_free(&b);
    return s;
}

jinja_value jinja_vm_list(jinja_vm *vm, int64_t n, jinja_seq_kind kind) {
    jinja_value l = jinja_list_new(vm->h);
    l.u.list->kind = (uint8_t)kind;
    if (n > 0) {
        l.u.list->items = jinja_alloc(vm->h, sizeof(jinja_value) * (size_t)n);
        l.u.list->cap = n;
    }
    return l;
}

void jinja_vm_push(jinja_vm *vm, jinja_value list, jinja_value v) {
    jinja_list_push(vm->h, list, v);
}

/* ---- scopes ---- */

static jinja_scope *scope_new(jinja_vm *vm, jinja_scope *parent) {
    jinja_scope *s = jinja_alloc(vm->h, sizeof(*s));
    memset(s, 0, sizeof(*s));
    s->parent = parent;
    return s;
}

void jinja_scope_set(jinja_vm *vm, jinja_scope *s, const char *name, jinja_value v) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        const char **names = jinja_alloc(vm->h, sizeof(char *) * (size_t)cap);
        jinja_value *vals = jinja_alloc(vm->h, sizeof(jinja_value) * (size_t)cap);
        if (s->n) {
            memcpy(names, s->names, sizeof(char *) * (size_t)s->n);
            memcpy(vals, s->vals, sizeof(jinja_value) * (size_t)s->n);
        }
        s->names = names;
        s->vals = vals;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
}

jinja_value jinja_scope_get(jinja_vm *vm, jinja_scope *s, const char *name) {
    for (; s; s = s->parent)
        for (int i = s->n - 1; i >= 0; i--)
            if (!strcmp(s->names[i], name)) return s->vals[i];
    jinja_value *v = jinja_dict_get_str(vm->vars, name);
    if (v) return *v;
    jinja_value g;
    if (jinja_vm_global(vm, name, &g)) return g;
    jinja_value u = {.type = JINJA_UNDEFINED};
    u.u.s.p = name;
    u.u.s.len = strlen(name);
    return u;
}

/* ---- output ---- */

static void emit(jinja_vm *vm, const char *s, size_t n) {
    if (!n) return;
    if (vm->captures == 0) {
        jinja_output *o = vm->main;
        if (o->text.len + n > vm->max_output)
            jinja_vm_fail(vm, "the output passes %zu bytes (the render's limit)", vm->max_output);
        if (vm->tag >= 0) {
            const int64_t at = (int64_t)o->text.len;
            jinja_span *last = o->n_tagged ? &o->tagged[o->n_tagged - 1] : NULL;
            if (last && last->tag == vm->tag && last->end == at) {
                last->end = at + (int64_t)n;
            } else {
                if (o->n_tagged == o->cap_tagged) {
                    o->cap_tagged = o->cap_tagged ? 2 * o->cap_tagged : 16;
                    o->tagged = realloc(o->tagged, sizeof(jinja_span) * (size_t)o->cap_tagged);
                    MT_CHECK(o->tagged, "out of memory for a render's spans");
                }
                o->tagged[o->n_tagged++] = (jinja_span){at, at + (int64_t)n, vm->tag};
            }
        }
    } else if (vm->out->len + n > vm->max_output) {
        jinja_vm_fail(vm, "the output and the captured output pass %zu bytes (the render's limit)",
                      vm->max_output);
    }
    jinja_buf_append(vm->out, s, n);
}

static void emit_value(jinja_vm *vm, jinja_value v) {
    if (v.type == JINJA_STR) {
        emit(vm, v.u.s.p, v.u.s.len);
    } else if (v.type != JINJA_UNDEFINED) {
        jinja_buf b = {.heap = vm->h};
        jinja_value_print(v, &b);
        emit(vm, b.p, b.len);
        jinja_buf_free(&b);
    }
}

/* Runs body with its output captured; returns it as a string value. The captured bytes go to
 * the end of the render's buffer and are taken off it again (no buffer of their own, so that
 * an error inside leaves nothing to free). */
static int exec_nodes(jinja_vm *vm, const jinja_nodes *body, jinja_scope *s);
static jinja_value capture(jinja_vm *vm, const jinja_nodes *body, jinja_scope *s) {
    jinja_buf *b = vm->out;
    const size_t start = b->len;
    vm->captures++;
    exec_nodes(vm, body, s);
    vm->captures--;
    jinja_value v = jinja_vm_str(vm, b->p + start, b->len - start);
    b->len = start;
    b->p[start] = 0;
    return v;
}

/* ---- assignment ---- */

void jinja_assign(jinja_vm *vm, const jinja_node *target, jinja_value v, jinja_scope *s) {
    if (target->kind == JN_NAME) {
        jinja_scope_set(vm, s, target->name, v);
    } else if (target->kind == JN_NSREF) {
        jinja_value ns = jinja_scope_get(vm, s, target->name);
        if (ns.type != JINJA_NAMESPACE)
            jinja_vm_fail(vm, "cannot assign attribute on non-namespace object");
        if (target->attr[0] == '_')
            jinja_vm_fail(vm,
                          "chat templates cannot store underscore-prefixed attributes on a "
                          "namespace, but got '%s'",
                          target->attr);
        jinja_value d = {.type = JINJA_DICT};
        d.u.dict = ns.u.dict;
        jinja_dict_set_str(vm->h, d, target->attr, v);
    } else { /* a tuple of targets: unpack */
        jinja_value items = jinja_vm_iterate(vm, v);
        const int64_t n = items.u.list->n, want = target->args.n;
        if (n != want)
            jinja_vm_fail(vm,
                          n > want ? "too many values to unpack (expected %lld)"
                                   : "not enough values to unpack (expected %lld, got %lld)",
                          (long long)want, (long long)n);
        for (int i = 0; i < target->args.n; i++)
            jinja_assign(vm, target->args.v[i], items.u.list->items[i], s);
    }
}

/* ---- macros ---- */

jinja_value jinja_macro_call(jinja_vm *vm, const struct jinja_obj *m, const jinja_args *a) {
    const jinja_node *mac = m->macro;
    jinja_vm_step(vm);
    if (++vm->depth > vm->max_depth)
        jinja_vm_fail(vm, "macro calls nested more than %d deep (the render's limit)",
                      vm->max_depth);
    jinja_scope *s = scope_new(vm, m->closure);
    const int np = mac->n_params;
    if (a->n > np && !mac->uses_varargs)
        jinja_vm_fail(vm, "macro '%s' takes not more than %d argument(s)", mac->name, np);
    bool given[64] = {false};
    for (int i = 0; i < a->n && i < np; i++) {
        jinja_scope_set(vm, s, mac->params[i], a->pos[i]);
        given[i] = true;
    }
    jinja_value kwargs = jinja_dict_new(vm->h);
    for (int k = 0; k < a->n_kw; k++) {
        int i = 0;
        while (i < np && strcmp(mac->params[i], a->kw[k])) i++;
        if (i < np) {
            if (given[i])
                jinja_vm_fail(vm, "macro '%s' got multiple values for argument '%s'", mac->name,
                              a->kw[k]);
            jinja_scope_set(vm, s, mac->params[i], a->kwv[k]);
            given[i] = true;
        } else if (mac->uses_kwargs) {
            jinja_dict_set_str(vm->h, kwargs, a->kw[k], a->kwv[k]);
        } else {
            jinja_vm_fail(vm, "macro '%s' takes no keyword argument '%s'", mac->name, a->kw[k]);
        }
    }
    for (int i = 0; i < np; i++) { /* defaults see the parameters before them */
        if (given[i]) continue;
        jinja_value v = mac->defaults[i]
                            ? jinja_eval(vm, mac->defaults[i], s)
                            : jinja_vm_undef(vm, "parameter '%s' was not provided", mac->params[i]);
        jinja_scope_set(vm, s, mac->params[i], v);
    }
    if (mac->uses_varargs) {
        jinja_value va = jinja_vm_list(vm, a->n > np ? a->n - np : 0, JINJA_SEQ_TUPLE);
        for (int i = np; i < a->n; i++) jinja_vm_push(vm, va, a->pos[i]);
        jinja_scope_set(vm, s, "varargs", va);
    }
    if (mac->uses_kwargs) jinja_scope_set(vm, s, "kwargs", kwargs);
    const int line = vm->line, tag = vm->tag;
    jinja_value out = capture(vm, &mac->body, s);
    vm->line = line;
    vm->tag = tag;
    vm->depth--;
    return out;
}

/* ---- statements ---- */

static int track_index(const jinja_vm *vm, jinja_value item) {
    if (item.type != JINJA_DICT && item.type != JINJA_LIST) return -1;
    for (int k = 0; k < vm->n_track; k++)
        if (vm->track[k].type == item.type && vm->track[k].u.dict == item.u.dict) return k;
    return -1;
}

static int exec_for(jinja_vm *vm, const jinja_node *n, jinja_scope *s) {
    jinja_value items = jinja_vm_iterate(vm, jinja_eval(vm, n->a, s));
    if (n->b) { /* for x in y if cond: the kept items, numbered anew */
        jinja_value kept = jinja_vm_list(vm, items.u.list->n, JINJA_SEQ_LIST);
        jinja_scope *f = scope_new(vm, s);
        for (int64_t i = 0; i < items.u.list->n; i++) {
            jinja_vm_step(vm);
            f->n = 0;
            jinja_assign(vm, n->target, items.u.list->items[i], f);
            if (jinja_truthy(jinja_eval(vm, n->b, f)))
                jinja_vm_push(vm, kept, items.u.list->items[i]);
        }
        items = kept;
    }
    const jinja_list *l = items.u.list;
    struct jinja_obj *loop = jinja_alloc(vm->h, sizeof(*loop));
    memset(loop, 0, sizeof(*loop));
    loop->kind = JOBJ_LOOP;
    loop->items = l;
    jinja_value loopv = {.type = JINJA_LOOP};
    loopv.u.obj = loop;
    const int tag = vm->tag;
    /* jinja2 runs the else block unless an iteration ran its body to the end (an iteration
     * left by break or continue does not count) */
    bool completed = false;
    jinja_scope *it = scope_new(vm, s); /* emptied for every iteration: no garbage per item */
    for (int64_t i = 0; i < l->n; i++) {
        jinja_vm_step(vm);
        loop->index0 = i;
        it->n = 0;
        jinja_assign(vm, n->target, l->items[i], it);
        jinja_scope_set(vm, it, "loop", loopv);
        const int k = track_index(vm, l->items[i]);
        if (k >= 0) vm->tag = k;
        int st = exec_nodes(vm, &n->body, it);
        vm->tag = tag;
        completed |= st == EXEC_NORMAL;
        if (st == EXEC_BREAK) break;
    }
    return completed ? EXEC_NORMAL : exec_nodes(vm, &n->orelse, s);
}

/* A filter chain (JN_FILTER nodes, the innermost with no input) applied to v. */
static jinja_value apply_filters(jinja_vm *vm, const jinja_node *f, jinja_value v, jinja_scope *s);

static int exec_node(jinja_vm *vm, const jinja_node *n, jinja_scope *s) {
    vm->line = n->line;
    switch (n->kind) {
    case JN_DATA:
        emit(vm, n->value.u.s.p, n->value.u.s.len);
        return EXEC_NORMAL;
    case JN_OUTPUT:
        emit_value(vm, jinja_eval(vm, n->a, s));
        return EXEC_NORMAL;
    case JN_IF:
        return exec_nodes(vm, jinja_truthy(jinja_eval(vm, n->a, s)) ? &n->body : &n->orelse, s);
    case JN_FOR:
        return exec_for(vm, n, s);
    case JN_SET:
        jinja_assign(vm, n->target, jinja_eval(vm, n->a, s), s);
        return EXEC_NORMAL;
    case JN_SETBLOCK: {
        jinja_value v = capture(vm, &n->body, s);
        if (n->a) v = apply_filters(vm, n->a, v, s);
        jinja_assign(vm, n->target, v, s);
        return EXEC_NORMAL;
    }
    case JN_FILTERBLOCK: {
        jinja_value v = capture(vm, &n->body, s);
        vm->line = n->line;
        emit_value(vm, apply_filters(vm, n->a, v, s));
        return EXEC_NORMAL;
    }
    case JN_MACRO: {
        struct jinja_obj *m = jinja_alloc(vm->h, sizeof(*m));
        memset(m, 0, sizeof(*m));
        m->kind = JOBJ_MACRO;
        m->macro = n;
        m->closure = s;
        m->name = n->name;
        jinja_value v = {.type = JINJA_CALLABLE};
        v.u.obj = m;
        jinja_scope_set(vm, s, n->name, v);
        return EXEC_NORMAL;
    }
    case JN_WITH: {
        jinja_scope *w = scope_new(vm, s);
        for (int i = 0; i < n->args.n; i++) /* the values see the outer scope */
            jinja_assign(vm, n->args.v[i], jinja_eval(vm, n->kw_values.v[i], s), w);
        return exec_nodes(vm, &n->body, w);
    }
    case JN_GENERATION: {
        if (vm->captures)
            jinja_vm_fail(vm,
                          "{%% generation %%} inside a set block or filter block is not supported");
        const int64_t start = (int64_t)vm->main->text.len;
        int st = exec_nodes(vm, &n->body, s);
        jinja_output *o = vm->main;
        if (o->n_gen == o->cap_gen) {
            o->cap_gen = o->cap_gen ? 2 * o->cap_gen : 8;
            o->gen = realloc(o->gen, sizeof(jinja_span) * (size_t)o->cap_gen);
            MT_CHECK(o->gen, "out of memory for a render's spans");
        }
        o->gen[o->n_gen++] = (jinja_span){start, (int64_t)o->text.len, -1};
        return st;
    }
    case JN_BREAK:
        return EXEC_BREAK;
    case JN_CONTINUE:
        return EXEC_CONTINUE;
    default:
        jinja_vm_fail(vm, "internal error: a statement of kind %d", n->kind);
    }
}

static int exec_nodes(jinja_vm *vm, const jinja_nodes *body, jinja_scope *s) {
    for (int i = 0; i < body->n; i++) {
        int st = exec_node(vm, body->v[i], s);
        if (st != EXEC_NORMAL) return st;
    }
    return EXEC_NORMAL;
}

static jinja_value apply_filters(jinja_vm *vm, const jinja_node *f, jinja_value v, jinja_scope *s) {
    if (f->a) v = apply_filters(vm, f->a, v, s);
    /* the filter node with its input replaced: evaluate its arguments here */
    jinja_args a = jinja_eval_args(vm, f, s);
    vm->line = f->line;
    return jinja_vm_filter(vm, f->builtin, v, &a);
}

/* ---- the render ---- */

/* The render proper: errors jump back here. */
static int render_run(jinja_vm *vm) {
    if (setjmp(vm->fail)) return -1;
    vm->top = scope_new(vm, NULL);
    exec_nodes(vm, &vm->t->body, vm->top);
    return 0;
}

int jinja_render(const jinja_template *t, jinja_heap *h, jinja_value vars,
                 const jinja_render_opts *opts, jinja_output *out, char *err, size_t errlen) {
    static const jinja_render_opts none = {0};
    const jinja_render_opts *o = opts ? opts : &none;
    out->text.len = 0;
    jinja_buf_append(&out->text, "", 0);
    out->n_gen = out->n_tagged = 0;
    if (vars.type != JINJA_DICT) {
        snprintf(err, errlen, "%s: the render's variables must be a dict", t->name);
        return -1;
    }
    jinja_vm *vm = calloc(1, sizeof(*vm)); /* jmp_buf: not on a small stack */
    MT_CHECK(vm, "out of memory for a render");
    vm->t = t;
    vm->h = h;
    vm->err = err;
    vm->errlen = errlen;
    vm->vars = vars;
    vm->main = out;
    vm->out = &out->text;
    vm->max_output = o->max_output ? o->max_output : (size_t)64 << 20;
    vm->max_steps = o->max_steps ? o->max_steps : 10000000;
    vm->max_depth = o->max_depth ? o->max_depth : 256;
    vm->track = o->track;
    vm->n_track = o->n_track;
    vm->tag = -1;
    vm->now = o->now;
    const size_t saved_max = h->max, mem = o->max_memory ? o->max_memory : (size_t)256 << 20;
    h->max = h->used + mem;
    if (saved_max && saved_max < h->max) h->max = saved_max;
    h->on_fail = &vm->fail;
    h->failed = false;
    int rc = render_run(vm);
    if (rc != 0 && h->failed)
        snprintf(err, errlen, "%s:%d: the render's values pass %zu MiB (its memory limit)", t->name,
                 vm->line, mem >> 20);
    if (rc != 0) { /* no partial output: a failed render leaves none */
        out->text.len = 0;
        out->text.p[0] = 0;
        out->n_gen = out->n_tagged = 0;
    }
    h->on_fail = NULL;
    h->max = saved_max;
    free(vm);
    return rc;
}
