/* data_token_cache.c: the HDF5 token cache (data/token_cache.h) as a unit:
 *   data_token_cache_roundtrip  a dataset written under a key reads back equal, in the layout
 *                               the header documents (datasets, their types and lengths, the
 *                               key and count attributes); written atomically (no temporary file
 *                               left; a failed write leaves nothing and names the file)
 *   data_token_cache_key        a cache read with another key is refused naming the part that
 *                               differs; the key of a configuration: tokenizer.json's FNV-1a,
 *                               the options text and its hash, the data files' bytes in order
 *   data_token_cache_damaged    a missing file, bytes that are not HDF5, a cut file, an HDF5
 *                               file that is no cache, and a cache whose offsets or sources do
 *                               not hold together: refused in one line each, HDF5's error stack
 *                               not printed
 *   data_token_cache_open       built once, reused on the same inputs, rebuilt when the data,
 *                               max_length or force change it, or when the file is damaged */
#include "tests/support/harness.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file_io.h"
#include "data/token_cache.h"
#include "tests/support/capture.h"
#include "tests/support/data_util.h"

/* 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3), written here from its
 * definition: the hash the header says the key holds. */
static uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Three samples of 3, 0 and 2 tokens from files 0, 1, 1. */
static const int32_t ids3[] = {10, 11, 12, 20, 21};
static const int32_t labels3[] = {-100, 11, 12, -100, 21};
static const int64_t offsets3[] = {0, 3, 3, 5};
static const int32_t source3[] = {0, 1, 1};

static mt_token_data data3(void) {
    return (mt_token_data){.n_samples = 3,
                           .n_tokens = 5,
                           .ids = (int32_t *)ids3,
                           .labels = (int32_t *)labels3,
                           .offsets = (int64_t *)offsets3,
                           .source = (int32_t *)source3,
                           .n_lines = 4,
                           .n_skipped = 1,
                           .n_truncated = 2,
                           .n_dropped = 3,
                           .n_targets = 3};
}

static mt_cache_key key3(void) {
    mt_cache_key k = {.format = MT_TOKEN_CACHE_FORMAT,
                      .data_hash = 0x1111222233334444ull,
                      .tokenizer_hash = 0x5555666677778888ull,
                      .template_hash = 0x9999aaaabbbbccccull,
                      .options_hash = 0xddddeeeeffff0000ull,
                      .max_length = 64};
    snprintf(k.options, sizeof(k.options), "the options, as text");
    return k;
}

static bool same_data(const mt_token_data *a, const mt_token_data *b) {
    return a->n_samples == b->n_samples && a->n_tokens == b->n_tokens &&
           !memcmp(a->ids, b->ids, sizeof(int32_t) * (size_t)a->n_tokens) &&
           !memcmp(a->labels, b->labels, sizeof(int32_t) * (size_t)a->n_tokens) &&
           !memcmp(a->offsets, b->offsets, sizeof(int64_t) * (size_t)(a->n_samples + 1)) &&
           !memcmp(a->source, b->source, sizeof(int32_t) * (size_t)a->n_samples) &&
           a->n_lines == b->n_lines && a->n_skipped == b->n_skipped &&
           a->n_truncated == b->n_truncated && a->n_dropped == b->n_dropped &&
           a->n_targets == b->n_targets;
}

/* Whether dataset name of f has the file type want and n elements (1-D). */
static bool dset_is(hid_t f, const char *name, hid_t want, hsize_t n) {
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) return false;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), t = H5Dget_type(d), sp = H5Dget_space(d);
    hsize_t dims[1] = {0};
    const bool ok = H5Tequal(t, want) > 0 && H5Sget_simple_extent_ndims(sp) == 1 &&
                    H5Sget_simple_extent_dims(sp, dims, NULL) == 1 && dims[0] == n;
    H5Sclose(sp), H5Tclose(t), H5Dclose(d);
    return ok;
}

