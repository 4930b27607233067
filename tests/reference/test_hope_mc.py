"""Memory Caching on HOPE's M_mem (mcserve_ref/mc_hope.py; docs/memory-caching.md "Memory Caching on hope").
float64 throughout.

Checks: nothing cached yet == the base model (every read-out mode); residual over one segment == base;
SSC keeping every cached segment == GRM; independent != checkpoint; any split into step() calls == one
call and the per-token form == the chunk form (constant and logarithmic); soup by activation mixing ==
soup with the weights mixed; the caches are exactly M_mem's running weights at segment ends (and, in
independent mode, those of an M_mem restarted by hand at the segment start); bad memory_caching values are
rejected naming the field; the golden computation of hope_mc_variants runs (to a tmp dir) and hope is an
engine MC base (its goldens live in tests/data/mc/hope).
"""
import json
import os

import pytest
import torch

import family_testing

from mcserve_ref import safetensors_io as st
from mcserve_ref.hope import HopeLM, random_weights
from mcserve_ref.hope_config import resolve_hope_config

import export_fixtures as ef

D = torch.float64
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "data", "models", "hope")

SMALL = dict(model_type="hope", hidden_size=16, num_hidden_layers=2, num_heads=2, head_dim=8, vocab_size=40,
             chunk_size_other=4, chunk_size_mem=3,
             cms_levels=[dict(chunk_size=5, intermediate_size=24), dict(chunk_size=7, intermediate_size=16,
                                                                         activation="gelu")])
# every read-out of M_mem the layer has: R before / after the write, A (anchor); momentum, dgd_hidden, GELU
READS = {
    "R_before": {},
    "R_after_gelu_dgd": dict(read_index="after_write", memory_activation="gelu", w1_rule="dgd_hidden",
                             momentum="data", adaptive_q=True),
    "A_momentum": dict(readout_mode="A", momentum="constant", momentum_beta=0.5, chunk_size_mem=4),
}
IDS = [int(i) for i in torch.randint(3, 40, (19,), generator=torch.Generator().manual_seed(11))]
AGGS = ("residual", "grm", "ssc", "mean", "soup")

_weights = {}


def small(read="R_before", mc=None, **over):
    cfg = dict(SMALL, **READS[read], **over)
    key = json.dumps(cfg, sort_keys=True)
    if key not in _weights:
        _weights[key] = random_weights(cfg, seed=4, dtype=D)
    return HopeLM(dict(cfg, memory_caching=mc), _weights[key], dtype=D)


def fixture(mc=None):
    with open(os.path.join(FIXTURE, "config.json")) as f:
        cfg = json.load(f)
    return HopeLM(dict(cfg, memory_caching=mc), st.load_model_dir(FIXTURE), dtype=D)


def mc(agg, init="independent", seg="constant", C=4, **kw):
    return dict(aggregation=agg, init_mode=init, segmentation=seg, segment_size=C, **kw)


def close(a, b, tol=1e-10):
    family_testing.close(a, b, tol)


def run_split(m, ids, sizes, form="chunk"):
    s, outs, i = m.new_state(), [], 0
    for n in sizes:
        outs.append(m.step(ids[i:i + n], s, form=form))
        i += n
    if i < len(ids):
        outs.append(m.step(ids[i:], s, form=form))
    return torch.cat(outs, 0)


# ------------------------------------------------------------------------------- identities with the base

@pytest.mark.parametrize("read", sorted(READS))
def test_nothing_cached_is_base(read):
    """Prompt shorter than a segment: every aggregation, both init modes == the model without MC."""
    ids = IDS[:12]
    base = small(read).forward(ids, form="token")
    for agg in AGGS:
        for init in ("independent", "checkpoint"):
            m = small(read, mc(agg, init, C=16))
            close(m.forward(ids), base)
            close(m.forward(ids, form="token"), base)


def test_residual_one_segment_is_base():
    """One segment of exactly the whole prompt: residual (and the rest) == base, on the fixture."""
    ids = ef.encode_prompt()
    base = fixture().forward(ids)
    for init in ("independent", "checkpoint"):
        close(fixture(mc("residual", init, C=len(ids))).forward(ids), base)


@pytest.mark.parametrize("read", sorted(READS))
def test_checkpoint_online_is_base_until_first_cache(read):
    """Checkpoint mode: M_mem continues, so the first segment's tokens and (constant segments) the online
    term are the base model's; independent mode differs from checkpoint once a segment is cached."""
    base = small(read).forward(IDS, form="token")
    ind = small(read, mc("grm", "independent")).forward(IDS)
    ck = small(read, mc("grm", "checkpoint")).forward(IDS)
    close(ind[:4], base[:4])
    close(ck[:4], base[:4])
    assert (ind[4:] - ck[4:]).abs().max().item() > 1e-3
    assert (ck[4:] - base[4:]).abs().max().item() > 1e-3


