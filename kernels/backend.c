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
