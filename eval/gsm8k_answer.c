/* gsm8k_answer.c: answer extraction and exact match for GSM8K, and the gold answers checked
 * against them (eval/gsm8k_answer.h). */
#include "eval/gsm8k_answer.h"

#include <stdio.h>
#include <string.h>

static bool ga_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* The number starting at s[i] (a digit, or a '-' before one): its end, and its normalised form
 * in out. */
static size_t ga_number(const char *s, size_t i, char *out, size_t cap) {
    char raw[256];
    size_t n = 0, j = i;
    bool neg = false;
    if (s[j] == '-') {
        neg = true;
        j++;
    }
    /* integer part: digits, ',' only between digits */
    while (ga_digit(s[j]) || (s[j] == ',' && j > i && ga_digit(s[j - 1]) && ga_digit(s[j + 1]))) {
        if (s[j] != ',' && n + 1 < sizeof(raw)) raw[n++] = s[j];
        j++;
    }
    size_t int_len = n;
    if (s[j] == '.' && ga_digit(s[j + 1])) { /* a decimal part, not a full stop */
        if (n + 1 < sizeof(raw)) raw[n++] = '.';
        j++;
        while (ga_digit(s[j])) {
            if (n + 1 < sizeof(raw)) raw[n++] = s[j];
            j++;
        }
    }
    raw[n] = '\0';
    size_t a = 0; /* leading zeros, keeping one before '.' or at the end */
    while (a + 1 < int_len && raw[a] == '0') a++;
    size_t e = n;
    if (int_len < n) { /* trailing zeros of the decimals, then a bare '.' */
        while (e > int_len + 1 && raw[e - 1] == '0') e--;
        if (e == int_len + 1) e = int_len;
    }
    const bool zero = e - a == 1 && raw[a] == '0';
    size_t o = 0;
    if (neg && !zero) out[o++] = '-';
    size_t k = a;
    for (; k < e && o + 2 < cap; k++) out[o++] = raw[k];
    if (k < e) out[o++] = '~'; /* cut: marked, so it equals no uncut number */
    out[o] = '\0';
    return j;
}

static bool ga_number_start(const char *s, size_t i) {
    return ga_digit(s[i]) || (s[i] == '-' && ga_digit(s[i + 1]));
}

bool mt_gsm8k_extract(const char *text, char *out, size_t cap) {
    out[0] = '\0';
    const char *mark = NULL;
    for (const char *p = strstr(text, "####"); p; p = strstr(p + 4, "####")) mark = p;
    if (mark) { /* the first number after the last marker */
        for (size_t i = (size_t)(mark - text) + 4; text[i] && text[i] != '\n'; i++)
            if (ga_number_start(text, i)) {
                ga_number(text, i, out, cap);
                return true;
            }
        return false; /* a marker line without a number: no answer, not some other number */
    }
    bool found = false;
    for (size_t i = 0; text[i];) {
        if (ga_number_start(text, i) && !(i > 0 && ga_digit(text[i - 1]))) {
            i = ga_number(text, i, out, cap);
            found = true;
        } else {
            i++;
        }
    }
    return found;
}

bool mt_gsm8k_correct(const char *completion, const char *gold) {
    char a[MT_GSM8K_ANSWER_MAX], g[MT_GSM8K_ANSWER_MAX];
    if (!mt_gsm8k_extract(completion, a, sizeof(a)) || !mt_gsm8k_extract(gold, g, sizeof(g)))
        return false;
    return strcmp(a, g) == 0;
}

static bool ga_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

bool mt_gsm8k_gold_usable(const char *gold, char *why, size_t n) {
    const char *mark = NULL;
    for (const char *p = strstr(gold, "####"); p; p = strstr(p + 4, "####")) mark = p;
    const char *s = mark ? mark + 4 : gold;
    size_t end = 0; /* the answer: the marker's line, or the whole text */
    while (s[end] && (mark ? s[end] != '\n' : true)) end++;
    size_t i = 0;
    while (i < end && (ga_space(s[i]) || (!mark && s[i] == '\n'))) i++;
    if (i < end && s[i] == '$') i++;
    while (i < end && ga_space(s[i])) i++;
    char num[MT_GSM8K_ANSWER_MAX];
    size_t j = i < end && ga_number_start(s, i) ? ga_number(s, i, num, sizeof(num)) : i;
    bool ok = j > i && j <= end;
    if (ok) {
        if (j < end && s[j] == '.') j++;
        while (j < end && (ga_space(s[j]) || (!mark && s[j] == '\n'))) j++;
        ok = j == end;
    }
    if (!ok) { /* the answer shown on one line: at most 40 bytes, line breaks as "\n" */
        char shown[96];
        size_t o = 0;
        const size_t from = mark ? 0 : i;
        for (size_t k = from; k < end && k < from + 40 && o + 3 < sizeof(shown); k++) {
            if (s[k] == '\n' || s[k] == '\r') {
                shown[o++] = '\\';
                shown[o++] = s[k] == '\n' ? 'n' : 'r';
            } else {
                shown[o++] = s[k];
            }
        }
        shown[o] = '\0';
        snprintf(why, n,
                 "the gold answer \"%s%s\" is not one number (digits, ',' separators, a "
                 "decimal part: \"#### 72\"), so it cannot be scored",
                 mark ? "####" : "", shown);
    }
    return ok;
}

int mt_gsm8k_check_golds(const mt_gsm8k_set *s, const char *path, int64_t n, char *err,
                         size_t errlen) {
    for (int64_t i = 0; i < n && i < s->n; i++) {
        char why[256];
        if (mt_gsm8k_gold_usable(s->answer[i], why, sizeof(why))) continue;
        snprintf(err, errlen, "%s:%lld: %s", path, (long long)s->line[i], why);
        return -1;
    }
    return 0;
}
