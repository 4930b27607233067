"""Lattice (Karami & Mirrokni, "Lattice: Learning to Efficiently Compress the Memory"): the orthogonal
state recurrence with normalised projection, variants DEC / ENC / SIM, and its mixer (model_type
`lattice`, docs/model-format.md; the math is /work/shared/specs/lattice.md A.3).

State per head, K-first like the matrix memories: M [m, d] = Sᵀ, row i = memory slot s_i (a d-vector,
unit norm after every step).  Read-out o_t = M_tᵀ q_t = S_t q_t after the token's write.
"""

import math

import numpy as np
import torch

from . import ops

VARIANTS = ("dec", "enc", "sim")
RENORM_EPS = 1e-12     # s_new = u / sqrt(max(‖u‖², RENORM_EPS)): the guard of spec A.3.4

DEFAULTS = dict(hidden_size=2048, num_heads=6, head_dim=64, num_slots=None, lattice_variant="dec",
                qk_projection="shared", use_short_conv=True, conv_size=4, conv_activation="none",
                qk_norm="none", use_forget_gate=True, use_gate=True, use_output_norm=False,
                initial_state="auto", state_renorm="recompute", readout="state", state_soft_threshold=0.0)

_ENUMS = dict(lattice_variant=VARIANTS, qk_projection=("shared", "separate"), conv_activation=("none", "silu"),
              qk_norm=("none", "l2"), initial_state=("auto", "learned", "identity"),
              state_renorm=("recompute", "analytic"), readout=("state", "normalized"))


def check_config(r):
    """Fills num_slots (default head_dim) and rejects unknown / unsupported values, naming the field."""
    if r.get("num_slots") is None:
        r["num_slots"] = r["head_dim"]
    for k, allowed in _ENUMS.items():
        if r[k] not in allowed:
            raise ValueError("lattice: %s must be one of %s, got %r" % (k, allowed, r[k]))
    if not 1 <= int(r["num_slots"]) <= int(r["head_dim"]):
        raise ValueError("lattice: num_slots must be in [1, head_dim], got %r" % r["num_slots"])
    if float(r["state_soft_threshold"]) != 0.0:
        raise ValueError("lattice: state_soft_threshold (the l1/ISTA variant) is not supported; must be 0")


def orthonormal_rows(a):
    """Gram-Schmidt on the rows of a float64 array [..., m, d] (m <= d), with elementwise sums only
    (no BLAS), so the result is the same bytes on every CPU."""
    a = np.array(a, dtype=np.float64)
    out = np.empty_like(a)
    for idx in np.ndindex(*a.shape[:-2]):
        rows = []
        for r in a[idx]:
            for b in rows:
                r = r - np.sum(r * b) * b
            rows.append(r / math.sqrt(np.sum(r * r)))
        out[idx] = np.stack(rows)
    return out


def lattice_step(M, q, k, v, gamma, mu, variant, renorm="recompute", readout="state"):
    """One token, one head.  M [m, d] (rows = slots), q, k [m], v [d], gamma, mu scalars.
    Returns (o [d], M_new [m, d]).

    General form (eq. 13 with eq. 14 and the forget gate of A.3.4): φ_i = s_i/‖s_i‖,
      DEC: h = φᵀ... = Σ_i k_i φ_i − v,  c = k          ENC: h = v, c_i = φ_iᵀ v − k_i          SIM: h = −v, c = k
      Δs_i = −γ c_i (h − (φ_iᵀ h) φ_i) / ‖s_i‖
      s_i ← (μ s_i + Δs_i) / ‖μ s_i + Δs_i‖           ("recompute", the exact norm)
      s_i ← (μ s_i + Δs_i) / sqrt(μ² + ‖Δs_i‖²)        ("analytic", exact when ‖s_i‖ = 1)
    """
    n = torch.sqrt((M * M).sum(-1))                 # [m]
    phi = M / n[:, None]                            # [m, d]
    if variant == "dec":
        h, c = phi.T @ k - v, k
    elif variant == "enc":
        h, c = v, phi @ v - k
    elif variant == "sim":
        h, c = -v, k
    else:
        raise ValueError(variant)
    proj = phi @ h                                  # [m]  φ_iᵀ h
    delta = -gamma * (c / n)[:, None] * (h[None, :] - proj[:, None] * phi)   # [m, d]
    u = mu * M + delta
    if renorm == "recompute":
        nn2 = (u * u).sum(-1)
    else:
        d2 = (gamma * c / n) ** 2 * torch.clamp((h * h).sum() - proj * proj, min=0.0)
        nn2 = mu * mu * n * n + d2
    M_new = u / torch.sqrt(torch.clamp(nn2, min=RENORM_EPS))[:, None]
    if readout == "normalized":
        o = (M_new / torch.sqrt((M_new * M_new).sum(-1))[:, None]).T @ q
    else:
        o = M_new.T @ q
    return o, M_new


