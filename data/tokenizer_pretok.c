// tokenizer_pretok.c: encode = added-token split -> pre-tokenizer steps -> BPE per piece, with
// byte offsets into the input, replicating HF `tokenizers` (added_vocabulary.rs, normalizer.rs
// split behaviours, pre_tokenizers/byte_level.rs, processors ByteLevel trim_offsets).
//
// Pieces are byte ranges of the input. ByteLevel's add_prefix_space adds a *virtual* space in
// front of a piece; HF aligns that space with the piece's first character, and so do we.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/file_io.h"
#include "data/tokenizer_internal.h"

// ---- UTF-8 ----

static inline int utf8_len_lead(uint8_t c) {
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; // only called on valid text
}

uint32_t tok_utf8_decode(const uint8_t *s, int *len) {
    uint8_t c = s[0];
    if (c < 0x80) return *len = 1, c;
    if (c < 0xE0) return *len = 2, ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
    if (c < 0xF0)
        return *len = 3,
               ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    return *len = 4, ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                         ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

bool tok_is_whitespace(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

static inline int64_t char_start(const uint8_t *t, int64_t i) {
    while (i > 0 && (t[i] & 0xC0) == 0x80) i--;
    return i;
}

// ---- Oniguruma (Ruby syntax) -> PCRE2 ----
// HF compiles Split regexes with Oniguruma, whose Unicode classes differ from PCRE2's UCP ones:
// \s also has U+0085, \w also has marks and connector punctuation, \h is a hex digit, \v is
// the VT character, (?m) means dot-all; and Oniguruma in HF classifies by Unicode 16, PCRE2
// 10.42 by Unicode 14, so \p{<category>}, \d and \w are written out from our Unicode 16
// tables. We rewrite those; constructs whose meaning we cannot reproduce (\b, \S or \H inside
// a class, class set operations, \Q) are rejected.

// Oniguruma's \s is exactly Unicode White_Space. Spelled out because PCRE2's UCP \s lacks
// U+0085 and still takes U+180E (it is in PCRE2's horizontal-space list).
#define ONIG_SPACE                                                                                 \
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"    \
    "\\x{205F}\\x{3000}"

static void sb_put(mt_strbuf *b, const char *s, size_t n) { mt_strbuf_append(b, s, n); }
static void sb_str(mt_strbuf *b, const char *s) { mt_strbuf_append(b, s, strlen(s)); }

static bool is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Oniguruma rejects a class escape (\s, \w, \p{L}, ...) as the start of a range ("[\w-.]":
// "unmatched range specifier"); p[j] is the character after the escape.
static bool range_from_class(const char *p, size_t j, bool in_class, char d, char *err,
                             size_t errlen) {
    if (!in_class || p[j] != '-' || !p[j + 1] || p[j + 1] == ']') return false;
    snprintf(err, errlen,
             "'\\%c' followed by '-' in a character class: a class cannot start a range", d);
    return true;
}

// \p{NAME}, \P{NAME}, \p{^NAME} at e[0]: a category is written by tok_ucd_class and *i moved
// past it; anything else (a script, a binary property, no closing brace) is left to PCRE2.
static bool put_property(const char *e, mt_strbuf *o, bool in_class, bool base, size_t *i) {
    const char *name = e + 3, *close = strchr(name, '}');
    bool negate = e[1] == 'P';
    if (*name == '^') negate = !negate, name++;
    uint32_t mask = close ? tok_ucd_gc_mask(name, (size_t)(close - name)) : 0;
    if (!mask) return false;
    tok_ucd_class(o, mask, negate, in_class, base);
    *i += (size_t)(close + 1 - e);
    return true;
}

// base: the classes by PCRE2's own tables (tok_ucd_class_items), else by Unicode 16.
static bool onig_to_pcre2(const char *p, mt_strbuf *o, bool base, char *err, size_t errlen) {
    bool in_class = false;
    size_t i = 0;
    while (p[i]) {
        char ch = p[i];
        if (ch == '\\') {
            char d = p[i + 1];
            const char *rep = NULL;
            switch (d) {
            case 0:
                snprintf(err, errlen, "pattern ends with a backslash");
                return false;
            case 's':
                if (range_from_class(p, i + 2, in_class, d, err, errlen)) return false;
                rep = in_class ? ONIG_SPACE : "[" ONIG_SPACE "]";
                break;
            case 'w':
            case 'd':
            case 'W':
            case 'D': // upper case: the complement
                if (range_from_class(p, i + 2, in_class, d, err, errlen)) return false;
                tok_ucd_class(o, (d | 0x20) == 'w' ? TOK_GC_MASK_WORD : TOK_GC_MASK_DIGIT, d < 'a',
                              in_class, base);
                i += 2;
                continue;
            case 'p':
            case 'P':
                if (p[i + 2] == '{' && put_property(p + i, o, in_class, base, &i)) {
                    if (range_from_class(p, i, in_class, d, err, errlen)) return false;
                    continue;
                }
                break;
            case 'h':
                if (range_from_class(p, i + 2, in_class, d, err, errlen)) return false;
                rep = in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
                break;
            case 'v':
                rep = "\\x{0B}";
                break;
            case 'S':
            case 'H':
                if (in_class) {
                    snprintf(err, errlen, "'\\%c' inside a character class is not supported", d);
                    return false;
                }
                rep = d == 'S' ? "[^" ONIG_SPACE "]" : "[^0-9a-fA-F]";
                break;
            case 'b':
            case 'B':
                if (in_class && d == 'b') {
                    rep = "\\x{08}";
                    break;
                }
                snprintf(err, errlen, "word boundary '\\%c' is not supported", d);
                return false;
            case 'Q':
                snprintf(err, errlen, "'\\Q' quoting is not supported");
                return false;
            case 'u':
                if (is_hex(p[i + 2]) && is_hex(p[i + 3]) && is_hex(p[i + 4]) && is_hex(p[i + 5])) {
                    sb_str(o, "\\x{");
                    sb_put(o, p + i + 2, 4);
                    sb_str(o, "}");
                    i += 6;
                    continue;
                }
                snprintf(err, errlen, "'\\u' must be followed by 4 hex digits");
                return false;
            default:
                break;
            }
            if (rep) {
                sb_str(o, rep);
                i += 2;
            } else { // copy the escape with its whole (possibly multi-byte) character
                int len = utf8_len_lead((uint8_t)d);
                sb_put(o, p + i, 1 + (size_t)len);
                i += 1 + (size_t)len;
            }
        } else if (ch == '[') {
            if (in_class) {
                if (p[i + 1] != ':') {
                    snprintf(err, errlen, "nested character classes are not supported");
                    return false;
                }
                const char *end = strstr(p + i, ":]");
                if (!end) {
                    snprintf(err, errlen, "unterminated POSIX class");
                    return false;
                }
                sb_put(o, p + i, (size_t)(end + 2 - (p + i)));
                i = (size_t)(end + 2 - p);
                continue;
            }
            in_class = true;
            sb_put(o, "[", 1);
            i++;
            if (p[i] == '^') sb_put(o, "^", 1), i++;
            if (p[i] == ']') sb_put(o, "]", 1), i++; // a leading ']' is literal
        } else if (ch == ']' && in_class) {
            in_class = false;
            sb_put(o, "]", 1);
            i++;
        } else if (ch == '&' && in_class && p[i + 1] == '&') {
            snprintf(err, errlen, "character class intersection '&&' is not supported");
            return false;
        } else if (ch == '(' && !in_class && p[i + 1] == '?') {
            // Option groups (?imx-imx) / (?imx-imx:...): Ruby's 'm' is PCRE2's 's'.
            size_t j = i + 2;
            while (p[j] && strchr("imx-", p[j])) j++;
            if (j > i + 2 && (p[j] == ')' || p[j] == ':')) {
                sb_str(o, "(?");
                for (size_t k = i + 2; k < j; k++) sb_put(o, p[k] == 'm' ? "s" : p + k, 1);
                sb_put(o, p + j, 1);
                i = j + 1;
            } else {
                sb_put(o, "(", 1);
                i++;
            }
        } else {
            sb_put(o, p + i, 1);
            i++;
        }
    }
    return true;
}

static pcre2_code *regex_compile(const char *pattern, bool literal, bool base, mt_strbuf *b,
                                 bool *jit, char *err, size_t errlen) {
    uint32_t opts = PCRE2_UTF;
    if (literal) {
        sb_str(b, pattern);
        opts |= PCRE2_LITERAL;
    } else {
        if (!onig_to_pcre2(pattern, b, base, err, errlen)) return NULL;
        opts |= PCRE2_UCP | PCRE2_MULTILINE; // Ruby: ^ and $ are line anchors
    }
    if (!b->p) sb_str(b, "");
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF); // Ruby's '.', '^', '$' only know '\n'
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)b->p, b->len, opts, &ec, &eo, cc);
    pcre2_compile_context_free(cc);
    if (!re) {
        char msg[256];
        pcre2_get_error_message(ec, (PCRE2_UCHAR *)msg, sizeof(msg));
        snprintf(err, errlen, "PCRE2 rejects it at offset %zu of '%s': %s", (size_t)eo, b->p, msg);
        return NULL;
    }
    *jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    return re;
}

