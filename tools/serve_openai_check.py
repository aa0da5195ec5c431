#!/usr/bin/env python3
"""serve_openai_check.py: minimax-serve against clients nobody here wrote (docs/serving.md).
Run by hand, not in CI (it needs the pinned Python packages below).

  python tools/serve_openai_check.py --serve BUILD/minimax-serve --eval BUILD/minimax-eval
                                     --model DIR [--data GSM8K.jsonl] [--limit 20]
                                     [--max-tokens 64]

1. Starts minimax-serve on a free loopback port with an API key.
2. The official `openai` client: a chat completion, a legacy completion, a streamed chat whose
   pieces must join to the unstreamed reply (greedy), and an error (unknown model: NotFoundError).
3. lm-evaluation-harness `local-completions` on GSM8K-format questions (--limit of them; a task
   defined here over the jsonl file, zero-shot, the prompt rendered in MiniMax's chat template
   as minimax-eval renders it, greedy, the same max tokens): its accuracy, requests/s and, from
   its logged samples, how many completions equal minimax-eval's on the same questions (they
   must all be equal: greedy decoding, the same prompt and the same model).
Pinned: openai==3.51.0, lm_eval[api]==0.4.13 (and transformers==5.24.0 for its tokenizer).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

PINNED = {"openai": "3.51.0", "lm_eval": "0.4.13"}
KEY = "check-key"

TASK = """task: mt_gsm8k_chat
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "<beginning_of_sentence>user name=user\\n{{{{question}}}}<end_of_sentence>\\n<beginning_of_sentence>ai name=assistant\\n"
doc_to_target: "{{{{answer.split('####')[-1].strip()}}}}"
generation_kwargs:
  until: ["<end_of_sentence>"]
  max_gen_toks: {max_tokens}
  do_sample: false
  temperature: 0.0
filter_list:
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_punctuation: true
    regexes_to_ignore: [",", "\\\\$", "(?s).*#### ", "\\\\.$"]
"""


# loglikelihood requests (echo + logprobs): each question's gold number against three others
TASK_MC = """task: mt_gsm8k_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "<beginning_of_sentence>user name=user\\n{{{{question}}}}<end_of_sentence>\\n<beginning_of_sentence>ai name=assistant\\nThe answer is"
doc_to_choice: "{{{{[' ' ~ answer.split('####')[-1].strip(), ' 7', ' 12', ' 100']}}}}"
doc_to_target: 0
metric_list:
  - metric: acc
