/* weights_internal.h: the reader shared by models/weights.c (opening, validation, saving) and
 * models/weights_load.c (reading, verification). */
#pragma once
#include "models/weights.h"

struct mt_weights_reader {
    const mt_minimax *m;
    mt_safetensors *st;
    mt_naming naming;
    const mt_st_tensor **src;     /* (n_params) tensor holding each parameter */
    int64_t *src_off;             /* (n_params) element offset inside it */
    const mt_st_tensor **carried; /* tensors carried into exports unchanged (models/family.h) */
    int n_carried;
    int n_vision; /* of them, a VL model's vision tensors (the rest: multi-token prediction) */
    const mt_st_tensor **scale; /* (n_params) an FP8 tensor's weight_scale_inv, else NULL */
    int n_fp8;                  /* parameters dequantised on load */
    /* a head model read from a causal-LM checkpoint: its head parameters have no source (src
     * NULL) and are initialised when read; lm_head.weight is dropped */
    bool head_init;
    const mt_st_tensor *lm_dropped;
};

/* The start of a bucket's bound memory (dies when it is not bound). */
float *mt_weights_bucket_data(const mt_minimax *m, int bucket);

/* The FP8 mirror (models/weights_fp8.c): the source's dtype of tensor name (F32, BF16 or
 * F8_E4M3; dies naming it when absent or of another dtype), and a whole tensor added in it
 * (F8_E4M3: quantised, with its weight_scale_inv). */
mt_st_dtype mt_weights_mirror_dtype(const mt_safetensors *src, const char *name);
void mt_weights_mirror_add(mt_safetensors_writer *st, const mt_safetensors *src,
                           const mt_minimax_config *cfg, const char *name, int ndim,
                           const int64_t *shape, const float *data);
