/* output_dir.h: what a run may do to its output directory (docs/training.md, "Outputs"):
 *  - one run at a time: rank 0 holds an exclusive lock (fcntl, released by the kernel however
 *    the process ends) on <dir>/.minimax-train.lock, which names its host and PID, until it
 *    exits; another run refuses, naming the holder; a lock file left by a run that ended without
 *    releasing it (killed, crashed) is taken over, saying so;
 *  - a fresh run (no --resume) does not write over another run's results (rows of loss.csv or
 *    eval.csv, checkpoint-<step> directories): it refuses, naming them, unless --overwrite, which
 *    first removes the files this trainer writes there, and nothing else;
 *  - a rank that fails removes the temporary files it was writing (mt_cleanup_*). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int lock_fd; /* -1: no lock held */
    char lock_path[1100];
} mt_outdir;

/* Rank 0: creates dir (naming the path in the way when one is not a directory), takes its lock,
 * and checks it for another run's results (resume: none are refused; overwrite: they are
 * removed first). Returns true, or false with one line in err (nothing changed then). */
bool mt_outdir_open(mt_outdir *od, const char *dir, bool resume, bool overwrite, char *err,
                    size_t errlen);
/* Releases the lock. The lock file stays, emptied: removing it would let a run that opened it
 * just before and one that creates it anew both hold "the" lock. */
void mt_outdir_close(mt_outdir *od);

/* The steps of the checkpoint-<step> directories in dir, oldest first (at most max); returns
 * how many. */
#define MT_OUTDIR_MAX_CHECKPOINTS 4096
int mt_outdir_checkpoints(const char *dir, long *steps, int max);

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
