#!/usr/bin/env python3
"""make_fixtures_m3.py: tiny random MiniMax-M3 models (the VL checkpoint layout) and
transformers' reference outputs for the C parity tests (tests/models/parity_model.c, parity_m3_*;
docs/parity.md "MiniMax-M3"). Run from the repository root:

    /work/pyref/bin/python tools/make_fixtures_m3.py [--out tests/fixtures/models]

Pinned versions: torch==2.15.0, transformers==5.24.0, safetensors==0.8.0 (tools/make_fixtures.py
checks them; --any-version to run others).

The reference is transformers' MiniMaxM3SparseForConditionalGeneration (the class that loads
the released VL layout: language_model.model.*, language_model.lm_head.weight, the original
block_sparse_moe / index_* names, vision_tower.*, multi_modal_projector.*, patch_merge_mlp.*;
transformers' conversion_mapping maps them and save_pretrained writes them back), text only,
eager attention (the sparse layers' block mask path), eager experts, run in float64: the
model is cast to float64 and the places where transformers 5.24 computes in float32 whatever
the model's dtype (the Gemma RMSNorm's upcast, the router's `.float()`, the attention
softmax's dtype, the loss's upcast) are swapped for the same expressions in the model's dtype.
The indexer's block scores stay float32 (MiniMaxM3VLIndexer.forward's `.float()`): they only
select. Each fixture records transformers' own fp32 error against the float64 truth
(metadata hf_fp32_*), which must be below half the C bounds (1e-5 relative logits, 1e-6
loss, 1e-5 relative L2 gradients).

What it writes under --out (tools/make_fixtures_m2.py's format):
  <name>/                 the model directory as transformers' save_pretrained writes it (a
                          one-layer vision tower of width 16: its tensors are carried)
  <name>.ref.safetensors  ids_a labels_a logits_a loss_a gen_a (20 greedy tokens per row),
                          ids_b labels_b logits_b loss_b, decay (zeros), grad.<name> of loss_b
                          for every text parameter under the trainer's names (the correction
                          biases are buffers: none), all F32.

Fixtures (spec section 10's tiny config: hidden 64, 8 heads x 16, 2 kv heads, rotary 8,
Gemma norms, per-head QK norm, clamp-SwiGLU, dense width 96, 8 experts top-2 of width 32, one
shared expert of width 32, routed_scaling_factor 2, index block 4, top-3 blocks, 2 index
heads of 16; inputs a 2 x 19 and b 2 x 23, both leaving a partial block and exceeding the
top-k coverage of 12 tokens):
  tiny_m3                4 layers: dense MLP, dense MLP, MoE, MoE x full, sparse, full, sparse
                         attention (spec 10's lists); swiglu_limit 7.0. The indexer's sparse
                         KL has its own reference (tools/make_fixtures_m3_kl.py,
                         tiny_m3.kl.safetensors). The indexer tensors' gradients are recorded
                         too: exactly zero under the cross-entropy (the selection is discrete).
  tiny_m3_dense          the same with no sparse layer (sparse_attention_freq all 0), MLPs
                         [dense, MoE, dense, MoE], swiglu_limit 1.5 so that the clamps act
                         (the share of clamped gate and up values is in the metadata)
  tiny_m3_packed_shared  3 layers, no sparse layer, the shared expert saved packed as routed
                         expert E (experts.8.w1/w3/w2: its width equals the routed width);
                         the reference is the same model in the separate form
The correction biases are drawn so that they change the choice of experts of at least 5% of
the MoE rows (checked); the K-th vs (K+1)-th biased score and the greedy top-2 logits keep a
gap above 1e-4 (the seed advances until they do).
"""

import argparse
import math
import os
import shutil
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (pins, writers)

from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import MiniMaxM3VLConfig  # noqa: E402
from transformers.models.minimax_m3_vl import modeling_minimax_m3_vl as mm  # noqa: E402

