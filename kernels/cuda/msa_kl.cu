/* msa_kl.cu: the MSA indexer's sparse-KL loss (spec 5.2-5.3) on the device, mirroring
 * kernels/cpu/msa_kl.c (the formulas are in its header): per counted query (b, t) and index
 * head h over the support M_h(t), the teacher mean Pbar_h of the group's G softmaxes of
 * scale q_g.k_h, the student Q_h = softmax index_scale iq_h.ik, KL(Pbar || Q).
 *
 * Warp kernels, dims over the lanes, products summed in double (msa_dot), softmaxes and sums
 * in double:
 *   rows:    warp per (b, t, h): the G teacher lse and the student lse by online
 *            log-sum-exp over the support (kept for the backward), then the row's KL
 *            (forward: into row_kl, summed by one block in a fixed order) or diq (backward).
 *   dik:     warp per key row (b, j): every index head's queries that chose j's block (the
 *            selection's inverse, msa_attention.cu), t >= j and counted; one writer per row: no
 *            atomics, deterministic; a key no counted query sees is left untouched.
 * Pbar is recomputed per key from the saved lse (G dots), so nothing of size support is kept. */
#include "msa.cuh"

struct kl_dims {
    int64_t B, T, H, Hkv, D, Di;
    int block, topk;
    double scale, iscale;
};

/* the teacher mean at key j of (b, t, h), from the G heads' lse */
__device__ inline double kl_pbar(const float *q, const float *kj, const double *lse_t, int64_t bt,
                                 int64_t h, const kl_dims &a, int lane) {
    const int64_t G = a.H / a.Hkv;
    double pbar = 0;
    for (int64_t g = h * G; g < (h + 1) * G; g++) {
        float qg[MSA_R];
        msa_load(qg, q + (bt * a.H + g) * a.D, (int)a.D, lane);
        pbar += exp(a.scale * msa_dot(qg, kj, (int)a.D, lane) - lse_t[bt * a.H + g]);
    }
    return pbar / (double)G;
}

/* Warp per (b, t, h), counted rows only: lse_t (B,T,H) and lse_s (B,T,Hi) filled; forward
 * (row_kl not NULL): row_kl[bt*Hi + h] = KL of the row; backward (diq not NULL):
 * diq_h(t) += c sum_j (Q - Pbar) ik(j), c = gout cf; neither: the lse only. */
