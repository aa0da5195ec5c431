/* safetensors.c: see safetensors.h. */
#include "models/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "core/file_io.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

#define ST_MAX_HEADER 100000000ull /* the reference implementation's limit */

typedef struct {
    char *path;
    uint8_t *map;
    size_t size;
    const uint8_t *data; /* start of the data section */
    uint64_t data_len;
    char digest[40]; /* __metadata__'s MT_ST_DIGEST_KEY, "" when absent */
} st_file;

struct mt_safetensors {
    st_file *files;
    int n_files;
    mt_st_tensor *tensors;
    int n, cap;
    int *slots; /* open addressing over tensor names: index or -1 */
    int n_slots;
};

static bool st_fail(char *err, size_t n, const char *fmt, ...) MT_PRINTF(3, 4);
static bool st_fail(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return false;
}

/* ---- dtypes ---- */

static const struct {
    const char *name;
    int size;
    mt_st_dtype dt;
} ST_DTYPES[] = {
    {"F32", 4, MT_ST_F32},    {"BF16", 2, MT_ST_BF16},       {"F16", 2, MT_ST_F16},
    {"F64", 8, MT_ST_OTHER},  {"I64", 8, MT_ST_OTHER},       {"U64", 8, MT_ST_OTHER},
    {"I32", 4, MT_ST_OTHER},  {"U32", 4, MT_ST_OTHER},       {"I16", 2, MT_ST_OTHER},
    {"U16", 2, MT_ST_OTHER},  {"I8", 1, MT_ST_OTHER},        {"U8", 1, MT_ST_OTHER},
    {"BOOL", 1, MT_ST_OTHER}, {"F8_E4M3", 1, MT_ST_F8_E4M3}, {"F8_E5M2", 1, MT_ST_OTHER}};

static int st_dtype_size(mt_st_dtype dt) {
    return dt == MT_ST_F32 ? 4 : dt == MT_ST_F8_E4M3 ? 1 : 2;
}

float mt_f8e4m3_to_f32(uint8_t b) {
    const int e = (b >> 3) & 15, m = b & 7;
    const float sign = (b & 0x80) ? -1.0f : 1.0f;
    if (e == 15 && m == 7) return NAN;
    if (e == 0) return sign * ldexpf((float)m, -9); /* subnormal: m/8 * 2^-6 */
    return sign * ldexpf((float)(8 + m), e - 10);   /* (1 + m/8) * 2^(e-7) */
}

uint16_t mt_f32_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float mt_bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

float mt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13); /* inf / NaN */
    } else if (exp != 0) {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal: normalise the mantissa */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ---- name lookup ---- */

static uint64_t st_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static void st_rehash(mt_safetensors *st, int n_slots) {
    free(st->slots);
    st->n_slots = n_slots;
    st->slots = mt_malloc(sizeof(int) * (size_t)n_slots, "safetensors names");
    for (int i = 0; i < n_slots; i++) st->slots[i] = -1;
    for (int i = 0; i < st->n; i++) {
        size_t s = st_hash(st->tensors[i].name) & (size_t)(n_slots - 1);
        while (st->slots[s] >= 0) s = (s + 1) & (size_t)(n_slots - 1);
        st->slots[s] = i;
    }
}

const mt_st_tensor *mt_safetensors_find(const mt_safetensors *st, const char *name) {
    if (!st->n_slots) return NULL;
    size_t s = st_hash(name) & (size_t)(st->n_slots - 1);
    for (; st->slots[s] >= 0; s = (s + 1) & (size_t)(st->n_slots - 1))
        if (strcmp(st->tensors[st->slots[s]].name, name) == 0) return &st->tensors[st->slots[s]];
    return NULL;
}

/* Appends a tensor (name copied); false when the name exists already. */
static bool st_add(mt_safetensors *st, const mt_st_tensor *t) {
    if (mt_safetensors_find(st, t->name)) return false;
    if (st->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 256;
        st->tensors = realloc(st->tensors, sizeof(mt_st_tensor) * (size_t)st->cap);
        MT_CHECK(st->tensors, "safetensors: out of memory for %d tensors", st->cap);
    }
    st->tensors[st->n] = *t;
    st->tensors[st->n].name = strdup(t->name);
    MT_CHECK(st->tensors[st->n].name, "safetensors: out of memory");
    st->n++;
    if (2 * st->n > st->n_slots) {
        st_rehash(st, st->n_slots ? 2 * st->n_slots : 1024);
    } else {
        size_t s = st_hash(t->name) & (size_t)(st->n_slots - 1);
        while (st->slots[s] >= 0) s = (s + 1) & (size_t)(st->n_slots - 1);
        st->slots[s] = st->n - 1;
    }
    return true;
}

/* ---- header parsing ---- */

static bool st_json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return false;
    *out = (uint64_t)v->valuedouble;
    return true;
}

