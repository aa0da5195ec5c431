/* op_msa_ref.c: the MSA ops against committed references (tests/fixtures/msa):
 *  - op_msa_select_hf: the selection equals transformers' MiniMaxM3VLIndexer on the iq, ik it
 *    scored, and the sparse attention its build_block_mask + eager attention
 *    (tools/make_msa_fixtures.py); with all-zero iq, ik (every score tied) the rule is the
 *    lower block id, where torch.topk returns the tied blocks in its own order;
 *  - op_msa_kl_ref: the KL loss and its iq, ik gradients equal the fp64 reference of
 *    tools/msa_kl_reference.py (autograd of the spec's definition).
 * Samples run alone in the references and packed in rows here. */
#include "tests/support/harness.h"
#include "models/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* tensor `name` of st as a test tensor of this shape (ints exact in the fixtures' F32) */
static mt_tensor *load(const mt_safetensors *st, const char *name, mt_dtype dt, int ndim,
                       const int64_t *shape, bool grad) {
    const mt_st_tensor *t = mt_safetensors_find(st, name);
    MT_CHECK(t, "fixture tensor %s missing", name);
    char err[256];
    MT_CHECK(mt_safetensors_check(st, t, ndim, shape, err, sizeof err), "%s", err);
    mt_tensor *x = mt_test_tensor(dt, ndim, shape, grad, name);
    float *f = malloc(sizeof(float) * (size_t)t->numel);
    mt_safetensors_read(st, t, 0, t->numel, f);
    if (dt == MT_I32)
        for (int64_t i = 0; i < t->numel; i++) ((int32_t *)x->data)[i] = (int32_t)f[i];
    else
        memcpy(x->data, f, sizeof(float) * (size_t)t->numel);
    free(f);
    return x;
}

static int test_op_msa_select_hf(void) {
    mt_safetensors *st = mt_safetensors_open("tests/fixtures/msa/select.safetensors");
    const int64_t B = 2, T = 75, Hi = 2, Di = 16, H = 4, D = 16;
    float params[3];
    mt_safetensors_read(st, mt_safetensors_find(st, "params"), 0, 3, params);
    const int block = (int)params[0], topk = (int)params[1];
    const int64_t bt[2] = {B, T}, sel_shape[4] = {B, Hi, T, topk};
    mt_tensor *iq = load(st, "iq", MT_F32, 4, (int64_t[]){B, T, Hi, Di}, false);
    mt_tensor *ik = load(st, "ik", MT_F32, 4, (int64_t[]){B, T, 1, Di}, false);
    mt_tensor *pos = load(st, "pos", MT_I32, 2, bt, false);
    mt_tensor *seg = load(st, "seg", MT_I32, 2, bt, false);
    mt_tensor *want = load(st, "idx_hf", MT_I32, 4, sel_shape, false);
    mt_tensor *want0 = load(st, "idx_zero_hf", MT_I32, 4, sel_shape, false);
    mt_tensor *q = load(st, "q", MT_F32, 4, (int64_t[]){B, T, H, D}, false);
    mt_tensor *k = load(st, "k", MT_F32, 4, (int64_t[]){B, T, Hi, D}, false);
    mt_tensor *v = load(st, "v", MT_F32, 4, (int64_t[]){B, T, Hi, D}, false);
    mt_tensor *out_hf = load(st, "out_hf", MT_F32, 4, (int64_t[]){B, T, H, D}, false);
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *idx = mt_msa_select(&c, iq, ik, pos, seg, NULL, block, topk);
    const int32_t *got = idx->data, *w = want->data;
    int bad = 0, short_rows = 0;
    for (int64_t i = 0; i < mt_numel(idx); i++) {
        if (got[i] != w[i] && bad++ < 5)
            printf("  idx[%lld]: got %d, transformers %d\n", (long long)i, got[i], w[i]);
        short_rows += i % topk == topk - 1 && got[i] < 0;
    }
    EXPECT(bad == 0, "msa_select: %d of %lld slots differ from transformers", bad,
           (long long)mt_numel(idx));
    EXPECT(short_rows > 0, "the fixture has no query with fewer than topk visible blocks");
    printf("  selection: %lld slots equal transformers' (%d queries with -1 padding)\n",
           (long long)mt_numel(idx), short_rows);
    mt_tensor *o = mt_msa_attention(&c, q, k, v, idx, pos, seg, NULL, block, params[2]);
    mt_check_close("msa_attention vs transformers", o->data, out_hf->data, mt_numel(o), 1e-6, 1e-5);

    /* all-zero iq, ik: every score ties; ours takes the lower block ids after the local one.
     * transformers agrees on the local block and on how many are valid (its tied order is
     * torch.topk's) */
    memset(iq->data, 0, mt_nbytes(iq));
    memset(ik->data, 0, mt_nbytes(ik));
    mt_tensor *idx0 = mt_msa_select(&c, iq, ik, pos, seg, NULL, block, topk);
    const int32_t *g0 = idx0->data, *w0 = want0->data, *p = pos->data;
    int bad_rule = 0, bad_hf = 0, differ = 0;
    for (int64_t r = 0; r < B * Hi * T; r++) {
        const int64_t b = r / (Hi * T), t = r % T;
        const int32_t local = p[b * T + t] / block;
        for (int s = 0; s < topk; s++) {
            const int32_t rule = s == 0 ? local : s - 1 < local ? s - 1 : -1;
            bad_rule += g0[r * topk + s] != rule;
            bad_hf += (g0[r * topk + s] < 0) != (w0[r * topk + s] < 0);
            differ += g0[r * topk + s] != w0[r * topk + s];
        }
        bad_hf += w0[r * topk] != local;
    }
    EXPECT(bad_rule == 0, "tied scores: %d slots break the lower-block-id rule", bad_rule);
    EXPECT(bad_hf == 0, "tied scores: %d slots differ from transformers in local/valid", bad_hf);
    printf("  ties: lower-id rule held; %d slots order the tied blocks unlike torch.topk\n",
           differ);
    mt_ctx_free(&c);
    mt_safetensors_close(st);
    return MT_TEST_OK;
}

