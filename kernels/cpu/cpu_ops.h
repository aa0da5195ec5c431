/* cpu_ops.h: the CPU backend's node adapters, one fwd/bwd pair per line of ops.def.
 * An adapter unpacks a tape node and calls the op's typed kernel (kernels/cpu/<op>.c), which
 * tests and benchmarks may also call directly. */
#pragma once
#include "../../autograd/tensor.h"

#define MT_OP(E, name)                                                                             \
    void cpu_##name##_fwd_node(const mt_node *n);                                                  \
    void cpu_##name##_bwd_node(const mt_node *n);
#include "../../autograd/ops.def"
#undef MT_OP
