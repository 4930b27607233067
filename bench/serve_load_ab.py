#!/usr/bin/python3
"""Served throughput, A against B: two mcserve builds under the same load generator (--server-a/-b),
or two load generators against the same server (--client-a/-b). Each round runs one serve_load wave
(N requests with N in flight) on each side, the order swapped every round, so both see the machine's
same noise; reports the medians of served output tok/s, mean TTFT and P99 ITL, the load generator's
CPUs (task-clock / wave, with `perf stat` when it is installed) and context switches, and B / A as
the median and quartiles of the per-round ratios. The servers start as bench/serve_load.py starts
them (no MCSERVE_* variable); both sides' servers stay up for the whole run, idle in turn.

    /usr/bin/python3 bench/serve_load_ab.py --server-a OLD/mcserve --server-b NEW/mcserve \\
        [--model bench|tiny|fixture|DIR] [--concurrency 32] [--input-len 64] [--output-len 64] [--rounds 9]
    /usr/bin/python3 bench/serve_load_ab.py --client-a OLD/serve_load --client-b NEW/serve_load [...]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_load as sl  # noqa: E402  (Server, serve_load, tokenizer_vocab, MODELS)


def wave(client, server, a, vocab, seed, out_dir):
    """One wave: serve_load's result, with the client's CPUs and context switches when perf is here."""
    if shutil.which("perf") is None:
        return sl.serve_load(client, server.address, a.concurrency, a, vocab, seed, out_dir), None, None
    stat = os.path.join(out_dir, "perf_%d.txt" % seed)
    perf = ["perf", "stat", "-x,", "-o", stat, "-e", "task-clock,context-switches", "--"]
    result = sl.serve_load(perf + [client], server.address, a.concurrency, a, vocab, seed, out_dir)
    counts = {}
    with open(stat) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) > 3 and fields[0].replace(".", "", 1).isdigit():
                counts[fields[2]] = float(fields[0])
    cpus = counts.get("task-clock", 0.0) / 1000.0 / result["duration"] if "task-clock" in counts else None
    return result, cpus, counts.get("context-switches")


def summary(name, runs):
    row = [statistics.median(r[0]["output_throughput"] for r in runs),
           statistics.median(r[0]["mean_ttft_ms"] for r in runs), statistics.median(r[0]["p99_itl_ms"] for r in runs)]
    cpus = [r[1] for r in runs if r[1] is not None]
    switches = [r[2] for r in runs if r[2] is not None]
    extra = ("%.3f | %.0f" % (statistics.median(cpus), statistics.median(switches))) if cpus and switches else "- | -"
    return "| %s | %.0f | %.1f | %.2f | %s |" % (name, row[0], row[1], row[2], extra)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server-a"), ap.add_argument("--server-b")
    ap.add_argument("--client-a"), ap.add_argument("--client-b")
    ap.add_argument("--build", default=os.path.join(sl.ROOT, "build"), help="where the default binaries are")
    ap.add_argument("--model", default="bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    default_server = os.path.join(a.build, "server", "mcserve")
    default_client = os.path.join(a.build, "bench", "serve_load")
    servers = {"A": a.server_a or default_server, "B": a.server_b or a.server_a or default_server}
    clients = {"A": a.client_a or default_client, "B": a.client_b or a.client_a or default_client}
    if servers["A"] == servers["B"] and clients["A"] == clients["B"]:
        sys.exit("give --server-a/--server-b or --client-a/--client-b: A and B are the same")
    with tempfile.TemporaryDirectory() as tmp:
        if a.model == "bench":
            from export_fixtures import export_bench_model
            model_dir, _ = export_bench_model(os.path.join(tmp, "f32"), "f32")
        else:
            model_dir = sl.MODELS.get(a.model, a.model)
        vocab = sl.tokenizer_vocab(model_dir)
        up = {}
        try:
            for side in ("A", "B"):
                if servers[side] not in up:
                    up[servers[side]] = sl.Server(servers[side], model_dir, a.threads, max(a.concurrency, 2), a.output_len)
            runs = {"A": [], "B": []}
            for side in ("A", "B"):  # warm-up, not reported
                sl.serve_load(clients[side], up[servers[side]].address, 2, a, vocab, 999_999, tmp)
            for r in range(a.rounds):
                for side in (("A", "B") if r % 2 == 0 else ("B", "A")):
                    runs[side].append(wave(clients[side], up[servers[side]], a, vocab, 1000 * r + (side == "B"), tmp))
        finally:
            for server in up.values():
                server.stop()
    ratios = [b[0]["output_throughput"] / x[0]["output_throughput"] for x, b in zip(runs["A"], runs["B"])]
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print("A: server %s, client %s\nB: server %s, client %s" % (servers["A"], clients["A"], servers["B"], clients["B"]))
    print("%d streams, prompt %d random ids, %d generated; %d rounds, order swapped each round" %
          (a.concurrency, a.input_len, a.output_len, a.rounds))
    print()
    print("| side | served tok/s | mean TTFT ms | P99 ITL ms | client CPUs | client context switches |")
    print("|---|---|---|---|---|---|")
    print(summary("A", runs["A"]))
    print(summary("B", runs["B"]))
    print()
    print("B / A served tok/s: median %.3f, quartiles %.3f-%.3f" % (statistics.median(ratios), q[0], q[2]))


if __name__ == "__main__":
    main()
