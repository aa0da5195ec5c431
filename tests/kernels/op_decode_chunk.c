/* op_decode_chunk.c: the backend's chunk ops of the cached forward's extension (autograd/tensor.h,
 * mt_backend.decode.attention_chunk and lightning_chunk; kernels/cpu/attention.h and
 * lightning.h), on random inputs, against T calls of the one-token decode steps they replace.
 * - op_attention_chunk: queries at positions t0 .. t0+T-1 of one cache row (t0 = 37, T = 150:
 *   the query tiles start off the key tiles and the last is short), each against T decode
 *   steps (cpu_attention_decode with t_len = t0 + t + 1) and against the rows t0 .. t0+T-1 of
 *   the causal forward over positions 0 .. t0+T-1 (cpu_attention_fwd): the bounds the decode
 *   step is held to against that forward (grad_attention.c, op_attention_decode: 1e-6 + 1e-5
 *   relative), plus H = 4 heads over Hkv = 2 (GQA).
 * - op_lightning_chunk: T = 70 recurrent steps of one row from a nonzero state, outputs and
 *   final state bit-equal to 70 calls of cpu_lightning_decode_step (the same arithmetic in the
 *   same order).
 * - op_msa_chunk: t0 = 3, T = 60 of an MSA layer (block 4, top-3, so the first tokens are
 *   dense and the rest sparse), bit-equal to the per-token path of models/block_msa.c (dense
 *   cpu_attention_decode while (t_len - 1) / block + 1 <= topk, else cpu_msa_select_decode and
 *   cpu_msa_attention_decode). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/lightning.h"
#include "kernels/cpu/msa.h"

static float dc_uniform(uint64_t *s) { /* xorshift64*, [-1, 1) */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return 2.0f * (float)((*s * 2685821657736338717ull) >> 40) / (float)(1 << 24) - 1.0f;
}

static float *dc_random(int64_t n, uint64_t *s) {
    float *x = mt_malloc(sizeof(float) * (size_t)n, "random");
    for (int64_t i = 0; i < n; i++) x[i] = dc_uniform(s);
    return x;
}

static int test_op_attention_chunk(void) {
    const int64_t t0 = 37, T = 150, t_max = t0 + T + 5, H = 4, Hkv = 2, D = 32;
    const float scale = 1.0f / sqrtf((float)D);
    uint64_t s = 0x243f6a8885a308d3ull;
    /* the cache row (positions past t0 + T are junk no query may read) and the chunk's queries */
    float *kc = dc_random(t_max * Hkv * D, &s), *vc = dc_random(t_max * Hkv * D, &s);
    float *qall = dc_random((t0 + T) * H * D, &s);
    const float *q = qall + t0 * H * D;
    float *got = mt_malloc(sizeof(float) * (size_t)(T * H * D), "chunk out");
    float *step = mt_malloc(sizeof(float) * (size_t)(T * H * D), "step out");
    float *full = mt_malloc(sizeof(float) * (size_t)((t0 + T) * H * D), "forward out");
    cpu_attention_chunk(got, q, kc, vc, t0, T, t_max, H, Hkv, D, scale);
    for (int64_t t = 0; t < T; t++) {
        const int32_t end = (int32_t)(t0 + t + 1);
        cpu_attention_decode(step + t * H * D, q + t * H * D, kc, vc, &end, 1, t_max, H, Hkv, D,
                             scale);
    }
    mt_check_close("chunk vs decode steps", got, step, T * H * D, 1e-6, 1e-5);
    cpu_attention_fwd(full, NULL, qall, kc, vc, NULL, 1, t0 + T, H, Hkv, D, scale);
    mt_check_close("chunk vs causal forward", got, full + t0 * H * D, T * H * D, 1e-6, 1e-5);
    free(kc);
    free(vc);
    free(qall);
    free(got);
    free(step);
    free(full);
    return MT_TEST_OK;
}

