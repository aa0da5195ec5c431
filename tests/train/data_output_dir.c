/* data_output_dir.c: what a run may do to its output directory (train/output_dir.h;
 * docs/training.md, "Outputs" and "Resume"), the messages against the documented text:
 *   data_output_dir_lock       created with its parents, the lock file naming host and pid,
 *                              emptied on close; a directory locked by another process refused
 *                              naming the holder; a lock left by a dead process taken over
 *   data_output_dir_results    a fresh run over another run's results refused, listing them
 *                              (steps, evaluations, checkpoints in step order), the newest
 *                              checkpoint named for --resume; a header-only log is no result
 *   data_output_dir_overwrite  --overwrite removes the trainer's outputs only
 *   data_output_dir_resume     a resume into its own run, an empty directory, another run's
 *                              results (refused, or replaced with --overwrite); --overwrite into
 *                              its own run and --rewind into another directory refused
 *   data_output_dir_rewind     a resume from an older checkpoint refused naming what follows;
 *                              --rewind moves it into rewound-<time>/, logs split at the step
 *   data_output_dir_inputs     an input of the run that is, or lies in, what the run writes (by
 *                              any name: a symbolic or hard link) refused
 *   data_output_dir_helpers    mt_log_line_step, mt_outdir_parent, mt_outdir_own_output,
 *                              mt_outdir_checkpoints, mt_dir_make, mt_remove_tree
 *   data_output_dir_cleanup    an error after mt_cleanup_install removes the registered
 *                              temporary paths and releases the lock */
#include "tests/support/harness.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/file_io.h"
#include "tests/support/capture.h"
#include "tests/support/data_util.h"
#include "train/output_dir.h"

#define LOCK ".minimax-train.lock"

/* snprintf that ends the test on a truncated result (no path or message is ever cut). */
static void pathf(char *out, size_t n, const char *fmt, ...) MT_PRINTF(3, 4);
static void pathf(char *out, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int len = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    MT_CHECK(len >= 0 && (size_t)len < n, "test: %zu bytes are too few for \"%s\"", n, out);
}

static void path_of(char *out, size_t n, const char *dir, const char *name) {
    pathf(out, n, "%s/%s", dir, name);
}

static void put(const char *dir, const char *name, const char *text) {
    char p[1024];
    path_of(p, sizeof(p), dir, name);
    write_text(p, text);
}

static void mkdir_in(const char *dir, const char *name) {
    char p[1024];
    path_of(p, sizeof(p), dir, name);
    MT_CHECK(mkdir(p, 0755) == 0, "cannot create %s", p);
}

