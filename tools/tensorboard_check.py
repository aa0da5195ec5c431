#!/usr/bin/env python3
"""tensorboard_check.py: the TensorBoard event files of a minimax-train run (output.report_to =
["csv", "tensorboard"]; docs/training.md, "Outputs") read with the `tensorboard` package's own
readers, every scalar against the run's metrics.jsonl. Run by hand, not in CI (it needs the
pinned package below; CI reads the files back in C: data_tboard_match).

  python tools/tensorboard_check.py DIR [DIR...] [--serve BIN]

DIR is an output.dir (each rewound-*/ directory in it is checked as a run of its own), e.g. the
one tests/train/run_resume.sh's tboard mode leaves in build/test-tmp/tboard
(`ctest -R dist_train_tboard`).

1. Records: each event file through tensorboard's record reader (PyRecordReader_New of its
   TensorFlow stub, which checks both masked CRC-32Cs and raises on a mismatch) and parsed as
   tensorboard.compat.proto Event; the first must be file_version "brain.Event:2".
2. EventAccumulator (tensorboard.backend.event_processing, purge_orphaned_data on, as
   TensorBoard runs it): its scalar tags are exactly "<type>/<key>" of every metrics.jsonl number
   but step and time, each tag's (step, value, wall_time) list the lines' (value as float32, NaN
   for null), in step order, no step twice.
3. With --serve BIN (the `tensorboard` script): `tensorboard --logdir DIR` on a free loopback
   port, with the Python loader (--load_fast=false) and the Rust data server (--load_fast=true):
   /data/runs and /data/plugin/scalars/scalars?run=.&tag=... give the same numbers.
4. With --live TRAINER (build/minimax-train): a TensorBoard that follows a run while it is
   resumed. One process trains tests/recipes/dist.toml 4 steps into a temporary output.dir
   (checkpoints at 2 and 4); an EventAccumulator loads it; the run is resumed from step 2 with
   --rewind and train.max_steps = 6 (so step 4's lr differs from the first run's); the same
   accumulator, reloaded, must hold steps 1..6 once each with the resumed run's values (the
   SessionLog START at step 3 made it drop the first run's 3 and 4), as a fresh one does.
Pinned: tensorboard==2.21.0 (tensorboard-data-server==0.7.2).
"""
import argparse
import glob
import json
import math
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request

PINNED = {"tensorboard": "2.21.0", "tensorboard-data-server": "0.7.2"}


def check_pins():
    from importlib.metadata import version
    for name, want in PINNED.items():
        got = version(name)
        if got != want:
            sys.exit(f"{name} {got} is installed; this check is pinned to {want}")


def f32(x):
    return float("nan") if x is None else struct.unpack("<f", struct.pack("<f", x))[0]


def same(a, b):
    return a == b or (math.isnan(a) and math.isnan(b))


def expected(run_dir):
    """{tag: [(step, float32 value, wall_time)]} from metrics.jsonl."""
    want = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            o = json.loads(line)
            for k, v in o.items():
                if k in ("step", "type", "time"):
                    continue
                want.setdefault(f"{o['type']}/{k}", []).append((o["step"], f32(v), o["time"]))
    return want


def check_records(run_dir):
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
    files = sorted(glob.glob(os.path.join(run_dir, "*tfevents*")))
    if not files:
        sys.exit(f"{run_dir}: no event file")
    total = 0
    for path in files:
        reader = pywrap_tensorflow.PyRecordReader_New(path)
        events = []
        while True:
            try:
                reader.GetNext()
            except errors.OutOfRangeError:
                break
            events.append(event_pb2.Event.FromString(reader.record()))
        if not events or events[0].file_version != "brain.Event:2":
            sys.exit(f"{path}: the first event is not file_version brain.Event:2")
        kinds = {}
        for e in events:
            kinds[e.WhichOneof("what")] = kinds.get(e.WhichOneof("what"), 0) + 1
        print(f"  {os.path.basename(path)}: {len(events)} records, CRCs good: {kinds}")
        total += len(events)
    return files, total


