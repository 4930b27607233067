"""Memory Caching (MC) for the reference's linear memories (docs/memory-caching.md, specs/mc.md B).

Written as a slow, brute-force oracle, deliberately unlike an efficient engine:

* per token, the segment lists are recomputed from n alone (`segments(n, ...)`): constant size C ->
  the closed segments before the token + the open one; logarithmic -> the binary decomposition of n,
  online = the last block;
* independent mode: every block's memory is a *fresh* memory run over exactly that block's tokens
  (memoised per (first, last) token, recomputed from the stored per-token features);
* checkpoint mode: one running memory; its matrix is snapshotted after every token and a cached
  segment is the snapshot at the segment's last token;
* aggregation per state head with explicit loops: residual as an explicit sum, GRM/SSC as a softmax
  mixture of read-outs (online included), soup by literally mixing the matrices and reading once,
  mean by averaging the cached matrices.

MC acts on the raw read-out o = S^T q (q already scaled), before the layer's output norm / gate.
The per-layer state (`McState`) keeps the whole per-token history, so `step()` in any chunking
equals `forward()`.
"""

import math

import torch

from . import ops

AGGREGATIONS = ("residual", "grm", "soup", "ssc", "mean")
FIELDS = ("aggregation", "segmentation", "segment_size", "init_mode", "gate", "pool", "top_k",
          "mean_combine", "layers", "swla_cross_boundary")


# =============================================================================== config

def resolve_mc_config(obj, num_layers):
    """`memory_caching` object of config.json -> fully resolved dict, or None when MC is off.

    Off: object absent/null or aggregation "none".  `gate` stays None when not given (the default
    is decided per layer: u_proj iff that layer's checkpoint has `attn.mc.u_proj.weight`).
    """
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise ValueError("memory_caching must be an object")
    unknown = set(obj) - set(FIELDS)
    if unknown:
        raise ValueError("memory_caching: unknown fields %s" % sorted(unknown))
    agg = obj.get("aggregation", "grm")
    if agg is None:
        agg = "grm"
    if agg == "none":
        return None
    if agg not in AGGREGATIONS:
        raise ValueError("memory_caching.aggregation: %r" % agg)

    def get(k, default):
        v = obj.get(k)
        return default if v is None else v

    r = dict(aggregation=agg,
             segmentation=get("segmentation", "constant"),
             segment_size=get("segment_size", 256),
             init_mode=get("init_mode", "independent"),
             gate=obj.get("gate"),
             pool=get("pool", "mean"),
             top_k=get("top_k", 2),
             mean_combine=get("mean_combine", "add"),
             layers=get("layers", "all"))
    if r["segmentation"] not in ("constant", "logarithmic"):
        raise ValueError("memory_caching.segmentation: %r" % r["segmentation"])
    if isinstance(r["segment_size"], bool) or not isinstance(r["segment_size"], int) or r["segment_size"] < 1:
        raise ValueError("memory_caching.segment_size must be an integer >= 1")
    if r["init_mode"] not in ("independent", "checkpoint"):
        raise ValueError("memory_caching.init_mode: %r" % r["init_mode"])
    if r["gate"] not in (None, "q", "u_proj"):
        raise ValueError("memory_caching.gate: %r" % r["gate"])
    if r["pool"] not in ("mean", "sum"):
        raise ValueError("memory_caching.pool: %r" % r["pool"])
    if isinstance(r["top_k"], bool) or not isinstance(r["top_k"], int) or r["top_k"] < 1:
        raise ValueError("memory_caching.top_k must be an integer >= 1")
    if r["mean_combine"] not in ("add", "average"):
        raise ValueError("memory_caching.mean_combine: %r" % r["mean_combine"])
    if agg == "mean" and r["segmentation"] != "constant":
        raise ValueError("memory_caching: aggregation mean requires constant segmentation")
    if r["layers"] == "all":
        r["layers"] = list(range(num_layers))
    else:
        if not isinstance(r["layers"], list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                        for i in r["layers"]):
            raise ValueError("memory_caching.layers must be \"all\" or a list of layer indices")
        if any(i < 0 or i >= num_layers for i in r["layers"]):
            raise ValueError("memory_caching.layers: index out of range")
        r["layers"] = sorted(set(r["layers"]))
    cb = obj.get("swla_cross_boundary")
    if cb is None:
        cb = r["init_mode"] == "checkpoint"
    if not isinstance(cb, bool):
        raise ValueError("memory_caching.swla_cross_boundary must be a bool")
    r["swla_cross_boundary"] = cb
    return r


