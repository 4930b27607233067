"""Training / evaluation windows over a token stream, and held-out perplexity.

A window is `context` consecutive tokens of text w[0..context-1]; the model reads
[BOS] + w[0..context-2] and is scored on predicting w[0..context-1] (so every position of the
window is a target, the first one from BOS alone). Held-out perplexity = exp(mean NLL) over all
targets of the consecutive, non-overlapping windows that tile the held-out stream (the remainder
shorter than a window is dropped).
"""

import math

import torch
import torch.nn.functional as F

BOS_ID = 1


def model_inputs(windows):
    """[B, context] windows → (inputs, targets) LongTensors: inputs = BOS + window[:-1]."""
    w = torch.as_tensor(windows, dtype=torch.long)
    bos = torch.full((w.shape[0], 1), BOS_ID, dtype=torch.long)
    return torch.cat([bos, w[:, :-1]], dim=1), w


def random_windows(stream, context, batch, generator):
    """`batch` windows at uniform random starts in `stream` (a 1-D LongTensor)."""
    if stream.numel() < context:
        raise ValueError("token stream (%d) shorter than one window (%d)" % (stream.numel(), context))
    starts = torch.randint(0, stream.numel() - context + 1, (batch,), generator=generator)
    return torch.stack([stream[s:s + context] for s in starts.tolist()])


def tiled_windows(stream, context, limit=None):
    """The consecutive non-overlapping windows of `stream` (at most `limit`), [N, context]."""
    n = stream.numel() // context
    if limit is not None:
        n = min(n, limit)
    if n == 0:
        raise ValueError("token stream (%d) shorter than one window (%d)" % (stream.numel(), context))
    return stream[:n * context].view(n, context)


@torch.no_grad()
def perplexity(logits_fn, windows, batch=16):
    """exp(mean NLL) of `windows` [N, context] under logits_fn(inputs [B, T]) → [B, T, vocab].
    Returns (perplexity, mean NLL in nats, number of scored tokens)."""
    total, count = 0.0, 0
    for i in range(0, windows.shape[0], batch):
        inputs, targets = model_inputs(windows[i:i + batch])
        logits = logits_fn(inputs)
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), targets.reshape(-1),
                              reduction="sum")
        total += float(nll)
        count += targets.numel()
    return math.exp(total / count), total / count, count