static bool there(const char *dir, const char *name) {
    char p[1024];
    path_of(p, sizeof(p), dir, name);
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static char *text_of(const char *dir, const char *name) {
    char p[1024], err[MT_ERR_LEN];
    path_of(p, sizeof(p), dir, name);
    size_t len;
    char *t = mt_file_read(p, &len, err);
    return t ? t : strdup("(unreadable)");
}

static void host(char *out, size_t n) {
    if (gethostname(out, n) != 0) pathf(out, n, "?");
    out[n - 1] = 0;
}

static const mt_outdir_mode fresh = {0};

static int test_lock(void) {
    char base[256], dir[1024], err[8192], me[256], want[8192];
    make_tmpdir(base, sizeof(base));
    host(me, sizeof(me));
    pathf(dir, sizeof(dir), "%s/runs/x", base);
    mt_outdir od;
    EXPECT(mt_outdir_open(&od, dir, &fresh, err, sizeof(err)), "fresh: %s", err);
    char *lock = text_of(dir, LOCK);
    pathf(want, sizeof(want), "host %s pid %d\n", me, (int)getpid());
    EXPECT(!strcmp(lock, want), "the lock file names host and pid: \"%s\"", lock);
    free(lock);
    mt_outdir_close(&od);
    EXPECT(od.lock_fd == -1, "close keeps a descriptor");
    lock = text_of(dir, LOCK);
    EXPECT(there(dir, LOCK) && !lock[0], "the lock file stays, emptied: \"%s\"", lock);
    free(lock);

    /* another process holds it: refused at once, naming that process */
    int ready[2], done[2];
    MT_CHECK(pipe(ready) == 0 && pipe(done) == 0, "pipe");
    fflush(stdout);
    const pid_t holder = fork();
    if (holder == 0) {
        mt_outdir h;
        char e[8192];
        const char ok = mt_outdir_open(&h, dir, &fresh, e, sizeof(e)) ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1) _exit(3);
        char c;
        if (read(done[0], &c, 1) != 1) _exit(3);
        _exit(0);
    }
    char c = 0;
    EXPECT(read(ready[0], &c, 1) == 1 && c == 'y', "the holder could not lock %s", dir);
    EXPECT(!mt_outdir_open(&od, dir, &fresh, err, sizeof(err)), "a locked directory was opened");
    pathf(want, sizeof(want),
          "output.dir %s is in use by another run (pid %d on host %s; lock file %s/" LOCK
          "): wait for it to end, or give this run another output.dir",
          dir, (int)holder, me, dir);
    EXPECT(!strcmp(err, want), "in use:\n got  %s\n want %s", err, want);
    lock = text_of(dir, LOCK);
    pathf(want, sizeof(want), "host %s pid %d\n", me, (int)holder);
    EXPECT(!strcmp(lock, want), "the refused run changed the lock file: \"%s\"", lock);
    free(lock);
    EXPECT(write(done[1], "x", 1) == 1, "pipe");
    waitpid(holder, NULL, 0);

    /* the holder ended without releasing it (its file still names it): taken over, saying so */
    put(dir, LOCK, want);
    capture_begin(STDOUT_FILENO);
    const bool took = mt_outdir_open(&od, dir, &fresh, err, sizeof(err));
    char *said = capture_end();
    EXPECT(took, "a stale lock: %s", err);
    pathf(want, sizeof(want),
          "output.dir %s: taking over the lock left by pid %d on host %s (no longer running), "
          "which ended without releasing it\n",
          dir, (int)holder, me);
    EXPECT(!strcmp(said, want), "stale lock:\n got  %s want %s", said, want);
    free(said);
    lock = text_of(dir, LOCK);
    pathf(want, sizeof(want), "host %s pid %d\n", me, (int)getpid());
    EXPECT(!strcmp(lock, want), "the lock now names this process: \"%s\"", lock);
    free(lock);
    mt_outdir_close(&od);
    for (int i = 0; i < 2; i++) close(ready[i]), close(done[i]);
    rm_tree(base);
    return MT_TEST_OK;
}

/* A run's results: loss.csv of `steps` rows, eval.csv of 2, the given checkpoints. */
static void results(const char *dir, int steps, const long *ckpt, int n) {
    char text[4096] = "step,loss,lr,grad_norm,tokens,tokens_per_s,elapsed_s\n";
    for (int s = 1; s <= steps; s++)
        pathf(text + strlen(text), sizeof(text) - strlen(text), "%d,1.0,0.1,1.0,8,1.0,1.0\n", s);
    put(dir, "loss.csv", text);
    put(dir, "eval.csv", "step,eval_loss,tokens,seconds\n2,1.0,4,0.1\n4,1.0,4,0.1\n");
    for (int i = 0; i < n; i++) {
        char name[64];
        pathf(name, sizeof(name), "checkpoint-%ld", ckpt[i]);
        mkdir_in(dir, name);
    }
}

