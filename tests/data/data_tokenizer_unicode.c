// data_tokenizer_unicode.c: the pre-tokenizer's character classes on every code point.
// - data_tokenizer_unicode: the pre-tokenizers' pieces against HF `tokenizers` 0.23.3
//   (Unicode 16), whose digest tools/make_unicode_digest.py wrote to
//   tests/fixtures/tokenizer/unicode_digest.txt (the context, the blocks and why pieces rather
//   than ids are described there). PCRE2 10.42 classifies by Unicode 14: without
//   data/tokenizer_unicode.c the letters and numbers new in Unicode 15-16 (CJK extensions H
//   and I, ...) split differently after a space. MT_UNICODE_DUMP=FILE also writes every code
//   point's pieces, each context alone, for `tools/make_unicode_digest.py --diff FILE`, which
//   lists the code points that differ.
// - data_tokenizer_unicode_classes: the translated classes, both ways of writing them (PCRE2's
//   items plus what joined, and every range listed), match exactly the categories of the
//   tables (unicodedata2 16.0.0) on every code point.
#include "tests/support/harness.h"

#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "data/tokenizer.h"
#include "data/tokenizer_internal.h"

#define BLOCK 4096

// "a " X "b " X "1\n" (make_unicode_digest.py context()); returns its length.
static size_t put_context(uint32_t cp, char *o) {
    size_t n = 0;
    o[n++] = 'a', o[n++] = ' ';
    n += (size_t)tok_utf8_encode((uint8_t *)o + n, cp);
    o[n++] = 'b', o[n++] = ' ';
    n += (size_t)tok_utf8_encode((uint8_t *)o + n, cp);
    o[n++] = '1', o[n++] = '\n';
    return n;
}

static bool is_surrogate(uint32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

static uint64_t fnv_u32(const int32_t *v, int64_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int64_t i = 0; i < n; i++) h = (h ^ (uint32_t)v[i]) * 0x100000001B3ull;
    return h;
}

static mt_tokenizer *load_fixture(const char *file) {
    const char *src = getenv("MT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer/%s", src ? src : ".", file);
    return mt_tokenizer_load(path);
}

// The pieces' byte lengths, as make_unicode_digest.py piece_lengths().
typedef struct {
    int32_t *lens;
    int64_t n, cap;
} piece_list;

static void on_piece(void *arg, int64_t start, int64_t end, bool prefix) {
    piece_list *l = arg;
    (void)prefix; // the test tokenizers have no add_prefix_space
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1 << 16;
        l->lens = realloc(l->lens, sizeof(int32_t) * (size_t)l->cap);
        MT_CHECK(l->lens, "out of memory");
    }
    l->lens[l->n++] = (int32_t)(end - start);
}

static void pieces(const mt_tokenizer *tok, const char *text, size_t len, piece_list *l) {
    char err[512];
    l->n = 0;
    MT_CHECK(tok_pretokenize(tok, text, len, on_piece, l, err, sizeof(err)) == 0, "%s", err);
}

static void dump_all(const char *path, mt_tokenizer *const tok[2]) {
    FILE *f = fopen(path, "w");
    MT_CHECK(f, "cannot write %s", path);
    char ctx[16];
    piece_list l = {0};
    for (uint32_t cp = 1; cp <= 0x10FFFF; cp++) {
        if (is_surrogate(cp)) continue;
        size_t n = put_context(cp, ctx);
        fprintf(f, "%x", cp);
        for (int t = 0; t < 2; t++) {
            pieces(tok[t], ctx, n, &l);
            for (int64_t i = 0; i < l.n; i++) fprintf(f, "%s%d", i ? "," : " ", l.lens[i]);
        }
        fprintf(f, "\n");
    }
    free(l.lens);
    MT_CHECK(fclose(f) == 0, "cannot write %s", path);
    printf("wrote %s: run tools/make_unicode_digest.py --diff %s\n", path, path);
}

