"""HOPE causal LM (specs/hope.md §2; docs/model-format.md (hope)): embeddings, N blocks of
    u = RMSNorm(x);  h = x + SelfModTitans(u);  x' = CMS(h)
then final RMSNorm and lm_head (tied to the embeddings when tie_word_embeddings).

    m = HopeLM(config_dict, {name: tensor}, dtype=torch.float64)
    logits = m.forward(ids)                         # [T, vocab], fresh state
    st = m.new_state(); m.step(ids[:7], st); m.step(ids[7:], st)    # incremental, same logits
    m.step(ids, st, form="token")                   # per-token recurrent form (§3.2) instead of chunk-wise
    m.step(ids, st, learn=[True, False, ...])       # adaptive CMS: which tokens are user-provided

Adaptive CMS (cms_adaptive, A13): position t's loss L_t = -log softmax(logits_t)[id_{t+1}] is added to
the gradient accumulators of every adaptive level iff token t+1 is user-provided (learn true); the
fast-weight states and conv history are stop-gradient, so each position's gradient flows only through
its own path in the layers above.  L_t is known when token t+1 arrives (one-token lag).  Before token
t+1 is computed, every adaptive level with t % C == 0 applies theta -= lr G, G = 0 (eq. 31 with C
terms, A16).  Partial chunks are never flushed (A17): the state after a prefix is the same whatever
the split into calls, so decode equals a longer prefill.
"""

import numpy as np
import torch
import torch.nn.functional as F

from . import ops
from .hope_cms import CMS
from .hope_config import resolve_hope_config
from .hope_titans import SelfModTitans


class _W:
    """name -> tensor in the compute dtype (torch, numpy or safetensors_io tensors); records use."""

    def __init__(self, tensors, dtype):
        self.t, self.dtype, self.used = tensors, dtype, set()

    def has(self, name):
        return name in self.t

    def __call__(self, name, shape):
        if name not in self.t:
            raise KeyError("missing tensor %s" % name)
        v = self.t[name]
        if hasattr(v, "to_numpy"):
            v = v.to_numpy()
        v = torch.as_tensor(np.asarray(v) if not torch.is_tensor(v) else v).to(self.dtype)
        if tuple(v.shape) != tuple(shape):
            raise ValueError("tensor %s has shape %s, expected %s" % (name, tuple(v.shape), tuple(shape)))
        self.used.add(name)
        return v


class _RandomW:
    """A loader that invents every tensor it is asked for (seeded): norms ~ 1, others ~ N(0, scale^2/in)."""

    def __init__(self, seed, dtype):
        self.g, self.dtype, self.t = torch.Generator().manual_seed(seed), dtype, {}

    def has(self, name):
        return False

    def __call__(self, name, shape):
        if name.endswith("norm.weight"):
            v = 1.0 + 0.1 * torch.randn(shape, generator=self.g, dtype=torch.float64)
        else:
            fan_in = shape[-1] if len(shape) > 1 else 1
            scale = 1.0 if "embeddings" in name else 0.8
            v = scale * torch.randn(shape, generator=self.g, dtype=torch.float64) / fan_in ** 0.5
        self.t[name] = v.to(self.dtype)
        return self.t[name]


def random_weights(config, seed=0, dtype=torch.float32):
    """{name: tensor} of a random HOPE model for `config` (every tensor the model reads, no more)."""
    W = _RandomW(seed, dtype)
    HopeLM(config, None, loader=W)
    return W.t


