/* grad_cp_attention.c: context parallelism's attention op (mt_cp_attention, autograd/
 * op_cp_attention.c) on one process: finite-difference gradients with no group (one rank) and
 * with the mirror group (tests/support/cp_mirror.h: C ranks all holding this rank's tokens, so
 * the exchange, the layout's reordering and the position kernels run as on C ranks); with one
 * rank the op must equal mt_attention bit for bit (fp32 and bf16 modes); bad groups and shapes
 * are refused by name. The real C-rank exchange: tests/train/dist_cp_attention.c. */
#include "tests/support/harness.h"
#include "tests/support/cp_mirror.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mt_tensor *seg;
    const mt_cp_group *g;
} cp_args;

static mt_tensor *build_cp(mt_ctx *c, mt_tensor **in, void *user) {
    const cp_args *a = user;
    return mt_cp_attention(c, in[0], in[1], in[2], a->seg, a->g,
                           1.0f / sqrtf((float)in[0]->shape[3]));
}

static void check_grad(const char *label, int size, int rank, int64_t B, int64_t Tl, int64_t H,
                       int64_t Hkv, int64_t D, const int32_t *seg, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    mt_tensor *q = mt_test_tensor(MT_F32, 4, (int64_t[]){B, Tl, H, D}, true, "q");
    mt_tensor *k = mt_test_tensor(MT_F32, 4, (int64_t[]){B, Tl, Hkv, D}, true, "k");
    mt_tensor *v = mt_test_tensor(MT_F32, 4, (int64_t[]){B, Tl, Hkv, D}, true, "v");
    mt_fill_normal(q->data, mt_numel(q), 1.0f, &r);
    mt_fill_normal(k->data, mt_numel(k), 1.0f, &r);
    mt_fill_normal(v->data, mt_numel(v), 1.0f, &r);
    cp_mirror m;
    mt_cp_group g = cp_mirror_group(&m, mt_backend_cpu(), size, rank);
    cp_args a = {NULL, size ? &g : NULL};
    if (seg) {
        a.seg = mt_test_tensor(MT_I32, 2, (int64_t[]){B, Tl}, false, "seg");
        memcpy(a.seg->data, seg, sizeof(int32_t) * (size_t)(B * Tl));
    }
    mt_tensor *in[3] = {q, k, v};
    mt_gradcheck(label, build_cp, in, 3, &a, &(mt_gradcheck_opts){.max_elems = 256});
}

