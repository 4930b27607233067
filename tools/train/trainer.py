"""The training loop: AdamW, linear warm-up then cosine decay, gradient clipping, random
windows from the training stream (optionally some replaced by passkey examples), periodic
held-out perplexity. Runs on the calling thread; torch's intra-op threads as set by the caller."""

import math
import time

import torch

import windows as win
from loss_weights import answer_weights, weighted_cross_entropy
from passkey import PasskeyMaker


class TrainSettings:
    """Hyper-parameters of one run (see train.py's flags for the meaning of each)."""

    def __init__(self, steps, batch, context, lr, min_lr_ratio, warmup, weight_decay, clip,
                 eval_interval, eval_windows, passkey_fraction, seed, passkey_answer_weight=1.0):
        self.steps, self.batch, self.context = steps, batch, context
        self.lr, self.min_lr_ratio, self.warmup = lr, min_lr_ratio, warmup
        self.weight_decay, self.clip = weight_decay, clip
        self.eval_interval, self.eval_windows = eval_interval, eval_windows
        self.passkey_fraction, self.seed = passkey_fraction, seed
        self.passkey_answer_weight = passkey_answer_weight


def lr_at(step, s):
    """Learning rate for 0-based `step`: linear warm-up to s.lr over s.warmup steps, then cosine
    down to s.lr·s.min_lr_ratio at the last step."""
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    progress = (step - s.warmup) / max(1, s.steps - 1 - s.warmup)
    return s.lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def make_optimizer(model, s):
    """AdamW; weight decay on matrices (dim ≥ 2), none on norms, A_log, dt_bias."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": s.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=s.lr, betas=(0.9, 0.95), eps=1e-8)


def training_batch(corpus, s, generator, passkeys):
    """([batch, context] windows, [batch, context] loss weights); each window is a passkey window
    with probability passkey_fraction, whose key-digit answer targets weigh passkey_answer_weight."""
    batch = win.random_windows(corpus.train_ids, s.context, s.batch, generator)
    answers = [None] * s.batch
    if passkeys is not None:
        pick = torch.rand(s.batch, generator=generator) < s.passkey_fraction
        for i in torch.nonzero(pick).flatten().tolist():
            ids, _, answers[i] = passkeys.example(generator)
            batch[i] = torch.tensor(ids, dtype=torch.long)
    return batch, answer_weights(s.context, answers, s.passkey_answer_weight)


def heldout_perplexity(model, corpus, context, limit=None):
    """(perplexity, mean NLL, tokens) of the model on the tiled held-out windows (first `limit`)."""
    model.eval()
    try:
        return win.perplexity(model, win.tiled_windows(corpus.heldout_ids, context, limit))
    finally:
        model.train()


def train(model, corpus, s, log=print, extra_eval=None):
    """Trains `model` in place for s.steps steps. Returns a list of dict records (one per eval);
    extra_eval(model) → dict, if given, runs at each eval and its entries join the record."""
    generator = torch.Generator().manual_seed(s.seed)
    passkeys = PasskeyMaker(corpus.sp, corpus.train_ids, s.context) if s.passkey_fraction > 0 else None
    opt = make_optimizer(model, s)
    history = []
    start = last = time.time()
    model.train()
    for step in range(s.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, s)
        batch, weights = training_batch(corpus, s, generator, passkeys)
        inputs, targets = win.model_inputs(batch)
        logits = model(inputs)
        loss = weighted_cross_entropy(logits, targets, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), s.clip)
        opt.step()
        done = step + 1
        if done % 10 == 0 or done == s.steps:
            now = time.time()
            log("step %5d/%d  loss %.4f  gnorm %.2f  lr %.2e  %.0f tok/s  elapsed %.0fs"
                % (done, s.steps, loss.item(), float(gnorm), lr_at(step, s),
                   10 * s.batch * s.context / max(now - last, 1e-9) if done % 10 == 0 else 0.0, now - start))
            last = now
        if done % s.eval_interval == 0 or done == s.steps:
            ppl, nll, n = heldout_perplexity(model, corpus, s.context, s.eval_windows)
            log("eval  step %d  held-out ppl %.3f (first %d tokens)" % (done, ppl, n))
            record = {"step": done, "train_loss": loss.item(), "heldout_ppl_subset": ppl,
                      "subset_tokens": n, "elapsed_s": time.time() - start}
            if extra_eval is not None:
                record.update(extra_eval(model))
            history.append(record)
    return history