static int test_results(void) {
    char dir[256], err[8192], want[8192];
    make_tmpdir(dir, sizeof(dir));
    mt_outdir od;
    /* logs with their header only, the user's files, a half-written checkpoint: no results */
    put(dir, "loss.csv", "step,loss,lr,grad_norm,tokens,tokens_per_s,elapsed_s\n");
    put(dir, "notes.txt", "mine\n");
    put(dir, "checkpoint-7", "a file, not a checkpoint directory\n");
    mkdir_in(dir, "checkpoint-3.tmp");
    EXPECT(mt_outdir_open(&od, dir, &fresh, err, sizeof(err)), "no results yet: %s", err);
    mt_outdir_close(&od);

    results(dir, 4, (const long[]){10, 2, 4}, 3);
    EXPECT(!mt_outdir_open(&od, dir, &fresh, err, sizeof(err)), "a fresh run over results");
    pathf(want, sizeof(want),
          "output.dir %s holds another run's results: loss.csv (4 steps), eval.csv (2 "
          "evaluations), checkpoint-2, checkpoint-4, checkpoint-10; continue it with --resume "
          "%s/checkpoint-10, replace them with --overwrite, or give this run another output.dir",
          dir, dir);
    EXPECT(!strcmp(err, want), "results:\n got  %s\n want %s", err, want);
    EXPECT(od.lock_fd == -1, "the refusal kept the lock");

    /* more than six checkpoints: the oldest six named, the rest counted */
    for (long s = 20; s <= 70; s += 10) {
        char name[64];
        pathf(name, sizeof(name), "checkpoint-%ld", s);
        mkdir_in(dir, name);
    }
    char found[2048];
    long newest = 0;
    EXPECT(mt_outdir_results(dir, found, sizeof(found), &newest) == 11 && newest == 70, "count");
    EXPECT(!strcmp(found, "loss.csv (4 steps), eval.csv (2 evaluations), checkpoint-2, "
                          "checkpoint-4, checkpoint-10, checkpoint-20, checkpoint-30, "
                          "checkpoint-40 and 3 more checkpoints"),
           "listing: %s", found);
    rm_tree(dir);
    return MT_TEST_OK;
}

static int test_overwrite(void) {
    char dir[256], other[256], err[8192], link[1024];
    make_tmpdir(dir, sizeof(dir));
    make_tmpdir(other, sizeof(other));
    results(dir, 4, (const long[]){2, 4}, 2);
    /* what the trainer writes there (docs/training.md: loss.csv, eval.csv,
     * eval-generate-*.jsonl, loss.png, recipe.toml, checkpoint-*, their temporary files) */
    const char *own[] = {"loss.png",     "recipe.toml",  "eval-generate-2.jsonl",
                         "loss.csv.tmp", "loss.png.tmp", "recipe.toml.tmp.4242"};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) put(dir, own[i], "x\n");
    mkdir_in(dir, "checkpoint-6.tmp");
    /* and what stays: the user's files, the token cache, a link named like an output */
    const char *keep[] = {"notes.txt", "eval-generate-x.jsonl", "checkpoint-8.old"};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) put(dir, keep[i], "mine\n");
    mkdir_in(dir, "cache");
    put(dir, "cache/tokens.h5", "cache\n");
    put(other, "target.png", "the user's picture\n");
    path_of(link, sizeof(link), other, "target.png");
    char at[1024]; /* a link is not removed, even named like an output */
    path_of(at, sizeof(at), dir, "eval-generate-9.jsonl");
    EXPECT(symlink(link, at) == 0, "symlink");

    mt_outdir od;
    const mt_outdir_mode over = {.overwrite = true};
    capture_begin(STDOUT_FILENO);
    const bool ok = mt_outdir_open(&od, dir, &over, err, sizeof(err));
    char *said = capture_end();
    EXPECT(ok, "--overwrite: %s", err);
    mt_outdir_close(&od);
    char head[1024];
    pathf(head, sizeof(head), "--overwrite: removed ");
    EXPECT(!strncmp(said, head, strlen(head)), "what --overwrite says: %s", said);
    const char *gone[] = {"loss.csv",
                          "eval.csv",
                          "checkpoint-2",
                          "checkpoint-4",
                          "loss.png",
                          "recipe.toml",
                          "eval-generate-2.jsonl",
                          "loss.csv.tmp",
                          "loss.png.tmp",
                          "recipe.toml.tmp.4242",
                          "checkpoint-6.tmp"};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
        EXPECT(!there(dir, gone[i]), "--overwrite left %s", gone[i]);
        EXPECT(strstr(said, gone[i]), "--overwrite does not name %s: %s", gone[i], said);
    }
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        EXPECT(there(dir, keep[i]), "--overwrite removed the user's %s", keep[i]);
    EXPECT(there(dir, "cache/tokens.h5") && there(dir, LOCK) &&
               there(dir, "eval-generate-9.jsonl") && file_exists(link),
           "--overwrite removed the cache, the lock or a link (or what it points to)");
    char tail[1024];
    pathf(tail, sizeof(tail), " from %s\n", dir);
    EXPECT(strlen(said) > strlen(tail) && !strcmp(said + strlen(said) - strlen(tail), tail),
           "the line ends naming the directory: %s", said);
    free(said);
    rm_tree(dir);
    rm_tree(other);
    return MT_TEST_OK;
}

