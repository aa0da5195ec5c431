/* gsm8k.c: GSM8K problems for evaluation, annotation stripping. */
#include "data/gsm8k.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "jinja/jinja.h"

static char *dup_value(jinja_value *v) {
    MT_CHECK(v && v->type == JINJA_STR, "a gsm8k conversation without its texts");
    char *d = mt_malloc(v->u.s.len + 1, "gsm8k field");
    memcpy(d, v->u.s.p, v->u.s.len + 1);
    return d;
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
    jinja_heap *h = jinja_heap_new(0);
    for (int64_t i = 0; i < c.n; i++) { /* {"messages": [user question, assistant answer]} */
        jinja_heap_reset(h);
        jinja_value conv;
        char why[128];
        MT_CHECK(jinja_json_parse(h, c.json[i], c.json_len[i], &conv, why, sizeof(why)) == 0,
                 "%s:%lld: %s", path, (long long)c.line[i], why);
        jinja_value *msgs = jinja_dict_get_str(conv, "messages");
        MT_CHECK(msgs && msgs->type == JINJA_LIST && msgs->u.list->n == 2,
                 "%s:%lld: not a gsm8k conversation", path, (long long)c.line[i]);
        out->question[i] = dup_value(jinja_dict_get_str(msgs->u.list->items[0], "content"));
        out->answer[i] = dup_value(jinja_dict_get_str(msgs->u.list->items[1], "content"));
        out->line[i] = c.line[i];
    }
    jinja_heap_free(h);
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
