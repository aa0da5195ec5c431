/* backend_plan.c: a backend that computes nothing, for memory planning (mt_backend_plan). The
 * model's own code path (op constructors, tape, recomputed segments, both arenas) runs on it
 * with kernels that do nothing and device addresses that are never touched, so the activation
 * arena's peaks are what a run of those shapes carves, at no memory and almost no time. What
 * the host reads back reads as zeros (labels: every row labelled; routes: expert 0), and the
 * MoE forwards spread the N*K slots evenly over the experts (the host offsets they leave). */
#include <string.h>

#include "../autograd/tensor.h"

/* Addresses from a range nobody maps, 4 KiB apart at least; never dereferenced. */
static void *plan_alloc(size_t bytes) {
    static uintptr_t next = (uintptr_t)1 << 44;
    const uintptr_t p = next;
    next += (bytes + 4095) & ~(uintptr_t)4095;
    next += 4096;
    return (void *)p;
}
static void plan_free(void *p) { (void)p; }
static void plan_zero(void *p, size_t bytes) { (void)p, (void)bytes; }
static void plan_to_device(void *dst, const void *src, size_t bytes) {
    (void)dst, (void)src, (void)bytes;
}
static void plan_to_host(void *dst, const void *src, size_t bytes) {
    (void)src;
    memset(dst, 0, bytes);
}
static void plan_copy(void *dst, const void *src, size_t bytes) {
    (void)dst, (void)src, (void)bytes;
}
static void plan_sync(void) {}

static void plan_kernel(const mt_node *n) { (void)n; }

/* moe_experts and moe_dispatch: saved[0] = offsets (E+1), saved[1] = perm (N*K); the host copy
 * of the offsets sizes the expert ops (and their saved buffers) */
static void plan_moe_fwd(const mt_node *n) {
    const int64_t E = n->saved[0]->shape[0] - 1, A = n->saved[1]->shape[0];
    int32_t *off = n->host;
    for (int64_t e = 0; e <= E; e++) off[e] = (int32_t)(e * A / E);
}

static void plan_vec_add(float *dst, const float *src, int64_t n) { (void)dst, (void)src, (void)n; }
static void plan_vec_stats(const float *x, int64_t n, double *sumsq, int64_t *nonfinite) {
    (void)x, (void)n;
    *sumsq = 0;
    *nonfinite = 0;
}
static void plan_adamw(float *p, float *m, float *v, const float *g, int64_t n,
                       const mt_adamw_args *a) {
    (void)p, (void)m, (void)v, (void)g, (void)n, (void)a;
}
static void plan_to_bf16(uint16_t *dst, const float *src, int64_t n) {
    (void)dst, (void)src, (void)n;
}
static void plan_from_bf16(float *dst, const uint16_t *src, int64_t n) {
    (void)dst, (void)src, (void)n;
}

const mt_backend *mt_backend_plan(void) {
    static mt_backend be;
    if (!be.name) {
        be = (mt_backend){.name = "plan",
                          .dev = MT_CUDA, /* device memory: the host never reads it directly */
                          .alloc = plan_alloc,
                          .free = plan_free,
                          .zero = plan_zero,
                          .to_device = plan_to_device,
                          .to_host = plan_to_host,
                          .copy = plan_copy,
                          .sync = plan_sync,
                          .vec_add = plan_vec_add,
                          .vec_stats = plan_vec_stats,
                          .adamw = plan_adamw,
                          .vec_to_bf16 = plan_to_bf16,
                          .vec_from_bf16 = plan_from_bf16};
        for (int op = 0; op < MT_OP_COUNT; op++)
            be.ops[op] = (mt_op_impl){plan_kernel, plan_kernel};
        be.ops[MT_OP_MOE_EXPERTS].fwd = plan_moe_fwd;
        be.ops[MT_OP_MOE_DISPATCH].fwd = plan_moe_fwd;
    }
    return &be;
}
