/* checkpoint.c: see checkpoint.h. */
#include "checkpoint.h"

#include <errno.h>
#include <hdf5.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "data/hdf5_error.h"
#include "train/env.h"

/* An HDF5 call failed: the message, then HDF5's reason ("Write failed: No space left on
 * device"), kept since the save or load began (data/hdf5_error.h; every failure here ends the
 * job, so the first one kept is the one reported). */
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

/* Elements per chunk: each MiB of state carries its own Fletcher32 checksum. */
#define CHUNK_ELEMS ((hsize_t)1 << 18)

static float *zero_array(mt_zero *z, int which) {
    return which == 0 ? z->master : which == 1 ? z->m : z->v;
}
/* in the backend's device memory (else host memory: the CPU backend, offloaded moments, a host
 * master) */
static bool zero_array_on_device(const mt_zero *z, int which) {
    return z->be->dev != MT_CPU && !(which > 0 ? z->offload : z->master_on_host);
}

static void dataset_name(char *buf, size_t n, int bucket, int which) {
    snprintf(buf, n, "bucket_%04d_%s", bucket, state_arrays[which]);
}

static void rank_file_name(char *buf, size_t n, const char *dir, int rank, int world) {
    snprintf(buf, n, "%s/state-%05d-of-%05d.h5", dir, rank, world);
}

/* The 1.10 file format (superblock v3, object headers v2): its metadata carries checksums, so
 * a damaged header or attribute is refused on open like a damaged chunk on read. */
static hid_t file_access(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5_CHECK(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V110),
             "checkpoint: HDF5 file format setup");
    return fapl;
}

/* No modification times in object headers: the same state gives the same bytes. */
static hid_t file_create(const char *path) {
    hid_t fapl = file_access(), fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_obj_track_times(fcpl, false);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
    H5_CHECK(file, "checkpoint: cannot create %s", path);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    return file;
}

static hid_t file_open(const char *path) {
    hid_t fapl = file_access();
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5_CHECK(file, "%s: cannot open as HDF5 (a damaged or missing file of the checkpoint)", path);
    H5Pclose(fapl);
    return file;
}

static void attr_write(hid_t obj, const char *path, const char *name, hid_t type, const void *value,
                       size_t n) {
    hsize_t dims = n;
    hid_t space = H5Screate_simple(1, &dims, NULL);
    hid_t attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(attr, "%s: cannot create attribute %s", path, name);
    H5_CHECK(H5Awrite(attr, type, value), "%s: cannot write attribute %s", path, name);
    H5Aclose(attr);
    H5Sclose(space);
}

static void attr_read(hid_t obj, const char *path, const char *name, hid_t type, void *value) {
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
    H5_CHECK(attr, "%s: attribute %s is missing (not a minimax-train checkpoint?)", path, name);
    H5_CHECK(H5Aread(attr, type, value), "%s: cannot read attribute %s", path, name);
    H5Aclose(attr);
}

static void attr_write_string(hid_t obj, const char *path, const char *name, const char *s) {
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(s) + 1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(attr, "%s: cannot create attribute %s", path, name);
    H5_CHECK(H5Awrite(attr, type, s), "%s: cannot write attribute %s", path, name);
    H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
}

/* A malloc'ed copy of a string attribute. */
static char *attr_read_string(hid_t obj, const char *path, const char *name) {
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
    H5_CHECK(attr, "%s: attribute %s is missing", path, name);
    hid_t type = H5Aget_type(attr);
    const size_t n = H5Tget_size(type);
    char *s = mt_calloc(n + 1, 1, "checkpoint attribute");
    hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, n);
    H5_CHECK(H5Aread(attr, mem, s), "%s: cannot read attribute %s", path, name);
    H5Tclose(mem);
    H5Tclose(type);
    H5Aclose(attr);
    return s;
}

