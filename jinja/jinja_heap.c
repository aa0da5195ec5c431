/* jinja_heap.c: the arena values live in, the value constructors, Python truthiness and the
 * malloc'ed output buffers.
 *
 * The heap hands out 16-byte aligned pieces of chunks that grow geometrically; a reset keeps the
 * largest chunk, so a heap reset once per rendered sample stops calling malloc after the first
 * few samples. The limit counts the bytes handed out (rounded to 16), not the chunks' slack, so
 * whether a render fits does not depend on the history of the heap. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "jinja/jinja_internal.h"

struct jinja_chunk {
    struct jinja_chunk *next;
    size_t size, used; /* bytes of data, bytes handed out */
};

#define JINJA_CHUNK_HEAD  ((sizeof(struct jinja_chunk) + 15) & ~(size_t)15)
#define JINJA_CHUNK_FIRST ((size_t)16 << 10)
#define JINJA_CHUNK_GROW  ((size_t)8 << 20) /* chunks double up to this size */

static unsigned char *chunk_data(struct jinja_chunk *c) {
    return (unsigned char *)c + JINJA_CHUNK_HEAD;
}

jinja_heap *jinja_heap_new(size_t max_bytes) {
    jinja_heap *h = mt_calloc(1, sizeof(*h), "jinja heap");
    h->max = max_bytes;
    return h;
}

void jinja_heap_reset(jinja_heap *h) {
    struct jinja_chunk *keep = NULL;
    for (struct jinja_chunk *c = h->chunks, *next; c; c = next) {
        next = c->next;
        if (!keep || c->size > keep->size) {
            free(keep);
            keep = c;
        } else {
            free(c);
        }
    }
    if (keep) keep->used = 0, keep->next = NULL;
    h->chunks = keep;
    h->used = 0;
    h->failed = false;
}

