/* synth_pairs.c: synthetic preference pairs for the reward-model recipe (data/synth.h), in TRL's
 * conversational implicit-prompt format: {"chosen": [user, assistant], "rejected": [user,
 * assistant]}, both starting with the same user message, problem i of data/synth.c's stream.
 *
 * The chosen reply is the problem's worked answer (calculator annotations removed), its steps one
 * per line, ending with the line "#### N", N the correct answer. The rejected reply is, by i % 8:
 *   0, 3, 7  the same answer without its final "#### N" line: it ends with the last step
 *   1, 4     the answer cut at the last word boundary before half its steps' length
 *   2, 5     a short refusal ("I'm sorry, ...") with no working and no number
 *   6        the whole answer with a wrong final number: "#### M", M = N +- 1..9 (M >= 0)
 * What a model must notice, all of it at the end of the reply, where a reward pooled at the last
 * token looks: a preferred reply ends with a "#### N" line (7 pairs in 8 are told apart by that
 * alone); in 1 pair in 8 both do, and only the preferred one's N repeats the number its last step
 * computed (the number just before the final line). A model that learns only the first rule
 * ranks about 15 / 16 of the pairs right. Pair i depends on (seed, i) only. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "data/gsm8k.h"
#include "data/synth.h"

typedef enum { REJECT_NO_FINAL, REJECT_CUT, REJECT_REFUSAL, REJECT_WRONG } reject_kind;

static const reject_kind kinds_by_index[8] = {REJECT_NO_FINAL, REJECT_CUT,     REJECT_REFUSAL,
                                              REJECT_NO_FINAL, REJECT_CUT,     REJECT_REFUSAL,
                                              REJECT_WRONG,    REJECT_NO_FINAL};

static const char *refusals[] = {
    "I'm sorry, but I can't help with this problem.",
    "I'm sorry, I don't know how to solve this.",
    "Sorry, this one is too hard for me to work out.",
    "I'm not able to answer that question.",
};

/* splitmix64 of (seed, index): the choices of pair `index`, apart from the problem's own. */
static uint64_t pair_random(uint64_t seed, int64_t index) {
    uint64_t z = seed ^ 0x7061697273ull /* "pairs" */ ^ (uint64_t)index * 0xd1b54a32d192ed03ull;
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The rejected reply of pair index, from the chosen one (good, ending "\n#### N"). */
static void rejected_reply(uint64_t seed, int64_t index, const char *good, mt_strbuf *bad) {
    const uint64_t r = pair_random(seed, index);
    const char *final = strstr(good, "\n#### ");
    MT_CHECK(final, "synth: problem %lld has no final answer", (long long)index);
    const size_t steps_len = (size_t)(final - good);
    bad->len = 0;
    switch (kinds_by_index[index % 8]) {
    case REJECT_NO_FINAL:
        mt_strbuf_append(bad, good, steps_len);
        break;
    case REJECT_CUT: {
        size_t cut = steps_len / 2;
        while (cut > 0 && good[cut] != ' ' && good[cut] != '\n') cut--;
        mt_strbuf_append(bad, good, cut > 0 ? cut : steps_len / 2);
        break;
    }
    case REJECT_REFUSAL: {
        const char *s = refusals[r % (sizeof(refusals) / sizeof(refusals[0]))];
        mt_strbuf_append(bad, s, strlen(s));
        break;
    }
    case REJECT_WRONG: {
        const long long n = strtoll(final + 6, NULL, 10), d = 1 + (long long)((r >> 8) % 9);
        const long long m = (r >> 16) % 2 && n - d >= 0 ? n - d : n + d;
        char line[64];
        const int k = snprintf(line, sizeof(line), "\n#### %lld", m);
        mt_strbuf_append(bad, good, steps_len);
        mt_strbuf_append(bad, line, (size_t)k);
        break;
    }
    }
}

static cJSON *conversation(const char *user, const char *assistant) {
    cJSON *list = cJSON_CreateArray();
    const char *roles[2] = {"user", "assistant"}, *texts[2] = {user, assistant};
    for (int k = 0; k < 2; k++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", roles[k]);
        cJSON_AddStringToObject(m, "content", texts[k]);
        cJSON_AddItemToArray(list, m);
    }
    return list;
}

/* pair i: the shared question, the worked answer chosen, a worse reply rejected */
static cJSON *synth_pair_record(mt_synth_state *st, int64_t i) {
    mt_synth_problem(st->seed, i, &st->q, &st->a);
    st->a.len = mt_gsm8k_strip_annotations(st->a.p);
    rejected_reply(st->seed, i, st->a.p, &st->b);
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddItemToObject(rec, "chosen", conversation(st->q.p, st->a.p));
    cJSON_AddItemToObject(rec, "rejected", conversation(st->q.p, st->b.p));
    return rec;
}

int mt_synth_write_pairs_jsonl(const char *path, uint64_t seed, int64_t n, char *err) {
    return mt_synth_write_records(path, n, synth_pair_record, seed, err);
}