bool tok_step_compile(tok_step *st, const char *pattern, bool literal, char *err, size_t errlen) {
    mt_strbuf b16 = {0}, bb = {0};
    st->re = regex_compile(pattern, literal, false, &b16, &st->jit, err, errlen);
    // PCRE2's own classes are exact on texts whose characters all kept their category since
    // its Unicode version, and faster (tokenizer_unicode.c); only worth it when they differ
    if (st->re && !literal && tok_ucd_pcre2_is_base() &&
        onig_to_pcre2(pattern, &bb, true, err, errlen) &&
        (bb.len != b16.len || (bb.len && memcmp(bb.p, b16.p, bb.len) != 0))) {
        mt_strbuf_free(&bb);
        char err_base[256]; // cannot fail where the first one compiled; st->re would do
        st->re_base =
            regex_compile(pattern, false, true, &bb, &st->jit_base, err_base, sizeof(err_base));
    }
    mt_strbuf_free(&b16);
    mt_strbuf_free(&bb);
    return st->re != NULL;
}

// Next match at or after `from` in subj[0,n): 1, 0 when there is none, or PCRE2's (negative)
// error code: its match limit (PCRE2_ERROR_MATCHLIMIT), hit by catastrophic backtracking or a
// run of millions of spaces. PCRE2's default limit, 10,000,000, is kept: it is Oniguruma's
// default retry limit too, and HF tokenizers stops (with an error) on such input as well.
// base: the text has no character whose category changed since PCRE2's Unicode version, so
// st->re_base (when there is one) gives the same matches.
static int regex_find(tok_work *w, const tok_step *st, bool base, const uint8_t *subj, int64_t n,
                      int64_t from, int64_t *s, int64_t *e) {
    pcre2_code *re = base && st->re_base ? st->re_base : st->re;
    bool jit = base && st->re_base ? st->jit_base : st->jit;
    if (!w->md) w->md = pcre2_match_data_create(1, NULL);
    MT_CHECK(w->md, "tokenizer: cannot allocate PCRE2 match data");
    for (;;) {
        int rc = jit ? pcre2_jit_match(re, subj, (PCRE2_SIZE)n, (PCRE2_SIZE)from, 0, w->md, w->mctx)
                     : pcre2_match(re, subj, (PCRE2_SIZE)n, (PCRE2_SIZE)from, PCRE2_NO_UTF_CHECK,
                                   w->md, w->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) return 0;
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !w->jit_stack) {
            w->jit_stack = pcre2_jit_stack_create(32 * 1024, 256 * 1024 * 1024, NULL);
            w->mctx = pcre2_match_context_create(NULL);
            MT_CHECK(w->jit_stack && w->mctx, "tokenizer: cannot allocate a PCRE2 JIT stack");
            pcre2_jit_stack_assign(w->mctx, NULL, w->jit_stack);
            continue;
        }
        if (rc < 0) return rc;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
        *s = (int64_t)ov[0];
        *e = (int64_t)ov[1];
        if (*e < *s) *e = *s; // \K in a lookahead can report end < start
        return 1;
    }
}