@pytest.mark.parametrize("seg", ("constant", "logarithmic"))
@pytest.mark.parametrize("init", ("independent", "checkpoint"))
def test_ssc_keeping_all_is_grm(seg, init):
    """SSC with top_k >= the number of cached segments (19 tokens, C = 4: at most 4; log: at most 4) == GRM."""
    grm = small("R_before", mc("grm", init, seg)).forward(IDS)
    for k in (4, 64):
        close(small("R_before", mc("ssc", init, seg, top_k=k)).forward(IDS), grm, tol=0.0)
    assert (small("R_before", mc("ssc", init, seg, top_k=1)).forward(IDS) - grm).abs().max().item() > 1e-6


# ------------------------------------------------------------------------------- forms and splits

@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("seg", ("constant", "logarithmic"))
def test_splits_and_forms_equal_one_call(read, seg):
    """Any split of the ids into step() calls == one call; the per-token form == the chunk form."""
    aggs = ("residual", "grm", "ssc", "soup") + (("mean",) if seg == "constant" else ())
    for agg in aggs:
        for init in ("independent", "checkpoint"):
            m = small(read, mc(agg, init, seg, C=5, top_k=1))
            one = m.forward(IDS)
            close(run_split(m, IDS, [3, 1, 6, 2]), one)
            if agg in ("grm", "soup"):       # decode-like: one token per call (the state is the same for all)
                close(run_split(m, IDS, [1] * len(IDS)), one)
            close(m.forward(IDS, form="token"), one)


def test_soup_activation_mixing_is_materialised_soup():
    for read in ("R_before", "R_after_gelu_dgd"):
        for init in ("independent", "checkpoint"):
            m = small(read, mc("soup", init))
            y = m.forward(IDS)
            for L in m.layers:
                L["attn"].mc.materialise_soup = True
            close(m.forward(IDS), y)


# ------------------------------------------------------------------------------- state

def _fresh_mem(attn):
    w = dict(attn.init["mem"])
    if attn.cfg["momentum"] != "none":
        w["S1"], w["S2"] = torch.zeros_like(w["W1"]), torch.zeros_like(w["W2"])
    return w


@pytest.mark.parametrize("read", ("R_before", "A_momentum"))
def test_caches_are_mem_weights_at_segment_ends(read):
    """The cache of segment [a, b] is M_mem's {W1, W2} after token b: in checkpoint mode the base model's
    running M_mem; in independent mode that of a base model whose M_mem (weights, anchor, momentum) is
    restarted by hand at token a (the other memories, conv windows and chunk phases going on).  Segments of 4
    across M_mem chunks of 3 (A_momentum: 4) so a restart falls inside an M_mem chunk."""
    C = 4
    base = small(read)
    for init in ("independent", "checkpoint"):
        m = small(read, mc("grm", init, C=C))
        s = m.new_state()
        m.step(IDS[:12], s)
        for ms in s["mix"]:
            assert "mem" not in ms["run"] and "mem" not in ms["anch"]   # M_mem lives in the MC state
        bs = base.new_state()
        for seg in range(3):
            a, b = seg * C + 1, (seg + 1) * C
            if init == "independent":
                for L, ms in zip(base.layers, bs["mix"]):
                    ms["run"]["mem"] = _fresh_mem(L["attn"])
                    ms["anch"]["mem"] = dict(L["attn"].init["mem"])
            base.step(IDS[a - 1:b], bs, form="token")
            # layer 0 only: layer 1's input is layer 0's MC output, which is not the base model's
            ms, bm = s["mix"][0], bs["mix"][0]
            mst = ms["mc"]
            cache = mst.snap[b - 1] if init == "checkpoint" else m.layers[0]["attn"].mc._fresh_block(mst, a, b)
            assert set(cache) == {"W1", "W2"}
            for w in ("W1", "W2"):
                close(cache[w], bm["run"]["mem"][w], tol=1e-12)
        # the other memories (and the conv windows) run as without MC whatever the init mode
        for n in ("k", "v", "eta", "alpha"):
            for w in ("W1", "W2"):
                close(s["mix"][0]["run"][n][w], bs["mix"][0]["run"][n][w], tol=1e-12)
                close(s["mix"][0]["anch"][n][w], bs["mix"][0]["anch"][n][w], tol=1e-12)
        close(s["mix"][0]["conv_k"], bs["mix"][0]["conv_k"], tol=1e-12)


def test_pooled_key_is_mean_of_write_keys():
    m = small("R_before", mc("grm", C=4))
    s = m.new_state()
    m.step(IDS[:9], s)
    mst = s["mix"][0]["mc"]
    ks = torch.stack([mst.hist[p]["k"] for p in range(4, 8)], 0)
    close(mst.pools[(5, 8)], ks.mean(0), tol=1e-15)
    assert [int(h["t"]) for h in mst.hist] == list(range(1, 10))


# ------------------------------------------------------------------------------- gate u_proj

