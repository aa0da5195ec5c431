/* jinja_parse.h: what the parser's two files share (jinja/jinja_parse_expr.c: the token helpers
 * and expressions; jinja/jinja_parse.c: statements). Errors jump out through P->fail. */
#pragma once
#include <setjmp.h>
#include <string.h>

#include "jinja/jinja_ast.h"

#define PARSE_MAX_DEPTH 200

typedef struct {
    struct jinja_template *t;
    const jinja_token *tok;
    int i, n;
    char *err;
    size_t errlen;
    jmp_buf fail;
    int depth;       /* nesting of statements and expressions */
    int loops;       /* enclosing for loops (break / continue) */
    int macros;      /* enclosing macros ({% generation %}) */
    int generations; /* enclosing {% generation %} blocks */
} parser;

/* A growing list of nodes, in the template arena (a parse error that jumps out leaks nothing). */
typedef struct {
    jinja_node **v;
    int n, cap;
} node_vec;

static inline const jinja_token *cur(parser *P) { return &P->tok[P->i]; }

static inline const jinja_token *peek(parser *P, int k) {
    return &P->tok[P->i + k < P->n ? P->i + k : P->n - 1];
}

static inline const jinja_token *next_tok(parser *P) {
    const jinja_token *t = cur(P);
    if (P->i < P->n - 1) P->i++;
    return t;
}

static inline bool is_op(const jinja_token *t, jinja_op op) {
    return t->kind == JT_OP && t->op == op;
}

static inline bool is_name(const jinja_token *t, const char *name) {
    return t->kind == JT_NAME && t->len == strlen(name) && !memcmp(t->text, name, t->len);
}

static inline bool skip_op(parser *P, jinja_op op) {
    if (!is_op(cur(P), op)) return false;
    next_tok(P);
    return true;
}

static inline bool skip_name(parser *P, const char *name) {
    if (!is_name(cur(P), name)) return false;
    next_tok(P);
    return true;
}

/* "name:line:col: message" into P->err and a jump out of the parse. */
void jinja_p_fail(parser *P, const jinja_token *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define FAIL(...) jinja_p_fail(P, cur(P), __VA_ARGS__)
/* How jinja2 describes a token in its messages. */
void jinja_p_describe(const jinja_token *t, char *buf, size_t n);
void jinja_p_expect_op(parser *P, jinja_op op, const char *what);
void jinja_p_expect_kind(parser *P, jinja_tok_kind k, const char *what);
const char *jinja_p_expect_name(parser *P);
jinja_node *jinja_p_node_new(parser *P, jinja_node_kind kind, const jinja_token *at);
jinja_node *jinja_p_const_node(parser *P, const jinja_token *at, jinja_value v);
void jinja_p_vec_push(parser *P, node_vec *v, jinja_node *x);
jinja_nodes jinja_p_vec_done(node_vec *v);
/* One level deeper (statements and expressions): refused past PARSE_MAX_DEPTH. */
void jinja_p_depth_in(parser *P);

jinja_node *jinja_p_expression(parser *P, bool with_condexpr);
/* jinja2's parse_tuple: a tuple when commas separate expressions (simplified: names and
 * literals only; with_ns: ns.attr too), else the one expression. */
jinja_node *jinja_p_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end,
                          bool explicit_parens, bool with_ns);
jinja_node *jinja_p_primary(parser *P, bool with_ns);
jinja_node *jinja_p_postfix(parser *P, jinja_node *node);
/* The filters after node (start_inline: the first has no '|' before it, {% filter %}). */
jinja_node *jinja_p_filter(parser *P, jinja_node *node, bool start_inline);
/* Statements up to one of end_names (NULL: the template's end). */
jinja_nodes jinja_p_subparse(parser *P, const char *const *end_names);
