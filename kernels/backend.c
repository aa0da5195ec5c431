/* backend.c: the backend registry. The only place that knows which backends were built. */
#include <stdio.h>
#include <string.h>

#include "autograd/tensor.h"

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
