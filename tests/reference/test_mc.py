"""Memory Caching (mcserve_ref/mc.py): identities from docs/memory-caching.md and specs/mc.md B.12,
incremental == forward, the Fenwick stack, and the committed goldens in tests/data/mc (linear and
deep bases; the deep memories' own identities are in test_deep_memory.py)."""
import json
import os

import numpy as np
import pytest
import torch

import export_fixtures as E
from mcserve_ref import CausalLM
from mcserve_ref import mc
from mcserve_ref import safetensors_io as st
from regenerated import assert_same_file

FAMILIES = ["linear_attn_identity", "linear_attn_hadamard_gqa", "gla", "delta_net", "gated_deltanet",
            "gated_deltanet_gva_bf16", "swla", "titans", "lattice", "lattice_enc"]
PROMPT = E.encode_prompt()
_RNG = np.random.RandomState(7)
LONG = PROMPT + [int(i) for i in _RNG.randint(3, E.VOCAB, size=40 - len(PROMPT))]   # 40 tokens

_cache = {}


def _load(name):
    if name not in _cache:
        d = os.path.join(E.MODELS, name)
        _cache[name] = (json.load(open(os.path.join(d, "config.json"))), st.load_model_dir(d))
    return _cache[name]


def _model(name, mcobj=None, dtype=torch.float64, tensors=None):
    cfg, t = _load(name)
    cfg = dict(cfg)
    if mcobj is not None:
        cfg["memory_caching"] = mcobj
    return CausalLM(cfg, tensors if tensors is not None else t, dtype)


def _obj(agg, init="independent", seg="constant", C=4, **kw):
    return E.mc_object(agg, init, seg, segment_size=C, **kw)


def _golden(base, name):
    g, _ = st.load_file(os.path.join(E.MC_DATA, base, name + ".safetensors"))
    return {k: v.to_numpy() for k, v in g.items()}


def _base_golden(base):
    g, _ = st.load_file(os.path.join(E.MODELS, base, "golden.safetensors"))
    return {k: v.to_numpy() for k, v in g.items()}


ALL_KINDS = [("residual", {}), ("grm", {}), ("soup", {}), ("ssc", {}), ("mean", {}),
             ("mean", {"mean_combine": "average"}), ("grm", {"pool": "sum"})]


# ------------------------------------------------------------------------------- segmentation

def test_segments_brute_force_examples():
    assert mc.segments(37, "logarithmic") == ([(1, 32), (33, 36)], (37, 37))
    assert mc.segments(38, "logarithmic") == ([(1, 32), (33, 36)], (37, 38))
    assert mc.segments(40, "logarithmic") == ([(1, 32)], (33, 40))
    assert mc.segments(64, "logarithmic") == ([], (1, 64))
    assert mc.segments(4, "constant", 4) == ([], (1, 4))
    assert mc.segments(5, "constant", 4) == ([(1, 4)], (5, 5))
    assert mc.segments(11, "constant", 4) == ([(1, 4), (5, 8)], (9, 11))
    assert mc.segments(3, "constant", 1) == ([(1, 1), (2, 2)], (3, 3))


def test_fenwick_stack_reproduces_brute_force_lists():
    """Decode-style stack: pop levels < ctz(n), the rest is the cached list, push the online block."""
    stack = []
    for n in range(1, 4097):
        p = mc.ctz(n)
        while stack and stack[-1][0] < p:
            stack.pop()
        assert all(level > p for level, _ in stack)
        cached, online = mc.segments(n, "logarithmic")
        assert [blk for _, blk in stack] == cached, n
        assert online == (n - (1 << p) + 1, n) and len(cached) == bin(n).count("1") - 1
        stack.append((p, online))


# ------------------------------------------------------------------------------- identities

