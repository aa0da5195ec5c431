// tokenizer.c: loading a HF tokenizer.json (cJSON) into the structures of tokenizer_internal.h,
// the id <-> token API and decoding. Encoding lives in tokenizer_pretok.c, BPE in
// tokenizer_bpe.c. Anything the loader does not implement exactly is rejected by name.
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/file_io.h"
#include "data/tokenizer_internal.h"

// The GPT-2 pre-tokenizer regex that ByteLevel(use_regex=true) applies (byte_level.rs).
static const char *const GPT2_PATTERN =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// GPT-2 byte <-> unicode map: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order (openai/gpt-2 encoder.py bytes_to_unicode).
static void byte_level_map(uint32_t byte_cp[256], int16_t cp_byte[324]) {
    int n = 0;
    for (int i = 0; i < 324; i++) cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_cp[b] = keep ? (uint32_t)b : (uint32_t)(256 + n++);
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

int tok_utf8_encode(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (uint8_t)cp, 1;
    if (cp < 0x800)
        return o[0] = (uint8_t)(0xC0 | (cp >> 6)), o[1] = (uint8_t)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

// ---- loader plumbing ----

typedef struct {
    const char *name; // file name for messages
    char *err;
    size_t errlen;
    bool failed;
} loader;

static bool fail(loader *L, const char *fmt, ...) MT_PRINTF(2, 3);
static bool fail(loader *L, const char *fmt, ...) {
    if (L->failed) return false;
    L->failed = true;
    int k = snprintf(L->err, L->errlen, "%s: ", L->name);
    if (k < 0 || (size_t)k >= L->errlen) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err + k, L->errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return false;
}

static const cJSON *jget(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

static bool jbool(loader *L, const cJSON *o, const char *where, const char *key, bool def,
                  bool *out) {
    const cJSON *v = jget(o, key);
    *out = def;
    if (!v) return true;
    if (!cJSON_IsBool(v)) return fail(L, "%s.%s must be true or false", where, key);
    return *out = cJSON_IsTrue(v), true;
}

static const char *jtype(const cJSON *o) {
    const cJSON *t = jget(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

static uint32_t arena_put(mt_tokenizer *tok, const void *p, size_t n) {
    if (tok->arena_used + (int64_t)n + 1 > tok->arena_cap) {
        int64_t cap = tok->arena_cap ? tok->arena_cap : 1 << 16;
        while (cap < tok->arena_used + (int64_t)n + 1) cap *= 2;
        MT_CHECK(cap < (int64_t)UINT32_MAX, "tokenizer: vocabulary strings exceed 4 GiB");
        uint8_t *a = realloc(tok->arena, (size_t)cap);
        MT_CHECK(a, "tokenizer: out of memory for the vocabulary");
        tok->arena = a;
        tok->arena_cap = cap;
    }
    uint32_t off = (uint32_t)tok->arena_used;
    memcpy(tok->arena + off, p, n);
    tok->arena[off + n] = 0;
    tok->arena_used += (int64_t)n + 1;
    return off;
}

// ---- model ----

static bool load_model(loader *L, mt_tokenizer *tok, const cJSON *model, cJSON **vocab_out) {
    if (!model) return fail(L, "no \"model\"");
    const char *type = jtype(model);
    if (!type) return fail(L, "model has no \"type\"");
    if (strcmp(type, "BPE") != 0)
        return fail(L, "model type '%s' is not supported (only byte-level BPE)", type);
    const cJSON *dropout = jget(model, "dropout");
    if (dropout && (!cJSON_IsNumber(dropout) || dropout->valuedouble != 0.0))
        return fail(L, "BPE dropout is not supported (it is random)");
    const char *keys[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = jget(model, keys[i]);
        if (v && (!cJSON_IsString(v) || v->valuestring[0]))
            return fail(L, "BPE %s is not supported", keys[i]);
    }
    bool byte_fallback = false;
    if (!jbool(L, model, "model", "byte_fallback", false, &byte_fallback) ||
        !jbool(L, model, "model", "fuse_unk", false, &tok->fuse_unk) ||
        !jbool(L, model, "model", "ignore_merges", false, &tok->ignore_merges))
        return false;
    if (byte_fallback) return fail(L, "BPE byte_fallback=true is not supported");

    cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) return fail(L, "model.vocab must be an object");
    *vocab_out = vocab;
    int64_t nv = cJSON_GetArraySize(vocab);
    tok_strmap_init(&tok->vocab, (const uint8_t **)&tok->arena, nv);
    tok_strmap_init(&tok->vocab_raw, (const uint8_t **)&tok->arena, nv);
    // Ids index tables of max id + 1 entries (and in training the embedding's rows): an id far
    // above any real vocabulary is a damaged file, not a reason to allocate gigabytes.
    const int32_t max_id = (1 << 24) - 1;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > max_id ||
            e->valuedouble != (double)(int32_t)e->valuedouble)
            return fail(L, "model.vocab['%s'] must be an integer id in [0, %d]", e->string, max_id);
        int32_t id = (int32_t)e->valuedouble;
        size_t len = strlen(e->string);
        tok_strmap_put(&tok->vocab, arena_put(tok, e->string, len), (uint32_t)len, id);
        if (id >= tok->n_ids) tok->n_ids = id + 1;
    }
    const cJSON *unk = jget(model, "unk_token");
    tok->unk_id = -1;
    if (unk) {
        if (!cJSON_IsString(unk)) return fail(L, "model.unk_token must be a string");
        tok->unk_id = tok_strmap_get(&tok->vocab, (const uint8_t *)unk->valuestring,
                                     strlen(unk->valuestring));
        if (tok->unk_id < 0) return fail(L, "unk_token '%s' is not in the vocab", unk->valuestring);
    }

    const cJSON *merges = jget(model, "merges");
    if (!cJSON_IsArray(merges)) return fail(L, "model.merges must be an array");
    tok_mergemap_init(&tok->merges, cJSON_GetArraySize(merges));
    uint32_t rank = 0;
    uint8_t *cat = NULL;
    size_t cat_cap = 0;
    for (const cJSON *m = merges->child; m; m = m->next) {
        const char *a, *b;
        size_t la, lb;
        if (cJSON_IsString(m)) { // legacy "a b"
            const char *s = m->valuestring;
            if (strncmp(s, "#version", 8) == 0) continue;
            const char *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                free(cat);
                return fail(L, "merge #%u '%s' is not two tokens separated by one space", rank + 1,
                            s);
            }
            a = s, la = (size_t)(sp - s), b = sp + 1, lb = strlen(b);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            a = m->child->valuestring, la = strlen(a);
            b = m->child->next->valuestring, lb = strlen(b);
        } else {
            free(cat);
            return fail(L, "merge #%u must be \"a b\" or [\"a\", \"b\"]", rank + 1);
        }
        if (la + lb + 1 > cat_cap) {
            cat_cap = 2 * (la + lb + 1);
            free(cat);
            cat = mt_malloc(cat_cap, "tokenizer merge");
        }
        memcpy(cat, a, la);
        memcpy(cat + la, b, lb);
        int32_t ia = tok_strmap_get(&tok->vocab, (const uint8_t *)a, la);
        int32_t ib = tok_strmap_get(&tok->vocab, (const uint8_t *)b, lb);
        int32_t ic = tok_strmap_get(&tok->vocab, cat, la + lb);
        if (ia < 0 || ib < 0 || ic < 0) {
            const char *miss = ia < 0 ? a : ib < 0 ? b : "(their concatenation)";
            free(cat);
            return fail(L, "merge #%u: token '%s' is not in the vocab", rank + 1, miss);
        }
        tok_mergemap_put(&tok->merges, ia, ib, rank++, ic);
    }
    free(cat);
    return true;
}

// Raw-byte forms of the vocab, byte ids, trim counts (after added tokens fixed n_ids).
static bool index_vocab(loader *L, mt_tokenizer *tok, const cJSON *vocab) {
    uint32_t byte_cp[256];
    int16_t cp_byte[324];
    byte_level_map(byte_cp, cp_byte);
    uint8_t *raw = mt_malloc(4096, "tokenizer scratch");
    size_t raw_cap = 4096;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int32_t id = (int32_t)e->valuedouble;
        const uint8_t *s = (const uint8_t *)e->string;
        size_t len = strlen(e->string), n = 0;
        if (len > raw_cap) raw_cap = len, raw = realloc(raw, raw_cap);
        MT_CHECK(raw, "tokenizer: out of memory");
        if (!mt_utf8_valid((const char *)s, len, NULL)) {
            free(raw);
            return fail(L, "vocab token for id %d is not valid UTF-8", id);
        }
        bool ok = true;
        int lead = 0, trail = 0;
        bool in_lead = true;
        for (size_t i = 0; ok && i < len;) {
            int cl;
            uint32_t cp = tok_utf8_decode(s + i, &cl);
            i += (size_t)cl;
            bool sp = cp == 0x120 || tok_is_whitespace(cp);
            if (in_lead && sp)
                lead++;
            else
                in_lead = false;
            trail = sp ? trail + 1 : 0;
            if (cp >= 324 || cp_byte[cp] < 0)
                ok = false;
            else
                raw[n++] = (uint8_t)cp_byte[cp];
        }
        // BPE tokens carry the model's string for their id (trim_offsets looks at it);
        // id_to_token prefers an added token's content, as HF's decoder lookup does.
        tok->id_lead_sp[id] = (uint8_t)(lead > 255 ? 255 : lead);
        tok->id_trail_sp[id] = (uint8_t)(trail > 255 ? 255 : trail);
        if (tok->id_added[id] < 0) {
            tok->id_str_off[id] = arena_put(tok, s, len);
            tok->id_str_len[id] = (uint32_t)len;
        }
        if (ok) tok_strmap_put(&tok->vocab_raw, arena_put(tok, raw, n), (uint32_t)n, id);
    }
    free(raw);
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        int n = tok_utf8_encode(u, byte_cp[b]);
        tok->byte_id[b] = tok_strmap_get(&tok->vocab, u, (size_t)n);
        if (tok->byte_id[b] < 0 && tok->unk_id < 0)
            return fail(L,
                        "the vocab has no token for byte 0x%02X and there is no unk_token (HF "
                        "would drop the byte and shift later offsets; not supported)",
                        b);
    }
    return true;
}