def test_gate_u_proj():
    """gate u_proj reads model.layers.{i}.attn.mc.u_proj.weight [H*d, hidden]; unset gate picks it iff present;
    the tensor is ignored (not 'unused') when MC is off."""
    cfg = dict(SMALL, memory_caching=mc("grm", gate="u_proj"))
    w = random_weights(cfg, seed=4, dtype=D)
    assert w["model.layers.1.attn.mc.u_proj.weight"].shape == (16, 16)
    y_u = HopeLM(cfg, w, dtype=D).forward(IDS)
    y_auto = HopeLM(dict(cfg, memory_caching=mc("grm")), w, dtype=D).forward(IDS)
    close(y_auto, y_u, tol=0.0)
    w_q = {n: t for n, t in w.items() if ".mc." not in n}
    y_q = HopeLM(dict(cfg, memory_caching=mc("grm")), w_q, dtype=D).forward(IDS)
    assert (y_q - y_u).abs().max().item() > 1e-6
    HopeLM(dict(SMALL), w, dtype=D)      # MC off: u_proj tensors are ignored, not rejected


# ------------------------------------------------------------------------------- config

@pytest.mark.parametrize("obj,field", [
    ("grm", "memory_caching must be an object"),
    (dict(aggregation="max"), "memory_caching.aggregation"),
    (dict(segmentation="fenwick"), "memory_caching.segmentation"),
    (dict(segment_size=0), "memory_caching.segment_size"),
    (dict(segment_size=2.0), "memory_caching.segment_size"),
    (dict(init_mode="reset"), "memory_caching.init_mode"),
    (dict(gate="k"), "memory_caching.gate"),
    (dict(pool="max"), "memory_caching.pool"),
    (dict(aggregation="ssc", top_k=0), "memory_caching.top_k"),
    (dict(mean_combine="mul"), "memory_caching.mean_combine"),
    (dict(aggregation="mean", segmentation="logarithmic"), "memory_caching: aggregation mean"),
    (dict(layers=[2]), "memory_caching.layers"),
    (dict(layers="first"), "memory_caching.layers"),
    (dict(segment=4), "memory_caching: unknown fields"),
])
def test_config_rejects_bad_memory_caching(obj, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        resolve_hope_config(dict(SMALL, memory_caching=obj))


def test_config_memory_caching_resolution():
    assert resolve_hope_config(dict(SMALL))["memory_caching"] is None
    assert resolve_hope_config(dict(SMALL, memory_caching=None))["memory_caching"] is None
    assert resolve_hope_config(dict(SMALL, memory_caching=dict(aggregation="none")))["memory_caching"] is None
    r = resolve_hope_config(dict(SMALL, memory_caching={}))["memory_caching"]
    assert (r["aggregation"], r["segmentation"], r["segment_size"], r["init_mode"], r["layers"]) == \
        ("grm", "constant", 256, "independent", [0, 1])
    with pytest.raises(ValueError, match="memory_caching"):
        resolve_hope_config(dict(SMALL, cms_adaptive=True, memory_caching=dict(aggregation="grm"),
                                 cms_levels=[dict(chunk_size=5, intermediate_size=24, lr=0.5)]))


def test_mc_on_one_layer_only():
    """layers [1]: layer 0 keeps its M_mem in the mixer state and reads as without MC."""
    m = small("R_before", mc("grm", layers=[1]))
    s = m.new_state()
    y = m.step(IDS, s)
    assert "mem" in s["mix"][0]["run"] and "mc" not in s["mix"][0] and "mc" in s["mix"][1]
    assert (y - small("R_before").forward(IDS)).abs().max().item() > 1e-6


# ------------------------------------------------------------------------------- goldens

def test_hope_mc_variants_and_goldens(tmp_path):
    """hope_mc_variants(): every object resolves, every aggregation, segmentation and init mode appears, and
    none is the combination the engine refuses (soup, logarithmic, independent); hope is an engine MC base;
    build_mc_goldens("hope") runs (two variants, to a tmp dir)."""
    names = [n for n, _ in ef.hope_mc_variants()]
    assert len(names) == len(set(names)) == 7
    objs = [obj for _, obj in ef.hope_mc_variants()]
    for obj in objs:
        assert resolve_hope_config(dict(SMALL, memory_caching=obj))["memory_caching"]["gate"] == "q"
        assert (obj["aggregation"], obj["segmentation"], obj["init_mode"]) != ("soup", "logarithmic", "independent")
    assert {o["aggregation"] for o in objs} == {"residual", "grm", "ssc", "soup", "mean"}
    assert {(o["segmentation"], o["init_mode"]) for o in objs} == {(s, i) for s in ("constant", "logarithmic")
                                                                   for i in ("independent", "checkpoint")}
    assert "hope" in ef.ALL_MC_BASES
    d = ef.build_mc_goldens("hope", out_root=str(tmp_path), variants={"grm_independent_c4", "soup_checkpoint_log"})
    listing = json.load(open(os.path.join(d, "variants.json")))
    assert [v["name"] for v in listing] == ["grm_independent_c4", "soup_checkpoint_log"]
    g, _ = st.load_file(os.path.join(d, "grm_independent_c4.safetensors"))
    logits = torch.as_tensor(g["logits"].to_numpy()).to(D)
    ref = fixture(dict(listing[0]["memory_caching"])).forward(ef.encode_prompt())
    close(logits, ref, tol=1e-6)
