/* data_token_cache_head.c: the head columns of the token cache (data/token_cache.h):
 *   data_token_cache_head  a hand-built dataset with integer targets, float targets and both
 *                          (widths 1 to 3) written and read back equal, in the documented layout
 *                          (/head_i32 I32 and /head_f32 F32 of (n_samples, width), an "objective"
 *                          I32 attribute); an SFT cache has no head dataset and no objective
 *                          attribute (the same 4 datasets and 12 attributes as before heads); a
 *                          file whose /head_f32 has the wrong number of rows or rank, a head
 *                          dataset without an objective, or an objective that names none:
 *                          refused as inconsistent (-1) naming it; head columns without an
 *                          objective are not written. */
#include "tests/support/harness.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/head_data.h"
#include "data/token_cache.h"
#include "tests/support/capture.h"
#include "tests/support/data_util.h"

/* Three samples of 3, 0 and 2 tokens from files 0, 1, 1. */
static const int32_t ids3[] = {10, 11, 12, 20, 21};
static const int32_t labels3[] = {-100, -100, -100, -100, -100};
static const int64_t offsets3[] = {0, 3, 3, 5};
static const int32_t source3[] = {0, 1, 1};

static mt_token_data data3(void) {
    return (mt_token_data){.n_samples = 3,
                           .n_tokens = 5,
                           .ids = (int32_t *)ids3,
                           .labels = (int32_t *)labels3,
                           .offsets = (int64_t *)offsets3,
                           .source = (int32_t *)source3,
                           .n_lines = 3};
}

static mt_cache_key key3(void) {
    mt_cache_key k = {.format = MT_TOKEN_CACHE_FORMAT, .data_hash = 1, .max_length = 64};
    snprintf(k.options, sizeof(k.options), "the options");
    return k;
}

static bool same_heads(const mt_token_data *a, const mt_token_data *b) {
    const size_t ni = (size_t)(a->n_samples * a->i32_width),
                 nf = (size_t)(a->n_samples * a->f32_width);
    return a->objective == b->objective && a->i32_width == b->i32_width &&
           a->f32_width == b->f32_width && a->n_samples == b->n_samples &&
           a->n_tokens == b->n_tokens && (a->head_i32 != NULL) == (b->head_i32 != NULL) &&
           (a->head_f32 != NULL) == (b->head_f32 != NULL) &&
           (!ni || !memcmp(a->head_i32, b->head_i32, ni * sizeof(int32_t))) &&
           (!nf || !memcmp(a->head_f32, b->head_f32, nf * sizeof(float))) &&
           !memcmp(a->ids, b->ids, sizeof(int32_t) * (size_t)a->n_tokens) &&
           !memcmp(a->offsets, b->offsets, sizeof(int64_t) * (size_t)(a->n_samples + 1));
}

/* Whether dataset name of f is 2-D (rows, cols) of file type want. */
static bool dset2_is(hid_t f, const char *name, hid_t want, hsize_t rows, hsize_t cols) {
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) return false;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), t = H5Dget_type(d), sp = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    const bool ok = H5Tequal(t, want) > 0 && H5Sget_simple_extent_ndims(sp) == 2 &&
                    H5Sget_simple_extent_dims(sp, dims, NULL) == 2 && dims[0] == rows &&
                    dims[1] == cols;
    H5Sclose(sp), H5Tclose(t), H5Dclose(d);
    return ok;
}

static herr_t count_attr(hid_t loc, const char *name, const H5A_info_t *info, void *n) {
    (void)loc, (void)name, (void)info;
    ++*(int *)n;
    return 0;
}

/* The root group's number of links (datasets) and attributes. */
static void root_counts(const char *path, int *links, int *attrs) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5G_info_t gi = {0};
    H5Gget_info(f, &gi);
    *links = (int)gi.nlinks;
    *attrs = 0;
    hsize_t idx = 0;
    H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, count_attr, attrs);
    H5Fclose(f);
}

