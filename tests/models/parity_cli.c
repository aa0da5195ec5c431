/* parity_cli.c: the command-line tools end to end (docs/parity.md).
 *
 * parity_cli: minimax-forward (--grad) and minimax-generate on the parity fixtures against the
 * same transformers references as tests/models/parity_model.c: logits, loss, every parameter's
 * gradient, the greedy tokens.
 * parity_cli_errors: their bad inputs: a NaN weight; an FP8 block scale that is infinite (the
 * stored e4m3 values are finite, the dequantised weights are not); ids beyond the vocabulary;
 * an ids path that is a directory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file_io.h"
#include "tests/support/harness.h"
#include "apps/ids_json.h"
#include "parity_model.h"

static int pm_system(const char *cmd) {
    printf("  $ %s\n", cmd);
    fflush(stdout);
    return system(cmd);
}

/* The reference's (B,T) tensor `key` (token ids stored as floats) as a JSON list of lists. */
static const char *pm_ids_json(mt_safetensors *st, const char *key, const char *tmp) {
    static char path[2][1200];
    static int k;
    int64_t n, shape[3];
    float *v = pm_ref(st, key, &n, shape);
    char *p = path[k++ % 2];
    snprintf(p, sizeof(path[0]), "%s/%s.json", tmp, key);
    FILE *f = fopen(p, "w");
    MT_CHECK(f, "parity_cli: cannot write %s", p);
    for (int64_t b = 0; b < shape[0]; b++)
        for (int64_t t = 0; t < shape[1]; t++)
            fprintf(f, "%s%d%s",
                    t   ? ","
                    : b ? ",["
                        : "[[",
                    (int)v[b * shape[1] + t],
                    t + 1 < shape[1]   ? ""
                    : b + 1 < shape[0] ? "]"
                                       : "]]\n");
    fclose(f);
    free(v);
    return p;
}

/* minimax-forward with --grad on fixture model, checked against reference ref. */
static void pm_cli_forward(const char *exe, const char *tmp, const char *model, const char *ref) {
    const char *fx = pm_fixture_dir();
    char cmd[8192], out[1200];
    mt_safetensors *st = pm_ref_open(ref);
    const char *ids = pm_ids_json(st, "ids_b", tmp), *labels = pm_ids_json(st, "labels_b", tmp);
    snprintf(out, sizeof(out), "%s/%s.out.safetensors", tmp, model);
    snprintf(cmd, sizeof(cmd), "%s --model %s/%s --ids %s --labels %s --grad --out %s", exe, fx,
             model, ids, labels, out);
    EXPECT(pm_system(cmd) == 0, "minimax-forward failed");
    remove(ids);
    remove(labels);
    mt_safetensors *got = mt_safetensors_open(out);

    int64_t n, shape[3];
    float *lg = pm_ref(got, "logits", &n, shape);
    mt_tensor t;
    mt_tensor_wrap(&t, MT_F32, 3, shape, lg, NULL, "logits");
    pm_check_logits("cli logits_b", &t, st, "logits_b");
    float *loss = pm_ref(got, "loss", NULL, NULL);
    mt_tensor_wrap(&t, MT_F32, 0, NULL, loss, NULL, "loss");
    pm_check_scalar("cli loss_b", &t, st, "loss_b");

    /* every parameter's gradient, found through the directory's layout (fused for v5) */
    mt_minimax_config cfg;
    char dir[1200];
    snprintf(dir, sizeof(dir), "%s/%s", fx, model);
    mt_minimax_config_load(dir, &cfg);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    mt_weights_reader *r = mt_weights_open(dir, &m);
    mt_naming naming = mt_weights_naming(r);
    mt_weights_close(r);
    double worst = 0;
    int n_params = 0;
    for (int p = 0; p < m.n_params; p++) {
        char src[200], gname[220], rname[220];
        int64_t off;
        mt_weights_source_name(&m, p, naming, src, sizeof(src), &off);
        snprintf(gname, sizeof(gname), "grad.%s", src);
        snprintf(rname, sizeof(rname), "grad.%s", m.info[p].name);
        const mt_st_tensor *gt = mt_safetensors_find(got, gname);
        if (m.info[p].buffer) { /* the correction bias: no gradient, none written */
            EXPECT(gt == NULL, "minimax-forward wrote %s for a buffer", gname);
            continue;
        }
        n_params++;
        EXPECT(gt != NULL, "minimax-forward output lacks %s", gname);
        if (!gt) continue;
        const int64_t numel = m.info[p].numel;
        float *g = mt_malloc((size_t)numel * sizeof(float), "grad");
        mt_safetensors_read(got, gt, off, off + numel, g);
        float *rg = pm_ref(st, rname, NULL, NULL);
        double num = 0, den = 0;
        for (int64_t i = 0; i < numel; i++) {
            num += ((double)g[i] - rg[i]) * ((double)g[i] - rg[i]);
            den += (double)rg[i] * rg[i];
        }
        double rl2 = den > 0 ? sqrt(num / den) : sqrt(num); /* an expert no token chose */
        EXPECT(rl2 <= PM_GRAD_RL2, "cli %s: relative L2 error %.3e", gname, rl2);
        worst = fmax(worst, rl2);
        free(g);
        free(rg);
    }
    printf("  %-24s %d parameters (%s layout), worst relative L2 %.3e (%s)\n", "cli grads_b",
           n_params, mt_naming_name(naming), worst, model);
    mt_minimax_free(&m);
    free(lg);
    free(loss);
    mt_safetensors_close(st);
    mt_safetensors_close(got);
    remove(out);
}

