"""Per-target loss weights for training batches: 1 everywhere except the passkey answer's key
digits (--passkey-answer-weight W), so that the 5 answer tokens are not a negligible part of a
256-token window's loss. The loss is the weighted mean sum(w·nll) / sum(w)."""

import torch
import torch.nn.functional as F

from passkey import KEY_DIGITS


def answer_weights(context, answers, weight):
    """[len(answers), context] float weights: `weight` on targets answer..answer+KEY_DIGITS-1 of each
    row whose answer is not None, 1 elsewhere (targets are the window itself, windows.model_inputs)."""
    w = torch.ones(len(answers), context)
    for row, answer in enumerate(answers):
        if answer is not None:
            if not 0 <= answer <= context - KEY_DIGITS:
                raise ValueError("answer at %d does not fit a %d-token window" % (answer, context))
            w[row, answer:answer + KEY_DIGITS] = weight
    return w


def weighted_cross_entropy(logits, targets, weights):
    """sum(weights · per-target NLL) / sum(weights); logits [B, T, V], targets and weights [B, T]."""
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    w = weights.reshape(-1).to(nll.dtype)
    return (w * nll).sum() / w.sum()
