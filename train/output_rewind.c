/* output_rewind.c: a resume from an older checkpoint of the same run (--rewind), and the
 * outputs-over-inputs check (see output_dir.h). A rewind moves, never deletes: the later
 * checkpoints, log rows and eval-generate files go together into <dir>/rewound-<time>/, where
 * they stay readable as the run they were (logs with their headers). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "core/cli_flags.h"
#include "data/chat_template.h"
#include "core/file_io.h"
#include "train/output_dir.h"
#include "train/tboard.h"

long mt_log_line_step(const char *line) {
    static const char json_key[] = "{\"step\": ";
    if (!strncmp(line, json_key, sizeof(json_key) - 1)) line += sizeof(json_key) - 1;
    if (*line < '0' || *line > '9') return -1;
    char *end = NULL;
    errno = 0;
    const long step = strtol(line, &end, 10);
    if (errno || (*end != ',' && *end != '\n' && *end != '\r' && *end != 0)) return -1;
    return step;
}

/* eval-generate-<step>.jsonl (its step in *step). */
static bool generate_name(const char *name, long *step) {
    if (strncmp(name, "eval-generate-", 14) || name[14] < '0' || name[14] > '9') return false;
    char *end = NULL;
    errno = 0;
    *step = strtol(name + 14, &end, 10);
    return !errno && !strcmp(end, ".jsonl");
}

/* ------------------------------------------------------------------------------------------ */
/* what follows a step */

#define LOGS 3
static const char *log_names[LOGS] = {"loss.csv", "eval.csv", "metrics.jsonl"};
static const bool log_header[LOGS] = {true, true, false};

typedef struct {
    long checkpoints[MT_OUTDIR_MAX_CHECKPOINTS];
    int n_checkpoints;
    long generates[MT_OUTDIR_MAX_CHECKPOINTS];
    int n_generates;
    long rows[LOGS], first_row[LOGS], last_row[LOGS];
    int n_events; /* TensorBoard event files with records after the step */
} later_results;

/* The rows of a log after step (the header aside). */
static void log_rows_after(const char *path, bool header, long step, long *rows, long *first,
                           long *last) {
    *rows = 0, *first = -1, *last = -1;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[4096];
    for (bool head = header; fgets(line, sizeof(line), f); head = false) {
        const long s = head ? -1 : mt_log_line_step(line);
        if (s <= step) continue;
        if (s != *last) (*rows)++;
        if (*first < 0) *first = s;
        *last = s;
    }
    fclose(f);
}

static void later_find(const char *dir, long step, later_results *l) {
    memset(l, 0, sizeof(*l));
    long all[MT_OUTDIR_MAX_CHECKPOINTS];
    const int n = mt_outdir_checkpoints(dir, all, MT_OUTDIR_MAX_CHECKPOINTS);
    for (int i = 0; i < n; i++)
        if (all[i] > step) l->checkpoints[l->n_checkpoints++] = all[i];
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        long s;
        if (generate_name(e->d_name, &s) && s > step && l->n_generates < MT_OUTDIR_MAX_CHECKPOINTS)
            l->generates[l->n_generates++] = s;
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (mt_tboard_is_events_file(e->d_name) && mt_tboard_records_after(path, step) != 0)
            l->n_events++; /* one that cannot be read: the cut names it */
    }
    if (d) closedir(d);
    for (int i = 0; i < LOGS; i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, log_names[i]);
        log_rows_after(path, log_header[i], step, &l->rows[i], &l->first_row[i], &l->last_row[i]);
    }
}

/* "checkpoint-20, checkpoint-30, loss.csv's steps 11..30, eval.csv's steps 15..30,
 * eval-generate-20.jsonl" into out. */
static void later_describe(const later_results *l, char *out, size_t n) {
    out[0] = 0;
#define ADD(...) snprintf(out + strlen(out), n - strlen(out), __VA_ARGS__)
    for (int i = 0; i < l->n_checkpoints && i < 6; i++)
        ADD("%scheckpoint-%ld", out[0] ? ", " : "", l->checkpoints[i]);
    if (l->n_checkpoints > 6) ADD(" and %d more checkpoints", l->n_checkpoints - 6);
    for (int i = 0; i < LOGS - 1; i++) /* metrics.jsonl holds the same steps as the two */
        if (l->rows[i] && l->first_row[i] == l->last_row[i])
            ADD("%s%s's step %ld", out[0] ? ", " : "", log_names[i], l->first_row[i]);
        else if (l->rows[i])
            ADD("%s%s's steps %ld..%ld", out[0] ? ", " : "", log_names[i], l->first_row[i],
                l->last_row[i]);
    for (int i = 0; i < l->n_generates && i < 4; i++)
        ADD("%seval-generate-%ld.jsonl", out[0] ? ", " : "", l->generates[i]);
    if (l->n_generates > 4) ADD(" and %d more eval-generate files", l->n_generates - 4);
    if (l->n_events)
        ADD("%s%d TensorBoard event file%s later steps", out[0] ? ", " : "", l->n_events,
            l->n_events > 1 ? "s'" : "'s");
#undef ADD
}

