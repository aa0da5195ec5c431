/* data_gsm8k_answer.c: GSM8K answer extraction and exact match (eval/gsm8k_answer.h): a table
 * of completions written here with the answers a reader takes from them, and (when ../shared
 * has it) every gold answer of GSM8K's training set fed back as a completion scores 100 %. */
#include <stdio.h>
#include <string.h>

#include "data/gsm8k.h"
#include "eval/gsm8k_answer.h"
#include "tests/support/data_util.h"
#include "tests/support/harness.h"

static int test_data_gsm8k_answer(void) {
    static const struct {
        const char *text, *want; /* want NULL: no answer */
    } table[] = {
        {"Natalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72", "72"},
        {"#### 1,200", "1200"},
        {"The total is $1,200.50 dollars.", "1200.5"},
        {"So she earned $10.", "10"},          /* a full stop is not a decimal point */
        {"3 apples and 4 pears make 7.", "7"}, /* the last number */
        {"x = 5\n#### -3", "-3"},
        {"#### 007", "7"},
        {"#### 12.00", "12"},
        {"#### 0.50", "0.5"},
        {"#### -0", "0"},
        {"steps 1, 2, 3 then 40", "40"},      /* ", " is a list, not a separator */
        {"#### 5\nwait, #### 6 apples", "6"}, /* the last marker */
        {"#### none\n(I computed 5)", NULL},  /* a marker with no number after it */
        {"The answer is 1,234,567.", "1234567"},
        {"It costs $ 15 per hour", "15"},
        {"no numbers here", NULL},
        {"", NULL},
        {"1,2", "12"}, /* digits around a comma: a thousands separator, as GSM8K writes them */
        {"in 2-3 days", "3"}, /* a hyphen after a digit is no sign */
    };
    int bad = 0;
    const int n = (int)(sizeof(table) / sizeof(table[0]));
    for (int i = 0; i < n; i++) {
        char out[MT_GSM8K_ANSWER_MAX];
        const bool found = mt_gsm8k_extract(table[i].text, out, sizeof(out));
        const bool ok = table[i].want ? found && strcmp(out, table[i].want) == 0 : !found;
        if (!ok) {
            printf("  \"%s\": got %s\"%s\", want %s\n", table[i].text, found ? "" : "(none) ", out,
                   table[i].want ? table[i].want : "(none)");
            bad++;
        }
    }
    printf("%d of %d extractions as expected\n", n - bad, n);
    EXPECT(bad == 0, "%d extractions differ", bad);
    EXPECT(mt_gsm8k_correct("so 18 in all.", "16 - 3 - 4 = 9, 9*2 = 18\n#### 18"), "match");
    EXPECT(!mt_gsm8k_correct("so 17 in all.", "#### 18"), "a wrong answer matched");
    EXPECT(!mt_gsm8k_correct("no idea", "#### 18"), "no answer matched");
    EXPECT(!mt_gsm8k_correct("18", "no gold number"), "a gold without a number matched");
    /* golds: one number on the marker's line (or the whole text), else refused with the text */
    static const struct {
        const char *gold;
        bool usable;
    } golds[] = {
        {"16 - 3 - 4 = 9\n#### 18", true},
        {"#### 1,200", true},
        {"#### $1,200.50", true},
        {"#### -3", true},
        {"#### 12.", true},
        {"72", true},
        {" 72 \n", true},
        {"#### two", false},
        {"#### 1e5", false},
        {"#### 1/2", false},
        {"#### 5 apples", false},
        {"#### ", false},
        {"#### 5\n#### x", false},
        {"it is 4 or 5", false},
        {"", false},
    };
    for (size_t i = 0; i < sizeof(golds) / sizeof(golds[0]); i++) {
        char why[256] = "";
        const bool got = mt_gsm8k_gold_usable(golds[i].gold, why, sizeof(why));
        EXPECT(got == golds[i].usable, "gold \"%s\": usable %d, want %d (%s)", golds[i].gold, got,
               golds[i].usable, why);
        EXPECT(got || (has(why, "cannot be scored") && !strchr(why, '\n')), "why: %s", why);
    }
    char cut[MT_GSM8K_ANSWER_MAX], big[200];
    memset(big, '9', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    EXPECT(mt_gsm8k_extract(big, cut, sizeof(cut)) && strlen(cut) == sizeof(cut) - 1 &&
               cut[sizeof(cut) - 2] == '~',
           "a long number is not cut and marked: %s", cut);
    return MT_TEST_OK;
}

/* Every gold answer of the training set, as a completion, matches itself: the extractor reads
 * each "####" line GSM8K has. */
static int test_data_gsm8k_answer_gold(void) {
    const char *path = gsm8k_path();
    if (!path) {
        printf("no ../shared/data/gsm8k/train.jsonl\n");
        return MT_TEST_SKIP;
    }
    char err[MT_ERR_LEN];
    mt_gsm8k_set s;
    EXPECT(mt_gsm8k_read(path, false, &s, err) == 0, "%s", err);
    int64_t ok = 0, none = 0, unusable = 0;
    for (int64_t i = 0; i < s.n; i++) {
        char a[MT_GSM8K_ANSWER_MAX], why[256];
        unusable += !mt_gsm8k_gold_usable(s.answer[i], why, sizeof(why));
        none += !mt_gsm8k_extract(s.answer[i], a, sizeof(a));
        ok += mt_gsm8k_correct(s.answer[i], s.answer[i]);
    }
    printf("%lld of %lld gold answers score correct (%lld without a number)\n", (long long)ok,
           (long long)s.n, (long long)none);
    EXPECT(s.n > 7000 && ok == s.n && none == 0 && unusable == 0,
           "gold answers: %lld of %lld (%lld refused as golds)", (long long)ok, (long long)s.n,
           (long long)unusable);
    mt_gsm8k_set_free(&s);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_gsm8k_answer", test_data_gsm8k_answer},
    {"data_gsm8k_answer_gold", test_data_gsm8k_answer_gold},
};
MT_TEST_MAIN(cases)
