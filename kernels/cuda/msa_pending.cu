/* msa_pending.cu: placeholders for the MSA ops' CUDA kernels (kernels/cpu/msa_*.c hold the
 * reference), so the CUDA build and its CPU emulator link until the real kernels land; the
 * commit that adds kernels/cuda/msa_*.cu deletes this file. Each one dies when called. */
#include "cuda_ops.cuh"

#define MSA_PENDING(op)                                                                            \
    void cuda_##op##_fwd_node(const mt_node *n) {                                                  \
        MT_DIE(#op ": no CUDA kernel yet (node %s)", n->out->name);                                \
    }                                                                                              \
    void cuda_##op##_bwd_node(const mt_node *n) {                                                  \
        MT_DIE(#op ": no CUDA kernel yet (node %s)", n->out->name);                                \
    }
MSA_PENDING(msa_select)
MSA_PENDING(msa_attention)
MSA_PENDING(msa_kl)