static int test_resume(void) {
    char base[256], run[1024], ck[1024], other[1024], empty[1024], err[8192], want[8192];
    make_tmpdir(base, sizeof(base));
    pathf(run, sizeof(run), "%s/a", base);
    pathf(other, sizeof(other), "%s/o", base);
    pathf(empty, sizeof(empty), "%s/e", base);
    MT_CHECK(mkdir(run, 0755) == 0 && mkdir(other, 0755) == 0, "mkdir");
    results(run, 4, (const long[]){2, 4}, 2);
    results(other, 2, (const long[]){2}, 1);
    pathf(ck, sizeof(ck), "%s/checkpoint-4", run);
    mt_outdir od;
    mt_outdir_mode m = {.resume = ck, .resume_step = 4};
    /* its own run, from the newest checkpoint; an empty directory */
    EXPECT(mt_outdir_open(&od, run, &m, err, sizeof(err)), "into its own run: %s", err);
    mt_outdir_close(&od);
    EXPECT(mt_outdir_open(&od, empty, &m, err, sizeof(err)), "into an empty directory: %s", err);
    mt_outdir_close(&od);
    /* another run's results */
    EXPECT(!mt_outdir_open(&od, other, &m, err, sizeof(err)), "into another run's results");
    pathf(want, sizeof(want),
          "--resume %s: output.dir %s holds another run's results (loss.csv (2 steps), eval.csv "
          "(2 evaluations), checkpoint-2), and the checkpoint is of the run in %s: resume into "
          "%s (leave output.dir unset), give an empty output.dir, or replace that run's results "
          "with --overwrite",
          ck, other, run, run);
    EXPECT(!strcmp(err, want), "another run:\n got  %s\n want %s", err, want);
    EXPECT(there(other, "loss.csv") && there(other, "checkpoint-2"), "the refusal removed results");
    /* --rewind into a directory that is not the checkpoint's run */
    m.rewind = true;
    EXPECT(!mt_outdir_open(&od, empty, &m, err, sizeof(err)), "--rewind into another directory");
    pathf(want, sizeof(want),
          "--rewind: output.dir %s is not the run of %s (%s), so there is nothing to rewind: "
          "leave --rewind out",
          empty, ck, run);
    EXPECT(!strcmp(err, want), "--rewind elsewhere:\n got  %s\n want %s", err, want);
    /* --overwrite into its own run (it would remove the checkpoint), then into the other's */
    m = (mt_outdir_mode){.resume = ck, .resume_step = 4, .overwrite = true};
    EXPECT(!mt_outdir_open(&od, run, &m, err, sizeof(err)), "--overwrite into its own run");
    pathf(want, sizeof(want),
          "--resume %s continues the run in %s and --overwrite would remove it, the checkpoint "
          "included: give one of them",
          ck, run);
    EXPECT(!strcmp(err, want), "--overwrite own run:\n got  %s\n want %s", err, want);
    EXPECT(there(run, "checkpoint-4"), "the checkpoint is gone");
    capture_begin(STDOUT_FILENO);
    const bool ok = mt_outdir_open(&od, other, &m, err, sizeof(err));
    free(capture_end());
    EXPECT(ok && !there(other, "loss.csv") && !there(other, "checkpoint-2"),
           "--overwrite into another run's results: %s", err);
    mt_outdir_close(&od);
    rm_tree(base);
    return MT_TEST_OK;
}

