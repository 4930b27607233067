"""Identities of the Lattice recurrence (mcserve_ref/lattice.py), float64."""
import copy

import numpy as np
import pytest
import torch

from mcserve_ref import lattice as L
from mcserve_ref.model import CausalLM, resolve_config

torch.set_default_dtype(torch.float64)


def _unit_state(rng, m, d):
    return torch.from_numpy(L.orthonormal_rows(rng.normal(size=(m, d))))


def _inputs(rng, m, d):
    t = lambda *s: torch.from_numpy(rng.normal(size=s))
    return t(m), t(m), t(d)


@pytest.mark.parametrize("variant", L.VARIANTS)
def test_step_keeps_unit_slots_and_writes_orthogonally(variant):
    rng = np.random.RandomState(0)
    M = _unit_state(rng, 6, 10)
    for _ in range(200):
        q, k, v = _inputs(rng, 6, 10)
        _, M = L.lattice_step(M, q, k, v, 0.7, 0.9, variant)
        assert torch.allclose((M * M).sum(-1), torch.ones(6), atol=1e-12)
    # Δs_i ⊥ s_i, so ‖s_i + Δs_i‖² = 1 + ‖Δs_i‖²: the analytic β (Pythagoras) equals the recomputed norm
    q, k, v = _inputs(rng, 6, 10)
    _, M1 = L.lattice_step(M, q, k, v, 0.3, 1.0, variant)
    _, M_an = L.lattice_step(M, q, k, v, 0.3, 1.0, variant, renorm="analytic")
    assert torch.allclose(M1, M_an, atol=1e-12)


def _autograd_delta(M, k, v, variant):
    """ΔS per unit step size: −½ ∇_S of the variant's loss at S (rows = slots), φ = row normalisation."""
    S = M.clone().requires_grad_(True)
    phi = S / torch.sqrt((S * S).sum(-1, keepdim=True))
    if variant == "dec":
        loss = ((phi.T @ k - v) ** 2).sum()
    elif variant == "enc":
        loss = ((phi @ v - k) ** 2).sum()
    else:
        loss = -2.0 * (phi @ v * k).sum()
    (g,) = torch.autograd.grad(loss, S)
    return -0.5 * g


@pytest.mark.parametrize("variant", L.VARIANTS)
def test_step_is_the_normalised_gradient_step(variant):
    rng = np.random.RandomState(1)
    M = _unit_state(rng, 5, 9)
    q, k, v = _inputs(rng, 5, 9)
    gamma = 0.4
    u = M + gamma * _autograd_delta(M, k, v, variant)
    expect = u / torch.sqrt((u * u).sum(-1, keepdim=True))
    _, got = L.lattice_step(M, q, k, v, gamma, 1.0, variant)
    assert torch.allclose(got, expect, atol=1e-12)


def test_dec_matches_the_expanded_matrix_form():
    # spec A.3.5: S_t = (S diag(μ + γ c⊙k) − γ e kᵀ) diag(β), S = Mᵀ
    rng = np.random.RandomState(2)
    M = _unit_state(rng, 4, 7)
    q, k, v = _inputs(rng, 4, 7)
    gamma, mu = 0.6, 0.8
    S = M.T
    e = S @ k - v
    c = S.T @ e
    n2 = torch.clamp((e * e).sum() - c * c, min=0)
    beta = 1.0 / torch.sqrt(mu * mu + gamma * gamma * k * k * n2)
    S_new = (S * (mu + gamma * c * k)[None, :] - gamma * torch.outer(e, k)) * beta[None, :]
    o, M_new = L.lattice_step(M, q, k, v, gamma, mu, "dec")
    assert torch.allclose(M_new, S_new.T, atol=1e-12)
    assert torch.allclose(o, S_new @ q, atol=1e-12)


@pytest.mark.parametrize("variant", L.VARIANTS)
def test_forget_gate_is_a_step_size_rescale(variant):
    rng = np.random.RandomState(3)
    M = _unit_state(rng, 6, 6)
    q, k, v = _inputs(rng, 6, 6)
    a = L.lattice_step(M, q, k, v, 0.5, 0.7, variant)
    b = L.lattice_step(M, q, k, v, 0.5 / 0.7, 1.0, variant)
    assert torch.allclose(a[0], b[0], atol=1e-12) and torch.allclose(a[1], b[1], atol=1e-12)


def test_readout_normalized_equals_state_readout_on_unit_slots():
    rng = np.random.RandomState(4)
    M = _unit_state(rng, 3, 5)
    q, k, v = _inputs(rng, 3, 5)
    a = L.lattice_step(M, q, k, v, 0.5, 0.9, "dec")
    b = L.lattice_step(M, q, k, v, 0.5, 0.9, "dec", readout="normalized")
    assert torch.allclose(a[0], b[0], atol=1e-12)


def test_orthonormal_rows():
    a = L.orthonormal_rows(np.random.RandomState(5).normal(size=(2, 4, 7)))
    for h in range(2):
        assert np.allclose(a[h] @ a[h].T, np.eye(4), atol=1e-12)


def _model(**over):
    import export_fixtures as E
    c = dict(E.FIXTURES["lattice"][0])
    c.update(over)
    rng = np.random.RandomState(6)
    params = E.init_params(E.param_specs(c), rng, {})
    return CausalLM(c, E.to_tensors(params, "F32"), dtype=torch.float64)


@pytest.mark.parametrize("over", [
    {},
    dict(lattice_variant="enc", qk_projection="separate", conv_activation="silu", qk_norm="l2"),
    dict(lattice_variant="sim", use_forget_gate=False, use_gate=False, use_output_norm=True,
         initial_state="identity", state_renorm="analytic", readout="normalized"),
    dict(use_short_conv=False, num_slots=None),
])
def test_chunked_equals_sequential_equals_full(over):
    m = _model(**over)
    ids = list(np.random.RandomState(7).randint(3, 320, size=23))
    full = m.forward(ids)
    st = m.new_state()
    parts = torch.cat([m.step(ids[:5], st), m.step(ids[5:6], st), m.step(ids[6:], st)])
    assert torch.allclose(full, parts, atol=1e-10)
    st1 = m.new_state()
    one = torch.cat([m.step([i], st1) for i in ids])
    assert torch.allclose(full, one, atol=1e-10)
    for layer in st:
        M = layer["M"]
        assert torch.allclose((M * M).sum(-1), torch.ones(M.shape[:2]), atol=1e-10)


@pytest.mark.parametrize("field,value", [("lattice_variant", "ista"), ("qk_projection", "tied"),
                                         ("conv_activation", "gelu"), ("qk_norm", "sum"),
                                         ("initial_state", "random"), ("state_renorm", "every_n"),
                                         ("readout", "phi"), ("state_soft_threshold", 0.1), ("num_slots", 17)])
def test_config_rejects_unsupported_values_naming_the_field(field, value):
    import export_fixtures as E
    c = copy.deepcopy(E.FIXTURES["lattice"][0])
    c[field] = value
    with pytest.raises(ValueError, match=field):
        resolve_config(c)
