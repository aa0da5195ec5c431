/* pending_attention.c: TEMPORARY placeholders while the attention kernels are written; delete when
 * done. */
#include "cpu_ops.h"
void cpu_rope_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_rope_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_attention_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_attention_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