// ---- added tokens ----

static int added_cmp_len_desc(const void *x, const void *y, void *ctx) {
    const tok_added *a = &((const mt_tokenizer *)ctx)->added[*(const int32_t *)x];
    const tok_added *b = &((const mt_tokenizer *)ctx)->added[*(const int32_t *)y];
    uint8_t fa = (uint8_t)a->content[0], fb = (uint8_t)b->content[0];
    if (fa != fb) return fa < fb ? -1 : 1;
    return a->len != b->len ? (a->len > b->len ? -1 : 1) : 0;
}

static void build_added_set(mt_tokenizer *tok, tok_added_set *set, bool normalized) {
    set->order = mt_malloc((size_t)(tok->n_added + 1) * sizeof(int32_t), "tokenizer added set");
    set->n = 0;
    for (int32_t i = 0; i < tok->n_added; i++)
        if (tok->added[i].normalized == normalized && tok->added[i].id >= 0)
            set->order[set->n++] = i;
    qsort_r(set->order, (size_t)set->n, sizeof(int32_t), added_cmp_len_desc, tok);
    memset(set->fb_off, 0, sizeof(set->fb_off));
    memset(set->first_byte, 0, sizeof(set->first_byte));
    for (int32_t j = 0; j < set->n; j++) {
        uint8_t f = (uint8_t)tok->added[set->order[j]].content[0];
        set->first_byte[f] = true;
        set->fb_off[f + 1]++;
    }
    for (int b = 0; b < 256; b++) set->fb_off[b + 1] += set->fb_off[b];
}

