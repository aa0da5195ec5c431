#!/usr/bin/env python3
"""train_torch.py: the PyTorch + transformers side of bench/train_vs_torch.sh.

  init    --config CONFIG.json --out DIR [--seed S]
          builds the config's model (AutoModelForCausalLM: MiniMaxForCausalLM for
          bench-small.json, MiniMaxM2ForCausalLM for bench-m2.json, MiniMaxM3VLForCausalLM,
          the text model of minimax_m3_vl, for bench-m3.json) with transformers' own
          initialisation and saves it (fp32 safetensors) so that minimax-train (model.path)
          starts from the same weights.
  train   --recipe RUN/recipe.toml --world N --csv OUT.csv [--steps S] [--threads K]
          [--gradient-checkpointing]
          trains the run that minimax-train made with that resolved recipe on N ranks (same
          checkpoint model.path, same token cache, same hyper-parameters, global batch
          per_device_train_batch_size x gradient_accumulation_steps x N; data.packing and
          data.shuffle must be off, every model.aux_coef term 0: transformers computes none
          of them) and writes a loss.csv with minimax-train's columns.
  summary --warmup W --ref NAME NAME=loss.csv[,loss.csv...]...
          tokens/s of each configuration over the steps after the warm-up (best of its
          repeats), the ratios to the reference, and how far the runs' losses are apart.
  cost    --warmup W --what TERM BASE=loss.csv[,...] WITH=loss.csv[,...]
          what switching TERM on costs: the s/step of both (best of the repeats, as summary
          counts them) and the difference; the two must have trained the same tokens per step
          with the same step-1 loss (the term is an auxiliary one: the loss column stays the
          cross-entropy).

What the train step is (docs/benchmarks.md, "training vs PyTorch"):
  * model: AutoModelForCausalLM of the checkpoint (MiniMaxForCausalLM, MiniMaxM2ForCausalLM or
    MiniMaxM3VLForCausalLM), fp32, model.train(), use_cache=False; HF's own lightning attention
    (its block loop, block_size from the config), softmax attention through
    config._attn_implementation (default sdpa; M3's sparse layers add their indexer's block
    selection to the mask there), experts through config._experts_implementation (default
    grouped_mm); output_router_logits = False, so no router aux loss. M2's and M3's
    e_score_correction_bias is a buffer there, as in minimax-train: neither side trains it.
    M3's indexer gets no gradient from the cross-entropy (its selection is discrete) and
    transformers has no indexer KL: minimax-train runs with model.aux_coef.index_kl = 0, so
    the indexer stays as initialised on both sides.
  * data: the token cache minimax-train wrote (/ids, /labels, /offsets; data/token_cache.h).
    Step s takes samples [s*G, (s+1)*G) (shuffle off, the sampler's order); each sample is one
    row, padded to T with pad_id (labels -100). HF shifts the labels inside the model, which
    gives exactly the sampler's shifted labels; the loss is the mean over every labelled token
    of the global batch (one forward of G rows), as minimax-train's.
  * update: clip_grad_norm_(max_grad_norm), torch.optim.AdamW(fused=True) (what HF's Trainer
    uses by default, optim="adamw_torch_fused"; lr, betas, eps, weight decay on matrices only),
    zero_grad(set_to_none=True).
  * timing: wall time of the whole step (forward, backward, clipping, AdamW) with
    time.perf_counter(); tokens = real (non-padding) tokens of the global batch, as in
    minimax-train's loss.csv.
  * --gradient-checkpointing: model.gradient_checkpointing_enable() (non-reentrant), the
    transformers counterpart of train.gradient_checkpointing: each decoder layer recomputed in
    the backward.

Python packages (the benchmark only; tests never need them), pinned:
  torch==2.15.0 transformers==5.24.0 h5py==3.16.0 numpy==2.4.6
"""
import argparse
import csv
import json
import os
import platform
import shutil
import sys
import time

PINNED = {"torch": "2.15.0", "transformers": "5.24.0", "h5py": "3.16.0", "numpy": "2.4.6"}


def set_threads_env(n):
    # before torch loads: its OpenMP pool and MKL read these
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)


def check_versions():
    import h5py
    import numpy
    import torch
    import transformers

    got = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
           "h5py": h5py.__version__, "numpy": numpy.__version__}
    for k, v in PINNED.items():
        if got[k] != v:
            print(f"warning: {k} {got[k]} is installed, the benchmark was pinned to {v}",
                  file=sys.stderr)