// Every block's piece counts and hashes for A and B equal the digest's.
static int test_unicode(void) {
    const char *src = getenv("MT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer/unicode_digest.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    EXPECT(f, "cannot read %s", path);
    if (!f) return MT_TEST_OK;
    mt_tokenizer *tok[2] = {load_fixture("tokenizer.json"), load_fixture("tokenizer_split.json")};
    char *text = mt_malloc(BLOCK * 16, "block text");
    piece_list l = {0};
    int blocks = 0, bad = 0;
    unsigned start;
    long long want_n[2];
    unsigned long long want_h[2];
    while (fscanf(f, "%x %lld %llx %lld %llx", &start, &want_n[0], &want_h[0], &want_n[1],
                  &want_h[1]) == 5) {
        size_t len = 0;
        for (uint32_t cp = start > 0 ? start : 1; cp < start + BLOCK; cp++)
            if (!is_surrogate(cp)) len += put_context(cp, text + len);
        bool ok = true;
        for (int t = 0; t < 2; t++) {
            pieces(tok[t], text, len, &l);
            ok = ok && l.n == want_n[t] && fnv_u32(l.lens, l.n) == want_h[t];
        }
        if (!ok && bad++ < 20)
            printf("U+%04X..U+%04X: pieces differ from HF\n", start, start + BLOCK - 1);
        blocks++;
    }
    fclose(f);
    printf("%d blocks of %d code points (tables of Unicode %s): %d differ from HF\n", blocks, BLOCK,
           tok_ucd_version, bad);
    EXPECT(blocks == 0x110000 / BLOCK, "%s: %d blocks, want %d", path, blocks, 0x110000 / BLOCK);
    EXPECT(bad == 0, "%d blocks differ from HF (MT_UNICODE_DUMP=FILE lists the code points)", bad);
    const char *dump = getenv("MT_UNICODE_DUMP");
    if (dump && *dump) dump_all(dump, tok);
    free(l.lens);
    free(text);
    for (int t = 0; t < 2; t++) mt_tokenizer_free(tok[t]);
    return MT_TEST_OK;
}

// ---- data_tokenizer_unicode_classes ----

// The ranges [lo, hi] of code points whose category (tables) is in mask (or, with out, is
// not), surrogates skipped (a range goes on across them: the subject has none); returns count.
static int32_t expected_ranges(uint32_t mask, bool out, uint32_t (*r)[2]) {
    int32_t n = 0;
    bool open = false;
    for (int32_t k = 0; k < tok_ucd_n_gc_runs; k++) {
        if (tok_ucd_gc_runs[k].gc == TOK_GC_Cs) continue;
        uint32_t start = tok_ucd_gc_runs[k].start;
        uint32_t end = k + 1 < tok_ucd_n_gc_runs ? tok_ucd_gc_runs[k + 1].start - 1 : 0x10FFFF;
        bool in = ((mask >> tok_ucd_gc_runs[k].gc) & 1) != out;
        if (in && !open) r[n][0] = start > 0 ? start : 1, open = true;
        if (in) r[n][1] = end;
        if (!in && open) n++, open = false;
    }
    return n + open;
}

// Matches "[items]+" or "[^items]+" over subj (every code point in order): the matches must be
// exactly the expected ranges (the categories in mask, or not in it when one of the two
// negations is set). Returns the number of ranges that differ.
static int64_t scan_class(const uint8_t *subj, size_t n, uint32_t mask, bool items_negated,
                          bool bracket_negated, bool full) {
    mt_strbuf p = {0};
    tok_ucd_full_tables = full;
    mt_strbuf_append(&p, bracket_negated ? "[^" : "[", bracket_negated ? 2 : 1);
    tok_ucd_class_items(&p, mask, items_negated, false);
    mt_strbuf_append(&p, "]+", 2);
    tok_ucd_full_tables = false;
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)p.p, p.len, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    EXPECT(re, "mask %x: PCRE2 rejects the class at %zu", mask, (size_t)eo);
    mt_strbuf_free(&p);
    if (!re) return 1;
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    uint32_t(*want)[2] = mt_malloc(sizeof(*want) * (size_t)tok_ucd_n_gc_runs, "ranges");
    int32_t n_want = expected_ranges(mask, items_negated != bracket_negated, want), k = 0;
    int64_t bad = 0;
    size_t pos = 0;
    int rc;
    while ((rc = pcre2_match(re, subj, n, pos, PCRE2_NO_UTF_CHECK, md, NULL)) > 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t e = ov[1], last = e - 1;
        while ((subj[last] & 0xC0) == 0x80) last--;
        int len;
        uint32_t lo = tok_utf8_decode(subj + ov[0], &len), hi = tok_utf8_decode(subj + last, &len);
        bool ok = k < n_want && want[k][0] == lo && want[k][1] == hi;
        if (!ok && bad++ < 5)
            printf("mask %x%s%s%s: matched U+%04X..U+%04X, want U+%04X..U+%04X\n", mask,
                   items_negated ? " negated" : "", bracket_negated ? " [^]" : "",
                   full ? " full" : "", lo, hi, k < n_want ? want[k][0] : 0,
                   k < n_want ? want[k][1] : 0);
        k++, pos = e;
    }
    EXPECT(k == n_want, "mask %x: %d ranges matched, want %d", mask, k, n_want);
    free(want);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return bad;
}

static int test_classes(void) {
    // every code point U+0001..U+10FFFF but the surrogates, in order, as UTF-8
    uint8_t *subj = mt_malloc(4 * 0x110000, "all code points");
    size_t n = 0;
    for (uint32_t cp = 1; cp <= 0x10FFFF; cp++)
        if (!is_surrogate(cp)) n += (size_t)tok_utf8_encode(subj + n, cp);
    // PCRE2's items plus what joined, inside [] and [^] (the groups, some categories, \w)
    const char *names[] = {"L", "M", "N", "P", "S", "Z", "Nd", "Lu", "Ll", "Lo", "Mc", "So"};
    int64_t bad = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        uint32_t mask = tok_ucd_gc_mask(names[i], strlen(names[i]));
        EXPECT(mask, "%s is a category", names[i]);
        bad += scan_class(subj, n, mask, false, false, false);
        bad += scan_class(subj, n, mask, false, true, false);
    }
    bad += scan_class(subj, n, TOK_GC_MASK_WORD, false, false, false);
    // every range listed (slower for PCRE2, so fewer): the classes of the tokenizers' regexes,
    // a negation inside [] (\P{N}), and Mn, which lost U+1171E and so is always listed
    bad += scan_class(subj, n, tok_ucd_gc_mask("L", 1), false, false, true);
    bad += scan_class(subj, n, tok_ucd_gc_mask("N", 1), false, false, true);
    bad += scan_class(subj, n, tok_ucd_gc_mask("N", 1), true, false, true);
    bad += scan_class(subj, n, tok_ucd_gc_mask("Mn", 2), false, false, true);
    EXPECT(bad == 0, "%lld ranges classified unlike the tables", (long long)bad);
    EXPECT(tok_ucd_gc_mask("Letter", 6) == tok_ucd_gc_mask("l", 1) &&
               tok_ucd_gc_mask("Uppercase_Letter", 16) == tok_ucd_gc_mask("Lu", 2) &&
               tok_ucd_gc_mask("decimal number", 14) == TOK_GC_MASK_DIGIT &&
               tok_ucd_gc_mask("Han", 3) == 0,
           "Oniguruma's category names");
    free(subj);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_tokenizer_unicode", test_unicode},
    {"data_tokenizer_unicode_classes", test_classes},
};
MT_TEST_MAIN(cases)
