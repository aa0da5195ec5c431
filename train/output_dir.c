/* output_dir.c: see output_dir.h. */
#include "output_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "core/cli_flags.h"
#include "train/tboard.h"

#define LOCK_NAME ".minimax-train.lock"

bool mt_outdir_fail(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return false;
}

bool mt_dir_make(const char *dir, char *err, size_t errlen) {
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", dir);
    const size_t len = strlen(buf);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        const char saved = buf[i];
        buf[i] = 0;
        struct stat sb;
        if (stat(buf, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode) && !saved)
                return mt_outdir_fail(err, errlen, "%s is %s, not a directory", dir,
                                      S_ISREG(sb.st_mode) ? "a file" : "something else");
            if (!S_ISDIR(sb.st_mode))
                return mt_outdir_fail(err, errlen, "%s: %s is %s, not a directory", dir, buf,
                                      S_ISREG(sb.st_mode) ? "a file" : "something else");
        } else if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            return mt_outdir_fail(err, errlen, "cannot create directory %s: %s", buf,
                                  strerror(errno));
        }
        buf[i] = saved;
    }
    return true;
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb, (void)ftw;
    return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

bool mt_remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT;
    if (!S_ISDIR(sb.st_mode)) return unlink(path) == 0;
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* the lock */

static void this_host(char *buf, size_t n) {
    if (gethostname(buf, n) != 0) snprintf(buf, n, "?");
    buf[n - 1] = 0;
}

/* "pid P on host H" from the lock file's text "host H pid P", with whether P is known to be
 * gone (same host, no such process). Empty text: no holder recorded. */
static void holder_describe(const char *text, char *out, size_t n) {
    char host[256] = "", me[256];
    long pid = 0;
    if (sscanf(text, "host %255s pid %ld", host, &pid) != 2) {
        snprintf(out, n, "an unknown holder");
        return;
    }
    this_host(me, sizeof(me));
    const bool gone = !strcmp(host, me) && pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
    snprintf(out, n, "pid %ld on host %s%s", pid, host, gone ? " (no longer running)" : "");
}

static bool lock_take(mt_outdir *od, const char *dir, char *err, size_t errlen) {
    snprintf(od->lock_path, sizeof(od->lock_path), "%s/" LOCK_NAME, dir);
    const int fd = open(od->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return mt_outdir_fail(err, errlen, "cannot create the lock file %s: %s", od->lock_path,
                              strerror(errno));
    char text[512] = "", who[600];
    const ssize_t got = pread(fd, text, sizeof(text) - 1, 0);
    text[got > 0 ? got : 0] = 0;
    text[strcspn(text, "\n")] = 0;
    holder_describe(text, who, sizeof(who));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        const int e = errno;
        close(fd);
        if (e == EACCES || e == EAGAIN)
            return mt_outdir_fail(
                err, errlen,
                "output.dir %s is in use by another run (%s; lock file %s): wait for it "
                "to end, or give this run another output.dir",
                dir, text[0] ? who : "an unknown holder", od->lock_path);
        return mt_outdir_fail(err, errlen, "cannot lock %s: %s (a file system without locks?)",
                              od->lock_path, strerror(e));
    }
    /* the lock is free: whoever the file names ended without releasing it */
    if (text[0])
        printf("output.dir %s: taking over the lock left by %s, which ended without releasing "
               "it\n",
               dir, who);
    char me[256];
    this_host(me, sizeof(me));
    int n = snprintf(text, sizeof(text), "host %s pid %d\n", me, (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n) {
        const int e = errno;
        close(fd);
        return mt_outdir_fail(err, errlen, "%s: write failed: %s", od->lock_path, strerror(e));
    }
    od->lock_fd = fd;
    return true;
}

void mt_outdir_close(mt_outdir *od) {
    if (od->lock_fd < 0) return;
    if (ftruncate(od->lock_fd, 0) != 0) { /* the next run then reports a stale lock: harmless */
    }
    close(od->lock_fd); /* releases the fcntl lock */
    od->lock_fd = -1;
}

/* ------------------------------------------------------------------------------------------ */
/* earlier results */

/* Data rows of a CSV log (its lines after the header); -1 when it is not a regular file. */
static long csv_rows(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long lines = 0;
    for (int c; (c = fgetc(f)) != EOF;) lines += c == '\n';
    fclose(f);
    return lines > 0 ? lines - 1 : 0;
}

/* checkpoint-<digits> (its step in *step), with the suffix ".tmp" when tmp. */
static bool checkpoint_name(const char *name, bool tmp, long *step) {
    if (strncmp(name, "checkpoint-", 11)) return false;
    char *end = NULL;
    const char *digits = name + 11;
    if (*digits < '0' || *digits > '9') return false;
    *step = strtol(digits, &end, 10);
    return tmp ? !strcmp(end, ".tmp") : *end == 0;
}

/* A file or directory this trainer writes into output.dir (the lock file and the token cache
 * aside): what --overwrite removes. */
bool mt_outdir_own_output(const char *name) {
    static const char *files[] = {"loss.csv",     "eval.csv",       "loss.png", "recipe.toml",
                                  "loss.csv.tmp", "loss.png.tmp",   "final",    "final.tmp",
                                  "profile.tsv",  "profile.tsv.tmp"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (!strcmp(name, files[i])) return true;
    long step;
    if (!strncmp(name, "eval-generate-", 14) && name[14] >= '0' && name[14] <= '9') {
        char *end = NULL; /* eval-generate-<step>.jsonl: eval.generate_data's results */
        strtol(name + 14, &end, 10);
        if (!strcmp(end, ".jsonl")) return true;
    }
    return checkpoint_name(name, false, &step) || checkpoint_name(name, true, &step) ||
           !strncmp(name, "recipe.toml.tmp.", 16) || mt_tboard_is_events_file(name) ||
           !strncmp(name, ".tboard-cut-", 12);
}

static int step_order(const void *a, const void *b) {
    const long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int mt_outdir_checkpoints(const char *dir, long *steps, int max) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) && n < max;) {
        long step;
        if (!checkpoint_name(e->d_name, false, &step)) continue;
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) steps[n++] = step;
    }
    if (d) closedir(d);
    qsort(steps, (size_t)n, sizeof(long), step_order);
    return n;
}

