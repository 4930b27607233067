"""Deep (MLP) memories: `titans` memory_depth 2 and `dla` (mcserve_ref/mlp_memory.py, deep_rules.py,
deep_memory.py, mc_deep.py; docs/model-format.md, docs/memory-caching.md).  float64 throughout."""
import json
import math
import os

import numpy as np
import pytest
import torch

import export_fixtures as E
from mcserve_ref import CausalLM
from mcserve_ref import mc_deep
from mcserve_ref import mlp_memory_closed_form as CF
from mcserve_ref import safetensors_io as st
from mcserve_ref.deep_rules import DeepRule
from mcserve_ref.mlp_memory import MLPMemory, gelu, gelu_prime, layer_norm

D = torch.float64
DEEP = E.DEEP_MC_BASES                      # ("titans_mlp", "dla"); dla has LN on and b = 4
PROMPT = E.encode_prompt()
_RNG = np.random.RandomState(11)
LONG = PROMPT + [int(i) for i in _RNG.randint(3, E.VOCAB, size=40 - len(PROMPT))]   # 40 tokens
AGGS = [("residual", {}), ("grm", {}), ("soup", {}), ("ssc", {}), ("mean", {}), ("mean", {"mean_combine": "average"})]

_cache = {}


def _load(name):
    if name not in _cache:
        d = os.path.join(E.MODELS, name)
        _cache[name] = (json.load(open(os.path.join(d, "config.json"))), st.load_model_dir(d))
    return _cache[name]


def _model(name, mcobj=None, dtype=D, **over):
    """A committed fixture, optionally with a memory_caching object and config overrides."""
    cfg, t = _load(name)
    cfg = dict(cfg, **over)
    if mcobj is not None:
        cfg["memory_caching"] = mcobj
    return CausalLM(cfg, t, dtype)


def _obj(agg, init="independent", seg="constant", C=4, **kw):
    return E.mc_object(agg, init, seg, segment_size=C, **kw)


def _rand(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=D)


def _mlp(ln, H=3, d=6, expansion=3, seed=0):
    """A random MLPMemory (LN affine random when on)."""
    ln_w = 1 + 0.3 * _rand(d, seed=seed) if ln else None
    ln_b = 0.2 * _rand(d, seed=seed + 1) if ln else None
    return MLPMemory(H, d, expansion, ln_w, ln_b, eps=1e-6)


def _weights(mlp, seed, scale=1.0):
    """Random (W1 [H, d, E], W2 [H, E, d]) in GELU's nonlinear range."""
    W1 = scale * _rand(mlp.H, mlp.d, mlp.E, seed=seed) / math.sqrt(mlp.E)
    W2 = scale * _rand(mlp.H, mlp.E, mlp.d, seed=seed + 1)
    return W1, W2


def _feats(kind, T, H, d, seed):
    """Per-token features of a random sequence: k (unit norm), v, gates."""
    f = dict(k=torch.nn.functional.normalize(_rand(T, H, d, seed=seed), dim=-1), v=_rand(T, H, d, seed=seed + 1),
             theta=0.3 * torch.sigmoid(_rand(T, H, seed=seed + 2)))
    if kind == "titans":
        f.update(alpha=0.9 + 0.1 * torch.sigmoid(_rand(T, H, seed=seed + 3)),
                 eta=torch.sigmoid(_rand(T, H, seed=seed + 4)))
    return f


def _tok(f, t):
    return {n: x[t] for n, x in f.items()}


# ------------------------------------------------------------------------------- the memory function

def test_gelu_and_layer_norm_definitions():
    z = _rand(50, seed=1) * 3
    assert torch.allclose(gelu(z), torch.nn.functional.gelu(z), rtol=0, atol=1e-15)       # exact erf GELU
    zz = z.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(gelu(zz).sum(), zz)
    assert torch.allclose(gelu_prime(z), g, rtol=0, atol=1e-14)
    y, w, b = _rand(3, 6, seed=2), _rand(6, seed=3), _rand(6, seed=4)
    assert torch.allclose(layer_norm(y, w, b, 1e-6), torch.nn.functional.layer_norm(y, (6,), w, b, 1e-6), atol=1e-14)