static int test_op_lightning_chunk(void) {
    const int T = 70, H = 3, D = 16;
    uint64_t s = 0x13198a2e03707344ull;
    float *qkv = dc_random((int64_t)T * H * 3 * D, &s);
    float *s_chunk = dc_random((int64_t)H * D * D, &s);
    float *s_step = mt_malloc(sizeof(float) * (size_t)(H * D * D), "step state");
    memcpy(s_step, s_chunk, sizeof(float) * (size_t)(H * D * D));
    const float decay[3] = {0.05f, 0.5f, 2.0f};
    float *got = mt_malloc(sizeof(float) * (size_t)(T * H * D), "chunk out");
    float *want = mt_malloc(sizeof(float) * (size_t)(T * H * D), "step out");
    cpu_lightning_chunk(s_chunk, qkv, decay, got, T, H, D);
    for (int t = 0; t < T; t++)
        cpu_lightning_decode_step(s_step, qkv + (size_t)t * H * 3 * D, decay,
                                  want + (size_t)t * H * D, 1, H, D);
    EXPECT(memcmp(got, want, sizeof(float) * (size_t)(T * H * D)) == 0,
           "lightning chunk outputs differ from %d decode steps", T);
    EXPECT(memcmp(s_chunk, s_step, sizeof(float) * (size_t)(H * D * D)) == 0,
           "lightning chunk state differs from %d decode steps", T);
    free(qkv);
    free(s_chunk);
    free(s_step);
    free(got);
    free(want);
    return MT_TEST_OK;
}

static int test_op_msa_chunk(void) {
    const int64_t t0 = 3, T = 60, t_max = t0 + T + 2, H = 4, Hkv = 2, D = 16, Di = 8;
    const int block = 4, topk = 3;
    const float scale = 1.0f / sqrtf((float)D);
    uint64_t s = 0xa4093822299f31d0ull;
    float *kc = dc_random(t_max * Hkv * D, &s), *vc = dc_random(t_max * Hkv * D, &s);
    float *ikc = dc_random(t_max * Di, &s), *q = dc_random(T * H * D, &s);
    float *iq = dc_random(T * Hkv * Di, &s);
    float *got = mt_malloc(sizeof(float) * (size_t)(T * H * D), "chunk out");
    float *want = mt_malloc(sizeof(float) * (size_t)(T * H * D), "step out");
    float *work = mt_malloc(
        sizeof(float) * (size_t)cpu_msa_select_decode_work(1, Hkv, t_max, block), "select work");
    int32_t idx[2 * 3];
    cpu_msa_chunk(got, q, iq, kc, vc, ikc, t0, T, t_max, H, Hkv, D, Di, block, topk, scale);
    int n_sparse = 0;
    for (int64_t t = 0; t < T; t++) {
        const int32_t end = (int32_t)(t0 + t + 1);
        if ((end - 1) / block + 1 <= topk) {
            cpu_attention_decode(want + t * H * D, q + t * H * D, kc, vc, &end, 1, t_max, H, Hkv, D,
                                 scale);
            continue;
        }
        n_sparse++;
        cpu_msa_select_decode(idx, work, iq + t * Hkv * Di, ikc, &end, 1, t_max, Hkv, Di, block,
                              topk);
        cpu_msa_attention_decode(want + t * H * D, q + t * H * D, kc, vc, idx, &end, 1, t_max, H,
                                 Hkv, D, block, topk, scale);
    }
    EXPECT(n_sparse > 0 && n_sparse < T, "%d of %lld tokens sparse: want both kinds", n_sparse,
           (long long)T);
    EXPECT(memcmp(got, want, sizeof(float) * (size_t)(T * H * D)) == 0,
           "msa chunk outputs differ from %lld decode steps", (long long)T);
    free(kc);
    free(vc);
    free(ikc);
    free(q);
    free(iq);
    free(got);
    free(want);
    free(work);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_msa_chunk", test_op_msa_chunk},
    {"op_attention_chunk", test_op_attention_chunk},
    {"op_lightning_chunk", test_op_lightning_chunk},
};
MT_TEST_MAIN(cases)
