#!/usr/bin/python3
"""Passkey accuracy against haystack length for the base model and every post-training Memory
Caching variant (variants.py), through mcserve-eval passkey. Each cell pools --trials trials at
each of --depths (same seeds for every variant, so every variant sees the same prompts).

    /usr/bin/python3 tools/quality/passkey_sweep.py --model models/kjv-gdn-passkey \\
        --haystack /tmp/mcq/kjv_heldout.txt --out docs/quality/passkey.json
"""

import argparse

import eval_runner
import sweep
import variants as V


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
    sweep.add_compare_flag(ap)
    return ap.parse_args(argv)


def measure(args, variant, length):
    """Every depth's trials at one length → a result record (accuracy over all of them)."""
    trials = []
    seconds = 0.0
    for i, depth in enumerate(args.depths):
        cmd = ["passkey", "--model", sweep.model_of(args, variant), "--haystack", args.haystack,
               "--length", str(length), "--depth", str(depth), "--trials", str(args.trials), "--seed", str(args.seed + i),
               "--template", args.template, "--threads", str(args.threads), *variant.flags]
        out, s = eval_runner.run_eval(args.eval, cmd)
        seconds += s
        trials += [dict(t, asked_depth=depth) for t in out["results"]["results"]]
    correct = sum(t["correct"] for t in trials)
    return {"variant": variant.name, "init_mode": variant.init_mode, "label": variant.label, "length": length,
            "accuracy": correct / len(trials), "correct": correct, "trials": len(trials),
            "answers": [{k: t[k] for k in ("asked_depth", "key", "generated", "correct")} for t in trials],
            "seconds": round(seconds, 2), "flags": variant.flags,
            "model": eval_runner.repo_relative(sweep.model_of(args, variant))}


def main(argv=None):
    args = parse_args(argv)
    records = sweep.run(args, measure, lambda r: "%d/%d" % (r["correct"], r["trials"]))
    sweep.write_report(args.out, "passkey_sweep.py", argv, args,
                       {"haystack": eval_runner.repo_relative(args.haystack), "depths": args.depths,
                        "trials_per_depth": args.trials, "template": args.template}, records)
    print(sweep.markdown_table(records, "accuracy", "%.2f"))
    print(sweep.depth_table(records))


if __name__ == "__main__":
    main()
