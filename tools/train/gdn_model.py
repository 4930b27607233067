"""Training-time gated DeltaNet causal LM in PyTorch, parameter names and math as fla's
`gated_deltanet` (so state_dict() is the checkpoint): the same computation as
tests/reference/mcserve_ref's CausalLM, batched, with the recurrence in chunked form
(chunked_gdn.py). Supported: GVA (num_v_heads), use_gate, use_short_conv, allow_neg_eigval,
tie_word_embeddings, and Memory Caching as mc_train.py supports it (the `memory_caching` object of
the config; gate u_proj adds `attn.mc.u_proj.weight`); no hybrid attention layers.
"""

import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import mc_train
import ref_path  # noqa: F401  (puts tests/reference on sys.path)
from chunked_gdn import chunk_gated_delta_rule
from mcserve_ref.mc import resolve_mc_config

L2_EPS = 1e-6   # as the reference's ops.l2norm (inside the sqrt)


def fla_config(vocab_size, hidden_size, num_hidden_layers, num_heads, head_dim, hidden_ratio=None,
               intermediate_size=None, expand_v=1.0, conv_size=4, tie_word_embeddings=False):
    """A complete fla gated_deltanet config.json dict (keys as models/mcserve-tiny/config.json)."""
    cfg = {
        "allow_neg_eigval": False, "architectures": ["GatedDeltaNetForCausalLM"], "attn_mode": "chunk",
        "bos_token_id": 1, "conv_size": conv_size, "eos_token_id": 2, "expand_v": expand_v,
        "fuse_cross_entropy": True, "fuse_norm": True, "fuse_swiglu": True, "head_dim": head_dim,
        "hidden_act": "swish", "hidden_ratio": hidden_ratio if hidden_ratio is not None else 4,
        "hidden_size": hidden_size, "initializer_range": 0.02, "max_position_embeddings": 2048,
        "model_type": "gated_deltanet", "norm_eps": 1e-6, "num_heads": num_heads,
        "num_hidden_layers": num_hidden_layers, "num_v_heads": None,
        "tie_word_embeddings": tie_word_embeddings, "use_cache": True, "use_gate": True,
        "use_short_conv": True, "vocab_size": vocab_size,
    }
    if intermediate_size is not None:
        cfg["intermediate_size"] = intermediate_size
    return cfg


