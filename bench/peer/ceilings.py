"""Runs the two hardware-ceiling probes (build/bench/cache_read_bench, sgemm_peak_bench) and turns
their rates into decode ceilings for our model; and our own batch-1 GEMVs alone (gemv_bench), the part
of a step's time that is the projections' kernel."""
import json
import re
import subprocess

PEAK_SHAPE = (1024, 1024, 1024)


def _run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def read_rates(binary, sizes, threads, min_seconds=0.2, trials=3):
    """{(bytes, threads): GB/s} reading buffers of `sizes` bytes (the probe rounds sizes down to 1 KiB)."""
    report = _run_json([binary, "--bytes", ",".join(map(str, sizes)), "--threads", ",".join(map(str, threads)),
                        "--min-seconds", str(min_seconds), "--trials", str(trials)])
    rates = {}
    for size, row in zip([s for s in sizes for _ in threads], report["results"]):
        rates[(size, row["threads"])] = row["gb_per_s"]
    return rates


def sgemm_shapes(matmul_shapes, batches):
    """The 1024^3 peak shape and one (batch, in, out) per batch and distinct projection of the model."""
    return [PEAK_SHAPE] + [(m, k, n) for m in batches for (k, n) in sorted(matmul_shapes)]


def sgemm_rates(binary, shapes, threads, min_seconds=0.2, trials=3):
    """{(m, k, n, threads): GFLOP/s} of cblas_sgemm."""
    report = _run_json([binary, "--shapes", ",".join("%dx%dx%d" % s for s in shapes), "--threads",
                        ",".join(map(str, threads)), "--min-seconds", str(min_seconds), "--trials", str(trials)])
    return {(r["m"], r["k"], r["n"], r["threads"]): r["gflop_per_s"] for r in report["results"]}


def model_shape_gflops(rates, matmul_shapes, threads, m):
    """GFLOP/s of one M = m pass through every projection of the model, each at its own sgemm rate
    (total FLOPs over the sum of each projection's time): the sgemm ceiling at the model's shapes."""
    flops = seconds = 0.0
    for (k, n), count in matmul_shapes.items():
        f = 2.0 * m * k * n * count
        flops += f
        seconds += f / (rates[(m, k, n, threads)] * 1e9)
    return flops / seconds / 1e9


def gemv_rates(binary, layers, threads):
    """{(weights "F32" | "BF16", threads): tok/s} of a batch-1 step's projections alone, the LM head
    included, nothing else (gemv_bench's BM_DecodeGemvs, the bench model's shapes at `layers` layers);
    {} when the probe has no case for that many layers."""
    thread_re = "|".join(str(t) for t in threads)
    out = subprocess.run([binary, "--benchmark_format=json", "--benchmark_filter=BM_DecodeGemvs/bf16:[01]/layers:%d/"
                          "m:1/threads:(%s)/" % (layers, thread_re)],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    rates = {}
    if not out.strip():  # no case matched (the probe says so on stderr)
        return rates
    for b in json.loads(out)["benchmarks"]:
        m = re.search(r"bf16:(\d)/layers:\d+/m:1/threads:(\d+)", b["name"])
        scale = {"ns": 1e9, "us": 1e6, "ms": 1e3, "s": 1.0}[b["time_unit"]]
        rates[("BF16" if m.group(1) == "1" else "F32", int(m.group(2)))] = scale / b["real_time"]
    return rates
