/* token_cache.c: build the tokenized dataset; read and write its HDF5 cache. */
#include "data/token_cache.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "data/hdf5_error.h"
#include "data/head_data.h"

void mt_token_data_free(mt_token_data *d) {
    free(d->ids);
    free(d->labels);
    free(d->offsets);
    free(d->source);
    free(d->head_i32);
    free(d->head_f32);
    *d = (mt_token_data){0};
}

/* The data files of cfg: data_paths, or data_path alone. */
static int cache_paths(const mt_token_cache_cfg *cfg, const char *const **paths) {
    *paths = cfg->n_data_paths > 0 ? cfg->data_paths : &cfg->data_path;
    return cfg->n_data_paths > 0 ? cfg->n_data_paths : 1;
}

mt_chat_template *mt_token_cache_template(const mt_token_cache_cfg *cfg, char *err) {
    const mt_chat_source src = {
        .dir = cfg->tokenizer_dir, .file = cfg->chat_template, .kwargs_json = cfg->template_kwargs};
    return mt_chat_template_open(&src, err, MT_ERR_LEN);
}

/* A head objective's part of the options: objective, num_labels, the label names (as many as
 * fit, and the hash of all of them). */
static void head_options(const mt_head_data_opts *h, char *options, size_t cap) {
    uint64_t names = MT_HASH64_INIT;
    char list[256] = "";
    size_t at = 0;
    for (int i = 0; i < h->n_label_names; i++) {
        const char *l = h->label_names[i] ? h->label_names[i] : "";
        names = mt_hash64(l, strlen(l) + 1, names); /* the NUL separates the names */
        if (at < sizeof(list))
            at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", i ? "," : "", l);
    }
    const size_t len = strlen(options);
    snprintf(options + len, cap - len, " objective=%s num_labels=%d labels=%s labels_hash=%016llx",
             mt_objective_name(h->objective), h->num_labels, h->n_label_names ? list : "none",
             (unsigned long long)names);
}

int mt_token_cache_key(const mt_token_cache_cfg *cfg, const mt_chat_template *tmpl,
                       mt_cache_key *key, char *err) {
    *key = (mt_cache_key){.format = MT_TOKEN_CACHE_FORMAT, .max_length = cfg->sample.max_length};
    char path[4096];
    const char *const *paths;
    const int n_paths = cache_paths(cfg, &paths);
    key->data_hash = MT_HASH64_INIT;
    for (int i = 0; i < n_paths; i++) { /* each file's hash, in order */
        uint64_t h;
        if (mt_file_hash(paths[i], &h, err) != 0) return -1;
        key->data_hash = mt_hash64(&h, sizeof(h), key->data_hash);
    }
    snprintf(path, sizeof(path), "%s/tokenizer.json", cfg->tokenizer_dir);
    if (mt_file_hash(path, &key->tokenizer_hash, err) != 0) return -1;
    key->template_hash = mt_chat_template_hash(tmpl);
    const mt_sample_opts *o = &cfg->sample;
    uint64_t sys = o->system ? mt_hash64(o->system, strlen(o->system), MT_HASH64_INIT) : 0;
    char sys_text[32] = "none", weights[256] = "none";
    if (o->system) snprintf(sys_text, sizeof(sys_text), "%016llx", (unsigned long long)sys);
    for (int i = 0; cfg->weights && i < n_paths; i++)
        snprintf(weights + (i ? strlen(weights) : 0), sizeof(weights) - (i ? strlen(weights) : 0),
                 "%s%.17g", i ? "," : "", cfg->weights[i]);
    snprintf(key->options, sizeof(key->options),
             "format=%d max_length=%lld policy=%s strip_annotations=%d skip_bad=%d system=%s "
             "data_format=%s train_on=%s reasoning_history=%s sanitize=%d files=%d weights=%s",
             MT_TOKEN_CACHE_FORMAT, (long long)o->max_length,
             o->policy == MT_TRUNC_DROP ? "drop" : "truncate", o->strip_annotations ? 1 : 0,
             cfg->skip_bad ? 1 : 0, sys_text, mt_data_format_name(cfg->format),
             o->last_assistant_only ? "last_assistant" : "all_assistant",
             o->history == MT_HISTORY_SPLIT ? "split" : "as_template", o->sanitize ? 1 : 0, n_paths,
             weights);
    if (cfg->head) head_options(cfg->head, key->options, sizeof(key->options));
    key->options_hash = mt_hash64(key->options, strlen(key->options), MT_HASH64_INIT);
    return 0;
}

