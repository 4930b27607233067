"""Why the `lattice_enc` fixture is well conditioned (export_fixtures.LATTICE_ENC_BIAS_CHANNEL).

ENC's write moves slot i against its error e_i = φ_iᵀv − k_i; to first order the error after the write is
e_i (1 − κ), κ = (γ/μ)‖v^⊥s_i‖².  κ > 1 overshoots and κ > 2 diverges: the scan then amplifies every rounding
difference (float32 prefill vs decode 1e-5 .. 2e-4 with random gates).  The fixture's gates put κ below 1.
"""
import json
import os

import numpy as np
import torch

import export_fixtures as E
from mcserve_ref import lattice as L
from mcserve_ref import safetensors_io as st
from mcserve_ref.model import CausalLM

FIXTURE = os.path.join(E.MODELS, "lattice_enc")


def _enc_error(M, k, v):
    """|φ_iᵀv − k_i| per slot, M [m, d], k [m], v [d]."""
    phi = M / torch.sqrt((M * M).sum(-1))[:, None]
    return (phi @ v - k).abs()


def _writes(config, tensors):
    """Per ENC write over the golden prompt (float64): κ [n·m], |e| after / before [n·m], and 1 − |cos| between
    each slot's s_0 and its last state [layers·H·m]."""
    kappa, ratio, orig = [], [], L.lattice_step

    def hook(M, q, k, v, gamma, mu, variant, renorm="recompute", readout="state"):
        o, M_new = orig(M, q, k, v, gamma, mu, variant, renorm, readout)
        phi = M / torch.sqrt((M * M).sum(-1))[:, None]
        kappa.append((gamma / mu * ((v * v).sum() - (phi @ v) ** 2)).numpy())
        ratio.append((_enc_error(M_new, k, v) / _enc_error(M, k, v)).numpy())
        return o, M_new

    m = CausalLM(config, tensors, dtype=torch.float64)
    state = m.new_state()
    s0 = [s["M"].clone() for s in state]
    L.lattice_step = hook
    try:
        m.step(E.encode_prompt(), state)
    finally:
        L.lattice_step = orig
    last = [s["M"] for s in state]
    turn = [1 - ((a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))).abs() for a, b in zip(s0, last)]
    return np.concatenate(kappa), np.concatenate(ratio), torch.cat([t.flatten() for t in turn]).numpy()


def _fixture():
    """(config, tensors, seed) of the committed fixture."""
    with open(os.path.join(FIXTURE, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(FIXTURE, "golden.json")) as f:
        seed = json.load(f)["seed"]
    return config, st.load_model_dir(FIXTURE), seed


def test_enc_error_after_a_small_write_is_one_minus_kappa():
    rng = np.random.RandomState(0)
    M = torch.from_numpy(L.orthonormal_rows(rng.normal(size=(6, 10))))
    k, v = torch.from_numpy(rng.normal(size=6)), torch.from_numpy(rng.normal(size=10))
    gamma, mu = 1e-4, 0.8
    kappa = gamma / mu * ((v * v).sum() - (M @ v) ** 2)
    e = M @ v - k
    _, M_new = L.lattice_step(M, k, k, v, gamma, mu, "enc")
    e_new = M_new @ v - k
    assert torch.allclose(e_new, e * (1 - kappa), rtol=0, atol=1e-6)


def test_fixture_writes_contract_and_random_gates_overshoot():
    config, tensors, seed = _fixture()
    kappa, ratio, turn = _writes(config, tensors)
    assert np.median(kappa) < 1 and np.median(ratio) < 0.8 and np.mean(ratio < 1) > 0.75
    assert np.median(turn) > 0.3      # the memory is live: the slots turn away from s_0 over the prompt
    params = E.init_params(E.param_specs(config), np.random.RandomState(seed), {})   # the draw, no bias channel
    kappa, ratio, _ = _writes(config, E.to_tensors(params, "F32"))
    assert np.median(kappa) > 5 and np.median(ratio) > 1


def test_fixture_float32_prefill_equals_decode():
    config, tensors, _ = _fixture()
    ids = E.encode_prompt()
    m = CausalLM(config, tensors, dtype=torch.float32)
    whole = m.forward(ids).double()
    state = m.new_state()
    steps = torch.cat([m.step([t], state) for t in ids]).double()
    assert float((whole - steps).abs().max()) / max(1.0, float(steps.abs().max())) <= 2e-6
