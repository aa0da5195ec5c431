/* parity_model.c: the model against Hugging Face transformers (docs/parity.md).
 *
 * Each parity_<fixture> case loads a tiny random model that tools/make_fixtures.py (Text-01,
 * fp32) or tools/make_fixtures_m2.py (MiniMax-M2, float64) saved with transformers'
 * save_pretrained (tests/fixtures/models/<fixture>/) and compares with what transformers
 * computed for it (<fixture>.ref.safetensors):
 *   batch a (2 x 37; tiny_m2_irregular 3 x 23) no-grad: logits, loss, the greedy tokens of the
 *   reference (10 per row for Text-01, 20 for M2) through the caches;
 *   batch b (2 x 70; 2 x 61) with backward: logits, loss, the gradient of every parameter.
 * Bounds (issue 3): logits max |diff| <= 1e-4 and <= 1e-5 max |logit|; loss relative diff
 * <= 1e-6; every gradient's relative L2 error <= 1e-5; greedy tokens identical.
 * parity_naming: the same tensors saved in the three checkpoint layouts load to identical
 * buckets, and the transformers v4.5x and v5 layouts give bit-identical outputs and gradients.
 * parity_cli, parity_cli_errors: the command-line tools (tests/models/parity_cli.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"
#include "models/config.h"
#include "models/generate.h"
#include "models/minimax.h"
#include "models/safetensors.h"
#include "models/weights.h"
#include "parity_model.h"

/* ------------------------------------------------------------------------------------------ */
/* fixtures */

const char *pm_fixture_dir(void) {
    static char dir[1024];
    const char *src = getenv("MT_SOURCE_DIR");
    snprintf(dir, sizeof(dir), "%s/tests/fixtures/models", src ? src : ".");
    return dir;
}

/* The layout every pm_load uses: parity_*_expert_unit set it to MT_GATHER_EXPERT; and whether
 * its layers are recomputed in the backward (parity_*_recompute). */
static mt_gather_unit pm_unit = MT_GATHER_LAYER;
static bool pm_recompute = false;
/* parity_jitter_*: batch b's backward runs in training mode with the router jitter seeded as
 * tools/make_fixtures_window_jitter.py's JITTER_SEED (its reference drew the same noise) */
static bool pm_jitter = false;
#define PM_JITTER_SEED 20261206u

void pm_load(pm_model *pm, const char *name, bool with_grad) {
    char dir[1200];
    snprintf(dir, sizeof(dir), "%s/%s", pm_fixture_dir(), name);
    mt_minimax_config cfg;
    mt_minimax_config_load(dir, &cfg);
    mt_minimax_init_unit(&pm->m, &cfg, pm_unit);
    pm->m.gradient_checkpointing = pm_recompute;
    /* transformers has no indexer loss: the references are the cross-entropy's (parity_m3_kl
     * turns it on against its own fp64 reference); false for a model without the term */
    mt_minimax_set_aux_coef(&pm->m, "index_kl", 0);
    const int nb = pm->m.n_buckets;
    pm->data = mt_calloc((size_t)nb, sizeof(float *), "buckets");
    pm->grad = mt_calloc((size_t)nb, sizeof(float *), "bucket grads");
    for (int b = 0; b < nb; b++) {
        size_t n = (size_t)pm->m.bucket_numel[b];
        pm->data[b] = mt_calloc(n, sizeof(float), "bucket");
        if (with_grad) pm->grad[b] = mt_calloc(n, sizeof(float), "bucket grad");
        mt_minimax_bind_bucket(&pm->m, b, pm->data[b], pm->grad[b]);
    }
    pm->naming = mt_weights_load(dir, &pm->m);
}

void pm_free(pm_model *pm) {
    for (int b = 0; b < pm->m.n_buckets; b++) {
        free(pm->data[b]);
        free(pm->grad[b]);
    }
    free(pm->data);
    free(pm->grad);
    mt_minimax_free(&pm->m);
}

mt_safetensors *pm_ref_open(const char *name) {
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s.ref.safetensors", pm_fixture_dir(), name);
    return mt_safetensors_open(path);
}

/* A reference tensor as floats (malloc'ed); *numel and shape (if not NULL) filled. */
float *pm_ref(mt_safetensors *st, const char *name, int64_t *numel, int64_t *shape) {
    const mt_st_tensor *t = mt_safetensors_find(st, name);
    MT_CHECK(t, "reference has no tensor %s", name);
    float *x = mt_malloc((size_t)t->numel * sizeof(float), name);
    mt_safetensors_read(st, t, 0, t->numel, x);
    if (numel) *numel = t->numel;
    if (shape)
        for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
    return x;
}

/* ids_<k> and labels_<k> of the reference as (B,T) I32 tensors; the labels are shifted the
 * way transformers' ForCausalLMLoss shifts them (position t predicts label t+1). */
static void pm_batch(mt_safetensors *st, const char *k, mt_tensor **ids, mt_tensor **labels) {
    char n1[32], n2[32];
    snprintf(n1, sizeof(n1), "ids_%s", k);
    snprintf(n2, sizeof(n2), "labels_%s", k);
    int64_t shape[2], numel;
    float *fi = pm_ref(st, n1, &numel, shape);
    float *fl = pm_ref(st, n2, NULL, NULL);
    const int64_t B = shape[0], T = shape[1];
    *ids = mt_test_tensor(MT_I32, 2, shape, false, "ids");
    *labels = mt_test_tensor(MT_I32, 2, shape, false, "labels");
    int32_t *pi = (*ids)->data, *pl = (*labels)->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            pi[b * T + t] = (int32_t)fi[b * T + t];
            pl[b * T + t] = t + 1 < T ? (int32_t)fl[b * T + t + 1] : MT_IGNORE_INDEX;
        }
    free(fi);
    free(fl);
}

