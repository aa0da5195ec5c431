/* parity_head.c: the heads of a model that is not a causal LM (models/head.c) against float64
 * references (tools/make_head_fixtures.py): MiniMax-Text-01's against transformers' own
 * MiniMaxForSequenceClassification / ForTokenClassification / ForQuestionAnswering; logits at
 * the real tokens and the loss to 1e-5 relative, every parameter's gradient to 1e-5 relative L2
 * (issue 38). Inputs: a right-padded, a left-padded and an unpadded row; the padding is its
 * own segment here, masked there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models/minimax.h"
#include "models/safetensors.h"
#include "models/weights.h"
#include "tests/models/head_model.h"
#include "tests/support/harness.h"

#define PH_RTOL     1e-5 /* logits (of max |logit|) and loss, relative */
#define PH_GRAD_RL2 1e-5

static float *ph_ref(mt_safetensors *st, const char *name, int64_t *numel, int64_t *shape) {
    const mt_st_tensor *t = mt_safetensors_find(st, name);
    MT_CHECK(t, "reference has no tensor %s", name);
    float *x = mt_malloc((size_t)t->numel * sizeof(float), name);
    mt_safetensors_read(st, t, 0, t->numel, x);
    if (numel) *numel = t->numel;
    for (int d = 0; shape && d < t->ndim; d++) shape[d] = t->shape[d];
    return x;
}

static int32_t *ph_ref_i32(mt_safetensors *st, const char *name) {
    int64_t n;
    float *f = ph_ref(st, name, &n, NULL);
    int32_t *x = mt_malloc((size_t)n * sizeof(int32_t), name);
    for (int64_t i = 0; i < n; i++) x[i] = (int32_t)f[i];
    free(f);
    return x;
}

/* logits against the reference, the positions of mask (per row of `inner` values) only */
static void ph_check_logits(const char *label, const mt_tensor *x, mt_safetensors *st,
                            const char *ref_name, const float *mask, int64_t inner) {
    int64_t n;
    float *ref = ph_ref(st, ref_name, &n, NULL);
    EXPECT(n == mt_numel(x), "%s: %lld logits, reference %lld", label, (long long)mt_numel(x),
           (long long)n);
    const float *v = x->data;
    double dmax = 0, rmax = 0;
    int64_t used = 0;
    for (int64_t i = 0; i < n && n == mt_numel(x); i++) {
        if (mask && mask[i / inner] == 0) continue;
        dmax = fmax(dmax, fabs((double)v[i] - ref[i]));
        rmax = fmax(rmax, fabs((double)ref[i]));
        used++;
    }
    printf("  %-28s %lld values, max|diff| %.3e max|ref| %.3f ratio %.3e\n", label, (long long)used,
           dmax, rmax, dmax / rmax);
    EXPECT(used > 0 && dmax <= PH_RTOL * rmax, "%s: max |diff| %.3e exceeds %.0e x %.3f", label,
           dmax, PH_RTOL, rmax);
    free(ref);
}

static void ph_check_loss(const char *label, const mt_tensor *x, mt_safetensors *st,
                          const char *ref_name) {
    float *ref = ph_ref(st, ref_name, NULL, NULL);
    const double v = *(const float *)x->data, rel = fabs(v - ref[0]) / fabs((double)ref[0]);
    printf("  %-28s %.9f ref %.9f rel %.3e\n", label, v, (double)ref[0], rel);
    EXPECT(rel <= PH_RTOL, "%s: relative diff %.3e exceeds %.0e", label, rel, PH_RTOL);
    free(ref);
}

/* Relative L2 error of every gradient; skip_row >= 0: that row of the embedding is left out
 * (transformers' nn.Embedding(padding_idx) gives the pad row no gradient; this trainer does).
 * A gradient that is 0 in exact arithmetic (|ref| < 1e-6: the QA bias, whose softmax rows sum
 * to 1) is held to 1e-6 absolute instead. */
