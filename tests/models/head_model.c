/* head_model.c: the head fixtures' models (head_model.h). */
#include "tests/models/head_model.h"

#include <stdio.h>
#include <stdlib.h>

#include "models/weights.h"

const char *ph_dir(void) {
    static char dir[1024];
    const char *src = getenv("MT_SOURCE_DIR");
    snprintf(dir, sizeof(dir), "%s/tests/fixtures/models", src ? src : ".");
    return dir;
}

void ph_bind(ph_model *pm, const mt_minimax_config *cfg, mt_gather_unit unit) {
    mt_minimax_init_unit(&pm->m, cfg, unit);
    mt_minimax_set_aux_coef(&pm->m, "index_kl", 0);
    const int nb = pm->m.n_buckets;
    pm->data = mt_calloc((size_t)nb, sizeof(float *), "buckets");
    pm->grad = mt_calloc((size_t)nb, sizeof(float *), "bucket grads");
    for (int b = 0; b < nb; b++) {
        pm->data[b] = mt_calloc((size_t)pm->m.bucket_numel[b], sizeof(float), "bucket");
        pm->grad[b] = mt_calloc((size_t)pm->m.bucket_numel[b], sizeof(float), "bucket grad");
        mt_minimax_bind_bucket(&pm->m, b, pm->data[b], pm->grad[b]);
    }
}

void ph_load(ph_model *pm, const char *name, mt_gather_unit unit) {
    char dir[1200];
    snprintf(dir, sizeof(dir), "%s/%s", ph_dir(), name);
    mt_minimax_config cfg;
    mt_minimax_config_load(dir, &cfg);
    ph_bind(pm, &cfg, unit);
    mt_weights_load(dir, &pm->m);
}

void ph_free(ph_model *pm) {
    for (int b = 0; b < pm->m.n_buckets; b++) {
        free(pm->data[b]);
        free(pm->grad[b]);
    }
    free(pm->data);
    free(pm->grad);
    mt_minimax_free(&pm->m);
}
