// jinja_values.c: the Jinja engine's values (jinja/jinja_heap.c, jinja_json.c, jinja_print.c,
// jinja_unicode.c) against what Python says, recorded by tools/make_jinja_value_fixtures.py in
// tests/fixtures/jinja/values.json (Python 3.11, jinja2 3.1):
// - jinja_values_json: json.loads (the repr of the result, or an error) and json.dumps with
//   nine option sets (the text, or the exception's message), byte for byte
// - jinja_values_print: repr() of ~8,600 doubles, str() / repr() / bool() / type() of values,
//   == and < (with Python's TypeError) of every pair of 41 values
// - jinja_values_unicode: upper / lower / title / capitalize / len of strings, and per block of
//   4096 code points a digest of every code point's mappings, classes (isspace ... isnumeric),
//   repr and Final_Sigma and word contexts (make_jinja_value_fixtures.py record()), recomputed
//   here
// - jinja_values_heap: the arena's limit (refusals, the longjmp of a render), reset, alignment,
//   growth; dicts, lists and buffers
// Values come from the fixture as JSON texts with tags for what JSON cannot write (untag()).
#include "tests/support/harness.h"

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"
#include "jinja/jinja_internal.h"

extern const char jinja_ucd_version[]; // jinja/jinja_unicode_data.c

static cJSON *fixture_root;

static const cJSON *fixture(const char *section) {
    if (!fixture_root) {
        const char *src = getenv("MT_SOURCE_DIR");
        char path[1024], err[512];
        snprintf(path, sizeof(path), "%s/tests/fixtures/jinja/values.json", src ? src : ".");
        char *text = mt_file_read_max(path, NULL, 0, err, sizeof(err));
        EXPECT(text, "%s", err);
        if (!text) return NULL;
        fixture_root = cJSON_Parse(text);
        free(text);
        EXPECT(fixture_root, "%s is not valid JSON", path);
    }
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(fixture_root, section);
    EXPECT(s, "fixture section %s missing", section);
    return s;
}

