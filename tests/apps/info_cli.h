/* info_cli.h: the minimax-info tests' way to run it (tests/apps/info_ep.c, info_predict.c):
 * MT_MINIMAX_INFO on the tiny Text-01 config (recipes/configs/tiny.json) with args, stdout and
 * stderr into out (n bytes, NUL-terminated). Returns its exit status, -1 when it did not exit. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static inline int info_cli(const char *args, char *out, size_t n) {
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s --config %s/recipes/configs/tiny.json %s 2>&1",
             getenv("MT_MINIMAX_INFO"), getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".",
             args);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t len = fread(out, 1, n - 1, f);
    out[len] = 0;
    const int rc = pclose(f);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}