@pytest.mark.parametrize("name", FAMILIES)
def test_no_cached_segment_equals_base_exactly(name):
    base = _model(name)
    ids = PROMPT[:8]
    ref, ref2 = base.forward(ids), base.forward(ids[:2])
    for agg, kw in ALL_KINDS + [("ssc", {"top_k": 1})]:
        for init in ("independent", "checkpoint"):
            m = _model(name, _obj(agg, init, C=8, **kw))
            assert torch.equal(m.forward(ids), ref), (agg, kw, init)
            state = m.new_state()
            inc = torch.cat([m.step(ids[:5], state), m.step(ids[5:], state)])
            assert torch.allclose(inc, ref, rtol=0, atol=1e-12)
            if agg != "mean":   # logarithmic: n = 1, 2 have no cached block
                m = _model(name, _obj(agg, init, "logarithmic", **kw))
                assert torch.equal(m.forward(ids[:2]), ref2), (agg, kw, init)
    # ... and MC is live once a segment is cached
    assert not torch.allclose(_model(name, _obj("grm", C=8)).forward(PROMPT[:12]), base.forward(PROMPT[:12]))


@pytest.mark.parametrize("base", E.ALL_MC_BASES)
def test_first_segment_of_every_golden_variant_equals_base(base):
    ref = _base_golden(base)["logits"]
    for name, obj in E.mc_variants_for(base):
        first = obj["segment_size"] if obj["segmentation"] == "constant" else 2
        g = _golden(base, name)["logits"]
        assert np.array_equal(g[:first], ref[:first]), name
        if not (base.startswith("linear_attn") and name.startswith("residual_independent")):
            assert not np.allclose(g, ref, atol=1e-3), name      # MC changes later positions


@pytest.mark.parametrize("name", FAMILIES)
def test_first_segment_equals_base_computed(name):
    ref = _model(name).forward(LONG[:20])
    for agg, kw in ALL_KINDS:
        for init in ("independent", "checkpoint"):
            out = _model(name, _obj(agg, init, C=4, **kw)).forward(LONG[:20])
            assert torch.equal(out[:4], ref[:4]), (agg, init)
            if not (name.startswith("linear_attn") and (agg, init) == ("residual", "independent")):
                assert not torch.allclose(out[4:], ref[4:]), (agg, init)   # (LA: see the residual test)


@pytest.mark.parametrize("name", FAMILIES)
def test_soup_equals_grm_and_full_ssc_equals_grm(name):
    for init in ("independent", "checkpoint"):
        for seg in ("constant", "logarithmic"):
            grm = _model(name, _obj("grm", init, seg)).forward(LONG)
            soup = _model(name, _obj("soup", init, seg)).forward(LONG)
            assert torch.allclose(soup, grm, rtol=0, atol=1e-11), (init, seg, float((soup - grm).abs().max()))
            ssc_all = _model(name, _obj("ssc", init, seg, top_k=64)).forward(LONG)
            assert torch.equal(ssc_all, grm), (init, seg)
            ssc2 = _model(name, _obj("ssc", init, seg, top_k=2)).forward(LONG)
            assert not torch.allclose(ssc2, grm), (init, seg)    # the router matters with > 2 cached


