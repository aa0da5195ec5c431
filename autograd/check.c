/* check.c: mt_die and the checked allocators. */
#include "check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int error_rank = -1;
static void (*abort_hook)(int) = NULL;

void mt_error_set_rank(int rank) { error_rank = rank; }
void mt_error_set_abort_hook(void (*hook)(int)) { abort_hook = hook; }

MT_NORETURN void mt_die_at(const char *file, int line, const char *fmt, ...) {
    fflush(stdout);
    if (error_rank >= 0) fprintf(stderr, "[rank %d] ", error_rank);
    fprintf(stderr, "error: %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    if (abort_hook) abort_hook(EXIT_FAILURE);
    exit(EXIT_FAILURE);
}

void *mt_malloc_at(size_t bytes, const char *what, const char *file, int line) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) mt_die_at(file, line, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

void *mt_calloc_at(size_t n, size_t size, const char *what, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) mt_die_at(file, line, "out of memory allocating %zu x %zu bytes for %s", n, size, what);
    return p;
}
