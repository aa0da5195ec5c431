/* msa_chunk.c: the cached forward's extension of one row through an MSA layer (chunked prefill)
 * in one call: each of the T tokens is the decode step it would be alone -- the dense cached
 * attention while its selection covers every block it sees, else the block selection over the
 * index-key cache then the attention over the chosen blocks -- on a cache that ends with it.
 * Parallel over tiles of MSA_CHUNK_TILE tokens. The selection is cpu_msa_select_decode's
 * arithmetic (each fp32 score summed over d in order from 0) for the tile's tokens side by side,
 * so one pass over the keys serves the tile; the attention steps' own kernels run inside (each
 * on one thread, nested regions being inactive). So the result is bit-equal to T calls of the
 * decode steps. */
#include <math.h>
#include <stdlib.h>

#include "attention.h"
#include "cpu_ops.h"
#include "msa.h"

/* Tokens per tile: independent sums the compiler keeps in vector lanes. */
#define MSA_CHUNK_TILE 16
/* The largest index dim the tile's transposed queries (on the stack) take. */
#define MSA_CHUNK_MAX_DI 512

/* The selection of index head h for the tile's na tokens at positions p0 .. p0+na-1: iq at the
 * first token's head h (Hkv heads a token), ik (t_max,Di); token a sees keys [0, p0 + a]. bs
 * (MSA_CHUNK_TILE, nb) block maxima; idx (na,Hkv,topk) gets head h's top-k of each token. */
static void msa_chunk_select(int32_t *idx, float *bs, int64_t nb, const float *iq, const float *ik,
                             int64_t p0, int na, int64_t h, int64_t Hkv, int64_t Di, int block,
                             int topk) {
    float qt[MSA_CHUNK_MAX_DI * MSA_CHUNK_TILE];
    for (int64_t d = 0; d < Di; d++)
        for (int a = 0; a < MSA_CHUNK_TILE; a++) /* past na: zeros, never read back */
            qt[d * MSA_CHUNK_TILE + a] = a < na ? iq[a * Hkv * Di + d] : 0.0f;
    /* the running maximum of each token over the current block's keys, stored at its last key:
     * branch-free, a key a token does not see (past p0 + a) counting as -inf */
    float cur[MSA_CHUNK_TILE];
    const int64_t n = p0 + na;
    for (int64_t j = 0; j < n; j++) {
        if (j % block == 0)
            for (int a = 0; a < MSA_CHUNK_TILE; a++) cur[a] = -INFINITY;
        const float *kj = ik + j * Di;
        float sc[MSA_CHUNK_TILE] = {0};
        for (int64_t d = 0; d < Di; d++) {
            const float kd = kj[d];
            const float *restrict qd = qt + d * MSA_CHUNK_TILE;
#pragma omp simd
            for (int a = 0; a < MSA_CHUNK_TILE; a++) sc[a] += qd[a] * kd;
        }
        for (int a = 0; a < MSA_CHUNK_TILE; a++) {
            const float x = j <= p0 + a ? sc[a] : -INFINITY;
            cur[a] = x > cur[a] ? x : cur[a]; /* a NaN score is never kept, as in the step */
        }
        if (j % block == block - 1 || j == n - 1)
            for (int a = 0; a < na; a++) bs[a * nb + j / block] = cur[a];
    }
    for (int a = 0; a < na; a++)
        cpu_msa_topk_row(idx + (a * Hkv + h) * topk, bs + a * nb, (int32_t)((p0 + a) / block),
                         topk);
}

void cpu_msa_chunk(float *out, const float *q, const float *iq, const float *k_cache,
                   const float *v_cache, const float *ik_cache, int64_t t0, int64_t T,
                   int64_t t_max, int64_t H, int64_t Hkv, int64_t D, int64_t Di, int block,
                   int topk, float scale) {
    MT_CHECK(t0 >= 0 && T >= 1 && t0 + T <= t_max && block >= 1 && topk >= 1 &&
                 topk <= CPU_MSA_MAX_TOPK && Di >= 1 && Di <= MSA_CHUNK_MAX_DI,
             "msa chunk: positions [%lld, %lld) not in [0, Tmax=%lld], block %d, topk %d (at "
             "most %d), index dim %lld (at most %d)",
             (long long)t0, (long long)(t0 + T), (long long)t_max, block, topk, CPU_MSA_MAX_TOPK,
             (long long)Di, MSA_CHUNK_MAX_DI);
    const int64_t nb = (t_max - 1) / block + 1, nt = (T + MSA_CHUNK_TILE - 1) / MSA_CHUNK_TILE;
#pragma omp parallel
    {
        float *bs = mt_malloc(sizeof(float) * (size_t)(MSA_CHUNK_TILE * nb), "msa chunk scores");
        int32_t *idx =
            mt_malloc(sizeof(int32_t) * (size_t)(MSA_CHUNK_TILE * Hkv * topk), "msa chunk blocks");
        /* later tokens see more keys: dynamic */
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < nt; i++) {
            const int64_t a0 = i * MSA_CHUNK_TILE;
            const int na = (int)(T - a0 < MSA_CHUNK_TILE ? T - a0 : MSA_CHUNK_TILE);
            /* dense while the blocks a token sees number at most topk: models/block_msa.c,
             * msa_step_dense; the tile's last token is the likeliest sparse one */
            if ((t0 + a0 + na - 1) / block + 1 > topk)
                for (int64_t h = 0; h < Hkv; h++)
                    msa_chunk_select(idx, bs, nb, iq + (a0 * Hkv + h) * Di, ik_cache, t0 + a0, na,
                                     h, Hkv, Di, block, topk);
            for (int a = 0; a < na; a++) {
                const int32_t end = (int32_t)(t0 + a0 + a + 1);
                float *o = out + (a0 + a) * H * D;
                const float *qt = q + (a0 + a) * H * D;
                if ((end - 1) / block + 1 <= topk)
                    cpu_attention_decode(o, qt, k_cache, v_cache, &end, 1, t_max, H, Hkv, D, scale);
                else
                    cpu_msa_attention_decode(o, qt, k_cache, v_cache, idx + a * Hkv * topk, &end, 1,
                                             t_max, H, Hkv, D, block, topk, scale);
            }
        }
        free(bs);
        free(idx);
    }
}
