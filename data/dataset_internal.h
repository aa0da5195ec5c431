/* dataset_internal.h: the format readers behind mt_conv_read (data/dataset_formats.c). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/dataset.h"

typedef struct {
    mt_conv_set *set;
    int64_t cap_msgs, cap_conv;
} mt_conv_build;

/* Appends a message (text copied) to the record being read. */
void mt_conv_add_msg(mt_conv_build *b, mt_chat_role role, const char *text, size_t len);

typedef struct {
    const char *name;
    const char *needs; /* the keys that make a record this format's, for messages */
    /* true when obj has the keys that make it this format's record */
    bool (*fits)(const struct cJSON *obj);
    /* appends the record's messages; returns 0, or -1 with "path:line: reason" in err */
    int (*read)(mt_conv_build *b, const struct cJSON *obj, const char *path, int64_t line_no,
                char *err);
} mt_format_reader;

/* Indexed by mt_data_format (entry MT_FORMAT_AUTO unused). */
extern const mt_format_reader mt_format_readers[MT_FORMAT_COUNT];
