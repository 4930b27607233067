#!/usr/bin/python3
"""Decode cost of a memory family against a gated DeltaNet of the same width: decode tokens/s at
batch 1 and 32 and state bytes per request, through build/bench/decode_bench (Model::Forward, greedy
one-token steps after a short prefill, F32 weights).

Each family is exported at the bench shape (hidden 256, 9 layers, 4 heads x 64, vocab 4096:
`export_bench_model`, random weights) and measured in its own process; runs are interleaved across
families (the machine is shared and noisy) and the median of --repeats is reported, with the ratio to
the gated DeltaNet. Run with /usr/bin/python3:

    /usr/bin/python3 bench/family_cost.py --families lattice [--batches 1,32] [--steps 64] [--threads 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from export_fixtures import export_bench_model  # noqa: E402

BASE = "gated_deltanet"


def decode(binary, model_dir, batch, steps, threads):
    """decode_bench's JSON line for one run."""
    out = subprocess.run([binary, "--model", model_dir, "--batch", str(batch), "--steps", str(steps),
                          "--prefill", "16", "--threads", str(threads)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--families", required=True, help="comma-separated model_types to compare with gated_deltanet")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    binary = os.path.join(a.build, "bench", "decode_bench")
    families = [BASE] + [f for f in a.families.split(",") if f and f != BASE]
    batches = [int(b) for b in a.batches.split(",")]
    runs = {(f, b): [] for f in families for b in batches}
    with tempfile.TemporaryDirectory() as tmp:
        dirs, params = {}, {}
        for f in families:
            dirs[f], params[f] = export_bench_model(os.path.join(tmp, f), "f32", model_type=f)
        for _ in range(a.repeats):
            for b in batches:
                for f in families:
                    runs[(f, b)].append(decode(binary, dirs[f], b, a.steps, a.threads))
    print("bench shape (hidden 256, 9 layers, 4 heads x 64, vocab 4096), F32, %d threads, %d decode steps after "
          "16 prompt tokens; median of %d interleaved runs" % (a.threads, a.steps, a.repeats))
    print()
    print("| family | parameters | batch | tokens/s | / gated_deltanet | state bytes per request |")
    print("|---|---|---|---|---|---|")
    for b in batches:
        base = statistics.median(r["tokens_per_s"] for r in runs[(BASE, b)])
        for f in families:
            rate = statistics.median(r["tokens_per_s"] for r in runs[(f, b)])
            state = runs[(f, b)][0]["state_bytes_per_request"]
            print("| %s | %.1fM | %d | %.0f | %.2f | %d |" % (f, params[f] / 1e6, b, rate, rate / base, state))


if __name__ == "__main__":
    main()
