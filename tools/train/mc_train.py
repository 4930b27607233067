"""Memory Caching (docs/memory-caching.md) in batched, differentiable form, for training.

Scope: constant segments of C tokens, init mode checkpoint, aggregation residual / grm / ssc, gate
u_proj or q, pool mean or sum. Token t (0-based) lies in segment s = t // C and reads its online
memory (the running state after its own update, i.e. the plain recurrence's read-out o_on) plus the
closed segments i < s, whose cached memory S_i is the running state after segment i's last token
(the chunked form's hand-off there: C is a multiple of the chunk size). Per state head:
    o_i  = S_iᵀ q_t                                   (q already scaled)
    residual: y = o_on + Σ_{i<s} o_i
    grm/ssc:  z_i = ⟨u_t, pool_i⟩, z_on = ⟨u_t, pool of segment s's keys up to t⟩;
              ssc keeps the top_k largest z_i (ties: lower i), grm all; γ = softmax over kept + online;
              y = γ_on o_on + Σ_kept γ_i o_i
Gradients flow through the cached states, the pools and u. Same math as mcserve_ref/mc.py.
"""

import torch

SUPPORTED = dict(aggregation=("residual", "grm", "ssc"), segmentation=("constant",),
                 init_mode=("checkpoint",), gate=("u_proj", "q"), pool=("mean", "sum"))


def check_config(cfg, chunk_size):
    """Raises ValueError unless the resolved MC config `cfg` is trainable here with `chunk_size`."""
    for key, allowed in SUPPORTED.items():
        if cfg[key] not in allowed:
            raise ValueError("training with memory_caching.%s = %r is not supported (supported: %s)"
                             % (key, cfg[key], ", ".join(allowed)))
    if cfg["segment_size"] % chunk_size != 0:
        raise ValueError("memory_caching.segment_size %d must be a multiple of the chunk size %d"
                         % (cfg["segment_size"], chunk_size))


def segment_states(chunk_states, T, segment_size, chunk_size):
    """Cached memories of the closed segments: [B, M, H, K, V] from the chunk hand-offs
    [B, N, H, K, V]; M = (T - 1) // segment_size (segments that some token reads)."""
    per = segment_size // chunk_size
    M = (T - 1) // segment_size
    idx = torch.arange(1, M + 1) * per - 1
    return chunk_states[:, idx]


def _pools(k, C, pool):
    """(closed-segment pools [B, Nseg, H, K], online pools [B, T, H, K]) of the keys k [B, T, H, K]."""
    B, T, H, K = k.shape
    pad = (-T) % C
    kp = torch.cat([k, k.new_zeros(B, pad, H, K)], 1) if pad else k
    seg = kp.view(B, -1, C, H, K)                                   # [B, Nseg, C, H, K]
    run = seg.cumsum(2)                                              # running sums within a segment
    closed = run[:, :, -1]                                           # [B, Nseg, H, K]
    online = run.reshape(B, -1, H, K)[:, :T]                         # [B, T, H, K]
    if pool == "mean":
        closed = closed / C
        count = (torch.arange(T) % C + 1).to(k.dtype)                # tokens of the segment so far
        online = online / count.view(1, T, 1, 1)
    return closed, online


def _kept(z, valid, top_k, routed):
    """Bool [B, T, M, H]: cached segment kept (valid, and with routing among the top_k largest z,
    ties to the lower index). z: [B, T, M, H]; valid: [T, M]."""
    v = valid.view(1, valid.shape[0], -1, 1)
    if not routed:
        return v.expand_as(z)
    M = z.shape[2]
    zi, zj = z.unsqueeze(3), z.unsqueeze(2)                          # [B, T, M(i), 1, H], [B, T, 1, M(j), H]
    lower = torch.ones(M, M, dtype=torch.bool).tril(-1).view(1, 1, M, M, 1)   # [i, j]: j < i
    beats = (zj > zi) | ((zj == zi) & lower)                         # j outranks i
    rank = (beats & v.unsqueeze(2)).sum(3)                           # [B, T, M, H], over valid j
    return v & (rank < top_k)


def mc_readout(o_on, q, k, u, states, cfg):
    """Aggregated raw read-out [B, T, H, V].

    o_on: [B, T, H, V] the plain read-out; q: [B, T, H, K] scaled query; k: [B, T, H, K] keys as
    they enter the update; u: [B, T, H, K] gate input (per state head); states: [B, M, H, K, V]
    cached memories of the closed segments; cfg: resolved memory_caching dict."""
    T = o_on.shape[1]
    C, M = cfg["segment_size"], states.shape[1]
    if M == 0:
        return o_on
    o_c = torch.einsum("bthk,bihkv->btihv", q, states)               # [B, T, M, H, V]
    t_seg = torch.arange(T) // C
    valid = torch.arange(M).view(1, M) < t_seg.view(T, 1)            # [T, M]: segment i closed before t
    if cfg["aggregation"] == "residual":
        return o_on + (o_c * valid.view(1, T, M, 1, 1).to(o_c.dtype)).sum(2)
    closed, online = _pools(k, C, cfg["pool"])
    z_c = torch.einsum("bthk,bihk->btih", u, closed[:, :M])          # [B, T, M, H]
    z_on = (u * online).sum(-1)                                      # [B, T, H]
    keep = _kept(z_c, valid, cfg["top_k"], cfg["aggregation"] == "ssc")
    logits = torch.cat([z_c.masked_fill(~keep, float("-inf")), z_on.unsqueeze(2)], 2)   # [B, T, M+1, H]
    gam = torch.softmax(logits, dim=2)
    return gam[:, :, M].unsqueeze(-1) * o_on + (gam[:, :, :M].unsqueeze(-1) * o_c).sum(2)
