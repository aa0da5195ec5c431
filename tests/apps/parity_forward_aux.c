/* parity_forward_aux.c: minimax-forward's `loss` is transformers' (the cross-entropy, plus
 * router_aux_loss_coef times aux_loss where the config has output_router_logits) with and
 * without --grad, and each auxiliary term is written under its own name beside it
 * (docs/parity.md).
 *
 * parity_forward_loss_m3: tiny_m3 (two MSA layers, no router aux): `loss` the same bits with
 * and without --grad; with --grad the indexer KL, a training-only term transformers does not
 * add, is written as `index_kl` and not added to `loss`.
 * parity_forward_loss_text01: tiny_irregular_gqa (output_router_logits): `loss` and
 * `aux_loss` the same bits with and without --grad, and loss = CE + coef * aux_loss. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/harness.h"
#include "models/safetensors.h"

/* minimax-forward on fixture model `model` with tests/fixtures/models/ids_a.json and
 * labels_a.json (with --grad when grad) into tmp/<model>[.grad].safetensors. */
static mt_safetensors *run_forward(const char *exe, const char *tmp, const char *model, bool grad) {
    const char *src = getenv("MT_SOURCE_DIR");
    char fx[1100], out[1200], cmd[8192];
    snprintf(fx, sizeof(fx), "%s/tests/fixtures/models", src ? src : ".");
    snprintf(out, sizeof(out), "%s/%s%s.safetensors", tmp, model, grad ? ".grad" : "");
    snprintf(cmd, sizeof(cmd),
             "%s --model %s/%s --ids %s/ids_a.json --labels %s/labels_a.json%s --out %s", exe, fx,
             model, fx, fx, grad ? " --grad" : "", out);
    printf("  $ %s\n", cmd);
    fflush(stdout);
    EXPECT(system(cmd) == 0, "minimax-forward failed");
    mt_safetensors *st = mt_safetensors_open(out);
    unlink(out);
    return st;
}

/* Scalar `name` of st into *x; false when st has no such tensor. */
static bool read_scalar(mt_safetensors *st, const char *name, float *x) {
    const mt_st_tensor *t = mt_safetensors_find(st, name);
    if (!t) return false;
    EXPECT(t->numel == 1, "%s has %lld elements, a scalar has 1", name, (long long)t->numel);
    mt_safetensors_read(st, t, 0, 1, x);
    return true;
}

static const char *forward_exe(void) {
    const char *exe = getenv("MT_MINIMAX_FORWARD");
    if (!exe) printf("MT_MINIMAX_FORWARD not set (run through ctest)\n");
    return exe;
}

static int parity_forward_loss_m3(void) {
    const char *exe = forward_exe();
    if (!exe) return MT_TEST_SKIP;
    char tmp[] = "/tmp/mt_fwd_aux_XXXXXX";
    MT_CHECK(mkdtemp(tmp), "parity_forward_loss_m3: cannot create a temporary directory");
    mt_safetensors *plain = run_forward(exe, tmp, "tiny_m3", false),
                   *grad = run_forward(exe, tmp, "tiny_m3", true);
    float loss[2] = {NAN, NAN}, kl = NAN, unused;
    EXPECT(read_scalar(plain, "loss", &loss[0]) && read_scalar(grad, "loss", &loss[1]),
           "no loss written");
    printf("  loss without --grad %.9g, with --grad %.9g\n", loss[0], loss[1]);
    /* not bit for bit: without --grad the experts' rows (at most MT_GEMM_ROWS_MAX an expert
     * here) run gemm_rows.c's inference kernel, with it OpenBLAS, in another order of summation
     * (the two landed on the same float until 2026-12-07, by chance). An added KL (0.97 times
     * its coefficient) is far above fp32 rounding. */
    EXPECT(fabsf(loss[0] - loss[1]) <= 1e-6f * fabsf(loss[0]),
           "loss differs with --grad: %.9g vs %.9g (transformers' loss has no indexer KL)", loss[0],
           loss[1]);
    EXPECT(read_scalar(grad, "index_kl", &kl), "--grad wrote no index_kl beside the loss");
    printf("  index_kl with --grad %.9g\n", kl);
    EXPECT(isfinite(kl) && kl > 0, "index_kl %g: a KL of two distributions that differ is > 0", kl);
    EXPECT(!read_scalar(plain, "index_kl", &unused),
           "index_kl without --grad (the KL is computed in training only)");
    EXPECT(!read_scalar(plain, "aux_loss", &unused) && !read_scalar(grad, "aux_loss", &unused),
           "aux_loss written for a config without output_router_logits");
    mt_safetensors_close(plain);
    mt_safetensors_close(grad);
    rmdir(tmp);
    return MT_TEST_OK;
}

static int parity_forward_loss_text01(void) {
    const char *exe = forward_exe();
    if (!exe) return MT_TEST_SKIP;
    char tmp[] = "/tmp/mt_fwd_aux_XXXXXX";
    MT_CHECK(mkdtemp(tmp), "parity_forward_loss_text01: cannot create a temporary directory");
    mt_safetensors *st[2] = {run_forward(exe, tmp, "tiny_irregular_gqa", false),
                             run_forward(exe, tmp, "tiny_irregular_gqa", true)};
    float loss[2] = {NAN, NAN}, aux[2] = {NAN, NAN}, unused;
    for (int g = 0; g < 2; g++) {
        EXPECT(read_scalar(st[g], "loss", &loss[g]), "no loss written");
        EXPECT(read_scalar(st[g], "aux_loss", &aux[g]), "no aux_loss written");
        EXPECT(!read_scalar(st[g], "index_kl", &unused), "index_kl for a model without MSA");
    }
    printf("  loss %.9g / %.9g, aux_loss %.9g / %.9g (without / with --grad)\n", loss[0], loss[1],
           aux[0], aux[1]);
    EXPECT(memcmp(loss, loss + 1, sizeof(float)) == 0 && memcmp(aux, aux + 1, sizeof(float)) == 0,
           "loss or aux_loss differs with --grad");
    EXPECT(isfinite(aux[0]) && aux[0] > 0, "aux_loss %g", aux[0]);
    mt_safetensors_close(st[0]);
    mt_safetensors_close(st[1]);
    rmdir(tmp);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"parity_forward_loss_m3", parity_forward_loss_m3},
    {"parity_forward_loss_text01", parity_forward_loss_text01},
};
MT_TEST_MAIN(cases)
