#!/usr/bin/env python3
"""make_fixtures_m3_kl.py: the references tiny_m3's MSA layers need beyond transformers'
forward (tests/models/parity_model.c: parity_m3_kl, parity_m3_decode_switch; docs/parity.md
"MiniMax-M3"). Run from the repository root after tools/make_fixtures_m3.py:

    /work/pyref/bin/python tools/make_fixtures_m3_kl.py [--out tests/fixtures/models]

Pinned versions: torch==2.15.0, transformers==5.24.0, safetensors==0.8.0 (checked as in
tools/make_fixtures.py; --any-version to run others).

It loads tests/fixtures/models/tiny_m3 with transformers' MiniMaxM3SparseForConditionalGeneration
in float64 (tools/make_fixtures_m3.py's float64 patches) and writes tiny_m3.kl.safetensors:

  kl_b, grad_kl.<name>   The indexer's sparse-KL loss on batch b of tiny_m3.ref.safetensors,
                         summed over the sparse layers, and its gradient for every indexer
                         tensor (index_q_proj, index_k_proj, index_q_norm, index_k_norm; the
                         trainer's names). transformers has no training path for the indexer:
                         the loss is written here from MiniMax's published definition (MSA
                         repository, training/msa_v1/kl; spec minimax-m3.md section 5), in
                         float64, independently of the C code: per sparse layer, with q, k the
                         main attention's normed and roped tensors and iq, ik the indexer's (all
                         from transformers' own modules), the selection from transformers'
                         indexer, support M_h(t) = {j <= t : block(j) selected for group h},
                           teacher  Pbar_h(t) = mean over the group's query heads g of
                                      softmax_{M_h(t)}(q_g(t).k_h(j) / sqrt(D))   (no gradient)
                           student  Q_h(t)    = softmax_{M_h(t)}(iq_h(t).ik(j) / sqrt(Di))
                           loss     = 1 / (Hi * B * T) * sum_{b,t,h} KL(Pbar_h(t) || Q_h(t))
                         The indexer reads the layer's normalised input detached (the default
                         model.aux_detach.index_kl), so no other tensor gets a gradient from it.
  ids_short, gen_short   A 2 x 6 prompt (the first 6 tokens of ids_a) and transformers' 20
                         greedy tokens from it: decoding starts with every block selected (the
                         dense cached step) and passes 12 = top-k x block tokens, where the
                         cached step turns block-sparse.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (pins)
import make_fixtures_m3 as m3  # noqa: E402  (float64 patches)

from safetensors.torch import load_file, save_file  # noqa: E402
from transformers.models.minimax_m3_vl import modeling_minimax_m3_vl as mm  # noqa: E402

N_GEN = 20
PROMPT = 6


def sparse_kl(q, k, iq, ik, sel, block):
    """The sparse KL of one layer, summed over (b, t, h). q (B,H,T,D), k (B,Hkv,T,D), iq
    (B,Hi,T,Di), ik (B,1,T,Di), sel (B,Hi,T,K) block ids (-1: none)."""
    B, H, T, D = q.shape
    Hi, Di = iq.shape[1], iq.shape[3]
    G = H // Hi
    blocks = torch.arange(T) // block
    causal = torch.arange(T)[None, :] <= torch.arange(T)[:, None]  # (t, j)
    total = torch.zeros((), dtype=torch.float64)
    for b in range(B):
        for h in range(Hi):
            chosen = (blocks[None, :, None] == sel[b, h][:, None, :]).any(-1)  # (t, j)
            allowed = chosen & causal
            neg = torch.full((T, T), float("-inf"), dtype=torch.float64)
            with torch.no_grad():
                p = 0
                for g in range(h * G, (h + 1) * G):
                    s = q[b, g] @ k[b, h].T / D**0.5
                    p = p + torch.softmax(torch.where(allowed, s, neg), -1)
                p = p / G
            z = torch.where(allowed, iq[b, h] @ ik[b, 0].T / Di**0.5, neg)
            logq = torch.log_softmax(z, -1)
            logp = torch.where(allowed, torch.log(torch.where(allowed, p, 1.0)), 0.0)
            total = total + torch.where(allowed, p * (logp - logq), 0.0).sum()
    return total / (Hi * B * T)


def kl_reference(model, ids):
    """The summed KL over the sparse layers and the indexer tensors' gradients."""
    text = model.model.language_model
    cfg = model.config.text_config
    caught = {}

    def hook(mod, args, kwargs):
        caught[mod.layer_idx] = (kwargs["hidden_states"], kwargs["position_embeddings"])

    handles = [layer.self_attn.register_forward_pre_hook(hook, with_kwargs=True)
               for layer in text.layers if layer.self_attn.indexer is not None]
    with torch.no_grad():
        model(input_ids=ids, use_cache=False)
    for h in handles:
        h.remove()
    model.zero_grad(set_to_none=True)
    B, T = ids.shape
    pos = torch.arange(T)[None].expand(B, T)
    total = torch.zeros((), dtype=torch.float64)
    for l, (x, (cos, sin)) in sorted(caught.items()):
        attn = text.layers[l].self_attn
        x = x.detach()
        shape = (B, T, -1, attn.head_dim)
        with torch.no_grad():
            q = attn.q_norm(attn.q_proj(x).view(shape)).transpose(1, 2)
            k = attn.k_norm(attn.k_proj(x).view(shape)).transpose(1, 2)
            q, k = mm.apply_rotary_pos_emb(q, k, cos, sin)
            sel = attn.indexer(x, (cos, sin), None, pos)
        ix = attn.indexer
        iq = ix.q_norm(ix.q_proj(x).view(B, T, -1, ix.head_dim)).transpose(1, 2)
        ik = ix.k_norm(ix.k_proj(x).view(B, T, 1, ix.head_dim)).transpose(1, 2)
        iq, ik = mm.apply_rotary_pos_emb(iq, ik, cos[..., : ix.head_dim], sin[..., : ix.head_dim])
        total = total + sparse_kl(q, k, iq, ik, sel, cfg.index_block_size)
    total.backward()
    grads = {}
    for n, p in model.named_parameters():
        if ".self_attn.indexer." in n:
            c = n.replace("model.language_model.", "model.", 1)
            grads[c.replace(".self_attn.indexer.", ".self_attn.index_")] = p.grad.detach().clone()
    return total.detach(), grads


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures/models")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()
    versions = mf.check_versions(args.any_version)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    mdir = os.path.join(args.out, "tiny_m3")
    ref = load_file(os.path.join(args.out, "tiny_m3.ref.safetensors"))
    with m3.Float64():
        model = mm.MiniMaxM3SparseForConditionalGeneration.from_pretrained(
            mdir, torch_dtype=torch.float64, attn_implementation="eager")
        model.config.text_config._experts_implementation = "eager"
        model.eval()
        kl, grads = kl_reference(model, ref["ids_b"].long())
        ids_short = ref["ids_a"].long()[:, :PROMPT].contiguous()
        with torch.no_grad():
            gen = model.generate(ids_short, max_new_tokens=N_GEN, do_sample=False,
                                 eos_token_id=None, pad_token_id=0,
                                 attention_mask=torch.ones_like(ids_short))[:, PROMPT:]
            cur = ids_short
            for _ in range(N_GEN):  # the same without the cache: the selection is recomputed
                lg = model(input_ids=cur, use_cache=False).logits[:, -1]
                cur = torch.cat([cur, lg.argmax(-1, keepdim=True)], 1)
        if not torch.equal(gen, cur[:, PROMPT:]):
            sys.exit("make_fixtures_m3_kl: generate() (with the cache) disagrees with the loop")
    print(f"tiny_m3: kl_b {kl.item():.9f}, {len(grads)} indexer tensors, "
          f"max |grad| {max(g.abs().max().item() for g in grads.values()):.3e}")
    out = {"kl_b": kl.reshape(1).float(), "ids_short": ids_short.float(),
           "gen_short": gen.float()}
    for n, g in grads.items():
        out["grad_kl." + n] = g.float().contiguous()
    meta = dict(fixture="tiny_m3", semantics="MiniMax MSA v1 sparse KL, float64",
                torch=versions["torch"], transformers=versions["transformers"])
    save_file(out, os.path.join(args.out, "tiny_m3.kl.safetensors"), metadata=meta)


if __name__ == "__main__":
    main()
