// Internals shared by tokenizer.c (loading, API, decode), tokenizer_bpe.c (maps, BPE merges,
// word cache) and tokenizer_pretok.c (regexes, added-token and pre-tokenizer splits, encode).
#pragma once
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/file_io.h"
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
    // the same regex with PCRE2's own classes (Unicode 14, faster: tokenizer_unicode.c) for
    // texts that tok_ucd_text_unchanged accepts; NULL when it would be the same or PCRE2 is
    // not at the tables' base version
    pcre2_code *re_base;
    bool jit_base;
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
// compiles it into st->re (and st->re_base); on failure writes a message to err and returns
// false.
bool tok_step_compile(tok_step *st, const char *pattern, bool literal, char *err, size_t errlen);
// The pre-tokenizer's pieces of text (added tokens split off first, not reported) instead of
// tokens, for tests: on_piece gets each piece's bytes [start, end) and whether ByteLevel's
// virtual space precedes it. 0, or -1 with err set (invalid UTF-8, a regex failed).
typedef void (*tok_piece_fn)(void *arg, int64_t start, int64_t end, bool prefix);
int64_t tok_pretokenize(const mt_tokenizer *tok, const char *text, size_t len,
                        tok_piece_fn on_piece, void *arg, char *err, size_t errlen);
// UTF-8 helpers
bool tok_is_whitespace(uint32_t cp); // Unicode White_Space (Rust char::is_whitespace)
uint32_t tok_utf8_decode(const uint8_t *s, int *len);
int tok_utf8_encode(uint8_t *o, uint32_t cp); // tokenizer.c; returns the byte count

// ---- tokenizer_unicode.c, tokenizer_unicode_data.c (tools/make_unicode_tables.py) ----
// General_Category values, in the generator's order (GC there).
enum {
    TOK_GC_Lu,
    TOK_GC_Ll,
    TOK_GC_Lt,
    TOK_GC_Lm,
    TOK_GC_Lo,
    TOK_GC_Mn,
    TOK_GC_Mc,
    TOK_GC_Me,
    TOK_GC_Nd,
    TOK_GC_Nl,
    TOK_GC_No,
    TOK_GC_Pc,
    TOK_GC_Pd,
    TOK_GC_Ps,
    TOK_GC_Pe,
    TOK_GC_Pi,
    TOK_GC_Pf,
    TOK_GC_Po,
    TOK_GC_Sm,
    TOK_GC_Sc,
    TOK_GC_Sk,
    TOK_GC_So,
    TOK_GC_Zs,
    TOK_GC_Zl,
    TOK_GC_Zp,
    TOK_GC_Cc,
    TOK_GC_Cf,
    TOK_GC_Cs,
    TOK_GC_Co,
    TOK_GC_Cn,
    TOK_GC_COUNT
};
typedef struct {
    uint32_t start; // the run covers [start, next run's start)
    uint8_t gc;
} tok_gc_run;
typedef struct {
    uint32_t lo, hi; // [lo, hi] had old_gc in the base version, has new_gc now
    uint8_t old_gc, new_gc;
} tok_gc_change;
extern const char tok_ucd_version[], tok_ucd_base_version[];
extern const tok_gc_run tok_ucd_gc_runs[];
extern const int32_t tok_ucd_n_gc_runs;
extern const tok_gc_change tok_ucd_gc_changes[];
extern const int32_t tok_ucd_n_gc_changes;
// The General_Category set (bit g = TOK_GC_g) that Oniguruma's property NAME (n bytes) names:
// short or long, any case, ' ', '-', '_' ignored; 0 when it is no category (a script, a
// binary property: those are left to PCRE2 and its Unicode version).
uint32_t tok_ucd_gc_mask(const char *name, size_t n);
#define TOK_GC_MASK_DIGIT (1u << TOK_GC_Nd) // Oniguruma's \d
// \w: L, M, N (bits Lu..No) and Pc, as the translation always had it (Oniguruma's own \w
// differs: No out, Other_Alphabetic symbols such as U+24B6 in; docs/tokenizer.md)
#define TOK_GC_MASK_WORD (((1u << (TOK_GC_No + 1)) - 1) | (1u << TOK_GC_Pc))
// Appends bracket-class items (no brackets) matching exactly the characters whose category
// (tok_ucd_version) is in mask, or with negate the ones whose category is not. base: PCRE2's
// own items instead, exact only on texts that tok_ucd_text_unchanged accepts.
void tok_ucd_class_items(mt_strbuf *b, uint32_t mask, bool negate, bool base);
// The class of an escape (\p{..}, \d, \w; negated \P{..}, \D, \W): inside brackets its
// items, else a bracket class (or PCRE2's lone property, with base).
void tok_ucd_class(mt_strbuf *b, uint32_t mask, bool negate, bool in_class, bool base);
// PCRE2 classifies by the tables' base version (tok_ucd_base_version).
bool tok_ucd_pcre2_is_base(void);
// No character of the UTF-8 text changed category between the base version and
// tok_ucd_version.
bool tok_ucd_text_unchanged(const uint8_t *t, size_t n);
// Tests: always list every range (the path taken when PCRE2's Unicode version is not the
// tables' base version), to check it against the fast one.
extern bool tok_ucd_full_tables;
