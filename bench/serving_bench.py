#!/usr/bin/python3
"""Serving benchmark: generated tokens/s through the Engine (scheduler + continuous batching) against
the number of concurrent requests, and time to first token of a long prompt with and without its
2K-token prefix in the prefix cache. Baselines are in the same run: concurrency 1; the bare model's
batched decode at the same batch (build/bench/decode_bench: no scheduler, no prefill, no sampling
or streaming — what the Engine costs on top); and the cold TTFT.

Exports the ~10M-parameter gated DeltaNet of the reference (as bench/decode_bench.py does), then runs
build/bench/serving_bench once per measurement (median of 3). Run with /usr/bin/python3:

    /usr/bin/python3 bench/serving_bench.py [--build build] [--threads 2] [--mc aggregation=grm ...]
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


def run(binary, model_dir, threads, mc, *args, repeats=3, key):
    """Median of `repeats` runs of one measurement (the machine is shared and noisy)."""
    results = []
    for _ in range(repeats):
        cmd = [binary, "--model", model_dir, "--threads", str(threads), *args]
        for m in mc:
            cmd += ["--mc", m]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
    results.sort(key=lambda r: r[key])
    return results[len(results) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--generate", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--mc", action="append", default=[], help="Memory Caching override field=value")
    a = ap.parse_args()
    binary = os.path.join(a.build, "bench", "serving_bench")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "f32")
        _, params = export_bench_model(model, "f32")
        rows = []
        decode = os.path.join(a.build, "bench", "decode_bench")
        for n in (1, 2, 4, 8, 16, 32, 64):
            r = run(binary, model, a.threads, a.mc, "--concurrency", str(n), "--prompt", str(a.prompt),
                    "--generate", str(a.generate), key="tokens_per_s")
            bare = run(decode, model, a.threads, [], "--batch", str(n), "--steps", str(a.generate),
                       key="tokens_per_s") if not a.mc else None
            rows.append((n, r["tokens_per_s"], bare["tokens_per_s"] if bare else None))
        ttft = run(binary, model, a.threads, a.mc, "--mode", "ttft", "--prefix", "2048", "--prompt", "32",
                   key="cached_s")
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
