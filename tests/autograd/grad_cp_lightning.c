/* grad_cp_lightning.c: lightning attention from an initial state (the kernels context
 * parallelism runs each chunk with) and mt_cp_lightning's gradient on one process.
 *   op_lightning_state_in: a row cut in two, the second part run from the first part's final
 *     state (kernels/cpu/lightning.h cpu_lightning_forward_block_from), equals the whole row
 *     run at once: outputs, final state, and gradients (the second part's from the row's
 *     backward; the first part's through the initial-state gradient fed back as its dsT).
 *   grad_cp_lightning: finite differences of rank 0 of a 2-rank group whose other rank is
 *     simulated by its recorded all-gather contribution (states and segment ids of chunks 1
 *     and 2): rank 0's chunk 3 starts from a state built from its own chunk 0 through the
 *     other rank's chunks, so the reverse scan is what carries chunk 3's gradient into chunk 0. */
#include "tests/support/harness.h"
#include "autograd/context_parallel.h"
#include "kernels/cpu/lightning.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill_qkv(float *x, int64_t n, mt_rng *rng) {
    mt_fill_normal(x, n, 1.0f, rng);
    for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

/* rows [t0, t0+len) of each of B rows of width w, (B, T, w) -> (B, len, w) */
static void rows_copy(float *dst, const float *src, int B, int T, int t0, int len, size_t w) {
    for (int b = 0; b < B; b++)
        memcpy(dst + (size_t)b * len * w, src + ((size_t)b * T + t0) * w, sizeof(float) * len * w);
}
static void rows_copy_i(int32_t *dst, const int32_t *src, int B, int T, int t0, int len) {
    for (int b = 0; b < B; b++)
        memcpy(dst + (size_t)b * len, src + (size_t)b * T + t0, sizeof(int32_t) * len);
}

