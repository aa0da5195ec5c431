/* gsm8k_answer.h: the final answer of a GSM8K-style completion, and exact match with the gold.
 *
 * The answer is the first number on the line of the last "####" (GSM8K's answer marker; none
 * there: no answer), else the last number of the text. A number: an optional '-' (not right
 * after a digit: "2-3" is a range or a difference, its last number 3), digits with optional ','
 * thousands separators and an optional decimal part ("1,200", "-3", "0.5", "$1,200.50": the '$' is
 * not part of it; a
 * '.' ending a sentence is not a decimal point). Normalised for comparison: separators removed,
 * leading zeros dropped, a decimal part's trailing zeros (and a bare '.') removed, "-0" is "0":
 * so "1,200", "1200.00" and "$1200" all read "1200". */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/gsm8k.h"

#define MT_GSM8K_ANSWER_MAX 64

/* The normalised answer of text into out (cap >= MT_GSM8K_ANSWER_MAX); false (out "") when the
 * text holds no number. Numbers longer than the buffer are cut (never a match by accident: the
 * cut is marked with a trailing '~'). */
bool mt_gsm8k_extract(const char *text, char *out, size_t cap);

/* Exact match: the completion's answer equals the gold answer's (the gold's own "####" line);
 * a completion or gold without a number never matches. */
bool mt_gsm8k_correct(const char *completion, const char *gold);

/* Whether the scorer can use gold as a gold answer: its last "####" line (or, without a marker,
 * the whole text) holds exactly one number as read above, optionally after a '$' and before a
 * full stop, and nothing else ("#### 72", "#### $1,200.50"). Golds such as "#### two",
 * "#### 1e5" or "#### 1/2" would be read as no answer, "1" and "1": every completion would be
 * scored against the wrong number. false with the reason in why (n bytes). */
bool mt_gsm8k_gold_usable(const char *gold, char *why, size_t n);

/* The gold answers of the first n records (those evaluated) against the scorer
 * (mt_gsm8k_gold_usable): 0, or -1 with "path:line: the gold answer ..."
 * in err for the first one it cannot use, so that no sample is scored against a wrong number. */
int mt_gsm8k_check_golds(const mt_gsm8k_set *s, const char *path, int64_t n, char *err,
                         size_t errlen);