static const char *str_item(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool has_item(const cJSON *o, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(o, key) != NULL;
}

// ---- tagged values ----

static bool is_tag(jinja_value v, const char *tag) {
    return v.type == JINJA_DICT && v.u.dict->n == 1 && v.u.dict->keys[0].type == JINJA_STR &&
           v.u.dict->keys[0].u.s.len == strlen(tag) &&
           memcmp(v.u.dict->keys[0].u.s.p, tag, strlen(tag)) == 0;
}

// The value a tagged JSON value stands for (make_jinja_value_fixtures.py build()).
static jinja_value untag(jinja_heap *h, jinja_value v) {
    if (v.type == JINJA_LIST) {
        for (int64_t i = 0; i < v.u.list->n; i++) v.u.list->items[i] = untag(h, v.u.list->items[i]);
        return v;
    }
    if (v.type != JINJA_DICT) return v;
    jinja_value arg = v.u.dict->n == 1 ? v.u.dict->vals[0] : jinja_none();
    if (is_tag(v, "__pairs__")) {
        jinja_value d = jinja_dict_new(h);
        for (int64_t i = 0; i < arg.u.list->n; i++) {
            const jinja_list *kv = arg.u.list->items[i].u.list;
            jinja_dict_set(h, d, untag(h, kv->items[0]), untag(h, kv->items[1]));
        }
        return d;
    }
    if (is_tag(v, "__undefined__")) {
        jinja_value u = jinja_undefined(NULL);
        if (arg.type == JINJA_STR) u.u.s = arg.u.s; // heap strings end in a NUL
        return u;
    }
    if (is_tag(v, "__namespace__")) {
        jinja_value ns = untag(h, arg);
        ns.type = JINJA_NAMESPACE;
        return ns;
    }
    if (is_tag(v, "__cycle__")) {
        bool list = arg.u.s.len == 4 && memcmp(arg.u.s.p, "list", 4) == 0;
        jinja_value c = list ? jinja_list_new(h) : jinja_dict_new(h);
        if (list)
            jinja_list_push(h, c, c);
        else
            jinja_dict_set_str(h, c, "self", c);
        return c;
    }
    for (int64_t i = 0; i < v.u.dict->n; i++) v.u.dict->vals[i] = untag(h, v.u.dict->vals[i]);
    return v;
}

static jinja_value tagged(jinja_heap *h, const char *text) {
    jinja_value v;
    char err[256];
    int rc = jinja_json_parse(h, text, strlen(text), &v, err, sizeof(err));
    EXPECT(rc == 0, "fixture value %.80s: %s", text, err);
    return rc == 0 ? untag(h, v) : jinja_none();
}

static void expect_text(const char *what, const char *input, const jinja_buf *got,
                        const char *want) {
    const char *g = got->p ? got->p : "";
    EXPECT(got->len == strlen(want) && memcmp(g, want, got->len) == 0,
           "%s of %.200s: got [%s] want [%s]", what, input, g, want);
}

// ---- jinja_values_json ----

static int hexval(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

static void check_parse_cases(jinja_heap *h) {
    const cJSON *cases = fixture("json_parse");
    int n = 0, n_err = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next, n++) {
        char bytes[64];
        const char *text = str_item(c, "text");
        size_t len = text ? strlen(text) : 0;
        if (!text) { // bytes that are not UTF-8, as hex
            const char *hx = str_item(c, "hex");
            for (len = 0; hx[2 * len]; len++)
                bytes[len] = (char)(hexval(hx[2 * len]) << 4 | hexval(hx[2 * len + 1]));
            text = bytes;
        }
        jinja_value v;
        char err[256] = "";
        int rc = jinja_json_parse(h, text, len, &v, err, sizeof(err));
        if (has_item(c, "error")) {
            n_err++;
            EXPECT(rc == -1 && strncmp(err, "offset ", 7) == 0, "parse %.60s: want an error, rc %d",
                   text, rc);
            continue;
        }
        EXPECT(rc == 0, "parse %.60s: %s", text, err);
        if (rc) continue;
        jinja_buf b = {0};
        jinja_value_repr(v, &b);
        expect_text("repr(json.loads())", text, &b, str_item(c, "repr"));
        jinja_buf_free(&b);
    }
    printf("json_parse: %d texts (%d refused)\n", n, n_err);
}

static void check_dump_cases(jinja_heap *h) {
    const cJSON *cases = fixture("json_dump");
    int n = 0, n_err = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next, n++) {
        const char *text = str_item(c, "value");
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(c, "opts");
        const cJSON *ea = cJSON_GetObjectItemCaseSensitive(o, "ensure_ascii");
        const cJSON *ind = cJSON_GetObjectItemCaseSensitive(o, "indent");
        const cJSON *seps = cJSON_GetObjectItemCaseSensitive(o, "separators");
        jinja_json_opts opts = {
            .ensure_ascii = !ea || cJSON_IsTrue(ea),
            .indent = ind ? ind->valueint : -1,
            .item_sep = seps ? seps->child->valuestring : NULL,
            .key_sep = seps ? seps->child->next->valuestring : NULL,
            .sort_keys = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "sort_keys")),
        };
        jinja_value v = tagged(h, text);
        jinja_buf out = {0};
        jinja_buf_append(&out, "<", 1); // dump appends; an error leaves what was there
        char err[256] = "";
        int rc = jinja_json_dump(v, &opts, &out, err, sizeof(err));
        char *opt_text = cJSON_PrintUnformatted(o);
        char what[320];
        snprintf(what, sizeof(what), "json.dumps(%s)", opt_text);
        free(opt_text);
        const char *want_err = str_item(c, "error");
        if (want_err) {
            n_err++;
            EXPECT(rc == -1 && strcmp(err, want_err) == 0 && out.len == 1,
                   "%s of %.200s: rc %d, error [%s] want [%s]", what, text, rc, err, want_err);
        } else {
            EXPECT(rc == 0, "%s of %.200s: %s", what, text, err);
            jinja_buf body = {out.p + 1, out.len - 1, 0, NULL};
            expect_text(what, text, &body, str_item(c, "out"));
        }
        jinja_buf_free(&out);
    }
    printf("json_dump: %d cases (%d errors)\n", n, n_err);
}

