/* backend_cpu.c: the CPU backend table. fp32 storage; the reference every other backend is
 * compared against. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/cpu_ops.h"
#include "cpu/lightning.h"
#include "cpu/msa.h"

static void *cpu_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) return NULL;
    return p;
}
static void cpu_free(void *p) { free(p); }
/* Clears from 128 KiB (a step's gradients, 4 bytes a parameter: 68 MB at 1 x 2 in the small
 * bench model; the activations' gradients, zeroed before the backward adds into them, ~0.1-1
 * MB each) in one piece a thread: one core's stores do not reach the memory bandwidth. From
 * 1 MiB down to 128 KiB the small bench model's untimed step time fell 6.3-6.8 -> 4.4-5.6 ms
 * (1 x 2, three interleaved pairs). */
#define CPU_ZERO_SPLIT ((size_t)1 << 17)
static void cpu_zero(void *p, size_t bytes) {
    if (bytes < CPU_ZERO_SPLIT) {
        memset(p, 0, bytes);
        return;
    }
#pragma omp parallel
    {
        const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        const size_t lo = bytes / nt * t, hi = t + 1 == nt ? bytes : bytes / nt * (t + 1);
        memset((char *)p + lo, 0, hi - lo);
    }
}
static void cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void cpu_sync(void) {}
/* MemAvailable of /proc/meminfo (Linux), 0 elsewhere */
static size_t cpu_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    fclose(f);
    return (size_t)kib << 10;
}

static const mt_backend cpu_backend = {
    .name = "cpu",
    .dev = MT_CPU,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .copy = cpu_copy,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .mem_available = cpu_mem_available,
    .sync = cpu_sync,
    .ops =
        {
#define MT_OP(E, name) [MT_OP_##E] = {cpu_##name##_fwd_node, cpu_##name##_bwd_node},
#include "../autograd/ops.def"
#undef MT_OP
        },
    .vec_add = cpu_vec_add,
    .vec_stats = cpu_vec_stats,
    .adamw = cpu_adamw,
    .vec_to_bf16 = cpu_vec_to_bf16,
    .vec_from_bf16 = cpu_vec_from_bf16,
    .decode = {.attention = cpu_attention_decode,
               .lightning_state = cpu_lightning_state,
               .lightning_step = cpu_lightning_decode_step,
               .attention_chunk = cpu_attention_chunk,
               .lightning_chunk = cpu_lightning_chunk,
               .msa_chunk = cpu_msa_chunk,
               .msa_select = cpu_msa_select_decode,
               .msa_select_work = cpu_msa_select_decode_work,
               .msa_attention = cpu_msa_attention_decode},
};

const mt_backend *mt_backend_cpu(void) { return &cpu_backend; }
