/* ep_exchange.cu: the row exchange of expert parallelism moves rows through the communicator
 * and reorders whole blocks with the backend's copies (device to device here); nothing is
 * computed, so the node work is backend-independent (autograd/op_exchange.c). */
#include "cuda_ops.cuh"

void cuda_ep_exchange_fwd_node(const mt_node *n) { mt_ep_exchange_node_fwd(n); }
void cuda_ep_exchange_bwd_node(const mt_node *n) { mt_ep_exchange_node_bwd(n); }
