/* jinja.c: the Jinja engine (jinja/) against jinja2 3.1.6 in transformers 5.24's chat template
 * environment, as tools/make_jinja_fixtures.py recorded it in tests/fixtures/jinja:
 * - jinja_cases: cases.json, the template language one construct at a time: the output byte for
 *   byte (and the {% generation %} spans), or, where jinja2 raises, a refusal in one line.
 *   Cases that use what the engine refuses by design (integers beyond 64 bits, call blocks,
 *   str.format, ...: UNSUPPORTED below) must be refused, never rendered differently.
 * - jinja_templates: templates.json, the released chat templates in ../shared/templates (their
 *   sha256 checked) on conversations: the output byte for byte, or a refusal where the template
 *   raises; skipped where ../shared is absent.
 * - jinja_limits: deep nesting, huge loops, outputs, recursion and memory refused in one line.
 * strftime_now is frozen at 2026-01-02 03:04:05 local time, as the fixtures were made (TZ=UTC
 * here). */
#include "tests/support/harness.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/file_io.h"
#include "jinja/jinja.h"

/* ---- SHA-256 (FIPS 180-4), to check that a shared template is the one the fixture names ---- */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) ((x) >> (n) | (x) << (32 - (n)))

static void sha256_block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64], s[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(s, h, sizeof(s));
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = s[7] + (ROR(s[4], 6) ^ ROR(s[4], 11) ^ ROR(s[4], 25)) +
                      ((s[4] & s[5]) ^ (~s[4] & s[6])) + sha_k[i] + w[i];
        uint32_t t2 = (ROR(s[0], 2) ^ ROR(s[0], 13) ^ ROR(s[0], 22)) +
                      ((s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]));
        memmove(s + 1, s, 7 * sizeof(uint32_t));
        s[4] += t1;
        s[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) h[i] += s[i];
}

static void sha256_hex(const char *data, size_t n, char hex[65]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t i = 0;
    for (; i + 64 <= n; i += 64) sha256_block(h, (const unsigned char *)data + i);
    unsigned char last[128] = {0};
    size_t r = n - i;
    memcpy(last, data + i, r);
    last[r] = 0x80;
    size_t len = r < 56 ? 64 : 128;
    for (int k = 0; k < 8; k++) last[len - 1 - k] = (unsigned char)((uint64_t)n * 8 >> (8 * k));
    sha256_block(h, last);
    if (len == 128) sha256_block(h, last + 64);
    for (int k = 0; k < 8; k++) snprintf(hex + 8 * k, 9, "%08x", h[k]);
}

/* ---- fixtures ---- */

static jinja_heap *fix_heap;

/* The fixture file `name` parsed into fix_heap (NULL with a failure counted). */
static jinja_value *fixture(const char *name) {
    static jinja_value root;
    const char *src = getenv("MT_SOURCE_DIR");
    char path[1024], err[512];
    snprintf(path, sizeof(path), "%s/tests/fixtures/jinja/%s", src ? src : ".", name);
    size_t len;
    char *text = mt_file_read_max(path, &len, 0, err, sizeof(err));
    EXPECT(text, "%s", err);
    if (!text) return NULL;
    if (!fix_heap) fix_heap = jinja_heap_new(0);
    int rc = jinja_json_parse(fix_heap, text, len, &root, err, sizeof(err));
    free(text);
    EXPECT(rc == 0, "%s: %s", path, err);
    return rc == 0 ? &root : NULL;
}

static const char *get_str(jinja_value o, const char *key, size_t *len) {
    jinja_value *v = jinja_dict_get_str(o, key);
    if (!v || v->type != JINJA_STR) return NULL;
    if (len) *len = v->u.s.len;
    return v->u.s.p;
}

static bool has_tag(jinja_value c, const char *tag) {
    jinja_value *uses = jinja_dict_get_str(c, "uses");
    for (int64_t i = 0; uses && i < uses->u.list->n; i++) {
        jinja_value u = uses->u.list->items[i];
        if (u.u.s.len == strlen(tag) && !memcmp(u.u.s.p, tag, u.u.s.len)) return true;
    }
    return false;
}

/* What the engine refuses by design (docs/templates.md, "What is refused"): a case that uses
 * one of these features must be refused, never rendered differently. By the fixture's feature
 * tags, and by name for the cases whose tags do not single the feature out. */
