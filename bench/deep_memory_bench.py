#!/usr/bin/python3
"""Deep (MLP) memory against its linear counterpart under Memory Caching (issue #9): decode tokens/s
and memory per request against context length, for the same ~10M-parameter titans shape (hidden 256,
9 layers, 4 heads x 64, F32) with a matrix memory (memory_depth 1) and with an MLP memory
(memory_depth 2, expansion 4: 8·64² = 32,768 weights per head). Each cell runs build/bench/mc_cost_bench
(the context synthesised as there, then timed greedy decode steps) via mc_cost_bench.measure.

    /usr/bin/python3 bench/deep_memory_bench.py [--build build] [--steps 16] [--threads 2]
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mc_cost_bench import ROOT, measure  # noqa: E402  (also puts tests/reference on sys.path)
from export_fixtures import export_bench_model  # noqa: E402

VARIANTS = [
    ("base", []),
    ("residual C=256", ["aggregation=residual"]),
    ("GRM C=256", ["aggregation=grm"]),
    ("soup C=256", ["aggregation=soup"]),
    ("SSC k=2 C=256", ["aggregation=ssc", "top_k=2"]),
    ("SSC k=4 C=256", ["aggregation=ssc", "top_k=4"]),
    ("post-training mean C=256", ["aggregation=mean"]),
    ("GRM logarithmic", ["aggregation=grm", "segmentation=logarithmic"]),
]
CONTEXTS = [1024, 4096, 16384, 65536]
MEMORIES = [("linear (matrix) memory", 1), ("deep (MLP) memory", 2)]


def measure_all(binary, model, steps, threads):
    """{(variant, context): (tokens/s, bytes) or the engine's refusal}, contexts outer so that each
    ratio compares with the base model measured just before at the same context."""
    results = {}
    for c in CONTEXTS:
        for name, mc in VARIANTS:
            try:
                results[(name, c)] = measure(binary, model, c, mc, steps, threads)
            except RuntimeError as e:  # a combination the engine refuses
                results[(name, c)] = str(e)
    return results


def print_table(results):
    """One row per variant: tokens/s (× base) per context, then memory per request."""
    print("| variant | " + " | ".join("%dK tok/s (× base)" % (c // 1024) for c in CONTEXTS)
          + " | memory/request at " + " / ".join("%dK" % (c // 1024) for c in CONTEXTS) + " |")
    print("|---|" + "---|" * (len(CONTEXTS) + 1))
    for name, _ in VARIANTS:
        cells = [results[(name, c)] for c in CONTEXTS]
        if isinstance(cells[0], str):
            print("| %s | %s |" % (name, cells[0]))
            continue
        rates = " | ".join("%.0f (%.2f)" % (r[0], r[0] / results[("base", c)][0]) for r, c in zip(cells, CONTEXTS))
        print("| %s | %s | %s |" % (name, rates, " / ".join("%.1f MB" % (r[1] / 1e6) for r in cells)), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    binary = os.path.join(a.build, "bench", "mc_cost_bench")
    print("titans, hidden 256, 9 layers, 4 heads x 64, F32, batch 1, %d threads, %d decode steps (median of 3)"
          % (a.threads, a.steps))
    with tempfile.TemporaryDirectory() as tmp:
        for label, depth in MEMORIES:
            model = os.path.join(tmp, "titans_%d" % depth)
            _, params = export_bench_model(model, "f32", model_type="titans", memory_depth=depth)
            print("\n%s: %.2fM parameters\n" % (label, params / 1e6), flush=True)
            print_table(measure_all(binary, model, a.steps, a.threads))


if __name__ == "__main__":
    main()
