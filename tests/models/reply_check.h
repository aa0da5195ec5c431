/* reply_check.h: what the reply-parser tests share (tests/models/reply.c,
 * tests/models/reply_roundtrip.c): the streamed parse of a text, cut at every byte boundary and
 * fed in pieces of every size, against the whole-text parse. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "models/reply.h"

struct cJSON;

/* The failures counted (and the first printed, naming `what`). */
int reply_check_stream(const mt_reply_format *f, const char *prompt, const char *text, size_t n,
                       const struct cJSON *tools, bool calls_off, const char *what);
