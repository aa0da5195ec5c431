// tokenizer_unicode.c: General_Category classes by the Unicode version of HF `tokenizers`
// (tok_ucd_version, 16.0.0) for the Oniguruma -> PCRE2 translation in tokenizer_pretok.c.
// PCRE2 10.42 classifies by Unicode 14.0.0, so its \p{L} misses e.g. CJK extension H. Three
// ways to write a class, from the tables of tokenizer_unicode_data.c:
//  - base: PCRE2's own \p{..}: exact only on a text without a character whose category changed
//    since PCRE2's version (tok_ucd_text_unchanged: most texts), and the fastest; each step's
//    regex is compiled this way too (tok_step.re_base) and used for such texts;
//  - fast: PCRE2's items plus the ranges that joined the class since: exact on every text when
//    PCRE2 is at the tables' base version and no character left the class (slower: PCRE2 tries
//    the ranges one by one after the property);
//  - full: every range of the class listed (slow on non-ASCII text): for negations inside
//    brackets, for classes that lost characters (Cn, C, Mn: U+1171E went from Mn to Mc), and
//    with a PCRE2 of another Unicode version.
#include <stdio.h>
#include <string.h>

#include "core/file_io.h"
#include "data/tokenizer_internal.h"

bool tok_ucd_full_tables = false;

#define GC_BIT(g) (1u << TOK_GC_##g)
#define GC_L      (GC_BIT(Lu) | GC_BIT(Ll) | GC_BIT(Lt) | GC_BIT(Lm) | GC_BIT(Lo))
#define GC_M      (GC_BIT(Mn) | GC_BIT(Mc) | GC_BIT(Me))
#define GC_N      (GC_BIT(Nd) | GC_BIT(Nl) | GC_BIT(No))
#define GC_P                                                                                       \
    (GC_BIT(Pc) | GC_BIT(Pd) | GC_BIT(Ps) | GC_BIT(Pe) | GC_BIT(Pi) | GC_BIT(Pf) | GC_BIT(Po))
#define GC_S (GC_BIT(Sm) | GC_BIT(Sc) | GC_BIT(Sk) | GC_BIT(So))
#define GC_Z (GC_BIT(Zs) | GC_BIT(Zl) | GC_BIT(Zp))
#define GC_C (GC_BIT(Cc) | GC_BIT(Cf) | GC_BIT(Cs) | GC_BIT(Co) | GC_BIT(Cn))

