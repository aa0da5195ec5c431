/* tfevents.h: a TensorBoard event file reader for the tests, Python-free and written apart from
 * the writer (train/tboard.c): a bitwise CRC-32C, a generic protobuf wire-format walk. It reads
 * TFRecords (length, masked CRC of the length, data, masked CRC of the data; both CRCs checked)
 * and decodes each Event: wall_time, step, file_version, summary values (tag, simple_value) and
 * session_log's status. mt_tfevents_match compares an output.dir's event files with its
 * metrics.jsonl as the logger documents them (docs/training.md, "TensorBoard"). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MT_TFE_VERSION, /* file_version */
    MT_TFE_SCALAR,  /* summary with one simple_value */
    MT_TFE_SESSION, /* session_log */
    MT_TFE_OTHER
} mt_tfe_kind;

typedef struct {
    mt_tfe_kind kind;
    double wall_time;
    int64_t step;
    char text[128]; /* the file version, or the scalar's tag */
    float value;    /* the scalar */
    int status;     /* session_log.status (START = 1) */
    int n_values;   /* summary values in the event (the writer puts one) */
} mt_tfevent;

/* The CRC-32C of n bytes, bit by bit, and TensorFlow's mask of it. */
uint32_t mt_tfe_crc32c(const void *data, size_t n);
uint32_t mt_tfe_masked(const void *data, size_t n);

/* Every record of the file, in order (malloc'ed into *out); the count, or -1 with one line in
 * err (the file, the byte offset, what is wrong: a CRC, a short record, a malformed event). */
int mt_tfevents_read(const char *path, mt_tfevent **out, char *err, size_t n);

/* The event files of dir (not its subdirectories), sorted by name as TensorBoard reads them,
 * against dir/metrics.jsonl: each file starts with file_version "brain.Event:2"; every number
 * of every metrics.jsonl line (but "step" and "time") is exactly one scalar event
 * "<type>/<key>" at the line's step, its value the number as float32 (NaN for null), its
 * wall_time the line's "time"; no other scalar, no (tag, step) twice. true, or false with the
 * first difference in err; the counts into *files and *scalars. */
bool mt_tfevents_match(const char *dir, int *files, int *scalars, char *err, size_t n);