/* ------------------------------------------------------------------------------------------ */
/* comparisons (all print the measured numbers) */

void pm_check_logits(const char *label, const mt_tensor *logits, mt_safetensors *st,
                     const char *ref_name) {
    int64_t n;
    float *ref = pm_ref(st, ref_name, &n, NULL);
    EXPECT(n == mt_numel(logits), "%s: %lld logits, reference %lld", label,
           (long long)mt_numel(logits), (long long)n);
    const float *x = logits->data;
    double dmax = 0, rmax = 0;
    for (int64_t i = 0; i < n; i++) {
        dmax = fmax(dmax, fabs((double)x[i] - ref[i]));
        rmax = fmax(rmax, fabs((double)ref[i]));
    }
    printf("  %-24s max|diff| %.3e  max|ref| %.3f  ratio %.3e\n", label, dmax, rmax, dmax / rmax);
    EXPECT(dmax <= PM_LOGIT_ATOL && dmax <= PM_LOGIT_RTOL * rmax,
           "%s: max |diff| %.3e exceeds %.0e or %.0e x max|logit| %.3f", label, dmax, PM_LOGIT_ATOL,
           PM_LOGIT_RTOL, rmax);
    free(ref);
}

void pm_check_scalar(const char *label, const mt_tensor *x, mt_safetensors *st,
                     const char *ref_name) {
    float *ref = pm_ref(st, ref_name, NULL, NULL);
    double v = *(const float *)x->data, rel = fabs(v - ref[0]) / fabs((double)ref[0]);
    printf("  %-24s %.9f  ref %.9f  rel %.3e\n", label, v, (double)ref[0], rel);
    EXPECT(rel <= PM_LOSS_RTOL, "%s: relative diff %.3e exceeds %.0e", label, rel, PM_LOSS_RTOL);
    free(ref);
}

/* The lightning decay rates against the slope_rate buffers the reference model held: this is
 * where the two slope denominators differ (for these small L, by 1e-5 relative and more). Two
 * fp32 roundings on the reference side (power, then factor), one here: 8 eps32 relative. */
static void pm_check_decay(pm_model *pm, mt_safetensors *st) {
    const mt_minimax_config *cfg = &pm->m.cfg;
    const int L = cfg->num_hidden_layers, H = cfg->num_attention_heads;
    int64_t n;
    float *ref = pm_ref(st, "decay", &n, NULL);
    EXPECT(n == (int64_t)L * H, "decay: reference has %lld values, model %d", (long long)n, L * H);
    double worst = 0;
    int lightning = 0;
    for (int l = 0; l < L && n == (int64_t)L * H; l++) {
        if (pm->m.plan[l].mixer != MT_MIXER_LIGHTNING) continue;
        lightning++;
        for (int h = 0; h < H; h++) {
            double r = ref[l * H + h], rel = fabs(pm->m.decay[l * H + h] - r) / r;
            worst = fmax(worst, rel);
            EXPECT(rel <= 8 * 1.1920929e-7, "decay layer %d head %d: %.9e, reference %.9e", l, h,
                   (double)pm->m.decay[l * H + h], r);
        }
    }
    if (lightning)
        printf("  %-24s worst relative diff %.3e (slope denominator: %s)\n", "decay", worst,
               cfg->slope_hf_denominator ? "L-1+1e-5" : "L-1");
    free(ref);
}

static void pm_check_grads(const char *label, pm_model *pm, mt_safetensors *st) {
    double worst = 0;
    const char *worst_name = "";
    for (int p = 0; p < pm->m.n_params; p++) {
        char name[200];
        if (pm->m.info[p].buffer) { /* the correction bias: no gradient, none in the reference */
            EXPECT(pm->m.params[p].grad == NULL, "%s: buffer %s has a gradient", label,
                   pm->m.info[p].name);
            continue;
        }
        snprintf(name, sizeof(name), "grad.%s", pm->m.info[p].name);
        int64_t n;
        float *whole = pm_ref(st, name, &n, NULL);
        const float *g = pm->m.params[p].grad;
        /* a vocabulary part (gather unit expert) is its rows of the reference tensor */
        const mt_param_info *info = &pm->m.info[p];
        const int64_t want = info->numel / info->shape[0] * info->src_shape0;
        const float *ref = whole + info->src_offset;
        EXPECT(n == want, "%s: %s has %lld elements, reference %lld", label, name, (long long)want,
               (long long)n);
        if (n != want) n = 0;
        double num = 0, den = 0;
        for (int64_t i = 0; i < n && i < info->numel; i++) {
            num += ((double)g[i] - ref[i]) * ((double)g[i] - ref[i]);
            den += (double)ref[i] * ref[i];
        }
        double rl2 = den > 0 ? sqrt(num / den) : sqrt(num);
        EXPECT(rl2 <= PM_GRAD_RL2, "%s: %s relative L2 error %.3e exceeds %.0e (|ref| %.3e)", label,
               name, rl2, PM_GRAD_RL2, sqrt(den));
        if (rl2 > worst) {
            worst = rl2;
            worst_name = pm->m.info[p].name;
        }
        free(whole);
    }
    printf("  %-24s %d parameters, worst relative L2 %.3e (%s)\n", label, pm->m.n_params, worst,
           worst_name);
}