static const char *const gc_short[TOK_GC_COUNT] = {
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
    "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};

// Oniguruma's names for the categories (its property names ignore case, ' ', '-' and '_').
static const struct {
    const char *name;
    uint32_t mask;
} gc_names[] = {
    {"l", GC_L},
    {"letter", GC_L},
    {"lc", GC_BIT(Lu) | GC_BIT(Ll) | GC_BIT(Lt)},
    {"casedletter", GC_BIT(Lu) | GC_BIT(Ll) | GC_BIT(Lt)},
    {"uppercaseletter", GC_BIT(Lu)},
    {"lowercaseletter", GC_BIT(Ll)},
    {"titlecaseletter", GC_BIT(Lt)},
    {"modifierletter", GC_BIT(Lm)},
    {"otherletter", GC_BIT(Lo)},
    {"m", GC_M},
    {"mark", GC_M},
    {"combiningmark", GC_M},
    {"nonspacingmark", GC_BIT(Mn)},
    {"spacingmark", GC_BIT(Mc)},
    {"enclosingmark", GC_BIT(Me)},
    {"n", GC_N},
    {"number", GC_N},
    {"decimalnumber", GC_BIT(Nd)},
    {"letternumber", GC_BIT(Nl)},
    {"othernumber", GC_BIT(No)},
    {"p", GC_P},
    {"punctuation", GC_P},
    {"connectorpunctuation", GC_BIT(Pc)},
    {"dashpunctuation", GC_BIT(Pd)},
    {"openpunctuation", GC_BIT(Ps)},
    {"closepunctuation", GC_BIT(Pe)},
    {"initialpunctuation", GC_BIT(Pi)},
    {"finalpunctuation", GC_BIT(Pf)},
    {"otherpunctuation", GC_BIT(Po)},
    {"s", GC_S},
    {"symbol", GC_S},
    {"mathsymbol", GC_BIT(Sm)},
    {"currencysymbol", GC_BIT(Sc)},
    {"modifiersymbol", GC_BIT(Sk)},
    {"othersymbol", GC_BIT(So)},
    {"z", GC_Z},
    {"separator", GC_Z},
    {"spaceseparator", GC_BIT(Zs)},
    {"lineseparator", GC_BIT(Zl)},
    {"paragraphseparator", GC_BIT(Zp)},
    {"c", GC_C},
    {"other", GC_C},
    {"control", GC_BIT(Cc)},
    {"format", GC_BIT(Cf)},
    {"surrogate", GC_BIT(Cs)},
    {"privateuse", GC_BIT(Co)},
    {"unassigned", GC_BIT(Cn)},
};

uint32_t tok_ucd_gc_mask(const char *name, size_t n) {
    char key[32];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (c == ' ' || c == '-' || c == '_') continue;
        if (k + 1 >= sizeof(key)) return 0;
        key[k++] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    key[k] = 0;
    for (int g = 0; g < TOK_GC_COUNT; g++) {
        if (key[0] == (gc_short[g][0] | 0x20) && key[1] == gc_short[g][1] && !key[2])
            return 1u << g;
    }
    for (size_t i = 0; i < sizeof(gc_names) / sizeof(gc_names[0]); i++)
        if (strcmp(key, gc_names[i].name) == 0) return gc_names[i].mask;
    return 0;
}

// One range of the class; PCRE2 refuses surrogate code points in a UTF pattern, and UTF-8 text
// cannot hold them, so they are left out.
static void put_range(mt_strbuf *b, uint32_t lo, uint32_t hi) {
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800) put_range(b, lo, 0xD7FF);
        if (hi > 0xDFFF) put_range(b, 0xE000, hi);
        return;
    }
    char s[32];
    int n = lo == hi ? snprintf(s, sizeof(s), "\\x{%X}", lo)
                     : snprintf(s, sizeof(s), "\\x{%X}-\\x{%X}", lo, hi);
    mt_strbuf_append(b, s, (size_t)n);
}

bool tok_ucd_pcre2_is_base(void) {
    char v[64];
    return pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, v) > 0 &&
           strcmp(v, tok_ucd_base_version) == 0;
}

// changed_block[cp >> 8]: some character of that block of 256 changed category
static bool changed_block[0x1100];
static pthread_once_t changed_once = PTHREAD_ONCE_INIT;

static void changed_blocks_init(void) {
    for (int32_t k = 0; k < tok_ucd_n_gc_changes; k++)
        for (uint32_t b = tok_ucd_gc_changes[k].lo >> 8; b <= tok_ucd_gc_changes[k].hi >> 8; b++)
            changed_block[b] = true;
}