/* A 1- or 2-D dataset of `type` with every chunk checksummed (Fletcher32), written whole. */
static void dataset_write(hid_t file, const char *path, const char *name, hid_t type, int rank,
                          const hsize_t *dims, const void *data) {
    hid_t space = H5Screate_simple(rank, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[2] = {dims[0] < CHUNK_ELEMS ? dims[0] : CHUNK_ELEMS, rank > 1 ? dims[1] : 1};
    H5_CHECK(H5Pset_chunk(dcpl, rank, chunk), "%s: chunking %s", path, name);
    H5_CHECK(H5Pset_fletcher32(dcpl), "%s: the Fletcher32 filter for %s", path, name);
    H5Pset_obj_track_times(dcpl, false);
    hid_t dset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5_CHECK(dset, "%s: cannot create dataset %s", path, name);
    H5_CHECK(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
             "%s: cannot write dataset %s", path, name);
    H5_CHECK(H5Dclose(dset), "%s: cannot write dataset %s", path, name);
    H5Pclose(dcpl);
    H5Sclose(space);
}

/* Opens dataset name of file, which must hold n elements. */
static hid_t dataset_open(hid_t file, const char *path, const char *name, hsize_t n,
                          const char *mismatch) {
    hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
    H5_CHECK(dset, "%s: dataset %s is missing", path, name);
    hid_t s = H5Dget_space(dset);
    hsize_t got[2] = {0, 0};
    const int nd = H5Sget_simple_extent_dims(s, got, NULL);
    H5Sclose(s);
    const hsize_t numel = nd == 2 ? got[0] * got[1] : got[0];
    MT_CHECK(numel == n, "%s: dataset %s has %llu elements but %llu were expected%s", path, name,
             (unsigned long long)numel, (unsigned long long)n, mismatch);
    return dset;
}

/* Elements [start, start + count) of a 1-D float dataset into dst. */
static void dataset_read_range(hid_t dset, const char *path, const char *name, hsize_t start,
                               hsize_t count, float *dst, bool checksummed) {
    hid_t fspace = H5Dget_space(dset), mspace = H5Screate_simple(1, &count, NULL);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &count, NULL);
    H5_CHECK(H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, dst),
             "%s: cannot read dataset %s%s", path, name,
             checksummed ? ": the checkpoint is damaged (a chunk's Fletcher32 checksum does not "
                           "match its data, or the file is cut short)"
                         : "");
    H5Sclose(mspace);
    H5Sclose(fspace);
}

/* ------------------------------------------------------------------------------------------ */
/* saving */

/* The test hook of tests/train/run_stop.sh (watchdog): MT_TEST_STATE_STOP = "RANK:STEP" stops that
 * rank (SIGSTOP) after its first dataset of the checkpoint of that step, in the middle of
 * writing its file, as a rank stuck in a file system call would; its peers must not wait for
 * it longer than the watchdog's limit. */
static void test_stop_here(const mt_zero *z, const mt_train_state *st, const char *path) {
    double rank_step[2];
    if (!mt_env_numbers("MT_TEST_STATE_STOP", ':', 2, 0, 1e15, rank_step) ||
        rank_step[0] != z->comm->rank || rank_step[1] != (double)st->step)
        return;
    fprintf(stderr, "test hook: rank %d stops itself while writing %s\n", z->comm->rank, path);
    fflush(stderr);
    raise(SIGSTOP);
}