/* Replaces dataset name of path by a float one of the given dims (rank 1 or 2). */
static void replace_f32(const char *path, const char *name, int rank, hsize_t d0, hsize_t d1) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (H5Lexists(f, name, H5P_DEFAULT) > 0) H5Ldelete(f, name, H5P_DEFAULT);
    hsize_t dims[2] = {d0, d1};
    float zeros[64] = {0};
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros);
    H5Dclose(d), H5Sclose(sp), H5Fclose(f);
}

/* The read of path: -1 and one line "<path>: the token cache is inconsistent..." naming what. */
static void expect_inconsistent(const char *path, const char *what) {
    char err[MT_ERR_LEN], want[4400];
    mt_token_data back;
    capture_begin(STDERR_FILENO);
    const mt_cache_key k = key3();
    const int rc = mt_token_cache_read(path, &k, &back, err);
    char *printed = capture_end();
    snprintf(want, sizeof(want), "%s: the token cache is inconsistent", path);
    EXPECT(rc == -1 && !strncmp(err, want, strlen(want)) && strstr(err + strlen(want), what) &&
               !strchr(err, '\n'),
           "want -1 \"%s...%s...\", got %d \"%s\"", want, what, rc, err);
    EXPECT(!printed[0], "printed on stderr: %s", printed);
    EXPECT(!back.ids && !back.head_i32 && !back.head_f32 && back.n_samples == 0,
           "a refused read left data");
    free(printed);
}

