#!/usr/bin/env python3
"""check_export.py: a minimax-train export loads into transformers with no missing or unexpected
keys and gives the same logits as minimax-forward on the same directory (any family:
MiniMaxForCausalLM, MiniMaxM2ForCausalLM through AutoModelForCausalLM; a MiniMax-M3 VL export,
model_type minimax_m3_vl, as MiniMaxM3SparseForConditionalGeneration, text only).

    /work/pyref/bin/python tools/check_export.py runs/tiny/checkpoint-150 \
        [--forward build/minimax-forward] [--source MODEL_DIR]

Unexpected keys are allowed only for the tensors minimax-train carries into exports without
training them (MiniMax-M2's multi-token-prediction modules, under an "mtp" name component):
transformers has no module for them and lists them; every other unexpected key fails.
--source (the run's model.path): the exported config.json must have no quantization_config,
every carried tensor (MTP; for M3 also the vision tower, projector and patch-merge MLP, and the
exported config.json's keys besides text_config must equal the source's) must equal the
source's byte for byte (dtype, shape, data) and every
e_score_correction_bias (a buffer: never trained) must hold the source's values.

Pinned: transformers 5.24.0, torch 2.15.0, safetensors 0.8.0 (the versions of docs/parity.md).
transformers 5.24's `minimax` (Text-01) rotates the whole head (it ignores
partial_rotary_factor), so for Text-01 the logits agree only for exports of configs whose RoPE
covers the whole head, as recipes/configs/tiny.json does; its `minimax_m2` reads partial RoPE
(rotary_dim), so every M2 export is compared.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file

PINNED = {"transformers": "5.24.0", "torch": "2.15.0"}
CARRIED = re.compile(r"(^|\.)mtp[._]")
VISION = re.compile(r"^(vision_tower|multi_modal_projector|patch_merge_mlp)\.")


def tensors(path):
    """name -> (file, dtype string, shape) of a safetensors directory, from the headers."""
    index = os.path.join(path, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    out = {}
    for name in files:
        with open(os.path.join(path, name), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        for k, v in header.items():
            if k != "__metadata__":
                out[k] = (os.path.join(path, name), v["dtype"], v["shape"], v["data_offsets"], 8 + n)
    return out


def raw(entry):
    file, _, _, (a, b), start = entry
    with open(file, "rb") as f:
        f.seek(start + a)
        return f.read(b - a)


def check_source(export_dir, source_dir):
    """Carried tensors byte for byte, correction biases equal, no quantization_config."""
    ok = True
    cfg = json.load(open(os.path.join(export_dir, "config.json")))
    if "quantization_config" in cfg:
        print("config.json still has quantization_config")
        ok = False
    src, exp = tensors(source_dir), tensors(export_dir)
    carried = [k for k in src if CARRIED.search(k) or VISION.search(k)]
    if cfg.get("model_type") == "minimax_m3_vl":
        scfg = json.load(open(os.path.join(source_dir, "config.json")))
        keep = [k for k in scfg if k != "text_config" and scfg[k] != cfg.get(k)]
        print(f"VL config keys besides text_config changed: {keep}")
        ok = ok and not keep
    same = [k for k in carried if k in exp and exp[k][1:3] == src[k][1:3] and raw(exp[k]) == raw(src[k])]
    print(f"carried tensors: {len(same)} of {len(carried)} byte for byte "
          f"({sorted(set(src[k][1] for k in carried))})")
    ok = ok and len(same) == len(carried)
    biases = [k for k in src if k.endswith("e_score_correction_bias")]
    worst = 0.0
    for k in biases:
        name = k if k in exp else k.replace(".block_sparse_moe.", ".mlp.")
        with safe_open(src[k][0], "pt") as a, safe_open(exp[name][0], "pt") as b:
            worst = max(worst, (a.get_tensor(k).double() - b.get_tensor(name).double()).abs().max().item())
    if biases:
        print(f"e_score_correction_bias: {len(biases)} tensors, max |export - source| {worst:.3g}")
    return ok and worst == 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export_dir")
    ap.add_argument("--forward", default="build/minimax-forward")
    ap.add_argument("--source", help="the run's model.path: carried tensors and biases unchanged")
    args = ap.parse_args()
    for mod, want in (("transformers", transformers.__version__), ("torch", torch.__version__)):
        if not want.startswith(PINNED[mod]):
            sys.exit(f"{mod} {want} installed, {PINNED[mod]} pinned")

    cls = transformers.AutoModelForCausalLM
    if json.load(open(os.path.join(args.export_dir, "config.json"))).get("model_type") == "minimax_m3_vl":
        cls = transformers.MiniMaxM3SparseForConditionalGeneration  # the VL layout's class
    model, info = cls.from_pretrained(args.export_dir, dtype=torch.float32, output_loading_info=True)
    missing, unexpected = sorted(info["missing_keys"]), sorted(info["unexpected_keys"])
    carried = [k for k in unexpected if CARRIED.search(k)]
    unexpected = [k for k in unexpected if not CARRIED.search(k)]
    dtypes = sorted(set(v[1] for v in tensors(args.export_dir).values()))
    print(f"{type(model).__name__}: dtypes {dtypes}; missing keys: {len(missing)} {missing[:5]}, "
          f"unexpected keys: {len(unexpected)} {unexpected[:5]}"
          + (f" (besides {len(carried)} carried MTP tensors transformers has no module for)"
             if carried else ""))
    ok = not missing and not unexpected
    if args.source:
        ok = check_source(args.export_dir, args.source) and ok

    vocab = getattr(model.config, "text_config", model.config).vocab_size
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (2, 37), generator=gen)
    with torch.no_grad():
        ref = model(input_ids=ids).logits.float()

    with tempfile.TemporaryDirectory() as tmp:
        ids_path = os.path.join(tmp, "ids.json")
        out_path = os.path.join(tmp, "out.safetensors")
        with open(ids_path, "w") as f:
            json.dump(ids.tolist(), f)
        subprocess.run([args.forward, "--model", args.export_dir, "--ids", ids_path, "--out",
                        out_path], check=True, stdout=subprocess.DEVNULL)
        ours = load_file(out_path)["logits"]
    diff = (ours - ref).abs().max().item()
    scale = ref.abs().max().item()
    print(f"logits: max abs diff {diff:.3g}, relative to max|logit| {diff / scale:.3g}")
    ok = ok and diff <= 1e-4 and diff / scale <= 1e-5
    print("OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
