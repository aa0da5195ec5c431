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
