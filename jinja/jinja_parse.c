/* jinja_parse.c: statements, as jinja2 3.1's Parser parses them: if / elif / else, for (with
 * an if filter and else), set (also the block form and ns.attr), macro, with, filter blocks,
 * print, {% generation %}, break and continue. Refused when the template is loaded, with its
 * place: {% block %}, {% extends %}, {% include %}, {% import %}, {% from %}, {% call %},
 * {% autoescape %}, recursive loops, break or continue outside a loop, {% generation %} inside a
 * macro or another generation block. Expressions: jinja/jinja_parse_expr.c. */
#include <stdio.h>

#include "jinja/jinja_parse.h"

/* ---- statements ---- */

static bool name_in(const jinja_token *t, const char *const *names) {
    for (int i = 0; names && names[i]; i++)
        if (is_name(t, names[i])) return true;
    return false;
}

/* The body of a block statement: its %}, then statements up to one of end_names (the current
 * token is that name after the call, or after it with drop_needle). */
static jinja_nodes parse_statements(parser *P, const char *const *end_names, bool drop_needle) {
    skip_op(P, JOP_COLON);
    jinja_p_expect_kind(P, JT_BLOCK_END, "end of statement block");
    jinja_nodes body = jinja_p_subparse(P, end_names);
    if (cur(P)->kind == JT_EOF) {
        char want[128] = "";
        for (int i = 0; end_names[i]; i++)
            snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s'%s'", i ? " or " : "",
                     end_names[i]);
        FAIL("unexpected end of template: jinja was looking for %s", want);
    }
    if (drop_needle) next_tok(P);
    return body;
}

static void check_target(parser *P, jinja_node *n, bool allow_ns) {
    if (n->kind == JN_NAME) {
        static const char *reserved[] = {"true", "false", "none", "True", "False", "None", NULL};
        for (int i = 0; reserved[i]; i++)
            if (!strcmp(n->name, reserved[i]))
                jinja_p_fail(P, &(jinja_token){.line = n->line, .col = n->col},
                             "cannot assign to '%s'", n->name);
        return;
    }
    if (n->kind == JN_NSREF && allow_ns) return;
    if (n->kind == JN_TUPLE) {
        for (int i = 0; i < n->args.n; i++) check_target(P, n->args.v[i], allow_ns);
        return;
    }
    jinja_p_fail(P, &(jinja_token){.line = n->line, .col = n->col}, "cannot assign to this");
}

static jinja_node *parse_assign_target(parser *P, const char *extra_end, bool with_ns) {
    jinja_node *n = jinja_p_tuple(P, true, true, extra_end, false, with_ns);
    check_target(P, n, with_ns);
    return n;
}

static jinja_node *parse_for(parser *P, const jinja_token *at) {
    jinja_node *n = jinja_p_node_new(P, JN_FOR, at);
    n->target = parse_assign_target(P, "in", false);
    if (!skip_name(P, "in")) FAIL("expected 'in' in the for statement");
    n->a = jinja_p_tuple(P, false, false, "recursive", false, false);
    if (skip_name(P, "if")) n->b = jinja_p_expression(P, true);
    if (is_name(cur(P), "recursive")) FAIL("recursive for loops are not supported");
    static const char *const ends[] = {"endfor", "else", NULL};
    static const char *const endfor[] = {"endfor", NULL};
    P->loops++;
    n->body = parse_statements(P, ends, false);
    P->loops--;
    if (is_name(next_tok(P), "else")) n->orelse = parse_statements(P, endfor, true);
    return n;
}

static jinja_node *parse_if(parser *P, const jinja_token *at) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const endif[] = {"endif", NULL};
    jinja_node *top = jinja_p_node_new(P, JN_IF, at), *n = top;
    for (;;) {
        n->a = jinja_p_tuple(P, false, false, NULL, false, false);
        n->body = parse_statements(P, ends, false);
        const jinja_token *t = next_tok(P);
        if (is_name(t, "elif")) {
            jinja_node *e = jinja_p_node_new(P, JN_IF, t);
            node_vec one = {0};
            jinja_p_vec_push(P, &one, e);
            n->orelse = jinja_p_vec_done(&one);
            n = e;
            continue;
        }
        if (is_name(t, "else")) n->orelse = parse_statements(P, endif, true);
        break;
    }
    return top;
}