static int test_json(void) {
    jinja_heap *h = jinja_heap_new(0);
    check_parse_cases(h);
    check_dump_cases(h);

    // memory limit while parsing: an error, not a crash
    jinja_heap *small = jinja_heap_new(1024);
    jinja_buf big = {0};
    jinja_buf_append(&big, "[", 1);
    for (int i = 0; i < 500; i++) jinja_buf_append(&big, i ? ",\"abcdefgh\"" : "\"x\"", i ? 11 : 3);
    jinja_buf_append(&big, "]", 1);
    jinja_value v;
    char err[256] = "";
    int rc = jinja_json_parse(small, big.p, big.len, &v, err, sizeof(err));
    EXPECT(rc == -1 && strstr(err, "memory limit"), "parse in a full heap: rc %d [%s]", rc, err);
    EXPECT(jinja_heap_failed(small) && jinja_heap_used(small) <= 1024, "used %zu",
           jinja_heap_used(small));
    jinja_buf_free(&big);
    jinja_heap_free(small);
    jinja_heap_free(h);
    return MT_TEST_OK;
}

// ---- jinja_values_print ----

static void check_floats(void) {
    const cJSON *cases = fixture("floats");
    int n = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next, n++) {
        uint64_t bits = strtoull(c->child->valuestring, NULL, 16);
        double f;
        memcpy(&f, &bits, sizeof(f));
        char buf[32];
        int len = jinja_float_repr(f, buf);
        const char *want = c->child->next->valuestring;
        EXPECT(len == (int)strlen(buf) && strcmp(buf, want) == 0, "repr(%s): got %s want %s",
               c->child->valuestring, buf, want);
    }
    printf("floats: %d reprs\n", n);
}

static void check_print_cases(jinja_heap *h) {
    const cJSON *cases = fixture("print");
    int n = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next, n++) {
        const char *text = str_item(c, "value");
        jinja_value v = tagged(h, text);
        jinja_buf b = {0};
        if (str_item(c, "str")) { // null where str() has a NUL, which cJSON cannot hold
            jinja_value_print(v, &b);
            expect_text("str()", text, &b, str_item(c, "str"));
            b.len = 0;
        }
        jinja_value_repr(v, &b);
        expect_text("repr()", text, &b, str_item(c, "repr"));
        jinja_buf_free(&b);
        bool truthy = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "truthy"));
        EXPECT(jinja_truthy(v) == truthy, "bool(%s): got %d", text, !truthy);
        EXPECT(strcmp(jinja_type_name(v), str_item(c, "type")) == 0, "type(%s): got %s want %s",
               text, jinja_type_name(v), str_item(c, "type"));
    }
    printf("print: %d values\n", n);
}

static void check_compare_cases(jinja_heap *h) {
    const cJSON *cases = fixture("compare");
    int n = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next, n++) {
        const char *ta = str_item(c, "a"), *tb = str_item(c, "b");
        jinja_value a = tagged(h, ta), b = tagged(h, tb);
        bool eq = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "eq"));
        EXPECT(jinja_equal(a, b) == eq, "%s == %s: want %d", ta, tb, eq);
        const cJSON *lt = cJSON_GetObjectItemCaseSensitive(c, "lt");
        bool ok, got = jinja_less(a, b, &ok);
        if (cJSON_IsNull(lt))
            EXPECT(!ok, "%s < %s: want a TypeError", ta, tb);
        else
            EXPECT(ok && got == cJSON_IsTrue(lt), "%s < %s: ok %d got %d", ta, tb, ok, got);
        if (jinja_hashable(a)) { // a dict finds an equal key
            jinja_value d = jinja_dict_new(h);
            jinja_dict_set(h, d, a, jinja_none());
            EXPECT((jinja_dict_find(d.u.dict, b) == 0) == (eq && jinja_hashable(b)),
                   "{%s: None} find %s", ta, tb);
        }
    }
    printf("compare: %d pairs\n", n);
}