static void grow(void **p, int64_t *cap, int64_t need, size_t elem, const char *what) {
    if (need <= *cap) return;
    int64_t c = *cap ? *cap : 1 << 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    MT_CHECK(q, "out of memory for %s (%lld elements)", what, (long long)c);
    *p = q;
    *cap = c;
}

/* Appends the samples built last (b) to out, from file src. */
static void sample_add(const mt_sample_builder *b, int32_t src, mt_token_data *out,
                       int64_t caps[4]) {
    const int64_t at = out->n_tokens;
    grow((void **)&out->ids, &caps[0], at + b->n, sizeof(int32_t), "token ids");
    grow((void **)&out->labels, &caps[1], at + b->n, sizeof(int32_t), "labels");
    grow((void **)&out->offsets, &caps[2], out->n_samples + 2, sizeof(int64_t), "sample offsets");
    grow((void **)&out->source, &caps[3], out->n_samples + 1, sizeof(int32_t), "sample sources");
    memcpy(out->ids + at, b->ids, sizeof(int32_t) * (size_t)b->n);
    memcpy(out->labels + at, b->lab, sizeof(int32_t) * (size_t)b->n);
    out->n_tokens += b->n;
    out->n_targets += b->n_targets;
    out->source[out->n_samples] = src;
    out->offsets[++out->n_samples] = out->n_tokens;
}

/* Appends the samples of one file (source index src) to out. */
static int build_file(const char *path, int32_t src, mt_data_format format, mt_sample_builder *b,
                      bool skip_bad, mt_token_data *out, int64_t caps[4], char *err) {
    mt_conv_set set;
    if (mt_conv_read(path, format, skip_bad, &set, err) != 0) return -1;
    out->n_lines += set.n_lines;
    out->n_skipped += set.n_skipped;
    int rc = 0;
    char why[MT_ERR_LEN];
    for (int64_t i = 0; i < set.n && rc == 0; i++) {
        const int k = mt_sample_conv_open(b, set.json[i], set.json_len[i], why);
        for (int p = 0; p < k && rc == 0; p++) {
            const int r = mt_sample_build_piece(b, p, why);
            if (r == MT_SAMPLE_ERROR) {
                rc = -1;
            } else if (r == MT_SAMPLE_DROPPED) {
                out->n_dropped++;
            } else {
                out->n_truncated += r == MT_SAMPLE_TRUNCATED;
                sample_add(b, src, out, caps);
            }
        }
        if (k < 0 || rc != 0) {
            snprintf(err, MT_ERR_LEN, "%s:%lld: %.400s", path, (long long)set.line[i], why);
            rc = -1;
        }
    }
    mt_conv_set_free(&set);
    return rc;
}

int mt_token_data_build_files(const char *const *paths, int n, mt_data_format format,
                              const mt_tokenizer *tok, mt_chat_template *tmpl,
                              const mt_sample_opts *o, bool skip_bad, mt_token_data *out,
                              char *err) {
    *out = (mt_token_data){0};
    mt_sample_builder b;
    mt_sample_builder_init(&b, tok, tmpl, o);
    int64_t caps[4] = {0};
    grow((void **)&out->offsets, &caps[2], 1, sizeof(int64_t), "sample offsets");
    grow((void **)&out->source, &caps[3], 1, sizeof(int32_t), "sample sources");
    out->offsets[0] = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = build_file(paths[i], i, format, &b, skip_bad, out, caps, err);
    mt_sample_builder_free(&b);
    if (rc != 0) mt_token_data_free(out);
    return rc;
}

