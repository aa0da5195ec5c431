/* data_toml.c: the recipe TOML reader: every supported form, overrides, and error positions. */
#include "tests/support/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/toml.h"

static const char *sample = "# a recipe\n"
                            "title = \"tiny \\\"demo\\\" \\u00e9\"\n"
                            "[model]\n"
                            "path = 'C:\\raw\\path'   # literal string\n"
                            "layers = 1_024\n"
                            "[train]\n"
                            "lr = 1e-5\n"
                            "warm = -0.5\n"
                            "shuffle = false\n"
                            "betas = [0.9, 0.95,\n   0.999] # spans lines\n"
                            "names = [\"a\", 'b']\n"
                            "[dist.zero]\n"
                            "\"quoted\" = +7\n"
                            "a.b = true\n";

static int test_toml_parse(void) {
    mt_toml_doc doc = {0};
    char err[256];
    bool ok = mt_toml_parse(&doc, sample, "sample.toml", err, sizeof(err));
    EXPECT(ok, "parse failed: %s", err);
    if (!ok) return MT_TEST_OK;
    const mt_toml_entry *e;
    EXPECT((e = mt_toml_find(&doc, "title")) && !strcmp(e->value.s, "tiny \"demo\" \xc3\xa9"),
           "title");
    EXPECT((e = mt_toml_find(&doc, "model.path")) && !strcmp(e->value.s, "C:\\raw\\path"),
           "literal string");
    EXPECT((e = mt_toml_find(&doc, "model.layers")) && e->value.type == MT_TOML_INT &&
               e->value.i == 1024,
           "integer with _");
    EXPECT((e = mt_toml_find(&doc, "train.lr")) && e->value.type == MT_TOML_FLOAT &&
               e->value.f == 1e-5 && e->line == 7 && e->col == 6,
           "float and its position (line %d col %d)", e ? e->line : -1, e ? e->col : -1);
    EXPECT((e = mt_toml_find(&doc, "train.warm")) && e->value.f == -0.5, "negative float");
    EXPECT((e = mt_toml_find(&doc, "train.shuffle")) && e->value.type == MT_TOML_BOOL &&
               !e->value.b,
           "bool");
    EXPECT((e = mt_toml_find(&doc, "train.betas")) && e->value.type == MT_TOML_ARRAY &&
               e->value.n_items == 3 && e->value.items[2].f == 0.999,
           "multi-line array");
    EXPECT((e = mt_toml_find(&doc, "train.names")) && e->value.n_items == 2 &&
               !strcmp(e->value.items[1].s, "b"),
           "string array");
    EXPECT((e = mt_toml_find(&doc, "dist.zero.quoted")) && e->value.i == 7, "quoted key");
    EXPECT((e = mt_toml_find(&doc, "dist.zero.a.b")) && e->value.b, "dotted key");
    EXPECT(doc.n == 10, "10 entries, got %d", doc.n);

    /* overrides: typed values, strings, replacing and adding */
    EXPECT(mt_toml_set(&doc, "train.lr=2e-5", err, sizeof(err)), "set lr");
    EXPECT((e = mt_toml_find(&doc, "train.lr")) && e->value.f == 2e-5, "override lr");
    EXPECT(mt_toml_set(&doc, "model.path=/tmp/some dir/x", err, sizeof(err)), "set path");
    EXPECT((e = mt_toml_find(&doc, "model.path")) && !strcmp(e->value.s, "/tmp/some dir/x"),
           "bare override becomes a string");
    EXPECT(mt_toml_set(&doc, "train.max_steps=20", err, sizeof(err)), "add key");
    EXPECT((e = mt_toml_find(&doc, "train.max_steps")) && e->value.type == MT_TOML_INT &&
               e->value.i == 20,
           "added key");
    EXPECT(!mt_toml_set(&doc, "novalue", err, sizeof(err)), "override without '=' rejected");

    /* formatting reads back to the same value */
    char buf[256] = "";
    mt_toml_value_format(&mt_toml_find(&doc, "train.betas")->value, buf, sizeof(buf));
    /* the shortest digits that read back as the same double */
    EXPECT(!strcmp(buf, "[0.9, 0.95, 0.999]"), "format: %s", buf);
    const double sum = 0.1 + 0.2; /* needs all 17 digits */
    mt_toml_value v3 = {.type = MT_TOML_FLOAT, .f = sum};
    buf[0] = 0;
    mt_toml_value_format(&v3, buf, sizeof(buf));
    EXPECT(!strcmp(buf, "0.30000000000000004") && strtod(buf, NULL) == sum, "0.1 + 0.2: %s", buf);
    buf[0] = 0;
    mt_toml_value one = {.type = MT_TOML_FLOAT, .f = 1.0};
    mt_toml_value_format(&one, buf, sizeof(buf));
    EXPECT(!strcmp(buf, "1.0"), "a float stays a float: %s", buf);
    mt_toml_free(&doc);
    return MT_TEST_OK;
}

static void expect_error(const char *text, const char *want) {
    mt_toml_doc doc = {0};
    char err[256] = "";
    bool ok = mt_toml_parse(&doc, text, "bad.toml", err, sizeof(err));
    EXPECT(!ok && strstr(err, want), "for %-30.30s got '%s', want '%s'", text, ok ? "ok" : err,
           want);
    mt_toml_free(&doc);
}

static int test_toml_errors(void) {
    expect_error("a = 1\na = 2\n", "bad.toml:2:1: key 'a' is defined twice");
    expect_error("[t]\nx = \"open\n", "bad.toml:2:10: unterminated string");
    expect_error("x = 1.2.3\n", "bad.toml:1:10: '1.2.3' is not a valid number");
    expect_error("x = 012\n", "leading zeros");
    expect_error("x = {a = 1}\n", "bad.toml:1:5: inline tables are not supported");
    expect_error("x = 1 2\n", "bad.toml:1:7: unexpected '2'");
    expect_error("[[arr]]\n", "arrays of tables are not supported");
    expect_error("x\n", "bad.toml:1:2: expected '=' after key 'x'");
    expect_error("x = [1, 2\n", "expected ',' or ']' in array");
    /* an error inside a nested array frees what it had read (a leak under ASan otherwise;
     * found by tests/fuzz/fuzz_toml.c) */
    expect_error("x = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11, 12 y]]\n", "expected ',' or ']'");
    expect_error("x = \"\\q\"\n", "unknown escape \\q");
    expect_error("x = \"\"\"long\"\"\"\n", "multi-line strings");
    expect_error("x = \"\\uD800\"\n", "not a Unicode scalar value");
    mt_toml_doc doc = {0};
    char err[256];
    EXPECT(!mt_toml_load(&doc, "/nonexistent/recipe.toml", err, sizeof(err)) &&
               strstr(err, "/nonexistent/recipe.toml: cannot open"),
           "missing file: %s", err);
    /* a directory opens and used to read as 2^63 bytes ("out of memory allocating ...") */
    EXPECT(!mt_toml_load(&doc, "tests", err, sizeof(err)) &&
               strstr(err, "tests: is a directory, not a file"),
           "a directory: %s", err);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_toml_parse", test_toml_parse},
    {"data_toml_errors", test_toml_errors},
};
MT_TEST_MAIN(cases)
