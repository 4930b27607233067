#!/usr/bin/python3
"""The binaries' OpenBLAS core (kernels/cpu/blas_core.h), through sgemm_peak_bench, which re-executes
itself as the server does: unset, OPENBLAS_CORETYPE leaves no core whose kernels predate AVX2 on a CPU
that has AVX2 and FMA (on a CPU OpenBLAS does not know, that is the re-execution at work); set by the
user, it is what OpenBLAS loads. Asserts no timing.

    /usr/bin/python3 bench/blas_core_test.py build/bench/sgemm_peak_bench
"""
import json
import os
import subprocess
import sys

AVX2_CORES = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"}


def loaded_core(binary, coretype):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    cmd = [binary, "--shapes", "8x8x8", "--threads", "1", "--min-seconds", "0.001", "--trials", "1"]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, timeout=20).stdout
    return json.loads(out.strip().splitlines()[-1])["blas_core"]


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def main():
    binary = sys.argv[1]
    flags = cpu_flags()
    core = loaded_core(binary, None)
    if {"avx2", "fma"} <= flags:
        assert core in AVX2_CORES, "OpenBLAS runs its %s kernels on a CPU with AVX2" % core
    # The user's choice stands (Haswell runs wherever AVX2 does; Prescott everywhere).
    forced = "Haswell" if {"avx2", "fma"} <= flags else "Prescott"
    assert loaded_core(binary, forced) == forced
    print("ok: %s unforced, %s when asked for" % (core, forced))


if __name__ == "__main__":
    main()
