"""Training-time Memory Caching (chunked gated DeltaNet + mc_train.mc_readout) equals mcserve_ref's
token-by-token MC oracle, values and gradients (the oracle's by central differences), for
residual, grm and ssc."""

import pytest
import torch

import mc_train
from chunked_gdn import chunk_gated_delta_rule
from mcserve_ref import mc as ref_mc

T, HQ, REP, K, V, HIDDEN, CHUNK, SEG = 37, 2, 2, 4, 3, 5, 4, 8   # 37: 4 closed segments + a partial one
HS = HQ * REP


def _config(aggregation, top_k=2, pool="mean"):
    return ref_mc.resolve_mc_config(dict(aggregation=aggregation, segmentation="constant", segment_size=SEG,
                                         init_mode="checkpoint", gate="u_proj", pool=pool, top_k=top_k), 1)


def _inputs(seed):
    """Per-token features as a gated DeltaNet layer feeds MC (float64, requires_grad)."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    q = r(T, HQ, K)
    k = r(T, HQ, K)
    q, k = (t / t.norm(dim=-1, keepdim=True) for t in (q, k))
    return dict(q=q.repeat_interleave(REP, 1), k=k.repeat_interleave(REP, 1), v=r(T, HS, V),
                g=-torch.rand(T, HS, generator=g, dtype=torch.float64) * 0.3,
                beta=torch.rand(T, HS, generator=g, dtype=torch.float64),
                x=r(T, HIDDEN), w_u=r(HQ * K, HIDDEN))


def _chunked(f, cfg):
    """Training form: [T, HS, V]."""
    one = lambda t: t.unsqueeze(0)  # noqa: E731
    scale = K ** -0.5
    o, st = chunk_gated_delta_rule(one(f["q"]), one(f["k"]), one(f["v"]), one(f["g"]), one(f["beta"]), scale,
                                   CHUNK, chunk_states=True)
    u = (f["x"] @ f["w_u"].T).view(1, T, HQ, K).repeat_interleave(REP, 2)
    states = mc_train.segment_states(st, T, SEG, CHUNK)
    return mc_train.mc_readout(o, one(f["q"]) * scale, one(f["k"]), u, states, cfg)[0]


def _oracle(f, cfg):
    """mcserve_ref's per-token MC: [T, HS, V]."""
    rule = ref_mc.MemoryRule("gated_deltanet", HS, K, V, torch.float64)
    mcl = ref_mc.MemoryCaching(cfg, rule, HQ, f["w_u"])
    feats = dict(q=f["q"] * K ** -0.5, k=f["k"], v=f["v"], g=f["g"], beta=f["beta"])
    return mcl.run(f["x"], feats, {})


CASES = [("residual", 2, "mean"), ("grm", 2, "mean"), ("ssc", 2, "mean"), ("ssc", 1, "sum")]


@pytest.mark.parametrize("aggregation,top_k,pool", CASES)
def test_chunked_mc_equals_oracle(aggregation, top_k, pool):
    cfg = _config(aggregation, top_k, pool)
    f = _inputs(1)
    with torch.no_grad():
        got, want = _chunked(f, cfg), _oracle(f, cfg)
    assert torch.allclose(got, want, rtol=0, atol=1e-12), (got - want).abs().max()
    plain = chunk_gated_delta_rule(*(f[n].unsqueeze(0) for n in ("q", "k", "v", "g", "beta")), K ** -0.5, CHUNK)[0][0]
    # the first segment reads only its online memory; later ones must differ (MC is not a no-op)
    assert torch.allclose(got[:SEG], plain[:SEG], rtol=0, atol=1e-12)
    assert (got[SEG:] - plain[SEG:]).abs().max() > 1e-3


@pytest.mark.parametrize("aggregation,top_k,pool", CASES)
def test_chunked_mc_gradients_equal_oracle_differences(aggregation, top_k, pool):
    """Directional derivatives of a scalar loss: autograd of the training form against central
    differences of the oracle, along random directions in every input and W_u at once."""
    cfg = _config(aggregation, top_k, pool)
    f = _inputs(2)
    w = torch.randn(T, HS, V, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    leaves = {n: t.clone().requires_grad_(True) for n, t in f.items()}
    (_chunked(leaves, cfg) * w).sum().backward()
    for d in range(3):
        gen = torch.Generator().manual_seed(10 + d)
        dirs = {n: torch.randn(t.shape, generator=gen, dtype=torch.float64) for n, t in f.items()}
        analytic = sum((leaves[n].grad * dirs[n]).sum() for n in f if leaves[n].grad is not None)
        eps = 1e-5
        plus = (_oracle({n: f[n] + eps * dirs[n] for n in f}, cfg) * w).sum()
        minus = (_oracle({n: f[n] - eps * dirs[n] for n in f}, cfg) * w).sum()
        numeric = (plus - minus) / (2 * eps)
        assert abs(float(analytic - numeric)) <= 1e-6 * max(1.0, abs(float(numeric))), (float(analytic), float(numeric))
    if aggregation != "residual":   # the gate learns
        assert leaves["w_u"].grad.abs().max() > 1e-3


def test_ssc_ties_go_to_the_lower_segment():
    z = torch.tensor([1.0, 2.0, 2.0, 0.5]).view(1, 1, 4, 1)
    valid = torch.ones(1, 4, dtype=torch.bool)
    assert mc_train._kept(z, valid, 2, True).flatten().tolist() == [False, True, True, False]
    assert mc_train._kept(z, valid, 1, True).flatten().tolist() == [False, True, False, False]


def test_unsupported_configs_are_refused():
    with pytest.raises(ValueError, match="segment_size"):
        mc_train.check_config(_config("ssc"), 16)
    cfg = ref_mc.resolve_mc_config(dict(aggregation="soup", segment_size=8, init_mode="checkpoint", gate="q"), 1)
    with pytest.raises(ValueError, match="aggregation"):
        mc_train.check_config(cfg, 4)