@pytest.mark.parametrize("kind", ["titans", "dla"])
@pytest.mark.parametrize("ln", [False, True])
def test_closed_form_gradients_equal_autograd(kind, ln):
    mlp = _mlp(ln)
    for seed in range(3):
        W1, W2 = _weights(mlp, 10 * seed)
        k, v = _rand(3, 6, seed=10 * seed + 2), _rand(3, 6, seed=10 * seed + 3)
        auto = (mlp.titans_grad if kind == "titans" else mlp.dla_grad)(W1, W2, k, v)
        closed = (CF.titans_grad if kind == "titans" else CF.dla_grad)(mlp, W1, W2, k, v)
        for a, c in zip(auto, closed):
            assert torch.allclose(a, c, rtol=1e-12, atol=1e-13), float((a - c).abs().max())
            assert float(a.abs().max()) > 1e-2


def test_closed_form_without_ln_is_the_spec_formula():
    """specs/mc.md B.2.5 / B.2.4 written out: dW1 = e h^T, dW2 = [(W1^T e) * GELU'(z)] k^T (e = M(k) - v; e = v for DLA)."""
    mlp = _mlp(False)
    W1, W2 = _weights(mlp, 5)
    k, v = _rand(3, 6, seed=7), _rand(3, 6, seed=8)
    for h in range(3):
        z = W2[h] @ k[h]
        hh = gelu(z)
        e = k[h] + W1[h] @ hh - v[h]
        g1, g2 = CF.titans_grad(mlp, W1, W2, k, v)
        assert torch.allclose(g1[h], torch.outer(e, hh), atol=1e-13)
        assert torch.allclose(g2[h], torch.outer((W1[h].T @ e) * gelu_prime(z), k[h]), atol=1e-13)
        g1, g2 = CF.dla_grad(mlp, W1, W2, k, v)
        assert torch.allclose(g1[h], torch.outer(v[h], hh), atol=1e-13)
        assert torch.allclose(g2[h], torch.outer((W1[h].T @ v[h]) * gelu_prime(z), k[h]), atol=1e-13)


@pytest.mark.parametrize("ln", [False, True])
def test_one_small_step_improves_the_current_token(ln):
    """Titans: 1/2||M(k) - v||^2 decreases after W -= theta grad (alpha 1, no momentum);
    DLA: <M(k), v> increases after W += theta grad."""
    mlp = _mlp(ln)
    W1, W2 = _weights(mlp, 21)
    f = _feats("titans", 1, 3, 6, seed=22)
    f.update(alpha=torch.ones(1, 3, dtype=D), eta=torch.zeros(1, 3, dtype=D), theta=torch.full((1, 3), 1e-3, dtype=D))
    k, v = f["k"][0], f["v"][0]
    loss = lambda w: 0.5 * ((mlp.forward(w["W1"], w["W2"], k) - v) ** 2).sum(-1)   # noqa: E731  [H]
    rule = DeepRule("titans", mlp, W1, W2, 1)
    before, after = loss(rule.fresh()), loss(rule.update(rule.fresh(), _tok(f, 0)))
    assert (after < before).all(), (before, after)
    gain = lambda w: (mlp.forward(w["W1"], w["W2"], k) * v).sum(-1)   # noqa: E731
    rule = DeepRule("dla", mlp, W1, W2, 1)
    assert (gain(rule.update(rule.fresh(), _tok(f, 0))) > gain(rule.fresh())).all()


@pytest.mark.parametrize("kind", ["titans", "dla"])
def test_all_zero_initial_memory_never_updates(kind):
    """W1 = W2 = 0 is a fixed point of both inner objectives (h = GELU(0) = 0 and W1^T(.) = 0), LN or not."""
    for ln in (False, True):
        mlp = _mlp(ln)
        zero = (torch.zeros(3, 6, 18, dtype=D), torch.zeros(3, 18, 6, dtype=D))
        rule = DeepRule(kind, mlp, *zero, 2)
        f = _feats(kind, 6, 3, 6, seed=30)
        mem = rule.fresh()
        for t in range(6):
            mem = rule.update(mem, _tok(f, t))
        assert torch.equal(mem["W1"], zero[0]) and torch.equal(mem["W2"], zero[1])