/* ------------------------------------------------------------------------------------------ */
/* moving them aside */

static bool write_file(const char *path, const char *text, size_t len, char *err, size_t n) {
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return mt_outdir_fail(err, n, "--rewind: cannot write %s: %s", tmp, strerror(errno));
    const bool ok = fwrite(text, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
    const int e = errno;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return mt_outdir_fail(err, n, "--rewind: cannot write %s: %s", path,
                              strerror(ok ? errno : e));
    }
    return true;
}

/* Splits dir/name at step: the later rows (under the header) into aside/name, the rest stays.
 * The copy is written first, so that a failure between the two leaves rows twice, never none. */
static bool log_split(const char *dir, const char *aside, const char *name, bool header, long step,
                      char *err, size_t n) {
    char path[4200], out[4300];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    size_t len;
    char why[MT_ERR_LEN];
    char *text = mt_file_read(path, &len, why);
    if (!text) return mt_outdir_fail(err, n, "--rewind: %s", why);
    char *keep = mt_malloc(len + 1, "rewind: kept rows"), *moved = mt_malloc(len + 1, "rows");
    size_t nk = 0, nm = 0;
    for (size_t pos = 0, first = 1; pos < len; first = 0) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        const size_t end = nl ? (size_t)(nl - text) + 1 : len;
        const bool head = header && first;
        const bool later = !head && mt_log_line_step(text + pos) > step;
        if (head || !later) memcpy(keep + nk, text + pos, end - pos), nk += end - pos;
        if (head || later) memcpy(moved + nm, text + pos, end - pos), nm += end - pos;
        pos = end;
    }
    snprintf(out, sizeof(out), "%s/%s", aside, name);
    const bool ok = write_file(out, moved, nm, err, n) && write_file(path, keep, nk, err, n);
    free(text);
    free(keep);
    free(moved);
    return ok;
}

static bool move_entry(const char *dir, const char *aside, const char *name, char *err, size_t n) {
    char from[4200], to[4300];
    snprintf(from, sizeof(from), "%s/%s", dir, name);
    snprintf(to, sizeof(to), "%s/%s", aside, name);
    if (rename(from, to) != 0)
        return mt_outdir_fail(err, n, "--rewind: cannot move %s to %s: %s", from, to,
                              strerror(errno));
    return true;
}

/* dir/rewound-<UTC time>[-k], created; its path into out. */
static bool aside_make(const char *dir, char *out, size_t n, char *err, size_t errlen) {
    char stamp[32];
    const time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%SZ", &tm);
    for (int k = 1; k < 100; k++) {
        if (k == 1)
            snprintf(out, n, "%s/rewound-%s", dir, stamp);
        else
            snprintf(out, n, "%s/rewound-%s-%d", dir, stamp, k);
        if (mkdir(out, 0755) == 0) return true;
        if (errno != EEXIST) break;
    }
    return mt_outdir_fail(err, errlen, "--rewind: cannot create %s: %s", out, strerror(errno));
}

/* Each event file of dir cut at step: its later records into aside/<its name>. */
static bool events_split(const char *dir, const char *aside, long step, char *err, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return mt_outdir_fail(err, n, "--rewind: cannot read %s: %s", dir, strerror(errno));
    bool ok = true;
    for (struct dirent *e; ok && (e = readdir(d));) {
        if (!mt_tboard_is_events_file(e->d_name)) continue;
        char path[4200], out[4500], why[MT_ERR_LEN];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        snprintf(out, sizeof(out), "%s/%s", aside, e->d_name);
        ok = mt_tboard_cut(path, step, out, why, sizeof(why));
        if (!ok) mt_outdir_fail(err, n, "--rewind: %s", why);
    }
    closedir(d);
    return ok;
}

static bool later_move(const char *dir, long step, const later_results *l, const char *what,
                       char *err, size_t n) {
    char aside[4200], name[64];
    if (!aside_make(dir, aside, sizeof(aside), err, n)) return false;
    for (int i = 0; i < LOGS; i++)
        if (l->rows[i] && !log_split(dir, aside, log_names[i], log_header[i], step, err, n))
            return false;
    for (int i = 0; i < l->n_checkpoints; i++) {
        snprintf(name, sizeof(name), "checkpoint-%ld", l->checkpoints[i]);
        if (!move_entry(dir, aside, name, err, n)) return false;
    }
    for (int i = 0; i < l->n_generates; i++) {
        snprintf(name, sizeof(name), "eval-generate-%ld.jsonl", l->generates[i]);
        if (!move_entry(dir, aside, name, err, n)) return false;
    }
    if (l->n_events && !events_split(dir, aside, step, err, n)) return false;
    char png[4200]; /* the curve of the steps moved: it goes with them */
    snprintf(png, sizeof(png), "%s/loss.png", dir);
    if (access(png, F_OK) == 0 && !move_entry(dir, aside, "loss.png", err, n)) return false;
    snprintf(png, sizeof(png), "%s/final", dir); /* a later step's model (output.export_final) */
    if (access(png, F_OK) == 0 && !move_entry(dir, aside, "final", err, n)) return false;
    printf("--rewind: moved %s into %s; the run continues from step %ld\n", what, aside, step);
    return true;
}