static const char *const UNSUPPORTED_TAGS[] = {
    "bigint",           "call_block",        "recursive_loop",
    "method:format",    "method:format_map", "method:casefold",
    "method:swapcase",  "method:fromkeys",   "filter:slice",
    "filter:wordwrap",  "filter:truncate",   "filter:format",
    "filter:striptags", "filter:urlencode",  "filter:filesizeformat",
    "filter:pprint",    "filter:groupby",    "filter:urlize",
    "filter:xmlattr",   "filter:random",     "test:filter",
    "test:test",        "test:escaped",      "call:lipsum",
    "call:cycler",      "call:joiner",       NULL};
static const char *const UNSUPPORTED_CASES[] = {
    "str_unicode_escapes",        /* \N{...}: Unicode character names */
    "sm_percent",                 /* str % args */
    "tojson_indent_zero_and_str", /* a string indent */
    "macro_name_attrs",           /* macro.name, macro.arguments */
    "t_eq_ne",                    /* 'a' is sameas 'a': CPython's string interning */
    "st_block",                   /* template inheritance */
    "st_autoescape_block",        /* autoescaping */
    "gen_inside_macro",           /* {% generation %} in captured output: transformers' spans */
    "gen_inside_set_block",       /*   point at the wrong place there */
    "gen_inside_filter_block",
    "gen_nested",
    NULL};

static bool unsupported(jinja_value c) {
    for (int i = 0; UNSUPPORTED_TAGS[i]; i++)
        if (has_tag(c, UNSUPPORTED_TAGS[i])) return true;
    const char *name = get_str(c, "name", NULL);
    for (int i = 0; UNSUPPORTED_CASES[i]; i++)
        if (!strcmp(name, UNSUPPORTED_CASES[i])) return true;
    return false;
}

static bool spans_equal(const jinja_output *o, jinja_value want) {
    if (want.type != JINJA_LIST || want.u.list->n != o->n_gen) return false;
    for (int i = 0; i < o->n_gen; i++) {
        jinja_value p = want.u.list->items[i];
        if (p.u.list->items[0].u.i != o->gen[i].start || p.u.list->items[1].u.i != o->gen[i].end)
            return false;
    }
    return true;
}

static double frozen_now(void) {
    setenv("TZ", "UTC", 1);
    tzset();
    struct tm tm = {
        .tm_year = 2026 - 1900, .tm_mon = 0, .tm_mday = 2, .tm_hour = 3, .tm_min = 4, .tm_sec = 5};
    return (double)timegm(&tm);
}

typedef struct {
    int rendered, refused_as_jinja2, refused_unsupported, failed;
} tally;

/* Loads and renders one template against vars; checks the expected output / spans or error. */
static void check_one(const char *name, const char *tmpl, size_t tlen, jinja_value vars,
                      jinja_value entry, bool is_unsupported, tally *t) {
    char err[1024];
    jinja_value *want_err = jinja_dict_get_str(entry, "error");
    size_t want_len = 0;
    const char *want = get_str(entry, "expected", &want_len);
    jinja_template *tp = jinja_template_load(name, tmpl, tlen, err, sizeof(err));
    jinja_heap *h = jinja_heap_new(0);
    jinja_output out = {0};
    int rc = -1;
    if (tp) {
        jinja_render_opts o = {.now = frozen_now(), .max_steps = 1000000};
        rc = jinja_render(tp, h, vars, &o, &out, err, sizeof(err));
    }
    if (want_err) {
        EXPECT(rc != 0, "%s: jinja2 raises %.*s (%s) but the engine rendered '%.80s'", name,
               (int)want_err->u.s.len, want_err->u.s.p, get_str(entry, "message", NULL),
               out.text.p ? out.text.p : "");
        if (rc != 0)
            t->refused_as_jinja2++;
        else
            t->failed++;
    } else if (rc != 0) {
        EXPECT(is_unsupported, "%s: refused: %s", name, err);
        if (is_unsupported)
            t->refused_unsupported++;
        else
            t->failed++;
    } else if (is_unsupported) {
        EXPECT(false, "%s: uses an unsupported feature but rendered", name);
        t->failed++;
    } else {
        bool same = want && out.text.len == want_len && !memcmp(out.text.p, want, want_len);
        EXPECT(same, "%s: got\n----\n%s\n----\nwant\n----\n%.*s\n----", name, out.text.p,
               (int)want_len, want ? want : "");
        jinja_value *spans = jinja_dict_get_str(entry, "generation_spans_utf8");
        if (spans) {
            bool ok = spans_equal(&out, *spans);
            EXPECT(ok, "%s: the generation spans differ (%d of them here)", name, out.n_gen);
            same &= ok;
        }
        if (same)
            t->rendered++;
        else
            t->failed++;
    }
    jinja_output_free(&out);
    jinja_heap_free(h);
    jinja_template_free(tp);
}

