/* token_cache.h: the tokenized SFT dataset and its HDF5 cache.
 *
 * File layout (one HDF5 file, written serially):
 *   /ids      I32 (n_tokens)       token ids of all samples, concatenated
 *   /labels   I32 (n_tokens)       unshifted labels: ids where trained, -100 elsewhere
 *   /offsets  I64 (n_samples + 1)  sample i = tokens [offsets[i], offsets[i+1])
 *   /source   I32 (n_samples)      the data file of each sample (index into the paths)
 *   /head_i32 I32 (n_samples, i32_width)  a head objective's integer targets, when it has any
 *   /head_f32 F32 (n_samples, f32_width)  its float targets, when it has any (data/head_data.h)
 *   attributes: format (I64), data_hash, tokenizer_hash, template_hash, options_hash (U64),
 *   max_length (I64), options (string, the human-readable option list), and the build
 *   counts n_lines, n_skipped, n_truncated, n_dropped, n_targets (I64); for a head objective
 *   also objective (I32, its mt_objective). An SFT cache (objective 0) has neither the attribute
 *   nor the head datasets: its file is what it was before heads existed. A head dataset whose
 *   rows are not n_samples, or one without the objective attribute, makes the file inconsistent.
 * The hashes are 64-bit FNV-1a (core/file_io.h) of the data files' bytes (in order), of
 * tokenizer.json's bytes and of what the renders depend on (the chat templates' text, the special
 * tokens, data.template_kwargs: mt_chat_template_hash); options_hash covers everything else that
 * changes the tokens (system text, annotation stripping, truncation policy, max_length, skip_bad,
 * cache format, data.format, data.train_on, data.reasoning_history, the number of files and their
 * weights). A
 * cache is reused only when every one of them matches; otherwise it is rebuilt and written to
 * "<path>.tmp.<pid>", then renamed over <path>, so readers never see a partial file. In a
 * distributed run one rank builds (mt_token_cache_open) and the others read after a barrier. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/dataset.h"
#include "data/sample.h"

typedef struct {
    int64_t n_samples, n_tokens;
    int32_t *ids;     /* (n_tokens) */
    int32_t *labels;  /* (n_tokens) */
    int64_t *offsets; /* (n_samples + 1) */
    int32_t *source;  /* (n_samples) the data file each sample came from (0 ..) */
    /* how the dataset was built */
    int64_t n_lines, n_skipped, n_truncated, n_dropped, n_targets;
    /* The targets of a head objective (data/head_data.h), per sample; NULL / 0 for SFT:
     * head_i32 (n_samples, i32_width) class ids or QA start / end token positions, head_f32
     * (n_samples, f32_width) float targets or a reward pair's margin. objective: its
     * mt_objective (0: SFT). */
    int32_t objective;
    int32_t *head_i32;
    float *head_f32;
    int32_t i32_width, f32_width;
} mt_token_data;
void mt_token_data_free(mt_token_data *d);

/* Part of every cache key. The hashes cover the data, tokenizer.json, the template and the
 * options, not the code that turns them into tokens and labels: bump this whenever that code
 * changes what it produces, so older caches are rebuilt. 2: the tokenizer of d376430 (a cache
 * written before it, still reused after, gave 29 fewer labelled tokens of 120,787 for the
 * demo's data and another loss curve). */
#define MT_TOKEN_CACHE_FORMAT 4 /* 3: /source, several files; 4: the model's own template */

typedef struct {
    int64_t format;
    uint64_t data_hash, tokenizer_hash, template_hash, options_hash;
    int64_t max_length;
    char options[1024];
} mt_cache_key;

typedef struct {
    const char *data_path;         /* one data file (data/dataset.h), when n_data_paths is 0 */
    const char *const *data_paths; /* or several (data.paths), each read in its own format */
    int n_data_paths;
    const double *weights;       /* (n_data_paths) mixing weights (data.weights), NULL: none; they
                                    change no token, but a cache names what it was built for */
    mt_data_format format;       /* every file's format; MT_FORMAT_AUTO: detected per file */
    const char *tokenizer_dir;   /* holds tokenizer.json and tokenizer_config.json */
    const char *chat_template;   /* data.chat_template: a template file (NULL: the directory's) */
    const char *template_kwargs; /* data.template_kwargs as a JSON object (NULL: none) */
    const char *cache_path;      /* the .h5 file */
    mt_sample_opts sample;
    bool skip_bad; /* count and skip bad jsonl lines instead of failing */
    /* train.objective's data (data/head_data.h); NULL: SFT conversations */
    const struct mt_head_data_opts_s *head;
    bool force; /* rebuild even when the cache matches */
} mt_token_cache_cfg;

/* The chat template of a configuration (data/chat.h). NULL with err set. */
mt_chat_template *mt_token_cache_template(const mt_token_cache_cfg *cfg, char *err);
/* The key of a configuration: hashes the files, tmpl (the configuration's template) and the
 * options. Returns 0, or -1 with err set. */
int mt_token_cache_key(const mt_token_cache_cfg *cfg, const mt_chat_template *tmpl,
                       mt_cache_key *key, char *err);

/* Tokenizes every record of data_path (format auto) into out, each conversation giving its
 * samples (data/sample.h; over max_length dropped or cut as the options say). Returns 0, or -1
 * with "path:line: reason" in err. */
int mt_token_data_build(const char *data_path, const mt_tokenizer *tok, mt_chat_template *tmpl,
                        const mt_sample_opts *o, bool skip_bad, mt_token_data *out, char *err);
/* The same over n files, in order (source[i] = the file of sample i). */
int mt_token_data_build_files(const char *const *paths, int n, mt_data_format format,
                              const mt_tokenizer *tok, mt_chat_template *tmpl,
                              const mt_sample_opts *o, bool skip_bad, mt_token_data *out,
                              char *err);

/* Reads a cache file. With want != NULL the file's key must equal want: returns 0 when loaded,
 * 1 when the file is absent, unreadable or has another key (why says which), -1 when a file with
 * the right key is inconsistent (err). With want == NULL any well-formed cache is loaded. */
int mt_token_cache_read(const char *path, const mt_cache_key *want, mt_token_data *out, char *why);
/* Writes data under key to path atomically (temporary file + rename). Returns 0 or -1 (err). */
int mt_token_cache_write(const char *path, const mt_cache_key *key, const mt_token_data *d,
                         char *err);

/* Reuses cfg->cache_path when its key matches, otherwise builds the dataset and writes the
 * cache. *reused tells which happened. Returns 0, or -1 with err set (no file left behind). */
int mt_token_cache_open(const mt_token_cache_cfg *cfg, mt_token_data *out, bool *reused, char *err);
