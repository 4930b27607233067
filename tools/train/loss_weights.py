"""Per-target loss weights for training batches: 1 everywhere except the passkey answer's key
digits (--passkey-answer-weight W), so that the 5 answer tokens are not a negligible part of a
256-token window's loss. The loss is the weighted mean sum(w·nll) / sum(w)."""

import torch
import torch.nn.functional as F

from passkey import KEY_DIGITS


def answer_mask(context, answers):
    """[len(answers), context] bool: True on targets a..a+KEY_DIGITS-1 for each answer index a in
    answers[row] (a list, empty for a plain window; targets are the window itself,
    windows.model_inputs)."""
    m = torch.zeros(len(answers), context, dtype=torch.bool)
    for row, row_answers in enumerate(answers):
        for answer in row_answers:
            if not 0 <= answer <= context - KEY_DIGITS:
                raise ValueError("answer at %d does not fit a %d-token window" % (answer, context))
            m[row, answer:answer + KEY_DIGITS] = True
    return m


def answer_weights(mask, weight):
    """Float weights: `weight` where mask is True, 1 elsewhere."""
    return torch.where(mask, torch.tensor(float(weight)), torch.tensor(1.0))


def weighted_cross_entropy(logits, targets, weights, mask=None):
    """(sum(weights · per-target NLL) / sum(weights), mean NLL over mask's targets or None);
    logits [B, T, V], targets, weights and mask [B, T]."""
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    w = weights.reshape(-1).to(nll.dtype)
    loss = (w * nll).sum() / w.sum()
    if mask is None or not bool(mask.any()):
        return loss, None
    return loss, float(nll.detach()[mask.reshape(-1)].mean())
