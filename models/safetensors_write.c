/* safetensors_write.c: the safetensors writer (see safetensors.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "models/safetensors.h"

static int st_dtype_size(mt_st_dtype dt) {
    return dt == MT_ST_F32 ? 4 : dt == MT_ST_F8_E4M3 ? 1 : 2;
}

/* ---- writing ---- */

static void st_mkdirs(const char *dir) {
    char p[4096];
    snprintf(p, sizeof(p), "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        mkdir(p, 0777);
        *s = '/';
    }
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
        MT_DIE("cannot create directory %s: %s", dir, strerror(errno));
}

/* A failed write removes the temporary file before it ends the job: none is left behind. */
static void st_write_all(FILE *f, const void *data, size_t len, const char *path) {
    if (len && fwrite(data, 1, len, f) != len) {
        const int e = errno;
        unlink(path);
        MT_DIE("%s: write failed: %s", path, strerror(e));
    }
}

static void st_finish_file(FILE *f, const char *path) {
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0) {
        const int e = errno;
        unlink(path);
        MT_DIE("%s: write failed: %s", path, strerror(e));
    }
}

void mt_file_write_atomic(const char *path, const void *data, size_t len) {
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) MT_DIE("%s: cannot create: %s", tmp, strerror(errno));
    st_write_all(f, data, len, tmp);
    st_finish_file(f, tmp);
    if (rename(tmp, path) != 0) {
        const int e = errno;
        unlink(tmp);
        MT_DIE("cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
}

typedef struct {
    char *name;
    mt_st_dtype dtype;
    char dtype_name[12]; /* the header's: "F32", "BF16", or a copied tensor's own */
    int ndim;
    int64_t shape[MT_ST_MAX_DIMS];
    uint64_t begin, end;
    int shard;
    int64_t unfilled; /* reserved elements not written yet (mt_safetensors_writer_fill) */
} st_entry;

struct mt_safetensors_writer {
    char *dir;
    int64_t shard_bytes;
    uint8_t *buf; /* data of the shard being filled */
    size_t len, cap;
    st_entry *e; /* every tensor added, in order */
    int n, cap_e;
    int first_in_shard; /* first entry of the shard being filled */
    int n_shards;       /* shards written so far */
};

mt_safetensors_writer *mt_safetensors_writer_open(const char *dir, int64_t shard_bytes) {
    st_mkdirs(dir);
    mt_safetensors_writer *w = mt_calloc(1, sizeof(*w), "safetensors writer");
    w->dir = strdup(dir);
    w->shard_bytes = shard_bytes;
    return w;
}

static void st_tmp_name(const mt_safetensors_writer *w, int shard, char *buf, size_t n) {
    snprintf(buf, n, "%s/.model-%05d.safetensors.tmp.%d", w->dir, shard + 1, (int)getpid());
}

/* Writes the shard being filled to its temporary file. */
static void st_flush(mt_safetensors_writer *w) {
    cJSON *h = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(h, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    char digest[40];
    snprintf(digest, sizeof(digest), MT_ST_DIGEST_ALGO ":%016llx",
             (unsigned long long)mt_digest64(w->buf, w->len));
    cJSON_AddStringToObject(meta, MT_ST_DIGEST_KEY, digest);
    for (int i = w->first_in_shard; i < w->n; i++) {
        st_entry *e = &w->e[i];
        cJSON *t = cJSON_AddObjectToObject(h, e->name);
        cJSON_AddStringToObject(t, "dtype", e->dtype_name);
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (int d = 0; d < e->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e->shape[d]));
        cJSON *off = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)e->begin));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)e->end));
        e->shard = w->n_shards;
    }
    char *text = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    MT_CHECK(text, "safetensors: cannot format a header");
    size_t hl = strlen(text);
    uint64_t padded = (hl + 7) / 8 * 8; /* data starts 8-byte aligned, as the reference pads */
    char path[4200];
    st_tmp_name(w, w->n_shards, path, sizeof(path));
    FILE *f = fopen(path, "wb");
    if (!f) MT_DIE("%s: cannot create: %s", path, strerror(errno));
    st_write_all(f, &padded, 8, path);
    st_write_all(f, text, hl, path);
    st_write_all(f, "        ", padded - hl, path);
    st_write_all(f, w->buf, w->len, path);
    st_finish_file(f, path);
    cJSON_free(text);
    w->n_shards++;
    w->len = 0;
    w->first_in_shard = w->n;
}

/* Dies when a reserved tensor of the shard being filled still lacks data. */
static void st_check_filled(const mt_safetensors_writer *w) {
    for (int i = w->first_in_shard; i < w->n; i++)
        MT_CHECK(w->e[i].unfilled == 0,
                 "safetensors writer: %s was reserved but %lld of its elements never arrived",
                 w->e[i].name, (long long)w->e[i].unfilled);
}

