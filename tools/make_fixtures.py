#!/usr/bin/env python3
"""make_fixtures.py: tiny random MiniMax models and Hugging Face reference outputs for the C
parity tests (tests/models/parity_model.c, docs/parity.md). Run from the repository root:

    /work/pyref/bin/python tools/make_fixtures.py [--out tests/fixtures/models]

Pinned versions (the script refuses others unless --any-version is given, because the recorded
numbers are what *this* transformers computes):
    torch==2.15.0  transformers==5.24.0  safetensors==0.8.0

What it writes under --out:
  ids_a.json labels_a.json ids_b.json labels_b.json   the inputs, shared by all fixtures:
      a = 2 x 37 tokens, b = 2 x 70 tokens (block_size 16: blocks crossed, last block partial);
      labels are Hugging Face style (unshifted; the model shifts), -100 where ignored.
  <name>/                 a model directory as transformers' save_pretrained writes it
  <name>.ref.safetensors  ids_a labels_a logits_a loss_a [aux_a] gen_a (10 greedy tokens per row
                          after ids_a), ids_b labels_b logits_b loss_b [aux_b], decay (the
                          lightning slope_rate per layer and head, 0 for softmax layers), and
                          grad.<parameter name> of loss_b for every parameter (v4.5x names).
                          All F32: ids, labels and tokens are exact integers in F32.

Fixtures:
  tiny_released8       the released layer pattern ((i+1)%8==0 full) over 8 layers, all alphas
                       3.5565588200778455, betas 1, 4 heads x 16, 4 kv heads (MHA)
  tiny_irregular_gqa   5 layers [full, linear, full, linear, linear], 2 kv heads, a different
                       alpha/beta per residual kind, router aux loss on (output_router_logits)
  tiny_mqa             3 layers [linear, full, linear], 1 kv head
  tiny_mqa_v5          tiny_mqa's tensors under transformers v5 runtime names (fused
                       mlp.experts.gate_up_proj/down_proj, mlp.gate): same outputs as tiny_mqa
                       (checked here by loading it back into transformers)
  tiny_mqa_orig        tiny_mqa's tensors in the original release's layout (sharded, no decay
                       buffers) with an original-schema config.json (minimax_text_01,
                       attn_type_list, rotary_dim = head_dim/2, postnorm). Its reference follows
                       the original release's semantics, which transformers 5.24 does not
                       implement: it is transformers' MiniMax with two parts swapped for
                       transformers' own code of the original math -- the partial RoPE of
                       MiniMax-M2 (rotary_dim dims, inv_freq over rotary_dim) and the original
                       decay slopes (ALiBi slopes x (1 - l/(L-1) + 1e-5)).
In every fixture one lightning layer has its qkv_proj scaled by 0.25, so that its output's mean
square is near the inner norm's eps and the eps (1e-6) shows in the logits (checked).

Every reference is cross-checked against tools/minimax_naive.py (an independent float64
transcription of the math, both variants): logits, loss and all gradients. The script also
insists on safety margins so that fp32 rounding cannot flip a discrete decision: the gap
between the K-th and (K+1)-th router probability, and between the best and second-best logit
at every greedy step, must exceed 1e-4 (a fixture's seed is advanced until they do).
"""

import argparse
import copy
import json
import math
import os
import shutil
import sys

import torch

PINNED = {"torch": "2.15.0", "transformers": "5.24.0", "safetensors": "0.8.0"}

import safetensors  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import MiniMaxConfig, MiniMaxForCausalLM  # noqa: E402
from transformers.models.minimax import modeling_minimax  # noqa: E402
from transformers.models.minimax_m2 import modeling_minimax_m2  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minimax_naive  # noqa: E402

ALPHA = 3.5565588200778455  # (2 * 80) ** 0.25, the released value
VOCAB = 260
MARGIN = 1e-4
N_GEN = 10
BUFFERS = ("slope_rate", "query_decay", "key_decay", "diagonal_decay")
SMALL_QKV = 0.25