static int case_cases(void) {
    jinja_value *root = fixture("cases.json");
    if (!root) return MT_TEST_OK;
    jinja_value cases = *jinja_dict_get_str(*root, "cases");
    tally t = {0};
    for (int64_t i = 0; i < cases.u.list->n; i++) {
        jinja_value c = cases.u.list->items[i];
        size_t tlen = 0, vlen = 0;
        const char *tmpl = get_str(c, "template", &tlen), *vtext = get_str(c, "vars_json", &vlen);
        const char *name = get_str(c, "name", NULL);
        char err[512];
        jinja_value vars;
        if (jinja_json_parse(fix_heap, vtext, vlen, &vars, err, sizeof(err)) != 0) {
            /* variables the engine cannot hold (integers beyond 64 bits): refused by design */
            EXPECT(unsupported(c), "%s: the variables are refused: %s", name, err);
            t.refused_unsupported++;
            continue;
        }
        check_one(name, tmpl, tlen, vars, c, unsupported(c), &t);
    }
    printf("jinja cases: %lld: %d rendered byte for byte, %d refused where jinja2 raises, %d "
           "refused by design (unsupported features), %d failed\n",
           (long long)cases.u.list->n, t.rendered, t.refused_as_jinja2, t.refused_unsupported,
           t.failed);
    EXPECT(t.rendered >= 150, "only %d cases rendered", t.rendered);
    return MT_TEST_OK;
}

static int case_templates(void) {
    const char *shared = getenv("MT_SHARED_DIR");
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/templates", shared ? shared : "../shared");
    char probe[1100], err[512];
    snprintf(probe, sizeof(probe), "%s/MiniMax-M2.jinja", dir);
    FILE *f = fopen(probe, "rb");
    if (!f) {
        printf("SKIP jinja_templates: %s is absent\n", dir);
        return MT_TEST_SKIP;
    }
    fclose(f);
    jinja_value *root = fixture("templates.json");
    if (!root) return MT_TEST_OK;
    jinja_value entries = *jinja_dict_get_str(*root, "entries");
    tally t = {0};
    int inputs = 0;
    for (int64_t i = 0; i < entries.u.list->n; i++) {
        jinja_value e = entries.u.list->items[i];
        const char *file = get_str(e, "template", NULL), *sha = get_str(e, "sha256", NULL);
        char path[1200], hex[65], name[1400];
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        size_t tlen = 0;
        char *tmpl = mt_file_read_max(path, &tlen, 0, err, sizeof(err));
        EXPECT(tmpl, "%s", err);
        if (!tmpl) continue;
        sha256_hex(tmpl, tlen, hex);
        EXPECT(sha && !strcmp(hex, sha), "%s: sha256 %s, the fixture names %s", path, hex, sha);
        jinja_value *phase = jinja_dict_get_str(e, "phase");
        if (phase && phase->u.s.len == 5 && !memcmp(phase->u.s.p, "input", 5)) {
            inputs++; /* refused before rendering: the data pipeline's part (data_chat tests) */
            free(tmpl);
            continue;
        }
        /* the context: messages, tools, documents, add_generation_prompt, special tokens, kwargs */
        jinja_value conv = *jinja_dict_get_str(e, "conversation"), vars = jinja_dict_new(fix_heap);
        jinja_value *msgs = jinja_dict_get_str(e, "template_messages");
        jinja_dict_set_str(fix_heap, vars, "messages",
                           msgs ? *msgs : *jinja_dict_get_str(conv, "messages"));
        jinja_value *tools = jinja_dict_get_str(conv, "tools"),
                    *docs = jinja_dict_get_str(conv, "documents");
        jinja_dict_set_str(fix_heap, vars, "tools", tools ? *tools : jinja_none());
        jinja_dict_set_str(fix_heap, vars, "documents", docs ? *docs : jinja_none());
        jinja_dict_set_str(fix_heap, vars, "add_generation_prompt",
                           *jinja_dict_get_str(e, "add_generation_prompt"));
        jinja_value st = *jinja_dict_get_str(e, "special_tokens");
        for (int64_t k = 0; k < st.u.dict->n; k++)
            jinja_dict_set(fix_heap, vars, st.u.dict->keys[k], st.u.dict->vals[k]);
        for (int64_t k = 0; k < conv.u.dict->n; k++) {
            jinja_value key = conv.u.dict->keys[k];
            static const char *const skip[] = {"messages", "tools", "documents", NULL};
            bool s = false;
            for (int j = 0; skip[j]; j++)
                s |= key.u.s.len == strlen(skip[j]) && !memcmp(key.u.s.p, skip[j], key.u.s.len);
            if (!s) jinja_dict_set(fix_heap, vars, key, conv.u.dict->vals[k]);
        }
        snprintf(name, sizeof(name), "%s [%s]", file, get_str(e, "name", NULL));
        check_one(name, tmpl, tlen, vars, e, false, &t);
        free(tmpl);
    }
    printf("jinja templates: %lld entries: %d rendered byte for byte, %d refused where "
           "transformers' template raises, %d refused by transformers before rendering (input), %d "
           "failed\n",
           (long long)entries.u.list->n, t.rendered, t.refused_as_jinja2, inputs, t.failed);
    return MT_TEST_OK;
}

