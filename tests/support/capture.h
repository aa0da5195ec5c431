/* capture.h: what a call prints on stdout or stderr, for tests of the lines a unit prints
 * (header-only). capture_begin(fd) sends fd to a temporary file until capture_end, which
 * restores it and returns what was written (malloc'ed, NUL-terminated). One capture at a time. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/check.h"

static int capture_fd = -1, capture_saved = -1;
static FILE *capture_file;

static inline void capture_begin(int fd) {
    MT_CHECK(capture_fd < 0, "capture: one capture at a time");
    fflush(stdout);
    fflush(stderr);
    capture_file = tmpfile();
    MT_CHECK(capture_file, "capture: no temporary file");
    capture_saved = dup(fd);
    MT_CHECK(capture_saved >= 0 && dup2(fileno(capture_file), fd) >= 0, "capture: dup failed");
    capture_fd = fd;
}

static inline char *capture_end(void) {
    fflush(stdout);
    fflush(stderr);
    MT_CHECK(dup2(capture_saved, capture_fd) >= 0, "capture: cannot restore fd %d", capture_fd);
    close(capture_saved);
    capture_fd = capture_saved = -1;
    /* the writes went through the descriptor, past the FILE's buffer: its end is their end */
    fseek(capture_file, 0, SEEK_END);
    const long n = ftell(capture_file) > 0 ? ftell(capture_file) : 0;
    char *text = mt_malloc((size_t)n + 1, "captured output");
    rewind(capture_file);
    const size_t got = fread(text, 1, (size_t)n, capture_file);
    text[got] = 0;
    fclose(capture_file);
    capture_file = NULL;
    return text;
}