class HopeLM:
    def __init__(self, config, tensors, dtype=torch.float64, strict=True, loader=None):
        self.cfg = cfg = resolve_hope_config(config)
        self.dtype = dtype
        W = loader if loader is not None else _W(tensors, dtype)
        D, V = cfg["hidden_size"], cfg["vocab_size"]
        self.eps = cfg["norm_eps"]
        self.emb = W("model.embeddings.weight", (V, D))
        self.layers = []
        for i in range(cfg["num_hidden_layers"]):
            p = "model.layers.%d." % i
            self.layers.append(dict(attn_norm=W(p + "attn_norm.weight", (D,)),
                                    attn=SelfModTitans(cfg, W, p + "attn."), cms=CMS(cfg, W, p + "cms.")))
        if cfg["memory_caching"] is not None:
            for i in cfg["memory_caching"]["layers"]:
                self._attach_mc(i, W)
        self.norm = W("model.norm.weight", (D,))
        if cfg["tie_word_embeddings"]:
            self.lm_head = self.emb
        else:
            self.lm_head = W("lm_head.weight", (V, D))
        self.adaptive = any(lv["adaptive"] for L in self.layers for lv in L["cms"].levels)
        self.periods = sorted({lv["chunk_size"] for L in self.layers for lv in L["cms"].levels if lv["adaptive"]})
        if loader is None:
            # MC gate weights of layers that do not use them are ignored, as in model.CausalLM
            unused = sorted(n for n in set(tensors) - W.used if not n.endswith(".attn.mc.u_proj.weight"))
            if strict and unused:
                raise ValueError("unused tensors in checkpoint: %s" % unused)

    def _attach_mc(self, i, W):
        """Memory Caching of layer i's M_mem (mc_hope.py); gate as model.CausalLM: u_proj iff asked for, or
        (gate unset) iff the checkpoint has model.layers.{i}.attn.mc.u_proj.weight [H * head_dim, hidden]."""
        from .mc_hope import HopeMemoryCaching
        cfg, attn = self.cfg, self.layers[i]["attn"]
        name = "model.layers.%d.attn.mc.u_proj.weight" % i
        gate = cfg["memory_caching"]["gate"] or ("u_proj" if W.has(name) else "q")
        w_u = W(name, (attn.H * attn.d, cfg["hidden_size"])) if gate == "u_proj" else None
        attn.mc = HopeMemoryCaching(cfg["memory_caching"], attn, w_u)

    # ---------------------------------------------------------------- state
    def new_state(self):
        """{"t": tokens seen, "mix": per-layer mixer states, "cms": per-layer adaptive CMS states,
        "pending": logits [vocab] of the last position (with its graph) awaiting its target, or None}."""
        return {"t": 0, "mix": [L["attn"].new_state() for L in self.layers],
                "cms": [L["cms"].new_state() for L in self.layers], "pending": None}

    # ---------------------------------------------------------------- forward pieces
    def _layers(self, ids, state, form):
        """Logits [n, vocab] of tokens ids (a piece that crosses no adaptive-CMS boundary)."""
        h = self.emb[torch.as_tensor(ids, dtype=torch.long)]
        for L, ms, cs in zip(self.layers, state["mix"], state["cms"]):
            u = ops.rms_norm(h, L["attn_norm"], self.eps)
            if form == "token":
                o = torch.stack([L["attn"].step_token(u[i], ms) for i in range(u.shape[0])], 0)
            else:
                o = L["attn"].run_chunks(u, ms)
            h = L["cms"].forward(h + o, cs)
        h = ops.rms_norm(h, self.norm, self.eps)
        state["t"] += len(ids)
        return h @ self.lm_head.T

    def _accumulate(self, state, loss):
        """G += d loss / d theta for every adaptive parameter of every layer."""
        leaves = [(cs, j, k, v) for L, cs in zip(self.layers, state["cms"]) for j, k, v in L["cms"].leaves(cs)]
        grads = torch.autograd.grad(loss, [v for *_, v in leaves], allow_unused=True, retain_graph=True)
        for (cs, j, k, _), g in zip(leaves, grads):
            if g is not None:
                cs[j]["G"][k] = cs[j]["G"][k] + g.detach()

    def _piece_len(self, t, rest, form):
        """Tokens in the next piece after t tokens: 1 (token form) or up to the next adaptive boundary."""
        if form == "token":
            return 1
        n = 1
        while n < rest and all((t + n) % C for C in self.periods):
            n += 1
        return n

    # ---------------------------------------------------------------- API
    def step(self, ids, state, learn=True, form="chunk"):
        """Feed ids (>= 1 token) after `state` (mutated); logits [T, vocab].  learn: bool or one bool per
        token, true for user-provided tokens (only their positions' predecessors train the CMS)."""
        ids = [int(i) for i in ids]
        if form not in ("chunk", "token"):
            raise ValueError("form must be 'chunk' or 'token', got %r" % form)
        learn = [bool(learn)] * len(ids) if isinstance(learn, bool) else [bool(x) for x in learn]
        if len(learn) != len(ids):
            raise ValueError("learn has %d flags for %d tokens" % (len(learn), len(ids)))
        if not self.adaptive:
            with torch.no_grad():
                return self._layers(ids, state, form)
        outs, i = [], 0
        while i < len(ids):
            if state["pending"] is not None and learn[i]:
                self._accumulate(state, F.cross_entropy(state["pending"][None], torch.tensor([ids[i]])))
            state["pending"] = None
            for L, cs in zip(self.layers, state["cms"]):
                L["cms"].apply_boundary(cs, state["t"])
            n = self._piece_len(state["t"], len(ids) - i, form)
            with torch.enable_grad():
                logits = self._layers(ids[i:i + n], state, form)
                tg = [j for j in range(n - 1) if learn[i + j + 1]]
                if tg:
                    self._accumulate(state, F.cross_entropy(logits[tg], torch.tensor([ids[i + j + 1] for j in tg]),
                                                            reduction="sum"))
            state["pending"] = logits[n - 1]
            outs.append(logits.detach())
            i += n
        return torch.cat(outs, 0)

    def forward(self, ids, form="chunk", learn=True):
        """Logits [T, vocab] of ids from a fresh state."""
        return self.step(ids, self.new_state(), learn=learn, form=form)

    def greedy(self, ids, n, form="chunk"):
        """n greedy tokens after ids (argmax, lowest id on ties); generated tokens never train the CMS."""
        st = self.new_state()
        logits = self.step(ids, st, form=form)[-1]
        out = []
        for _ in range(n):
            out.append(int(torch.argmax(logits)))
            logits = self.step([out[-1]], st, learn=False, form=form)[-1]
        return out
