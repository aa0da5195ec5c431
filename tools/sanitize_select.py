#!/usr/bin/env python3
"""sanitize_select.py: which end-to-end runs (dist_*) the sanitized CI pass can leave out.

.ci/run runs the tests twice: under ASan + UBSan, then plain (the README's test command). Most of
the sanitized pass's time goes to dist_* runs, end-to-end trainings that mostly execute code the
unit tests already run. This tool measures that with line coverage (gcov) and writes
tests/sanitizer_covered.txt: the dist_* runs whose every covered line of the project's code is
also covered by the sanitized pass's other tests plus the dist_* runs that stay. Those runs get
the label `covered` (tests/CMakeLists.txt) and .ci/run's sanitized pass leaves that label out;
the plain pass still runs them.

How:
  1. build a coverage tree (-O1 --coverage, no sanitizers) in --build;
  2. run the sanitized pass's tests that are not dist_* at once (-j 2): the base coverage;
  3. run each dist_* test alone and record its covered lines and time;
  4. keep every dist_* run that failed here or that a kept test needs (a fixture's setup), then,
     greedily, the run that covers the most lines not yet covered per second, until the kept runs
     cover every line any dist_* run covers; then drop, slowest first, each kept run that the
     others make redundant. The rest are written out, and --build's report.txt
     lists each kept run's own lines (what keeps it: tests/train/run_brief.sh reaches such lines
     cheaply).

Lines counted: the project's sources (the CUDA sources through the emulator's #line) outside
tests/, except the CUDA emulator (tests/cuda_emu/): a test driver's own lines say nothing about
the code a sanitizer should watch.

Usage: python3 tools/sanitize_select.py [--build DIR] [--jobs N]   (26 min on 2 cores)
Standard library only; needs cmake, ninja, gcc's gcov and the project's dependencies.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "sanitizer_covered.txt")
EXCLUDE = "^(bench|gpu)_"  # .ci/run's sanitized pass: -E this -LE '^(heavy|covered)$'


def run(cmd, cwd, log=None):
    with open(log or os.devnull, "w") as f:
        return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode


def build(tree, jobs):
    flags, log = "-O1 --coverage", tree + ".log"
    if run(["cmake", "-S", ROOT, "-B", tree, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Debug",
            f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}",
            "-DCMAKE_EXE_LINKER_FLAGS=--coverage"], ROOT, log) != 0 or \
       run(["cmake", "--build", tree, "-j", str(jobs)], ROOT, log) != 0:
        sys.exit(f"sanitize_select: the coverage build failed: {log}")


def tests_of(tree):
    """The sanitized pass's tests before this tool's label: {name: properties}."""
    out = subprocess.run(["ctest", "--show-only=json-v1", "-E", EXCLUDE, "-LE", "^heavy$"],
                         cwd=tree, capture_output=True, text=True, check=True).stdout
    tests = {}
    for t in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        tests[t["name"]] = props
    return tests


def clear_counts(tree):
    for d, _, files in os.walk(tree):
        for f in files:
            if f.endswith(".gcda"):
                os.remove(os.path.join(d, f))


def clear_outputs(tree):
    """The tests' run outputs (tests/CMakeLists.txt MT_TEST_TMPDIR): gigabytes over all runs."""
    tmp = os.path.join(tree, "test-tmp")
    for entry in os.listdir(tmp):
        p = os.path.join(tmp, entry)
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)


def counted(path, tree):
    rel = os.path.relpath(path, ROOT)
    if rel.startswith("..") or not os.path.relpath(path, tree).startswith(".."):
        return None  # outside the sources, or generated in the build tree
    if rel.startswith("tests" + os.sep) and not rel.startswith(os.path.join("tests", "cuda_emu")):
        return None
    return rel


def covered_lines(tree):
    """{(file, line)} with a count above 0 in the tree's .gcda files."""
    gcdas = [os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs if f.endswith(".gcda")]
    lines = set()
    for i in range(0, len(gcdas), 200):
        out = subprocess.run(["gcov", "--json-format", "--stdout"] + gcdas[i:i + 200], cwd=tree,
                             capture_output=True, text=True).stdout
        for row in out.splitlines():
            if not row.startswith("{"):
                continue
            for f in json.loads(row)["files"]:
                rel = counted(f["file"], tree)
                if rel:
                    lines.update((rel, ln["line_number"]) for ln in f["lines"] if ln["count"] > 0)
    return lines


