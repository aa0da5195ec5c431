/* dist_cp_lightning.c: mt_cp_lightning on real MPI ranks (issue 39 item 3) against one-rank
 * mt_lightning on the whole rows: every rank builds the same global rows (B, T), takes its two
 * chunks by context_parallel.h's layout, runs the op through hooks wrapping the communicator's
 * all-gather, and compares its outputs and qkv gradients with the matching rows of the one-rank
 * run (relative L2 <= 1e-6 per rank). Cases run the world as one context group of C = size
 * ranks; rows without segments, and packed rows whose segments cross chunk borders, start
 * exactly on a chunk border, span several whole chunks, and are one token long. The backend is
 * MT_TEST_BACKEND (default cpu; cuda: the emulator build, op_cuda_emu_dist_cp_lightning_*, which
 * adds the bf16 GEMM modes, the GEMM form and the fused kernels, against one rank in the same
 * mode on the same backend). */
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

/* One case: rows (B, T) of H = 3 heads of width D; bf16: the GEMM mode of both runs. */
typedef struct {
    int B, T, block, D;
    bool packed, bf16;
} cp_case;

/* mt_cp_lightning (group NULL: mt_lightning) on backend be over rows (B, T) given on the host:
 * out (B,T,H,D) and dqkv (B,T,H,3D) back on the host. */
static void run_op(const mt_backend *be, const cp_case *k, const mt_cp_group *g, int T,
                   const float *qkv, const int32_t *ids, const float *dout, const float *lam,
                   float *out, float *dqkv) {
    const int B = k->B, H = 3, D = k->D;
    mt_ctx c;
    mt_ctx_init(&c, be, (size_t)64 << 20, 1 << 10);
    c.compute_dtype = k->bf16 ? MT_BF16 : MT_F32;
    const size_t nq = sizeof(float) * B * T * H * 3 * D, ns = sizeof(int32_t) * B * T;
    void *xd = be->alloc(nq), *xg = be->alloc(nq), *lamd = be->alloc(sizeof(float) * H);
    void *sd = ids ? be->alloc(ns) : NULL;
    be->to_device(xd, qkv, nq);
    be->zero(xg, nq);
    be->to_device(lamd, lam, sizeof(float) * H);
    if (sd) be->to_device(sd, ids, ns);
    mt_tensor x, dl, sl;
    mt_tensor_wrap(&x, MT_F32, 4, (int64_t[]){B, T, H, 3 * D}, xd, xg, "qkv");
    mt_tensor_wrap(&dl, MT_F32, 1, (int64_t[]){H}, lamd, NULL, "decay");
    mt_tensor_wrap(&sl, MT_I32, 2, (int64_t[]){B, T}, sd, NULL, "seg");
    x.dev = dl.dev = sl.dev = be->dev;
    mt_tensor *o = mt_cp_lightning(&c, &x, &dl, sd ? &sl : NULL, k->block, g);
    be->to_host(out, o->data, mt_nbytes(o));
    mt_backward(&c, o, dout);
    be->to_host(dqkv, xg, nq);
    mt_ctx_free(&c);
    be->free(xd);
    be->free(xg);
    be->free(lamd);
    if (sd) be->free(sd);
}

/* this rank's rows of a (B, T, w) buffer, by context_parallel.h's layout */
static void take_local(float *dst, const float *src, int B, int T, int C, int r, size_t w) {
    const int Tl = T / C;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tl; i++)
            memcpy(dst + ((size_t)b * Tl + i) * w,
                   src + ((size_t)b * T + mt_cp_global_index(r, C, T, i)) * w, sizeof(float) * w);
}

/* fp32: against one rank on the CPU, <= 1e-6. bf16 (a device backend): against one rank on the
 * same backend in the same mode; the chunks move the block edges, so the bf16 rounding points
 * differ: tol is the bf16 rule of the op's other tests. */
