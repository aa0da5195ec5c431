/* cp_gather.c: context parallelism's row gather moves rows through the group's hooks and the
 * backend's copies; nothing is computed but the backward's sums (the group's reduce-scatter),
 * so the node work is backend-independent (autograd/op_cp_gather.c) and this adapter only
 * points at it. */
#include "../../autograd/ops.h"
#include "cpu_ops.h"

void cpu_cp_gather_fwd_node(const mt_node *n) { mt_cp_gather_node_fwd(n); }
void cpu_cp_gather_bwd_node(const mt_node *n) { mt_cp_gather_node_bwd(n); }
