/* safetensors.h: reading and writing the safetensors format (Hugging Face checkpoints).
 *
 * A file is: 8-byte little-endian header length N, N bytes of JSON header
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
 * then the data section; offsets are bytes from the start of the data section. A sharded
 * checkpoint is a directory with model.safetensors.index.json ({"weight_map": {name: file}}).
 *
 * The reader memory-maps every file and validates the header when opening: length within the
 * file and at most 100 MB, JSON, known dtypes, shapes, offsets inside the data section and
 * tiling it exactly (sorted by offset, each tensor starts where the previous one ends, none
 * overlap, no bytes left over), byte size = numel * dtype size, no duplicate names, and for a
 * sharded directory that the index and the files agree. Errors name the file and the tensor.
 * Reads convert F32/BF16/F16 to fp32 and may cover an element range of one tensor, so a rank
 * can load just its shard. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MT_ST_MAX_DIMS 8

/* F8_E4M3: float8_e4m3fn, read as its value (no scale: models/weights.c applies the block
 * scales of an FP8 checkpoint). */
typedef enum { MT_ST_F32, MT_ST_BF16, MT_ST_F16, MT_ST_F8_E4M3, MT_ST_OTHER } mt_st_dtype;

typedef struct {
    const char *name;
    char dtype_name[12]; /* as in the header: "F32", "BF16", "I64", ... */
    mt_st_dtype dtype;   /* MT_ST_OTHER: a valid safetensors dtype that cannot be read as float */
    int ndim;
    int64_t shape[MT_ST_MAX_DIMS];
    int64_t numel;
    int file;            /* index of the file holding it */
    uint64_t begin, end; /* bytes from the start of the file's data section */
} mt_st_tensor;

typedef struct mt_safetensors mt_safetensors;

/* path: a .safetensors file, or a directory with model.safetensors.index.json or
 * model.safetensors. Dies with the message on any problem. */
mt_safetensors *mt_safetensors_open(const char *path);
/* Same, returning NULL with the message in err instead of dying. */
mt_safetensors *mt_safetensors_try_open(const char *path, char *err, size_t err_len);
void mt_safetensors_close(mt_safetensors *st);

int mt_safetensors_count(const mt_safetensors *st);
const mt_st_tensor *mt_safetensors_tensor(const mt_safetensors *st, int i);
/* NULL when absent. */
const mt_st_tensor *mt_safetensors_find(const mt_safetensors *st, const char *name);
/* The file that holds t (for messages). */
const char *mt_safetensors_file(const mt_safetensors *st, const mt_st_tensor *t);
/* True when t is F32/BF16/F16/F8_E4M3 with exactly this shape; else false with a message naming the
 * tensor, its file, and what differs. */
bool mt_safetensors_check(const mt_safetensors *st, const mt_st_tensor *t, int ndim,
                          const int64_t *shape, char *err, size_t err_len);
/* Elements [lo, hi) of t in row-major order, converted to fp32, into dst (hi - lo floats). */
void mt_safetensors_read(const mt_safetensors *st, const mt_st_tensor *t, int64_t lo, int64_t hi,
                         float *dst);

/* ---- digests ---- */

/* The writer records a digest of each file's data section in its __metadata__, as
 * MT_ST_DIGEST_KEY: MT_ST_DIGEST_ALGO ":" 16 hex digits of mt_digest64 (docs/checkpoints.md).
 * The loaders fold it into their one pass over the data (models/weights_load.c). */
#define MT_ST_DIGEST_KEY  "minimax_train.data_digest"
#define MT_ST_DIGEST_ALGO "fnv1a64x4"
uint64_t mt_digest64(const void *data, size_t n);
/* The same digest fed in pieces, in order: init, update..., final (= mt_digest64 of the
 * concatenation). */
typedef struct {
    uint64_t h[4];
    uint64_t n;       /* bytes fed */
    uint8_t part[32]; /* the block not yet complete */
    int n_part;
} mt_digest;
void mt_digest_init(mt_digest *d);
void mt_digest_update(mt_digest *d, const void *data, size_t n);
uint64_t mt_digest_final(const mt_digest *d);

