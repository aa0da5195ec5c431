/* pending_basic.c: TEMPORARY placeholders while the basic kernels are written; delete when done. */
#include "cpu_ops.h"
void cpu_embedding_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_embedding_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_matmul_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_matmul_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_rmsnorm_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_rmsnorm_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_silu_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_silu_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_sigmoid_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_sigmoid_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_swiglu_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_swiglu_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_add_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_add_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_mul_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_mul_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_scale_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_scale_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_axpby_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_axpby_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_cross_entropy_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_cross_entropy_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
