"""GAM causal LM (docs/model-format.md (gam); "Gated Associative Memory: A Parallel O(N) Architecture
for Efficient Sequence Modeling", Acharya; the official `gam_model.GAM_Model`).

Per token t (positions p(t) = t; t >= block_size is an error unless position_overflow: clamp, then
p(t) = overflow_position), every layer:
    x_t = E_tok[id_t] + E_pos[p(t)]
    u_t = LN1(x_t)
    c_t = b_conv + sum_{j=0}^{k-1} w[:, 0, j] * u_{t-(k-1)+j}          depthwise causal conv, u_{<0} = 0
    g_t = Mb^T softmax(Mb u_t)                                          static memory bank [Ms, D], scale 1
    [gl; gg] = W_g u_t + b_g                                            first D: local gate, last D: global
    x_t += sigmoid(gl) * c_t + sigmoid(gg) * g_t
    x_t += W_2 GELU(W_1 LN2(x_t) + b_1) + b_2                           exact (erf) GELU
logits_t = LN_f(x_t) E_tok^T

State per layer: the last k-1 LN1 outputs u (oldest first, zeros at the start) and t.  The conv is the
only token mixing, so the state after t tokens depends only on the last n_layer (k-1) tokens
(`rebuild_state`).

    m = GamLM(config_dict, {name: tensor}, dtype=torch.float64)
    logits = m.forward(ids)            # [T, vocab], parallel form (F.conv1d with k-1 padding, as the code)
    st = m.new_state(); m.step(ids[:7], st); m.step(ids[7:], st)      # incremental, same logits
"""

import torch
import torch.nn.functional as F

from .gam_config import resolve_gam_config
from .gam_weights import EMB, load_weights


class GamLM:
    def __init__(self, config, tensors, dtype=torch.float64, strict=True):
        self.cfg = c = resolve_gam_config(config)
        self.dtype = dtype
        w = load_weights(c, tensors, dtype, strict)
        self.D, self.k, self.eps = c["n_embed"], c["conv_kernel_size"], c["layer_norm_eps"]
        self.emb, self.pos = w[EMB], w["pos_embedding.weight"]
        self.ln_f = (w["ln_f.weight"], w["ln_f.bias"])
        self.layers = [{k[len("blocks.%d." % i):]: v for k, v in w.items() if k.startswith("blocks.%d." % i)}
                       for i in range(c["n_layer"])]

    # ---------------------------------------------------------------- pieces
    def _ln(self, x, w, b):
        return F.layer_norm(x, (self.D,), w, b, self.eps)

    def positions(self, t0, n):
        """p(t) for t = t0..t0+n-1 (B.9.1): t below block_size; beyond, an error or overflow_position."""
        Np, c = self.cfg["block_size"], self.cfg
        if t0 + n > Np and c["position_overflow"] == "error":
            raise ValueError("gam: position %d is past the learned position table (block_size = %d tokens); set "
                             "position_overflow: clamp to run longer sequences (untrained behaviour)"
                             % (t0 + n - 1, Np))
        p = torch.arange(t0, t0 + n)
        return p.masked_fill(p >= Np, c["overflow_position"])

    def _mix(self, g, u, c):
        """Gated fusion of the conv output c with the memory-bank read-out of u ([n, D] each)."""
        mb = g["memory_bank"]
        glob = torch.softmax(u @ mb.T, -1) @ mb
        gl, gg = (u @ g["gate.weight"].T + g["gate.bias"]).split(self.D, -1)
        return torch.sigmoid(gl) * c + torch.sigmoid(gg) * glob

    def _ffn(self, g, x):
        a = self._ln(x, g["ln2.weight"], g["ln2.bias"]) @ g["ffn.0.weight"].T + g["ffn.0.bias"]
        return F.gelu(a) @ g["ffn.2.weight"].T + g["ffn.2.bias"]

    def _logits(self, x):
        return self._ln(x, *self.ln_f) @ self.emb.T

    # ---------------------------------------------------------------- state
    def new_state(self, t=0):
        """{"t": tokens seen, "conv": per layer [k-1, D], the last k-1 LN1 outputs, oldest first}."""
        return {"t": t, "conv": [torch.zeros(self.k - 1, self.D, dtype=self.dtype) for _ in self.layers]}

    def rebuild_state(self, ids_tail, t):
        """The state after t tokens, rebuilt from the last n_layer (k-1) of them (fewer if t is smaller):
        the tail runs at its original positions from zero conv buffers (B.4)."""
        ids_tail = list(ids_tail)
        if len(ids_tail) != min(t, self.cfg["receptive_tokens"]):
            raise ValueError("gam: rebuild_state needs the last min(t, %d) tokens, got %d"
                             % (self.cfg["receptive_tokens"], len(ids_tail)))
        st = self.new_state(t - len(ids_tail))
        if ids_tail:
            self.step(ids_tail, st)
        return st

    # ---------------------------------------------------------------- API
    @torch.no_grad()
    def step(self, ids, state):
        """Feed ids (>= 1 token) after `state` (mutated); logits [T, vocab].  The conv runs over the
        carried k-1 inputs followed by this call's."""
        ids = torch.as_tensor([int(i) for i in ids], dtype=torch.long)
        n = len(ids)
        x = self.emb[ids] + self.pos[self.positions(state["t"], n)]
        for l, g in enumerate(self.layers):
            u = self._ln(x, g["ln1.weight"], g["ln1.bias"])
            full = torch.cat([state["conv"][l], u], 0)                     # [k-1+n, D]
            w = g["causal_conv.weight"][:, 0, :]                           # [D, k]
            c = g["causal_conv.bias"] + sum(w[:, j] * full[j:j + n] for j in range(self.k))
            state["conv"][l] = full[n:]
            x = x + self._mix(g, u, c)
            x = x + self._ffn(g, x)
        state["t"] += n
        return self._logits(x)

    @torch.no_grad()
    def forward(self, ids):
        """Logits [T, vocab] from a fresh state, parallel form: the conv as torch's conv1d with k-1
        zeros of padding on both sides, keeping the first T outputs (the official code's way)."""
        ids = torch.as_tensor([int(i) for i in ids], dtype=torch.long)
        n = len(ids)
        x = self.emb[ids] + self.pos[self.positions(0, n)]
        for g in self.layers:
            u = self._ln(x, g["ln1.weight"], g["ln1.bias"])
            c = F.conv1d(u.T[None], g["causal_conv.weight"], g["causal_conv.bias"], padding=self.k - 1,
                         groups=self.D)[0, :, :n].T
            x = x + self._mix(g, u, c)
            x = x + self._ffn(g, x)
        return self._logits(x)

    @torch.no_grad()
    def greedy(self, ids, n):
        """n greedy tokens after ids (argmax, lowest id on ties, no EOS stop: GAM's data has none)."""
        st = self.new_state()
        logits = self.step(ids, st)[-1]
        out = []
        for _ in range(n):
            out.append(int(torch.argmax(logits)))
            logits = self.step([out[-1]], st)[-1]
        return out
