"""The training loop: AdamW, linear warm-up then cosine decay, gradient clipping, random
windows from the training stream (optionally some replaced by passkey examples), periodic
held-out perplexity. Runs on the calling thread; torch's intra-op threads as set by the caller."""

import math
import time

import torch

import windows as win
from loss_weights import answer_mask, answer_weights, weighted_cross_entropy
from passkey import PasskeyMaker


class TrainSettings:
    """Hyper-parameters of one run (see train.py's flags for the meaning of each)."""

    def __init__(self, steps, batch, context, lr, min_lr_ratio, warmup, weight_decay, clip,
                 eval_interval, eval_windows, passkey_fraction, seed, passkey_answer_weight=1.0,
                 passkey_pack=False, passkey_curriculum=None, passkey_curriculum_end=0.5):
        self.steps, self.batch, self.context = steps, batch, context
        self.lr, self.min_lr_ratio, self.warmup = lr, min_lr_ratio, warmup
        self.weight_decay, self.clip = weight_decay, clip
        self.eval_interval, self.eval_windows = eval_interval, eval_windows
        self.passkey_fraction, self.seed = passkey_fraction, seed
        self.passkey_answer_weight = passkey_answer_weight
        self.passkey_pack, self.passkey_curriculum = passkey_pack, passkey_curriculum
        self.passkey_curriculum_end = passkey_curriculum_end


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


def longest_passkey(step, s):
    """Longest passkey example at 0-based `step`: the context, or with passkey_curriculum = L,
    L at step 0 growing linearly to the context at passkey_curriculum_end of the steps."""
    if s.passkey_curriculum is None:
        return s.context
    ramp = min(1.0, step / max(1, int(s.steps * s.passkey_curriculum_end)))
    return int(round(s.passkey_curriculum + (s.context - s.passkey_curriculum) * ramp))


def training_batch(corpus, s, generator, passkeys, step=0):
    """([batch, context] windows, [batch, context] bool mask of the passkey answers' key-digit
    targets); each window is a passkey window (one example, or packed examples with
    passkey_pack) with probability passkey_fraction."""
    batch = win.random_windows(corpus.train_ids, s.context, s.batch, generator)
    answers = [[] for _ in range(s.batch)]
    if passkeys is not None:
        pick = torch.rand(s.batch, generator=generator) < s.passkey_fraction
        for i in torch.nonzero(pick).flatten().tolist():
            if s.passkey_pack:
                ids, _, answers[i] = passkeys.packed(generator, longest_passkey(step, s))
            else:
                ids, _, answer = passkeys.example(generator, longest_passkey(step, s))
                answers[i] = [answer]
            batch[i] = torch.tensor(ids, dtype=torch.long)
    return batch, answer_mask(s.context, answers)


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
    history, answer_nll = [], []
    start = last = time.time()
    model.train()
    for step in range(s.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, s)
        batch, mask = training_batch(corpus, s, generator, passkeys, step)
        inputs, targets = win.model_inputs(batch)
        logits = model(inputs)
        loss, nll = weighted_cross_entropy(logits, targets, answer_weights(mask, s.passkey_answer_weight), mask)
        answer_nll += [] if nll is None else [nll]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), s.clip)
        opt.step()
        done = step + 1
        if done % 10 == 0 or done == s.steps:
            now = time.time()
            log("step %5d/%d  loss %.4f  gnorm %.2f  lr %.2e  %.0f tok/s  elapsed %.0fs%s"
                % (done, s.steps, loss.item(), float(gnorm), lr_at(step, s),
                   10 * s.batch * s.context / max(now - last, 1e-9) if done % 10 == 0 else 0.0, now - start,
                   "  answer NLL %.3f" % (sum(answer_nll) / len(answer_nll)) if answer_nll else ""))
            last, answer_nll = now, []
        if done % s.eval_interval == 0 or done == s.steps:
            ppl, nll, n = heldout_perplexity(model, corpus, s.context, s.eval_windows)
            log("eval  step %d  held-out ppl %.3f (first %d tokens)" % (done, ppl, n))
            record = {"step": done, "train_loss": loss.item(), "heldout_ppl_subset": ppl,
                      "subset_tokens": n, "elapsed_s": time.time() - start}
            if extra_eval is not None:
                record.update(extra_eval(model))
            history.append(record)
    return history