static int test_print(void) {
    jinja_heap *h = jinja_heap_new(0);
    check_floats();
    check_print_cases(h);
    check_compare_cases(h);
    jinja_heap_free(h);
    return MT_TEST_OK;
}

// ---- jinja_values_unicode ----

typedef void (*str_fn)(const char *, size_t, jinja_buf *);

static void check_string_cases(void) {
    const cJSON *cases = fixture("strings");
    static const struct {
        const char *name;
        str_fn fn;
    } fns[] = {{"upper", jinja_str_upper},
               {"lower", jinja_str_lower},
               {"title", jinja_str_title},
               {"capitalize", jinja_str_capitalize}};
    int n = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next, n++) {
        const char *s = str_item(c, "s");
        size_t len = strlen(s);
        for (size_t k = 0; k < sizeof(fns) / sizeof(fns[0]); k++) {
            jinja_buf b = {0};
            fns[k].fn(s, len, &b);
            expect_text(fns[k].name, s, &b, str_item(c, fns[k].name));
            jinja_buf_free(&b);
        }
        int64_t cps = jinja_cp_count(s, len);
        EXPECT(cps == cJSON_GetObjectItemCaseSensitive(c, "len")->valueint, "len(%s): %lld", s,
               (long long)cps);
        // offsets: code point k starts where k code points end; each decodes to one code point
        for (int64_t k = 0; k <= cps; k++) {
            size_t off = jinja_cp_offset(s, len, k);
            EXPECT(jinja_cp_count(s, off) == k && (k < cps ? off < len : off == len),
                   "offset %lld of %s: %zu", (long long)k, s, off);
            if (k < cps) {
                uint32_t cp;
                int step = jinja_utf8_next(s + off, len - off, &cp);
                EXPECT(jinja_cp_offset(s, len, k + 1) == off + (size_t)step, "step at %zu", off);
            }
        }
    }
    printf("strings: %d\n", n);
}

static void put_cp_str(jinja_buf *b, const char *pre, uint32_t cp, const char *post) {
    b->len = 0;
    jinja_buf_append(b, pre, strlen(pre));
    jinja_utf8_put(b, cp);
    jinja_buf_append(b, post, strlen(post));
}

static void piece_end(jinja_buf *rec) { jinja_buf_append(rec, "\xff", 1); }

// make_jinja_value_fixtures.py record(c), appended to rec.
static void record(uint32_t c, jinja_buf *rec, jinja_buf *tmp) {
    jinja_cp_upper(c, rec), piece_end(rec);
    jinja_cp_lower(c, rec), piece_end(rec);
    jinja_cp_title(c, rec), piece_end(rec);
    bool classes[] = {jinja_cp_isspace(c),  jinja_cp_printable(c), jinja_cp_cased(c),
                      jinja_cp_islower(c),  jinja_cp_isupper(c),   jinja_cp_istitle(c),
                      jinja_cp_isalpha(c),  jinja_cp_isdecimal(c), jinja_cp_isdigit(c),
                      jinja_cp_isnumeric(c)};
    uint32_t flags = 0;
    for (int i = 0; i < (int)(sizeof(classes) / sizeof(classes[0])); i++)
        flags |= (uint32_t)classes[i] << i;
    jinja_utf8_put(rec, flags), piece_end(rec);
    put_cp_str(tmp, "", c, "");
    jinja_str_repr(tmp->p, tmp->len, rec), piece_end(rec);
    put_cp_str(tmp, "A\u03a3", c, "");
    jinja_str_lower(tmp->p, tmp->len, rec), piece_end(rec);
    put_cp_str(tmp, "A", c, "\u03a3");
    jinja_str_lower(tmp->p, tmp->len, rec), piece_end(rec);
    put_cp_str(tmp, "", c, "\u03a3");
    jinja_str_capitalize(tmp->p, tmp->len, rec), piece_end(rec);
    put_cp_str(tmp, "", c, "A");
    jinja_str_title(tmp->p, tmp->len, rec), piece_end(rec);
}

