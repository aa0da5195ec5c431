#!/usr/bin/env python3
"""eval_messages_lm_eval.py: minimax-eval --task messages against lm-evaluation-harness's
exact_match over minimax-serve, on the same conversations (docs/evaluation.md, "Your own data").
Run by hand, not in CI (it needs the pinned Python packages below).

  python tools/eval_messages_lm_eval.py --serve BUILD/minimax-serve --eval BUILD/minimax-eval
                                        --model DIR --data CHAT.jsonl [--max-tokens 8]

1. Each record of CHAT.jsonl ({"messages": [...]} ending with an assistant message) becomes a
   prompt: the messages before the last rendered by transformers' apply_chat_template with the
   generation prompt (DIR's tokenizer and template), and a target: the last message's content.
2. Starts minimax-serve and runs lm-eval `local-completions` on those prompts, greedy, the same
   max tokens, twice over: exact_match without options (minimax-eval's `exact`) and with
   ignore_case + ignore_punctuation (closest to minimax-eval's `normalized`, which lowercases,
   collapses whitespace and strips whitespace and punctuation at the ends only).
3. Runs minimax-eval --task messages on CHAT.jsonl and compares: the completions lm-eval logged
   must equal minimax-eval's (greedy, the same prompts and model), and the exact counts must
   agree sample by sample; the normalised counts are reported side by side
   with where they part.
Pinned: lm_eval[api]==0.4.13, transformers==5.24.0.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_openai_check import KEY, start, versions  # noqa: E402  (the server, its key)

PINNED = {"lm_eval": "0.4.13", "transformers": "5.24.0"}

TASK = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{reference}}}}"
target_delimiter: ""
generation_kwargs:
  until: ["{eos}"]
  max_gen_toks: {max_tokens}
  do_sample: false
  temperature: 0.0
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: {fold}
    ignore_punctuation: {fold}
"""


def prompts(model, data, out):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model)
    rows = []
    for line in open(data):
        if not line.strip():
            continue
        msgs = json.loads(line)["messages"]
        text = tok.apply_chat_template(msgs[:-1], tokenize=False, add_generation_prompt=True)
        rows.append({"prompt": text, "reference": msgs[-1]["content"]})
    path = os.path.join(out, "prompts.jsonl")
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return rows, path, tok.eos_token


def run_lm_eval(url, model, data, eos, n, max_tokens, out):
    tasks = os.path.join(out, "tasks")
    os.makedirs(tasks, exist_ok=True)
    for name, fold in (("mt_messages_exact", "false"), ("mt_messages_folded", "true")):
        with open(os.path.join(tasks, name + ".yaml"), "w") as f:
            f.write(TASK.format(name=name, data=data, eos=eos, max_tokens=max_tokens, fold=fold))
    env = dict(os.environ, OPENAI_API_KEY=KEY, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    args = [sys.executable, "-m", "lm_eval", "--model", "local-completions", "--model_args",
            f"model=model,base_url={url}/v1/completions,tokenizer_backend=huggingface,"
            f"tokenizer={model},tokenized_requests=False,num_concurrent=4,max_retries=1",
            "--include_path", tasks, "--tasks", "mt_messages_exact,mt_messages_folded",
            "--limit", str(n), "--output_path", os.path.join(out, "lm_eval"), "--log_samples"]
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
    res = {}
    for name in ("mt_messages_exact", "mt_messages_folded"):
        f = glob.glob(os.path.join(out, "lm_eval", "**", f"samples_{name}_*.jsonl"),
                      recursive=True)
        res[name] = {}
        for line in open(f[0]):
            s = json.loads(line)
            res[name][s["doc_id"]] = (s["resps"][0][0], s["exact_match"])
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--serve", required=True)
    p.add_argument("--eval", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--max-tokens", type=int, default=8)
    a = p.parse_args()
    versions(PINNED)
    out = tempfile.mkdtemp(prefix="eval-messages-")
    rows, pdata, eos = prompts(a.model, os.path.abspath(a.data), out)
    n = len(rows)
    srv, url = start(a.serve, a.model)
    try:
        lm = run_lm_eval(url, a.model, pdata, eos, n, a.max_tokens, out)
    finally:
        srv.terminate()
        srv.wait(timeout=120)
    res = os.path.join(out, "minimax-eval.jsonl")
    rep = subprocess.run([a.eval, "--model", a.model, "--data", a.data, "--task", "messages",
                          "--max-new-tokens", str(a.max_tokens), "--out", res], check=True,
                         capture_output=True, text=True).stdout.strip()
    print(f"minimax-eval: {rep}")
    mine = [json.loads(x) for x in open(res)]
    same_text = sum(lm["mt_messages_exact"][i][0] == mine[i]["completion"] for i in range(n))
    ex_lm = sum(lm["mt_messages_exact"][i][1] for i in range(n))
    ex_me = sum(m["exact"] for m in mine)
    agree = sum(bool(lm["mt_messages_exact"][i][1]) == m["exact"] for i, m in enumerate(mine))
    fo_lm = sum(lm["mt_messages_folded"][i][1] for i in range(n))
    no_me = sum(m["normalized"] for m in mine)
    print(f"completions: {same_text} of {n} equal (lm-eval over minimax-serve vs minimax-eval)")
    print(f"exact match: lm-eval {ex_lm:g} / {n}, minimax-eval {ex_me} / {n}; "
          f"per sample {agree} of {n} agree")
    print(f"folded: lm-eval exact_match(ignore_case, ignore_punctuation) {fo_lm:g} / {n}, "
          f"minimax-eval normalized {no_me} / {n}")
    for i, m in enumerate(mine):
        if bool(lm["mt_messages_folded"][i][1]) != m["normalized"]:
            print(f"  sample {i}: completion {m['completion']!r}, reference {m['reference']!r}: "
                  f"lm-eval folded {lm['mt_messages_folded'][i][1]:g}, normalized "
                  f"{m['normalized']}")
    if same_text != n or agree != n:
        sys.exit("eval_messages_lm_eval: lm-eval and minimax-eval disagree")


if __name__ == "__main__":
    main()