// ---- encode ----

typedef struct {
    int64_t start, end; // bytes of the input
    bool prefix;        // a virtual ' ' precedes them (ByteLevel add_prefix_space)
} piece;

typedef struct {
    const mt_tokenizer *tok;
    tok_work *w;
    const uint8_t *text;
    mt_token_buf *out;
    int64_t n0; // out->n when this encode call started
    bool base;  // no character of the text changed category since PCRE2's Unicode version
    // a regex failed: PCRE2's code, the step and the text offset its search started at; the
    // encode unwinds without emitting more
    int fail_rc;
    const tok_step *fail_step;
    int64_t fail_at;
    tok_piece_fn on_piece; // tok_pretokenize: gets the pieces instead of BPE
    void *piece_arg;
    bool plain; // special added tokens are text (HF encode_special_tokens)
} enc_ctx;

// ByteLevel post-processor offset trimming (byte_level.rs process_offsets). HF counts in
// characters; we move the byte offsets by the same number of characters of the input.
static void trim_offsets(const enc_ctx *c, int64_t *os, int64_t *oe, int lead, int trail) {
    if (lead > 0) {
        bool is_first = c->out->n == c->n0 || *os == 0;
        if (is_first && c->tok->pp_add_prefix_space && lead == 1) lead = 0;
        int64_t p = *os;
        for (int k = 0; k < lead && p < *oe; k++) p += utf8_len_lead(c->text[p]);
        *os = p < *oe ? p : *oe;
    }
    if (trail > 0) {
        int64_t p = *oe;
        int k = 0;
        for (; k < trail && p > 0; k++) p = char_start(c->text, p - 1);
        if (k == trail) *oe = p > *os ? p : *os; // HF: only when offsets.1 >= trailing count
    }
}