static bool load_added(loader *L, mt_tokenizer *tok, const cJSON *arr, int64_t model_vocab_size) {
    if (!arr) return true;
    if (!cJSON_IsArray(arr)) return fail(L, "added_tokens must be an array");
    int32_t n = cJSON_GetArraySize(arr);
    tok->added = mt_calloc((size_t)n + 1, sizeof(tok_added), "tokenizer added tokens");
    tok_strmap_init(&tok->added_map, (const uint8_t **)&tok->arena, n);
    // HF ignores the JSON ids: an added token takes its vocab id when its content is in the
    // vocab, else the next id after the vocab (added_vocabulary.rs add_tokens).
    int64_t next_id = model_vocab_size;
    int32_t k = 0;
    for (const cJSON *t = arr->child; t; t = t->next, k++) {
        const cJSON *content = jget(t, "content");
        if (!cJSON_IsString(content))
            return fail(L, "added_tokens[%d].content must be a string", k);
        const char *s = content->valuestring;
        size_t len = strlen(s);
        tok_added a = {0};
        bool single_word = false;
        char where[64];
        snprintf(where, sizeof(where), "added_tokens[%d]", k);
        if (!jbool(L, t, where, "single_word", false, &single_word) ||
            !jbool(L, t, where, "lstrip", false, &a.lstrip) ||
            !jbool(L, t, where, "rstrip", false, &a.rstrip) ||
            !jbool(L, t, where, "normalized", false, &a.normalized) ||
            !jbool(L, t, where, "special", false, &a.special))
            return false;
        if (single_word) return fail(L, "added token '%s': single_word=true is not supported", s);
        if (!mt_utf8_valid(s, len, NULL)) return fail(L, "added token %d is not valid UTF-8", k);
        if (len == 0) continue; // HF ignores empty added tokens
        int32_t id = tok_strmap_get(&tok->added_map, (const uint8_t *)s, len);
        if (id < 0) id = tok_strmap_get(&tok->vocab, (const uint8_t *)s, len);
        if (id < 0) {
            MT_CHECK(next_id < INT32_MAX, "tokenizer: too many added tokens");
            id = (int32_t)next_id++;
        }
        uint32_t off = arena_put(tok, s, len);
        tok_strmap_put(&tok->added_map, off, (uint32_t)len, id);
        a.content = (char *)(uintptr_t)off; // resolved to a pointer once the arena is final
        a.len = (int32_t)len;
        a.id = id;
        // A repeated content (or id) replaces the earlier entry, like HF's maps.
        for (int32_t j = 0; j < tok->n_added; j++)
            if (tok->added[j].id == id) tok->added[j].id = -1;
        tok->added[tok->n_added++] = a;
        if (id >= tok->n_ids) tok->n_ids = id + 1;
    }
    return true;
}

