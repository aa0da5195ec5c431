/* op_exchange.c: expert parallelism's row exchange (see ops.h). Rows of W floats move in
 * contiguous blocks: block (q, j) of the token side is the rows for rank q's local expert j;
 * block (j, s) of the expert side is local expert j's rows from rank s. The all-to-all moves
 * whole per-rank runs; a block copy on each side turns (s, j) into (j, s) and back, so the
 * experts see their rows contiguous. No arithmetic: the results are the inputs' bits. */
#include <string.h>

#include "ops.h"

typedef struct {
    const mt_exchange *ex;
    int Eq;
    bool to_experts;
    int64_t W;
    int64_t counts[]; /* sent (P*Eq), then got (P*Eq) */
} exchange_info;

void mt_exchange_counts(const mt_exchange *ex, int Eq, const int64_t *sent, int64_t *got) {
    int64_t each[64];
    MT_CHECK(ex->size <= 64, "ep exchange: at most 64 ranks per expert-parallel group, not %d",
             ex->size);
    for (int q = 0; q < ex->size; q++) each[q] = Eq;
    ex->alltoallv_host(ex->user_host, sent, each, got, each, sizeof(int64_t));
}

mt_tensor *mt_ep_exchange(mt_ctx *c, mt_tensor *x, const mt_exchange *ex, int Eq,
                          const int64_t *sent, const int64_t *got, bool to_experts) {
    const int P = ex->size;
    MT_CHECK(P >= 1 && P <= 64, "ep_exchange: %d ranks per group (1 to 64)", P);
    MT_CHECK(x->dtype == MT_F32 && x->ndim == 2, "ep_exchange: x %s must be f32 (rows,W), got %s",
             x->name, mt_shape_str(x));
    int64_t n_sent = 0, n_got = 0;
    for (int i = 0; i < P * Eq; i++) {
        MT_CHECK(sent[i] >= 0 && got[i] >= 0, "ep_exchange: negative row count at block %d", i);
        n_sent += sent[i];
        n_got += got[i];
    }
    const int64_t rows_in = to_experts ? n_sent : n_got, rows_out = to_experts ? n_got : n_sent;
    MT_CHECK(x->shape[0] == rows_in, "ep_exchange: x %s has %lld rows, the counts say %lld",
             x->name, (long long)x->shape[0], (long long)rows_in);
    const int64_t oshape[2] = {rows_out, x->shape[1]};
    mt_tensor *out = mt_tensor_new(c, MT_F32, 2, oshape, "ep_exchange.out");
    mt_node *n = mt_node_begin(c, MT_OP_EP_EXCHANGE, out, 1, &x);
    const size_t bytes = sizeof(exchange_info) + sizeof(int64_t) * 2 * (size_t)(P * Eq);
    exchange_info *info = mt_arena_alloc(&c->host, bytes, "ep_exchange counts");
    *info = (exchange_info){ex, Eq, to_experts, x->shape[1]};
    memcpy(info->counts, sent, sizeof(int64_t) * (size_t)(P * Eq));
    memcpy(info->counts + P * Eq, got, sizeof(int64_t) * (size_t)(P * Eq));
    n->host = info;
    mt_node_run(c, n);
    return out;
}

/* Reorders blocks of W floats: src holds blocks in (a, b) order, dst gets them in (b, a) order;
 * rows[a*nb + b] is block (a, b)'s row count. */
static void exchange_transpose(const mt_backend *be, const float *src, float *dst,
                               const int64_t *rows, int na, int nb, int64_t W, bool src_major_a) {
    /* start of block (a, b) in the (a, b) layout and in the (b, a) layout */
    int64_t at_ab = 0;
    for (int a = 0; a < na; a++)
        for (int b = 0; b < nb; b++) {
            int64_t at_ba = 0;
            for (int b2 = 0; b2 < b; b2++)
                for (int a2 = 0; a2 < na; a2++) at_ba += rows[a2 * nb + b2];
            for (int a2 = 0; a2 < a; a2++) at_ba += rows[a2 * nb + b];
            const int64_t r = rows[a * nb + b];
            if (r > 0) {
                const size_t len = sizeof(float) * (size_t)(r * W);
                if (src_major_a)
                    be->copy(dst + at_ba * W, src + at_ab * W, len);
                else
                    be->copy(dst + at_ab * W, src + at_ba * W, len);
            }
            at_ab += r;
        }
}

