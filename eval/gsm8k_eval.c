/* gsm8k_eval.c: see gsm8k_eval.h. */
#include "eval/gsm8k_eval.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/gsm8k_answer.h"
#include "data/chat_cli.h"

/* The turns of a question: 2 n_shots + 1 messages, malloc'ed (texts borrowed). */
static mt_chat_msg *gsm8k_turns(const mt_gsm8k_set *shots, int n_shots, const char *question) {
    MT_CHECK(n_shots >= 0 && (n_shots == 0 || (shots && n_shots <= shots->n)),
             "gsm8k eval: %d shots of %lld examples", n_shots, shots ? (long long)shots->n : 0LL);
    mt_chat_msg *msgs = mt_malloc(sizeof(mt_chat_msg) * (size_t)(2 * n_shots + 1), "shot turns");
    for (int i = 0; i < n_shots; i++) {
        msgs[2 * i] = (mt_chat_msg){
            .role = MT_CHAT_USER, .text = shots->question[i], .len = strlen(shots->question[i])};
        msgs[2 * i + 1] = (mt_chat_msg){
            .role = MT_CHAT_ASSISTANT, .text = shots->answer[i], .len = strlen(shots->answer[i])};
    }
    msgs[2 * n_shots] =
        (mt_chat_msg){.role = MT_CHAT_USER, .text = question, .len = strlen(question)};
    return msgs;
}

int mt_gsm8k_eval_render(mt_chat_template *t, const mt_gsm8k_set *shots, int n_shots,
                         const char *question, mt_chat_rendered *out, char *err, size_t errlen) {
    mt_chat_msg *msgs = gsm8k_turns(shots, n_shots, question);
    const int rc = mt_chat_render_msgs(t, msgs, 2 * n_shots + 1, out, err, errlen);
    free(msgs);
    return rc;
}

int32_t *mt_gsm8k_eval_prompt(mt_chat_template *t, const mt_tokenizer *tok,
                              const mt_gsm8k_set *shots, int n_shots, const char *question, int *n,
                              char *err, size_t errlen) {
    mt_chat_msg *msgs = gsm8k_turns(shots, n_shots, question);
    int32_t *ids = mt_chat_cli_prompt(t, tok, msgs, 2 * n_shots + 1, n, err, errlen);
    free(msgs);
    return ids;
}

int64_t mt_gsm8k_eval_line(const mt_gsm8k_eval *e, int64_t i) {
    const int64_t *line = e->msgs ? e->msgs->line : e->set->line;
    return line ? line[i] : i + 1;
}

/* Sample i's question (the messages task: the last user message before the reference). */
static const char *eval_question(const mt_gsm8k_eval *e, int64_t i) {
    return e->msgs ? e->msgs->question[i] : e->set->question[i];
}

/* Sample i's prompt, rendered or tokenized, in either task. */
static int eval_render(const mt_gsm8k_eval *e, int64_t i, mt_chat_rendered *out, char *err,
                       size_t errlen) {
    if (e->msgs)
        return mt_msgs_render(e->chat, e->msgs, i, e->msg_shots, e->n_shots, out, err, errlen);
    return mt_gsm8k_eval_render(e->chat, e->shots, e->n_shots, e->set->question[i], out, err,
                                errlen);
}

static int32_t *eval_prompt(const mt_gsm8k_eval *e, int64_t i, int *n, char *err, size_t errlen) {
    if (e->msgs)
        return mt_msgs_prompt(e->chat, e->tok, e->msgs, i, e->msg_shots, e->n_shots, n, err,
                              errlen);
    return mt_gsm8k_eval_prompt(e->chat, e->tok, e->shots, e->n_shots, e->set->question[i], n, err,
                                errlen);
}

int64_t mt_gsm8k_eval_overlap(const mt_gsm8k_eval *e, int64_t n, int64_t *first) {
    int64_t k = 0;
    *first = -1;
    for (int64_t i = 0; i < n; i++) {
        const char *q = eval_question(e, i);
        bool in = false;
        for (int s = 0; s < e->n_shots && q[0] && !in; s++)
            in = !strcmp(q, e->msgs ? e->msg_shots->question[s] : e->shots->question[s]);
        if (in && *first < 0) *first = i;
        k += in;
    }
    return k;
}