/* ------------------------------------------------------------------------------------------ */
/* the fixture cases */

static void pm_zero_grads(pm_model *pm) {
    for (int b = 0; b < pm->m.n_buckets; b++)
        if (pm->grad[b]) memset(pm->grad[b], 0, (size_t)pm->m.bucket_numel[b] * sizeof(float));
}

/* Forward (+ backward) of batch k; out filled, the context keeps the tensors alive. fused: the
 * training path's chunked lm_head + cross-entropy (no logits). */
static void pm_run(pm_model *pm, mt_ctx *c, mt_safetensors *st, const char *k, bool backward,
                   bool fused, mt_minimax_out *out) {
    mt_tensor *ids, *labels;
    pm_batch(st, k, &ids, &labels);
    mt_minimax_batch batch = {.ids = ids,
                              .labels = labels,
                              .fused_loss = fused,
                              .jitter = backward && pm_jitter,
                              .jitter_seed = PM_JITTER_SEED};
    mt_ctx_reset(c);
    bool prev = mt_ctx_set_grad(c, backward);
    if (backward) pm_zero_grads(pm);
    mt_minimax_forward(&pm->m, c, &batch, NULL, out);
    if (backward) mt_backward(c, out->loss, NULL);
    mt_ctx_set_grad(c, prev);
}

static void pm_check_generate(pm_model *pm, mt_ctx *c, mt_safetensors *st) {
    int64_t shape[2], gshape[2];
    float *fi = pm_ref(st, "ids_a", NULL, shape);
    float *fg = pm_ref(st, "gen_a", NULL, gshape);
    const int B = (int)shape[0], T = (int)shape[1], N = (int)gshape[1];
    int32_t *ids = mt_malloc((size_t)B * T * sizeof(int32_t), "ids");
    int32_t *gen = mt_malloc((size_t)B * N * sizeof(int32_t), "gen");
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)fi[i];
    mt_minimax_generate(&pm->m, c, ids, B, T, N, -1, gen, NULL);
    int same = 0;
    for (int i = 0; i < B * N; i++) same += gen[i] == (int32_t)fg[i];
    printf("  %-24s %d of %d greedy tokens identical\n", "generate_a", same, B * N);
    EXPECT(same == B * N, "greedy tokens differ from transformers' generate");
    if (same != B * N)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < N; i++)
                printf("    row %d step %d: ours %d, transformers %d\n", b, i, gen[b * N + i],
                       (int)fg[b * N + i]);
    free(fi);
    free(fg);
    free(ids);
    free(gen);
}

/* model: the fixture directory; ref: whose reference it must reproduce. */
/* The cached decode path against the plain forward: the prompt ids_a, then the reference's
 * greedy tokens one at a time through the caches; every step's logits must equal the plain
 * forward's logits over the concatenated sequence at that position (same bounds as above). */
static void pm_check_decode(pm_model *pm, mt_ctx *c, mt_safetensors *st) {
    int64_t shape[2], gshape[2];
    float *fi = pm_ref(st, "ids_a", NULL, shape);
    float *fg = pm_ref(st, "gen_a", NULL, gshape);
    const int64_t B = shape[0], T = shape[1], N = gshape[1], TT = T + N, V = pm->m.cfg.vocab_size;
    mt_tensor *all = mt_test_tensor(MT_I32, 2, (int64_t[]){B, TT}, false, "ids+gen");
    mt_tensor *prompt = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "prompt");
    mt_tensor *step = mt_test_tensor(MT_I32, 2, (int64_t[]){B, 1}, false, "step");
    int32_t *pa = all->data, *pp = prompt->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < TT; t++) {
            pa[b * TT + t] = (int32_t)(t < T ? fi[b * T + t] : fg[b * N + t - T]);
            if (t < T) pp[b * T + t] = pa[b * TT + t];
        }
    /* the plain forward over the whole sequence, kept outside the context */
    mt_minimax_batch batch = {.ids = all};
    mt_minimax_out out;
    mt_ctx_reset(c);
    bool prev = mt_ctx_set_grad(c, false);
    mt_minimax_forward(&pm->m, c, &batch, NULL, &out);
    mt_ctx_set_grad(c, prev);
    float *full = mt_malloc((size_t)(B * TT * V) * sizeof(float), "full logits");
    memcpy(full, out.logits->data, (size_t)(B * TT * V) * sizeof(float));
    double rmax = 0;
    for (int64_t i = 0; i < B * TT * V; i++) rmax = fmax(rmax, fabs((double)full[i]));

    mt_minimax_cache kv;
    mt_minimax_cache_init(&kv, mt_backend_cpu(), &pm->m.cfg, (int)B, (int)TT);
    double dmax = 0;
    for (int64_t s = 0; s < N; s++) { /* s = 0: the prompt; s >= 1: token T+s-1 */
        mt_ctx_reset(c);
        mt_tensor *x = prompt;
        if (s > 0) {
            for (int64_t b = 0; b < B; b++) ((int32_t *)step->data)[b] = pa[b * TT + T + s - 1];
            x = step;
        }
        mt_tensor *lg = mt_minimax_forward_cached(&pm->m, c, x, &kv, NULL, false);
        const int64_t t0 = s == 0 ? 0 : T + s - 1, n = lg->shape[1];
        const float *y = lg->data;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < n; t++)
                for (int64_t v = 0; v < V; v++)
                    dmax = fmax(dmax, fabs((double)y[(b * n + t) * V + v] -
                                           full[(b * TT + t0 + t) * V + v]));
    }
    mt_minimax_cache_free(&kv);
    printf("  %-24s max|diff| %.3e  max|ref| %.3f  ratio %.3e (%lld cached steps)\n",
           "decode vs forward", dmax, rmax, dmax / rmax, (long long)N - 1);
    EXPECT(dmax <= PM_LOGIT_ATOL && dmax <= PM_LOGIT_RTOL * rmax,
           "cached decoding: logits differ from the plain forward by %.3e", dmax);
    free(full);
    free(fi);
    free(fg);
}

