/* model_plan.c: plan values no released family uses yet, checked against an equivalent plan
 * that one does (models/family.h; docs/models.md), on tiny_m2's config.
 *
 * op_mlp_dense: a layer with the dense SwiGLU MLP (models/block_mlp.c) computes what a
 * one-expert MoE computes (softmax router over one expert: weight exactly 1) with the dense
 * weights as the expert's w1, w3, w2: logits and every parameter's gradient, with layer 0
 * replaced; the same with one bucket per expert (the dense layer keeps one bucket); with the
 * router aux loss on, only the MoE layers count (as transformers collects the router logits of
 * its sparse layers): transformers' formula over layer 1's rows alone.
 * op_plan_gemma_norm: Gemma norms, (1 + w) * x_hat, in every norm of the plan (input and
 * post-attention layernorms, q and k norms, the final norm) compute what RMSNorm computes with
 * the weights 1 + w: logits and gradients bit-identical (the gradient of w is that of 1 + w).
 * op_plan_qk_norm_head: the per-head QK norm (weight of width D shared by the heads) with one
 * query and one KV head is the whole-width norm (width H D = D): bit-identical. Only the block's
 * wiring is checked here (with one head the two cannot differ in anything else); the per-head
 * form with several heads is checked by grad_attention_qk_norm (finite differences) and
 * gpu_qk_norm, through the same ops the block composes. */
#include "tests/support/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/minimax.h"
#include "models/weights.h"

/* tiny_m2's plan with one change: layer 0's MLP dense or a one-expert softmax MoE (MT_MLP_*),
 * or every layer with Gemma norms, or with the per-head QK norm. */
typedef enum {
    EDIT_LAYER0_DENSE,
    EDIT_LAYER0_ONE_EXPERT,
    EDIT_GEMMA,
    EDIT_QK_HEAD,
    EDIT_NONE
} edit;
static edit plan_edit;
static void plan_edited(const mt_minimax_config *cfg, int l, mt_layer_plan *p) {
    mt_family_m2.plan(cfg, l, p);
    if (plan_edit == EDIT_GEMMA) p->norm = MT_NORM_GEMMA;
    if (plan_edit == EDIT_QK_HEAD) p->qk_norm = MT_QK_NORM_HEAD;
    if (l != 0 || (plan_edit != EDIT_LAYER0_DENSE && plan_edit != EDIT_LAYER0_ONE_EXPERT)) return;
    p->mlp = plan_edit == EDIT_LAYER0_DENSE ? MT_MLP_DENSE : MT_MLP_MOE;
    p->router = MT_ROUTER_SOFTMAX;
    p->router_bias = false;
    p->n_experts = p->top_k = plan_edit == EDIT_LAYER0_DENSE ? 0 : 1;
}

static mt_family fam_edited;

typedef struct {
    mt_minimax m;
    float **data, **grad;
} model;

static void model_new(model *mo, const mt_minimax_config *cfg, edit e, mt_gather_unit unit) {
    plan_edit = e;
    mt_minimax_config c = *cfg;
    c.family = &fam_edited;
    mt_minimax_init_unit(&mo->m, &c, unit);
    const int nb = mo->m.n_buckets;
    mo->data = mt_calloc((size_t)nb, sizeof(float *), "buckets");
    mo->grad = mt_calloc((size_t)nb, sizeof(float *), "grads");
    for (int b = 0; b < nb; b++) {
        mo->data[b] = mt_calloc((size_t)mo->m.bucket_numel[b], sizeof(float), "bucket");
        mo->grad[b] = mt_calloc((size_t)mo->m.bucket_numel[b], sizeof(float), "grad");
        mt_minimax_bind_bucket(&mo->m, b, mo->data[b], mo->grad[b]);
    }
    mt_weights_init_random(&mo->m, 7);
}

static void model_free(model *mo) {
    for (int b = 0; b < mo->m.n_buckets; b++) free(mo->data[b]), free(mo->grad[b]);
    free(mo->data);
    free(mo->grad);
    mt_minimax_free(&mo->m);
}

/* The parameter of this name covering the tensor from element src_offset (a vocabulary part
 * with the gather unit expert). */
static mt_tensor *param(model *mo, const char *name, int64_t src_offset) {
    for (int p = 0; p < mo->m.n_params; p++)
        if (!strcmp(mo->m.info[p].name, name) && mo->m.info[p].src_offset == src_offset)
            return &mo->m.params[p];
    MT_DIE("no parameter %s from element %lld", name, (long long)src_offset);
}

/* The name in model `other` of the reference model's parameter `name`: with a dense layer 0,
 * the one-expert model's expert is its MLP; the same name elsewhere. */