/* Whether attribute name of f has the file type want (NULL: a string), read into v. */
static bool attr_is(hid_t f, const char *name, hid_t want, hid_t mem, void *v) {
    if (H5Aexists(f, name) <= 0) return false;
    hid_t a = H5Aopen(f, name, H5P_DEFAULT), t = H5Aget_type(a);
    bool ok = want >= 0 ? H5Tequal(t, want) > 0 : H5Tget_class(t) == H5T_STRING;
    ok = ok && H5Aread(a, mem >= 0 ? mem : t, v) >= 0;
    H5Tclose(t), H5Aclose(a);
    return ok;
}

static int test_roundtrip(void) {
    char dir[4096], path[4200], err[MT_ERR_LEN];
    make_tmpdir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/tokens.h5", dir);
    const mt_token_data d = data3();
    const mt_cache_key k = key3();
    EXPECT(mt_token_cache_write(path, &k, &d, err) == 0, "write: %s", err);
    EXPECT(file_exists(path) && count_entries(dir, ".tmp.") == 0, "the file, no temporary one");
    mt_token_data back;
    EXPECT(mt_token_cache_read(path, &k, &back, err) == 0 && same_data(&back, &d),
           "read back with its key: %s", err);
    mt_token_data_free(&back);
    EXPECT(mt_token_cache_read(path, NULL, &back, err) == 0 && same_data(&back, &d),
           "read back with any key: %s", err);
    mt_token_data_free(&back);

    /* the layout of token_cache.h, read with HDF5 itself */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    EXPECT(f >= 0, "not an HDF5 file");
    EXPECT(dset_is(f, "ids", H5T_STD_I32LE, 5) && dset_is(f, "labels", H5T_STD_I32LE, 5) &&
               dset_is(f, "offsets", H5T_STD_I64LE, 4) && dset_is(f, "source", H5T_STD_I32LE, 3),
           "datasets: ids, labels I32 (n_tokens), offsets I64 (n_samples + 1), source I32");
    int64_t i64 = 0;
    uint64_t u64 = 0;
    EXPECT(attr_is(f, "format", H5T_STD_I64LE, H5T_NATIVE_INT64, &i64) &&
               i64 == MT_TOKEN_CACHE_FORMAT,
           "format attribute");
    EXPECT(attr_is(f, "max_length", H5T_STD_I64LE, H5T_NATIVE_INT64, &i64) && i64 == 64,
           "max_length attribute");
    const char *hashes[] = {"data_hash", "tokenizer_hash", "template_hash", "options_hash"};
    const uint64_t want_hash[] = {k.data_hash, k.tokenizer_hash, k.template_hash, k.options_hash};
    for (int i = 0; i < 4; i++)
        EXPECT(attr_is(f, hashes[i], H5T_STD_U64LE, H5T_NATIVE_UINT64, &u64) && u64 == want_hash[i],
               "%s attribute (U64)", hashes[i]);
    const char *counts[] = {"n_lines", "n_skipped", "n_truncated", "n_dropped", "n_targets"};
    const int64_t want_count[] = {4, 1, 2, 3, 3};
    for (int i = 0; i < 5; i++)
        EXPECT(attr_is(f, counts[i], H5T_STD_I64LE, H5T_NATIVE_INT64, &i64) && i64 == want_count[i],
               "%s attribute (I64)", counts[i]);
    char options[1024] = "";
    EXPECT(attr_is(f, "options", -1, -1, options) && !strcmp(options, k.options),
           "options attribute: \"%s\"", options);
    if (f >= 0) H5Fclose(f);

    /* written again over it: replaced whole */
    mt_token_data d2 = d;
    d2.n_samples = 1, d2.n_tokens = 3, d2.n_targets = 2;
    const int64_t off2[] = {0, 3};
    d2.offsets = (int64_t *)off2;
    EXPECT(mt_token_cache_write(path, &k, &d2, err) == 0, "rewrite: %s", err);
    EXPECT(mt_token_cache_read(path, &k, &back, err) == 0 && same_data(&back, &d2), "rewritten");
    mt_token_data_free(&back);
    EXPECT(count_entries(dir, ".tmp.") == 0, "a temporary file left");

    /* a write that cannot create its file: one line naming the temporary file, nothing left */
    char bad[4300], want[4400];
    snprintf(bad, sizeof(bad), "%s/missing/tokens.h5", dir);
    capture_begin(STDERR_FILENO);
    const int rc = mt_token_cache_write(bad, &k, &d, err);
    char *printed = capture_end();
    snprintf(want, sizeof(want), "%s.tmp.%ld: cannot create the token cache (HDF5: ", bad,
             (long)getpid());
    EXPECT(rc == -1 && !strncmp(err, want, strlen(want)) && !strchr(err, '\n'),
           "a directory that is not there: \"%s\"", err);
    EXPECT(!printed[0], "HDF5 printed: %s", printed);
    free(printed);
    rm_tree(dir);
    return MT_TEST_OK;
}

