/* eval_util.h: what the command-line evaluation tests share (eval_minimax_eval.c,
 * eval_minimax_chat.c): a random model of recipes/configs/tiny.json with the test tokenizer. */
#pragma once
#include <stdio.h>
#include <stdlib.h>

#include "data/data_io.h"
#include "models/config.h"
#include "models/minimax.h"
#include "models/weights.h"
#include "tests/data_util.h"

/* A random model of recipes/configs/<config> cut to `layers` layers (max_position_embeddings
 * set to max_pos when > 0), with the test tokenizer's tokenizer.json and tokenizer_config.json,
 * in <dir>/model; its path in model. eval_make_model: of tiny.json (MiniMax-Text-01). */
static inline void eval_make_model_of(const char *config, const char *dir, int layers, int max_pos,
                                      char *model, size_t n) {
    char path[4400], err[MT_ERR_LEN];
    snprintf(path, sizeof(path), "%s/recipes/configs/%s", source_dir(), config);
    mt_minimax_config cfg;
    mt_minimax_config_load(path, &cfg);
    mt_minimax_config_keep_layers(&cfg, layers);
    if (max_pos > 0) cfg.max_position_embeddings = max_pos;
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
        char src[4400], dst[4400];
        snprintf(src, sizeof(src), "%s/%s", tokenizer_dir(), files[i]);
        snprintf(dst, sizeof(dst), "%s/%s", model, files[i]);
        char *bytes = mt_file_read(src, NULL, err);
        MT_CHECK(bytes, "%s", err);
        write_text(dst, bytes);
        free(bytes);
    }
}

static inline void eval_make_model(const char *dir, int layers, int max_pos, char *model,
                                   size_t n) {
    eval_make_model_of("tiny.json", dir, layers, max_pos, model, n);
}
