/* gsm8k.c: jsonl reader, annotation stripping, sample rendering + labels. */
#include "data/gsm8k.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/check.h"
#include "data/dataset.h"

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = mt_malloc(n + 1, "gsm8k field");
    memcpy(d, s, n + 1);
    return d;
}

int mt_gsm8k_parse_line(const char *path, int64_t line_no, const char *line, size_t len,
                        char **question, char **answer, char *err) {
    cJSON *obj = mt_json_record_parse(path, line_no, line, len, NULL, err);
    if (!obj) return -1;
    const char *q = mt_json_text_field(obj, "question", path, line_no, err);
    const char *a = q ? mt_json_text_field(obj, "answer", path, line_no, err) : NULL;
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
    mt_conv_set c;
    if (mt_conv_read(path, MT_FORMAT_GSM8K, skip_bad, &c, err) != 0) return -1;
    out->n = c.n;
    out->n_lines = c.n_lines;
    out->n_skipped = c.n_skipped;
    memcpy(out->first_skip, c.first_skip, MT_ERR_LEN);
    const size_t n = (size_t)(c.n ? c.n : 1);
    out->question = mt_malloc(sizeof(char *) * n, "gsm8k questions");
    out->answer = mt_malloc(sizeof(char *) * n, "gsm8k answers");
    out->line = mt_malloc(sizeof(int64_t) * n, "gsm8k lines");
    for (int64_t i = 0; i < c.n; i++) { /* the set's texts change hands */
        out->question[i] = (char *)c.msgs[c.first[i]].text;
        out->answer[i] = (char *)c.msgs[c.first[i] + 1].text;
        out->line[i] = c.line[i];
    }
    c.n_msgs = 0;
    mt_conv_set_free(&c);
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

void mt_conv_set_strip_annotations(mt_conv_set *s) {
    for (int64_t m = 0; m < s->n_msgs; m++)
        if (s->msgs[m].role == MT_CHAT_ASSISTANT)
            s->msgs[m].len = mt_gsm8k_strip_annotations((char *)s->msgs[m].text);
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
    free(b->msgs);
    *b = (mt_sample_builder){0};
}

int mt_sample_build(mt_sample_builder *b, const char *question, const char *answer, char *err) {
    b->answer.len = 0;
    mt_strbuf_append(&b->answer, answer, strlen(answer));
    if (b->opts.strip_annotations) b->answer.len = mt_gsm8k_strip_annotations(b->answer.p);
    const mt_chat_msg msgs[2] = {{MT_CHAT_USER, question, strlen(question)},
                                 {MT_CHAT_ASSISTANT, b->answer.p, b->answer.len}};
    return mt_sample_build_chat(b, msgs, 2, err);
}

int mt_sample_build_chat(mt_sample_builder *b, const mt_chat_msg *conv, int n_conv, char *err) {
    /* the recipe's system text, unless the conversation has its own */
    bool own_system = false;
    for (int i = 0; i < n_conv; i++) own_system |= conv[i].role == MT_CHAT_SYSTEM;
    const mt_chat_msg *msgs = conv;
    int n_msgs = n_conv;
    if (b->opts.system && !own_system) {
        if (n_conv + 1 > b->msg_cap) {
            free(b->msgs);
            b->msg_cap = 2 * (n_conv + 1);
            b->msgs = mt_malloc(sizeof(mt_chat_msg) * (size_t)b->msg_cap, "sample messages");
        }
        b->msgs[0] = (mt_chat_msg){MT_CHAT_SYSTEM, b->opts.system, strlen(b->opts.system)};
        memcpy(b->msgs + 1, conv, sizeof(mt_chat_msg) * (size_t)n_conv);
        msgs = b->msgs;
        n_msgs = n_conv + 1;
    }
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
    /* the trained turns: every assistant turn, or the last one only */
    mt_chat_rendered trained = b->rendered;
    if (b->opts.last_assistant_only && trained.n_spans > 1) {
        trained.spans += 2 * (trained.n_spans - 1);
        trained.n_spans = 1;
    }
    mt_chat_token_mask(&trained, off, n, b->mask);
    /* the closing <end_of_sentence> of each trained turn is a target too */
    for (int s = 0; s < trained.n_spans; s++) {
        int64_t end = trained.spans[2 * s + 1];
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
