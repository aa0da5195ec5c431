/* jinja_parse_expr.c: the parser's token helpers and expressions, as jinja2 3.1's Parser
 * parses them (jinja2/parser.py). Precedence, loosest first: conditional expressions, or, and,
 * not, comparisons (== != < <= > >= in, not in), + -, ~, * / // %, **, unary - +; postfix
 * (.attr, [item], calls) binds tighter than a filter or a test, which apply to the unary
 * expression before them (-3|abs is 3; 1 + 1 is even is 1 + (1 is even)). Refused: *args and
 * **kwargs in calls, filters and tests the engine does not have, dotted filter names. */
#include <stdarg.h>
#include <stdio.h>

#include "jinja/jinja_parse.h"

void jinja_p_fail(parser *P, const jinja_token *at, const char *fmt, ...) {
    int k = snprintf(P->err, P->errlen, "%s:%d:%d: ", P->t->name, at->line, at->col);
    va_list ap;
    va_start(ap, fmt);
    if (k >= 0 && (size_t)k < P->errlen) vsnprintf(P->err + k, P->errlen - (size_t)k, fmt, ap);
    va_end(ap);
    longjmp(P->fail, 1);
}

/* How jinja2 describes a token in its messages. */
void jinja_p_describe(const jinja_token *t, char *buf, size_t n) {
    switch (t->kind) {
    case JT_EOF:
        snprintf(buf, n, "end of template");
        break;
    case JT_DATA:
        snprintf(buf, n, "template data");
        break;
    case JT_VAR_BEGIN:
        snprintf(buf, n, "begin of print statement");
        break;
    case JT_VAR_END:
        snprintf(buf, n, "end of print statement");
        break;
    case JT_BLOCK_BEGIN:
        snprintf(buf, n, "begin of statement block");
        break;
    case JT_BLOCK_END:
        snprintf(buf, n, "end of statement block");
        break;
    case JT_NAME:
        snprintf(buf, n, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->text);
        break;
    case JT_STRING:
        snprintf(buf, n, "string");
        break;
    case JT_INT:
        snprintf(buf, n, "integer");
        break;
    case JT_FLOAT:
        snprintf(buf, n, "float");
        break;
    default:
        snprintf(buf, n, "operator");
        break;
    }
}

void jinja_p_expect_op(parser *P, jinja_op op, const char *what) {
    if (!skip_op(P, op)) {
        char d[64];
        jinja_p_describe(cur(P), d, sizeof(d));
        FAIL("expected '%s', got %s", what, d);
    }
}
void jinja_p_expect_kind(parser *P, jinja_tok_kind k, const char *what) {
    if (cur(P)->kind != k) {
        char d[64];
        jinja_p_describe(cur(P), d, sizeof(d));
        FAIL("expected %s, got %s", what, d);
    }
    next_tok(P);
}
const char *jinja_p_expect_name(parser *P) {
    const jinja_token *t = cur(P);
    if (t->kind != JT_NAME) {
        char d[64];
        jinja_p_describe(t, d, sizeof(d));
        FAIL("expected a name, got %s", d);
    }
    next_tok(P);
    return t->text;
}

jinja_node *jinja_p_node_new(parser *P, jinja_node_kind kind, const jinja_token *at) {
    jinja_node *n = jinja_talloc(P->t, sizeof(*n));
    memset(n, 0, sizeof(*n));
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* (in the template arena, so that a parse error that jumps out leaks nothing) */
void jinja_p_vec_push(parser *P, node_vec *v, jinja_node *x) {
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 8;
        jinja_node **w = jinja_talloc(P->t, sizeof(*w) * (size_t)cap);
        if (v->n) memcpy(w, v->v, sizeof(*w) * (size_t)v->n);
        v->v = w;
        v->cap = cap;
    }
    v->v[v->n++] = x;
}
jinja_nodes jinja_p_vec_done(node_vec *v) {
    jinja_nodes r = {v->v, v->n};
    *v = (node_vec){0};
    return r;
}

void jinja_p_depth_in(parser *P) {
    if (++P->depth > PARSE_MAX_DEPTH) FAIL("nested more than %d levels deep", PARSE_MAX_DEPTH);
}

static jinja_node *parse_unary(parser *P, bool with_filter);

/* ---- expressions ---- */

static jinja_node *parse_condexpr(parser *P);
static jinja_node *parse_or(parser *P);

jinja_node *jinja_p_expression(parser *P, bool with_condexpr) {
    jinja_p_depth_in(P);
    jinja_node *n = with_condexpr ? parse_condexpr(P) : parse_or(P);
    P->depth--;
    return n;
}

