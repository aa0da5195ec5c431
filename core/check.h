/* check.h: fatal-error plumbing shared by every module.
 * An error prints "[rank R] error: message" and ends the process (or, once the trainer
 * installs its hook, the whole MPI job); debug builds (no NDEBUG) and MT_DEBUG=1 add the source
 * location, "error: file:line: message". Checks are always on; they are not asserts. */
#pragma once
#include <stddef.h>

#if defined(__GNUC__)
#define MT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MT_PRINTF(a, b)
#endif

/* C11 _Noreturn; the CUDA sources include this header as C++. */
#if defined(__cplusplus)
#define MT_NORETURN [[noreturn]]
#else
#define MT_NORETURN _Noreturn
#endif

MT_NORETURN void mt_die_at(const char *file, int line, const char *fmt, ...) MT_PRINTF(3, 4);

#define MT_DIE(...) mt_die_at(__FILE__, __LINE__, __VA_ARGS__)
#define MT_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) mt_die_at(__FILE__, __LINE__, __VA_ARGS__);                                   \
    } while (0)

/* The rank printed in error messages (-1: not distributed, no prefix). */
void mt_error_set_rank(int rank);
/* Called by mt_die after printing, before exit: the trainer installs MPI_Abort here. */
void mt_error_set_abort_hook(void (*hook)(int exit_code));
/* The hook installed now (NULL: none), for a hook that does its part and then calls it. */
void (*mt_error_abort_hook(void))(int exit_code);

void *mt_malloc_at(size_t bytes, const char *what, const char *file, int line);
void *mt_calloc_at(size_t n, size_t size, const char *what, const char *file, int line);
#define mt_malloc(bytes, what)   mt_malloc_at((bytes), (what), __FILE__, __LINE__)
#define mt_calloc(n, size, what) mt_calloc_at((n), (size), (what), __FILE__, __LINE__)
