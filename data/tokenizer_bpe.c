// tokenizer_bpe.c: the hash maps behind the vocab and merges, the BPE merge of one word and
// the word cache.
//
// A word is the byte string of one pre-token (plus the virtual prefix space of ByteLevel's
// add_prefix_space). Every byte is one byte-level character, so BPE runs on model ids of single
// bytes and merges pairs by rank exactly like HF `tokenizers` (word.rs merge_all): always the
// pair with the lowest rank, the leftmost one among equal ranks.
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "data/tokenizer_internal.h"

// Words up to this many symbols use a rank scan (O(n^2) but cache friendly); longer words
// (long digit or whitespace runs) use a heap so the cost stays O(n log n).
#define BPE_SCAN_MAX 48
// The cache keeps words up to this many bytes.
#define CACHE_WORD_MAX 255

uint64_t tok_hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h | 1; // 0 marks an empty slot
}

static uint64_t pow2_at_least(int64_t n) {
    uint64_t c = 16;
    while ((int64_t)c < n) c <<= 1;
    return c;
}

// ---- string map ----

void tok_strmap_init(tok_strmap *m, const uint8_t **base, int64_t expected) {
    uint64_t cap = pow2_at_least(2 * expected + 1);
    m->hashes = mt_calloc(cap, sizeof(uint64_t), "tokenizer map");
    m->key_off = mt_malloc(cap * sizeof(uint32_t), "tokenizer map");
    m->key_len = mt_malloc(cap * sizeof(uint32_t), "tokenizer map");
    m->vals = mt_malloc(cap * sizeof(int32_t), "tokenizer map");
    m->base = base;
    m->mask = cap - 1;
    m->n = 0;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->hashes);
    free(m->key_off);
    free(m->key_len);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

static void strmap_grow(tok_strmap *m) {
    tok_strmap old = *m;
    tok_strmap_init(m, old.base, (int64_t)(old.mask + 1));
    for (uint64_t i = 0; i <= old.mask; i++)
        if (old.hashes[i]) tok_strmap_put(m, old.key_off[i], old.key_len[i], old.vals[i]);
    tok_strmap_free(&old);
}

void tok_strmap_put(tok_strmap *m, uint32_t key_off, uint32_t key_len, int32_t val) {
    if ((uint64_t)(m->n + 1) * 2 > m->mask + 1) strmap_grow(m);
    const uint8_t *key = *m->base + key_off;
    uint64_t h = tok_hash_bytes(key, key_len);
    for (uint64_t i = h & m->mask;; i = (i + 1) & m->mask) {
        if (!m->hashes[i]) {
            m->hashes[i] = h;
            m->key_off[i] = key_off;
            m->key_len[i] = key_len;
            m->vals[i] = val;
            m->n++;
            return;
        }
        if (m->hashes[i] == h && m->key_len[i] == key_len &&
            memcmp(*m->base + m->key_off[i], key, key_len) == 0) {
            m->vals[i] = val;
            return;
        }
    }
}

int32_t tok_strmap_get(const tok_strmap *m, const uint8_t *key, size_t len) {
    if (!m->hashes) return -1;
    uint64_t h = tok_hash_bytes(key, len);
    for (uint64_t i = h & m->mask;; i = (i + 1) & m->mask) {
        if (!m->hashes[i]) return -1;
        if (m->hashes[i] == h && m->key_len[i] == len &&
            memcmp(*m->base + m->key_off[i], key, len) == 0)
            return m->vals[i];
    }
}

// ---- merge map ----

static inline uint64_t merge_slot_hash(uint64_t key) {
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 29);
}

void tok_mergemap_init(tok_mergemap *m, int64_t expected) {
    uint64_t cap = pow2_at_least(2 * expected + 1);
    m->slots = mt_malloc(cap * sizeof(tok_merge_slot), "tokenizer merges");
    for (uint64_t i = 0; i < cap; i++) m->slots[i].key = UINT64_MAX;
    m->mask = cap - 1;
    m->n = 0;
}