def setups_needed(tests, kept):
    """The fixture setups the kept tests (and those setups) require."""
    by_fixture = {}
    for name, props in tests.items():
        for fx in props.get("FIXTURES_SETUP", []):
            by_fixture.setdefault(fx, []).append(name)
    need, todo = set(), list(kept)
    while todo:
        for fx in tests[todo.pop()].get("FIXTURES_REQUIRED", []):
            for s in by_fixture.get(fx, []):
                if s not in need and s not in kept:
                    need.add(s)
                    todo.append(s)
    return need


def prune(tests, cover, secs, forced, kept):
    """Greedy picks can be made redundant by later ones: drop, slowest first, each kept run whose
    lines the other kept runs cover and which no other kept run needs as a fixture setup."""
    for n in sorted(kept - forced, key=lambda n: (-secs[n], n)):
        rest = kept - {n}
        if n not in setups_needed(tests, rest) and \
                cover[n] <= set().union(set(), *(cover[k] for k in rest)):
            kept.discard(n)


def write_report(tree, base_lines, cover, secs, kept):
    """tree/report.txt: each kept run, slowest first, with the lines that no other kept run
    and no base test covers: what a short run or a unit test would have to reach for the long
    run to leave the sanitized pass."""
    lines = []
    for n in sorted(kept, key=lambda n: -secs[n]):
        others = set(base_lines).union(*(cover[k] for k in kept if k != n))
        own = sorted(cover[n] - others)
        lines.append(f"{n}: {secs[n]:.0f} s, {len(own)} lines of its own\n")
        lines.extend(f"    {f}:{ln}\n" for f, ln in own)
    with open(os.path.join(tree, "report.txt"), "w") as f:
        f.writelines(lines)
    print(f"the kept runs' own lines: {os.path.join(tree, 'report.txt')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="/tmp/mt-sanitize-select")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    build(a.build, a.jobs)
    tests = tests_of(a.build)
    runs = sorted(n for n in tests if n.startswith("dist_"))
    base = [n for n in tests if n not in runs]
    clear_counts(a.build)
    t0 = time.time()
    run(["ctest", "-j", str(a.jobs), "-E", EXCLUDE + "|^dist_", "-LE", "^heavy$"], a.build,
        os.path.join(a.build, "base.log"))
    base_lines = covered_lines(a.build)
    clear_outputs(a.build)
    print(f"base: {len(base)} tests, {time.time() - t0:.0f} s, {len(base_lines)} lines")
    cover, secs, failed = {}, {}, set()
    for name in runs:
        clear_counts(a.build)
        t0 = time.time()
        rc = run(["ctest", "-R", f"^{name}$"], a.build, os.path.join(a.build, name + ".log"))
        secs[name] = max(time.time() - t0, 0.5)
        if rc != 0:
            failed.add(name)
        cover[name] = covered_lines(a.build) - base_lines
        clear_outputs(a.build)
        print(f"{name}: {secs[name]:.0f} s, {len(cover[name])} lines beyond the base"
              + (" (failed here: kept)" if rc else ""))
    # every setup a base test needs stays, with what it needs in turn
    forced = set(failed) | setups_needed(tests, set(base))
    forced |= setups_needed(tests, forced)
    kept = set(forced)
    todo = set().union(*cover.values()) - set().union(set(), *(cover[k] for k in kept))
    while todo:
        best = max((n for n in runs if n not in kept),
                   key=lambda n: (len(cover[n] & todo) / secs[n], n))
        kept.add(best)
        kept |= setups_needed(tests, kept)
        todo -= set().union(*(cover[k] for k in kept))
    prune(tests, cover, secs, forced, kept)
    dropped = sorted(n for n in runs if n not in kept)
    write_report(a.build, base_lines, cover, secs, kept)
    with open(OUT + ".tmp", "w") as f:
        f.write("# The dist_* runs that the sanitized pass of .ci/run leaves out (label `covered`,\n"
                "# tests/CMakeLists.txt): every line of the project's code they execute, the\n"
                "# sanitized pass's other tests execute too. Written by tools/sanitize_select.py;\n"
                "# rerun it when end-to-end runs are added or the code they reach changes.\n"
                f"# {len(dropped)} of {len(runs)} runs, {sum(secs[n] for n in dropped):.0f} of "
                f"{sum(secs.values()):.0f} s in the coverage build.\n")
        f.writelines(n + "\n" for n in dropped)
    os.replace(OUT + ".tmp", OUT)
    print(f"kept {len(kept)} of {len(runs)} runs; wrote {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
