#!/usr/bin/env python3
"""check_head_export.py: a by-hand check that minimax-train's head exports load in transformers
(issue 38): each export the test parity_head_export keeps under MT_HEAD_EXPORT_DIR loads with
AutoModelForSequenceClassification / ForTokenClassification / ForQuestionAnswering with 0
missing and 0 unexpected keys, and gives the fixture's reference logits (float64).

    mkdir -p /tmp/exp && MT_HEAD_EXPORT_DIR=/tmp/exp ctest --test-dir build -R parity_head_export
    /work/pyref/bin/python tools/check_head_export.py /tmp/exp [--fixtures tests/fixtures/models]

Pinned versions: torch==2.15.0 transformers==5.24.0 safetensors==0.8.0.
"""

import argparse
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import (
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

CASES = [
    ("head_text01_seq3", AutoModelForSequenceClassification, "single"),
    ("head_text01_seq1", AutoModelForSequenceClassification, "reg1"),
    ("head_text01_tok", AutoModelForTokenClassification, "tok"),
    ("head_text01_qa", AutoModelForQuestionAnswering, "qa"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exports")
    ap.add_argument("--fixtures", default="tests/fixtures/models")
    a = ap.parse_args()
    bad = 0
    for name, cls, case in CASES:
        model, info = cls.from_pretrained(
            os.path.join(a.exports, name), output_loading_info=True,
            attn_implementation="sdpa", experts_implementation="eager")
        model = model.double().eval()
        ref = load_file(os.path.join(a.fixtures, name + ".ref.safetensors"))
        ids = ref["ids"].long()
        kw = dict(input_ids=ids)
        if case != "qa":
            kw["attention_mask"] = ref["mask"].long()
        with torch.no_grad():
            out = model(**kw)
        got = out.start_logits if case == "qa" else out.logits
        want = ref[case + ".logits"].double()
        keep = torch.ones_like(want, dtype=torch.bool)
        if case == "tok":
            keep = ref["mask"].bool()[..., None].expand_as(want)
        rel = ((got - want).abs()[keep].max() / want.abs()[keep].max()).item()
        miss, unexp = info["missing_keys"], info["unexpected_keys"]
        print(f"{name}: {type(model).__name__}, missing {len(miss)} unexpected {len(unexp)}, "
              f"logits max|diff|/max|ref| {rel:.3e}")
        bad += bool(miss or unexp or rel > 1e-5)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
