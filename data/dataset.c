/* dataset.c: records of a jsonl file or a JSON array, the format table, auto detection. */
#include "data/dataset.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/file_io.h"
#include "data/chat.h"
#include "data/dataset_internal.h"

static const char *const format_names[MT_FORMAT_COUNT] = {"auto", "gsm8k", "messages", "sharegpt",
                                                          "alpaca"};

int mt_data_format_parse(const char *name) {
    for (int f = 0; f < MT_FORMAT_COUNT; f++)
        if (!strcmp(name, format_names[f])) return f;
    return -1;
}

const char *mt_data_format_name(mt_data_format f) {
    return f >= 0 && f < MT_FORMAT_COUNT ? format_names[f] : "?";
}

const char *mt_data_format_list(void) { return "auto, gsm8k, messages, sharegpt, alpaca"; }

static bool is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

/* Offset of the first NUL character of s[0, n): a NUL byte, or a \u0000 escape inside a
 * string (refused: C strings downstream, the tokenizer's among them, would end there and cut
 * the text); n when there is none. */
static size_t first_nul(const char *s, size_t n) {
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == 0) return i;
        if (s[i] == '"') {
            in_string = !in_string;
        } else if (in_string && s[i] == '\\') {
            if (i + 6 <= n && s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0) return i;
            i++; /* the escaped character (\" or \\) */
        }
    }
    return n;
}

/* UTF-8 and NUL checks over s[0, n). */
static bool record_bytes_ok(const char *path, int64_t line_no, const char *s, size_t n, char *err) {
    size_t bad;
    if (!mt_utf8_valid(s, n, &bad)) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: invalid UTF-8 at column %zu", path, (long long)line_no,
                 bad + 1);
        return false;
    }
    const size_t nul = first_nul(s, n);
    if (nul < n) {
        snprintf(err, MT_ERR_LEN,
                 "%s:%lld: a NUL character (%s) at column %zu: not supported, "
                 "the text would end there",
                 path, (long long)line_no, s[nul] ? "\\u0000" : "a zero byte", nul + 1);
        return false;
    }
    return true;
}

/* A record's value: the byte checks, then the JSON (json.loads' values; a key twice refused).
 * With used != NULL the record may be followed by more text (a JSON array's next element):
 * *used gets the bytes it took (0: the array itself is broken). */
static int record_value(jinja_heap *h, const char *path, int64_t line_no, const char *s, size_t n,
                        size_t *used, jinja_value *out, char *err) {
    if (!used && !record_bytes_ok(path, line_no, s, n, err)) return -1;
    char why[256];
    size_t took = n;
    int rc = used ? jinja_json_parse_prefix(h, s, n, out, &took, why, sizeof(why))
                  : jinja_json_parse(h, s, n, out, why, sizeof(why));
    if (used) *used = rc == 0 ? took : 0;
    if (rc != 0) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: malformed JSON: %s", path, (long long)line_no, why);
        return -1;
    }
    if (used && !record_bytes_ok(path, line_no, s, took, err)) return -1;
    return 0;
}

/* ---- the conversation set ---- */

void mt_conv_set_free(mt_conv_set *s) {
    for (int64_t i = 0; i < s->n; i++) free(s->json[i]);
    free(s->json);
    free(s->json_len);
    free(s->line);
    *s = (mt_conv_set){0};
}