static void emit(enc_ctx *c, int32_t id, int64_t os, int64_t oe, int lead, int trail) {
    if (c->tok->pp_trim && (lead || trail)) trim_offsets(c, &os, &oe, lead, trail);
    mt_token_buf *b = c->out;
    b->ids[b->n] = id;
    b->offsets[2 * b->n] = os;
    b->offsets[2 * b->n + 1] = oe;
    b->n++;
}

// Leading / trailing chars of text[s,e) that are whitespace or 'Ġ' (the token string of an
// added token is the matched text, lstrip/rstrip whitespace included).
static void ws_counts(const uint8_t *t, int64_t s, int64_t e, int *lead, int *trail) {
    int l = 0, r = 0;
    int64_t p = s;
    while (p < e) {
        int len;
        uint32_t cp = tok_utf8_decode(t + p, &len);
        if (!tok_is_whitespace(cp) && cp != 0x120) break;
        l++, p += len;
    }
    p = e;
    while (p > s) {
        int64_t q = char_start(t, p - 1);
        int len;
        uint32_t cp = tok_utf8_decode(t + q, &len);
        if (!tok_is_whitespace(cp) && cp != 0x120) break;
        r++, p = q;
    }
    *lead = l, *trail = r;
}

// ' ' + s[0, n) in a scratch buffer of the worker that grows as needed: the piece with
// ByteLevel's virtual prefix space.
static const uint8_t *with_space(uint8_t **buf, int64_t *cap, const uint8_t *s, int64_t n) {
    if (*cap < n + 1) {
        *cap = 2 * (n + 1);
        free(*buf);
        *buf = mt_malloc((size_t)*cap, "tokenizer scratch");
    }
    (*buf)[0] = ' ';
    memcpy(*buf + 1, s, (size_t)n);
    return *buf;
}