// ---- pre-tokenizer, post-processor, decoder ----

static bool add_steps(loader *L, mt_tokenizer *tok, const cJSON *pt, int depth) {
    const char *type = jtype(pt);
    if (!type) return fail(L, "pre_tokenizer has no \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = jget(pt, "pretokenizers");
        if (!cJSON_IsArray(list)) return fail(L, "pre_tokenizer Sequence needs \"pretokenizers\"");
        for (const cJSON *c = list->child; c; c = c->next)
            if (!add_steps(L, tok, c, depth + 1)) return false;
        return true;
    }
    tok->steps = realloc(tok->steps, (size_t)(tok->n_steps + 1) * sizeof(tok_step));
    MT_CHECK(tok->steps, "tokenizer: out of memory");
    tok_step *st = &tok->steps[tok->n_steps++]; // counted now so a failure frees its regex
    memset(st, 0, sizeof(*st));
    char err[512];
    if (strcmp(type, "ByteLevel") == 0) {
        bool use_regex = true, trim = true;
        if (!jbool(L, pt, "ByteLevel", "add_prefix_space", true, &st->add_prefix_space) ||
            !jbool(L, pt, "ByteLevel", "use_regex", true, &use_regex) ||
            !jbool(L, pt, "ByteLevel", "trim_offsets", true, &trim))
            return false;
        st->kind = TOK_STEP_BYTELEVEL;
        st->behavior = TOK_ISOLATED;
        st->pattern = strdup(GPT2_PATTERN);
        if (use_regex) {
            if (!tok_step_compile(st, GPT2_PATTERN, false, err, sizeof(err)))
                return fail(L, "ByteLevel regex: %s", err);
        }
    } else if (strcmp(type, "Split") == 0) {
        st->kind = TOK_STEP_SPLIT;
        const cJSON *pat = jget(pt, "pattern");
        const cJSON *rx = pat ? jget(pat, "Regex") : NULL;
        const cJSON *lit = pat ? jget(pat, "String") : NULL;
        if (!cJSON_IsString(rx) && !cJSON_IsString(lit))
            return fail(L, "Split pattern must be {\"Regex\": ...} or {\"String\": ...}");
        const char *src = rx ? rx->valuestring : lit->valuestring;
        st->pattern = strdup(src);
        if (!tok_step_compile(st, src, lit != NULL, err, sizeof(err)))
            return fail(L, "Split pattern '%s': %s", src, err);
        const cJSON *beh = jget(pt, "behavior");
        const char *names[5] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                "Contiguous"};
        st->behavior = -1;
        for (int i = 0; i < 5; i++)
            if (cJSON_IsString(beh) && strcmp(beh->valuestring, names[i]) == 0) st->behavior = i;
        if (st->behavior < 0)
            return fail(L, "Split behavior '%s' is unknown",
                        cJSON_IsString(beh) ? beh->valuestring : "(missing)");
        if (!jbool(L, pt, "Split", "invert", false, &st->invert)) return false;
    } else {
        return fail(
            L, "pre_tokenizer '%s' is not supported (supported: ByteLevel, Split, Sequence)", type);
    }
    return true;
}

