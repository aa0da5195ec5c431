/* gpu_lce.c: the fused lm_head + cross-entropy of the CUDA backend against the CPU reference
 * (tests/gpu/gpu_ops.c's rules: fp32 1e-5 relative per tensor, integer buffers and untouched
 * gradient elements bit-exact, bf16 judged against the fp32 CPU result), case
 * linear_cross_entropy of tests/gpu/gpu_ops.c. */
#include <string.h>

#include "gpu_compare.h"

/* fused lm_head + cross-entropy: several chunks, the automatic chunk (one here, whose logits the
 * forward keeps for the backward), ignored rows, a frozen x */
typedef struct {
    float denom;
    int64_t chunk;
} lce_args;

static mt_tensor *b_linear_cross_entropy(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    const lce_args *a = u;
    return mt_linear_cross_entropy_chunked(c, in[0], in[1], in[2], a->denom, a->chunk);
}

static mt_tensor *b_lce_parts(mt_ctx *c, mt_tensor **in, void *u, mt_tensor **x) {
    const lce_args *a = u;
    const int64_t vocab = in[1]->shape[0] + in[2]->shape[0];
    mt_tensor *chain = mt_linear_cross_entropy_part(c, in[0], in[1], in[3], NULL, 0, vocab, false,
                                                    a->denom, a->chunk);
    return mt_linear_cross_entropy_part(c, in[0], in[2], in[3], chain, in[1]->shape[0], vocab, true,
                                        a->denom, a->chunk);
}

int gpu_case_linear_cross_entropy(void) {
    mt_rng r;
    mt_rng_seed(&r, 23);
    const int64_t N = 37, C = 48, V = 301;
    int32_t lab[37], none[37];
    for (int i = 0; i < N; i++) {
        lab[i] = i % 4 == 1 ? MT_IGNORE_INDEX : (int32_t)(mt_rng_u64(&r) % V);
        none[i] = MT_IGNORE_INDEX;
    }
    gpu_input in[3] = {gpu_f32(&r, 3, (const int64_t[]){1, N, C}, 1.0f, true, "x"),
                       gpu_f32(&r, 2, (const int64_t[]){V, C}, 0.3f, true, "w"),
                       gpu_i32(1, &N, lab, "labels")};
    lce_args chunked = {0.0f, 5}, automatic = {40.0f, 0};
    gpu_compare("linear_cross_entropy chunks of 5", b_linear_cross_entropy, in, 3, &chunked, exact);
    gpu_compare("linear_cross_entropy one chunk", b_linear_cross_entropy, in, 3, &automatic, exact);
    gpu_compare_bf16("linear_cross_entropy bf16", b_linear_cross_entropy, in, 3, &chunked);
    gpu_compare_bf16("linear_cross_entropy bf16 one chunk (logits kept)", b_linear_cross_entropy,
                     in, 3, &automatic);
    in[0].grad = false; /* the lm_head gradient only */
    gpu_compare("linear_cross_entropy dw only", b_linear_cross_entropy, in, 3, &chunked, exact);
    memcpy(in[2].host, none, sizeof(none));
    in[0].grad = true;
    gpu_compare("linear_cross_entropy all ignored", b_linear_cross_entropy, in, 3, &chunked, exact);
    gpu_inputs_free(in, 3);
    /* the lm_head split by vocabulary rows: a chain of two parts (120 and 181 rows) */
    gpu_input parts[4] = {gpu_f32(&r, 3, (const int64_t[]){1, N, C}, 1.0f, true, "x"),
                          gpu_f32(&r, 2, (const int64_t[]){120, C}, 0.3f, true, "w rows 0..119"),
                          gpu_f32(&r, 2, (const int64_t[]){181, C}, 0.3f, true, "w rows 120.."),
                          gpu_i32(1, &N, lab, "labels")};
    gpu_compare("linear_cross_entropy 2 parts", b_lce_parts, parts, 4, &chunked, exact);
    gpu_compare_bf16("linear_cross_entropy 2 parts bf16", b_lce_parts, parts, 4, &chunked);
    gpu_compare("linear_cross_entropy 2 parts, one chunk each (logits kept)", b_lce_parts, parts, 4,
                &automatic, exact);
    gpu_inputs_free(parts, 4);
    return MT_TEST_OK;
}