def check_versions(any_version):
    got = {
        "torch": torch.__version__.split("+")[0],
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
    }
    bad = {k: v for k, v in got.items() if v != PINNED[k]}
    if bad and not any_version:
        sys.exit(f"make_fixtures: versions {bad} differ from the pinned {PINNED}")
    return got


def base_config(**kw):
    cfg = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=24,
        num_attention_heads=4,
        head_dim=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        block_size=16,
        rms_norm_eps=1e-5,
        hidden_act="silu",
        initializer_range=0.125,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        max_position_embeddings=4096,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        tie_word_embeddings=False,
        router_aux_loss_coef=0.001,
        output_router_logits=False,
    )
    cfg.update(kw)
    return cfg


def released_types(n):
    return ["full_attention" if (i + 1) % 8 == 0 else "linear_attention" for i in range(n)]


FIXTURES = [
    dict(
        name="tiny_released8",
        seed=1000,
        small_qkv=(3,),
        cfg=base_config(
            num_hidden_layers=8,
            num_key_value_heads=4,
            layer_types=released_types(8),
            full_attn_alpha_factor=ALPHA,
            full_attn_beta_factor=1.0,
            linear_attn_alpha_factor=ALPHA,
            linear_attn_beta_factor=1.0,
            mlp_alpha_factor=ALPHA,
            mlp_beta_factor=1.0,
        ),
    ),
    dict(
        name="tiny_irregular_gqa",
        seed=2000,
        small_qkv=(3,),
        cfg=base_config(
            num_hidden_layers=5,
            num_key_value_heads=2,
            layer_types=["full_attention", "linear_attention", "full_attention"]
            + ["linear_attention", "linear_attention"],
            full_attn_alpha_factor=2.25,
            full_attn_beta_factor=0.75,
            linear_attn_alpha_factor=3.0,
            linear_attn_beta_factor=1.25,
            mlp_alpha_factor=ALPHA,
            mlp_beta_factor=0.875,
            output_router_logits=True,
            router_aux_loss_coef=0.02,
        ),
    ),
    dict(
        name="tiny_mqa",
        seed=3000,
        small_qkv=(0,),
        copies=True,
        cfg=base_config(
            num_hidden_layers=3,
            num_key_value_heads=1,
            layer_types=["linear_attention", "full_attention", "linear_attention"],
            full_attn_alpha_factor=ALPHA,
            full_attn_beta_factor=1.0,
            linear_attn_alpha_factor=ALPHA,
            linear_attn_beta_factor=1.0,
            mlp_alpha_factor=ALPHA,
            mlp_beta_factor=1.0,
        ),
    ),
]


def make_inputs():
    g = torch.Generator().manual_seed(12345)
    ids_a = torch.randint(0, VOCAB, (2, 37), generator=g)
    ids_b = torch.randint(0, VOCAB, (2, 70), generator=g)
    labels_a = ids_a.clone()
    labels_a[0, :9] = -100  # a prompt that is not trained on
    labels_a[1, 20:23] = -100
    labels_b = ids_b.clone()
    labels_b[0, :17] = -100
    labels_b[1, torch.randperm(70, generator=g)[:15]] = -100
    return dict(ids_a=ids_a, labels_a=labels_a, ids_b=ids_b, labels_b=labels_b)


def build_model(cfg_dict, seed, small_qkv=()):
    torch.manual_seed(seed)
    cfg = MiniMaxConfig(**cfg_dict)
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"
    model = MiniMaxForCausalLM(cfg)
    # RMSNorm weights start at 1; perturb them so that a misplaced norm weight shows.
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight") or n.endswith("layernorm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
        # Lightning layers whose output is small next to the inner norm's eps (mean square
        # about 1e-5): there the eps (1e-6, not rms_norm_eps) changes the logits visibly.
        for layer in small_qkv:
            model.model.layers[layer].self_attn.qkv_proj.weight.mul_(SMALL_QKV)
    return model.eval()