static bool load_post(loader *L, mt_tokenizer *tok, const cJSON *pp, int *n_trim) {
    if (!pp) return true;
    const char *type = jtype(pp);
    if (!type) return fail(L, "post_processor has no \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = jget(pp, "processors");
        if (!cJSON_IsArray(list)) return fail(L, "post_processor Sequence needs \"processors\"");
        for (const cJSON *c = list->child; c; c = c->next)
            if (!load_post(L, tok, c, n_trim)) return false;
        return true;
    }
    if (strcmp(type, "ByteLevel") == 0 || strcmp(type, "RobertaProcessing") == 0) {
        // Roberta also trims offsets even without special tokens; it adds <s>/</s> only with
        // add_special_tokens, which this encoder never does.
        bool trim = true, aps = true;
        if (!jbool(L, pp, type, "trim_offsets", true, &trim) ||
            !jbool(L, pp, type, "add_prefix_space", true, &aps))
            return false;
        if (trim && ++*n_trim > 1) return fail(L, "two post-processors that trim offsets");
        if (trim) tok->pp_trim = true, tok->pp_add_prefix_space = aps;
        return true;
    }
    // TemplateProcessing only inserts its special tokens when add_special_tokens=True; encode
    // has add_special_tokens=False semantics, where HF leaves the encoding unchanged.
    if (strcmp(type, "TemplateProcessing") == 0) return true;
    return fail(L, "post_processor '%s' is not supported", type);
}

static bool load_components(loader *L, mt_tokenizer *tok, const cJSON *root) {
    const cJSON *ver = jget(root, "version");
    if (ver && (!cJSON_IsString(ver) || strcmp(ver->valuestring, "1.0") != 0))
        return fail(L, "tokenizer version must be \"1.0\"");
    if (jget(root, "truncation"))
        return fail(L, "truncation is set; not supported (set it to null)");
    if (jget(root, "padding")) return fail(L, "padding is set; not supported (set it to null)");
    const cJSON *norm = jget(root, "normalizer");
    if (norm) {
        const char *type = jtype(norm);
        const cJSON *list = jget(norm, "normalizers");
        bool empty_seq = type && strcmp(type, "Sequence") == 0 && cJSON_IsArray(list) &&
                         cJSON_GetArraySize(list) == 0;
        if (!empty_seq) {
            const char *name = type ? type : "(no type)";
            if (type && strcmp(type, "Sequence") == 0 && cJSON_IsArray(list))
                name = jtype(list->child) ? jtype(list->child) : name;
            return fail(L, "normalizer '%s' is not supported", name);
        }
    }
    cJSON *vocab = NULL;
    if (!load_model(L, tok, jget(root, "model"), &vocab)) return false;
    int64_t model_vocab_size = tok->vocab.n;
    if (!load_added(L, tok, jget(root, "added_tokens"), model_vocab_size)) return false;

    tok->id_str_off = mt_malloc((size_t)tok->n_ids * sizeof(uint32_t), "tokenizer ids");
    tok->id_str_len = mt_calloc((size_t)tok->n_ids, sizeof(uint32_t), "tokenizer ids");
    tok->id_added = mt_malloc((size_t)tok->n_ids * sizeof(int32_t), "tokenizer ids");
    tok->id_lead_sp = mt_calloc((size_t)tok->n_ids, 1, "tokenizer ids");
    tok->id_trail_sp = mt_calloc((size_t)tok->n_ids, 1, "tokenizer ids");
    for (int32_t i = 0; i < tok->n_ids; i++) tok->id_str_off[i] = UINT32_MAX, tok->id_added[i] = -1;
    for (int32_t j = 0; j < tok->n_added; j++) {
        tok_added *a = &tok->added[j];
        if (a->id < 0) continue;
        tok->id_added[a->id] = j;
        tok->id_str_off[a->id] = (uint32_t)(uintptr_t)a->content;
        tok->id_str_len[a->id] = (uint32_t)a->len;
    }
    if (!index_vocab(L, tok, vocab)) return false;

    const cJSON *pt = jget(root, "pre_tokenizer");
    if (!pt)
        return fail(L,
                    "no pre_tokenizer: only byte-level BPE (ByteLevel pre-tokenizer) is supported");
    if (!add_steps(L, tok, pt, 0)) return false;
    int32_t n_bl = 0;
    for (int32_t i = 0; i < tok->n_steps; i++) n_bl += tok->steps[i].kind == TOK_STEP_BYTELEVEL;
    if (n_bl != 1 || tok->steps[tok->n_steps - 1].kind != TOK_STEP_BYTELEVEL)
        return fail(L, "pre_tokenizer must contain exactly one ByteLevel, as its last step "
                       "(a Split after ByteLevel would see byte-level characters)");
    int n_trim = 0;
    if (!load_post(L, tok, jget(root, "post_processor"), &n_trim)) return false;
    const cJSON *dec = jget(root, "decoder");
    if (dec) {
        const char *type = jtype(dec);
        if (!type || strcmp(type, "ByteLevel") != 0)
            return fail(L, "decoder '%s' is not supported (only ByteLevel)",
                        type ? type : "(no type)");
        tok->dec_bytelevel = true;
    }
    return true;
}

