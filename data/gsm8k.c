/* gsm8k.c: jsonl reader, annotation stripping, sample rendering + labels. */
#include "data/gsm8k.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/check.h"

static bool is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = mt_malloc(n + 1, "gsm8k field");
    memcpy(d, s, n + 1);
    return d;
}

/* The string field `name`, checked: present, a string, valid UTF-8, not blank. */
static const char *get_field(const cJSON *obj, const char *name, const char *path, int64_t line_no,
                             char *err) {
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

/* Offset of the first NUL character of line[0, n): a NUL byte, or a \u0000 escape inside a
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

int mt_gsm8k_parse_line(const char *path, int64_t line_no, const char *line, size_t len,
                        char **question, char **answer, char *err) {
    size_t bad;
    if (!mt_utf8_valid(line, len, &bad)) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: invalid UTF-8 at column %zu", path, (long long)line_no,
                 bad + 1);
        return -1;
    }
    const size_t nul = first_nul(line, len);
    if (nul < len) {
        snprintf(err, MT_ERR_LEN,
                 "%s:%lld: a NUL character (%s) at column %zu: not supported, "
                 "the text would end there",
                 path, (long long)line_no, line[nul] ? "\\u0000" : "a zero byte", nul + 1);
        return -1;
    }
    const char *end = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts(line, len, &end, false);
    if (!obj) {
        size_t col = end && end >= line ? (size_t)(end - line) + 1 : 1;
        snprintf(err, MT_ERR_LEN, "%s:%lld: malformed JSON at column %zu", path, (long long)line_no,
                 col);
        return -1;
    }
    if (!is_blank(end, len - (size_t)(end - line))) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: malformed JSON: extra text at column %zu", path,
                 (long long)line_no, (size_t)(end - line) + 1);
        cJSON_Delete(obj);
        return -1;
    }
    if (!cJSON_IsObject(obj)) {
        snprintf(err, MT_ERR_LEN, "%s:%lld: not a JSON object", path, (long long)line_no);
        cJSON_Delete(obj);
        return -1;
    }
    char key_path[256];
    if (mt_json_duplicate_key(obj, NULL, key_path, sizeof(key_path))) {
        snprintf(err, MT_ERR_LEN,
                 "%s:%lld: key \"%.200s\" appears twice (readers disagree on which one counts)",
                 path, (long long)line_no, key_path);
        cJSON_Delete(obj);
        return -1;
    }
    const char *q = get_field(obj, "question", path, line_no, err);
    const char *a = q ? get_field(obj, "answer", path, line_no, err) : NULL;
    if (a) {
        *question = dup_str(q);
        *answer = dup_str(a);
    }
    cJSON_Delete(obj);
    return a ? 0 : -1;
}

void mt_gsm8k_set_free(mt_gsm8k_set *s) {
    for (int64_t i = 0; i < s->n; i++) {
        free(s->question[i]);
        free(s->answer[i]);
    }
    free(s->question);
    free(s->answer);
    free(s->line);
    *s = (mt_gsm8k_set){0};
}

int mt_gsm8k_read(const char *path, bool skip_bad, mt_gsm8k_set *out, char *err) {
    *out = (mt_gsm8k_set){0};
    size_t len;
    char *text = mt_file_read(path, &len, err);
    if (!text) return -1;
    int64_t cap = 0;
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
        out->n_lines++;
        char *q, *a, line_err[MT_ERR_LEN];
        if (mt_gsm8k_parse_line(path, line_no, line, n, &q, &a, line_err) != 0) {
            if (!skip_bad) {
                memcpy(err, line_err, MT_ERR_LEN);
                free(text);
                mt_gsm8k_set_free(out);
                return -1;
            }
            if (out->n_skipped++ == 0) memcpy(out->first_skip, line_err, MT_ERR_LEN);
            continue;
        }
        if (out->n == cap) {
            cap = cap ? 2 * cap : 1024;
            out->question = realloc(out->question, sizeof(char *) * (size_t)cap);
            out->answer = realloc(out->answer, sizeof(char *) * (size_t)cap);
            out->line = realloc(out->line, sizeof(int64_t) * (size_t)cap);
            MT_CHECK(out->question && out->answer && out->line,
                     "out of memory reading %s (%lld records)", path, (long long)cap);
        }
        out->question[out->n] = q;
        out->answer[out->n] = a;
        out->line[out->n] = line_no;
        out->n++;
    }
    free(text);
    return 0;
}

size_t mt_gsm8k_strip_annotations(char *s) {
    size_t r = 0, w = 0, n = strlen(s);
    while (r < n) {
        if (s[r] == '<' && s[r + 1] == '<') {
            size_t e = r + 2;
            bool eq = false;
            while (e + 1 < n && s[e] != '\n' && !(s[e] == '>' && s[e + 1] == '>')) {
                eq |= s[e] == '=';
                e++;
            }
            if (eq && e + 1 < n && s[e] == '>' && s[e + 1] == '>') {
                r = e + 2;
                continue;
            }
        }
        s[w++] = s[r++];
    }
    s[w] = 0;
    return w;
}

void mt_sample_opts_default(mt_sample_opts *o) {
    *o = (mt_sample_opts){
        .system = NULL, .strip_annotations = false, .max_length = 512, .policy = MT_TRUNC_DROP};
}

void mt_sample_builder_init(mt_sample_builder *b, const mt_tokenizer *tok,
                            const mt_sample_opts *o) {
    *b = (mt_sample_builder){0};
    b->tok = tok;
    b->opts = *o;
    MT_CHECK(o->max_length > 1, "sample max_length must be > 1, got %lld",
             (long long)o->max_length);
    b->eos_id = mt_tokenizer_token_to_id(tok, "<end_of_sentence>");
    MT_CHECK(b->eos_id >= 0,
             "the tokenizer has no <end_of_sentence> token: not a MiniMax tokenizer.json");
}

void mt_sample_builder_free(mt_sample_builder *b) {
    mt_chat_rendered_free(&b->rendered);
    mt_token_buf_free(&b->tokens);
    mt_strbuf_free(&b->answer);
    free(b->mask);
    free(b->labels);
    *b = (mt_sample_builder){0};
}

int mt_sample_build(mt_sample_builder *b, const char *question, const char *answer, char *err) {
    b->answer.len = 0;
    mt_strbuf_append(&b->answer, answer, strlen(answer));
    if (b->opts.strip_annotations) b->answer.len = mt_gsm8k_strip_annotations(b->answer.p);

    mt_chat_msg msgs[3];
    int n_msgs = 0;
    if (b->opts.system)
        msgs[n_msgs++] = (mt_chat_msg){MT_CHAT_SYSTEM, b->opts.system, strlen(b->opts.system)};
    msgs[n_msgs++] = (mt_chat_msg){MT_CHAT_USER, question, strlen(question)};
    msgs[n_msgs++] = (mt_chat_msg){MT_CHAT_ASSISTANT, b->answer.p, b->answer.len};
    mt_chat_render(msgs, n_msgs, false, &b->rendered);

    mt_token_buf_clear(&b->tokens);
    char why[MT_ERR_LEN - 64];
    if (mt_tokenizer_encode_err(b->tok, b->rendered.text, b->rendered.len, &b->tokens, why,
                                sizeof(why)) < 0) {
        snprintf(err, MT_ERR_LEN, "the rendered sample cannot be tokenized: %s", why);
        return MT_SAMPLE_ERROR;
    }
    int64_t n = b->tokens.n;
    if (n > b->cap) {
        free(b->mask);
        free(b->labels);
        b->cap = n + n / 2;
        b->mask = mt_malloc((size_t)b->cap, "sample mask");
        b->labels = mt_malloc(sizeof(int32_t) * (size_t)b->cap, "sample labels");
    }
    const int32_t *ids = b->tokens.ids;
    const int64_t *off = b->tokens.offsets;
    mt_chat_token_mask(&b->rendered, off, n, b->mask);
    /* the closing <end_of_sentence> of each assistant turn is a target too */
    for (int s = 0; s < b->rendered.n_spans; s++) {
        int64_t end = b->rendered.spans[2 * s + 1];
        for (int64_t i = 0; i < n; i++)
            if (off[2 * i] == end && ids[i] == b->eos_id) {
                b->mask[i] = 1;
                break;
            }
    }
    b->n_full = n;
    int rc = MT_SAMPLE_OK;
    if (n > b->opts.max_length) {
        if (b->opts.policy == MT_TRUNC_DROP) return MT_SAMPLE_DROPPED;
        n = b->opts.max_length;
        rc = MT_SAMPLE_TRUNCATED;
    }
    b->n_targets = 0;
    for (int64_t i = 0; i < n; i++) {
        b->labels[i] = b->mask[i] ? ids[i] : MT_IGNORE_INDEX;
        b->n_targets += b->mask[i];
    }
    b->ids = ids;
    b->lab = b->labels;
    b->n = n;
    return rc;
}