static bool changed(uint32_t cp) {
    int32_t lo = 0, hi = tok_ucd_n_gc_changes - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        if (cp < tok_ucd_gc_changes[mid].lo)
            hi = mid - 1;
        else if (cp > tok_ucd_gc_changes[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

bool tok_ucd_text_unchanged(const uint8_t *t, size_t n) {
    pthread_once(&changed_once, changed_blocks_init);
    for (size_t i = 0; i < n; i++) {
        if (t[i] < 0xC0) continue; // ASCII or a continuation byte
        int len;
        uint32_t cp = tok_utf8_decode(t + i, &len);
        if (changed_block[cp >> 8] && changed(cp)) return false;
        i += (size_t)len - 1;
    }
    return true;
}

static void items_full(mt_strbuf *b, uint32_t mask, bool negate) {
    int64_t lo = -1; // start of the pending range
    for (int32_t k = 0; k < tok_ucd_n_gc_runs; k++) {
        bool in = ((mask >> tok_ucd_gc_runs[k].gc) & 1) != negate;
        uint32_t start = tok_ucd_gc_runs[k].start;
        if (in && lo < 0) lo = start;
        if (!in && lo >= 0) put_range(b, (uint32_t)lo, start - 1), lo = -1;
    }
    if (lo >= 0) put_range(b, (uint32_t)lo, 0x10FFFF);
}

static const struct {
    const char *name;
    uint32_t mask;
} gc_groups[] = {{"L", GC_L}, {"M", GC_M}, {"N", GC_N}, {"P", GC_P},
                 {"S", GC_S}, {"Z", GC_Z}, {"C", GC_C}};

static void put_prop(mt_strbuf *b, char p, const char *name) {
    char s[16];
    int n = snprintf(s, sizeof(s), "\\%c{%s}", p, name);
    mt_strbuf_append(b, s, (size_t)n);
}

// PCRE2's property items for mask: a group where all of it is in mask, else its categories.
static void items_pcre2(mt_strbuf *b, uint32_t mask) {
    for (size_t i = 0; i < sizeof(gc_groups) / sizeof(gc_groups[0]); i++) {
        if ((mask & gc_groups[i].mask) == gc_groups[i].mask) {
            put_prop(b, 'p', gc_groups[i].name);
            continue;
        }
        for (int g = 0; g < TOK_GC_COUNT; g++)
            if ((gc_groups[i].mask & mask) >> g & 1) put_prop(b, 'p', gc_short[g]);
    }
}

// PCRE2's name for mask when it is one group or one category, else NULL.
static const char *pcre2_name(uint32_t mask) {
    for (size_t i = 0; i < sizeof(gc_groups) / sizeof(gc_groups[0]); i++)
        if (mask == gc_groups[i].mask) return gc_groups[i].name;
    for (int g = 0; g < TOK_GC_COUNT; g++)
        if (mask == 1u << g) return gc_short[g];
    return NULL;
}

// Some character left the class since the base version (PCRE2's item would keep it).
static bool class_lost(uint32_t mask) {
    for (int32_t k = 0; k < tok_ucd_n_gc_changes; k++) {
        const tok_gc_change *c = &tok_ucd_gc_changes[k];
        if (((mask >> c->old_gc) & 1) && !((mask >> c->new_gc) & 1)) return true;
    }
    return false;
}

void tok_ucd_class_items(mt_strbuf *b, uint32_t mask, bool negate, bool base) {
    if (base) { // PCRE2's own classes (exact on texts that tok_ucd_text_unchanged accepts)
        const char *name = negate ? pcre2_name(mask) : NULL;
        if (!negate)
            items_pcre2(b, mask);
        else if (name)
            put_prop(b, 'P', name);
        else
            items_full(b, mask, true);
        return;
    }
    if (negate || tok_ucd_full_tables || !tok_ucd_pcre2_is_base() || class_lost(mask)) {
        items_full(b, mask, negate);
        return;
    }
    items_pcre2(b, mask);
    int64_t lo = -1, hi = -1; // the characters that joined, adjacent ranges merged
    for (int32_t k = 0; k < tok_ucd_n_gc_changes; k++) {
        const tok_gc_change *c = &tok_ucd_gc_changes[k];
        if (!((mask >> c->new_gc) & 1) || ((mask >> c->old_gc) & 1)) continue;
        if (lo >= 0 && c->lo == hi + 1) {
            hi = c->hi;
            continue;
        }
        if (lo >= 0) put_range(b, (uint32_t)lo, (uint32_t)hi);
        lo = c->lo, hi = c->hi;
    }
    if (lo >= 0) put_range(b, (uint32_t)lo, (uint32_t)hi);
}

void tok_ucd_class(mt_strbuf *b, uint32_t mask, bool negate, bool in_class, bool base) {
    if (in_class) {
        tok_ucd_class_items(b, mask, negate, base);
        return;
    }
    const char *name = base ? pcre2_name(mask) : NULL;
    if (name) { // PCRE2 matches a lone property faster than a class holding it
        put_prop(b, negate ? 'P' : 'p', name);
        return;
    }
    mt_strbuf_append(b, negate ? "[^" : "[", negate ? 2 : 1);
    tok_ucd_class_items(b, mask, false, base); // the brackets negate: PCRE2's items stay
    mt_strbuf_append(b, "]", 1);
}
