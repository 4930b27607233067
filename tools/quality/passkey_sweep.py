#!/usr/bin/python3
"""Passkey accuracy against haystack length for the base model and every post-training Memory
Caching variant (variants.py), through mcserve-eval passkey. Each cell pools --trials trials at
each of --depths (same seeds for every variant, so every variant sees the same prompts).

    /usr/bin/python3 tools/quality/passkey_sweep.py --model models/kjv-gdn-passkey \\
        --haystack /tmp/mcq/kjv_heldout.txt --out docs/quality/passkey.json
"""

import argparse
import json
import os
import sys

import eval_runner
import variants as V
from ppl_sweep import markdown_table


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--haystack", required=True, help="held-out text the filler comes from")
    ap.add_argument("--model", default=eval_runner.DEFAULT_MODEL)
    ap.add_argument("--eval", default=eval_runner.DEFAULT_EVAL, help="mcserve-eval binary")
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192])
    ap.add_argument("--depths", type=float, nargs="+", default=[0.0, 0.5])
    ap.add_argument("--trials", type=int, default=10, help="trials per depth")
    ap.add_argument("--template", default="trained", help="mcserve-eval --template")
    ap.add_argument("--segment", type=int, default=V.TRAINING_CONTEXT, help="MC segment size")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="+", help="variant names to run (default: all)")
    ap.add_argument("--out", required=True, help="results JSON")
    return ap.parse_args(argv)


def measure(args, variant, length):
    """Every depth's trials at one length → a result record (accuracy over all of them)."""
    trials = []
    seconds = 0.0
    for i, depth in enumerate(args.depths):
        cmd = ["passkey", "--model", args.model, "--haystack", args.haystack, "--length", str(length),
               "--depth", str(depth), "--trials", str(args.trials), "--seed", str(args.seed + i),
               "--template", args.template, "--threads", str(args.threads), *variant.flags]
        out, s = eval_runner.run_eval(args.eval, cmd)
        seconds += s
        trials += [dict(t, asked_depth=depth) for t in out["results"]["results"]]
    correct = sum(t["correct"] for t in trials)
    return {"variant": variant.name, "init_mode": variant.init_mode, "label": variant.label, "length": length,
            "accuracy": correct / len(trials), "correct": correct, "trials": len(trials),
            "answers": [{k: t[k] for k in ("asked_depth", "key", "generated", "correct")} for t in trials],
            "seconds": round(seconds, 2), "flags": variant.flags}


def main(argv=None):
    args = parse_args(argv)
    records = []
    for variant in V.variants(args.segment, args.only):
        for length in args.lengths:
            rec = measure(args, variant, length)
            print("%-28s %6d  %d/%d  (%.1fs)" % (variant.label, length, rec["correct"], rec["trials"], rec["seconds"]),
                  file=sys.stderr, flush=True)
            records.append(rec)
    report = {"command": "/usr/bin/python3 tools/quality/passkey_sweep.py " + " ".join(argv or sys.argv[1:]),
              "model": eval_runner.repo_relative(args.model), "model_name": os.path.basename(args.model.rstrip("/")),
              "haystack": eval_runner.repo_relative(args.haystack), "segment": args.segment,
              "depths": args.depths, "trials_per_depth": args.trials, "template": args.template,
              "threads": args.threads, "results": records}
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(markdown_table(records, value="accuracy", fmt="%.2f"))


if __name__ == "__main__":
    main()
