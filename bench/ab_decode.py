#!/usr/bin/python3
"""A/B decode throughput of two builds on the same checkpoint, interleaved (A B, B A, ...), medians.

For changes to the CPU decode path: the machine is shared and noisy, so both binaries run in the same
script, alternating, and the result is the ratio of medians, and the median of the ratios taken within
each round (with its quartiles: a spread that straddles 1.00 is no result). Exports the ~10M-parameter
gated DeltaNet of bench/decode_bench.py (F32 and BF16) unless --model is given.

    /usr/bin/python3 bench/ab_decode.py --a OLD/build/bench/decode_bench --b build/bench/decode_bench \\
        [--batches 1 32] [--threads 2] [--steps 128] [--rounds 7]
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


def rate(binary, model_dir, batch, steps, threads):
    out = subprocess.run([binary, "--model", model_dir, "--batch", str(batch), "--steps", str(steps),
                          "--threads", str(threads)], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["tokens_per_s"]


def export_f32_and_bf16(tmp):
    """Exports the bench model in F32 and BF16 under tmp; returns the two directories."""
    from export_fixtures import export_bench_model
    models = [os.path.join(tmp, "f32"), os.path.join(tmp, "bf16")]
    export_bench_model(models[0], "f32")
    export_bench_model(models[1], "bf16")
    return models


def interleaved_runs(measure, a, b, rounds):
    """measure(a) and measure(b) over `rounds` rounds, each round one of each, the order swapped every
    round (A B, B A, A B, ...): on these VMs the second of two back-to-back runs of one binary read 5%
    slower over 41 rounds, so a fixed order favours A."""
    ra, rb = [], []
    for i in range(rounds):
        if i % 2 == 0:
            ra.append(measure(a))
            rb.append(measure(b))
        else:
            rb.append(measure(b))
            ra.append(measure(a))
    return ra, rb


def interleaved_medians(measure, a, b, rounds):
    """Medians of measure(a) and measure(b) over `rounds` interleaved rounds (interleaved_runs)."""
    ra, rb = interleaved_runs(measure, a, b, rounds)
    return statistics.median(ra), statistics.median(rb)


def round_ratios(ra, rb):
    """The quartiles of B/A taken within each round (the two runs of a round see the same machine); with
    fewer than 4 rounds, the lowest, the median and the highest."""
    ratios = sorted(y / x for x, y in zip(ra, rb))
    if len(ratios) < 4:
        return ratios[0], statistics.median(ratios), ratios[-1]
    q = statistics.quantiles(ratios, n=4)
    return q[0], q[1], q[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="baseline decode_bench binary")
    ap.add_argument("--b", required=True, help="candidate decode_bench binary")
    ap.add_argument("--model", action="append", help="model directory (repeatable); default: export F32 and BF16")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models = a.model or export_f32_and_bf16(tmp)
        print("| model | batch | A tok/s | B tok/s | B/A | B/A within a round: median (quartiles) |")
        print("|---|---|---|---|---|---|")
        for model in models:
            for batch in a.batches:
                ra, rb = interleaved_runs(lambda binary: rate(binary, model, batch, a.steps, a.threads),
                                          a.a, a.b, a.rounds)
                ma, mb = statistics.median(ra), statistics.median(rb)
                lo, mid, hi = round_ratios(ra, rb)
                print("| %s | %d | %.0f | %.0f | %.2f | %.2f (%.2f-%.2f) |"
                      % (os.path.basename(model), batch, ma, mb, mb / ma, mid, lo, hi), flush=True)
    print("\nmedians of %d interleaved rounds (order swapped every round), %d threads, %d steps"
          % (a.rounds, a.threads, a.steps))


if __name__ == "__main__":
    main()