static int test_key(void) {
    char dir[4096], path[4200], err[MT_ERR_LEN], want[4400];
    make_tmpdir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/tokens.h5", dir);
    const mt_token_data d = data3();
    const mt_cache_key k = key3();
    EXPECT(mt_token_cache_write(path, &k, &d, err) == 0, "write: %s", err);
    /* each part of the key, changed alone: refused (1) naming it */
    const char *part[] = {"cache format",  "data file",  "tokenizer.json",
                          "chat template", "max_length", "options"};
    for (int i = 0; i < 6; i++) {
        mt_cache_key other = k;
        if (i == 0) other.format++;
        if (i == 1) other.data_hash ^= 1;
        if (i == 2) other.tokenizer_hash ^= 1;
        if (i == 3) other.template_hash ^= 1;
        if (i == 4) other.max_length++;
        if (i == 5) other.options_hash ^= 1;
        mt_token_data back;
        snprintf(want, sizeof(want), "%s: built for another %s", path, part[i]);
        EXPECT(mt_token_cache_read(path, &other, &back, err) == 1 && !strcmp(err, want),
               "another %s: \"%s\"", part[i], err);
        EXPECT(!back.ids && back.n_samples == 0, "a refused read left data");
    }

    /* the key of a configuration */
    char data[4200], copy[4200], tok[4200];
    snprintf(data, sizeof(data), "%s/a.jsonl", dir);
    snprintf(copy, sizeof(copy), "%s/b.jsonl", dir);
    write_text(data, "{\"question\": \"1 + 1?\", \"answer\": \"2\\n#### 2\"}\n");
    write_text(copy, "{\"question\": \"2 + 2?\", \"answer\": \"4\\n#### 4\"}\n");
    mt_token_cache_cfg cfg = {.data_path = data, .tokenizer_dir = tokenizer_dir()};
    mt_sample_opts_default(&cfg.sample);
    cfg.sample.max_length = 64;
    mt_chat_template *t = mt_token_cache_template(&cfg, err);
    EXPECT(t, "template: %s", err);
    if (!t) return MT_TEST_OK;
    mt_cache_key key, key2;
    EXPECT(mt_token_cache_key(&cfg, t, &key, err) == 0, "key: %s", err);
    snprintf(tok, sizeof(tok), "%s/tokenizer.json", tokenizer_dir());
    size_t len;
    char *text = mt_file_read(tok, &len, err);
    EXPECT(text && key.tokenizer_hash == fnv1a(text, len, 0xcbf29ce484222325ull),
           "tokenizer_hash: the FNV-1a of tokenizer.json's bytes");
    free(text);
    EXPECT(key.format == MT_TOKEN_CACHE_FORMAT && key.max_length == 64, "format, max_length");
    EXPECT(key.options_hash == fnv1a(key.options, strlen(key.options), 0xcbf29ce484222325ull),
           "options_hash: the FNV-1a of the options text \"%s\"", key.options);
    /* what the options cover, named in the text the cache keeps (token_cache.h) */
    const char *named[] = {
        "format=",     "max_length=64", "policy=drop", "strip_annotations=0", "skip_bad=0",
        "system=none", "data_format=",  "train_on=",   "reasoning_history=",  "files=1",
        "weights=none"};
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
        EXPECT(strstr(key.options, named[i]), "options \"%s\" lacks %s", key.options, named[i]);
    /* the data hash is of the files' bytes, in order: another name, the same bytes, the same
     * key; another byte or another order, another */
    const char *both[2] = {data, copy}, *swapped[2] = {copy, data};
    mt_token_cache_cfg c2 = cfg;
    c2.data_path = copy;
    EXPECT(mt_token_cache_key(&c2, t, &key2, err) == 0 && key2.data_hash != key.data_hash,
           "another file's bytes: another data hash");
    write_text(copy, "{\"question\": \"1 + 1?\", \"answer\": \"2\\n#### 2\"}\n");
    EXPECT(mt_token_cache_key(&c2, t, &key2, err) == 0 && key2.data_hash == key.data_hash &&
               key2.options_hash == key.options_hash,
           "the same bytes under another name: the same key");
    write_text(copy, "{\"question\": \"2 + 2?\", \"answer\": \"4\\n#### 4\"}\n");
    c2 = cfg;
    c2.data_paths = both, c2.n_data_paths = 2;
    mt_cache_key key_swapped = {0};
    EXPECT(mt_token_cache_key(&c2, t, &key2, err) == 0, "two files: %s", err);
    c2.data_paths = swapped;
    EXPECT(mt_token_cache_key(&c2, t, &key_swapped, err) == 0 &&
               key_swapped.data_hash != key2.data_hash,
           "the files' order is part of the data hash");
    EXPECT(strstr(key2.options, "files=2") && key2.options_hash != key.options_hash,
           "the number of files is an option: %s", key2.options);
    /* a data file that cannot be read: an error naming it, no key */
    c2 = cfg;
    c2.data_path = "/nonexistent/data.jsonl";
    EXPECT(mt_token_cache_key(&c2, t, &key2, err) == -1 && strstr(err, "/nonexistent/data.jsonl"),
           "a missing data file: \"%s\"", err);
    mt_chat_template_free(t);
    rm_tree(dir);
    return MT_TEST_OK;
}