/* Rank r's file: its owned range of every bucket array. */
static void rank_file_write(const char *dir, mt_zero *z, const mt_train_state *st) {
    char path[4200];
    rank_file_name(path, sizeof(path), dir, z->comm->rank, z->comm->size);
    hid_t file = file_create(path);
    const int32_t format = MT_CHECKPOINT_FORMAT, rank = z->comm->rank, world = z->comm->size,
                  nb = z->n_buckets;
    attr_write(file, path, "format", H5T_NATIVE_INT32, &format, 1);
    attr_write(file, path, "rank", H5T_NATIVE_INT32, &rank, 1);
    attr_write(file, path, "world_size", H5T_NATIVE_INT32, &world, 1);
    attr_write(file, path, "step", H5T_NATIVE_INT64, &st->step, 1);
    int64_t *ranges = mt_malloc(sizeof(int64_t) * 2 * (size_t)nb, "checkpoint ranges");
    int64_t most = 1;
    for (int b = 0; b < nb; b++) {
        mt_zero_owned_range(z, b, &ranges[2 * b], &ranges[2 * b + 1]);
        if (ranges[2 * b + 1] - ranges[2 * b] > most) most = ranges[2 * b + 1] - ranges[2 * b];
    }
    dataset_write(file, path, "ranges", H5T_NATIVE_INT64, 2, (hsize_t[]){(hsize_t)nb, 2}, ranges);
    float *host = NULL; /* device shards go through one host buffer of the largest shard */
    bool first = true;
    for (int b = 0; b < nb; b++) {
        const hsize_t count = (hsize_t)(ranges[2 * b + 1] - ranges[2 * b]);
        if (count == 0) continue; /* nothing owned: no dataset */
        for (int a = 0; a < 3; a++) {
            char name[64];
            dataset_name(name, sizeof(name), b, a);
            const float *shard = zero_array(z, a) + z->shard_offset[b];
            if (zero_array_on_device(z, a)) {
                if (!host) host = mt_malloc(sizeof(float) * (size_t)most, "checkpoint staging");
                z->be->to_host(host, shard, sizeof(float) * count);
                shard = host;
            }
            dataset_write(file, path, name, H5T_NATIVE_FLOAT, 1, &count, shard);
            if (first) test_stop_here(z, st, path);
            first = false;
        }
    }
    free(host);
    free(ranges);
    H5_CHECK(H5Fclose(file), "checkpoint: cannot close %s", path);
}

/* "what\tdigest\tpath\n" per input. */
static void inputs_format(const mt_train_state *st, char *buf, size_t n) {
    buf[0] = 0;
    for (int i = 0; i < st->n_inputs; i++) {
        const size_t at = strlen(buf);
        snprintf(buf + at, n - at, "%s\t%016llx\t%s\n", st->inputs[i].what,
                 (unsigned long long)st->inputs[i].digest, st->inputs[i].path);
    }
}

static void inputs_parse(mt_train_state *st, const char *text, const char *path) {
    st->n_inputs = 0;
    for (const char *line = text; *line && st->n_inputs < MT_CHECKPOINT_INPUTS;) {
        const char *end = strchr(line, '\n'), *t1 = strchr(line, '\t');
        const char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        MT_CHECK(end && t1 && t2 && t2 < end, "%s: attribute inputs is malformed", path);
        mt_input_digest *in = &st->inputs[st->n_inputs++];
        snprintf(in->what, sizeof(in->what), "%.*s", (int)(t1 - line), line);
        in->digest = strtoull(t1 + 1, NULL, 16);
        snprintf(in->path, sizeof(in->path), "%.*s", (int)(end - t2 - 1), t2 + 1);
        line = end + 1;
    }
}

static void manifest_write(const char *path, const mt_zero *z, const mt_train_state *st) {
    hid_t file = file_create(path);
    const int32_t format = MT_CHECKPOINT_FORMAT, world = z->comm->size, nb = z->n_buckets;
    attr_write(file, path, "format", H5T_NATIVE_INT32, &format, 1);
    attr_write(file, path, "step", H5T_NATIVE_INT64, &st->step, 1);
    attr_write(file, path, "recipe_hash", H5T_NATIVE_UINT64, &st->recipe_hash, 1);
    attr_write(file, path, "rng_state", H5T_NATIVE_UINT64, &st->rng_state, 1);
    attr_write(file, path, "tokens_seen", H5T_NATIVE_INT64, &st->tokens_seen, 1);
    attr_write(file, path, "cursor", H5T_NATIVE_UINT8, st->cursor, MT_CURSOR_BYTES);
    attr_write(file, path, "world_size", H5T_NATIVE_INT32, &world, 1);
    attr_write(file, path, "n_buckets", H5T_NATIVE_INT32, &nb, 1);
    const int64_t layout[3] = {st->global_batch, st->micro_batch, st->accumulation};
    attr_write(file, path, "global_batch_layout", H5T_NATIVE_INT64, layout, 3);
    char inputs[MT_CHECKPOINT_INPUTS * 2200];
    inputs_format(st, inputs, sizeof(inputs));
    attr_write_string(file, path, "inputs", inputs);
    if (st->recipe_digest) /* recipe.toml, written into the directory before */
        attr_write(file, path, "recipe_digest", H5T_NATIVE_UINT64, &st->recipe_digest, 1);
    dataset_write(file, path, "bucket_numel", H5T_NATIVE_INT64, 1, (hsize_t[]){(hsize_t)nb},
                  z->numel);
    H5_CHECK(H5Fclose(file), "checkpoint: cannot close %s", path);
}