static void bpe_piece(enc_ctx *c, piece p) {
    const mt_tokenizer *tok = c->tok;
    tok_work *w = c->w;
    const uint8_t *word = c->text + p.start;
    int64_t n = p.end - p.start;
    if (p.prefix) {
        word = with_space(&w->vbuf, &w->vbuf_cap, word, n);
        n++;
    }
    int64_t k = tok_bpe_word(tok, w, word, n);
    tok_buf_reserve(c->out, k);
    int64_t v = 0, shift = p.prefix ? 1 : 0;
    for (int64_t j = 0; j < k; j++) {
        int64_t a = v, b = v + w->lens[j];
        v = b;
        // Offsets cover whole characters: a token holding part of a multi-byte character
        // gets that character's span (HF aligns every byte-level char with its source char).
        int64_t os = (p.prefix && a == 0) ? p.start : char_start(c->text, p.start + a - shift);
        int64_t last =
            (p.prefix && b == 1) ? p.start : char_start(c->text, p.start + b - 1 - shift);
        int64_t oe = last + utf8_len_lead(c->text[last]);
        int32_t id = w->ids[j];
        emit(c, id, os, oe, tok->id_lead_sp[id], tok->id_trail_sp[id]);
    }
}

static void run_steps(enc_ctx *c, int32_t k, piece p);

// Split behaviours (normalizer.rs NormalizedString::split), streamed: the matches arrive in
// order and at most one merged piece is pending.
typedef struct {
    enc_ctx *c;
    int32_t next_step;
    int behavior;
    piece base; // the piece being split; subject byte i is base.start + i - prefix
    bool have, pend_last_match, prev_match;
    int64_t ps, pe;
} splitter;

static void split_out(splitter *sp, int64_t s, int64_t e) {
    if (s == e) return; // HF drops empty splits
    piece q = {0};
    if (sp->base.prefix) {
        q.prefix = s == 0;
        q.start = sp->base.start + (s == 0 ? 0 : s - 1);
        q.end = sp->base.start + e - 1;
    } else {
        q.start = sp->base.start + s;
        q.end = sp->base.start + e;
    }
    run_steps(sp->c, sp->next_step, q);
}

static void split_feed(splitter *sp, int64_t s, int64_t e, bool is_match) {
    switch (sp->behavior) {
    case TOK_REMOVED:
        if (!is_match) split_out(sp, s, e);
        return;
    case TOK_ISOLATED:
        split_out(sp, s, e);
        return;
    case TOK_MERGED_WITH_PREVIOUS:
        if (is_match && !sp->prev_match && sp->have) {
            sp->pe = e;
        } else {
            if (sp->have) split_out(sp, sp->ps, sp->pe);
            sp->have = true, sp->ps = s, sp->pe = e;
        }
        sp->prev_match = is_match;
        return;
    case TOK_MERGED_WITH_NEXT:
        // HF folds from the right: a match joins the piece after it when that is a non-match.
        if (sp->have && sp->pend_last_match && !is_match) {
            sp->pe = e;
            sp->pend_last_match = false;
        } else {
            if (sp->have) split_out(sp, sp->ps, sp->pe);
            sp->have = true, sp->ps = s, sp->pe = e, sp->pend_last_match = is_match;
        }
        return;
    case TOK_CONTIGUOUS:
        if (sp->have && is_match == sp->prev_match) {
            sp->pe = e;
        } else {
            if (sp->have) split_out(sp, sp->ps, sp->pe);
            sp->have = true, sp->ps = s, sp->pe = e;
        }
        sp->prev_match = is_match;
        return;
    }
}

