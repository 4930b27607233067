"""--reinit-digit-embeddings: fresh random embeddings for the ten digit tokens.

Digits never occur in the KJV, so in a model trained on it the digit byte pieces <0x30>..<0x39>
are never a target: with tied embeddings the softmax gradient pushes all ten along the same
direction (away from every hidden state), and they end up nearly identical (models/kjv-gdn:
mean pairwise cosine 0.993), which leaves the model unable to tell one digit from another on input
or output. Re-initialising them as a fresh model would (N(0, initializer_range²)) gives ten
distinguishable vectors before passkey training starts.
"""

import torch

DIGITS = "0123456789"


def digit_ids(sp):
    """Token ids of the ten digits (SentencePiece byte pieces <0x30>..<0x39>; one token each)."""
    ids = [sp.piece_to_id("<0x%02X>" % ord(c)) for c in DIGITS]
    for c, i in zip(DIGITS, ids):
        if sp.id_to_piece(i) != "<0x%02X>" % ord(c) or sp.encode(c)[-1:] != [i]:
            raise ValueError("the tokenizer does not encode digit %s as the byte piece <0x%02X>" % (c, ord(c)))
    return ids


def mean_pairwise_cosine(model, ids):
    """Mean cosine similarity between the embeddings of `ids` over all distinct pairs."""
    e = model.model.embeddings.weight.detach()[ids]
    e = e / e.norm(dim=1, keepdim=True)
    n = len(ids)
    return float(((e @ e.T).sum() - n) / (n * (n - 1)))


def reinit_digit_embeddings(model, sp, generator):
    """Redraws the digit rows of the (tied) embedding matrix from N(0, initializer_range²)."""
    ids = digit_ids(sp)
    std = model.cfg.get("initializer_range", 0.02)
    emb = model.model.embeddings.weight
    with torch.no_grad():
        emb[ids] = torch.randn(len(ids), emb.shape[1], generator=generator, dtype=emb.dtype) * std
    return ids
