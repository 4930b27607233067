"""Stage 1 of training: the KJV text split into train / held-out files, the SentencePiece
tokenizer trained on the training split, and both splits tokenised. Deterministic: the same
`bible` output gives byte-identical files.

Files written to the work dir:
    kjv_train.txt, kjv_heldout.txt   split text (kjv_data.py: one chapter per line)
    tokenizer_corpus.txt             training verses, one per line (the tokenizer's input)
    tokenizer.model                  the SentencePiece model
    split.json                       held-out books, book / verse / token counts
"""

import json
import os

import torch

import kjv_data
import spm_tokenizer


class Corpus:
    """The tokenised splits (1-D LongTensors, no BOS) and the tokenizer."""

    def __init__(self, sp, tokenizer_path, train_ids, heldout_ids, summary):
        self.sp = sp
        self.tokenizer_path = tokenizer_path
        self.train_ids = train_ids
        self.heldout_ids = heldout_ids
        self.summary = summary


def _write(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def prepare(work_dir, raw_bible=None, held_out=kjv_data.HELD_OUT_BOOKS,
            vocab_size=spm_tokenizer.DEFAULT_VOCAB):
    """Runs stage 1 into work_dir (created if needed) and returns a Corpus. raw_bible: the
    `bible -l0` output to use (default: run the program)."""
    os.makedirs(work_dir, exist_ok=True)
    raw = kjv_data.read_bible_output() if raw_bible is None else raw_bible
    train_books, held_books = kjv_data.split_books(kjv_data.parse_bible(raw), held_out)
    train_text, held_text = kjv_data.split_text(train_books), kjv_data.split_text(held_books)
    _write(os.path.join(work_dir, "kjv_train.txt"), train_text)
    _write(os.path.join(work_dir, "kjv_heldout.txt"), held_text)
    corpus_path = os.path.join(work_dir, "tokenizer_corpus.txt")
    _write(corpus_path, kjv_data.verse_lines(train_books))
    tok_path = spm_tokenizer.train(corpus_path, os.path.join(work_dir, "tokenizer.model"), vocab_size)
    sp = spm_tokenizer.load(tok_path)
    train_ids = torch.tensor(spm_tokenizer.encode_text(sp, train_text), dtype=torch.long)
    held_ids = torch.tensor(spm_tokenizer.encode_text(sp, held_text), dtype=torch.long)
    summary = {
        "held_out_books": [b.name for b in held_books],
        "train_books": len(train_books),
        "train_verses": sum(len(b.verses()) for b in train_books),
        "heldout_verses": sum(len(b.verses()) for b in held_books),
        "train_bytes": len(train_text.encode("utf-8")),
        "heldout_bytes": len(held_text.encode("utf-8")),
        "train_tokens": int(train_ids.numel()),
        "heldout_tokens": int(held_ids.numel()),
        "vocab_size": sp.get_piece_size(),
    }
    with open(os.path.join(work_dir, "split.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    return Corpus(sp, tok_path, train_ids, held_ids, summary)
