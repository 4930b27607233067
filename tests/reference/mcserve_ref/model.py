"""Plain, slow reference causal LMs for mcserve: fla `linear_attn`, `gla`, `delta_net`,
`gated_deltanet` and mcserve `swla`, `titans` (docs/model-format.md).  The deep-memory families
(`titans` with memory_depth 2, `dla`) live in deep_memory.py and are registered here.

Usage:
    m = CausalLM.from_dir(path, dtype=torch.float64)
    logits = m.forward(ids)            # [T, vocab], fresh state, full-sequence conv path
    toks   = m.greedy(ids, n)          # n greedy tokens after ids (no EOS stop)
    st = m.new_state(); m.step(ids[:7], st); m.step(ids[7:], st)   # incremental

State per layer is a dict of tensors, layouts in README.md ("HKV", K-first).
"""

import json
import os

import torch

from . import mc as mc_mod
from . import lattice
from . import ops
from .safetensors_io import load_model_dir

FLA_TYPES = ("linear_attn", "gla", "delta_net", "gated_deltanet")
MC_TYPES = ("swla", "titans", "dla")

# fla config defaults per family (configuration_*.py), used when a key is absent.
_DEFAULTS = {
    "common": dict(hidden_ratio=4, intermediate_size=None, num_hidden_layers=24,
                   hidden_act="swish", tie_word_embeddings=False, vocab_size=32000,
                   bos_token_id=1, eos_token_id=2, elementwise_affine=True, fuse_norm=True),
    "linear_attn": dict(hidden_size=2048, expand_k=1.0, expand_v=1.0, num_heads=4, num_kv_heads=None,
                        feature_map="elementwise_product", tie_feature_map_qk=False, norm_q=False,
                        norm_k=False, norm_feature_map=False),
    "gla": dict(hidden_size=2048, expand_k=0.5, expand_v=1.0, num_heads=4, num_kv_heads=None,
                feature_map=None, use_short_conv=False, conv_size=4, use_output_gate=True, clamp_min=None),
    "delta_net": dict(hidden_size=2048, expand_k=1.0, expand_v=1.0, use_gate=False, use_short_conv=True,
                      allow_neg_eigval=False, conv_size=4, use_beta=True, num_heads=16, qk_norm="l2",
                      qk_activation="silu"),
    "gated_deltanet": dict(hidden_size=2048, expand_v=2.0, use_gate=True, use_short_conv=True,
                           allow_neg_eigval=False, conv_size=4, head_dim=256, num_heads=6, num_v_heads=None),
    # mcserve families (docs/model-format.md): hidden_size/num_heads/head_dim have no default there;
    # we fall back to the GDN-like values only so that the reference never crashes on a partial config.
    "swla": dict(hidden_size=2048, expand_v=1.0, use_short_conv=True, conv_size=4, use_gate=True,
                 head_dim=256, num_heads=6),
    "titans": dict(hidden_size=2048, expand_v=1.0, use_short_conv=True, conv_size=4, use_gate=True,
                   head_dim=256, num_heads=6, memory_depth=1),
    # deep-memory family (deep_memory.py); its memory_* / inner_chunk_size defaults are deep_memory.DEEP_DEFAULTS
    "dla": dict(hidden_size=2048, expand_v=1.0, use_short_conv=True, conv_size=4, use_gate=True,
                head_dim=256, num_heads=6),
    # Lattice (lattice.py); its own fields are lattice.DEFAULTS
    "lattice": {k: v for k, v in lattice.DEFAULTS.items()},
}


def resolve_config(cfg):
    """Return a new dict with fla defaults filled in and `norm_eps` resolved
    (norm_eps, else legacy rms_norm_eps, else 1e-6)."""
    mt = cfg.get("model_type")
    if mt not in _DEFAULTS or mt == "common":
        raise ValueError("unsupported model_type %r" % mt)
    r = dict(_DEFAULTS["common"])
    r.update(_DEFAULTS[mt])
    for k, v in cfg.items():
        r[k] = v
    for k in list(_DEFAULTS["common"]) + list(_DEFAULTS[mt]):
        if r.get(k) is None and _merged_default(mt, k) is not None:
            r[k] = _merged_default(mt, k)
    if cfg.get("norm_eps") is not None:
        r["norm_eps"] = float(cfg["norm_eps"])
    elif cfg.get("rms_norm_eps") is not None:
        r["norm_eps"] = float(cfg["rms_norm_eps"])
    else:
        r["norm_eps"] = 1e-6
    if r.get("hidden_ratio") is None:
        r["hidden_ratio"] = 4
    r["intermediate_size"] = ops.intermediate_size(r["hidden_size"], r["hidden_ratio"], cfg.get("intermediate_size"))
    if mt in ("titans", "dla"):
        from . import deep_memory
        deep_memory.check_config(r)
    if mt == "lattice":
        lattice.check_config(r)
    if cfg.get("attn") is not None:
        raise ValueError("hybrid attention layers (config.attn) are not supported by the reference")
    return r