# ------------------------------------------------------------------------------- inner mini-batches

def _chunk_parallel(rule, f, T):
    """Training-style inner mini-batch GD, independent of DeepRule.update: per chunk of b tokens, all
    gradients at the chunk's anchor in one batched closed-form call (tokens as extra heads), then the
    momentum / retention recurrences in matrix form (decay-product coefficients).  -> W1 per token."""
    mlp, b = rule.mlp, rule.b
    H = mlp.H
    W = [rule.W1_0, rule.W2_0]
    S = [torch.zeros_like(rule.W1_0), torch.zeros_like(rule.W2_0)]
    out = []
    for c0 in range(0, T, b):
        m = min(b, T - c0)
        k = f["k"][c0:c0 + m].reshape(m * H, -1)
        v = f["v"][c0:c0 + m].reshape(m * H, -1)
        A1, A2 = (w.repeat(m, 1, 1) for w in W)                                 # [m*H, ...]
        grad = CF.titans_grad if rule.kind == "titans" else CF.dla_grad
        G = [g.view(m, H, *g.shape[1:]) for g in grad(mlp, A1, A2, k, v)]     # [m, H, ...]
        th = f["theta"][c0:c0 + m]                                             # [m, H]
        if rule.kind == "dla":
            Wt = [W[j].unsqueeze(0) + torch.cumsum(th.view(m, H, 1, 1) * G[j], 0) for j in range(2)]
        else:
            al, et = f["alpha"][c0:c0 + m], f["eta"][c0:c0 + m]
            # prod_{r=s+1..t} x_r for s <= t (and prod_{r=1..t} for the carried state)
            def decay(x):
                P = torch.zeros(m, m, H, dtype=D)
                for t in range(m):
                    for s in range(t + 1):
                        P[t, s] = torch.prod(x[s + 1:t + 1], 0) if t > s else torch.ones(H, dtype=D)
                return P, torch.cumprod(x, 0)
            Pe, ce = decay(et)
            Pa, ca = decay(al)
            St = [ce.view(m, H, 1, 1) * S[j] - torch.einsum("tsh,sh,shij->thij", Pe, th, G[j]) for j in range(2)]
            Wt = [ca.view(m, H, 1, 1) * W[j] + torch.einsum("tsh,shij->thij", Pa, St[j]) for j in range(2)]
            S = [St[j][-1] for j in range(2)]
        out += [Wt[0][t] for t in range(m)]
        W = [Wt[0][-1], Wt[1][-1]]
    return out


@pytest.mark.parametrize("kind", ["titans", "dla"])
@pytest.mark.parametrize("ln", [False, True])
@pytest.mark.parametrize("b", [1, 4])
def test_inner_minibatch_equals_chunk_parallel_form(kind, ln, b):
    mlp = _mlp(ln)
    rule = DeepRule(kind, mlp, *_weights(mlp, 40, scale=0.5), b)
    T = 11
    f = _feats(kind, T, 3, 6, seed=41)
    ref = _chunk_parallel(rule, f, T)
    mem = rule.fresh()
    for t in range(T):
        mem = rule.update(mem, _tok(f, t))
        assert torch.allclose(mem["W1"], ref[t], rtol=0, atol=1e-12), (t, float((mem["W1"] - ref[t]).abs().max()))
    # b matters: the same tokens with b = 1 give other weights
    if b > 1:
        other = DeepRule(kind, mlp, rule.W1_0, rule.W2_0, 1)
        mem1 = other.fresh()
        for t in range(T):
            mem1 = other.update(mem1, _tok(f, t))
        assert not torch.allclose(mem1["W1"], mem["W1"])


def _explicit_dla_run(rule, hist, first, last, starts, W=None):
    """DLA written out with an explicit set of inner-chunk start tokens: W1 after each token."""
    W1, W2 = (rule.W1_0, rule.W2_0) if W is None else W
    out = {}
    for p in range(first, last + 1):
        if p in starts:
            A1, A2 = W1, W2
        f = hist[p - 1]
        G1, G2 = rule.mlp.dla_grad(A1, A2, f["k"], f["v"])
        W1, W2 = W1 + f["theta"].view(-1, 1, 1) * G1, W2 + f["theta"].view(-1, 1, 1) * G2
        out[p] = W1
    return out


