/* file_io.c: whole-file reads, FNV-1a hashing, UTF-8 validation, byte buffers. */
#include "core/file_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "core/check.h"

uint64_t mt_hash64(const void *p, size_t n, uint64_t h) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

char *mt_file_read_max(const char *path, size_t *len, size_t max_bytes, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    /* a directory opens (and reads as EISDIR, or as a size of LONG_MAX to ftell): say so */
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: is a directory, not a file", path);
        fclose(f);
        return NULL;
    }
    const size_t limit = max_bytes ? max_bytes : SIZE_MAX - 1;
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > limit) {
        snprintf(err, errlen, "%s: %lld bytes, more than the %zu this file may have", path,
                 (long long)st.st_size, limit);
        fclose(f);
        return NULL;
    }
    /* regular files: their size, the terminator and one byte more, so the read that finds the
     * end needs no second buffer (a file that grew meanwhile still grows it); pipes: grown */
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 2 : 1 << 16, n = 0;
    char *buf = mt_malloc(cap, path);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            MT_CHECK(nb, "out of memory reading %s (%zu bytes)", path, cap);
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0 || n > limit) break;
    }
    const int read_errno = ferror(f) ? errno : 0;
    fclose(f);
    if (read_errno || n > limit) {
        if (read_errno)
            snprintf(err, errlen, "%s: read error: %s", path, strerror(read_errno));
        else
            snprintf(err, errlen, "%s: more than the %zu bytes this file may have", path, limit);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

char *mt_file_read(const char *path, size_t *len, char *err) {
    return mt_file_read_max(path, len, 0, err, MT_ERR_LEN);
}

int mt_file_hash(const char *path, uint64_t *h, char *err) {
    size_t n;
    char *buf = mt_file_read(path, &n, err);
    if (!buf) return -1;
    *h = mt_hash64(buf, n, MT_HASH64_INIT);
    free(buf);
    return 0;
}

int mt_utf8_seq(const uint8_t *s, size_t n, int *bad) {
    uint8_t c = s[0];
    *bad = 1;
    if (c < 0x80) return 1;
    uint8_t lo = 0x80, hi = 0xBF; /* the second byte's range rules out overlongs, surrogates */
    int need;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c == 0xE0)
        need = 2, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
        need = 2;
    else if (c == 0xED)
        need = 2, hi = 0x9F;
    else if (c == 0xF0)
        need = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
        need = 3;
    else if (c == 0xF4)
        need = 3, hi = 0x8F;
    else
        return 0;
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n) return *bad = k, 0;
        uint8_t x = s[k];
        bool ok = k == 1 ? (x >= lo && x <= hi) : (x & 0xC0) == 0x80;
        if (!ok) return *bad = k, 0;
    }
    return need + 1;
}

bool mt_utf8_valid(const char *str, size_t n, size_t *bad_at) {
    const uint8_t *s = (const uint8_t *)str;
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) { /* eight ASCII bytes at a time: most text */
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (!(v & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        int bad, k = mt_utf8_seq(s + i, n - i, &bad);
        if (!k) {
            if (bad_at) *bad_at = i;
            return false;
        }
        i += (size_t)k;
    }
    return true;
}

static int json_key_cmp(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* A key of object o that appears twice, or NULL: pairwise for a few keys, sorted otherwise
 * (so an object of many keys costs n log n, not n^2). */
static const char *json_object_duplicate(const cJSON *o) {
    int n = 0;
    for (const cJSON *c = o->child; c; c = c->next) n++;
    if (n <= 16) {
        for (const cJSON *a = o->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (strcmp(a->string, b->string) == 0) return a->string;
        return NULL;
    }
    const cJSON **keys = mt_malloc(sizeof(*keys) * (size_t)n, "json keys");
    int k = 0;
    for (const cJSON *c = o->child; c; c = c->next) keys[k++] = c;
    qsort(keys, (size_t)n, sizeof(*keys), json_key_cmp);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (strcmp(keys[i - 1]->string, keys[i]->string) == 0) dup = keys[i]->string;
    free(keys);
    return dup;
}

/* Depth-first from v, whose path is path[0, strlen(path)). */
static const char *json_duplicate_walk(const cJSON *v, const cJSON *skip, char *path, size_t n) {
    if (!v || v == skip || !(cJSON_IsObject(v) || cJSON_IsArray(v))) return NULL;
    const size_t at = strlen(path);
    if (cJSON_IsObject(v)) {
        const char *dup = json_object_duplicate(v);
        if (dup) {
            snprintf(path + at, n - at, "%s%s", at ? "." : "", dup);
            return dup;
        }
    }
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (cJSON_IsObject(v))
            snprintf(path + at, n - at, "%s%s", at ? "." : "", c->string);
        else
            snprintf(path + at, n - at, "[%d]", i);
        const char *dup = json_duplicate_walk(c, skip, path, n);
        if (dup) return dup;
        path[at] = 0;
    }
    return NULL;
}

const char *mt_json_duplicate_key(const cJSON *v, const cJSON *skip, char *path, size_t n) {
    path[0] = 0;
    return json_duplicate_walk(v, skip, path, n);
}

void mt_strbuf_append(mt_strbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        MT_CHECK(p, "out of memory growing a string buffer to %zu bytes", cap);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void mt_strbuf_free(mt_strbuf *b) {
    free(b->p);
    *b = (mt_strbuf){0};
}
