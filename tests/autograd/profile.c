/* profile.c: the op profile (autograd/profile.h): its counts and FLOP / byte formulas on a GEMM
 * and an elementwise op against values worked out by hand (a GEMM of M x N x K is 2 M N K FLOPs;
 * an elementwise op one FLOP per element written and each tensor's bytes once, a gradient that
 * is accumulated into twice), and the hook leaving the numbers alone: a small network's loss and
 * gradients bit for bit the same with the profile on and off. */
#include <string.h>

#include "autograd/profile.h"
#include "tests/support/harness.h"

static bool close_to(double a, double b) { return a == b; } /* integers in doubles: exact */

static int test_op_profile_counts(void) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_profile prof;
    memset(&prof, 0, sizeof(prof));
    c.prof = &prof;
    /* x (4,8) times w (16,8)^T: N = 4, M = 16, K = 8; then + b (4,16) */
    mt_tensor *x = mt_test_tensor(MT_F32, 2, (int64_t[]){4, 8}, true, "x");
    mt_tensor *w = mt_test_tensor(MT_F32, 2, (int64_t[]){16, 8}, true, "w");
    mt_tensor *b = mt_test_tensor(MT_F32, 2, (int64_t[]){4, 16}, true, "b");
    mt_rng rng;
    mt_rng_seed(&rng, 7);
    mt_fill_normal(x->data, 32, 1.0f, &rng);
    mt_fill_normal(w->data, 128, 1.0f, &rng);
    mt_fill_normal(b->data, 64, 1.0f, &rng);
    mt_tensor *y = mt_matmul(&c, x, w);
    mt_tensor *z = mt_add(&c, y, b);
    float seed[64];
    for (int i = 0; i < 64; i++) seed[i] = 1.0f;
    mt_backward(&c, z, seed);

    const mt_profile_stat *mf = &prof.op[MT_OP_MATMUL][0], *mb = &prof.op[MT_OP_MATMUL][1];
    const mt_profile_stat *af = &prof.op[MT_OP_ADD][0], *ab = &prof.op[MT_OP_ADD][1];
    EXPECT(mf->calls == 1 && mb->calls == 1 && af->calls == 1 && ab->calls == 1,
           "calls: matmul %lld/%lld, add %lld/%lld (want 1 each)", (long long)mf->calls,
           (long long)mb->calls, (long long)af->calls, (long long)ab->calls);
    /* matmul forward: 2*4*16*8 = 1024 FLOPs; x 128 B + w 512 B + y 256 B = 896 B */
    EXPECT(close_to(mf->flops, 1024) && close_to(mf->bytes, 896), "matmul fwd %g FLOPs %g B",
           mf->flops, mf->bytes);
    /* backward: dx and dw, 1024 each; dy 256 + x 128 + w 512 read, dx 2*128, dw 2*512 = 2176 B */
    EXPECT(close_to(mb->flops, 2048) && close_to(mb->bytes, 2176), "matmul bwd %g FLOPs %g B",
           mb->flops, mb->bytes);
    /* add forward: 64 FLOPs, 3 tensors of 256 B; backward: 2 gradients of 64 elements, dz read,
     * dy and db read and written: 5 * 256 B */
    EXPECT(close_to(af->flops, 64) && close_to(af->bytes, 768), "add fwd %g FLOPs %g B", af->flops,
           af->bytes);
    EXPECT(close_to(ab->flops, 128) && close_to(ab->bytes, 1280), "add bwd %g FLOPs %g B",
           ab->flops, ab->bytes);
    EXPECT(mf->sec >= 0 && mb->sec >= 0 && !mf->upper && !af->upper, "seconds or bound flags");
    for (int op = 0; op < MT_OP_COUNT; op++)
        for (int d = 0; d < 2; d++)
            if (op != MT_OP_MATMUL && op != MT_OP_ADD)
                EXPECT(prof.op[op][d].calls == 0, "op %s dir %d counted %lld calls",
                       mt_op_name((mt_op)op), d, (long long)prof.op[op][d].calls);
    /* a backward with only w needing a gradient counts only dW's product */
    mt_ctx_reset(&c);
    memset(&prof, 0, sizeof(prof));
    mt_tensor *x2 = mt_test_tensor(MT_F32, 2, (int64_t[]){4, 8}, false, "x2");
    memcpy(x2->data, x->data, sizeof(float) * 32);
    mt_backward(&c, mt_matmul(&c, x2, w), seed);
    EXPECT(close_to(prof.op[MT_OP_MATMUL][1].flops, 1024), "dW alone: %g FLOPs (want 1024)",
           prof.op[MT_OP_MATMUL][1].flops);
    /* named rows: the same name and column add up */
    mt_profile_add(&prof, "optim_adamw", MT_PROFILE_STEP, 0.5, 10, 20);
    mt_profile_add(&prof, "optim_adamw", MT_PROFILE_STEP, 0.25, 1, 2);
    mt_profile_add(&prof, "zero_gather", MT_PROFILE_FWD, 0.1, 0, 8);
    EXPECT(prof.n_extra == 2 && prof.extra[0].calls == 2 && prof.extra[0].sec == 0.75 &&
               prof.extra[0].flops == 11 && prof.extra[0].bytes == 22,
           "named rows: %d rows, first %lld calls %g s", prof.n_extra,
           (long long)prof.extra[0].calls, prof.extra[0].sec);
    c.prof = NULL;
    mt_ctx_free(&c);
    return MT_TEST_OK;
}

