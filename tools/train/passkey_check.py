#!/usr/bin/python3
"""Quick passkey retrieval check with the training-time model (pilot runs; the reported numbers
come from the C++ harness, mcserve-eval passkey --template trained).

Prompts as mcserve-eval's trained template: [BOS] + filler[:a] + "The pass key is K. Remember it."
+ filler[a:] + "What is the pass key? The pass key is", exactly `length` ids, filler consecutive
held-out tokens from a random word start, the needle at the first word start at or after depth·F.
Greedy decoding of 7 tokens; exact = the answer (leading spaces stripped) starts with K's digits
and no sixth digit follows; digit accuracy = matching digits among the first 5 characters.

    /usr/bin/python3 tools/train/passkey_check.py --model-dir models/kjv-gdn-passkey --threads 1
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gdn_model  # noqa: E402
import init_from  # noqa: E402
import spm_tokenizer  # noqa: E402
import windows as win  # noqa: E402

NEEDLE = "The pass key is {key}. Remember it."
QUESTION = "What is the pass key? The pass key is"
ANSWER_TOKENS = 7


def load_model(model_dir):
    """Training-time model with model_dir's config and weights (strict, init_from.load_weights)."""
    model = gdn_model.GatedDeltaNetLM(gdn_model.load_config(os.path.join(model_dir, "config.json")), chunk_size=32)
    init_from.load_weights(model, model_dir)
    return model.eval()


def build_prompt(sp, haystack, start, length, depth, key):
    """(ids, needle position): the trained-template prompt of `length` ids, filler from haystack[start:]."""
    needle = list(sp.encode(NEEDLE.format(key=key)))
    question = list(sp.encode(QUESTION))
    n_filler = length - 1 - len(needle) - len(question)
    if n_filler < 0:
        raise ValueError("length %d shorter than the template" % length)
    filler = haystack[start:start + n_filler].tolist()
    split = int(round(depth * n_filler))
    while split < n_filler and not sp.id_to_piece(filler[split]).startswith("\u2581"):
        split += 1
    ids = [win.BOS_ID] + filler[:split] + needle + filler[split:] + question
    return ids, 1 + split


@torch.no_grad()
def greedy(model, prompts, n):
    """n greedy tokens after each of the equal-length prompts (full forward per step)."""
    ids = torch.tensor(prompts, dtype=torch.long)
    for _ in range(n):
        nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
    return ids[:, len(prompts[0]):].tolist()


def score(answer, key):
    """(exact, digits right among 5) as mcserve-eval's PasskeyAnswerIsCorrect counts exact."""
    a, k = answer.lstrip(), str(key)
    exact = a.startswith(k) and not (len(a) > len(k) and a[len(k)].isdigit())
    return exact, sum(x == y for x, y in zip(a[:len(k)], k))


def check(model, sp, haystack, length, depth, trials, seed):
    """Runs `trials` prompts at one length and depth (depth None = uniform random per trial).
    Returns dict(exact, digit_acc, answers)."""
    g = torch.Generator().manual_seed(seed)
    word = torch.tensor([sp.id_to_piece(i).startswith("\u2581") for i in range(sp.get_piece_size())])
    starts = torch.nonzero(word[haystack[:haystack.numel() - length]]).flatten()
    prompts, keys = [], []
    for _ in range(trials):
        key = int(torch.randint(10000, 100000, (1,), generator=g))
        start = int(starts[torch.randint(0, starts.numel(), (1,), generator=g)])
        d = float(torch.rand(1, generator=g)) if depth is None else depth
        prompts.append(build_prompt(sp, haystack, start, length, d, key)[0])
        keys.append(key)
    answers = [sp.decode(a) for a in greedy(model, prompts, ANSWER_TOKENS)]
    scores = [score(a, k) for a, k in zip(answers, keys)]
    return {"exact": sum(e for e, _ in scores) / trials, "digit_acc": sum(d for _, d in scores) / (5 * trials),
            "answers": ["%d:%s" % (k, a.strip()) for k, a in zip(keys, answers)]}


def report(model, sp, haystack, lengths, depths, trials, seed, log=print):
    """check() over lengths × depths, one log line each; returns {(length, depth): result}."""
    out = {}
    for length in lengths:
        for depth in depths:
            r = check(model, sp, haystack, length, depth, trials, seed)
            out[(length, depth)] = r
            log("passkey length %d depth %s: exact %.2f digits %.2f  e.g. %s"
                % (length, "rand" if depth is None else depth, r["exact"], r["digit_acc"], " ".join(r["answers"][:4])))
    return out


def main():
    """CLI: the check on a model directory and the held-out text of --work."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--work", default="/tmp/mcserve-train", help="holds kjv_heldout.txt (prepare_data.py)")
    ap.add_argument("--lengths", default="64,128,256")
    ap.add_argument("--depths", default="0,0.5,rand", help="comma list of depths in [0, 1] or 'rand'")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sp = spm_tokenizer.load(os.path.join(args.model_dir, "tokenizer.model"))
    with open(os.path.join(args.work, "kjv_heldout.txt"), encoding="utf-8") as f:
        haystack = torch.tensor(spm_tokenizer.encode_text(sp, f.read()), dtype=torch.long)
    depths = [None if d == "rand" else float(d) for d in args.depths.split(",")]
    report(load_model(args.model_dir), sp, haystack, [int(x) for x in args.lengths.split(",")], depths,
           args.trials, args.seed)


if __name__ == "__main__":
    main()
