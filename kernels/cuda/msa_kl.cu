/* msa_kl.cu: the MSA indexer's sparse-KL loss (spec 5.2-5.3) on the device, mirroring
 * kernels/cpu/msa_kl.c (the formulas are in its header): per counted query (b, t) and index
 * head h over the support M_h(t), the teacher mean Pbar_h of the group's G softmaxes of
 * scale q_g.k_h, the student Q_h = softmax index_scale iq_h.ik, KL(Pbar || Q).
 *
 * Warp kernels, products exact in fp32 and summed in double, softmaxes and sums in double; the
 * logits one key (dik: one query) per lane against rows staged in shared memory, 32 at a time,
 * the gradient sums dims over the lanes with ds broadcast:
 *   rows:    warp per (b, t, h): the G teacher lse and the student lse by online
 *            log-sum-exp over the support (kept for the backward), then the row's KL
 *            (forward: into row_kl, summed by one block in a fixed order) or diq (backward).
 *   dik:     warp per key row (b, j): every index head's queries that chose j's block (the
 *            selection's inverse, msa_attention.cu), t >= j and counted; one writer per row: no
 *            atomics, deterministic; a key no counted query sees is left untouched.
 * Pbar is recomputed per key from the saved lse (G dots), so nothing of size support is kept. */
#include "msa.cuh"

struct kl_dims {
    int64_t B, Tq, Tk, H, Hkv, D, Di;
    int block, topk;
    double scale, iscale;
};

/* Per lane: the teacher mean at key row kj for query row bt (= b*Tq + i) of index head h, from
 * the G heads' lse (q rows read by every lane at once: broadcasts). */
__device__ inline double kl_pbar(const float *q, const float *kj, const double *lse_t, int64_t bt,
                                 int64_t h, const kl_dims &a) {
    const int64_t G = a.H / a.Hkv;
    double pbar = 0;
    for (int64_t g = h * G; g < (h + 1) * G; g++)
        pbar += exp(a.scale * msa_dot_lane(q + (bt * a.H + g) * a.D, kj, (int)a.D) -
                    lse_t[bt * a.H + g]);
    return pbar / (double)G;
}

/* log-sum-exp over the support of (t, sel) of f * (row x_s . key row j), one key per lane, 32
 * at a time (the running maximum per chunk), known to every lane */
__device__ inline double kl_support_lse(const float *xs, const float *keys, int64_t ld, int n,
                                        double f, const int32_t *sel, int64_t t, int32_t pt,
                                        const kl_dims &a, int lane) {
    double m = -INFINITY, l = 0;
    for (int s = 0; s < a.topk && sel[s] >= 0; s++) {
        int64_t j0, j1;
        msa_keys(t, pt, sel[s], a.block, &j0, &j1);
        for (int64_t c0 = j0; c0 <= j1; c0 += 32) {
            const int64_t j = c0 + lane;
            const double x = j <= j1 ? f * msa_dot_lane(xs, keys + j * ld, n) : -INFINITY;
            const double cm = msa_warp_max(x);
            if (cm > m) {
                l *= exp(m - cm);
                m = cm;
            }
            if (j <= j1) l += exp(x - m);
        }
    }
    return m + log(cuda_warp_sum(l));
}

/* Warp per query row (b, i, h) (i at key slot t), counted rows only: lse_t (B,Tq,H) and lse_s
 * (B,Tq,Hi) filled; forward (row_kl not NULL): row_kl[bt*Hi + h] = KL of the row; backward
 * (diq not NULL): diq_h(i) += c sum_j (Q - Pbar) ik(j), c = gout cf; neither: the lse only. One
 * key per lane for the logits, then diq dims over the lanes with ds broadcast. */