def test_inner_chunks_restart_at_every_segment_start():
    """dla (b = 4) with segments of 6: chunks [1-4] [5-6] | [7-10] [11-12] | [13-14], in both modes;
    the global every-4 grid ([1-4] [5-8] [9-12] [13-14]) gives other weights."""
    aligned, grid = {1, 5, 7, 11, 13}, {1, 5, 9, 13}
    m = _model("dla", _obj("grm", "checkpoint", C=6))
    state = m.new_state()
    m.step(LONG[:14], state)
    mst, rule = state[0]["mc"], m.layers[0]["attn"].rule
    ref = _explicit_dla_run(rule, mst.hist, 1, 14, aligned)
    wrong = _explicit_dla_run(rule, mst.hist, 1, 14, grid)
    for p in range(1, 15):
        assert torch.allclose(mst.snap[p - 1]["W1"], ref[p], rtol=0, atol=1e-13), p
    assert not torch.allclose(mst.snap[13]["W1"], wrong[14])
    # independent: segment [7, 12] is a fresh memory with chunks [7-10] [11-12]
    m = _model("dla", _obj("grm", "independent", C=6))
    state = m.new_state()
    m.step(LONG[:14], state)
    mst = state[0]["mc"]
    ref = _explicit_dla_run(rule, mst.hist, 7, 12, {7, 11})
    assert torch.allclose(mst.memo[(7, 12)]["W1"], ref[12], rtol=0, atol=1e-13)
    assert not torch.allclose(ref[12], _explicit_dla_run(rule, mst.hist, 7, 12, {7, 9})[12])


# ------------------------------------------------------------------------------- model level

PREFILL_MC = [None, _obj("grm", "checkpoint", C=6), _obj("soup", "independent", C=4),
              _obj("ssc", "checkpoint", "logarithmic"), _obj("mean", "independent", C=5)]


@pytest.mark.parametrize("name", DEEP)
@pytest.mark.parametrize("b", [1, 4])
@pytest.mark.parametrize("obj", PREFILL_MC, ids=lambda o: "base" if o is None else "%s_%s_%s" % (
    o["aggregation"], o["init_mode"], o["segment_size"] if o["segmentation"] == "constant" else "log"))
def test_chunked_prefill_equals_token_by_token(name, b, obj):
    m = _model(name, obj, inner_chunk_size=b)
    state = m.new_state()
    one = torch.cat([m.step([t], state) for t in LONG])
    assert torch.allclose(m.forward(LONG), one, rtol=0, atol=1e-10)
    for chunk in (3, 5):
        state = m.new_state()
        inc = torch.cat([m.step(LONG[i:i + chunk], state) for i in range(0, len(LONG), chunk)])
        assert torch.allclose(inc, one, rtol=0, atol=1e-10), (chunk, float((inc - one).abs().max()))


@pytest.mark.parametrize("name", DEEP)
def test_no_cached_segment_equals_base_exactly(name):
    base = _model(name)
    ids = LONG[:12]
    ref, ref2 = base.forward(ids), base.forward(ids[:2])
    short = _model(name).forward(LONG[:20])
    for agg, kw in AGGS + [("ssc", {"top_k": 1})]:
        for init in ("independent", "checkpoint"):
            assert torch.equal(_model(name, _obj(agg, init, C=16, **kw)).forward(ids), ref), (agg, kw, init)
            if agg != "mean":
                assert torch.equal(_model(name, _obj(agg, init, "logarithmic", **kw)).forward(ids[:2]), ref2)
            out = _model(name, _obj(agg, init, C=4, **kw)).forward(LONG[:20])      # live once cached
            assert torch.equal(out[:4], short[:4]) and not torch.allclose(out[4:], short[4:]), (agg, init)