void mt_checkpoint_save(const char *dir, mt_zero *z, const mt_train_state *st) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/state.h5", dir);
    snprintf(tmp, sizeof(tmp), "%s/state.h5.tmp", dir);
    if (z->comm->rank == 0) {
        MT_CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "checkpoint: cannot create %s: %s", dir,
                 strerror(errno));
        /* without its manifest a directory holds no checkpoint: files rewritten in place never
         * pass for a complete state */
        MT_CHECK(unlink(path) == 0 || errno == ENOENT, "checkpoint: cannot remove %s: %s", path,
                 strerror(errno));
    }
    z->comm->barrier(z->comm);
    const mt_hdf5_errors saved = mt_hdf5_errors_capture();
    rank_file_write(dir, z, st);
    z->comm->barrier(z->comm); /* every rank's file is complete before the manifest says so */
    if (z->comm->rank == 0) {
        manifest_write(tmp, z, st);
        /* test hook (tests/train/run_stop.sh kill): hold the finished manifest under its temporary
         * name for a while */
        const long long delay = mt_env_int("MT_TEST_CHECKPOINT_DELAY", 0, 3600, 0);
        if (delay > 0) sleep((unsigned)delay);
        MT_CHECK(rename(tmp, path) == 0, "checkpoint: cannot rename %s to %s: %s", tmp, path,
                 strerror(errno));
    }
    mt_hdf5_errors_restore(saved);
    z->comm->barrier(z->comm);
}

/* ------------------------------------------------------------------------------------------ */
/* loading */

bool mt_checkpoint_read_state(const char *dir, mt_train_state *st) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/state.h5", dir);
    if (access(path, R_OK) != 0) return false;
    const mt_hdf5_errors saved = mt_hdf5_errors_capture();
    hid_t file = file_open(path);
    memset(st, 0, sizeof(*st));
    st->format = 1; /* before the format attribute */
    if (H5Aexists(file, "format") > 0)
        attr_read(file, path, "format", H5T_NATIVE_INT32, &st->format);
    MT_CHECK(st->format >= 1 && st->format <= MT_CHECKPOINT_FORMAT,
             "%s: checkpoint format %d; this build reads formats 1 to %d (a newer minimax-train "
             "wrote it)",
             path, st->format, MT_CHECKPOINT_FORMAT);
    attr_read(file, path, "step", H5T_NATIVE_INT64, &st->step);
    attr_read(file, path, "recipe_hash", H5T_NATIVE_UINT64, &st->recipe_hash);
    attr_read(file, path, "rng_state", H5T_NATIVE_UINT64, &st->rng_state);
    attr_read(file, path, "tokens_seen", H5T_NATIVE_INT64, &st->tokens_seen);
    attr_read(file, path, "cursor", H5T_NATIVE_UINT8, st->cursor);
    attr_read(file, path, "world_size", H5T_NATIVE_INT32, &st->world_size);
    if (st->format >= 2) {
        int64_t layout[3];
        attr_read(file, path, "global_batch_layout", H5T_NATIVE_INT64, layout);
        st->global_batch = layout[0], st->micro_batch = layout[1], st->accumulation = layout[2];
        char *inputs = attr_read_string(file, path, "inputs");
        inputs_parse(st, inputs, path);
        free(inputs);
        if (H5Aexists(file, "recipe_digest") > 0) /* 0: a checkpoint without its recipe.toml */
            attr_read(file, path, "recipe_digest", H5T_NATIVE_UINT64, &st->recipe_digest);
    }
    H5Fclose(file);
    mt_hdf5_errors_restore(saved);
    return true;
}

