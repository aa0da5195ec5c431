#!/usr/bin/env python3
"""check_export.py: a minimax-train export loads into transformers with no missing or unexpected
keys and gives the same logits as minimax-forward on the same directory (any family:
MiniMaxForCausalLM, MiniMaxM2ForCausalLM through AutoModelForCausalLM; a MiniMax-M3 VL export,
model_type minimax_m3_vl, as MiniMaxM3SparseForConditionalGeneration, text only).

    /work/pyref/bin/python tools/check_export.py runs/tiny/checkpoint-150 \
        [--forward build/minimax-forward] [--source MODEL_DIR] [--master FP32_EXPORT]

Every export: config.json has "dtype" (transformers v5's name; "torch_dtype" too, what v4
reads), generation_config.json loads with GenerationConfig.from_pretrained and has an
eos_token_id; a directory named final/ (output.export_final) holds no training state (no
state*.h5, no recipe.toml).

An FP8 export (output.export_dtype = "fp8": config.json with an fp8 quantization_config) loads
through transformers' FP8 path dequantised (FineGrainedFP8Config(dequantize=True): the e4m3
values times weight_scale_inv, in fp32); with --source its byte layout (tensor names, dtypes,
shapes, quantization_config) must equal the source's; with --master (the fp32 export of the
same run: the fp32 master weights) every dequantised weight must be within the FP8 rounding of
the master (per element inv x h(|x| / inv) + 4 |x| 2^-24, h the half-ulp of e4m3, inv the
block's weight_scale_inv), its bytes must be transformers' Fp8Quantize of the master, and the
logits of both models are printed side by side.

Unexpected keys are allowed only for the tensors minimax-train carries into exports without
training them (MiniMax-M2's multi-token-prediction modules, under an "mtp" name component):
transformers has no module for them and lists them; every other unexpected key fails.
--source (the run's model.path): the exported config.json must have no quantization_config,
every carried tensor (MTP; for M3 also the vision tower, projector and patch-merge MLP, and the
exported config.json's keys besides text_config must equal the source's) must equal the
source's byte for byte (dtype, shape, data) and every
e_score_correction_bias (a buffer: never trained) must hold the source's values.

Pinned: transformers 5.24.0, torch 2.15.0, safetensors 0.8.0 (the versions of docs/parity.md);
transformers' FP8 path also wants accelerate installed (1.16.0 was used).
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
    """Carried tensors byte for byte, correction biases equal, no quantization_config (an FP8
    export: the source's, and the source's tensor names, dtypes and shapes)."""
    ok = True
    cfg = json.load(open(os.path.join(export_dir, "config.json")))
    scfg = json.load(open(os.path.join(source_dir, "config.json")))
    src, exp = tensors(source_dir), tensors(export_dir)
    if "quantization_config" in cfg:
        same_q = cfg["quantization_config"] == scfg.get("quantization_config")
        layout = {k: v[1:3] for k, v in src.items()} == {k: v[1:3] for k, v in exp.items()}
        print(f"FP8 export: quantization_config {'equal to' if same_q else 'differs from'} the "
              f"source's; tensor names, dtypes and shapes {'equal to' if layout else 'differ from'} "
              f"the source's ({len(exp)} tensors)")
        ok = same_q and layout
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


def check_shipping(export_dir):
    """dtype in config.json, generation_config.json, and final/'s file list."""
    ok = True
    cfg = json.load(open(os.path.join(export_dir, "config.json")))
    print(f"config.json: dtype {cfg.get('dtype')}, torch_dtype {cfg.get('torch_dtype')}")
    ok = ok and cfg.get("dtype") is not None
    gc = transformers.GenerationConfig.from_pretrained(export_dir)
    print(f"GenerationConfig.from_pretrained: eos_token_id {gc.eos_token_id}, pad_token_id "
          f"{gc.pad_token_id}, bos_token_id {gc.bos_token_id}, do_sample {gc.do_sample}, "
          f"temperature {gc.temperature}, top_p {gc.top_p}, top_k {gc.top_k}")
    ok = ok and gc.eos_token_id is not None
    if os.path.basename(os.path.normpath(export_dir)) == "final":
        state = [f for f in os.listdir(export_dir) if re.match(r"state.*\.h5$", f) or f == "recipe.toml"]
        print(f"final/: {sorted(os.listdir(export_dir))}; training state: {state or 'none'}")
        ok = ok and not state
    return ok


def half_ulp_e4m3(y):
    """Half the spacing of float8_e4m3fn at |y| (3 mantissa bits; subnormals below 2^-6)."""
    return torch.where(y < 2.0 ** -6, torch.full_like(y, 2.0 ** -10),
                       torch.exp2(torch.floor(torch.log2(y.clamp(min=2.0 ** -6))) - 4))