int mt_gsm8k_eval_longest(const mt_gsm8k_eval *e, int64_t first, int64_t stride, int64_t n,
                          char *err, size_t errlen) {
    int t_prompt = 1;
    char why[MT_ERR_LEN + 4600];
    for (int64_t j = 0; j < n; j++) {
        const int64_t i = first + j * stride;
        int len;
        int32_t *ids = eval_prompt(e, i, &len, why, sizeof(why));
        const long line = (long)mt_gsm8k_eval_line(e, i);
        if (!ids) {
            snprintf(err, errlen, "question %lld (line %ld): %s", (long long)i, line, why);
            return -1;
        }
        free(ids);
        /* a prompt must leave the context room for the answer: refused as too long, by name,
         * before any decoding (not as the memory its caches would take) */
        const int ctx = e->model->cfg.max_position_embeddings;
        if (ctx > 0 && len >= ctx) {
            snprintf(err, errlen,
                     "question %lld (line %ld): the prompt is %d tokens%s, the model's context "
                     "(max_position_embeddings) is %d: no room for an answer",
                     (long long)i, line, len, e->n_shots ? " with its shots" : "", ctx);
            return -1;
        }
        const bool usable =
            e->msgs ? mt_match_reference_usable(e->match, e->msgs->reference[i], why, sizeof(why))
                    : mt_gsm8k_gold_usable(e->set->answer[i], why, sizeof(why));
        if (!usable) {
            snprintf(err, errlen, "question %lld (line %ld): %s", (long long)i, line, why);
            return -1;
        }
        t_prompt = len > t_prompt ? len : t_prompt;
    }
    return t_prompt;
}

size_t mt_gsm8k_eval_arena_bytes(const mt_gsm8k_eval *e, int64_t first, int64_t stride, int64_t n) {
    char err[MT_ERR_LEN + 4700];
    const int longest = mt_gsm8k_eval_longest(e, first, stride, n, err, sizeof(err));
    MT_CHECK(longest > 0, "gsm8k eval: %s", err);
    return mt_minimax_generate_arena_bytes(&e->model->cfg, 1, longest);
}

/* GSM8K: the numbers of answer and gold into j (extracted, gold, correct). */
static void eval_score_gsm8k(const mt_gsm8k_eval *e, int64_t i, const char *answer, cJSON *j,
                             mt_gsm8k_counts *counts) {
    char got[MT_GSM8K_ANSWER_MAX], gold[MT_GSM8K_ANSWER_MAX];
    mt_gsm8k_extract(answer, got, sizeof(got));
    mt_gsm8k_extract(e->set->answer[i], gold, sizeof(gold));
    const bool ok = mt_gsm8k_correct(answer, e->set->answer[i]);
    counts->correct += ok;
    cJSON_AddStringToObject(j, "extracted", got);
    cJSON_AddStringToObject(j, "gold", gold);
    cJSON_AddBoolToObject(j, "correct", ok);
}

/* The messages task: the reference, each metric, the regex's extractions into j. */
static void eval_score_messages(const mt_gsm8k_eval *e, int64_t i, const char *answer, cJSON *j,
                                mt_gsm8k_counts *counts) {
    const char *ref = e->msgs->reference[i];
    bool hit[MT_MATCH_COUNT];
    mt_match_score(e->match, answer, ref, hit);
    cJSON_AddStringToObject(j, "reference", ref);
    for (int k = 0; k < MT_MATCH_COUNT; k++) {
        counts->hits[k] += hit[k];
        if (k != MT_MATCH_REGEX || e->match->has_regex)
            cJSON_AddBoolToObject(j, mt_match_metric_name((mt_match_metric)k), hit[k]);
    }
    if (e->match->has_regex) {
        char *got = mt_match_extract(e->match, answer), *gold = mt_match_extract(e->match, ref);
        if (got)
            cJSON_AddStringToObject(j, "extracted", got);
        else
            cJSON_AddNullToObject(j, "extracted");
        cJSON_AddStringToObject(j, "extracted_reference", gold ? gold : "");
        free(got);
        free(gold);
    }
    counts->correct += hit[e->match->metric];
    cJSON_AddBoolToObject(j, "correct", hit[e->match->metric]);
}