static void pm_cli_generate(const char *exe, const char *tmp, const char *model) {
    const char *fx = pm_fixture_dir();
    char cmd[8192], out[1200];
    mt_safetensors *st = pm_ref_open(model);
    int64_t n, shape[3];
    float *ref = pm_ref(st, "gen_a", &n, shape); /* (B, new tokens) */
    const char *ids = pm_ids_json(st, "ids_a", tmp);
    snprintf(out, sizeof(out), "%s/%s.gen.json", tmp, model);
    snprintf(cmd, sizeof(cmd), "%s --model %s/%s --ids %s --max-new-tokens %lld > %s", exe, fx,
             model, ids, (long long)shape[1], out);
    EXPECT(pm_system(cmd) == 0, "minimax-generate failed");
    remove(ids);
    int B, N;
    int32_t *gen = mt_ids_json_load(out, &B, &N);
    EXPECT(n == (int64_t)B * N, "minimax-generate printed %dx%d tokens, reference %lld", B, N,
           (long long)n);
    int same = 0;
    for (int64_t i = 0; i < n && i < (int64_t)B * N; i++) same += gen[i] == (int32_t)ref[i];
    printf("  %-24s %d of %lld greedy tokens identical (%s)\n", "cli generate_a", same,
           (long long)n, model);
    EXPECT(same == n, "minimax-generate tokens differ from transformers");
    free(gen);
    free(ref);
    mt_safetensors_close(st);
    remove(out);
}

int parity_cli(void) {
    const char *fwd = getenv("MT_MINIMAX_FORWARD"), *gen = getenv("MT_MINIMAX_GENERATE");
    if (!fwd || !gen) {
        printf("MT_MINIMAX_FORWARD / MT_MINIMAX_GENERATE not set (run through ctest)\n");
        return MT_TEST_SKIP;
    }
    char tmp[] = "/tmp/mt_parity_XXXXXX";
    MT_CHECK(mkdtemp(tmp), "parity_cli: cannot create a temporary directory");
    pm_cli_forward(fwd, tmp, "tiny_irregular_gqa", "tiny_irregular_gqa");
    pm_cli_forward(fwd, tmp, "tiny_mqa_v5", "tiny_mqa");
    pm_cli_generate(gen, tmp, "tiny_released8");
    pm_cli_forward(fwd, tmp, "tiny_m2_irregular", "tiny_m2_irregular");
    pm_cli_generate(gen, tmp, "tiny_m2");
    pm_cli_generate(gen, tmp, "tiny_m2_fp8");
    rmdir(tmp);
    return MT_TEST_OK;
}

/* cmd (its output to tmp/err.log) must exit non-zero saying want. */
static void pm_cli_expect_fail(const char *cmd, const char *tmp, const char *want) {
    char full[9000], log[1200], err[1300];
    snprintf(log, sizeof(log), "%s/err.log", tmp);
    snprintf(full, sizeof(full), "%s > %s 2>&1", cmd, log);
    const int rc = pm_system(full);
    char *text = mt_file_read_max(log, NULL, 0, err, sizeof(err));
    const char *at = text ? strstr(text, want) : NULL;
    EXPECT(rc != 0 && at, "want exit != 0 and \"%s\", got %d: %s", want, rc, text ? text : err);
    if (at) printf("  refused: %.*s\n", (int)strcspn(at, "\n"), at);
    free(text);
    remove(log);
}