static int64_t st_numel(const char *name, int ndim, const int64_t *shape) {
    MT_CHECK(ndim >= 0 && ndim <= MT_ST_MAX_DIMS, "safetensors writer: %s: %d dims", name, ndim);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= shape[d];
    return numel;
}

/* Room for bytes more in the shard being filled: the shard is written first when they would
 * overflow it (and it has something), then the buffer grows. */
static void st_make_room(mt_safetensors_writer *w, size_t bytes) {
    st_check_filled(w);
    if (w->n > w->first_in_shard && w->shard_bytes > 0 &&
        (int64_t)(w->len + bytes) > w->shard_bytes)
        st_flush(w);
    if (w->len + bytes > w->cap) {
        w->cap = (w->len + bytes) * 2;
        w->buf = realloc(w->buf, w->cap);
        MT_CHECK(w->buf, "safetensors writer: out of memory for %zu bytes", w->cap);
    }
}

/* A new entry of `bytes` at the end of the shard being filled (room made by the caller). */
static st_entry *st_append_bytes(mt_safetensors_writer *w, const char *name, const char *dtype_name,
                                 int ndim, const int64_t *shape, size_t bytes) {
    if (w->n == w->cap_e) {
        w->cap_e = w->cap_e ? 2 * w->cap_e : 256;
        w->e = realloc(w->e, sizeof(st_entry) * (size_t)w->cap_e);
        MT_CHECK(w->e, "safetensors writer: out of memory");
    }
    st_entry *e = &w->e[w->n++];
    memset(e, 0, sizeof(*e));
    e->name = strdup(name);
    snprintf(e->dtype_name, sizeof(e->dtype_name), "%s", dtype_name);
    e->ndim = ndim;
    for (int d = 0; d < ndim; d++) e->shape[d] = shape[d];
    e->begin = w->len;
    e->end = w->len + bytes;
    w->len += bytes;
    return e;
}

static st_entry *st_append(mt_safetensors_writer *w, const char *name, mt_st_dtype dtype, int ndim,
                           const int64_t *shape) {
    MT_CHECK(dtype == MT_ST_F32 || dtype == MT_ST_BF16,
             "safetensors writer: %s: only F32 and BF16 are written", name);
    const size_t bytes = (size_t)st_numel(name, ndim, shape) * (size_t)st_dtype_size(dtype);
    st_entry *e = st_append_bytes(w, name, dtype == MT_ST_F32 ? "F32" : "BF16", ndim, shape, bytes);
    e->dtype = dtype;
    return e;
}

void mt_safetensors_writer_copy(mt_safetensors_writer *w, const mt_safetensors *src,
                                const mt_st_tensor *t) {
    const size_t bytes = (size_t)(t->end - t->begin);
    st_make_room(w, bytes);
    st_entry *e = st_append_bytes(w, t->name, t->dtype_name, t->ndim, t->shape, bytes);
    e->dtype = t->dtype;
    memcpy(w->buf + e->begin, mt_safetensors_bytes(src, t), bytes);
}

void mt_safetensors_writer_add_raw(mt_safetensors_writer *w, const char *name,
                                   const char *dtype_name, int ndim, const int64_t *shape,
                                   const void *bytes, size_t len) {
    const int64_t numel = st_numel(name, ndim, shape);
    const int es = !strcmp(dtype_name, "F32") ? 4 : !strcmp(dtype_name, "F8_E4M3") ? 1 : 2;
    MT_CHECK((size_t)numel * (size_t)es == len, "safetensors writer: %s: %zu bytes for %lld %s",
             name, len, (long long)numel, dtype_name);
    st_make_room(w, len);
    st_entry *e = st_append_bytes(w, name, dtype_name, ndim, shape, len);
    e->dtype = !strcmp(dtype_name, "F8_E4M3") ? MT_ST_F8_E4M3 : MT_ST_OTHER;
    memcpy(w->buf + e->begin, bytes, len);
}

/* n fp32 values into the buffer at dst, in the entry's dtype. */
static void st_store(uint8_t *dst, mt_st_dtype dtype, const float *src, int64_t n) {
    if (dtype == MT_ST_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        uint16_t b = mt_f32_to_bf16(src[j]);
        memcpy(dst + 2 * j, &b, 2);
    }
}

