"""The inner optimiser of the deep memories, one token at a time (specs/mc.md B.2.4, B.2.5).

    titans (memory_depth 2):  S = eta * S - theta * grad 1/2 ||M_A(k) - v||^2 ;  W = alpha * W + S
    dla:                      W = W + theta * grad <M_A(k), v>

W = (W1, W2) are the running weights, S = (S1, S2) the momentum, A = (A1, A2) the anchor: the
weights at the start of the current inner chunk (inner mini-batch of `inner_chunk_size` b tokens,
"Train/serve parity" in B.2.5).  Every token's gradient is taken at the anchor; the momentum /
retention recurrence runs per token on the running weights; the anchor is refreshed from the running
weights when a new inner chunk starts.  b = 1 is pure online gradient descent (A = W before the token).

A memory is a dict (all heads of one layer):
    W1 [H, d, E], W2 [H, E, d]    running weights: what is read, what an MC cache stores
    S1, S2                        momentum, same shapes (titans only; zero at a fresh start)
    A1, A2                        anchor, same shapes
    i                             int: tokens absorbed since the last inner-chunk alignment
Inner chunks start where i % b == 0.  `fresh()` (the sequence start, or an independent MC segment
start) and `align()` (a checkpoint-mode MC segment start) set i = 0, so chunks are aligned to the
memory's start and to every constant-size MC segment start.
"""

import torch


class DeepRule:
    """Update and read-out of one layer's deep memory.  kind: "titans" or "dla"; mlp: an MLPMemory;
    W1_0 [H, d, E], W2_0 [H, E, d]: the learned initial weights (slow weights of the checkpoint)."""

    def __init__(self, kind, mlp, W1_0, W2_0, inner_chunk_size):
        assert kind in ("titans", "dla"), kind
        self.kind, self.mlp, self.b = kind, mlp, int(inner_chunk_size)
        self.W1_0, self.W2_0 = W1_0, W2_0
        self.Hs, self.K, self.V = mlp.H, mlp.d, mlp.d      # the view mc.MemoryCaching needs
        self.family = {"titans": "titans_mlp", "dla": "dla"}[kind]

    def fresh(self):
        """A memory at its start: W = A = the initial weights, momentum 0, i = 0."""
        mem = {"W1": self.W1_0, "W2": self.W2_0, "A1": self.W1_0, "A2": self.W2_0, "i": 0}
        if self.kind == "titans":
            mem["S1"], mem["S2"] = torch.zeros_like(self.W1_0), torch.zeros_like(self.W2_0)
        return mem

    def align(self, mem):
        """The next token starts a new inner chunk (weights and momentum continue)."""
        return dict(mem, i=0)

    def update(self, mem, f):
        """Absorb one token.  f: k [H, d], v [H, d] and the gates, each [H]: titans alpha (retention),
        eta (momentum), theta (step); dla theta (step).  Returns a new dict (the input is untouched)."""
        mem = dict(mem)
        if mem["i"] % self.b == 0:
            mem["A1"], mem["A2"] = mem["W1"], mem["W2"]
        col = lambda g: g.view(-1, 1, 1)  # noqa: E731   [H] -> [H, 1, 1]
        if self.kind == "titans":
            G1, G2 = self.mlp.titans_grad(mem["A1"], mem["A2"], f["k"], f["v"])
            mem["S1"] = col(f["eta"]) * mem["S1"] - col(f["theta"]) * G1
            mem["S2"] = col(f["eta"]) * mem["S2"] - col(f["theta"]) * G2
            mem["W1"] = col(f["alpha"]) * mem["W1"] + mem["S1"]
            mem["W2"] = col(f["alpha"]) * mem["W2"] + mem["S2"]
        else:
            G1, G2 = self.mlp.dla_grad(mem["A1"], mem["A2"], f["k"], f["v"])
            mem["W1"] = mem["W1"] + col(f["theta"]) * G1
            mem["W2"] = mem["W2"] + col(f["theta"]) * G2
        mem["i"] += 1
        return mem

    def weights(self, mem):
        """What a cache holds: the running weights only (never momentum, anchor or counter)."""
        return {"W1": mem["W1"], "W2": mem["W2"]}

    matrix = weights       # the name mc.MemoryCaching uses for "what a checkpoint stores"

    def read(self, w, q):
        """M_w(q) [H, d] for weights w = {"W1", "W2"} and queries q [H, d]."""
        return self.mlp.forward(w["W1"], w["W2"], q)