def lattice_recurrent(q, k, v, gamma, mu, M, variant, renorm="recompute", readout="state"):
    """Token-by-token scan.  q, k [T, H, m], v [T, H, d], gamma, mu [T, H], M [H, m, d].
    Returns (o [T, H, d], M_final)."""
    T, H = q.shape[0], q.shape[1]
    M = M.clone()
    outs = []
    for t in range(T):
        row = []
        for h in range(H):
            o, M[h] = lattice_step(M[h], q[t, h], k[t, h], v[t, h], gamma[t, h], mu[t, h], variant, renorm, readout)
            row.append(o)
        outs.append(torch.stack(row))
    o = torch.stack(outs) if outs else v.new_zeros(0, H, v.shape[-1])
    return o, M


def gelu(x):
    """Exact (erf) GELU."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def param_specs(r, a):
    """(name, shape, init-kind) of one layer's attn.* tensors (export_fixtures.param_specs)."""
    H, nh, d, m = r["hidden_size"], r["num_heads"], r["head_dim"], r["num_slots"]
    specs = []
    if r["qk_projection"] == "shared":
        specs.append((a + "qk_proj.weight", (nh * m, H), "lin"))
    else:
        specs += [(a + "q_proj.weight", (nh * m, H), "lin"), (a + "k_proj.weight", (nh * m, H), "lin")]
    specs += [(a + "v_proj.weight", (nh * d, H), "lin"), (a + "b_proj.weight", (nh, H), "lin")]
    if r["use_forget_gate"]:
        specs.append((a + "f_proj.weight", (nh, H), "lin"))
    if r["use_short_conv"]:
        W = r["conv_size"]
        specs += [(a + "q_conv1d.weight", (nh * m, 1, W), "conv"), (a + "k_conv1d.weight", (nh * m, 1, W), "conv")]
    if r["use_gate"]:
        specs.append((a + "g_proj.weight", (nh * d, H), "lin"))
    if r["use_output_norm"]:
        specs.append((a + "o_norm.weight", (d,), "norm"))
    specs.append((a + "o_proj.weight", (H, nh * d), "out"))
    if r["initial_state"] in ("auto", "learned"):
        specs.append((a + "s0", (nh, m, d), "orthonormal"))
    return specs


