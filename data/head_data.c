/* head_data.c: the datasets of the head objectives (data/head_data.h): the objective names, the
 * build over the files, the shared pieces (data/head_internal.h), and the reward and
 * classification readers. Token classification and question answering: data/head_spans.c. */
#include "data/head_data.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/file_io.h"
#include "data/head_internal.h"

static const char *const objective_names[MT_OBJECTIVE_COUNT] = {
    "sft", "reward", "classification", "token_classification", "question_answering"};

int mt_objective_parse(const char *name) {
    for (int o = 0; name && o < MT_OBJECTIVE_COUNT; o++)
        if (!strcmp(name, objective_names[o])) return o;
    return -1;
}

const char *mt_objective_name(mt_objective o) {
    return o >= 0 && o < MT_OBJECTIVE_COUNT ? objective_names[o] : "?";
}

const char *mt_objective_list(void) {
    return "sft, reward, classification, token_classification, question_answering";
}

/* ---- shared pieces ---- */

static void grow(void **p, int64_t *cap, int64_t need, size_t elem, const char *what) {
    if (need <= *cap) return;
    int64_t c = *cap ? *cap : 1 << 12;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    MT_CHECK(q, "out of memory for %s (%lld elements)", what, (long long)c);
    *p = q;
    *cap = c;
}

void mt_head_add(mt_head_build *b, const int32_t *ids, const int32_t *labels, int64_t n,
                 const int32_t *i32, const float *f32) {
    mt_token_data *out = b->out;
    const int64_t at = out->n_tokens, s = out->n_samples;
    grow((void **)&out->ids, &b->caps[0], at + n, sizeof(int32_t), "token ids");
    grow((void **)&out->labels, &b->caps[1], at + n, sizeof(int32_t), "labels");
    grow((void **)&out->offsets, &b->caps[2], s + 2, sizeof(int64_t), "sample offsets");
    grow((void **)&out->source, &b->caps[3], s + 1, sizeof(int32_t), "sample sources");
    memcpy(out->ids + at, ids, sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) out->labels[at + i] = labels ? labels[i] : MT_IGNORE_INDEX;
    if (out->i32_width > 0) {
        const int64_t w = out->i32_width;
        grow((void **)&out->head_i32, &b->caps[4], (s + 1) * w, sizeof(int32_t), "head targets");
        memcpy(out->head_i32 + s * w, i32, sizeof(int32_t) * (size_t)w);
    }
    if (out->f32_width > 0) {
        const int64_t w = out->f32_width;
        grow((void **)&out->head_f32, &b->caps[5], (s + 1) * w, sizeof(float), "head targets");
        memcpy(out->head_f32 + s * w, f32, sizeof(float) * (size_t)w);
    }
    out->n_tokens += n;
    out->source[s] = b->src;
    out->offsets[++out->n_samples] = out->n_tokens;
}

char *mt_head_text(mt_head_build *b, size_t len) {
    if (len + 1 > b->text_cap) {
        b->text_cap = len + 1 + len / 2;
        free(b->text);
        b->text = mt_malloc(b->text_cap, "a record's text");
    }
    b->text[len] = 0;
    return b->text;
}

int mt_head_encode(mt_head_build *b, const char *text, size_t len, mt_token_buf *tb,
                   const char *field, const mt_rec_ctx *r) {
    char why[MT_ERR_LEN - 100];
    mt_token_buf_clear(tb);
    if (mt_tokenizer_encode_err(b->tok, text, len, tb, why, sizeof(why)) < 0)
        return mt_rec_fail(r, "%s: cannot be tokenized: %s", field, why);
    if (tb->n == 0) return mt_rec_fail(r, "%s: gives no tokens (an empty text)", field);
    return 0;
}

int mt_head_class_id(const mt_head_build *b, jinja_value v, const char *field, int32_t *id,
                     const mt_rec_ctx *r) {
    const mt_head_data_opts *h = b->h;
    if (v.type == JINJA_INT) {
        if (v.u.i != MT_IGNORE_INDEX && (v.u.i < 0 || v.u.i >= h->num_labels))
            return mt_rec_fail(r,
                               "%s: class %lld is outside [0, %d) (num_labels %d; -100: ignored)",
                               field, (long long)v.u.i, h->num_labels, h->num_labels);
        *id = (int32_t)v.u.i;
        return 0;
    }
    if (v.type == JINJA_STR) {
        for (int i = 0; i < h->n_label_names && i < h->num_labels; i++)
            if (h->label_names[i] && strlen(h->label_names[i]) == v.u.s.len &&
                !memcmp(h->label_names[i], v.u.s.p, v.u.s.len)) {
                *id = i;
                return 0;
            }
        return mt_rec_fail(r, "%s: \"%.60s\" is not one of the label names (model.labels%s)", field,
                           v.u.s.p, h->n_label_names ? "" : ": none given");
    }
    return mt_rec_fail(r, "%s: must be an integer class id or a label name (a string)", field);
}