static void ph_check_grads(const char *label, ph_model *pm, mt_safetensors *st, const char *cs,
                           int skip_row) {
    double worst = 0;
    const char *worst_name = "";
    for (int p = 0; p < pm->m.n_params; p++) {
        const mt_param_info *info = &pm->m.info[p];
        if (info->buffer) continue;
        char name[240];
        snprintf(name, sizeof(name), "%s.grad.%s", cs, info->name);
        int64_t n;
        float *whole = ph_ref(st, name, &n, NULL);
        const int64_t want = info->numel / info->shape[0] * info->src_shape0;
        EXPECT(n == want, "%s: %s has %lld elements, reference %lld", label, name, (long long)want,
               (long long)n);
        const float *g = pm->m.params[p].grad, *ref = whole + info->src_offset;
        double num = 0, den = 0;
        const bool embed = strcmp(info->name, "model.embed_tokens.weight") == 0;
        for (int64_t i = 0; n == want && i < info->numel; i++) {
            if (embed && skip_row >= 0 && (i + info->src_offset) / info->shape[1] == skip_row)
                continue;
            num += ((double)g[i] - ref[i]) * ((double)g[i] - ref[i]);
            den += (double)ref[i] * ref[i];
        }
        const double rl2 = sqrt(den) >= 1e-6 ? sqrt(num / den) : sqrt(num) / 1e-6 * PH_GRAD_RL2;
        EXPECT(rl2 <= PH_GRAD_RL2, "%s: %s relative L2 error %.3e (|ref| %.3e)", label, name, rl2,
               sqrt(den));
        if (rl2 > worst) worst = rl2, worst_name = info->name;
        free(whole);
    }
    printf("  %-28s %d parameters, worst relative L2 %.3e (%s)\n", label, pm->m.n_params, worst,
           worst_name);
}

/* One case of a fixture: forward and backward with the case's targets, checked. */
/* MiniMax-M3's head model for case cs: the causal VL checkpoint head_m3_base's decoder, its
 * config's text model with the case's head (mt_minimax_config_set_head), the head's weights
 * from the reference (<cs>.head.weight / .bias). */
static void ph_m3_model(ph_model *pm, const char *cs, mt_gather_unit unit) {
    char dir[1200], path[1300], nm[160];
    snprintf(dir, sizeof(dir), "%s/head_m3_base", ph_dir());
    snprintf(path, sizeof(path), "%s/head_m3.ref.safetensors", ph_dir());
    mt_minimax_config cfg;
    mt_minimax_config_load(dir, &cfg);
    mt_minimax causal;
    mt_minimax_init(&causal, &cfg);
    float **cd = mt_weights_load_host(dir, &causal);
    const bool qa = strcmp(cs, "qa") == 0, tok = strcmp(cs, "tok") == 0;
    cfg.vl_config[0] = 0; /* the text model alone */
    mt_minimax_config_set_head(&cfg,
                               qa    ? MT_HEAD_QUESTION_ANSWERING
                               : tok ? MT_HEAD_TOKEN_CLASSIFICATION
                                     : MT_HEAD_SEQUENCE_CLASSIFICATION,
                               qa                        ? 2
                               : tok                     ? 5
                               : strcmp(cs, "reg1") == 0 ? 1
                                                         : 3,
                               MT_PROBLEM_AUTO);
    ph_bind(pm, &cfg, unit);
    mt_safetensors *st = mt_safetensors_open(path);
    for (int p = 0; p < pm->m.n_params; p++) {
        const mt_param_info *info = &pm->m.info[p];
        float *dst = pm->m.params[p].data;
        if (&pm->m.params[p] == pm->m.head_w || &pm->m.params[p] == pm->m.head_b) {
            snprintf(nm, sizeof(nm), "%s.head.%s", cs,
                     &pm->m.params[p] == pm->m.head_w ? "weight" : "bias");
            int64_t n;
            float *h = ph_ref(st, nm, &n, NULL);
            EXPECT(n == info->numel, "%s: %lld values for %lld", nm, (long long)n,
                   (long long)info->numel);
            memcpy(dst, h, sizeof(float) * (size_t)(n < info->numel ? n : info->numel));
            free(h);
            continue;
        }
        const int q = mt_minimax_find_param(&causal, info->name);
        MT_CHECK(q >= 0, "m3: %s not in the causal model", info->name);
        /* a vocabulary part (expert unit): its rows of the whole */
        memcpy(dst, (const float *)causal.params[q].data + info->src_offset,
               sizeof(float) * (size_t)info->numel);
    }
    mt_safetensors_close(st);
    mt_weights_host_free(&causal, cd);
    mt_minimax_free(&causal);
}

