// Internals shared by tokenizer.c (loading, API, decode), tokenizer_bpe.c (maps, BPE merges,
// word cache) and tokenizer_pretok.c (regexes, added-token and pre-tokenizer splits, encode).
#pragma once
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"

// ---- string -> id hash map (open addressing; keys live in the tokenizer's byte arena) ----
typedef struct {
    uint64_t *hashes; // 0 = empty slot
    uint32_t *key_off, *key_len;
    int32_t *vals;
    const uint8_t **base; // &tok->arena, so keys resolve after the arena grows
    uint64_t mask;
    int64_t n;
} tok_strmap;

// ---- (left id, right id) -> (rank, merged id) ----
typedef struct {
    uint64_t key; // (left << 32) | right; UINT64_MAX = empty
    uint32_t rank;
    int32_t new_id;
} tok_merge_slot;

typedef struct {
    tok_merge_slot *slots;
    uint64_t mask;
    int64_t n;
} tok_mergemap;

// ---- word cache: virtual word bytes -> [(id, byte length)] ----
typedef struct {
    uint64_t *hashes; // 0 = empty
    uint32_t *key_off;
    uint16_t *key_len, *ntok;
    uint32_t *val_off; // into vals, 2 int32 per token
    uint8_t *keys;
    int32_t *vals;
    int64_t n, cap, keys_used, keys_cap, vals_used, vals_cap;
    pthread_mutex_t lock;
} tok_cache;

typedef struct {
    char *content; // UTF-8 bytes
    int32_t len, id;
    bool special, normalized, lstrip, rstrip;
} tok_added;

// One phase of added-token matching (non-normalized, then normalized tokens).
typedef struct {
    int32_t *order; // indices into tok->added, by first byte, then longest first
    int32_t n;
    int32_t fb_off[257];  // order[fb_off[b], fb_off[b+1]) start with byte b
    bool first_byte[256]; // some token of this set starts with this byte
} tok_added_set;

enum { TOK_STEP_SPLIT, TOK_STEP_BYTELEVEL };
enum { TOK_REMOVED, TOK_ISOLATED, TOK_MERGED_WITH_PREVIOUS, TOK_MERGED_WITH_NEXT, TOK_CONTIGUOUS };

typedef struct {
    int kind;
    char *pattern;  // the regex as tokenizer.json has it (ByteLevel: GPT-2's), for messages
    pcre2_code *re; // NULL for ByteLevel without regex
    bool jit;
    int behavior;
    bool invert;
    bool add_prefix_space; // ByteLevel only
} tok_step;

typedef struct tok_work tok_work;

struct mt_tokenizer {
    char *path;
    // byte arena holding vocab strings (byte-level form) and their raw-byte forms
    uint8_t *arena;
    int64_t arena_used, arena_cap;

    int32_t n_ids;        // max id + 1 over model vocab and added tokens
    uint32_t *id_str_off; // byte-level token string per id (arena), UINT32_MAX if none
    uint32_t *id_str_len;
    uint8_t *id_lead_sp, *id_trail_sp; // leading/trailing 'Ġ'/whitespace chars (trim_offsets)
    int32_t *id_added;                 // index into added[] or -1

    tok_strmap vocab;     // model vocab: byte-level string -> id
    tok_strmap vocab_raw; // model vocab: raw bytes -> id (tokens made of byte-level chars only)
    int32_t byte_id[256]; // model id of each single byte, -1 if absent
    tok_mergemap merges;
    int32_t unk_id; // -1: none
    bool fuse_unk, ignore_merges;

    tok_added *added;
    int32_t n_added;
    tok_strmap added_map; // content -> id
    tok_added_set set_raw, set_norm;

    tok_step *steps;
    int32_t n_steps;

    bool pp_trim, pp_add_prefix_space; // ByteLevel post-processor
    bool dec_bytelevel;                // decoder ByteLevel (else none: tokens joined with ' ')

    tok_cache *cache;
    tok_work *work; // scratch reused by the call that holds cache->lock
};

// ---- tokenizer_bpe.c ----
uint64_t tok_hash_bytes(const uint8_t *p, size_t n);
void tok_strmap_init(tok_strmap *m, const uint8_t **base, int64_t expected);
void tok_strmap_free(tok_strmap *m);
// Inserts or overwrites (last one wins, like a serde HashMap).
void tok_strmap_put(tok_strmap *m, uint32_t key_off, uint32_t key_len, int32_t val);
int32_t tok_strmap_get(const tok_strmap *m, const uint8_t *key, size_t len); // -1 if absent
void tok_mergemap_init(tok_mergemap *m, int64_t expected);
void tok_mergemap_free(tok_mergemap *m);
void tok_mergemap_put(tok_mergemap *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id);
tok_cache *tok_cache_new(void);
void tok_cache_free(tok_cache *c);

// Scratch memory of one encode call.
struct tok_work {
    int32_t *ids, *lens, *prev, *next;
    uint32_t *ranks;
    uint64_t *heap;
    int64_t cap, heap_cap;
    uint8_t *vbuf, *rbuf; // virtual word (BPE) and regex subject, each prefix space + piece
    int64_t vbuf_cap, rbuf_cap;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
    tok_cache *cache; // non-NULL when this call holds the cache lock
};

void tok_work_free(tok_work *w);
void tok_buf_reserve(mt_token_buf *b, int64_t extra);
// BPE of one word (virtual bytes w[0,n)); writes ids and virtual byte lengths into w->ids /
// w->lens, returns the count.
int64_t tok_bpe_word(const mt_tokenizer *tok, tok_work *w, const uint8_t *word, int64_t n);

// ---- tokenizer_pretok.c ----
// Translates an Oniguruma (Ruby syntax) pattern, as HF tokenizers compiles it, to PCRE2 and
// compiles it; on failure writes a message to err and returns NULL.
pcre2_code *tok_regex_compile(const char *pattern, bool literal, bool *jit, char *err,
                              size_t errlen);
// UTF-8 helpers
bool tok_is_whitespace(uint32_t cp); // Unicode White_Space (Rust char::is_whitespace)
uint32_t tok_utf8_decode(const uint8_t *s, int *len);
