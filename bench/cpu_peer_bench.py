#!/usr/bin/python3
"""CPU decode against its peer, rwkv.cpp, and against the machine's ceilings, in one run.

Exports our ~10M-parameter gated DeltaNet bench model (F32, BF16) and a random RWKV-4 of the same
width, vocabulary and closest parameter count (converted by rwkv.cpp's own converter to FP32, FP16);
builds rwkv.cpp from --peer-src (out of tree) and bench/peer/rwkv_decode_bench.c against it; then,
for --rounds rounds, runs interleaved (ours, peer, ours, peer, ...):
  * batch-1 greedy decode with 1 and 2 threads, F32 vs FP32 and BF16 vs FP16;
  * our batch 8 and 32 (aggregate tok/s) against the peer's batch-1 rate (it decodes one sequence
    per context);
  * the ceilings: the read rate over a buffer the size of the weights one step reads
    (build/bench/cache_read_bench) and OpenBLAS sgemm at 1024^3 and at the model's M=32 shapes
    (build/bench/sgemm_peak_bench);
  * our batch-1 step's projections alone, nothing else (build/bench/gemv_bench), against which the
    decode rate shows what a step's other ops and hand-offs cost.
Ratios are taken within a round, then the median over rounds. Prints markdown tables; --json FILE
writes every measurement. Needs build/bench/{decode_bench,cache_read_bench,sgemm_peak_bench,gemv_bench}.

    /usr/bin/python3 bench/cpu_peer_bench.py --peer-src DIR [--peer-build DIR] [--rounds 5] [--json out.json]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, os.path.join(ROOT, "bench", "peer"))
from export_fixtures import export_bench_model  # noqa: E402
import ceilings  # noqa: E402
import model_weights  # noqa: E402
import peer_build  # noqa: E402
import report  # noqa: E402
import rwkv4_model  # noqa: E402

THREADS = (1, 2)
PAIRS = (("F32", "FP32"), ("BF16", "FP16"))  # (our weights, the peer's weights) compared at batch 1
BATCHES = (8, 32)


def run_json(cmd):
    """Runs a benchmark binary; its last stdout line, parsed as JSON."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900).stdout
    return json.loads(out.strip().splitlines()[-1])


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def machine_info():
    """CPU model, core count and last-level cache, for the record."""
    info = {"cpus": os.cpu_count(), "machine": platform.machine()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in lscpu.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Model name", "L3 cache"):
                info[key.strip()] = value.strip()
    except FileNotFoundError:
        pass
    return info


class Bench:
    """Holds the binaries and models; one `round()` measures everything once, interleaved."""

    def __init__(self, a, ours, peer_driver, peer_models, stats, layers):
        self.a, self.ours, self.peer_driver, self.peer_models, self.stats = a, ours, peer_driver, peer_models, stats
        self.layers = layers  # our model's, for gemv_bench
        self.decode_bench = os.path.join(a.build, "bench", "decode_bench")

    def ours_rate(self, dtype, batch, threads):
        steps = self.a.steps if batch == 1 else self.a.batched_steps
        return run_json([self.decode_bench, "--model", self.ours[dtype], "--batch", str(batch), "--steps", str(steps),
                         "--threads", str(threads)])["tokens_per_s"]

    def peer_rate(self, dtype, threads):
        if not self.peer_driver:
            return None
        return run_json([self.peer_driver, "--model", self.peer_models[dtype], "--threads", str(threads), "--steps",
                         str(self.a.steps)])["tokens_per_s"]

    def round(self):
        """One measurement of every number, ours and the peer's alternating."""
        r = {"ours": {}, "peer": {}}
        for t in THREADS:
            for ours, peer in PAIRS:
                r["ours"]["%s/b1/t%d" % (ours, t)] = self.ours_rate(ours, 1, t)
                r["peer"]["%s/t%d" % (peer, t)] = self.peer_rate(peer, t)
        t = max(THREADS)
        for b in BATCHES:  # the peer's batch-1 rate again next to each batched run of ours
            for ours, peer in PAIRS:
                r["ours"]["%s/b%d/t%d" % (ours, b, t)] = self.ours_rate(ours, b, t)
                r["peer"]["%s/t%d/next_to_b%d" % (peer, t, b)] = self.peer_rate(peer, t)
        sizes = [self.stats[d]["bytes_per_token"] for d, _ in PAIRS]
        r["read_gb_s"] = {"%d/t%d" % k: v for k, v in ceilings.read_rates(
            os.path.join(self.a.build, "bench", "cache_read_bench"), sizes, THREADS).items()}
        shapes = ceilings.sgemm_shapes(self.stats["F32"]["matmul_shapes"], BATCHES)
        sgemm = os.path.join(self.a.build, "bench", "sgemm_peak_bench")
        r["sgemm_gflop_s"] = ceilings.sgemm_rates(sgemm, shapes, THREADS)
        r["gemv_tok_s"] = ceilings.gemv_rates(os.path.join(self.a.build, "bench", "gemv_bench"), self.layers, THREADS)
        return r


def _read_ceiling(r, size, threads, bytes_per_token):
    """Tokens/s if a step cost only the read of `bytes_per_token` at the rate measured over `size` bytes."""
    return r["read_gb_s"]["%d/t%d" % (size, threads)] * 1e9 / bytes_per_token


def _ratio(num, den):
    return num / den if num and den else None


def batch1_rows(rounds, stats, peer_stats):
    """Batch 1: ours, the peer's, their ratio (and ours against the peer's best thread count), and each as a
    fraction of the read ceiling."""
    rows = []
    for t in THREADS:
        for ours, peer in PAIRS:
            okey, pkey, size = "%s/b1/t%d" % (ours, t), "%s/t%d" % (peer, t), stats[ours]["bytes_per_token"]
            rows.append({
                "threads": t, "ours": ours, "peer": peer,
                "ours_tok_s": median(r["ours"][okey] for r in rounds),
                "peer_tok_s": median(r["peer"][pkey] for r in rounds),
                "ratio": median(_ratio(r["ours"][okey], r["peer"][pkey]) for r in rounds),
                # against the peer's faster thread count of the round (its 2 threads can run slower than 1)
                "ratio_to_best": median(_ratio(r["ours"][okey], _peer_best(r, peer, pkey)) for r in rounds),
                "ceiling_tok_s": median(_read_ceiling(r, size, t, size) for r in rounds),
                "ours_of_ceiling": median(r["ours"][okey] / _read_ceiling(r, size, t, size) for r in rounds),
                # the step's projections alone: what the rest of a step (its other ops, the hand-offs) costs
                "gemv_tok_s": median(r["gemv_tok_s"].get((ours, t)) for r in rounds),
                "ours_of_gemv": median(_ratio(r["ours"][okey], r["gemv_tok_s"].get((ours, t))) for r in rounds),
                # the peer's: the read rate at our same-dtype size, over its own bytes per step
                "peer_of_ceiling": median(_ratio(r["peer"][pkey], peer_stats and _read_ceiling(
                    r, size, t, peer_stats[peer])) for r in rounds)})
    return rows


def _peer_best(r, peer, pkey):
    """The peer's faster batch-1 rate of the round, 1 or 2 threads (2 threads can lose on a loaded machine)."""
    rates = [r["peer"][pkey]] + [r["peer"]["%s/t%d" % (peer, u)] for u in THREADS]
    return max(rates) if rates[0] else None


def batched_rows(rounds, stats):
    """Batch 8 and 32: our aggregate against the peer's batch-1 rate, and our GFLOP/s against sgemm."""
    rows, t = [], max(THREADS)
    shapes = stats["F32"]["matmul_shapes"]
    for b in BATCHES:
        for ours, peer in PAIRS:
            key, pkey = "%s/b%d/t%d" % (ours, b, t), "%s/t%d/next_to_b%d" % (peer, t, b)
            gflops = 2.0 * stats[ours]["matmul_params"] / 1e9  # per token
            peak = ceilings.PEAK_SHAPE + (t,)
            rows.append({
                "batch": b, "threads": t, "ours": ours,
                "ours_tok_s": median(r["ours"][key] for r in rounds),
                "peer_tok_s": median(r["peer"][pkey] for r in rounds),
                "ratio": median(_ratio(r["ours"][key], r["peer"][pkey]) for r in rounds),
                "peer_best_tok_s": median(_peer_best(r, peer, pkey) for r in rounds),
                "ratio_to_best": median(_ratio(r["ours"][key], _peer_best(r, peer, pkey)) for r in rounds),
                "gflop_s": median(r["ours"][key] * gflops for r in rounds),
                "of_peak": median(r["ours"][key] * gflops / r["sgemm_gflop_s"][peak] for r in rounds),
                "of_shape_ceiling": median(r["ours"][key] * gflops / ceilings.model_shape_gflops(
                    r["sgemm_gflop_s"], shapes, t, b) for r in rounds)})
    return rows


def ceiling_rows(rounds, stats):
    """The ceilings themselves, medians over rounds, per thread count."""
    shapes = stats["F32"]["matmul_shapes"]
    rows = []
    for d, _ in PAIRS:
        size = stats[d]["bytes_per_token"]
        rows.append({"name": "read rate at the %s weights one step reads (%.1f MB), GB/s" % (d, size / 1e6),
                     "values": {t: "%.1f" % median(r["read_gb_s"]["%d/t%d" % (size, t)] for r in rounds)
                                for t in THREADS}})
    for s in ceilings.sgemm_shapes(shapes, BATCHES):
        rows.append({"name": "sgemm %d×%d × %d×%d, GFLOP/s" % (s[0], s[1], s[1], s[2]),
                     "values": {t: "%.1f" % median(r["sgemm_gflop_s"][s + (t,)] for r in rounds) for t in THREADS}})
    for b in BATCHES:
        rows.append({"name": "sgemm at the model's M=%d projections together, GFLOP/s" % b,
                     "values": {t: "%.1f" % median(ceilings.model_shape_gflops(r["sgemm_gflop_s"], shapes, t, b)
                                                   for r in rounds) for t in THREADS}})
    return rows


def summarize(rounds, stats, peer_stats, header):
    """Medians over rounds of rates and of within-round ratios and ceiling fractions."""
    return {"title": header["title"], "batch1": batch1_rows(rounds, stats, peer_stats),
            "batched": batched_rows(rounds, stats), "ceilings": ceiling_rows(rounds, stats), "notes": header["notes"]}


N_EMBD, VOCAB = 256, 4096  # the bench model's width and vocabulary, which the peer's model copies


def prepare_peer(a, tmp, n_layer):
    """Builds rwkv.cpp and the driver, writes its models; None without --peer-src."""
    if not a.peer_src:
        print("no --peer-src: rwkv.cpp is skipped (clone RWKV/rwkv.cpp --recursive and pass its path)")
        return None
    src = os.path.abspath(a.peer_src)
    library = peer_build.build_peer_library(src, a.peer_build or os.path.join(tmp, "peer-build"))
    return {"commits": peer_build.peer_commits(src),
            "driver": peer_build.compile_decode_driver(src, library, os.path.join(tmp, "rwkv_decode_bench")),
            "models": rwkv4_model.write_peer_models(src, os.path.join(tmp, "rwkv4"), N_EMBD, n_layer, VOCAB),
            "bytes_per_token": {d: rwkv4_model.rwkv4_bytes_read_per_token(N_EMBD, n_layer, VOCAB, d)
                                for d in ("FP32", "FP16")}}


def describe(a, stats, our_layers, n_layer, peer, machine, loads):
    """The title line and the notes under the tables."""
    peer_params = rwkv4_model.rwkv4_param_count(N_EMBD, n_layer, VOCAB)
    title = ("mcserve gated DeltaNet (%.2fM parameters, %d layers) vs rwkv.cpp RWKV-4 (%.2fM parameters, %d layers), "
             "hidden %d, vocab %d; %s, %d CPUs, L3 %s; median of %d interleaved rounds; load average %.1f before, "
             "%.1f after" % (stats["F32"]["params"] / 1e6, our_layers, peer_params / 1e6, n_layer, N_EMBD, VOCAB,
                             machine.get("Model name", "?"), machine["cpus"], machine.get("L3 cache", "?"), a.rounds,
                             loads[0][0], loads[1][0]))
    notes = ["rwkv.cpp %s, ggml %s." % (peer["commits"]["rwkv.cpp"], peer["commits"]["ggml"]) if peer
             else "rwkv.cpp: skipped (no --peer-src).",
             "Batch-1 steps: %d per run; batch 8/32: %d steps per run. rwkv.cpp decodes one sequence per context, so "
             "the batched rows compare against its batch-1 rate with the same threads, and against its best batch-1 "
             "rate in the round with 1 or 2 threads (the batch-1 rows' \"best\" column too)."
             % (a.steps, a.batched_steps),
             "Read ceiling = read rate over a buffer of the weights one step reads (all but the embedding table) / "
             "those bytes; rwkv.cpp's fraction uses the rate at our same-dtype size (its RWKV-4 reads %s per step)."
             % (peer and ", ".join("%s %.1f MB" % (k, v / 1e6) for k, v in peer["bytes_per_token"].items())),
             "GFLOP/s = 2 x %d matmul parameters x tok/s (BF16 rows too; the sgemm ceilings are F32)."
             % stats["F32"]["matmul_params"],
             "GEMVs alone = gemv_bench: a batch-1 step's projections (every layer's, and the head) through the same "
             "kernels and thread pool, and nothing else; mcserve / GEMVs alone is the share of a step they take."]
    return {"title": title, "notes": notes}


def write_json(path, a, machine, loads, stats, n_layer, peer, rounds, summary):
    """Every measurement of every round, the models, commits and machine, and the summary."""
    models = {"mcserve": {d: {k: v for k, v in s.items() if k != "matmul_shapes"} for d, s in stats.items()},
              "rwkv4": {"n_embd": N_EMBD, "n_layer": n_layer, "vocab": VOCAB,
                        "params": rwkv4_model.rwkv4_param_count(N_EMBD, n_layer, VOCAB),
                        "bytes_per_token": peer and peer["bytes_per_token"]}}
    flat_rounds = [{k: ({str(kk): vv for kk, vv in v.items()} if isinstance(v, dict) else v) for k, v in r.items()}
                   for r in rounds]
    with open(path, "w") as f:
        json.dump({"machine": machine, "load_average": loads, "peer_commits": peer and peer["commits"],
                   "mcserve_commit": peer_build.git_commit(ROOT), "args": vars(a), "models": models,
                   "rounds": flat_rounds, "summary": summary}, f, indent=1, default=str)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="our build dir (default: build)")
    ap.add_argument("--peer-src", help="rwkv.cpp checkout with its ggml submodule; without it the peer is skipped")
    ap.add_argument("--peer-build", help="build dir for rwkv.cpp, reused across runs (default: a temp dir)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=256, help="timed batch-1 decode steps per run")
    ap.add_argument("--batched-steps", type=int, default=64, help="timed steps per run at batch 8 and 32")
    ap.add_argument("--json", help="write every measurement and the summary here")
    a = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cpu_peer_bench.") as tmp:
        ours = {d: export_bench_model(os.path.join(tmp, d.lower()), d.lower())[0] for d, _ in PAIRS}
        stats = {d: model_weights.decode_weight_stats(ours[d]) for d in ours}
        with open(os.path.join(ours["F32"], "config.json")) as f:
            our_layers = json.load(f)["num_hidden_layers"]
        n_layer = rwkv4_model.closest_layer_count(stats["F32"]["params"], N_EMBD, VOCAB)
        peer = prepare_peer(a, tmp, n_layer)
        print("mcserve gated DeltaNet: %d parameters; rwkv.cpp RWKV-4 n_embd %d, vocab %d, %d layers: %d parameters"
              % (stats["F32"]["params"], N_EMBD, VOCAB, n_layer, rwkv4_model.rwkv4_param_count(N_EMBD, n_layer, VOCAB)),
              flush=True)
        bench = Bench(a, ours, peer and peer["driver"], peer and peer["models"], stats, our_layers)
        rounds = []
        for i in range(a.rounds):
            rounds.append(bench.round())
            print("round %d/%d done" % (i + 1, a.rounds), flush=True)
    loads = [load_before, os.getloadavg()]
    machine = machine_info()
    header = describe(a, stats, our_layers, n_layer, peer, machine, loads)
    summary = summarize(rounds, stats, peer and peer["bytes_per_token"], header)
    print()
    print(report.markdown(summary))
    if a.json:
        write_json(a.json, a, machine, loads, stats, n_layer, peer, rounds, summary)


if __name__ == "__main__":
    main()
