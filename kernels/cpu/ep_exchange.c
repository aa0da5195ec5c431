/* ep_exchange.c: the row exchange of expert parallelism moves rows through the communicator
 * and reorders whole blocks with the backend's copies; nothing is computed, so the node work
 * is backend-independent (autograd/op_exchange.c) and this adapter only points at it. */
#include "../../autograd/ops.h"
#include "cpu_ops.h"

void cpu_ep_exchange_fwd_node(const mt_node *n) { mt_ep_exchange_node_fwd(n); }
void cpu_ep_exchange_bwd_node(const mt_node *n) { mt_ep_exchange_node_bwd(n); }
