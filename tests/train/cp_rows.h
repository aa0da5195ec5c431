/* cp_rows.h: what the context-parallel op tests share (tests/train/dist_cp_attention.c,
 * dist_cp_msa.c): a rank's rows of whole (B,T,...) rows, and the packed rows they run on. */
#pragma once
#include <stdint.h>
#include <string.h>

#include "autograd/context_parallel.h"

/* The rows of (B,T,W) that rank r of C holds (chunks r and 2C-1-r), into (B,T/C,W). */
static inline void cp_take_rows(void *dst, const void *src, int64_t B, int64_t T, size_t row_bytes,
                                int r, int C) {
    const int64_t Tl = T / C;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Tl; i++)
            memcpy((char *)dst + (size_t)(b * Tl + i) * row_bytes,
                   (const char *)src + (size_t)(b * T + mt_cp_global_index(r, C, T, i)) * row_bytes,
                   row_bytes);
}

/* seg, pos (B,T): row 0 packs samples of lengths 13, 30, 7, 50, ... (cycling, so they cross
 * the chunk borders), the other rows one sample each; positions restart at 0 with each. */
static inline void cp_packed_rows(int32_t *seg, int32_t *pos, int64_t B, int64_t T) {
    const int lens[4] = {13, 30, 7, 50};
    for (int64_t t = 0, id = 0, at = 0; t < T; t++, at++) {
        if (at == lens[id % 4]) id++, at = 0;
        seg[t] = (int32_t)id;
        pos[t] = (int32_t)at;
        for (int64_t b = 1; b < B; b++) {
            seg[b * T + t] = 99;
            pos[b * T + t] = (int32_t)t;
        }
    }
}