void tok_mergemap_free(tok_mergemap *m) {
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

void tok_mergemap_put(tok_mergemap *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id) {
    MT_CHECK((uint64_t)(m->n + 1) * 2 <= m->mask + 1, "tokenizer: merge map sized too small");
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint64_t i = merge_slot_hash(key) & m->mask;; i = (i + 1) & m->mask) {
        tok_merge_slot *s = &m->slots[i];
        if (s->key == UINT64_MAX || s->key == key) {
            if (s->key == UINT64_MAX) m->n++;
            s->key = key;
            s->rank = rank; // a repeated pair keeps its last rank, like HF's HashMap collect
            s->new_id = new_id;
            return;
        }
    }
}

static inline const tok_merge_slot *merge_get(const tok_mergemap *m, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint64_t i = merge_slot_hash(key) & m->mask;; i = (i + 1) & m->mask) {
        const tok_merge_slot *s = &m->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}

// ---- word cache ----

#define CACHE_SLOTS     (1 << 17)
#define CACHE_KEYS_CAP  (1 << 21)
#define CACHE_VALS_CAP  (1 << 21)
#define CACHE_MAX_WORDS (CACHE_SLOTS / 2)

tok_cache *tok_cache_new(void) {
    tok_cache *c = mt_calloc(1, sizeof(tok_cache), "tokenizer cache");
    c->cap = CACHE_SLOTS;
    c->hashes = mt_calloc(CACHE_SLOTS, sizeof(uint64_t), "tokenizer cache");
    c->key_off = mt_malloc(CACHE_SLOTS * sizeof(uint32_t), "tokenizer cache");
    c->key_len = mt_malloc(CACHE_SLOTS * sizeof(uint16_t), "tokenizer cache");
    c->ntok = mt_malloc(CACHE_SLOTS * sizeof(uint16_t), "tokenizer cache");
    c->val_off = mt_malloc(CACHE_SLOTS * sizeof(uint32_t), "tokenizer cache");
    c->keys_cap = CACHE_KEYS_CAP;
    c->keys = mt_malloc(CACHE_KEYS_CAP, "tokenizer cache");
    c->vals_cap = CACHE_VALS_CAP;
    c->vals = mt_malloc(CACHE_VALS_CAP * sizeof(int32_t), "tokenizer cache");
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void tok_cache_free(tok_cache *c) {
    if (!c) return;
    pthread_mutex_destroy(&c->lock);
    free(c->hashes);
    free(c->key_off);
    free(c->key_len);
    free(c->ntok);
    free(c->val_off);
    free(c->keys);
    free(c->vals);
    free(c);
}

// Looks the word up; on a hit copies its tokens into w->ids / w->lens and returns the count.
static int64_t cache_get(const tok_cache *c, const uint8_t *word, int64_t n, uint64_t h,
                         tok_work *w) {
    for (uint64_t i = h & (uint64_t)(c->cap - 1);; i = (i + 1) & (uint64_t)(c->cap - 1)) {
        if (!c->hashes[i]) return -1;
        if (c->hashes[i] == h && c->key_len[i] == n &&
            memcmp(c->keys + c->key_off[i], word, (size_t)n) == 0) {
            const int32_t *v = c->vals + c->val_off[i];
            int64_t k = c->ntok[i];
            for (int64_t j = 0; j < k; j++) {
                w->ids[j] = v[2 * j];
                w->lens[j] = v[2 * j + 1];
            }
            return k;
        }
    }
}

static void cache_put(tok_cache *c, const uint8_t *word, int64_t n, uint64_t h, const int32_t *ids,
                      const int32_t *lens, int64_t k) {
    if (c->n >= CACHE_MAX_WORDS || c->keys_used + n > c->keys_cap ||
        c->vals_used + 2 * k > c->vals_cap) {
        // Full: start over (a clock or LRU would not pay for itself on training data).
        memset(c->hashes, 0, (size_t)c->cap * sizeof(uint64_t));
        c->n = c->keys_used = c->vals_used = 0;
    }
    uint64_t i = h & (uint64_t)(c->cap - 1);
    while (c->hashes[i]) i = (i + 1) & (uint64_t)(c->cap - 1);
    c->hashes[i] = h;
    c->key_off[i] = (uint32_t)c->keys_used;
    c->key_len[i] = (uint16_t)n;
    c->ntok[i] = (uint16_t)k;
    c->val_off[i] = (uint32_t)c->vals_used;
    memcpy(c->keys + c->keys_used, word, (size_t)n);
    c->keys_used += n;
    for (int64_t j = 0; j < k; j++) {
        c->vals[c->vals_used++] = ids[j];
        c->vals[c->vals_used++] = lens[j];
    }
    c->n++;
}

// ---- BPE ----

void tok_work_free(tok_work *w) {
    free(w->ids);
    free(w->lens);
    free(w->prev);
    free(w->next);
    free(w->ranks);
    free(w->heap);
    free(w->vbuf);
    free(w->rbuf);
    if (w->md) pcre2_match_data_free(w->md);
    if (w->mctx) pcre2_match_context_free(w->mctx);
    if (w->jit_stack) pcre2_jit_stack_free(w->jit_stack);
    memset(w, 0, sizeof(*w));
}

static void work_reserve(tok_work *w, int64_t n) {
    if (n <= w->cap) return;
    int64_t cap = w->cap ? w->cap : 256;
    while (cap < n) cap *= 2;
    free(w->ids);
    free(w->lens);
    free(w->prev);
    free(w->next);
    free(w->ranks);
    w->ids = mt_malloc((size_t)cap * sizeof(int32_t), "tokenizer scratch");
    w->lens = mt_malloc((size_t)cap * sizeof(int32_t), "tokenizer scratch");
    w->prev = mt_malloc((size_t)cap * sizeof(int32_t), "tokenizer scratch");
    w->next = mt_malloc((size_t)cap * sizeof(int32_t), "tokenizer scratch");
    w->ranks = mt_malloc((size_t)cap * sizeof(uint32_t), "tokenizer scratch");
    w->cap = cap;
}

// Min-heap of (rank << 32 | position): lowest rank first, then leftmost (HF's Merge order).
static void heap_push(tok_work *w, int64_t *hn, uint64_t v) {
    if (*hn == w->heap_cap) {
        w->heap_cap = w->heap_cap ? 2 * w->heap_cap : 256;
        uint64_t *h = realloc(w->heap, (size_t)w->heap_cap * sizeof(uint64_t));
        MT_CHECK(h, "tokenizer: out of memory for the merge heap");
        w->heap = h;
    }
    uint64_t *h = w->heap;
    int64_t i = (*hn)++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(tok_work *w, int64_t *hn) {
    uint64_t *h = w->heap;
    uint64_t top = h[0], v = h[--(*hn)];
    int64_t i = 0, n = *hn;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] < h[c]) c++;
        if (v <= h[c]) break;
        h[i] = h[c];
        i = c;
    }
    if (n > 0) h[i] = v;
    return top;
}