def resolved_intermediate_size(cfg):
    """fla's rule: intermediate_size, else 256·ceil(int(H·hidden_ratio·2/3)/256)."""
    if cfg.get("intermediate_size") is not None:
        return int(cfg["intermediate_size"])
    hr = cfg.get("hidden_ratio") or 4
    i = int(cfg["hidden_size"] * hr * 2 / 3)
    return 256 * ((i + 255) // 256)


class RMSNorm(nn.Module):
    """y = x·rsqrt(mean(x²) + eps)·weight over the last dim."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class ShortConv(nn.Conv1d):
    """Causal depthwise conv (weight [D, 1, W], no bias) followed by SiLU; x: [B, T, D]."""

    def __init__(self, dim, width):
        super().__init__(dim, dim, width, groups=dim, padding=width - 1, bias=False)

    def forward(self, x):
        T = x.shape[1]
        return F.silu(super().forward(x.transpose(1, 2))[..., :T].transpose(1, 2))


class GatedDeltaNetAttention(nn.Module):
    """The token mixer (`model.layers.{i}.attn.*`)."""

    def __init__(self, cfg, chunk_size, mc_cfg=None):
        super().__init__()
        Hd = cfg["hidden_size"]
        self.nh = cfg["num_heads"]
        self.nvh = cfg.get("num_v_heads") or self.nh
        self.dk = int(cfg["head_dim"])
        self.dv = int(self.dk * cfg.get("expand_v", 2.0))
        self.use_conv = bool(cfg.get("use_short_conv", True))
        self.use_gate = bool(cfg.get("use_gate", True))
        self.neg = bool(cfg.get("allow_neg_eigval", False))
        self.eps = cfg["norm_eps"]
        self.chunk_size = chunk_size
        kd, vd = self.nh * self.dk, self.nvh * self.dv
        self.q_proj = nn.Linear(Hd, kd, bias=False)
        self.k_proj = nn.Linear(Hd, kd, bias=False)
        self.v_proj = nn.Linear(Hd, vd, bias=False)
        self.a_proj = nn.Linear(Hd, self.nvh, bias=False)
        self.b_proj = nn.Linear(Hd, self.nvh, bias=False)
        self.A_log = nn.Parameter(torch.zeros(self.nvh))
        self.dt_bias = nn.Parameter(torch.zeros(self.nvh))
        if self.use_conv:
            conv = cfg.get("conv_size", 4)
            self.q_conv1d, self.k_conv1d, self.v_conv1d = ShortConv(kd, conv), ShortConv(kd, conv), ShortConv(vd, conv)
        if self.use_gate:
            self.g_proj = nn.Linear(Hd, vd, bias=False)
        self.o_norm = RMSNorm(self.dv, self.eps)
        self.o_proj = nn.Linear(vd, Hd, bias=False)
        self.mc_cfg = mc_cfg
        if mc_cfg is not None and mc_cfg["gate"] == "u_proj":
            self.mc = nn.Module()
            self.mc.u_proj = nn.Linear(Hd, kd, bias=False)   # `attn.mc.u_proj.weight` [H·K, hidden]

    def _l2(self, x):
        return x / torch.sqrt((x * x).sum(-1, keepdim=True) + L2_EPS)

    def forward(self, x):
        B, T, _ = x.shape
        if self.use_conv:
            q, k, v = self.q_conv1d(self.q_proj(x)), self.k_conv1d(self.k_proj(x)), self.v_conv1d(self.v_proj(x))
        else:
            q, k, v = F.silu(self.q_proj(x)), F.silu(self.k_proj(x)), F.silu(self.v_proj(x))
        rep = self.nvh // self.nh
        q = self._l2(q.view(B, T, self.nh, self.dk)).repeat_interleave(rep, dim=2)
        k = self._l2(k.view(B, T, self.nh, self.dk)).repeat_interleave(rep, dim=2)
        v = v.view(B, T, self.nvh, self.dv)
        beta = torch.sigmoid(self.b_proj(x)) * (2.0 if self.neg else 1.0)
        g = -self.A_log.exp() * F.softplus(self.a_proj(x) + self.dt_bias)
        o, states = chunk_gated_delta_rule(q, k, v, g, beta, self.dk ** -0.5, self.chunk_size,
                                           chunk_states=self.mc_cfg is not None)
        if self.mc_cfg is not None:
            o = self._mc(x, q * self.dk ** -0.5, k, o, states)
        o = self.o_norm(o)
        if self.use_gate:
            o = o * F.silu(self.g_proj(x).view(B, T, self.nvh, self.dv))
        return self.o_proj(o.reshape(B, T, -1))

    def _mc(self, x, q, k, o, chunk_states):
        """Memory Caching's aggregated read-out [B, T, H, V] (mc_train.py); q scaled, per state head."""
        B, T, _ = x.shape
        if self.mc_cfg["gate"] == "u_proj":
            u = self.mc.u_proj(x).view(B, T, self.nh, self.dk).repeat_interleave(self.nvh // self.nh, dim=2)
        else:
            u = q
        states = mc_train.segment_states(chunk_states, T, self.mc_cfg["segment_size"], self.chunk_size)
        return mc_train.mc_readout(o, q, k, u, states, self.mc_cfg)


class SwiGLU(nn.Module):
    """down(silu(gate x) · up x) (`mlp.*`)."""

    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    """h = x + attn(attn_norm(x)); y = h + mlp(mlp_norm(h))."""

    def __init__(self, cfg, chunk_size, mc_cfg=None):
        super().__init__()
        self.attn_norm = RMSNorm(cfg["hidden_size"], cfg["norm_eps"])
        self.attn = GatedDeltaNetAttention(cfg, chunk_size, mc_cfg)
        self.mlp_norm = RMSNorm(cfg["hidden_size"], cfg["norm_eps"])
        self.mlp = SwiGLU(cfg["hidden_size"], resolved_intermediate_size(cfg))

    def forward(self, x):
        h = x + self.attn(self.attn_norm(x))
        return h + self.mlp(self.mlp_norm(h))


class Backbone(nn.Module):
    """`model.*`: embeddings, layers, final norm."""

    def __init__(self, cfg, chunk_size, mc_cfg=None):
        super().__init__()
        self.embeddings = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        on = set(mc_cfg["layers"]) if mc_cfg is not None else set()
        self.layers = nn.ModuleList([Block(cfg, chunk_size, mc_cfg if i in on else None)
                                     for i in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg["norm_eps"])

    def forward(self, ids):
        h = self.embeddings(ids)
        for layer in self.layers:
            h = layer(h)
        return self.norm(h)


class GatedDeltaNetLM(nn.Module):
    """The causal LM; forward(ids [B, T]) → logits [B, T, vocab] from a fresh state.
    Not thread-safe (a torch module); use from one thread."""

    def __init__(self, cfg, chunk_size=64):
        super().__init__()
        if cfg.get("model_type") != "gated_deltanet":
            raise ValueError("model_type must be gated_deltanet, got %r" % cfg.get("model_type"))
        if cfg.get("attn") is not None:
            raise ValueError("hybrid attention layers are not supported for training")
        self.cfg = dict(cfg)
        self.cfg.setdefault("norm_eps", 1e-6)
        self.mc_cfg = training_mc_config(cfg, chunk_size)
        self.model = Backbone(self.cfg, chunk_size, self.mc_cfg)
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        if not self.tied:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    def forward(self, ids):
        h = self.model(ids)
        w = self.model.embeddings.weight if self.tied else self.lm_head.weight
        return h @ w.T

    def init_weights(self, generator):
        """fla-style initialisation from `generator` (a torch.Generator): linear/embedding weights
        N(0, initializer_range²), norms 1, conv uniform(±1/sqrt(width)), A_log = log U(1, 16),
        dt_bias = softplus⁻¹(dt) with dt log-uniform in [1e-3, 0.1], MC's u_proj 0."""
        std = self.cfg.get("initializer_range", 0.02)
        for name, p in self.named_parameters():
            with torch.no_grad():
                if name.endswith("A_log"):
                    p.copy_(torch.empty_like(p).uniform_(1.0, 16.0, generator=generator).log())
                elif name.endswith("dt_bias"):
                    u = torch.rand(p.shape, generator=generator, dtype=p.dtype)
                    dt = torch.exp(u * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3)).clamp_min(1e-4)
                    p.copy_(dt + torch.log(-torch.expm1(-dt)))
                elif "norm" in name.split(".")[-2]:
                    p.fill_(1.0)
                elif name.endswith("mc.u_proj.weight"):   # gate logits 0: uniform mixture at first
                    p.zero_()
                elif "conv1d" in name:
                    bound = 1.0 / math.sqrt(p.shape[-1])
                    p.uniform_(-bound, bound, generator=generator)
                else:
                    p.normal_(0.0, std, generator=generator)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())


def training_mc_config(cfg, chunk_size):
    """The resolved `memory_caching` of cfg (None when off), gate defaulting to u_proj (training
    creates its weight); ValueError unless mc_train.py supports it."""
    mc = resolve_mc_config(cfg.get("memory_caching"), cfg["num_hidden_layers"])
    if mc is None:
        return None
    mc["gate"] = mc["gate"] or "u_proj"
    mc_train.check_config(mc, chunk_size)
    return mc


def load_config(path):
    with open(path) as f:
        return json.load(f)
