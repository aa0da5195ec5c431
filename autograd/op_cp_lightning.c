/* op_cp_lightning.c: lightning attention under context parallelism (ops.h mt_cp_lightning;
 * the layout of context_parallel.h). The node work is backend-independent apart from the
 * kernels a backend passes in (mt_cp_lightning_kernels: kernels/cpu/cp_lightning.c,
 * kernels/cuda/cp_lightning.cu); the exchanges go through the group's hooks on backend memory.
 *
 * Rank r holds global chunks j = r and 2C-1-r of every row, n = Tl/2 tokens each; its qkv
 * (B,Tl,H,3D) is (2B,n,H,3D): 2B rows of one chunk, row 2b+x = local chunk x of row b. For a
 * global chunk j of row b: S_loc(j) its final state from zero (its last segment only), bnd(j)
 * whether a segment starts at its first token (seg differs from the previous chunk's last
 * token), keep(j) whether no segment starts anywhere in it. With Lambda_h = exp(-lambda_h n):
 *   S_in(0) = 0,  S_in(j+1) = [keep(j)] Lambda S_in(j) + S_loc(j)
 * i.e. S_in(j) = sum_{i<j} W(j,i) S_loc(i), W(j,i) = prod_{i<l<j} [keep(l)] Lambda, and chunk j
 * runs from s0(j) = [!bnd(j)] S_in(j) (a reset inside the chunk is the kernel's own business).
 * Forward: one all-gather of every rank's two S_loc (plus the segment ids at the chunks' ends
 * and an inner-reset flag, bit-copied into the same float buffer), the scan as the weights W on
 * the host, s0 = W S_loc on the backend (kernels->mix), then the block form from s0.
 * Backward: G(j) = the gradient of s0(j) through chunk j's readout (kernels->state_grad); one
 * all-gather of every rank's two G; the final-state gradient of chunk i is
 *   dsT(i) = sum_{j>i} [!bnd(j)] W(j,i) G(j)
 * (the reverse scan), and the block backward from s0 with dsT adds every path into k and v.
 * Weights are doubles, every mix sums in double and rounds once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context_parallel.h"
#include "ops.h"

typedef struct {
    const mt_cp_group *g;
    uint8_t *flags; /* (B, 2C): bit 0 keep, bit 1 bnd; filled by the forward for the backward */
} cp_info;

/* per local chunk row (b, x): the segment ids of its first and last tokens, and 1 when a
 * segment starts inside it (t > 0 of the chunk) */
enum { CP_META = 3 };

static void cp_dims(const mt_node *n, int *B, int *n_tok, int *H, int *D) {
    const mt_tensor *qkv = n->in[0];
    *B = (int)qkv->shape[0];
    *n_tok = (int)(qkv->shape[1] / 2);
    *H = (int)qkv->shape[2];
    *D = (int)(qkv->shape[3] / 3);
}

mt_tensor *mt_cp_lightning(mt_ctx *c, mt_tensor *qkv, mt_tensor *decay, mt_tensor *seg, int block,
                           const mt_cp_group *group) {
    if (!group || group->size == 1) return mt_lightning(c, qkv, decay, seg, block);
    MT_CHECK(group->size >= 2 && group->rank >= 0 && group->rank < group->size && group->allgather,
             "cp lightning: group rank %d of size %d (or its allgather hook) is invalid",
             group->rank, group->size);
    MT_CHECK(qkv->dtype == MT_F32 && qkv->ndim == 4 && qkv->shape[3] % 3 == 0,
             "cp lightning: qkv %s %s %s must be f32 (B,Tl,H,3D)", qkv->name, mt_shape_str(qkv),
             mt_dtype_name(qkv->dtype));
    const int64_t B = qkv->shape[0], Tl = qkv->shape[1], H = qkv->shape[2], D = qkv->shape[3] / 3;
    MT_CHECK(Tl >= 2 && Tl % 2 == 0 && B >= 1 && H >= 1 && D >= 1 && B * Tl <= INT32_MAX,
             "cp lightning: qkv %s %s: the local tokens Tl must be even (two chunks of T/(2C))",
             qkv->name, mt_shape_str(qkv));
    MT_CHECK(decay->dtype == MT_F32 && decay->ndim == 1 && decay->shape[0] == H &&
                 !decay->requires_grad,
             "cp lightning: decay %s %s must be f32 (H) with H = %lld and no gradient", decay->name,
             mt_shape_str(decay), (long long)H);
    if (seg)
        MT_CHECK(seg->dtype == MT_I32 && seg->ndim == 2 && seg->shape[0] == B &&
                     seg->shape[1] == Tl,
                 "cp lightning: seg %s %s must be i32 (B,Tl) = (%lld,%lld)", seg->name,
                 mt_shape_str(seg), (long long)B, (long long)Tl);
    MT_CHECK(block >= 0, "cp lightning: block = %d must be >= 0", block);

    mt_tensor *out = mt_tensor_new(c, MT_F32, 4, (int64_t[]){B, Tl, H, D}, "cp_lightning");
    mt_tensor *in[3] = {qkv, decay, seg};
    mt_node *n = mt_node_begin(c, MT_OP_CP_LIGHTNING, out, 3, in);
    n->ip[0] = block > 0 ? block : Tl / 2;
    n->ip[1] = mt_gemm_mode(c, "cp lightning");
    n->saved[0] = mt_tensor_new(c, MT_F32, 4, (int64_t[]){2 * B, H, D, D}, "cp_lightning s0");
    cp_info *info = mt_arena_alloc(&c->host, sizeof(cp_info), "cp lightning info");
    info->g = group;
    info->flags = mt_arena_alloc(&c->host, (size_t)B * 2 * group->size, "cp lightning flags");
    n->host = info;
    mt_node_run(c, n);
    return out;
}

