/* messages_eval.c: see messages_eval.h. */
#include "eval/messages_eval.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "data/chat_cli.h"

/* A message's text content (a string, or the concatenated texts of its {"type": "text"} parts),
 * malloc'ed; "" for none. */
static char *msgs_content(const cJSON *m) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    mt_strbuf b = {0};
    const cJSON *part;
    if (cJSON_IsArray(c)) cJSON_ArrayForEach(part, c) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (cJSON_IsString(t)) mt_strbuf_append(&b, t->valuestring, strlen(t->valuestring));
        }
    char *s = strdup(b.p ? b.p : "");
    mt_strbuf_free(&b);
    return s;
}

static const char *msgs_role(const cJSON *m) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    return cJSON_IsString(r) ? r->valuestring : "";
}

/* Sample i of s from its conversation's JSON, or -1 with "path:line: reason" in err. */
static int msgs_sample(mt_msgs_set *s, int64_t i, const char *path, char *err, size_t errlen) {
    cJSON *conv = cJSON_ParseWithLength(s->conv.json[i], s->conv.json_len[i]);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(conv, "messages");
    const int n = cJSON_GetArraySize(msgs);
    const cJSON *last = n > 0 ? cJSON_GetArrayItem(msgs, n - 1) : NULL;
    int rc = 0;
    if (!last || strcmp(msgs_role(last), "assistant")) {
        snprintf(err, errlen,
                 "%s:%lld: the conversation must end with an assistant message (the reference "
                 "the evaluation compares with); it ends with a \"%s\" message",
                 path, (long long)s->line[i], last ? msgs_role(last) : "(no)");
        rc = -1;
    } else {
        s->upto[i] = n - 1;
        s->reference[i] = msgs_content(last);
        if (!s->reference[i][0]) {
            snprintf(err, errlen,
                     "%s:%lld: messages[%d], the reference, has no text content (a tool call or "
                     "reasoning only)",
                     path, (long long)s->line[i], n - 1);
            rc = -1;
        }
        for (int k = n - 2; k >= 0 && !s->question[i]; k--)
            if (!strcmp(msgs_role(cJSON_GetArrayItem(msgs, k)), "user"))
                s->question[i] = msgs_content(cJSON_GetArrayItem(msgs, k));
        if (!s->question[i]) s->question[i] = strdup("");
    }
    cJSON_Delete(conv);
    return rc;
}

int mt_msgs_read(const char *path, mt_msgs_set *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    char why[MT_ERR_LEN];
    if (mt_conv_read(path, MT_FORMAT_AUTO, false, &out->conv, why) != 0) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    const int64_t n = out->n = out->conv.n;
    out->upto = mt_calloc((size_t)(n ? n : 1), sizeof(int), "references");
    out->reference = mt_calloc((size_t)(n ? n : 1), sizeof(char *), "references");
    out->question = mt_calloc((size_t)(n ? n : 1), sizeof(char *), "questions");
    out->line = out->conv.line;
    for (int64_t i = 0; i < n; i++)
        if (msgs_sample(out, i, path, err, errlen) != 0) {
            mt_msgs_set_free(out);
            return -1;
        }
    return 0;
}

void mt_msgs_set_free(mt_msgs_set *s) {
    for (int64_t i = 0; i < s->n; i++) {
        free(s->reference ? s->reference[i] : NULL);
        free(s->question ? s->question[i] : NULL);
    }
    free(s->reference);
    free(s->question);
    free(s->upto);
    mt_conv_set_free(&s->conv);
    memset(s, 0, sizeof(*s));
}

void mt_msgs_set_truncate(mt_msgs_set *s, int64_t n) {
    for (; n >= 0 && s->n > n; s->n--) {
        free(s->reference[s->n - 1]);
        free(s->question[s->n - 1]);
        s->reference[s->n - 1] = s->question[s->n - 1] = NULL;
    }
}

int mt_msgs_render(mt_chat_template *t, const mt_msgs_set *set, int64_t i, const mt_msgs_set *shots,
                   int n_shots, mt_chat_rendered *out, char *err, size_t errlen) {
    MT_CHECK(n_shots >= 0 && (n_shots == 0 || (shots && n_shots <= shots->n)),
             "messages eval: %d shots of %lld", n_shots, shots ? (long long)shots->n : 0LL);
    const char **sj = mt_calloc((size_t)(n_shots ? n_shots : 1), sizeof(char *), "shots");
    for (int k = 0; k < n_shots; k++) sj[k] = shots->conv.json[k];
    const int rc = mt_chat_render_prompt_json(t, set->conv.json[i], set->conv.json_len[i],
                                              set->upto[i], sj, n_shots, out, err, errlen);
    free(sj);
    return rc;
}

