#!/usr/bin/env python3
"""make_schedule_fixtures.py: transformers' learning rates for the schedules of train/schedule.h.

For each case below (100 optimizer steps) this builds transformers' scheduler with
get_scheduler(name, optimizer, num_warmup_steps, num_training_steps, scheduler_specific_kwargs)
on a one-parameter torch AdamW at the peak learning rate and records the learning rate of every
step (the value the optimizer uses at step s, 0-based: after s scheduler.step() calls), into
tests/fixtures/schedule/lr_cases.json, which tests/train/op_schedule.c (op_lr_schedules) compares
against mt_lr_at to 1e-7 relative. The warmup of a case given by a ratio is
TrainingArguments(warmup_steps=ratio).get_warmup_steps(100) (transformers 5 takes a
warmup_steps below 1 as the ratio).

Run from the repository root:
    /work/pyref/bin/python tools/make_schedule_fixtures.py
The versions below are pinned: other versions are refused unless --any-version is given.
"""
import argparse
import json
import os
import sys
import warnings

PINNED = {"transformers": "5.24.0", "torch": None}
STEPS = 100
LR = 3e-4
# (our name, HF's name, warmup steps or ratio, HF's scheduler kwargs, ours: min_lr_ratio, decay)
CASES = [
    ("constant", "constant_with_warmup", 10, {}, 0.0, 0),
    ("constant", "constant", 0, {}, 0.0, 0),
    ("linear", "linear", 10, {}, 0.0, 0),
    ("linear", "linear", 0.05, {}, 0.0, 0),
    ("cosine", "cosine", 10, {}, 0.0, 0),
    ("cosine", "cosine", 0, {}, 0.0, 0),
    ("cosine_with_min_lr", "cosine_with_min_lr", 10, {"min_lr_rate": 0.1}, 0.1, 0),
    ("cosine_with_min_lr", "cosine_with_min_lr", 0.07, {"min_lr_rate": 0.25}, 0.25, 0),
    ("wsd", "warmup_stable_decay", 10, {"num_decay_steps": 20}, 0.0, 20),
    ("wsd", "warmup_stable_decay", 5, {"num_decay_steps": 30, "min_lr_ratio": 0.1}, 0.1, 30),
    ("wsd", "warmup_stable_decay", 0, {"num_decay_steps": 1, "min_lr_ratio": 0.2}, 0.2, 1),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/fixtures/schedule/lr_cases.json")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import TrainingArguments, get_scheduler

    have = {"transformers": transformers.__version__, "torch": torch.__version__}
    if have["transformers"] != PINNED["transformers"] and not args.any_version:
        sys.exit(f"make_schedule_fixtures: pinned {PINNED}, found {have} (--any-version)")

    out = []
    for ours, hf, warm, kwargs, min_lr, decay in CASES:
        if isinstance(warm, float):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ta = TrainingArguments(output_dir="/tmp/mt_sched", warmup_steps=warm,
                                       report_to=[])
            warmup = ta.get_warmup_steps(STEPS)
            ratio = warm
        else:
            warmup, ratio = warm, 0.0
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.AdamW([p], lr=LR)
        sched = get_scheduler(hf, opt, num_warmup_steps=warmup, num_training_steps=STEPS,
                              scheduler_specific_kwargs=dict(kwargs))
        lrs = []
        for _ in range(STEPS):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        out.append({"kind": ours, "hf_name": hf, "hf_kwargs": kwargs, "warmup_ratio": ratio,
                    "warmup_steps": warmup, "max_steps": STEPS, "base_lr": LR,
                    "min_lr_ratio": min_lr, "decay_steps": decay, "lr": lrs})
        print(f"{ours} ({hf} {kwargs}): warmup {warmup}, lr[0] {lrs[0]:.3g}, "
              f"lr[50] {lrs[50]:.6g}, lr[99] {lrs[99]:.6g}")

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tmp = f"{args.out}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write('{\n "generator": "tools/make_schedule_fixtures.py",\n')
        f.write(f' "versions": {json.dumps(have)},\n "cases": [\n')
        f.write(",\n".join("  " + json.dumps(c) for c in out))
        f.write("\n ]\n}\n")
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
