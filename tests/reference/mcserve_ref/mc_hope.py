"""Memory Caching on HOPE's self-modifying Titans mixer (docs/memory-caching.md "Memory Caching on
hope"); the engine's is engine/mc/hope_rule.cc, checked against the goldens in tests/data/mc/hope.

What is cached is M_mem alone — its running weights {W1, W2} after each segment's last token.  The
other memories (M_k, M_v, M_eta, M_alpha, M_q), the conv windows and the CMS are the layer's
adaptive projections, not its memory: they are neither cached nor restarted, and run as without MC.

With MC on, the mixer hands M_mem to this object: per token it gets the features exactly as M_mem's
write sees them (k, v, alpha, eta, beta after conv / SiLU / L2 / gates, all computed by the mixer as
without MC), the read-out query q and the token's position t in the request.  Everything else is
mc_deep.DeepMemoryCaching (itself mc.MemoryCaching): segments, brute-force blocks, snapshots, pools,
gate scores, SSC's router, residual / grm / ssc / mean / soup.  What differs:

* `HopeMemRule` is M_mem with the DeepRule interface: fresh() = W = anchor = the learned initial
  weights `memory.mem.w1/w2`, momentum 0; update() refreshes the anchor from the running weights where
  (t - 1) % chunk_size_mem == 0 (the chunk phase counted from the request's first token, as without
  MC, so a restarted memory keeps the initial weights as anchor up to the next global refresh), then
  takes the closed-form gradient factors at the anchor (v_hat = M(v; anchor)) and applies
  HopeMemory.update; align() is the identity (checkpoint mode: M_mem simply continues);
* the online read-out is exactly the layer's read-out without MC, taken on the online memory
  (the block's fresh memory in independent mode, the running one in checkpoint mode):
      readout_mode R, before_write:  M(q_t; W after token t-1 of that memory; its start if none)
      readout_mode R, after_write:   M(q_t; W after token t)
      readout_mode A:                M(q_t; the anchor token t's write used)
  and soup mixes those online weights with the cached ones;
* soup reads with the model's memory_activation sigma (R(q) = q for M_mem): q + sum g W1 sigma(sum g W2 q).

The gate weights of grm / ssc / soup are plain numbers (as in mc.py); MC is therefore not defined
with cms_adaptive (hope_config rejects the combination).
"""

import torch

from . import mc_deep


class HopeMemRule:
    """M_mem of one layer as mc_deep.DeepMemoryCaching sees it.  mixer: the layer's SelfModTitans."""

    family = "hope"
    use_ln = False           # soup_read: no layer norm on the memory's output

    def __init__(self, mixer):
        self.mem = mixer.mems["mem"]
        self.W1_0, self.W2_0 = mixer.init["mem"]["W1"], mixer.init["mem"]["W2"]
        self.Cm = mixer.Cm
        self.momentum = mixer.cfg["momentum"] != "none"
        self.Hs, self.K, self.V = mixer.H, mixer.d, mixer.d

    def fresh(self):
        """A memory at its start: W = A = the learned initial weights, momentum 0."""
        m = {"W1": self.W1_0, "W2": self.W2_0, "A1": self.W1_0, "A2": self.W2_0}
        if self.momentum:
            m["S1"], m["S2"] = torch.zeros_like(self.W1_0), torch.zeros_like(self.W2_0)
        return m

    def align(self, m):
        """Checkpoint mode at a constant segment start: M_mem continues (the anchor phase is global)."""
        return m

    def update(self, m, f):
        """Absorb token f["t"] (1-based position in the request): anchor refresh, factors, write."""
        m = dict(m)
        if (int(f["t"]) - 1) % self.Cm == 0:
            m["A1"], m["A2"] = m["W1"], m["W2"]
        A = {"W1": m["A1"], "W2": m["A2"]}
        fac = self.mem.factors(A, f["k"], self.mem.forward(A, f["v"]))
        run = {n: m[n] for n in ("W1", "W2", "S1", "S2") if n in m}
        m.update(self.mem.update(run, fac, f["k"], f["alpha"], f["eta"], f.get("beta")))
        return m

    def weights(self, m):
        """What a cache holds: the running weights only (never momentum or anchor)."""
        return {"W1": m["W1"], "W2": m["W2"]}

    matrix = weights

    def anchor(self, m):
        return {"W1": m["A1"], "W2": m["A2"]}

    def read(self, w, q):
        """M_mem(q; w) = q + W1 sigma(W2 q), [H, d]."""
        return self.mem.forward(w, q)


class HopeMemoryCaching(mc_deep.DeepMemoryCaching):
    """MC for one HOPE layer.  run(u, feats, st): u [n, D] the block's normalised input (gate u_proj),
    feats q, k, v [n, H, d], alpha, eta (, beta) [n, H], t [n] positions; returns y [n, H, d]."""

    def __init__(self, cfg, mixer, w_u=None):
        rule = HopeMemRule(mixer)
        super().__init__(cfg, rule, rule.Hs, w_u)
        self.readout_mode = mixer.cfg["readout_mode"]
        self.after_write = mixer.cfg["read_index"] == "after_write"

    def _online_weights(self, st, n, online):
        a = online[0]
        if self.cfg["init_mode"] == "checkpoint":
            a = 1
            mem_n = st.run                       # the running memory, just after token n
        else:
            mem_n = self._block_mem(st, a, n)
        if self.readout_mode == "A":
            return self.rule.anchor(mem_n)
        if self.after_write:
            return self.rule.weights(mem_n)
        if n == a:                               # before the write of the memory's first token
            return self.rule.weights(self.rule.fresh())
        if self.cfg["init_mode"] == "checkpoint":
            return st.snap[n - 2]
        return self._fresh_block(st, a, n - 1)

    def _soup(self, ws, g, q):
        return mc_deep.soup_read(self.rule, ws, g, q, act=self.rule.mem.sig)