static bool st_parse_tensor(const cJSON *e, const char *path, mt_st_tensor *t, char *err,
                            size_t n) {
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return st_fail(err, n, "%s: tensor %s: entry is not an object", path, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(off))
        return st_fail(err, n, "%s: tensor %s: needs dtype, shape and data_offsets", path, name);
    int size = 0;
    for (size_t i = 0; i < sizeof(ST_DTYPES) / sizeof(ST_DTYPES[0]); i++)
        if (strcmp(dt->valuestring, ST_DTYPES[i].name) == 0) {
            size = ST_DTYPES[i].size;
            t->dtype = ST_DTYPES[i].dt;
            snprintf(t->dtype_name, sizeof(t->dtype_name), "%s", ST_DTYPES[i].name);
        }
    if (!size)
        return st_fail(err, n, "%s: tensor %s: unknown dtype \"%.16s\"", path, name,
                       dt->valuestring);
    t->ndim = cJSON_GetArraySize(shape);
    if (t->ndim > MT_ST_MAX_DIMS)
        return st_fail(err, n, "%s: tensor %s: %d dims (at most %d)", path, name, t->ndim,
                       MT_ST_MAX_DIMS);
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t s;
        if (!st_json_u64(cJSON_GetArrayItem(shape, d), &s))
            return st_fail(err, n, "%s: tensor %s: shape[%d] is not a non-negative integer", path,
                           name, d);
        if (s && numel > (1ull << 62) / s)
            return st_fail(err, n, "%s: tensor %s: shape overflows", path, name);
        numel *= s;
        t->shape[d] = (int64_t)s;
    }
    t->numel = (int64_t)numel;
    if (cJSON_GetArraySize(off) != 2 || !st_json_u64(cJSON_GetArrayItem(off, 0), &t->begin) ||
        !st_json_u64(cJSON_GetArrayItem(off, 1), &t->end) || t->end < t->begin)
        return st_fail(err, n, "%s: tensor %s: data_offsets must be [begin, end], begin <= end",
                       path, name);
    if (t->end - t->begin != numel * (uint64_t)size)
        return st_fail(err, n,
                       "%s: tensor %s: data_offsets [%llu, %llu] hold %llu bytes but %s shape "
                       "needs %llu",
                       path, name, (unsigned long long)t->begin, (unsigned long long)t->end,
                       (unsigned long long)(t->end - t->begin), t->dtype_name,
                       (unsigned long long)(numel * (uint64_t)size));
    t->name = name;
    return true;
}

static int st_cmp_begin(const void *a, const void *b) {
    const mt_st_tensor *x = *(const mt_st_tensor *const *)a, *y = *(const mt_st_tensor *const *)b;
    return x->begin < y->begin   ? -1
           : x->begin > y->begin ? 1
                                 : (x->end > y->end) - (x->end < y->end);
}