def check_accumulator(run_dir, want):
    from tensorboard.backend.event_processing import event_accumulator as ea
    acc = ea.EventAccumulator(run_dir, size_guidance={ea.SCALARS: 0})
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    if tags != sorted(want):
        sys.exit(f"{run_dir}: EventAccumulator's tags {tags} != metrics.jsonl's {sorted(want)}")
    n = 0
    for tag in tags:
        got = [(e.step, e.value, e.wall_time) for e in acc.Scalars(tag)]
        exp = want[tag]
        if len(got) != len(exp) or not all(
                g[0] == w[0] and same(g[1], w[1]) and g[2] == w[2] for g, w in zip(got, exp)):
            sys.exit(f"{run_dir}: {tag}: EventAccumulator {got} != metrics.jsonl {exp}")
        n += len(got)
    print(f"  EventAccumulator: {len(tags)} tags, {n} scalars = metrics.jsonl's "
          f"(steps {min(s for v in want.values() for s, _, _ in v)}.."
          f"{max(s for v in want.values() for s, _, _ in v)})")
    for tag in ("train/loss", "eval/eval_loss", "eval/accuracy"):
        if tag in want:
            print(f"    {tag}: {[(e.step, round(e.value, 6)) for e in acc.Scalars(tag)]}")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def check_server(tb_bin, logdir, runs, load_fast):
    """runs: {run name: expected}; the server must list them and serve their scalars."""
    port = free_port()
    proc = subprocess.Popen([tb_bin, "--logdir", logdir, "--host", "127.0.0.1", "--port",
                             str(port), f"--load_fast={load_fast}", "--reload_interval", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            time.sleep(0.5)
            try:
                got_runs = get_json(base + "/data/runs")
                if sorted(got_runs) == sorted(runs):
                    break
            except OSError:
                got_runs = None
        if sorted(got_runs or []) != sorted(runs):
            sys.exit(f"tensorboard --load_fast={load_fast}: runs {got_runs}, want {sorted(runs)}")
        n = 0
        for run, want in runs.items():
            for tag, exp in want.items():
                q = urllib.parse.urlencode({"run": run, "tag": tag})
                got = get_json(f"{base}/data/plugin/scalars/scalars?{q}")
                ok = len(got) == len(exp) and all(
                    g[1] == w[0] and same(float(g[2]), w[1]) and abs(g[0] - w[2]) < 1e-3
                    for g, w in zip(got, exp))
                if not ok:
                    sys.exit(f"tensorboard --load_fast={load_fast}: {run} {tag}: {got} != {exp}")
                n += len(got)
        print(f"tensorboard --logdir {logdir} --load_fast={load_fast}: runs {sorted(got_runs)}, "
              f"{n} scalars over HTTP = metrics.jsonl's")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def check_live(trainer):
    import tempfile
    from tensorboard.backend.event_processing import event_accumulator as ea
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = tempfile.mkdtemp(prefix="mt_tb_live_")
    out = os.path.join(tmp, "run")
    common = [trainer, "tests/recipes/dist.toml", "--set", f"output.dir={out}",
              "--set", f"data.cache_dir={tmp}/cache", "--set", "model.num_hidden_layers=1",
              "--set", "data.max_length=64", "--set", "data.truncation=truncate",
              "--set", "output.save_steps=2", "--set", "output.export=false",
              "--set", 'output.report_to=["csv", "tensorboard"]']

    def train(*extra):
        r = subprocess.run(common + list(extra), cwd=root, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{' '.join(common + list(extra))}: exit {r.returncode}\n{r.stderr[-2000:]}")

    train("--set", "train.max_steps=4")
    live = ea.EventAccumulator(out, size_guidance={ea.SCALARS: 0})
    live.Reload()
    first = [(e.step, e.value) for e in live.Scalars("train/lr")]
    train("--set", "train.max_steps=6", "--resume", f"{out}/checkpoint-2", "--rewind")
    live.Reload()
    want = expected(out)
    for tag, exp in want.items():
        got = [(e.step, e.value) for e in live.Scalars(tag)]
        if len(got) != len(exp) or not all(
                g[0] == w[0] and same(g[1], w[1]) for g, w in zip(got, exp)):
            sys.exit(f"live EventAccumulator after the resume: {tag}: {got} != {exp}")
    check_accumulator(out, want)
    print(f"live: train/lr before the resume {[(s, round(v, 6)) for s, v in first]}")
    print(f"live: after it (the same accumulator reloaded) "
          f"{[(e.step, round(e.value, 6)) for e in live.Scalars('train/lr')]}: "
          f"every tag's steps 1..6 once each, = metrics.jsonl")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--serve", help="the tensorboard script, to check the server too")
    ap.add_argument("--live", metavar="TRAINER", help="minimax-train, for the live resume check")
    a = ap.parse_args()
    check_pins()
    for d in a.dirs:
        run_dirs = [d] + sorted(glob.glob(os.path.join(d, "rewound-*")))
        runs = {}
        for rd in run_dirs:
            print(rd)
            check_records(rd)
            want = expected(rd)
            check_accumulator(rd, want)
            runs["." if rd == d else os.path.relpath(rd, d)] = want
        if a.serve:
            for fast in ("false", "true"):
                check_server(a.serve, d, runs, fast)
    if a.live:
        check_live(a.live)
    print("ok")


if __name__ == "__main__":
    main()
