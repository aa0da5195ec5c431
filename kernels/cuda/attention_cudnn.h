/* attention_cudnn.h: the cuDNN fused-attention path of the attention op in bf16 mode
 * (kernels/cuda/attention_cudnn.cu) and the choice between it and the project's own kernels.
 * Plain C, so the GPU tests (tests/gpu/gpu_ops.c) and the benchmarks can select a path and ask
 * which one ran; attention.cu calls the two node functions at the bottom.
 *
 * Selection (MT_ATTENTION, read at the first bf16 attention call): "cudnn" on a device of compute
 * capability 9.x when unset ("auto"), the flash kernels (attention_flash.cu, the reference kernels
 * at other head dims) elsewhere; "flash" never uses cuDNN; "cudnn" tries cuDNN on any device.
 * When cuDNN cannot run a call (no handle, a graph or plan it rejects, segment ids it cannot map,
 * not enough arena for its scratch) the call runs on the own kernels and one line on stderr says
 * why, once per shape and reason; it is never an error. docs/cuda.md, "cuDNN attention". */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CUDA_ATTN_AUTO = 0, CUDA_ATTN_FLASH = 1, CUDA_ATTN_CUDNN = 2 };

/* Overrides MT_ATTENTION (tests, benchmarks): CUDA_ATTN_*, or -1 to go back to the variable. */
void cuda_attention_impl_set(int impl);

/* What ran since the process started: calls on cuDNN, calls that wanted cuDNN and fell back
 * (each runs on the own kernels), the lines printed about fallbacks, and the last such line. */
typedef struct {
    int64_t cudnn_fwd, cudnn_bwd;
    int64_t fallback_fwd, fallback_bwd;
    int64_t log_lines;
    const char *last_reason; /* "" when none */
    int device_major;        /* the device's compute capability (major) */
    int64_t cudnn_version;   /* cudnnGetVersion() (0: built without cuDNN) */
    /* dense backward graphs built with cudnn-frontend's padding-mask workaround (cuDNN <= 9.15,
     * T not a multiple of 128; attention_cudnn.cu) */
    int64_t workaround_graphs;
} cuda_attention_stats;
void cuda_attention_stats_get(cuda_attention_stats *s);

#ifdef __cplusplus
}

struct mt_node;
/* The node's forward / backward on cuDNN when the selection above picks it and cuDNN accepts the
 * call; false when the caller must run its own kernels (nothing has been written then). */
bool cuda_attention_cudnn_fwd(const mt_node *n);
bool cuda_attention_cudnn_bwd(const mt_node *n);
#endif