/* rmsnorm, two projections, SwiGLU, attention and an lm_head with its cross-entropy, forward and
 * backward; out: the loss, then every leaf gradient */
#define NET_T 6
#define NET_C 16
static void net_run(mt_profile *prof, float *out, int64_t n_out) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    c.prof = prof;
    mt_rng rng;
    mt_rng_seed(&rng, 11);
    mt_tensor *leaf[5];
    const int64_t shapes[5][2] = {{NET_T, NET_C}, {NET_C, 1}, {32, NET_C}, {32, NET_C}, {24, 16}};
    const char *names[5] = {"x", "norm", "w1", "w3", "head"};
    for (int i = 0; i < 5; i++) {
        leaf[i] = mt_test_tensor(MT_F32, i == 1 ? 1 : 2, shapes[i], true, names[i]);
        mt_fill_normal(leaf[i]->data, mt_numel(leaf[i]), 0.5f, &rng);
    }
    mt_tensor *h = mt_rmsnorm(&c, leaf[0], leaf[1], 1e-6f, false);
    mt_tensor *a = mt_swiglu(&c, mt_matmul(&c, h, leaf[2]), mt_matmul(&c, h, leaf[3]));
    /* a (T,32) as (1,T,2,16) three times: q, k and v of two heads */
    mt_tensor *qkv[3];
    for (int i = 0; i < 3; i++) qkv[i] = mt_view(&c, a, 4, (int64_t[]){1, NET_T, 2, 16});
    mt_tensor *o = mt_attention(&c, qkv[0], qkv[1], qkv[2], NULL, 0.25f);
    mt_tensor *o2 = mt_view(&c, o, 2, (int64_t[]){NET_T, 32});
    mt_tensor *o3 = mt_add(&c, mt_scale(&c, o2, 0.5f), a);
    mt_tensor *hd = mt_view(&c, o3, 2, (int64_t[]){NET_T * 2, 16});
    mt_tensor *labels = mt_test_tensor(MT_I32, 1, (int64_t[]){NET_T * 2}, false, "labels");
    for (int i = 0; i < NET_T * 2; i++) ((int32_t *)labels->data)[i] = (i * 7) % 24;
    mt_tensor *loss = mt_linear_cross_entropy(&c, hd, leaf[4], labels, 0);
    mt_backward(&c, loss, NULL);
    int64_t k = 0;
    out[k++] = *(float *)loss->data;
    for (int i = 0; i < 5; i++)
        for (int64_t j = 0; j < mt_numel(leaf[i]) && k < n_out; j++)
            out[k++] = ((float *)leaf[i]->grad)[j];
    mt_ctx_free(&c);
}

