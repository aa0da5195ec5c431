/* attention_flash.cuh: the bf16 tensor-core (flash-attention-2 style) path of the attention op,
 * kernels/cuda/attention_flash.cu, called by the node adapters in attention.cu when the node's
 * mode (ip[0]) is MT_BF16 and the head dim is one the kernels are built for. */
#pragma once
#include "cuda_ops.cuh"

/* Head dims with a flash kernel (64 and 128: Text-01's and the tests'); other D in bf16 mode run
 * the reference kernels with the same rounding points. */
bool cuda_attention_flash_supported(int64_t D);
/* Forward and backward of attention node n (autograd/op_attention.c's layout) in bf16 mode. */
void cuda_attention_flash_fwd(const mt_node *n);
void cuda_attention_flash_bwd(const mt_node *n);