int64_t mt_head_token_at(const mt_token_buf *tb, int64_t at, bool last) {
    int64_t found = -1;
    for (int64_t t = 0; t < tb->n; t++) {
        if (tb->offsets[2 * t] <= at && at < tb->offsets[2 * t + 1]) {
            found = t;
            if (!last) break;
        } else if (found >= 0) {
            break;
        }
    }
    return found;
}

/* Tokens kept of a sample of n: n, or max_length under truncate (counted); -1: dropped under
 * drop (counted). */
static int64_t fit(mt_head_build *b, int64_t n) {
    if (n <= b->o->max_length) return n;
    if (b->o->policy == MT_TRUNC_DROP) {
        b->out->n_dropped++;
        return -1;
    }
    b->out->n_truncated++;
    return b->o->max_length;
}

static const char *type_name(jinja_value v) {
    switch (v.type) {
    case JINJA_NONE:
        return "null";
    case JINJA_BOOL:
        return "a boolean";
    case JINJA_INT:
        return "an integer";
    case JINJA_FLOAT:
        return "a number";
    case JINJA_STR:
        return "a string";
    case JINJA_LIST:
        return "a list";
    case JINJA_DICT:
        return "an object";
    default:
        return "a value";
    }
}

/* A JSON number as a float target: false when it is not a number, or not finite in fp32. */
static bool number_value(jinja_value v, float *out) {
    const double x = v.type == JINJA_INT ? (double)v.u.i : v.type == JINJA_FLOAT ? v.u.f : NAN;
    if (!isfinite(x) || fabs(x) > FLT_MAX) return false;
    *out = (float)x;
    return true;
}

/* A key of rec, NULL when absent or null. */
static jinja_value *field_get(jinja_value rec, const char *key) {
    jinja_value *v = jinja_dict_get_str(rec, key);
    return v && v->type != JINJA_NONE ? v : NULL;
}

/* The conversation messages (+ tools, + the record's chat_template_kwargs) rendered whole, no
 * generation prompt (TRL's apply_chat_template), tokenized into tb. */
static int render_messages(mt_head_build *b, jinja_heap *h, jinja_value messages, jinja_value rec,
                           mt_token_buf *tb, const char *field, const mt_rec_ctx *r) {
    jinja_value *tools = field_get(rec, "tools"), *kw = field_get(rec, "chat_template_kwargs");
    if (kw && kw->type != JINJA_DICT)
        return mt_rec_fail(r, "chat_template_kwargs: must be an object, not %s", type_name(*kw));
    static const char *const reserved[] = {"messages", "tools", "documents",
                                           "add_generation_prompt"};
    for (int i = 0; kw && i < 4; i++)
        if (jinja_dict_get_str(*kw, reserved[i]))
            return mt_rec_fail(r, "chat_template_kwargs: \"%s\" is set by the pipeline",
                               reserved[i]);
    if (tools && tools->type != JINJA_LIST)
        return mt_rec_fail(r, "tools: must be a list, not %s", type_name(*tools));
    jinja_value list = jinja_list_new(h);
    bool has_system = false;
    for (int64_t i = 0; i < messages.u.list->n; i++) {
        jinja_value m = messages.u.list->items[i];
        jinja_value *role = m.type == JINJA_DICT ? jinja_dict_get_str(m, "role") : NULL;
        has_system |= role && role->type == JINJA_STR && !strcmp(role->u.s.p, "system");
    }
    if (b->o->system && !has_system) { /* data.system, as for SFT (data/sample.h) */
        jinja_value m = jinja_dict_new(h);
        jinja_dict_set_str(h, m, "role", jinja_cstr(h, "system"));
        jinja_dict_set_str(h, m, "content", jinja_cstr(h, b->o->system));
        jinja_list_push(h, list, m);
    }
    for (int64_t i = 0; i < messages.u.list->n; i++)
        jinja_list_push(h, list, messages.u.list->items[i]);
    jinja_value conv = jinja_dict_new(h);
    jinja_dict_set_str(h, conv, "messages", list);
    if (tools) jinja_dict_set_str(h, conv, "tools", *tools);
    char why[MT_ERR_LEN - 100];
    mt_chat_conv c;
    if (mt_chat_conv_from_value(h, conv, false, &c, why, sizeof(why)) != 0)
        return mt_rec_fail(r, "%s: %s", field, why);
    if (kw) c.vars = *kw;
    mt_token_buf_clear(tb);
    const mt_chat_prompt_opts po = {.add_generation_prompt = false, .sanitize = b->o->sanitize};
    if (mt_chat_prompt(b->tmpl, b->tok, h, &c, &po, &b->rendered, tb, why, sizeof(why)) != 0)
        return mt_rec_fail(r, "%s: the chat template: %s", field, why);
    if (tb->n == 0) return mt_rec_fail(r, "%s: renders to no tokens", field);
    return 0;
}

