#!/usr/bin/python3
"""Trains mcserve's default model: a small fla gated DeltaNet on the King James Bible.

    /usr/bin/python3 tools/train/train.py --model-dir models/kjv-gdn          # the real run
    /usr/bin/python3 tools/train/train.py --tiny --model-dir /tmp/kjv-tiny    # pipeline check, ~1 min

Stages: data split + tokenizer (prepare_data.py) → training (trainer.py) → final held-out
perplexity → export (export_model.py) → training.json next to the model. Everything is seeded;
the work files (split text, tokenizer corpus) go to --work. See tools/train/README.md.
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import digit_embeddings  # noqa: E402
import export_model  # noqa: E402
import gdn_model  # noqa: E402
import init_from  # noqa: E402
import passkey_check  # noqa: E402
import prepare_data  # noqa: E402
import trainer  # noqa: E402

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

TINY = dict(hidden=64, layers=2, heads=2, head_dim=32, hidden_ratio=2, steps=30, batch=4,
            eval_interval=15, eval_windows=4, final_eval_windows=16, warmup=5)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", default=os.path.join(REPO, "models", "kjv-gdn"), help="export directory")
    ap.add_argument("--work", default="/tmp/mcserve-train", help="directory for split text and tokenizer")
    ap.add_argument("--tiny", action="store_true", help="a tiny fast run to check the pipeline")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--seed", type=int, default=1234)
    # model
    ap.add_argument("--vocab", type=int, default=4096, help="SentencePiece vocabulary size")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--hidden-ratio", type=int, default=2, help="MLP size by fla's rule")
    ap.add_argument("--untied", action="store_true", help="separate lm_head (default: tied embeddings)")
    ap.add_argument("--dtype", choices=("F32", "BF16"), default="F32", help="exported weight dtype")
    ap.add_argument("--chunk", type=int, default=32, help="chunk size of the chunked recurrence")
    # Memory Caching (mc_train.py): constant segments, checkpoint init mode
    ap.add_argument("--mc-aggregation", choices=("none", "residual", "grm", "ssc"), default="none",
                    help="train with Memory Caching on every memory layer (default none: off)")
    ap.add_argument("--mc-segment-size", type=int, default=64, help="MC segment size (a multiple of --chunk)")
    ap.add_argument("--mc-top-k", type=int, default=2, help="SSC: cached segments kept per token and head")
    ap.add_argument("--mc-gate", choices=("u_proj", "q"), default="u_proj",
                    help="gate input: a learned u_proj (attn.mc.u_proj.weight, zero init) or the query")
    ap.add_argument("--mc-pool", choices=("mean", "sum"), default="mean", help="a segment's pooled key")
    # training
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--eval-interval", type=int, default=100)
    ap.add_argument("--eval-windows", type=int, default=32, help="held-out windows for periodic evals")
    ap.add_argument("--final-eval-windows", type=int, default=None, help="default: every held-out window")
    ap.add_argument("--passkey-fraction", type=float, default=0.0,
                    help="probability that a training window is a passkey example (issue 7 item 4)")
    ap.add_argument("--passkey-answer-weight", type=float, default=1.0,
                    help="loss weight of the 5 key-digit targets after the question (others weigh 1)")
    ap.add_argument("--passkey-pack", action="store_true",
                    help="a passkey window holds examples back to back while one more fits (else one example)")
    ap.add_argument("--passkey-curriculum", type=int, default=None, metavar="L",
                    help="longest passkey example L tokens at the first step, growing linearly to --context "
                         "at --passkey-curriculum-end of the steps (default: up to --context throughout)")
    ap.add_argument("--passkey-curriculum-end", type=float, default=0.5, metavar="F",
                    help="fraction of the steps after which passkey examples reach --context (default 0.5)")
    ap.add_argument("--reinit-digit-embeddings", action="store_true",
                    help="redraw the ten digit tokens' embeddings (after --init-from): a KJV-trained model has "
                         "them nearly identical, see digit_embeddings.py")
    ap.add_argument("--passkey-check-trials", type=int, default=0,
                    help="at each eval also run passkey_check on held-out filler (lengths 128, 256; "
                         "depth 0 and random) with this many trials each; 0 = off")
    ap.add_argument("--init-from", default=None, metavar="DIR",
                    help="start from an exported model directory's weights (config and tokenizer must match)")
    args = ap.parse_args(argv)
    if args.tiny:
        for k, v in TINY.items():
            setattr(args, k, v)
    if not 0.0 <= args.passkey_fraction <= 1.0:
        ap.error("--passkey-fraction must be in [0, 1]")
    if args.passkey_answer_weight <= 0:
        ap.error("--passkey-answer-weight must be > 0")
    if args.passkey_curriculum is not None and not 0 < args.passkey_curriculum <= args.context:
        ap.error("--passkey-curriculum must be in (0, --context]")
    if not 0.0 < args.passkey_curriculum_end <= 1.0:
        ap.error("--passkey-curriculum-end must be in (0, 1]")
    if args.mc_aggregation != "none" and args.mc_segment_size % args.chunk != 0:
        ap.error("--mc-segment-size must be a multiple of --chunk")
    return args


def memory_caching(args):
    """The `memory_caching` config object the MC flags describe (None with --mc-aggregation none)."""
    if args.mc_aggregation == "none":
        return None
    mc = dict(aggregation=args.mc_aggregation, segmentation="constant", segment_size=args.mc_segment_size,
              init_mode="checkpoint", gate=args.mc_gate, pool=args.mc_pool)
    if args.mc_aggregation == "ssc":
        mc["top_k"] = args.mc_top_k
    return mc


def build_model(args, vocab, tokenizer_path=None, sp=None):
    """The training model from the model flags: fla-style random init, then --init-from's weights,
    then (--reinit-digit-embeddings, needs the tokenizer `sp`) fresh digit embeddings."""
    cfg = gdn_model.fla_config(vocab_size=vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                               num_heads=args.heads, head_dim=args.head_dim, hidden_ratio=args.hidden_ratio,
                               tie_word_embeddings=not args.untied)
    if memory_caching(args) is not None:
        cfg["memory_caching"] = memory_caching(args)
    model = gdn_model.GatedDeltaNetLM(cfg, chunk_size=args.chunk)
    model.init_weights(torch.Generator().manual_seed(args.seed))
    if args.init_from is not None:
        init_from.init_from(model, args.init_from, tokenizer_path)
    if args.reinit_digit_embeddings:
        ids = digit_embeddings.digit_ids(sp)
        before = digit_embeddings.mean_pairwise_cosine(model, ids)
        digit_embeddings.reinit_digit_embeddings(model, sp, torch.Generator().manual_seed(args.seed + 1))
        print("digit embeddings redrawn: mean pairwise cosine %.3f → %.3f"
              % (before, digit_embeddings.mean_pairwise_cosine(model, ids)), flush=True)
    return model


def passkey_eval(args, corpus):
    """The per-eval passkey check for --passkey-check-trials (None when off)."""
    if args.passkey_check_trials <= 0:
        return None

    def run(model):
        """{"passkey_<length>_<depth>": exact fraction} for lengths 128, 256 and depths 0, random."""
        model.eval()
        try:
            res = passkey_check.report(model, corpus.sp, corpus.heldout_ids, [128, 256], [0.0, None],
                                       args.passkey_check_trials, seed=1, log=lambda m: print(m, flush=True))
        finally:
            model.train()
        return {"passkey_%d_%s" % (n, "rand" if d is None else d): r["exact"] for (n, d), r in res.items()}
    return run


def main(argv=None):
    """Runs every stage; see the module docstring."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.time()
    corpus = prepare_data.prepare(args.work, vocab_size=args.vocab)
    t_data = time.time() - t0
    print("data: %s (%.1fs)" % (json.dumps(corpus.summary), t_data), flush=True)

    model = build_model(args, corpus.sp.get_piece_size(), corpus.tokenizer_path, corpus.sp)
    print("model: %d parameters%s; memory_caching %s" % (
        model.num_parameters(), " from " + args.init_from if args.init_from else "",
        json.dumps(memory_caching(args))), flush=True)
    settings = trainer.TrainSettings(args.steps, args.batch, args.context, args.lr, args.min_lr_ratio,
                                     args.warmup, args.weight_decay, args.clip, args.eval_interval,
                                     args.eval_windows, args.passkey_fraction, args.seed,
                                     passkey_answer_weight=args.passkey_answer_weight,
                                     passkey_pack=args.passkey_pack, passkey_curriculum=args.passkey_curriculum,
                                     passkey_curriculum_end=args.passkey_curriculum_end)
    t1 = time.time()
    history = trainer.train(model, corpus, settings, log=lambda m: print(m, flush=True),
                            extra_eval=passkey_eval(args, corpus))
    t_train = time.time() - t1

    t2 = time.time()
    ppl, nll, n = trainer.heldout_perplexity(model, corpus, args.context, args.final_eval_windows)
    t_eval = time.time() - t2
    print("final held-out perplexity %.4f (mean NLL %.5f nats over %d tokens, %.1fs)" % (ppl, nll, n, t_eval),
          flush=True)
    size = export_model.export(model, corpus.tokenizer_path, args.model_dir, args.dtype)
    total = time.time() - t0
    report = {
        "command": "/usr/bin/python3 tools/train/train.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "heldout_perplexity": ppl, "heldout_nll": nll, "heldout_tokens": n, "context": args.context,
        "data": corpus.summary, "parameters": model.num_parameters(), "safetensors_bytes": size,
        "dtype": args.dtype, "init_from": args.init_from, "settings": vars(settings), "history": history,
        "seconds": {"data_and_tokenizer": t_data, "training": t_train, "final_eval": t_eval, "total": total},
        "threads": args.threads, "torch": torch.__version__, "memory_caching": memory_caching(args),
    }
    with open(os.path.join(args.model_dir, "training.json"), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print("exported %s (model.safetensors %d bytes); total %.0fs" % (args.model_dir, size, total), flush=True)


if __name__ == "__main__":
    main()