/* Maps file fi and adds its tensors. */
static bool st_open_file(mt_safetensors *st, int fi, char *err, size_t n) {
    st_file *f = &st->files[fi];
    int fd = open(f->path, O_RDONLY);
    if (fd < 0) return st_fail(err, n, "%s: cannot open: %s", f->path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return st_fail(err, n, "%s: not a regular file", f->path);
    }
    f->size = (size_t)sb.st_size;
    if (f->size < 8) {
        close(fd);
        return st_fail(err, n, "%s: %zu bytes, too short for a safetensors header", f->path,
                       f->size);
    }
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        return st_fail(err, n, "%s: mmap failed: %s", f->path, strerror(errno));
    }
    uint64_t hlen;
    memcpy(&hlen, f->map, 8);
    if (hlen > ST_MAX_HEADER)
        return st_fail(err, n, "%s: header length %llu exceeds the %llu-byte limit", f->path,
                       (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > f->size - 8)
        return st_fail(err, n, "%s: header length %llu runs past the end of the %zu-byte file",
                       f->path, (unsigned long long)hlen, f->size);
    const char *hdr = (const char *)f->map + 8;
    if (hlen == 0 || hdr[0] != '{')
        return st_fail(err, n, "%s: header does not start with '{'", f->path);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, hlen, &end, false);
    bool ok = root && cJSON_IsObject(root);
    for (const char *p = end; ok && p < hdr + hlen; p++)
        ok = *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r';
    if (!ok) {
        cJSON_Delete(root);
        return st_fail(err, n, "%s: header is not valid JSON", f->path);
    }
    f->data = f->map + 8 + hlen;
    f->data_len = f->size - 8 - hlen;
    int first = st->n;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            bool good = cJSON_IsObject(e);
            for (const cJSON *m = good ? e->child : NULL; m; m = m->next) good &= cJSON_IsString(m);
            const cJSON *digest =
                good ? cJSON_GetObjectItemCaseSensitive(e, MT_ST_DIGEST_KEY) : NULL;
            if (digest) snprintf(f->digest, sizeof(f->digest), "%s", digest->valuestring);
            if (!good)
                ok = st_fail(err, n, "%s: __metadata__ must map strings to strings", f->path);
            if (!ok) break;
            continue;
        }
        mt_st_tensor t = {0};
        t.file = fi;
        if (!(ok = st_parse_tensor(e, f->path, &t, err, n))) break;
        if (!(ok = st_add(st, &t))) {
            const mt_st_tensor *o = mt_safetensors_find(st, e->string);
            st_fail(err, n, "%s: tensor %s appears twice (also in %s)", f->path, e->string,
                    st->files[o->file].path);
            break;
        }
    }
    cJSON_Delete(root);
    if (!ok) return false;
    /* Offsets: sorted, they must tile the data section exactly. */
    int cnt = st->n - first;
    mt_st_tensor **order = mt_malloc(sizeof(*order) * (size_t)(cnt ? cnt : 1), "order");
    for (int i = 0; i < cnt; i++) order[i] = &st->tensors[first + i];
    qsort(order, (size_t)cnt, sizeof(*order), st_cmp_begin);
    uint64_t at = 0;
    for (int i = 0; i < cnt && ok; i++) {
        const mt_st_tensor *t = order[i];
        if (t->begin != at)
            ok = st_fail(err, n,
                         "%s: tensor %s: data_offsets [%llu, %llu] %s (expected to start at %llu)",
                         f->path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                         t->begin < at ? "overlap the previous tensor" : "leave a gap",
                         (unsigned long long)at);
        at = t->end;
    }
    if (ok && at != f->data_len)
        ok = st_fail(err, n,
                     "%s: tensors end at byte %llu of the data section but it has %llu bytes%s%s",
                     f->path, (unsigned long long)at, (unsigned long long)f->data_len,
                     cnt ? "; last tensor " : "", cnt ? order[cnt - 1]->name : "");
    free(order);
    return ok;
}