static int64_t bpe_merge_scan(const mt_tokenizer *tok, tok_work *w, int64_t m) {
    int32_t *ids = w->ids, *lens = w->lens, *nids = w->prev;
    uint32_t *ranks = w->ranks;
    for (int64_t i = 0; i + 1 < m; i++) {
        const tok_merge_slot *s = merge_get(&tok->merges, ids[i], ids[i + 1]);
        ranks[i] = s ? s->rank : UINT32_MAX;
        nids[i] = s ? s->new_id : -1;
    }
    while (m > 1) {
        uint32_t best = UINT32_MAX;
        int64_t bi = -1;
        for (int64_t i = 0; i + 1 < m; i++)
            if (ranks[i] < best) best = ranks[i], bi = i;
        if (bi < 0) break;
        ids[bi] = nids[bi];
        lens[bi] += lens[bi + 1];
        int64_t tail = m - bi - 2; // symbols after bi + 1
        memmove(ids + bi + 1, ids + bi + 2, (size_t)tail * sizeof(int32_t));
        memmove(lens + bi + 1, lens + bi + 2, (size_t)tail * sizeof(int32_t));
        int64_t pair_tail = m - bi - 3; // pairs after the one that vanished
        if (pair_tail > 0) {
            memmove(ranks + bi + 1, ranks + bi + 2, (size_t)pair_tail * sizeof(uint32_t));
            memmove(nids + bi + 1, nids + bi + 2, (size_t)pair_tail * sizeof(int32_t));
        }
        m--;
        for (int64_t i = bi - 1; i <= bi; i++) {
            if (i < 0 || i + 1 >= m) continue;
            const tok_merge_slot *s = merge_get(&tok->merges, ids[i], ids[i + 1]);
            ranks[i] = s ? s->rank : UINT32_MAX;
            nids[i] = s ? s->new_id : -1;
        }
    }
    return m;
}