/* metrics.jsonl of steps 1..4 (an eval after 2 and 4). */
static const char metrics_text[] = "{\"step\": 1, \"type\": \"train\"}\n"
                                   "{\"step\": 2, \"type\": \"train\"}\n"
                                   "{\"step\": 2, \"type\": \"eval\"}\n"
                                   "{\"step\": 3, \"type\": \"train\"}\n"
                                   "{\"step\": 4, \"type\": \"train\"}\n"
                                   "{\"step\": 4, \"type\": \"eval\"}\n";

/* The entry of dir whose name starts with prefix, into out (false: none). */
static bool find_entry(const char *dir, const char *prefix, char *out, size_t n) {
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix)))
            found = true, pathf(out, n, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    return found;
}

static void expect_text(const char *dir, const char *name, const char *want) {
    char *got = text_of(dir, name);
    EXPECT(!strcmp(got, want), "%s/%s:\n--- got\n%s--- want\n%s---", dir, name, got, want);
    free(got);
}

static int test_rewind(void) {
    char dir[256], ck[1024], err[8192], want[8192];
    make_tmpdir(dir, sizeof(dir));
    results(dir, 4, (const long[]){2, 4}, 2);
    put(dir, "metrics.jsonl", metrics_text);
    put(dir, "eval-generate-2.jsonl", "{}\n");
    put(dir, "eval-generate-4.jsonl", "{}\n");
    put(dir, "loss.png", "png\n");
    pathf(ck, sizeof(ck), "%s/checkpoint-2", dir);
    mt_outdir od;
    mt_outdir_mode m = {.resume = ck, .resume_step = 2};
    EXPECT(!mt_outdir_open(&od, dir, &m, err, sizeof(err)), "a resume from an older checkpoint");
    pathf(want, sizeof(want),
          "--resume %s: output.dir %s holds the same run's results after step 2 (checkpoint-4, "
          "loss.csv's steps 3..4, eval.csv's step 4, eval-generate-4.jsonl); resuming from an "
          "older checkpoint would cut its logs back and leave the later checkpoints beside the "
          "new ones: resume from the newest, --resume %s/checkpoint-4, or add --rewind to move "
          "what follows step 2 aside into %s/rewound-<time>/",
          ck, dir, dir, dir);
    EXPECT(!strcmp(err, want), "older checkpoint:\n got  %s\n want %s", err, want);
    EXPECT(there(dir, "checkpoint-4") && there(dir, "eval-generate-4.jsonl"), "refused: changed");
    expect_text(dir, "metrics.jsonl", metrics_text);

    m.rewind = true;
    capture_begin(STDOUT_FILENO);
    const bool ok = mt_outdir_open(&od, dir, &m, err, sizeof(err));
    char *said = capture_end();
    EXPECT(ok, "--rewind: %s", err);
    mt_outdir_close(&od);
    char aside[1024];
    EXPECT(find_entry(dir, "rewound-", aside, sizeof(aside)), "no rewound-<time>/ in %s", dir);
    pathf(want, sizeof(want),
          "--rewind: moved checkpoint-4, loss.csv's steps 3..4, eval.csv's step 4, "
          "eval-generate-4.jsonl into %s; the run continues from step 2\n",
          aside);
    EXPECT(!strcmp(said, want), "--rewind says:\n got  %s want %s", said, want);
    free(said);
    const char *head = "step,loss,lr,grad_norm,tokens,tokens_per_s,elapsed_s\n";
    pathf(want, sizeof(want), "%s1,1.0,0.1,1.0,8,1.0,1.0\n2,1.0,0.1,1.0,8,1.0,1.0\n", head);
    expect_text(dir, "loss.csv", want);
    pathf(want, sizeof(want), "%s3,1.0,0.1,1.0,8,1.0,1.0\n4,1.0,0.1,1.0,8,1.0,1.0\n", head);
    expect_text(aside, "loss.csv", want);
    expect_text(dir, "eval.csv", "step,eval_loss,tokens,seconds\n2,1.0,4,0.1\n");
    expect_text(aside, "eval.csv", "step,eval_loss,tokens,seconds\n4,1.0,4,0.1\n");
    expect_text(dir, "metrics.jsonl",
                "{\"step\": 1, \"type\": \"train\"}\n"
                "{\"step\": 2, \"type\": \"train\"}\n"
                "{\"step\": 2, \"type\": \"eval\"}\n");
    expect_text(aside, "metrics.jsonl",
                "{\"step\": 3, \"type\": \"train\"}\n"
                "{\"step\": 4, \"type\": \"train\"}\n"
                "{\"step\": 4, \"type\": \"eval\"}\n");
    EXPECT(there(aside, "checkpoint-4") && there(aside, "eval-generate-4.jsonl") &&
               there(aside, "loss.png"),
           "moved aside: checkpoint-4, eval-generate-4.jsonl, loss.png");
    EXPECT(there(dir, "checkpoint-2") && there(dir, "eval-generate-2.jsonl") &&
               !there(dir, "checkpoint-4") && !there(dir, "loss.png"),
           "what stays: checkpoint-2 and eval-generate-2.jsonl");
    EXPECT(count_entries(dir, ".tmp") == 0 && count_entries(aside, ".tmp") == 0, "temporary files");

    /* rows after the newest checkpoint alone (a stopped run): resumed without --rewind */
    char dir2[256];
    make_tmpdir(dir2, sizeof(dir2));
    results(dir2, 6, (const long[]){4}, 1);
    pathf(ck, sizeof(ck), "%s/checkpoint-4", dir2);
    m = (mt_outdir_mode){.resume = ck, .resume_step = 4};
    EXPECT(mt_outdir_open(&od, dir2, &m, err, sizeof(err)), "a stopped run's rows: %s", err);
    mt_outdir_close(&od);
    rm_tree(dir);
    rm_tree(dir2);
    return MT_TEST_OK;
}