__global__ void kl_rows_kernel(double *row_kl, float *diq, double *lse_t, double *lse_s,
                               const float *q, const float *k, const float *iq, const float *ik,
                               const int32_t *idx, const int32_t *pos, const int32_t *q_slot,
                               const float *mask, const float *gout, double cf, kl_dims a) {
    __shared__ float xsh[MSA_WARPS][MSA_MAX_D];
    __shared__ float iqsh[MSA_WARPS][MSA_MAX_D];
    const int64_t w = msa_warp_id();
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, D = (int)a.D, Di = (int)a.Di;
    const int64_t Hi = a.Hkv, G = a.H / a.Hkv;
    if (w >= a.B * a.Tq * Hi) return;
    const int64_t bt = w / Hi, h = w % Hi, b = bt / a.Tq, i = bt % a.Tq;
    if (mask && mask[bt] == 0.0f) {
        if (row_kl && lane == 0) row_kl[w] = 0;
        return;
    }
    const int64_t t = msa_q_slot(q_slot, i); /* bt: the query row, t: its key slot */
    const int32_t pt = pos[b * a.Tk + t], *sel = idx + ((b * Hi + h) * a.Tq + i) * a.topk;
    const float *kb = k + (b * a.Tk * a.Hkv + h) * a.D, *ikb = ik + b * a.Tk * a.Di;
    const int64_t ldk = a.Hkv * a.D;
    float *xs = xsh[wib], *iqs = iqsh[wib];
    /* the teacher heads' lse, then the student's */
    for (int64_t g = h * G; g < (h + 1) * G; g++) {
        msa_stage(xs, q + (bt * a.H + g) * a.D, D, lane);
        const double ls_g = kl_support_lse(xs, kb, ldk, D, a.scale, sel, t, pt, a, lane);
        if (lane == 0) lse_t[bt * a.H + g] = ls_g;
    }
    msa_stage(iqs, iq + w * a.Di, Di, lane);
    const double ls = kl_support_lse(iqs, ikb, a.Di, Di, a.iscale, sel, t, pt, a, lane);
    if (lane == 0) lse_s[w] = ls;
    if (!row_kl && !diq) return; /* the dik pass's lse only */
    __syncwarp();                /* lane 0's lse_t writes, read by every lane below */
    double kl = 0, acc[MSA_R];
#pragma unroll
    for (int i = 0; i < MSA_R; i++) acc[i] = 0;
    for (int s = 0; s < a.topk && sel[s] >= 0; s++) {
        int64_t j0, j1;
        msa_keys(t, pt, sel[s], a.block, &j0, &j1);
        for (int64_t c0 = j0; c0 <= j1; c0 += 32) {
            const int64_t j = c0 + lane;
            const int nc = (int)(j1 - c0 + 1 < 32 ? j1 - c0 + 1 : 32);
            double ds = 0;
            if (j <= j1) {
                const double pbar = kl_pbar(q, kb + j * ldk, lse_t, bt, h, a);
                const double z = a.iscale * msa_dot_lane(iqs, ikb + j * a.Di, Di);
                if (row_kl && pbar > 0) kl += pbar * (log(pbar) - (z - ls));
                ds = exp(z - ls) - pbar;
            }
            if (row_kl) continue;
            for (int u = 0; u < nc; u++) {
                const double du = __shfl_sync(0xffffffffu, ds, u);
                const float *ikj = ikb + (c0 + u) * a.Di;
#pragma unroll
                for (int i = 0; i < MSA_R; i++) {
                    const int d = lane + 32 * i;
                    if (d < Di) acc[i] += du * (double)ikj[d];
                }
            }
        }
    }
    if (row_kl) {
        kl = cuda_warp_sum(kl);
        if (lane == 0) row_kl[w] = kl;
        return;
    }
    const double c = (double)*gout * cf;
    float *gq = diq + w * a.Di;
#pragma unroll
    for (int i = 0; i < MSA_R; i++) {
        const int d = lane + 32 * i;
        if (d < Di) gq[d] += (float)(c * acc[i]);
    }
}

/* loss = f sum row_kl, one block, a fixed order */
__global__ void kl_sum_kernel(float *loss, const double *row_kl, int64_t n, double f) {
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += row_kl[i];
    s = cuda_block_sum(s);
    if (threadIdx.x == 0) *loss = (float)(f * s);
}

/* warp per key row (b, j) of Tk: for each index head h, the counted queries at slots t >= j that
 * chose j's block, one per lane (k_h(j) and ik(j) staged in shared memory), then dik += c ds
 * iq_h(t) dims over the lanes with ds broadcast */
