#!/usr/bin/python3
"""Perplexity against evaluation length for the base model and every post-training Memory Caching
variant (variants.py), through mcserve-eval. Every length scores the same first --tokens tokens of
the text (as --tokens/length fresh-state windows), so the columns compare like with like.

    /usr/bin/python3 tools/quality/ppl_sweep.py --text /tmp/mcq/kjv_heldout.txt --out docs/quality/perplexity.json
"""

import argparse

import eval_runner
import sweep
import variants as V


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", required=True, help="held-out text file")
    ap.add_argument("--model", default=eval_runner.DEFAULT_MODEL)
    ap.add_argument("--eval", default=eval_runner.DEFAULT_EVAL, help="mcserve-eval binary")
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    ap.add_argument("--tokens", type=int, default=65536, help="tokens scored at every length")
    ap.add_argument("--segment", type=int, default=V.TRAINING_CONTEXT, help="MC segment size")
    ap.add_argument("--bucket", type=int, default=256, help="NLL by position, per this many tokens")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="+", help="variant names to run (default: all)")
    ap.add_argument("--out", required=True, help="results JSON")
    sweep.add_compare_flag(ap)
    args = ap.parse_args(argv)
    for n in args.lengths:
        if n < 2 or args.tokens % n:
            ap.error("--tokens %d must be a multiple of every length (%d)" % (args.tokens, n))
    return args


def measure(args, variant, length):
    """One mcserve-eval perplexity run → a result record."""
    cmd = ["perplexity", "--model", sweep.model_of(args, variant), "--text", args.text, "--context", str(length),
           "--max-windows", str(args.tokens // length), "--bucket", str(min(args.bucket, length)),
           "--threads", str(args.threads), *variant.flags]
    out, seconds = eval_runner.run_eval(args.eval, cmd)
    res = out["results"]
    if res["scored_tokens"] != args.tokens:
        raise RuntimeError("%s at %d scored %d tokens, not %d (text too short?)"
                           % (variant.label, length, res["scored_tokens"], args.tokens))
    return {"variant": variant.name, "init_mode": variant.init_mode, "label": variant.label, "length": length,
            "perplexity": res["perplexity"], "mean_nll": res["mean_nll"], "scored_tokens": res["scored_tokens"],
            "windows": res["windows"], "buckets": res["buckets"], "seconds": round(seconds, 2),
            "flags": variant.flags, "model": eval_runner.repo_relative(sweep.model_of(args, variant))}


def main(argv=None):
    args = parse_args(argv)
    records = sweep.run(args, measure, lambda r: "ppl %8.3f" % r["perplexity"])
    sweep.write_report(args.out, "ppl_sweep.py", argv, args,
                       {"text": eval_runner.repo_relative(args.text), "tokens": args.tokens}, records)
    print(sweep.markdown_table(records, "perplexity", "%.2f"))


if __name__ == "__main__":
    main()
