#!/usr/bin/python3
"""Decode throughput: mcserve's CPU engine vs the PyTorch reference's eager decode, same checkpoint.

Exports the ~10M-parameter gated DeltaNet of the reference (hidden 256, 9 layers, vocab 4096) in F32
and BF16, runs build/bench/decode_bench at batch 1, 8 and 32, and the reference's eager float32
decode (`CausalLM.step`, one sequence at a time, as the reference decodes) from the same script,
each measurement in its own process, and prints a markdown table of tokens/s and ratios. Run with /usr/bin/python3:

    /usr/bin/python3 bench/decode_bench.py [--build build] [--steps 128] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from export_fixtures import export_bench_model  # noqa: E402
from mcserve_ref import CausalLM  # noqa: E402


def engine_tokens_per_s(binary, model_dir, batch, steps, threads, repeats=3):
    """Median of `repeats` runs (the machine is shared and noisy)."""
    rates = []
    for _ in range(repeats):
        out = subprocess.run([binary, "--model", model_dir, "--batch", str(batch), "--steps", str(steps),
                              "--threads", str(threads)], check=True, capture_output=True, text=True).stdout
        rates.append(json.loads(out.strip().splitlines()[-1])["tokens_per_s"])
    return sorted(rates)[len(rates) // 2]


def reference_tokens_per_s(model_dir, batch, steps, threads):
    """Runs the reference in a child process, so its torch threads are gone when the engine runs."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--reference", model_dir, "--batch", str(batch),
                          "--steps", str(steps), "--threads", str(threads)],
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def measure_reference(model_dir, batch, steps, threads):
    torch.set_num_threads(threads)
    lm = CausalLM.from_dir(model_dir, dtype=torch.float32)
    vocab = lm.lm_head.shape[0]
    states, tokens = [], []
    for b in range(batch):
        st = lm.new_state()
        logits = lm.step([(7 * b + 13 * t + 3) % vocab for t in range(16)], st)[-1]
        states.append(st)
        tokens.append(int(torch.argmax(logits)))
    start = time.perf_counter()
    for _ in range(steps):
        for b in range(batch):
            tokens[b] = int(torch.argmax(lm.step([tokens[b]], states[b])[-1]))
    return batch * steps / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reference", metavar="DIR", help=argparse.SUPPRESS)  # child process mode
    ap.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.reference:
        print(measure_reference(a.reference, a.batch, a.steps, a.threads))
        return
    binary = os.path.join(a.build, "bench", "decode_bench")
    with tempfile.TemporaryDirectory() as tmp:
        f32, bf16 = os.path.join(tmp, "f32"), os.path.join(tmp, "bf16")
        _, params = export_bench_model(f32, "f32")
        export_bench_model(bf16, "bf16")
        rows = []
        for batch in (1, 8, 32):
            base = reference_tokens_per_s(f32, min(batch, 8), max(8, a.steps // (4 * min(batch, 8))), a.threads)
            eng = engine_tokens_per_s(binary, f32, batch, a.steps, a.threads)
            eng_bf16 = engine_tokens_per_s(binary, bf16, batch, a.steps, a.threads)
            rows.append((batch, eng, eng_bf16, base))
    print("gated DeltaNet, %.1fM parameters, %d threads, %d decode steps" % (params / 1e6, a.threads, a.steps))
    print()
    print("| batch | mcserve F32 tok/s | mcserve BF16 tok/s | reference eager F32 tok/s | F32 ratio | BF16 ratio |")
    print("|---|---|---|---|---|---|")
    for batch, eng, eng_bf16, base in rows:
        print("| %d | %.0f | %.0f | %.1f | %.1fx | %.1fx |" % (batch, eng, eng_bf16, base, eng / base, eng_bf16 / base))
    print()
    print("mcserve: median of 3 runs. Reference eager decode runs one sequence at a time; its batch-32")
    print("baseline is its batch-8 rate, measured again just before the batch-32 engine runs.")


if __name__ == "__main__":
    main()
