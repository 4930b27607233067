"""ARMT causal LM (docs/model-format.md (armt); "Associative Recurrent Memory Transformer", Rodkin et al.):
HF GPT-2 run over segments of S content tokens + M memory tokens, with a per-layer associative memory
(armt_memory.py) read before every block and written after it from the memory-token outputs.

Segment s (content ids X_s, S_s <= S tokens, content positions restart at 0 every segment):
    H = [wte[X_s] + wpe[0..S_s-1] ;  E_mem + wpe[S_s..S_s+M-1]]        (wrap_pos: wpe[Np..Np+M-1], Np = n_positions)
    per layer l:  H += read_l(H)  (skipped before the first write)
                  H  = GPT2Block_l(H)         causal attention over this segment's S_s + M rows only
                  (A_l, z_l) = write_l(H[S_s:])                         (first write: gamma 1, Vbar 0)
    logits = LN_f(H[:S_s]) wte^T              (memory rows' logits are never computed)
GPT-2 block (pre-LN; Conv1D weights [in, out]):
    a = LN_1(H); [q k v] = a W_attn + b_attn; o = softmax(q k^T / sqrt(head_dim) + causal) v
    H += o W_o + b_o;  H += gelu_tanh(LN_2(H) W_fc + b_fc) W_proj + b_proj

    m = ArmtLM(config_dict, {name: tensor}, dtype=torch.float64)
    logits = m.forward(ids)            # [T, vocab]: segment by segment as above (the official wrapper)
    st = m.new_state(); m.step(ids[:7], st); m.step(ids[7:], st)     # incremental, same logits
    toks = m.greedy(ids, 16)

`step` keeps the KV cache of the open segment only and closes a segment lazily, when the next token
would take content position S: the close runs the M memory tokens against that KV (a small prefill),
writes every layer's memory, frees the KV.  So a state after T tokens holds T - S*w content tokens
(1..S of them once T > 0) and w closed segments, whatever the split of the ids into calls.
"""

import math

import torch
import torch.nn.functional as F

from . import armt_memory as mem
from .armt_config import resolve_armt_config
from .armt_weights import PRE, load_weights