/* ---- reward ---- */

/* One side (chosen / rejected) of a pair into tb: prompt + side, rendered or as text + eos. */
static int reward_side(mt_head_build *b, jinja_heap *h, jinja_value rec, const jinja_value *prompt,
                       jinja_value side, mt_token_buf *tb, const char *field, const mt_rec_ctx *r) {
    if (side.type == JINJA_LIST) {
        jinja_value msgs = side;
        if (prompt) {
            msgs = jinja_list_new(h);
            for (int64_t i = 0; i < prompt->u.list->n; i++)
                jinja_list_push(h, msgs, prompt->u.list->items[i]);
            for (int64_t i = 0; i < side.u.list->n; i++)
                jinja_list_push(h, msgs, side.u.list->items[i]);
        }
        return render_messages(b, h, msgs, rec, tb, field, r);
    }
    const char *eos = mt_chat_template_eot(b->tmpl);
    if (!eos) {
        mt_rec_fail(r,
                    "%s: reward data as strings needs the tokenizer's eos_token (appended to "
                    "each text, as TRL does), and tokenizer_config.json sets none",
                    field);
        return -2;
    }
    const size_t np = prompt ? prompt->u.s.len : 0, ns = side.u.s.len, ne = strlen(eos);
    char *t = mt_head_text(b, np + ns + ne);
    if (np) memcpy(t, prompt->u.s.p, np);
    memcpy(t + np, side.u.s.p, ns);
    size_t len = np + ns; /* prompt + text, eos_token appended unless it ends with it (TRL) */
    if (len < ne || memcmp(t + len - ne, eos, ne) != 0) {
        memcpy(t + len, eos, ne);
        len += ne;
    }
    t[len] = 0;
    return mt_head_encode(b, t, len, tb, field, r);
}

static int read_reward(void *ctx, jinja_heap *h, jinja_value rec, const mt_rec_ctx *r) {
    mt_head_build *b = ctx;
    if (rec.type != JINJA_DICT) return mt_rec_fail(r, "not a JSON object");
    jinja_value *side[2] = {field_get(rec, "chosen"), field_get(rec, "rejected")};
    jinja_value *prompt = field_get(rec, "prompt"), *margin = field_get(rec, "margin");
    static const char *const names[2] = {"chosen", "rejected"};
    for (int k = 0; k < 2; k++)
        if (!side[k])
            return mt_rec_fail(r,
                               "missing \"%s\" (a reward record has chosen, rejected, prompt?, "
                               "margin?)",
                               names[k]);
    const uint8_t kind = side[0]->type;
    if (kind != JINJA_LIST && kind != JINJA_STR)
        return mt_rec_fail(r, "chosen: must be a list of messages or a string, not %s",
                           type_name(*side[0]));
    const char *kind_name = kind == JINJA_LIST ? "a list of messages" : "a string";
    if (side[1]->type != kind)
        return mt_rec_fail(r,
                           "rejected: is %s but chosen %s (both conversational or both "
                           "standard)",
                           type_name(*side[1]), kind_name);
    if (prompt && prompt->type != kind)
        return mt_rec_fail(r, "prompt: is %s but chosen %s (the same kind)", type_name(*prompt),
                           kind_name);
    float m = 0.f;
    if (margin && !number_value(*margin, &m))
        return mt_rec_fail(r, "margin: must be a finite number, not %s", type_name(*margin));
    for (int k = 0; k < 2; k++) {
        const int rc = reward_side(b, h, rec, prompt, *side[k], &b->tb[k], names[k], r);
        if (rc != 0) return rc;
    }
    int64_t n[2] = {b->tb[0].n, b->tb[1].n};
    if (n[0] > b->o->max_length || n[1] > b->o->max_length) {
        if (b->o->policy == MT_TRUNC_DROP) { /* TRL filters the pair */
            b->out->n_dropped += 2;
            return 0;
        }
        for (int k = 0; k < 2; k++)
            if (n[k] > b->o->max_length) {
                n[k] = b->o->max_length;
                b->out->n_truncated++;
            }
    }
    for (int k = 0; k < 2; k++) mt_head_add(b, b->tb[k].ids, NULL, n[k], NULL, &m);
    b->out->n_targets++;
    return 0;
}