class RouterWatch:
    """Records the smallest gap between the K-th and (K+1)-th router probability."""

    def __init__(self, model):
        self.min_gap = math.inf
        self.handles = []
        k = model.config.num_experts_per_tok
        for layer in model.model.layers:

            def hook(mod, inp, out, k=k):
                p = torch.softmax(out[0].detach().double(), -1).sort(-1, descending=True).values
                self.min_gap = min(self.min_gap, (p[:, k - 1] - p[:, k]).min().item())

            self.handles.append(layer.mlp.gate.register_forward_hook(hook))

    def close(self):
        for h in self.handles:
            h.remove()


def run_reference(model, inp):
    """Logits/loss of a and b, gradients of loss_b, greedy tokens after ids_a."""
    out = {}
    watch = RouterWatch(model)
    with torch.no_grad():
        r = model(input_ids=inp["ids_a"], labels=inp["labels_a"], use_cache=False)
        out["logits_a"], out["loss_a"] = r.logits.clone(), r.loss.reshape(1).clone()
        if r.aux_loss is not None:
            out["aux_a"] = r.aux_loss.reshape(1).float().clone()
    model.zero_grad(set_to_none=True)
    r = model(input_ids=inp["ids_b"], labels=inp["labels_b"], use_cache=False)
    r.loss.backward()
    out["logits_b"], out["loss_b"] = r.logits.detach().clone(), r.loss.detach().reshape(1).clone()
    if r.aux_loss is not None:
        out["aux_b"] = r.aux_loss.detach().reshape(1).float().clone()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    # greedy: transformers' generate (KV cache + recurrent state) and a no-cache argmax loop
    # must agree; the loop also gives the margins
    with torch.no_grad():
        gen = model.generate(
            inp["ids_a"],
            max_new_tokens=N_GEN,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
            attention_mask=torch.ones_like(inp["ids_a"]),
        )[:, inp["ids_a"].shape[1] :]
        cur, gap = inp["ids_a"], math.inf
        for _ in range(N_GEN):
            lg = model(input_ids=cur, use_cache=False).logits[:, -1].double()
            top = lg.topk(2, -1).values
            gap = min(gap, (top[:, 0] - top[:, 1]).min().item())
            cur = torch.cat([cur, lg.argmax(-1, keepdim=True)], 1)
    watch.close()
    if not torch.equal(gen, cur[:, inp["ids_a"].shape[1] :]):
        sys.exit("make_fixtures: generate() disagrees with the no-cache greedy loop")
    out["gen_a"] = gen.to(torch.int32)
    out["decay"] = decay_table(model)
    return out, v4_grads(model, grads), dict(router_gap=watch.min_gap, greedy_gap=gap)


def decay_table(model):
    """lambda per (layer, head) as the model holds it (slope_rate buffers); 0 for softmax layers."""
    cfg = model.config
    t = torch.zeros(cfg.num_hidden_layers, cfg.num_attention_heads)
    for i, layer in enumerate(model.model.layers):
        if isinstance(layer.self_attn, modeling_minimax.MiniMaxLightningAttention):
            t[i] = layer.self_attn.slope_rate.detach().reshape(-1)
    return t


def eps_sensitivity(model, inp, ref):
    """max |logit change| / max |logit| of batch b when the lightning inner norm used eps 1e-5
    instead of 1e-6: the fixture must be able to tell the two apart."""
    norms = [l.self_attn.norm for l in model.model.layers if hasattr(l.self_attn, "norm")]
    with torch.no_grad():
        for n in norms:
            n.variance_epsilon = 1e-5
        lg = model(input_ids=inp["ids_b"], use_cache=False).logits
        for n in norms:
            n.variance_epsilon = 1e-6
    r = ref["logits_b"]
    return ((lg - r).abs().max() / r.abs().max()).item()


def v4_grads(model, grads):
    """Runtime (fused) gradient names -> transformers v4.5x checkpoint names."""
    res = {}
    for n, g in grads.items():
        res.update(split_fused(n, g, model.config))
    return res