static void ph_case(const char *fixture, const char *cs, mt_gather_unit unit) {
    ph_model pm;
    const bool m3 = strcmp(fixture, "head_m3") == 0;
    if (m3)
        ph_m3_model(&pm, cs, unit);
    else
        ph_load(&pm, fixture, unit);
    char path[1300], nm[160], label[160];
    snprintf(path, sizeof(path), "%s/%s.ref.safetensors", ph_dir(), fixture);
    mt_safetensors *st = mt_safetensors_open(path);
    int64_t shape[2];
    float *fi = ph_ref(st, "ids", NULL, shape);
    float *mask = ph_ref(st, "mask", NULL, NULL);
    const int64_t B = shape[0], T = shape[1];
    mt_tensor *ids = mt_test_tensor(MT_I32, 2, shape, false, "ids");
    mt_tensor *seg = mt_test_tensor(MT_I32, 2, shape, false, "segments");
    for (int64_t i = 0; i < B * T; i++) {
        ((int32_t *)ids->data)[i] = (int32_t)fi[i];
        ((int32_t *)seg->data)[i] = mask[i] != 0; /* padding: a segment of its own */
    }
    const bool qa = strcmp(cs, "qa") == 0;
    /* QA runs unmasked on both sides (the span softmax covers padding's logits), and so do the
     * composed references of the families transformers has no heads for (unmasked 1): the pad
     * tokens are ordinary tokens there */
    const bool unmasked = qa || mt_safetensors_find(st, "unmasked") != NULL;
    mt_minimax_batch batch = {.ids = ids, .seg = unmasked ? NULL : seg};
    int32_t *cls = NULL, *sp = NULL, *ep = NULL;
    float *target = NULL;
    if (strcmp(cs, "single") == 0 || strcmp(cs, "tok") == 0) {
        snprintf(nm, sizeof(nm), "%s.class", cs);
        batch.head_class = cls = ph_ref_i32(st, nm);
    } else if (qa) {
        batch.start_pos = sp = ph_ref_i32(st, "qa.start");
        batch.end_pos = ep = ph_ref_i32(st, "qa.end");
    } else {
        snprintf(nm, sizeof(nm), "%s.target", cs);
        batch.head_target = target = ph_ref(st, nm, NULL, NULL);
    }
    if (strcmp(cs, "reg3") == 0) pm.m.cfg.problem_type = MT_PROBLEM_REGRESSION;
    mt_ctx c;
    mt_ctx_init(&c, mt_backend_cpu(), (size_t)256 << 20, 1 << 14);
    mt_minimax_out out;
    mt_minimax_forward(&pm.m, &c, &batch, NULL, &out);
    EXPECT(out.loss != NULL, "%s %s: no loss", fixture, cs);
    if (out.loss) mt_backward(&c, out.loss, NULL);
    const char *u = unit == MT_GATHER_EXPERT ? " (expert unit)" : "";
    const bool seq = pm.m.cfg.head == MT_HEAD_SEQUENCE_CLASSIFICATION;
    snprintf(label, sizeof(label), "%s %s logits%s", fixture + 5, cs, u);
    snprintf(nm, sizeof(nm), "%s.logits", cs);
    ph_check_logits(label, out.logits, st, nm, seq || unmasked ? NULL : mask,
                    seq || qa ? 1 : pm.m.cfg.num_labels);
    if (qa) {
        snprintf(label, sizeof(label), "%s %s end logits%s", fixture + 5, cs, u);
        ph_check_logits(label, out.end_logits, st, "qa.end_logits", NULL, 1);
    }
    snprintf(label, sizeof(label), "%s %s loss%s", fixture + 5, cs, u);
    snprintf(nm, sizeof(nm), "%s.loss", cs);
    if (out.loss) ph_check_loss(label, out.loss, st, nm);
    snprintf(label, sizeof(label), "%s %s grads%s", fixture + 5, cs, u);
    ph_check_grads(label, &pm, st, cs, unmasked ? pm.m.cfg.pad_token_id : -1);
    mt_ctx_free(&c);
    free(cls), free(sp), free(ep), free(target), free(fi), free(mask);
    mt_safetensors_close(st);
    ph_free(&pm);
}

