/* jinja_vm.h: the running state of one render, shared by the evaluator (jinja_eval.c,
 * jinja_expr.c) and the builtins (jinja_filters.c, jinja_tests.c, jinja_methods.c). Errors
 * jump out of the render (jinja_vm_fail); every value is made in the render's heap. */
#pragma once
#include "jinja/jinja_ast.h"

/* A variable scope: the template's top level, one for-loop iteration, a macro call, a with
 * block. Lookups walk to the parent, then the render's variables, then the globals. */
typedef struct jinja_scope {
    struct jinja_scope *parent;
    const char **names;
    jinja_value *vals;
    int n, cap;
} jinja_scope;

/* What a JINJA_CALLABLE or JINJA_LOOP value holds. */
typedef enum {
    JOBJ_MACRO,        /* node, closure */
    JOBJ_GLOBAL,       /* id */
    JOBJ_METHOD,       /* self.name (a str, dict or list method), id */
    JOBJ_LOOP,         /* the loop variable */
    JOBJ_LOOP_CYCLE,   /* loop.cycle: loop */
    JOBJ_LOOP_CHANGED, /* loop.changed: loop */
} jinja_obj_kind;

struct jinja_obj {
    uint8_t kind;
    int id;           /* JOBJ_GLOBAL, JOBJ_METHOD: which one */
    const char *name; /* for messages */
    const jinja_node *macro;
    jinja_scope *closure;
    jinja_value self; /* JOBJ_METHOD: the receiver */
    struct jinja_obj *loop;
    /* JOBJ_LOOP */
    const jinja_list *items; /* the iterated items (after an if filter) */
    int64_t index0;
    bool changed_set; /* loop.changed has a last value */
    jinja_value changed_last;
};

typedef struct jinja_vm {
    const jinja_template *t;
    jinja_heap *h;
    jmp_buf fail;
    char *err;
    size_t errlen;
    int line; /* of the node running now (errors) */
    jinja_value vars;
    jinja_scope *top;
    jinja_output *main;
    jinja_buf *out; /* main->text; captured output goes past its end (jinja_eval.c) */
    int captures;   /* > 0: a macro, set block or filter block is capturing output */
    size_t max_output;
    int64_t steps, max_steps;
    int depth, max_depth;
    const jinja_value *track;
    int n_track;
    int tag; /* the innermost tracked iteration's tag, -1: none */
    double now;
} jinja_vm;

