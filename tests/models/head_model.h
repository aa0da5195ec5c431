/* head_model.h: the head fixtures' models (tests/fixtures/models/head_*), shared by the head
 * tests (parity_head.c, head_loss.c): a model with its buckets allocated and bound on the host. */
#pragma once
#include "models/minimax.h"

typedef struct {
    mt_minimax m;
    float **data, **grad;
} ph_model;

/* tests/fixtures/models under MT_SOURCE_DIR */
const char *ph_dir(void);
/* A model of cfg with zeroed buckets and gradients bound (the indexer KL off). */
void ph_bind(ph_model *pm, const mt_minimax_config *cfg, mt_gather_unit unit);
/* The fixture `name`'s config and weights. */
void ph_load(ph_model *pm, const char *name, mt_gather_unit unit);
void ph_free(ph_model *pm);
