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

/* the sharded optimizer's vector kernels (optim.cu), see mt_backend */
void cuda_vec_add(float *dst, const float *src, int64_t n);
void cuda_vec_stats(const float *x, int64_t n, double *sumsq, int64_t *nonfinite);
void cuda_adamw(float *p, float *m, float *v, const float *g, int64_t n, const mt_adamw_args *a);
void cuda_vec_to_bf16(uint16_t *dst, const float *src, int64_t n);
void cuda_vec_from_bf16(float *dst, const uint16_t *src, int64_t n);