/* One split of a B x T row at t1: segment ids `ids` (B*T) or NULL. */
static void state_in_case(const char *name, const int32_t *ids, int B, int T, int t1, int block) {
    const int H = 2, D = 8, T2 = T - t1;
    const float lam[2] = {0.15f, 0.01f};
    const size_t r3 = (size_t)H * 3 * D, r = (size_t)H * D, DD = (size_t)D * D;
    mt_rng rng;
    mt_rng_seed(&rng, 5 + T + t1);
    float *qkv = malloc(sizeof(float) * B * T * r3), *dout = malloc(sizeof(float) * B * T * r);
    fill_qkv(qkv, (int64_t)B * T * r3, &rng);
    mt_fill_normal(dout, (int64_t)B * T * r, 1.0f, &rng);
    for (int b = 0; b < B; b++) /* the loss reads the second part only */
        memset(dout + (size_t)b * T * r, 0, sizeof(float) * t1 * r);
    float *out = malloc(sizeof(float) * B * T * r), *dq = calloc((size_t)B * T * r3, 4);
    float *st = malloc(sizeof(float) * B * H * DD * 2);
    cpu_lightning_forward_block(out, st, qkv, lam, ids, B, T, H, D, block);
    float *sT = malloc(sizeof(float) * B * H * DD);
    memcpy(sT, st, sizeof(float) * B * H * DD);
    cpu_lightning_backward_block(dq, st, st + B * H * DD, dout, qkv, lam, ids, B, T, H, D, block);

    /* the parts */
    float *q1 = malloc(sizeof(float) * B * t1 * r3), *q2 = malloc(sizeof(float) * B * T2 * r3);
    float *g2 = malloc(sizeof(float) * B * T2 * r), *o2 = malloc(sizeof(float) * B * T2 * r);
    int32_t *i1 = NULL, *i2 = NULL;
    rows_copy(q1, qkv, B, T, 0, t1, r3);
    rows_copy(q2, qkv, B, T, t1, T2, r3);
    rows_copy(g2, dout, B, T, t1, T2, r);
    if (ids) {
        i1 = malloc(sizeof(int32_t) * B * t1);
        i2 = malloc(sizeof(int32_t) * B * T2);
        rows_copy_i(i1, ids, B, T, 0, t1);
        rows_copy_i(i2, ids, B, T, t1, T2);
    }
    float *s0 = malloc(sizeof(float) * B * H * DD);
    cpu_lightning_state(s0, q1, lam, i1, B, t1, H, D);
    for (int b = 0; b < B; b++) /* a segment starting at t1 blocks the state */
        if (ids && ids[b * T + t1] != ids[b * T + t1 - 1])
            memset(s0 + (size_t)b * H * DD, 0, sizeof(float) * H * DD);
    float *st2 = malloc(sizeof(float) * B * H * DD * 2);
    cpu_lightning_forward_block_from(o2, st2, s0, q2, lam, i2, B, T2, H, D, block);
    float *o_ref = malloc(sizeof(float) * B * T2 * r);
    rows_copy(o_ref, out, B, T, t1, T2, r);
    char label[96];
    snprintf(label, sizeof(label), "%s: out", name);
    mt_check_rel_l2(label, o2, o_ref, (int64_t)B * T2 * r, 1e-6);
    snprintf(label, sizeof(label), "%s: final state", name);
    mt_check_rel_l2(label, st2, sT, (int64_t)B * H * DD, 1e-6);

    /* backward of the second part from s0; its initial-state gradient into the first part */
    float *d2 = calloc((size_t)B * T2 * r3, 4), *d1 = calloc((size_t)B * t1 * r3, 4);
    cpu_lightning_backward_block_from(d2, st2, st2 + B * H * DD, s0, NULL, g2, q2, lam, i2, B, T2,
                                      H, D, block);
    float *ds0 = malloc(sizeof(float) * B * H * DD);
    memcpy(ds0, st2 + B * H * DD, sizeof(float) * B * H * DD);
    for (int b = 0; b < B; b++)
        if (ids && ids[b * T + t1] != ids[b * T + t1 - 1])
            memset(ds0 + (size_t)b * H * DD, 0, sizeof(float) * H * DD);
    /* the readout part of ds0 alone (no dsT) is cpu_lightning_state_grad */
    float *G = malloc(sizeof(float) * B * H * DD);
    cpu_lightning_state_grad(G, g2, q2, lam, i2, B, T2, H, D);
    for (int b = 0; b < B; b++)
        if (ids && ids[b * T + t1] != ids[b * T + t1 - 1])
            memset(G + (size_t)b * H * DD, 0, sizeof(float) * H * DD);
    snprintf(label, sizeof(label), "%s: state grad", name);
    mt_check_rel_l2(label, G, ds0, (int64_t)B * H * DD, 1e-6);
    float *g1 = calloc((size_t)B * t1 * r, 4);
    cpu_lightning_backward_block_from(d1, st2, st2 + B * H * DD, NULL, ds0, g1, q1, lam, i1, B, t1,
                                      H, D, block);
    float *dref = malloc(sizeof(float) * B * T * r3);
    rows_copy(dref, dq, B, T, t1, T2, r3);
    snprintf(label, sizeof(label), "%s: dqkv second part", name);
    mt_check_rel_l2(label, d2, dref, (int64_t)B * T2 * r3, 1e-6);
    rows_copy(dref, dq, B, T, 0, t1, r3);
    snprintf(label, sizeof(label), "%s: dqkv first part (through ds0)", name);
    mt_check_rel_l2(label, d1, dref, (int64_t)B * t1 * r3, 1e-6);

    float *bufs[] = {qkv, dout, out,   dq, st, sT,  q1, q2, g2,  o2,
                     s0,  st2,  o_ref, d2, d1, ds0, G,  g1, dref};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]);
    free(i1);
    free(i2);
}

static int test_op_lightning_state_in(void) {
    static int32_t ids[2 * 40];
    /* row 0: a segment across the split (t1 = 17) and a reset inside the second part; row 1: a
     * segment starting exactly at the split and one inside the first part */
    for (int t = 0; t < 40; t++) {
        ids[t] = t < 9 ? 0 : t < 30 ? 1 : 2;
        ids[40 + t] = t < 5 ? 4 : t < 17 ? 3 : 4;
    }
    state_in_case("no segments, block 5", NULL, 2, 40, 17, 5);
    state_in_case("no segments, block 64", NULL, 2, 40, 17, 64);
    state_in_case("segments, block 5", ids, 2, 40, 17, 5);
    state_in_case("segments, block 4 (split on a block edge)", ids, 2, 40, 16, 4);
    return MT_TEST_OK;
}

/* ---- finite differences through mt_cp_lightning on rank 0 of a simulated pair ---- */

typedef struct {
    float *other; /* rank 1's forward contribution, recorded */
    int64_t other_count;
    bool recording; /* rank 1's own run: keep its send */
    int rank;
} fake_pair;

static void fake_allgather(void *user, const void *send, void *recv, int64_t count, size_t elem) {
    fake_pair *f = user;
    char *rv = recv;
    const size_t bytes = (size_t)count * elem;
    memcpy(rv + (size_t)f->rank * bytes, send, bytes);
    char *slot = rv + (size_t)(1 - f->rank) * bytes;
    if (f->recording && !f->other) {
        f->other = malloc(bytes);
        memcpy(f->other, send, bytes);
        f->other_count = count;
    }
    if (!f->recording && f->other && count == f->other_count)
        memcpy(slot, f->other, bytes);
    else
        memset(slot, 0, bytes); /* rank 1's state gradients: its outputs are outside the loss */
}

