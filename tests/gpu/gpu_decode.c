/* gpu_decode.c: case gpu_decode of tests/gpu/gpu_ops.c (gpu_decode on a GPU, op_cuda_emu_decode on
 * the emulator): generation's decode entries of the backend table (mt_backend.decode: the cached
 * attention step, the lightning prefill state and recurrent step, MSA's block selection and
 * attention over it) on the device against the CPU's on the same inputs, ||dev - cpu|| / ||cpu||
 * <= 1e-5 (GPU_TOL); MSA's selected blocks identical. Both sum in double and
 * round once: the attention's dot products are summed in another order (a block-wide tree
 * against the CPU's loop), the lightning kernels in the CPU's order, so the differences are
 * fp32 rounding. Shapes: ragged lengths (1, a middle one, t_max), GQA and MQA, D not a multiple
 * of 32 and D over one warp, a segment reset in the prefill and none, three steps in a row on
 * the state the prefill left. In gpu_determinism's mode the device runs twice and the two must
 * be bit-identical. */
#include "gpu_compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A device copy of n host floats (or ints). */
static void *dec_up(const void *host, size_t bytes) {
    void *d = dev_be->alloc(bytes);
    dev_be->to_device(d, host, bytes);
    return d;
}

static float *dec_rand(mt_rng *r, int64_t n, float amp) {
    float *x = malloc(sizeof(float) * (size_t)n);
    mt_fill_normal(x, n, amp, r);
    return x;
}

/* got against want (n floats): relative L2 within GPU_TOL, or bit-identical in self mode. */
static void dec_check(const char *label, const float *got, const float *want, int64_t n) {
    if (gpu_self_compare) {
        EXPECT(!memcmp(got, want, sizeof(float) * (size_t)n), "%s: two device runs differ", label);
        return;
    }
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        den += (double)want[i] * want[i];
    }
    const double rel = sqrt(num / (den > 0 ? den : 1));
    EXPECT(rel <= GPU_TOL, "%s: relative L2 difference %.3g", label, rel);
    printf("  %-40s n=%-7lld rel_l2=%.2e ok\n", label, (long long)n, rel);
}

/* The reference: the CPU's entry, or (self mode) the device's again. */
static const mt_backend *dec_ref_be(void) { return gpu_self_compare ? dev_be : mt_backend_cpu(); }

static void dec_attention(int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t t_max,
                          const int32_t *t_len, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    const int64_t nq = B * H * D, nkv = B * t_max * Hkv * D;
    float *q = dec_rand(&r, nq, 1.0f), *k = dec_rand(&r, nkv, 1.0f), *v = dec_rand(&r, nkv, 1.0f);
    float *want = malloc(sizeof(float) * (size_t)nq), *got = malloc(sizeof(float) * (size_t)nq);
    const float scale = 1.0f / sqrtf((float)D);
    const mt_backend *ref = dec_ref_be();
    float *rq = q, *rk = k, *rv = v, *ro = want;
    if (ref != mt_backend_cpu()) {
        rq = dec_up(q, sizeof(float) * nq), rk = dec_up(k, sizeof(float) * nkv);
        rv = dec_up(v, sizeof(float) * nkv), ro = ref->alloc(sizeof(float) * nq);
    }
    ref->decode.attention(ro, rq, rk, rv, t_len, B, t_max, H, Hkv, D, scale);
    if (ro != want) {
        ref->to_host(want, ro, sizeof(float) * nq);
        ref->free(rq), ref->free(rk), ref->free(rv), ref->free(ro);
    }
    float *dq = dec_up(q, sizeof(float) * nq), *dk = dec_up(k, sizeof(float) * nkv),
          *dv = dec_up(v, sizeof(float) * nkv), *dout = dev_be->alloc(sizeof(float) * nq);
    dev_be->decode.attention(dout, dq, dk, dv, t_len, B, t_max, H, Hkv, D, scale);
    dev_be->to_host(got, dout, sizeof(float) * nq);
    char label[96];
    snprintf(label, sizeof(label), "attention decode H %lld Hkv %lld D %lld", (long long)H,
             (long long)Hkv, (long long)D);
    dec_check(label, got, want, nq);
    dev_be->free(dq), dev_be->free(dk), dev_be->free(dv), dev_be->free(dout);
    free(q), free(k), free(v), free(want), free(got);
}

