/* check.c: mt_die and the checked allocators. */
#include "core/check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int error_rank = -1;
static void (*abort_hook)(int) = NULL;

void mt_error_set_rank(int rank) { error_rank = rank; }
void mt_error_set_abort_hook(void (*hook)(int)) { abort_hook = hook; }
void (*mt_error_abort_hook(void))(int) { return abort_hook; }

/* Whether an error names the source line that raised it: in debug builds, or with MT_DEBUG=1
 * (a user's error names the recipe key or the file; the source line is the developers'). */
static int error_source_shown(void) {
#ifndef NDEBUG
    return 1;
#else
    const char *v = getenv("MT_DEBUG");
    return v && v[0] && strcmp(v, "0") != 0;
#endif
}

MT_NORETURN void mt_die_at(const char *file, int line, const char *fmt, ...) {
    fflush(stdout);
    /* one write of the whole line: under mpirun, pieces of a line written separately can be
     * forwarded apart, interleaved with other output (the abort banner) */
    char msg[4096];
    int n = error_rank >= 0 ? snprintf(msg, sizeof(msg), "[rank %d] ", error_rank) : 0;
    if (error_source_shown())
        n += snprintf(msg + n, sizeof(msg) - (size_t)n, "error: %s:%d: ", file, line);
    else
        n += snprintf(msg + n, sizeof(msg) - (size_t)n, "error: ");
    va_list ap;
    va_start(ap, fmt);
    if (n < (int)sizeof(msg)) n += vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(msg) - 2) n = (int)sizeof(msg) - 2; /* truncated: keep the newline */
    msg[n++] = '\n';
    fflush(stderr);
    const ssize_t written = write(STDERR_FILENO, msg, (size_t)n);
    (void)written; /* a failed write has nowhere left to be reported */
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
