/* parity_model.h: the fixtures and comparisons of tests/models/parity_model.c, shared with the
 * command-line cases of tests/models/parity_cli.c (docs/parity.md). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "models/minimax.h"
#include "models/safetensors.h"
#include "models/weights.h"

/* Bounds (issue 3): logits max |diff| <= 1e-4 and <= 1e-5 max |logit|; loss relative diff
 * <= 1e-6; every gradient's relative L2 error <= 1e-5. */
#define PM_LOGIT_ATOL 1e-4
#define PM_LOGIT_RTOL 1e-5 /* of max |logit| */
#define PM_LOSS_RTOL  1e-6
#define PM_GRAD_RL2   1e-5

typedef struct {
    mt_minimax m;
    float **data, **grad; /* per bucket */
    mt_naming naming;
} pm_model;

/* tests/fixtures/models under MT_SOURCE_DIR (or the working directory). */
const char *pm_fixture_dir(void);
/* Fixture model `name`, its buckets allocated and loaded (gradients when with_grad). */
void pm_load(pm_model *pm, const char *name, bool with_grad);
void pm_free(pm_model *pm);
/* <name>.ref.safetensors, what transformers computed for the fixture. */
mt_safetensors *pm_ref_open(const char *name);
/* A reference tensor as floats (malloc'ed); *numel and shape (if not NULL) filled. */
float *pm_ref(mt_safetensors *st, const char *name, int64_t *numel, int64_t *shape);
/* Logits and a scalar (loss, aux) against the reference tensor ref_name, printed and checked
 * to the bounds above. */
void pm_check_logits(const char *label, const mt_tensor *logits, mt_safetensors *st,
                     const char *ref_name);
void pm_check_scalar(const char *label, const mt_tensor *x, mt_safetensors *st,
                     const char *ref_name);

/* tests/models/eval_generate.c: ragged batched greedy decoding */
int eval_generate_text01(void);
int eval_generate_released8(void);
int eval_generate_m2(void);
int eval_generate_m3(void);

/* tests/models/parity_cli.c */
int parity_cli(void);
int parity_cli_errors(void);