void jinja_heap_free(jinja_heap *h) {
    if (!h) return;
    for (struct jinja_chunk *c = h->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(h);
}

bool jinja_heap_failed(const jinja_heap *h) { return h->failed; }
size_t jinja_heap_used(const jinja_heap *h) { return h->used; }

static void *heap_fail(jinja_heap *h) {
    h->failed = true;
    if (h->on_fail) longjmp(*h->on_fail, 1);
    return NULL;
}

void *jinja_alloc(jinja_heap *h, size_t n) {
    if (n > SIZE_MAX / 2) return heap_fail(h);
    n = n ? (n + 15) & ~(size_t)15 : 16;
    if (h->max && (h->used > h->max || n > h->max - h->used)) return heap_fail(h);
    struct jinja_chunk *c = h->chunks;
    if (!c || c->size - c->used < n) {
        size_t size = c ? c->size * 2 : JINJA_CHUNK_FIRST;
        if (size > JINJA_CHUNK_GROW) size = JINJA_CHUNK_GROW;
        /* Near the limit a chunk need not be larger than what may still be handed out. */
        if (h->max && size > h->max - h->used) size = h->max - h->used;
        if (size < n) size = n;
        c = mt_malloc(JINJA_CHUNK_HEAD + size, "jinja heap chunk");
        c->size = size;
        c->used = 0;
        c->next = h->chunks;
        h->chunks = c;
    }
    void *p = chunk_data(c) + c->used;
    c->used += n;
    h->used += n;
    return p;
}

/* Heap strings carry a NUL after their last byte: not part of the value, a guard for code
 * that hands a string to a C library function. */
char *jinja_str_alloc(jinja_heap *h, size_t len, jinja_value *out) {
    char *p = jinja_alloc(h, len + 1);
    if (!p) {
        *out = jinja_undefined(NULL);
        return NULL;
    }
    p[len] = 0;
    out->type = JINJA_STR;
    out->u.s.p = p;
    out->u.s.len = len;
    return p;
}

/* ---- constructors ---- */

jinja_value jinja_undefined(const char *name) {
    jinja_value v = {.type = JINJA_UNDEFINED};
    v.u.s.p = name;
    v.u.s.len = name ? strlen(name) : 0;
    return v;
}

jinja_value jinja_none(void) { return (jinja_value){.type = JINJA_NONE}; }

jinja_value jinja_bool(bool b) {
    jinja_value v = {.type = JINJA_BOOL};
    v.u.b = b;
    return v;
}

jinja_value jinja_int(int64_t i) {
    jinja_value v = {.type = JINJA_INT};
    v.u.i = i;
    return v;
}

jinja_value jinja_float(double f) {
    jinja_value v = {.type = JINJA_FLOAT};
    v.u.f = f;
    return v;
}

jinja_value jinja_str(jinja_heap *h, const char *s, size_t len) {
    jinja_value v;
    char *p = jinja_str_alloc(h, len, &v);
    if (p && len) memcpy(p, s, len);
    return v;
}

jinja_value jinja_cstr(jinja_heap *h, const char *s) { return jinja_str(h, s, strlen(s)); }

jinja_value jinja_list_new(jinja_heap *h) {
    jinja_list *l = jinja_alloc(h, sizeof(*l));
    if (!l) return jinja_undefined(NULL);
    memset(l, 0, sizeof(*l));
    jinja_value v = {.type = JINJA_LIST};
    v.u.list = l;
    return v;
}

jinja_value jinja_dict_new(jinja_heap *h) {
    jinja_dict *d = jinja_alloc(h, sizeof(*d));
    if (!d) return jinja_undefined(NULL);
    memset(d, 0, sizeof(*d));
    jinja_value v = {.type = JINJA_DICT};
    v.u.dict = d;
    return v;
}

/* Doubles an array of values in the heap (the old one stays in the arena until the reset: at
 * most as many bytes again as the final array). */
static jinja_value *grow_values(jinja_heap *h, jinja_value *old, int64_t n, int64_t *cap) {
    int64_t ncap = *cap ? *cap * 2 : 4;
    if ((uint64_t)ncap > SIZE_MAX / sizeof(jinja_value)) return heap_fail(h);
    jinja_value *p = jinja_alloc(h, (size_t)ncap * sizeof(jinja_value));
    if (!p) return NULL;
    if (n) memcpy(p, old, (size_t)n * sizeof(jinja_value));
    *cap = ncap;
    return p;
}

bool jinja_list_push(jinja_heap *h, jinja_value list, jinja_value v) {
    if (list.type != JINJA_LIST) return false;
    jinja_list *l = list.u.list;
    if (l->n == l->cap) {
        int64_t cap = l->cap;
        jinja_value *items = grow_values(h, l->items, l->n, &cap);
        if (!items) return false;
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = v;
    return true;
}

bool jinja_dict_set(jinja_heap *h, jinja_value d, jinja_value key, jinja_value v) {
    if (d.type != JINJA_DICT && d.type != JINJA_NAMESPACE) return false;
    jinja_dict *dict = d.u.dict;
    int64_t at = jinja_dict_find(dict, key);
    if (at >= 0) {
        dict->vals[at] = v;
        return true;
    }
    if (dict->n == dict->cap) {
        int64_t kcap = dict->cap, vcap = dict->cap;
        jinja_value *keys = grow_values(h, dict->keys, dict->n, &kcap);
        if (!keys) return false;
        jinja_value *vals = grow_values(h, dict->vals, dict->n, &vcap);
        if (!vals) return false;
        dict->keys = keys;
        dict->vals = vals;
        dict->cap = kcap;
    }
    dict->keys[dict->n] = key;
    dict->vals[dict->n] = v;
    dict->n++;
    return true;
}

bool jinja_dict_set_str(jinja_heap *h, jinja_value d, const char *key, jinja_value v) {
    jinja_value *slot = jinja_dict_get_str(d, key);
    if (slot) {
        *slot = v;
        return true;
    }
    jinja_value k = jinja_cstr(h, key);
    if (k.type != JINJA_STR) return false;
    return jinja_dict_set(h, d, k, v);
}

static int64_t find_str(jinja_value d, const char *key) {
    if (d.type != JINJA_DICT && d.type != JINJA_NAMESPACE) return -1;
    const jinja_dict *dict = d.u.dict;
    size_t len = strlen(key);
    for (int64_t i = 0; i < dict->n; i++) {
        const jinja_value *k = &dict->keys[i];
        if (k->type == JINJA_STR && k->u.s.len == len && memcmp(k->u.s.p, key, len) == 0) return i;
    }
    return -1;
}

jinja_value *jinja_dict_get_str(jinja_value d, const char *key) {
    int64_t i = find_str(d, key);
    return i < 0 ? NULL : &d.u.dict->vals[i];
}

bool jinja_dict_del_str(jinja_value d, const char *key) {
    int64_t i = find_str(d, key);
    if (i < 0) return false;
    jinja_dict *dict = d.u.dict;
    size_t tail = (size_t)(dict->n - i - 1) * sizeof(jinja_value);
    memmove(&dict->keys[i], &dict->keys[i + 1], tail);
    memmove(&dict->vals[i], &dict->vals[i + 1], tail);
    dict->n--;
    return true;
}

bool jinja_truthy(jinja_value v) {
    switch ((jinja_type)v.type) {
    case JINJA_UNDEFINED:
    case JINJA_NONE:
        return false;
    case JINJA_BOOL:
        return v.u.b;
    case JINJA_INT:
        return v.u.i != 0;
    case JINJA_FLOAT:
        return v.u.f != 0.0; /* NaN is true, as in Python */
    case JINJA_STR:
        return v.u.s.len > 0;
    case JINJA_LIST:
        return v.u.list->n > 0;
    case JINJA_DICT:
        return v.u.dict->n > 0;
    case JINJA_NAMESPACE:
    case JINJA_CALLABLE:
    case JINJA_LOOP:
        return true;
    }
    return true;
}

/* ---- buffers ---- */

void jinja_buf_append(jinja_buf *b, const char *s, size_t n) {
    if (!b->p || b->cap - b->len <= n) {
        MT_CHECK(n < SIZE_MAX / 2 - b->len, "jinja buffer: %zu + %zu bytes", b->len, n);
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->len <= n) cap *= 2;
        char *p;
        if (b->heap) { /* a new piece of the heap (jinja_alloc jumps out of a render when full) */
            p = jinja_alloc(b->heap, cap);
            MT_CHECK(p, "jinja buffer of %zu bytes: the heap is full", cap);
            if (b->len) memcpy(p, b->p, b->len);
        } else {
            p = realloc(b->p, cap);
            MT_CHECK(p, "out of memory: jinja buffer of %zu bytes", cap);
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void jinja_buf_free(jinja_buf *b) {
    if (!b->heap) free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

void jinja_output_free(jinja_output *o) {
    jinja_buf_free(&o->text);
    free(o->gen);
    free(o->tagged);
    memset(o, 0, sizeof(*o));
}

void *jinja_heap_alloc(jinja_heap *h, size_t n) {
    jmp_buf *saved = h->on_fail; /* a caller's allocation never jumps */
    h->on_fail = NULL;
    void *p = jinja_alloc(h, n);
    h->on_fail = saved;
    return p;
}