int mt_safetensors_n_files(const mt_safetensors *st);
const char *mt_safetensors_file_path(const mt_safetensors *st, int file);
/* File `file`'s data section (every tensor, in offset order, tiles it exactly). */
const uint8_t *mt_safetensors_file_data(const mt_safetensors *st, int file, uint64_t *len);
/* The digest file `file`'s header records, "" when it records none (another writer's file). */
const char *mt_safetensors_file_digest(const mt_safetensors *st, int file);
/* Tensor t's bytes as stored. */
const uint8_t *mt_safetensors_bytes(const mt_safetensors *st, const mt_st_tensor *t);
/* digest (of file's whole data section) against the recorded one: true when they match or the
 * file records none, else false with a message naming the file. */
bool mt_safetensors_digest_check(const mt_safetensors *st, int file, uint64_t digest, char *err,
                                 size_t n);
/* Recomputes file `file`'s digest (reading its whole data section): true when it matches or
 * the file records none (*checked says which), else false with a message naming the file. */
bool mt_safetensors_verify(const mt_safetensors *st, int file, bool *checked, char *err, size_t n);

/* ---- writer ---- */

typedef struct mt_safetensors_writer mt_safetensors_writer;
/* Writes into dir (created if missing). Tensors go into shards of at most shard_bytes bytes of
 * data (a larger tensor gets a shard of its own; shard_bytes <= 0: one file). Shards are
 * written under temporary names and renamed on close, the index last: model.safetensors when
 * there is one shard, else model-0000i-of-0000n.safetensors + model.safetensors.index.json. */
mt_safetensors_writer *mt_safetensors_writer_open(const char *dir, int64_t shard_bytes);
/* dtype MT_ST_F32 or MT_ST_BF16 (round to nearest even). The data is copied. */
void mt_safetensors_writer_add(mt_safetensors_writer *w, const char *name, mt_st_dtype dtype,
                               int ndim, const int64_t *shape, const float *data);
/* Same, the data being the concatenation of n_parts pieces (fused tensors). */
void mt_safetensors_writer_add_parts(mt_safetensors_writer *w, const char *name, mt_st_dtype dtype,
                                     int ndim, const int64_t *shape, int n_parts,
                                     const float *const *parts, const int64_t *part_numel);
/* Reserves n tensors whose data arrives later in pieces (mt_safetensors_writer_fill), all in the
 * shard being filled (fused tensors whose parts come from different gathers); returns the
 * index of the first, the others following. Every element must arrive before the next add,
 * reserve or close. */
int mt_safetensors_writer_reserve(mt_safetensors_writer *w, int n, const char *const *names,
                                  mt_st_dtype dtype, const int *ndim,
                                  const int64_t (*shapes)[MT_ST_MAX_DIMS]);
/* Tensor t of an open checkpoint, copied byte for byte: its name, dtype (any, FP8 included) and
 * shape unchanged (the tensors an export carries without training them). */
void mt_safetensors_writer_copy(mt_safetensors_writer *w, const mt_safetensors *src,
                                const mt_st_tensor *t);
/* A tensor given as its bytes (len = numel x the dtype's size), dtype_name as in the header
 * ("F8_E4M3": an FP8 export's quantised weights). */
void mt_safetensors_writer_add_raw(mt_safetensors_writer *w, const char *name,
                                   const char *dtype_name, int ndim, const int64_t *shape,
                                   const void *bytes, size_t len);
/* Elements [offset, offset + n) of reserved tensor `entry`, from fp32 data. */
void mt_safetensors_writer_fill(mt_safetensors_writer *w, int entry, int64_t offset, int64_t n,
                                const float *data);
void mt_safetensors_writer_close(mt_safetensors_writer *w);

/* fp32 -> bf16 bits, round to nearest even (NaN stays NaN). */
uint16_t mt_f32_to_bf16(float x);
float mt_bf16_to_f32(uint16_t b);
float mt_f16_to_f32(uint16_t h);
/* float8_e4m3fn bits -> fp32 (exact; 0x7f/0xff are NaN, there is no infinity). */
float mt_f8e4m3_to_f32(uint8_t b);

/* Writes a whole file atomically: a temporary name in the same directory, then rename. */
void mt_file_write_atomic(const char *path, const void *data, size_t len);