// Runs one regex over subj[0,n) and feeds (range, is_match) pieces that cover it, iterating
// matches like the Rust onig/regex crates: an empty match right where the previous match
// ended is skipped and the search moves one character on.
static void split_regex(enc_ctx *c, const tok_step *st, const uint8_t *subj, int64_t n,
                        splitter *sp) {
    int64_t last_end = 0, last_match = -1, prev = 0, s, e;
    int rc = 0;
    while (!c->fail_rc && last_end <= n &&
           (rc = regex_find(c->w, st, c->base, subj, n, last_end, &s, &e)) > 0) {
        if (s == e) {
            last_end = e < n ? e + utf8_len_lead(subj[e]) : e + 1;
            if (e == last_match) continue;
        } else {
            last_end = e;
        }
        last_match = e;
        if (prev != s) split_feed(sp, prev, s, st->invert);
        split_feed(sp, s, e, !st->invert);
        prev = e;
    }
    if (rc < 0 && !c->fail_rc) { // subject byte i is text byte base.start + i (- 1 with a prefix)
        const int64_t at = sp->base.start + last_end - (sp->base.prefix ? 1 : 0);
        c->fail_rc = rc, c->fail_step = st, c->fail_at = at > sp->base.start ? at : sp->base.start;
    }
    if (c->fail_rc) return;
    if (prev != n) split_feed(sp, prev, n, st->invert);
    if (sp->have) split_out(sp, sp->ps, sp->pe);
}

static void run_steps(enc_ctx *c, int32_t k, piece p) {
    const mt_tokenizer *tok = c->tok;
    if (c->fail_rc) return;
    if (k == tok->n_steps) {
        if (c->on_piece)
            c->on_piece(c->piece_arg, p.start, p.end, p.prefix);
        else
            bpe_piece(c, p);
        return;
    }
    const tok_step *st = &tok->steps[k];
    if (st->kind == TOK_STEP_BYTELEVEL) {
        // The loader only accepts ByteLevel as the last step, so p has no prefix yet.
        p.prefix = st->add_prefix_space && c->text[p.start] != ' ';
        if (!st->re) {
            run_steps(c, k + 1, p);
            return;
        }
    }
    const uint8_t *subj = c->text + p.start;
    int64_t n = p.end - p.start;
    if (p.prefix) { // the regex must see the virtual space
        tok_work *w = c->w;
        subj = with_space(&w->rbuf, &w->rbuf_cap, subj, n);
        n++;
    }
    splitter sp = {.c = c, .next_step = k + 1, .behavior = st->behavior, .base = p};
    split_regex(c, st, subj, n, &sp);
}

// Added tokens (added_vocabulary.rs find_matches): leftmost-longest matches of one set in
// text[s0,e0); the gaps go to `gap`.
static void split_added(enc_ctx *c, const tok_added_set *set, int64_t s0, int64_t e0,
                        void (*gap)(enc_ctx *, int64_t, int64_t)) {
    const mt_tokenizer *tok = c->tok;
    const uint8_t *t = c->text;
    int64_t start_offset = s0, p = s0;
    if (set->n > 0) {
        while (p < e0) {
            if (!set->first_byte[t[p]]) {
                p++;
                continue;
            }
            const tok_added *hit = NULL;
            for (int32_t j = set->fb_off[t[p]]; j < set->fb_off[t[p] + 1]; j++) {
                const tok_added *a = &tok->added[set->order[j]];
                if (a->len <= e0 - p && memcmp(t + p, a->content, (size_t)a->len) == 0) {
                    hit = a;
                    break;
                }
            }
            if (!hit) {
                p++;
                continue;
            }
            if (c->plain && hit->special) { // HF skips the match: its text stays in the gap
                p += hit->len;
                continue;
            }
            int64_t start = p, stop = p + hit->len;
            if (hit->lstrip) {
                int64_t q = start;
                while (q > s0) {
                    int64_t r = char_start(t, q - 1);
                    int len;
                    if (!tok_is_whitespace(tok_utf8_decode(t + r, &len))) break;
                    q = r;
                }
                start = q > start_offset ? q : start_offset;
            }
            if (hit->rstrip) {
                while (stop < e0) {
                    int len;
                    if (!tok_is_whitespace(tok_utf8_decode(t + stop, &len))) break;
                    stop += len;
                }
            }
            if (start_offset < start) gap(c, start_offset, start);
            tok_buf_reserve(c->out, 1);
            int lead = 0, trail = 0;
            if (tok->pp_trim) ws_counts(t, start, stop, &lead, &trail);
            emit(c, hit->id, start, stop, lead, trail);
            start_offset = stop;
            p += hit->len; // the automaton resumes after the match itself
        }
    }
    if (start_offset < e0) gap(c, start_offset, e0);
}