/* The bucket sizes of the checkpoint against this model's. */
static void check_buckets(hid_t file, const char *path, const mt_zero *z, int format) {
    int32_t nb = 0;
    attr_read(file, path, "n_buckets", H5T_NATIVE_INT32, &nb);
    MT_CHECK(nb == z->n_buckets,
             "%s: %d parameter buckets, this model has %d: the checkpoint was written for another "
             "model or another dist.gather_unit (layer: 1 bucket per decoder layer; expert: 1 + "
             "E per layer and 2 S vocabulary parts; see its recipe.toml; a unit-expert state from "
             "before the vocabulary split does not resume, its exported model loads)",
             path, nb, z->n_buckets);
    if (format < 2) return; /* format 1: each dataset's size is checked as it is read */
    int64_t *numel = mt_malloc(sizeof(int64_t) * (size_t)nb, "checkpoint bucket sizes");
    hid_t dset = dataset_open(file, path, "bucket_numel", (hsize_t)nb, "");
    H5_CHECK(H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, numel),
             "%s: cannot read dataset bucket_numel: the checkpoint is damaged", path);
    H5Dclose(dset);
    for (int b = 0; b < nb; b++)
        MT_CHECK(numel[b] == z->numel[b],
                 "%s: bucket %d has %lld elements but this model's has %lld (a checkpoint of "
                 "another model or layer count?)",
                 path, b, (long long)numel[b], (long long)z->numel[b]);
    free(numel);
}

/* One file the checkpoint's values come from: elements [lo[b], hi[b]) of bucket b. */
typedef struct {
    char path[4200];
    hid_t file; /* -1: not needed by this rank */
    int64_t *lo, *hi;
} source;

/* Format 2: the rank files whose ranges overlap this rank's, opened and their ranges checked
 * against the sharding rule (mt_zero_range_of) of the world size that wrote them. */
static source *sources_open(const char *dir, const mt_zero *z, const mt_train_state *st) {
    const int W = st->world_size, nb = z->n_buckets;
    MT_CHECK(W > 0, "%s/state.h5: world_size %d", dir, W);
    source *src = mt_calloc((size_t)W, sizeof(source), "checkpoint sources");
    for (int q = 0; q < W; q++) {
        source *s = &src[q];
        s->file = -1;
        s->lo = mt_malloc(sizeof(int64_t) * 2 * (size_t)nb, "checkpoint ranges");
        s->hi = s->lo + nb;
        bool needed = false;
        for (int b = 0; b < nb; b++) {
            int64_t lo, hi;
            mt_zero_owned_range(z, b, &lo, &hi);
            mt_zero_range_of(z->numel[b], W, q, &s->lo[b], &s->hi[b]);
            needed |= (s->lo[b] > lo ? s->lo[b] : lo) < (s->hi[b] < hi ? s->hi[b] : hi);
        }
        if (!needed) continue;
        rank_file_name(s->path, sizeof(s->path), dir, q, W);
        MT_CHECK(access(s->path, R_OK) == 0,
                 "%s: missing (the checkpoint's manifest names %d rank "
                 "files): the checkpoint is incomplete",
                 s->path, W);
        s->file = file_open(s->path);
        int32_t rank = -1, world = -1;
        int64_t step = -1;
        attr_read(s->file, s->path, "rank", H5T_NATIVE_INT32, &rank);
        attr_read(s->file, s->path, "world_size", H5T_NATIVE_INT32, &world);
        attr_read(s->file, s->path, "step", H5T_NATIVE_INT64, &step);
        MT_CHECK(rank == q && world == W && step == st->step,
                 "%s: written by rank %d of %d at step %lld, but the manifest %s/state.h5 is of "
                 "step %lld on %d ranks: files of different checkpoints mixed",
                 s->path, rank, world, (long long)step, dir, (long long)st->step, W);
        int64_t *ranges = mt_malloc(sizeof(int64_t) * 2 * (size_t)nb, "checkpoint ranges");
        hid_t dset = dataset_open(s->file, s->path, "ranges", 2 * (hsize_t)nb, "");
        H5_CHECK(H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ranges),
                 "%s: cannot read dataset ranges: the checkpoint is damaged", s->path);
        H5Dclose(dset);
        for (int b = 0; b < nb; b++)
            MT_CHECK(ranges[2 * b] == s->lo[b] && ranges[2 * b + 1] == s->hi[b],
                     "%s: holds elements [%lld, %lld) of bucket %d, not [%lld, %lld) as the "
                     "sharding of %d ranks gives",
                     s->path, (long long)ranges[2 * b], (long long)ranges[2 * b + 1], b,
                     (long long)s->lo[b], (long long)s->hi[b], W);
        free(ranges);
    }
    return src;
}