@pytest.mark.parametrize("base", E.MC_BASES)
def test_golden_ssc_k64_equals_golden_grm(base):
    a, b = _golden(base, "ssc_k64_independent_c4"), _golden(base, "grm_independent_c4")
    assert np.array_equal(a["logits"], b["logits"]) and np.array_equal(a["greedy_ids"], b["greedy_ids"])
    c = _golden(base, "soup_independent_c4")["logits"]
    assert np.allclose(c, b["logits"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", FAMILIES)
def test_residual_explicit_sum_equals_presummed(name):
    for init in ("independent", "checkpoint"):
        for seg in ("constant", "logarithmic"):
            m = _model(name, _obj("residual", init, seg))
            explicit = m.forward(LONG)
            for L in m.layers:
                L["attn"].mc.presum_residual = True
            presum = m.forward(LONG)
            assert torch.allclose(explicit, presum, rtol=0, atol=1e-11), (init, seg)


@pytest.mark.parametrize("name", ["linear_attn_identity", "linear_attn_hadamard_gqa"])
def test_residual_independent_is_plain_linear_attention(name):
    """Unnormalised LA: the independent blocks partition [1, n], so Σ S_i + S_on = the base memory
    (specs/mc.md B.1.1); in checkpoint mode it is not."""
    base = _model(name).forward(LONG)
    for seg in ("constant", "logarithmic"):
        r = _model(name, _obj("residual", "independent", seg)).forward(LONG)
        assert torch.allclose(r, base, rtol=0, atol=1e-10), seg
    assert not torch.allclose(_model(name, _obj("residual", "checkpoint")).forward(LONG), base)


def test_mean_combine_average_is_half_of_add_before_the_norm():
    """`average` = ½ `add` on the raw read-out (y = ½(o_on + o_mean) vs o_on + o_mean)."""
    x = torch.randn(20, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    outs = {}
    for comb in ("add", "average"):
        for init in ("independent", "checkpoint"):
            attn = _model("linear_attn_identity", _obj("mean", init, mean_combine=comb)).layers[0]["attn"]
            st_ = attn.new_state()
            feats = dict(q=(x @ attn.wq.T).view(20, 2, 16) * attn.scale, k=(x @ attn.wk.T).view(20, 2, 16),
                         v=(x @ attn.wv.T).view(20, 2, 16))
            outs[comb, init] = attn.mc.run(x, feats, st_)
    for init in ("independent", "checkpoint"):
        add, avg = outs["add", init], outs["average", init]
        assert torch.equal(avg[:4], add[:4]) and torch.equal(avg[4:], 0.5 * add[4:])
    assert not torch.allclose(outs["add", "independent"], outs["add", "checkpoint"])


# ------------------------------------------------------------------------------- incremental

INCREMENTAL = [
    ("gated_deltanet", _obj("grm", "independent", "logarithmic")),
    ("gated_deltanet", _obj("ssc", "checkpoint", "logarithmic")),
    ("gated_deltanet", _obj("grm", "independent")),
    ("gated_deltanet", _obj("mean", "checkpoint", mean_combine="average")),
    ("gated_deltanet_gva_bf16", _obj("residual", "independent", "logarithmic")),
    ("linear_attn_identity", _obj("soup", "checkpoint")),
    ("gla", _obj("ssc", "independent")),
    ("delta_net", _obj("grm", "checkpoint", pool="sum")),
    ("swla", _obj("grm", "independent")),
    ("swla", _obj("grm", "independent", "logarithmic", swla_cross_boundary=True)),
    ("swla", _obj("soup", "checkpoint", swla_cross_boundary=False)),
    ("titans", _obj("grm", "independent", "logarithmic")),
    ("titans", _obj("ssc", "checkpoint", C=3)),
]


@pytest.mark.parametrize("name,obj", INCREMENTAL)
def test_incremental_equals_forward(name, obj):
    m = _model(name, obj)
    full = m.forward(LONG)
    for chunk in (1, 3, 4, 5, 64):
        state = m.new_state()
        inc = torch.cat([m.step(LONG[i:i + chunk], state) for i in range(0, len(LONG), chunk)])
        assert torch.allclose(inc, full, rtol=1e-10, atol=1e-10), (chunk, float((inc - full).abs().max()))


def test_log_independent_blocks_equal_per_level_running_compressors():
    """specs/mc.md B.5.5: running compressors per level (restarted at even-index block starts)
    reproduce the brute-force fresh memory of every block the oracle used."""
    m = _model("gated_deltanet", _obj("grm", "independent", "logarithmic"))
    state = m.new_state()
    m.step(LONG, state)
    for i, L in enumerate(m.layers):
        mcl, mst = L["attn"].mc, state[i]["mc"]
        rule = mcl.rule
        running = {}
        seen = {}
        for n in range(1, len(LONG) + 1):
            for lvl in range(0, 7):
                if (n - 1) % (1 << lvl) == 0:
                    running[lvl] = rule.fresh() if ((n - 1) >> lvl) % 2 == 0 else None
                if running.get(lvl) is not None:
                    running[lvl] = rule.update(running[lvl], mst.hist[n - 1])
            p = mc.ctz(n)
            seen[(n - (1 << p) + 1, n)] = rule.matrix(running[p])
        assert set(mst.memo) <= set(seen)
        for blk, S in mst.memo.items():
            assert torch.allclose(S, seen[blk], rtol=0, atol=1e-12), blk


# ------------------------------------------------------------------------------- config

def test_config_off_and_errors():
    base = _model("gated_deltanet").forward(LONG[:12])
    assert torch.equal(_model("gated_deltanet", {"aggregation": "none", "segment_size": 4}).forward(LONG[:12]), base)
    assert _model("gated_deltanet", None).mc_cfg is None
    # defaults: grm, constant 256, independent, gate q, mean pool
    r = mc.resolve_mc_config({}, 2)
    assert (r["aggregation"], r["segmentation"], r["segment_size"], r["init_mode"], r["gate"], r["pool"],
            r["top_k"], r["mean_combine"], r["layers"], r["swla_cross_boundary"]) == \
        ("grm", "constant", 256, "independent", None, "mean", 2, "add", [0, 1], False)
    assert mc.resolve_mc_config({"init_mode": "checkpoint"}, 2)["swla_cross_boundary"] is True
    for bad in ({"aggregation": "mean", "segmentation": "logarithmic"}, {"segment_size": 0},
                {"aggregation": "max"}, {"bogus": 1}, {"layers": [2]}, {"top_k": 0}, {"gate": "x"}):
        with pytest.raises(ValueError):
            mc.resolve_mc_config(bad, 2)
    with pytest.raises(NotImplementedError):
        _model("linear_attn_elu_norm", _obj("grm"))
    with pytest.raises(NotImplementedError):
        _model("swla", _obj("grm", "checkpoint", "logarithmic", swla_cross_boundary=False))
    with pytest.raises(KeyError):   # gate u_proj without weights
        _model("gated_deltanet", _obj("grm", gate="u_proj"))


def test_options_are_live():
    def run(name, obj):
        return _model(name, obj).forward(LONG)
    pairs = [("swla", _obj("grm"), _obj("grm", swla_cross_boundary=True)),
             ("swla", _obj("grm", "checkpoint"), _obj("grm", "checkpoint", swla_cross_boundary=False)),
             ("titans", _obj("grm"), _obj("grm", "checkpoint")),
             ("gated_deltanet", _obj("grm"), _obj("grm", pool="sum")),
             ("gated_deltanet", _obj("grm"), _obj("grm", layers=[1])),
             ("gated_deltanet", _obj("grm"), _obj("grm", C=5)),
             ("gla", _obj("ssc", top_k=1), _obj("ssc", top_k=2))]
    for name, a, b in pairs:
        assert not torch.allclose(run(name, a), run(name, b)), (name, a, b)
    # layers [1]: layer 0 runs the base recurrence
    m = _model("gated_deltanet", _obj("grm", layers=[1]))
    assert m.layers[0]["attn"].mc is None and m.layers[1]["attn"].mc is not None


def test_uproj_fixture_gate_and_weights():
    name = "gated_deltanet_mc_uproj"
    cfg, t = _load(name)
    assert cfg["memory_caching"] == {"aggregation": "grm", "segmentation": "constant", "segment_size": 4,
                                     "init_mode": "checkpoint", "gate": "u_proj"}
    for i in range(cfg["num_hidden_layers"]):
        assert t["model.layers.%d.attn.mc.u_proj.weight" % i].shape == (cfg["num_heads"] * cfg["head_dim"],
                                                                        cfg["hidden_size"])
    ref = CausalLM(cfg, t, torch.float64).forward(PROMPT)
    g = _base_golden(name)
    assert np.allclose(ref.numpy(), g["logits"], rtol=1e-6, atol=1e-5)
    no_gate = dict(cfg["memory_caching"])
    del no_gate["gate"]    # default: u_proj because the checkpoint has mc.u_proj
    assert torch.equal(CausalLM(dict(cfg, memory_caching=no_gate), t, torch.float64).forward(PROMPT), ref)
    q_gate = dict(cfg["memory_caching"], gate="q")
    assert not torch.allclose(CausalLM(dict(cfg, memory_caching=q_gate), t, torch.float64).forward(PROMPT), ref)
    off = dict(cfg, memory_caching={"aggregation": "none"})   # MC off: the gate weights are ignored
    assert not torch.allclose(CausalLM(off, t, torch.float64).forward(PROMPT), ref)


def test_uproj_gva_maps_like_q():
    """GVA: u_proj has num_q_heads*K rows; value head hv uses u head hv // (HV/H)."""
    name = "gated_deltanet_gva_bf16"
    cfg, t = _load(name)
    t = dict(t)
    rng = np.random.RandomState(5)
    for i in range(2):
        t["model.layers.%d.attn.mc.u_proj.weight" % i] = st.make_tensor(
            (rng.normal(size=(2 * 16, 32)) / 6).astype(np.float32), "F32")
    obj = _obj("grm", "independent", "logarithmic", gate="u_proj")
    m = _model(name, obj, tensors=t)
    full = m.forward(LONG)
    state = m.new_state()
    inc = torch.cat([m.step(LONG[i:i + 5], state) for i in range(0, len(LONG), 5)])
    assert torch.allclose(inc, full, rtol=1e-10, atol=1e-10)
    assert not torch.allclose(full, _model(name, _obj("grm", "independent", "logarithmic"), tensors=t).forward(LONG))


# ------------------------------------------------------------------------------- goldens

def test_mc_golden_set_is_complete_and_small():
    total = 0
    assert len(E.mc_variants()) == 24
    assert [len(E.mc_variants_for(b)) for b in E.DEEP_MC_BASES] == [16, 17]
    assert sorted(os.listdir(E.MC_DATA)) == sorted(E.ALL_MC_BASES)
    for base in E.ALL_MC_BASES:
        names = [n for n, _ in E.mc_variants_for(base)]
        assert len(names) == len(set(names))
        d = os.path.join(E.MC_DATA, base)
        assert sorted(os.listdir(d)) == sorted([n + ".safetensors" for n in names] + ["variants.json"])
        v = json.load(open(os.path.join(d, "variants.json")))
        assert [e["name"] for e in v] == names
        T = len(_base_golden(base)["prompt_ids"])
        for e, (n, obj) in zip(v, E.mc_variants_for(base)):
            assert e["memory_caching"] == obj and set(obj) == set(mc.FIELDS)
            raw, _ = st.load_file(os.path.join(d, n + ".safetensors"))
            assert sorted(raw) == ["greedy_ids", "logits"]
            assert raw["logits"].dtype == "F32" and tuple(raw["logits"].shape) == (T, E.VOCAB)
            assert raw["greedy_ids"].dtype == "I32" and tuple(raw["greedy_ids"].shape) == (E.N_GREEDY,)
            assert list(raw["greedy_ids"].to_numpy()) == e["greedy_ids"]
        total += sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    total += sum(os.path.getsize(os.path.join(E.MODELS, "gated_deltanet_mc_uproj", f))
                 for f in os.listdir(os.path.join(E.MODELS, "gated_deltanet_mc_uproj")))
    assert total <= 4.7e6, total     # linear 2.43 MB + deep 1.51 MB + lattice 0.32 + 0.09 MB (ENC) + hope 0.32 MB


def test_mc_goldens_regenerate(tmp_path):
    for base in E.ALL_MC_BASES:
        E.build_mc_goldens(base, str(tmp_path))
        committed = os.path.join(E.MC_DATA, base)
        assert sorted(os.listdir(committed)) == sorted(os.listdir(tmp_path / base)), base
        for f in sorted(os.listdir(committed)):
            assert_same_file(os.path.join(committed, f), str(tmp_path / base / f))


def test_mc_goldens_reproduce_with_prefill_then_decode():
    """A few goldens via a chunked prefill + one-token decode (the engine's path), float64 and float32."""
    for base, name in [("gated_deltanet", "grm_independent_log"), ("linear_attn_identity", "ssc_checkpoint_c4"),
                       ("gated_deltanet", "mean_average_independent_c4")]:
        obj = dict(E.mc_variants())[name]
        g = _golden(base, name)
        for dtype, tol in ((torch.float64, 1e-5), (torch.float32, 2e-4)):
            m = _model(base, obj, dtype=dtype)
            state = m.new_state()
            logits = torch.cat([m.step(PROMPT[i:i + 6], state) for i in range(0, len(PROMPT), 6)])
            assert np.allclose(logits.numpy(), g["logits"], rtol=0, atol=tol), (base, name, dtype)
            toks, last = [], logits[-1]
            for _ in range(E.N_GREEDY):
                toks.append(int(torch.argmax(last)))
                last = m.step([toks[-1]], state)[-1]
            assert toks == list(g["greedy_ids"]), (base, name, dtype)