/* Sample i's completion scored into one JSON line of lines. */
static void gsm8k_eval_score(const mt_gsm8k_eval *e, int64_t i, const int32_t *out, int n_out,
                             mt_strbuf *lines, mt_gsm8k_counts *counts) {
    char *text = mt_tokenizer_decode(e->tok, out, n_out, true);
    mt_reply reply = {0};
    const bool split = e->reply && mt_reply_format_active(e->reply);
    if (split) { /* the prompt says whether the completion starts inside the reasoning */
        mt_chat_rendered prompt = {0};
        char err[MT_ERR_LEN + 4600];
        MT_CHECK(eval_render(e, i, &prompt, err, sizeof(err)) == 0, "gsm8k eval: question %lld: %s",
                 (long long)i, err);
        char *marked = mt_reply_decode(e->reply, e->tok, out, n_out, e->opts.eos);
        mt_reply_parse(e->reply, prompt.text, marked, strlen(marked), NULL, true, &reply);
        free(marked);
        mt_chat_rendered_free(&prompt);
        counts->in_reasoning += reply.in_reasoning;
    }
    const char *answer = split ? (reply.content ? reply.content : "") : text;
    counts->tokens += n_out;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "index", (double)i);
    cJSON_AddStringToObject(j, "prompt", eval_question(e, i));
    cJSON_AddStringToObject(j, "completion", text);
    if (split) {
        if (reply.reasoning)
            cJSON_AddStringToObject(j, "reasoning", reply.reasoning);
        else
            cJSON_AddNullToObject(j, "reasoning");
        cJSON_AddStringToObject(j, "content", answer);
        cJSON_AddBoolToObject(j, "ended_in_reasoning", reply.in_reasoning);
    }
    if (e->msgs)
        eval_score_messages(e, i, answer, j, counts);
    else
        eval_score_gsm8k(e, i, answer, j, counts);
    char *printed = cJSON_PrintUnformatted(j);
    MT_CHECK(printed, "cannot format sample %lld", (long long)i);
    mt_strbuf_append(lines, printed, strlen(printed));
    mt_strbuf_append(lines, "\n", 1);
    free(printed);
    cJSON_Delete(j);
    mt_reply_free(&reply);
    free(text);
}

void mt_gsm8k_eval_batch(const mt_gsm8k_eval *e, const int64_t *ids, int nb, mt_strbuf *lines,
                         mt_gsm8k_counts *counts) {
    int32_t **prompts = mt_calloc((size_t)nb, sizeof(int32_t *), "prompts");
    int *lens = mt_calloc((size_t)nb, sizeof(int), "prompt lengths");
    int *n_out = mt_calloc((size_t)nb, sizeof(int), "completion lengths");
    int32_t *out = mt_malloc((size_t)nb * (size_t)e->n_new * sizeof(int32_t), "completions");
    char err[MT_ERR_LEN + 4600];
    for (int r = 0; r < nb; r++) { /* (mt_gsm8k_eval_longest rendered them all before) */
        prompts[r] = eval_prompt(e, ids[r], &lens[r], err, sizeof(err));
        MT_CHECK(prompts[r], "gsm8k eval: question %lld: %s", (long long)ids[r], err);
    }
    mt_gen_opts o = e->opts;
    o.row_ids = ids; /* a prompt's draws follow its index, not its batch */
    mt_minimax_generate_batch(e->model, e->ctx, (const int32_t *const *)prompts, lens, nb, e->n_new,
                              &o, out, n_out);
    for (int r = 0; r < nb; r++) {
        gsm8k_eval_score(e, ids[r], out + (size_t)r * (size_t)e->n_new, n_out[r], lines, counts);
        free(prompts[r]);
    }
    free(prompts);
    free(lens);
    free(n_out);
    free(out);
}

void mt_gsm8k_eval_order(const char *all, const int64_t *displ, const int64_t *len, int n_ranks,
                         int64_t n, mt_strbuf *out) {
    const char **cur = mt_calloc((size_t)n_ranks, sizeof(char *), "cursors");
    for (int r = 0; r < n_ranks; r++) cur[r] = all + displ[r];
    for (int64_t i = 0; i < n; i++) { /* sample i: the next line of rank i % N */
        const int r = (int)(i % n_ranks);
        const char *e = memchr(cur[r], '\n', (size_t)(all + displ[r] + len[r] - cur[r]));
        MT_CHECK(e, "gathered results: sample %lld missing", (long long)i);
        mt_strbuf_append(out, cur[r], (size_t)(e + 1 - cur[r]));
        cur[r] = e + 1;
    }
    free(cur);
}

void mt_gsm8k_eval_wilson(int64_t correct, int64_t n, double *lo, double *hi) {
    const double N = (double)n, p = N > 0 ? (double)correct / N : 0, z = 1.96, z2 = z * z;
    const double centre = (p + z2 / (2.0 * N)) / (1 + z2 / N),
                 half = z * sqrt(p * (1 - p) / N + z2 / (4.0 * N * N)) / (1 + z2 / N);
    *lo = n > 0 ? fmax(0, centre - half) : 0;
    *hi = n > 0 ? fmin(1, centre + half) : 1;
}