MARGIN = 1e-4
N_GEN = 20
BOUNDS = dict(logits=1e-5, loss=1e-6, grad=1e-5)
INPUTS = ((2, 19), (2, 23))


def text_config(**kw):
    """Spec section 10's tiny M3 in the release's keys (sparse_attention_config, moe_layer_freq)."""
    cfg = dict(
        vocab_size=mf.VOCAB,
        hidden_size=64,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=16,
        rotary_dim=8,
        rope_parameters={"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.5},
        rms_norm_eps=1e-6,
        use_gemma_norm=True,
        use_qk_norm=True,
        qk_norm_type="per_head",
        attention_output_gate=False,
        tie_word_embeddings=False,
        hidden_act="swigluoai",
        swiglu_alpha=1.702,
        swiglu_limit=7.0,
        swiglu_beta=1.0,
        dense_intermediate_size=96,
        intermediate_size=32,
        shared_intermediate_size=32,
        n_shared_experts=1,
        num_local_experts=8,
        num_experts_per_tok=2,
        scoring_func="sigmoid",
        use_routing_bias=True,
        routed_scaling_factor=2.0,
        moe_layer_freq=[0, 0, 1, 1],
        num_mtp_modules=0,
        initializer_range=0.125,
        max_position_embeddings=4096,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        sparse_attention_config={
            "use_sparse_attention": True,
            "sparse_index_dim": 16,
            "sparse_num_index_heads": 2,
            "sparse_block_size": 4,
            "sparse_topk_blocks": 3,
            "sparse_init_block": 0,
            "sparse_local_block": 1,
            "sparse_score_type": "max",
            "sparse_attention_freq": [0, 1, 0, 1],
            "sparse_disable_index_value": [0, 1, 0, 1],
        },
    )
    cfg.update(kw)
    return cfg


def dense_sparse(n):
    return dict(use_sparse_attention=False, sparse_index_dim=16, sparse_num_index_heads=2,
                sparse_block_size=4, sparse_topk_blocks=3, sparse_init_block=0, sparse_local_block=1,
                sparse_score_type="max", sparse_attention_freq=[0] * n,
                sparse_disable_index_value=[0] * n)


VISION = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
              patch_size=2, image_size=8, spatial_merge_size=2, temporal_patch_size=1)

FIXTURES = [
    dict(name="tiny_m3", seed=7000, cfg=text_config()),
    dict(name="tiny_m3_dense", seed=7100,
         cfg=text_config(moe_layer_freq=[0, 1, 0, 1], swiglu_limit=1.5,
                         sparse_attention_config=dense_sparse(4))),
    dict(name="tiny_m3_packed_shared", seed=7200, packed=True,
         cfg=text_config(num_hidden_layers=3, moe_layer_freq=[0, 1, 1], swiglu_limit=1.5,
                         sparse_attention_config=dense_sparse(3))),
]


# ---- transformers in float64: its float32 islands in the model's dtype ----


def rmsnorm_f64(self, x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)


def router_f64(self, hidden_states):
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    router_logits = F.linear(hidden_states.to(self.weight.dtype), self.weight)
    routing_weights = torch.sigmoid(router_logits)
    scores_for_choice = routing_weights + self.e_score_correction_bias
    _, top_k_index = torch.topk(scores_for_choice, self.top_k, dim=-1, sorted=False)
    top_k_weights = routing_weights.gather(1, top_k_index)
    top_k_weights /= top_k_weights.sum(dim=-1, keepdim=True)
    return router_logits, top_k_weights, top_k_index


