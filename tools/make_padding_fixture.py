#!/usr/bin/env python3
"""make_padding_fixture.py: transformers' reference for a right-padded batch with an attention
mask, on the tiny_irregular_gqa fixture (router aux loss on), for tests/models/parity_model.c's
parity_padding. Run from the repository root after tools/make_fixtures.py:

    /work/pyref/bin/python tools/make_padding_fixture.py [--out tests/fixtures/models]

Pinned versions as in make_fixtures.py: torch==2.15.0 transformers==5.24.0 safetensors==0.8.0.

Why: transformers' load_balancing_loss_func leaves padding tokens out of the router aux loss when
an attention_mask is given (counts and mean probabilities over the unmasked rows only). Right
padding changes nothing else for the real tokens (causal attention; labels are -100 there), so
the loss and every gradient of this batch test exactly that rule.

Writes <out>/tiny_irregular_gqa_pad.ref.safetensors (all F32): ids_c, labels_c, mask_c (2 x 70,
row 1 padded with token 0 after PAD_FROM tokens), loss_c, aux_c (masked, as transformers
computes it with the mask), grad.<parameter> of loss_c for every parameter (v4.5x names). The masked
aux loss is recomputed here in float64 from the router logits as an independent check, and it
must differ from the unmasked one (metadata aux_unmasked), or the fixture proves nothing.
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402
from transformers import MiniMaxForCausalLM  # noqa: E402

NAME = "tiny_irregular_gqa"
PAD_FROM = 45  # row 1 keeps its first 45 tokens; 25 padding tokens follow
PAD_ID = 0


def masked_aux_f64(router_logits, mask, E, K):
    """load_balancing_loss_func's masked formula, in float64, written out."""
    m = mask.reshape(-1).double()
    count = torch.zeros(E, dtype=torch.float64)
    psum = torch.zeros(E, dtype=torch.float64)
    rows = 0.0
    for lg in router_logits:
        p = torch.softmax(lg.double(), -1)
        top = p.topk(K, -1).indices
        for k in range(K):
            count.index_add_(0, top[:, k], m)
        psum += (p * m[:, None]).sum(0)
        rows += m.sum().item()
    return (E * (count / rows) * (psum / rows)).sum().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures/models")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()
    versions = mf.check_versions(args.any_version)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    with open(os.path.join(args.out, "ids_b.json")) as f:
        ids = torch.tensor(json.load(f))
    with open(os.path.join(args.out, "labels_b.json")) as f:
        labels = torch.tensor(json.load(f))
    mask = torch.ones_like(ids)
    mask[1, PAD_FROM:] = 0
    ids[1, PAD_FROM:] = PAD_ID
    labels[1, PAD_FROM:] = -100

    model = MiniMaxForCausalLM.from_pretrained(
        os.path.join(args.out, NAME), attn_implementation="eager"
    ).eval()
    cfg = model.config
    if not cfg.output_router_logits or cfg.router_aux_loss_coef <= 0:
        sys.exit(f"make_padding_fixture: {NAME} does not train with the router aux loss")
    with torch.no_grad():
        un = model(input_ids=ids, labels=labels, use_cache=False)
    model.zero_grad(set_to_none=True)
    r = model(input_ids=ids, labels=labels, attention_mask=mask, use_cache=False)
    r.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}

    aux, aux_un = r.aux_loss.item(), un.aux_loss.item()
    indep = masked_aux_f64(r.router_logits, mask, cfg.num_local_experts, cfg.num_experts_per_tok)
    rel = abs(aux - indep) / abs(indep)
    print(f"aux masked {aux:.9g} (float64 recomputation {indep:.9g}, rel {rel:.2e}), unmasked {aux_un:.9g}")
    if rel > 1e-6:
        sys.exit("make_padding_fixture: transformers' masked aux loss disagrees with the formula")
    if abs(aux - aux_un) < 1e-3 * abs(aux):
        sys.exit("make_padding_fixture: the mask does not change the aux loss measurably")
    inp = dict(ids_c=ids, labels_c=labels, mask_c=mask)
    ref = dict(
        loss_c=r.loss.detach().reshape(1),
        aux_c=r.aux_loss.detach().reshape(1).float(),
    )
    meta = dict(fixture=NAME, pad_from=PAD_FROM, aux_rel_vs_float64=rel, aux_unmasked=aux_un, **versions)
    mf.save_ref(
        os.path.join(args.out, NAME + "_pad.ref.safetensors"), inp, ref, mf.v4_grads(model, grads), meta
    )
    print(f"wrote {NAME}_pad.ref.safetensors")


if __name__ == "__main__":
    main()
