"""Self-modifying Titans, the sequence mixer of a HOPE block (specs/hope.md §3), one layer, one sequence.

Per head h (x_t [H, d] = head slices of u_t, or in_proj u_t; memory_input, A1):
    k~ = M_k(x; W_k,xi_o)  v~ = M_v(x; W_v,xi_o)  eta~ = M_eta(x; .)  alpha~ = M_alpha(x; .)
    q~ = q_proj u_t   (or M_q(x; W_q,xi_o) when adaptive_q, A3)
    k, q = L2(SiLU(conv(k~, q~))),  v = SiLU(conv(v~))              (conv per channel, A10)
    alpha = sigmoid(alpha~), eta = eta_max sigmoid(eta~) | eta_scale softplus(eta~), eta <= 1 + alpha
    every memory M_box: v_hat = M_box(v; W_box,xi), factors at W_box,xi, running W_box updated (§3.5)
    y = M_mem(q; W_mem,t-1) (mode R, read before write) | M_mem(q; W_mem,t) (after_write, A5)
        | M_mem(q; W_mem,xi_m) (mode A, A7)
    o = o_proj( RMSNorm_head(y) * o_norm  (* SiLU(g_proj u)) )                       (A11)
xi(t, C) = C floor((t-1)/C) (A6): the anchor of token t is the running state after token xi, i.e. the
anchor is refreshed from the running weights *before* a token t with (t-1) % C == 0.  C = chunk_size_other
for k, v, eta, alpha (, q); chunk_size_mem for mem.

Two forms, equal by construction of the maths (test_hope.py checks it):
  `step_token`   §3.2: one token at a time, every quantity from the current state.
  `run_chunks`   §3.6: the call is cut at every anchor refresh; inside a piece all producers, convs,
                 gates, v_hat and gradient factors are computed for the whole piece at once from the
                 frozen anchors; the linear recurrence of the running weights and the mode-R reads
                 are then solved in closed form (hope_chunk.py: UT transform) — or, with momentum or
                 w1_rule dgd_hidden, by a loop over the piece.
Memory Caching (mc_hope.py): with `mc` set (a HopeMemoryCaching), M_mem is not in `run` / `anch`; the
mixer computes every other memory, the convs and the gates as without MC and hands M_mem's features
(k, v, alpha, eta, beta, q, position t) to `mc.run`, whose aggregated read-out replaces y.  The
closed-form `parallel` path is then not used (both forms run the per-token loop of the other memories).
Gradients (adaptive CMS, A13): the fast-weight state and the conv history are stop-gradient; only the
token's own path (u_t -> q_t -> y_t, gate, residual) carries gradient.
"""

import torch

from . import ops
from .hope_chunk import parallel_piece
from .hope_memory import HopeMemory

PRODUCERS = ("k", "v", "eta", "alpha")