static int st_add_file(mt_safetensors *st, const char *path) {
    for (int i = 0; i < st->n_files; i++)
        if (strcmp(st->files[i].path, path) == 0) return i;
    st->files = realloc(st->files, sizeof(st_file) * (size_t)(st->n_files + 1));
    MT_CHECK(st->files, "safetensors: out of memory");
    memset(&st->files[st->n_files], 0, sizeof(st_file));
    st->files[st->n_files].path = strdup(path);
    return st->n_files++;
}

/* A sharded directory: the index names the file of every tensor; both sides must agree. */
static bool st_open_index(mt_safetensors *st, const char *dir, const char *index, char *err,
                          size_t n) {
    size_t len;
    char *text = mt_file_read_max(index, &len, ST_MAX_HEADER, err, n);
    if (!text) return false;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *map = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(root);
        return st_fail(err, n, "%s: not JSON with a \"weight_map\" object", index);
    }
    bool ok = true;
    int n_map = 0;
    int *file_of = mt_malloc(sizeof(int) * (size_t)(cJSON_GetArraySize(map) + 1), "index");
    for (const cJSON *e = map->child; e && ok; e = e->next, n_map++) {
        if (!cJSON_IsString(e) || !e->valuestring[0] || e->valuestring[0] == '/' ||
            strstr(e->valuestring, "..")) {
            ok = st_fail(err, n, "%s: tensor %s: bad file name in weight_map", index, e->string);
            break;
        }
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->valuestring);
        file_of[n_map] = st_add_file(st, path);
    }
    for (int i = 0; ok && i < st->n_files; i++) ok = st_open_file(st, i, err, n);
    int k = 0;
    for (const cJSON *e = map->child; e && ok; e = e->next, k++) {
        const mt_st_tensor *t = mt_safetensors_find(st, e->string);
        if (!t)
            ok = st_fail(err, n, "%s: tensor %s is mapped to %s but is not there", index, e->string,
                         st->files[file_of[k]].path);
        else if (t->file != file_of[k])
            ok = st_fail(err, n, "%s: tensor %s is mapped to %s but is in %s", index, e->string,
                         st->files[file_of[k]].path, st->files[t->file].path);
    }
    if (ok && st->n != n_map) {
        /* Some file holds a tensor the index does not list: name the first one. */
        for (int i = 0; i < st->n; i++) {
            if (!cJSON_GetObjectItemCaseSensitive(map, st->tensors[i].name)) {
                ok = st_fail(err, n, "%s: tensor %s in %s is missing from the index", index,
                             st->tensors[i].name, st->files[st->tensors[i].file].path);
                break;
            }
        }
        if (ok) ok = st_fail(err, n, "%s: weight_map lists a tensor twice", index);
    }
    free(file_of);
    cJSON_Delete(root);
    return ok;
}

mt_safetensors *mt_safetensors_try_open(const char *path, char *err, size_t err_len) {
    mt_safetensors *st = mt_calloc(1, sizeof(*st), "safetensors");
    struct stat sb;
    bool ok;
    if (stat(path, &sb) != 0) {
        ok = st_fail(err, err_len, "%s: %s", path, strerror(errno));
    } else if (S_ISDIR(sb.st_mode)) {
        char index[4096], single[4096];
        snprintf(index, sizeof(index), "%s/model.safetensors.index.json", path);
        snprintf(single, sizeof(single), "%s/model.safetensors", path);
        if (access(index, F_OK) == 0) {
            ok = st_open_index(st, path, index, err, err_len);
        } else if (access(single, F_OK) == 0) {
            st_add_file(st, single);
            ok = st_open_file(st, 0, err, err_len);
        } else {
            ok = st_fail(err, err_len, "%s: no model.safetensors or model.safetensors.index.json",
                         path);
        }
    } else {
        st_add_file(st, path);
        ok = st_open_file(st, 0, err, err_len);
    }
    if (!ok) {
        mt_safetensors_close(st);
        return NULL;
    }
    return st;
}

