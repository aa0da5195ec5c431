/* eval_util.h: what the command-line evaluation tests share (eval_minimax_eval.c,
 * eval_minimax_chat.c, eval_chat_template.c, serve.c): a random model of recipes/configs/ with a
 * test tokenizer, and the test tokenizer's chat template. */
#pragma once
#include <stdio.h>
#include <stdlib.h>

#include "data/chat.h"
#include "core/file_io.h"
#include "models/config.h"
#include "models/minimax.h"
#include "models/weights.h"
#include "tests/support/data_util.h"

/* A random model of recipes/configs/<config> cut to `layers` layers (max_position_embeddings
 * set to max_pos when > 0, vocab_size to vocab when > 0: a tokenizer with more ids than the
 * config's), with tok's tokenizer.json and tokenizer_config.json (tok NULL: the test tokenizer's),
 * in <dir>/model; its path in model. */
static inline void eval_make_model_tok(const char *config, const char *tok, int64_t vocab,
                                       const char *dir, int layers, int max_pos, char *model,
                                       size_t n) {
    char path[4400], err[MT_ERR_LEN];
    snprintf(path, sizeof(path), "%s/recipes/configs/%s", source_dir(), config);
    mt_minimax_config cfg;
    mt_minimax_config_load(path, &cfg);
    mt_minimax_config_keep_layers(&cfg, layers);
    if (max_pos > 0) cfg.max_position_embeddings = max_pos;
    if (vocab > 0) cfg.vocab_size = vocab;
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    float **w = calloc((size_t)m.n_buckets, sizeof(float *));
    for (int b = 0; b < m.n_buckets; b++) {
        w[b] = calloc((size_t)m.bucket_numel[b], sizeof(float));
        mt_minimax_bind_bucket(&m, b, w[b], NULL);
    }
    mt_weights_init_random(&m, 7);
    snprintf(model, n, "%s/model", dir);
    mt_weights_save(model, &m, MT_NAMING_HF_V4, MT_F32, 0);
    for (int b = 0; b < m.n_buckets; b++) free(w[b]);
    free(w);
    mt_minimax_free(&m);
    const char *files[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        char src[8800], dst[4400];
        snprintf(src, sizeof(src), "%s/%s", tok ? tok : tokenizer_dir(), files[i]);
        snprintf(dst, sizeof(dst), "%s/%s", model, files[i]);
        size_t len = 0;
        char *bytes = mt_file_read(src, &len, err);
        MT_CHECK(bytes, "%s", err);
        write_bytes(dst, bytes, len);
        free(bytes);
    }
}

/* Of recipes/configs/<config> with the test tokenizer; eval_make_model: of tiny.json
 * (MiniMax-Text-01). */
static inline void eval_make_model_of(const char *config, const char *dir, int layers, int max_pos,
                                      char *model, size_t n) {
    eval_make_model_tok(config, NULL, 0, dir, layers, max_pos, model, n);
}

static inline void eval_make_model(const char *dir, int layers, int max_pos, char *model,
                                   size_t n) {
    eval_make_model_of("tiny.json", dir, layers, max_pos, model, n);
}

/* The test tokenizer's chat template (MiniMax-Text-01's, as training renders it). */
static inline mt_chat_template *eval_text01_template(void) {
    char err[MT_ERR_LEN + 4600];
    const mt_chat_source src = {.dir = tokenizer_dir()};
    mt_chat_template *t = mt_chat_template_open(&src, err, sizeof(err));
    MT_CHECK(t, "%s", err);
    return t;
}
