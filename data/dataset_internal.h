/* dataset_internal.h: the format readers behind mt_conv_read (data/dataset_formats.c). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/dataset.h"
#include "jinja/jinja.h"

/* Where a reader's error goes: "path:line: " then the reason. */
typedef struct {
    const char *path;
    int64_t line;
    char *err;
} mt_rec_ctx;

/* err = "path:line: " + the formatted reason; returns -1. */
int mt_rec_fail(const mt_rec_ctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The records of a file, jsonl (one JSON object per line, blank lines skipped) or one JSON
 * array, each checked (UTF-8, no NUL) and parsed as json.loads into h (reset per record) and
 * given to fn with its path and line. fn returns 0, or -1 with "path:line: reason" in r->err
 * (mt_rec_fail): an error, or under skip_bad counted in counts->n_skipped (the first kept in
 * first_skip); -2 is an error whatever skip_bad says. A malformed line is such a record; a
 * malformed array ends the read. counts->n_lines counts the records seen. 0, or -1 with err. */
typedef int (*mt_record_fn)(void *ctx, jinja_heap *h, jinja_value rec, const mt_rec_ctx *r);
typedef struct {
    int64_t n_lines, n_skipped;
    char first_skip[MT_ERR_LEN];
} mt_record_counts;
int mt_records_parse(const char *path, const char *text, size_t len, bool skip_bad, mt_record_fn fn,
                     void *ctx, mt_record_counts *counts, char *err);

typedef struct {
    const char *name;
    const char *needs; /* the keys that make a record this format's, for messages */
    /* true when rec has the keys that make it this format's record */
    bool (*fits)(jinja_value rec);
    /* the conversation of a record ({"messages", "tools"?, "documents"?}) into *conv, in h;
     * 0, or -1 with "path:line: reason" in r->err */
    int (*read)(jinja_heap *h, jinja_value rec, jinja_value *conv, const mt_rec_ctx *r);
} mt_format_reader;

/* Indexed by mt_data_format (entry MT_FORMAT_AUTO unused). */
extern const mt_format_reader mt_format_readers[MT_FORMAT_COUNT];
