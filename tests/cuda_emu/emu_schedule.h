/* emu_schedule.h: the emulator's schedule switch, callable from C tests (tests/gpu/gpu_compare.c):
 * whether a kernel's result depends on the order its blocks and threads run in. Not part of the
 * CUDA API; only builds against the emulator (MT_CUDA_EMU) have it. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* From the next launch on: seed 0 runs the emulator's own order (blocks and threads ascending,
 * or in strict mode, MT_EMU_STRICT=1, descending with the highest runnable thread first); any
 * other seed runs each launch's blocks in a permutation and each block's threads round-robin in
 * a permutation, both drawn from the seed and the launches since it was set. */
void emu_schedule_seed(uint64_t seed);
#ifdef __cplusplus
}
#endif