bool mt_outdir_rewind(const char *dir, const char *resume, long step, bool rewind, char *err,
                      size_t errlen) {
    later_results *l = mt_malloc(sizeof(later_results), "later results");
    later_find(dir, step, l);
    char what[2048];
    later_describe(l, what, sizeof(what));
    bool ok = true;
    if (!rewind && l->n_checkpoints > 0) {
        /* rows after the newest checkpoint alone are a stopped run's: the resume redoes them */
        ok = mt_outdir_fail(
            err, errlen,
            "--resume %s: output.dir %s holds the same run's results after step %ld (%s); "
            "resuming from an older checkpoint would cut its logs back and leave the later "
            "checkpoints beside the new ones: resume from the newest, --resume "
            "%s/checkpoint-%ld, or add --rewind to move what follows step %ld aside into "
            "%s/rewound-<time>/",
            resume, dir, step, what, dir, l->checkpoints[l->n_checkpoints - 1], step, dir);
    } else if (rewind && !what[0] && !l->rows[LOGS - 1]) {
        printf("--rewind: nothing after step %ld in %s\n", step, dir);
    } else if (rewind) {
        ok = later_move(dir, step, l, what[0] ? what : "metrics.jsonl's later rows", err, errlen);
    }
    free(l);
    return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* outputs over inputs */

/* Entries of output.dir a run writes in place or removes, beyond mt_outdir_own_output's. */
static bool written_entry(const char *name) {
    return mt_outdir_own_output(name) || !strcmp(name, "metrics.jsonl") ||
           !strncmp(name, "rewound-", 8) || !strcmp(name, ".minimax-train.lock") ||
           !strcmp(name, ".minimax-train.heartbeat");
}

/* The entry of dir that path is or lies in (by device and inode, after resolving links), into
 * entry; false when path is not under dir. */
static bool entry_under(const char *dir, const char *path, char *entry, size_t n) {
    char real[PATH_MAX], up[PATH_MAX];
    if (!realpath(path, real)) return false;
    for (;;) {
        mt_outdir_parent(real, up, sizeof(up));
        if (!strcmp(up, real)) return false; /* the root */
        if (mt_path_same(up, dir)) {
            snprintf(entry, n, "%s", real + strlen(up) + (strcmp(up, "/") != 0));
            return true;
        }
        snprintf(real, sizeof(real), "%s", up);
    }
}

/* A file directly in dir that the run writes and that is path under another name (a hard
 * link), into entry. */
static bool linked_entry(const char *dir, const char *path, char *entry, size_t n) {
    struct stat ps;
    if (stat(path, &ps) != 0 || !S_ISREG(ps.st_mode)) return false;
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        char p[4200];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        struct stat es;
        found = written_entry(e->d_name) && stat(p, &es) == 0 && es.st_dev == ps.st_dev &&
                es.st_ino == ps.st_ino;
        if (found) snprintf(entry, n, "%s", e->d_name);
    }
    if (d) closedir(d);
    return found;
}

bool mt_outdir_inputs_check(const char *dir, const mt_outdir_input *in, int n, char *err,
                            size_t errlen) {
    struct stat ds;
    if (stat(dir, &ds) != 0) return true; /* not there yet: nothing can be in it */
    for (int i = 0; i < n; i++) {
        if (!in[i].path || !in[i].path[0]) continue;
        char entry[PATH_MAX];
        if (mt_path_same(dir, in[i].path))
            return mt_outdir_fail(
                err, errlen,
                "output.dir %s is %s %s (the same directory): the run would write its "
                "recipe.toml, logs and checkpoints into its input; give the run another "
                "output.dir",
                dir, in[i].key, in[i].path);
        if ((entry_under(dir, in[i].path, entry, sizeof(entry)) &&
             written_entry(strtok(entry, "/"))) ||
            linked_entry(dir, in[i].path, entry, sizeof(entry)))
            return mt_outdir_fail(
                err, errlen,
                "%s %s is %s/%s, which this run writes or removes (a run's outputs: "
                "checkpoints, logs, recipe.toml): give the run another output.dir, or "
                "copy the input out of it",
                in[i].key, in[i].path, dir, entry);
    }
    return true;
}
