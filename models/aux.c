/* aux.c: the auxiliary loss terms a model's forward returns beside the cross-entropy
 * (models/minimax.h, mt_minimax_aux): which exist for a model, their coefficients and
 * denominators, and the callers' settings of them. The forward (models/minimax.c) computes
 * their values and adds coef * value to the loss in this order. */
#include <stdio.h>
#include <string.h>

#include "models/block.h"

#define AUX_ROUTER "aux_loss" /* transformers' name for the router load-balancing loss */
#define AUX_INDEX  "index_kl" /* the MSA indexer's KL (models/block_msa.c) */

/* The layers whose mixer adds the indexer KL (mt_mixer.index_kl: MSA's). */
static int aux_msa_layers(const mt_layer_plan *plan, int L) {
    int n = 0;
    for (int l = 0; l < L; l++) n += mt_mixer_of(plan[l].mixer)->index_kl;
    return n;
}

int mt_aux_list(const mt_minimax *m, bool grad, mt_tensor *router, mt_tensor *index_kl,
                mt_minimax_aux *aux) {
    int n = 0;
    if (m->cfg.output_router_logits) /* counted over the MoE layers, as one loss */
        aux[n++] = (mt_minimax_aux){.name = AUX_ROUTER,
                                    .value = router,
                                    .coef = m->cfg.router_aux_loss_coef,
                                    .denominator = 1,
                                    .per_forward = true};
    const int n_msa = aux_msa_layers(m->plan, m->cfg.num_hidden_layers);
    if (grad && n_msa > 0 && m->index_kl_coef != 0) /* each layer's over the global batch */
        aux[n++] = (mt_minimax_aux){.name = AUX_INDEX,
                                    .value = index_kl,
                                    .coef = m->index_kl_coef,
                                    .denominator = n_msa,
                                    .training_only = true};
    return n;
}

const mt_minimax_aux_alias *mt_minimax_aux_aliases(int *n) {
    static const mt_minimax_aux_alias aliases[] = {
        {"indexer_kl_coef", AUX_INDEX, false, 1.0},
        {"indexer_detach", AUX_INDEX, true, 1.0},
    };
    *n = (int)(sizeof(aliases) / sizeof(aliases[0]));
    return aliases;
}

int mt_minimax_aux_terms(const mt_minimax *m, bool grad, mt_minimax_aux *aux) {
    return mt_aux_list(m, grad, NULL, NULL, aux);
}

mt_tensor *mt_minimax_out_aux(const mt_minimax_out *out, const char *name) {
    for (int k = 0; k < out->n_aux; k++)
        if (!strcmp(out->aux[k].name, name)) return out->aux[k].value;
    return NULL;
}

bool mt_minimax_set_aux_coef(mt_minimax *m, const char *name, float coef) {
    if (strcmp(name, AUX_INDEX)) return false;
    m->index_kl_coef = coef;
    return true;
}

bool mt_minimax_set_aux_detach(mt_minimax *m, const char *name, bool detach) {
    if (strcmp(name, AUX_INDEX)) return false;
    m->index_detach = detach;
    return true;
}

bool mt_minimax_aux_settable(const mt_minimax_config *cfg, const char *name, bool detach, char *why,
                             size_t n) {
    bool msa = false;
    for (int l = 0; l < cfg->num_hidden_layers && !msa; l++) {
        mt_layer_plan p;
        mt_config_layer_plan(cfg, l, &p);
        msa = mt_mixer_of(p.mixer)->index_kl;
    }
    if (msa && !strcmp(name, AUX_INDEX)) return true;
    if (!strcmp(name, AUX_ROUTER) && !detach) {
        snprintf(why, n,
                 "the router aux loss's coefficient is the config's router_aux_loss_coef (the "
                 "recipe's train.router_aux_loss_coef overrides it)");
        return false;
    }
    snprintf(why, n, "%s models have no auxiliary term \"%s\" whose %s can be set (%s)",
             mt_config_family(cfg)->name, name, detach ? "detachment" : "coefficient",
             msa ? "the terms: " AUX_INDEX : "none has one");
    return false;
}