def check_master(export_dir, master_dir, model, ids):
    """The FP8 weights dequantised by transformers' Fp8Dequantize against the fp32 master: per
    element within the FP8 rounding, the unquantised tensors equal; the logits of both models."""
    from transformers.integrations import finegrained_fp8

    class _Q:  # what Fp8Dequantize reads of its quantizer
        def __init__(self, block):
            self.quantization_config = transformers.FineGrainedFP8Config(weight_block_size=block)

    exp, mst = tensors(export_dir), tensors(master_dir)
    qc = json.load(open(os.path.join(export_dir, "config.json")))["quantization_config"]
    dq = finegrained_fp8.Fp8Dequantize(_Q(tuple(qc["weight_block_size"])))
    fq = finegrained_fp8.Fp8Quantize(_Q(tuple(qc["weight_block_size"])))
    same_bytes = 0
    master = transformers.AutoModelForCausalLM.from_pretrained(master_dir, dtype=torch.float32)
    worst, n_fp8, bad, others = 0.0, 0, 0, []
    for name, entry in exp.items():
        if CARRIED.search(name) or name.endswith("_scale_inv"):
            continue
        with safe_open(entry[0], "pt") as f, safe_open(mst[name][0], "pt") as g:
            x = g.get_tensor(name).double()
            if entry[1] != "F8_E4M3":  # kept as the source keeps it: the master's values
                if not torch.equal(f.get_tensor(name).double(), x):
                    others.append(name)
                continue
            inv = f.get_tensor(name[: -len(".weight")] + ".weight_scale_inv")
            ref = fq._quantize_one(name, g.get_tensor(name))  # transformers' own quantisation
            same_bytes += int(torch.equal(ref[name].view(torch.uint8), f.get_tensor(name).view(torch.uint8))
                              and torch.equal(ref[name[: -len(".weight")] + ".weight_scale_inv"], inv))
            w = dq._dequantize_one(f.get_tensor(name), inv, output_dtype=torch.float32).double()
            inv = inv.double()
        bm, bn = -(-x.shape[-2] // inv.shape[-2]), -(-x.shape[-1] // inv.shape[-1])
        s = inv.repeat_interleave(bm, -2)[..., : x.shape[-2], :].repeat_interleave(bn, -1)[..., : x.shape[-1]]
        bound = s * half_ulp_e4m3(x.abs() / s * (1 + 2.0 ** -20)) + 4 * x.abs() * 2.0 ** -24
        err = (w - x).abs()
        bad += int((err > bound).sum())
        worst = max(worst, float((err / bound).max()))
        n_fp8 += 1
    print(f"against the fp32 master {master_dir}: {n_fp8} FP8 tensors, {bad} elements outside the "
          f"FP8 rounding, largest error {worst:.4f} of its bound; {len(others)} unquantised "
          f"tensors differ {others[:3]}; {same_bytes} of {n_fp8} FP8 tensors byte for byte "
          f"transformers' Fp8Quantize of the master")
    with torch.no_grad():
        lm = master(input_ids=ids).logits.float()
        lq = model(input_ids=ids).logits.float()
    d = (lq - lm).abs().max().item()
    print(f"logits, FP8 export (transformers, dequantised) vs fp32 master: max abs diff {d:.4g}, "
          f"relative to max|logit| {d / lm.abs().max().item():.4g}; greedy next tokens agree on "
          f"{(lq.argmax(-1) == lm.argmax(-1)).float().mean().item() * 100:.1f} % of positions")
    return bad == 0 and not others and same_bytes == n_fp8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export_dir")
    ap.add_argument("--forward", default="build/minimax-forward")
    ap.add_argument("--source", help="the run's model.path: carried tensors and biases unchanged")
    ap.add_argument("--master", help="an FP8 export's fp32 twin (the same run exported as fp32)")
    args = ap.parse_args()
    for mod, want in (("transformers", transformers.__version__), ("torch", torch.__version__)):
        if not want.startswith(PINNED[mod]):
            sys.exit(f"{mod} {want} installed, {PINNED[mod]} pinned")

    cls = transformers.AutoModelForCausalLM
    if json.load(open(os.path.join(args.export_dir, "config.json"))).get("model_type") == "minimax_m3_vl":
        cls = transformers.MiniMaxM3SparseForConditionalGeneration  # the VL layout's class
    kw = {}
    qc = json.load(open(os.path.join(args.export_dir, "config.json"))).get("quantization_config")
    if qc:  # transformers' FP8 path, dequantised on load (this CPU has no FP8 kernels)
        kw["quantization_config"] = transformers.FineGrainedFP8Config(
            weight_block_size=tuple(qc["weight_block_size"]), dequantize=True)
    model, info = cls.from_pretrained(args.export_dir, dtype=torch.float32, output_loading_info=True, **kw)
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
    ok = check_shipping(args.export_dir) and ok

    vocab = getattr(model.config, "text_config", model.config).vocab_size
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (2, 37), generator=gen)
    with torch.no_grad():
        ref = model(input_ids=ids).logits.float()
    if args.master:
        ok = check_master(args.export_dir, args.master, model, ids) and ok

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