def attention_f64(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    k = mm.repeat_kv(key, module.num_key_value_groups)
    v = mm.repeat_kv(value, module.num_key_value_groups)
    w = torch.matmul(query, k.transpose(2, 3)) * scaling
    if attention_mask is not None:
        w = w + attention_mask
    w = torch.softmax(w, dim=-1)
    return torch.matmul(w, v).transpose(1, 2).contiguous(), w


class Float64:
    def __enter__(self):
        self.saved = (mm.MiniMaxM3VLRMSNorm.forward, mm.MiniMaxM3VLTopKRouter.forward,
                      mm.eager_attention_forward)
        mm.MiniMaxM3VLRMSNorm.forward = rmsnorm_f64
        mm.MiniMaxM3VLTopKRouter.forward = router_f64
        mm.eager_attention_forward = attention_f64

    def __exit__(self, *exc):
        (mm.MiniMaxM3VLRMSNorm.forward, mm.MiniMaxM3VLTopKRouter.forward,
         mm.eager_attention_forward) = self.saved


def causal_lm_loss(logits, labels):
    shift = F.pad(labels, (0, 1), value=-100)[..., 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), shift.reshape(-1), ignore_index=-100)


# ---- the model ----


def build_model(text_cfg, seed):
    torch.manual_seed(seed)
    cfg = MiniMaxM3VLConfig(text_config=dict(text_cfg), vision_config=dict(VISION),
                            projector_hidden_size=32)
    cfg._attn_implementation = "eager"
    cfg.text_config._attn_implementation = "eager"
    cfg.text_config._experts_implementation = "eager"
    model = mm.MiniMaxM3SparseForConditionalGeneration(cfg)
    with torch.no_grad():
        for n, p in model.named_parameters():  # Gemma norms: w around 0, 1 + w around 1
            if "language_model" in n and n.endswith("norm.weight"):
                p.copy_(0.2 * torch.randn_like(p))
        for layer in model.model.language_model.layers:
            if isinstance(layer.mlp, mm.MiniMaxM3VLSparseMoeBlock):
                b = layer.mlp.gate.e_score_correction_bias
                b.copy_(0.04 * torch.randn_like(b))
    return model.eval()


