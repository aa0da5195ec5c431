/* arena.c: bump allocation from one big block per context; reset once per step. */
#include "tensor.h"

#define MT_ARENA_ALIGN 64

void mt_arena_init(mt_arena *a, const mt_backend *be, size_t cap_bytes, const char *name) {
    a->be = be;
    a->cap = cap_bytes;
    a->used = a->peak = a->peak_live = 0;
    a->name = name;
    a->base = cap_bytes ? be->alloc(cap_bytes) : NULL;
    MT_CHECK(!cap_bytes || a->base, "arena %s: cannot allocate %zu bytes on %s", name, cap_bytes,
             be->name);
}

void mt_arena_free(mt_arena *a) {
    if (a->base) a->be->free(a->base);
    a->base = NULL;
    a->cap = a->used = 0;
}

void *mt_arena_alloc(mt_arena *a, size_t bytes, const char *what) {
    size_t start = (a->used + MT_ARENA_ALIGN - 1) & ~(size_t)(MT_ARENA_ALIGN - 1);
    if (start + bytes > a->cap)
        MT_DIE("arena %s is full: %s needs %zu bytes, %zu of %zu in use (raise the arena size)",
               a->name, what ? what : "?", bytes, a->used, a->cap);
    a->used = start + bytes;
    if (a->used > a->peak) a->peak = a->used;
    return a->base + start;
}

void mt_arena_reset(mt_arena *a) { a->used = 0; }

size_t mt_arena_mark(const mt_arena *a) { return a->used; }

void mt_arena_rewind(mt_arena *a, size_t mark) {
    MT_CHECK(mark <= a->used, "arena %s: rewind to %zu, beyond the %zu bytes in use", a->name, mark,
             a->used);
    a->used = mark;
}