# =============================================================================== segmentation

def lowbit(n):
    return n & -n


def ctz(n):
    return (n & -n).bit_length() - 1


def segments(n, segmentation, C=None):
    """Token n (1-based) -> (cached, online): lists of inclusive (first, last) token ranges.

    constant:    cached = the s-1 closed segments [(i-1)C+1, iC], online = [(s-1)C+1, n], s = ceil(n/C).
    logarithmic: n = sum 2^b (b descending) -> aligned dyadic blocks, oldest first; the last block
                 (size lowbit(n), ending at n) is online, the others are cached.
    """
    assert n >= 1
    if segmentation == "constant":
        s = (n + C - 1) // C
        cached = [((i - 1) * C + 1, i * C) for i in range(1, s)]
        return cached, ((s - 1) * C + 1, n)
    blocks, start = [], 0
    for b in range(n.bit_length() - 1, -1, -1):
        if n >> b & 1:
            blocks.append((start + 1, start + (1 << b)))
            start += 1 << b
    assert start == n
    return blocks[:-1], blocks[-1]


def block_level(block):
    a, b = block
    size = b - a + 1
    return size.bit_length() - 1


# =============================================================================== memories

class MemoryRule:
    """One family's linear memory as seen by MC.  A memory is a dict of tensors over all state heads;
    `update` applies the base recurrence for one token (reusing ops.* so that the arithmetic is the
    base model's), `matrix` is what a checkpoint stores (memory only, never momentum), `read` is
    S^T q (q already scaled), with the base model's own contraction."""

    def __init__(self, family, Hs, K, V, dtype, lattice=None):
        self.family, self.Hs, self.K, self.V, self.dtype = family, Hs, K, V, dtype
        self.lattice = lattice   # lattice: dict(s0 [Hs, K, V], variant, renorm, readout) (mixer's settings)

    def fresh(self):
        z = lambda *s: torch.zeros(*s, dtype=self.dtype)  # noqa: E731
        if self.family == "lattice":   # a fresh memory starts at S_0, not at zero
            return {"M": self.lattice["s0"].clone()}
        if self.family == "swla":
            return {"M": z(self.Hs, self.K, self.V), "k_prev": z(self.Hs, self.K), "v_prev": z(self.Hs, self.V)}
        if self.family == "titans":
            return {"M": z(self.Hs, self.K, self.V), "S": z(self.Hs, self.K, self.V)}
        return {"S": z(self.Hs, self.K, self.V)}

    def matrix(self, mem):
        return mem["M"] if self.family in ("swla", "titans", "lattice") else mem["S"]

    def read(self, S, q):
        if self.family in ("linear_attn", "gla"):
            return torch.einsum("hk,hkv->hv", q, S)
        if self.family == "lattice":   # lattice_step's own contraction, per head
            return torch.stack([S[h].T @ q[h] for h in range(S.shape[0])])
        return torch.einsum("hkv,hk->hv", S, q)

    def update(self, mem, f):
        """f: one token's features (each [Hs, ...]).  Returns the new memory (inputs untouched)."""
        one = lambda name: f[name].unsqueeze(0)  # noqa: E731
        dq = torch.zeros_like(one("k"))           # the op's read-out is discarded
        fam = self.family
        if fam == "linear_attn":
            _, S, _ = ops.linear_attn_recurrent(dq, one("k"), one("v"), 1.0, False, mem["S"],
                                                torch.zeros(self.Hs, self.K, dtype=self.dtype))
            return {"S": S}
        if fam == "gla":
            return {"S": ops.gla_recurrent(dq, one("k"), one("v"), one("gk"), 1.0, mem["S"])[1]}
        if fam == "delta_net":
            return {"S": ops.delta_rule_recurrent(dq, one("k"), one("v"), one("beta"), 1.0, mem["S"])[1]}
        if fam == "gated_deltanet":
            return {"S": ops.gated_delta_rule_recurrent(dq, one("k"), one("v"), one("g"), one("beta"), 1.0,
                                                        mem["S"])[1]}
        if fam == "swla":
            _, M, kp, vp = ops.swla_recurrent(dq, one("k"), one("v"), one("alpha"), one("beta"), one("lam"), 1.0,
                                              mem["M"], mem["k_prev"], mem["v_prev"])
            return {"M": M, "k_prev": kp, "v_prev": vp}
        if fam == "lattice":
            from . import lattice
            L = self.lattice
            M = torch.stack([lattice.lattice_step(mem["M"][h], f["q"][h], f["k"][h], f["v"][h], f["gamma"][h],
                                                  f["mu"][h], L["variant"], L["renorm"], L["readout"])[1]
                             for h in range(self.Hs)])
            return {"M": M}
        if fam == "titans":
            M, S = ops.titans_step(mem["M"], mem["S"], f["k"], f["v"], f["alpha"], f["eta"], f["theta"])
            return {"M": M, "S": S}
        raise ValueError(fam)