/* The results of an earlier run in dir, listed into out ("loss.csv (20 steps), checkpoint-10,
 * ..."); the newest checkpoint's step in *newest (-1: none). Returns how many. */
int mt_outdir_results(const char *dir, char *out, size_t n, long *newest) {
    out[0] = 0;
    *newest = -1;
    int count = 0;
    char path[4200];
    const char *logs[2][2] = {{"loss.csv", "steps"}, {"eval.csv", "evaluations"}};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, logs[i][0]);
        const long rows = csv_rows(path);
        if (rows <= 0) continue;
        snprintf(out + strlen(out), n - strlen(out), "%s%s (%ld %s)", count ? ", " : "", logs[i][0],
                 rows, logs[i][1]);
        count++;
    }
    long steps[MT_OUTDIR_MAX_CHECKPOINTS];
    const int n_steps = mt_outdir_checkpoints(dir, steps, MT_OUTDIR_MAX_CHECKPOINTS);
    for (int i = 0; i < n_steps && i < 6; i++)
        snprintf(out + strlen(out), n - strlen(out), "%scheckpoint-%ld", count + i ? ", " : "",
                 steps[i]);
    if (n_steps > 6)
        snprintf(out + strlen(out), n - strlen(out), " and %d more checkpoints", n_steps - 6);
    if (n_steps) *newest = steps[n_steps - 1];
    return count + n_steps;
}

/* Removes this trainer's outputs from dir (regular files and directories by their names; a
 * link, or anything else, stays) and lists them into out. */
static bool results_clear(const char *dir, char *out, size_t n, char *err, size_t errlen) {
    out[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return mt_outdir_fail(err, errlen, "cannot read %s: %s", dir, strerror(errno));
    bool ok = true;
    for (struct dirent *e; ok && (e = readdir(d));) {
        if (!mt_outdir_own_output(e->d_name)) continue;
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) != 0 || !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode))) continue;
        if (!mt_remove_tree(path))
            ok = mt_outdir_fail(err, errlen, "--overwrite: cannot remove %s: %s", path,
                                strerror(errno));
        snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? ", " : "", e->d_name);
    }
    closedir(d);
    return ok;
}

void mt_outdir_parent(const char *path, char *out, size_t n) {
    snprintf(out, n, "%s", path);
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/') out[--len] = 0;
    char *slash = strrchr(out, '/');
    if (!slash)
        snprintf(out, n, ".");
    else if (slash == out)
        out[1] = 0;
    else
        *slash = 0;
}

