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

#include "autograd/check.h"
#include "data/data_io.h"

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

/* ---- digests ---- */

/* Four FNV-1a lanes over little-endian 64-bit words (lane k takes words k, k + 4, ...), the
 * remaining bytes into lane 0 one by one, then the lanes and the length folded with FNV-1a.
 * Each step is a bijection of the lane, so a change within one 8-byte word is always seen;
 * memory-bound where byte-wise FNV-1a is not. */
uint64_t mt_digest64(const void *data, size_t n) {
    const uint64_t prime = 0x100000001b3ull, basis = 0xcbf29ce484222325ull;
    uint64_t h[4] = {basis, basis ^ 1, basis ^ 2, basis ^ 3};
    const uint8_t *p = data;
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * k, 8);
            h[k] = (h[k] ^ w) * prime;
        }
    for (; i < n; i++) h[0] = (h[0] ^ p[i]) * prime;
    uint64_t r = basis;
    for (int k = 0; k < 4; k++) r = (r ^ h[k]) * prime;
    return (r ^ (uint64_t)n) * prime;
}

int mt_safetensors_n_files(const mt_safetensors *st) { return st->n_files; }

bool mt_safetensors_verify(const mt_safetensors *st, int file, bool *checked, char *err, size_t n) {
    const st_file *f = &st->files[file];
    *checked = f->digest[0] != 0;
    if (!*checked) return true;
    char now[40];
    snprintf(now, sizeof(now), MT_ST_DIGEST_ALGO ":%016llx",
             (unsigned long long)mt_digest64(f->data, f->data_len));
    if (!strcmp(now, f->digest)) return true;
    return st_fail(err, n,
                   "%s: the data does not match the digest its header records (%s, the data "
                   "gives %s): the file is damaged",
                   f->path, f->digest, now);
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
    memcpy(w->buf + e->begin, src->files[t->file].data + t->begin, bytes);
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