static void gap_pretokenize(enc_ctx *c, int64_t s, int64_t e) {
    piece p = {.start = s, .end = e, .prefix = false};
    run_steps(c, 0, p);
}

static void gap_normalized(enc_ctx *c, int64_t s, int64_t e) {
    split_added(c, &c->tok->set_norm, s, e, gap_pretokenize);
}

static int64_t encode_with(const mt_tokenizer *tok, const char *text, size_t len, mt_token_buf *out,
                           tok_piece_fn on_piece, void *piece_arg, bool plain, char *err,
                           size_t errlen) {
    const uint8_t *t = (const uint8_t *)text;
    size_t bad = 0;
    if ((len > 0 && !text) || !mt_utf8_valid((const char *)t, len, &bad)) {
        snprintf(err, errlen, "the text is not valid UTF-8 (byte %zu)", bad);
        return -1;
    }
    tok_work local = {0}, *w = &local;
    // The word cache and the reusable scratch belong to whoever holds the lock; concurrent
    // callers work without them (same result, just slower).
    bool locked = tok->cache && pthread_mutex_trylock(&tok->cache->lock) == 0;
    if (locked) {
        w = tok->work;
        w->cache = tok->cache;
    }
    enc_ctx c = {.tok = tok,
                 .w = w,
                 .text = t,
                 .out = out,
                 .n0 = out->n,
                 .base = tok_ucd_text_unchanged(t, len),
                 .on_piece = on_piece,
                 .piece_arg = piece_arg,
                 .plain = plain};
    split_added(&c, &tok->set_raw, 0, (int64_t)len, gap_normalized);
    if (locked) {
        w->cache = NULL;
        pthread_mutex_unlock(&tok->cache->lock);
    } else {
        tok_work_free(&local);
    }
    if (c.fail_rc) {
        int32_t k = (int32_t)(c.fail_step - tok->steps);
        char why[256];
        pcre2_get_error_message(c.fail_rc, (PCRE2_UCHAR *)why, sizeof(why));
        snprintf(err, errlen,
                 "%s: pre_tokenizer step %d of %d (%s, pattern '%.200s'): PCRE2 error %d (%s) "
                 "searching from byte %lld of the text",
                 tok->path, k + 1, tok->n_steps,
                 c.fail_step->kind == TOK_STEP_SPLIT ? "Split" : "ByteLevel", c.fail_step->pattern,
                 c.fail_rc, why, (long long)c.fail_at);
        out->n = c.n0; // nothing appended
        return -1;
    }
    return out->n - c.n0;
}

int64_t mt_tokenizer_encode_err(const mt_tokenizer *tok, const char *text, size_t len,
                                mt_token_buf *out, char *err, size_t errlen) {
    return encode_with(tok, text, len, out, NULL, NULL, false, err, errlen);
}

int64_t mt_tokenizer_encode_plain(const mt_tokenizer *tok, const char *text, size_t len,
                                  mt_token_buf *out, char *err, size_t errlen) {
    return encode_with(tok, text, len, out, NULL, NULL, true, err, errlen);
}

int64_t tok_pretokenize(const mt_tokenizer *tok, const char *text, size_t len,
                        tok_piece_fn on_piece, void *arg, char *err, size_t errlen) {
    mt_token_buf added = {0}; // the added tokens, not reported
    int64_t n = encode_with(tok, text, len, &added, on_piece, arg, false, err, errlen);
    mt_token_buf_free(&added);
    return n < 0 ? -1 : 0;
}

int64_t mt_tokenizer_encode(const mt_tokenizer *tok, const char *text, size_t len,
                            mt_token_buf *out) {
    if ((len > 0 && !text) || !mt_utf8_valid(text, len, NULL)) return -1;
    char err[1024];
    const int64_t n = mt_tokenizer_encode_err(tok, text, len, out, err, sizeof(err));
    if (n < 0) MT_DIE("tokenizer: %s", err); // a regex failed: the text itself is fine
    return n;
}
