/* backend.c: the backend registry. The only place that knows which backends were built. */
#include <stdio.h>
#include <string.h>

#include "../autograd/tensor.h"

#ifdef MT_WITH_CUDA
const mt_backend *mt_cuda_backend_probe(void); /* kernels/cuda/backend_cuda.cu */
const mt_backend *mt_backend_cuda(void) { return mt_cuda_backend_probe(); }
#else
const mt_backend *mt_backend_cuda(void) { return NULL; }
#endif

const mt_backend *mt_backend_named(const char *name, char *err, size_t n) {
    const mt_backend *be = !strcmp(name, "cpu")    ? mt_backend_cpu()
                           : !strcmp(name, "cuda") ? mt_backend_cuda()
                                                   : NULL;
    if (!be)
        snprintf(err, n,
                 strcmp(name, "cuda") ? "--backend %s: not a backend (cpu or cuda)"
                                      : "--backend %s: no usable CUDA device (or a build "
                                        "without -DMT_CUDA=ON; MT_CUDA_VERBOSE=1 says why)",
                 name);
    return be;
}

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
