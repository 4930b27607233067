"""Model-level checks on the committed fixtures (tests/data/models)."""
import json
import os

import numpy as np
import pytest
import torch

import export_fixtures as E
from mcserve_ref import CausalLM
from mcserve_ref import safetensors_io as st
from regenerated import assert_same_file

NAMES = sorted(E.FIXTURES)


def _dir(name):
    return os.path.join(E.MODELS, name)


def _golden(name):
    g, _ = st.load_file(os.path.join(_dir(name), "golden.safetensors"))
    return {k: v.to_numpy() for k, v in g.items()}


def test_fixture_set_is_complete_and_small():
    assert sorted(os.listdir(E.MODELS)) == NAMES
    total = 0
    for n in NAMES:
        files = os.listdir(_dir(n))
        for f in ("config.json", "tokenizer.model", "golden.safetensors", "golden.json"):
            assert f in files, (n, f)
        assert "model.safetensors" in files or "model.safetensors.index.json" in files
        size = sum(os.path.getsize(os.path.join(_dir(n), f)) for f in files)
        assert size <= 250 * 1024, (n, size)
        total += size
        with open(os.path.join(_dir(n), "tokenizer.model"), "rb") as a, open(E.TOKENIZER, "rb") as b:
            assert a.read() == b.read()
    assert total <= 6.5 * 1024 * 1024   # 32 fixtures (4.5 MiB before the hope ones; 5.5 before armt's two and the three hope_adaptive)


def test_prompt_tokenization():
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=E.TOKENIZER)
    assert (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.get_piece_size()) == (0, 1, 2, E.VOCAB)
    ids = E.encode_prompt()
    assert 24 <= len(ids) <= 40 and ids[0] == 1
    assert any(sp.id_to_piece(i).startswith("<0x") for i in ids)   # byte fallback exercised ("3")
    for n in NAMES:
        gj = json.load(open(os.path.join(_dir(n), "golden.json")))
        assert gj["prompt"] == E.PROMPT and gj["prompt_ids"] == ids
        assert list(_golden(n)["prompt_ids"]) == ids
        assert list(_golden(n)["greedy_ids"]) == gj["greedy_ids"]


@pytest.mark.parametrize("name", NAMES)
def test_fixture_matches_golden_and_incremental(name):
    m = CausalLM.from_dir(_dir(name), dtype=torch.float64)   # strict: every tensor used
    g = _golden(name)
    ids = [int(i) for i in g["prompt_ids"]]
    logits = m.forward(ids)
    assert logits.shape == (len(ids), m.cfg["vocab_size"])
    assert np.allclose(logits.numpy(), g["logits"], rtol=1e-6, atol=1e-5)
    assert m.greedy(ids, E.N_GREEDY) == [int(i) for i in g["greedy_ids"]]
    # incremental (state carried between calls) == full forward, for several chunkings
    rng = np.random.RandomState(123)
    long_ids = ids + [int(i) for i in rng.randint(3, m.cfg["vocab_size"], size=70 - len(ids))]
    full = m.forward(long_ids)
    for chunk in (1, 7, 64):
        state = m.new_state()
        parts = [m.step(long_ids[i:i + chunk], state) for i in range(0, len(long_ids), chunk)]
        inc = torch.cat(parts)
        assert torch.allclose(inc, full, rtol=1e-10, atol=1e-10), (name, chunk, float((inc - full).abs().max()))
    # float32 reference stays close to the float64 golden
    m32 = CausalLM.from_dir(_dir(name), dtype=torch.float32)
    assert np.allclose(m32.forward(ids).numpy(), g["logits"], atol=2e-3)


def test_regeneration_reproduces_the_committed_fixtures(tmp_path):
    for n in NAMES:
        E.build_fixture(n, str(tmp_path))
        assert sorted(os.listdir(_dir(n))) == sorted(os.listdir(tmp_path / n)), n
        for f in sorted(os.listdir(_dir(n))):
            assert_same_file(os.path.join(_dir(n), f), str(tmp_path / n / f))


