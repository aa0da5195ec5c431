/* reply_check.c: streamed against whole-text reply parsing (tests/models/reply_check.h). */
#include "tests/models/reply_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "tests/support/harness.h"

typedef struct {
    mt_strbuf r, c;
    mt_reply_call calls[64];
    int n_calls;
    bool in_reasoning, bad_index;
} joined;

static void join(joined *j, const mt_reply_delta *d) {
    mt_strbuf_append(&j->r, d->reasoning, d->reasoning_len);
    mt_strbuf_append(&j->c, d->content, d->content_len);
    if (d->n_calls && d->first_call != j->n_calls) j->bad_index = true;
    for (int i = 0; i < d->n_calls && j->n_calls < 64; i++) {
        j->calls[j->n_calls].name = strdup(d->calls[i].name);
        j->calls[j->n_calls++].arguments = strdup(d->calls[i].arguments);
    }
    j->in_reasoning = d->in_reasoning;
}

static bool same_str(const char *whole, const mt_strbuf *b) {
    const char *got = b->p ? b->p : "";
    return !strcmp(whole ? whole : "", got);
}

/* Joined deltas equal the whole parse; frees j. */
static bool same(const mt_reply *w, joined *j) {
    bool ok = same_str(w->reasoning, &j->r) && same_str(w->content, &j->c) &&
              w->n_calls == j->n_calls && w->in_reasoning == j->in_reasoning && !j->bad_index;
    for (int i = 0; ok && i < w->n_calls; i++)
        ok = !strcmp(w->calls[i].name, j->calls[i].name) &&
             !strcmp(w->calls[i].arguments, j->calls[i].arguments);
    for (int i = 0; i < j->n_calls; i++) {
        free(j->calls[i].name);
        free(j->calls[i].arguments);
    }
    mt_strbuf_free(&j->r);
    mt_strbuf_free(&j->c);
    return ok;
}

int reply_check_stream(const mt_reply_format *f, const char *prompt, const char *text, size_t n,
                       const struct cJSON *tools, bool calls_off, const char *what) {
    mt_reply whole;
    mt_reply_parse(f, prompt, text, n, tools, calls_off, &whole);
    int bad = 0;
    mt_reply_delta d;
    /* one cut: the text up to byte c, then all of it */
    for (size_t c = 0; c <= n; c++) {
        joined j = {0};
        mt_reply_stream *s = mt_reply_stream_new(f, prompt, tools, calls_off);
        mt_reply_stream_feed(s, text, c, false, &d);
        join(&j, &d);
        mt_reply_stream_feed(s, text, n, true, &d);
        join(&j, &d);
        mt_reply_stream_free(s);
        if (!same(&whole, &j) && bad++ == 0)
            printf("FAIL %s: cut at byte %zu differs from the whole-text parse\n", what, c);
    }
    /* pieces of k bytes, then the end alone */
    for (size_t k = 1; k <= n; k++) {
        joined j = {0};
        mt_reply_stream *s = mt_reply_stream_new(f, prompt, tools, calls_off);
        for (size_t at = 0; at < n; at += k) {
            mt_reply_stream_feed(s, text, at + k < n ? at + k : n, false, &d);
            join(&j, &d);
        }
        mt_reply_stream_feed(s, text, n, true, &d);
        join(&j, &d);
        mt_reply_stream_free(s);
        if (!same(&whole, &j) && bad++ == 0)
            printf("FAIL %s: %zu-byte pieces differ from the whole-text parse\n", what, k);
    }
    mt_reply_free(&whole);
    mt_test_failures += bad;
    return bad;
}
