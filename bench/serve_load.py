#!/usr/bin/env python3
"""serve_load.py: minimax-serve's throughput under 1, 8 and 32 concurrent clients
(docs/serving.md, "Load"). A benchmark, not a test; Python's standard library only.

  python3 bench/serve_load.py --serve BUILD/minimax-serve --model DIR [--clients 1,8,32]
                              [--requests 64] [--max-tokens 32] [--max-batch 32]

Starts the server on a free loopback port (--max-batch rows), then for each client count C runs
C threads that together send the same R requests (GSM8K-style questions as chat turns, greedy,
max_tokens each), and prints completion tokens/s, requests/s and the ratio to one client.
With continuous batching the ratio must grow with C: a decode step serves every active row.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

QUESTIONS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May?",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
    "How much did she earn?",
    "Betty is saving money for a new wallet which costs $100. How much more money does she need?",
    "James writes a 3-page letter to 2 different friends twice a week. How many pages a year?",
]


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def run(url, clients, requests, max_tokens):
    todo = list(range(requests))
    lock = threading.Lock()
    tokens = [0]

    def client():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            q = QUESTIONS[i % len(QUESTIONS)] + f" (case {i})"
            out = post(url + "/v1/chat/completions", {
                "model": "model", "messages": [{"role": "user", "content": q}],
                "max_tokens": max_tokens, "temperature": 0})
            with lock:
                tokens[0] += out["usage"]["completion_tokens"]

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tokens[0], time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--serve", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--clients", default="1,8,32")
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--max-batch", type=int, default=32)
    a = p.parse_args()
    srv = subprocess.Popen([a.serve, "--model", a.model, "--port", "0", "--served-model-name",
                            "model", "--max-batch", str(a.max_batch), "--max-context", "1024"],
                           stdout=subprocess.PIPE, text=True)
    line = srv.stdout.readline()
    m = re.search(r"listening on (http://[0-9.]+:[0-9]+)", line)
    if not m:
        sys.exit(f"serve_load: the server did not start: {line}")
    url = m.group(1)
    try:
        base = None
        print(f"{'clients':>8} {'tokens/s':>10} {'requests/s':>11} {'vs 1':>6}")
        for c in [int(x) for x in a.clients.split(",")]:
            n, s = run(url, c, a.requests, a.max_tokens)
            rate = n / s
            base = base or rate
            print(f"{c:>8} {rate:>10.1f} {a.requests / s:>11.2f} {rate / base:>5.2f}x")
        print(f"{a.requests} requests of up to {a.max_tokens} tokens each, --max-batch "
              f"{a.max_batch}; machine: {os.cpu_count()} CPUs", file=sys.stderr)
    finally:
        srv.terminate()
        srv.wait(timeout=60)


if __name__ == "__main__":
    main()