static int pm_fixture(const char *model, const char *ref) {
    printf("fixture %s (reference %s)\n", model, ref);
    pm_model pm;
    pm_load(&pm, model, true);
    mt_safetensors *st = pm_ref_open(ref);
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_minimax_out out;

    pm_check_decay(&pm, st);
    pm_run(&pm, &c, st, "a", false, false, &out);
    pm_check_logits("logits_a", out.logits, st, "logits_a");
    pm_check_scalar("loss_a", out.loss, st, "loss_a");
    mt_tensor *aux = mt_minimax_out_aux(&out, "aux_loss");
    if (aux) pm_check_scalar("aux_a", aux, st, "aux_a");

    pm_run(&pm, &c, st, "b", true, false, &out);
    pm_check_logits("logits_b", out.logits, st, "logits_b");
    pm_check_scalar("loss_b", out.loss, st, "loss_b");
    aux = mt_minimax_out_aux(&out, "aux_loss");
    if (aux) pm_check_scalar("aux_b", aux, st, "aux_b");
    pm_check_grads("grads_b", &pm, st);

    /* the training path: lm_head + cross-entropy fused, against the same references */
    pm_run(&pm, &c, st, "b", true, true, &out);
    EXPECT(out.logits == NULL, "fused loss: logits were materialised");
    pm_check_scalar("loss_b fused", out.loss, st, "loss_b");
    pm_check_grads("grads_b fused", &pm, st);

    pm_check_generate(&pm, &c, st);
    pm_check_decode(&pm, &c, st);

    mt_ctx_free(&c);
    mt_safetensors_close(st);
    pm_free(&pm);
    return MT_TEST_OK;
}

static int parity_tiny_released8(void) { return pm_fixture("tiny_released8", "tiny_released8"); }
static int parity_tiny_irregular_gqa(void) {
    return pm_fixture("tiny_irregular_gqa", "tiny_irregular_gqa");
}
static int parity_tiny_mqa(void) { return pm_fixture("tiny_mqa", "tiny_mqa"); }
/* the v5 copy holds tiny_mqa's tensors: it must reproduce tiny_mqa's reference */
static int parity_tiny_mqa_v5(void) { return pm_fixture("tiny_mqa_v5", "tiny_mqa"); }
/* original layout and config schema: the original release's semantics (partial RoPE, slope
 * denominator L-1), against the reference built with those semantics */
static int parity_tiny_mqa_orig(void) { return pm_fixture("tiny_mqa_orig", "tiny_mqa_orig"); }
/* dist.gather_unit = "expert": the MoE as dispatch, one op per expert, combine (each expert in
 * its own bucket), against the same references; irregular_gqa has the router aux loss on */
static int pm_fixture_expert_unit(const char *model) {
    pm_unit = MT_GATHER_EXPERT;
    int rc = pm_fixture(model, model);
    pm_unit = MT_GATHER_LAYER;
    return rc;
}
static int parity_tiny_released8_expert_unit(void) {
    return pm_fixture_expert_unit("tiny_released8");
}
static int parity_tiny_irregular_gqa_expert_unit(void) {
    return pm_fixture_expert_unit("tiny_irregular_gqa");
}

/* train.gradient_checkpointing: every layer recomputed in the backward. Against the same
 * references; then batch b's loss and every gradient must equal those of the run that keeps
 * its activations bit for bit (the same ops on the same values), in a smaller arena. */
