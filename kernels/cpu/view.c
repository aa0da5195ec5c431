/* view.c: a view shares its input's data, so the forward does nothing; the backward adds the
 * view's gradient into the input's (separate buffers: a view never aliases gradients). */
#include "cpu_ops.h"

void cpu_view_fwd_node(const mt_node *n) { (void)n; }

void cpu_view_bwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0];
    if (!x->grad) return;
    float *dx = x->grad;
    const float *dy = n->out->grad;
    int64_t count = mt_numel(x);
#pragma omp parallel for schedule(static) if (count > 16384) /* below: a fork costs more */
    for (int64_t i = 0; i < count; i++) dx[i] += dy[i];
}