def _merged_default(mt, k):
    if k in _DEFAULTS[mt]:
        return _DEFAULTS[mt][k]
    return _DEFAULTS["common"].get(k)


class _Weights:
    """Name -> torch tensor (converted to the compute dtype); records which names were used."""

    def __init__(self, tensors, dtype):
        self.t = tensors
        self.dtype = dtype
        self.used = set()
        self.cache = {}

    def has(self, name):
        return name in self.t

    def __call__(self, name, shape=None):
        if name not in self.t:
            raise KeyError("missing tensor %s" % name)
        self.used.add(name)
        if name not in self.cache:
            self.cache[name] = torch.from_numpy(self.t[name].to_numpy()).to(self.dtype)
        w = self.cache[name]
        if shape is not None and tuple(w.shape) != tuple(shape):
            raise ValueError("tensor %s has shape %s, expected %s" % (name, tuple(w.shape), tuple(shape)))
        return w


# =============================================================================== mixers

class _Mixer:
    """Base: subclasses implement new_state() and run(x, state) -> y.

    `mc` (a mc.MemoryCaching or None) replaces the recurrence's raw read-out by MC's aggregation
    (before the output norm / gate); `mc_dims()` = (state heads, K, V, query heads) for it.

    run(x, None) is the "full sequence" path: fresh state, convolution done with
    F.conv1d over the whole sequence.  run(x, state) is the incremental path: convolution via
    the conv cache, recurrent state carried in `state` (mutated in place)."""

    def _conv(self, name, x, w, act, state):
        if w is None:
            return ops.silu(x) if act == "silu" else x
        if state is None:
            return ops.short_conv_full(x, w, act)
        y, state["conv_" + name] = ops.short_conv_step(x, w, state["conv_" + name], act)
        return y

    mc = None

    def _conv_state(self, d):
        return torch.zeros(d, self.conv_size, dtype=self.dtype)

    def mc_dims(self):
        # state heads, key dim of the memory (feature dim for linear_attn), value dim, query heads
        return self.nh, self.dk, self.dv, self.nh