@pytest.mark.parametrize("name", DEEP)
def test_soup_by_activation_mixing_equals_materialised_soup(name):
    mlp = _mlp(name == "dla")
    ws = [dict(zip(("W1", "W2"), _weights(mlp, 50 + 2 * i))) for i in range(4)]
    gam = torch.softmax(_rand(4, 3, seed=60), 0)
    q = _rand(3, 6, seed=61)
    souped = mc_deep.soup_weights(ws, gam)
    ref = mlp.forward(souped["W1"], souped["W2"], q)
    assert torch.allclose(mc_deep.soup_read(mlp, ws, gam, q), ref, rtol=0, atol=1e-13)
    for init in ("independent", "checkpoint"):
        for seg in ("constant", "logarithmic"):
            m = _model(name, _obj("soup", init, seg))
            mixed = m.forward(LONG)
            for L in m.layers:
                L["attn"].mc.materialise_soup = True
            assert torch.allclose(m.forward(LONG), mixed, rtol=0, atol=1e-12), (init, seg)
            assert not torch.allclose(_model(name, _obj("grm", init, seg)).forward(LONG), mixed)   # soup != GRM


@pytest.mark.parametrize("name", DEEP)
def test_ssc_with_k_at_least_cached_equals_grm(name):
    for init in ("independent", "checkpoint"):
        for seg in ("constant", "logarithmic"):
            grm = _model(name, _obj("grm", init, seg)).forward(LONG)
            assert torch.equal(_model(name, _obj("ssc", init, seg, top_k=64)).forward(LONG), grm), (init, seg)
            if seg == "constant":   # > 2 cached segments from token 13 on: the router matters
                assert not torch.allclose(_model(name, _obj("ssc", init, seg, top_k=2)).forward(LONG), grm)


@pytest.mark.parametrize("name", DEEP)
def test_checkpoint_and_independent_modes_differ(name):
    for agg, kw in AGGS:
        for seg in ("constant", "logarithmic"):
            if agg == "mean" and seg == "logarithmic":
                continue
            a = _model(name, _obj(agg, "independent", seg, **kw)).forward(LONG[:20])
            b = _model(name, _obj(agg, "checkpoint", seg, **kw)).forward(LONG[:20])
            assert not torch.allclose(a, b), (agg, kw, seg)


def test_caches_hold_weights_only_and_momentum_resets():
    """Snapshots / cached blocks are {W1, W2}; independent blocks start at the initial weights with zero
    momentum; in checkpoint mode the momentum continues across the boundary."""
    ids = LONG[:9]
    for init in ("independent", "checkpoint"):
        m = _model("titans_mlp", _obj("grm", init, C=4))
        state = m.new_state()
        m.step(ids, state)
        mc_layer, mst = m.layers[0]["attn"].mc, state[0]["mc"]
        rule = mc_layer.rule
        for blk in [(1, 4), (5, 8)]:
            w = mc_layer._fresh_block(mst, *blk) if init == "independent" else mst.snap[blk[1] - 1]
            assert set(w) == {"W1", "W2"}
        first_of_seg2 = rule.update(rule.fresh(), mst.hist[4])       # token 5 from the initial weights, S = 0
        if init == "independent":
            mem = mst.memo[(5, 5)]
            assert torch.equal(mem["W1"], first_of_seg2["W1"]) and torch.equal(mem["S1"], first_of_seg2["S1"])
        else:
            assert all(set(s) == {"W1", "W2"} for s in mst.snap)
            assert float(mst.run["S1"].abs().max()) > 0
            assert not torch.allclose(mst.snap[4]["W1"], first_of_seg2["W1"])
            continued = rule.update(rule.align(_replay(rule, mst.hist, 4)), mst.hist[4])   # momentum carried
            assert torch.equal(mst.snap[4]["W1"], continued["W1"])


def _replay(rule, hist, n):
    mem = rule.fresh()
    for p in range(n):
        mem = rule.update(mem, hist[p])
    return mem