static void check_digests(void) {
    const cJSON *digests = fixture("unicode_digests");
    const cJSON *block = fixture("unicode_block");
    const char *ucd = str_item(fixture_root, "unicode");
    EXPECT(ucd && strcmp(ucd, jinja_ucd_version) == 0, "fixture Unicode %s, tables %s", ucd,
           jinja_ucd_version);
    if (!digests || !block) return;
    uint32_t size = (uint32_t)block->valueint, lo = 0;
    int bad = 0;
    jinja_buf rec = {0}, tmp = {0};
    for (const cJSON *d = digests->child; d; d = d->next, lo += size) {
        rec.len = 0;
        for (uint32_t c = lo; c < lo + size; c++) record(c, &rec, &tmp);
        char hex[17];
        snprintf(hex, sizeof(hex), "%016llx",
                 (unsigned long long)mt_hash64(rec.p, rec.len, MT_HASH64_INIT));
        if (strcmp(hex, d->valuestring) != 0 && bad++ < 8)
            EXPECT(0, "code points %04X..%04X: digest %s want %s", lo, lo + size - 1, hex,
                   d->valuestring);
    }
    EXPECT(lo == 0x110000, "digests cover up to %X", lo);
    EXPECT(bad == 0, "%d blocks differ", bad);
    printf("unicode: %u blocks of %u code points\n", lo / size, size);
    jinja_buf_free(&rec);
    jinja_buf_free(&tmp);
}

static int test_unicode(void) {
    check_string_cases();
    check_digests();
    // invalid or cut UTF-8 never reads past n
    uint32_t cp;
    EXPECT(jinja_utf8_next("\xe2\x82", 2, &cp) == 1 && cp == 0xFFFD, "cut sequence: %X", cp);
    EXPECT(jinja_utf8_next("\x80", 1, &cp) == 1, "continuation byte");
    return MT_TEST_OK;
}

// ---- jinja_values_heap ----