static int pm_fixture_recompute(const char *model, mt_gather_unit unit) {
    pm_unit = unit;
    pm_recompute = true;
    int rc = pm_fixture(model, model);
    pm_recompute = false;
    pm_model pm;
    pm_load(&pm, model, true);
    mt_safetensors *st = pm_ref_open(model);
    mt_ctx c;
    mt_test_ctx_init(&c);
    float *kept[2][64];
    float loss[2];
    size_t peak[2];
    EXPECT(pm.m.n_buckets <= 64, "%d buckets", pm.m.n_buckets);
    for (int r = 0; r < 2; r++) {
        pm.m.gradient_checkpointing = r == 1;
        mt_minimax_out out;
        c.arena.peak = 0;
        pm_run(&pm, &c, st, "b", true, true, &out);
        peak[r] = c.arena.peak;
        loss[r] = *(const float *)out.loss->data;
        for (int b = 0; b < pm.m.n_buckets && b < 64; b++) {
            kept[r][b] = mt_malloc((size_t)pm.m.bucket_numel[b] * sizeof(float), "grads");
            memcpy(kept[r][b], pm.grad[b], (size_t)pm.m.bucket_numel[b] * sizeof(float));
        }
    }
    int differ = 0;
    for (int b = 0; b < pm.m.n_buckets && b < 64; b++) {
        differ += memcmp(kept[0][b], kept[1][b], (size_t)pm.m.bucket_numel[b] * sizeof(float)) != 0;
        free(kept[0][b]);
        free(kept[1][b]);
    }
    printf("  %-24s loss %s, %d of %d buckets' gradients differ; arena peak %.1f KiB kept, "
           "%.1f KiB recomputed\n",
           "recompute vs keep", loss[0] == loss[1] ? "equal" : "DIFFERS", differ, pm.m.n_buckets,
           peak[0] / 1024.0, peak[1] / 1024.0);
    EXPECT(loss[0] == loss[1] && differ == 0,
           "recomputed layers: loss or gradients differ from the run that keeps activations");
    EXPECT(peak[1] < peak[0], "recomputing layers did not lower the arena peak");
    mt_ctx_free(&c);
    mt_safetensors_close(st);
    pm_free(&pm);
    pm_unit = MT_GATHER_LAYER;
    return rc;
}
/* MiniMax-M2 (tools/make_fixtures_m2.py): against transformers' minimax_m2 run in float64; the
 * irregular fixture's config is in the release's remote-code schema; the fp8 copy is tiny_m2
 * block-quantised, against transformers on the dequantised weights. */
static int parity_m2_tiny(void) { return pm_fixture("tiny_m2", "tiny_m2"); }
static int parity_m2_irregular(void) {
    return pm_fixture("tiny_m2_irregular", "tiny_m2_irregular");
}
static int parity_m2_fp8(void) { return pm_fixture("tiny_m2_fp8", "tiny_m2_fp8"); }
static int parity_m2_irregular_expert_unit(void) {
    return pm_fixture_expert_unit("tiny_m2_irregular");
}

/* MiniMax-M3 (tools/make_fixtures_m3.py, float64 truth), the released VL layout with a small
 * vision tower carried: Gemma norms, per-head QK norm, dense clamp-SwiGLU MLP and MoE layers
 * with the shared expert, no sparse layer (tiny_m3 below has them); packed_shared holds
 * the shared expert as routed expert E. With the gather unit "expert" the shared expert is a
 * bucket of its own after the routed experts'; recomputed, it is gathered again. */
static int parity_m3_dense(void) { return pm_fixture("tiny_m3_dense", "tiny_m3_dense"); }
static int parity_m3_dense_expert_unit(void) { return pm_fixture_expert_unit("tiny_m3_dense"); }
static int parity_m3_dense_recompute(void) {
    return pm_fixture_recompute("tiny_m3_dense", MT_GATHER_EXPERT);
}
static int parity_m3_packed_shared(void) {
    return pm_fixture("tiny_m3_packed_shared", "tiny_m3_packed_shared");
}
static int parity_m3_packed_shared_expert_unit(void) {
    return pm_fixture_expert_unit("tiny_m3_packed_shared");
}

/* tiny_m3: MSA layers (block 4, top-3) mixed with dense attention, MoE with dense MLPs; batches
 * of 19 and 23 tokens select fewer blocks than they see, and decoding passes the point where the
 * cached step turns from dense to block-sparse (12 tokens). */
static int parity_m3_tiny(void) { return pm_fixture("tiny_m3", "tiny_m3"); }
static int parity_m3_tiny_expert_unit(void) { return pm_fixture_expert_unit("tiny_m3"); }
static int parity_m3_tiny_recompute(void) {
    return pm_fixture_recompute("tiny_m3", MT_GATHER_EXPERT);
}

/* The indexer's sparse-KL loss on tiny_m3's batch b (model.aux_coef.index_kl 1, the indexer's
 * input detached) against tools/make_fixtures_m3_kl.py's float64 transcription of MiniMax's
 * definition: the KL summed over the sparse layers, the indexer tensors' gradients from it
 * (grad_kl.*), every other gradient still transformers' cross-entropy one (the KL reaches no
 * other tensor); with recomputed layers, the same bits. */