int mt_token_data_build(const char *data_path, const mt_tokenizer *tok, mt_chat_template *tmpl,
                        const mt_sample_opts *o, bool skip_bad, mt_token_data *out, char *err) {
    return mt_token_data_build_files(&data_path, 1, MT_FORMAT_AUTO, tok, tmpl, o, skip_bad, out,
                                     err);
}

/* ---- HDF5 ---- */

/* HDF5 prints its error stack by default; the cache reports its own errors instead, with
 * HDF5's reason (data/hdf5_error.h). */

static bool attr_write(hid_t f, const char *name, hid_t file_type, hid_t mem_type, const void *v) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT);
    bool ok = a >= 0 && H5Awrite(a, mem_type, v) >= 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return ok;
}

static bool attr_read(hid_t f, const char *name, hid_t mem_type, void *v) {
    if (H5Aexists(f, name) <= 0) return false;
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    bool ok = a >= 0 && H5Aread(a, mem_type, v) >= 0;
    if (a >= 0) H5Aclose(a);
    return ok;
}

static bool string_attr_write(hid_t f, const char *name, const char *s) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(s) + 1);
    bool ok = attr_write(f, name, t, t, s);
    H5Tclose(t);
    return ok;
}

static bool dset_write(hid_t f, const char *name, hid_t file_type, hid_t mem_type, int64_t n,
                       const void *data) {
    hsize_t dims[1] = {(hsize_t)n};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(f, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    bool ok = d >= 0 && (n == 0 || H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    if (d >= 0) H5Dclose(d);
    H5Sclose(sp);
    return ok;
}

/* Reads a 1-D dataset into a malloc'ed buffer; *n receives its length. */
static void *dset_read(hid_t f, const char *name, hid_t mem_type, size_t elem, int64_t *n) {
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) return NULL;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return NULL;
    hid_t sp = H5Dget_space(d);
    hsize_t dims[1] = {0};
    void *buf = NULL;
    if (H5Sget_simple_extent_ndims(sp) == 1 && H5Sget_simple_extent_dims(sp, dims, NULL) == 1) {
        buf = mt_malloc(elem * (size_t)dims[0], name);
        if (dims[0] > 0 && H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
            free(buf);
            buf = NULL;
        }
        *n = (int64_t)dims[0];
    }
    H5Sclose(sp);
    H5Dclose(d);
    return buf;
}

/* ---- the head columns (token_cache.h): an "objective" attribute and /head_i32, /head_f32 of
 * (n_samples, width), present only for a head objective ---- */

static const char *head_names[2] = {"head_i32", "head_f32"};

/* Whether d's head columns can be written; err names what is wrong. */
static bool heads_check(const char *path, const mt_token_data *d, char *err) {
    const int32_t width[2] = {d->i32_width, d->f32_width};
    const void *col[2] = {d->head_i32, d->head_f32};
    if (d->objective < 0 || d->objective >= MT_OBJECTIVE_COUNT) {
        snprintf(err, MT_ERR_LEN, "%.300s: cannot write the token cache: objective %d is none",
                 path, (int)d->objective);
        return false;
    }
    for (int k = 0; k < 2; k++) {
        const char *why = width[k] < 0                                    ? "a negative width"
                          : d->objective == 0 && (width[k] > 0 || col[k]) ? "no objective"
                          : width[k] > 0 && !col[k] && d->n_samples > 0   ? "no values"
                                                                          : NULL;
        if (why) {
            snprintf(err, MT_ERR_LEN, "%.300s: cannot write the token cache: /%s with %s", path,
                     head_names[k], why);
            return false;
        }
    }
    return true;
}

static bool dset2_write(hid_t f, const char *name, hid_t file_type, hid_t mem_type, int64_t rows,
                        int32_t cols, const void *data) {
    hsize_t dims[2] = {(hsize_t)rows, (hsize_t)cols};
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t d = H5Dcreate2(f, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    bool ok =
        d >= 0 && (rows == 0 || H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    if (d >= 0) H5Dclose(d);
    H5Sclose(sp);
    return ok;
}

/* Writes the objective and the head columns; nothing at all for SFT (objective 0). */
static bool heads_write(hid_t f, const mt_token_data *d) {
    if (d->objective == 0) return true;
    bool ok = attr_write(f, "objective", H5T_STD_I32LE, H5T_NATIVE_INT32, &d->objective);
    if (ok && d->i32_width > 0)
        ok = dset2_write(f, "head_i32", H5T_STD_I32LE, H5T_NATIVE_INT32, d->n_samples, d->i32_width,
                         d->head_i32);
    if (ok && d->f32_width > 0)
        ok = dset2_write(f, "head_f32", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, d->n_samples,
                         d->f32_width, d->head_f32);
    return ok;
}

/* Reads head column k (absent: nothing) of out->n_samples rows. 0, or -1 with why naming it. */
static int head_read(hid_t f, int k, mt_token_data *out, const char *path, char *why) {
    const char *name = head_names[k];
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) return 0;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t sp = d >= 0 ? H5Dget_space(d) : -1;
    hsize_t dims[2] = {0, 0};
    const int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    bool ok = rank == 2 && H5Sget_simple_extent_dims(sp, dims, NULL) == 2 &&
              dims[0] == (hsize_t)out->n_samples && dims[1] >= 1 && dims[1] <= INT32_MAX;
    if (!ok) {
        char shape[96] = "not a dataset";
        if (rank == 1 || rank == 2) {
            H5Sget_simple_extent_dims(sp, dims, NULL);
            snprintf(shape, sizeof(shape), rank == 1 ? "(%llu)" : "(%llu, %llu)",
                     (unsigned long long)dims[0], (unsigned long long)dims[1]);
        } else if (rank >= 0) {
            snprintf(shape, sizeof(shape), "of rank %d", rank);
        }
        snprintf(why, MT_ERR_LEN,
                 "%s: the token cache is inconsistent: /%s is %s, not (n_samples %lld, width)",
                 path, name, shape, (long long)out->n_samples);
    } else if (out->objective == 0) {
        snprintf(why, MT_ERR_LEN,
                 "%s: the token cache is inconsistent: /%s without an objective attribute", path,
                 name);
        ok = false;
    } else {
        const size_t n = (size_t)dims[0] * (size_t)dims[1];
        void *buf = mt_malloc((n ? n : 1) * 4, name); /* int32_t or float */
        if (k == 0)
            out->head_i32 = buf, out->i32_width = (int32_t)dims[1];
        else
            out->head_f32 = buf, out->f32_width = (int32_t)dims[1];
        ok = n == 0 || H5Dread(d, k == 0 ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
                               H5P_DEFAULT, buf) >= 0;
        if (!ok)
            snprintf(why, MT_ERR_LEN,
                     "%s: the token cache is inconsistent: /%s unreadable (HDF5: %s)", path, name,
                     mt_hdf5_error_reason());
    }
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    return ok ? 0 : -1;
}

/* The objective attribute (absent: SFT) and the head columns. 0, or -1 with why. */
static int heads_read(hid_t f, mt_token_data *out, const char *path, char *why) {
    int32_t obj = 0;
    if (H5Aexists(f, "objective") > 0 && (!attr_read(f, "objective", H5T_NATIVE_INT32, &obj) ||
                                          obj <= 0 || obj >= MT_OBJECTIVE_COUNT)) {
        snprintf(why, MT_ERR_LEN,
                 "%s: the token cache is inconsistent: objective attribute %d is no head "
                 "objective",
                 path, (int)obj);
        return -1;
    }
    out->objective = obj;
    for (int k = 0; k < 2; k++)
        if (head_read(f, k, out, path, why) != 0) return -1;
    return 0;
}

static const char *count_names[] = {"n_lines", "n_skipped", "n_truncated", "n_dropped",
                                    "n_targets"};
static int64_t *count_field(mt_token_data *d, int i) {
    int64_t *f[] = {&d->n_lines, &d->n_skipped, &d->n_truncated, &d->n_dropped, &d->n_targets};
    return f[i];
}

int mt_token_cache_write(const char *path, const mt_cache_key *key, const mt_token_data *d,
                         char *err) {
    char tmp[4096];
    if (!heads_check(path, d, err)) return -1;
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    mt_hdf5_errors q = mt_hdf5_errors_capture();
    remove(tmp); /* a leftover of a killed run with the same pid */
    hid_t f = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) {
        mt_hdf5_errors_restore(q);
        snprintf(err, MT_ERR_LEN, "%.300s: cannot create the token cache (HDF5: %s)", tmp,
                 mt_hdf5_error_reason());
        return -1;
    }
    bool ok =
        dset_write(f, "ids", H5T_STD_I32LE, H5T_NATIVE_INT32, d->n_tokens, d->ids) &&
        dset_write(f, "labels", H5T_STD_I32LE, H5T_NATIVE_INT32, d->n_tokens, d->labels) &&
        dset_write(f, "offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, d->n_samples + 1, d->offsets) &&
        dset_write(f, "source", H5T_STD_I32LE, H5T_NATIVE_INT32, d->n_samples, d->source);
    ok = ok && attr_write(f, "format", H5T_STD_I64LE, H5T_NATIVE_INT64, &key->format);
    ok = ok && attr_write(f, "data_hash", H5T_STD_U64LE, H5T_NATIVE_UINT64, &key->data_hash);
    ok = ok &&
         attr_write(f, "tokenizer_hash", H5T_STD_U64LE, H5T_NATIVE_UINT64, &key->tokenizer_hash);
    ok =
        ok && attr_write(f, "template_hash", H5T_STD_U64LE, H5T_NATIVE_UINT64, &key->template_hash);
    ok = ok && attr_write(f, "options_hash", H5T_STD_U64LE, H5T_NATIVE_UINT64, &key->options_hash);
    ok = ok && attr_write(f, "max_length", H5T_STD_I64LE, H5T_NATIVE_INT64, &key->max_length);
    ok = ok && string_attr_write(f, "options", key->options);
    for (int i = 0; i < 5 && ok; i++)
        ok = attr_write(f, count_names[i], H5T_STD_I64LE, H5T_NATIVE_INT64,
                        count_field((mt_token_data *)d, i));
    ok = ok && heads_write(f, d);
    ok = H5Fclose(f) >= 0 && ok;
    mt_hdf5_errors_restore(q);
    if (!ok) {
        snprintf(err, MT_ERR_LEN, "%.300s: cannot write the token cache (HDF5: %s)", tmp,
                 mt_hdf5_error_reason());
        remove(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, MT_ERR_LEN, "%.300s: cannot write the token cache: %s", path,
                 strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

static bool key_read(hid_t f, mt_cache_key *k) {
    *k = (mt_cache_key){0};
    bool ok = attr_read(f, "format", H5T_NATIVE_INT64, &k->format) &&
              attr_read(f, "data_hash", H5T_NATIVE_UINT64, &k->data_hash) &&
              attr_read(f, "tokenizer_hash", H5T_NATIVE_UINT64, &k->tokenizer_hash) &&
              attr_read(f, "template_hash", H5T_NATIVE_UINT64, &k->template_hash) &&
              attr_read(f, "options_hash", H5T_NATIVE_UINT64, &k->options_hash) &&
              attr_read(f, "max_length", H5T_NATIVE_INT64, &k->max_length);
    return ok;
}

/* Which part of the key differs, or NULL. */
static const char *key_diff(const mt_cache_key *a, const mt_cache_key *b) {
    if (a->format != b->format) return "cache format";
    if (a->data_hash != b->data_hash) return "data file";
    if (a->tokenizer_hash != b->tokenizer_hash) return "tokenizer.json";
    if (a->template_hash != b->template_hash) return "chat template";
    if (a->max_length != b->max_length) return "max_length";
    if (a->options_hash != b->options_hash) return "options";
    return NULL;
}

int mt_token_cache_read(const char *path, const mt_cache_key *want, mt_token_data *out, char *why) {
    *out = (mt_token_data){0};
    if (access(path, F_OK) != 0) {
        snprintf(why, MT_ERR_LEN, "%s: no cache file", path);
        return 1;
    }
    mt_hdf5_errors q = mt_hdf5_errors_capture();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        mt_hdf5_errors_restore(q);
        snprintf(why, MT_ERR_LEN, "%s: not a readable HDF5 file (HDF5: %s)", path,
                 mt_hdf5_error_reason());
        return 1;
    }
    mt_cache_key have;
    int rc = 0;
    const char *diff = NULL;
    if (!key_read(f, &have)) {
        snprintf(why, MT_ERR_LEN, "%s: not a token cache (attributes missing)", path);
        rc = 1;
    } else if (want && (diff = key_diff(&have, want)) != NULL) {
        snprintf(why, MT_ERR_LEN, "%s: built for another %s", path, diff);
        rc = 1;
    }
    for (int i = 0; i < 5 && rc == 0; i++)
        if (!attr_read(f, count_names[i], H5T_NATIVE_INT64, count_field(out, i))) rc = -1;
    int64_t n_ids = 0, n_labels = 0, n_off = 0;
    if (rc == 0) {
        out->ids = dset_read(f, "ids", H5T_NATIVE_INT32, sizeof(int32_t), &n_ids);
        out->labels = dset_read(f, "labels", H5T_NATIVE_INT32, sizeof(int32_t), &n_labels);
        out->offsets = dset_read(f, "offsets", H5T_NATIVE_INT64, sizeof(int64_t), &n_off);
        int64_t n_src = -1;
        out->source = dset_read(f, "source", H5T_NATIVE_INT32, sizeof(int32_t), &n_src);
        bool ok = out->ids && out->labels && out->offsets && out->source && n_ids == n_labels &&
                  n_off >= 1 && n_src == n_off - 1 && out->offsets[0] == 0 &&
                  out->offsets[n_off - 1] == n_ids;
        for (int64_t i = 0; ok && i < n_src; i++) ok = out->source[i] >= 0;
        for (int64_t i = 0; ok && i + 1 < n_off; i++) ok = out->offsets[i] <= out->offsets[i + 1];
        if (!ok) rc = -1;
        out->n_samples = n_off - 1;
        out->n_tokens = n_ids;
    }
    if (rc == -1) snprintf(why, MT_ERR_LEN, "%s: the token cache is inconsistent", path);
    if (rc == 0 && heads_read(f, out, path, why) != 0) rc = -1;
    H5Fclose(f);
    mt_hdf5_errors_restore(q);
    if (rc != 0) mt_token_data_free(out);
    return rc;
}

int mt_token_cache_open(const mt_token_cache_cfg *cfg, mt_token_data *out, bool *reused,
                        char *err) {
    *reused = false;
    mt_cache_key key;
    mt_chat_template *tmpl = mt_token_cache_template(cfg, err);
    if (!tmpl) return -1;
    if (mt_token_cache_key(cfg, tmpl, &key, err) != 0) {
        mt_chat_template_free(tmpl);
        return -1;
    }
    if (!cfg->force) {
        char why[MT_ERR_LEN];
        if (mt_token_cache_read(cfg->cache_path, &key, out, why) == 0) {
            *reused = true;
            mt_chat_template_free(tmpl);
            return 0;
        }
        /* absent, stale or damaged: rebuilt below */
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/tokenizer.json", cfg->tokenizer_dir);
    mt_tokenizer *tok = mt_tokenizer_try_load(path, err, MT_ERR_LEN);
    if (!tok || !mt_chat_template_tokens_fit(tmpl, tok, cfg->tokenizer_dir, err, MT_ERR_LEN)) {
        mt_tokenizer_free(tok);
        mt_chat_template_free(tmpl);
        return -1;
    }
    const char *const *paths;
    const int n_paths = cache_paths(cfg, &paths);
    int rc = cfg->head ? mt_head_data_build_files(paths, n_paths, tok, tmpl, &cfg->sample,
                                                  cfg->head, cfg->skip_bad, out, err)
                       : mt_token_data_build_files(paths, n_paths, cfg->format, tok, tmpl,
                                                   &cfg->sample, cfg->skip_bad, out, err);
    mt_tokenizer_free(tok);
    mt_chat_template_free(tmpl);
    if (rc != 0) return -1;
    if (mt_token_cache_write(cfg->cache_path, &key, out, err) != 0) {
        mt_token_data_free(out);
        return -1;
    }
    return 0;
}
