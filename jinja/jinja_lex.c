/* jinja_lex.c: template text to tokens, as jinja2 3.1's lexer does it in transformers'
 * environment (trim_blocks, lstrip_blocks; default delimiters, no line statements).
 *
 * The source's newlines are normalised to \n and one trailing newline is dropped. Outside tags
 * the text up to the next {{, {% or {# is data. Before a tag: a '-' sign (`{%-`) strips all
 * whitespace at the end of the data; otherwise, unless the sign is '+', a block or comment tag
 * that starts a line (only whitespace between it and the previous newline, or the text start /
 * a tag that ended with a newline) strips that whitespace (lstrip_blocks). After a tag: `-%}`,
 * `-}}`, `-#}` strip all following whitespace; `%}` and `#}` drop one following newline
 * (trim_blocks), `+%}` keeps it. Inside tags, tokens as jinja2's tag rules match them, in order:
 * whitespace, float, integer, name, string, operator; an end delimiter counts only while
 * brackets are balanced. {% raw %} ... {% endraw %} text is data. Whitespace is Python's
 * (str.isspace), as jinja2's regexes and str.rstrip() use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "jinja/jinja_ast.h"

typedef struct {
    struct jinja_template *t;
    const char *s; /* normalised source */
    size_t n, pos;
    int line;
    size_t line_start; /* byte offset where the current line starts (columns) */
    jinja_tokens *out;
    char *err;
    size_t errlen;
    bool line_starting; /* the last match ended with a newline */
} lexer;

static int lex_col(const lexer *L, size_t at) {
    return 1 + (int)jinja_cp_count(L->s + L->line_start, at - L->line_start);
}

static int lex_fail(lexer *L, size_t at, const char *msg) {
    snprintf(L->err, L->errlen, "%s:%d:%d: %s", L->t->name, L->line, lex_col(L, at), msg);
    return -1;
}

/* Moves pos to `to`, counting the newlines passed. */
static void lex_advance(lexer *L, size_t to) {
    for (size_t i = L->pos; i < to; i++)
        if (L->s[i] == '\n') {
            L->line++;
            L->line_start = i + 1;
        }
    L->pos = to;
}

static jinja_token *lex_push(lexer *L, jinja_tok_kind kind, size_t at) {
    jinja_tokens *o = L->out;
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 256;
        o->t = realloc(o->t, sizeof(jinja_token) * (size_t)o->cap);
        MT_CHECK(o->t, "out of memory for template tokens");
    }
    jinja_token *tok = &o->t[o->n++];
    memset(tok, 0, sizeof(*tok));
    tok->kind = (uint8_t)kind;
    tok->line = L->line;
    tok->col = lex_col(L, at);
    return tok;
}

/* Length of the Python whitespace run at s[at, end). */
static size_t lex_space_run(const lexer *L, size_t at, size_t end) {
    size_t i = at;
    while (i < end) {
        uint32_t cp;
        int k = jinja_utf8_next(L->s + i, end - i, &cp);
        if (!jinja_cp_isspace(cp)) break;
        i += (size_t)k;
    }
    return i - at;
}

/* End of s[at, end) with trailing Python whitespace removed (str.rstrip()). */
static size_t lex_rstrip(const lexer *L, size_t at, size_t end) {
    size_t keep = at;
    for (size_t i = at; i < end;) {
        uint32_t cp;
        int k = jinja_utf8_next(L->s + i, end - i, &cp);
        i += (size_t)k;
        if (!jinja_cp_isspace(cp)) keep = i;
    }
    return keep;
}

/* The data before a tag at s[at, tag), after the tag's whitespace control; sign: the
 * character after the tag's opening delimiter ('-', '+' or other), lstrip: lstrip_blocks applies
 * to this tag kind. Emits a JT_DATA token when something is left. */
static void lex_data(lexer *L, size_t at, size_t tag, char sign, bool lstrip) {
    size_t end = tag;
    if (sign == '-') {
        end = lex_rstrip(L, at, tag);
    } else if (sign != '+' && lstrip) {
        size_t l_pos = at; /* after the last newline of the data */
        for (size_t i = at; i < tag; i++)
            if (L->s[i] == '\n') l_pos = i + 1;
        bool at_line = l_pos > at || L->line_starting;
        if (at_line && l_pos < tag && lex_space_run(L, l_pos, tag) == tag - l_pos) end = l_pos;
    }
    if (end > at) {
        jinja_token *tok = lex_push(L, JT_DATA, at);
        tok->text = jinja_tstrdup(L->t, L->s + at, end - at);
        tok->len = end - at;
    }
}