static int parity_m3_kl(void) {
    pm_model pm;
    mt_safetensors *st = pm_ref_open("tiny_m3");
    char path[1200];
    snprintf(path, sizeof(path), "%s/tiny_m3.kl.safetensors", pm_fixture_dir());
    mt_safetensors *kl = mt_safetensors_open(path);
    mt_ctx c;
    mt_test_ctx_init(&c);
    float loss[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        pm_recompute = r == 1;
        pm_unit = r == 1 ? MT_GATHER_EXPERT : MT_GATHER_LAYER;
        pm_load(&pm, "tiny_m3", true);
        pm_recompute = false;
        pm_unit = MT_GATHER_LAYER;
        mt_minimax_set_aux_coef(&pm.m, "index_kl", 1.0f);
        mt_minimax_out out;
        pm_run(&pm, &c, st, "b", true, true, &out);
        mt_tensor *index_kl = mt_minimax_out_aux(&out, "index_kl");
        EXPECT(index_kl != NULL, "no indexer KL on a model with MSA layers");
        if (!index_kl) break;
        pm_check_scalar(r ? "kl_b recomputed" : "kl_b", index_kl, kl, "kl_b");
        loss[r] = *(const float *)out.loss->data;
        double worst = 0;
        int n_index = 0;
        for (int p = 0; p < pm.m.n_params; p++) {
            const mt_param_info *info = &pm.m.info[p];
            if (info->buffer) continue;
            const bool index = strstr(info->name, ".self_attn.index_") != NULL;
            n_index += index;
            char name[200];
            snprintf(name, sizeof(name), "%s.%s", index ? "grad_kl" : "grad", info->name);
            int64_t n;
            float *whole = pm_ref(index ? kl : st, name, &n, NULL);
            const float *ref = whole + info->src_offset, *g = pm.m.params[p].grad;
            double num = 0, den = 0;
            for (int64_t i = 0; i < info->numel; i++) {
                num += ((double)g[i] - ref[i]) * ((double)g[i] - ref[i]);
                den += (double)ref[i] * ref[i];
            }
            const double rl2 = den > 0 ? sqrt(num / den) : sqrt(num);
            EXPECT(rl2 <= PM_GRAD_RL2 && (!index || den > 0),
                   "%s: relative L2 error %.3e exceeds %.0e (|ref| %.3e)", name, rl2, PM_GRAD_RL2,
                   sqrt(den));
            worst = fmax(worst, rl2);
            free(whole);
        }
        printf("  %-24s %d parameters (%d of the indexer), worst relative L2 %.3e\n",
               r ? "grads recomputed" : "grads with the KL", pm.m.n_params, n_index, worst);
        EXPECT(n_index == 8, "%d indexer tensors, tiny_m3 has 8", n_index);
        pm_free(&pm);
    }
    printf("  %-24s %.9f and %.9f\n", "loss keep / recompute", loss[0], loss[1]);
    EXPECT(loss[0] == loss[1], "recomputed layers change the loss with the KL");
    mt_ctx_free(&c);
    mt_safetensors_close(kl);
    mt_safetensors_close(st);
    return MT_TEST_OK;
}

/* Greedy decoding from a 6-token prompt: the first steps see every block (the dense cached
 * step), from 12 tokens on the block-sparse one; 20 tokens equal transformers' generate. */
static int parity_m3_decode_switch(void) {
    pm_model pm;
    pm_load(&pm, "tiny_m3", false);
    char path[1200];
    snprintf(path, sizeof(path), "%s/tiny_m3.kl.safetensors", pm_fixture_dir());
    mt_safetensors *st = mt_safetensors_open(path);
    int64_t shape[2], gshape[2];
    float *fi = pm_ref(st, "ids_short", NULL, shape);
    float *fg = pm_ref(st, "gen_short", NULL, gshape);
    const int B = (int)shape[0], T = (int)shape[1], N = (int)gshape[1];
    int32_t *ids = mt_malloc((size_t)B * T * sizeof(int32_t), "ids");
    int32_t *gen = mt_malloc((size_t)B * N * sizeof(int32_t), "gen");
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)fi[i];
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_minimax_generate(&pm.m, &c, ids, B, T, N, -1, gen, NULL);
    int same = 0;
    for (int i = 0; i < B * N; i++) same += gen[i] == (int32_t)fg[i];
    const int cover = pm.m.cfg.msa_topk * pm.m.cfg.msa_block;
    printf("  %-24s %d of %d greedy tokens identical (prompt %d, dense steps to %d tokens)\n",
           "generate_short", same, B * N, T, cover);
    EXPECT(T < cover && T + N > cover, "the prompt does not cross the dense/sparse switch");
    EXPECT(same == B * N, "greedy tokens differ from transformers' generate");
    free(fi);
    free(fg);
    free(ids);
    free(gen);
    mt_ctx_free(&c);
    mt_safetensors_close(st);
    pm_free(&pm);
    return MT_TEST_OK;
}

static int parity_tiny_irregular_gqa_recompute(void) {
    return pm_fixture_recompute("tiny_irregular_gqa", MT_GATHER_LAYER);
}
/* tools/make_fixtures_window_jitter.py: sliding_window 3 (Text-01's softmax layers; the
 * greedy tokens and the cached decode check the caches' window), router_jitter_noise 0.25
 * (batch b in training mode with the same draws as the reference; batch a and the greedy
 * tokens are evaluation: no noise) */
static int parity_window(void) { return pm_fixture("tiny_window", "tiny_window"); }
static int parity_window_recompute(void) {
    return pm_fixture_recompute("tiny_window", MT_GATHER_LAYER);
}
static int pm_fixture_jitter(const char *model, bool recompute) {
    pm_jitter = true;
    int rc = recompute ? pm_fixture_recompute(model, MT_GATHER_EXPERT) : pm_fixture(model, model);
    pm_jitter = false;
    return rc;
}
static int parity_jitter_text01(void) { return pm_fixture_jitter("tiny_jitter", false); }
static int parity_jitter_m2(void) { return pm_fixture_jitter("tiny_m2_jitter", false); }
static int parity_jitter_recompute(void) { return pm_fixture_jitter("tiny_jitter", true); }
static int parity_m2_irregular_recompute(void) {
    return pm_fixture_recompute("tiny_m2_irregular", MT_GATHER_EXPERT);
}
static int parity_tiny_released8_expert_unit_recompute(void) {
    return pm_fixture_recompute("tiny_released8", MT_GATHER_EXPERT);
}

