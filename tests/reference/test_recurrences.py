"""Kernel-level checks of the naive recurrences against independent closed / matrix forms."""
import math

import torch

from mcserve_ref import ops

D = torch.float64


def _rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=D)


def _qkv(T=12, H=2, K=5, V=4, seed=0):
    q = ops.l2norm(_rand(T, H, K, seed=seed))
    k = ops.l2norm(_rand(T, H, K, seed=seed + 1))
    v = _rand(T, H, V, seed=seed + 2)
    return q, k, v


def test_delta_rule_equals_gated_delta_with_zero_decay():
    q, k, v = _qkv()
    beta = torch.sigmoid(_rand(12, 2, seed=5))
    S0 = _rand(2, 5, 4, seed=6)
    o1, S1 = ops.delta_rule_recurrent(q, k, v, beta, 0.3, S0)
    o2, S2 = ops.gated_delta_rule_recurrent(q, k, v, torch.zeros(12, 2, dtype=D), beta, 0.3, S0)
    assert torch.allclose(o1, o2, atol=1e-13) and torch.allclose(S1, S2, atol=1e-13)


def test_gated_delta_equals_matrix_form():
    T, H, K, V = 10, 3, 6, 4
    q, k, v = _qkv(T, H, K, V, seed=10)
    g = -torch.nn.functional.softplus(_rand(T, H, seed=13))
    beta = 2 * torch.sigmoid(_rand(T, H, seed=14))   # allow_neg_eigval range
    scale = K ** -0.5
    o, S_end = ops.gated_delta_rule_recurrent(q, k, v, g, beta, scale, torch.zeros(H, K, V, dtype=D))
    S = torch.zeros(H, K, V, dtype=D)
    I = torch.eye(K, dtype=D)
    for t in range(T):
        for h in range(H):
            a, b = math.exp(float(g[t, h])), float(beta[t, h])
            kk = k[t, h].unsqueeze(1)
            S[h] = a * (I - b * kk @ kk.T) @ S[h] + b * kk @ v[t, h].unsqueeze(0)
            assert torch.allclose(o[t, h], S[h].T @ (q[t, h] * scale), atol=1e-12)
    assert torch.allclose(S, S_end, atol=1e-12)


def test_gla_equals_parallel_form():
    T, H, K, V = 9, 2, 4, 3
    q, k, v = _rand(T, H, K, seed=20), _rand(T, H, K, seed=21), _rand(T, H, V, seed=22)
    gk = torch.nn.functional.logsigmoid(_rand(T, H, K, seed=23)) / 16
    scale = K ** -0.5
    o, _ = ops.gla_recurrent(q, k, v, gk, scale, torch.zeros(H, K, V, dtype=D))
    G = gk.cumsum(0)
    for t in range(T):
        ref = torch.zeros(H, V, dtype=D)
        for s in range(t + 1):
            w = (q[t] * scale * torch.exp(G[t] - G[s]) * k[s]).sum(-1)      # [H]
            ref += w.unsqueeze(-1) * v[s]
        assert torch.allclose(o[t], ref, atol=1e-12)


def test_linear_attention_normalised_equals_ratio_form():
    T, H, K, V = 8, 2, 6, 3
    q, k = ops.elu_p1(_rand(T, H, K, seed=30)), ops.elu_p1(_rand(T, H, K, seed=31))
    v = _rand(T, H, V, seed=32)
    for normalize in (False, True):
        o, S, z = ops.linear_attn_recurrent(q, k, v, K ** -0.5, normalize,
                                            torch.zeros(H, K, V, dtype=D), torch.zeros(H, K, dtype=D))
        for t in range(T):
            w = (q[t].unsqueeze(0) * K ** -0.5 * k[: t + 1]).sum(-1)   # [t+1, H]
            num = (w.unsqueeze(-1) * v[: t + 1]).sum(0)
            ref = num / (w.sum(0).unsqueeze(-1) + 1e-10) if normalize else num
            assert torch.allclose(o[t], ref, atol=1e-12)
        assert torch.allclose(z, k.sum(0) if normalize else torch.zeros_like(z))


def test_swla_without_previous_term_is_decayed_linear_attention():
    T, H, K, V = 7, 2, 4, 3
    q, k, v = _qkv(T, H, K, V, seed=40)
    alpha = torch.sigmoid(_rand(T, H, seed=43))
    lam = torch.sigmoid(_rand(T, H, seed=44))
    z = torch.zeros
    o1, M1, _, _ = ops.swla_recurrent(q, k, v, alpha, z(T, H, dtype=D), lam, 0.5, z(H, K, V, dtype=D),
                                      z(H, K, dtype=D), z(H, V, dtype=D))
    gk = torch.log(alpha).unsqueeze(-1).expand(T, H, K)
    o2, M2 = ops.gla_recurrent(q, k * lam.unsqueeze(-1), v, gk, 0.5, z(H, K, V, dtype=D))
    assert torch.allclose(o1, o2, atol=1e-12) and torch.allclose(M1, M2, atol=1e-12)


def test_swla_previous_token_term():
    # alpha = 1, lambda = 0: M_t = sum_{s<t} beta_{s+1} k_s v_s^T
    T, H, K, V = 6, 1, 3, 2
    q, k, v = _qkv(T, H, K, V, seed=50)
    beta = torch.sigmoid(_rand(T, H, seed=51))
    z = torch.zeros
    o, M, kp, vp = ops.swla_recurrent(q, k, v, torch.ones(T, H, dtype=D), beta, z(T, H, dtype=D), 1.0,
                                      z(H, K, V, dtype=D), z(H, K, dtype=D), z(H, V, dtype=D))
    ref = sum(beta[s + 1, 0] * torch.outer(k[s, 0], v[s, 0]) for s in range(T - 1))
    assert torch.allclose(M[0], ref, atol=1e-12)
    assert torch.equal(kp, k[-1]) and torch.equal(vp, v[-1])


