#!/usr/bin/env python3
"""make_fixtures_window_jitter.py: tiny MiniMax models with a sliding window and with router
jitter, and transformers' float64 reference outputs for the C parity tests
(tests/models/parity_model.c: parity_window_*, parity_jitter_*; docs/parity.md). Run from the
repository root, after tools/make_fixtures.py (it reads that script's inputs ids_*/labels_*):

    /work/pyref/bin/python tools/make_fixtures_window_jitter.py [--out tests/fixtures/models]

Pinned versions as tools/make_fixtures.py (torch 2.15.0, transformers 5.24.0, safetensors
0.8.0; --any-version to run others). The reference is transformers run in float64 with its
float32 islands computed in the model's dtype (tools/make_fixtures_m2.py's rule: RMSNorm,
router softmax, attention softmax, the loss; RoPE's angles stay float32 as in the C code).

Fixtures (the format of tools/make_fixtures.py: <name>/ and <name>.ref.safetensors):
  tiny_window        Text-01, 5 layers [full, linear, full, linear, full], 2 kv heads,
                     sliding_window 3: transformers' MiniMaxModel builds
                     create_sliding_window_causal_mask for its full_attention layers (key s
                     visible from query t when t - 3 < s <= t; masking_utils'
                     sliding_window_overlay). Inputs 2 x 37 and 2 x 70: the window matters at
                     almost every position, and crosses the C kernel's 64-position tiles.
  tiny_jitter        Text-01, 3 layers [linear, full, linear], router_jitter_noise 0.25.
  tiny_m2_jitter     MiniMax-M2, 2 layers, router_jitter_noise 0.25.
Jitter: transformers' SparseMoeBlock, in training mode only, multiplies its input in place by
torch.empty_like(h).uniform_(1 - j, 1 + j) before the router and the experts; in Text-01 the
decoder layer's DeepNorm residual is that same tensor (residual = hidden_states before the
block), so the noise reaches the residual too; in M2 the residual is the block's pre-norm input
and does not see it. The reference keeps transformers' own code and replaces only the draws of
uniform_ with the project's (models/block.h, mt_block_moe_jitter): element i of layer l's
(B, T, C) input times (float)((1 - j) + 2 j u_i), u_i = (x >> 40) 2^-24,
x = splitmix64(splitmix64(splitmix64(SEED) ^ l) ^ i), SEED = JITTER_SEED below (the C test
passes the same). The MoE blocks are in training mode exactly when gradients are on: batch a
and the greedy tokens are evaluation (no noise: what evaluation and generation must give), batch
b with its gradients is training (noise).
"""

import argparse
import contextlib
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402
import make_fixtures_m2 as mf2  # noqa: E402
from transformers import MiniMaxConfig, MiniMaxForCausalLM  # noqa: E402
from transformers.models.minimax import modeling_minimax as mm  # noqa: E402

JITTER_SEED = 20261206
N_GEN = 10
BOUNDS = dict(logits=1e-5, loss=1e-6, grad=1e-5)

# ---- float64: transformers' float32 islands in the model's dtype (Text-01) ----


def router_f64(self, hidden_states):
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    router_logits = F.linear(hidden_states, self.weight)
    router_probs = torch.softmax(router_logits, dim=-1)
    top, idx = torch.topk(router_probs, self.top_k, dim=-1)
    top /= top.sum(dim=-1, keepdim=True)
    return router_logits, top, idx


class Float64:
    def __enter__(self):
        self.saved = (mm.MiniMaxRMSNorm.forward, mm.MiniMaxTopKRouter.forward, mm.eager_attention_forward)
        mm.MiniMaxRMSNorm.forward = mf2.rmsnorm_f64
        mm.MiniMaxTopKRouter.forward = router_f64
        mm.eager_attention_forward = mf2.attention_f64
        self.m2 = mf2.Float64()
        self.m2.__enter__()

    def __exit__(self, *exc):
        self.m2.__exit__(*exc)
        mm.MiniMaxRMSNorm.forward, mm.MiniMaxTopKRouter.forward, mm.eager_attention_forward = self.saved


# ---- the project's jitter draws ----


def splitmix64(x):
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)).astype(np.uint64)
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)).astype(np.uint64)
        return x ^ (x >> np.uint64(31))


