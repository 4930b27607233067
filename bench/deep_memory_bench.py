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
            print("\n%s: %.2fM parameters\n" % (label, params / 1e6))
            print("| variant | " + " | ".join("%dK tok/s (× base)" % (c // 1024) for c in CONTEXTS)
                  + " | memory/request at " + " / ".join("%dK" % (c // 1024) for c in CONTEXTS) + " |")
            print("|---|" + "---|" * (len(CONTEXTS) + 1), flush=True)
            base = {c: measure(binary, model, c, [], a.steps, a.threads)[0] for c in CONTEXTS}
            for name, mc in VARIANTS:
                try:
                    cells = {c: measure(binary, model, c, mc, a.steps, a.threads) for c in CONTEXTS}
                except RuntimeError as e:  # a combination the engine refuses
                    print("| %s | %s |" % (name, str(e)), flush=True)
                    continue
                rates = " | ".join("%.0f (%.2f)" % (cells[c][0], cells[c][0] / base[c]) for c in CONTEXTS)
                mem = " / ".join("%.1f MB" % (cells[c][1] / 1e6) for c in CONTEXTS)
                print("| %s | %s | %s |" % (name, rates, mem), flush=True)


if __name__ == "__main__":
    main()