def split_fused(name, t, cfg):
    """One runtime tensor -> {v4.5x name: tensor}: experts unfused, router renamed."""
    F = cfg.intermediate_size
    if name.endswith("mlp.experts.gate_up_proj"):
        p = name[: -len("mlp.experts.gate_up_proj")] + "block_sparse_moe.experts."
        out = {}
        for e in range(t.shape[0]):
            out[f"{p}{e}.w1.weight"] = t[e, :F].contiguous()
            out[f"{p}{e}.w3.weight"] = t[e, F:].contiguous()
        return out
    if name.endswith("mlp.experts.down_proj"):
        p = name[: -len("mlp.experts.down_proj")] + "block_sparse_moe.experts."
        return {f"{p}{e}.w2.weight": t[e].contiguous() for e in range(t.shape[0])}
    if name.endswith("mlp.gate.weight"):
        return {name.replace("mlp.gate.weight", "block_sparse_moe.gate.weight"): t}
    return {name: t}


def naive_check(model, inp, ref, grads, variant, rotary_dim, label):
    """Cross-check a reference against the float64 transcription; returns the measured diffs."""
    w = {}
    for n, p in model.named_parameters():
        w.update(split_fused(n, p.detach(), model.config))
    w64 = {n: t.double().requires_grad_(True) for n, t in w.items()}
    cfg = model.config.to_dict()
    cfg["output_router_logits"] = model.config.output_router_logits
    res = {}
    with torch.no_grad():
        lg_a, loss_a, _ = minimax_naive.forward(w64, cfg, inp["ids_a"], inp["labels_a"], variant, rotary_dim)
    lg_b, loss_b, _ = minimax_naive.forward(w64, cfg, inp["ids_b"], inp["labels_b"], variant, rotary_dim)
    loss_b.backward()
    for key, lg, ls in (("a", lg_a, loss_a), ("b", lg_b, loss_b)):
        r = ref["logits_" + key].double()
        res[f"naive_logits_{key}"] = ((lg.detach() - r).abs().max() / r.abs().max()).item()
        res[f"naive_loss_{key}"] = abs(ls.item() - ref["loss_" + key].item()) / abs(ls.item())
    worst = 0.0
    for n, t in w64.items():
        g = grads[n].double()
        worst = max(worst, ((t.grad - g).norm() / t.grad.norm().clamp(min=1e-30)).item())
    res["naive_grad_rel_l2"] = worst
    ok = res["naive_logits_a"] < 1e-5 and res["naive_logits_b"] < 1e-5 and worst < 1e-4
    ok = ok and res["naive_loss_a"] < 1e-6 and res["naive_loss_b"] < 1e-6
    print(f"  {label}: naive float64 cross-check {res}")
    if not ok:
        sys.exit(f"make_fixtures: {label}: reference and float64 transcription disagree")
    return res


def original_slopes(num_heads, layer, num_layers):
    """The original release: ALiBi slopes (fp32) times the factor with denominator L-1."""
    s = torch.tensor(minimax_naive.alibi_slopes(num_heads), dtype=torch.float32)
    f = (1 - layer / (num_layers - 1) + 1e-5) if num_layers > 1 else 1 + 1e-5
    return (s * f).reshape(num_heads, 1, 1)


class OriginalSemantics:
    """Context: transformers' MiniMax switched to the original release's semantics, using
    transformers' own MiniMax-M2 partial RoPE and the original slope formula."""

    def __init__(self, model, rotary_dim):
        self.model, self.rotary_dim = model, rotary_dim

    def __enter__(self):
        m = self.model
        self.saved = (modeling_minimax.apply_rotary_pos_emb, m.model.rotary_emb)
        cfg = copy.deepcopy(m.config)
        cfg.rope_parameters = dict(cfg.rope_parameters)
        cfg.rope_parameters["partial_rotary_factor"] = self.rotary_dim / cfg.head_dim
        modeling_minimax.apply_rotary_pos_emb = modeling_minimax_m2.apply_rotary_pos_emb
        m.model.rotary_emb = modeling_minimax_m2.MiniMaxM2RotaryEmbedding(config=cfg)
        L = m.config.num_hidden_layers
        self.saved_buf = []
        with torch.no_grad():
            for i, layer in enumerate(m.model.layers):
                att = layer.self_attn
                if isinstance(att, modeling_minimax.MiniMaxLightningAttention):
                    self.saved_buf.append((att, [getattr(att, b).clone() for b in BUFFERS]))
                    s = original_slopes(m.config.num_attention_heads, i, L)
                    att.slope_rate.copy_(s)
                    for b, v in zip(BUFFERS[1:], att.decay_factors(att.slope_rate)):
                        getattr(att, b).copy_(v)
        return m

    def __exit__(self, *exc):
        modeling_minimax.apply_rotary_pos_emb, self.model.model.rotary_emb = self.saved
        with torch.no_grad():
            for att, vals in self.saved_buf:
                for b, v in zip(BUFFERS, vals):
                    getattr(att, b).copy_(v)