def gelu_tanh(x):
    """GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class ArmtLM:
    def __init__(self, config, tensors, dtype=torch.float64, strict=True):
        self.cfg = c = resolve_armt_config(config)
        self.dtype = dtype
        w, self.wrap_pos = load_weights(c, tensors, dtype, strict)
        self.S, self.M, self.Np = c["segment_size"], c["num_mem_tokens"], c["n_positions"]
        self.H, self.dh, self.D, self.F = c["n_head"], c["head_dim"], c["n_embd"], c["feat_dim"]
        if not self.wrap_pos and self.S + self.M > self.Np:
            raise ValueError("armt: segment_size + num_mem_tokens must be <= n_positions (%d), got %d"
                             % (self.Np, self.S + self.M))
        self.eps = c["layer_norm_epsilon"]
        self.memory, self.wte, self.wpe = w["memory_cell.memory"], w[PRE + "wte.weight"], w[PRE + "wpe.weight"]
        self.ln_f = (w[PRE + "ln_f.weight"], w[PRE + "ln_f.bias"])
        self.layers = []
        for i in range(c["n_layer"]):
            p = PRE + "h.%d." % i
            g = {k: w[p + k] for k in ("W_mq.weight", "W_mk.weight", "W_mv.weight", "W_mb.weight", "W_mb.bias")}
            g.update({k: w[p + "layer." + k] for k in (
                "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                "mlp.c_proj.weight", "mlp.c_proj.bias")})
            self.layers.append(g)

    # ---------------------------------------------------------------- pieces
    def _ln(self, x, wb):
        return F.layer_norm(x, (self.D,), wb[0], wb[1], self.eps)

    def _mem_positions(self, n_content):
        """Positions of the M memory rows after n_content content rows (A.3.2 / A.10.3)."""
        start = self.Np if self.wrap_pos else n_content
        return torch.arange(start, start + self.M)

    def _layer(self, l, h, A, z, first, K0, V0):
        """Layer l on new rows h [n, D] that follow the cached keys/values K0, V0 [H, c, dh] of this
        segment: read, then the GPT-2 block.  Returns (h, K, V) with K, V [H, c + n, dh]."""
        g = self.layers[l]
        if not first:
            h = h + mem.read(h, A, z, g["W_mq.weight"])
        n, c = h.shape[0], K0.shape[1]
        qkv = self._ln(h, (g["ln_1.weight"], g["ln_1.bias"])) @ g["attn.c_attn.weight"] + g["attn.c_attn.bias"]
        q, k, v = (t.reshape(n, self.H, self.dh).transpose(0, 1) for t in qkv.split(self.D, -1))
        K, V = torch.cat([K0, k], 1), torch.cat([V0, v], 1)
        s = q @ K.transpose(1, 2) / math.sqrt(self.dh)                       # [H, n, c + n]
        allowed = torch.arange(c + n)[None, :] <= (c + torch.arange(n))[:, None]
        att = torch.softmax(s.masked_fill(~allowed, float("-inf")), -1)
        o = (att @ V).transpose(0, 1).reshape(n, self.D)
        h = h + o @ g["attn.c_proj.weight"] + g["attn.c_proj.bias"]
        a = self._ln(h, (g["ln_2.weight"], g["ln_2.bias"])) @ g["mlp.c_fc.weight"] + g["mlp.c_fc.bias"]
        h = h + gelu_tanh(a) @ g["mlp.c_proj.weight"] + g["mlp.c_proj.bias"]
        return h, K, V

    def _write(self, l, O, A, z, first):
        g = self.layers[l]
        return mem.write(O, A, z, g["W_mk.weight"], g["W_mv.weight"], g["W_mb.weight"], g["W_mb.bias"], first,
                         self.cfg["correction"])

    def _logits(self, h):
        return self._ln(h, self.ln_f) @ self.wte.T

    def _empty_kv(self):
        return torch.zeros(self.H, 0, self.dh, dtype=self.dtype)

    # ---------------------------------------------------------------- state
    def new_state(self):
        """{"A": per layer [F, D], "z": per layer [F], "w": segments closed (writes done), "c": content
        tokens in the open segment, "kv": per layer (K, V) [H, c, dh] of the open segment,
        "frozen": no more closes (generate_policy reference_generate, set by greedy)}."""
        L = len(self.layers)
        return {"A": [torch.zeros(self.F, self.D, dtype=self.dtype) for _ in range(L)],
                "z": [torch.zeros(self.F, dtype=self.dtype) for _ in range(L)], "w": 0, "c": 0,
                "kv": [(self._empty_kv(), self._empty_kv()) for _ in range(L)], "frozen": False}

    def close_segment(self, state):
        """The segment-close event: the M memory tokens (positions after the c content tokens) run
        against the open segment's KV; every layer writes its memory; the KV is freed."""
        h = self.memory + self.wpe[self._mem_positions(state["c"])]
        first = state["w"] == 0
        for l in range(len(self.layers)):
            h, _, _ = self._layer(l, h, state["A"][l], state["z"][l], first, *state["kv"][l])
            state["A"][l], state["z"][l] = self._write(l, h, state["A"][l], state["z"][l], first)
        state["kv"] = [(self._empty_kv(), self._empty_kv()) for _ in self.layers]
        state["c"], state["w"] = 0, state["w"] + 1

    def _content(self, ids, state):
        """Logits of content ids that all fit in the open segment (KV appended)."""
        c = state["c"]
        h = self.wte[ids] + self.wpe[torch.arange(c, c + len(ids))]
        for l in range(len(self.layers)):
            h, K, V = self._layer(l, h, state["A"][l], state["z"][l], state["w"] == 0, *state["kv"][l])
            state["kv"][l] = (K, V)
        state["c"] = c + len(ids)
        return self._logits(h)

    # ---------------------------------------------------------------- API
    @torch.no_grad()
    def step(self, ids, state):
        """Feed ids (>= 1 token) after `state` (mutated); logits [T, vocab]."""
        ids = torch.as_tensor([int(i) for i in ids], dtype=torch.long)
        out, i = [], 0
        while i < len(ids):
            if state["frozen"]:
                take = len(ids) - i
                if state["c"] + take > self.Np:
                    raise ValueError("armt: generate_policy reference_generate: position %d is past the position "
                                     "table (n_positions = %d)" % (state["c"] + take - 1, self.Np))
            else:
                if state["c"] == self.S:
                    self.close_segment(state)
                take = min(len(ids) - i, self.S - state["c"])
            out.append(self._content(ids[i:i + take], state))
            i += take
        return torch.cat(out, 0)

    @torch.no_grad()
    def forward(self, ids, snapshots=None):
        """Logits [T, vocab] from a fresh state, the official wrapper's way: each left-aligned segment
        [X_s; memory] in one causal pass, each layer writing right after it runs, every segment
        (the last, possibly short, one too) written.  snapshots: a list that receives (A list, z list)
        after each segment's write."""
        ids = torch.as_tensor([int(i) for i in ids], dtype=torch.long)
        L = len(self.layers)
        A = [torch.zeros(self.F, self.D, dtype=self.dtype) for _ in range(L)]
        z = [torch.zeros(self.F, dtype=self.dtype) for _ in range(L)]
        out = []
        for s0 in range(0, len(ids), self.S):
            seg = ids[s0:s0 + self.S]
            n = len(seg)
            pos = torch.cat([torch.arange(n), self._mem_positions(n)])
            h = torch.cat([self.wte[seg], self.memory], 0) + self.wpe[pos]
            first = s0 == 0
            for l in range(L):
                h, _, _ = self._layer(l, h, A[l], z[l], first, self._empty_kv(), self._empty_kv())
                A[l], z[l] = self._write(l, h[n:], A[l], z[l], first)
            out.append(self._logits(h[:n]))
            if snapshots is not None:
                snapshots.append(([a.clone() for a in A], [v.clone() for v in z]))
        return torch.cat(out, 0)

    @torch.no_grad()
    def greedy(self, ids, n):
        """n greedy tokens after ids (argmax, lowest id on ties, no EOS stop).  generate_policy
        streaming: segments close whenever full; reference_generate: the last prompt segment is never
        closed and generated tokens extend it (the official generate())."""
        st = self.new_state()
        logits = self.step(ids, st)[-1]
        st["frozen"] = self.cfg["generate_policy"] == "reference_generate"
        out = []
        for _ in range(n):
            out.append(int(torch.argmax(logits)))
            logits = self.step([out[-1]], st)[-1]
        return out