static int test_op_msa_kl_ref(void) {
    mt_safetensors *st = mt_safetensors_open("tests/fixtures/msa/kl.safetensors");
    const int64_t B = 2, T = 75, H = 4, Hi = 2, D = 16, Di = 16;
    float params[6], loss_ref;
    mt_safetensors_read(st, mt_safetensors_find(st, "params"), 0, 6, params);
    mt_safetensors_read(st, mt_safetensors_find(st, "loss"), 0, 1, &loss_ref);
    const int block = (int)params[0], topk = (int)params[1];
    const int64_t bt[2] = {B, T};
    mt_tensor *q = load(st, "q", MT_F32, 4, (int64_t[]){B, T, H, D}, false);
    mt_tensor *k = load(st, "k", MT_F32, 4, (int64_t[]){B, T, Hi, D}, false);
    mt_tensor *iq = load(st, "iq", MT_F32, 4, (int64_t[]){B, T, Hi, Di}, true);
    mt_tensor *ik = load(st, "ik", MT_F32, 4, (int64_t[]){B, T, 1, Di}, true);
    mt_tensor *diq = load(st, "diq", MT_F32, 4, (int64_t[]){B, T, Hi, Di}, false);
    mt_tensor *dik = load(st, "dik", MT_F32, 4, (int64_t[]){B, T, 1, Di}, false);
    mt_tensor *idx = load(st, "idx", MT_I32, 4, (int64_t[]){B, Hi, T, topk}, false);
    mt_tensor *pos = load(st, "pos", MT_I32, 2, bt, false);
    mt_tensor *seg = load(st, "seg", MT_I32, 2, bt, false);
    mt_tensor *mask = load(st, "mask", MT_F32, 2, bt, false);
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *loss = mt_msa_kl(&c, q, k, iq, ik, idx, pos, seg, mask, NULL, block, params[2],
                                params[3], params[4], params[5]);
    const float got = *(float *)loss->data;
    printf("  loss %.9g, fp64 reference %.9g\n", (double)got, (double)loss_ref);
    EXPECT(fabs((double)got - loss_ref) <= 1e-6 * fabs((double)loss_ref), "msa_kl loss");
    mt_backward(&c, loss, NULL);
    mt_check_close("msa_kl diq", iq->grad, diq->data, mt_numel(iq), 1e-9, 1e-5);
    mt_check_close("msa_kl dik", ik->grad, dik->data, mt_numel(ik), 1e-9, 1e-5);
    mt_ctx_free(&c);
    mt_safetensors_close(st);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_msa_select_hf", test_op_msa_select_hf},
    {"op_msa_kl_ref", test_op_msa_kl_ref},
};
MT_TEST_MAIN(cases)
