/* checkpoint.c: see checkpoint.h. */
#include "checkpoint.h"

#include <hdf5.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autograd/check.h"
#include "data/hdf5_error.h"

/* An HDF5 call failed: the message, then HDF5's reason ("Write failed: No space left on
 * device"), kept since mt_checkpoint_save or _load began (data/hdf5_error.h; every failure
 * here ends the job, so the first one kept is the one reported). */
MT_NORETURN static void checkpoint_die(const char *file, int line, const char *fmt, ...)
    MT_PRINTF(3, 4);
static void checkpoint_die(const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    mt_die_at(file, line, "%s (HDF5: %s)", msg, mt_hdf5_error_reason());
}
#define H5_CHECK(expr, ...)                                                                        \
    do {                                                                                           \
        if ((expr) < 0) checkpoint_die(__FILE__, __LINE__, __VA_ARGS__);                           \
    } while (0)

static const char *state_arrays[3] = {"master", "m", "v"};

static float *zero_array(mt_zero *z, int which) {
    return which == 0 ? z->master : which == 1 ? z->m : z->v;
}
/* in the backend's device memory (else host memory: the CPU backend, offloaded moments, a host
 * master) */
static bool zero_array_on_device(const mt_zero *z, int which) {
    return z->be->dev != MT_CPU && !(which > 0 ? z->offload : z->master_on_host);
}

static void attr_write(hid_t file, const char *name, hid_t type, const void *value, size_t n) {
    hsize_t dims = n;
    hid_t space = H5Screate_simple(1, &dims, NULL);
    hid_t attr = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(attr, "checkpoint: cannot create attribute %s", name);
    H5_CHECK(H5Awrite(attr, type, value), "checkpoint: cannot write attribute %s", name);
    H5Aclose(attr);
    H5Sclose(space);
}

static void attr_read(hid_t file, const char *path, const char *name, hid_t type, void *value) {
    hid_t attr = H5Aopen(file, name, H5P_DEFAULT);
    H5_CHECK(attr, "%s: attribute %s is missing (not a minimax-train checkpoint?)", path, name);
    H5_CHECK(H5Aread(attr, type, value), "%s: cannot read attribute %s", path, name);
    H5Aclose(attr);
}

static hid_t checkpoint_fapl(mt_zero *z) {
    (void)z;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5_CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL), "checkpoint: MPI-IO setup");
    return fapl;
}

/* Reads or writes this rank's owned range of every bucket array, collectively. Device shards
 * go through one host buffer of the largest shard; host ones (offloaded m, v) directly. */
static void checkpoint_transfer(hid_t file, const char *path, mt_zero *z, bool write) {
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    const bool staged = z->be->dev != MT_CPU;
    float *host = NULL;
    if (staged) {
        int64_t most = 1;
        for (int b = 0; b < z->n_buckets; b++)
            if (z->shard_numel[b] > most) most = z->shard_numel[b];
        host = mt_malloc(sizeof(float) * (size_t)most, "checkpoint staging");
    }
    for (int b = 0; b < z->n_buckets; b++) {
        int64_t lo, hi;
        mt_zero_owned_range(z, b, &lo, &hi);
        for (int a = 0; a < 3; a++) {
            char name[64];
            snprintf(name, sizeof(name), "bucket_%04d_%s", b, state_arrays[a]);
            hsize_t dims = (hsize_t)z->numel[b];
            hid_t fspace = H5Screate_simple(1, &dims, NULL), dset;
            if (write) {
                dset = H5Dcreate2(file, name, H5T_NATIVE_FLOAT, fspace, H5P_DEFAULT, H5P_DEFAULT,
                                  H5P_DEFAULT);
                H5_CHECK(dset, "%s: cannot create dataset %s", path, name);
            } else {
                dset = H5Dopen2(file, name, H5P_DEFAULT);
                H5_CHECK(dset, "%s: dataset %s is missing", path, name);
                hid_t s = H5Dget_space(dset);
                hsize_t got = 0;
                H5Sget_simple_extent_dims(s, &got, NULL);
                H5Sclose(s);
                MT_CHECK(got == dims,
                         "%s: dataset %s has %llu elements but this model's bucket has %llu "
                         "(a checkpoint of another model or layer count?)",
                         path, name, (unsigned long long)got, (unsigned long long)dims);
            }
            hsize_t start = (hsize_t)lo, count = (hsize_t)(hi - lo);
            hid_t mspace = H5Screate_simple(1, &count, NULL);
            if (count)
                H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &count, NULL);
            else {
                H5Sselect_none(fspace);
                H5Sselect_none(mspace);
            }
            const bool via_host = zero_array_on_device(z, a);
            float *shard = zero_array(z, a) + z->shard_offset[b], *buf = via_host ? host : shard;
            size_t bytes = sizeof(float) * (size_t)count;
            if (write && via_host) z->be->to_host(host, shard, bytes);
            herr_t rc = write ? H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace, fspace, dxpl, buf)
                              : H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fspace, dxpl, buf);
            H5_CHECK(rc, "%s: cannot %s dataset %s", path, write ? "write" : "read", name);
            if (!write && via_host) z->be->to_device(shard, host, bytes);
            H5Sclose(mspace);
            H5Sclose(fspace);
            H5Dclose(dset);
        }
    }
    free(host);
    H5Pclose(dxpl);
}