static int test_inputs(void) {
    char dir[256], out[256], p[1024], alias[1024], err[8192], want[16384];
    make_tmpdir(dir, sizeof(dir));
    make_tmpdir(out, sizeof(out));
    EXPECT(mt_outdir_inputs_check("/nonexistent/out", &(mt_outdir_input){"model.path", out}, 1, err,
                                  sizeof(err)),
           "a directory not made yet holds nothing");
    /* output.dir is model.path, by its name and by a link's */
    mt_outdir_input in = {"model.path", out};
    EXPECT(!mt_outdir_inputs_check(out, &in, 1, err, sizeof(err)), "output.dir = model.path");
    pathf(want, sizeof(want),
          "output.dir %s is model.path %s (the same directory): the run would write its "
          "recipe.toml, logs and checkpoints into its input; give the run another output.dir",
          out, out);
    EXPECT(!strcmp(err, want), "same directory:\n got  %s\n want %s", err, want);
    pathf(alias, sizeof(alias), "%s/link", dir);
    EXPECT(symlink(out, alias) == 0, "symlink");
    in.path = alias;
    EXPECT(!mt_outdir_inputs_check(out, &in, 1, err, sizeof(err)) && strstr(err, alias),
           "by a link: %s", err);
    /* inside a checkpoint the run writes; the token cache and the user's files are not */
    mkdir_in(out, "checkpoint-4");
    put(out, "checkpoint-4/model.safetensors", "x");
    pathf(p, sizeof(p), "%s/checkpoint-4/model.safetensors", out);
    in.path = p;
    EXPECT(!mt_outdir_inputs_check(out, &in, 1, err, sizeof(err)), "an input in checkpoint-4");
    pathf(want, sizeof(want),
          "model.path %s is %s/checkpoint-4, which this run writes or removes (a run's outputs: "
          "checkpoints, logs, recipe.toml): give the run another output.dir, or copy the input "
          "out of it",
          p, out);
    EXPECT(!strcmp(err, want), "in checkpoint-4:\n got  %s\n want %s", err, want);
    mkdir_in(out, "cache");
    put(out, "cache/data.jsonl", "{}\n");
    put(out, "data.jsonl", "{}\n");
    char cached[1024], mine[1024];
    pathf(cached, sizeof(cached), "%s/cache/data.jsonl", out);
    pathf(mine, sizeof(mine), "%s/data.jsonl", out);
    const mt_outdir_input ok[] = {{"data.path", cached},
                                  {"data.eval_path", mine},
                                  {"model.config", NULL},
                                  {"data.chat_template", ""}};
    EXPECT(mt_outdir_inputs_check(out, ok, 4, err, sizeof(err)), "allowed inputs: %s", err);
    /* a data file that is metrics.jsonl under another name (a hard link) */
    put(out, "metrics.jsonl", "{}\n");
    char m[1024];
    pathf(m, sizeof(m), "%s/metrics.jsonl", out);
    pathf(alias, sizeof(alias), "%s/train.jsonl", dir);
    EXPECT(link(m, alias) == 0, "link");
    in = (mt_outdir_input){"data.path", alias};
    EXPECT(!mt_outdir_inputs_check(out, &in, 1, err, sizeof(err)), "a hard link to metrics.jsonl");
    pathf(want, sizeof(want), "data.path %s is %s/metrics.jsonl, which this run writes", alias,
          out);
    EXPECT(!strncmp(err, want, strlen(want)), "hard link:\n got  %s\n want %s...", err, want);
    rm_tree(dir);
    rm_tree(out);
    return MT_TEST_OK;
}

