#!/usr/bin/env python3
"""check_export.py: a minimax-train export loads into transformers with no missing or unexpected
keys and gives the same logits as minimax-forward on the same directory.

    /work/pyref/bin/python tools/check_export.py runs/tiny/checkpoint-150 [--forward build/minimax-forward]

Pinned: transformers 5.24.0, torch 2.15.0, safetensors 0.8.0 (the versions of docs/parity.md).
transformers 5.24 rotates the whole head (it ignores partial_rotary_factor), so the logits agree
only for exports of configs whose RoPE covers the whole head, as recipes/configs/tiny.json does.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file

PINNED = {"transformers": "5.24.0", "torch": "2.15.0"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export_dir")
    ap.add_argument("--forward", default="build/minimax-forward")
    args = ap.parse_args()
    for mod, want in (("transformers", transformers.__version__), ("torch", torch.__version__)):
        if not want.startswith(PINNED[mod]):
            sys.exit(f"{mod} {want} installed, {PINNED[mod]} pinned")

    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        args.export_dir, dtype=torch.float32, output_loading_info=True)
    missing, unexpected = sorted(info["missing_keys"]), sorted(info["unexpected_keys"])
    print(f"missing keys: {len(missing)} {missing[:5]}, unexpected keys: {len(unexpected)} {unexpected[:5]}")

    vocab = model.config.vocab_size
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
    ok = not missing and not unexpected and diff <= 1e-4 and diff / scale <= 1e-5
    print("OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