__global__ void kl_rows_kernel(double *row_kl, float *diq, double *lse_t, double *lse_s,
                               const float *q, const float *k, const float *iq, const float *ik,
                               const int32_t *idx, const int32_t *pos, const float *mask,
                               const float *gout, double cf, kl_dims a) {
    const int64_t w = msa_warp_id();
    const int lane = threadIdx.x & 31, D = (int)a.D, Di = (int)a.Di;
    const int64_t Hi = a.Hkv, G = a.H / a.Hkv;
    if (w >= a.B * a.T * Hi) return;
    const int64_t bt = w / Hi, h = w % Hi, b = bt / a.T, t = bt % a.T;
    if (mask && mask[bt] == 0.0f) {
        if (row_kl && lane == 0) row_kl[w] = 0;
        return;
    }
    const int32_t pt = pos[bt], *sel = idx + ((b * Hi + h) * a.T + t) * a.topk;
    const float *kb = k + (b * a.T * a.Hkv + h) * a.D, *ikb = ik + b * a.T * a.Di;
    const int64_t ldk = a.Hkv * a.D;
    /* the teacher heads' lse */
    for (int64_t g = h * G; g < (h + 1) * G; g++) {
        float qg[MSA_R];
        msa_load(qg, q + (bt * a.H + g) * a.D, D, lane);
        double m = -INFINITY, l = 0;
        for (int s = 0; s < a.topk && sel[s] >= 0; s++) {
            int64_t j0, j1;
            msa_keys(t, pt, sel[s], a.block, &j0, &j1);
            for (int64_t j = j0; j <= j1; j++) {
                const double x = a.scale * msa_dot(qg, kb + j * ldk, D, lane);
                if (x > m) {
                    l = l * exp(m - x) + 1.0;
                    m = x;
                } else {
                    l += exp(x - m);
                }
            }
        }
        if (lane == 0) lse_t[bt * a.H + g] = m + log(l);
    }
    /* the student's */
    float iqr[MSA_R];
    msa_load(iqr, iq + w * a.Di, Di, lane);
    double m = -INFINITY, l = 0;
    for (int s = 0; s < a.topk && sel[s] >= 0; s++) {
        int64_t j0, j1;
        msa_keys(t, pt, sel[s], a.block, &j0, &j1);
        for (int64_t j = j0; j <= j1; j++) {
            const double z = a.iscale * msa_dot(iqr, ikb + j * a.Di, Di, lane);
            if (z > m) {
                l = l * exp(m - z) + 1.0;
                m = z;
            } else {
                l += exp(z - m);
            }
        }
    }
    const double ls = m + log(l);
    if (lane == 0) lse_s[w] = ls;
    if (!row_kl && !diq) return; /* the dik pass's lse only */
    __syncwarp();                /* lane 0's lse_t writes, read by every lane below */
    double kl = 0, acc[MSA_R];
#pragma unroll
    for (int i = 0; i < MSA_R; i++) acc[i] = 0;
    for (int s = 0; s < a.topk && sel[s] >= 0; s++) {
        int64_t j0, j1;
        msa_keys(t, pt, sel[s], a.block, &j0, &j1);
        for (int64_t j = j0; j <= j1; j++) {
            const float *ikj = ikb + j * a.Di;
            const double pbar = kl_pbar(q, kb + j * ldk, lse_t, bt, h, a, lane);
            const double z = a.iscale * msa_dot(iqr, ikj, Di, lane);
            if (row_kl) {
                if (pbar > 0) kl += pbar * (log(pbar) - (z - ls));
                continue;
            }
            const double ds = exp(z - ls) - pbar;
#pragma unroll
            for (int i = 0; i < MSA_R; i++) {
                const int d = lane + 32 * i;
                if (d < Di) acc[i] += ds * (double)ikj[d];
            }
        }
    }
    if (row_kl) {
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

__global__ void kl_dik_kernel(float *dik, const double *lse_t, const double *lse_s, const float *q,
                              const float *k, const float *iq, const float *ik, const int32_t *inv,
                              const int32_t *pos, const float *mask, const float *gout, double cf,
                              kl_dims a) {
    const int64_t w = msa_warp_id();
    const int lane = threadIdx.x & 31, Di = (int)a.Di;
    const int64_t Hi = a.Hkv;
    if (w >= a.B * a.T) return;
    const int64_t b = w / a.T, j = w % a.T;
    const int64_t jb = j - pos[w] % a.block; /* the first slot of j's block */
    float ikr[MSA_R];
    msa_load(ikr, ik + w * a.Di, Di, lane);
    double acc[MSA_R];
#pragma unroll
    for (int i = 0; i < MSA_R; i++) acc[i] = 0;
    bool any = false;
    for (int64_t h = 0; h < Hi; h++) {
        const int64_t bh = b * Hi + h;
        const int32_t *off = inv + bh * (a.T + 1);
        const int32_t *list = inv + a.B * Hi * (a.T + 1) + bh * a.T * a.topk;
        const float *kj = k + (w * a.Hkv + h) * a.D;
        for (int32_t e = off[jb]; e < off[jb + 1]; e++) {
            const int64_t t = list[e], bt = b * a.T + t;
            if (t < j || (mask && mask[bt] == 0.0f)) continue;
            any = true;
            const float *iqh = iq + (bt * Hi + h) * a.Di;
            const double pbar = kl_pbar(q, kj, lse_t, bt, h, a, lane);
            const double ds =
                exp(a.iscale * msa_dot(ikr, iqh, Di, lane) - lse_s[bt * Hi + h]) - pbar;
#pragma unroll
            for (int i = 0; i < MSA_R; i++) {
                const int d = lane + 32 * i;
                if (d < Di) acc[i] += ds * (double)iqh[d];
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

/* ---- node adapters: in[0] q (B,T,H,D), in[1] k (B,T,Hkv,D) (no gradient), in[2] iq
 * (B,T,Hi,Di), in[3] ik (B,T,1,Di), in[4] idx (B,Hi,T,topk) I32, in[5] pos (B,T) I32, in[6] seg
 * (B,T) I32 or NULL, in[7] mask (B,T) F32 or NULL; out the scalar loss; ip[0] block;
 * fp[0] scale, fp[1] index_scale, fp[2] coef, fp[3] denom; no saved buffers ---- */

static kl_dims kl_node_dims(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *iq = n->in[2], *idx = n->in[4];
    kl_dims a;
    a.B = q->shape[0];
    a.T = q->shape[1];
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
    return a;
}

void cuda_msa_kl_fwd_node(const mt_node *n) {
    const kl_dims a = kl_node_dims(n);
    const mt_tensor *q = n->in[0], *k = n->in[1], *iq = n->in[2], *ik = n->in[3], *idx = n->in[4];
    const mt_tensor *pos = n->in[5], *seg = n->in[6], *mask = n->in[7];
    cuda_msa_check("msa_kl (cuda)", cuda_i32(pos), seg ? cuda_i32(seg) : NULL, cuda_i32(idx), a.B,
                   a.Hkv, a.T, a.block, a.topk);
    const int64_t rows = a.B * a.T * a.Hkv;
    double *row_kl = (double *)mt_node_scratch(
        n, sizeof(double) * (size_t)(rows + a.B * a.T * a.H + rows + 1), "msa_kl rows");
    double *lse_t = row_kl + rows, *lse_s = lse_t + a.B * a.T * a.H;
    if (rows > 0) {
        kl_rows_kernel<<<msa_warp_blocks(rows), 32 * MSA_WARPS>>>(
            row_kl, NULL, lse_t, lse_s, cuda_f32(q), cuda_f32(k), cuda_f32(iq), cuda_f32(ik),
            cuda_i32(idx), cuda_i32(pos), mask ? cuda_f32(mask) : NULL, NULL, 0.0, a);
        CUDA_LAUNCH_CHECK("msa_kl forward (rows)");
    }
    const double f = (double)n->fp[2] / ((double)a.Hkv * (double)n->fp[3]);
    kl_sum_kernel<<<1, CUDA_THREADS>>>(cuda_f32(n->out), row_kl, rows, f);
    CUDA_LAUNCH_CHECK("msa_kl forward (sum)");
}

void cuda_msa_kl_bwd_node(const mt_node *n) {
    const mt_tensor *q = n->in[0], *k = n->in[1], *iq = n->in[2], *ik = n->in[3], *idx = n->in[4];
    const mt_tensor *pos = n->in[5], *mask = n->in[7];
    if (!iq->grad && !ik->grad) return;
    const kl_dims a = kl_node_dims(n);
    const int64_t rows = a.B * a.T * a.Hkv;
    if (rows == 0) return;
    /* c = gout cf, the loss's gradient gout read on the device */
    const float *gout = cuda_grad(n->out);
    const double cf = (double)n->fp[2] * (double)n->fp[1] / ((double)a.Hkv * (double)n->fp[3]);
    double *lse_t = (double *)mt_node_scratch(n, sizeof(double) * (size_t)(a.B * a.T * a.H + rows),
                                              "msa_kl lse");
    double *lse_s = lse_t + a.B * a.T * a.H;
    const float *mk = mask ? cuda_f32(mask) : NULL;
    /* diq, and both lse for the dik pass (diq NULL: the rows only fill the lse) */
    kl_rows_kernel<<<msa_warp_blocks(rows), 32 * MSA_WARPS>>>(
        NULL, cuda_grad(iq), lse_t, lse_s, cuda_f32(q), cuda_f32(k), cuda_f32(iq), cuda_f32(ik),
        cuda_i32(idx), cuda_i32(pos), mk, gout, cf, a);
    CUDA_LAUNCH_CHECK("msa_kl backward (rows, diq)");
    if (!ik->grad) return;
    const int32_t *inv =
        cuda_msa_inverse(n, cuda_i32(idx), cuda_i32(pos), a.B, a.Hkv, a.T, a.block, a.topk);
    kl_dik_kernel<<<msa_warp_blocks(a.B * a.T), 32 * MSA_WARPS>>>(
        cuda_grad(ik), lse_t, lse_s, cuda_f32(q), cuda_f32(k), cuda_f32(iq), cuda_f32(ik), inv,
        cuda_i32(pos), mk, gout, cf, a);
    CUDA_LAUNCH_CHECK("msa_kl backward (dik)");
}