def original_config(cfg, rotary_dim):
    """The original release's config.json schema (MiniMaxText01Config) for the same model."""
    return {
        "architectures": ["MiniMaxText01ForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_minimax_text_01.MiniMaxText01Config",
            "AutoModelForCausalLM": "modeling_minimax_text_01.MiniMaxText01ForCausalLM",
        },
        "model_type": "minimax_text_01",
        "attn_type_list": [1 if t == "full_attention" else 0 for t in cfg.layer_types],
        "attention_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": None,
        "head_dim": cfg.head_dim,
        "hidden_act": cfg.hidden_act,
        "hidden_size": cfg.hidden_size,
        "initializer_range": cfg.initializer_range,
        "intermediate_size": cfg.intermediate_size,
        "layernorm_full_attention_alpha": cfg.full_attn_alpha_factor,
        "layernorm_full_attention_beta": cfg.full_attn_beta_factor,
        "layernorm_linear_attention_alpha": cfg.linear_attn_alpha_factor,
        "layernorm_linear_attention_beta": cfg.linear_attn_beta_factor,
        "layernorm_mlp_alpha": cfg.mlp_alpha_factor,
        "layernorm_mlp_beta": cfg.mlp_beta_factor,
        "max_position_embeddings": cfg.max_position_embeddings,
        "num_attention_heads": cfg.num_attention_heads,
        "num_experts_per_tok": cfg.num_experts_per_tok,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
        "num_local_experts": cfg.num_local_experts,
        "output_router_logits": cfg.output_router_logits,
        "postnorm": True,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_parameters["rope_theta"],
        "rotary_dim": rotary_dim,
        "router_aux_loss_coef": cfg.router_aux_loss_coef,
        "router_jitter_noise": 0.0,
        "shared_intermediate_size": 0,
        "shared_moe_mode": "sigmoid",
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "transformers_version": "4.45.2",
        "vocab_size": cfg.vocab_size,
    }


def save_ref(path, inp, ref, grads, meta):
    # token ids and labels are stored as F32 (exact below 2^24) so that the project's float
    # safetensors reader reads every tensor of the file
    t = {k: v.float().contiguous() for k, v in inp.items()}
    for k, v in ref.items():
        t[k] = v.float().contiguous()
    for n, g in grads.items():
        t["grad." + n] = g.float().contiguous()
    save_file(t, path, metadata={k: str(v) for k, v in meta.items()})


def write_json(path, obj):
    with open(path, "w") as f:
        if isinstance(obj, list):  # token ids: one row per line
            f.write("[\n" + ",\n".join("  " + json.dumps(r) for r in obj) + "\n]\n")
        else:
            json.dump(obj, f, indent=2)
            f.write("\n")


