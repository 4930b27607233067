"""The training-time model computes the same logits as mcserve_ref's CausalLM, and its export
round-trips (strict reference load, F32 and BF16)."""

import json
import os

import numpy as np
import pytest
import torch

import export_model
import gdn_model
import weights_util
from mcserve_ref import safetensors_io as st

FIXTURE_TOKENIZER = os.path.join(os.path.dirname(export_model.__file__), "..", "..", "tests", "data",
                                 "tokenizer.model")
TINY_CONFIG_KEYS = os.path.join(os.path.dirname(export_model.__file__), "..", "..", "models", "mcserve-tiny",
                                "config.json")

VARIANTS = {
    "default": {},
    "tied_nogate_noconv_gva_neg": dict(tie_word_embeddings=True, use_gate=False, use_short_conv=False,
                                       num_v_heads=4, allow_neg_eigval=True),
}


def _model(variant, seed=0):
    cfg = gdn_model.fla_config(vocab_size=320, hidden_size=32, num_hidden_layers=2, num_heads=2, head_dim=8,
                               intermediate_size=48, expand_v=1.5)
    cfg.update(VARIANTS[variant])
    model = gdn_model.GatedDeltaNetLM(cfg, chunk_size=16).double()
    model.init_weights(torch.Generator().manual_seed(seed))
    weights_util.perturb_parameters(model)  # away from the init, so every tensor matters
    return model


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("dtype", ["F32", "BF16"])
def test_training_model_equals_reference(tmp_path, variant, dtype):
    model = _model(variant)
    export_model.export(model, FIXTURE_TOKENIZER, str(tmp_path), dtype)
    weights_util.round_weights(model, dtype)
    ref = export_model.load_reference(str(tmp_path), torch.float64)
    ids = torch.randint(0, 320, (2, 45), generator=torch.Generator().manual_seed(5))   # 45: not a chunk multiple
    with torch.no_grad():
        logits = model(ids)
    for b in range(2):
        expected = ref.forward(ids[b].tolist())
        assert torch.allclose(logits[b], expected, rtol=0, atol=1e-10), (logits[b] - expected).abs().max()
    assert logits.abs().max() > 1.0   # not a degenerate (all-zero) comparison


def test_export_writes_fla_config_and_tensors(tmp_path):
    model = _model("default")
    size = export_model.export(model, FIXTURE_TOKENIZER, str(tmp_path), "F32")
    with open(tmp_path / "config.json") as f:
        cfg = json.load(f)
    with open(TINY_CONFIG_KEYS) as f:
        bundled_keys = set(json.load(f))
    assert bundled_keys <= set(cfg)
    assert cfg["model_type"] == "gated_deltanet" and cfg["torch_dtype"] == "float32"
    tensors, meta = st.load_file(str(tmp_path / "model.safetensors"))
    assert size == os.path.getsize(tmp_path / "model.safetensors")
    assert set(tensors) == set(model.state_dict())
    for name, p in model.state_dict().items():
        assert tensors[name].dtype == "F32"
        assert np.array_equal(tensors[name].to_numpy(), p.numpy().astype(np.float32)), name
    assert (tmp_path / "tokenizer.model").read_bytes() == open(FIXTURE_TOKENIZER, "rb").read()


def test_tied_export_has_no_lm_head(tmp_path):
    model = _model("tied_nogate_noconv_gva_neg")
    export_model.export(model, FIXTURE_TOKENIZER, str(tmp_path), "F32")
    tensors, _ = st.load_file(str(tmp_path / "model.safetensors"))
    assert "lm_head.weight" not in tensors and "model.embeddings.weight" in tensors


def test_reference_rejects_an_extra_tensor(tmp_path):
    model = _model("default")
    export_model.export(model, FIXTURE_TOKENIZER, str(tmp_path), "F32")
    tensors, _ = st.load_file(str(tmp_path / "model.safetensors"))
    tensors["model.layers.0.attn.extra.weight"] = st.make_tensor(np.zeros(3), "F32")
    st.save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="unused tensors"):
        export_model.load_reference(str(tmp_path))


def test_unsupported_configs_are_rejected():
    cfg = gdn_model.fla_config(vocab_size=320, hidden_size=32, num_hidden_layers=1, num_heads=2, head_dim=8)
    with pytest.raises(ValueError, match="model_type"):
        gdn_model.GatedDeltaNetLM(dict(cfg, model_type="gla"))
    with pytest.raises(ValueError, match="memory_caching"):
        gdn_model.GatedDeltaNetLM(dict(cfg, memory_caching={"aggregation": "grm"}))