/* Ends the render: "template:line: message". */
void jinja_vm_fail(jinja_vm *vm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
/* Raises the error an undefined value carries when it is used ("'x' is undefined", "'dict
 * object' has no attribute 'y'", or the sandbox's refusal). */
void jinja_vm_undefined_fail(jinja_vm *vm, jinja_value u) __attribute__((noreturn));
/* An undefined value whose error message is msg (printf), as jinja2's Undefined(hint=...). */
jinja_value jinja_vm_undef(jinja_vm *vm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* One more loop iteration or call: ends the render beyond max_steps. */
void jinja_vm_step(jinja_vm *vm);

/* A string value of buf's bytes (copied into the heap). */
jinja_value jinja_vm_str(jinja_vm *vm, const char *s, size_t n);
/* Python's str(v) as a string value (a string is itself). */
jinja_value jinja_vm_to_str(jinja_vm *vm, jinja_value v);
/* A new list of the given sequence kind with room for n items. */
jinja_value jinja_vm_list(jinja_vm *vm, int64_t n, jinja_seq_kind kind);
void jinja_vm_push(jinja_vm *vm, jinja_value list, jinja_value v);

/* Python's iter(v) materialised: the items of a list / tuple / view / range, a dict's keys, a
 * string's characters; undefined gives none; anything else is the TypeError jinja2 raises. */
jinja_value jinja_vm_iterate(jinja_vm *vm, jinja_value v);

/* The sandboxed environment's getattr(obj, name) and getitem(obj, key) (jinja2/sandbox.py). */
jinja_value jinja_vm_getattr(jinja_vm *vm, jinja_value obj, const char *name);
jinja_value jinja_vm_getitem(jinja_vm *vm, jinja_value obj, jinja_value key);

/* Call arguments, evaluated. */
typedef struct {
    jinja_value *pos;
    int n;
    const char **kw;
    jinja_value *kwv;
    int n_kw;
} jinja_args;

/* Calls a callable value (a macro, a global, a bound method). */
jinja_value jinja_vm_call(jinja_vm *vm, jinja_value f, const jinja_args *a);
/* Filter / test number `id` of the tables (jinja_filter_find / jinja_test_find) on x. */
jinja_value jinja_vm_filter(jinja_vm *vm, int id, jinja_value x, const jinja_args *a);
bool jinja_vm_test(jinja_vm *vm, int id, jinja_value x, const jinja_args *a);

/* A bound method of a str, dict or list: name's method, or false when Python's type has no
 * attribute of that name (jinja_methods.c). Methods Python has and the engine does not
 * implement, and the sandbox's unsafe (mutating) ones, are returned too: calling them fails. */
bool jinja_vm_method(jinja_vm *vm, jinja_value self, const char *name, jinja_value *out);
jinja_value jinja_vm_call_method(jinja_vm *vm, const struct jinja_obj *m, const jinja_args *a);

/* The globals: range, dict, namespace, raise_exception, strftime_now (lipsum, cycler and joiner
 * are known and refused when called). false when name is none of them. */
bool jinja_vm_global(jinja_vm *vm, const char *name, jinja_value *out);
jinja_value jinja_vm_call_global(jinja_vm *vm, const struct jinja_obj *g, const jinja_args *a);

/* Argument helpers of the builtins: the i-th positional or the keyword `kw` (NULL: none),
 * or NULL when neither was given. Extra arguments a builtin does not take are errors. */
const jinja_value *jinja_arg(const jinja_args *a, int i, const char *kw);
void jinja_args_check(jinja_vm *vm, const jinja_args *a, int max_pos, const char *const *kws,
                      const char *what);

/* Python's a op b for the arithmetic operators (JOP_ADD ...), as jinja_eval does it. */
jinja_value jinja_vm_binop(jinja_vm *vm, int op, jinja_value a, jinja_value b);
/* Python's s.replace(old, new, count) (count < 0: all) and s.splitlines(keepends). */
jinja_value jinja_vm_str_replace(jinja_vm *vm, jinja_value s, jinja_value old, jinja_value new,
                                 int64_t count);
jinja_value jinja_vm_splitlines(jinja_vm *vm, jinja_value s, bool keepends);
/* Python's `needle in hay` (a substring, an item, a dict key; TypeError where Python raises). */
bool jinja_vm_contains(jinja_vm *vm, jinja_value needle, jinja_value hay);
/* Python's a < b for sorting (TypeError as jinja2 raises it) and equality. */
bool jinja_vm_less(jinja_vm *vm, jinja_value a, jinja_value b);

/* ---- the evaluator (jinja_eval.c, jinja_expr.c) ---- */

/* The value of expression n in scope s. */
jinja_value jinja_eval(jinja_vm *vm, const jinja_node *n, jinja_scope *s);
/* The arguments of a call, filter or test node n (positional and keyword), evaluated in s. */
jinja_args jinja_eval_args(jinja_vm *vm, const jinja_node *n, jinja_scope *s);
/* Name lookup through s, the render's variables and the globals (undefined when absent). */
jinja_value jinja_scope_get(jinja_vm *vm, jinja_scope *s, const char *name);
void jinja_scope_set(jinja_vm *vm, jinja_scope *s, const char *name, jinja_value v);
/* Calls macro m with the arguments (its output as a string). */
jinja_value jinja_macro_call(jinja_vm *vm, const struct jinja_obj *m, const jinja_args *a);
/* Assigns v to a target (a name, a tuple of names unpacking v, a namespace attribute). */
void jinja_assign(jinja_vm *vm, const jinja_node *target, jinja_value v, jinja_scope *s);