static jinja_node *parse_condexpr(parser *P) {
    jinja_node *expr1 = parse_or(P);
    while (is_name(cur(P), "if")) {
        jinja_node *n = jinja_p_node_new(P, JN_CONDEXPR, next_tok(P));
        n->a = parse_or(P); /* the test */
        n->b = expr1;
        n->c = skip_name(P, "else") ? parse_condexpr(P) : NULL;
        expr1 = n;
    }
    return expr1;
}

static jinja_node *parse_not(parser *P);
static jinja_node *parse_and(parser *P) {
    jinja_node *left = parse_not(P);
    while (is_name(cur(P), "and")) {
        jinja_node *n = jinja_p_node_new(P, JN_AND, next_tok(P));
        n->a = left;
        n->b = parse_not(P);
        left = n;
    }
    return left;
}

static jinja_node *parse_or(parser *P) {
    jinja_node *left = parse_and(P);
    while (is_name(cur(P), "or")) {
        jinja_node *n = jinja_p_node_new(P, JN_OR, next_tok(P));
        n->a = left;
        n->b = parse_and(P);
        left = n;
    }
    return left;
}

static jinja_node *parse_compare(parser *P);
static jinja_node *parse_not(parser *P) {
    if (is_name(cur(P), "not")) {
        jinja_node *n = jinja_p_node_new(P, JN_NOT, next_tok(P));
        jinja_p_depth_in(P);
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

static jinja_node *parse_math1(parser *P);
static jinja_node *parse_compare(parser *P) {
    const jinja_token *at = cur(P);
    jinja_node *expr = parse_math1(P);
    node_vec args = {0};
    uint8_t ops[64];
    int n_ops = 0;
    for (;;) {
        const jinja_token *t = cur(P);
        uint8_t op;
        if (t->kind == JT_OP && t->op >= JOP_EQ && t->op <= JOP_LTEQ) {
            op = t->op;
            next_tok(P);
        } else if (is_name(t, "in")) {
            op = JCMP_IN;
            next_tok(P);
        } else if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
            op = JCMP_NOTIN;
            next_tok(P);
            next_tok(P);
        } else {
            break;
        }
        if (n_ops == 64) FAIL("more than 64 chained comparisons");
        if (args.n == 0) jinja_p_vec_push(P, &args, expr);
        ops[n_ops++] = op;
        jinja_p_vec_push(P, &args, parse_math1(P));
    }
    if (!n_ops) return expr;
    jinja_node *n = jinja_p_node_new(P, JN_COMPARE, at);
    n->args = jinja_p_vec_done(&args);
    n->ops = jinja_talloc(P->t, (size_t)n_ops);
    memcpy(n->ops, ops, (size_t)n_ops);
    return n;
}

static jinja_node *binop(parser *P, const jinja_token *at, jinja_op op, jinja_node *a,
                         jinja_node *b) {
    jinja_node *n = jinja_p_node_new(P, JN_BINOP, at);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jinja_node *parse_concat(parser *P);
static jinja_node *parse_math1(parser *P) {
    jinja_node *left = parse_concat(P);
    while (is_op(cur(P), JOP_ADD) || is_op(cur(P), JOP_SUB)) {
        const jinja_token *t = next_tok(P);
        left = binop(P, t, (jinja_op)t->op, left, parse_concat(P));
    }
    return left;
}

static jinja_node *parse_math2(parser *P);
static jinja_node *parse_concat(parser *P) {
    const jinja_token *at = cur(P);
    jinja_node *first = parse_math2(P);
    if (!is_op(cur(P), JOP_TILDE)) return first;
    node_vec args = {0};
    jinja_p_vec_push(P, &args, first);
    while (skip_op(P, JOP_TILDE)) jinja_p_vec_push(P, &args, parse_math2(P));
    jinja_node *n = jinja_p_node_new(P, JN_CONCAT, at);
    n->args = jinja_p_vec_done(&args);
    return n;
}

static jinja_node *parse_pow(parser *P);
static jinja_node *parse_math2(parser *P) {
    jinja_node *left = parse_pow(P);
    for (;;) {
        const jinja_token *t = cur(P);
        if (!(is_op(t, JOP_MUL) || is_op(t, JOP_DIV) || is_op(t, JOP_FLOORDIV) ||
              is_op(t, JOP_MOD)))
            break;
        next_tok(P);
        left = binop(P, t, (jinja_op)t->op, left, parse_pow(P));
    }
    return left;
}

static jinja_node *parse_pow(parser *P) {
    jinja_node *left = parse_unary(P, true);
    while (is_op(cur(P), JOP_POW)) {
        const jinja_token *t = next_tok(P);
        left = binop(P, t, JOP_POW, left, parse_unary(P, true));
    }
    return left;
}

static jinja_node *parse_test(parser *P, jinja_node *node);
static jinja_node *parse_call(parser *P, jinja_node *callee);

static jinja_node *parse_filter_expr(parser *P, jinja_node *node) {
    for (;;) {
        const jinja_token *t = cur(P);
        if (is_op(t, JOP_PIPE))
            node = jinja_p_filter(P, node, false);
        else if (is_name(t, "is"))
            node = parse_test(P, node);
        else if (is_op(t, JOP_LPAREN))
            node = parse_call(P, node);
        else
            break;
    }
    return node;
}

static jinja_node *parse_unary(parser *P, bool with_filter) {
    jinja_p_depth_in(P);
    const jinja_token *t = cur(P);
    jinja_node *node;
    if (is_op(t, JOP_SUB) || is_op(t, JOP_ADD)) {
        next_tok(P);
        node = jinja_p_node_new(P, t->op == JOP_SUB ? JN_NEG : JN_POS, t);
        node->a = parse_unary(P, false);
    } else {
        node = jinja_p_primary(P, false);
    }
    node = jinja_p_postfix(P, node);
    if (with_filter) node = parse_filter_expr(P, node);
    P->depth--;
    return node;
}

static jinja_node *parse_list(parser *P) {
    jinja_node *n = jinja_p_node_new(P, JN_LIST, next_tok(P));
    node_vec items = {0};
    while (!is_op(cur(P), JOP_RBRACKET)) {
        if (items.n) jinja_p_expect_op(P, JOP_COMMA, ",");
        if (is_op(cur(P), JOP_RBRACKET)) break;
        jinja_p_vec_push(P, &items, jinja_p_expression(P, true));
    }
    jinja_p_expect_op(P, JOP_RBRACKET, "]");
    n->args = jinja_p_vec_done(&items);
    return n;
}

static jinja_node *parse_dict(parser *P) {
    jinja_node *n = jinja_p_node_new(P, JN_DICT, next_tok(P));
    node_vec items = {0};
    while (!is_op(cur(P), JOP_RBRACE)) {
        if (items.n) jinja_p_expect_op(P, JOP_COMMA, ",");
        if (is_op(cur(P), JOP_RBRACE)) break;
        jinja_p_vec_push(P, &items, jinja_p_expression(P, true));
        jinja_p_expect_op(P, JOP_COLON, ":");
        jinja_p_vec_push(P, &items, jinja_p_expression(P, true));
    }
    jinja_p_expect_op(P, JOP_RBRACE, "}");
    n->args = jinja_p_vec_done(&items);
    return n;
}

jinja_node *jinja_p_const_node(parser *P, const jinja_token *at, jinja_value v) {
    jinja_node *n = jinja_p_node_new(P, JN_CONST, at);
    n->value = v;
    return n;
}

jinja_node *jinja_p_primary(parser *P, bool with_ns) {
    const jinja_token *t = cur(P);
    if (t->kind == JT_NAME) {
        next_tok(P);
        if (is_name(t, "true") || is_name(t, "True"))
            return jinja_p_const_node(P, t, jinja_bool(true));
        if (is_name(t, "false") || is_name(t, "False"))
            return jinja_p_const_node(P, t, jinja_bool(false));
        if (is_name(t, "none") || is_name(t, "None")) return jinja_p_const_node(P, t, jinja_none());
        if (with_ns && is_op(cur(P), JOP_DOT)) {
            next_tok(P);
            jinja_node *n = jinja_p_node_new(P, JN_NSREF, t);
            n->name = t->text;
            n->attr = jinja_p_expect_name(P);
            return n;
        }
        jinja_node *n = jinja_p_node_new(P, JN_NAME, t);
        n->name = t->text;
        return n;
    }
    if (t->kind == JT_STRING) { /* adjacent literals concatenate */
        jinja_buf b = {0};
        jinja_buf_append(&b, "", 0);
        while (cur(P)->kind == JT_STRING) {
            jinja_buf_append(&b, cur(P)->text, cur(P)->len);
            next_tok(P);
        }
        jinja_value v = {.type = JINJA_STR};
        v.u.s.p = jinja_tstrdup(P->t, b.p, b.len);
        v.u.s.len = b.len;
        jinja_buf_free(&b);
        return jinja_p_const_node(P, t, v);
    }
    if (t->kind == JT_INT || t->kind == JT_FLOAT) {
        next_tok(P);
        return jinja_p_const_node(P, t,
                                  t->kind == JT_INT ? jinja_int(t->ival) : jinja_float(t->fval));
    }
    if (is_op(t, JOP_LPAREN)) {
        next_tok(P);
        jinja_node *n = jinja_p_tuple(P, false, true, NULL, true, false);
        jinja_p_expect_op(P, JOP_RPAREN, ")");
        return n;
    }
    if (is_op(t, JOP_LBRACKET)) return parse_list(P);
    if (is_op(t, JOP_LBRACE)) return parse_dict(P);
    char d[64];
    jinja_p_describe(t, d, sizeof(d));
    FAIL("unexpected %s", d);
}

static bool is_tuple_end(parser *P, const char *extra_end) {
    const jinja_token *t = cur(P);
    if (t->kind == JT_VAR_END || t->kind == JT_BLOCK_END || is_op(t, JOP_RPAREN)) return true;
    return extra_end && is_name(t, extra_end);
}

jinja_node *jinja_p_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end,
                          bool explicit_parens, bool with_ns) {
    const jinja_token *at = cur(P);
    node_vec args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n) jinja_p_expect_op(P, JOP_COMMA, ",");
        if (is_tuple_end(P, extra_end)) break;
        jinja_p_vec_push(P, &args,
                         simplified ? jinja_p_primary(P, with_ns)
                                    : jinja_p_expression(P, with_condexpr));
        if (is_op(cur(P), JOP_COMMA))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (args.n) {
            return args.v[0];
        }
        if (!explicit_parens) {
            char d[64];
            jinja_p_describe(cur(P), d, sizeof(d));
            FAIL("expected an expression, got %s", d);
        }
    }
    jinja_node *n = jinja_p_node_new(P, JN_TUPLE, at);
    n->args = jinja_p_vec_done(&args);
    return n;
}