/* The local chunk x of rank q holding global chunk j. */
static void cp_owner(int j, int C, int *q, int *x) {
    *x = j < C ? 0 : 1;
    *q = j < C ? j : 2 * C - 1 - j;
}

/* W(j,i) for row b, head h: 0 unless i < j and chunk j takes its incoming state. */
static double cp_weight(const uint8_t *fl, double Lam, int j, int i) {
    if (i >= j || (fl[j] & 2)) return 0.0;
    double w = 1.0;
    for (int l = i + 1; l < j; l++) w *= (fl[l] & 1) ? Lam : 0.0;
    return w;
}

/* The mix weights and source offsets of this rank's 2B*H blocks (b, x, h) over the 2C gathered
 * blocks of each: forward W(j, i) (the states S_loc(i)), reverse W(i, j) (the gradients G(i)),
 * j the block's global chunk; per_rank floats a rank in the gathered buffer. */
static void cp_weights(const cp_info *in, const double *lam, int B, int n_tok, int H, int64_t DD,
                       int64_t per_rank, bool reverse, double *w, int64_t *off) {
    const int C = in->g->size, r = in->g->rank, ni = 2 * C;
    for (int b = 0; b < B; b++)
        for (int x = 0; x < 2; x++)
            for (int h = 0; h < H; h++) {
                const int p = (b * 2 + x) * H + h, j = mt_cp_chunk_of(r, C, x);
                const double Lam = exp(-lam[h] * n_tok);
                const uint8_t *fl = in->flags + (size_t)b * ni;
                for (int i = 0; i < ni; i++) {
                    int q, xi;
                    cp_owner(i, C, &q, &xi);
                    w[(size_t)p * ni + i] =
                        reverse ? cp_weight(fl, Lam, i, j) : cp_weight(fl, Lam, j, i);
                    off[(size_t)p * ni + i] = q * per_rank + ((int64_t)(b * 2 + xi) * H + h) * DD;
                }
            }
}

/* y (2B,H,D,D) = the weighted sums of the gathered blocks (backend memory). */
static void cp_mix(const mt_node *n, const mt_cp_lightning_kernels *k, float *y, const float *x,
                   int64_t per_rank, bool reverse) {
    const mt_backend *be = n->ctx->be;
    const cp_info *in = n->host;
    int B, n_tok, H, D;
    cp_dims(n, &B, &n_tok, &H, &D);
    const int np = 2 * B * H, ni = 2 * in->g->size;
    const int64_t DD = (int64_t)D * D;
    double *lam = mt_malloc(sizeof(double) * H + sizeof(float) * H, "cp lightning decay");
    double *w = mt_malloc(sizeof(double) * np * ni, "cp lightning mix weights");
    int64_t *off = mt_malloc(sizeof(int64_t) * np * ni, "cp lightning mix offsets");
    float *lamf = (float *)(lam + H);
    be->to_host(lamf, n->in[1]->data, sizeof(float) * H);
    for (int h = 0; h < H; h++) lam[h] = lamf[h];
    cp_weights(in, lam, B, n_tok, H, DD, per_rank, reverse, w, off);
    double *wd = mt_node_scratch(n, sizeof(double) * np * ni, "cp lightning weights");
    int64_t *offd = mt_node_scratch(n, sizeof(int64_t) * np * ni, "cp lightning offsets");
    be->to_device(wd, w, sizeof(double) * np * ni);
    be->to_device(offd, off, sizeof(int64_t) * np * ni);
    k->mix(y, x, wd, offd, np, ni, DD);
    free(lam);
    free(w);
    free(off);
}