static int test_helpers(void) {
    /* the step of a log line: loss.csv's and eval.csv's first field, metrics.jsonl's "step" */
    EXPECT(mt_log_line_step("12,0.5,0.1\n") == 12 && mt_log_line_step("7\n") == 7 &&
               mt_log_line_step("{\"step\": 40, \"type\": \"eval\"}\n") == 40,
           "steps of log lines");
    EXPECT(mt_log_line_step("step,loss,lr\n") == -1 && mt_log_line_step("3x,1\n") == -1 &&
               mt_log_line_step("") == -1 && mt_log_line_step("{\"type\": \"train\"}") == -1,
           "lines without a step");
    const char *parents[][2] = {{"runs/a/checkpoint-4", "runs/a"},
                                {"runs/a/checkpoint-4/", "runs/a"},
                                {"checkpoint-4", "."},
                                {"/checkpoint-4", "/"},
                                {"/r/a", "/r"}};
    for (int i = 0; i < 5; i++) {
        char got[256];
        mt_outdir_parent(parents[i][0], got, sizeof(got));
        EXPECT(!strcmp(got, parents[i][1]), "parent of %s: %s, want %s", parents[i][0], got,
               parents[i][1]);
    }
    const char *own[] = {"loss.csv",
                         "eval.csv",
                         "loss.png",
                         "recipe.toml",
                         "checkpoint-12",
                         "checkpoint-12.tmp",
                         "eval-generate-40.jsonl",
                         "recipe.toml.tmp.99"};
    const char *not_own[] = {"notes.txt",
                             "checkpoint-",
                             "checkpoint-x",
                             "checkpoint-1.old",
                             "eval-generate-.jsonl",
                             "eval-generate-4.json",
                             "cache",
                             ".minimax-train.lock",
                             "loss.csv.bak"};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        EXPECT(mt_outdir_own_output(own[i]), "%s: the trainer's", own[i]);
    for (size_t i = 0; i < sizeof(not_own) / sizeof(not_own[0]); i++)
        EXPECT(!mt_outdir_own_output(not_own[i]), "%s: not the trainer's", not_own[i]);

    char dir[256], sub[1024], err[8192], want[8192];
    make_tmpdir(dir, sizeof(dir));
    const char *names[] = {"checkpoint-100", "checkpoint-9", "checkpoint-20", "checkpoint-5.tmp"};
    for (int i = 0; i < 4; i++) mkdir_in(dir, names[i]);
    put(dir, "checkpoint-7", "a file\n");
    long steps[8];
    const int n = mt_outdir_checkpoints(dir, steps, 8);
    EXPECT(n == 3 && steps[0] == 9 && steps[1] == 20 && steps[2] == 100,
           "checkpoints in step order: %d found", n);
    /* mkdir -p, and the component in the way named */
    pathf(sub, sizeof(sub), "%s/a/b/c", dir);
    EXPECT(mt_dir_make(sub, err, sizeof(err)) && there(dir, "a/b/c"), "mkdir -p: %s", err);
    EXPECT(mt_dir_make(sub, err, sizeof(err)), "an existing directory: %s", err);
    put(dir, "f", "x");
    pathf(sub, sizeof(sub), "%s/f/g", dir);
    EXPECT(!mt_dir_make(sub, err, sizeof(err)), "a file in the way");
    pathf(want, sizeof(want), "%s: %s/f is a file, not a directory", sub, dir);
    EXPECT(!strcmp(err, want), "in the way:\n got  %s\n want %s", err, want);
    pathf(sub, sizeof(sub), "%s/f", dir);
    EXPECT(!mt_dir_make(sub, err, sizeof(err)), "the path itself a file");
    pathf(want, sizeof(want), "%s is a file, not a directory", sub);
    EXPECT(!strcmp(err, want), "itself:\n got  %s\n want %s", err, want);
    /* rm -rf without following links */
    char keep[256], target[1024], at[1024];
    make_tmpdir(keep, sizeof(keep));
    pathf(target, sizeof(target), "%s/kept.txt", keep);
    write_text(target, "kept\n");
    pathf(at, sizeof(at), "%s/a/b/link", dir);
    EXPECT(symlink(keep, at) == 0, "symlink");
    pathf(sub, sizeof(sub), "%s/a", dir);
    EXPECT(mt_remove_tree(sub) && !there(dir, "a") && file_exists(target),
           "mt_remove_tree removed a tree (not what its link points to)");
    EXPECT(mt_remove_tree(sub), "a path already gone");
    rm_tree(dir);
    rm_tree(keep);
    return MT_TEST_OK;
}