/* a:b:c inside [ ] (any part may be missing), or a plain expression. */
static jinja_node *parse_subscribed(parser *P) {
    const jinja_token *at = cur(P);
    jinja_node *parts[3] = {NULL, NULL, NULL};
    if (!is_op(cur(P), JOP_COLON)) {
        jinja_node *e = jinja_p_expression(P, true);
        if (!is_op(cur(P), JOP_COLON)) return e;
        parts[0] = e;
    }
    next_tok(P); /* the colon */
    if (!is_op(cur(P), JOP_COLON) && !is_op(cur(P), JOP_RBRACKET) && !is_op(cur(P), JOP_COMMA))
        parts[1] = jinja_p_expression(P, true);
    if (skip_op(P, JOP_COLON))
        if (!is_op(cur(P), JOP_RBRACKET) && !is_op(cur(P), JOP_COMMA))
            parts[2] = jinja_p_expression(P, true);
    jinja_node *n = jinja_p_node_new(P, JN_SLICE, at);
    n->a = parts[0];
    n->b = parts[1];
    n->c = parts[2];
    return n;
}

static jinja_node *parse_subscript(parser *P, jinja_node *node) {
    const jinja_token *t = next_tok(P);
    if (t->kind == JT_OP && t->op == JOP_DOT) {
        const jinja_token *a = next_tok(P);
        if (a->kind == JT_NAME) {
            jinja_node *n = jinja_p_node_new(P, JN_GETATTR, t);
            n->a = node;
            n->name = a->text;
            return n;
        }
        if (a->kind != JT_INT) jinja_p_fail(P, a, "expected a name or a number after '.'");
        jinja_node *n = jinja_p_node_new(P, JN_GETITEM, t);
        n->a = node;
        n->b = jinja_p_const_node(P, a, jinja_int(a->ival));
        return n;
    }
    node_vec args = {0};
    while (!is_op(cur(P), JOP_RBRACKET)) {
        if (args.n) jinja_p_expect_op(P, JOP_COMMA, ",");
        jinja_p_vec_push(P, &args, parse_subscribed(P));
    }
    jinja_p_expect_op(P, JOP_RBRACKET, "]");
    jinja_node *n = jinja_p_node_new(P, JN_GETITEM, t);
    n->a = node;
    if (args.n == 1) {
        n->b = args.v[0];
    } else {
        n->b = jinja_p_node_new(P, JN_TUPLE, t);
        n->b->args = jinja_p_vec_done(&args);
    }
    return n;
}