int parity_cli_errors(void) {
    const char *fwd = getenv("MT_MINIMAX_FORWARD"), *gen = getenv("MT_MINIMAX_GENERATE");
    const char *poke = getenv("MT_TEST_POKE");
    if (!fwd || !gen || !poke) {
        printf("MT_MINIMAX_FORWARD / MT_MINIMAX_GENERATE / MT_TEST_POKE not set (run through "
               "ctest)\n");
        return MT_TEST_SKIP;
    }
    char tmp[] = "/tmp/mt_parity_XXXXXX", model[1200], cmd[8192], ids[1200], fp8[1200];
    MT_CHECK(mkdtemp(tmp), "parity_cli_errors: cannot create a temporary directory");
    const char *fx = pm_fixture_dir();
    /* one NaN in a weight: today's forward writes all-NaN logits and generate prints zeros,
     * both with exit 0; the loader must refuse, naming the tensor and the element */
    pm_model pm;
    pm_load(&pm, "tiny_mqa", false);
    const int p = mt_minimax_find_param(&pm.m, "model.layers.0.self_attn.out_proj.weight");
    MT_CHECK(p >= 0, "tiny_mqa has no layer 0 out_proj");
    ((float *)pm.m.params[p].data)[70] = NAN; /* row 1, column 6 of the (64, 64) matrix */
    snprintf(model, sizeof(model), "%s/nan", tmp);
    mt_weights_save(model, &pm.m, MT_NAMING_HF_V4, MT_F32, 0);
    const char *want = "tensor model.layers.0.self_attn.out_proj.weight element 70 ([1, 6]) is nan";
    snprintf(cmd, sizeof(cmd), "%s --model %s --ids %s/ids_a.json --out %s/o.safetensors", fwd,
             model, fx, tmp);
    pm_cli_expect_fail(cmd, tmp, want);
    snprintf(cmd, sizeof(cmd), "%s --model %s --ids %s/ids_a.json --max-new-tokens 3", gen, model,
             fx);
    pm_cli_expect_fail(cmd, tmp, want);
    /* an infinite FP8 block scale: the e4m3 values read are finite, the weights they dequantise
     * to are not (tiny_m2_fp8's blocks are 16 x 16: columns 32-47 of expert 3's w1) */
    snprintf(fp8, sizeof(fp8), "%s/fp8", tmp);
    snprintf(cmd, sizeof(cmd),
             "cp -r '%s/tiny_m2_fp8' '%s' && %s st '%s/model.safetensors' "
             "model.layers.0.block_sparse_moe.experts.3.w1.weight_scale_inv 2 1 inf",
             fx, fp8, poke, fp8);
    MT_CHECK(pm_system(cmd) == 0, "cannot write the FP8 copy");
    snprintf(cmd, sizeof(cmd), "%s --model %s --ids %s/ids_a.json --out %s/o.safetensors", fwd, fp8,
             fx, tmp);
    pm_cli_expect_fail(cmd, tmp,
                       "tensor model.layers.0.block_sparse_moe.experts.3.w1.weight element 32 "
                       "([0, 32]) is ");
    /* token ids beyond the vocabulary, refused before the weights are read */
    snprintf(ids, sizeof(ids), "%s/ids.json", tmp);
    FILE *f = fopen(ids, "w");
    MT_CHECK(f, "cannot write %s", ids);
    fprintf(f, "[[1, 2, %d]]\n", pm.m.cfg.vocab_size);
    fclose(f);
    char want_ids[128];
    snprintf(want_ids, sizeof(want_ids), "row 0 column 2 = %d is outside [0, %d)",
             pm.m.cfg.vocab_size, pm.m.cfg.vocab_size);
    snprintf(cmd, sizeof(cmd), "%s --model %s --ids %s --out %s/o.safetensors", fwd, model, ids,
             tmp);
    pm_cli_expect_fail(cmd, tmp, want_ids);
    snprintf(cmd, sizeof(cmd), "%s --model %s --ids %s --max-new-tokens 3", gen, model, ids);
    pm_cli_expect_fail(cmd, tmp, want_ids);
    /* an ids path that is a directory */
    snprintf(cmd, sizeof(cmd), "%s --model %s/tiny_mqa --ids %s --out %s/o.safetensors", fwd, fx,
             tmp, tmp);
    pm_cli_expect_fail(cmd, tmp, "is a directory, not a file");
    pm_free(&pm);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    MT_CHECK(system(cmd) == 0, "cannot remove %s", tmp);
    return MT_TEST_OK;
}
