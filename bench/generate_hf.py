#!/usr/bin/env python3
"""generate_hf.py: the transformers side of bench/generate_vs_hf.sh.

  generate_hf.py --model DIR --data GSM8K.jsonl --limit N --batch B --max-new-tokens M
                 --threads K [--compare RESULTS.jsonl]

Greedy `generate` of the first N questions, B at a time, with the prompt minimax-eval uses:
the question as one user turn of the model's chat template with the generation prompt
(apply_chat_template), no special tokens added. A batch's prompts are left-padded with an
attention mask (transformers' way to batch ragged prompts). A completion ends at
<end_of_sentence> or after M tokens, as in minimax-eval. Prints one line,
`tokens T seconds S tokens/s R agree A/N`: T tokens generated (the eos included, padding
after it not), S the wall time of the generate calls, and with --compare how many completions
(decoded, special tokens left out) equal minimax-eval's "completion" field in RESULTS.jsonl.
"""
import argparse
import json
import os
import sys
import time

PINNED = {"torch": "2.15.0", "transformers": "5.24.0"}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--limit", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--compare")
    a = p.parse_args()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import torch
    import transformers

    got = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    for k, v in PINNED.items():
        if got[k] != v:
            print(f"warning: {k} {got[k]} is installed, the benchmark was pinned to {v}",
                  file=sys.stderr)
    torch.set_num_threads(a.threads)
    transformers.utils.logging.disable_progress_bar()
    tok = transformers.AutoTokenizer.from_pretrained(a.model)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).eval()
    eos = tok.convert_tokens_to_ids("<end_of_sentence>")
    questions = []
    with open(a.data) as f:
        for line in f:
            if line.strip():
                questions.append(json.loads(line)["question"])
            if len(questions) == a.limit:
                break
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": [{"type": "text", "text": q}]}],
                                add_generation_prompt=True, tokenize=False) for q in questions]
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = "<end_of_sentence>"
    completions, n_tokens, seconds = [], 0, 0.0
    with torch.inference_mode():
        for i in range(0, len(prompts), a.batch):
            enc = tok(prompts[i:i + a.batch], return_tensors="pt", padding=True,
                      add_special_tokens=False)
            t0 = time.perf_counter()
            out = model.generate(**enc, max_new_tokens=a.max_new_tokens, do_sample=False,
                                 eos_token_id=eos, pad_token_id=eos)
            seconds += time.perf_counter() - t0
            for row in out[:, enc["input_ids"].shape[1]:].tolist():
                n = row.index(eos) + 1 if eos in row else len(row)
                n_tokens += n
                completions.append(tok.decode(row[:n], skip_special_tokens=True))
    agree = ""
    if a.compare:
        with open(a.compare) as f:
            ours = [json.loads(line)["completion"] for line in f if line.strip()]
        same = sum(x == y for x, y in zip(completions, ours))
        agree = f" agree {same}/{len(completions)}"
    print(f"tokens {n_tokens} seconds {seconds:.3f} tokens/s {n_tokens / seconds:.1f}{agree}")


if __name__ == "__main__":
    main()