class Lattice:
    """The lattice mixer (docs/model-format.md, `lattice`): q/k from one shared projection through two
    causal short convs, v = W_v x, γ = sigmoid(b_proj x), μ = sigmoid(f_proj x), the recurrence, then
    [RMSNorm_head] ⊙ GELU(g_proj x) and o_proj."""

    mc = None

    def __init__(self, cfg, W, p, dtype):
        self.dtype = dtype
        Hd = cfg["hidden_size"]
        self.nh, self.dv, self.dk = cfg["num_heads"], cfg["head_dim"], cfg["num_slots"]
        self.variant, self.renorm, self.readout = cfg["lattice_variant"], cfg["state_renorm"], cfg["readout"]
        qd = self.nh * self.dk
        self.shared = cfg["qk_projection"] == "shared"
        if self.shared:
            self.wqk = W(p + "qk_proj.weight", (qd, Hd))
        else:
            self.wq, self.wk = W(p + "q_proj.weight", (qd, Hd)), W(p + "k_proj.weight", (qd, Hd))
        self.wv = W(p + "v_proj.weight", (self.nh * self.dv, Hd))
        self.wb = W(p + "b_proj.weight", (self.nh, Hd))
        self.wf = W(p + "f_proj.weight", (self.nh, Hd)) if cfg["use_forget_gate"] else None
        self.conv_size = cfg["conv_size"]
        self.use_conv = bool(cfg["use_short_conv"])
        if self.use_conv:
            self.cq = W(p + "q_conv1d.weight", (qd, 1, self.conv_size))
            self.ck = W(p + "k_conv1d.weight", (qd, 1, self.conv_size))
        self.act = "silu" if cfg["conv_activation"] == "silu" else None
        self.l2 = cfg["qk_norm"] == "l2"
        self.wg = W(p + "g_proj.weight", (self.nh * self.dv, Hd)) if cfg["use_gate"] else None
        self.onorm_w = W(p + "o_norm.weight", (self.dv,)) if cfg["use_output_norm"] else None
        self.wo = W(p + "o_proj.weight", (Hd, self.nh * self.dv))
        self.eps = cfg["norm_eps"]
        name = p + "s0"
        if cfg["initial_state"] == "learned" or (cfg["initial_state"] == "auto" and W.has(name)):
            self.s0 = W(name, (self.nh, self.dk, self.dv))
        else:   # I[:, :m] per head: slot i = e_i
            self.s0 = torch.eye(self.dk, self.dv, dtype=dtype).expand(self.nh, self.dk, self.dv).clone()

    def mc_dims(self):
        return self.nh, self.dk, self.dv, self.nh

    def new_state(self):
        st = {"M": self.s0.clone()}
        if self.use_conv:
            # one window for both convs when the projection is shared (A.2 reading 1)
            names = ("qk",) if self.shared else ("q", "k")
            for n in names:
                st["conv_" + n] = torch.zeros(self.nh * self.dk, self.conv_size, dtype=self.dtype)
        return st

    def _conv(self, x, w, state, name):
        if not self.use_conv:
            return ops.silu(x) if self.act == "silu" else x
        if state is None:
            return ops.short_conv_full(x, w, self.act)
        y, _ = ops.short_conv_step(x, w, state["conv_" + name], self.act)
        return y

    def _conv_advance(self, x, state, name):
        if self.use_conv and state is not None:
            _, state["conv_" + name] = ops.short_conv_step(x, self.cq, state["conv_" + name], None)

    def run(self, x, state):
        T = x.shape[0]
        if self.shared:
            pqk = x @ self.wqk.T
            q = self._conv(pqk, self.cq if self.use_conv else None, state, "qk")
            k = self._conv(pqk, self.ck if self.use_conv else None, state, "qk")
            self._conv_advance(pqk, state, "qk")
        else:
            pq, pk = x @ self.wq.T, x @ self.wk.T
            q = self._conv(pq, self.cq if self.use_conv else None, state, "q")
            k = self._conv(pk, self.ck if self.use_conv else None, state, "k")
            self._conv_advance(pq, state, "q")
            self._conv_advance(pk, state, "k")
        q, k = q.view(T, self.nh, self.dk), k.view(T, self.nh, self.dk)
        if self.l2:
            q, k = ops.l2norm(q), ops.l2norm(k)
        v = (x @ self.wv.T).view(T, self.nh, self.dv)
        gamma = torch.sigmoid(x @ self.wb.T)
        mu = torch.sigmoid(x @ self.wf.T) if self.wf is not None else torch.ones_like(gamma)
        st = state if state is not None else self.new_state()
        if self.mc is not None:
            o = self.mc.run(x, dict(q=q, k=k, v=v, gamma=gamma, mu=mu), st)
        else:
            o, st["M"] = lattice_recurrent(q, k, v, gamma, mu, st["M"], self.variant, self.renorm, self.readout)
        if self.onorm_w is not None:
            o = ops.rms_norm(o, self.onorm_w, self.eps)
        if self.wg is not None:
            o = o * gelu((x @ self.wg.T).view(T, self.nh, self.dv))
        return o.reshape(T, -1) @ self.wo.T
