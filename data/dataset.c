/* dataset.c: records of a jsonl file or a JSON array, the format table, auto detection. */
#include "data/dataset.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/check.h"
#include "data/data_io.h"
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

const char *mt_json_text_field(const cJSON *obj, const char *name, const char *path,
                               int64_t line_no, char *err) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!f) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: missing field \"%s\"", path, (long long)line_no, name);
        return NULL;
    }
    if (!cJSON_IsString(f)) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: field \"%s\" is not a string", path, (long long)line_no,
                 name);
        return NULL;
    }
    size_t n = strlen(f->valuestring), bad;
    if (!mt_utf8_valid(f->valuestring, n, &bad)) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: field \"%s\" is not valid UTF-8 (byte %zu)", path,
                 (long long)line_no, name, bad);
        return NULL;
    }
    if (is_blank(f->valuestring, n)) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: empty %s", path, (long long)line_no, name);
        return NULL;
    }
    return f->valuestring;
}

/* Offset of the first NUL character of s[0, n): a NUL byte, or a \u0000 escape inside a
 * string (cJSON decodes it into the C string, which then ends there: the text would be cut);
 * n when there is none. */
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

cJSON *mt_json_record_parse(const char *path, int64_t line_no, const char *line, size_t len,
                            size_t *used, char *err) {
    /* a jsonl line is checked first (its column numbers are the line's); an array element
     * once its extent is known */
    if (!used && !record_bytes_ok(path, line_no, line, len, err)) return NULL;
    const char *end = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts(line, len, &end, false);
    if (!obj) {
        size_t col = end && end >= line ? (size_t)(end - line) + 1 : 1;
        snprintf(err, MT_ERR_LEN, "%s:%lld: malformed JSON at column %zu", path, (long long)line_no,
                 col);
        return NULL;
    }
    if (used) {
        *used = (size_t)(end - line);
        if (!record_bytes_ok(path, line_no, line, *used, err)) {
            cJSON_Delete(obj);
            return NULL;
        }
    } else if (!is_blank(end, len - (size_t)(end - line))) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: malformed JSON: extra text at column %zu", path,
                 (long long)line_no, (size_t)(end - line) + 1);
        cJSON_Delete(obj);
        return NULL;
    }
    if (!cJSON_IsObject(obj)) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: not a JSON object", path, (long long)line_no);
        cJSON_Delete(obj);
        return NULL;
    }
    char key_path[256];
    if (mt_json_duplicate_key(obj, NULL, key_path, sizeof(key_path))) {
        snprintf(err, MT_ERR_LEN,
                 "%s:%lld: key \"%.200s\" appears twice (readers disagree on which one counts)",
                 path, (long long)line_no, key_path);
        cJSON_Delete(obj);
        return NULL;
    }
    return obj;
}

/* ---- the conversation set ---- */

void mt_conv_set_free(mt_conv_set *s) {
    for (int64_t i = 0; i < s->n_msgs; i++) free((char *)s->msgs[i].text);
    free(s->msgs);
    free(s->first);
    free(s->line);
    *s = (mt_conv_set){0};
}

void mt_conv_add_msg(mt_conv_build *b, mt_chat_role role, const char *text, size_t len) {
    mt_conv_set *s = b->set;
    if (s->n_msgs == b->cap_msgs) {
        b->cap_msgs = b->cap_msgs ? 2 * b->cap_msgs : 1024;
        s->msgs = realloc(s->msgs, sizeof(mt_chat_msg) * (size_t)b->cap_msgs);
        MT_CHECK(s->msgs, "out of memory reading %lld messages", (long long)b->cap_msgs);
    }
    char *t = mt_malloc(len + 1, "message text");
    memcpy(t, text, len);
    t[len] = 0;
    s->msgs[s->n_msgs++] = (mt_chat_msg){role, t, len};
}

/* Drops the messages of a record that turned out bad. */
static void conv_rollback(mt_conv_set *s, int64_t n_msgs) {
    while (s->n_msgs > n_msgs) free((char *)s->msgs[--s->n_msgs].text);
}

static void conv_commit(mt_conv_build *b, int64_t line_no) {
    mt_conv_set *s = b->set;
    if (s->n + 1 >= b->cap_conv) {
        b->cap_conv = b->cap_conv ? 2 * b->cap_conv : 1024;
        s->first = realloc(s->first, sizeof(int64_t) * (size_t)(b->cap_conv + 1));
        s->line = realloc(s->line, sizeof(int64_t) * (size_t)b->cap_conv);
        MT_CHECK(s->first && s->line, "out of memory reading %lld records", (long long)b->cap_conv);
    }
    s->line[s->n] = line_no;
    s->first[++s->n] = s->n_msgs;
}

/* "question", "answer" (at most ~40 keys listed) for error messages. */
static void record_keys(const cJSON *obj, char *out, size_t n) {
    out[0] = 0;
    size_t at = 0;
    int k = 0;
    for (const cJSON *c = obj->child; c && at + 1 < n; c = c->next, k++)
        at += (size_t)snprintf(out + at, n - at, "%s\"%.40s\"", k ? ", " : "", c->string);
    if (!k) snprintf(out, n, "none");
}

