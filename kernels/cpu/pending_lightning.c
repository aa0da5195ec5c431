/* pending_lightning.c: TEMPORARY placeholders while the lightning kernels are written; delete when
 * done. */
#include "cpu_ops.h"
void cpu_lightning_fwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
void cpu_lightning_bwd_node(const mt_node *n) {
    MT_DIE("op %s: CPU kernel not written yet", mt_op_name(n->op));
}
