/* cli_flags.h: every number a program reads from its command line or environment goes through
 * these, so that junk ("abc", "1x", "", "nan", "-5" where a size is wanted) is refused in one
 * line naming the flag and its range, instead of becoming 0 through atoi. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An integer in [lo, hi] (decimal, optional sign, nothing after it). false with
 * "--flag wants an integer in [lo, hi], got \"v\"" in err (n bytes). */
bool mt_flag_int(const char *flag, const char *v, long long lo, long long hi, long long *out,
                 char *err, size_t n);
/* The same for an int (lo and hi within int's range). */
bool mt_flag_int32(const char *flag, const char *v, int lo, int hi, int *out, char *err, size_t n);
/* An unsigned 64-bit integer (a seed): decimal digits only, no sign, at most 2^64 - 1. */
bool mt_flag_u64(const char *flag, const char *v, uint64_t *out, char *err, size_t n);
/* A finite number in the range lo..hi, each end open or closed as lo_open / hi_open say
 * ("--top-p wants a number in (0, 1], got \"nan\""). Infinities and NaN are refused. */
bool mt_flag_double(const char *flag, const char *v, double lo, bool lo_open, double hi,
                    bool hi_open, double *out, char *err, size_t n);
/* A non-empty text. */
bool mt_flag_text(const char *flag, const char *v, char *err, size_t n);
/* One more value of a repeated text flag (--stop) appended to list[*count]: refuses an empty
 * value and one past max ("--stop: at most 8 stop strings") rather than ignoring it. */
bool mt_flag_list_add(const char *flag, const char *v, const char **list, int *count, int max,
                      char *err, size_t n);

/* Output paths: a tool refuses, before any work, an output that would overwrite one of its
 * inputs, and an output it cannot create (rather than failing after the work). */

/* Whether a and b name the same file: the same (device, inode) when both exist (a hard link or
 * a symlink is the same file by another name); a path that does not exist yet is its parent
 * directory's (device, inode) and its last name. */
bool mt_path_same(const char *a, const char *b);
/* false with "OUT_FLAG OUT is IN_FLAG IN (the same file): ..." in err when out names the same
 * file as in (in NULL: nothing to compare). */
bool mt_out_not_input(const char *out_flag, const char *out, const char *in_flag, const char *in,
                      char *err, size_t n);
/* false with one line in err when out lies in the directory dir (its parent directory is dir) or
 * is the same file as one of dir's entries: a model directory's files are never written over. */
bool mt_out_not_in_dir(const char *out_flag, const char *out, const char *dir_flag, const char *dir,
                       char *err, size_t n);
/* false with "FLAG OUT: cannot create a file there: why" unless the file the atomic write
 * creates beside out (out + ".tmp.<pid>") can be created now (it is removed at once) and out
 * is not a directory. */
bool mt_out_writable(const char *flag, const char *out, char *err, size_t n);