"""


def versions(pinned=PINNED):
    import importlib.metadata as md
    for k, v in pinned.items():
        got = md.version(k)
        if got != v:
            print(f"warning: {k} {got} is installed, this check was pinned to {v}", file=sys.stderr)


def start(serve, model):
    srv = subprocess.Popen([serve, "--model", model, "--port", "0", "--api-key", KEY,
                            "--served-model-name", "model", "--max-batch", "8"],
                           stdout=subprocess.PIPE, text=True)
    m = re.search(r"listening on (http://[0-9.]+:[0-9]+)", srv.stdout.readline())
    if not m:
        sys.exit("serve_openai_check: minimax-serve did not start")
    return srv, m.group(1)


def check_openai(url):
    import openai
    c = openai.OpenAI(base_url=url + "/v1", api_key=KEY)
    msgs = [{"role": "user", "content": "What is 6 times 7?"}]
    r = c.chat.completions.create(model="model", messages=msgs, max_tokens=16, temperature=0)
    text = r.choices[0].message.content
    print(f"openai chat: {text!r} ({r.usage.prompt_tokens} + {r.usage.completion_tokens} tokens, "
          f"finish {r.choices[0].finish_reason})")
    r2 = c.completions.create(model="model", prompt="Once upon a time", max_tokens=8,
                              temperature=0)
    print(f"openai completion: {r2.choices[0].text!r} ({r2.usage.completion_tokens} tokens)")
    pieces = [ch.choices[0].delta.content or "" for ch in
              c.chat.completions.create(model="model", messages=msgs, max_tokens=16,
                                        temperature=0, stream=True) if ch.choices]
    joined = "".join(pieces)
    assert joined == text, f"the stream joins to {joined!r}, the reply is {text!r}"
    print(f"openai stream: {len(pieces)} chunks joining to the reply")
    try:
        c.chat.completions.create(model="nope", messages=msgs, max_tokens=4)
        raise AssertionError("an unknown model was accepted")
    except openai.NotFoundError as e:
        print(f"openai error: NotFoundError ({e.status_code})")


def run_lm_eval(url, model, data, limit, max_tokens, out):
    tasks = os.path.join(out, "tasks")
    os.makedirs(tasks, exist_ok=True)
    with open(os.path.join(tasks, "mt_gsm8k_chat.yaml"), "w") as f:
        f.write(TASK.format(data=data, max_tokens=max_tokens))
    with open(os.path.join(tasks, "mt_gsm8k_choice.yaml"), "w") as f:
        f.write(TASK_MC.format(data=data))
    env = dict(os.environ, OPENAI_API_KEY=KEY, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    args = [sys.executable, "-m", "lm_eval", "--model", "local-completions", "--model_args",
            f"model=model,base_url={url}/v1/completions,tokenizer_backend=huggingface,"
            f"tokenizer={model},tokenized_requests=False,num_concurrent=4,max_retries=1",
            "--include_path", tasks, "--tasks", "mt_gsm8k_chat", "--limit", str(limit),
            "--output_path", os.path.join(out, "lm_eval"), "--log_samples"]
    t0 = time.perf_counter()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    # loglikelihood: lm-eval sends token ids (tokenized_requests) with echo and logprobs
    mc = [x.replace("tokenized_requests=False", "tokenized_requests=True") for x in args]
    mc[mc.index("mt_gsm8k_chat")] = "mt_gsm8k_choice"
    mc[mc.index(os.path.join(out, "lm_eval"))] = os.path.join(out, "lm_eval_mc")
    subprocess.run(mc, env=env, check=True, stdout=subprocess.DEVNULL)
    res_mc = glob.glob(os.path.join(out, "lm_eval_mc", "**", "results_*.json"), recursive=True)
    print(f"lm-eval loglikelihood (multiple choice, echo + logprobs): acc "
          f"{100 * json.load(open(res_mc[0]))['results']['mt_gsm8k_choice']['acc,none']:.1f}%")
    results = glob.glob(os.path.join(out, "lm_eval", "**", "results_*.json"), recursive=True)
    samples = glob.glob(os.path.join(out, "lm_eval", "**", "samples_*.jsonl"), recursive=True)
    acc = json.load(open(results[0]))["results"]["mt_gsm8k_chat"]["exact_match,flexible-extract"]
    done = {}
    for line in open(samples[0]):
        s = json.loads(line)
        done[s["doc_id"]] = s["resps"][0][0]
    return acc, [done[i] for i in sorted(done)], seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--serve", required=True)
    p.add_argument("--eval", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--data", default=os.path.join(os.path.dirname(__file__),
                                                  "../../shared/data/gsm8k/train.jsonl"))
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--max-tokens", type=int, default=64)
    a = p.parse_args()
    versions()
    out = tempfile.mkdtemp(prefix="serve-check-")
    data = os.path.join(out, "questions.jsonl")  # the first --limit questions, for both tools
    with open(os.path.abspath(a.data)) as f, open(data, "w") as g:
        for i, line in zip(range(a.limit), f):
            g.write(line)
    srv, url = start(a.serve, a.model)
    try:
        check_openai(url)
        acc, completions, seconds = run_lm_eval(url, a.model, data, a.limit, a.max_tokens, out)
    finally:
        srv.terminate()
        srv.wait(timeout=120)
    res = os.path.join(out, "minimax-eval.jsonl")
    rep = subprocess.run([a.eval, "--model", a.model, "--data", data, "--max-new-tokens",
                          str(a.max_tokens), "--out", res], check=True, capture_output=True,
                         text=True).stdout.strip()
    ours = [json.loads(line)["completion"] for line in open(res)]
    same = sum(x == y for x, y in zip(completions, ours))
    print(f"lm-eval local-completions: exact_match {100 * acc:.2f}% on {a.limit} questions, "
          f"{a.limit / seconds:.2f} requests/s (whole lm-eval run, {seconds:.1f} s)")
    print(f"minimax-eval: {rep}")
    print(f"completions identical: {same}/{len(ours)}")
    if same != len(ours):
        sys.exit("serve_openai_check: the completions differ")


if __name__ == "__main__":
    main()