typedef struct {
    mt_tensor *decay, *seg;
    int block;
    mt_cp_group *g;
} cp_args;

static mt_tensor *build_cp(mt_ctx *c, mt_tensor **in, void *user) {
    cp_args *a = user;
    return mt_cp_lightning(c, in[0], a->decay, a->seg, a->block, a->g);
}

static void gradcheck_pair(const char *label, const int32_t *ids0, const int32_t *ids1, int block) {
    const int B = 1, n = 5, H = 2, D = 4, Tl = 2 * n;
    const float lam[2] = {0.2f, 0.02f};
    mt_rng rng;
    mt_rng_seed(&rng, 99 + block);
    fake_pair f = {0};
    mt_cp_group g = {.size = 2, .rank = 1, .allgather = fake_allgather, .user = &f};
    mt_tensor *decay = mt_test_tensor(MT_F32, 1, (int64_t[]){H}, false, "decay");
    memcpy(decay->data, lam, sizeof(lam));
    mt_tensor *seg0 = NULL, *seg1 = NULL;
    if (ids0) {
        seg0 = mt_test_tensor(MT_I32, 2, (int64_t[]){B, Tl}, false, "seg0");
        seg1 = mt_test_tensor(MT_I32, 2, (int64_t[]){B, Tl}, false, "seg1");
        memcpy(seg0->data, ids0, sizeof(int32_t) * Tl);
        memcpy(seg1->data, ids1, sizeof(int32_t) * Tl);
    }
    /* rank 1 (chunks 1 and 2): its forward records what it sends */
    mt_tensor *x1 = mt_test_tensor(MT_F32, 4, (int64_t[]){B, Tl, H, 3 * D}, false, "qkv1");
    fill_qkv(x1->data, mt_numel(x1), &rng);
    f.recording = true;
    f.rank = 1;
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_cp_lightning(&c, x1, decay, seg1, block, &g);
    mt_ctx_free(&c);
    /* rank 0 (chunks 0 and 3) */
    f.recording = false;
    f.rank = 0;
    g.rank = 0;
    mt_tensor *x0 = mt_test_tensor(MT_F32, 4, (int64_t[]){B, Tl, H, 3 * D}, true, "qkv0");
    fill_qkv(x0->data, mt_numel(x0), &rng);
    cp_args a = {decay, seg0, block, &g};
    mt_gradcheck_opts opts = {.h = 1e-2, .max_elems = 1 << 20};
    mt_gradcheck(label, build_cp, &x0, 1, &a, &opts);
    free(f.other);
}

static int test_grad_cp_lightning(void) {
    gradcheck_pair("cp lightning pair, block 2", NULL, NULL, 2);
    gradcheck_pair("cp lightning pair, block 0", NULL, NULL, 0);
    /* global row of 20: chunk 0 = rank 0 [0,5), chunk 1 = rank 1 [5,10), chunk 2 = rank 1
     * [10,15), chunk 3 = rank 0 [15,20). One segment over [0,13) (crossing two borders), a
     * reset inside chunk 2 at 13 whose tail reaches chunk 3; then a second case with a segment
     * starting exactly at chunk 3's first token (the state into chunk 3 is blocked). */
    static const int32_t a0[10] = {0, 0, 0, 0, 0, /* chunk 3 */ 1, 1, 2, 2, 2};
    static const int32_t a1[10] = {0, 0, 0, 0, 0, /* chunk 2 */ 0, 0, 0, 1, 1};
    gradcheck_pair("cp lightning pair, segments", a0, a1, 2);
    static const int32_t b0[10] = {0, 0, 0, 0, 0, /* chunk 3 */ 1, 1, 1, 1, 1};
    static const int32_t b1[10] = {0, 0, 0, 0, 0, /* chunk 2 */ 0, 0, 0, 0, 0};
    gradcheck_pair("cp lightning pair, segment at a chunk border", b0, b1, 2);
    static const int32_t c0[10] = {0, 0, 0, 0, 0, /* chunk 3 */ 0, 0, 0, 0, 0};
    gradcheck_pair("cp lightning pair, one segment", c0, c0, 2);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_lightning_state_in", test_op_lightning_state_in},
    {"grad_cp_lightning", test_grad_cp_lightning},
};
MT_TEST_MAIN(cases)