/* The per-rank float counts of a side: per[q] = W * sum_j rows[q*Eq + j]. */
static void exchange_per_rank(const int64_t *rows, int P, int Eq, int64_t W, int64_t *per) {
    for (int q = 0; q < P; q++) {
        per[q] = 0;
        for (int j = 0; j < Eq; j++) per[q] += rows[q * Eq + j] * W;
    }
}

/* Token side (q, j) rows in src -> expert side (j, s) rows in dst; tmp holds the got rows. */
static void exchange_to_experts(const mt_node *n, const exchange_info *in, const float *src,
                                float *dst, float *tmp) {
    const mt_exchange *ex = in->ex;
    const int P = ex->size, Eq = in->Eq;
    const int64_t *sent = in->counts, *got = in->counts + P * Eq;
    int64_t send_n[64] = {0}, recv_n[64] = {0};
    exchange_per_rank(sent, P, Eq, in->W, send_n);
    exchange_per_rank(got, P, Eq, in->W, recv_n);
    ex->alltoallv(ex->user, src, send_n, tmp, recv_n, sizeof(float));
    exchange_transpose(n->ctx->be, tmp, dst, got, P, Eq, in->W, true);
}

/* Expert side (j, s) rows in src -> token side (q, j) rows in dst; tmp holds the (s, j) rows. */
static void exchange_to_tokens(const mt_node *n, const exchange_info *in, const float *src,
                               float *dst, float *tmp) {
    const mt_exchange *ex = in->ex;
    const int P = ex->size, Eq = in->Eq;
    const int64_t *sent = in->counts, *got = in->counts + P * Eq;
    int64_t send_n[64] = {0}, recv_n[64] = {0};
    exchange_transpose(n->ctx->be, src, tmp, got, P, Eq, in->W, false);
    exchange_per_rank(got, P, Eq, in->W, send_n);
    exchange_per_rank(sent, P, Eq, in->W, recv_n);
    ex->alltoallv(ex->user, tmp, send_n, dst, recv_n, sizeof(float));
}

static float *exchange_scratch(const mt_node *n, int64_t rows, int64_t W) {
    return mt_node_scratch(n, sizeof(float) * (size_t)(rows * W + 1), "ep_exchange");
}

void mt_ep_exchange_node_fwd(const mt_node *n) {
    const exchange_info *in = n->host;
    const int64_t W = in->W;
    if (in->to_experts) {
        float *tmp = exchange_scratch(n, n->out->shape[0], W);
        exchange_to_experts(n, in, n->in[0]->data, n->out->data, tmp);
    } else {
        float *tmp = exchange_scratch(n, n->in[0]->shape[0], W);
        exchange_to_tokens(n, in, n->in[0]->data, n->out->data, tmp);
    }
}

/* The reverse exchange of the output's gradient, added to the input's: every rank runs it
 * (the collective), also one whose input needs no gradient. */
void mt_ep_exchange_node_bwd(const mt_node *n) {
    const exchange_info *in = n->host;
    const mt_backend *be = n->ctx->be;
    const mt_tensor *x = n->in[0];
    const int64_t W = in->W, rows_in = x->shape[0], rows_out = n->out->shape[0];
    float *dx = exchange_scratch(n, rows_in, W);
    if (in->to_experts) {
        float *tmp = exchange_scratch(n, rows_out, W);
        exchange_to_tokens(n, in, n->out->grad, dx, tmp);
    } else {
        float *tmp = exchange_scratch(n, rows_out, W);
        exchange_to_experts(n, in, n->out->grad, dx, tmp);
    }
    if (x->grad) be->vec_add(x->grad, dx, rows_in * W);
}