typedef struct {
    const char *dir, *tmp;
} cleanup_case;

static void die_after_install(void *arg) {
    const cleanup_case *c = arg;
    static mt_outdir od;
    char err[8192];
    if (!mt_outdir_open(&od, c->dir, &fresh, err, sizeof(err))) _exit(3);
    mt_cleanup_install(&od);
    mt_cleanup_add(c->tmp);
    MT_DIE("deliberate failure while writing %s", c->tmp);
}

static int test_cleanup(void) {
    char dir[256], tmp[1024], err[8192];
    make_tmpdir(dir, sizeof(dir));
    pathf(tmp, sizeof(tmp), "%s/checkpoint-2.tmp", dir);
    mkdir_in(dir, "checkpoint-2.tmp");
    put(dir, "checkpoint-2.tmp/state.h5.tmp", "partial");
    const cleanup_case c = {dir, tmp};
    EXPECT(mt_expect_death(die_after_install, (void *)&c, "deliberate failure while writing"),
           "the error did not end the process with its message");
    EXPECT(!there(dir, "checkpoint-2.tmp"), "the temporary checkpoint is left");
    char *lock = text_of(dir, LOCK);
    EXPECT(!lock[0], "the lock was not released: \"%s\"", lock);
    free(lock);
    mt_outdir od;
    EXPECT(mt_outdir_open(&od, dir, &fresh, err, sizeof(err)), "after the failure: %s", err);
    mt_outdir_close(&od);
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_output_dir_lock", test_lock},           {"data_output_dir_results", test_results},
    {"data_output_dir_overwrite", test_overwrite}, {"data_output_dir_resume", test_resume},
    {"data_output_dir_rewind", test_rewind},       {"data_output_dir_inputs", test_inputs},
    {"data_output_dir_helpers", test_helpers},     {"data_output_dir_cleanup", test_cleanup},
};
MT_TEST_MAIN(cases)