static int test_grad(void) {
    /* row 0: samples of 3, 4 and 3 tokens (over the chunk borders at 5 and 10 of C = 2's
     * layout, T = 20), row 1 one sample */
    const int32_t seg[20] = {0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
    check_grad("cp one rank gqa seg", 0, 0, 2, 10, 4, 2, 4, seg, 1);
    check_grad("cp one rank mqa", 0, 0, 1, 7, 3, 1, 4, NULL, 2);
    check_grad("cp mirror C=2 rank 1 gqa seg", 2, 1, 2, 10, 4, 2, 4, seg, 3);
    check_grad("cp mirror C=2 rank 0 mqa", 2, 0, 1, 6, 2, 1, 4, NULL, 4);
    check_grad("cp mirror C=4 rank 2 seg", 4, 2, 2, 10, 2, 2, 4, seg, 5);
    return MT_TEST_OK;
}

/* mt_cp_attention with no group and with a group of one against mt_attention: bit for bit */
static void check_one_rank(const char *label, mt_dtype mode, bool group, uint64_t seed) {
    const int64_t B = 2, T = 150, H = 4, Hkv = 2, D = 16;
    mt_rng r;
    mt_rng_seed(&r, seed);
    mt_tensor *x[3];
    const int64_t shapes[3][4] = {{B, T, H, D}, {B, T, Hkv, D}, {B, T, Hkv, D}};
    for (int i = 0; i < 3; i++) {
        x[i] = mt_test_tensor(MT_F32, 4, shapes[i], true, i == 0 ? "q" : i == 1 ? "k" : "v");
        mt_fill_normal(x[i]->data, mt_numel(x[i]), 1.0f, &r);
    }
    mt_tensor *seg = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg");
    for (int64_t i = 0; i < B * T; i++) ((int32_t *)seg->data)[i] = (int32_t)((i % T) / 47);
    float *seed_g = mt_malloc(sizeof(float) * (size_t)mt_numel(x[0]), "seed");
    mt_fill_normal(seed_g, mt_numel(x[0]), 1.0f, &r);
    const size_t nb[3] = {mt_nbytes(x[0]), mt_nbytes(x[1]), mt_nbytes(x[2])};
    float *res[2][4];
    cp_mirror m;
    mt_cp_group g1 = cp_mirror_group(&m, mt_backend_cpu(), 1, 0);
    for (int w = 0; w < 2; w++) {
        mt_ctx c;
        mt_test_ctx_init(&c);
        c.compute_dtype = mode;
        for (int i = 0; i < 3; i++) memset(x[i]->grad, 0, nb[i]);
        mt_tensor *o = w == 0
                           ? mt_attention(&c, x[0], x[1], x[2], seg, 0.3f)
                           : mt_cp_attention(&c, x[0], x[1], x[2], seg, group ? &g1 : NULL, 0.3f);
        mt_backward(&c, o, seed_g);
        res[w][0] = mt_malloc(nb[0], "out");
        memcpy(res[w][0], o->data, nb[0]);
        for (int i = 0; i < 3; i++) {
            res[w][i + 1] = mt_malloc(nb[i], "grad");
            memcpy(res[w][i + 1], x[i]->grad, nb[i]);
        }
        mt_ctx_free(&c);
    }
    const char *what[4] = {"out", "dq", "dk", "dv"};
    for (int i = 0; i < 4; i++) {
        EXPECT(!memcmp(res[0][i], res[1][i], nb[i == 0 ? 0 : i - 1]),
               "%s: %s differs from mt_attention's", label, what[i]);
        free(res[0][i]), free(res[1][i]);
    }
    free(seed_g);
}

static int test_one_rank(void) {
    check_one_rank("no group fp32", MT_F32, false, 11);
    check_one_rank("group of 1 fp32", MT_F32, true, 12);
    check_one_rank("no group bf16", MT_BF16, false, 13);
    return MT_TEST_OK;
}

typedef struct {
    int size, rank;
    int64_t Tl;
    bool hooks;
} bad_args;

static void run_bad(void *arg) {
    const bad_args *b = arg;
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *q = mt_test_tensor(MT_F32, 4, (int64_t[]){1, b->Tl, 2, 4}, false, "q_local");
    mt_tensor *k = mt_test_tensor(MT_F32, 4, (int64_t[]){1, b->Tl, 1, 4}, false, "k_local");
    memset(q->data, 0, mt_nbytes(q));
    memset(k->data, 0, mt_nbytes(k));
    cp_mirror m;
    mt_cp_group g = cp_mirror_group(&m, mt_backend_cpu(), b->size, b->rank);
    if (!b->hooks) g.reduce_scatter = NULL;
    mt_cp_attention(&c, q, k, k, NULL, &g, 1.0f);
}

static int test_refusals(void) {
    EXPECT(mt_expect_death(run_bad, &(bad_args){2, 0, 5, true},
                           "5 local tokens of q_local (1,5,2,4) must be even"),
           "an odd local length must be refused");
    EXPECT(mt_expect_death(run_bad, &(bad_args){2, 2, 4, true}, "rank 2 of a context group of 2"),
           "a rank outside the group must be refused");
    EXPECT(mt_expect_death(run_bad, &(bad_args){4, 1, 4, false},
                           "context group (size 4) lacks its allgather or reduce_scatter"),
           "a group without hooks must be refused");
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"grad_cp_attention", test_grad},
    {"op_cp_attention_one_rank", test_one_rank},
    {"op_cp_attention_refusals", test_refusals},
};
MT_TEST_MAIN(cases)