def test_mean_reads_the_weight_space_mean():
    """mean: y = M_on(q) + M_Wbar(q) (add) or half of it (average), Wbar = the mean of the cached weights."""
    x = _rand(13, 32, seed=70)
    outs = {}
    for comb in ("add", "average"):
        attn = _model("dla", _obj("mean", "independent", mean_combine=comb)).layers[0]["attn"]
        st_ = attn.new_state()
        feats = dict(q=_rand(13, 2, 16, seed=71), k=torch.nn.functional.normalize(_rand(13, 2, 16, seed=72), dim=-1),
                     v=_rand(13, 2, 16, seed=73), theta=0.1 * torch.sigmoid(_rand(13, 2, seed=74)))
        outs[comb] = attn.mc.run(x, feats, st_)
    assert torch.equal(outs["average"][:4], outs["add"][:4]) and torch.equal(outs["average"][4:], 0.5 * outs["add"][4:])
    mc_layer, mst = attn.mc, st_["mc"]
    ws = [mc_layer._fresh_block(mst, 1, 4), mc_layer._fresh_block(mst, 5, 8), mc_layer._fresh_block(mst, 9, 12)]
    Wbar = {n: torch.stack([w[n] for w in ws]).mean(0) for n in ("W1", "W2")}
    q = feats["q"][12]
    o_on = mc_layer.rule.read(mc_layer._fresh_block(mst, 13, 13), q)
    assert torch.allclose(outs["add"][12], o_on + mc_layer.rule.read(Wbar, q), rtol=0, atol=1e-13)
    out_space = sum(mc_layer.rule.read(w, q) for w in ws) / 3            # not the output-space mean
    assert not torch.allclose(outs["add"][12], o_on + out_space)


def test_config_resolution_and_errors():
    cfg, t = _load("titans_mlp")
    r = CausalLM(cfg, t, D).cfg
    assert (r["memory_expansion"], r["memory_layer_norm"], r["inner_chunk_size"]) == (4, False, 1)   # by omission
    assert "memory_expansion" not in cfg
    bad = [("titans_mlp", dict(memory_depth=3), ValueError), ("titans_mlp", dict(expand_v=2.0), ValueError),
           ("titans_mlp", dict(inner_chunk_size=0), ValueError), ("titans_mlp", dict(memory_expansion=2), ValueError),
           ("titans_mlp", dict(memory_layer_norm=True), KeyError), ("dla", dict(memory_depth=1), ValueError),
           ("dla", dict(memory_layer_norm="yes"), ValueError)]
    for name, over, err in bad:
        with pytest.raises(err):
            _model(name, **over)
    with pytest.raises(ValueError, match="head_v"):
        _model("dla", expand_v=0.5)
    dcfg, dt = _load("dla")                      # unused LN tensors are rejected (strict)
    with pytest.raises(ValueError, match="unused"):
        CausalLM(dict(dcfg, memory_layer_norm=False), dt, D)
    # options are live
    ids = LONG[:16]
    for name, over in [("titans_mlp", dict(inner_chunk_size=3)), ("dla", dict(inner_chunk_size=1))]:
        assert not torch.allclose(_model(name).forward(ids), _model(name, **over).forward(ids)), (name, over)
    with pytest.raises(ValueError, match="memory.w1"):   # memory_depth 1 = the matrix memory: memory.* unused
        CausalLM(dict(cfg, memory_depth=1), t, D)


# ------------------------------------------------------------------------------- goldens

@pytest.mark.parametrize("base", DEEP)
def test_deep_mc_goldens_reproduce_with_prefill_then_decode(base):
    """Some deep goldens via a chunked prefill (6) + one-token decode, float64 and float32."""
    names = {"titans_mlp": ["grm_checkpoint_c4", "soup_independent_c4", "mean_add_independent_c4"],
             "dla": ["grm_checkpoint_c6", "ssc_checkpoint_log", "residual_independent_c4"]}[base]
    variants = dict(E.mc_variants_for(base))
    for name in names:
        g, _ = st.load_file(os.path.join(E.MC_DATA, base, name + ".safetensors"))
        g = {k: v.to_numpy() for k, v in g.items()}
        for dtype, tol in ((torch.float64, 1e-5), (torch.float32, 2e-4)):
            m = _model(base, variants[name], dtype=dtype)
            state = m.new_state()
            logits = torch.cat([m.step(PROMPT[i:i + 6], state) for i in range(0, len(PROMPT), 6)])
            err = float(np.abs(logits.numpy() - g["logits"]).max())
            assert err <= tol, (base, name, dtype, err)
            toks, last = [], logits[-1]
            for _ in range(E.N_GREEDY):
                toks.append(int(torch.argmax(last)))
                last = m.step([toks[-1]], state)[-1]
            assert toks == list(g["greedy_ids"]), (base, name, dtype)