/* The prefill's state (seg or NULL), then three steps on it: state and outputs each time. */
static void dec_lightning(int B, int T, int H, int D, const int32_t *seg, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    const int64_t nqkv = (int64_t)B * T * H * 3 * D, ns = (int64_t)B * H * D * D,
                  nstep = (int64_t)B * H * 3 * D, no = (int64_t)B * H * D;
    float *qkv = dec_rand(&r, nqkv, 0.5f), *decay = malloc(sizeof(float) * (size_t)H);
    for (int h = 0; h < H; h++) decay[h] = 0.05f + 0.4f * (float)h;
    const mt_backend *ref = dec_ref_be();
    const bool host_ref = ref == mt_backend_cpu();
    float *ws = malloc(sizeof(float) * ns), *gs = malloc(sizeof(float) * ns);
    float *wo = malloc(sizeof(float) * no), *go = malloc(sizeof(float) * no);
    /* the reference's buffers (host for the CPU), then the device's */
    float *rqkv = host_ref ? qkv : dec_up(qkv, sizeof(float) * nqkv);
    float *rdecay = host_ref ? decay : dec_up(decay, sizeof(float) * H);
    int32_t *rseg = !seg || host_ref ? (int32_t *)seg : dec_up(seg, sizeof(int32_t) * B * T);
    float *rs = host_ref ? ws : ref->alloc(sizeof(float) * ns);
    float *dqkv = dec_up(qkv, sizeof(float) * nqkv), *ddecay = dec_up(decay, sizeof(float) * H);
    int32_t *dseg = seg ? dec_up(seg, sizeof(int32_t) * B * T) : NULL;
    float *ds = dev_be->alloc(sizeof(float) * ns);
    ref->decode.lightning_state(rs, rqkv, rdecay, rseg, B, T, H, D);
    dev_be->decode.lightning_state(ds, dqkv, ddecay, dseg, B, T, H, D);
    if (!host_ref) ref->to_host(ws, rs, sizeof(float) * ns);
    dev_be->to_host(gs, ds, sizeof(float) * ns);
    char label[96];
    snprintf(label, sizeof(label), "lightning state T %d D %d%s", T, D, seg ? " seg" : "");
    dec_check(label, gs, ws, ns);
    for (int step = 0; step < 3; step++) {
        float *x = dec_rand(&r, nstep, 0.5f);
        float *rx = host_ref ? x : dec_up(x, sizeof(float) * nstep);
        float *ro = host_ref ? wo : ref->alloc(sizeof(float) * no);
        float *dx = dec_up(x, sizeof(float) * nstep), *dout = dev_be->alloc(sizeof(float) * no);
        ref->decode.lightning_step(rs, rx, rdecay, ro, B, H, D);
        dev_be->decode.lightning_step(ds, dx, ddecay, dout, B, H, D);
        if (!host_ref) {
            ref->to_host(wo, ro, sizeof(float) * no);
            ref->to_host(ws, rs, sizeof(float) * ns);
            ref->free(rx), ref->free(ro);
        }
        dev_be->to_host(go, dout, sizeof(float) * no);
        dev_be->to_host(gs, ds, sizeof(float) * ns);
        snprintf(label, sizeof(label), "lightning step %d out D %d", step + 1, D);
        dec_check(label, go, wo, no);
        snprintf(label, sizeof(label), "lightning step %d state D %d", step + 1, D);
        dec_check(label, gs, ws, ns);
        dev_be->free(dx), dev_be->free(dout);
        free(x);
    }
    if (!host_ref) {
        ref->free(rqkv), ref->free(rdecay), ref->free(rs);
        if (rseg) ref->free(rseg);
    }
    dev_be->free(dqkv), dev_be->free(ddecay), dev_be->free(ds);
    if (dseg) dev_be->free(dseg);
    free(qkv), free(decay), free(ws), free(gs), free(wo), free(go);
}

/* MSA's decode entries: the block selection (identical ids: the scores are the CPU's bit for bit)
 * and the attention over a selection (the CPU's idx for both), ragged lengths; in row 0 a key of
 * block 0 and one of block 2 both twice head 0's query, so that the two blocks tie at the top
 * (the lower id first: idx row local, 0, 2); rows with fewer visible blocks than topk (-1
 * padding). */