mt_tokenizer *mt_tokenizer_load_json(const char *json, size_t len, const char *name, char *err,
                                     size_t errlen) {
    loader L = {.name = name, .err = err, .errlen = errlen};
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        int64_t line = 1, off = at && at >= json && at <= json + len ? at - json : -1;
        for (int64_t i = 0; i < off; i++) line += json[i] == '\n';
        fail(&L, "malformed JSON near byte %lld (line %lld)", (long long)off, (long long)line);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        fail(&L, "top level is not a JSON object");
        return NULL;
    }
    // HF takes the last of a repeated key, cJSON's lookups the first: refused. The vocabulary
    // is not looked into: its last entry wins here too (tok_strmap_put), and it is the big one.
    char dup[256];
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (mt_json_duplicate_key(root, cJSON_GetObjectItemCaseSensitive(model, "vocab"), dup,
                              sizeof(dup))) {
        cJSON_Delete(root);
        fail(&L, "key \"%s\" appears twice", dup);
        return NULL;
    }
    mt_tokenizer *tok = mt_calloc(1, sizeof(mt_tokenizer), "tokenizer");
    tok->path = strdup(name);
    bool ok = load_components(&L, tok, root);
    cJSON_Delete(root);
    if (!ok) {
        mt_tokenizer_free(tok);
        return NULL;
    }
    for (int32_t j = 0; j < tok->n_added; j++) // arena is final: offsets become pointers
        tok->added[j].content = (char *)tok->arena + (uintptr_t)tok->added[j].content;
    build_added_set(tok, &tok->set_raw, false);
    build_added_set(tok, &tok->set_norm, true);
    tok->cache = tok_cache_new();
    tok->work = mt_calloc(1, sizeof(tok_work), "tokenizer scratch");
    return tok;
}

mt_tokenizer *mt_tokenizer_try_load(const char *path, char *err, size_t errlen) {
    size_t size;
    char *buf = mt_file_read_max(path, &size, 0, err, errlen);
    if (!buf) return NULL;
    mt_tokenizer *tok = mt_tokenizer_load_json(buf, size, path, err, errlen);
    free(buf);
    return tok;
}

mt_tokenizer *mt_tokenizer_load(const char *tokenizer_json_path) {
    char err[1024];
    mt_tokenizer *tok = mt_tokenizer_try_load(tokenizer_json_path, err, sizeof(err));
    if (!tok) MT_DIE("tokenizer: %s", err);
    return tok;
}

void mt_tokenizer_free(mt_tokenizer *tok) {
    if (!tok) return;
    free(tok->path);
    free(tok->arena);
    free(tok->id_str_off);
    free(tok->id_str_len);
    free(tok->id_lead_sp);
    free(tok->id_trail_sp);
    free(tok->id_added);
    tok_strmap_free(&tok->vocab);
    tok_strmap_free(&tok->vocab_raw);
    tok_strmap_free(&tok->added_map);
    tok_mergemap_free(&tok->merges);
    free(tok->added);
    free(tok->set_raw.order);
    free(tok->set_norm.order);
    for (int32_t i = 0; i < tok->n_steps; i++) {
        if (tok->steps[i].re) pcre2_code_free(tok->steps[i].re);
        if (tok->steps[i].re_base) pcre2_code_free(tok->steps[i].re_base);
        free(tok->steps[i].pattern);
    }
    free(tok->steps);
    tok_cache_free(tok->cache);
    if (tok->work) tok_work_free(tok->work);
    free(tok->work);
    free(tok);
}