mt_safetensors *mt_safetensors_open(const char *path) {
    char err[1024];
    mt_safetensors *st = mt_safetensors_try_open(path, err, sizeof(err));
    if (!st) MT_DIE("safetensors: %s", err);
    return st;
}

void mt_safetensors_close(mt_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->n_files; i++) {
        if (st->files[i].map) munmap(st->files[i].map, st->files[i].size);
        free(st->files[i].path);
    }
    for (int i = 0; i < st->n; i++) free((char *)st->tensors[i].name);
    free(st->files);
    free(st->tensors);
    free(st->slots);
    free(st);
}

int mt_safetensors_count(const mt_safetensors *st) { return st->n; }
const mt_st_tensor *mt_safetensors_tensor(const mt_safetensors *st, int i) {
    return &st->tensors[i];
}
const char *mt_safetensors_file(const mt_safetensors *st, const mt_st_tensor *t) {
    return st->files[t->file].path;
}

static const char *st_shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

bool mt_safetensors_check(const mt_safetensors *st, const mt_st_tensor *t, int ndim,
                          const int64_t *shape, char *err, size_t err_len) {
    char a[128], b[128];
    if (t->dtype == MT_ST_OTHER)
        return st_fail(err, err_len,
                       "%s: tensor %s has dtype %s; expected F32, BF16, F16 or F8_E4M3",
                       mt_safetensors_file(st, t), t->name, t->dtype_name);
    bool same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same)
        return st_fail(err, err_len, "%s: tensor %s has shape %s; the config needs %s",
                       mt_safetensors_file(st, t), t->name,
                       st_shape_str(a, sizeof(a), t->ndim, t->shape),
                       st_shape_str(b, sizeof(b), ndim, shape));
    return true;
}

void mt_safetensors_read(const mt_safetensors *st, const mt_st_tensor *t, int64_t lo, int64_t hi,
                         float *dst) {
    MT_CHECK(0 <= lo && lo <= hi && hi <= t->numel,
             "safetensors: %s: tensor %s: range [%lld, %lld) outside its %lld elements",
             mt_safetensors_file(st, t), t->name, (long long)lo, (long long)hi,
             (long long)t->numel);
    MT_CHECK(t->dtype != MT_ST_OTHER,
             "safetensors: %s: tensor %s: dtype %s cannot be read as float",
             mt_safetensors_file(st, t), t->name, t->dtype_name);
    const uint8_t *src =
        st->files[t->file].data + t->begin + (uint64_t)lo * (uint64_t)st_dtype_size(t->dtype);
    int64_t n = hi - lo;
    if (t->dtype == MT_ST_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return;
    }
    if (t->dtype == MT_ST_F8_E4M3) {
        for (int64_t i = 0; i < n; i++) dst[i] = mt_f8e4m3_to_f32(src[i]);
        return;
    }
    bool bf = t->dtype == MT_ST_BF16;
#pragma omp parallel for schedule(static) if (n > (1 << 20))
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = bf ? mt_bf16_to_f32(h) : mt_f16_to_f32(h);
    }
}

/* ---- raw access (models/safetensors_digest.c, the loaders' verification) ---- */

int mt_safetensors_n_files(const mt_safetensors *st) { return st->n_files; }

const char *mt_safetensors_file_path(const mt_safetensors *st, int file) {
    return st->files[file].path;
}

const uint8_t *mt_safetensors_file_data(const mt_safetensors *st, int file, uint64_t *len) {
    *len = st->files[file].data_len;
    return st->files[file].data;
}

const char *mt_safetensors_file_digest(const mt_safetensors *st, int file) {
    return st->files[file].digest;
}

const uint8_t *mt_safetensors_bytes(const mt_safetensors *st, const mt_st_tensor *t) {
    return st->files[t->file].data + t->begin;
}