static void sources_close(source *src, int n) {
    for (int q = 0; q < n; q++) {
        if (src[q].file >= 0) H5Fclose(src[q].file);
        free(src[q].lo);
    }
    free(src);
}

void mt_checkpoint_load_shards(const char *dir, mt_zero *z, const mt_train_state *st) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/state.h5", dir);
    const mt_hdf5_errors saved = mt_hdf5_errors_capture();
    hid_t manifest = file_open(path);
    check_buckets(manifest, path, z, st->format);
    /* format 1: one source, the manifest itself, holding every bucket whole */
    const int n_src = st->format >= 2 ? st->world_size : 1;
    source *src;
    if (st->format >= 2) {
        src = sources_open(dir, z, st);
    } else {
        src = mt_calloc(1, sizeof(source), "checkpoint sources");
        snprintf(src->path, sizeof(src->path), "%s", path);
        src->file = manifest;
        src->lo = mt_calloc(2 * (size_t)z->n_buckets, sizeof(int64_t), "checkpoint ranges");
        src->hi = src->lo + z->n_buckets;
        for (int b = 0; b < z->n_buckets; b++) src->hi[b] = z->numel[b];
    }
    int64_t most = 1;
    for (int b = 0; b < z->n_buckets; b++)
        if (z->shard_numel[b] > most) most = z->shard_numel[b];
    float *host = NULL;
    for (int b = 0; b < z->n_buckets; b++) {
        int64_t lo, hi;
        mt_zero_owned_range(z, b, &lo, &hi);
        if (hi == lo) continue;
        for (int a = 0; a < 3; a++) {
            char name[64];
            dataset_name(name, sizeof(name), b, a);
            float *shard = zero_array(z, a) + z->shard_offset[b], *dst = shard;
            const bool via_host = zero_array_on_device(z, a);
            if (via_host) {
                if (!host) host = mt_malloc(sizeof(float) * (size_t)most, "checkpoint staging");
                dst = host;
            }
            for (int q = 0; q < n_src; q++) {
                const source *s = &src[q];
                const int64_t from = s->lo[b] > lo ? s->lo[b] : lo;
                const int64_t to = s->hi[b] < hi ? s->hi[b] : hi;
                if (s->file < 0 || from >= to) continue;
                hid_t dset = dataset_open(s->file, s->path, name, (hsize_t)(s->hi[b] - s->lo[b]),
                                          " (a checkpoint of another model or layer count?)");
                dataset_read_range(dset, s->path, name, (hsize_t)(from - s->lo[b]),
                                   (hsize_t)(to - from), dst + (from - lo), st->format >= 2);
                H5Dclose(dset);
            }
            if (via_host) z->be->to_device(shard, host, sizeof(float) * (size_t)(hi - lo));
        }
    }
    free(host);
    if (st->format >= 2) H5Fclose(manifest);
    sources_close(src, n_src);
    mt_hdf5_errors_restore(saved);
    mt_zero_master_changed(z);
}

bool mt_checkpoint_load(const char *dir, mt_zero *z, mt_train_state *st) {
    if (!mt_checkpoint_read_state(dir, st)) return false;
    mt_checkpoint_load_shards(dir, z, st);
    return true;
}