def make_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    (ba, ta), (bb, tb) = INPUTS
    ids_a = torch.randint(0, mf.VOCAB, (ba, ta), generator=g)
    ids_b = torch.randint(0, mf.VOCAB, (bb, tb), generator=g)
    labels_a, labels_b = ids_a.clone(), ids_b.clone()
    labels_a[0, : ta // 4] = -100
    labels_b[0, : tb // 4] = -100
    labels_b[-1, torch.randperm(tb, generator=g)[: tb // 5]] = -100
    return dict(ids_a=ids_a, labels_a=labels_a, ids_b=ids_b, labels_b=labels_b)


class Watch:
    """The router's decision gaps and bias-changed rows; the share of clamped gate/up values."""

    def __init__(self, model):
        self.min_gap, self.rows, self.changed, self.handles = math.inf, 0, 0, []
        self.g_clamped = self.u_clamped = self.n_act = 0
        text = model.config.text_config
        k, lim = text.num_experts_per_tok, text.swiglu_limit
        for layer in model.model.language_model.layers:
            mlp = layer.mlp
            if isinstance(mlp, mm.MiniMaxM3VLSparseMoeBlock):

                def hook(mod, inp, out, bias=mlp.gate.e_score_correction_bias):
                    s = torch.sigmoid(out[0].detach().double())
                    v = (s + bias.double()).sort(-1, descending=True).values
                    self.min_gap = min(self.min_gap, (v[:, k - 1] - v[:, k]).min().item())
                    a = (s + bias.double()).topk(k, -1).indices.sort(-1).values
                    b = s.topk(k, -1).indices.sort(-1).values
                    self.rows += s.shape[0]
                    self.changed += (a != b).any(-1).sum().item()

                self.handles.append(mlp.gate.register_forward_hook(hook))
                dense = mlp.shared_experts
            else:
                dense = mlp

            def act_hook(mod, inp, out):
                gate, up = out.detach().chunk(2, dim=-1)
                self.g_clamped += (gate > lim).sum().item()
                self.u_clamped += (up.abs() > lim).sum().item()
                self.n_act += gate.numel()

            self.handles.append(dense.gate_up_proj.register_forward_hook(act_hook))

    def close(self):
        for h in self.handles:
            h.remove()


# transformers' module names -> the trainer's (the released checkpoint's, without the prefix)
def internal_grads(model, grads):
    text = model.config.text_config
    F_, Fs, Fd = text.intermediate_size, text.shared_intermediate_size, text.dense_intermediate_size
    res = {}
    for n, g in grads.items():
        if not n.startswith("model.language_model.") and n != "lm_head.weight":
            continue
        n = n.replace("model.language_model.", "model.", 1)
        if n.endswith("mlp.experts.gate_up_proj"):
            p = n[: -len("mlp.experts.gate_up_proj")] + "block_sparse_moe.experts."
            for e in range(g.shape[0]):
                res[f"{p}{e}.w1.weight"] = g[e, :F_]
                res[f"{p}{e}.w3.weight"] = g[e, F_:]
        elif n.endswith("mlp.experts.down_proj"):
            p = n[: -len("mlp.experts.down_proj")] + "block_sparse_moe.experts."
            for e in range(g.shape[0]):
                res[f"{p}{e}.w2.weight"] = g[e]
        elif n.endswith("mlp.gate.weight"):
            res[n.replace("mlp.gate.weight", "block_sparse_moe.gate.weight")] = g
        elif n.endswith("mlp.shared_experts.gate_up_proj.weight"):
            p = n[: -len("mlp.shared_experts.gate_up_proj.weight")] + "block_sparse_moe.shared_experts."
            res[p + "gate_proj.weight"] = g[:Fs]
            res[p + "up_proj.weight"] = g[Fs:]
        elif n.endswith("mlp.shared_experts.down_proj.weight"):
            res[n.replace("mlp.shared_experts.", "block_sparse_moe.shared_experts.")] = g
        elif n.endswith("mlp.gate_up_proj.weight"):
            p = n[: -len("gate_up_proj.weight")]
            res[p + "gate_proj.weight"] = g[:Fd]
            res[p + "up_proj.weight"] = g[Fd:]
        elif ".self_attn.indexer." in n:
            res[n.replace(".self_attn.indexer.", ".self_attn.index_")] = g
        else:
            res[n] = g
    return {k: v.contiguous() for k, v in res.items()}


def run_reference(model, inp):
    out = {}
    watch = Watch(model)
    with torch.no_grad():
        r = model(input_ids=inp["ids_a"], use_cache=False)
        out["logits_a"] = r.logits.clone()
        out["loss_a"] = causal_lm_loss(r.logits, inp["labels_a"]).reshape(1).clone()
    model.zero_grad(set_to_none=True)
    r = model(input_ids=inp["ids_b"], use_cache=False)
    loss = causal_lm_loss(r.logits, inp["labels_b"])
    loss.backward()
    out["logits_b"], out["loss_b"] = r.logits.detach().clone(), loss.detach().reshape(1).clone()
    grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone()
             for n, p in model.named_parameters()}
    stats = dict(g_clamped=watch.g_clamped / max(watch.n_act, 1),
                 u_clamped=watch.u_clamped / max(watch.n_act, 1))
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
        sys.exit("make_fixtures_m3: generate() (with the cache) disagrees with the no-cache loop")
    out["gen_a"] = gen.to(torch.int32)
    text = model.config.text_config
    out["decay"] = torch.zeros(text.num_hidden_layers, text.num_attention_heads)
    gaps = dict(router_gap=watch.min_gap, greedy_gap=gap,
                bias_changed_rows=watch.changed / max(watch.rows, 1))
    return out, internal_grads(model, grads), gaps, stats


def rel_errors(ref64, grads64, ref32, grads32):
    e = {}
    for k in ("a", "b"):
        r = ref64["logits_" + k]
        e["hf_fp32_logits_" + k] = ((ref32["logits_" + k].double() - r).abs().max() / r.abs().max()).item()
        e["hf_fp32_loss_" + k] = abs(ref32["loss_" + k].item() / ref64["loss_" + k].item() - 1)
    e["hf_fp32_grad_rel_l2"] = max(
        ((grads32[n].double() - g).norm() / g.norm().clamp(min=1e-300)).item()
        for n, g in grads64.items() if g.norm() > 0)
    return e


def reference_pair(model, inp):
    ref32, grads32, gaps32, _ = run_reference(model, inp)
    m64 = model.double()
    with Float64():
        ref64, grads64, gaps, stats = run_reference(m64, inp)
    model.float()
    if not torch.equal(ref32["gen_a"], ref64["gen_a"]):
        sys.exit("make_fixtures_m3: fp32 and float64 greedy tokens differ")
    gaps = {k: min(gaps[k], gaps32[k]) for k in gaps}
    return ref64, grads64, gaps, stats, rel_errors(ref64, grads64, ref32, grads32)


def check_hf_error(name, err):
    bad = [k for k, v in err.items()
           if v > 0.5 * BOUNDS["logits" if "logits" in k else "loss" if "loss" in k else "grad"]]
    print(f"  {name}: transformers fp32 vs float64 {err}")
    if bad:
        sys.exit(f"make_fixtures_m3: {name}: transformers' own fp32 error {bad} is not below half "
                 "the C bounds")


def pick_model(spec, inp):
    has_moe = any(spec["cfg"]["moe_layer_freq"])
    for attempt in range(50):
        seed = spec["seed"] + attempt
        model = build_model(spec["cfg"], seed)
        ref, grads, gaps, stats, err = reference_pair(model, inp)
        if gaps["greedy_gap"] > MARGIN and (not has_moe or (
                gaps["router_gap"] > MARGIN and gaps["bias_changed_rows"] > 0.05)):
            return model, seed, ref, grads, gaps, stats, err
        print(f"  {spec['name']}: seed {seed} margins {gaps} not safe, next seed")
    sys.exit(f"make_fixtures_m3: {spec['name']}: no seed with safe margins")


def pack_shared(mdir, text_cfg):
    """The shared expert as routed expert E: experts.{E}.w1/w3/w2 in place of
    shared_experts.gate_proj/up_proj/down_proj (widths equal)."""
    path = os.path.join(mdir, "model.safetensors")
    sd = load_file(path)
    E = text_cfg["num_local_experts"]
    out = {}
    for k, v in sd.items():
        for proj, w in (("gate_proj", "w1"), ("up_proj", "w3"), ("down_proj", "w2")):
            key = f".block_sparse_moe.shared_experts.{proj}.weight"
            if k.endswith(key):
                k = k[: -len(key)] + f".block_sparse_moe.experts.{E}.{w}.weight"
        out[k] = v
    save_file(out, path, metadata={"format": "pt"})
    return sum(1 for k in out if f".experts.{E}." in k)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures/models")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()
    versions = mf.check_versions(args.any_version)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for spec in FIXTURES:
        inp = make_inputs(spec["seed"])
        model, seed, ref, grads, gaps, stats, err = pick_model(spec, inp)
        print(f"{spec['name']}: seed {seed}, margins {gaps}, clamped {stats}")
        check_hf_error(spec["name"], err)
        idx = {n: g.abs().max().item() for n, g in grads.items() if ".self_attn.index_" in n}
        meta = dict(fixture=spec["name"], semantics="transformers-5.24 minimax_m3_vl, float64",
                    seed=seed, torch=versions["torch"], transformers=versions["transformers"],
                    safetensors=versions["safetensors"], **gaps, **stats, **err,
                    indexer_grad_max=max(idx.values()) if idx else "none")
        if idx:
            print(f"  {spec['name']}: indexer gradients under CE, max |g| = {max(idx.values())}")
        mdir = os.path.join(args.out, spec["name"])
        shutil.rmtree(mdir, ignore_errors=True)
        model.save_pretrained(mdir)
        if spec.get("packed"):
            meta["packed_tensors"] = pack_shared(mdir, spec["cfg"])
        mf.save_ref(os.path.join(args.out, spec["name"] + ".ref.safetensors"), inp, ref, grads, meta)
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(args.out) for f in fs)
    print(f"total fixture size {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
