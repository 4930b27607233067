#!/usr/bin/python3
"""Served throughput over gRPC: starts mcserve, runs build/bench/serve_load against it at several
concurrencies (each level one wave of N requests with N in flight: N random-id prompts of --input-len
tokens, --output-len greedy tokens each, EOS ignored) and, in the same run, the in-process Engine
baseline build/bench/serving_bench with the same model, threads, lengths and concurrency. Reports the
served output throughput as a ratio to the Engine's (the machine is shared and noisy: median of
--repeats runs of each, interleaved), with serve_load's client-side latencies.

Model: by default the ~10M-parameter gated DeltaNet that bench/serving_bench.py exports ("bench");
"tiny" is the bundled models/mcserve-tiny, "fixture" the test fixture, anything else a model dir.

    /usr/bin/python3 bench/serve_load.py [--build build] [--server build/server/mcserve] [--model bench]
        [--threads 2] [--concurrency 1,8,32,64] [--repeats 3]
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
LINE = re.compile(r"^mcserve listening grpc=(\S+):(\d+) http=(\S+):(\d+)$")
MODELS = {"tiny": os.path.join(ROOT, "models", "mcserve-tiny"),
          "fixture": os.path.join(ROOT, "tests", "data", "models", "gated_deltanet")}


def tokenizer_vocab(model_dir):
    """The tokenizer's vocabulary size (the bench model pads its embedding beyond it; prompt ids must
    be below both, and GetModelInfo reports only the model's)."""
    import sentencepiece
    return sentencepiece.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model")).vocab_size()


class Server:
    """mcserve on a free loopback port with enough slots for the largest concurrency."""

    def __init__(self, binary, model_dir, threads, slots, max_tokens):
        self.cmd = [binary, "--model", model_dir, "--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0",
                    "--threads", str(threads), "--max-slots", str(slots), "--max-batch-tokens", "2048",
                    "--max-tokens-limit", str(max_tokens), "--shutdown-grace-seconds", "1"]
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={k: v for k, v in os.environ.items() if not k.startswith("MCSERVE_")})
        line = self.proc.stdout.readline().decode().rstrip("\n")
        m = LINE.match(line)
        if not m:
            self.proc.kill()
            sys.exit("mcserve did not start: %r (%s)" % (line, " ".join(self.cmd)))
        self.address = "%s:%s" % (m.group(1), m.group(2))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def median_by(results, key):
    results = sorted(results, key=lambda r: r[key])
    return results[len(results) // 2]


def serve_load(binary, address, concurrency, a, vocab, seed, out_dir):
    """One wave of `concurrency` requests; `binary` is serve_load's path, or a command list ending in it."""
    out = os.path.join(out_dir, "serve_load_%d_%d.json" % (concurrency, seed))
    cmd = [binary] if isinstance(binary, str) else list(binary)
    cmd += ["--address", address, "--num-prompts", str(concurrency), "--max-concurrency", str(concurrency),
            "--input-len", str(a.input_len), "--output-len", str(a.output_len), "--vocab-size", str(vocab),
            "--seed", str(seed), "--json", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        result = json.load(f)
    if result["failed"]:
        sys.exit("serve_load: %d requests failed: %s" % (result["failed"], result["errors"]))
    return result


def engine_baseline(binary, model_dir, concurrency, a):
    cmd = [binary, "--model", model_dir, "--threads", str(a.threads), "--concurrency", str(concurrency),
           "--prompt", str(a.input_len), "--generate", str(a.output_len)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(a, model_dir, out_dir):
    levels = [int(c) for c in a.concurrency.split(",")]
    vocab = tokenizer_vocab(model_dir)
    load_bin = os.path.join(a.build, "bench", "serve_load")
    engine_bin = os.path.join(a.build, "bench", "serving_bench")
    has_engine = os.path.exists(engine_bin) and not a.no_baseline
    server = Server(a.server, model_dir, a.threads, max(levels), a.output_len)
    rows = []
    try:
        serve_load(load_bin, server.address, 2, a, vocab, 999_999, out_dir)  # warm-up, not reported
        for c in levels:
            served, engine = [], []
            for r in range(a.repeats):  # interleaved, so both see the same noise
                # A new seed each run: no prompt is ever in the prefix cache.
                served.append(serve_load(load_bin, server.address, c, a, vocab, 1000 * c + r, out_dir))
                if has_engine:
                    engine.append(engine_baseline(engine_bin, model_dir, c, a))
            rows.append((c, median_by(served, "output_throughput"),
                         median_by(engine, "tokens_per_s") if engine else None))
    finally:
        server.stop()
    return rows, server.cmd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--server", help="the mcserve binary (default BUILD/server/mcserve)")
    ap.add_argument("--model", default="bench", help="bench, tiny, fixture or a model directory")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", default="1,8,32,64")
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-baseline", action="store_true", help="skip the in-process serving_bench")
    a = ap.parse_args()
    a.server = a.server or os.path.join(a.build, "server", "mcserve")
    with tempfile.TemporaryDirectory() as tmp:
        if a.model == "bench":
            from export_fixtures import export_bench_model
            model_dir, params = export_bench_model(os.path.join(tmp, "f32"), "f32")
            what = "gated DeltaNet, %.1fM parameters (bench model, F32)" % (params / 1e6)
        else:
            model_dir = MODELS.get(a.model, a.model)
            what = model_dir
        rows, cmd = measure(a, model_dir, tmp)
    print("%s; %d threads; prompt %d random ids, %d generated (greedy, EOS ignored); one wave of N requests "
          "with N in flight; median of %d" % (what, a.threads, a.input_len, a.output_len, a.repeats))
    print("server: %s" % " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd))
    print()
    print("| concurrency | served output tok/s | in-process Engine tok/s | served / Engine | req/s "
          "| mean TTFT ms | median TPOT ms | mean ITL ms | P99 E2EL ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c, s, e in rows:
        base = "%.0f | %.2f" % (e["tokens_per_s"], s["output_throughput"] / e["tokens_per_s"]) if e else "- | -"
        print("| %d | %.0f | %s | %.2f | %.1f | %.2f | %.2f | %.0f |"
              % (c, s["output_throughput"], base, s["request_throughput"], s["mean_ttft_ms"], s["median_tpot_ms"],
                 s["mean_itl_ms"], s["p99_e2el_ms"]))


if __name__ == "__main__":
    main()
