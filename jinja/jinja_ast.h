/* jinja_ast.h: the parsed form of a template (jinja/jinja_parse.c builds it from the tokens of
 * jinja/jinja_lex.c; jinja/jinja_eval.c runs it). Node kinds follow jinja2's nodes module;
 * what jinja2 has and the engine does not (template inheritance, includes, imports, call
 * blocks, recursive loops, *args / **kwargs in calls) is refused by the parser. */
#pragma once
#include "jinja/jinja_internal.h"

/* ---- tokens ---- */

typedef enum {
    JT_EOF = 0,
    JT_DATA,        /* template text, already whitespace-controlled */
    JT_VAR_BEGIN,   /* {{ */
    JT_VAR_END,     /* }} */
    JT_BLOCK_BEGIN, /* {% */
    JT_BLOCK_END,   /* %} */
    JT_NAME,
    JT_STRING, /* decoded value in text/len */
    JT_INT,    /* ival */
    JT_FLOAT,  /* fval */
    JT_OP,     /* one of the operators below, in op */
} jinja_tok_kind;

typedef enum {
    JOP_ADD = 1,
    JOP_SUB,
    JOP_DIV,
    JOP_FLOORDIV,
    JOP_MUL,
    JOP_MOD,
    JOP_POW,
    JOP_TILDE,
    JOP_LBRACKET,
    JOP_RBRACKET,
    JOP_LPAREN,
    JOP_RPAREN,
    JOP_LBRACE,
    JOP_RBRACE,
    JOP_EQ,
    JOP_NE,
    JOP_GT,
    JOP_GTEQ,
    JOP_LT,
    JOP_LTEQ,
    JOP_ASSIGN,
    JOP_DOT,
    JOP_COLON,
    JOP_PIPE,
    JOP_COMMA,
    JOP_SEMICOLON,
} jinja_op;

typedef struct {
    uint8_t kind; /* jinja_tok_kind */
    uint8_t op;   /* jinja_op */
    int line, col;
    const char *text; /* JT_DATA, JT_NAME, JT_STRING: in the template's own storage */
    size_t len;
    int64_t ival;
    double fval;
} jinja_token;

typedef struct {
    jinja_token *t;
    int n, cap;
} jinja_tokens;

/* Splits src into tokens as jinja2's lexer does with trim_blocks and lstrip_blocks (newlines
 * normalised to \n, one trailing newline dropped, {% raw %} text as data). Token texts are
 * copied into t's arena. 0, or -1 with "name:line:col: reason" in err. */
struct jinja_template;
int jinja_lex(struct jinja_template *t, const char *src, size_t len, jinja_tokens *out, char *err,
              size_t errlen);

/* ---- nodes ---- */

typedef enum {
    /* expressions */
    JN_CONST,    /* value */
    JN_NAME,     /* name */
    JN_GETATTR,  /* a.name */
    JN_GETITEM,  /* a[b] (b may be JN_SLICE) */
    JN_SLICE,    /* a:b:c, any of them NULL */
    JN_CALL,     /* a(args, name=kwargs) */
    JN_FILTER,   /* a | name(args) (a NULL in a filter block) */
    JN_TEST,     /* a is name(args) */
    JN_NOT,      /* not a */
    JN_NEG,      /* -a */
    JN_POS,      /* +a */
    JN_BINOP,    /* a op b: JOP_ADD, _SUB, _MUL, _DIV, _FLOORDIV, _MOD, _POW */
    JN_AND,      /* a and b */
    JN_OR,       /* a or b */
    JN_CONCAT,   /* a ~ b ~ ... (args) */
    JN_COMPARE,  /* a op1 b op2 c ...: args[0] the first, ops[i] with args[i + 1] */
    JN_CONDEXPR, /* b if a else c (c NULL: undefined) */
    JN_LIST,     /* [args] */
    JN_TUPLE,    /* (args) */
    JN_DICT,     /* {args[2i]: args[2i + 1]} */
    JN_NSREF,    /* name.attr as an assignment target */
    /* statements */
    JN_DATA,        /* template text */
    JN_OUTPUT,      /* {{ a }} */
    JN_IF,          /* if a: body else: orelse */
    JN_FOR,         /* for target in a if b: body else: orelse */
    JN_SET,         /* set target = a */
    JN_SETBLOCK,    /* set target | filter: body */
    JN_MACRO,       /* macro name(params = defaults): body */
    JN_FILTERBLOCK, /* filter a: body (a: the JN_FILTER chain, innermost a NULL) */
    JN_WITH,        /* with targets = values: body */
    JN_GENERATION,  /* generation: body */
    JN_BREAK,
    JN_CONTINUE,
} jinja_node_kind;

/* comparison operators of JN_COMPARE (besides JOP_EQ .. JOP_LTEQ) */
#define JCMP_IN    100
#define JCMP_NOTIN 101

typedef struct jinja_node jinja_node;
typedef struct {
    jinja_node **v;
    int n;
} jinja_nodes;

struct jinja_node {
    uint8_t kind; /* jinja_node_kind */
    uint8_t op;   /* JN_BINOP: jinja_op */
    int line, col;
    jinja_value value; /* JN_CONST */
    const char *name;  /* JN_NAME, _GETATTR, _FILTER, _TEST, _NSREF (the name), _MACRO */
    const char *attr;  /* JN_NSREF */
    jinja_node *a, *b, *c;
    jinja_nodes args;      /* call / filter / test arguments; list, tuple, dict, concat items */
    const char **kw_names; /* keyword arguments: kw_names[i] = kw_values.v[i] */
    jinja_nodes kw_values;
    uint8_t *ops; /* JN_COMPARE: the operator of each comparison */
    jinja_nodes body, orelse;
    /* JN_FOR and JN_SET: the target (JN_NAME, JN_TUPLE of names, JN_NSREF); JN_WITH: targets
     * in args, values in kw_values */
    jinja_node *target;
    /* JN_MACRO: parameter names and their defaults (NULL: none) */
    const char **params;
    jinja_node **defaults;
    int n_params;
    bool uses_varargs, uses_kwargs; /* JN_MACRO: the body reads varargs / kwargs */
    int builtin;                    /* JN_FILTER / JN_TEST: index into the engine's table */
};

struct jinja_template {
    char *name;
    struct jinja_tchunk *chunks; /* the template's own arena: tokens' texts, nodes */
    jinja_nodes body;
    bool has_generation;
};

/* The template arena (freed with the template). */
void *jinja_talloc(struct jinja_template *t, size_t n);
char *jinja_tstrdup(struct jinja_template *t, const char *s, size_t n);

/* Parses the tokens into t->body. 0, or -1 with "name:line:col: reason" in err. */
int jinja_parse(struct jinja_template *t, const jinja_tokens *toks, char *err, size_t errlen);

/* ---- the builtin filters and tests (jinja/jinja_filters.c, jinja/jinja_tests.c) ---- */

/* Index of filter / test `name` in the engine's tables, or -1 when the engine has none of that
 * name (the parser refuses it then, naming it). */
int jinja_filter_find(const char *name);
int jinja_test_find(const char *name);