/* Removes another run's results from dir for --overwrite, saying what went. */
static bool outdir_overwrite(mt_outdir *od, const char *dir, char *err, size_t errlen) {
    char removed[4096];
    if (!results_clear(dir, removed, sizeof(removed), err, errlen)) {
        mt_outdir_close(od);
        return false;
    }
    printf("--overwrite: removed %s from %s\n", removed, dir);
    return true;
}

/* A resume: into the checkpoint's own run directory (from its newest checkpoint, or with
 * --rewind), or into another one that holds no run's results (or whose results --overwrite
 * removes). */
static bool outdir_open_resume(mt_outdir *od, const char *dir, const mt_outdir_mode *m, char *err,
                               size_t errlen) {
    char run[4096], found[2048];
    mt_outdir_parent(m->resume, run, sizeof(run));
    long newest;
    bool ok = true;
    if (mt_path_same(dir, run)) {
        if (m->overwrite)
            ok = mt_outdir_fail(
                err, errlen,
                "--resume %s continues the run in %s and --overwrite would remove it, the "
                "checkpoint included: give one of them",
                m->resume, dir);
        else
            ok = mt_outdir_rewind(dir, m->resume, m->resume_step, m->rewind, err, errlen);
    } else if (mt_outdir_results(dir, found, sizeof(found), &newest) > 0) {
        if (m->overwrite) return outdir_overwrite(od, dir, err, errlen);
        ok = mt_outdir_fail(
            err, errlen,
            "--resume %s: output.dir %s holds another run's results (%s), and the "
            "checkpoint is of the run in %s: resume into %s (leave output.dir unset), give "
            "an empty output.dir, or replace that run's results with --overwrite",
            m->resume, dir, found, run, run);
    } else if (m->rewind) {
        ok = mt_outdir_fail(
            err, errlen,
            "--rewind: output.dir %s is not the run of %s (%s), so there is nothing to "
            "rewind: leave --rewind out",
            dir, m->resume, run);
    }
    if (!ok) mt_outdir_close(od);
    return ok;
}

bool mt_outdir_open(mt_outdir *od, const char *dir, const mt_outdir_mode *mode, char *err,
                    size_t errlen) {
    od->lock_fd = -1;
    char why[4600];
    if (!mt_dir_make(dir, why, sizeof(why)))
        return mt_outdir_fail(err, errlen, "output.dir %s", why);
    if (!lock_take(od, dir, err, errlen)) return false;
    if (mode->resume) return outdir_open_resume(od, dir, mode, err, errlen);
    char found[2048];
    long newest;
    if (mt_outdir_results(dir, found, sizeof(found), &newest) == 0) return true;
    if (!mode->overwrite) {
        char hint[1200] = "";
        if (newest >= 0)
            snprintf(hint, sizeof(hint), "continue it with --resume %s/checkpoint-%ld, ", dir,
                     newest);
        mt_outdir_close(od);
        return mt_outdir_fail(err, errlen,
                              "output.dir %s holds another run's results: %s; %sreplace them with "
                              "--overwrite, or give this run another output.dir",
                              dir, found, hint);
    }
    return outdir_overwrite(od, dir, err, errlen);
}

/* ------------------------------------------------------------------------------------------ */
/* clean-up on failure */

#define MAX_CLEANUP 4
static struct {
    char path[MAX_CLEANUP][1200];
    mt_outdir *od;
    void (*next)(int exit_code); /* the communicators' hook: the job's abort */
} cleanup;

static void cleanup_on_error(int exit_code) {
    for (int i = 0; i < MAX_CLEANUP; i++)
        if (cleanup.path[i][0]) mt_remove_tree(cleanup.path[i]);
    if (cleanup.od) mt_outdir_close(cleanup.od);
    if (cleanup.next) cleanup.next(exit_code);
    exit(exit_code);
}

void mt_cleanup_install(mt_outdir *od) {
    cleanup.od = od;
    if (mt_error_abort_hook() != cleanup_on_error) cleanup.next = mt_error_abort_hook();
    mt_error_set_abort_hook(cleanup_on_error);
}

void mt_cleanup_add(const char *path) {
    for (int i = 0; i < MAX_CLEANUP; i++)
        if (!cleanup.path[i][0]) {
            snprintf(cleanup.path[i], sizeof(cleanup.path[i]), "%s", path);
            return;
        }
    MT_DIE("cleanup: more than %d temporary paths", MAX_CLEANUP);
}

void mt_cleanup_remove(const char *path) {
    for (int i = 0; i < MAX_CLEANUP; i++)
        if (!strcmp(cleanup.path[i], path)) cleanup.path[i][0] = 0;
}