static void dec_msa(int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t Di, int64_t t_max,
                    const int32_t *t_len, int block, int topk, uint64_t seed) {
    mt_rng r;
    mt_rng_seed(&r, seed);
    const int64_t niq = B * Hkv * Di, nik = B * t_max * Di, nq = B * H * D,
                  nkv = B * t_max * Hkv * D, nidx = B * Hkv * topk;
    float *iq = dec_rand(&r, niq, 1.0f), *ik = dec_rand(&r, nik, 1.0f);
    if (3 * block <= t_len[0]) /* row 0, head 0: blocks 0 and 2 tie at the top (2 iq . iq) */
        for (int64_t d = 0; d < Di; d++) ik[d] = ik[2 * block * Di + d] = 2.0f * iq[d];
    float *q = dec_rand(&r, nq, 1.0f), *k = dec_rand(&r, nkv, 1.0f), *v = dec_rand(&r, nkv, 1.0f);
    const mt_backend *ref = dec_ref_be();
    const bool host_ref = ref == mt_backend_cpu();
    int32_t *want = malloc(sizeof(int32_t) * (size_t)nidx), *got = malloc(sizeof(int32_t) * nidx);
    /* the selection on each backend */
    const mt_backend *bes[2] = {ref, dev_be};
    int32_t *outs[2] = {want, got};
    for (int i = 0; i < 2; i++) {
        const mt_backend *be = bes[i];
        const bool host = i == 0 && host_ref;
        const int64_t nw = be->decode.msa_select_work(B, Hkv, t_max, block);
        float *w = host ? malloc(sizeof(float) * (size_t)nw) : be->alloc(sizeof(float) * nw);
        float *diq = host ? iq : dec_up(iq, sizeof(float) * niq);
        float *dik = host ? ik : dec_up(ik, sizeof(float) * nik);
        int32_t *didx = host ? outs[i] : be->alloc(sizeof(int32_t) * nidx);
        be->decode.msa_select(didx, w, diq, dik, t_len, B, t_max, Hkv, Di, block, topk);
        if (!host) {
            be->to_host(outs[i], didx, sizeof(int32_t) * nidx);
            be->free(w), be->free(diq), be->free(dik), be->free(didx);
        } else {
            free(w);
        }
    }
    EXPECT(3 * block > t_len[0] || (want[1] == 0 && want[2] == 2),
           "msa select decode: the tie: row 0 selects %d %d, not 0 2", want[1], want[2]);
    EXPECT(!memcmp(got, want, sizeof(int32_t) * (size_t)nidx),
           "msa select decode: the device's blocks differ from the %s's",
           host_ref ? "CPU" : "device's first run");
    printf("  %-40s n=%-7lld identical (row 0: %d %d %d ...)\n", "msa select decode blocks",
           (long long)nidx, want[0], topk > 1 ? want[1] : -1, topk > 2 ? want[2] : -1);
    /* the attention over the reference's selection */
    float *wo = malloc(sizeof(float) * (size_t)nq), *go = malloc(sizeof(float) * (size_t)nq);
    float *outs_f[2] = {wo, go};
    const float scale = 1.0f / sqrtf((float)D);
    for (int i = 0; i < 2; i++) {
        const mt_backend *be = bes[i];
        const bool host = i == 0 && host_ref;
        float *dq = host ? q : dec_up(q, sizeof(float) * nq);
        float *dk = host ? k : dec_up(k, sizeof(float) * nkv);
        float *dv = host ? v : dec_up(v, sizeof(float) * nkv);
        int32_t *didx = host ? want : dec_up(want, sizeof(int32_t) * nidx);
        float *dout = host ? outs_f[i] : be->alloc(sizeof(float) * nq);
        be->decode.msa_attention(dout, dq, dk, dv, didx, t_len, B, t_max, H, Hkv, D, block, topk,
                                 scale);
        if (!host) {
            be->to_host(outs_f[i], dout, sizeof(float) * nq);
            be->free(dq), be->free(dk), be->free(dv), be->free(didx), be->free(dout);
        }
    }
    char label[96];
    snprintf(label, sizeof(label), "msa attention decode H %lld/%lld D %lld", (long long)H,
             (long long)Hkv, (long long)D);
    dec_check(label, go, wo, nq);
    free(iq), free(ik), free(q), free(k), free(v), free(want), free(got), free(wo), free(go);
}

int gpu_case_decode(void) {
    MT_CHECK(dev_be->decode.attention && dev_be->decode.lightning_state &&
                 dev_be->decode.lightning_step,
             "the %s backend has no decode entries", dev_be->name);
    const int32_t lens[3] = {1, 17, 29};
    dec_attention(3, 4, 2, 20, 29, lens, 41); /* GQA, D below a warp */
    const int32_t lens2[2] = {29, 5};
    dec_attention(2, 3, 1, 40, 29, lens2, 42); /* MQA, D over one warp */
    int32_t seg[2 * 23];
    for (int t = 0; t < 23; t++) {
        seg[t] = t < 9 ? 4 : 5; /* a reset at 9: the state is the last segment's */
        seg[23 + t] = 1;
    }
    dec_lightning(2, 23, 3, 16, seg, 43);
    dec_lightning(2, 23, 3, 16, NULL, 44);
    dec_lightning(1, 5, 2, 40, NULL, 45); /* D over one warp */
    if (dev_be->decode.msa_select && dev_be->decode.msa_attention) {
        const int32_t lens3[3] = {64, 1, 37}; /* 37: a partial local block */
        dec_msa(3, 4, 2, 20, 24, 64, lens3, 8, 4, 46);
        const int32_t lens4[2] = {9, 64};
        dec_msa(2, 3, 1, 40, 16, 64, lens4, 16, 3, 47); /* MQA, D over one warp */
    }
    return MT_TEST_OK;
}
