#!/usr/bin/python3
"""Serving benchmark: generated tokens/s through the Engine (scheduler + continuous batching) against
the number of concurrent requests, and time to first token of a long prompt with and without its
2K-token prefix in the prefix cache. Baselines are in the same run: concurrency 1; the bare model's
batched decode at the same batch (build/bench/decode_bench: no scheduler, no prefill, no sampling
or streaming — what the Engine costs on top); and the cold TTFT.

Exports the ~10M-parameter gated DeltaNet of the reference (as bench/decode_bench.py does), then runs
build/bench/serving_bench once per measurement, the Engine and the bare decode interleaved run by run
(medians of --repeats, 5 by default). Run with /usr/bin/python3:

    /usr/bin/python3 bench/serving_bench.py [--build build] [--threads 2] [--repeats 5] [--mc aggregation=grm ...]
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


def run_once(binary, model_dir, threads, mc, *args):
    """One run of a measurement binary: its last line's JSON."""
    cmd = [binary, "--model", model_dir, "--threads", str(threads), *args]
    for m in mc:
        cmd += ["--mc", m]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def median(results, key):
    results = sorted(results, key=lambda r: r[key])
    return results[len(results) // 2]


def run(binary, model_dir, threads, mc, *args, repeats, key):
    """Median of `repeats` runs of one measurement (the machine is shared and noisy)."""
    return median([run_once(binary, model_dir, threads, mc, *args) for _ in range(repeats)], key)


def engine_and_bare(a, binary, decode, model, n):
    """The Engine and the bare batched decode at n requests, interleaved run by run (a slow spell of the
    machine hits both), medians of a.repeats each; bare is None with MC overrides (decode_bench has none)."""
    engine, bare = [], []
    for _ in range(a.repeats):
        engine.append(run_once(binary, model, a.threads, a.mc, "--concurrency", str(n), "--prompt", str(a.prompt),
                               "--generate", str(a.generate)))
        if not a.mc:
            bare.append(run_once(decode, model, a.threads, [], "--batch", str(n), "--steps", str(a.generate)))
    return median(engine, "tokens_per_s"), median(bare, "tokens_per_s") if bare else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--generate", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--mc", action="append", default=[], help="Memory Caching override field=value")
    ap.add_argument("--repeats", type=int, default=5, help="runs of each measurement (medians)")
    a = ap.parse_args()
    binary = os.path.join(a.build, "bench", "serving_bench")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "f32")
        _, params = export_bench_model(model, "f32")
        rows = []
        decode = os.path.join(a.build, "bench", "decode_bench")
        for n in (1, 2, 4, 8, 16, 32, 64):
            r, bare = engine_and_bare(a, binary, decode, model, n)
            rows.append((n, r["tokens_per_s"], bare["tokens_per_s"] if bare else None))
        ttft = run(binary, model, a.threads, a.mc, "--mode", "ttft", "--prefix", "2048", "--prompt", "32",
                   repeats=a.repeats, key="cached_s")
    mc = ", MC " + " ".join(a.mc) if a.mc else ", no MC"
    print("gated DeltaNet, %.1fM parameters, %d threads%s; prompt %d, %d generated per request (greedy)"
          % (params / 1e6, a.threads, mc, a.prompt, a.generate))
    print()
    print("| concurrent requests | Engine generated tok/s | vs 1 request | bare batched decode tok/s | Engine / bare |")
    print("|---|---|---|---|---|")
    base = rows[0][1]
    for n, rate, bare in rows:
        bare_cols = "%.0f | %.2f" % (bare, rate / bare) if bare else "- | -"
        print("| %d | %.0f | %.2fx | %s |" % (n, rate, rate / base, bare_cols))
    print()
    print("| time to first token, 2048-token prefix + 32-token tail | seconds | vs cold |")
    print("|---|---|---|")
    print("| cold (nothing cached) | %.4f | 1.00x |" % ttft["cold_s"])
    print("| prefix cached (%d tokens resumed) | %.4f | %.3fx |"
          % (ttft["cached_tokens"], ttft["cached_s"], ttft["cached_s"] / ttft["cold_s"]))


if __name__ == "__main__":
    main()