static int ph_skip(const char *fixture) {
    char path[1300];
    snprintf(path, sizeof(path), "%s/%s.ref.safetensors", ph_dir(), fixture);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    if (!f) printf("  %s: no fixture (tools/make_head_fixtures.py)\n", path);
    return f ? 0 : 1;
}

static int parity_head_text01_seq(void) {
    if (ph_skip("head_text01_seq3")) return MT_TEST_SKIP;
    ph_case("head_text01_seq3", "single", MT_GATHER_LAYER);
    ph_case("head_text01_seq3", "multi", MT_GATHER_LAYER);
    ph_case("head_text01_seq3", "reg3", MT_GATHER_LAYER);
    ph_case("head_text01_seq1", "reg1", MT_GATHER_LAYER);
    ph_case("head_text01_seq3", "single", MT_GATHER_EXPERT);
    return MT_TEST_OK;
}

static int parity_head_text01_token(void) {
    if (ph_skip("head_text01_tok")) return MT_TEST_SKIP;
    ph_case("head_text01_tok", "tok", MT_GATHER_LAYER);
    ph_case("head_text01_tok", "tok", MT_GATHER_EXPERT);
    return MT_TEST_OK;
}

static int parity_head_text01_qa(void) {
    if (ph_skip("head_text01_qa")) return MT_TEST_SKIP;
    ph_case("head_text01_qa", "qa", MT_GATHER_LAYER);
    ph_case("head_text01_qa", "qa", MT_GATHER_EXPERT);
    return MT_TEST_OK;
}

/* A head model from a causal-LM checkpoint (head_text01_base, the decoder of the seq3 fixture):
 * the decoder as saved, lm_head dropped, score N(0, initializer_range) by head_seed on both load
 * paths (one pass, ranges), another seed other values; then its export (score.weight named as
 * transformers names it, MiniMaxForSequenceClassification, id2label) loads back the same. */