/* ---- classification ---- */

/* The label of a classification record: its kind, and class id or numbers. */
static int class_label(mt_head_build *b, jinja_value v, int *kind, int32_t *id, float *num,
                       const mt_rec_ctx *r) {
    const int nl = b->h->num_labels;
    if (v.type == JINJA_LIST) {
        if (v.u.list->n != nl)
            return mt_rec_fail(r, "label: a list of %lld numbers, but num_labels is %d",
                               (long long)v.u.list->n, nl);
        for (int i = 0; i < nl; i++) {
            jinja_value x = v.u.list->items[i];
            if (!number_value(x, &num[i]))
                return mt_rec_fail(r, "label[%d]: must be a finite number, not %s", i,
                                   type_name(x));
        }
        *kind = MT_HEAD_LABEL_LIST;
        return 0;
    }
    if (nl == 1 && (v.type == JINJA_INT || v.type == JINJA_FLOAT)) { /* regression */
        if (!number_value(v, &num[0]))
            return mt_rec_fail(r, "label: must be a finite number (regression)");
        *kind = MT_HEAD_LABEL_NUMBER;
        return 0;
    }
    if (v.type == JINJA_FLOAT)
        return mt_rec_fail(r,
                           "label: a number (regression) needs num_labels 1, not %d (a list of "
                           "%d numbers for several targets)",
                           nl, nl);
    if (nl == 1 && v.type == JINJA_STR)
        return mt_rec_fail(r, "label: a label name, but num_labels 1 is regression (a number)");
    *kind = MT_HEAD_LABEL_CLASS;
    return mt_head_class_id(b, v, "label", id, r);
}

static const char *kind_text(int kind) {
    return kind == MT_HEAD_LABEL_CLASS    ? "class ids (integers or label names)"
           : kind == MT_HEAD_LABEL_NUMBER ? "numbers (regression)"
                                          : "lists of numbers";
}

static int read_classification(void *ctx, jinja_heap *h, jinja_value rec, const mt_rec_ctx *r) {
    mt_head_build *b = ctx;
    if (rec.type != JINJA_DICT) return mt_rec_fail(r, "not a JSON object");
    jinja_value *text = field_get(rec, "text"), *msgs = field_get(rec, "messages");
    jinja_value *label = jinja_dict_get_str(rec, "label");
    if (text && msgs) return mt_rec_fail(r, "has both \"text\" and \"messages\" (one of them)");
    if (!text && !msgs)
        return mt_rec_fail(r, "missing \"text\" (a string) or \"messages\" (a list of messages)");
    if (text && text->type != JINJA_STR)
        return mt_rec_fail(r, "text: must be a string, not %s", type_name(*text));
    if (msgs && msgs->type != JINJA_LIST)
        return mt_rec_fail(r, "messages: must be a list of messages, not %s", type_name(*msgs));
    if (!label) return mt_rec_fail(r, "missing \"label\"");
    int kind = 0;
    int32_t id = 0;
    float *num = mt_malloc(sizeof(float) * (size_t)b->h->num_labels, "labels");
    int rc = class_label(b, *label, &kind, &id, num, r);
    if (rc == 0 && b->label_kind && kind != b->label_kind)
        rc = mt_rec_fail(r, "label: %s, but %s gave %s (every record gives the same kind)",
                         kind_text(kind), b->kind_at, kind_text(b->label_kind));
    if (rc == 0)
        rc = text ? mt_head_encode(b, text->u.s.p, text->u.s.len, &b->tb[0], "text", r)
                  : render_messages(b, h, *msgs, rec, &b->tb[0], "messages", r);
    if (rc == 0 && !b->label_kind) {
        b->label_kind = kind;
        snprintf(b->kind_at, sizeof(b->kind_at), "%.300s:%lld", r->path, (long long)r->line);
        b->out->i32_width = kind == MT_HEAD_LABEL_CLASS ? 1 : 0;
        b->out->f32_width = kind == MT_HEAD_LABEL_CLASS ? 0 : b->h->num_labels;
    }
    const int64_t n = rc == 0 ? fit(b, b->tb[0].n) : -1;
    if (n > 0) {
        mt_head_add(b, b->tb[0].ids, NULL, n, &id, num);
        b->out->n_targets += kind == MT_HEAD_LABEL_CLASS  ? (id != MT_IGNORE_INDEX)
                             : kind == MT_HEAD_LABEL_LIST ? b->h->num_labels
                                                          : 1;
    }
    free(num);
    return rc;
}