static jinja_node *parse_set(parser *P, const jinja_token *at) {
    jinja_node *target = parse_assign_target(P, NULL, true);
    if (skip_op(P, JOP_ASSIGN)) {
        jinja_node *n = jinja_p_node_new(P, JN_SET, at);
        n->target = target;
        n->a = jinja_p_tuple(P, false, true, NULL, false, false);
        return n;
    }
    static const char *const ends[] = {"endset", NULL};
    jinja_node *n = jinja_p_node_new(P, JN_SETBLOCK, at);
    n->target = target;
    n->a = jinja_p_filter(P, NULL, false);
    n->body = parse_statements(P, ends, true);
    return n;
}

/* Whether the nodes read name `name` (a macro's varargs / kwargs). */
static bool reads_name(const jinja_node *n, const char *name);
static bool reads_any(const jinja_nodes *v, const char *name) {
    for (int i = 0; i < v->n; i++)
        if (reads_name(v->v[i], name)) return true;
    return false;
}
static bool reads_name(const jinja_node *n, const char *name) {
    if (!n) return false;
    if (n->kind == JN_NAME && !strcmp(n->name, name)) return true;
    if (n->kind == JN_MACRO) return false; /* a nested macro has its own */
    return reads_name(n->a, name) || reads_name(n->b, name) || reads_name(n->c, name) ||
           reads_any(&n->args, name) || reads_any(&n->kw_values, name) ||
           reads_any(&n->body, name) || reads_any(&n->orelse, name);
}

static jinja_node *parse_macro(parser *P, const jinja_token *at) {
    jinja_node *n = jinja_p_node_new(P, JN_MACRO, at);
    n->name = jinja_p_expect_name(P);
    jinja_p_expect_op(P, JOP_LPAREN, "(");
    const char *params[64];
    jinja_node *defaults[64];
    int k = 0;
    bool any_default = false;
    while (!is_op(cur(P), JOP_RPAREN)) {
        if (k) jinja_p_expect_op(P, JOP_COMMA, ",");
        if (k == 64) FAIL("more than 64 macro parameters");
        params[k] = jinja_p_expect_name(P);
        defaults[k] = NULL;
        if (skip_op(P, JOP_ASSIGN)) {
            defaults[k] = jinja_p_expression(P, true);
            any_default = true;
        } else if (any_default) {
            FAIL("non-default argument follows default argument");
        }
        k++;
    }
    jinja_p_expect_op(P, JOP_RPAREN, ")");
    n->n_params = k;
    n->params = jinja_talloc(P->t, sizeof(char *) * (size_t)(k ? k : 1));
    n->defaults = jinja_talloc(P->t, sizeof(jinja_node *) * (size_t)(k ? k : 1));
    memcpy(n->params, params, sizeof(char *) * (size_t)k);
    memcpy(n->defaults, defaults, sizeof(jinja_node *) * (size_t)k);
    static const char *const ends[] = {"endmacro", NULL};
    const int loops = P->loops;
    P->loops = 0;
    P->macros++;
    n->body = parse_statements(P, ends, true);
    P->macros--;
    P->loops = loops;
    n->uses_varargs = reads_any(&n->body, "varargs");
    n->uses_kwargs = reads_any(&n->body, "kwargs");
    if (reads_any(&n->body, "caller"))
        jinja_p_fail(P, at, "macros that use caller are not supported");
    return n;
}

static jinja_node *parse_with(parser *P, const jinja_token *at) {
    jinja_node *n = jinja_p_node_new(P, JN_WITH, at);
    node_vec targets = {0}, values = {0};
    while (cur(P)->kind != JT_BLOCK_END) {
        if (targets.n) jinja_p_expect_op(P, JOP_COMMA, ",");
        jinja_node *tg = jinja_p_primary(P, false);
        check_target(P, tg, false);
        jinja_p_vec_push(P, &targets, tg);
        jinja_p_expect_op(P, JOP_ASSIGN, "=");
        jinja_p_vec_push(P, &values, jinja_p_expression(P, true));
    }
    n->args = jinja_p_vec_done(&targets);
    n->kw_values = jinja_p_vec_done(&values);
    static const char *const ends[] = {"endwith", NULL};
    n->body = parse_statements(P, ends, true);
    return n;
}