# =============================================================================== per-layer MC

class McState:
    """Everything MC keeps for one layer of one sequence (grows with the sequence: an oracle)."""

    def __init__(self):
        self.n = 0          # tokens processed
        self.hist = []      # per token: dict of features (q, k, v, gates), each [Hs, ...]
        self.run = None     # checkpoint mode: the running memory
        self.snap = []      # checkpoint mode: snap[p-1] = running memory matrix after token p
        self.memo = {}      # independent mode: (first, last) -> matrix of a fresh memory over that block
        self.pools = {}     # (first, last) -> pooled key of that block


class MemoryCaching:
    """MC for one layer.  `run(x, feats, st)` returns the aggregated raw read-out [T, Hs, V].

    feats: q [T, Hs, K] (scaled read-out query, mapped to state heads), k [T, Hs, K] (the key as it
    enters the update, mapped to state heads), v [T, Hs, V] and the family's per-token gates.
    x: the layer's normalised input [T, hidden] (for gate u_proj)."""

    def __init__(self, cfg, rule, q_heads, w_u=None):
        self.cfg = cfg
        self.rule = rule
        self.q_heads = q_heads
        self.rep = rule.Hs // q_heads          # state heads per query head (GVA), 1 otherwise
        self.w_u = w_u                         # [q_heads * K, hidden] or None (gate q)
        self.presum_residual = False           # test hook: residual as read(S_on + sum S_i, q)
        if rule.family == "swla" and cfg["init_mode"] == "checkpoint" and not cfg["swla_cross_boundary"] \
                and cfg["segmentation"] == "logarithmic":
            raise NotImplementedError("swla_cross_boundary false with checkpoint mode and logarithmic "
                                      "segmentation has no segment start to reset at")

    def new_state(self):
        return McState()

    # ------------------------------------------------------------------ memories
    def _fresh_block(self, st, a, b):
        """Matrix of a fresh memory (zero state, zero momentum) run over exactly tokens a..b."""
        key = (a, b)
        if key not in st.memo:
            mem = self.rule.fresh()
            if self.rule.family == "swla" and self.cfg["swla_cross_boundary"] and a > 1:
                mem["k_prev"], mem["v_prev"] = st.hist[a - 2]["k"], st.hist[a - 2]["v"]
            for p in range(a, b + 1):
                mem = self.rule.update(mem, st.hist[p - 1])
            st.memo[key] = self.rule.matrix(mem)
        return st.memo[key]

    def _advance_running(self, st, n):
        """Checkpoint mode: the single running memory absorbs token n; snapshot its matrix."""
        if st.run is None:
            st.run = self.rule.fresh()
        if (self.rule.family == "swla" and not self.cfg["swla_cross_boundary"]
                and self.cfg["segmentation"] == "constant" and n > 1 and (n - 1) % self.cfg["segment_size"] == 0):
            st.run = dict(st.run, k_prev=torch.zeros_like(st.run["k_prev"]),
                          v_prev=torch.zeros_like(st.run["v_prev"]))
        st.run = self.rule.update(st.run, st.hist[n - 1])
        st.snap.append(self.rule.matrix(st.run))

    def _pool(self, st, a, b):
        """Mean (or sum) of the keys of tokens a..b, exactly the k that entered the memory update."""
        if (a, b) not in st.pools:
            ks = [st.hist[p - 1]["k"] for p in range(a, b + 1)]
            total = ks[0]
            for k in ks[1:]:
                total = total + k
            st.pools[(a, b)] = total / len(ks) if self.cfg["pool"] == "mean" else total
        return st.pools[(a, b)]

    # ------------------------------------------------------------------ run
    def run(self, x, feats, st):
        mst = st.setdefault("mc", self.new_state())
        T = x.shape[0]
        if self.w_u is not None:
            u_all = (x @ self.w_u.T).view(T, self.q_heads, self.rule.K).repeat_interleave(self.rep, dim=1)
        else:
            u_all = feats["q"]
        outs = []
        for t in range(T):
            mst.hist.append({name: val[t] for name, val in feats.items()})
            mst.n += 1
            n = mst.n
            if self.cfg["init_mode"] == "checkpoint":
                self._advance_running(mst, n)
            outs.append(self._token(mst, n, feats["q"][t], u_all[t]))
        return torch.stack(outs, 0)

    def _token(self, st, n, q, u):
        cfg = self.cfg
        cached, online = segments(n, cfg["segmentation"], cfg["segment_size"])
        if cfg["init_mode"] == "checkpoint":
            S_c = [st.snap[b - 1] for (a, b) in cached]
            S_on = st.snap[n - 1]
        else:
            S_c = [self._fresh_block(st, a, b) for (a, b) in cached]
            S_on = self._fresh_block(st, *online)
        rd = self.rule.read
        o_on = rd(S_on, q)
        if not cached:
            return o_on
        agg = cfg["aggregation"]
        N = len(cached)
        S_stack = torch.stack(S_c, 0)                                   # [N, Hs, K, V]
        o_c = torch.einsum("nhkv,hk->nhv", S_stack, q)                  # o_i = S_i^T q, every cached i

        if agg == "residual":
            if self.presum_residual:
                R = S_c[0]
                for S in S_c[1:]:
                    R = R + S
                return rd(S_on + R, q)
            y = o_on
            for i in range(N):
                y = y + o_c[i]
            return y

        if agg == "mean":
            Msum = S_c[0]
            for S in S_c[1:]:
                Msum = Msum + S
            o_mean = rd(Msum / N, q)
            return o_on + o_mean if cfg["mean_combine"] == "add" else 0.5 * (o_on + o_mean)

        g = self._gammas(st, cached, online, u, o_on.dtype)             # [N + 1, Hs], 0 = not kept
        if agg == "soup":   # mix the matrices (online included), then read once
            S_mix = g[N].view(-1, 1, 1) * S_on
            for i in range(N):
                S_mix = S_mix + g[i].view(-1, 1, 1) * S_c[i]
            return rd(S_mix, q)
        y = g[N].view(-1, 1) * o_on                                      # grm, ssc
        for i in range(N):
            y = y + g[i].view(-1, 1) * o_c[i]
        return y

    def _gammas(self, st, cached, online, u, dtype):
        """Gate weights [N + 1, Hs] (row N = online; 0 = not kept by SSC's router) of the gated kinds:
        per state head, scores <u, pool>, softmax over the kept cached entries + online."""
        cfg = self.cfg
        N = len(cached)
        pools = torch.stack([self._pool(st, a, b) for (a, b) in cached], 0)     # [N, Hs, K]
        pool_on = self._pool(st, *online)
        z_c = torch.einsum("nhk,hk->nh", pools, u).tolist()
        z_on = (pool_on * u).sum(-1).tolist()
        Hs = self.rule.Hs
        gam = [[0.0] * Hs for _ in range(N + 1)]                         # gam[i][h]; i = N is online
        for h in range(Hs):
            z = [z_c[i][h] for i in range(N)]
            keep = list(range(N))
            if cfg["aggregation"] == "ssc" and N > cfg["top_k"]:
                # top_k largest scores, ties -> lower segment index; kept in segment order
                keep = sorted(sorted(keep, key=lambda i: (-z[i], i))[:cfg["top_k"]])
            w = _softmax([z[i] for i in keep] + [z_on[h]])
            for wi, i in zip(w[:-1], keep):
                gam[i][h] = wi
            gam[N][h] = w[-1]
        return torch.tensor(gam, dtype=dtype)


def _softmax(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = sum(e)
    return [v / s for v in e]