/* The read of path with want, refused: rc and one line starting with prefix (after path). */
static void expect_refused(const char *path, const mt_cache_key *want, int rc_want,
                           const char *prefix) {
    char err[MT_ERR_LEN], line[4400];
    mt_token_data back;
    capture_begin(STDERR_FILENO);
    const int rc = mt_token_cache_read(path, want, &back, err);
    char *printed = capture_end();
    snprintf(line, sizeof(line), "%s: %s", path, prefix);
    EXPECT(rc == rc_want && !strncmp(err, line, strlen(line)) && !strchr(err, '\n'),
           "want %d \"%s...\", got %d \"%s\"", rc_want, line, rc, err);
    EXPECT(!printed[0], "printed on stderr: %s", printed);
    EXPECT(!back.ids && !back.offsets && back.n_samples == 0, "a refused read left data");
    free(printed);
}

static int test_damaged(void) {
    char dir[4096], path[4200], cut[4200], err[MT_ERR_LEN];
    make_tmpdir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/tokens.h5", dir);
    const mt_cache_key k = key3();
    expect_refused(path, &k, 1, "no cache file");
    write_text(path, "not an HDF5 file\n");
    expect_refused(path, &k, 1, "not a readable HDF5 file (HDF5: ");
    expect_refused(path, NULL, 1, "not a readable HDF5 file (HDF5: ");
    /* a cache cut in half, as a full disk or a killed copy would leave it */
    const mt_token_data d = data3();
    EXPECT(mt_token_cache_write(path, &k, &d, err) == 0, "write: %s", err);
    size_t len;
    char *bytes = mt_file_read(path, &len, err);
    snprintf(cut, sizeof(cut), "%s/cut.h5", dir);
    write_bytes(cut, bytes, len / 2);
    free(bytes);
    expect_refused(cut, &k, 1, "not a readable HDF5 file (HDF5: ");
    /* an HDF5 file that is not a token cache */
    hid_t f = H5Fcreate(cut, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
    expect_refused(cut, &k, 1, "not a token cache (attributes missing)");
    /* the right key over data that do not hold together: an error (-1), not a stale cache */
    const int64_t past_end[] = {0, 3, 3, 6}, backwards[] = {0, 4, 3, 5};
    const int32_t negative[] = {0, -1, 1};
    for (int i = 0; i < 3; i++) {
        mt_token_data bad = d;
        if (i == 0) bad.offsets = (int64_t *)past_end;
        if (i == 1) bad.offsets = (int64_t *)backwards;
        if (i == 2) bad.source = (int32_t *)negative;
        EXPECT(mt_token_cache_write(path, &k, &bad, err) == 0, "write: %s", err);
        expect_refused(path, &k, -1, "the token cache is inconsistent");
    }
    rm_tree(dir);
    return MT_TEST_OK;
}

static int open_cache(const mt_token_cache_cfg *cfg, mt_token_data *d) {
    char err[MT_ERR_LEN];
    bool reused = false;
    mt_token_data_free(d);
    if (mt_token_cache_open(cfg, d, &reused, err) != 0) {
        printf("  open: %s\n", err);
        return -1;
    }
    return reused;
}

static int test_open(void) {
    char dir[4096], data[4200], cache[4200], err[MT_ERR_LEN];
    make_tmpdir(dir, sizeof(dir));
    snprintf(data, sizeof(data), "%s/data.jsonl", dir);
    snprintf(cache, sizeof(cache), "%s/tokens.h5", dir);
    write_text(data, "{\"question\": \"1 + 1?\", \"answer\": \"2\\n#### 2\"}\n"
                     "{\"question\": \"2 + 3?\", \"answer\": \"5\\n#### 5\"}\n");
    mt_token_cache_cfg cfg = {
        .data_path = data, .tokenizer_dir = tokenizer_dir(), .cache_path = cache};
    mt_sample_opts_default(&cfg.sample);
    mt_token_data d = {0}, first = {0};
    EXPECT(open_cache(&cfg, &first) == 0 && file_exists(cache), "first open: built");
    EXPECT(first.n_samples == 2 && first.n_lines == 2 && first.n_targets > 0, "two samples: %lld",
           (long long)first.n_samples);
    EXPECT(open_cache(&cfg, &d) == 1 && same_data(&d, &first), "the same inputs: reused");
    mt_cache_key key;
    mt_chat_template *t = mt_token_cache_template(&cfg, err);
    EXPECT(t && mt_token_cache_key(&cfg, t, &key, err) == 0, "key: %s", err);
    mt_chat_template_free(t);
    mt_token_data back = {0};
    EXPECT(mt_token_cache_read(cache, &key, &back, err) == 0 && same_data(&back, &first),
           "the file holds the configuration's key: %s", err);
    mt_token_data_free(&back);
    /* force: rebuilt though it matches */
    cfg.force = true;
    EXPECT(open_cache(&cfg, &d) == 0 && same_data(&d, &first), "force: rebuilt, the same data");
    cfg.force = false;
    /* another max_length: rebuilt; the old key no longer reads it */
    cfg.sample.max_length = 256;
    EXPECT(open_cache(&cfg, &d) == 0, "max_length: rebuilt");
    EXPECT(mt_token_cache_read(cache, &key, &back, err) == 1 && strstr(err, "another max_length"),
           "the old key: \"%s\"", err);
    EXPECT(open_cache(&cfg, &d) == 1, "then reused");
    /* one byte of the data changed: rebuilt with the new sample */
    write_text(data, "{\"question\": \"1 + 1?\", \"answer\": \"2\\n#### 2\"}\n"
                     "{\"question\": \"2 + 4?\", \"answer\": \"6\\n#### 6\"}\n");
    EXPECT(open_cache(&cfg, &d) == 0 && d.n_samples == 2 && !same_data(&d, &first),
           "changed data: rebuilt");
    /* a damaged file: rebuilt, not an error, and whole again */
    write_text(cache, "damaged");
    EXPECT(open_cache(&cfg, &d) == 0 && d.n_samples == 2, "a damaged cache: rebuilt");
    EXPECT(open_cache(&cfg, &d) == 1, "and reused after");
    EXPECT(count_entries(dir, ".tmp.") == 0, "a temporary file left");
    mt_token_data_free(&d);
    mt_token_data_free(&first);
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_token_cache_roundtrip", test_roundtrip},
    {"data_token_cache_key", test_key},
    {"data_token_cache_damaged", test_damaged},
    {"data_token_cache_open", test_open},
};
MT_TEST_MAIN(cases)