static int test_heap(void) {
    // a limited heap refuses beyond its limit, and says so
    const size_t max = 4096;
    jinja_heap *h = jinja_heap_new(max);
    char s[100];
    memset(s, 'x', sizeof(s));
    int made = 0;
    jinja_value v;
    while ((v = jinja_str(h, s, sizeof(s))).type == JINJA_STR) {
        EXPECT(memcmp(v.u.s.p, s, sizeof(s)) == 0, "string %d", made);
        made++;
    }
    EXPECT(jinja_heap_failed(h), "failed not set");
    EXPECT(jinja_heap_used(h) <= max && jinja_heap_used(h) + sizeof(s) > max,
           "used %zu of %zu after %d strings", jinja_heap_used(h), max, made);
    EXPECT(made >= (int)(max / 128), "only %d strings of %zu bytes in %zu", made, sizeof(s), max);
    while (jinja_alloc(h, 1)) continue; // what is left, in the smallest pieces
    EXPECT(jinja_heap_used(h) == max, "used %zu of %zu", jinja_heap_used(h), max);
    jinja_value l = jinja_list_new(h), d = jinja_dict_new(h);
    EXPECT(l.type == JINJA_UNDEFINED && d.type == JINJA_UNDEFINED, "containers in a full heap");
    EXPECT(jinja_alloc(h, 16 * max) == NULL && jinja_alloc(h, SIZE_MAX) == NULL, "huge alloc");

    // reset: empty, usable, not failed
    jinja_heap_reset(h);
    EXPECT(!jinja_heap_failed(h) && jinja_heap_used(h) == 0, "after reset: used %zu",
           jinja_heap_used(h));
    l = jinja_list_new(h);
    int pushed = 0;
    while (jinja_list_push(h, l, jinja_int(pushed))) pushed++;
    EXPECT(pushed > 0 && jinja_heap_failed(h), "list push in a small heap: %d", pushed);
    for (int i = 0; i < pushed; i++) EXPECT(l.u.list->items[i].u.i == i, "item %d", i);

    // inside a render, a failed allocation jumps to on_fail
    jinja_heap_reset(h);
    jmp_buf jb;
    volatile int jumped = 0, allocs = 0;
    h->on_fail = &jb;
    if (setjmp(jb) == 0) {
        for (;;) jinja_alloc(h, 64), allocs++;
    } else {
        jumped = 1;
    }
    h->on_fail = NULL;
    EXPECT(jumped && jinja_heap_failed(h) && allocs == (int)(max / 64), "jump after %d allocs",
           allocs);
    jinja_heap_free(h);

    // no limit: large and many allocations, 16-byte aligned, intact across chunks
    h = jinja_heap_new(0);
    char *big = jinja_alloc(h, 3 << 20);
    EXPECT(big && ((uintptr_t)big & 15) == 0, "big allocation");
    memset(big, 7, 3 << 20);
    unsigned char *ps[5000];
    for (int i = 0; i < 5000; i++) {
        size_t n = (size_t)(i % 97) * 13 + 1;
        ps[i] = jinja_alloc(h, n);
        EXPECT(((uintptr_t)ps[i] & 15) == 0, "alignment of %zu bytes", n);
        memset(ps[i], i & 0xFF, n);
    }
    for (int i = 0; i < 5000; i++)
        EXPECT(ps[i][0] == (i & 0xFF) && ps[i][(size_t)(i % 97) * 13] == (i & 0xFF), "piece %d", i);
    EXPECT(big[0] == 7 && big[(3 << 20) - 1] == 7, "big allocation overwritten");
    EXPECT(jinja_str(h, "", 0).type == JINJA_STR, "empty string");
    for (int round = 0; round < 3; round++) { // reused after reset
        jinja_heap_reset(h);
        for (int i = 0; i < 1000; i++) EXPECT(jinja_alloc(h, 1000), "after reset");
        EXPECT(jinja_heap_used(h) == 1000 * 1008, "used %zu", jinja_heap_used(h));
    }

    // dicts keep insertion order; a set replaces in place, a delete closes the gap
    jinja_value dict = jinja_dict_new(h);
    const char *keys[] = {"role", "content", "name", "tool_calls"};
    for (int i = 0; i < 4; i++) EXPECT(jinja_dict_set_str(h, dict, keys[i], jinja_int(i)), "set");
    EXPECT(jinja_dict_set_str(h, dict, "content", jinja_cstr(h, "hi")), "replace");
    EXPECT(dict.u.dict->n == 4 && jinja_dict_get_str(dict, "content")->type == JINJA_STR, "get");
    EXPECT(jinja_dict_del_str(dict, "name") && !jinja_dict_del_str(dict, "name"), "del");
    EXPECT(!jinja_dict_get_str(dict, "name") && !jinja_dict_get_str(jinja_int(1), "x"), "absent");
    jinja_buf b = {0};
    jinja_value_repr(dict, &b);
    EXPECT(strcmp(b.p, "{'role': 0, 'content': 'hi', 'tool_calls': 3}") == 0, "order: %s", b.p);
    EXPECT(!jinja_list_push(h, dict, jinja_none()), "push onto a dict");

    // buffers grow and stay NUL-terminated
    b.len = 0;
    for (int i = 0; i < 100000; i++) jinja_buf_append(&b, "0123456789", i % 11);
    EXPECT(b.len == 100000 / 11 * 55 + 45 && b.p[b.len] == 0, "buffer length %zu", b.len);
    jinja_buf_free(&b);
    EXPECT(b.p == NULL && b.len == 0, "freed buffer");
    jinja_output o = {0};
    jinja_buf_append(&o.text, "x", 1);
    o.gen = malloc(sizeof(jinja_span)), o.n_gen = o.cap_gen = 1;
    jinja_output_free(&o);
    EXPECT(!o.text.p && !o.gen && !o.n_gen, "output freed");
    jinja_heap_free(h);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"jinja_values_json", test_json},
    {"jinja_values_print", test_print},
    {"jinja_values_unicode", test_unicode},
    {"jinja_values_heap", test_heap},
};

int main(int argc, char **argv) {
    int rc = mt_test_main(argc, argv, cases, (int)(sizeof(cases) / sizeof(cases[0])));
    cJSON_Delete(fixture_root);
    return rc;
}