int mt_rec_fail(const mt_rec_ctx *r, const char *fmt, ...) {
    int k = snprintf(r->err, MT_ERR_LEN, "%s:%lld: ", r->path, (long long)r->line);
    va_list ap;
    va_start(ap, fmt);
    if (k >= 0 && k < MT_ERR_LEN) vsnprintf(r->err + k, MT_ERR_LEN - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

typedef struct {
    mt_conv_set *set;
    int64_t cap;
} conv_build;

/* The walk over a file's records (mt_records_parse). */
typedef struct {
    jinja_heap *h;
    mt_record_fn fn;
    void *ctx;
    bool skip_bad;
    mt_record_counts *counts;
} rec_walk;

static void conv_add(conv_build *b, const char *json, size_t len, int64_t line_no) {
    mt_conv_set *s = b->set;
    if (s->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 1024;
        s->json = realloc(s->json, sizeof(char *) * (size_t)b->cap);
        s->json_len = realloc(s->json_len, sizeof(size_t) * (size_t)b->cap);
        s->line = realloc(s->line, sizeof(int64_t) * (size_t)b->cap);
        MT_CHECK(s->json && s->json_len && s->line, "out of memory reading %lld records",
                 (long long)b->cap);
    }
    char *t = mt_malloc(len + 1, "conversation");
    memcpy(t, json, len + 1);
    s->json[s->n] = t;
    s->json_len[s->n] = len;
    s->line[s->n++] = line_no;
}

/* "question", "answer" (at most ~40 keys listed) for error messages. */
static void record_keys(jinja_value obj, char *out, size_t n) {
    out[0] = 0;
    size_t at = 0;
    for (int64_t k = 0; k < obj.u.dict->n && at + 1 < n; k++) {
        jinja_value key = obj.u.dict->keys[k];
        at += (size_t)snprintf(out + at, n - at, "%s\"%.*s\"", k ? ", " : "",
                               (int)(key.u.s.len > 40 ? 40 : key.u.s.len), key.u.s.p);
    }
    if (!obj.u.dict->n) snprintf(out, n, "none");
}

/* The format whose required keys obj has, or MT_FORMAT_AUTO when none fits. */
static mt_data_format format_detect(jinja_value obj) {
    for (int f = MT_FORMAT_GSM8K; f < MT_FORMAT_COUNT; f++)
        if (mt_format_readers[f].fits(obj)) return (mt_data_format)f;
    return MT_FORMAT_AUTO;
}

/* One record: detect (first record under auto), read the conversation, check it as the
 * template will see it, keep it as compact JSON. */
static int record_read(void *ctx, jinja_heap *h, jinja_value obj, const mt_rec_ctx *rc_) {
    conv_build *b = ctx;
    mt_conv_set *s = b->set;
    char keys[300];
    const mt_rec_ctx r = *rc_;
    const char *path = r.path;
    const int64_t line_no = r.line;
    char *err = r.err;
    if (obj.type != JINJA_DICT) return mt_rec_fail(&r, "not a JSON object");
    if (s->format == MT_FORMAT_AUTO) {
        mt_data_format f = format_detect(obj);
        if (f == MT_FORMAT_AUTO) {
            record_keys(obj, keys, sizeof(keys));
            return mt_rec_fail(&r,
                               "data.format auto: the record fits no format (keys: %s; gsm8k "
                               "needs question+answer, messages messages, sharegpt "
                               "conversations, alpaca instruction+output)",
                               keys);
        }
        s->format = f;
        fprintf(stderr, "data: %s: format %s (auto, from the keys of line %lld)\n", path,
                mt_data_format_name(f), (long long)line_no);
    }
    const mt_format_reader *fr = &mt_format_readers[s->format];
    jinja_value conv;
    if (fr->read(h, obj, &conv, &r) != 0) {
        if (!fr->fits(obj)) { /* the reader named the missing key; add what the record has */
            record_keys(obj, keys, sizeof(keys));
            const size_t at = strlen(err);
            snprintf(err + at, MT_ERR_LEN - at, " (a %s record needs %s; this one has %s)",
                     fr->name, fr->needs, keys);
        }
        return -1;
    }
    /* kept as compact JSON; then what the template will see: the normalisation of data/chat.h
     * must go through (after the dump: it parses tool-call arguments in place) */
    jinja_buf js = {0};
    char why[MT_ERR_LEN - 64];
    jinja_json_opts o = {.indent = -1, .item_sep = ",", .key_sep = ":"};
    if (jinja_json_dump(conv, &o, &js, why, sizeof(why)) != 0) {
        jinja_buf_free(&js);
        return mt_rec_fail(&r, "%s", why);
    }
    mt_chat_conv c;
    int rc = mt_chat_conv_from_value(h, conv, false, &c, why, sizeof(why));
    bool assistant = false;
    for (int i = 0; rc == 0 && i < mt_chat_conv_len(&c); i++)
        assistant |= !strcmp(mt_chat_conv_role(&c, i), "assistant");
    if (rc != 0)
        mt_rec_fail(&r, "%s", why);
    else if (!assistant)
        rc = mt_rec_fail(&r, "no assistant message: nothing to train on");
    if (rc == 0) conv_add(b, js.p, js.len, line_no);
    jinja_buf_free(&js);
    return rc;
}

/* A record that failed (rc, with line_err): an error, or counted under skip_bad (a fatal
 * failure, rc -2, never is). */
static bool record_failed(rec_walk *w, int rc, const char *line_err, char *err) {
    if (!w->skip_bad || rc == -2) {
        memcpy(err, line_err, MT_ERR_LEN);
        return false;
    }
    if (w->counts->n_skipped++ == 0) memcpy(w->counts->first_skip, line_err, MT_ERR_LEN);
    return true;
}

/* The callback on a parsed record. */
static int record_call(rec_walk *w, jinja_value obj, const char *path, int64_t line_no,
                       char *line_err) {
    const mt_rec_ctx r = {path, line_no, line_err};
    return w->fn(w->ctx, w->h, obj, &r);
}

static int read_jsonl(rec_walk *b, const char *path, const char *text, size_t len, char *err) {
    int64_t line_no = 0;
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        const char *line = text + pos;
        size_t n = end - pos;
        pos = end + 1;
        line_no++;
        if (n > 0 && line[n - 1] == '\r') n--;
        if (is_blank(line, n)) continue;
        b->counts->n_lines++;
        char line_err[MT_ERR_LEN];
        jinja_heap_reset(b->h);
        jinja_value obj;
        int rc = record_value(b->h, path, line_no, line, n, NULL, &obj, line_err);
        if (rc == 0) rc = record_call(b, obj, path, line_no, line_err);
        if (rc != 0 && !record_failed(b, rc, line_err, err)) return -1;
    }
    return 0;
}

/* A JSON array of records, each parsed on its own so that errors name its line. A malformed
 * array (no ',' or ']' after an element) ends the read whatever skip_bad says. */
static int read_array(rec_walk *b, const char *path, const char *text, size_t len, char *err) {
    int64_t line_no = 1;
    size_t pos = 0, counted = 0;
    bool first = true;
#define SKIP_WS()                                                                                  \
    while (pos < len &&                                                                            \
           (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\r' || text[pos] == '\n'))      \
    pos++
    SKIP_WS();
    pos++; /* the '[' */
    for (;;) {
        SKIP_WS();
        for (; counted < pos; counted++) line_no += text[counted] == '\n';
        if (pos < len && text[pos] == ']' && first) break;
        size_t used = 0;
        char line_err[MT_ERR_LEN];
        jinja_heap_reset(b->h);
        jinja_value obj;
        int rc = record_value(b->h, path, line_no, text + pos, len - pos, &used, &obj, line_err);
        if (rc != 0 && used == 0) { /* the array itself is broken: nothing to resume from */
            memcpy(err, line_err, MT_ERR_LEN);
            return -1;
        }
        b->counts->n_lines++;
        if (rc == 0) rc = record_call(b, obj, path, line_no, line_err);
        if (rc != 0 && !record_failed(b, rc, line_err, err)) return -1;
        pos += used;
        first = false;
        SKIP_WS();
        if (pos < len && text[pos] == ',') {
            const size_t comma = pos++;
            SKIP_WS();
            if (pos < len && text[pos] == ']') { /* json.loads refuses it too */
                size_t col = comma;
                while (col > 0 && text[col - 1] != '\n') col--;
                for (; counted < comma; counted++) line_no += text[counted] == '\n';
                snprintf(err, MT_ERR_LEN,
                         "%s:%lld:%zu: malformed JSON array: a trailing comma before its ']' "
                         "(JSON allows none)",
                         path, (long long)line_no, comma - col + 1);
                return -1;
            }
            continue;
        }
        if (pos < len && text[pos] == ']') break;
        for (; counted < pos; counted++) line_no += text[counted] == '\n';
        snprintf(err, MT_ERR_LEN, "%s:%lld: malformed JSON array: expected ',' or ']'", path,
                 (long long)line_no);
        return -1;
    }
    pos++;
    SKIP_WS();
#undef SKIP_WS
    if (pos < len) {
        for (; counted < pos; counted++) line_no += text[counted] == '\n';
        snprintf(err, MT_ERR_LEN, "%s:%lld: extra text after the JSON array", path,
                 (long long)line_no);
        return -1;
    }
    return 0;
}

int mt_conv_read(const char *path, mt_data_format fmt, bool skip_bad, mt_conv_set *out, char *err) {
    *out = (mt_conv_set){0};
    size_t len;
    char *text = mt_file_read(path, &len, err);
    if (!text) return -1;
    int rc = mt_conv_parse(path, text, len, fmt, skip_bad, out, err);
    free(text);
    return rc;
}

int mt_conv_parse(const char *path, const char *text, size_t len, mt_data_format fmt, bool skip_bad,
                  mt_conv_set *out, char *err) {
    *out = (mt_conv_set){0};
    MT_CHECK(fmt >= 0 && fmt < MT_FORMAT_COUNT, "mt_conv_parse: format %d", (int)fmt);
    out->format = fmt;
    conv_build b = {.set = out};
    mt_record_counts counts = {0};
    int rc = mt_records_parse(path, text, len, skip_bad, record_read, &b, &counts, err);
    out->n_lines = counts.n_lines;
    out->n_skipped = counts.n_skipped;
    memcpy(out->first_skip, counts.first_skip, MT_ERR_LEN);
    if (rc != 0) mt_conv_set_free(out);
    return rc;
}

int mt_records_parse(const char *path, const char *text, size_t len, bool skip_bad, mt_record_fn fn,
                     void *ctx, mt_record_counts *counts, char *err) {
    rec_walk w = {.h = jinja_heap_new((size_t)256 << 20),
                  .fn = fn,
                  .ctx = ctx,
                  .skip_bad = skip_bad,
                  .counts = counts};
    size_t lead = 0;
    while (lead < len && is_blank(text + lead, 1)) lead++;
    const bool array = lead < len && text[lead] == '[';
    int rc = array ? read_array(&w, path, text, len, err) : read_jsonl(&w, path, text, len, err);
    jinja_heap_free(w.h);
    return rc;
}
