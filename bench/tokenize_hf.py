#!/usr/bin/env python3
"""bench/tokenize_hf.py: HF `tokenizers` (Rust) on the same work as bench/tokenize.c.

Every GSM8K training sample rendered with the MiniMax chat template, tokenized with
add_special_tokens=False on one thread (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false are
set before the import). Three ways of calling HF, each timed cold (fresh Tokenizer, empty word
cache) and warm (best of the later passes), in wall time and process CPU time:
  loop        tok.encode(text) per sample (Python call overhead per sample)
  batch       tok.encode_batch(texts) (one call; ids, offsets and Encoding objects)
  batch_fast  tok.encode_batch_fast(texts) (one call; no offsets: less work than the C side)
usage: tokenize_hf.py [tokenizer.json] [train.jsonl] [passes]
"""
import json
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def main():
    tok_path = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/tokenizer/tokenizer.json"
    data_path = sys.argv[2] if len(sys.argv) > 2 else "../shared/data/gsm8k/train.jsonl"
    passes = max(2, int(sys.argv[3]) if len(sys.argv) > 3 else 5)
    texts = []
    for line in open(data_path, encoding="utf-8"):
        s = json.loads(line)
        texts.append("<beginning_of_sentence>user name=user\n" + s["question"] +
                     "<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n" +
                     s["answer"] + "<end_of_sentence>\n")
    nbytes = sum(len(t.encode("utf-8")) for t in texts)

    def run_loop(tok):
        return sum(len(tok.encode(t, add_special_tokens=False).ids) for t in texts)

    def run_batch(tok):
        return sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))

    def run_batch_fast(tok):
        return sum(len(e.ids) for e in tok.encode_batch_fast(texts, add_special_tokens=False))

    print(f"HF tokenizers {tokenizers.__version__}: {len(texts)} samples, {nbytes / 1e6:.2f} MB")
    for name, fn in (("loop", run_loop), ("batch", run_batch), ("batch_fast", run_batch_fast)):
        tok = Tokenizer.from_file(tok_path)
        times, cpus = [], []
        for _ in range(passes):
            t0, c0 = time.perf_counter(), time.process_time()
            ntok = fn(tok)
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        cold, warm = times[0], min(times[1:])
        cold_cpu, warm_cpu = cpus[0], min(cpus[1:])
        print(f"HF {name:10s}: cold pass {cold:.3f} s, warm (best of {passes - 1}) {warm:.3f} s "
              f"= {ntok / warm / 1e6:.2f} M tokens/s, {ntok} tokens; CPU time cold {cold_cpu:.3f} s, "
              f"warm {warm_cpu:.3f} s")
        print(f"RESULT hf_{name} tokens={ntok} cold={cold:.6f} warm={warm:.6f} "
              f"cold_cpu={cold_cpu:.6f} warm_cpu={warm_cpu:.6f}")


if __name__ == "__main__":
    main()