/* The format whose required keys obj has, or MT_FORMAT_AUTO when none fits. */
static mt_data_format format_detect(const cJSON *obj) {
    for (int f = MT_FORMAT_GSM8K; f < MT_FORMAT_COUNT; f++)
        if (mt_format_readers[f].fits(obj)) return (mt_data_format)f;
    return MT_FORMAT_AUTO;
}

/* One record: detect (first record under auto), check the keys, read the conversation. */
static int record_read(mt_conv_build *b, const cJSON *obj, const char *path, int64_t line_no,
                       char *err) {
    mt_conv_set *s = b->set;
    char keys[300];
    if (s->format == MT_FORMAT_AUTO) {
        mt_data_format f = format_detect(obj);
        if (f == MT_FORMAT_AUTO) {
            record_keys(obj, keys, sizeof(keys));
            snprintf(err, MT_ERR_LEN,
                     "%s:%lld: data.format auto: the record fits no format (keys: %s; gsm8k "
                     "needs question+answer, messages messages, sharegpt conversations, alpaca "
                     "instruction+output)",
                     path, (long long)line_no, keys);
            return -1;
        }
        s->format = f;
        fprintf(stderr, "data: %s: format %s (auto, from the keys of line %lld)\n", path,
                mt_data_format_name(f), (long long)line_no);
    }
    const mt_format_reader *r = &mt_format_readers[s->format];
    const int64_t n0 = s->n_msgs;
    if (r->read(b, obj, path, line_no, err) != 0) {
        conv_rollback(s, n0);
        if (!r->fits(obj)) { /* the reader named the missing key; add what the record has */
            record_keys(obj, keys, sizeof(keys));
            const size_t at = strlen(err);
            snprintf(err + at, MT_ERR_LEN - at, " (a %s record needs %s; this one has %s)", r->name,
                     r->needs, keys);
        }
        return -1;
    }
    bool assistant = false;
    for (int64_t i = n0; i < s->n_msgs; i++) assistant |= s->msgs[i].role == MT_CHAT_ASSISTANT;
    if (!assistant) {
        conv_rollback(s, n0);
        snprintf(err, MT_ERR_LEN, "%s:%lld: no assistant message: nothing to train on", path,
                 (long long)line_no);
        return -1;
    }
    conv_commit(b, line_no);
    return 0;
}

/* A record that failed with line_err: an error, or counted under skip_bad. */
static bool record_failed(mt_conv_set *s, bool skip_bad, const char *line_err, char *err) {
    if (!skip_bad) {
        memcpy(err, line_err, MT_ERR_LEN);
        return false;
    }
    if (s->n_skipped++ == 0) memcpy(s->first_skip, line_err, MT_ERR_LEN);
    return true;
}

static int read_jsonl(mt_conv_build *b, const char *path, const char *text, size_t len,
                      bool skip_bad, char *err) {
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
        b->set->n_lines++;
        char line_err[MT_ERR_LEN];
        cJSON *obj = mt_json_record_parse(path, line_no, line, n, NULL, line_err);
        int rc = obj ? record_read(b, obj, path, line_no, line_err) : -1;
        cJSON_Delete(obj);
        if (rc != 0 && !record_failed(b->set, skip_bad, line_err, err)) return -1;
    }
    return 0;
}

/* A JSON array of records, each parsed on its own so that errors name its line. A malformed
 * array (no ',' or ']' after an element) ends the read whatever skip_bad says. */
static int read_array(mt_conv_build *b, const char *path, const char *text, size_t len,
                      bool skip_bad, char *err) {
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
        cJSON *obj = mt_json_record_parse(path, line_no, text + pos, len - pos, &used, line_err);
        if (!obj && used == 0) { /* the array itself is broken: nothing to resume from */
            memcpy(err, line_err, MT_ERR_LEN);
            return -1;
        }
        b->set->n_lines++;
        int rc = obj ? record_read(b, obj, path, line_no, line_err) : -1;
        cJSON_Delete(obj);
        if (rc != 0 && !record_failed(b->set, skip_bad, line_err, err)) return -1;
        pos += used;
        first = false;
        SKIP_WS();
        if (pos < len && text[pos] == ',') {
            pos++;
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
    out->first = mt_malloc(sizeof(int64_t), "conversations");
    out->first[0] = 0;
    mt_conv_build b = {.set = out, .cap_conv = 0};
    size_t lead = 0;
    while (lead < len && is_blank(text + lead, 1)) lead++;
    const bool array = lead < len && text[lead] == '[';
    int rc = array ? read_array(&b, path, text, len, skip_bad, err)
                   : read_jsonl(&b, path, text, len, skip_bad, err);
    if (rc != 0) mt_conv_set_free(out);
    return rc;
}
