#!/usr/bin/python3
"""Smoke test of a ceiling probe (cache_read_bench, sgemm_peak_bench, cuda_kernel_bench): runs `BINARY ARGS...` and checks
that it prints one JSON object whose `results` are non-empty with positive rates. Asserts no timing."""
import json
import subprocess
import sys


def main():
    out = subprocess.run(sys.argv[1:], check=True, capture_output=True, text=True, timeout=8).stdout
    report = json.loads(out.strip().splitlines()[-1])
    results = report["results"]
    assert results, report
    for row in results:
        rate = row.get("gb_per_s", row.get("gflop_per_s"))
        assert rate is not None and rate > 0, row
    print("ok: %d results" % len(results))


if __name__ == "__main__":
    main()
