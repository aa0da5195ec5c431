#!/usr/bin/env python3
"""make_msa_fixtures.py: transformers' MiniMax-M3 block selection and block-sparse attention on
small random inputs, for the C test op_msa_select_hf (tests/kernels/op_msa_ref.c; docs/msa.md). Run
from the repository root:

    /work/pyref/bin/python tools/make_msa_fixtures.py [--out tests/fixtures/msa]

Pinned versions: torch==2.15.0, transformers==5.24.0, safetensors==0.8.0 (the script refuses
others unless --any-version is given: the fixture records their behaviour).

The reference is transformers' own code, not a re-implementation:
  * MiniMaxM3VLIndexer.forward (a tiny MiniMaxM3VLTextConfig: 2 index heads of 16, block 8,
    topk 3, local 1) on random hidden states with random weights; its iq, ik after the norms
    and RoPE are captured by wrapping the module's apply_rotary_pos_emb, which the forward
    calls (so the C side scores exactly the tensors transformers scored);
  * MiniMaxM3VLIndexer.build_block_mask of that selection, and eager_attention_forward
    (4 query heads, 2 kv heads of 16, scaling 16^-0.5) in float64 on random fp32 q, k, v.
transformers runs one sample per row (its blocks are anchored at slot 0), so each sample runs
alone; the C test packs them into rows (row 0: samples of 45 and 30 tokens; row 1: 61 and 14).
A second case feeds all-zero hidden states (iq = ik = 0: every block score ties at 0); there
torch.topk's order of the tied blocks is whatever its CPU kernel gives, recorded as is
(idx_zero_hf): the C rule breaks ties to the lower block id (docs/parity.md).

Writes <out>/select.safetensors, all F32 (integers exact): iq (B,T,Hi,Di), ik (B,T,1,Di),
pos (B,T), seg (B,T), idx_hf (B,Hi,T,topk) (-1 padded where transformers returns fewer columns),
q (B,T,H,D), k, v (B,T,Hkv,D), out_hf (B,T,H,D), idx_zero_hf (B,Hi,T,topk), params (3) =
block, topk, scale (also in the metadata).
"""
import argparse
import os
import sys
import types

import torch

PINS = {"torch": "2.15.0", "transformers": "5.24.0", "safetensors": "0.8.0"}
LENS = [[45, 30], [61, 14]]  # samples packed per row (T = 75)
BLOCK, TOPK, HI, DI, H, HKV, D, HID = 8, 3, 2, 16, 4, 2, 16, 32


def check_versions(any_version):
    import safetensors
    import transformers

    got = {
        "torch": torch.__version__.split("+")[0],
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
    }
    bad = {k: v for k, v in got.items() if v != PINS[k]}
    if bad and not any_version:
        sys.exit(f"make_msa_fixtures: versions {bad} differ from the pins {PINS} (--any-version)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/msa")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()
    check_versions(args.any_version)
    from safetensors.torch import save_file
    from transformers.models.minimax_m3_vl import modeling_minimax_m3_vl as M
    from transformers.models.minimax_m3_vl.configuration_minimax_m3_vl import (
        MiniMaxM3VLTextConfig,
    )

    torch.manual_seed(2026)
    cfg = MiniMaxM3VLTextConfig(
        hidden_size=HID,
        num_attention_heads=H,
        num_key_value_heads=HKV,
        head_dim=D,
        num_hidden_layers=1,
        layer_types=["minimax_m3_sparse"],
        index_n_heads=HI,
        index_head_dim=DI,
        index_block_size=BLOCK,
        index_topk_blocks=TOPK,
        index_local_blocks=1,
    )
    indexer = M.MiniMaxM3VLIndexer(cfg, 0).eval()
    with torch.no_grad():
        for p in indexer.parameters():
            p.copy_(torch.randn_like(p) * (0.3 if p.ndim == 1 else 1.0))
    rotary = M.MiniMaxM3VLRotaryEmbedding(cfg)

    captured = {}
    orig_rope = M.apply_rotary_pos_emb

    def capture_rope(q, k, cos, sin, *a, **kw):
        qe, ke = orig_rope(q, k, cos, sin, *a, **kw)
        captured["iq"], captured["ik"] = qe, ke
        return qe, ke

    M.apply_rotary_pos_emb = capture_rope
    attn_mod = types.SimpleNamespace(num_key_value_groups=H // HKV, training=False)

    B, T = len(LENS), sum(LENS[0])
    out = {
        "iq": torch.zeros(B, T, HI, DI),
        "ik": torch.zeros(B, T, 1, DI),
        "pos": torch.zeros(B, T),
        "seg": torch.zeros(B, T),
        "idx_hf": torch.full((B, HI, T, TOPK), -1.0),
        "idx_zero_hf": torch.full((B, HI, T, TOPK), -1.0),
        "q": torch.randn(B, T, H, D),
        "k": torch.randn(B, T, HKV, D),
        "v": torch.randn(B, T, HKV, D),
        "out_hf": torch.zeros(B, T, H, D),
        "params": torch.tensor([BLOCK, TOPK, D**-0.5]),
    }
    for b, lens in enumerate(LENS):
        t0 = 0
        for s, L in enumerate(lens):
            sl = slice(t0, t0 + L)
            pid = torch.arange(L)[None]
            out["pos"][b, sl] = pid[0].float()
            out["seg"][b, sl] = float(s)
            for key, x in (("idx_hf", torch.randn(1, L, HID)), ("idx_zero_hf", torch.zeros(1, L, HID))):
                with torch.no_grad():
                    sel = indexer(x, rotary(x, pid), None, pid)  # (1, Hi, L, <= topk)
                out[key][b, :, sl, : sel.shape[-1]] = sel[0].float()
                if key == "idx_hf":
                    out["iq"][b, sl] = captured["iq"][0].transpose(0, 1)
                    out["ik"][b, sl] = captured["ik"][0].transpose(0, 1)
                    mask = indexer.build_block_mask(sel, None, L, torch.float64, "cpu", pid)
                    q = out["q"][b, sl].transpose(0, 1)[None].double()
                    k = out["k"][b, sl].transpose(0, 1)[None].double()
                    v = out["v"][b, sl].transpose(0, 1)[None].double()
                    o, _ = M.eager_attention_forward(attn_mod, q, k, v, mask, scaling=D**-0.5)
                    out["out_hf"][b, sl] = o[0].float()
            t0 += L
    M.apply_rotary_pos_emb = orig_rope
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "select.safetensors")
    meta = {"block": str(BLOCK), "topk": str(TOPK), "scale": repr(D**-0.5), "pins": repr(PINS)}
    save_file({k: v.contiguous().float() for k, v in out.items()}, path, metadata=meta)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