/* The position after a block or comment end delimiter d (2 bytes) at `at`, with its sign at
 * at - 1 handled: '-' swallows all following whitespace, '+' nothing, else one newline. */
static size_t lex_after_end(const lexer *L, size_t at, char sign) {
    size_t p = at + 2;
    if (sign == '-') return p + lex_space_run(L, p, L->n);
    if (sign == '+') return p;
    return p < L->n && L->s[p] == '\n' ? p + 1 : p;
}

static bool lex_is(const lexer *L, size_t at, const char *lit) {
    size_t k = strlen(lit);
    return at + k <= L->n && memcmp(L->s + at, lit, k) == 0;
}

/* {% raw %} at `at` (sign already known): true with *body_at set past its end delimiter. */
static bool lex_raw_begin(const lexer *L, size_t at, size_t *body_at) {
    size_t p = at + 2;
    if (p < L->n && (L->s[p] == '-' || L->s[p] == '+')) p++;
    p += lex_space_run(L, p, L->n);
    if (!lex_is(L, p, "raw")) return false;
    p += 3;
    p += lex_space_run(L, p, L->n);
    if (lex_is(L, p, "-%}")) {
        p += 3;
        *body_at = p + lex_space_run(L, p, L->n);
        return true;
    }
    if (lex_is(L, p, "%}")) {
        *body_at = p + 2; /* jinja2's raw_begin rule has no trim_blocks suffix */
        return true;
    }
    return false;
}

/* {% raw %} body from `at`: data up to {% endraw %}, whose sign controls the data's end. */
static int lex_raw(lexer *L, size_t at) {
    for (size_t q = at; q + 1 < L->n; q++) {
        if (L->s[q] != '{' || L->s[q + 1] != '%') continue;
        size_t p = q + 2;
        char sign = p < L->n ? L->s[p] : 0;
        if (sign == '-' || sign == '+') p++;
        p += lex_space_run(L, p, L->n);
        if (!lex_is(L, p, "endraw")) continue;
        p += 6;
        p += lex_space_run(L, p, L->n);
        char esign = 0;
        if (lex_is(L, p, "-%}") || lex_is(L, p, "+%}")) esign = L->s[p++];
        if (!lex_is(L, p, "%}")) continue;
        lex_data(L, at, q, sign, true);
        size_t next = lex_after_end(L, p, esign);
        L->line_starting = next > 0 && L->s[next - 1] == '\n';
        lex_advance(L, next);
        return 0;
    }
    return lex_fail(L, at, "missing end of raw directive ({% endraw %})");
}

/* A comment from `at` (just after {# and its sign). */
static int lex_comment(lexer *L, size_t at) {
    for (size_t q = at; q + 1 < L->n; q++) {
        if (L->s[q] != '#' || L->s[q + 1] != '}') continue;
        char sign = q > at && (L->s[q - 1] == '-' || L->s[q - 1] == '+') ? L->s[q - 1] : 0;
        size_t next = lex_after_end(L, q, sign);
        L->line_starting = next > 0 && L->s[next - 1] == '\n';
        lex_advance(L, next);
        return 0;
    }
    return lex_fail(L, at, "missing end of comment tag (#})");
}

static int lex_tag(lexer *L, bool block);

int jinja_lex(struct jinja_template *t, const char *src, size_t len, jinja_tokens *out, char *err,
              size_t errlen) {
    /* newlines normalised, one trailing newline dropped (keep_trailing_newline false) */
    char *s = malloc(len + 1);
    MT_CHECK(s, "out of memory for a template of %zu bytes", len);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n > 0 && s[n - 1] == '\n') n--;
    s[n] = 0;
    lexer L = {.t = t,
               .s = s,
               .n = n,
               .line = 1,
               .out = out,
               .err = err,
               .errlen = errlen,
               .line_starting = true};
    int rc = 0;
    while (rc == 0 && L.pos < L.n) {
        /* the next tag start */
        size_t q = L.pos;
        while (q + 1 < L.n && !(L.s[q] == '{' && strchr("%{#", L.s[q + 1]))) q++;
        if (q + 1 >= L.n) { /* the rest is data */
            lex_data(&L, L.pos, L.n, 0, false);
            lex_advance(&L, L.n);
            break;
        }
        const char kind = L.s[q + 1];
        const char sign = q + 2 < L.n ? L.s[q + 2] : 0;
        size_t raw_at;
        if (kind == '%' && lex_raw_begin(&L, q, &raw_at)) {
            lex_data(&L, L.pos, q, sign, true);
            lex_advance(&L, raw_at);
            rc = lex_raw(&L, raw_at);
            continue;
        }
        lex_data(&L, L.pos, q, sign, kind != '{');
        size_t body = q + 2 + (sign == '-' || sign == '+');
        lex_advance(&L, body);
        L.line_starting = false;
        if (kind == '#') {
            rc = lex_comment(&L, body);
        } else {
            lex_push(&L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, q);
            rc = lex_tag(&L, kind == '%');
        }
    }
    if (rc == 0) lex_push(&L, JT_EOF, L.pos);
    free(s);
    return rc;
}