def jitter_noise(seed, layer, n, j):
    key = splitmix64(splitmix64(np.array([seed], dtype=np.uint64)) ^ np.uint64(layer))
    x = splitmix64(key ^ np.arange(n, dtype=np.uint64))
    u = (x >> np.uint64(40)).astype(np.float64) * 2.0**-24
    j = float(np.float32(j))
    return ((1.0 - j) + 2.0 * j * u).astype(np.float32)


class Jitter:
    """MoE blocks in training mode exactly when gradients are on; uniform_ draws the project's
    noise for the block being run (checked: the bounds transformers asks for, one draw per
    block call)."""

    def __init__(self, model, seed):
        self.model, self.seed, self.j = model, seed, model.config.router_jitter_noise
        self.layer, self.draws = None, 0

    def __enter__(self):
        self.handles = []
        for l, layer in enumerate(self.model.model.layers):

            def pre(mod, args, l=l):
                mod.training = torch.is_grad_enabled()
                self.layer = l

            self.handles.append(layer.mlp.register_forward_pre_hook(pre))
        self.saved = torch.Tensor.uniform_
        outer = self

        def uniform_(t, a=0.0, b=1.0, generator=None):
            assert outer.layer is not None and abs(a - (1 - outer.j)) < 1e-12 and abs(b - (1 + outer.j)) < 1e-12
            noise = jitter_noise(outer.seed, outer.layer, t.numel(), outer.j)
            with torch.no_grad():
                t.copy_(torch.from_numpy(noise).reshape(t.shape).to(t.dtype))
            outer.draws += 1
            outer.layer = None
            return t

        torch.Tensor.uniform_ = uniform_
        return self

    def __exit__(self, *exc):
        torch.Tensor.uniform_ = self.saved
        for h in self.handles:
            h.remove()
        for layer in self.model.model.layers:
            layer.mlp.training = False


# ---- Text-01 reference (tools/make_fixtures_m2.py's run_reference with Text-01's watch) ----


def run_reference_t01(model, inp):
    out = {}
    watch = mf.RouterWatch(model)
    with torch.no_grad():
        r, loss = mf2.forward_loss(model, inp["ids_a"], inp["labels_a"])
        out["logits_a"], out["loss_a"] = r.logits.clone(), loss.reshape(1).clone()
    model.zero_grad(set_to_none=True)
    r, loss = mf2.forward_loss(model, inp["ids_b"], inp["labels_b"])
    loss.backward()
    out["logits_b"], out["loss_b"] = r.logits.detach().clone(), loss.detach().reshape(1).clone()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        gen = model.generate(inp["ids_a"], max_new_tokens=N_GEN, do_sample=False, eos_token_id=None,
                             pad_token_id=0, attention_mask=torch.ones_like(inp["ids_a"]))
        gen = gen[:, inp["ids_a"].shape[1]:]
        cur, gap = inp["ids_a"], math.inf
        for _ in range(N_GEN):
            lg = model(input_ids=cur, use_cache=False).logits[:, -1].double()
            top = lg.topk(2, -1).values
            gap = min(gap, (top[:, 0] - top[:, 1]).min().item())
            cur = torch.cat([cur, lg.argmax(-1, keepdim=True)], 1)
    watch.close()
    if not torch.equal(gen, cur[:, inp["ids_a"].shape[1]:]):
        sys.exit("make_fixtures_window_jitter: generate() disagrees with the no-cache greedy loop")
    out["gen_a"] = gen.to(torch.int32)
    out["decay"] = mf.decay_table(model)
    return out, mf.v4_grads(model, grads), dict(router_gap=watch.min_gap, greedy_gap=gap)


def t01_config(**kw):
    cfg = mf.base_config(
        full_attn_alpha_factor=2.25, full_attn_beta_factor=0.75, linear_attn_alpha_factor=3.0,
        linear_attn_beta_factor=1.25, mlp_alpha_factor=mf.ALPHA, mlp_beta_factor=0.875)
    cfg.update(kw)
    return cfg