static int test_head(void) {
    char dir[4096], path[4200], err[MT_ERR_LEN];
    make_tmpdir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/tokens.h5", dir);
    const mt_cache_key k = key3();
    mt_token_data back;

    /* an SFT cache: the datasets and attributes it always had, nothing more */
    const mt_token_data sft = data3();
    EXPECT(mt_token_cache_write(path, &k, &sft, err) == 0, "write: %s", err);
    int links = 0, attrs = 0;
    root_counts(path, &links, &attrs);
    EXPECT(links == 4 && attrs == 12,
           "an SFT cache: 4 datasets (ids, labels, offsets, source) and 12 attributes, got %d "
           "and %d",
           links, attrs);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    EXPECT(H5Lexists(f, "head_i32", H5P_DEFAULT) == 0 &&
               H5Lexists(f, "head_f32", H5P_DEFAULT) == 0 && H5Aexists(f, "objective") == 0,
           "an SFT cache with head datasets or an objective attribute");
    H5Fclose(f);
    EXPECT(mt_token_cache_read(path, &k, &back, err) == 0 && same_heads(&back, &sft) &&
               back.objective == 0 && !back.head_i32 && !back.head_f32,
           "SFT read back: %s", err);
    mt_token_data_free(&back);

    /* each column kind: integer (QA's start / end), float (3 regression targets), both */
    const int32_t i32[] = {0, 2, -100, -100, 1, 1};
    const float f32[] = {0.5f, -1.25f, 3e-7f, 1e30f, -0.0f, 2.0f, 7.0f, -8.5f, 0.125f};
    const struct {
        int32_t objective, iw, fw;
    } kinds[] = {{MT_OBJECTIVE_QUESTION_ANSWERING, 2, 0},
                 {MT_OBJECTIVE_CLASSIFICATION, 0, 3},
                 {MT_OBJECTIVE_REWARD, 2, 1}};
    for (int c = 0; c < 3; c++) {
        mt_token_data d = data3();
        d.objective = kinds[c].objective;
        d.i32_width = kinds[c].iw, d.f32_width = kinds[c].fw;
        d.head_i32 = kinds[c].iw ? (int32_t *)i32 : NULL;
        d.head_f32 = kinds[c].fw ? (float *)f32 : NULL;
        EXPECT(mt_token_cache_write(path, &k, &d, err) == 0, "write kind %d: %s", c, err);
        EXPECT(mt_token_cache_read(path, &k, &back, err) == 0 && same_heads(&back, &d),
               "kind %d (i32 width %d, f32 width %d) read back: %s (objective %d, widths %d %d)", c,
               d.i32_width, d.f32_width, err, back.objective, back.i32_width, back.f32_width);
        mt_token_data_free(&back);
        EXPECT(mt_token_cache_read(path, NULL, &back, err) == 0 && same_heads(&back, &d),
               "kind %d read back with any key: %s", c, err);
        mt_token_data_free(&back);
        f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        int32_t obj = -1;
        hid_t a = H5Aopen(f, "objective", H5P_DEFAULT), t = H5Aget_type(a);
        EXPECT(H5Tequal(t, H5T_STD_I32LE) > 0 && H5Aread(a, H5T_NATIVE_INT32, &obj) >= 0 &&
                   obj == d.objective,
               "kind %d: the objective attribute (I32) %d", c, obj);
        H5Tclose(t), H5Aclose(a);
        EXPECT(d.i32_width ? dset2_is(f, "head_i32", H5T_STD_I32LE, 3, (hsize_t)d.i32_width)
                           : H5Lexists(f, "head_i32", H5P_DEFAULT) == 0,
               "kind %d: /head_i32 I32 (3, %d) or none", c, d.i32_width);
        EXPECT(d.f32_width ? dset2_is(f, "head_f32", H5T_IEEE_F32LE, 3, (hsize_t)d.f32_width)
                           : H5Lexists(f, "head_f32", H5P_DEFAULT) == 0,
               "kind %d: /head_f32 F32 (3, %d) or none", c, d.f32_width);
        H5Fclose(f);
    }
    /* token classification: an objective with no head column (its targets are the labels) */
    mt_token_data tc = data3();
    tc.objective = MT_OBJECTIVE_TOKEN_CLASSIFICATION;
    EXPECT(mt_token_cache_write(path, &k, &tc, err) == 0 &&
               mt_token_cache_read(path, &k, &back, err) == 0 && same_heads(&back, &tc),
           "an objective without head columns: %s", err);
    mt_token_data_free(&back);

    /* damaged head columns: inconsistent, naming the dataset */
    mt_token_data rw = data3();
    rw.objective = MT_OBJECTIVE_REWARD, rw.f32_width = 1, rw.head_f32 = (float *)f32;
    EXPECT(mt_token_cache_write(path, &k, &rw, err) == 0, "write: %s", err);
    replace_f32(path, "head_f32", 2, 4, 1); /* 4 rows for 3 samples */
    expect_inconsistent(path, "/head_f32 is (4, 1)");
    replace_f32(path, "head_f32", 2, 2, 1);
    expect_inconsistent(path, "/head_f32 is (2, 1)");
    replace_f32(path, "head_f32", 1, 3, 0); /* flat, no width */
    expect_inconsistent(path, "/head_f32 is (3)");
    replace_f32(path, "head_f32", 2, 3, 0); /* no column */
    expect_inconsistent(path, "/head_f32 is (3, 0)");
    /* a head dataset in a file without an objective attribute */
    EXPECT(mt_token_cache_write(path, &k, &sft, err) == 0, "write: %s", err);
    replace_f32(path, "head_i32", 2, 3, 1);
    expect_inconsistent(path, "/head_i32 without an objective");
    /* an objective attribute that names no head objective */
    EXPECT(mt_token_cache_write(path, &k, &rw, err) == 0, "write: %s", err);
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    const int32_t bad = MT_OBJECTIVE_COUNT;
    hid_t a = H5Aopen(f, "objective", H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT32, &bad);
    H5Aclose(a), H5Fclose(f);
    expect_inconsistent(path, "objective");

    /* head columns without an objective, or a width without values: not written */
    mt_token_data no_obj = data3();
    no_obj.i32_width = 1, no_obj.head_i32 = (int32_t *)i32;
    remove(path);
    EXPECT(mt_token_cache_write(path, &k, &no_obj, err) == -1 && strstr(err, "/head_i32") &&
               strstr(err, "no objective") && !file_exists(path),
           "head columns without an objective: \"%s\"", err);
    mt_token_data no_vals = data3();
    no_vals.objective = MT_OBJECTIVE_CLASSIFICATION, no_vals.f32_width = 2;
    EXPECT(mt_token_cache_write(path, &k, &no_vals, err) == -1 && strstr(err, "/head_f32") &&
               !file_exists(path),
           "a width without values: \"%s\"", err);
    EXPECT(count_entries(dir, ".tmp.") == 0, "a temporary file left");
    rm_tree(dir);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"data_token_cache_head", test_head},
};
MT_TEST_MAIN(cases)