void mt_safetensors_writer_add_parts(mt_safetensors_writer *w, const char *name, mt_st_dtype dtype,
                                     int ndim, const int64_t *shape, int n_parts,
                                     const float *const *parts, const int64_t *part_numel) {
    int64_t numel = st_numel(name, ndim, shape), parts_numel = 0;
    for (int i = 0; i < n_parts; i++) parts_numel += part_numel[i];
    MT_CHECK(numel == parts_numel, "safetensors writer: %s: shape has %lld elements, data %lld",
             name, (long long)numel, (long long)parts_numel);
    st_make_room(w, (size_t)numel * (size_t)st_dtype_size(dtype));
    st_entry *e = st_append(w, name, dtype, ndim, shape);
    uint8_t *dst = w->buf + e->begin;
    for (int i = 0; i < n_parts; i++) {
        st_store(dst, dtype, parts[i], part_numel[i]);
        dst += (size_t)part_numel[i] * (size_t)st_dtype_size(dtype);
    }
}

int mt_safetensors_writer_reserve(mt_safetensors_writer *w, int n, const char *const *names,
                                  mt_st_dtype dtype, const int *ndim,
                                  const int64_t (*shapes)[MT_ST_MAX_DIMS]) {
    size_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += (size_t)st_numel(names[i], ndim[i], shapes[i]) * (size_t)st_dtype_size(dtype);
    st_make_room(w, bytes);
    const int first = w->n;
    for (int i = 0; i < n; i++)
        st_append(w, names[i], dtype, ndim[i], shapes[i])->unfilled =
            st_numel(names[i], ndim[i], shapes[i]);
    return first;
}

void mt_safetensors_writer_fill(mt_safetensors_writer *w, int entry, int64_t offset, int64_t n,
                                const float *data) {
    MT_CHECK(entry >= w->first_in_shard && entry < w->n,
             "safetensors writer: tensor %d is not a reserved tensor of the shard being filled",
             entry);
    st_entry *e = &w->e[entry];
    const int64_t numel = st_numel(e->name, e->ndim, e->shape);
    MT_CHECK(offset >= 0 && n >= 0 && offset + n <= numel && n <= e->unfilled,
             "safetensors writer: %s: elements [%lld, %lld) of %lld (%lld unfilled)", e->name,
             (long long)offset, (long long)(offset + n), (long long)numel, (long long)e->unfilled);
    const size_t es = (size_t)st_dtype_size(e->dtype);
    st_store(w->buf + e->begin + (size_t)offset * es, e->dtype, data, n);
    e->unfilled -= n;
}

void mt_safetensors_writer_add(mt_safetensors_writer *w, const char *name, mt_st_dtype dtype,
                               int ndim, const int64_t *shape, const float *data) {
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= shape[d];
    mt_safetensors_writer_add_parts(w, name, dtype, ndim, shape, 1, &data, &numel);
}

void mt_safetensors_writer_close(mt_safetensors_writer *w) {
    st_check_filled(w);
    if (w->n > w->first_in_shard || w->n_shards == 0) st_flush(w);
    char tmp[4200], final[4200], index[4200], single[4200];
    snprintf(index, sizeof(index), "%s/model.safetensors.index.json", w->dir);
    snprintf(single, sizeof(single), "%s/model.safetensors", w->dir);
    if (w->n_shards == 1) {
        st_tmp_name(w, 0, tmp, sizeof(tmp));
        if (rename(tmp, single) != 0) MT_DIE("cannot rename %s: %s", tmp, strerror(errno));
        unlink(index); /* a stale index would shadow the new file */
    } else {
        cJSON *root = cJSON_CreateObject();
        cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
        uint64_t total = 0;
        for (int i = 0; i < w->n; i++) total += w->e[i].end - w->e[i].begin;
        cJSON_AddNumberToObject(meta, "total_size", (double)total);
        cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
        for (int s = 0; s < w->n_shards; s++) {
            st_tmp_name(w, s, tmp, sizeof(tmp));
            snprintf(final, sizeof(final), "%s/model-%05d-of-%05d.safetensors", w->dir, s + 1,
                     w->n_shards);
            if (rename(tmp, final) != 0) MT_DIE("cannot rename %s: %s", tmp, strerror(errno));
        }
        for (int i = 0; i < w->n; i++) {
            char file[64];
            snprintf(file, sizeof(file), "model-%05d-of-%05d.safetensors", w->e[i].shard + 1,
                     w->n_shards);
            cJSON_AddStringToObject(map, w->e[i].name, file);
        }
        char *text = cJSON_Print(root);
        cJSON_Delete(root);
        mt_file_write_atomic(index, text, strlen(text));
        cJSON_free(text);
        unlink(single); /* transformers would load a stale single file before the index */
    }
    for (int i = 0; i < w->n; i++) free(w->e[i].name);
    free(w->e);
    free(w->buf);
    free(w->dir);
    free(w);
}
