#!/usr/bin/python3
"""Inter-token latency at N concurrent gRPC streams, one mcserve binary against another: built before
and after a change (push-based output: the engine notifies each stream instead of a pump thread per
stream polling its channel). Both servers serve the same model with the same flags; each round runs
one wave of N requests with N in flight through build/bench/serve_load against each server in turn
(interleaved, so both see the machine's noise), and reports the median over rounds of serve_load's
ITL and TPOT, and the server's thread count sampled during the wave.

    /usr/bin/python3 bench/push_output_itl.py --before OLD/mcserve [--after build/server/mcserve]
        [--model bench] [--concurrency 64] [--rounds 5]

Both servers start without any MCSERVE_* variable (serve_load.Server's rule), so a build that loaded
its gRPC front end as a module finds it where it was built.
"""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_load as sl  # noqa: E402  (Server, serve_load, tokenizer_vocab)

ROOT = sl.ROOT


def threads_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(line for line in f if line.startswith("Threads:")).split()[1])


def wave(server, load_bin, a, vocab, seed, out_dir):
    """serve_load's result for one wave, with the most server threads seen while it ran."""
    most, done = [threads_of(server.proc.pid)], threading.Event()

    def sample():
        while not done.is_set():
            most.append(threads_of(server.proc.pid))
            time.sleep(0.02)
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = sl.serve_load(load_bin, server.address, a.concurrency, a, vocab, seed, out_dir)
    finally:
        done.set()
        sampler.join()
    result["server_threads"] = max(most)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the baseline mcserve binary")
    ap.add_argument("--after", default=os.path.join(ROOT, "build", "server", "mcserve"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="where bench/serve_load is")
    ap.add_argument("--model", default="bench", help="bench, tiny, fixture or a model directory")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    load_bin = os.path.join(a.build, "bench", "serve_load")
    binaries = {"before": a.before, "after": a.after}
    results = {name: [] for name in binaries}
    with tempfile.TemporaryDirectory() as tmp:
        if a.model == "bench":
            from export_fixtures import export_bench_model
            model_dir, params = export_bench_model(os.path.join(tmp, "f32"), "f32")
            what = "gated DeltaNet, %.1fM parameters (bench model, F32)" % (params / 1e6)
        else:
            model_dir = sl.MODELS.get(a.model, a.model)
            what = model_dir
        vocab = sl.tokenizer_vocab(model_dir)
        for r in range(a.rounds):
            for name, binary in binaries.items():
                server = sl.Server(binary, model_dir, a.threads, a.concurrency, a.output_len)
                try:
                    sl.serve_load(load_bin, server.address, 2, a, vocab, 999_999, tmp)  # warm-up
                    results[name].append(wave(server, load_bin, a, vocab, 1000 * r + 7, tmp))
                finally:
                    server.stop()
    print("%s; %d threads; %d streams, prompt %d random ids, %d generated (greedy, EOS ignored); median of %d "
          "rounds, interleaved" % (what, a.threads, a.concurrency, a.input_len, a.output_len, a.rounds))
    print()
    print("| server | mean ITL ms | median ITL ms | P99 ITL ms | median TPOT ms | output tok/s | server threads |")
    print("|---|---|---|---|---|---|---|")
    keys = ["mean_itl_ms", "median_itl_ms", "p99_itl_ms", "median_tpot_ms", "output_throughput", "server_threads"]
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in keys} for name, rs in results.items()}
    for name, m in medians.items():
        print("| %s | %.2f | %.2f | %.2f | %.2f | %.0f | %d |" % (name, *[m[k] for k in keys]))
    b, n = medians["before"], medians["after"]
    print()
    print("after / before: mean ITL %.2f, P99 ITL %.2f, output tok/s %.2f"
          % (n["mean_itl_ms"] / b["mean_itl_ms"], n["p99_itl_ms"] / b["p99_itl_ms"],
             n["output_throughput"] / b["output_throughput"]))


if __name__ == "__main__":
    main()