static bool run_case(mt_comm *comm, const mt_backend *be, const cp_case *k, double tol) {
    const int C = comm->size, r = comm->rank, H = 3, B = k->B, T = k->T, D = k->D, Tl = T / C;
    const float lam[3] = {0.3f, 0.04f, 0.002f};
    const size_t r3 = (size_t)H * 3 * D, ro = (size_t)H * D;
    mt_rng rng;
    mt_rng_seed(&rng, 1234 + T + k->block + k->packed + D);
    float *qkv = malloc(sizeof(float) * B * T * r3), *dout = malloc(sizeof(float) * B * T * ro);
    mt_fill_normal(qkv, (int64_t)B * T * r3, 1.0f, &rng);
    for (int64_t i = 0; i < (int64_t)B * T * (int64_t)r3; i++)
        qkv[i] = qkv[i] / (1.0f + expf(-qkv[i]));
    mt_fill_normal(dout, (int64_t)B * T * ro, 1.0f, &rng);
    int32_t *ids = NULL, *ls = NULL;
    if (k->packed) {
        ids = malloc(sizeof(int32_t) * B * T);
        ls = malloc(sizeof(int32_t) * B * Tl);
        make_ids(ids, B, T, C, &rng);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < Tl; i++)
                ls[b * Tl + i] = ids[(size_t)b * T + mt_cp_global_index(r, C, T, i)];
    }
    float *out_ref = malloc(sizeof(float) * B * T * ro),
          *dq_ref = malloc(sizeof(float) * B * T * r3);
    run_op(k->bf16 ? be : mt_backend_cpu(), k, NULL, T, qkv, ids, dout, lam, out_ref, dq_ref);

    float *lq = malloc(sizeof(float) * B * Tl * r3), *ld = malloc(sizeof(float) * B * Tl * ro);
    float *lo_ref = malloc(sizeof(float) * B * Tl * ro),
          *ldq_ref = malloc(sizeof(float) * B * Tl * r3);
    take_local(lq, qkv, B, T, C, r, r3);
    take_local(ld, dout, B, T, C, r, ro);
    take_local(lo_ref, out_ref, B, T, C, r, ro);
    take_local(ldq_ref, dq_ref, B, T, C, r, r3);
    float *out = malloc(sizeof(float) * B * Tl * ro), *dqkv = malloc(sizeof(float) * B * Tl * r3);
    mt_cp_group g = {.size = C,
                     .rank = r,
                     .allgather = hook_allgather,
                     .reduce_scatter = hook_reduce_scatter,
                     .user = comm};
    run_op(be, k, &g, Tl, lq, ls, ld, lam, out, dqkv);

    char label[160];
    snprintf(label, sizeof(label), "C=%d rank %d B=%d T=%d D=%d block %d%s%s: out", C, r, B, T, D,
             k->block, k->packed ? " packed" : "", k->bf16 ? " bf16" : "");
    bool ok = mt_check_rel_l2(label, out, lo_ref, (int64_t)B * Tl * ro, tol);
    snprintf(label, sizeof(label), "C=%d rank %d B=%d T=%d D=%d block %d%s%s: dqkv", C, r, B, T, D,
             k->block, k->packed ? " packed" : "", k->bf16 ? " bf16" : "");
    ok &= mt_check_rel_l2(label, dqkv, ldq_ref, (int64_t)B * Tl * r3, tol);
    float *bufs[] = {qkv, dout, out_ref, dq_ref, lq, ld, lo_ref, ldq_ref, out, dqkv};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]);
    free(ids);
    free(ls);
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
    const cp_case fp32[] = {
        {2, T, 4, 8, false, false}, {2, T, 0, 8, false, false},     {2, T, 4, 8, true, false},
        {3, T, 5, 8, true, false},  {2, 4 * T, 16, 8, true, false}, /* several blocks a chunk */
    };
    for (size_t i = 0; i < sizeof(fp32) / sizeof(fp32[0]); i++)
        bad += !run_case(comm, be, &fp32[i], 1e-6);
    if (be->dev != MT_CPU) { /* the bf16 modes: GEMM form (D = 16) and fused kernels (D = 64) */
        const cp_case bf16[] = {{2, 4 * T, 16, 16, true, true}, {2, 4 * T, 16, 64, true, true}};
        for (size_t i = 0; i < sizeof(bf16) / sizeof(bf16[0]); i++)
            bad += !run_case(comm, be, &bf16[i], 2e-2);
    }
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
