/* weights_load.c: reading a checkpoint into the model's buckets (see weights.h). A whole-model
 * load verifies the digests the files' headers record in the same pass that reads the data:
 * the files' tensors in offset order, each in chunks digested and then converted while the
 * chunk is still in cache, so verification adds no second read of the bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/weights.h"
#include "models/weights_internal.h"

/* Elements [s, s + n) of FP8 tensor t (already read as their fp8 values into dst) times their
 * blocks' scales, as transformers' Fp8Dequantize: value (fp32) * weight_scale_inv (fp32). */
static void wt_fp8_dequantize(const mt_weights_reader *r, const mt_st_tensor *t,
                              const mt_st_tensor *sc, int64_t s, int64_t n, float *dst) {
    const int nd = t->ndim;
    const int64_t rows = t->shape[nd - 2], cols = t->shape[nd - 1];
    const int64_t bm = r->m->cfg.fp8_block[0], bn = r->m->cfg.fp8_block[1];
    const int64_t gr = sc->shape[nd - 2], gc = sc->shape[nd - 1];
    float *scale = mt_malloc(sizeof(float) * (size_t)sc->numel, "fp8 scales");
    mt_safetensors_read(r->st, sc, 0, sc->numel, scale);
    for (int64_t i = 0; i < n; i++) {
        const int64_t idx = s + i, mat = idx / (rows * cols), w = idx % (rows * cols);
        dst[i] *= scale[mat * gr * gc + (w / cols / bm) * gc + (w % cols) / bn];
    }
    free(scale);
}

/* The first element of x[0, n) that is NaN or infinite (all exponent bits set), or -1: one pass
 * the compiler vectorises (an OR over the elements), then a scan only when one was found. */