/* ------------------------------------------------------------------------------------------ */
/* naming */

/* Right padding (tools/make_padding_fixture.py): tiny_irregular_gqa (router aux loss on) on
 * batch b with row 1 cut after 45 tokens and padded, transformers run with the attention_mask.
 * Here the padding is its own segment and valid_len marks it, as the trainer's sampler does; the
 * aux loss must leave the padding rows out (counts, mean and row total), so loss, aux and every
 * gradient match. Without valid_len the aux loss must miss the reference, or the case proves
 * nothing about the mask. Both loss paths (logits, fused). */
static void pm_run_padded(pm_model *pm, mt_ctx *c, mt_safetensors *st, bool masked, bool fused,
                          mt_minimax_out *out) {
    mt_tensor *ids, *labels;
    pm_batch(st, "c", &ids, &labels);
    int64_t shape[2];
    float *mask = pm_ref(st, "mask_c", NULL, shape);
    const int64_t B = shape[0], T = shape[1];
    mt_tensor *seg = mt_test_tensor(MT_I32, 2, shape, false, "seg");
    int64_t *real = mt_malloc((size_t)B * sizeof(int64_t), "real");
    for (int64_t b = 0; b < B; b++) {
        real[b] = 0;
        while (real[b] < T && mask[b * T + real[b]] != 0) real[b]++;
        for (int64_t t = 0; t < T; t++) {
            EXPECT((mask[b * T + t] != 0) == (t < real[b]), "mask_c row %lld is not right padding",
                   (long long)b);
            ((int32_t *)seg->data)[b * T + t] = t < real[b] ? 0 : 1;
        }
    }
    mt_minimax_batch batch = {.ids = ids,
                              .labels = labels,
                              .seg = seg,
                              .valid_len = masked ? real : NULL,
                              .fused_loss = fused};
    mt_ctx_reset(c);
    bool prev = mt_ctx_set_grad(c, true);
    pm_zero_grads(pm);
    mt_minimax_forward(&pm->m, c, &batch, NULL, out);
    mt_backward(c, out->loss, NULL);
    mt_ctx_set_grad(c, prev);
    free(real);
    free(mask);
}

static int parity_padding(void) {
    printf("fixture tiny_irregular_gqa, right-padded batch (reference tiny_irregular_gqa_pad)\n");
    pm_model pm;
    pm_load(&pm, "tiny_irregular_gqa", true);
    mt_safetensors *st = pm_ref_open("tiny_irregular_gqa_pad");
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_minimax_out out;
    for (int fused = 0; fused < 2; fused++) {
        pm_run_padded(&pm, &c, st, true, fused, &out);
        pm_check_scalar(fused ? "loss_c fused" : "loss_c", out.loss, st, "loss_c");
        pm_check_scalar(fused ? "aux_c fused" : "aux_c", mt_minimax_out_aux(&out, "aux_loss"), st,
                        "aux_c");
        pm_check_grads(fused ? "grads_c fused" : "grads_c", &pm, st);
    }
    pm_run_padded(&pm, &c, st, false, true, &out);
    float *ref = pm_ref(st, "aux_c", NULL, NULL);
    const float *aux = mt_minimax_out_aux(&out, "aux_loss")->data;
    const double miss = fabs(*aux - ref[0]) / fabs((double)ref[0]);
    printf("  %-24s rel %.3e off the masked reference (must exceed %.0e)\n",
           "aux_c, padding counted", miss, 100 * PM_LOSS_RTOL);
    EXPECT(miss > 100 * PM_LOSS_RTOL, "the mask does not change the aux loss (rel %.3e)", miss);
    free(ref);
    mt_ctx_free(&c);
    mt_safetensors_close(st);
    pm_free(&pm);
    return MT_TEST_OK;
}

static bool pm_same_buckets(const pm_model *a, const pm_model *b) {
    if (a->m.n_buckets != b->m.n_buckets) return false;
    for (int k = 0; k < a->m.n_buckets; k++)
        if (a->m.bucket_numel[k] != b->m.bucket_numel[k] ||
            memcmp(a->data[k], b->data[k], (size_t)a->m.bucket_numel[k] * sizeof(float)) != 0)
            return false;
    return true;
}

static bool pm_same_grads(const pm_model *a, const pm_model *b) {
    for (int k = 0; k < a->m.n_buckets; k++)
        if (memcmp(a->grad[k], b->grad[k], (size_t)a->m.bucket_numel[k] * sizeof(float)) != 0)
            return false;
    return true;
}

