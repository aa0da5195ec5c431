#!/usr/bin/env python3
"""count_params.py: transformers' own parameter counts of the released configs, the expected
values of the op_info_counts_* tests (tests/fixtures/info/<name>.txt; docs/models.md).

    /work/pyref/bin/python tools/count_params.py [--out tests/fixtures/info]

For each config: transformers 5.24 builds AutoModelForCausalLM from it on the meta device (no
memory; quantization_config dropped: the dequantised model is what is counted and trained) and
sums numel over model.parameters(), which is transformers' num_parameters(); buffers (the
routers' e_score_correction_bias, RoPE's inv_freq) are not parameters there and are listed
apart. MiniMax-M3's released text config (model_type minimax_m3) is read as
MiniMaxM3VLTextConfig and counted as MiniMaxM3VLForCausalLM, the text model alone (the VL
checkpoint's vision tower is not part of it); its shared experts (mlp.shared_experts.*) and the
indexers run on every token, so they are active. Active per token without the embeddings is the total minus embed_tokens and lm_head
minus the experts the router does not choose: every expert tensor of transformers' fused
MoE modules (mlp.experts.*) times (1 - top_k / num_local_experts). Printed as minimax-info's
keys, so that the test compares them line by line.

Pinned: transformers 5.24.0, torch 2.15.0.
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import transformers

PINNED = {"transformers": "5.24.0", "torch": "2.15.0"}
# (Text-01's expected counts are in tests/models/model_io.c, op_info_counts: its released config
# is in the original schema, which transformers does not read)
CONFIGS = {
    "minimax-m2": "recipes/configs/minimax-m2.json",
    "tiny-m2": "recipes/configs/tiny-m2.json",
    "minimax-m3": "recipes/configs/minimax-m3.json",
}


def load_config(path):
    with open(path) as f:
        raw = json.load(f)
    raw.pop("quantization_config", None)
    if raw.get("model_type") == "minimax_m3":
        # the release's text config (model_type minimax_m3, which AutoConfig does not know):
        # transformers reads it as MiniMaxM3VLTextConfig (its legacy keys mapped in
        # __post_init__), the text model MiniMaxM3VLForCausalLM
        from transformers import MiniMaxM3VLTextConfig
        raw.pop("model_type")
        raw.pop("architectures", None)
        return MiniMaxM3VLTextConfig(**raw)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(raw, f)
        return transformers.AutoConfig.from_pretrained(tmp)


def counts(path):
    cfg = load_config(path)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    total = sum(p.numel() for p in model.parameters())
    assert total == model.num_parameters()
    embed = model.model.embed_tokens.weight.numel() + model.lm_head.weight.numel()
    experts = sum(p.numel() for n, p in model.named_parameters() if ".mlp.experts." in n)
    buffers = sum(b.numel() for n, b in model.named_buffers() if "e_score_correction_bias" in n)
    E, K = cfg.num_local_experts, cfg.num_experts_per_tok
    assert experts % E == 0
    active = total - embed - experts + experts // E * K
    return {
        "params_total": total,
        "params_active": active,
        "params_active_with_embeddings": active + embed,
        "params_embeddings": embed,
        "params_experts": experts,
        "params_buffers": buffers,
    }, type(model).__name__


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/info")
    args = ap.parse_args()
    for mod, have in (("transformers", transformers.__version__), ("torch", torch.__version__)):
        if not have.startswith(PINNED[mod]):
            sys.exit(f"{mod} {have} installed, {PINNED[mod]} pinned")
    os.makedirs(args.out, exist_ok=True)
    for name, path in CONFIGS.items():
        c, cls = counts(path)
        lines = [f"# transformers {transformers.__version__} {cls} from {path} (meta device)"]
        lines += [f"{k}={v}" for k, v in c.items()]
        text = "\n".join(lines) + "\n"
        with open(os.path.join(args.out, f"{name}.txt"), "w") as f:
            f.write(text)
        print(text, end="")


if __name__ == "__main__":
    main()
