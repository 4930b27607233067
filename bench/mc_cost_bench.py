#!/usr/bin/python3
"""Memory Caching decode cost against context length (issue #3).

Exports the reference's ~10M-parameter gated DeltaNet (hidden 256, 9 layers, 4 heads x 64, F32), then
for each context length and variant runs build/bench/mc_cost_bench (one request positioned at the
context with the checkpoints MC holds there — see the comment in mc_cost_bench.cc — then timed greedy
decode steps) and prints tokens/s, the ratio to the base model at the same context (measured in the
same loop, just before), and the memory each request holds (state slot + checkpoints).

    /usr/bin/python3 bench/mc_cost_bench.py [--build build] [--steps 32] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from export_fixtures import export_bench_model  # noqa: E402

VARIANTS = [
    ("base", []),
    ("residual C=256", ["aggregation=residual"]),
    ("post-training mean C=256", ["aggregation=mean"]),
    ("GRM C=256", ["aggregation=grm"]),
    ("SSC k=2 C=256", ["aggregation=ssc", "top_k=2"]),
    ("SSC k=4 C=256", ["aggregation=ssc", "top_k=4"]),
    ("GRM logarithmic", ["aggregation=grm", "segmentation=logarithmic"]),
]
CONTEXTS = [1024, 4096, 16384, 65536]


def measure(binary, model, context, mc, steps, threads, repeats=3):
    """Median tokens/s of `repeats` runs, and the bytes per request; RuntimeError with the bench's
    message when it fails."""
    args = [binary, "--model", model, "--context", str(context), "--steps", str(steps), "--threads", str(threads)]
    for kv in mc:
        args += ["--mc", kv]
    runs = []
    for _ in range(repeats):
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:  # e.g. a Memory Caching combination the engine refuses
            raise RuntimeError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "exit %d" % r.returncode)
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    rates = sorted(r["tokens_per_s"] for r in runs)
    return rates[len(rates) // 2], runs[0]["bytes_per_request"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    binary = os.path.join(a.build, "bench", "mc_cost_bench")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "gdn")
        _, params = export_bench_model(model, "f32")
        results = {}
        for context in CONTEXTS:
            for name, mc in VARIANTS:
                results[(name, context)] = measure(binary, model, context, mc, a.steps, a.threads)
    print("gated DeltaNet, %.1fM parameters, F32, batch 1, %d threads, %d decode steps (median of 3)"
          % (params / 1e6, a.threads, a.steps))
    print()
    print("| variant | " + " | ".join("%dK tok/s (× base)" % (c // 1024) for c in CONTEXTS) + " | memory/request at "
          + " / ".join("%dK" % (c // 1024) for c in CONTEXTS) + " |")
    print("|---|" + "---|" * (len(CONTEXTS) + 1))
    for name, _ in VARIANTS:
        cells = []
        for c in CONTEXTS:
            rate, _ = results[(name, c)]
            base, _ = results[("base", c)]
            cells.append("%.0f (%.2f)" % (rate, rate / base))
        mem = " / ".join("%.1f MB" % (results[(name, c)][1] / 1e6) for c in CONTEXTS)
        print("| %s | %s | %s |" % (name, " | ".join(cells), mem))


if __name__ == "__main__":
    main()