static int parity_head_init_from_causal(void) {
    if (ph_skip("head_text01_seq3")) return MT_TEST_SKIP;
    char cdir[1200], bdir[1200], xdir[] = "/tmp/mt_head_export_XXXXXX";
    snprintf(cdir, sizeof(cdir), "%s/head_text01_seq3", ph_dir());
    snprintf(bdir, sizeof(bdir), "%s/head_text01_base", ph_dir());
    mt_minimax_config cfg;
    mt_minimax_config_load(cdir, &cfg);
    EXPECT(cfg.head == MT_HEAD_SEQUENCE_CLASSIFICATION && cfg.num_labels == 3,
           "seq3 config: head %s, %d labels", mt_head_name(cfg.head), cfg.num_labels);
    mt_minimax m, ref;
    mt_minimax_init(&m, &cfg);
    m.head_seed = 38;
    float **d = mt_weights_load_host(bdir, &m);
    mt_minimax_config bcfg;
    mt_minimax_config_load(bdir, &bcfg);
    EXPECT(bcfg.head == MT_HEAD_CAUSAL_LM, "base config: head %s", mt_head_name(bcfg.head));
    mt_minimax_init(&ref, &bcfg);
    float **rd = mt_weights_load_host(bdir, &ref);
    for (int p = 0; p < m.n_params; p++) {
        const int q = mt_minimax_find_param(&ref, m.info[p].name);
        if (&m.params[p] == m.head_w) {
            EXPECT(q < 0, "score.weight in a causal LM");
            continue;
        }
        EXPECT(q >= 0 && !memcmp(m.params[p].data, ref.params[q].data,
                                 sizeof(float) * (size_t)m.info[p].numel),
               "%s differs from the causal checkpoint's", m.info[p].name);
    }
    const int64_t n = m.info[mt_minimax_find_param(&m, "score.weight")].numel;
    const float *w = m.head_w->data;
    double s2 = 0;
    for (int64_t i = 0; i < n; i++) s2 += (double)w[i] * w[i];
    const double sd = sqrt(s2 / (double)n);
    printf("  init from causal: score.weight %lld values, std %.4f (initializer_range %.4f)\n",
           (long long)n, sd, (double)cfg.initializer_range);
    EXPECT(fabs(sd - cfg.initializer_range) < 0.25 * cfg.initializer_range, "std %.4f", sd);
    /* the range reader draws the same values; another seed others */
    const int fb = mt_minimax_final_bucket(&m);
    float *range = mt_malloc(sizeof(float) * (size_t)m.bucket_numel[fb], "range");
    mt_weights_load_range(bdir, &m, fb, 0, m.bucket_numel[fb], range);
    EXPECT(!memcmp(range, d[fb], sizeof(float) * (size_t)m.bucket_numel[fb]),
           "range read differs from the one-pass load");
    m.head_seed = 39;
    mt_weights_load_range(bdir, &m, fb, 0, m.bucket_numel[fb], range);
    EXPECT(memcmp(range, d[fb], sizeof(float) * (size_t)m.bucket_numel[fb]) != 0,
           "seeds 38 and 39 drew the same head");
    /* the export, loaded back as a head checkpoint */
    EXPECT(mkdtemp(xdir) != NULL, "mkdtemp");
    mt_weights_save(xdir, &m, MT_NAMING_HF_V5, MT_F32, 0);
    mt_minimax_config xcfg;
    mt_minimax_config_load(xdir, &xcfg);
    EXPECT(xcfg.head == MT_HEAD_SEQUENCE_CLASSIFICATION && xcfg.num_labels == 3,
           "export: head %s, %d labels", mt_head_name(xcfg.head), xcfg.num_labels);
    mt_minimax x;
    mt_minimax_init(&x, &xcfg);
    float **xd = mt_weights_load_host(xdir, &x);
    for (int b = 0; b < x.n_buckets; b++)
        EXPECT(!memcmp(xd[b], d[b], sizeof(float) * (size_t)x.bucket_numel[b]),
               "export: bucket %d differs", b);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "grep -q '\"MiniMaxForSequenceClassification\"' %s/config.json",
             xdir);
    EXPECT(system(cmd) == 0, "export config.json names no MiniMaxForSequenceClassification");
    snprintf(cmd, sizeof(cmd), "rm -rf %s", xdir);
    EXPECT(system(cmd) == 0, "rm");
    free(range);
    mt_weights_host_free(&x, xd);
    mt_weights_host_free(&ref, rd);
    mt_weights_host_free(&m, d);
    mt_minimax_free(&x);
    mt_minimax_free(&ref);
    mt_minimax_free(&m);
    return MT_TEST_OK;
}

/* Each head fixture exported (transformers v5 names, fp32) and loaded back: the same buckets,
 * the head named in config.json. With MT_HEAD_EXPORT_DIR set the exports are kept there, for
 * tools/check_head_export.py (transformers' AutoModelFor* loads them: 0 missing, 0 unexpected
 * keys, the reference logits). */
