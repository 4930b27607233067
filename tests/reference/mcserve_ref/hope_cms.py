"""Continuum Memory System of one HOPE block (specs/hope.md §4; A12–A16).

    z^0 = h;  z^l = z^(l-1) + MLP_l(RMSNorm_l(z^(l-1)); theta_l);  out = z^K      (levels in config order)
    swiglu: MLP(z) = down(SiLU(gate z) * up z)        gelu: MLP(z) = down(GELU(up z))
Static (cms_adaptive false, or lr 0): theta_l are the checkpoint's weights.  Adaptive levels keep a
per-request copy theta_l and a gradient accumulator G_l; hope.py adds the gradients of the
teacher-forced losses and applies theta_l -= lr_l G_l at the level's boundaries (eq. 31, A13, A16).
"""

import torch

from . import ops
from .hope_memory import act

_gelu = act("gelu")[0]


class CMS:
    """Weights (prefix p = "model.layers.{i}.cms.") of the K levels of one layer."""

    def __init__(self, cfg, W, p):
        D = cfg["hidden_size"]
        self.eps = cfg["norm_eps"]
        self.levels = []
        for j, lv in enumerate(cfg["cms_levels"]):
            q, F = p + "%d." % j, lv["intermediate_size"]
            th = {"up": W(q + "up_proj.weight", (F, D)), "down": W(q + "down_proj.weight", (D, F))}
            if lv["activation"] == "swiglu":
                th["gate"] = W(q + "gate_proj.weight", (F, D))
            self.levels.append(dict(lv, norm=W(q + "norm.weight", (D,)), theta=th,
                                    adaptive=bool(cfg["cms_adaptive"]) and lv["lr"] > 0))

    def new_state(self):
        """Per adaptive level j: {"theta": per-request leaf copies (requires_grad), "G": zeros}."""
        st = {}
        for j, lv in enumerate(self.levels):
            if lv["adaptive"]:
                st[j] = {"theta": {k: v.clone().requires_grad_(True) for k, v in lv["theta"].items()},
                         "G": {k: torch.zeros_like(v) for k, v in lv["theta"].items()}}
        return st

    def forward(self, h, st):
        """h [n, D] -> [n, D] with the current weights (st: new_state() dict or None = checkpoint)."""
        z = h
        for j, lv in enumerate(self.levels):
            th = st[j]["theta"] if st and j in st else lv["theta"]
            x = ops.rms_norm(z, lv["norm"], self.eps)
            if lv["activation"] == "swiglu":
                m = ops.silu(x @ th["gate"].T) * (x @ th["up"].T)
            else:
                m = _gelu(x @ th["up"].T)
            z = z + m @ th["down"].T
        return z

    def leaves(self, st):
        """[(level, name, tensor)] of every adaptive parameter (the autograd leaves)."""
        return [(j, k, v) for j in sorted(st) for k, v in st[j]["theta"].items()]

    def apply_boundary(self, st, t):
        """After token t (1-based), before token t+1: for each adaptive level with t % C == 0,
        theta -= lr G and G = 0 (a fresh leaf).  Returns the levels updated."""
        done = []
        for j in sorted(st):
            lv = self.levels[j]
            if t > 0 and t % lv["chunk_size"] == 0:
                s = st[j]
                s["theta"] = {k: (v.detach() - lv["lr"] * s["G"][k]).requires_grad_(True)
                              for k, v in s["theta"].items()}
                s["G"] = {k: torch.zeros_like(v) for k, v in s["G"].items()}
                done.append(j)
        return done
