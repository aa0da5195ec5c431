/* data_synth_pairs.c: the synthetic preference pairs (data/synth_pairs.c):
 *   data_synth_pairs  deterministic (the same seed, the same bytes; another seed, other bytes),
 *                     n lines in TRL's conversational implicit-prompt format ({"chosen": [user,
 *                     assistant], "rejected": [user, assistant]}), the same user message (the
 *                     problem's question) on both sides and different replies; the chosen reply's
 *                     final "#### N" is the answer of mt_synth_problem (whose arithmetic
 *                     data_synth checks); no rejected reply ends with that line, and each kind of
 *                     rejection the header names occurs; written atomically; `minimax-data synth
 *                     --kind pairs` writes the same bytes. */
#include "tests/support/harness.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "data/synth.h"
#include "tests/support/data_util.h"

/* The number after the last "\n#### " of s (or at its start), when it is s's last line. */
static bool final_number(const char *s, long long *n) {
    const char *p = NULL;
    if (!strncmp(s, "#### ", 5)) p = s;
    for (const char *q = s; (q = strstr(q, "\n#### ")) != NULL; q++) p = q + 1;
    if (!p) return false;
    char *end;
    *n = strtoll(p + 5, &end, 10);
    return end != p + 5 && *end == 0;
}

/* The message k of side name of rec: its role must be role; its content, or NULL. */
static const char *content(const cJSON *rec, const char *name, int k, const char *role) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(rec, name);
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != 2) return NULL;
    const cJSON *m = cJSON_GetArrayItem(list, k);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role"),
                *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_GetArraySize(m) != 2 || !cJSON_IsString(r) || strcmp(r->valuestring, role) ||
        !cJSON_IsString(c))
        return NULL;
    return c->valuestring;
}

static bool has_digit(const char *s) {
    for (; *s; s++)
        if (isdigit((unsigned char)*s)) return true;
    return false;
}

static int test_pairs(void) {
    char dir[4096], p1[4200], p2[4200], p3[4200], bad[4200], err[MT_ERR_LEN];
    make_tmpdir(dir, sizeof(dir));
    snprintf(p1, sizeof(p1), "%s/a.jsonl", dir);
    snprintf(p2, sizeof(p2), "%s/b.jsonl", dir);
    snprintf(p3, sizeof(p3), "%s/c.jsonl", dir);
    const int64_t n = 400;
    EXPECT(mt_synth_write_pairs_jsonl(p1, 42, n, err) == 0, "%s", err);
    EXPECT(mt_synth_write_pairs_jsonl(p2, 42, n, err) == 0, "%s", err);
    EXPECT(mt_synth_write_pairs_jsonl(p3, 43, n, err) == 0, "%s", err);
    size_t n1 = 0, n2 = 0, n3 = 0;
    char *t1 = mt_file_read(p1, &n1, err), *t2 = mt_file_read(p2, &n2, err),
         *t3 = mt_file_read(p3, &n3, err);
    EXPECT(t1 && t2 && t3, "read back: %s", err);
    if (!t1 || !t2 || !t3) return MT_TEST_OK;
    EXPECT(n1 == n2 && !memcmp(t1, t2, n1), "seed 42 twice: other bytes");
    EXPECT(n1 != n3 || memcmp(t1, t3, n1), "seeds 42 and 43: the same bytes");
    EXPECT(count_entries(dir, ".tmp.") == 0, "a temporary file left");

    /* each line a pair of problem i */
    mt_strbuf q = {0}, a = {0};
    int64_t lines = 0;
    int n_wrong = 0, n_refusal = 0, n_unfinished = 0, n_bad = 0;
    for (char *line = t1, *nl; *line; line = nl + 1, lines++) {
        nl = strchr(line, '\n');
        EXPECT(nl, "line %lld has no newline", (long long)lines + 1);
        if (!nl) break;
        *nl = 0;
        cJSON *rec = cJSON_Parse(line);
        mt_synth_problem(42, lines, &q, &a);
        long long want = -1, got = -1, rej = -1;
        EXPECT(final_number(a.p, &want), "problem %lld: no final answer", (long long)lines);
        const char *cu = content(rec, "chosen", 0, "user"),
                   *ru = content(rec, "rejected", 0, "user"),
                   *ca = content(rec, "chosen", 1, "assistant"),
                   *ra = content(rec, "rejected", 1, "assistant");
        const bool ok = rec && cJSON_GetArraySize(rec) == 2 && cu && ru && ca && ra &&
                        !strcmp(cu, q.p) && !strcmp(ru, q.p) && strcmp(ca, ra) &&
                        final_number(ca, &got) && got == want && strstr(ca, "\n") &&
                        !(final_number(ra, &rej) && rej == want);
        if (!ok && n_bad++ < 3)
            printf("pair %lld (want user \"%s\", final %lld): %s\n", (long long)lines, q.p, want,
                   line);
        if (ok && final_number(ra, &rej)) n_wrong++;
        if (ok && !has_digit(ra)) n_refusal++;
        if (ok && !strstr(ra, "####") && has_digit(ra)) n_unfinished++;
        cJSON_Delete(rec);
    }
    EXPECT(lines == n, "%lld lines, want %lld", (long long)lines, (long long)n);
    EXPECT(n_bad == 0, "%d of %lld pairs malformed or wrong", n_bad, (long long)n);
    EXPECT(n_wrong >= n / 16 && n_refusal >= n / 8 && n_unfinished >= n / 4,
           "the kinds of rejection: %d wrong final numbers, %d refusals, %d without a final line",
           n_wrong, n_refusal, n_unfinished);
    printf("pairs: %lld, rejected: %d wrong final number, %d refusals, %d without a final line\n",
           (long long)lines, n_wrong, n_refusal, n_unfinished);
    mt_strbuf_free(&q);
    mt_strbuf_free(&a);

    /* nothing: an empty file; a directory that is not there: an error naming it, nothing left */
    EXPECT(mt_synth_write_pairs_jsonl(p2, 42, 0, err) == 0, "n = 0: %s", err);
    size_t n0 = 1;
    char *t0 = mt_file_read(p2, &n0, err);
    EXPECT(t0 && n0 == 0, "n = 0: %zu bytes", n0);
    free(t0);
    snprintf(bad, sizeof(bad), "%s/missing/p.jsonl", dir);
    EXPECT(mt_synth_write_pairs_jsonl(bad, 42, 3, err) == -1 && strstr(err, bad) &&
               count_entries(dir, ".tmp.") == 0,
           "an unwritable path: \"%s\"", err);

    /* the command line writes the same bytes */
    const char *exe = getenv("MT_DATA_CLI");
    if (exe && *exe) {
        char cmd[12000];
        snprintf(cmd, sizeof(cmd),
                 "'%s' synth --kind pairs --n %lld --seed 42 --out '%s' >/dev/null", exe,
                 (long long)n, p3);
        EXPECT(system(cmd) == 0, "%s failed", cmd);
        free(t3);
        t3 = mt_file_read(p3, &n3, err);
        EXPECT(t3 && n3 == n2 && !memcmp(t3, t2, n2),
               "minimax-data synth --kind pairs: other bytes");
    } else {
        printf("MT_DATA_CLI not set: the command line not checked\n");
    }
    free(t1), free(t2), free(t3);
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_synth_pairs", test_pairs},
};
MT_TEST_MAIN(cases)
