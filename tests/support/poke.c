/* poke.c: writes chosen values into saved files, for the tests of what a damaged or diverged
 * checkpoint does (tests/train/dist_nonfinite.sh):
 *   test_poke st FILE TENSOR FIRST COUNT VALUE   F32 elements [FIRST, FIRST + COUNT) of a
 *                                                safetensors tensor (COUNT -1: to its end),
 *                                                and the data digest of the header, if it has
 *                                                one, to match (a file saved with these values)
 *   test_poke h5 FILE DATASET INDEX VALUE        one float element of an HDF5 dataset, written
 *                                                through HDF5 (so its filters, a checksum
 *                                                included, stay consistent)
 *   test_poke h5u64 FILE ATTR VALUE             a uint64 attribute of the file's root: VALUE in
 *                                                hex, or @PATH for PATH's FNV-1a digest (what a
 *                                                manifest records of its recipe.toml)
 * VALUE as strtof reads it: nan, inf, 1e30. */
#include <fcntl.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "core/file_io.h"
#include "models/safetensors.h"

/* The digest models/safetensors.c records in the header (MT_ST_DIGEST_KEY), recomputed over
 * the data section as it is now and written over the old one's hex digits (same length). */
static void digest_update(int fd, const char *file, uint64_t hlen) {
    const off_t size = lseek(fd, 0, SEEK_END);
    char *buf = mt_malloc((size_t)size, file);
    MT_CHECK(pread(fd, buf, (size_t)size, 0) == size, "%s: cannot read", file);
    const char key[] = "\"" MT_ST_DIGEST_KEY "\":\"" MT_ST_DIGEST_ALGO ":";
    const char *at = memmem(buf + 8, hlen, key, strlen(key));
    if (at) {
        char hex[17];
        snprintf(hex, sizeof(hex), "%016llx",
                 (unsigned long long)mt_digest64(buf + 8 + hlen, (size_t)size - 8 - hlen));
        MT_CHECK(pwrite(fd, hex, 16, (off_t)(at + strlen(key) - buf)) == 16, "%s: cannot write",
                 file);
    }
    free(buf);
}

static int poke_st(const char *file, const char *name, long long first, long long count, float v) {
    mt_safetensors *st = mt_safetensors_open(file);
    const mt_st_tensor *t = mt_safetensors_find(st, name);
    MT_CHECK(t && t->dtype == MT_ST_F32, "%s: no F32 tensor %s", file, name);
    if (count < 0) count = t->numel - first;
    MT_CHECK(first >= 0 && first + count <= t->numel, "%s: %s has %lld elements", file, name,
             (long long)t->numel);
    const uint64_t begin = t->begin;
    mt_safetensors_close(st);
    int fd = open(file, O_RDWR);
    MT_CHECK(fd >= 0, "cannot open %s", file);
    uint64_t hlen = 0;
    MT_CHECK(pread(fd, &hlen, 8, 0) == 8, "%s: cannot read the header length", file);
    for (long long i = 0; i < count; i++) {
        const off_t at = (off_t)(8 + hlen + begin + 4 * (uint64_t)(first + i));
        MT_CHECK(pwrite(fd, &v, 4, at) == 4, "%s: cannot write", file);
    }
    digest_update(fd, file, hlen);
    close(fd);
    return 0;
}

static int poke_h5(const char *file, const char *dataset, long long index, float v) {
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    MT_CHECK(f >= 0, "cannot open %s as HDF5", file);
    hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
    MT_CHECK(d >= 0, "%s: no dataset %s", file, dataset);
    hid_t fs = H5Dget_space(d);
    hsize_t start = (hsize_t)index, one = 1;
    MT_CHECK(H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &one, NULL) >= 0,
             "%s: %s has no element %lld", file, dataset, index);
    hid_t ms = H5Screate_simple(1, &one, NULL);
    MT_CHECK(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &v) >= 0, "%s: cannot write %s",
             file, dataset);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    MT_CHECK(H5Fclose(f) >= 0, "cannot close %s", file);
    return 0;
}

static int poke_h5u64(const char *file, const char *name, const char *value) {
    uint64_t v = 0;
    char err[MT_ERR_LEN];
    if (value[0] == '@')
        MT_CHECK(mt_file_hash(value + 1, &v, err) == 0, "%s", err);
    else
        v = strtoull(value, NULL, 16);
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    MT_CHECK(f >= 0, "cannot open %s", file);
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    MT_CHECK(a >= 0, "%s: no attribute %s", file, name);
    MT_CHECK(H5Awrite(a, H5T_NATIVE_UINT64, &v) >= 0, "%s: cannot write %s", file, name);
    H5Aclose(a);
    MT_CHECK(H5Fclose(f) >= 0, "cannot close %s", file);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 7 && !strcmp(argv[1], "st"))
        return poke_st(argv[2], argv[3], atoll(argv[4]), atoll(argv[5]), strtof(argv[6], NULL));
    if (argc == 6 && !strcmp(argv[1], "h5"))
        return poke_h5(argv[2], argv[3], atoll(argv[4]), strtof(argv[5], NULL));
    if (argc == 5 && !strcmp(argv[1], "h5u64")) return poke_h5u64(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: test_poke st FILE TENSOR FIRST COUNT VALUE | "
                    "h5 FILE DATASET INDEX VALUE | h5u64 FILE ATTR HEX|@PATH\n");
    return 2;
}