/* meta (2B, CP_META) of this rank's chunk rows from seg (backend memory; NULL: zeros). */
static void cp_local_meta(const mt_node *n, int32_t *meta) {
    int B, n_tok, H, D;
    cp_dims(n, &B, &n_tok, &H, &D);
    memset(meta, 0, sizeof(int32_t) * 2 * B * CP_META);
    if (!n->in[2]) return;
    const size_t count = (size_t)B * 2 * n_tok;
    int32_t *sg = mt_malloc(sizeof(int32_t) * count, "cp lightning segment ids");
    n->ctx->be->to_host(sg, n->in[2]->data, sizeof(int32_t) * count);
    for (int row = 0; row < 2 * B; row++) {
        const int32_t *s = sg + (size_t)row * n_tok;
        int32_t *m = meta + row * CP_META;
        m[0] = s[0];
        m[1] = s[n_tok - 1];
        for (int t = 1; t < n_tok && !m[2]; t++) m[2] = s[t] != s[t - 1];
    }
    free(sg);
}

/* The flags (B, 2C) from every rank's meta (C, 2B, CP_META). */
static void cp_flags(cp_info *in, const int32_t *all, int B) {
    const int C = in->g->size, ni = 2 * C;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < ni; j++) {
            int q, x, qp, xp;
            cp_owner(j, C, &q, &x);
            const int32_t *m = all + ((size_t)q * 2 * B + b * 2 + x) * CP_META;
            bool bnd = false;
            if (j > 0) {
                cp_owner(j - 1, C, &qp, &xp);
                bnd = m[0] != all[((size_t)qp * 2 * B + b * 2 + xp) * CP_META + 1];
            }
            in->flags[(size_t)b * ni + j] = (uint8_t)((!bnd && !m[2] ? 1 : 0) | (bnd ? 2 : 0));
        }
}

void mt_cp_lightning_node_fwd(const mt_node *n, const mt_cp_lightning_kernels *k) {
    const mt_backend *be = n->ctx->be;
    cp_info *in = n->host;
    const mt_cp_group *g = in->g;
    int B, n_tok, H, D;
    cp_dims(n, &B, &n_tok, &H, &D);
    const int64_t DD = (int64_t)D * D, nst = (int64_t)2 * B * H * DD, nmeta = 2 * B * CP_META;
    const int64_t per_rank = nst + nmeta; /* floats: the states, then the meta's int32 bits */
    float *send = mt_node_scratch(n, sizeof(float) * per_rank, "cp lightning states");
    float *recv = mt_node_scratch(n, sizeof(float) * per_rank * g->size, "cp lightning gathered");
    const int32_t *seg = n->in[2] ? n->in[2]->data : NULL;
    k->state(send, n->in[0]->data, n->in[1]->data, seg, 2 * B, n_tok, H, D);
    int32_t *meta = mt_malloc(sizeof(int32_t) * nmeta * (g->size + 1), "cp lightning chunk meta");
    cp_local_meta(n, meta);
    be->to_device(send + nst, meta, sizeof(int32_t) * nmeta);
    g->allgather(g->user, send, recv, per_rank, sizeof(float));
    for (int q = 0; q < g->size; q++)
        be->to_host(meta + nmeta * (q + 1), recv + q * per_rank + nst, sizeof(int32_t) * nmeta);
    cp_flags(in, meta + nmeta, B);
    free(meta);
    float *s0 = n->saved[0]->data;
    cp_mix(n, k, s0, recv, per_rank, false);
    k->forward(n, 2, s0);
}

/* Every rank runs it (the all-gather), also one whose qkv needs no gradient. */
void mt_cp_lightning_node_bwd(const mt_node *n, const mt_cp_lightning_kernels *k) {
    const cp_info *in = n->host;
    const mt_cp_group *g = in->g;
    int B, n_tok, H, D;
    cp_dims(n, &B, &n_tok, &H, &D);
    const int64_t nst = (int64_t)2 * B * H * D * D;
    float *send = mt_node_scratch(n, sizeof(float) * nst, "cp lightning state grads");
    float *recv = mt_node_scratch(n, sizeof(float) * nst * g->size, "cp lightning gathered grads");
    float *dsT = mt_node_scratch(n, sizeof(float) * nst, "cp lightning final-state grads");
    const int32_t *seg = n->in[2] ? n->in[2]->data : NULL;
    k->state_grad(send, n->out->grad, n->in[0]->data, n->in[1]->data, seg, 2 * B, n_tok, H, D);
    g->allgather(g->user, send, recv, nst, sizeof(float));
    cp_mix(n, k, dsT, recv, nst, true);
    if (n->in[0]->grad) k->backward(n, 2, n->saved[0]->data, dsT);
}