def make_fixture(spec, inp, out_dir, versions):
    name = spec["name"]
    for attempt in range(50):
        seed = spec["seed"] + attempt
        model = build_model(spec["cfg"], seed, spec.get("small_qkv", ()))
        ref, grads, gaps = run_reference(model, inp)
        orig = None
        if spec.get("copies"):
            rot = model.config.head_dim // 2
            with OriginalSemantics(model, rot):
                orig = run_reference(model, inp) + (rot,)
            gaps = {k: min(gaps[k], orig[2][k]) for k in gaps}
        if gaps["router_gap"] > MARGIN and gaps["greedy_gap"] > MARGIN:
            break
        print(f"  {name}: seed {seed} margins {gaps} too small, next seed")
    else:
        sys.exit(f"make_fixtures: {name}: no seed with safe margins")
    print(f"{name}: seed {seed}, margins {gaps}")
    meta = dict(
        fixture=name,
        semantics="transformers-5.24",
        seed=seed,
        torch=versions["torch"],
        transformers=versions["transformers"],
        safetensors=versions["safetensors"],
        **gaps,
    )
    meta.update(naive_check(model, inp, ref, grads, "hf", None, name))
    meta["inner_eps_sensitivity"] = eps_sensitivity(model, inp, ref)
    print(f"  {name}: logits change {meta['inner_eps_sensitivity']:.3e} x max|logit| with inner eps 1e-5")
    if meta["inner_eps_sensitivity"] < 1e-4:
        sys.exit(f"make_fixtures: {name} cannot tell the inner norm's eps 1e-6 from 1e-5")
    mdir = os.path.join(out_dir, name)
    shutil.rmtree(mdir, ignore_errors=True)
    model.save_pretrained(mdir)
    save_ref(os.path.join(out_dir, name + ".ref.safetensors"), inp, ref, grads, meta)

    if not spec.get("copies"):
        return
    # v5 runtime naming: the fused tensors exactly as the model holds them
    vdir = os.path.join(out_dir, name + "_v5")
    shutil.rmtree(vdir, ignore_errors=True)
    os.makedirs(vdir)
    sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(sd, os.path.join(vdir, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(mdir, "config.json"), vdir)
    back = MiniMaxForCausalLM.from_pretrained(vdir, attn_implementation="eager").eval()
    with torch.no_grad():
        lg = back(input_ids=inp["ids_a"], use_cache=False).logits
    if not torch.equal(lg, ref["logits_a"]):
        sys.exit("make_fixtures: the v5-naming copy does not reproduce the v4 logits")
    print(f"{name}_v5: reloaded through transformers, logits identical")

    # original release layout + semantics
    oref, ograds, ogaps, rot = orig
    odir = os.path.join(out_dir, name + "_orig")
    shutil.rmtree(odir, ignore_errors=True)
    os.makedirs(odir)
    v4 = load_file(os.path.join(mdir, "model.safetensors"))
    v4 = {k: v for k, v in v4.items() if not k.endswith(BUFFERS)}
    keys = sorted(v4)
    shards = [keys[: len(keys) // 2], keys[len(keys) // 2 :]]
    index = {"metadata": {"total_size": sum(v.numel() * 4 for v in v4.values())}, "weight_map": {}}
    for i, ks in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: v4[k] for k in ks}, os.path.join(odir, fn), metadata={"format": "pt"})
        index["weight_map"].update({k: fn for k in ks})
    write_json(os.path.join(odir, "model.safetensors.index.json"), index)
    write_json(os.path.join(odir, "config.json"), original_config(model.config, rot))
    ometa = dict(meta, fixture=name + "_orig", semantics="original-release", rotary_dim=rot)
    ometa.update({k: v for k, v in ogaps.items()})
    with OriginalSemantics(model, rot):
        ometa.update(naive_check(model, inp, oref, ograds, "original", rot, name + "_orig"))
    # the two variants must really differ, or the original fixture proves nothing new
    d = (oref["logits_b"] - ref["logits_b"]).abs().max().item()
    ometa["max_logit_change_vs_hf_semantics"] = d
    print(f"{name}_orig: max |logit change| vs transformers semantics {d:.3e}")
    if d < 1e-3:
        sys.exit("make_fixtures: original semantics do not change the logits measurably")
    save_ref(os.path.join(out_dir, name + "_orig.ref.safetensors"), inp, oref, ograds, ometa)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures/models")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()
    versions = check_versions(args.any_version)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    inp = make_inputs()
    for k, v in inp.items():
        write_json(os.path.join(args.out, k + ".json"), v.tolist())
    for spec in FIXTURES:
        make_fixture(spec, inp, args.out, versions)
    total = 0
    for root, _, files in os.walk(args.out):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print(f"total fixture size {total / 1e6:.2f} MB")
    if total > 10_000_000:
        sys.exit("make_fixtures: fixtures exceed 10 MB")


if __name__ == "__main__":
    main()