void mt_checkpoint_save(const char *dir, mt_zero *z, const mt_train_state *st) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/state.h5", dir);
    snprintf(tmp, sizeof(tmp), "%s/state.h5.tmp", dir);
    if (z->comm->rank == 0) mkdir(dir, 0755); /* may exist */
    z->comm->barrier(z->comm);
    const mt_hdf5_errors saved = mt_hdf5_errors_capture();
    hid_t fapl = checkpoint_fapl(z);
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5_CHECK(file, "checkpoint: cannot create %s", tmp);
    H5Pclose(fapl);
    attr_write(file, "step", H5T_NATIVE_INT64, &st->step, 1);
    attr_write(file, "recipe_hash", H5T_NATIVE_UINT64, &st->recipe_hash, 1);
    attr_write(file, "rng_state", H5T_NATIVE_UINT64, &st->rng_state, 1);
    attr_write(file, "tokens_seen", H5T_NATIVE_INT64, &st->tokens_seen, 1);
    attr_write(file, "cursor", H5T_NATIVE_UINT8, st->cursor, MT_CURSOR_BYTES);
    int32_t world = z->comm->size, nb = z->n_buckets;
    attr_write(file, "world_size", H5T_NATIVE_INT32, &world, 1);
    attr_write(file, "n_buckets", H5T_NATIVE_INT32, &nb, 1);
    checkpoint_transfer(file, tmp, z, true);
    H5_CHECK(H5Fclose(file), "checkpoint: cannot close %s", tmp);
    mt_hdf5_errors_restore(saved);
    z->comm->barrier(z->comm); /* every rank's data is in the file before it becomes current */
    /* test hook (tests/dist_run.sh kill): hold the finished file under its temporary name */
    const char *delay = getenv("MT_TEST_CHECKPOINT_DELAY");
    if (delay && atoi(delay) > 0) sleep((unsigned)atoi(delay));
    if (z->comm->rank == 0)
        MT_CHECK(rename(tmp, path) == 0, "checkpoint: cannot rename %s to %s", tmp, path);
    z->comm->barrier(z->comm);
}

bool mt_checkpoint_load(const char *dir, mt_zero *z, mt_train_state *st) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/state.h5", dir);
    if (access(path, R_OK) != 0) return false;
    const mt_hdf5_errors saved = mt_hdf5_errors_capture();
    hid_t fapl = checkpoint_fapl(z);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5_CHECK(file, "%s: cannot open as HDF5 (damaged checkpoint?)", path);
    H5Pclose(fapl);
    memset(st, 0, sizeof(*st));
    int32_t nb = 0;
    attr_read(file, path, "n_buckets", H5T_NATIVE_INT32, &nb);
    MT_CHECK(nb == z->n_buckets,
             "%s: %d parameter buckets, this model has %d: the checkpoint was written for another "
             "model or another dist.gather_unit (layer: 1 bucket per decoder layer; expert: 1 + "
             "E per layer and 2 S vocabulary parts; see its recipe.toml; a unit-expert state from "
             "before the vocabulary split does not resume, its exported model loads)",
             path, nb, z->n_buckets);
    attr_read(file, path, "step", H5T_NATIVE_INT64, &st->step);
    attr_read(file, path, "recipe_hash", H5T_NATIVE_UINT64, &st->recipe_hash);
    attr_read(file, path, "rng_state", H5T_NATIVE_UINT64, &st->rng_state);
    attr_read(file, path, "tokens_seen", H5T_NATIVE_INT64, &st->tokens_seen);
    attr_read(file, path, "cursor", H5T_NATIVE_UINT8, st->cursor);
    attr_read(file, path, "world_size", H5T_NATIVE_INT32, &st->world_size);
    checkpoint_transfer(file, path, z, false);
    H5Fclose(file);
    mt_hdf5_errors_restore(saved);
    mt_zero_master_changed(z);
    return true;
}