jinja_node *jinja_p_postfix(parser *P, jinja_node *node) {
    for (;;) {
        const jinja_token *t = cur(P);
        if (is_op(t, JOP_DOT) || is_op(t, JOP_LBRACKET))
            node = parse_subscript(P, node);
        else if (is_op(t, JOP_LPAREN))
            node = parse_call(P, node);
        else
            break;
    }
    return node;
}

/* (args, name=kwargs) into n; *args and **kwargs refused. */
static void parse_call_args(parser *P, jinja_node *n) {
    const jinja_token *open = cur(P);
    jinja_p_expect_op(P, JOP_LPAREN, "(");
    node_vec args = {0}, kwv = {0};
    const char *names[64];
    int n_kw = 0;
    bool comma = false;
    while (!is_op(cur(P), JOP_RPAREN)) {
        if (comma) {
            jinja_p_expect_op(P, JOP_COMMA, ",");
            if (is_op(cur(P), JOP_RPAREN)) break;
        }
        if (is_op(cur(P), JOP_MUL) || is_op(cur(P), JOP_POW))
            FAIL("*args and **kwargs in a call are not supported");
        if (cur(P)->kind == JT_NAME && is_op(peek(P, 1), JOP_ASSIGN)) {
            if (n_kw == 64) FAIL("more than 64 keyword arguments");
            names[n_kw++] = cur(P)->text;
            next_tok(P);
            next_tok(P);
            jinja_p_vec_push(P, &kwv, jinja_p_expression(P, true));
        } else {
            if (n_kw) jinja_p_fail(P, open, "invalid syntax for function call expression");
            jinja_p_vec_push(P, &args, jinja_p_expression(P, true));
        }
        comma = true;
    }
    jinja_p_expect_op(P, JOP_RPAREN, ")");
    n->args = jinja_p_vec_done(&args);
    n->kw_values = jinja_p_vec_done(&kwv);
    if (n_kw) {
        n->kw_names = jinja_talloc(P->t, sizeof(char *) * (size_t)n_kw);
        memcpy(n->kw_names, names, sizeof(char *) * (size_t)n_kw);
    }
}

