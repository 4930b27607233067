"""The chunked gated delta rule equals the reference's token-by-token recurrence (values, final
state and gradients), float64."""

import pytest
import torch

from chunked_gdn import chunk_gated_delta_rule
from mcserve_ref import ops


def _inputs(B=2, T=37, H=3, K=8, V=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    dt = torch.float64
    q = ops.l2norm(torch.randn(B, T, H, K, generator=g, dtype=dt))
    k = ops.l2norm(torch.randn(B, T, H, K, generator=g, dtype=dt))
    v = torch.randn(B, T, H, V, generator=g, dtype=dt)
    gate = -3.0 * torch.rand(B, T, H, generator=g, dtype=dt)          # strong and weak decay
    beta = 2.0 * torch.rand(B, T, H, generator=g, dtype=dt)           # up to 2 (allow_neg_eigval)
    S0 = torch.randn(B, H, K, V, generator=g, dtype=dt)
    return q, k, v, gate, beta, S0


def _reference(q, k, v, gate, beta, scale, S0):
    outs, states = [], []
    for b in range(q.shape[0]):
        o, S = ops.gated_delta_rule_recurrent(q[b], k[b], v[b], gate[b], beta[b], scale, S0[b])
        outs.append(o)
        states.append(S)
    return torch.stack(outs), torch.stack(states)


@pytest.mark.parametrize("chunk", [1, 4, 16, 32, 64])
def test_chunked_equals_recurrent(chunk):
    q, k, v, gate, beta, S0 = _inputs()
    o, S = chunk_gated_delta_rule(q, k, v, gate, beta, 0.35, chunk, S0)
    ro, rS = _reference(q, k, v, gate, beta, 0.35, S0)
    assert o.shape == ro.shape
    assert torch.allclose(o, ro, rtol=0, atol=1e-12)
    assert torch.allclose(S, rS, rtol=0, atol=1e-12)


def test_zero_initial_state_is_the_default():
    q, k, v, gate, beta, S0 = _inputs(T=20)
    o, S = chunk_gated_delta_rule(q, k, v, gate, beta, 0.5, 8)
    ro, rS = _reference(q, k, v, gate, beta, 0.5, torch.zeros_like(S0))
    assert torch.allclose(o, ro, rtol=0, atol=1e-12) and torch.allclose(S, rS, rtol=0, atol=1e-12)


def test_gradients_equal_recurrent():
    base = _inputs(B=1, T=19, H=2, K=4, V=3, seed=3)
    weight = torch.randn(1, 19, 2, 3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)

    def grads(fn):
        xs = [x.clone().requires_grad_(True) for x in base]
        o, S = fn(*xs)
        ((o * weight).sum() + S.sum()).backward()
        return [x.grad for x in xs]

    chunked = grads(lambda q, k, v, g, b, s: chunk_gated_delta_rule(q, k, v, g, b, 0.5, 8, s))
    recurrent = grads(lambda q, k, v, g, b, s: _reference(q, k, v, g, b, 0.5, s))
    for a, b in zip(chunked, recurrent):
        assert torch.allclose(a, b, rtol=0, atol=1e-11)
