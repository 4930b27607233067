#!/usr/bin/python3
"""Memory Caching's decode cost against the base model at one context length, in CPU time per token.

For a machine too loaded for wall-clock rates (mc_cost_bench.py gives those). Runs build/bench/mc_cost_bench
single-threaded under `perf stat -e task-clock` at two step counts and takes CPU µs per token =
Δtask-clock / Δsteps, which drops start-up, the export, the prefill and the synthesised checkpoints.
Base and each variant are interleaved, medians of --rounds; with --a, an older build is interleaved
too (its ratio in the same run). Exports the ~10M-parameter gated DeltaNet (F32) as mc_cost_bench.py does.

    /usr/bin/python3 bench/mc_cost_cpu.py [--b build/bench/mc_cost_bench] [--a OLD/mc_cost_bench] \\
        [--context 65536] [--rounds 5] [--variant "SSC k=2:aggregation=ssc,top_k=2" ...]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
# The process's set-up (export load, 64K-token fast-forward, prefill) varies by ~100 ms between runs on
# our machines; 128 steps apart (once 32 and 160) that swung the per-token difference by a third, so
# the two counts are 512 steps apart.
STEPS = (32, 544)
DEFAULT_VARIANTS = ["SSC k=2 C=256:aggregation=ssc,top_k=2", "residual C=256:aggregation=residual"]


def cpu_ms(binary, model, context, mc, steps):
    cmd = ["perf", "stat", "-x,", "-e", "task-clock", binary, "--model", model, "--context", str(context),
           "--steps", str(steps), "--threads", "1"]
    for kv in mc:
        cmd += ["--mc", kv]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return next(float(line.split(",")[0]) for line in r.stderr.splitlines() if "task-clock" in line)


def us_per_token(binary, model, context, mc):
    lo, hi = (cpu_ms(binary, model, context, mc, s) for s in STEPS)
    return (hi - lo) * 1e3 / (STEPS[1] - STEPS[0])


def parse_variant(text):
    """'label:field=value,field=value' → (label, ['field=value', ...])."""
    label, _, fields = text.partition(":")
    return label, fields.split(",")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--b", default=os.path.join(ROOT, "build", "bench", "mc_cost_bench"), help="mc_cost_bench")
    ap.add_argument("--a", help="an older mc_cost_bench, interleaved for its ratios in the same run")
    ap.add_argument("--context", type=int, default=65536)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variant", action="append", help="label:field=value,... (default: SSC k=2, residual)")
    a = ap.parse_args()
    variants = [("base", [])] + [parse_variant(v) for v in (a.variant or DEFAULT_VARIANTS)]
    builds = [("B", a.b)] + ([("A", a.a)] if a.a else [])
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        from export_fixtures import export_bench_model
        model = os.path.join(tmp, "f32")
        export_bench_model(model, "f32")
        for _ in range(a.rounds):
            for label, mc in variants:
                for build, binary in builds:
                    runs.setdefault((build, label), []).append(us_per_token(binary, model, a.context, mc))
    print("| build | variant | CPU µs/token | × base |")
    print("|---|---|---|---|")
    for build, _ in builds:
        base = statistics.median(runs[(build, "base")])
        for label, _ in variants:
            m = statistics.median(runs[(build, label)])
            print("| %s | %s | %.0f | %.2f |" % (build, label, m, m / base))
    print("\ncontext %d, medians of %d interleaved rounds, 1 thread, steps %d and %d" % (a.context, a.rounds, *STEPS))


if __name__ == "__main__":
    main()