static int parity_naming(void) {
    pm_model v4, v5, orig;
    pm_load(&v4, "tiny_mqa", true);
    pm_load(&v5, "tiny_mqa_v5", true);
    pm_load(&orig, "tiny_mqa_orig", true);
    EXPECT(v4.naming == MT_NAMING_HF_V4, "tiny_mqa detected as %s", mt_naming_name(v4.naming));
    EXPECT(v5.naming == MT_NAMING_HF_V5, "tiny_mqa_v5 detected as %s", mt_naming_name(v5.naming));
    EXPECT(orig.naming == MT_NAMING_ORIGINAL, "tiny_mqa_orig detected as %s",
           mt_naming_name(orig.naming));
    EXPECT(pm_same_buckets(&v4, &v5), "v5 layout loads different parameters than v4.5x");
    EXPECT(pm_same_buckets(&v4, &orig), "original layout loads different parameters than v4.5x");

    /* the original schema selects the original semantics; nothing else may differ */
    const mt_minimax_config *c4 = &v4.m.cfg, *co = &orig.m.cfg;
    EXPECT(c4->slope_hf_denominator && !co->slope_hf_denominator,
           "slope denominators: transformers %d, original %d", c4->slope_hf_denominator,
           co->slope_hf_denominator);
    EXPECT(c4->rotary_dim == c4->head_dim && co->rotary_dim == co->head_dim / 2,
           "rotary dims: transformers %d, original %d", c4->rotary_dim, co->rotary_dim);

    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_safetensors *st = pm_ref_open("tiny_mqa");
    mt_minimax_out o4, o5;
    pm_run(&v4, &c, st, "b", true, false, &o4);
    size_t nb = mt_nbytes(o4.logits);
    float *l4 = mt_malloc(nb, "logits");
    memcpy(l4, o4.logits->data, nb);
    float loss4 = *(float *)o4.loss->data;
    pm_run(&v5, &c, st, "b", true, false, &o5);
    EXPECT(memcmp(l4, o5.logits->data, nb) == 0 && loss4 == *(float *)o5.loss->data,
           "v4.5x and v5 layouts: logits or loss differ");
    EXPECT(pm_same_grads(&v4, &v5), "v4.5x and v5 layouts: gradients differ");

    /* the original checkpoint run with the transformers semantics is the v4.5x model exactly */
    mt_minimax_config as_hf = orig.m.cfg;
    as_hf.slope_hf_denominator = c4->slope_hf_denominator;
    as_hf.rotary_dim = c4->rotary_dim;
    as_hf.block_size = c4->block_size;
    mt_minimax_free(&orig.m);
    mt_minimax_init(&orig.m, &as_hf);
    for (int k = 0; k < orig.m.n_buckets; k++)
        mt_minimax_bind_bucket(&orig.m, k, orig.data[k], orig.grad[k]);
    mt_minimax_out oo;
    pm_run(&orig, &c, st, "b", true, false, &oo);
    EXPECT(memcmp(l4, oo.logits->data, nb) == 0 && loss4 == *(float *)oo.loss->data,
           "original layout with transformers semantics: logits or loss differ from v4.5x");
    EXPECT(pm_same_grads(&v4, &orig), "original layout: gradients differ from v4.5x");
    printf("  v4.5x, v5 and original layouts: identical parameters, logits, loss and gradients\n");

    free(l4);
    mt_safetensors_close(st);
    mt_ctx_free(&c);
    pm_free(&v4);
    pm_free(&v5);
    pm_free(&orig);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"eval_generate_text01", eval_generate_text01},
    {"eval_generate_released8", eval_generate_released8},
    {"eval_generate_m2", eval_generate_m2},
    {"eval_generate_m3", eval_generate_m3},
    {"parity_tiny_released8", parity_tiny_released8},
    {"parity_window", parity_window},
    {"parity_window_recompute", parity_window_recompute},
    {"parity_jitter_text01", parity_jitter_text01},
    {"parity_jitter_m2", parity_jitter_m2},
    {"parity_jitter_recompute", parity_jitter_recompute},
    {"parity_tiny_irregular_gqa", parity_tiny_irregular_gqa},
    {"parity_tiny_mqa", parity_tiny_mqa},
    {"parity_tiny_mqa_v5", parity_tiny_mqa_v5},
    {"parity_tiny_mqa_orig", parity_tiny_mqa_orig},
    {"parity_tiny_released8_expert_unit", parity_tiny_released8_expert_unit},
    {"parity_tiny_irregular_gqa_expert_unit", parity_tiny_irregular_gqa_expert_unit},
    {"parity_tiny_irregular_gqa_recompute", parity_tiny_irregular_gqa_recompute},
    {"parity_tiny_released8_expert_unit_recompute", parity_tiny_released8_expert_unit_recompute},
    {"parity_m2_tiny", parity_m2_tiny},
    {"parity_m2_irregular", parity_m2_irregular},
    {"parity_m2_fp8", parity_m2_fp8},
    {"parity_m2_irregular_expert_unit", parity_m2_irregular_expert_unit},
    {"parity_m2_irregular_recompute", parity_m2_irregular_recompute},
    {"parity_m3_tiny", parity_m3_tiny},
    {"parity_m3_tiny_expert_unit", parity_m3_tiny_expert_unit},
    {"parity_m3_tiny_recompute", parity_m3_tiny_recompute},
    {"parity_m3_kl", parity_m3_kl},
    {"parity_m3_decode_switch", parity_m3_decode_switch},
    {"parity_m3_dense", parity_m3_dense},
    {"parity_m3_dense_expert_unit", parity_m3_dense_expert_unit},
    {"parity_m3_dense_recompute", parity_m3_dense_recompute},
    {"parity_m3_packed_shared", parity_m3_packed_shared},
    {"parity_m3_packed_shared_expert_unit", parity_m3_packed_shared_expert_unit},
    {"parity_padding", parity_padding},
    {"parity_naming", parity_naming},
    {"parity_cli", parity_cli},
    {"parity_cli_errors", parity_cli_errors},
};
MT_TEST_MAIN(cases)
