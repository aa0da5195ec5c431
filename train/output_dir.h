/* output_dir.h: what a run may do to its output directory (docs/training.md, "Outputs"):
 *  - one run at a time: rank 0 holds an exclusive lock (fcntl, released by the kernel however
 *    the process ends) on <dir>/.minimax-train.lock, which names its host and PID, until it
 *    exits; another run refuses, naming the holder; a lock file left by a run that ended without
 *    releasing it (killed, crashed) is taken over, saying so;
 *  - a fresh run (no --resume) does not write over another run's results (rows of loss.csv or
 *    eval.csv, checkpoint-<step> directories): it refuses, naming them, unless --overwrite, which
 *    first removes the files this trainer writes there, and nothing else;
 *  - a resume writes into the checkpoint's own run directory, or into an empty one (or, with
 *    --overwrite, one whose results it first removes); into its own run from a checkpoint that
 *    is not the newest only with --rewind, which moves the later checkpoints, log rows and
 *    eval-generate files aside together into <dir>/rewound-<time>/ (output_rewind.c);
 *  - no input of the run (model.path, the data files, ...) is, or lies in, what the run writes
 *    or removes there (compared by device and inode, so another name for it counts too);
 *  - a rank that fails removes the temporary files it was writing (mt_cleanup_*). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "core/check.h"

typedef struct {
    int lock_fd; /* -1: no lock held */
    char lock_path[1100];
} mt_outdir;

/* How a run is to use its output directory. */
typedef struct {
    const char *resume; /* --resume CHECKPOINT; NULL: a fresh run (or --eval-only) */
    long resume_step;   /* the checkpoint's step (its manifest) */
    bool overwrite;     /* --overwrite */
    bool rewind;        /* --rewind */
} mt_outdir_mode;

/* Rank 0: creates dir (naming the path in the way when one is not a directory), takes its lock,
 * and checks it for another run's results as mode says (see the top of this file). Returns
 * true, or false with one line in err (nothing changed then). */
bool mt_outdir_open(mt_outdir *od, const char *dir, const mt_outdir_mode *mode, char *err,
                    size_t errlen);
/* Releases the lock. The lock file stays, emptied: removing it would let a run that opened it
 * just before and one that creates it anew both hold "the" lock. */
void mt_outdir_close(mt_outdir *od);

/* The steps of the checkpoint-<step> directories in dir, oldest first (at most max); returns
 * how many. */
#define MT_OUTDIR_MAX_CHECKPOINTS 4096
int mt_outdir_checkpoints(const char *dir, long *steps, int max);

/* An input of the run: what names it (a recipe key) and its path. */
typedef struct {
    const char *key, *path;
} mt_outdir_input;
/* Whether the run's outputs in dir would write over or remove one of its inputs: an input that
 * is dir itself, or lies in an entry of dir the trainer writes or removes (checkpoint-<step>,
 * loss.csv, recipe.toml, ...), by any name (device and inode compared). true, or false with one
 * line in err naming the key, both paths and the remedy. Nothing is created. */
bool mt_outdir_inputs_check(const char *dir, const mt_outdir_input *in, int n, char *err,
                            size_t errlen);

/* What output_rewind.c shares with output_dir.c: a formatted error into err, returning false;
 * whether name is an entry of output.dir this trainer writes (what --overwrite removes); the
 * directory a path is in ("." for a bare name); the results of an earlier run in dir listed
 * into out, returning how many, the newest checkpoint's step in *newest. (Whether two paths are
 * the same file: mt_path_same, core/cli_flags.h.) */
bool mt_outdir_fail(char *err, size_t n, const char *fmt, ...) MT_PRINTF(3, 4);
bool mt_outdir_own_output(const char *name);
void mt_outdir_parent(const char *path, char *out, size_t n);
int mt_outdir_results(const char *dir, char *out, size_t n, long *newest);
/* A resume into its own run's directory from the checkpoint of step `step` (rank 0, the lock
 * held): the checkpoints, log rows and eval-generate files after it. None: true. Some: without
 * rewind false with one line in err naming them; with rewind they are moved into
 * dir/rewound-<time>/ (said on stdout) and true, or false with err when a move fails. */
bool mt_outdir_rewind(const char *dir, const char *resume, long step, bool rewind, char *err,
                      size_t errlen);
/* The step a log line is of (loss.csv, eval.csv: its first field; metrics.jsonl: "step"), or
 * -1 when it has none. */
long mt_log_line_step(const char *line);

/* mkdir -p that says which component is in the way ("... is a file, not a directory").
 * Returns true, or false with err set. */
bool mt_dir_make(const char *dir, char *err, size_t errlen);
/* rm -rf without a shell; true when path is gone. */
bool mt_remove_tree(const char *path);

/* Paths removed (recursively) when this process ends on an error (MT_DIE, the watchdog
 * included), before the job is aborted: the checkpoint directory being written.
 * mt_cleanup_install puts this in front of the abort hook installed now (the communicators':
 * so it is called after they are set up), and also releases the lock of od (when not NULL) on
 * such an exit. */
void mt_cleanup_install(mt_outdir *od);
void mt_cleanup_add(const char *path);
void mt_cleanup_remove(const char *path);
