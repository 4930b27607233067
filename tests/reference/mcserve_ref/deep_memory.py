"""mcserve families with a deep (MLP) memory (docs/model-format.md): `titans` with `memory_depth: 2`
and `dla` (Deep Linear Attention).

The block is the existing titans family's: q, k, v = SiLU(ShortConv(W x)), q and k L2-normalised per
head, output RMSNorm (gated by swish(g_proj x) when use_gate), o_proj, SwiGLU MLP (model._GDNLike).
Only the memory differs: per head an MLP M(x) = x + W1 GELU(W2 x) (mlp_memory.py) trained online by
deep_rules.DeepRule, read as o_t = M_{W_t}(q_t) after the token's write.  The query is the
L2-normalised q **without** the head_dim^-0.5 scale the matrix memories use: the MLP is nonlinear and
is trained on unit-norm keys, so it is read at unit-norm queries.

Gates (per token and head, from the layer's normalised input x):
    titans: alpha = sigmoid(a_proj x) retention, eta = sigmoid(m_proj x) momentum,
            theta = sigmoid(b_proj x) step (the linear titans' names and functions)
    dla:    theta = sigmoid(b_proj x) step
"""

import torch

from .deep_rules import DeepRule
from .mlp_memory import MLPMemory
from .model import _GDNLike

DEEP_DEFAULTS = dict(memory_expansion=4, memory_layer_norm=False, inner_chunk_size=1)
MEMORY_KEYS = ("W1", "W2", "S1", "S2", "A1", "A2", "i")   # the memory's part of a layer's state


def is_deep(cfg):
    """True for the deep-memory families: dla, and titans with memory_depth 2."""
    return cfg["model_type"] == "dla" or (cfg["model_type"] == "titans" and cfg.get("memory_depth") == 2)


def check_config(r):
    """Validates a resolved titans/dla config (ValueError with the reason); fills the deep defaults."""
    mt = r["model_type"]
    depth = r.get("memory_depth")
    if mt == "titans" and depth not in (1, 2):
        raise ValueError("titans: memory_depth must be 1 (matrix memory) or 2 (MLP memory), got %r" % depth)
    if mt == "dla" and depth not in (None, 2):
        raise ValueError("dla: the memory is always the 2-layer MLP (memory_depth 2), got memory_depth %r" % depth)
    if not is_deep(r):
        return
    for k, v in DEEP_DEFAULTS.items():
        if r.get(k) is None:
            r[k] = v
    head_v = int(r["head_dim"] * r["expand_v"])
    if head_v != r["head_dim"]:
        raise ValueError("%s: the MLP memory maps head_dim -> head_dim, so head_v = head_dim * expand_v (%d) "
                         "must equal head_k = head_dim (%d); set expand_v to 1" % (mt, head_v, r["head_dim"]))
    for k in ("memory_expansion", "inner_chunk_size"):
        if isinstance(r[k], bool) or not isinstance(r[k], int) or r[k] < 1:
            raise ValueError("%s: %s must be an integer >= 1, got %r" % (mt, k, r[k]))
    if not isinstance(r["memory_layer_norm"], bool):
        raise ValueError("%s: memory_layer_norm must be a bool" % mt)


class _DeepMixer(_GDNLike):
    """Shared by DeepTitans and DLA: tensors of the memory, state, run loop."""

    deep = True
    kind = None

    def _deep_common(self, cfg, W, p, dtype):
        self._common(cfg, W, p, dtype, cfg["num_heads"])
        nh, d = self.nh, self.dk
        E = cfg["memory_expansion"] * d
        w1 = W(p + "memory.w1", (nh, d, E))          # initial W1 per head (slow weights)
        w2 = W(p + "memory.w2", (nh, E, d))          # initial W2 per head (slow weights)
        ln_w = ln_b = None
        if cfg["memory_layer_norm"]:
            ln_w, ln_b = W(p + "memory.ln.weight", (d,)), W(p + "memory.ln.bias", (d,))
        self.mlp = MLPMemory(nh, d, cfg["memory_expansion"], ln_w, ln_b, eps=cfg["norm_eps"])
        self.rule = DeepRule(self.kind, self.mlp, w1, w2, cfg["inner_chunk_size"])

    def new_state(self):
        st = self.rule.fresh()
        st.update(self._conv_states())
        return st

    def run(self, x, state):
        """x [T, hidden] -> [T, hidden].  feats: q, k, v [T, H, d] and the gates [T, H]."""
        q, k, v = self._qkv(x, state)
        feats = dict(q=q, k=k, v=v, **self.gates(x))
        st = state if state is not None else self.new_state()
        if self.mc is not None:
            o = self.mc.run(x, feats, st)
        else:
            o = self._recurrent(feats, st)
        return self._out(x, o)

    def _recurrent(self, feats, st):
        """Token by token: write with the token, then read M_W(q).  Returns o [T, H, d]; mutates st."""
        mem = {n: st[n] for n in MEMORY_KEYS if n in st}
        outs = []
        for t in range(feats["q"].shape[0]):
            mem = self.rule.update(mem, {n: f[t] for n, f in feats.items()})
            outs.append(self.rule.read(self.rule.weights(mem), feats["q"][t]))
        st.update(mem)
        return torch.stack(outs, 0)


class DeepTitans(_DeepMixer):
    """`titans` with memory_depth 2: retention alpha, momentum eta, step theta (sigmoids)."""

    kind = "titans"

    def __init__(self, cfg, W, p, dtype):
        self._deep_common(cfg, W, p, dtype)
        Hd = cfg["hidden_size"]
        self.wa = W(p + "a_proj.weight", (self.nh, Hd))
        self.wm = W(p + "m_proj.weight", (self.nh, Hd))
        self.wb = W(p + "b_proj.weight", (self.nh, Hd))

    def gates(self, x):
        """alpha, eta, theta [T, H]."""
        return dict(alpha=torch.sigmoid(x @ self.wa.T), eta=torch.sigmoid(x @ self.wm.T),
                    theta=torch.sigmoid(x @ self.wb.T))


class DLA(_DeepMixer):
    """`dla`: Hebbian step theta (sigmoid of b_proj); no retention, no momentum."""

    kind = "dla"

    def __init__(self, cfg, W, p, dtype):
        self._deep_common(cfg, W, p, dtype)
        self.wb = W(p + "b_proj.weight", (self.nh, cfg["hidden_size"]))

    def gates(self, x):
        """theta [T, H]."""
        return dict(theta=torch.sigmoid(x @ self.wb.T))