static int test_op_profile_numerics(void) {
    const int64_t n = 1 + NET_T * NET_C + NET_C + 2 * 32 * NET_C + 24 * 16;
    float off[1 + NET_T * NET_C + NET_C + 2 * 32 * NET_C + 24 * 16];
    float on[sizeof(off) / sizeof(off[0])];
    mt_profile prof;
    memset(&prof, 0, sizeof(prof));
    net_run(NULL, off, n);
    net_run(&prof, on, n);
    EXPECT(!memcmp(off, on, sizeof(off)),
           "the profile changed the loss or a gradient (loss %.9g "
           "vs %.9g)",
           (double)off[0], (double)on[0]);
    EXPECT(prof.op[MT_OP_ATTENTION][0].calls == 1 && prof.op[MT_OP_ATTENTION][1].calls == 1 &&
               prof.op[MT_OP_MATMUL][0].calls == 2 && prof.op[MT_OP_VIEW][1].calls == 5,
           "calls: attention %lld/%lld, matmul %lld, view bwd %lld",
           (long long)prof.op[MT_OP_ATTENTION][0].calls,
           (long long)prof.op[MT_OP_ATTENTION][1].calls, (long long)prof.op[MT_OP_MATMUL][0].calls,
           (long long)prof.op[MT_OP_VIEW][1].calls);
    /* attention, B 1, H 2, D 16, T 6 causal: 21 pairs a head, 4 D FLOPs each forward */
    EXPECT(prof.op[MT_OP_ATTENTION][0].flops == 4.0 * 16 * 2 * 21,
           "attention fwd %g FLOPs (want %g)", prof.op[MT_OP_ATTENTION][0].flops,
           4.0 * 16 * 2 * 21);
    /* the fused lm_head: 12 labelled rows, V 24, C 16: 2 M V C + 3 M V */
    EXPECT(prof.op[MT_OP_LINEAR_CROSS_ENTROPY][0].flops == 2.0 * 12 * 24 * 16 + 3.0 * 12 * 24,
           "linear_cross_entropy fwd %g FLOPs", prof.op[MT_OP_LINEAR_CROSS_ENTROPY][0].flops);
    return MT_TEST_OK;
}

/* Attention's pairs over packed samples: ids rising along the row (samples of 3, 2 and 1: 6 + 3
 * + 1 pairs a head, exact), and ids that repeat after a gap (every causal pair, 21 a head, an
 * upper bound). B 1, T 6, H 2, D 8: 4 D FLOPs a pair forward. */
static double attention_fwd_flops(const int32_t *ids, bool *upper) {
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *x = mt_test_tensor(MT_F32, 4, (int64_t[]){1, 6, 2, 8}, true, "qkv"); /* kept */
    mt_tensor *seg = mt_test_tensor(MT_I32, 2, (int64_t[]){1, 6}, false, "seg");
    memset(x->data, 0, mt_nbytes(x));
    memcpy(seg->data, ids, sizeof(int32_t) * 6);
    mt_tensor *o = mt_attention(&c, x, x, x, seg, 0.25f);
    double flops = 0, bytes = 0;
    mt_profile_cost(&c.nodes[c.n_nodes - 1], false, &flops, &bytes, upper);
    (void)o;
    mt_ctx_free(&c);
    return flops;
}

static int test_op_profile_attention_pairs(void) {
    bool upper = true;
    double f = attention_fwd_flops((const int32_t[]){0, 0, 0, 4, 4, 9}, &upper);
    EXPECT(f == 4.0 * 8 * 2 * 10 && !upper, "rising ids: %g FLOPs (want %g), upper %d", f,
           4.0 * 8 * 2 * 10, upper);
    f = attention_fwd_flops((const int32_t[]){0, 0, 1, 1, 0, 0}, &upper);
    EXPECT(f == 4.0 * 8 * 2 * 21 && upper, "repeated ids: %g FLOPs (want %g), upper %d", f,
           4.0 * 8 * 2 * 21, upper);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_profile_counts", test_op_profile_counts},
    {"op_profile_numerics", test_op_profile_numerics},
    {"op_profile_attention_pairs", test_op_profile_attention_pairs},
};
MT_TEST_MAIN(cases)
