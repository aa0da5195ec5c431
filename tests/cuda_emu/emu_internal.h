/* emu_internal.h: what the emulator's sources (emu.cpp, emu_blas.cpp, emu_nccl.cpp) share; not
 * part of the emulated API. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <functional>

#include "cuda_runtime.h"

/* emu.cpp */
bool emu_strict(void);                           /* MT_EMU_STRICT=1 */
uint64_t emu_default_work(void);                 /* the default stream's work so far */
void emu_default_work_add(void);                 /* one more piece of it (a cuBLAS call) */
uint64_t emu_event_work(cudaEvent_t e);          /* default-stream work before e, 0 elsewhere */
cudaStream_t emu_event_stream(cudaEvent_t e);    /* the created stream e was last recorded on */
bool emu_is_device(const void *p, size_t bytes); /* inside one live cudaMalloc block */

/* emu_nccl.cpp: created streams */
void emu_stream_enqueue(cudaStream_t s, std::function<void()> op);
bool emu_stream_waited_all(cudaStream_t s); /* s waited for all the default stream's work */
void emu_streams_run_all(void);             /* every queue, as at cudaDeviceSynchronize */