static const char *other_name(const model *other, const char *name) {
    if (other->m.plan[0].mlp != MT_MLP_DENSE) return name;
    static const char *const map[3][2] = {{"model.layers.0.block_sparse_moe.experts.0.w1.weight",
                                           "model.layers.0.mlp.gate_proj.weight"},
                                          {"model.layers.0.block_sparse_moe.experts.0.w3.weight",
                                           "model.layers.0.mlp.up_proj.weight"},
                                          {"model.layers.0.block_sparse_moe.experts.0.w2.weight",
                                           "model.layers.0.mlp.down_proj.weight"}};
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, map[i][0])) return map[i][1];
    return name;
}

/* The reference model's weights, copied into the other one by name (other_name; the one-expert
 * router has no counterpart in a dense layer). */
static void copy_weights(model *ref, model *other) {
    for (int p = 0; p < ref->m.n_params; p++) {
        const char *name = ref->m.info[p].name;
        if (other->m.plan[0].mlp == MT_MLP_DENSE && strstr(name, "layers.0.block_sparse_moe.gate"))
            continue;
        mt_tensor *a = &ref->m.params[p];
        mt_tensor *b = param(other, other_name(other, name), ref->m.info[p].src_offset);
        MT_CHECK(mt_numel(a) == mt_numel(b), "%s sizes differ", name);
        memcpy(b->data, a->data, mt_nbytes(a));
    }
}

/* Forward and backward of both models on the same batch; logits and gradients compared (the
 * weights set by the caller). */
static void compare(model *ref, model *other, bool aux, const char *label) {
    const int64_t B = 2, T = 19;
    const int V = ref->m.cfg.vocab_size;
    mt_tensor *ids = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "ids");
    mt_tensor *labels = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "labels");
    for (int64_t i = 0; i < B * T; i++) {
        ((int32_t *)ids->data)[i] = (int32_t)((i * 37 + 11) % V);
        ((int32_t *)labels->data)[i] = (int32_t)((i * 53 + 5) % V);
    }
    mt_minimax_out out[2];
    mt_ctx c[2];
    model *mo[2] = {ref, other};
    for (int k = aux ? 1 : 0; k < 2; k++) { /* aux: the dense model alone */
        mo[k]->m.cfg.output_router_logits = aux;
        mt_test_ctx_init(&c[k]);
        mt_minimax_batch batch = {.ids = ids, .labels = labels};
        mt_minimax_forward(&mo[k]->m, &c[k], &batch, NULL, &out[k]);
        mt_backward(&c[k], out[k].loss, NULL);
    }
    if (aux) {
        /* transformers' load_balancing_loss_func over the MoE layers' router logits only (the
         * dense layer has none): E * sum_e (count_e / R) * mean_R softmax_e, R = rows of the
         * MoE layers, count_e over the top-K of softmax, from the logits the tape recorded */
        double want = 0, sum_p[64] = {0}, count[64] = {0};
        int64_t R = 0;
        int E = 0, K = 0;
        for (int i = 0; i < c[1].n_nodes; i++) {
            const mt_node *n = &c[1].nodes[i];
            if (n->op != MT_OP_MOE_ROUTE_SIGMOID) continue;
            const float *z = n->in[0]->data;
            E = (int)n->in[0]->shape[1], K = (int)n->ip[0];
            MT_CHECK(E <= 64, "test: E = %d", E);
            for (int64_t r = 0; r < n->in[0]->shape[0]; r++, R++) {
                double mx = -INFINITY, den = 0, pr[64];
                for (int e = 0; e < E; e++) mx = fmax(mx, z[r * E + e]);
                for (int e = 0; e < E; e++) den += pr[e] = exp(z[r * E + e] - mx);
                for (int e = 0; e < E; e++) sum_p[e] += pr[e] /= den;
                for (int k = 0; k < K; k++) { /* top-K of softmax, ties to the lower index */
                    int best = -1;
                    for (int e = 0; e < E; e++)
                        if (pr[e] >= 0 && (best < 0 || pr[e] > pr[best])) best = e;
                    count[best]++;
                    pr[best] = -1;
                }
            }
        }
        for (int e = 0; e < E; e++) want += E * (count[e] / (double)R) * (sum_p[e] / (double)R);
        const double got = *(const float *)mt_minimax_out_aux(&out[1], "aux_loss")->data;
        printf("  %-28s aux %.9g, transformers' formula over the MoE layer's %lld rows %.9g\n",
               label, got, (long long)R, want);
        EXPECT(R == B * T && fabs(got - want) <= 1e-6 * want, "%s: aux %.9g vs %.9g over %lld rows",
               label, got, want, (long long)R);
        mt_ctx_free(&c[0]);
        mt_ctx_free(&c[1]);
        return;
    }
    char what[160];
    snprintf(what, sizeof(what), "%s logits", label);
    mt_check_rel_l2(what, out[1].logits->data, out[0].logits->data, mt_numel(out[0].logits), 1e-6);
    double worst = 0;
    for (int p = 0; p < ref->m.n_params; p++) {
        const char *name = ref->m.info[p].name;
        mt_tensor *a = &ref->m.params[p];
        if (!a->grad || (other->m.plan[0].mlp == MT_MLP_DENSE &&
                         strstr(name, "layers.0.block_sparse_moe.gate")))
            continue;
        mt_tensor *b = param(other, other_name(other, name), ref->m.info[p].src_offset);
        double num = 0, den = 0;
        for (int64_t j = 0; j < mt_numel(a); j++) {
            const double d = (double)((float *)b->grad)[j] - ((float *)a->grad)[j];
            num += d * d;
            den += (double)((float *)a->grad)[j] * ((float *)a->grad)[j];
        }
        const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        worst = fmax(worst, rel);
        EXPECT(rel <= 1e-6, "%s: gradient of %s (%s in the other model) differs by %.3g", label,
               name, other_name(other, name), rel);
    }
    printf("  %-28s every gradient within %.3g relative L2\n", label, worst);
    mt_ctx_free(&c[0]);
    mt_ctx_free(&c[1]);
}

