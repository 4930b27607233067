#!/usr/bin/python3
"""Memory Caching's decode cost against the base model at one context, wall clock, two builds interleaved.

Each round runs build/bench/mc_cost_bench for the base model and the variant, with build B then build
A (--a, optional), and reports per build the median tok/s of each, the variant's cost × the base
(from the medians, and the median of the per-round ratios, which cancels slow phases of a shared
machine's memory), and B's variant rate / A's. Exports the ~10M-parameter gated DeltaNet as
mc_cost_bench.py does, in F32 or BF16.

    /usr/bin/python3 bench/mc_cost_ab.py [--b build/bench/mc_cost_bench] [--a OLD/mc_cost_bench] \\
        [--threads 1] [--rounds 9] [--steps 512] [--context 65536] [--dtype f32] [--mc aggregation=ssc --mc top_k=2]
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


def tok_per_s(binary, model, a, mc):
    cmd = [binary, "--model", model, "--context", str(a.context), "--steps", str(a.steps), "--threads", str(a.threads)]
    for kv in mc:
        cmd += ["--mc", kv]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["tokens_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--b", default=os.path.join(ROOT, "build", "bench", "mc_cost_bench"))
    ap.add_argument("--a", help="an older mc_cost_bench, interleaved")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=512)
    ap.add_argument("--context", type=int, default=65536)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--mc", action="append", help="field=value of the variant (default: SSC k=2)")
    a = ap.parse_args()
    variant = a.mc or ["aggregation=ssc", "top_k=2"]
    builds = [("B", a.b)] + ([("A", a.a)] if a.a else [])
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        from export_fixtures import export_bench_model
        model = os.path.join(tmp, a.dtype)
        export_bench_model(model, a.dtype)
        for _ in range(a.rounds):
            for build, binary in builds:
                for label, mc in (("base", []), ("variant", variant)):
                    runs.setdefault((build, label), []).append(tok_per_s(binary, model, a, mc))
    print("| build | base tok/s | %s tok/s | cost × base (medians) | cost × base (median per round) |" % ",".join(variant))
    print("|---|---|---|---|---|")
    for build, _ in builds:
        base, var = runs[(build, "base")], runs[(build, "variant")]
        per_round = statistics.median(b / v for b, v in zip(base, var))
        print("| %s | %.0f | %.0f | %.2f | %.2f |" % (build, statistics.median(base), statistics.median(var),
                                                  statistics.median(base) / statistics.median(var), per_round))
    if a.a:
        print("\nB / A, variant tok/s: %.2f" % (statistics.median(runs[("B", "variant")]) /
                                               statistics.median(runs[("A", "variant")])))
    print("context %d, %s, %d threads, %d steps a run, medians of %d interleaved rounds" %
          (a.context, a.dtype, a.threads, a.steps, a.rounds))


if __name__ == "__main__":
    main()