static int parity_head_export(void) {
    if (ph_skip("head_text01_seq3")) return MT_TEST_SKIP;
    static const char *const names[] = {"head_text01_seq3", "head_text01_seq1", "head_text01_tok",
                                        "head_text01_qa"};
    static const char *const arch[] = {"ForSequenceClassification", "ForSequenceClassification",
                                       "ForTokenClassification", "ForQuestionAnswering"};
    const char *keep = getenv("MT_HEAD_EXPORT_DIR");
    char tmp[] = "/tmp/mt_head_export_XXXXXX";
    const char *root = keep ? keep : mkdtemp(tmp);
    EXPECT(root != NULL, "mkdtemp");
    for (int k = 0; k < 4 && root; k++) {
        char src[1200], dst[1200], cmd[1400];
        snprintf(src, sizeof(src), "%s/%s", ph_dir(), names[k]);
        snprintf(dst, sizeof(dst), "%s/%s", root, names[k]);
        snprintf(cmd, sizeof(cmd), "mkdir -p %s", dst);
        EXPECT(system(cmd) == 0, "%s", cmd);
        mt_minimax_config cfg;
        mt_minimax_config_load(src, &cfg);
        mt_minimax m, x;
        mt_minimax_init(&m, &cfg);
        float **d = mt_weights_load_host(src, &m);
        mt_weights_save(dst, &m, MT_NAMING_HF_V5, MT_F32, 0);
        mt_minimax_config xcfg;
        mt_minimax_config_load(dst, &xcfg);
        EXPECT(xcfg.head == cfg.head && xcfg.num_labels == cfg.num_labels,
               "%s: export head %s %d labels", names[k], mt_head_name(xcfg.head), xcfg.num_labels);
        mt_minimax_init(&x, &xcfg);
        float **xd = mt_weights_load_host(dst, &x);
        for (int b = 0; b < x.n_buckets; b++)
            EXPECT(!memcmp(xd[b], d[b], sizeof(float) * (size_t)x.bucket_numel[b]),
                   "%s: export bucket %d differs", names[k], b);
        snprintf(cmd, sizeof(cmd), "grep -q '\"MiniMax%s\"' %s/config.json", arch[k], dst);
        EXPECT(system(cmd) == 0, "%s: config.json names no MiniMax%s", names[k], arch[k]);
        printf("  %s exported to %s: %d parameters, loaded back the same\n", names[k], dst,
               x.n_params);
        mt_weights_host_free(&x, xd);
        mt_weights_host_free(&m, d);
        mt_minimax_free(&x);
        mt_minimax_free(&m);
    }
    if (!keep && root) {
        char cmd[200];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        EXPECT(system(cmd) == 0, "rm");
    }
    return MT_TEST_OK;
}

/* MiniMax-M2: transformers has no heads; the references compose its causal model's last
 * hidden state (float64) with each head written out in tools/make_head_fixtures.py */
static int parity_head_m2(void) {
    if (ph_skip("head_m2_seq3")) return MT_TEST_SKIP;
    ph_case("head_m2_seq3", "single", MT_GATHER_LAYER);
    ph_case("head_m2_seq3", "multi", MT_GATHER_LAYER);
    ph_case("head_m2_seq3", "reg3", MT_GATHER_LAYER);
    ph_case("head_m2_seq1", "reg1", MT_GATHER_LAYER);
    ph_case("head_m2_tok", "tok", MT_GATHER_LAYER);
    ph_case("head_m2_qa", "qa", MT_GATHER_LAYER);
    ph_case("head_m2_seq3", "single", MT_GATHER_EXPERT);
    ph_case("head_m2_qa", "qa", MT_GATHER_EXPERT);
    return MT_TEST_OK;
}

/* MiniMax-M3 (the VL release's text model): as M2, the references composed in float64 */
static int parity_head_m3(void) {
    if (ph_skip("head_m3")) return MT_TEST_SKIP;
    static const char *const cs[] = {"single", "multi", "reg3", "reg1", "tok", "qa"};
    for (int k = 0; k < 6; k++) ph_case("head_m3", cs[k], MT_GATHER_LAYER);
    ph_case("head_m3", "single", MT_GATHER_EXPERT);
    ph_case("head_m3", "qa", MT_GATHER_EXPERT);
    return MT_TEST_OK;
}

/* The activation plan (models/plan.c) of a head model's training micro-step: a dry run of the
 * head's forward and backward (no lm_head, no fused loss), for each head and gather unit, runs
 * and plans memory (its size beside the causal LM's, whose vocabulary is tiny here). */