/* ---- inside a tag ---- */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_hex(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Digits with single '_' between them (jinja2's (\d+_)*\d+ and (_?\d)*): the end, or `at` when
 * no digit is there. ok(c) says which characters are digits. */
static size_t lex_digits(const lexer *L, size_t at, bool (*ok)(char)) {
    size_t p = at;
    if (p >= L->n || !ok(L->s[p])) return at;
    while (p < L->n) {
        if (ok(L->s[p])) {
            p++;
        } else if (L->s[p] == '_' && p + 1 < L->n && ok(L->s[p + 1])) {
            p += 2;
        } else {
            break;
        }
    }
    return p;
}

static bool is_bin(char c) { return c == '0' || c == '1'; }
static bool is_oct(char c) { return c >= '0' && c <= '7'; }

/* A float as jinja2's float_re matches it at `at` (not after a '.'): its end, or at. */
static size_t lex_float_end(const lexer *L, size_t at) {
    if (at > 0 && L->s[at - 1] == '.') return at;
    size_t p = lex_digits(L, at, is_digit);
    if (p == at) return at;
    size_t frac = p;
    if (p < L->n && L->s[p] == '.') {
        size_t q = lex_digits(L, p + 1, is_digit);
        if (q > p + 1) frac = q;
    }
    if (frac < L->n && (L->s[frac] == 'e' || L->s[frac] == 'E')) {
        size_t q = frac + 1;
        if (q < L->n && (L->s[q] == '+' || L->s[q] == '-')) q++;
        size_t r = lex_digits(L, q, is_digit);
        if (r > q) return r;
    }
    return frac > p ? frac : at; /* a fraction is required without an exponent */
}

/* An integer as jinja2's integer_re matches it: its end, or at; *base gets the base. */
static size_t lex_int_end(const lexer *L, size_t at, int *base) {
    const char *s = L->s;
    *base = 10;
    if (s[at] == '0' && at + 1 < L->n) {
        char x = (char)(s[at + 1] | 0x20);
        bool (*ok)(char) = x == 'b' ? is_bin : x == 'o' ? is_oct : x == 'x' ? is_hex : NULL;
        if (ok) { /* 0b(_?[01])+ ...: the first digit may follow an '_' too */
            size_t p = at + 2;
            if (p < L->n && s[p] == '_') p++;
            size_t q = lex_digits(L, p, ok);
            if (q > p) {
                *base = x == 'b' ? 2 : x == 'o' ? 8 : 16;
                return q;
            }
        }
    }
    if (s[at] >= '1' && s[at] <= '9') return lex_digits(L, at, is_digit);
    if (s[at] == '0') { /* 0(_?0)* */
        size_t p = at + 1;
        while (p < L->n && (s[p] == '0' || (s[p] == '_' && p + 1 < L->n && s[p + 1] == '0')))
            p += s[p] == '_' ? 2 : 1;
        return p;
    }
    return at;
}

static int lex_number(lexer *L, size_t at, size_t fend) {
    char buf[128];
    size_t k = 0;
    if (fend > at) { /* a float: Python's float() of the digits without '_' */
        for (size_t i = at; i < fend && k + 1 < sizeof(buf); i++)
            if (L->s[i] != '_') buf[k++] = L->s[i];
        buf[k] = 0;
        if (fend - at >= sizeof(buf)) return lex_fail(L, at, "float literal too long");
        jinja_token *tok = lex_push(L, JT_FLOAT, at);
        tok->fval = strtod(buf, NULL);
        lex_advance(L, fend);
        return 0;
    }
    int base;
    size_t end = lex_int_end(L, at, &base);
    size_t from = base == 10 ? at : at + 2;
    unsigned __int128 v = 0;
    for (size_t i = from; i < end; i++) {
        char c = L->s[i];
        if (c == '_') continue;
        int d = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
        v = v * (unsigned)base + (unsigned)d;
        if (v > (unsigned __int128)INT64_MAX)
            return lex_fail(L, at, "integer literal beyond 64 bits (not supported)");
    }
    jinja_token *tok = lex_push(L, JT_INT, at);
    tok->ival = (int64_t)v;
    lex_advance(L, end);
    return 0;
}

/* Appends the UTF-8 of cp to b (a lexer buffer). */
static void put_cp(jinja_buf *b, uint32_t cp) { jinja_utf8_put(b, cp); }

static int hexval(const char *s, int k, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < k; i++) {
        if (!is_hex(s[i])) return -1;
        *v = *v * 16 + (uint32_t)(is_digit(s[i]) ? s[i] - '0' : (s[i] | 0x20) - 'a' + 10);
    }
    return 0;
}

/* Python's value_str.encode("ascii", "backslashreplace").decode("unicode-escape") of the
 * literal's body s[0, n): non-ASCII characters become \xNN / \uNNNN / \UNNNNNNNN first, then
 * the escapes are decoded (so a backslash before a non-ASCII character keeps the escape text). */
static int lex_unescape(lexer *L, size_t at, const char *s, size_t n, jinja_buf *out) {
    jinja_buf a = {0}; /* the ASCII form */
    jinja_buf_append(&a, "", 0);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = jinja_utf8_next(s + i, n - i, &cp);
        char esc[16];
        if (cp < 0x80)
            jinja_buf_append(&a, s + i, 1);
        else {
            int m = cp < 0x100     ? snprintf(esc, sizeof(esc), "\\x%02x", cp)
                    : cp < 0x10000 ? snprintf(esc, sizeof(esc), "\\u%04x", cp)
                                   : snprintf(esc, sizeof(esc), "\\U%08x", cp);
            jinja_buf_append(&a, esc, (size_t)m);
        }
        i += (size_t)k;
    }
    const char *p = a.p;
    size_t m = a.len;
    int rc = 0;
    jinja_buf_append(out, "", 0);
    for (size_t i = 0; i < m && rc == 0; i++) {
        if (p[i] != '\\') {
            jinja_buf_append(out, p + i, 1);
            continue;
        }
        if (++i >= m) {
            rc = lex_fail(L, at, "string literal ends with a backslash");
            break;
        }
        char c = p[i];
        uint32_t v = 0;
        const char *simple = strchr("\\'\"abfnrtv", c);
        if (c == '\n') continue; /* line continuation */
        if (simple) {
            static const char map[] = "\\'\"\a\b\f\n\r\t\v";
            jinja_buf_append(out, &map[simple - "\\'\"abfnrtv"], 1);
        } else if (is_oct(c)) {
            int k = 0;
            while (k < 3 && i + (size_t)k < m && is_oct(p[i + (size_t)k]))
                v = v * 8 + (uint32_t)(p[i + (size_t)k++] - '0');
            i += (size_t)k - 1;
            put_cp(out, v);
        } else if (c == 'x' || c == 'u' || c == 'U') {
            int k = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            if (i + (size_t)k >= m + 0 || hexval(p + i + 1, k, &v) != 0) {
                rc = lex_fail(L, at,
                              c == 'x'   ? "truncated \\xXX escape in a string literal"
                              : c == 'u' ? "truncated \\uXXXX escape in a string literal"
                                         : "truncated \\UXXXXXXXX escape in a string literal");
            } else if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
                rc = lex_fail(L, at, "a \\u or \\U escape of a surrogate or beyond U+10FFFF");
            } else {
                put_cp(out, v);
                i += (size_t)k;
            }
        } else if (c == 'N') {
            rc = lex_fail(L, at, "\\N{...} escapes are not supported");
        } else { /* an unknown escape stays as written */
            jinja_buf_append(out, p + i - 1, 2);
        }
    }
    jinja_buf_free(&a);
    return rc;
}

