/* data_io.c: whole-file reads, FNV-1a hashing, UTF-8 validation, byte buffers. */
#include "data/data_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/check.h"
#include "data/chat_template.h"

uint64_t mt_hash64(const void *p, size_t n, uint64_t h) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

char *mt_file_read(const char *path, size_t *len, char *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, MT_ERR_LEN, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = mt_malloc(cap, "file contents");
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            MT_CHECK(nb, "out of memory reading %s (%zu bytes)", path, cap);
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, MT_ERR_LEN, "%s: read error", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int mt_file_hash(const char *path, uint64_t *h, char *err) {
    size_t n;
    char *buf = mt_file_read(path, &n, err);
    if (!buf) return -1;
    *h = mt_hash64(buf, n, MT_HASH64_INIT);
    free(buf);
    return 0;
}

bool mt_utf8_valid(const char *str, size_t n, size_t *bad_at) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int k;           /* continuation bytes */
        unsigned lo, hi; /* allowed range of the second byte (rules out overlongs, surrogates) */
        if (c >= 0xc2 && c <= 0xdf)
            k = 1, lo = 0x80, hi = 0xbf;
        else if (c == 0xe0)
            k = 2, lo = 0xa0, hi = 0xbf;
        else if (c >= 0xe1 && c <= 0xec)
            k = 2, lo = 0x80, hi = 0xbf;
        else if (c == 0xed)
            k = 2, lo = 0x80, hi = 0x9f;
        else if (c >= 0xee && c <= 0xef)
            k = 2, lo = 0x80, hi = 0xbf;
        else if (c == 0xf0)
            k = 3, lo = 0x90, hi = 0xbf;
        else if (c >= 0xf1 && c <= 0xf3)
            k = 3, lo = 0x80, hi = 0xbf;
        else if (c == 0xf4)
            k = 3, lo = 0x80, hi = 0x8f;
        else
            goto bad;
        if (i + (size_t)k >= n) goto bad; /* truncated sequence */
        if (s[i + 1] < lo || s[i + 1] > hi) goto bad;
        for (int j = 2; j <= k; j++)
            if ((s[i + j] & 0xc0) != 0x80) goto bad;
        i += (size_t)k + 1;
    }
    return true;
bad:
    if (bad_at) *bad_at = i;
    return false;
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