FIXTURES = [
    dict(name="tiny_window", family="text01", seed=7000,
         cfg=t01_config(num_hidden_layers=5, num_key_value_heads=2, sliding_window=3,
                        layer_types=["full_attention", "linear_attention", "full_attention",
                                     "linear_attention", "full_attention"])),
    dict(name="tiny_jitter", family="text01", seed=7100,
         cfg=t01_config(num_hidden_layers=3, num_key_value_heads=1, router_jitter_noise=0.25,
                        layer_types=["linear_attention", "full_attention", "linear_attention"])),
    dict(name="tiny_m2_jitter", family="m2", seed=7200, cfg=mf2.m2_config(router_jitter_noise=0.25)),
]


def build(spec, seed):
    if spec["family"] == "m2":
        return mf2.build_model(spec["cfg"], seed)
    torch.manual_seed(seed)
    cfg = MiniMaxConfig(**spec["cfg"])
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"
    model = MiniMaxForCausalLM(cfg)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight") or n.endswith("layernorm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    return model.eval()


def reference(spec, model, inp):
    run = mf2.run_reference if spec["family"] == "m2" else run_reference_t01
    jit = model.config.router_jitter_noise > 0
    res = {}
    for dtype in ("f32", "f64"):
        if dtype == "f64":
            model.double()
        ctx = Float64() if dtype == "f64" else contextlib.nullcontext()
        with ctx:
            if jit:
                with Jitter(model, JITTER_SEED) as j:
                    res[dtype] = run(model, inp)
                # one draw per MoE layer, in the backward's forward of batch b only
                if j.draws != model.config.num_hidden_layers:
                    sys.exit(f"make_fixtures_window_jitter: {j.draws} jitter draws, expected "
                             f"{model.config.num_hidden_layers}")
            else:
                res[dtype] = run(model, inp)
        model.float()
    (r32, g32, gaps32), (r64, g64, gaps) = res["f32"], res["f64"]
    if not torch.equal(r32["gen_a"], r64["gen_a"]):
        sys.exit("make_fixtures_window_jitter: fp32 and float64 greedy tokens differ")
    gaps = {k: min(gaps[k], gaps32[k]) for k in gaps}
    return r64, g64, gaps, mf2.rel_errors(r64, g64, r32, g32)


def effect(spec, model, inp, ref):
    """How much the key changes logits_b (max |diff| / max |logit|): it must show."""
    cfg = model.config
    with torch.no_grad():
        if spec["cfg"].get("sliding_window"):
            cfg.sliding_window = None
            lg = model(input_ids=inp["ids_b"], use_cache=False).logits
            cfg.sliding_window = spec["cfg"]["sliding_window"]
        else:
            lg = model(input_ids=inp["ids_b"], use_cache=False).logits  # eval: no noise
    r = ref["logits_b"]
    return ((lg.double() - r).abs().max() / r.abs().max()).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures/models")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()
    versions = mf.check_versions(args.any_version)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    inp = {k: torch.tensor(mf.json.load(open(os.path.join(args.out, k + ".json"))))
           for k in ("ids_a", "labels_a", "ids_b", "labels_b")}
    for spec in FIXTURES:
        for attempt in range(50):
            seed = spec["seed"] + attempt
            model = build(spec, seed)
            ref, grads, gaps, err = reference(spec, model, inp)
            if gaps["router_gap"] > mf.MARGIN and gaps["greedy_gap"] > mf.MARGIN:
                break
            print(f"  {spec['name']}: seed {seed} margins {gaps} not safe, next seed")
        else:
            sys.exit(f"make_fixtures_window_jitter: {spec['name']}: no seed with safe margins")
        print(f"{spec['name']}: seed {seed}, margins {gaps}")
        mf2.check_hf_error(spec["name"], err)
        model.double()
        with Float64():
            eff = effect(spec, model, inp, ref)
        model.float()
        print(f"  {spec['name']}: the key changes logits_b by {eff:.3e} x max|logit|")
        if eff < 1e-2:
            sys.exit(f"make_fixtures_window_jitter: {spec['name']}: the key does not show")
        meta = dict(fixture=spec["name"], semantics="transformers-5.24, float64", seed=seed,
                    torch=versions["torch"], transformers=versions["transformers"],
                    safetensors=versions["safetensors"], jitter_seed=JITTER_SEED,
                    key_effect=eff, **gaps, **err)
        mf2.write_fixture(args.out, spec["name"], model, inp, ref, grads, meta)


if __name__ == "__main__":
    main()