def cmd_init(a):
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(a.seed)
    with open(a.config) as f:
        raw = json.load(f)
    cfg = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
    model = transformers.AutoModelForCausalLM.from_config(cfg).float()
    tmp = a.out + ".tmp"
    model.save_pretrained(tmp, safe_serialization=True)
    if os.path.isdir(a.out):
        shutil.rmtree(a.out)
    os.rename(tmp, a.out)
    n = sum(p.numel() for p in model.parameters())
    print(f"init: {a.out}: {n} parameters (seed {a.seed})")


def recipe_settings(a):
    """The run's settings from the resolved recipe minimax-train saved in its output dir."""
    import tomllib

    with open(a.recipe, "rb") as f:
        rc = tomllib.load(f)
    m, d, t = rc["model"], rc["data"], rc["train"]
    bad = []
    if d["packing"]:
        bad.append("data.packing = true (only padded rows are rebuilt here)")
    if d["shuffle"]:
        bad.append("data.shuffle = true (only the unshuffled order is rebuilt here)")
    if t["lr_scheduler_type"] != "constant" or t["warmup_steps"] != 0:
        bad.append("train.lr_scheduler_type must be constant with warmup_steps = 0")
    if t["router_aux_loss_coef"] > 0:
        bad.append("train.router_aux_loss_coef > 0 (the benchmark runs without aux loss)")
    for term, coef in m.get("aux_coef", {}).items():
        if coef != 0:
            bad.append(f"model.aux_coef.{term} = {coef} (transformers computes no such term: "
                       "set it to 0)")
    if m["dtype"] != "fp32":
        bad.append("model.dtype must be fp32")
    if not m["path"]:
        bad.append("model.path must name the HF checkpoint both sides start from")
    if bad:
        sys.exit(f"{a.recipe}: " + "; ".join(bad))
    # padding is <end_of_sentence>, as the trainer pads (its labels are -100 either way)
    tok_dir = d["tokenizer_dir"] or m["path"]
    with open(os.path.join(tok_dir, "tokenizer.json")) as f:
        added = json.load(f).get("added_tokens", [])
    pad = [tok["id"] for tok in added if tok["content"] == "<end_of_sentence>"]
    if not pad:
        sys.exit(f"{tok_dir}/tokenizer.json: no <end_of_sentence> token")
    cache_dir = d["cache_dir"] or os.path.join(rc["output"]["dir"], "cache")
    return {
        "model": m["path"],
        "tokens": os.path.join(cache_dir, "tokens.h5"),
        "T": d["max_length"],
        "G": t["per_device_train_batch_size"] * t["gradient_accumulation_steps"] * a.world,
        "steps": a.steps or t["max_steps"],
        "pad_id": pad[0],
        "trim": d.get("trim_padding", False),
        "lr": t["learning_rate"],
        "betas": (t["adam_beta1"], t["adam_beta2"]),
        "eps": t["adam_epsilon"],
        "weight_decay": t["weight_decay"],
        "max_grad_norm": t["max_grad_norm"],
    }