static int lex_string(lexer *L, size_t at) {
    const char q = L->s[at];
    size_t p = at + 1;
    while (p < L->n && L->s[p] != q) p += L->s[p] == '\\' && p + 1 < L->n ? 2 : 1;
    if (p >= L->n) return lex_fail(L, at, "unterminated string literal");
    jinja_buf v = {0};
    int rc = lex_unescape(L, at, L->s + at + 1, p - at - 1, &v);
    if (rc == 0) {
        jinja_token *tok = lex_push(L, JT_STRING, at);
        tok->text = jinja_tstrdup(L->t, v.p, v.len);
        tok->len = v.len;
        lex_advance(L, p + 1);
    }
    jinja_buf_free(&v);
    return rc;
}

static const struct {
    const char *s;
    jinja_op op;
} lex_ops[] = {
    {"//", JOP_FLOORDIV}, {"**", JOP_POW},      {"==", JOP_EQ},    {"!=", JOP_NE},
    {">=", JOP_GTEQ},     {"<=", JOP_LTEQ},     {"+", JOP_ADD},    {"-", JOP_SUB},
    {"/", JOP_DIV},       {"*", JOP_MUL},       {"%", JOP_MOD},    {"~", JOP_TILDE},
    {"[", JOP_LBRACKET},  {"]", JOP_RBRACKET},  {"(", JOP_LPAREN}, {")", JOP_RPAREN},
    {"{", JOP_LBRACE},    {"}", JOP_RBRACE},    {">", JOP_GT},     {"<", JOP_LT},
    {"=", JOP_ASSIGN},    {".", JOP_DOT},       {":", JOP_COLON},  {"|", JOP_PIPE},
    {",", JOP_COMMA},     {";", JOP_SEMICOLON},
};

