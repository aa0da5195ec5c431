/* tboard.h: TensorBoard event files written from C (output.report_to = ["tensorboard"]), the
 * logger's second copy of metrics.jsonl's numbers (train/logger.c).
 *
 * The format, as TensorFlow's record writer and TensorBoard's event reader define it: a file of
 * records, each the data's length (uint64, little-endian), the masked CRC-32C of those 8 bytes
 * (uint32), the data, the masked CRC-32C of the data (masked: the CRC rotated right by 15 bits
 * plus 0xa282ead8). Each record's data is one tensorboard.Event protobuf: wall_time (field 1,
 * double), step (2, int64), and one of file_version (3, "brain.Event:2", the first record),
 * summary (5: Summary.value (1): tag (1), simple_value (2, float)) or session_log (7: status
 * (1), START = 1). Files are named events.out.tfevents.<Unix seconds>.<host>.<pid>.<k>:
 * TensorBoard reads a directory's files in name order, and a run's later file sorts after. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *f; /* NULL: no event file (report_to has no "tensorboard") */
    char path[1200];
} mt_tboard;

/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78) of n bytes, and its masked form. */
uint32_t mt_tboard_crc32c(const void *data, size_t n);
uint32_t mt_tboard_crc_mask(uint32_t crc);

/* Whether a file name is an event file's (it holds "tfevents", as TensorBoard looks for). */
bool mt_tboard_is_events_file(const char *name);

/* A new event file in dir, its first record the file version. resume_step > 0: the event files
 * already in dir keep their records of steps <= resume_step only (each rewritten atomically,
 * as loss.csv is), and the new file's second record is a SessionLog START at resume_step + 1,
 * which makes a TensorBoard that read the dropped steps live forget them; 0: the event files in
 * dir are removed (a new metrics.jsonl). Stops the run naming the file on an error. */
void mt_tboard_open(mt_tboard *tb, const char *dir, int resume_step);
/* One event: a scalar of tag at step, as float32 (what simple_value holds). */
void mt_tboard_scalar(mt_tboard *tb, long step, double wall_time, const char *tag, double value);
/* The events written so far reach the file; a failure (a full disk) stops the run. */
void mt_tboard_flush(mt_tboard *tb);
void mt_tboard_close(mt_tboard *tb);

/* The number of records of steps > step in event file path (file versions aside), for --rewind
 * and the resume's listing; -1 when it cannot be read. */
long mt_tboard_records_after(const char *path, long step);
/* Cuts event file path at step: the records of later steps (the file version first) go to aside
 * (when not NULL; written first), the rest stays (rewritten atomically). A torn last record (a
 * run killed while writing it) is dropped. false with one line in err (the file, the byte) when
 * the file cannot be read or a record's CRC does not match. */
bool mt_tboard_cut(const char *path, long step, const char *aside, char *err, size_t n);
