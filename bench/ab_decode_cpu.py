#!/usr/bin/python3
"""A/B decode cost of two builds in CPU time per token, for a machine too loaded for wall-clock rates.

Runs each decode_bench single-threaded under `perf stat -e task-clock` at two step counts and takes
CPU µs per token = Δtask-clock / (batch · Δsteps), which drops start-up, export and prefill. Time spent
waiting for a core does not count; caches shared with other processes still do. Interleaved (A B, B A),
medians. Exports the ~10M-parameter gated DeltaNet (F32 and BF16) like ab_decode.py.

    /usr/bin/python3 bench/ab_decode_cpu.py --a OLD/build/bench/decode_bench --b build/bench/decode_bench \\
        [--batches 8 16 32] [--rounds 5]
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from ab_decode import export_f32_and_bf16, interleaved_medians  # noqa: E402
STEPS = (16, 144)


def cpu_ms(binary, model, batch, steps):
    r = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock", binary, "--model", model, "--batch", str(batch),
                        "--steps", str(steps), "--threads", "1"], capture_output=True, text=True, check=True)
    return next(float(line.split(",")[0]) for line in r.stderr.splitlines() if "task-clock" in line)


def us_per_token(binary, model, batch):
    lo, hi = (cpu_ms(binary, model, batch, s) for s in STEPS)
    return (hi - lo) * 1e3 / (batch * (STEPS[1] - STEPS[0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="baseline decode_bench binary")
    ap.add_argument("--b", required=True, help="candidate decode_bench binary")
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("| model | batch | A CPU µs/token | B CPU µs/token | A/B |")
        print("|---|---|---|---|---|")
        for model in export_f32_and_bf16(tmp):
            for batch in a.batches:
                ma, mb = interleaved_medians(lambda binary: us_per_token(binary, model, batch), a.a, a.b, a.rounds)
                print("| %s | %d | %.0f | %.0f | %.2f |" % (os.path.basename(model), batch, ma, mb, ma / mb), flush=True)
    print("\nmedians of %d interleaved rounds, 1 thread, steps %d and %d" % (a.rounds, *STEPS))


if __name__ == "__main__":
    main()
