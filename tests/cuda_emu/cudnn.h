/* cudnn.h (emulator): the part of cuDNN 9's backend API that kernels/cuda/attention_cudnn*.cu
 * use, implemented in emu_cudnn.cpp. The emulator has no cuDNN engines: a graph can be built,
 * but no execution plan finalizes (CUDNN_STATUS_NOT_SUPPORTED, "the CPU emulator has no cuDNN
 * engines"), so the attention op takes its fallback (the flash kernels), as it would on a GPU
 * whose cuDNN rejects the graph.
 *
 * On the way it checks what the real library cannot be asked on a machine without a GPU: every
 * SetAttribute against the attribute types, element counts and descriptor kinds of cuDNN's
 * backend documentation, every Finalize against the attributes it requires, and the graph's
 * shapes (tensor ranks and strides, matmul (M, K) x (K, N) = (M, N) with broadcast batch dims,
 * pointwise broadcasting, reduction and reshape sizes, ragged offsets of b + 1 entries, unique
 * tensor ids, each virtual tensor written by one operation and read by another). A violation
 * returns CUDNN_STATUS_BAD_PARAM with the reason in cudnnGetLastErrorString. Enumerator values
 * are the emulator's own. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "cuda_runtime.h"

#define CUDNN_MAJOR      9
#define CUDNN_MINOR      19
#define CUDNN_PATCHLEVEL 0
#define CUDNN_VERSION    (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)

typedef struct emu_cudnn_context *cudnnHandle_t;
typedef void *cudnnBackendDescriptor_t;

typedef enum {
    CUDNN_STATUS_SUCCESS = 0,
    CUDNN_STATUS_NOT_INITIALIZED = 1001,
    CUDNN_STATUS_BAD_PARAM = 2000,
    CUDNN_STATUS_NOT_SUPPORTED = 3000,
    CUDNN_STATUS_INTERNAL_ERROR = 4000,
    CUDNN_STATUS_EXECUTION_FAILED = 5000
} cudnnStatus_t;

typedef enum {
    CUDNN_DATA_FLOAT,
    CUDNN_DATA_INT32,
    CUDNN_DATA_BFLOAT16,
    CUDNN_DATA_INT64,
    CUDNN_DATA_BOOLEAN
} cudnnDataType_t;

typedef enum {
    CUDNN_POINTWISE_ADD,
    CUDNN_POINTWISE_MUL,
    CUDNN_POINTWISE_DIV,
    CUDNN_POINTWISE_SUB,
    CUDNN_POINTWISE_EXP,
    CUDNN_POINTWISE_LOG,
    CUDNN_POINTWISE_IDENTITY,
    CUDNN_POINTWISE_CMP_GE,
    CUDNN_POINTWISE_CMP_LT,
    CUDNN_POINTWISE_LOGICAL_AND,
    CUDNN_POINTWISE_GEN_INDEX,
    CUDNN_POINTWISE_BINARY_SELECT
} cudnnPointwiseMode_t;

typedef enum { CUDNN_REDUCE_TENSOR_ADD, CUDNN_REDUCE_TENSOR_MAX } cudnnReduceTensorOp_t;
typedef enum { CUDNN_HEUR_MODE_FALLBACK, CUDNN_HEUR_MODE_A } cudnnBackendHeurMode_t;

typedef enum {
    CUDNN_TYPE_HANDLE,
    CUDNN_TYPE_DATA_TYPE,
    CUDNN_TYPE_BOOLEAN,
    CUDNN_TYPE_INT64,
    CUDNN_TYPE_FLOAT,
    CUDNN_TYPE_VOID_PTR,
    CUDNN_TYPE_POINTWISE_MODE,
    CUDNN_TYPE_BACKEND_DESCRIPTOR,
    CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
    CUDNN_TYPE_HEUR_MODE
} cudnnBackendAttributeType_t;

typedef enum {
    CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
    CUDNN_BACKEND_ENGINE_DESCRIPTOR,
    CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
    CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR,
    CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
    CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
    CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
    CUDNN_BACKEND_TENSOR_DESCRIPTOR,
    CUDNN_BACKEND_MATMUL_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
    CUDNN_BACKEND_REDUCTION_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
    EMU_CUDNN_DESCRIPTOR_KINDS
} cudnnBackendDescriptorType_t;

typedef enum {
    CUDNN_ATTR_POINTWISE_MODE,
    CUDNN_ATTR_POINTWISE_MATH_PREC,
    CUDNN_ATTR_POINTWISE_AXIS,
    CUDNN_ATTR_ENGINEHEUR_MODE,
    CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
    CUDNN_ATTR_ENGINEHEUR_RESULTS,
    CUDNN_ATTR_ENGINECFG_ENGINE,
    CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
    CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
    CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
    CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
    CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
    CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
    CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
    CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
    CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1,
    CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2,
    CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
    CUDNN_ATTR_OPERATIONGRAPH_HANDLE,
    CUDNN_ATTR_OPERATIONGRAPH_OPS,
    CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT,
    CUDNN_ATTR_TENSOR_DATA_TYPE,
    CUDNN_ATTR_TENSOR_DIMENSIONS,
    CUDNN_ATTR_TENSOR_STRIDES,
    CUDNN_ATTR_TENSOR_UNIQUE_ID,
    CUDNN_ATTR_TENSOR_IS_VIRTUAL,
    CUDNN_ATTR_TENSOR_IS_BY_VALUE,
    CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC,
    CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
    CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
    CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
    CUDNN_ATTR_MATMUL_COMP_TYPE,
    CUDNN_ATTR_OPERATION_MATMUL_ADESC,
    CUDNN_ATTR_OPERATION_MATMUL_BDESC,
    CUDNN_ATTR_OPERATION_MATMUL_CDESC,
    CUDNN_ATTR_OPERATION_MATMUL_DESC,
    CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC,
    CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC,
    CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC,
    CUDNN_ATTR_REDUCTION_OPERATOR,
    CUDNN_ATTR_REDUCTION_COMP_TYPE,
    CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC,
    CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
    CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
    CUDNN_ATTR_OPERATION_REDUCTION_DESC,
    CUDNN_ATTR_OPERATION_RESHAPE_XDESC,
    CUDNN_ATTR_OPERATION_RESHAPE_YDESC,
    EMU_CUDNN_ATTRIBUTES
} cudnnBackendAttributeName_t;

size_t cudnnGetVersion(void);
const char *cudnnGetErrorString(cudnnStatus_t status);
void cudnnGetLastErrorString(char *message, size_t max_size);
cudnnStatus_t cudnnCreate(cudnnHandle_t *handle);
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle);
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream);
cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *descriptor);
cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor);
cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor);
cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count,
                                       const void *elements);
cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t *count, void *elements);
cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                  cudnnBackendDescriptor_t variant_pack);
