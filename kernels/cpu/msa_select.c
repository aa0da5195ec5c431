/* msa_select.c: MSA block selection (spec 4.1-4.2) on the CPU: the indexer's token scores
 * iq_h(t) . ik(j), max-pooled per block of t's sample, then the local block plus the topk-1
 * best earlier blocks; and the single-token decode step.
 *
 * Order of idx[b,h,t,:] is transformers' (MiniMaxM3VLIndexer.forward: the local block boosted
 * to +inf, then torch.topk sorted descending): the local block first, then descending score,
 * -1 padding last. Ties go to the lower block id (MiniMax's training kernel's rule; the spec's
 * `test_fp16_score_ties_use_block_id_order`); torch.topk does not promise an order on ties
 * (docs/msa.md). Scores are fp32 products (cblas_sgemm on 64 x 64 tiles) like transformers'
 * fp32 matmul, so near-ties resolve the same way up to the GEMMs' summation order. */
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "cpu_ops.h"
#include "msa.h"

#define MSA_TILE 64

void cpu_msa_check_rows(const int32_t *pos, const int32_t *seg, int64_t B, int64_t T) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = b * T + t;
            const bool first = t == 0 || (seg && seg[i] != seg[i - 1]);
            const int32_t want = first ? 0 : pos[i - 1] + 1;
            MT_CHECK(pos[i] == want,
                     "msa: pos[%lld,%lld] = %d, expected %d (positions restart at 0 with each "
                     "sample, a run of equal segment ids, and count up by one)",
                     (long long)b, (long long)t, pos[i], want);
        }
}

void cpu_msa_check_slots(const int32_t *q_slot, int64_t Tq, int64_t Tk) {
    MT_CHECK(q_slot || Tq == Tk, "msa: %lld query rows of %lld keys need their slots",
             (long long)Tq, (long long)Tk);
    for (int64_t i = 0; q_slot && i < Tq; i++)
        MT_CHECK(q_slot[i] >= 0 && q_slot[i] < Tk && (i == 0 || q_slot[i] > q_slot[i - 1]),
                 "msa: q_slot[%lld] = %d is not in [0, %lld) or not above the one before",
                 (long long)i, q_slot[i], (long long)Tk);
}

void cpu_msa_topk_row(int32_t *out, const float *bs, int32_t local, int topk) {
    out[0] = local;
    /* the topk-1 best of blocks 0 .. local-1 kept sorted: descending score, and a later
     * (higher) block only passes an equal score if strictly greater, so ties keep the lower id */
    int n = 0;
    const int cap = topk - 1;
    float sc[cap > 0 ? cap : 1];
    for (int32_t blk = 0; blk < local && cap > 0; blk++) {
        const float s = bs[blk];
        if (!(s > -INFINITY)) continue; /* NaN, or no visible key */
        if (n == cap && !(s > sc[n - 1])) continue;
        int p = n < cap ? n++ : n - 1;
        while (p > 0 && s > sc[p - 1]) {
            sc[p] = sc[p - 1];
            out[1 + p] = out[p];
            p--;
        }
        sc[p] = s;
        out[1 + p] = blk;
    }
    for (int s = 1 + n; s < topk; s++) out[s] = -1;
}

int64_t cpu_msa_select_work(int64_t Tk, int block) {
    const int64_t nb = Tk > 0 ? (Tk - 1) / block + 1 : 1;
    return (int64_t)omp_get_max_threads() * MSA_TILE * nb;
}

/* One (b, h) and query tile [i0, i0 + ni) of rows (key slots msa_slot(qs, i), increasing):
 * block scores of every row, by sgemm over the key tiles from the tile's first sample start to
 * its last slot, then the top-k. bs (MSA_TILE, nb) scratch. */
static void select_tile(int32_t *idx_bh, float *bs, int64_t nb, const float *iqb, const float *ikb,
                        const int32_t *pb, const int32_t *qs, int64_t i0, int ni, int64_t Hi,
                        int64_t Di, int block, int topk) {
    float S[MSA_TILE * MSA_TILE];
    int64_t slot[MSA_TILE] = {0};
    for (int a = 0; a < ni; a++) {
        slot[a] = msa_slot(qs, i0 + a);
        const int32_t local = pb[slot[a]] / block;
        for (int32_t blk = 0; blk <= local; blk++) bs[a * nb + blk] = -INFINITY;
    }
    const int64_t j_lo = slot[0] - pb[slot[0]], j_end = slot[ni - 1] + 1;
    for (int64_t j0 = j_lo; j0 < j_end; j0 += MSA_TILE) {
        const int nj = (int)(j_end - j0 < MSA_TILE ? j_end - j0 : MSA_TILE);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, nj, (int)Di, 1.0f,
                    iqb + i0 * Hi * Di, (int)(Hi * Di), ikb + j0 * Di, (int)Di, 0.0f, S, MSA_TILE);
        for (int a = 0; a < ni; a++) {
            const int64_t t = slot[a], rs = t - pb[t];
            const int64_t c0 = rs > j0 ? rs - j0 : 0, c1 = t - j0 < nj - 1 ? t - j0 : nj - 1;
            float *restrict row = bs + a * nb;
            const float *restrict s = S + (size_t)a * MSA_TILE;
            for (int64_t c = c0; c <= c1; c++) {
                const int32_t blk = pb[j0 + c] / block;
                if (s[c] > row[blk]) row[blk] = s[c];
            }
        }
    }
    for (int a = 0; a < ni; a++)
        cpu_msa_topk_row(idx_bh + (i0 + a) * topk, bs + a * nb, pb[slot[a]] / block, topk);
}