int32_t *mt_msgs_prompt(mt_chat_template *t, const mt_tokenizer *tok, const mt_msgs_set *set,
                        int64_t i, const mt_msgs_set *shots, int n_shots, int *n, char *err,
                        size_t errlen) {
    mt_chat_rendered r = {0};
    int32_t *ids = NULL;
    char why[MT_ERR_LEN + 4096];
    if (mt_msgs_render(t, set, i, shots, n_shots, &r, why, sizeof(why)) != 0)
        snprintf(err, errlen, "the chat template cannot render the conversation: %s", why);
    else
        ids = mt_chat_cli_ids(tok, &r, n, err, errlen);
    mt_chat_rendered_free(&r);
    return ids;
}

static const char *const match_names[MT_MATCH_COUNT] = {"exact", "normalized", "contains", "regex"};

const char *mt_match_metric_name(mt_match_metric k) { return match_names[k]; }

int mt_match_init(mt_match *m, const char *metric, const char *regex, const char *const names[2],
                  char *err, size_t errlen) {
    memset(m, 0, sizeof(*m));
    m->metric = regex ? MT_MATCH_REGEX : MT_MATCH_EXACT;
    if (metric) {
        int k = 0;
        while (k < MT_MATCH_COUNT && strcmp(metric, match_names[k])) k++;
        if (k == MT_MATCH_COUNT) {
            snprintf(err, errlen, "%s is exact, normalized, contains or regex, got \"%s\"",
                     names[0], metric);
            return -1;
        }
        m->metric = (mt_match_metric)k;
    }
    if (m->metric == MT_MATCH_REGEX && !regex) {
        snprintf(err, errlen, "%s regex needs %s (the answer's pattern)", names[0], names[1]);
        return -1;
    }
    if (regex) {
        const int rc = regcomp(&m->re, regex, REG_EXTENDED);
        if (rc != 0) {
            char why[256];
            regerror(rc, &m->re, why, sizeof(why));
            snprintf(err, errlen, "%s \"%s\" is not a POSIX extended regular expression: %s",
                     names[1], regex, why);
            return -1;
        }
        m->has_regex = true;
    }
    return 0;
}

void mt_match_free(mt_match *m) {
    if (m->has_regex) regfree(&m->re);
    m->has_regex = false;
}

/* Python's string.punctuation. */
static bool match_punct(unsigned char c) {
    return c < 128 && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) && c;
}

char *mt_match_normalize(const char *s) {
    const size_t n = strlen(s);
    char *o = mt_malloc(n + 1, "normalised text");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) { /* lowercase, whitespace runs to one space */
        const unsigned char c = (unsigned char)s[i];
        if (isspace(c) && c < 128) {
            if (k > 0 && o[k - 1] != ' ') o[k++] = ' ';
        } else {
            o[k++] = (char)(c < 128 ? tolower(c) : c);
        }
    }
    size_t a = 0;
    while (a < k && (o[a] == ' ' || match_punct((unsigned char)o[a]))) a++;
    while (k > a && (o[k - 1] == ' ' || match_punct((unsigned char)o[k - 1]))) k--;
    memmove(o, o + a, k - a);
    o[k - a] = 0;
    return o;
}

char *mt_match_extract(const mt_match *m, const char *s) {
    if (!m->has_regex) return NULL;
    regmatch_t g[2];
    if (regexec(&m->re, s, 2, g, 0) != 0) return NULL;
    const regmatch_t *x = m->re.re_nsub >= 1 && g[1].rm_so >= 0 ? &g[1] : &g[0];
    if (m->re.re_nsub >= 1 && g[1].rm_so < 0) return strdup(""); /* the group took no part */
    const size_t len = (size_t)(x->rm_eo - x->rm_so);
    char *o = mt_malloc(len + 1, "extracted answer");
    memcpy(o, s + x->rm_so, len);
    o[len] = 0;
    return o;
}

void mt_match_score(const mt_match *m, const char *answer, const char *reference,
                    bool hit[MT_MATCH_COUNT]) {
    hit[MT_MATCH_EXACT] = !strcmp(answer, reference);
    char *na = mt_match_normalize(answer), *nr = mt_match_normalize(reference);
    hit[MT_MATCH_NORMALIZED] = !strcmp(na, nr);
    hit[MT_MATCH_CONTAINS] = nr[0] && strstr(na, nr);
    free(na);
    free(nr);
    char *ea = mt_match_extract(m, answer), *er = mt_match_extract(m, reference);
    hit[MT_MATCH_REGEX] = ea && er && !strcmp(ea, er);
    free(ea);
    free(er);
}

bool mt_match_reference_usable(const mt_match *m, const char *reference, char *err, size_t errlen) {
    if (!m->has_regex) return true;
    char *e = mt_match_extract(m, reference);
    if (!e) {
        snprintf(err, errlen,
                 "the answer regex finds nothing in the reference \"%.80s%s\": every completion "
                 "would be scored against no answer",
                 reference, strlen(reference) > 80 ? "..." : "");
        return false;
    }
    free(e);
    return true;
}
