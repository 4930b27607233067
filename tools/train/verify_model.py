#!/usr/bin/python3
"""Checks an exported model directory against the training run that wrote it:

1. mcserve_ref's CausalLM loads it strictly and its held-out perplexity (the same tiled windows,
   tokenised from the work dir's kjv_heldout.txt with the directory's own tokenizer.model) equals
   the training-time number in training.json (relative tolerance --rtol);
2. the engine's `mcserve-run` loads it and generates from a few prompts, greedy and sampled
   (printed, for a human to judge the English).

    /usr/bin/python3 tools/train/verify_model.py --model-dir models/kjv-gdn --work /tmp/mcserve-train
"""

import argparse
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_model  # noqa: E402
import spm_tokenizer  # noqa: E402
import windows as win  # noqa: E402

PROMPTS = ("In the beginning God", "And Jesus said unto them,", "The LORD is my shepherd;")


def reference_perplexity(model_dir, heldout_text_path, context, n_windows):
    """(perplexity, mean NLL, tokens) of mcserve_ref's CausalLM (float32) on the first n_windows
    tiled held-out windows."""
    ref = export_model.load_reference(model_dir, torch.float32)
    sp = spm_tokenizer.load(os.path.join(model_dir, "tokenizer.model"))
    with open(heldout_text_path, encoding="utf-8") as f:
        ids = torch.tensor(spm_tokenizer.encode_text(sp, f.read()), dtype=torch.long)
    windows = win.tiled_windows(ids, context, n_windows)
    return win.perplexity(lambda inputs: torch.stack([ref.forward(r.tolist()) for r in inputs]), windows)


def run_engine(binary, model_dir, prompt, temperature, seed, max_tokens):
    """Text printed by mcserve-run (raises naming the command when it fails)."""
    cmd = [binary, "--model", model_dir, "--prompt", prompt, "--max-tokens", str(max_tokens),
           "--temperature", str(temperature), "--seed", str(seed), "--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(cmd), out.returncode, out.stderr))
    return out.stdout


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--work", default="/tmp/mcserve-train", help="the training run's --work directory")
    ap.add_argument("--mcserve-run", default="/work/main/build/tools/mcserve-run")
    ap.add_argument("--rtol", type=float, default=1e-4, help="perplexity tolerance (F32 export)")
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    with open(os.path.join(args.model_dir, "training.json")) as f:
        report = json.load(f)
    n_windows = report["heldout_tokens"] // report["context"]
    ppl, nll, n = reference_perplexity(args.model_dir, os.path.join(args.work, "kjv_heldout.txt"),
                                       report["context"], n_windows)
    rel = abs(ppl - report["heldout_perplexity"]) / report["heldout_perplexity"]
    print("reference held-out perplexity %.4f over %d tokens; training-time %.4f; relative difference %.2e"
          % (ppl, n, report["heldout_perplexity"], rel), flush=True)
    ok = rel <= args.rtol and n == report["heldout_tokens"]
    for prompt in PROMPTS:
        for temperature, seed in ((0, 0), (0.8, 1)):
            text = run_engine(args.mcserve_run, args.model_dir, prompt, temperature, seed, args.max_tokens)
            print("--- mcserve-run temperature %s seed %d: %r\n%s%s" % (temperature, seed, prompt, prompt, text),
                  flush=True)
    print("verification %s" % ("passed" if ok else "FAILED (perplexity mismatch)"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
