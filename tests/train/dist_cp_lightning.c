/* dist_cp_lightning.c: mt_cp_lightning on real MPI ranks (issue 39 item 3) against one-rank
 * mt_lightning on the whole rows: every rank builds the same global rows (B, T), takes its two
 * chunks by context_parallel.h's layout, runs the op through hooks wrapping the communicator's
 * all-gather, and compares its outputs and qkv gradients with the matching rows of the one-rank
 * run (relative L2 <= 1e-6 per rank). Cases run the world as one context group of C = size
 * ranks; rows without segments, and packed rows whose segments cross chunk borders, start
 * exactly on a chunk border, span several whole chunks, and are one token long. The backend is
 * MT_TEST_BACKEND (default cpu; cuda: the emulator build, op_cuda_emu_dist_cp_lightning_*). */
#include "tests/support/harness.h"
#include "autograd/context_parallel.h"
#include "train/comm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void hook_allgather(void *user, const void *send, void *recv, int64_t count, size_t elem) {
    mt_comm *c = user;
    c->allgather(c, send, recv, count, elem);
}
static void hook_reduce_scatter(void *user, const float *send, float *recv, int64_t count) {
    mt_comm *c = user;
    c->reduce_scatter(c, send, recv, count);
}

/* packed segment ids: row 0 fixed (chunks of n = T/(2C) tokens), the others random */
static void make_ids(int32_t *ids, int B, int T, int C, mt_rng *rng) {
    const int n = T / (2 * C);
    for (int b = 0; b < B; b++) {
        int32_t *s = ids + (size_t)b * T;
        if (b == 0) { /* fixed: a start at a chunk border, one across two borders, 1-token */
            int id = 0;
            for (int t = 0; t < T; t++) {
                if (t == n + 1 || t == 2 * n || t == 2 * n + 1 || t == 5 * n - 2) id++;
                s[t] = id % 3; /* ids reused: only changes count */
            }
        } else { /* random lengths 1 .. 2n+2 */
            int id = 7;
            for (int t = 0; t < T;) {
                int len = 1 + (int)(mt_rng_u64(rng) % (uint64_t)(2 * n + 2));
                for (int j = 0; j < len && t < T; j++) s[t++] = id;
                id++;
            }
        }
    }
}