#define LEX_MAX_NEST 256

/* The tokens of a {{ }} or {% %} tag from pos, through its end delimiter. */
static int lex_tag(lexer *L, bool block) {
    char stack[LEX_MAX_NEST]; /* the closers expected */
    int depth = 0;
    while (L->pos < L->n) {
        const size_t at = L->pos;
        if (depth == 0) {
            const char *e = block ? "%}" : "}}";
            char sign = L->s[at];
            if ((sign == '-' || (block && sign == '+')) && lex_is(L, at + 1, e)) {
                lex_push(L, block ? JT_BLOCK_END : JT_VAR_END, at);
                size_t next = lex_after_end(L, at + 1, sign);
                L->line_starting = next > 0 && L->s[next - 1] == '\n';
                lex_advance(L, next);
                return 0;
            }
            if (lex_is(L, at, e)) {
                lex_push(L, block ? JT_BLOCK_END : JT_VAR_END, at);
                size_t next = block ? lex_after_end(L, at, 0) : at + 2;
                L->line_starting = L->s[next - 1] == '\n';
                lex_advance(L, next);
                return 0;
            }
        }
        size_t ws = lex_space_run(L, at, L->n);
        if (ws) {
            lex_advance(L, at + ws);
            continue;
        }
        const char c = L->s[at];
        size_t fend = is_digit(c) ? lex_float_end(L, at) : at;
        int base;
        if (fend > at || (is_digit(c) && lex_int_end(L, at, &base) > at)) {
            if (lex_number(L, at, fend) != 0) return -1;
            continue;
        }
        if (is_name_start(c)) {
            size_t p = at + 1;
            while (p < L->n && (is_name_start(L->s[p]) || is_digit(L->s[p]))) p++;
            if (p < L->n && (unsigned char)L->s[p] >= 0x80)
                return lex_fail(L, at, "a non-ASCII identifier (not supported)");
            jinja_token *tok = lex_push(L, JT_NAME, at);
            tok->text = jinja_tstrdup(L->t, L->s + at, p - at);
            tok->len = p - at;
            lex_advance(L, p);
            continue;
        }
        if (c == '\'' || c == '"') {
            if (lex_string(L, at) != 0) return -1;
            continue;
        }
        size_t k = 0;
        for (; k < sizeof(lex_ops) / sizeof(lex_ops[0]); k++)
            if (lex_is(L, at, lex_ops[k].s)) break;
        if (k == sizeof(lex_ops) / sizeof(lex_ops[0])) {
            char msg[64];
            uint32_t cp;
            jinja_utf8_next(L->s + at, L->n - at, &cp);
            snprintf(msg, sizeof(msg), "unexpected character U+%04X", cp);
            return lex_fail(L, at, msg);
        }
        const jinja_op op = lex_ops[k].op;
        if (op == JOP_LPAREN || op == JOP_LBRACKET || op == JOP_LBRACE) {
            if (depth == LEX_MAX_NEST) return lex_fail(L, at, "brackets nested too deeply");
            stack[depth++] = op == JOP_LPAREN ? ')' : op == JOP_LBRACKET ? ']' : '}';
        } else if (op == JOP_RPAREN || op == JOP_RBRACKET || op == JOP_RBRACE) {
            char got = lex_ops[k].s[0], msg[64];
            if (depth == 0 || stack[depth - 1] != got) {
                snprintf(msg, sizeof(msg),
                         depth ? "unexpected '%c', expected '%c'" : "unexpected '%c'", got,
                         depth ? stack[depth - 1] : ' ');
                return lex_fail(L, at, msg);
            }
            depth--;
        }
        jinja_token *tok = lex_push(L, JT_OP, at);
        tok->op = (uint8_t)op;
        lex_advance(L, at + strlen(lex_ops[k].s));
    }
    return lex_fail(L, L->pos,
                    block ? "unexpected end of template inside {% %}"
                          : "unexpected end of template inside {{ }}");
}