void mt_token_buf_free(mt_token_buf *b) {
    free(b->ids);
    free(b->offsets);
    memset(b, 0, sizeof(*b));
}

void mt_token_buf_clear(mt_token_buf *b) { b->n = 0; }

// ---- id <-> token ----

int32_t mt_tokenizer_token_to_id(const mt_tokenizer *tok, const char *token) {
    size_t len = strlen(token);
    int32_t id = tok_strmap_get(&tok->added_map, (const uint8_t *)token, len);
    return id >= 0 ? id : tok_strmap_get(&tok->vocab, (const uint8_t *)token, len);
}

const char *mt_tokenizer_id_to_token(const mt_tokenizer *tok, int32_t id) {
    if (id < 0 || id >= tok->n_ids || tok->id_str_off[id] == UINT32_MAX) return NULL;
    return (const char *)tok->arena + tok->id_str_off[id];
}

int32_t mt_tokenizer_vocab_size(const mt_tokenizer *tok) { return tok->n_ids; }

bool mt_tokenizer_is_special(const mt_tokenizer *tok, int32_t id) {
    return id >= 0 && id < tok->n_ids && tok->id_added[id] >= 0 &&
           tok->added[tok->id_added[id]].special;
}

int32_t mt_tokenizer_n_added(const mt_tokenizer *tok) { return tok->n_added; }

const char *mt_tokenizer_added(const mt_tokenizer *tok, int32_t i, size_t *len, int32_t *id,
                               bool *special) {
    if (i < 0 || i >= tok->n_added) return NULL;
    *len = (size_t)tok->added[i].len;
    if (id) *id = tok->added[i].id;
    if (special) *special = tok->added[i].special;
    return tok->added[i].content;
}

// ---- decode ----

char *mt_tokenizer_decode(const mt_tokenizer *tok, const int32_t *ids, int64_t n,
                          bool skip_special) {
    uint32_t byte_cp[256];
    int16_t cp_byte[324];
    byte_level_map(byte_cp, cp_byte);
    size_t cap = 64, len = 0;
    uint8_t *raw = mt_malloc(cap, "decoded text");
    bool first = true;
    for (int64_t i = 0; i < n; i++) {
        const char *s = mt_tokenizer_id_to_token(tok, ids[i]);
        if (!s || (skip_special && mt_tokenizer_is_special(tok, ids[i]))) continue;
        size_t sl = tok->id_str_len[ids[i]];
        if (len + sl + 2 > cap) {
            while (len + sl + 2 > cap) cap *= 2;
            raw = realloc(raw, cap);
            MT_CHECK(raw, "tokenizer: out of memory decoding");
        }
        if (!tok->dec_bytelevel) { // no decoder: HF joins the tokens with spaces
            if (!first) raw[len++] = ' ';
            memcpy(raw + len, s, sl);
            len += sl;
            first = false;
            continue;
        }
        // ByteLevel: a token made only of byte-level chars becomes its bytes, any other token
        // (e.g. an added token with a space) is copied as UTF-8.
        size_t start = len;
        bool all = true;
        for (size_t p = 0; p < sl;) {
            int cl;
            uint32_t cp = tok_utf8_decode((const uint8_t *)s + p, &cl);
            p += (size_t)cl;
            if (cp >= 324 || cp_byte[cp] < 0) {
                all = false;
                break;
            }
            raw[len++] = (uint8_t)cp_byte[cp];
        }
        if (!all) {
            len = start;
            memcpy(raw + len, s, sl);
            len += sl;
        }
    }
    // from_utf8_lossy: each maximal invalid subsequence becomes U+FFFD.
    uint8_t *out = mt_malloc(len * 3 + 1, "decoded text");
    size_t o = 0;
    for (size_t p = 0; p < len;) {
        int bad, k = mt_utf8_seq(raw + p, len - p, &bad);
        if (k) {
            memcpy(out + o, raw + p, (size_t)k);
            o += (size_t)k, p += (size_t)k;
        } else {
            out[o++] = 0xEF, out[o++] = 0xBF, out[o++] = 0xBD;
            p += (size_t)bad;
        }
    }
    out[o] = 0;
    free(raw);
    return (char *)out;
}