static mt_minimax_config tiny_m2(void) {
    fam_edited = mt_family_m2;
    fam_edited.plan = plan_edited;
    char path[1200];
    snprintf(path, sizeof(path), "%s/tests/fixtures/models/tiny_m2",
             getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".");
    mt_minimax_config cfg;
    mt_minimax_config_load(path, &cfg);
    return cfg;
}

static int test_mlp_dense(void) {
    const mt_minimax_config cfg = tiny_m2();
    for (int u = 0; u < 2; u++) {
        const mt_gather_unit unit = u ? MT_GATHER_EXPERT : MT_GATHER_LAYER;
        model moe, dense;
        model_new(&moe, &cfg, EDIT_LAYER0_ONE_EXPERT, unit);
        model_new(&dense, &cfg, EDIT_LAYER0_DENSE, unit);
        EXPECT(dense.m.plan[0].mlp == MT_MLP_DENSE && moe.m.plan[0].n_experts == 1 &&
                   mt_minimax_layer_last_bucket(&dense.m, 0) ==
                       mt_minimax_layer_bucket(&dense.m, 0),
               "the dense layer is one bucket");
        copy_weights(&moe, &dense);
        compare(&moe, &dense, false, u ? "unit expert" : "unit layer");
        if (!u) compare(&moe, &dense, true, "aux loss");
        model_free(&moe);
        model_free(&dense);
    }
    return MT_TEST_OK;
}

static int test_plan_gemma_norm(void) {
    const mt_minimax_config cfg = tiny_m2();
    model rms, gemma;
    model_new(&rms, &cfg, EDIT_NONE, MT_GATHER_LAYER);
    model_new(&gemma, &cfg, EDIT_GEMMA, MT_GATHER_LAYER);
    copy_weights(&rms, &gemma);
    /* every norm weight: w (about 0) in the Gemma model, 1 + w (exact in fp32) in the other */
    int norms = 0;
    for (int p = 0; p < rms.m.n_params; p++) {
        const char *name = rms.m.info[p].name;
        const size_t n = strlen(name);
        if (n < 11 || strcmp(name + n - 11, "norm.weight") != 0) continue;
        EXPECT(gemma.m.info[p].init == MT_INIT_ZEROS && rms.m.info[p].init == MT_INIT_ONES,
               "%s: Gemma weights start at 0, RMSNorm's at 1", name);
        float *g = gemma.m.params[p].data, *w = rms.m.params[p].data;
        for (int64_t j = 0; j < rms.m.info[p].numel; j++) {
            g[j] = 0.125f * (float)((j * 7 + p) % 9) - 0.5f;
            w[j] = 1.0f + g[j];
        }
        norms++;
    }
    EXPECT(norms == 4 * cfg.num_hidden_layers + 1, "%d norm weights", norms);
    compare(&rms, &gemma, false, "gemma vs rms(1 + w)");
    model_free(&rms);
    model_free(&gemma);
    return MT_TEST_OK;
}

static int test_plan_qk_norm_head(void) {
    mt_minimax_config cfg = tiny_m2();
    cfg.num_attention_heads = cfg.num_key_value_heads = 1;
    model whole, head;
    model_new(&whole, &cfg, EDIT_NONE, MT_GATHER_LAYER);
    model_new(&head, &cfg, EDIT_QK_HEAD, MT_GATHER_LAYER);
    EXPECT(head.m.plan[0].qk_norm == MT_QK_NORM_HEAD, "the per-head plan");
    copy_weights(&whole, &head);
    compare(&whole, &head, false, "per-head qk norm, 1 head");
    model_free(&whole);
    model_free(&head);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_mlp_dense", test_mlp_dense},
    {"op_plan_gemma_norm", test_plan_gemma_norm},
    {"op_plan_qk_norm_head", test_plan_qk_norm_head},
};
MT_TEST_MAIN(cases)
