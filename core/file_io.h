/* file_io.h: small helpers every room shares: whole-file reads, a 64-bit content hash, UTF-8
 * validation, JSON duplicate keys and a growable byte buffer. Errors go into a caller buffer of
 * MT_ERR_LEN bytes so that tools and tests can report them. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MT_ERR_LEN 512 /* size of the error buffers of the data modules and the tools */

/* 64-bit FNV-1a over n bytes, continuing from h (start with MT_HASH64_INIT). It identifies
 * inputs of the token cache; it is not a cryptographic hash. */
#define MT_HASH64_INIT 0xcbf29ce484222325ull
uint64_t mt_hash64(const void *p, size_t n, uint64_t h);

/* Reads the whole file into a malloc'ed, NUL-terminated buffer (every reader of a user's file
 * goes through it). Returns NULL with "path: reason" in err (errlen bytes) when it cannot: it
 * does not open, is a directory, has more than max_bytes (0: no limit) or fails to read. */
char *mt_file_read_max(const char *path, size_t *len, size_t max_bytes, char *err, size_t errlen);
/* The same without a size limit, err of MT_ERR_LEN bytes. */
char *mt_file_read(const char *path, size_t *len, char *err);

/* Hash of a file's bytes. Returns 0, or -1 with err set. */
int mt_file_hash(const char *path, uint64_t *h, char *err);

/* The length of the well-formed UTF-8 sequence at s[0, n) (n >= 1), or 0 when it is not one;
 * then *bad is the length of its longest valid prefix (at least 1), the bytes Rust's
 * from_utf8_lossy replaces by one U+FFFD. Well-formed: no overlongs, surrogates or code points
 * above U+10FFFF (what Rust's str accepts). */
int mt_utf8_seq(const uint8_t *s, size_t n, int *bad);
/* true when s[0, n) is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF);
 * otherwise *bad_at (when not NULL) receives the byte offset of the first bad sequence. */
bool mt_utf8_valid(const char *s, size_t n, size_t *bad_at);

/* A key that appears twice in one object of the JSON tree v (arrays and objects searched
 * depth-first, objects inside them too; `skip`, if not NULL, is an object not looked into):
 * its name, with its path from v ("pre_tokenizer.pretokenizers[1].type") in path; NULL when
 * every object's keys are distinct. cJSON keeps both and its lookups return the first, while
 * Python's json (transformers, datasets) takes the last: readers refuse such files. */
struct cJSON;
const char *mt_json_duplicate_key(const struct cJSON *v, const struct cJSON *skip, char *path,
                                  size_t n);

typedef struct {
    char *p; /* NUL-terminated */
    size_t len, cap;
} mt_strbuf;
void mt_strbuf_append(mt_strbuf *b, const char *s, size_t n);
void mt_strbuf_free(mt_strbuf *b);
