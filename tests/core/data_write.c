/* data_write.c: a write of the trainer's outputs that fails leaves nothing behind. A child
 * process writes recipe.toml (mt_file_write_atomic, as the trainer does at start) under a file
 * size limit of 1 KiB, so the write fails with EFBIG as on a full disk or a quota; it must end
 * with one error naming the temporary file and the reason, and remove that file (before, a
 * 0-byte or partial recipe.toml.tmp.PID stayed). Runs without MPI: Open MPI does not start
 * under such a limit, so tests/train/run_failures.sh (disk-full) covers the checkpoint files
 * instead. */
#include "tests/support/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models/safetensors.h"

/* The files left in dir (it holds no directories), listed; removed when remove. */
static int files_left(const char *dir, bool remove) {
    DIR *d = opendir(dir);
    int left = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[600];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (remove)
            unlink(path);
        else
            printf("  left behind: %s\n", e->d_name);
        left++;
    }
    if (d) closedir(d);
    return left;
}

static int test_write_failure_cleanup(void) {
    char dir[256], path[300], log[300];
    snprintf(dir, sizeof(dir), "%s/write-failure", getenv("MT_TEST_TMPDIR"));
    files_left(dir, true); /* an earlier run's */
    EXPECT(mkdir(dir, 0755) == 0 || errno == EEXIST, "cannot create %s", dir);
    snprintf(path, sizeof(path), "%s/recipe.toml", dir);
    snprintf(log, sizeof(log), "%s.log", dir);
    fflush(stdout);
    const pid_t child = fork();
    EXPECT(child >= 0, "fork failed");
    if (child == 0) {
        const int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        signal(SIGXFSZ, SIG_IGN); /* as the trainer: the write fails instead of killing */
        const struct rlimit limit = {1024, 1024};
        setrlimit(RLIMIT_FSIZE, &limit);
        static char text[8192];
        memset(text, '#', sizeof(text));
        mt_file_write_atomic(path, text, sizeof(text));
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) != 0, "the write beyond the limit succeeded");
    char text[1024] = "", want[400];
    FILE *f = fopen(log, "r");
    const size_t got = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    text[got] = 0;
    if (f) fclose(f);
    snprintf(want, sizeof(want), "%s.tmp.%d: write failed: File too large", path, (int)child);
    EXPECT(strstr(text, want), "want \"%s\" in the error, got: %s", want, text);
    printf("  %s", text);
    const int left = files_left(dir, false);
    EXPECT(left == 0, "%d files left in %s after the failed write", left, dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_write_failure_cleanup", test_write_failure_cleanup},
};
MT_TEST_MAIN(cases)
