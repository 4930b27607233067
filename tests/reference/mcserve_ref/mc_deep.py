"""Memory Caching on the deep (MLP) memories of `titans` (memory_depth 2) and `dla`
(docs/memory-caching.md "Deep memories", specs/mc.md B.5).

A subclass of mc.MemoryCaching: config, segments, pools, gate scores and SSC's router are the same
code.  What differs:

* a memory is a deep_rules memory dict (running weights, momentum, anchor, inner-chunk counter); a
  cache / snapshot holds **only the weights** {"W1", "W2"} (never momentum or anchor);
* independent mode: every block's memory is a fresh one (W = A = the learned initial weights,
  momentum 0, inner chunks counted from the block's first token) run over exactly that block;
* checkpoint mode: one running memory, snapshotted after every token; with constant segmentation
  it is realigned at every segment start (the segment's first token starts a new inner chunk; the
  weights and the momentum continue).  Logarithmic + checkpoint never realigns (inner chunks every b
  tokens from the sequence start);
* every memory is read by its own MLP forward M_W(q) (q = the unscaled, L2-normalised query):
    residual  y = M_on(q) + sum_i M_i(q)               (no collapse; each M_i carries its own +q)
    grm / ssc y = g_on M_on(q) + sum_i g_i M_i(q)      (g as mc.py; SSC: 0 for unselected)
    soup      activation mixing over {cached} + online (soup_read), = M_{sum g_i W_i}(q) exactly
    mean      y = M_on(q) + M_Wbar(q) (add) or 1/2 (M_on(q) + M_Wbar(q)) (average),
              Wbar = (1/N) sum_i W_i the weight-space mean of the N cached memories.
"""

import torch

from . import mc
from .mlp_memory import gelu, layer_norm


def mean_weights(ws):
    """Weight-space mean {"W1": (1/N) sum_i W1_i, "W2": ...} of N weight dicts (W1 [H, d, E], W2 [H, E, d])."""
    out = {}
    for name in ("W1", "W2"):
        total = ws[0][name]
        for w in ws[1:]:
            total = total + w[name]
        out[name] = total / len(ws)
    return out


def soup_read(mlp, ws, gam, q, act=gelu):
    """Memory Soup by activation mixing (specs/mc.md B.5.3), per head:
        z* = sum_i g_i (W2_i q)     [H, E]
        h* = GELU(z*)               (act: the memory's activation; GELU for titans/dla)
        y  = sum_i g_i (W1_i h*)    [H, d]
        out = q + y   (q + LN(y) with the layer norm on)
    mlp: the layer's MLPMemory; ws: list of N weight dicts; gam [N, H]; q [H, d] -> [H, d]."""
    col = lambda i: gam[i].view(-1, 1)  # noqa: E731   [H] -> [H, 1]
    z = col(0) * torch.einsum("hed,hd->he", ws[0]["W2"], q)
    for i in range(1, len(ws)):
        z = z + col(i) * torch.einsum("hed,hd->he", ws[i]["W2"], q)
    h = act(z)
    y = col(0) * torch.einsum("hde,he->hd", ws[0]["W1"], h)
    for i in range(1, len(ws)):
        y = y + col(i) * torch.einsum("hde,he->hd", ws[i]["W1"], h)
    if mlp.use_ln:
        y = layer_norm(y, mlp.ln_w, mlp.ln_b, mlp.eps)
    return q + y


def soup_weights(ws, gam):
    """The souped weights {"W1": sum_i g_i W1_i, "W2": sum_i g_i W2_i} materialised per head
    (test oracle for soup_read).  ws: list of N weight dicts; gam [N, H]."""
    out = {}
    for name in ("W1", "W2"):
        total = gam[0].view(-1, 1, 1) * ws[0][name]
        for i in range(1, len(ws)):
            total = total + gam[i].view(-1, 1, 1) * ws[i][name]
        out[name] = total
    return out


class DeepMemoryCaching(mc.MemoryCaching):
    """MC for one deep-memory layer; `rule` is the layer's deep_rules.DeepRule."""

    materialise_soup = False    # test hook: soup as M_{sum g_i W_i}(q) with the weights mixed explicitly

    def _block_mem(self, st, a, b):
        """Memory dict of a fresh memory run over exactly tokens a..b (memoised; continues from the
        longest memoised (a, b') with b' < b, which is the same sequence of updates)."""
        if (a, b) not in st.memo:
            start, mem = a, self.rule.fresh()
            for e in range(b - 1, a - 1, -1):
                if (a, e) in st.memo:
                    start, mem = e + 1, st.memo[(a, e)]
                    break
            for p in range(start, b + 1):
                mem = self.rule.update(mem, st.hist[p - 1])
            st.memo[(a, b)] = mem
        return st.memo[(a, b)]

    def _fresh_block(self, st, a, b):
        """Weights of a fresh memory run over exactly tokens a..b."""
        return self.rule.weights(self._block_mem(st, a, b))

    def _advance_running(self, st, n):
        """Checkpoint mode: the running memory absorbs token n (realigned at constant segment starts);
        its weights are snapshotted."""
        cfg = self.cfg
        if st.run is None:
            st.run = self.rule.fresh()
        elif cfg["segmentation"] == "constant" and (n - 1) % cfg["segment_size"] == 0:
            st.run = self.rule.align(st.run)
        st.run = self.rule.update(st.run, st.hist[n - 1])
        st.snap.append(self.rule.weights(st.run))

    def _online_weights(self, st, n, online):
        """The weights the online read of token n uses: the memory after token n (read after the write)."""
        if self.cfg["init_mode"] == "checkpoint":
            return st.snap[n - 1]
        return self._fresh_block(st, *online)

    def _soup(self, ws, g, q):
        """Soup read of the weight sets ws (cached ..., online) with gates g [N + 1, Hs] at q."""
        return soup_read(self.rule.mlp, ws, g, q)

    def _token(self, st, n, q, u):
        """The aggregated read-out [Hs, d] of token n (q, u [Hs, d])."""
        cfg = self.cfg
        cached, online = mc.segments(n, cfg["segmentation"], cfg["segment_size"])
        if cfg["init_mode"] == "checkpoint":
            W_c = [st.snap[b - 1] for (a, b) in cached]
        else:
            W_c = [self._fresh_block(st, a, b) for (a, b) in cached]
        W_on = self._online_weights(st, n, online)
        rd = self.rule.read
        o_on = rd(W_on, q)
        if not cached:
            return o_on
        agg = cfg["aggregation"]
        N = len(cached)
        if agg == "residual":
            y = o_on
            for W in W_c:
                y = y + rd(W, q)
            return y
        if agg == "mean":
            o_mean = rd(mean_weights(W_c), q)
            return o_on + o_mean if cfg["mean_combine"] == "add" else 0.5 * (o_on + o_mean)
        g = self._gammas(st, cached, online, u, o_on.dtype)             # [N + 1, Hs], row N = online
        if agg == "soup":
            if self.materialise_soup:
                return rd(soup_weights(W_c + [W_on], g), q)
            return self._soup(W_c + [W_on], g, q)
        y = g[N].view(-1, 1) * o_on                                      # grm, ssc
        for i in range(N):
            y = y + g[i].view(-1, 1) * rd(W_c[i], q)
        return y
