/* mma.h (emulator): the subset of CUDA's warp matrix API (nvcuda::wmma) that kernels/cuda use:
 * 16x16x16 fragments of __nv_bfloat16 operands (matrix_a, matrix_b; row_major or col_major) and
 * float accumulators, fill_fragment, load_matrix_sync (the accumulator overload takes
 * mem_row_major or mem_col_major), mma_sync and store_matrix_sync.
 *
 * Model: every lane holds the WHOLE 16x16 tile (num_elements = 256, x[] in logical row-major
 * order), so each lane of an emulated warp computes the same product and an element-wise loop
 * over x[i] treats every element exactly once per lane, as on the device (where each lane holds
 * an unspecified eighth). Kernels must therefore not depend on which element x[i] is; per-row or
 * per-column work goes through memory (store, then index the rows). mma_sync multiplies the
 * operands as floats (a bf16 product is exact in fp32) and accumulates in fp32, k = 0..15 in
 * order, onto the accumulator. A store writes only the lane's share of the tile (element i by
 * lane i mod 32), as on the device, where each lane stores its own elements: a read of the
 * tile by another lane before a warp or block barrier can see stale values (strict mode runs
 * the lanes in reverse order, so it does).
 *
 * Checked like the device's requirements: the pointer is 32-byte aligned and ldm is a multiple
 * of 16 bytes (8 bf16 or 4 floats); a violation aborts with a message. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_bf16.h"
#include "cuda_runtime.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> class fragment {
    static_assert(M == 16 && N == 16 && K == 16, "emulated wmma: only the 16x16x16 shape");

  public:
    static const int num_elements = 256;
    T x[256]; /* element (r, c) of the tile at x[16 r + c]: rows m (a, accumulator) or k (b) */
};

static inline void emu_wmma_check(const void *p, unsigned ldm, size_t elem, const char *what) {
    if (((uintptr_t)p & 31u) != 0 || (ldm * elem) % 16 != 0) {
        fprintf(stderr,
                "cuda emulator: wmma %s: pointer %p must be 32-byte aligned and ldm %u "
                "a multiple of 16 bytes\n",
                what, p, ldm);
        abort();
    }
}

/* The hot loop's helpers (mma_sync below) are left out of the sanitizers with it: a function
 * they instrument is not inlined into one they skip, and a call per element costs more than
 * the products. */
#if defined(__GNUC__)
#define EMU_WMMA_HOT __attribute__((no_sanitize("address", "undefined")))
#else
#define EMU_WMMA_HOT
#endif

/* float <-> fragment element conversions: bf16 operands and float accumulators */
EMU_WMMA_HOT static inline float emu_wmma_f(float v) { return v; }
EMU_WMMA_HOT static inline float emu_wmma_f(__nv_bfloat16 v) { /* as __bfloat162float */
    uint32_t u = (uint32_t)v.__x << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

template <typename U, typename T, typename L>
static inline void fill_fragment(fragment<U, 16, 16, 16, T, L> &f, const T &v) {
    for (int i = 0; i < 256; i++) f.x[i] = v;
}

/* operand tiles: the layout is the fragment's own (row_major: element (r, c) at p[r ldm + c]) */
template <typename U, typename T>
static inline void load_matrix_sync(fragment<U, 16, 16, 16, T, row_major> &f, const T *p,
                                    unsigned ldm) {
    emu_wmma_check(p, ldm, sizeof(T), "load (row_major)");
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.x[16 * r + c] = p[(size_t)r * ldm + c];
}
template <typename U, typename T>
static inline void load_matrix_sync(fragment<U, 16, 16, 16, T, col_major> &f, const T *p,
                                    unsigned ldm) {
    emu_wmma_check(p, ldm, sizeof(T), "load (col_major)");
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.x[16 * r + c] = p[(size_t)c * ldm + r];
}

/* accumulator tiles: the memory layout is an argument */
static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
                                    unsigned ldm, layout_t layout) {
    emu_wmma_check(p, ldm, sizeof(float), "load (accumulator)");
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[16 * r + c] =
                layout == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
}
static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                                     unsigned ldm, layout_t layout) {
    emu_wmma_check(p, ldm, sizeof(float), "store");
    const int lane = (int)(threadIdx.x % 32);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            if ((16 * r + c) % 32 != lane) continue;
            float *dst =
                layout == mem_row_major ? &p[(size_t)r * ldm + c] : &p[(size_t)c * ldm + r];
            *dst = f.x[16 * r + c];
        }
}

/* d = a b + c (d may be c): float products, fp32 sums in k order. Every lane computes the
 * whole tile, so this is the emulator's hot loop: the sanitizers skip it (it only touches its
 * own fragments, which the loads and stores around it check), which makes the sanitizer build's
 * tensor-core kernels several times faster. */
template <typename T, typename LA, typename LB>
EMU_WMMA_HOT static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                                         const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                                         const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                                         const fragment<accumulator, 16, 16, 16, float> &c) {
    float af[256], bf[256], out[256];
    for (int i = 0; i < 256; i++) {
        af[i] = emu_wmma_f(a.x[i]);
        bf[i] = emu_wmma_f(b.x[i]);
    }
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            float s = c.x[16 * m + n];
            for (int k = 0; k < 16; k++) s += af[16 * m + k] * bf[16 * k + n];
            out[16 * m + n] = s;
        }
    for (int i = 0; i < 256; i++) d.x[i] = out[i];
}

} // namespace wmma
} // namespace nvcuda
