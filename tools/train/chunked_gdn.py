"""Chunked (parallel-within-chunk) form of the gated delta rule, for training on CPU.

The token-by-token rule (tests/reference/mcserve_ref/ops.py gated_delta_rule_recurrent), per head:
    S_t = γ_t S_{t-1};  u_t = β_t (v_t − S_tᵀ k_t);  S_t += k_t u_tᵀ;  o_t = S_tᵀ (scale q_t)
with γ_t = exp(g_t). Inside a chunk starting from state S_0, with Γ_t = exp(Σ_{s≤t} g_s):
    S_t = Γ_t S_0 + Σ_{s≤t} (Γ_t/Γ_s) k_s u_sᵀ
so the written values satisfy a unit lower-triangular system
    u_s + β_s Σ_{r<s} (Γ_s/Γ_r)(k_s·k_r) u_r = β_s v_s − β_s Γ_s S_0ᵀ k_s
i.e. (I + A) U = βV − (βΓ K) S_0, solved once per chunk for both right-hand sides; then
    O   = diag(Γ) (scale Q) S_0 + (D ⊙ (scale Q) Kᵀ) U,    D[t, s] = Γ_t/Γ_s (s ≤ t), else 0
    S_C = Γ_C S_0 + (K ⊙ Γ_C/Γ)ᵀ U.
Only the state hand-off between chunks is sequential. Derived here from the recurrence.
"""

import torch


def _pad_time(x, n):
    """Zero-pads dim 1 (time) of x by n steps."""
    if n == 0:
        return x
    pad = x.new_zeros((x.shape[0], n) + tuple(x.shape[2:]))
    return torch.cat([x, pad], dim=1)


def chunk_gated_delta_rule(q, k, v, g, beta, scale, chunk_size=64, initial_state=None, chunk_states=False):
    """Gated delta rule over whole sequences, batched.

    q, k: [B, T, H, K] (already L2-normalised, not scaled); v: [B, T, H, V];
    g (log-decay ≤ 0), beta: [B, T, H]; initial_state: [B, H, K, V] or None (zeros).
    Returns (o [B, T, H, V], final state [B, H, K, V]); with chunk_states, the second item is
    instead every chunk's hand-off state [B, N, H, K, V] (state after token (n+1)·chunk_size). Padding tokens (g = 0, β = 0) leave the
    state unchanged, so T need not be a multiple of chunk_size. Any thread; autograd-friendly."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    C = chunk_size
    pad = (-T) % C
    q, k, v, g, beta = (_pad_time(x, pad) for x in (q, k, v, g, beta))
    N = (T + pad) // C
    # [B, H, N, C, ·] chunk-major layout
    q = q.reshape(B, N, C, H, K).permute(0, 3, 1, 2, 4) * scale
    k = k.reshape(B, N, C, H, K).permute(0, 3, 1, 2, 4)
    v = v.reshape(B, N, C, H, V).permute(0, 3, 1, 2, 4)
    g = g.reshape(B, N, C, H).permute(0, 3, 1, 2)
    beta = beta.reshape(B, N, C, H).permute(0, 3, 1, 2)

    G = g.cumsum(-1)                                   # log Γ_t within each chunk, [B, H, N, C]
    diff = G.unsqueeze(-1) - G.unsqueeze(-2)           # log Γ_t/Γ_s, [.., C(t), C(s)]
    incl = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    strict = incl.tril(-1)
    decay_incl = torch.where(incl, diff, diff.new_full((), -float("inf"))).exp()
    decay_strict = torch.where(strict, diff, diff.new_full((), -float("inf"))).exp()

    kk = k @ k.transpose(-1, -2)                       # k_s·k_r
    tri = torch.eye(C, dtype=q.dtype, device=q.device) + beta.unsqueeze(-1) * kk * decay_strict
    rhs = torch.cat([beta.unsqueeze(-1) * v, (beta * G.exp()).unsqueeze(-1) * k], dim=-1)
    sol = torch.linalg.solve_triangular(tri, rhs, upper=False, unitriangular=True)
    w_v, w_k = sol[..., :V], sol[..., V:]              # U = w_v − w_k S_0

    qk = (q @ k.transpose(-1, -2)) * decay_incl        # [B, H, N, C, C]
    q_decayed = q * G.exp().unsqueeze(-1)
    k_to_end = k * (G[..., -1:] - G).exp().unsqueeze(-1)
    chunk_decay = G[..., -1].exp()                     # Γ_C, [B, H, N]

    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state
    outs, states = [], []
    for n in range(N):
        u = w_v[:, :, n] - w_k[:, :, n] @ S
        outs.append(q_decayed[:, :, n] @ S + qk[:, :, n] @ u)
        S = chunk_decay[:, :, n, None, None] * S + k_to_end[:, :, n].transpose(-1, -2) @ u
        states.append(S)
    o = torch.stack(outs, dim=2)                       # [B, H, N, C, V]
    o = o.permute(0, 2, 3, 1, 4).reshape(B, N * C, H, V)[:, :T]
    return o, (torch.stack(states, dim=1) if chunk_states else S)
