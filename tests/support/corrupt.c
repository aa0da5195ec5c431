/* corrupt.c: damages one value of a checkpoint file in place, for tests/train/run_resume.sh
 * (resume-check), which must then see the damage refused by name.
 *   corrupt h5 FILE DATASET INDEX   flips the lowest bit of element INDEX of a 1-D float
 *                                   dataset, in the file's bytes (its first chunk when it is
 *                                   chunked; a format-1 checkpoint's are contiguous)
 *   corrupt safetensors FILE        flips the lowest bit of the float in the middle of the
 *                                   data section */
#include <fcntl.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int flip(const char *path, long long offset) {
    int fd = open(path, O_RDWR);
    uint8_t byte;
    if (fd < 0 || pread(fd, &byte, 1, offset) != 1) {
        fprintf(stderr, "corrupt: cannot read %s at %lld\n", path, offset);
        return 1;
    }
    byte ^= 1;
    if (pwrite(fd, &byte, 1, offset) != 1 || close(fd) != 0) {
        fprintf(stderr, "corrupt: cannot write %s\n", path);
        return 1;
    }
    printf("corrupt: flipped a bit of %s at byte %lld\n", path, offset);
    return 0;
}

static int corrupt_h5(const char *path, const char *name, long long index) {
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = file < 0 ? -1 : H5Dopen2(file, name, H5P_DEFAULT);
    hid_t dcpl = dset < 0 ? -1 : H5Dget_create_plist(dset);
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0, offset[1] = {0};
    unsigned mask = 0;
    hid_t space = dset < 0 ? -1 : H5Dget_space(dset);
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS) { /* format 1: no checksums */
        addr = H5Dget_offset(dset);
        size = H5Dget_storage_size(dset);
    } else if (space >= 0) {
        H5Dget_chunk_info(dset, space, 0, offset, &mask, &addr, &size);
    }
    if (space < 0 || addr == HADDR_UNDEF || (hsize_t)(4 * index + 4) > size) {
        fprintf(stderr, "corrupt: %s: no chunk holding element %lld of %s\n", path, index, name);
        return 1;
    }
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Dclose(dset);
    H5Fclose(file);
    return flip(path, (long long)addr + 4 * index); /* the data (then a chunk's checksum) */
}

static int corrupt_safetensors(const char *path) {
    FILE *f = fopen(path, "rb");
    uint64_t header = 0;
    if (!f || fread(&header, 8, 1, f) != 1 || fseek(f, 0, SEEK_END) != 0) {
        fprintf(stderr, "corrupt: cannot read %s\n", path);
        return 1;
    }
    const long long size = ftell(f), data = 8 + (long long)header;
    fclose(f);
    return flip(path, data + (size - data) / 8 * 4); /* a float boundary halfway */
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "h5")) return corrupt_h5(argv[2], argv[3], atoll(argv[4]));
    if (argc == 3 && !strcmp(argv[1], "safetensors")) return corrupt_safetensors(argv[2]);
    fprintf(stderr, "usage: corrupt h5 FILE DATASET INDEX | corrupt safetensors FILE\n");
    return 2;
}