static bool run_case(mt_comm *comm, const mt_backend *be, int B, int T, int block, bool packed) {
    const int C = comm->size, r = comm->rank, H = 3, D = 8, Tl = T / C;
    const float lam[3] = {0.3f, 0.04f, 0.002f};
    const size_t r3 = (size_t)H * 3 * D, ro = (size_t)H * D;
    mt_rng rng;
    mt_rng_seed(&rng, 1234 + T + block + packed);
    float *qkv = malloc(sizeof(float) * B * T * r3), *dout = malloc(sizeof(float) * B * T * ro);
    mt_fill_normal(qkv, (int64_t)B * T * r3, 1.0f, &rng);
    for (int64_t i = 0; i < (int64_t)B * T * (int64_t)r3; i++)
        qkv[i] = qkv[i] / (1.0f + expf(-qkv[i]));
    mt_fill_normal(dout, (int64_t)B * T * ro, 1.0f, &rng);
    int32_t *ids = NULL;
    if (packed) {
        ids = malloc(sizeof(int32_t) * B * T);
        make_ids(ids, B, T, C, &rng);
    }

    /* the reference: one rank, whole rows, CPU */
    mt_ctx c;
    mt_test_ctx_init(&c);
    mt_tensor *gq = mt_test_tensor(MT_F32, 4, (int64_t[]){B, T, H, 3 * D}, true, "qkv");
    memcpy(gq->data, qkv, mt_nbytes(gq));
    mt_tensor *decay = mt_test_tensor(MT_F32, 1, (int64_t[]){H}, false, "decay");
    memcpy(decay->data, lam, sizeof(lam));
    mt_tensor *gs = NULL;
    if (ids) {
        gs = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, "seg");
        memcpy(gs->data, ids, mt_nbytes(gs));
    }
    mt_tensor *o = mt_lightning(&c, gq, decay, gs, block);
    float *out_ref = malloc(mt_nbytes(o));
    memcpy(out_ref, o->data, mt_nbytes(o));
    mt_backward(&c, o, dout);
    const float *dq_ref = gq->grad;
    mt_ctx_free(&c);

    /* this rank's chunks */
    float *lq = malloc(sizeof(float) * B * Tl * r3), *ld = malloc(sizeof(float) * B * Tl * ro);
    float *lo_ref = malloc(sizeof(float) * B * Tl * ro),
          *ldq_ref = malloc(sizeof(float) * B * Tl * r3);
    int32_t *ls = ids ? malloc(sizeof(int32_t) * B * Tl) : NULL;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tl; i++) {
            const size_t gt = (size_t)b * T + mt_cp_global_index(r, C, T, i),
                         lt = (size_t)b * Tl + i;
            memcpy(lq + lt * r3, qkv + gt * r3, sizeof(float) * r3);
            memcpy(ldq_ref + lt * r3, dq_ref + gt * r3, sizeof(float) * r3);
            memcpy(ld + lt * ro, dout + gt * ro, sizeof(float) * ro);
            memcpy(lo_ref + lt * ro, out_ref + gt * ro, sizeof(float) * ro);
            if (ls) ls[lt] = ids[gt];
        }

    /* the op on this rank's backend: inputs and the gradient on backend memory */
    mt_ctx_init(&c, be, (size_t)64 << 20, 1 << 10);
    const size_t nq = sizeof(float) * B * Tl * r3, ns = sizeof(int32_t) * B * Tl;
    void *xd = be->alloc(nq), *xg = be->alloc(nq), *lamd = be->alloc(sizeof(lam));
    void *sd = ls ? be->alloc(ns) : NULL;
    be->to_device(xd, lq, nq);
    be->zero(xg, nq);
    be->to_device(lamd, lam, sizeof(lam));
    if (sd) be->to_device(sd, ls, ns);
    mt_tensor x, dl, sl;
    mt_tensor_wrap(&x, MT_F32, 4, (int64_t[]){B, Tl, H, 3 * D}, xd, xg, "qkv local");
    mt_tensor_wrap(&dl, MT_F32, 1, (int64_t[]){H}, lamd, NULL, "decay");
    mt_tensor_wrap(&sl, MT_I32, 2, (int64_t[]){B, Tl}, sd, NULL, "seg local");
    x.dev = dl.dev = sl.dev = be->dev;
    mt_cp_group g = {C, r, hook_allgather, hook_reduce_scatter, comm};
    mt_tensor *lo = mt_cp_lightning(&c, &x, &dl, sd ? &sl : NULL, block, &g);
    float *out = malloc(mt_nbytes(lo)), *dqkv = malloc(nq);
    be->to_host(out, lo->data, mt_nbytes(lo));
    mt_backward(&c, lo, ld);
    be->to_host(dqkv, xg, nq);
    mt_ctx_free(&c);
    be->free(xd);
    be->free(xg);
    be->free(lamd);
    if (sd) be->free(sd);

    char label[128];
    snprintf(label, sizeof(label), "C=%d rank %d B=%d T=%d block %d%s: out", C, r, B, T, block,
             packed ? " packed" : "");
    bool ok = mt_check_rel_l2(label, out, lo_ref, (int64_t)B * Tl * ro, 1e-6);
    snprintf(label, sizeof(label), "C=%d rank %d B=%d T=%d block %d%s: dqkv", C, r, B, T, block,
             packed ? " packed" : "");
    ok &= mt_check_rel_l2(label, dqkv, ldq_ref, (int64_t)B * Tl * r3, 1e-6);
    free(qkv);
    free(dout);
    free(ids);
    free(out_ref);
    free(lq);
    free(ld);
    free(lo_ref);
    free(ldq_ref);
    free(ls);
    free(out);
    free(dqkv);
    return ok;
}

static int test_cp_lightning(void) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *comm = mt_comm_mpi_init(&argc, &argv);
    const char *name = getenv("MT_TEST_BACKEND");
    char err[256] = "";
    const mt_backend *be = mt_backend_named(name && *name ? name : "cpu", err, sizeof(err));
    if (!be) {
        printf("SKIP backend %s: %s\n", name, err);
        mt_comm_finalize(comm);
        return MT_TEST_SKIP;
    }
    const int C = comm->size;
    int64_t bad = 0;
    /* chunks of 6 tokens at C = 2 and 4 (T = 24, 48), blocks crossing chunk edges or not */
    const int T = 12 * C;
    bad += !run_case(comm, be, 2, T, 4, false);
    bad += !run_case(comm, be, 2, T, 0, false);
    bad += !run_case(comm, be, 2, T, 4, true);
    bad += !run_case(comm, be, 3, T, 5, true);
    bad += !run_case(comm, be, 2, 4 * T, 16, true); /* several blocks per chunk */
    comm->allreduce_i64(comm, &bad, 1);
    EXPECT(bad == 0, "%lld comparisons failed over the ranks", (long long)bad);
    mt_comm_finalize(comm);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"dist_cp_lightning_np2", test_cp_lightning},
    {"dist_cp_lightning_np4", test_cp_lightning},
    {"op_cuda_emu_dist_cp_lightning_np2", test_cp_lightning},
    {"op_cuda_emu_dist_cp_lightning_np4", test_cp_lightning},
};
MT_TEST_MAIN(cases)