static int64_t wt_first_nonfinite(const float *x, int64_t n) {
    uint32_t any = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof(u));
        any |= (u & 0x7f800000u) == 0x7f800000u;
    }
    for (int64_t i = 0; any && i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

/* Dies when elements [s, s + n) of t, read into x, hold a non-finite value: a model with one
 * computes NaN everywhere (logits, generated ids, the first loss) and names nothing. */
static void wt_check_finite(const mt_weights_reader *r, const mt_st_tensor *t, int64_t s, int64_t n,
                            const float *x) {
    const int64_t j = wt_first_nonfinite(x, n);
    if (j < 0) return;
    int64_t coord[MT_ST_MAX_DIMS], e = s + j; /* row-major coordinates, for the message */
    for (int d = t->ndim - 1; d >= 0; d--) {
        coord[d] = e % t->shape[d]; /* the element exists: no dimension is 0 */
        e /= t->shape[d];
    }
    char at[200] = "";
    for (int d = 0; d < t->ndim; d++)
        snprintf(at + strlen(at), sizeof(at) - strlen(at), "%s%lld", d ? ", " : "",
                 (long long)coord[d]);
    MT_DIE("weights: %s: tensor %s element %lld ([%s]) is %g: the checkpoint holds a non-finite "
           "weight (a damaged file, or one saved from a diverged run)",
           mt_safetensors_file(r->st, t), t->name, (long long)(s + j), at, (double)x[j]);
}

void mt_weights_read_range(mt_weights_reader *r, int bucket, int64_t lo, int64_t hi, float *dst) {
    const mt_minimax *m = r->m;
    MT_CHECK(bucket >= 0 && bucket < m->n_buckets && 0 <= lo && lo <= hi &&
                 hi <= m->bucket_numel[bucket],
             "weights: range [%lld, %lld) of bucket %d is outside it", (long long)lo, (long long)hi,
             bucket);
    memset(dst, 0, sizeof(float) * (size_t)(hi - lo));
    for (int p = 0; p < m->n_params; p++) {
        int64_t a, b;
        if (!mt_minimax_param_overlap(m, p, bucket, lo, hi, &a, &b)) continue;
        if (!r->src[p]) { /* a head initialised (wt_head_from_causal) */
            mt_weights_init_random_range(m, m->head_seed, bucket, a, b, dst + (a - lo));
            continue;
        }
        int64_t s = r->src_off[p] + (a - m->info[p].offset);
        mt_safetensors_read(r->st, r->src[p], s, s + (b - a), dst + (a - lo));
        if (r->scale[p]) wt_fp8_dequantize(r, r->src[p], r->scale[p], s, b - a, dst + (a - lo));
        wt_check_finite(r, r->src[p], s, b - a, dst + (a - lo)); /* after the block scales */
    }
}

/* ---- one pass: read and verify ---- */

/* Bytes digested (and then converted) at a time: small enough to be read again from cache. */
#define WL_CHUNK_BYTES ((int64_t)1 << 20)

typedef struct {
    int key;     /* file (tensors) or tensor index (pieces) */
    uint64_t at; /* byte offset (tensors) or element offset (pieces) */
    int i;       /* tensor index (tensors) or parameter (pieces) */
} wl_item;

static int wl_cmp(const void *a, const void *b) {
    const wl_item *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

/* One line on stderr when some files record no digest: they are loaded as they are. */
static void wl_say_unverified(const mt_safetensors *st, const char *dir) {
    int n = 0, first = -1;
    const int n_files = mt_safetensors_n_files(st);
    for (int f = 0; f < n_files; f++)
        if (!mt_safetensors_file_digest(st, f)[0]) first = first < 0 ? f : first, n++;
    if (n == 1 && n_files == 1)
        fprintf(stderr,
                "weights: %s records no " MT_ST_DIGEST_KEY " (not written by minimax-train): "
                "loaded unverified\n",
                mt_safetensors_file_path(st, first));
    else if (n > 0)
        fprintf(stderr,
                "weights: %d of %d safetensors files in %s record no " MT_ST_DIGEST_KEY
                " (not written by minimax-train; first %s): loaded unverified\n",
                n, n_files, dir, mt_safetensors_file_path(st, first));
}

/* Elements [a, b) of tensor t (parameter p's source) into dst: converted, the FP8 block scales
 * applied, checked finite. */
static void wl_read(const mt_weights_reader *r, int p, const mt_st_tensor *t, int64_t a, int64_t b,
                    float *dst) {
    mt_safetensors_read(r->st, t, a, b, dst);
    if (r->scale[p]) wt_fp8_dequantize(r, t, r->scale[p], a, b - a, dst);
    wt_check_finite(r, t, a, b - a, dst);
}

/* Every parameter into its bound bucket, every file's data section digested in the same pass
 * (tensors in offset order) and checked against its header: dies naming a damaged file. */
static void wl_load_verified(const mt_weights_reader *r, const char *dir) {
    const mt_minimax *m = r->m;
    const mt_safetensors *st = r->st;
    const int n_t = mt_safetensors_count(st), P = m->n_params;
    const mt_st_tensor *t0 = n_t ? mt_safetensors_tensor(st, 0) : NULL;
    float **base = mt_malloc(sizeof(float *) * (size_t)m->n_buckets, "bucket bases");
    for (int b = 0; b < m->n_buckets; b++) {
        base[b] = mt_weights_bucket_data(m, b);
        memset(base[b], 0, sizeof(float) * (size_t)m->bucket_numel[b]); /* alignment gaps */
    }
    wl_item *tens = mt_malloc(sizeof(wl_item) * (size_t)(n_t + 1), "tensor order");
    wl_item *pcs = mt_malloc(sizeof(wl_item) * (size_t)(P + 1), "parameter order");
    for (int i = 0; i < n_t; i++) {
        const mt_st_tensor *t = mt_safetensors_tensor(st, i);
        tens[i] = (wl_item){t->file, t->begin, i};
    }
    int np = 0;
    for (int p = 0; p < P; p++) {
        const mt_param_info *info = &m->info[p];
        if (!r->src[p]) { /* a head initialised (wt_head_from_causal) */
            mt_weights_init_random_range(m, m->head_seed, info->bucket, info->offset,
                                         info->offset + info->numel,
                                         base[info->bucket] + info->offset);
            continue;
        }
        pcs[np++] = (wl_item){(int)(r->src[p] - t0), (uint64_t)r->src_off[p], p};
    }
    qsort(tens, (size_t)n_t, sizeof(wl_item), wl_cmp);
    qsort(pcs, (size_t)np, sizeof(wl_item), wl_cmp);
    int *first = mt_calloc((size_t)n_t + 1, sizeof(int), "pieces per tensor"); /* pcs run of t */
    for (int j = 0, i = 0; i <= n_t; i++) {
        while (j < np && pcs[j].key < i) j++;
        first[i] = j;
    }
    char err[1200];
    for (int k = 0, f = 0; f < mt_safetensors_n_files(st); f++) {
        const bool check = mt_safetensors_file_digest(st, f)[0] != 0;
        mt_digest d;
        mt_digest_init(&d);
        for (; k < n_t && tens[k].key == f; k++) {
            const int ti = tens[k].i;
            const mt_st_tensor *t = mt_safetensors_tensor(st, ti);
            const uint8_t *bytes = mt_safetensors_bytes(st, t);
            const int64_t es = t->numel ? (int64_t)(t->end - t->begin) / t->numel : 1;
            const int64_t chunk = WL_CHUNK_BYTES / es;
            int j = first[ti];
            if (j == first[ti + 1]) { /* no parameter reads it (scales, carried, buffers) */
                if (check) mt_digest_update(&d, bytes, (size_t)(t->end - t->begin));
                continue;
            }
            for (int64_t e0 = 0; e0 < t->numel; e0 += chunk) {
                const int64_t e1 = t->numel - e0 < chunk ? t->numel : e0 + chunk;
                if (check) mt_digest_update(&d, bytes + e0 * es, (size_t)((e1 - e0) * es));
                for (int q = j; q < first[ti + 1]; q++) {
                    const int p = pcs[q].i;
                    const int64_t lo = r->src_off[p], hi = lo + m->info[p].numel;
                    if (hi <= e0) j = q + 1; /* done with: later chunks start after it */
                    if (lo >= e1) break;
                    const int64_t a = lo > e0 ? lo : e0, b = hi < e1 ? hi : e1;
                    if (a < b)
                        wl_read(r, p, t, a, b,
                                base[m->info[p].bucket] + m->info[p].offset + (a - lo));
                }
            }
        }
        if (check && !mt_safetensors_digest_check(st, f, mt_digest_final(&d), err, sizeof(err)))
            MT_DIE("weights: %s (--no-verify loads it anyway)", err);
    }
    wl_say_unverified(st, dir);
    free(first);
    free(pcs);
    free(tens);
    free(base);
}

void mt_weights_verify(const mt_weights_reader *r, const char *dir, int first, int stride) {
    char err[1200];
    for (int f = first; f < mt_safetensors_n_files(r->st); f += stride) {
        bool checked;
        if (!mt_safetensors_verify(r->st, f, &checked, err, sizeof(err)))
            MT_DIE("weights: %s (--no-verify loads it anyway)", err);
    }
    if (first == 0) wl_say_unverified(r->st, dir);
}

mt_naming mt_weights_load_checked(const char *dir, mt_minimax *m, bool verify) {
    mt_weights_reader *r = mt_weights_open(dir, m);
    if (verify)
        wl_load_verified(r, dir);
    else
        for (int b = 0; b < m->n_buckets; b++)
            mt_weights_read_range(r, b, 0, m->bucket_numel[b], mt_weights_bucket_data(m, b));
    mt_naming naming = r->naming;
    mt_weights_close(r);
    return naming;
}

mt_naming mt_weights_load(const char *dir, mt_minimax *m) {
    return mt_weights_load_checked(dir, m, true);
}

static float **wl_load_host(const char *dir, mt_minimax *m, bool verify) {
    float **data = mt_calloc((size_t)m->n_buckets, sizeof(float *), "buckets");
    for (int b = 0; b < m->n_buckets; b++) {
        data[b] = mt_calloc((size_t)m->bucket_numel[b], sizeof(float), "bucket");
        mt_minimax_bind_bucket(m, b, data[b], NULL);
    }
    mt_weights_load_checked(dir, m, verify);
    return data;
}

void mt_weights_host_free(mt_minimax *m, float **data) {
    for (int b = 0; b < m->n_buckets; b++) free(data[b]);
    free(data);
}

float **mt_weights_load_host(const char *dir, mt_minimax *m) { return wl_load_host(dir, m, true); }

float **mt_weights_load_backend_checked(const char *dir, mt_minimax *m, const mt_backend *be,
                                        bool verify) {
    float **data = wl_load_host(dir, m, verify);
    if (be->dev == MT_CPU) return data;
    for (int b = 0; b < m->n_buckets; b++) {
        const size_t bytes = sizeof(float) * (size_t)m->bucket_numel[b];
        float *dev = be->alloc(bytes);
        be->to_device(dev, data[b], bytes);
        free(data[b]);
        data[b] = dev;
        mt_minimax_bind_bucket(m, b, dev, NULL);
    }
    return data;
}

float **mt_weights_load_backend(const char *dir, mt_minimax *m, const mt_backend *be) {
    return mt_weights_load_backend_checked(dir, m, be, true);
}

void mt_weights_backend_free(mt_minimax *m, const mt_backend *be, float **data) {
    if (be->dev == MT_CPU) {
        mt_weights_host_free(m, data);
        return;
    }
    for (int b = 0; b < m->n_buckets; b++) be->free(data[b]);
    free(data);
}

mt_naming mt_weights_load_range(const char *dir, const mt_minimax *m, int bucket, int64_t lo,
                                int64_t hi, float *dst) {
    mt_weights_reader *r = mt_weights_open(dir, m);
    mt_weights_read_range(r, bucket, lo, hi, dst);
    mt_naming naming = r->naming;
    mt_weights_close(r);
    return naming;
}
