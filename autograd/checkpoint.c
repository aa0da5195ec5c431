/* checkpoint.c: recomputed segments (activation checkpointing; mt_checkpoint in tensor.h).
 *
 * Forward: the segment runs as any ops do (the same code path as without checkpointing), then
 * its outputs are copied down to where the segment started in the arena, and everything else it
 * carved, its tensor structs and its tape nodes are dropped; one node stands for the segment.
 * Backward: that node runs the segment again on its kept input, points the recomputed outputs'
 * gradients at the kept outputs' gradients, walks the new nodes in reverse (bucket hooks
 * included) and drops them again. The same ops on the same values give the same bits, so
 * gradients equal those of a run without checkpointing exactly. */
#include <string.h>

#include "tensor.h"

static size_t ckpt_padded(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

void mt_checkpoint(mt_ctx *c, mt_segment_fn fn, const void *user, size_t user_bytes, mt_tensor *x,
                   int n_out, mt_tensor **out) {
    MT_CHECK(n_out >= 1 && n_out <= MT_SEGMENT_MAX_OUT, "checkpoint: %d outputs (1 to %d)", n_out,
             MT_SEGMENT_MAX_OUT);
    for (int i = 0; i < n_out; i++) out[i] = NULL;
    if (!c->grad_enabled) {
        fn(c, (void *)user, x, out);
        return;
    }
    MT_CHECK(c->tag == -1,
             "checkpoint: a segment starts inside bucket %d; its hooks would nest in the backward",
             c->tag);
    mt_segment *seg = mt_arena_alloc(&c->host, sizeof(mt_segment), "segment");
    memset(seg, 0, sizeof(*seg));
    seg->fn = fn;
    seg->n_out = n_out;
    seg->user = mt_arena_alloc(&c->host, user_bytes ? user_bytes : 1, "segment user");
    memcpy(seg->user, user, user_bytes);

    const size_t a0 = mt_arena_mark(&c->arena), h0 = mt_arena_mark(&c->host);
    const int n0 = c->n_nodes;
    fn(c, seg->user, x, out);

    /* stage the outputs above everything the segment used and above where the kept copies will
     * go (an output need not be the segment's own memory), drop the segment, copy them down */
    mt_tensor got[MT_SEGMENT_MAX_OUT];
    void *stage[MT_SEGMENT_MAX_OUT] = {0};
    size_t kept_bytes = 0;
    for (int i = 0; i < n_out; i++)
        if (out[i]) {
            MT_CHECK(out[i] != x, "checkpoint: output %d is the segment's input %s", i, x->name);
            kept_bytes += ckpt_padded(mt_nbytes(out[i]));
        }
    const size_t kept_end = a0 + 64 + kept_bytes; /* the first copy starts 64-byte aligned */
    if (mt_arena_mark(&c->arena) < kept_end)
        mt_arena_alloc(&c->arena, kept_end - mt_arena_mark(&c->arena), "segment staging");
    for (int i = 0; i < n_out; i++)
        if (out[i]) {
            got[i] = *out[i];
            stage[i] = mt_arena_alloc(&c->arena, mt_nbytes(out[i]), "segment staging");
            c->be->copy(stage[i], out[i]->data, mt_nbytes(out[i]));
        }
    mt_arena_rewind(&c->arena, a0);
    mt_arena_rewind(&c->host, h0);
    c->n_nodes = n0;
    bool needs_grad = false;
    for (int i = 0; i < n_out; i++) {
        if (!stage[i]) continue;
        mt_tensor *k = mt_arena_alloc(&c->host, sizeof(mt_tensor), "segment output");
        *k = got[i];
        k->grad = NULL;
        k->data = mt_arena_alloc(&c->arena, mt_nbytes(k), k->name);
        c->be->copy(k->data, stage[i], mt_nbytes(k));
        seg->out[i] = out[i] = k;
        needs_grad |= k->requires_grad;
    }
    MT_CHECK(out[0], "checkpoint: the segment's first output is NULL");
    if (!needs_grad) return; /* nothing inside needs a gradient: no node */
    mt_node *n = mt_node_begin(c, MT_OP_SEGMENT, out[0], 1, &x);
    out[0]->requires_grad = got[0].requires_grad; /* node_begin derived it from x alone */
    n->segment = seg;
    c->n_nodes++;
}

/* After a segment's backward the gradient of its output k is dead (the reverse walk reaches a
 * producer after all its consumers). In a chain of segments the walk carves the input x's
 * gradient right above it (arena top: [k grad][x grad], a0 = the end); then x's gradient moves
 * down into k's place and the arena shrinks, so a chain holds one such gradient, not one per
 * segment. */
static void ckpt_reuse_grad(mt_ctx *c, mt_tensor *k, mt_tensor *x, size_t a0) {
    if (!k->grad || !x->grad || mt_nbytes(k) != mt_nbytes(x)) return;
    uint8_t *kg = k->grad, *xg = x->grad;
    const size_t nb = mt_nbytes(x);
    if (xg != kg + ckpt_padded(nb) || xg + nb != c->arena.base + a0) return;
    c->be->copy(kg, xg, nb); /* disjoint: x's region starts where k's padded one ends */
    x->grad = kg;
    k->grad = NULL;
    mt_arena_rewind(&c->arena, (size_t)(kg + nb - c->arena.base));
}

void mt_segment_backward(mt_ctx *c, const mt_node *n) {
    const mt_segment *seg = n->segment;
    mt_tensor *x = n->in[0]; /* its gradient, if any, was carved before the marks below */
    const size_t a0 = mt_arena_mark(&c->arena), h0 = mt_arena_mark(&c->host);
    const int n0 = c->n_nodes;
    const bool prev = mt_ctx_set_grad(c, true);
    mt_tensor *again[MT_SEGMENT_MAX_OUT] = {0};
    c->recomputing++;
    seg->fn(c, seg->user, x, again);
    c->recomputing--;
    for (int i = 0; i < seg->n_out; i++) {
        const mt_tensor *k = seg->out[i];
        MT_CHECK(!k == !again[i] &&
                     (!k || (mt_same_shape(k, again[i]) && k->dtype == again[i]->dtype)),
                 "checkpoint: output %d recomputed as %s %s, first computed as %s %s", i,
                 again[i] ? again[i]->name : "NULL", mt_shape_str(again[i]), k ? k->name : "NULL",
                 mt_shape_str(k));
        if (k && k->grad) again[i]->grad = k->grad; /* the backward accumulates into them */
    }
    mt_tape_backward(c, n0, c->n_nodes);
    c->n_nodes = n0;
    mt_arena_rewind(&c->arena, a0);
    mt_arena_rewind(&c->host, h0);
    mt_ctx_set_grad(c, prev);
    ckpt_reuse_grad(c, seg->out[0], x, a0);
}