class LinearAttention(_Mixer):
    def __init__(self, cfg, W, p, dtype):
        self.dtype = dtype
        Hd = cfg["hidden_size"]
        self.nh = cfg["num_heads"]
        self.nkv = cfg["num_kv_heads"] or self.nh
        self.groups = self.nh // self.nkv
        key_dim = int(Hd * cfg["expand_k"])
        value_dim = int(Hd * cfg["expand_v"])
        self.dk = key_dim // self.nh
        self.dv = value_dim // self.nh
        self.wq = W(p + "q_proj.weight", (key_dim, Hd))
        self.wk = W(p + "k_proj.weight", (key_dim // self.groups, Hd))
        self.wv = W(p + "v_proj.weight", (value_dim // self.groups, Hd))
        self.wo = W(p + "o_proj.weight", (Hd, value_dim))
        self.norm_w = W(p + "norm.weight", (self.dv,)) if cfg["elementwise_affine"] else None
        self.eps = cfg["norm_eps"]
        self.norm_q, self.norm_k = bool(cfg["norm_q"]), bool(cfg["norm_k"])
        self.normalize = bool(cfg["norm_feature_map"])
        fm = cfg["feature_map"]
        self.fm = fm
        tied = bool(cfg["tie_feature_map_qk"])
        self.phi_q = self._make_fm(fm, W, p, "q", tied)
        self.phi_k = self._make_fm(fm, W, p, "k", tied)
        self.fdim = {"hedgehog": 2 * self.dk, "dpfp": 8 * self.dk}.get(fm, self.dk)
        self.scale = self.fdim ** -0.5

    def _make_fm(self, fm, W, p, which, tied):
        d = self.dk

        def name(suffix):
            # tied q/k maps: the writer may keep only one alias (feature_map_q or feature_map_k)
            n = p + "feature_map_%s.%s" % (which, suffix)
            if tied and not W.has(n):
                other = p + "feature_map_%s.%s" % ("k" if which == "q" else "q", suffix)
                return other
            return n

        if fm == "identity":
            return lambda x: x
        if fm == "elu":
            return ops.elu_p1
        if fm == "relu":
            return torch.relu
        if fm == "dpfp":
            return ops.dpfp
        if fm == "hedgehog":
            w, b = W(name("layer.weight"), (d, d)), W(name("layer.bias"), (d,))
            return lambda x: ops.hedgehog(x, w, b)
        if fm == "t2r":
            w = W(name("layer.weight"), (d, d))
            return lambda x: ops.t2r(x, w)
        if fm == "elementwise_product":
            w1, b1 = W(name("layer1.weight"), (d, d)), W(name("layer1.bias"), (d,))
            w2, b2 = W(name("layer2.weight"), (d, d)), W(name("layer2.bias"), (d,))
            return lambda x: ops.hadamard(x, w1, b1, w2, b2)
        raise ValueError("unsupported feature_map %r" % fm)

    def mc_dims(self):
        return self.nh, self.fdim, self.dv, self.nh

    def new_state(self):
        return {"S": torch.zeros(self.nh, self.fdim, self.dv, dtype=self.dtype),
                "z": torch.zeros(self.nh, self.fdim, dtype=self.dtype)}

    def run(self, x, state):
        T = x.shape[0]
        q = (x @ self.wq.T).view(T, self.nh, self.dk)
        k = (x @ self.wk.T).view(T, self.nkv, self.dk).repeat_interleave(self.groups, dim=1)
        v = (x @ self.wv.T).view(T, self.nkv, self.dv).repeat_interleave(self.groups, dim=1)
        q, k = self.phi_q(q), self.phi_k(k)
        if self.norm_q:
            q = q / (q.sum(-1, keepdim=True) + ops.SUM_NORM_EPS)
        if self.norm_k:
            k = k / (k.sum(-1, keepdim=True) + ops.SUM_NORM_EPS)
        st = state if state is not None else self.new_state()
        if self.mc is not None:
            o = self.mc.run(x, dict(q=q * self.scale, k=k, v=v), st)
        else:
            o, st["S"], st["z"] = ops.linear_attn_recurrent(q, k, v, self.scale, self.normalize, st["S"], st["z"])
        o = ops.rms_norm(o, self.norm_w, self.eps)
        return o.reshape(T, -1) @ self.wo.T


class GLA(_Mixer):
    def __init__(self, cfg, W, p, dtype):
        self.dtype = dtype
        Hd = cfg["hidden_size"]
        self.nh = cfg["num_heads"]
        self.nkv = cfg["num_kv_heads"] or self.nh
        self.groups = self.nh // self.nkv
        key_dim = int(Hd * cfg["expand_k"])
        value_dim = int(Hd * cfg["expand_v"])
        kdg, vdg = key_dim // self.groups, value_dim // self.groups
        self.dk, self.dv = key_dim // self.nh, value_dim // self.nh
        self.wq = W(p + "q_proj.weight", (key_dim, Hd))
        self.wk = W(p + "k_proj.weight", (kdg, Hd))
        self.wv = W(p + "v_proj.weight", (vdg, Hd))
        self.wgk1 = W(p + "gk_proj.0.weight", (16, Hd))
        self.wgk2 = W(p + "gk_proj.1.weight", (kdg, 16))
        self.bgk2 = W(p + "gk_proj.1.bias", (kdg,))
        self.wo = W(p + "o_proj.weight", (Hd, value_dim))
        self.conv_size = cfg["conv_size"]
        if cfg["use_short_conv"]:
            self.cq = W(p + "q_conv1d.weight", (key_dim, 1, self.conv_size))
            self.ck = W(p + "k_conv1d.weight", (kdg, 1, self.conv_size))
            self.cv = W(p + "v_conv1d.weight", (vdg, 1, self.conv_size))
        else:
            self.cq = self.ck = self.cv = None
        self.kdg, self.vdg, self.key_dim = kdg, vdg, key_dim
        self.use_gate = bool(cfg["use_output_gate"])
        self.gate_fn = cfg["hidden_act"]
        self.wg = W(p + "g_proj.weight", (value_dim, Hd)) if self.use_gate else None
        fused = self.gate_fn == "swish" and bool(cfg["fuse_norm"]) and self.use_gate
        nname = p + ("g_norm_swish_gate.weight" if fused else "g_norm.weight")
        if not W.has(nname):  # tolerate the other name (identical math for a swish gate)
            alt = p + ("g_norm.weight" if fused else "g_norm_swish_gate.weight")
            nname = alt if W.has(alt) else nname
        self.gnorm_w = W(nname, (self.dv,)) if cfg["elementwise_affine"] else None
        self.eps = cfg["norm_eps"]
        self.clamp_min = cfg["clamp_min"]
        self.fmap = ops.act_fn(cfg["feature_map"]) if cfg["feature_map"] is not None else None
        self.scale = self.dk ** -0.5

    def new_state(self):
        st = {"S": torch.zeros(self.nh, self.dk, self.dv, dtype=self.dtype)}
        if self.cq is not None:
            st.update(conv_q=self._conv_state(self.key_dim), conv_k=self._conv_state(self.kdg),
                      conv_v=self._conv_state(self.vdg))
        return st

    def run(self, x, state):
        T = x.shape[0]
        act = "silu" if self.cq is not None else None   # no conv: raw projections, no activation
        q = self._conv("q", x @ self.wq.T, self.cq, act, state)
        k = self._conv("k", x @ self.wk.T, self.ck, act, state)
        v = self._conv("v", x @ self.wv.T, self.cv, act, state)
        gk = (x @ self.wgk1.T) @ self.wgk2.T + self.bgk2
        q = q.view(T, self.nh, self.dk)
        k = k.view(T, self.nkv, self.dk).repeat_interleave(self.groups, dim=1)
        gk = gk.view(T, self.nkv, self.dk).repeat_interleave(self.groups, dim=1)
        v = v.view(T, self.nkv, self.dv).repeat_interleave(self.groups, dim=1)
        gk = torch.nn.functional.logsigmoid(gk) / 16.0
        if self.clamp_min is not None:
            gk = torch.clamp_min(gk, float(self.clamp_min))
        if self.fmap is not None:
            q, k = self.fmap(q), self.fmap(k)
        st = state if state is not None else self.new_state()
        if self.mc is not None:
            o = self.mc.run(x, dict(q=q * self.scale, k=k, v=v, gk=gk), st)
        else:
            o, st["S"] = ops.gla_recurrent(q, k, v, gk, self.scale, st["S"])
        if self.use_gate:
            g = (x @ self.wg.T).view(T, self.nh, self.dv)
            o = ops.rms_norm(o, self.gnorm_w, self.eps) * ops.act_fn(self.gate_fn)(g)
        else:
            o = ops.rms_norm(o, self.gnorm_w, self.eps)
        return o.reshape(T, -1) @ self.wo.T


class DeltaNet(_Mixer):
    def __init__(self, cfg, W, p, dtype):
        self.dtype = dtype
        Hd = cfg["hidden_size"]
        self.nh = cfg["num_heads"]
        key_dim = int(Hd * cfg["expand_k"])
        value_dim = int(Hd * cfg["expand_v"])
        self.key_dim, self.value_dim = key_dim, value_dim
        self.dk, self.dv = key_dim // self.nh, value_dim // self.nh
        self.qk_act = cfg["qk_activation"]
        self.qk_norm = cfg["qk_norm"]
        assert self.qk_act in ("silu", "relu", "elu", "identity"), self.qk_act
        assert self.qk_norm in ("l2", "sum"), self.qk_norm
        self.wq = W(p + "q_proj.weight", (key_dim, Hd))
        self.wk = W(p + "k_proj.weight", (key_dim, Hd))
        self.wv = W(p + "v_proj.weight", (value_dim, Hd))
        self.wb = W(p + "b_proj.weight", (self.nh, Hd)) if cfg["use_beta"] else None
        self.conv_size = cfg["conv_size"]
        self.use_conv = bool(cfg["use_short_conv"])
        if self.use_conv:
            self.cq = W(p + "q_conv1d.weight", (key_dim, 1, self.conv_size))
            self.ck = W(p + "k_conv1d.weight", (key_dim, 1, self.conv_size))
            self.cv = W(p + "v_conv1d.weight", (value_dim, 1, self.conv_size))
        self.use_gate = bool(cfg["use_gate"])
        self.wg = W(p + "g_proj.weight", (value_dim, Hd)) if self.use_gate else None
        self.onorm_w = W(p + "o_norm.weight", (self.dv,))
        self.wo = W(p + "o_proj.weight", (Hd, value_dim))
        self.eps = cfg["norm_eps"]
        self.neg = bool(cfg["allow_neg_eigval"])
        self.scale = self.dk ** -0.5

    def new_state(self):
        st = {"S": torch.zeros(self.nh, self.dk, self.dv, dtype=self.dtype)}
        if self.use_conv:
            st.update(conv_q=self._conv_state(self.key_dim), conv_k=self._conv_state(self.key_dim),
                      conv_v=self._conv_state(self.value_dim))
        return st

    def run(self, x, state):
        T = x.shape[0]
        qk_conv_act = "silu" if self.qk_act == "silu" else None
        if self.use_conv:
            q = self._conv("q", x @ self.wq.T, self.cq, qk_conv_act, state)
            k = self._conv("k", x @ self.wk.T, self.ck, qk_conv_act, state)
            v = self._conv("v", x @ self.wv.T, self.cv, "silu", state)
        else:
            q, k = x @ self.wq.T, x @ self.wk.T
            if self.qk_act == "silu":
                q, k = ops.silu(q), ops.silu(k)
            v = ops.silu(x @ self.wv.T)
        q, k = q.view(T, self.nh, self.dk), k.view(T, self.nh, self.dk)
        v = v.view(T, self.nh, self.dv)
        if self.qk_act == "relu":
            q, k = torch.relu(q), torch.relu(k)
        elif self.qk_act == "elu":
            q, k = ops.elu_p1(q), ops.elu_p1(k)
        if self.qk_norm == "sum":
            q = q / q.sum(-1, keepdim=True)
            k = k / k.sum(-1, keepdim=True)
        else:
            q, k = ops.l2norm(q), ops.l2norm(k)
        beta = torch.sigmoid(x @ self.wb.T) if self.wb is not None else torch.ones(T, self.nh, dtype=self.dtype)
        if self.neg:
            beta = beta * 2.0
        st = state if state is not None else self.new_state()
        if self.mc is not None:
            o = self.mc.run(x, dict(q=q * self.scale, k=k, v=v, beta=beta), st)
        else:
            o, st["S"] = ops.delta_rule_recurrent(q, k, v, beta, self.scale, st["S"])
        if self.use_gate:
            g = (x @ self.wg.T).view(T, self.nh, self.dv)
            o = ops.gated_rms_norm(o, g, self.onorm_w, self.eps, "swish")
        else:
            o = ops.rms_norm(o, self.onorm_w, self.eps)
        return o.reshape(T, -1) @ self.wo.T


class _GDNLike(_Mixer):
    """Shared token pipeline of gated_deltanet / swla / titans:
    q,k,v = SiLU(ShortConv(W x)) (or SiLU(W x)); q,k L2-normalised per head; scale = head_k^-0.5."""

    def _common(self, cfg, W, p, dtype, nv_heads):
        self.dtype = dtype
        Hd = cfg["hidden_size"]
        self.nh = cfg["num_heads"]
        self.nvh = nv_heads
        self.dk = int(cfg["head_dim"])
        self.dv = int(self.dk * cfg["expand_v"])
        self.key_dim = self.nh * self.dk
        self.value_dim = self.nvh * self.dv
        self.wq = W(p + "q_proj.weight", (self.key_dim, Hd))
        self.wk = W(p + "k_proj.weight", (self.key_dim, Hd))
        self.wv = W(p + "v_proj.weight", (self.value_dim, Hd))
        self.conv_size = cfg["conv_size"]
        self.use_conv = bool(cfg["use_short_conv"])
        if self.use_conv:
            self.cq = W(p + "q_conv1d.weight", (self.key_dim, 1, self.conv_size))
            self.ck = W(p + "k_conv1d.weight", (self.key_dim, 1, self.conv_size))
            self.cv = W(p + "v_conv1d.weight", (self.value_dim, 1, self.conv_size))
        else:
            self.cq = self.ck = self.cv = None
        self.use_gate = bool(cfg["use_gate"])
        self.wg = W(p + "g_proj.weight", (self.value_dim, Hd)) if self.use_gate else None
        self.onorm_w = W(p + "o_norm.weight", (self.dv,))
        self.wo = W(p + "o_proj.weight", (Hd, self.value_dim))
        self.eps = cfg["norm_eps"]
        self.scale = self.dk ** -0.5

    def _conv_states(self):
        if not self.use_conv:
            return {}
        return dict(conv_q=self._conv_state(self.key_dim), conv_k=self._conv_state(self.key_dim),
                    conv_v=self._conv_state(self.value_dim))

    def _qkv(self, x, state):
        T = x.shape[0]
        q = self._conv("q", x @ self.wq.T, self.cq, "silu", state)
        k = self._conv("k", x @ self.wk.T, self.ck, "silu", state)
        v = self._conv("v", x @ self.wv.T, self.cv, "silu", state)
        q = ops.l2norm(q.view(T, self.nh, self.dk))
        k = ops.l2norm(k.view(T, self.nh, self.dk))
        v = v.view(T, self.nvh, self.dv)
        return q, k, v

    def _out(self, x, o):
        T = x.shape[0]
        if self.use_gate:
            g = (x @ self.wg.T).view(T, self.nvh, self.dv)
            o = ops.gated_rms_norm(o, g, self.onorm_w, self.eps, "swish")
        else:
            o = ops.rms_norm(o, self.onorm_w, self.eps)
        return o.reshape(T, -1) @ self.wo.T


class GatedDeltaNet(_GDNLike):
    def __init__(self, cfg, W, p, dtype):
        nv = cfg["num_v_heads"] or cfg["num_heads"]
        self._common(cfg, W, p, dtype, nv)
        assert self.nvh % self.nh == 0
        self.rep = self.nvh // self.nh
        self.wa = W(p + "a_proj.weight", (self.nvh, cfg["hidden_size"]))
        self.wb = W(p + "b_proj.weight", (self.nvh, cfg["hidden_size"]))
        self.A_log = W(p + "A_log", (self.nvh,))
        self.dt_bias = W(p + "dt_bias", (self.nvh,))
        self.neg = bool(cfg["allow_neg_eigval"])

    def mc_dims(self):
        return self.nvh, self.dk, self.dv, self.nh

    def new_state(self):
        st = {"S": torch.zeros(self.nvh, self.dk, self.dv, dtype=self.dtype)}
        st.update(self._conv_states())
        return st

    def run(self, x, state):
        q, k, v = self._qkv(x, state)
        # GVA: value head hv reads q/k head hv // (HV/H)
        q = q.repeat_interleave(self.rep, dim=1)
        k = k.repeat_interleave(self.rep, dim=1)
        beta = torch.sigmoid(x @ self.wb.T)
        if self.neg:
            beta = beta * 2.0
        g = ops.gdn_log_decay(x @ self.wa.T, self.A_log, self.dt_bias)
        st = state if state is not None else self.new_state()
        if self.mc is not None:
            o = self.mc.run(x, dict(q=q * self.scale, k=k, v=v, g=g, beta=beta), st)
        else:
            o, st["S"] = ops.gated_delta_rule_recurrent(q, k, v, g, beta, self.scale, st["S"])
        return self._out(x, o)


class SWLA(_GDNLike):
    def __init__(self, cfg, W, p, dtype):
        self._common(cfg, W, p, dtype, cfg["num_heads"])
        Hd = cfg["hidden_size"]
        self.wa = W(p + "a_proj.weight", (self.nh, Hd))
        self.wb = W(p + "b_proj.weight", (self.nh, Hd))
        self.wl = W(p + "l_proj.weight", (self.nh, Hd))
        self.A_log = W(p + "A_log", (self.nh,))
        self.dt_bias = W(p + "dt_bias", (self.nh,))

    def new_state(self):
        st = {"M": torch.zeros(self.nh, self.dk, self.dv, dtype=self.dtype),
              "k_prev": torch.zeros(self.nh, self.dk, dtype=self.dtype),
              "v_prev": torch.zeros(self.nh, self.dv, dtype=self.dtype)}
        st.update(self._conv_states())
        return st

    def run(self, x, state):
        q, k, v = self._qkv(x, state)
        alpha = torch.exp(ops.gdn_log_decay(x @ self.wa.T, self.A_log, self.dt_bias))
        beta = torch.sigmoid(x @ self.wb.T)
        lam = torch.sigmoid(x @ self.wl.T)
        st = state if state is not None else self.new_state()
        if self.mc is not None:
            o = self.mc.run(x, dict(q=q * self.scale, k=k, v=v, alpha=alpha, beta=beta, lam=lam), st)
        else:
            o, st["M"], st["k_prev"], st["v_prev"] = ops.swla_recurrent(
                q, k, v, alpha, beta, lam, self.scale, st["M"], st["k_prev"], st["v_prev"])
        return self._out(x, o)


class Titans(_GDNLike):
    def __init__(self, cfg, W, p, dtype):
        self._common(cfg, W, p, dtype, cfg["num_heads"])
        Hd = cfg["hidden_size"]
        self.wa = W(p + "a_proj.weight", (self.nh, Hd))
        self.wm = W(p + "m_proj.weight", (self.nh, Hd))
        self.wb = W(p + "b_proj.weight", (self.nh, Hd))

    def new_state(self):
        st = {"M": torch.zeros(self.nh, self.dk, self.dv, dtype=self.dtype),
              "S": torch.zeros(self.nh, self.dk, self.dv, dtype=self.dtype)}
        st.update(self._conv_states())
        return st

    def run(self, x, state):
        q, k, v = self._qkv(x, state)
        alpha = torch.sigmoid(x @ self.wa.T)
        eta = torch.sigmoid(x @ self.wm.T)
        theta = torch.sigmoid(x @ self.wb.T)
        st = state if state is not None else self.new_state()
        if self.mc is not None:
            o = self.mc.run(x, dict(q=q * self.scale, k=k, v=v, alpha=alpha, eta=eta, theta=theta), st)
        else:
            o, st["M"], st["S"] = ops.titans_recurrent(q, k, v, alpha, eta, theta, self.scale, st["M"], st["S"])
        return self._out(x, o)


MIXERS = {"linear_attn": LinearAttention, "gla": GLA, "delta_net": DeltaNet,
          "gated_deltanet": GatedDeltaNet, "swla": SWLA, "titans": Titans}


def mixer_class(cfg):
    """The mixer of a resolved config: MIXERS, or the deep-memory families of deep_memory.py."""
    from . import deep_memory
    if cfg["model_type"] == "lattice":
        return lattice.Lattice
    if cfg["model_type"] == "dla":
        return deep_memory.DLA
    if deep_memory.is_deep(cfg):
        return deep_memory.DeepTitans
    return MIXERS[cfg["model_type"]]


# =============================================================================== model

class CausalLM:
    def __init__(self, config, tensors, dtype=torch.float32, strict=True):
        self.raw_config = dict(config)
        self.cfg = cfg = resolve_config(config)
        self.dtype = dtype
        W = _Weights(tensors, dtype)
        H, V = cfg["hidden_size"], cfg["vocab_size"]
        I = cfg["intermediate_size"]
        self.eps = cfg["norm_eps"]
        self.act = cfg["hidden_act"]
        self.emb = W("model.embeddings.weight", (V, H))
        self.layers = []
        for i in range(cfg["num_hidden_layers"]):
            p = "model.layers.%d." % i
            layer = dict(
                attn_norm=W(p + "attn_norm.weight", (H,)),
                attn=mixer_class(cfg)(cfg, W, p + "attn.", dtype),
                mlp_norm=W(p + "mlp_norm.weight", (H,)),
                gate=W(p + "mlp.gate_proj.weight", (I, H)),
                up=W(p + "mlp.up_proj.weight", (I, H)),
                down=W(p + "mlp.down_proj.weight", (H, I)),
            )
            self.layers.append(layer)
        self.mc_cfg = mc_mod.resolve_mc_config(cfg.get("memory_caching"), cfg["num_hidden_layers"])
        if self.mc_cfg is not None:
            for i in self.mc_cfg["layers"]:
                self._attach_mc(i, W)
        self.norm = W("model.norm.weight", (H,))
        if W.has("lm_head.weight"):
            self.lm_head = W("lm_head.weight", (V, H))
        elif cfg["tie_word_embeddings"]:
            self.lm_head = self.emb
        else:
            raise KeyError("lm_head.weight missing and tie_word_embeddings is false")
        unused = set(tensors) - W.used
        # legacy GDN attn.D and the second alias of tied feature maps are ignored
        # and so are MC gate weights of layers that do not use them (MC off, not in `layers`, gate q)
        ignorable = {n for n in unused if n.endswith(".attn.D") or n.endswith(".attn.mc.u_proj.weight")
                     or (cfg.get("tie_feature_map_qk") and ".attn.feature_map_" in n)}
        self.unused = sorted(unused - ignorable)
        if strict and self.unused:
            raise ValueError("unused tensors in checkpoint: %s" % self.unused)

    def _attach_mc(self, i, W):
        attn = self.layers[i]["attn"]
        mt = self.cfg["model_type"]
        if mt == "linear_attn" and attn.normalize:
            raise NotImplementedError("memory caching with linear_attn norm_feature_map: true")
        Hs, K, V, Hq = attn.mc_dims()
        name = "model.layers.%d.attn.mc.u_proj.weight" % i
        gate = self.mc_cfg["gate"] or ("u_proj" if W.has(name) else "q")
        w_u = W(name, (Hq * K, self.cfg["hidden_size"])) if gate == "u_proj" else None
        if getattr(attn, "deep", False):   # deep memories: mc_deep.py, the layer's own DeepRule
            from . import mc_deep
            attn.mc = mc_deep.DeepMemoryCaching(self.mc_cfg, attn.rule, Hq, w_u)
            return
        lat = None
        if mt == "lattice":
            if attn.readout != "state":
                raise NotImplementedError("memory caching with lattice readout: normalized")
            lat = dict(s0=attn.s0, variant=attn.variant, renorm=attn.renorm, readout=attn.readout)
        rule = mc_mod.MemoryRule(mt, Hs, K, V, self.dtype, lattice=lat)
        attn.mc = mc_mod.MemoryCaching(self.mc_cfg, rule, Hq, w_u)

    @classmethod
    def from_dir(cls, d, dtype=torch.float32, strict=True):
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        if cfg.get("model_type") == "hope":      # HOPE has its own model class (hope.py)
            from .hope import HopeLM
            return HopeLM(cfg, load_model_dir(d), dtype=dtype, strict=strict)
        if cfg.get("model_type") == "armt":      # reference only (armt.py)
            from .armt import ArmtLM
            return ArmtLM(cfg, load_model_dir(d), dtype=dtype, strict=strict)
        if cfg.get("model_type") == "gam":       # reference only (gam.py)
            from .gam import GamLM
            return GamLM(cfg, load_model_dir(d), dtype=dtype, strict=strict)
        return cls(cfg, load_model_dir(d), dtype=dtype, strict=strict)

    # ---------------------------------------------------------------- API
    def new_state(self):
        return [layer["attn"].new_state() for layer in self.layers]

    def _run(self, ids, state):
        ids = torch.as_tensor(list(ids), dtype=torch.long)
        h = self.emb[ids]
        for i, L in enumerate(self.layers):
            a = L["attn"].run(ops.rms_norm(h, L["attn_norm"], self.eps), None if state is None else state[i])
            h = h + a
            h = h + ops.gated_mlp(ops.rms_norm(h, L["mlp_norm"], self.eps), L["gate"], L["up"], L["down"], self.act)
        h = ops.rms_norm(h, self.norm, self.eps)
        return h @ self.lm_head.T

    @torch.no_grad()
    def forward(self, ids):
        """Logits [T, vocab] for the whole sequence from a fresh state (full-sequence conv path)."""
        return self._run(ids, None)

    @torch.no_grad()
    def step(self, ids, state):
        """Incremental: feed `ids` (>= 1 token) continuing from `state` (mutated). Returns logits [T, vocab]."""
        return self._run(ids, state)

    @torch.no_grad()
    def greedy(self, ids, n, return_logits=False):
        """n greedy tokens after `ids` (argmax, lowest id on exact ties, no EOS stop)."""
        state = self.new_state()
        logits = self.step(ids, state)[-1]
        out, steps = [], []
        for _ in range(n):
            tok = int(torch.argmax(logits))
            out.append(tok)
            steps.append(logits)
            logits = self.step([tok], state)[-1]
        return (out, steps) if return_logits else out