class SelfModTitans:
    """Weights of one layer's mixer (prefix p = "model.layers.{i}.attn.") and its two forms."""

    parallel = True      # run_chunks solves the piece's recurrence in closed form where it can (hope_chunk.py)
    mc = None            # mc_hope.HopeMemoryCaching when Memory Caching is on (owns M_mem)

    def __init__(self, cfg, W, p):
        self.cfg = cfg
        D, H, d, E = cfg["hidden_size"], cfg["num_heads"], cfg["head_dim"], cfg["d_hid"]
        self.D, self.H, self.d, self.E = D, H, d, E
        self.Co, self.Cm = cfg["chunk_size_other"], cfg["chunk_size_mem"]
        self.names = PRODUCERS + (("q",) if cfg["adaptive_q"] else ()) + ("mem",)
        self.mems, self.init = {}, {}
        for n in self.names:
            o = 1 if n in ("eta", "alpha") else d
            skip = W(p + "memory.%s.skip" % n, (H, d)) if o == 1 and cfg["scalar_memory_skip"] == "linear" else None
            self.mems[n] = HopeMemory(d, o, cfg["memory_activation"], cfg["grad_scale"], cfg["w1_rule"], skip)
            self.init[n] = {"W1": W(p + "memory.%s.w1" % n, (H, o, E)), "W2": W(p + "memory.%s.w2" % n, (H, E, d))}
        self.w_in = W(p + "in_proj.weight", (H * d, D)) if cfg["memory_input"] == "proj" else None
        self.wq = None if cfg["adaptive_q"] else W(p + "q_proj.weight", (H * d, D))
        self.convs = {c: W(p + "%s_conv1d.weight" % c, (H * d, 1, cfg["conv_size"]))[:, 0, :] for c in "qkv"}
        self.wbeta = W(p + "beta_proj.weight", (H, D)) if cfg["momentum"] == "data" else None
        self.wg = W(p + "g_proj.weight", (H * d, D)) if cfg["output_gate"] == "rmsnorm_silu_gate" else None
        self.onorm = W(p + "o_norm.weight", (d,))
        self.wo = W(p + "o_proj.weight", (D, H * d))
        self.eps = cfg["norm_eps"]

    def own(self):
        """The memories whose running weights and anchors live in the mixer state (all but mem with MC)."""
        return self.names if self.mc is None else tuple(n for n in self.names if n != "mem")

    # ------------------------------------------------------------------ state
    def new_state(self):
        """t (tokens seen), conv tails [K-1, H*d] of q~, k~, v~ (oldest first), running weights `run`
        (+ momentum S1, S2 at 0) and anchors `anch` of every memory, all from the learned initial weights."""
        K = self.cfg["conv_size"]
        z = torch.zeros(K - 1, self.H * self.d, dtype=self.onorm.dtype)
        st = {"t": 0, "conv_q": z, "conv_k": z.clone(), "conv_v": z.clone(), "run": {}, "anch": {}}
        for n in self.own():
            w = dict(self.init[n])
            if self.cfg["momentum"] != "none":
                w["S1"], w["S2"] = torch.zeros_like(w["W1"]), torch.zeros_like(w["W2"])
            st["run"][n] = w
            st["anch"][n] = dict(self.init[n])
        return st

    def _refresh(self, st, t):
        """Anchors for token t (1-based): copy running -> anchor where (t-1) % C == 0 (A6)."""
        for n in self.own():
            C = self.Cm if n == "mem" else self.Co
            if (t - 1) % C == 0:
                st["anch"][n] = {"W1": st["run"][n]["W1"], "W2": st["run"][n]["W2"]}

    # ------------------------------------------------------------------ token pipeline (batched over n)
    def _conv(self, c, z, st):
        """SiLU(causal depthwise conv) of z [n, H*d] after the tail st["conv_c"]; updates the tail.
        Only the current token's tap carries gradient (history is recurrent state)."""
        w = self.convs[c]                                     # [H*d, K]
        K = w.shape[1]
        full = torch.cat([st["conv_" + c], z.detach()], 0)   # [K-1+n, H*d]
        y = sum(w[:, i] * full[i:i + z.shape[0]] for i in range(K))
        y = y + w[:, K - 1] * (z - z.detach())
        st["conv_" + c] = full[full.shape[0] - (K - 1):]
        return ops.silu(y)

    def features(self, u, st):
        """Producers at the anchors, conv, norms and gates for u [n, D] (one anchor piece).
        Returns q, k, v [n, H, d] and alpha, eta, beta [n, H] (beta None without momentum)."""
        n, H, d = u.shape[0], self.H, self.d
        x = (u if self.w_in is None else u @ self.w_in.T).view(n, H, d)
        A = st["anch"]
        kt = self.mems["k"].forward(A["k"], x).reshape(n, H * d)
        vt = self.mems["v"].forward(A["v"], x).reshape(n, H * d)
        et = self.mems["eta"].forward(A["eta"], x)[..., 0]
        at = self.mems["alpha"].forward(A["alpha"], x)[..., 0]
        qt = (self.mems["q"].forward(A["q"], x).reshape(n, H * d) if self.wq is None else u @ self.wq.T)
        q = ops.l2norm(self._conv("q", qt, st).view(n, H, d))
        k = ops.l2norm(self._conv("k", kt, st).view(n, H, d))
        v = self._conv("v", vt, st).view(n, H, d)
        alpha = torch.sigmoid(at)
        if self.cfg["eta_activation"] == "sigmoid":
            eta = self.cfg["eta_max"] * torch.sigmoid(et)
        else:
            eta = self.cfg["eta_scale"] * ops.softplus(et)
        if self.cfg["eta_clamp"]:
            eta = torch.minimum(eta, 1.0 + alpha)
        beta = None
        if self.cfg["momentum"] == "constant":
            beta = torch.full_like(alpha, self.cfg["momentum_beta"])
        elif self.cfg["momentum"] == "data":
            beta = torch.sigmoid(u @ self.wbeta.T)
        return dict(q=q, k=k, v=v, alpha=alpha, eta=eta, beta=beta)

    def all_factors(self, f, st):
        """For every memory: v_hat = M(v; anchor), then (e, a, b) at the anchor for the keys k.
        f: features of n tokens (detached).  Returns {name: (e, a, b)} with [n, H, .] tensors."""
        out = {}
        for n in self.own():
            A = st["anch"][n]
            out[n] = self.mems[n].factors(A, f["k"], self.mems[n].forward(A, f["v"]))
        return out

    def write(self, st, fac, f, i):
        """Token i of the piece writes into every memory's running weights (§3.5)."""
        beta = None if f["beta"] is None else f["beta"][i]
        for n in self.own():
            st["run"][n] = self.mems[n].update(st["run"][n], tuple(x[i] for x in fac[n]), f["k"][i],
                                               f["alpha"][i], f["eta"][i], beta)

    def output(self, u, y):
        """o [n, D] from the read-outs y [n, H, d] and the block input u [n, D]."""
        n = u.shape[0]
        if self.wg is not None:
            o = ops.gated_rms_norm(y, (u @ self.wg.T).view(n, self.H, self.d), self.onorm, self.eps, "swish")
        else:
            o = ops.rms_norm(y, self.onorm, self.eps)
        return o.reshape(n, -1) @ self.wo.T

    def _piece(self, u, st):
        """One anchor piece u [n, D] (no refresh inside): features, factors, recurrence, read-outs."""
        f = self.features(u, st)
        fd = {k: (None if v is None else v.detach()) for k, v in f.items()}
        fac = self.all_factors(fd, st)
        mem = self.mems["mem"]
        if self.mc is not None:
            for i in range(u.shape[0]):
                self.write(st, fac, fd, i)
            feats = {k: v for k, v in dict(fd, q=f["q"]).items() if v is not None}
            feats["t"] = torch.arange(st["t"] + 1, st["t"] + 1 + u.shape[0])
            y = self.mc.run(u, feats, st)
        elif self.parallel and u.shape[0] > 1 and self.cfg["momentum"] == "none" and self.cfg["w1_rule"] == "retention":
            y = self._parallel(st, fac, fd, f["q"])
        elif self.cfg["readout_mode"] == "A":
            y = mem.forward(st["anch"]["mem"], f["q"])
            for i in range(u.shape[0]):
                self.write(st, fac, fd, i)
        else:
            ys = []
            after = self.cfg["read_index"] == "after_write"
            for i in range(u.shape[0]):
                if not after:
                    ys.append(mem.forward(st["run"]["mem"], f["q"][i]))
                self.write(st, fac, fd, i)
                if after:
                    ys.append(mem.forward(st["run"]["mem"], f["q"][i]))
            y = torch.stack(ys, 0)
        st["t"] += u.shape[0]
        return self.output(u, y)

    def _parallel(self, st, fac, fd, q):
        """The piece's recurrences in closed form (hope_chunk.py): end states of every memory and the
        mode-R read-outs of mem from the UT transform; mode A reads the anchor.  Returns y [n, H, d]."""
        y = None
        for n in self.names:
            read = q if (n == "mem" and self.cfg["readout_mode"] == "R") else None
            st["run"][n], yn = parallel_piece(self.mems[n], st["run"][n], fac[n], fd["k"], fd["alpha"], fd["eta"],
                                              read, self.cfg["read_index"] == "after_write")
            if read is not None:
                y = yn
        return y if y is not None else self.mems["mem"].forward(st["anch"]["mem"], q)

    # ------------------------------------------------------------------ the two forms
    def step_token(self, u, st):
        """Per-token recurrent form (§3.2): u [D] -> o [D]; st mutated."""
        self._refresh(st, st["t"] + 1)
        return self._piece(u.unsqueeze(0), st)[0]

    def run_chunks(self, u, st):
        """Chunk-wise form (§3.6): u [T, D] -> o [T, D], cut at every anchor refresh; st mutated."""
        outs, i, T = [], 0, u.shape[0]
        while i < T:
            t = st["t"] + 1
            self._refresh(st, t)
            n = 1
            while i + n < T and (t + n - 1) % self.Co != 0 and (t + n - 1) % self.Cm != 0:
                n += 1
            outs.append(self._piece(u[i:i + n], st))
            i += n
        return torch.cat(outs, 0) if outs else u.new_zeros(0, self.D)