static int64_t bpe_merge_heap(const mt_tokenizer *tok, tok_work *w, int64_t m) {
    int32_t *ids = w->ids, *lens = w->lens, *prev = w->prev, *next = w->next;
    int64_t hn = 0;
    for (int64_t i = 0; i < m; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    for (int64_t i = 0; i + 1 < m; i++) {
        const tok_merge_slot *s = merge_get(&tok->merges, ids[i], ids[i + 1]);
        if (s) heap_push(w, &hn, ((uint64_t)s->rank << 32) | (uint64_t)i);
    }
    while (hn > 0) {
        uint64_t top = heap_pop(w, &hn);
        uint32_t rank = (uint32_t)(top >> 32);
        int32_t pos = (int32_t)(top & 0xFFFFFFFFu);
        if (lens[pos] == 0 || next[pos] < 0) continue;
        int32_t nx = next[pos];
        const tok_merge_slot *s = merge_get(&tok->merges, ids[pos], ids[nx]);
        if (!s || s->rank != rank) continue; // stale entry: the pair at pos has changed
        ids[pos] = s->new_id;
        lens[pos] += lens[nx];
        lens[nx] = 0;
        next[pos] = next[nx];
        if (next[nx] >= 0) prev[next[nx]] = pos;
        if (prev[pos] >= 0) {
            const tok_merge_slot *p = merge_get(&tok->merges, ids[prev[pos]], ids[pos]);
            if (p) heap_push(w, &hn, ((uint64_t)p->rank << 32) | (uint64_t)prev[pos]);
        }
        if (next[pos] >= 0) {
            const tok_merge_slot *q = merge_get(&tok->merges, ids[pos], ids[next[pos]]);
            if (q) heap_push(w, &hn, ((uint64_t)q->rank << 32) | (uint64_t)pos);
        }
    }
    int64_t k = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) {
        ids[k] = ids[i];
        lens[k] = lens[i];
        k++;
    }
    return k;
}

int64_t tok_bpe_word(const mt_tokenizer *tok, tok_work *w, const uint8_t *word, int64_t n) {
    work_reserve(w, n + 1);
    if (tok->ignore_merges) {
        int32_t id = tok_strmap_get(&tok->vocab_raw, word, (size_t)n);
        if (id >= 0) {
            w->ids[0] = id;
            w->lens[0] = (int32_t)n;
            return 1;
        }
    }
    uint64_t h = 0;
    tok_cache *c = n <= CACHE_WORD_MAX ? w->cache : NULL;
    if (c) {
        h = tok_hash_bytes(word, (size_t)n);
        int64_t k = cache_get(c, word, n, h, w);
        if (k >= 0) return k;
    }
    // Initial symbols: one per byte; bytes without a model id become the unk token (fused
    // when fuse_unk), as in HF's merge_word. The loader rejects tokenizers where a byte has
    // neither, since HF would then drop it and shift the offsets of what follows.
    int64_t m = 0;
    int32_t unk_len = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = tok->byte_id[word[i]];
        if (id >= 0) {
            if (unk_len) w->ids[m] = tok->unk_id, w->lens[m++] = unk_len, unk_len = 0;
            w->ids[m] = id;
            w->lens[m++] = 1;
        } else if (unk_len && tok->fuse_unk) {
            unk_len++;
        } else {
            if (unk_len) w->ids[m] = tok->unk_id, w->lens[m++] = unk_len;
            unk_len = 1;
        }
    }
    if (unk_len) w->ids[m] = tok->unk_id, w->lens[m++] = unk_len;
    int64_t k = m <= BPE_SCAN_MAX ? bpe_merge_scan(tok, w, m) : bpe_merge_heap(tok, w, m);
    if (c && k <= UINT16_MAX) cache_put(c, word, n, h, w->ids, w->lens, k);
    return k;
}

void tok_buf_reserve(mt_token_buf *b, int64_t extra) {
    if (b->n + extra <= b->cap) return;
    int64_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra) cap *= 2;
    int32_t *ids = realloc(b->ids, (size_t)cap * sizeof(int32_t));
    MT_CHECK(ids, "tokenizer: out of memory for %lld token ids", (long long)cap);
    b->ids = ids;
    int64_t *off = realloc(b->offsets, (size_t)cap * 2 * sizeof(int64_t));
    MT_CHECK(off, "tokenizer: out of memory for %lld token offsets", (long long)cap);
    b->offsets = off;
    b->cap = cap;
}
