#!/usr/bin/env python3
"""msa_kl_reference.py: an fp64 reference of MiniMax's MSA v1 indexer loss (the sparse KL,
spec /work/shared/spec/minimax-m3.md sections 5.2-5.3) on small random inputs, for the C test
op_msa_kl_ref (tests/kernels/op_msa_ref.c; docs/msa.md). Run from the repository root:

    /work/pyref/bin/python tools/msa_kl_reference.py [--out tests/fixtures/msa]

Pinned versions: torch==2.15.0, safetensors==0.8.0 (refused otherwise unless --any-version).

Written from the definition, dense, in float64 (not from the C kernels):
  support   M_h(t) = {j : seg[j] == seg[t], j <= t, pos[j] // block in idx[b,h,t,:]}
  teacher   P_g(t,.) = softmax over M_h(t) of scale q_g(t).k_h(j), g in group h (G = H/Hi);
            Pbar_h = mean over the group's g                          (detached: no gradient)
  student   Q_h(t,.) = softmax over M_h(t) of index_scale iq_h(t).ik(j)
  loss      coef / (Hi denom) * sum over (b,t) with mask != 0, sum over h, of
            sum_j Pbar (log Pbar - log Q)
and the gradients d loss / d iq, d ik by torch.autograd of that expression (so the C kernels'
closed form ds = Q - Pbar is checked, not assumed). idx is a random valid selection (the local
block first, then distinct earlier blocks, -1 padding), independent of any indexer.

Writes <out>/kl.safetensors, all F32 (integers exact): q (B,T,H,D), k (B,T,Hi,D),
iq (B,T,Hi,Di), ik (B,T,1,Di), idx (B,Hi,T,topk), pos, seg, mask (B,T), loss (1), diq, dik, params (6) =
block, topk, scale, index_scale, coef, denom (also in the metadata, with the fp64 loss).
"""
import argparse
import os
import sys

import torch

PINS = {"torch": "2.15.0", "safetensors": "0.8.0"}
LENS = [[45, 30], [61, 14]]
BLOCK, TOPK, H, HI, D, DI = 8, 3, 4, 2, 16, 16
SCALE, INDEX_SCALE, COEF = D**-0.5, DI**-0.5, 0.8


def check_versions(any_version):
    import safetensors

    got = {"torch": torch.__version__.split("+")[0], "safetensors": safetensors.__version__}
    bad = {k: v for k, v in got.items() if v != PINS[k]}
    if bad and not any_version:
        sys.exit(f"msa_kl_reference: versions {bad} differ from the pins {PINS} (--any-version)")


def random_selection(pos, g):
    """(B,Hi,T,topk): per query the local block, then up to topk-1 distinct earlier blocks."""
    B, T = pos.shape
    idx = torch.full((B, HI, T, TOPK), -1, dtype=torch.int64)
    for b in range(B):
        for h in range(HI):
            for t in range(T):
                local = int(pos[b, t]) // BLOCK
                earlier = torch.randperm(local, generator=g)[: TOPK - 1]
                idx[b, h, t, 0] = local
                idx[b, h, t, 1 : 1 + len(earlier)] = earlier
    return idx


def kl_loss(q, k, iq, ik, idx, pos, seg, mask, denom):
    B, T = pos.shape
    G = H // HI
    blk = pos // BLOCK  # (B,T) block of each key
    same = seg[:, :, None] == seg[:, None, :]  # (B,Tq,Tk)
    causal = torch.arange(T)[None, :, None] >= torch.arange(T)[None, None, :]
    # chosen[b,h,t,j]: block of key j among idx[b,h,t,:]
    chosen = (idx[..., None] == blk[:, None, None, None, :]).any(dim=3)  # (B,Hi,T,T)
    support = chosen & (same & causal)[:, None]
    neg = torch.tensor(float("-inf"), dtype=torch.float64)
    # teacher: (B,H,T,T) logits; query head g reads kv head g // G
    kt = k.repeat_interleave(G, dim=2)  # (B,T,H,D)
    xt = SCALE * torch.einsum("bthd,bshd->bhts", q, kt)
    sup_h = support.repeat_interleave(G, dim=1)
    pt = torch.softmax(torch.where(sup_h, xt, neg), dim=-1)
    pbar = pt.view(B, HI, G, T, T).mean(dim=2)  # (B,Hi,T,T)
    z = INDEX_SCALE * torch.einsum("bthd,bsd->bhts", iq, ik[:, :, 0])
    logq = torch.log_softmax(torch.where(support, z, neg), dim=-1)
    terms = torch.where(pbar > 0, pbar * (torch.log(pbar) - logq), torch.zeros_like(pbar))
    per_query = terms.sum(dim=-1).sum(dim=1)  # (B,T)
    return COEF / (HI * denom) * (per_query * (mask != 0)).sum()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/msa")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()
    check_versions(args.any_version)
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(77)
    B, T = len(LENS), sum(LENS[0])
    pos = torch.zeros(B, T, dtype=torch.int64)
    seg = torch.zeros(B, T, dtype=torch.int64)
    for b, lens in enumerate(LENS):
        t0 = 0
        for s, L in enumerate(lens):
            pos[b, t0 : t0 + L] = torch.arange(L)
            seg[b, t0 : t0 + L] = s
            t0 += L
    mask = (torch.rand(B, T, generator=g) > 0.2).double()
    denom = float(mask.sum()) + 3.0  # a global count larger than this batch's
    f32 = lambda *s: torch.randn(*s, generator=g).float()
    q, k = f32(B, T, H, D), f32(B, T, HI, D)
    iq, ik = f32(B, T, HI, DI), f32(B, T, 1, DI)
    idx = random_selection(pos, g)
    iq64 = iq.double().requires_grad_(True)
    ik64 = ik.double().requires_grad_(True)
    loss = kl_loss(q.double(), k.double(), iq64, ik64, idx, pos, seg, mask, denom)
    loss.backward()
    out = {
        "q": q, "k": k, "iq": iq, "ik": ik, "idx": idx, "pos": pos, "seg": seg, "mask": mask,
        "loss": loss.detach().reshape(1), "diq": iq64.grad, "dik": ik64.grad,
        "params": torch.tensor([BLOCK, TOPK, SCALE, INDEX_SCALE, COEF, denom]),
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "kl.safetensors")
    meta = {
        "block": str(BLOCK), "topk": str(TOPK), "scale": repr(SCALE),
        "index_scale": repr(INDEX_SCALE), "coef": repr(COEF), "denom": repr(denom),
        "loss_fp64": repr(float(loss.detach())), "pins": repr(PINS),
    }
    save_file({k: v.contiguous().float() for k, v in out.items()}, path, metadata=meta)
    print(f"wrote {path}: loss {float(loss.detach()):.12g}")


if __name__ == "__main__":
    main()