def load_batches(path, G, T, steps, pad_id, trim):
    """The padded rows of every step, as the sampler builds them (pack off, shuffle off); with
    trim (data.trim_padding) cut after the longest row, rounded up to 8, as the trainer does."""
    import h5py
    import numpy as np
    import torch

    with h5py.File(path, "r") as f:
        ids = f["ids"][:]
        labels = f["labels"][:]
        offsets = f["offsets"][:]
    n_samples = len(offsets) - 1
    if steps * G > n_samples:
        sys.exit(f"{path}: {n_samples} samples; {steps} steps of {G} would span two epochs")
    batches = []
    for s in range(steps):
        x = np.full((G, T), pad_id, dtype=np.int64)
        y = np.full((G, T), -100, dtype=np.int64)
        real = 0
        for r in range(G):
            i = s * G + r
            lo, hi = int(offsets[i]), int(offsets[i + 1])
            n = hi - lo
            if n > T:
                sys.exit(f"{path}: sample {i} has {n} tokens > max_length {T}")
            x[r, :n] = ids[lo:hi]
            y[r, :n] = labels[lo:hi]  # unshifted: HF shifts inside the model
            real += n
        if trim:
            longest = max(int(offsets[s * G + r + 1] - offsets[s * G + r]) for r in range(G))
            keep = min(T, max(8, (longest + 7) // 8 * 8))
            x, y = x[:, :keep].copy(), y[:, :keep].copy()
        batches.append((torch.from_numpy(x), torch.from_numpy(y), real))
    return batches


def cmd_train(a):
    set_threads_env(a.threads)
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    check_versions()
    torch.set_num_threads(a.threads)
    st = recipe_settings(a)
    batches = load_batches(st["tokens"], st["G"], st["T"], st["steps"], st["pad_id"], st["trim"])
    model = transformers.AutoModelForCausalLM.from_pretrained(
        st["model"], dtype=torch.float32, attn_implementation=a.attn,
        experts_implementation=a.experts)
    model.config.output_router_logits = False  # router aux loss off, as in the recipe
    model.config.use_cache = False
    if a.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": st["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=st["lr"], betas=st["betas"], eps=st["eps"], fused=True)  # HF Trainer's default
    params = list(model.parameters())
    print(f"torch {torch.__version__}, {type(model).__name__}, {torch.get_num_threads()} threads, attention "
          f"{model.config._attn_implementation}, experts {model.config._experts_implementation}, "
          f"fused AdamW, {'gradient checkpointing, ' if a.gradient_checkpointing else ''}"
          f"{sum(p.numel() for p in params)} parameters; {st['steps']} steps of {st['G']} rows "
          f"x {st['T']}{' (trimmed to the longest row)' if st['trim'] else ''} from "
          f"{st['tokens']}", flush=True)
    tmp = a.csv + ".tmp"
    out = open(tmp, "w", newline="")
    w = csv.writer(out)
    w.writerow(["step", "loss", "lr", "grad_norm", "tokens", "tokens_per_s", "elapsed_s"])
    t_start = time.perf_counter()
    for step, (x, y, real) in enumerate(batches, start=1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=x, labels=y, use_cache=False).loss
        loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(params, st["max_grad_norm"]))
        opt.step()
        lv = float(loss.detach())
        dt = time.perf_counter() - t0
        w.writerow([step, f"{lv:.6f}", f"{st['lr']:.6g}", f"{gn:.6f}", real, f"{real / dt:.3f}",
                    f"{time.perf_counter() - t_start:.3f}"])
        out.flush()
        print(f"\rstep {step}/{st['steps']}  loss {lv:.4f}  tok/s {real / dt:.0f}  ", end="",
              file=sys.stderr, flush=True)
    print(file=sys.stderr)
    out.close()
    os.replace(tmp, a.csv)


def read_csv(path):
    with open(path) as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def run_rate(rows, warmup):
    """tokens/s of one run over the steps after the warm-up: real tokens / summed step time."""
    timed = [r for r in rows if r["step"] > warmup]
    if not timed:
        sys.exit(f"no steps after the warm-up of {warmup}")
    tokens = sum(r["tokens"] for r in timed)
    secs = sum(r["tokens"] / r["tokens_per_s"] for r in timed)
    return tokens / secs, secs / len(timed), len(timed), int(tokens)


def cmd_summary(a):
    runs = []  # (name, [rows of each repeat])
    for spec in a.runs:
        name, paths = spec.split("=", 1)
        runs.append((name, [read_csv(p) for p in paths.split(",")]))
    print(f"tokens/s over steps {a.warmup + 1}..N (real tokens / summed step wall time); "
          f"best of the repeats, all repeats in brackets:")
    rates = {}
    for name, reps in runs:
        measured = [run_rate(rows, a.warmup) for rows in reps]
        best = max(measured)
        rates[name] = best[0]
        every = " ".join(f"{m[0]:.0f}" for m in measured)
        print(f"  {name:<20} {best[0]:8.1f} tok/s  {best[1]:.3f} s/step  [{every}]  "
              f"({best[2]} steps, {best[3]} tokens)")
    ref = runs[-1][0] if a.ref is None else a.ref
    print(f"ratio to {ref} (goal: >= 2):")
    for name, _ in runs:
        if name != ref:
            print(f"  {name:<20} {rates[name] / rates[ref]:6.2f}x")
    # the same data and weights: every run's losses must agree with the first (fp32 drift only)
    first_name, first = runs[0][0], runs[0][1][0]
    for name, reps in runs:
        for k, rows in enumerate(reps):
            if name == first_name and k == 0:
                continue
            n = min(len(first), len(rows))
            d1 = abs(first[0]["loss"] - rows[0]["loss"]) / abs(rows[0]["loss"])
            dmax = max(abs(first[i]["loss"] - rows[i]["loss"]) / abs(rows[i]["loss"])
                       for i in range(n))
            tok_same = all(first[i]["tokens"] == rows[i]["tokens"] for i in range(n))
            print(f"loss {first_name} vs {name} #{k + 1}: step 1 {first[0]['loss']:.6f} vs "
                  f"{rows[0]['loss']:.6f} (rel {d1:.1e}), max rel over {n} steps {dmax:.1e}; "
                  f"tokens per step {'identical' if tok_same else 'DIFFER'}")
            if d1 > a.loss_tol or not tok_same:
                sys.exit(f"error: {name} did not train on the same data/weights as {first_name}")