static int model_plan_heads(void) {
    if (ph_skip("head_text01_seq3")) return MT_TEST_SKIP;
    static const char *const names[] = {"head_text01_seq3", "head_text01_seq1", "head_text01_tok",
                                        "head_text01_qa", "head_m2_seq3"};
    for (int k = 0; k < 5; k++) {
        char dir[1200];
        snprintf(dir, sizeof(dir), "%s/%s", ph_dir(), names[k]);
        mt_minimax_config cfg;
        mt_minimax_config_load(dir, &cfg);
        mt_minimax_config lm = cfg;
        mt_minimax_config_set_head(&lm, MT_HEAD_CAUSAL_LM, 0, MT_PROBLEM_AUTO);
        for (int u = 0; u < 2; u++) {
            const mt_gather_unit unit = u ? MT_GATHER_EXPERT : MT_GATHER_LAYER;
            const int64_t h = mt_minimax_plan_activations(&cfg, unit, false, 2, 29);
            const int64_t c = mt_minimax_plan_activations(&lm, unit, false, 2, 29);
            printf("  %s %s: %lld activation bytes (the causal LM: %lld)\n", names[k],
                   u ? "expert unit" : "layer unit", (long long)h, (long long)c);
            EXPECT(h > 0 && c > 0, "%s: plan %lld, causal %lld", names[k], (long long)h,
                   (long long)c);
        }
    }
    return MT_TEST_OK;
}

/* pad_token_id null: one row pools its last token (transformers' -1); several rows are refused
 * with a message naming pad_token_id (transformers raises "Cannot handle batch sizes > 1 if no
 * padding token is defined."). */
static int parity_head_no_pad(void) {
    if (ph_skip("head_text01_seq3")) return MT_TEST_SKIP;
    char dir[1200];
    snprintf(dir, sizeof(dir), "%s/head_text01_seq3", ph_dir());
    for (int rows = 1; rows <= 2; rows++) {
        fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
            mt_minimax_config cfg;
            mt_minimax_config_load(dir, &cfg);
            cfg.pad_token_id = -1;
            mt_minimax m;
            mt_minimax_init(&m, &cfg);
            float **d = mt_weights_load_host(dir, &m);
            const int64_t shape[2] = {rows, 5};
            mt_tensor *ids = mt_test_tensor(MT_I32, 2, shape, false, "ids");
            for (int i = 0; i < rows * 5; i++) ((int32_t *)ids->data)[i] = i % 3; /* 0 = pad */
            mt_ctx c;
            mt_ctx_init(&c, mt_backend_cpu(), (size_t)64 << 20, 1 << 12);
            mt_minimax_batch batch = {.ids = ids};
            mt_minimax_out out;
            mt_minimax_forward(&m, &c, &batch, NULL, &out);
            const bool last = out.pooled && out.pooled[0] == 4;
            mt_ctx_free(&c);
            mt_weights_host_free(&m, d);
            mt_minimax_free(&m);
            _exit(last ? 0 : 3);
        }
        int status = 0;
        EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait");
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        printf("  pad_token_id null, %d row(s): exit %d\n", rows, code);
        EXPECT(rows == 1 ? code == 0 : code != 0 && code != 3,
               "%d rows without a pad token: exit %d (1 row: 0, the last token pooled; 2 rows: "
               "refused)",
               rows, code);
    }
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"parity_head_no_pad", parity_head_no_pad},
    {"model_plan_heads", model_plan_heads},
    {"parity_head_m3", parity_head_m3},
    {"parity_head_m2", parity_head_m2},
    {"parity_head_export", parity_head_export},
    {"parity_head_init_from_causal", parity_head_init_from_causal},
    {"parity_head_text01_seq", parity_head_text01_seq},
    {"parity_head_text01_token", parity_head_text01_token},
    {"parity_head_text01_qa", parity_head_text01_qa},
};
MT_TEST_MAIN(cases)