void cpu_msa_select_forward(int32_t *idx, float *work, const float *iq, const float *ik,
                            const int32_t *pos, const int32_t *seg, const int32_t *q_slot,
                            int64_t B, int64_t Tq, int64_t Tk, int64_t Hi, int64_t Di, int block,
                            int topk) {
    MT_CHECK(block >= 1 && topk >= 1 && topk <= CPU_MSA_MAX_TOPK,
             "msa_select: block %d, topk %d (at most %d)", block, topk, CPU_MSA_MAX_TOPK);
    cpu_msa_check_rows(pos, seg, B, Tk);
    cpu_msa_check_slots(q_slot, Tq, Tk);
    const int64_t nb = Tk > 0 ? (Tk - 1) / block + 1 : 1, nt = (Tq + MSA_TILE - 1) / MSA_TILE;
    /* (b, h, query tile) are independent; later tiles see more keys: dynamic scheduling */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t w = 0; w < B * Hi * nt; w++) {
        const int64_t b = w / (Hi * nt), h = (w / nt) % Hi, i0 = (w % nt) * MSA_TILE;
        const int ni = (int)(Tq - i0 < MSA_TILE ? Tq - i0 : MSA_TILE);
        float *bs = work + (size_t)omp_get_thread_num() * MSA_TILE * nb;
        select_tile(idx + (b * Hi + h) * Tq * topk, bs, nb, iq + (b * Tq * Hi + h) * Di,
                    ik + b * Tk * Di, pos + b * Tk, q_slot, i0, ni, Hi, Di, block, topk);
    }
}

int64_t cpu_msa_select_decode_work(int64_t B, int64_t Hi, int64_t t_max, int block) {
    return B * Hi * ((t_max - 1) / block + 1);
}

void cpu_msa_select_decode(int32_t *idx, float *work, const float *iq, const float *ik_cache,
                           const int32_t *t_len, int64_t B, int64_t t_max, int64_t Hi, int64_t Di,
                           int block, int topk) {
    MT_CHECK(block >= 1 && topk >= 1 && topk <= CPU_MSA_MAX_TOPK,
             "msa_select decode: block %d, topk %d (at most %d)", block, topk, CPU_MSA_MAX_TOPK);
    for (int64_t b = 0; b < B; b++)
        MT_CHECK(t_len[b] >= 1 && t_len[b] <= t_max,
                 "msa_select decode: row %lld: t_len %d not in [1, Tmax=%lld]", (long long)b,
                 t_len[b], (long long)t_max);
    const int64_t nb = (t_max - 1) / block + 1;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < B * Hi; row++) {
        const int64_t b = row / Hi, n = t_len[b];
        const int32_t local = (int32_t)((n - 1) / block);
        float *restrict bs = work + row * nb;
        const float *qr = iq + row * Di, *kb = ik_cache + b * t_max * Di;
        for (int32_t blk = 0; blk <= local; blk++) bs[blk] = -INFINITY;
        for (int64_t j = 0; j < n; j++) {
            const float *kj = kb + j * Di;
            float s = 0.0f;
            for (int64_t d = 0; d < Di; d++) s += qr[d] * kj[d];
            if (s > bs[j / block]) bs[j / block] = s;
        }
        cpu_msa_topk_row(idx + row * topk, bs, local, topk);
    }
}

/* ---- node adapter: in[0] iq (B,Tq,Hi,Di), in[1] ik (B,Tk,1,Di), in[2] pos (B,Tk) I32, in[3]
 * seg (B,Tk) I32 or NULL, in[4] q_slot (Tq) I32 or NULL (Tq = Tk); out idx (B,Hi,Tq,topk) I32;
 * ip[0] block, ip[1] topk; no saved buffers, no gradient (the output is integer: the node never
 * reaches the tape) ---- */

void cpu_msa_select_fwd_node(const mt_node *n) {
    const mt_tensor *iq = n->in[0], *ik = n->in[1], *pos = n->in[2], *seg = n->in[3];
    const mt_tensor *qs = n->in[4];
    const int64_t Tk = ik->shape[1];
    const int block = (int)n->ip[0], topk = (int)n->ip[1];
    float *work = mt_node_scratch(n, sizeof(float) * (size_t)cpu_msa_select_work(Tk, block),
                                  "msa_select block scores");
    cpu_msa_select_forward(n->out->data, work, iq->data, ik->data, pos->data,
                           seg ? seg->data : NULL, qs ? qs->data : NULL, iq->shape[0], iq->shape[1],
                           Tk, iq->shape[2], iq->shape[3], block, topk);
}

void cpu_msa_select_bwd_node(const mt_node *n) { (void)n; }
