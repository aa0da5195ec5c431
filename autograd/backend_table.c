/* backend_table.c: what any backend table offers beyond its entries, used by the tape and the
 * trainer alike: the check that it has every kernel, and the first non-finite element of a
 * buffer (through its vec_stats). Which backends exist is kernels/backend.c's business. */
#include <stdio.h>

#include "autograd/tensor.h"

void mt_backend_validate(const mt_backend *be) {
    char missing[1024] = "";
    size_t len = 0;
    for (int op = 0; op < MT_OP_COUNT; op++) {
        if (!be->ops[op].fwd)
            len += snprintf(missing + len, sizeof(missing) - len, " %s.fwd", mt_op_name(op));
        if (!be->ops[op].bwd && len < sizeof(missing))
            len += snprintf(missing + len, sizeof(missing) - len, " %s.bwd", mt_op_name(op));
        if (len >= sizeof(missing)) break;
    }
    if (!be->copy) len += snprintf(missing + len, sizeof(missing) - len, " copy");
    if (!be->vec_add || !be->vec_stats || !be->adamw || !be->vec_to_bf16 || !be->vec_from_bf16)
        snprintf(missing + len, sizeof(missing) - len, " optimizer vector kernels");
    MT_CHECK(!missing[0], "backend %s lacks kernels:%s", be->name, missing);
}

int64_t mt_backend_first_nonfinite(const mt_backend *be, const float *x, int64_t n) {
    double sumsq;
    int64_t bad = 0, lo = 0;
    if (n > 0) be->vec_stats(x, n, &sumsq, &bad);
    if (!bad) return -1;
    while (n > 1) { /* the first one lies in [lo, lo + n) */
        const int64_t half = n / 2;
        be->vec_stats(x + lo, half, &sumsq, &bad);
        if (bad) {
            n = half;
        } else {
            lo += half;
            n -= half;
        }
    }
    return lo;
}
