#!/usr/bin/python3
"""Smoke test of gemv_bench as bench/cpu_peer_bench.py reads it (peer/ceilings.py gemv_rates): a positive
batch-1 rate for F32 and BF16 weights at 1 and 2 threads at the bench model's 9 layers, and none for a layer
count the probe has no case for. Asserts no timing.

    gemv_rates_smoke_test.py build/bench/gemv_bench
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer import ceilings  # noqa: E402


def main():
    binary = sys.argv[1]
    rates = ceilings.gemv_rates(binary, 9, [1, 2])
    assert sorted(rates) == [("BF16", 1), ("BF16", 2), ("F32", 1), ("F32", 2)], rates
    assert all(r > 0 for r in rates.values()), rates
    assert ceilings.gemv_rates(binary, 7, [1, 2]) == {}
    print("ok: %s" % ", ".join("%s/%d threads %.0f tok/s" % (k[0], k[1], v) for k, v in sorted(rates.items())))


if __name__ == "__main__":
    main()