__global__ void kl_dik_kernel(float *dik, const double *lse_t, const double *lse_s, const float *q,
                              const float *k, const float *iq, const float *ik, const int32_t *inv,
                              const int32_t *pos, const int32_t *q_slot, const float *mask,
                              const float *gout, double cf, kl_dims a) {
    __shared__ float ksh[MSA_WARPS][MSA_MAX_D];
    __shared__ float iksh[MSA_WARPS][MSA_MAX_D];
    const int64_t w = msa_warp_id();
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, D = (int)a.D, Di = (int)a.Di;
    const int64_t Hi = a.Hkv;
    if (w >= a.B * a.Tk) return;
    const int64_t b = w / a.Tk, j = w % a.Tk;
    const int64_t jb = j - pos[w] % a.block; /* the first slot of j's block */
    float *ks = ksh[wib], *iks = iksh[wib];
    msa_stage(iks, ik + w * a.Di, Di, lane);
    double acc[MSA_R];
#pragma unroll
    for (int i = 0; i < MSA_R; i++) acc[i] = 0;
    bool any = false;
    for (int64_t h = 0; h < Hi; h++) {
        const int64_t bh = b * Hi + h;
        const int32_t *off = inv + bh * (a.Tk + 1);
        const int32_t *list = inv + a.B * Hi * (a.Tk + 1) + bh * a.Tq * a.topk;
        int32_t e0 = off[jb];
        while (e0 < off[jb + 1] && msa_q_slot(q_slot, list[e0]) < j)
            e0++; /* choosers before j do not see it */
        if (e0 == off[jb + 1]) continue;
        msa_stage(ks, k + (w * a.Hkv + h) * a.D, D, lane);
        for (int32_t c0 = e0; c0 < off[jb + 1]; c0 += 32) {
            const int32_t e = c0 + lane;
            const int nc = off[jb + 1] - c0 < 32 ? off[jb + 1] - c0 : 32;
            int64_t bt = -1; /* the lane's query row, -1: none or not counted */
            double ds = 0;
            if (e < off[jb + 1]) {
                bt = b * a.Tq + list[e];
                if (mask && mask[bt] == 0.0f) bt = -1;
            }
            if (bt >= 0) {
                const double pbar = kl_pbar(q, ks, lse_t, bt, h, a);
                ds = exp(a.iscale * msa_dot_lane(iks, iq + (bt * Hi + h) * a.Di, Di) -
                         lse_s[bt * Hi + h]) -
                     pbar;
            }
            const unsigned counted = __ballot_sync(0xffffffffu, bt >= 0); /* every lane */
            any = any || counted != 0;
            for (int u = 0; u < nc; u++) {
                const int64_t bu = __shfl_sync(0xffffffffu, bt, u);
                const double du = __shfl_sync(0xffffffffu, ds, u);
                if (bu < 0) continue;
                const float *iqh = iq + (bu * Hi + h) * a.Di;
#pragma unroll
                for (int i = 0; i < MSA_R; i++) {
                    const int d = lane + 32 * i;
                    if (d < Di) acc[i] += du * (double)iqh[d];
                }
            }
        }
    }
    if (!any) return;
    const double c = (double)*gout * cf;
#pragma unroll
    for (int i = 0; i < MSA_R; i++) {
        const int d = lane + 32 * i;
        if (d < Di) dik[w * a.Di + d] += (float)(c * acc[i]);
    }
}

/* ---- node adapters: in[0] q (B,Tq,H,D), in[1] k (B,Tk,Hkv,D) (no gradient), in[2] iq
 * (B,Tq,Hi,Di), in[3] ik (B,Tk,1,Di), in[4] idx (B,Hi,Tq,topk) I32, in[5] pos (B,Tk) I32, in[6]
 * seg (B,Tk) I32 or NULL, in[7] mask (B,Tq) F32 or NULL, in[8] q_slot (Tq) I32 or NULL (Tq = Tk);
 * out the scalar loss; ip[0] block; fp[0] scale, fp[1] index_scale, fp[2] coef, fp[3] denom; no
 * saved buffers ---- */

static kl_dims kl_node_dims(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *iq = n->in[2], *idx = n->in[4];
    kl_dims a;
    a.B = q->shape[0];
    a.Tq = q->shape[1];
    a.Tk = k->shape[1];
    a.H = q->shape[2];
    a.Hkv = k->shape[2];
    a.D = q->shape[3];
    a.Di = iq->shape[3];
    a.block = (int)n->ip[0];
    a.topk = (int)idx->shape[3];
    a.scale = (double)n->fp[0];
    a.iscale = (double)n->fp[1];
    MT_CHECK(a.Hkv > 0 && a.H % a.Hkv == 0 && a.D >= 1 && a.D <= MSA_MAX_D && a.Di >= 1 &&
                 a.Di <= MSA_MAX_D && a.block >= 1 && a.topk >= 1 && n->fp[3] > 0,
             "msa_kl (cuda): H=%lld Hkv=%lld D=%lld Di=%lld block=%d topk=%d denom=%g (D, Di in "
             "[1, %d])",
             (long long)a.H, (long long)a.Hkv, (long long)a.D, (long long)a.Di, a.block, a.topk,
             (double)n->fp[3], MSA_MAX_D);
    MT_CHECK(n->in[8] || a.Tq == a.Tk, "msa_kl (cuda): %lld query rows, %lld keys, no q_slot",
             (long long)a.Tq, (long long)a.Tk);
    return a;
}

