/* profile_report.h: the op profile of the training steps (autograd/profile.h) as a table: printed
 * by rank 0 at the end of the run, and written to <output.dir>/profile.tsv (docs/training.md,
 * "Op profile"). Rows: one per (op, direction) that ran, and the named rows (the ZeRO gathers
 * and reduce-scatters, the optimizer), longest first, then "(untimed)": the step's wall time no
 * row accounts for (the batch upload, the tape's bookkeeping, waits), and in profile.tsv
 * "(step)": the steps counted (calls) and their mean wall time. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "autograd/profile.h"

/* --profile given, or MT_PROFILE set to anything but "" or "0". */
bool mt_profile_wanted(bool flag);

typedef struct {
    const char *op, *dir; /* dir: "fwd", "bwd" or "step" */
    mt_profile_stat s;
} mt_profile_row;
/* p's rows that ran, longest first (at most max); returns how many. */
int mt_profile_rows(const mt_profile *p, mt_profile_row *rows, int max);

/* The table: op, dir, calls per step, ms per step, share of the step's wall time, GFLOP/s (*:
 * the FLOPs are an upper bound), GB/s, GFLOP per step. what: whose steps (a line's head). */
void mt_profile_print(FILE *out, const mt_profile *p, const char *what);

/* The same as tab-separated columns op, dir, calls_per_step, ms_per_step, share (a fraction),
 * gflop_per_step, gbyte_per_step, gflops, gbps, upper_bound (0/1), written to path through
 * path.tmp and a rename. true, or false with one line in err naming the file. */
bool mt_profile_write_tsv(const char *path, const mt_profile *p, char *err, size_t errlen);