static jinja_node *parse_call(parser *P, jinja_node *callee) {
    jinja_node *n = jinja_p_node_new(P, JN_CALL, cur(P));
    n->a = callee;
    parse_call_args(P, n);
    return n;
}

static const char *dotted_name(parser *P, const jinja_token **at) {
    *at = cur(P);
    const char *name = jinja_p_expect_name(P);
    if (is_op(cur(P), JOP_DOT))
        jinja_p_fail(P, *at, "dotted filter and test names are not supported");
    return name;
}

jinja_node *jinja_p_filter(parser *P, jinja_node *node, bool start_inline) {
    while (is_op(cur(P), JOP_PIPE) || start_inline) {
        if (!start_inline) next_tok(P);
        const jinja_token *at;
        const char *name = dotted_name(P, &at);
        jinja_node *n = jinja_p_node_new(P, JN_FILTER, at);
        n->name = name;
        n->a = node;
        n->builtin = jinja_filter_find(name);
        if (n->builtin < 0) jinja_p_fail(P, at, "no filter named '%s' (not supported)", name);
        if (is_op(cur(P), JOP_LPAREN)) parse_call_args(P, n);
        node = n;
        start_inline = false;
    }
    return node;
}

static jinja_node *parse_test(parser *P, jinja_node *node) {
    const jinja_token *is_tok = next_tok(P);
    bool negated = skip_name(P, "not");
    const jinja_token *at;
    const char *name = dotted_name(P, &at);
    jinja_node *n = jinja_p_node_new(P, JN_TEST, is_tok);
    n->name = name;
    n->a = node;
    n->builtin = jinja_test_find(name);
    if (n->builtin < 0) jinja_p_fail(P, at, "no test named '%s' (not supported)", name);
    const jinja_token *t = cur(P);
    if (is_op(t, JOP_LPAREN)) {
        parse_call_args(P, n);
    } else if ((t->kind == JT_NAME || t->kind == JT_STRING || t->kind == JT_INT ||
                t->kind == JT_FLOAT || is_op(t, JOP_LBRACKET) || is_op(t, JOP_LBRACE)) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        if (is_name(t, "is")) FAIL("you cannot chain multiple tests with is");
        node_vec args = {0};
        jinja_p_vec_push(P, &args, jinja_p_postfix(P, jinja_p_primary(P, false)));
        n->args = jinja_p_vec_done(&args);
    }
    if (!negated) return n;
    jinja_node *no = jinja_p_node_new(P, JN_NOT, is_tok);
    no->a = n;
    return no;
}