void cuda_msa_kl_fwd_node(const mt_node *n) {
    const kl_dims a = kl_node_dims(n);
    const mt_tensor *q = n->in[0], *k = n->in[1], *iq = n->in[2], *ik = n->in[3], *idx = n->in[4];
    const mt_tensor *pos = n->in[5], *seg = n->in[6], *mask = n->in[7];
    const int32_t *q_slot = n->in[8] ? cuda_i32(n->in[8]) : NULL;
    cuda_msa_check("msa_kl (cuda)", cuda_i32(pos), seg ? cuda_i32(seg) : NULL, q_slot,
                   cuda_i32(idx), a.B, a.Hkv, a.Tq, a.Tk, a.block, a.topk);
    const int64_t rows = a.B * a.Tq * a.Hkv;
    double *row_kl = (double *)mt_node_scratch(
        n, sizeof(double) * (size_t)(rows + a.B * a.Tq * a.H + rows + 1), "msa_kl rows");
    double *lse_t = row_kl + rows, *lse_s = lse_t + a.B * a.Tq * a.H;
    if (rows > 0) {
        kl_rows_kernel<<<msa_warp_blocks(rows), 32 * MSA_WARPS>>>(
            row_kl, NULL, lse_t, lse_s, cuda_f32(q), cuda_f32(k), cuda_f32(iq), cuda_f32(ik),
            cuda_i32(idx), cuda_i32(pos), q_slot, mask ? cuda_f32(mask) : NULL, NULL, 0.0, a);
        CUDA_LAUNCH_CHECK("msa_kl forward (rows)");
    }
    const double f = (double)n->fp[2] / ((double)a.Hkv * (double)n->fp[3]);
    kl_sum_kernel<<<1, CUDA_THREADS>>>(cuda_f32(n->out), row_kl, rows, f);
    CUDA_LAUNCH_CHECK("msa_kl forward (sum)");
}

void cuda_msa_kl_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *iq = n->in[2], *ik = n->in[3], *idx = n->in[4];
    const mt_tensor *pos = n->in[5], *mask = n->in[7];
    const int32_t *q_slot = n->in[8] ? cuda_i32(n->in[8]) : NULL;
    if (!iq->grad && !ik->grad) return;
    const kl_dims a = kl_node_dims(n);
    const int64_t rows = a.B * a.Tq * a.Hkv;
    if (rows == 0) return;
    /* c = gout cf, the loss's gradient gout read on the device */
    const float *gout = cuda_grad(n->out);
    const double cf = (double)n->fp[2] * (double)n->fp[1] / ((double)a.Hkv * (double)n->fp[3]);
    double *lse_t = (double *)mt_node_scratch(n, sizeof(double) * (size_t)(a.B * a.Tq * a.H + rows),
                                              "msa_kl lse");
    double *lse_s = lse_t + a.B * a.Tq * a.H;
    const float *mk = mask ? cuda_f32(mask) : NULL;
    /* diq, and both lse for the dik pass (diq NULL: the rows only fill the lse) */
    kl_rows_kernel<<<msa_warp_blocks(rows), 32 * MSA_WARPS>>>(
        NULL, cuda_grad(iq), lse_t, lse_s, cuda_f32(q), cuda_f32(k), cuda_f32(iq), cuda_f32(ik),
        cuda_i32(idx), cuda_i32(pos), q_slot, mk, gout, cf, a);
    CUDA_LAUNCH_CHECK("msa_kl backward (rows, diq)");
    if (!ik->grad) return;
    const int32_t *inv = cuda_msa_inverse(n, cuda_i32(idx), cuda_i32(pos), q_slot, a.B, a.Hkv, a.Tq,
                                          a.Tk, a.block, a.topk);
    kl_dik_kernel<<<msa_warp_blocks(a.B * a.Tk), 32 * MSA_WARPS>>>(
        cuda_grad(ik), lse_t, lse_s, cuda_f32(q), cuda_f32(k), cuda_f32(iq), cuda_f32(ik), inv,
        cuda_i32(pos), q_slot, mk, gout, cf, a);
    CUDA_LAUNCH_CHECK("msa_kl backward (dik)");
}
