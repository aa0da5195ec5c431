/* fuzz_util.h: what the fuzz targets share. Each target is libFuzzer's entry point over one
 * reader; a reader may reject its input (with a message), never crash, leak or read outside it.
 * Readers that die on bad input (MT_DIE) are entered through their err-returning forms. */
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"

/* The input as a NUL-terminated string (malloc'ed; an embedded NUL ends it early). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
    char *s = mt_malloc(size + 1, "fuzz input");
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

static char fuzz_file_path[256];
static inline void fuzz_file_remove(void) { unlink(fuzz_file_path); }

/* The input written to a file of this process (readers that take a path), overwritten per run
 * and removed at exit. */
static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *suffix) {
    char *path = fuzz_file_path;
    if (!path[0]) atexit(fuzz_file_remove);
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof(fuzz_file_path), "%s/mt_fuzz_%d%s", dir && *dir ? dir : "/tmp",
             (int)getpid(), suffix);
    FILE *f = fopen(path, "wb");
    MT_CHECK(f, "fuzz: cannot write %s", path);
    MT_CHECK(fwrite(data, 1, size, f) == size && fclose(f) == 0, "fuzz: cannot write %s", path);
    return path;
}