def test_legacy_D_ignored_and_tied_feature_map_alias():
    t = st.load_model_dir(_dir("gated_deltanet"))
    assert "model.layers.0.attn.D" in t
    cfg = json.load(open(os.path.join(_dir("gated_deltanet"), "config.json")))
    ids = E.encode_prompt()
    a = CausalLM(cfg, t, torch.float64).forward(ids)
    t2 = {k: v for k, v in t.items() if not k.endswith(".attn.D")}
    assert torch.equal(a, CausalLM(cfg, t2, torch.float64).forward(ids))
    # tied q/k feature map: fixture stores feature_map_q.* only; feature_map_k.* alone must work too
    t = st.load_model_dir(_dir("linear_attn_t2r_tied"))
    cfg = json.load(open(os.path.join(_dir("linear_attn_t2r_tied"), "config.json")))
    assert not any("feature_map_k" in k for k in t) and "lm_head.weight" not in t
    a = CausalLM(cfg, t, torch.float64).forward(ids)
    t2 = {k.replace("feature_map_q", "feature_map_k"): v for k, v in t.items()}
    assert torch.equal(a, CausalLM(cfg, t2, torch.float64).forward(ids))
    # and an unknown tensor is rejected in strict mode
    t2["model.layers.0.attn.bogus"] = t2["model.norm.weight"]
    with pytest.raises(ValueError):
        CausalLM(cfg, t2, torch.float64)


def test_options_are_live():
    """Flipping a config option must change the logits (guards against options silently ignored)."""
    ids = E.encode_prompt()

    def logits(name, **over):
        cfg = json.load(open(os.path.join(_dir(name), "config.json")))
        cfg.update(over)
        return CausalLM(cfg, st.load_model_dir(_dir(name)), torch.float64).forward(ids)

    cases = [("gla_conv_tied", dict(clamp_min=None)), ("gla_conv_tied", dict(norm_eps=1e-6)),
             ("linear_attn_elu_norm", dict(norm_feature_map=False)), ("linear_attn_elu_norm", dict(norm_k=False)),
             ("delta_net_variants", dict(allow_neg_eigval=False)), ("gated_deltanet_gva_bf16", dict(allow_neg_eigval=False)),
             ("gla_nogate", dict(feature_map=None)), ("linear_attn_dpfp", dict(norm_feature_map=False))]
    for name, over in cases:
        assert not torch.allclose(logits(name), logits(name, **over)), (name, over)
    # norm_q only rescales q_t by a per-(token, head) scalar, which the normalised recurrence's
    # ratio (and the per-head output RMSNorm) cancel: it is invisible up to the epsilons.
    a, b = logits("linear_attn_elu_norm"), logits("linear_attn_elu_norm", norm_q=False)
    assert torch.allclose(a, b, atol=1e-6)


def test_bf16_fixture_is_bf16():
    t = st.load_model_dir(_dir("gated_deltanet_gva_bf16"))
    assert all(v.dtype == "BF16" for v in t.values())
    cfg = json.load(open(os.path.join(_dir("gated_deltanet_gva_bf16"), "config.json")))
    assert cfg["num_v_heads"] == 2 * cfg["num_heads"] and "intermediate_size" not in cfg
    assert t["model.layers.0.mlp.gate_proj.weight"].shape == (256, 32)   # default intermediate rule


def test_bench_model_exports_and_runs(tmp_path):
    d, n = E.export_bench_model(str(tmp_path / "bench"), "bf16")
    assert 9e6 <= n <= 11e6
    t = st.load_model_dir(d)
    assert all(v.dtype == "BF16" for v in t.values())
    m = CausalLM.from_dir(d, dtype=torch.float64)
    ids = [1, 17, 4000, 256, 3, 99]
    full = m.forward(ids)
    assert full.shape == (6, 4096) and torch.isfinite(full).all()
    state = m.new_state()
    inc = torch.cat([m.step(ids[:4], state), m.step(ids[4:], state)])
    assert torch.allclose(inc, full, rtol=1e-10, atol=1e-10)