/* One statement after {%, its nodes appended to out. */
static void parse_statement(parser *P, node_vec *out) {
    const jinja_token *at = cur(P);
    if (at->kind != JT_NAME) FAIL("tag name expected");
    next_tok(P);
    jinja_p_depth_in(P);
    if (is_name(at, "for")) {
        jinja_p_vec_push(P, out, parse_for(P, at));
    } else if (is_name(at, "if")) {
        jinja_p_vec_push(P, out, parse_if(P, at));
    } else if (is_name(at, "set")) {
        jinja_p_vec_push(P, out, parse_set(P, at));
    } else if (is_name(at, "macro")) {
        jinja_p_vec_push(P, out, parse_macro(P, at));
    } else if (is_name(at, "with")) {
        jinja_p_vec_push(P, out, parse_with(P, at));
    } else if (is_name(at, "filter")) {
        jinja_node *n = jinja_p_node_new(P, JN_FILTERBLOCK, at);
        n->a = jinja_p_filter(P, NULL, true);
        static const char *const ends[] = {"endfilter", NULL};
        n->body = parse_statements(P, ends, true);
        jinja_p_vec_push(P, out, n);
    } else if (is_name(at, "print")) {
        while (cur(P)->kind != JT_BLOCK_END) {
            if (out->n && out->v[out->n - 1]->kind == JN_OUTPUT &&
                out->v[out->n - 1]->line == at->line)
                jinja_p_expect_op(P, JOP_COMMA, ",");
            jinja_node *o = jinja_p_node_new(P, JN_OUTPUT, at);
            o->a = jinja_p_expression(P, true);
            jinja_p_vec_push(P, out, o);
        }
    } else if (is_name(at, "generation")) {
        if (P->macros) jinja_p_fail(P, at, "{%% generation %%} inside a macro is not supported");
        if (P->generations)
            jinja_p_fail(P, at, "nested {%% generation %%} blocks are not supported");
        jinja_node *n = jinja_p_node_new(P, JN_GENERATION, at);
        static const char *const ends[] = {"endgeneration", NULL};
        P->generations++;
        n->body = parse_statements(P, ends, true);
        P->generations--;
        P->t->has_generation = true;
        jinja_p_vec_push(P, out, n);
    } else if (is_name(at, "break") || is_name(at, "continue")) {
        if (!P->loops) jinja_p_fail(P, at, "'%.*s' outside a for loop", (int)at->len, at->text);
        jinja_p_vec_push(P, out,
                         jinja_p_node_new(P, is_name(at, "break") ? JN_BREAK : JN_CONTINUE, at));
    } else {
        static const char *const unsupported[] = {"block", "extends", "include",    "import",
                                                  "from",  "call",    "autoescape", "do",
                                                  "trans", NULL};
        if (name_in(at, unsupported))
            jinja_p_fail(P, at, "{%% %.*s %%} is not supported", (int)at->len, at->text);
        jinja_p_fail(P, at, "unknown or unexpected tag '%.*s'", (int)(at->len > 40 ? 40 : at->len),
                     at->text);
    }
    P->depth--;
}

jinja_nodes jinja_p_subparse(parser *P, const char *const *end_names) {
    node_vec body = {0};
    while (cur(P)->kind != JT_EOF) {
        const jinja_token *t = cur(P);
        if (t->kind == JT_DATA) {
            jinja_node *n = jinja_p_node_new(P, JN_DATA, t);
            n->value.type = JINJA_STR;
            n->value.u.s.p = t->text;
            n->value.u.s.len = t->len;
            jinja_p_vec_push(P, &body, n);
            next_tok(P);
        } else if (t->kind == JT_VAR_BEGIN) {
            next_tok(P);
            jinja_node *n = jinja_p_node_new(P, JN_OUTPUT, t);
            n->a = jinja_p_tuple(P, false, true, NULL, false, false);
            jinja_p_expect_kind(P, JT_VAR_END, "end of print statement");
            jinja_p_vec_push(P, &body, n);
        } else if (t->kind == JT_BLOCK_BEGIN) {
            next_tok(P);
            if (end_names && name_in(cur(P), end_names)) return jinja_p_vec_done(&body);
            parse_statement(P, &body);
            jinja_p_expect_kind(P, JT_BLOCK_END, "end of statement block");
        } else {
            char d[64];
            jinja_p_describe(t, d, sizeof(d));
            FAIL("unexpected %s", d);
        }
    }
    return jinja_p_vec_done(&body);
}

int jinja_parse(struct jinja_template *t, const jinja_tokens *toks, char *err, size_t errlen) {
    parser P = {.t = t, .tok = toks->t, .n = toks->n, .err = err, .errlen = errlen};
    if (setjmp(P.fail)) return -1;
    t->body = jinja_p_subparse(&P, NULL);
    return 0;
}