/* Deep nesting, huge loops, huge outputs, runaway recursion and memory: each refused in one
 * line naming the limit, at load or while rendering, in bounded time and memory. */
static int case_limits(void) {
    jinja_buf deep = {0}, parens = {0};
    for (int i = 0; i < 1000; i++) jinja_buf_append(&deep, "{% if true %}", 13);
    for (int i = 0; i < 1000; i++) jinja_buf_append(&deep, "{% endif %}", 11);
    jinja_buf_append(&parens, "{{ ", 3);
    for (int i = 0; i < 10000; i++) jinja_buf_append(&parens, "(", 1);
    static const struct {
        const char *what, *tmpl, *want;
    } cases[] = {
        {"nested blocks", NULL, "nested more than"},
        {"nested brackets", NULL, "brackets nested too deeply"},
        {"a loop of 10^10 iterations",
         "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
         "loop iterations and calls"},
        {"a string of 10^9 bytes", "{{ 'x' * 1000000000 }}", "render's limit"},
        {"an output of 10^9 bytes", "{% for i in range(100000) %}{{ 'x' * 10000 }}{% endfor %}",
         "the output passes"},
        {"a string doubled 40 times",
         "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% "
         "endfor %}",
         "limit"},
        {"endless recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
         "nested more than 256 deep"},
        {"quadratic memory",
         "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i, i, "
         "i, i] %}{% endfor %}",
         "memory limit"},
        {"a range of 10^6", "{{ range(1000000)|length }}", "MAX_RANGE"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *tmpl = i == 0 ? deep.p : i == 1 ? parens.p : cases[i].tmpl;
        char err[1024] = "";
        jinja_template *t =
            jinja_template_load(cases[i].what, tmpl, strlen(tmpl), err, sizeof(err));
        jinja_heap *h = jinja_heap_new(0);
        jinja_output out = {0};
        int rc = -1;
        if (t) rc = jinja_render(t, h, jinja_dict_new(h), NULL, &out, err, sizeof(err));
        EXPECT(rc != 0 && strstr(err, cases[i].want) && !strchr(err, '\n'),
               "%s: want a one-line refusal naming '%s', got rc %d: %s", cases[i].what,
               cases[i].want, rc, err);
        printf("%s: %s\n", cases[i].what, err);
        jinja_output_free(&out);
        jinja_heap_free(h);
        jinja_template_free(t);
    }
    jinja_buf_free(&deep);
    jinja_buf_free(&parens);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"jinja_cases", case_cases},
    {"jinja_templates", case_templates},
    {"jinja_limits", case_limits},
};

int main(int argc, char **argv) {
    int rc = mt_test_main(argc, argv, cases, (int)(sizeof(cases) / sizeof(cases[0])));
    if (fix_heap) jinja_heap_free(fix_heap);
    return rc;
}