def cmd_cost(a):
    (base_name, base), (with_name, with_) = [
        (n, [read_csv(p) for p in paths.split(",")])
        for n, paths in (spec.split("=", 1) for spec in (a.base, a.with_))]
    b = max(run_rate(rows, a.warmup) for rows in base)
    w = max(run_rate(rows, a.warmup) for rows in with_)
    print(f"{a.what}'s own cost (s/step over steps {a.warmup + 1}..N, best of the repeats):")
    print(f"  {base_name:<28} {b[1]:.3f} s/step  [" +
          " ".join(f"{run_rate(rows, a.warmup)[1]:.3f}" for rows in base) + "]")
    print(f"  {with_name:<28} {w[1]:.3f} s/step  [" +
          " ".join(f"{run_rate(rows, a.warmup)[1]:.3f}" for rows in with_) + "]")
    print(f"  difference {1000 * (w[1] - b[1]):+.1f} ms/step ({100 * (w[1] / b[1] - 1):+.1f} %)")
    first, other = base[0], with_[0]
    n = min(len(first), len(other))
    d1 = abs(first[0]["loss"] - other[0]["loss"]) / abs(other[0]["loss"])
    if d1 > a.loss_tol or any(first[i]["tokens"] != other[i]["tokens"] for i in range(n)):
        sys.exit(f"error: {with_name} did not train on the same data/weights as {base_name} "
                 f"(step-1 loss rel {d1:.1e})")


def machine():
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("init")
    pi.add_argument("--config", required=True)
    pi.add_argument("--out", required=True)
    pi.add_argument("--seed", type=int, default=42)
    pt = sub.add_parser("train")
    pt.add_argument("--recipe", required=True,
                    help="recipe.toml that a minimax-train run saved in its output dir")
    pt.add_argument("--world", type=int, default=1,
                    help="ranks of that run (global batch = per-device batch x accumulation x world)")
    pt.add_argument("--csv", required=True)
    pt.add_argument("--steps", type=int, default=0, help="default: the recipe's train.max_steps")
    pt.add_argument("--threads", type=int, default=2)
    pt.add_argument("--attn", default="sdpa", help="sdpa (HF default) or eager")
    pt.add_argument("--experts", default="grouped_mm",
                    help="grouped_mm (HF default), batched_mm or eager")
    pt.add_argument("--gradient-checkpointing", action="store_true",
                    help="recompute each decoder layer in the backward")
    ps = sub.add_parser("summary")
    ps.add_argument("--warmup", type=int, default=3)
    ps.add_argument("--ref", default=None, help="run the ratios are taken to (default: last)")
    ps.add_argument("--loss-tol", type=float, default=1e-4,
                    help="largest relative step-1 loss difference between the runs")
    ps.add_argument("runs", nargs="+", metavar="NAME=loss.csv[,loss.csv...]",
                    help="one run per repeat, comma-separated")
    pc = sub.add_parser("cost")
    pc.add_argument("--warmup", type=int, default=3)
    pc.add_argument("--what", default="the term", help="what the second run adds")
    pc.add_argument("--loss-tol", type=float, default=1e-4,
                    help="largest relative step-1 loss difference between the runs")
    pc.add_argument("base", metavar="NAME=loss.csv[,loss.csv...]", help="the run without it")
    pc.add_argument("with_", metavar="NAME=loss.csv[,loss.csv...]", help="the run with it")
    sub.add_parser("machine")
    a = p.parse_args()
    if a.cmd == "init":
        cmd_init(a)
    elif a.cmd == "train":
        cmd_train(a)
    elif a.cmd == "summary":
        cmd_summary(a)
    elif a.cmd == "cost":
        cmd_cost(a)
    else:
        print(machine())


if __name__ == "__main__":
    main()