def test_titans_small_step_decreases_inner_loss():
    H, K, V = 3, 8, 5
    M = _rand(H, K, V, seed=60)
    k = ops.l2norm(_rand(H, K, seed=61))
    v = _rand(H, V, seed=62)
    loss = lambda M_: ((torch.einsum("hkv,hk->hv", M_, k) - v) ** 2).sum(-1)
    before = loss(M)
    for theta in (1e-3, 0.1, 0.5):
        M2, S2 = ops.titans_step(M, torch.zeros_like(M), k, v, torch.ones(H, dtype=D),
                                 torch.full((H,), 0.9, dtype=D), torch.full((H,), theta, dtype=D))
        after = loss(M2)
        assert (after < before).all(), (theta, before, after)
        # exact: the error vector shrinks by (1 - theta*|k|^2)  (|k|^2 = 1 - O(1e-6) after l2norm)
        kk = (k * k).sum(-1)
        assert torch.allclose(after, before * (1 - theta * kk) ** 2, rtol=1e-9)


def test_titans_without_momentum_or_decay_is_delta_rule():
    T, H, K, V = 9, 2, 4, 3
    q, k, v = _qkv(T, H, K, V, seed=70)
    theta = torch.sigmoid(_rand(T, H, seed=71))
    z = torch.zeros(H, K, V, dtype=D)
    o1, M, S = ops.titans_recurrent(q, k, v, torch.ones(T, H, dtype=D), torch.zeros(T, H, dtype=D), theta,
                                    0.5, z, z)
    o2, S2 = ops.delta_rule_recurrent(q, k, v, theta, 0.5, z)
    assert torch.allclose(o1, o2, atol=1e-12) and torch.allclose(M, S2, atol=1e-12)


def test_titans_momentum_accumulates():
    H, K, V = 1, 3, 2
    k = ops.l2norm(_rand(2, H, K, seed=80))
    v = _rand(2, H, V, seed=81)
    one = torch.ones(H, dtype=D)
    M, S = torch.zeros(H, K, V, dtype=D), torch.zeros(H, K, V, dtype=D)
    M, S = ops.titans_step(M, S, k[0], v[0], one, 0.5 * one, 0.2 * one)
    G0 = -torch.einsum("hk,hv->hkv", k[0], v[0])
    assert torch.allclose(S, -0.2 * G0) and torch.allclose(M, S)
    M1, S1 = ops.titans_step(M, S, k[1], v[1], 0.7 * one, 0.5 * one, 0.2 * one)
    G1 = torch.einsum("hk,hv->hkv", k[1], torch.einsum("hkv,hk->hv", M, k[1]) - v[1])
    assert torch.allclose(S1, 0.5 * S - 0.2 * G1)
    assert torch.allclose(M1, 0.7 * M + S1)


def test_short_conv_step_equals_full():
    T, Dm, W = 11, 5, 4
    x = _rand(T, Dm, seed=90)
    w = _rand(Dm, 1, W, seed=91)
    for act in (None, "silu"):
        full = ops.short_conv_full(x, w, act)
        # explicit definition y_t = act(sum_j w[d, j] x_{t-W+1+j})
        xp = torch.cat([torch.zeros(W - 1, Dm, dtype=D), x])
        ref = torch.stack([(w[:, 0, :] * xp[t:t + W].T).sum(-1) for t in range(T)])
        ref = ops.silu(ref) if act else ref
        assert torch.allclose(full, ref, atol=1e-12)
        state = torch.zeros(Dm, W, dtype=D)
        ys = []
        for a, b in ((0, 3), (3, 4), (4, 11)):
            y, state = ops.short_conv_step(x[a:b], w, state, act)
            ys.append(y)
        assert torch.allclose(torch.cat(ys), full, atol=1e-12)
        assert torch.equal(state, x[-W:].T)


def test_feature_map_dims_and_dpfp_definition():
    d = 4
    x = _rand(3, 2, d, seed=100)
    assert ops.dpfp(x).shape[-1] == 8 * d
    w, b = torch.eye(d, dtype=D), torch.zeros(d, dtype=D)
    hh = ops.hedgehog(x, w, b)
    assert hh.shape[-1] == 2 * d and torch.allclose(hh.sum(-1), torch.ones(3, 2, dtype=D))
    xv = torch.tensor([1.0, -2.0, 0.5], dtype=D)
    u = [1.0, 0.0, 0.5, 0.0, 2.0, 0.0]        # [relu(x), relu(-x)]
    ref = []
    for j in range(1, 5):                       # nu = 4: u * roll(u, j)
        ref += [u[i] * u[(i - j) % 6] for i in range(6)]
    assert torch.allclose(ops.dpfp(xv), torch.tensor(ref, dtype=D))


def test_norms():
    x = _rand(4, 6, seed=110)
    w = _rand(6, seed=111)
    y = ops.rms_norm(x, w, 1e-6)
    assert torch.allclose(y, x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w)
    g = _rand(4, 6, seed=112)
    assert torch.allclose(ops.gated_rms_norm(x, g, w, 1e-6), y * g * torch.sigmoid(g))
    assert torch.allclose(ops.l2norm(x), x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6))
    assert ops.intermediate_size(2048) == 5632 and ops.intermediate_size(1024) == 2816
    assert ops.intermediate_size(32, 2) == 256 and ops.intermediate_size(256) == 768