/* ---- the build ---- */

int mt_head_data_build_files(const char *const *paths, int n, const mt_tokenizer *tok,
                             mt_chat_template *tmpl, const mt_sample_opts *o,
                             const mt_head_data_opts *h, bool skip_bad, mt_token_data *out,
                             char *err) {
    *out = (mt_token_data){0};
    static const mt_record_fn readers[MT_OBJECTIVE_COUNT] = {NULL, read_reward, read_classification,
                                                             mt_head_read_token_classification,
                                                             mt_head_read_question_answering};
    if (h->objective <= MT_OBJECTIVE_SFT || h->objective >= MT_OBJECTIVE_COUNT) {
        snprintf(err, MT_ERR_LEN, "train.objective %s: not a head objective (one of %s but sft)",
                 mt_objective_name(h->objective), mt_objective_list());
        return -1;
    }
    if ((h->objective == MT_OBJECTIVE_CLASSIFICATION ||
         h->objective == MT_OBJECTIVE_TOKEN_CLASSIFICATION) &&
        h->num_labels < 1) {
        snprintf(err, MT_ERR_LEN, "train.objective %s needs num_labels >= 1, got %d",
                 mt_objective_name(h->objective), h->num_labels);
        return -1;
    }
    MT_CHECK(o->max_length > 1, "max_length must be > 1, got %lld", (long long)o->max_length);
    mt_head_build b = {.tok = tok, .tmpl = tmpl, .o = o, .h = h, .out = out};
    out->objective = h->objective;
    if (h->objective == MT_OBJECTIVE_REWARD) out->f32_width = 1;
    if (h->objective == MT_OBJECTIVE_QUESTION_ANSWERING) out->i32_width = 2;
    grow((void **)&out->offsets, &b.caps[2], 1, sizeof(int64_t), "sample offsets");
    grow((void **)&out->source, &b.caps[3], 1, sizeof(int32_t), "sample sources");
    out->offsets[0] = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        size_t len;
        char *text = mt_file_read(paths[i], &len, err);
        if (!text) {
            rc = -1;
            break;
        }
        b.src = i;
        mt_record_counts counts = {0};
        rc = mt_records_parse(paths[i], text, len, skip_bad, readers[h->objective], &b, &counts,
                              err);
        free(text);
        out->n_lines += counts.n_lines;
        out->n_skipped += counts.n_skipped;
        if (counts.n_skipped)
            fprintf(stderr, "data: %s: %lld bad records skipped, the first: %s\n", paths[i],
                    (long long)counts.n_skipped, counts.first_skip);
    }
    if (rc == 0 && h->objective == MT_OBJECTIVE_CLASSIFICATION && !b.label_kind)
        out->i32_width = 1; /* no record: class ids */
    for (int k = 0; k < 2; k++) mt_token_buf_free(&b.tb[k]);
    mt_chat_rendered_free(&b.rendered);
    free(b.text);
    free(b.lab);
    if (rc != 0) {
        free(out->head_i32);
        free(out->head_f32);
        free(out->ids);
        free(out->labels);
        free(out->offsets);
        free(out->source);
        *out = (mt_token_data){0};
    }
    return rc;
}
