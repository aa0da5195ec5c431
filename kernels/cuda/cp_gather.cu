/* cp_gather.cu: context parallelism's row gather on the device: device copies and the group's
 * NCCL hooks only, so the node work is backend-independent (autograd/op_cp_gather.c). */
#include "cuda_ops.cuh"

void cuda_cp_gather_fwd_node(const mt_node *n) { mt_cp_gather_node_fwd(n); }
void cuda_cp_gather_bwd_node(const mt_node *n) { mt_cp_gather_node_bwd(n); }
