/* pending_moe.c: TEMPORARY placeholders while the moe kernels are written; delete when done. */
#include "cpu_ops.h"
void cpu_moe_route_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_moe_route_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_moe_experts_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_moe_experts_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_moe_aux_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_moe_aux_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
