/* cuda_ops.cuh: the CUDA backend's node adapters, one fwd/bwd pair per line of ops.def, defined
 * in kernels/cuda/<op>.cu and collected into the backend table by backend_cuda.cu. Each adapter
 * reads a tape node exactly like its CPU twin in kernels/cpu/<op>.c. */
#pragma once
#include "cuda_common.cuh"

#define MT_OP(E, name)                                                                             \
    void cuda_##name##_fwd_node(const mt_node *n);                                                 \
    void cuda_##name##_bwd_node(const mt_node *n);
#include "../../autograd/ops.def"
#undef MT_OP

/* generation's decode steps (mt_backend.decode; attention.cu, lightning.cu, msa_select.cu,
 * msa_attention.cu); the host-memory lengths t_len of a step copied to the device once per
 * call (cuda_decode_t_len, attention.cu: a kept buffer, no allocation per step) */
const int32_t *cuda_decode_t_len(const int32_t *t_len, int64_t B);
void cuda_attention_decode(float *out, const float *q, const float *k_cache, const float *v_cache,
                           const int32_t *t_len, int64_t B, int64_t t_max, int64_t H, int64_t Hkv,
                           int64_t D, float scale);
void cuda_lightning_state(float *state, const float *qkv, const float *decay, const int32_t *seg,
                          int B, int T, int H, int D);
void cuda_lightning_decode_step(float *state, const float *qkv_t, const float *decay, float *out,
                                int B, int H, int D);
void cuda_msa_select_decode(int32_t *idx, float *work, const float *iq, const float *ik_cache,
                            const int32_t *t_len, int64_t B, int64_t t_max, int64_t Hi, int64_t Di,
                            int block, int topk);
int64_t cuda_msa_select_decode_work(int64_t B, int64_t Hi, int64_t t_max, int block);
void cuda_msa_attention_decode(float *out, const float *q, const float *k_cache,
                               const float *v_cache, const int32_t *idx, const int32_t *t_len,
                               int64_t B, int64_t t_max, int64_t H, int64_t Hkv, int64_t D,
                               int block, int topk, float scale);

/* lightning's block form (lightning_block.cu) on rows of `chunks` equal chunks, each from an
 * initial state s0 (B*chunks,H,D,D) or 0 (NULL), its backward with the final-state gradient dsT
 * or 0 (NULL): the kernels of context parallelism (cp_lightning.cu) */
void cuda_lightning_block_fwd_from(const mt_node *n, int chunks, const float *s0);
void cuda_lightning_block_bwd_from(const mt_node *n, int chunks, const float *s0, const float *dsT);

/* the sharded optimizer's vector kernels (optim.cu), see mt_backend */
void cuda_vec_add(float *dst, const float *src, int64_t n);
void cuda_vec_stats(const float *x, int64_t n, double *sumsq, int64_t *nonfinite);
void cuda_adamw(float *p, float *m, float *v, const float *g, int64_t n, const mt_adamw_args *a);
void cuda_vec_to_bf16(uint16_t *dst, const float *src, int64_t n);
void cuda_vec_from_bf16(float *dst, const uint16_t *src, int64_t n);
