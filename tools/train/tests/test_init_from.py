"""--init-from: an exported directory loads back exactly (same logits), through train.py's flag
too, and a mismatched or corrupt directory is rejected with an error naming the problem."""

import json
import os
import shutil

import numpy as np
import pytest
import torch

import export_model
import gdn_model
import init_from
import train
from mcserve_ref import safetensors_io as st

FIXTURE_TOKENIZER = os.path.join(os.path.dirname(export_model.__file__), "..", "..", "tests", "data",
                                 "tokenizer.model")
OTHER_TOKENIZER = os.path.join(os.path.dirname(export_model.__file__), "..", "..", "models", "kjv-gdn",
                               "tokenizer.model")
FLAGS = ["--hidden", "32", "--layers", "2", "--heads", "2", "--head-dim", "8", "--hidden-ratio", "2", "--chunk", "16"]


def _model(seed):
    """A float32 training model built by train.py's flags (vocab 320, the fixture tokenizer's)."""
    model = train.build_model(train.parse_args(FLAGS + ["--seed", str(seed)]), 320)
    with torch.no_grad():   # away from the init so every tensor matters
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel() + seed)))
    return model


def _exported(tmp_path, dtype="F32"):
    """(model, directory) with the model exported to tmp_path/m."""
    model = _model(1)
    d = str(tmp_path / "m")
    export_model.export(model, FIXTURE_TOKENIZER, d, dtype)
    return model, d


def _logits(model):
    ids = torch.randint(0, 320, (2, 40), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        return model(ids)


def test_round_trip_gives_identical_logits(tmp_path):
    model, d = _exported(tmp_path)
    fresh = _model(2)
    assert not torch.equal(_logits(fresh), _logits(model))
    assert init_from.init_from(fresh, d, FIXTURE_TOKENIZER) == ["F32"]
    assert torch.equal(_logits(fresh), _logits(model))
    for name, p in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], p), name


def test_train_flag_loads_the_directory(tmp_path):
    model, d = _exported(tmp_path)
    loaded = train.build_model(train.parse_args(FLAGS + ["--seed", "5", "--init-from", d]), 320, FIXTURE_TOKENIZER)
    assert torch.equal(_logits(loaded), _logits(model))


def test_bf16_directory_loads_the_rounded_weights(tmp_path):
    model, d = _exported(tmp_path, "BF16")
    fresh = _model(2)
    assert init_from.init_from(fresh, d, FIXTURE_TOKENIZER) == ["BF16"]
    for name, p in model.state_dict().items():
        rounded = torch.from_numpy(st.round_to_bf16(p.numpy()))
        assert torch.equal(fresh.state_dict()[name], rounded), name


def _rewrite(d, edit):
    """Loads d's tensors, applies edit(dict) and writes them back."""
    tensors, _ = st.load_file(os.path.join(d, "model.safetensors"))
    edit(tensors)
    st.save_file(tensors, os.path.join(d, "model.safetensors"))


def _rejects(d, *needles, tokenizer=FIXTURE_TOKENIZER):
    with pytest.raises(init_from.InitFromError) as e:
        init_from.init_from(_model(2), d, tokenizer)
    for needle in needles:
        assert needle in str(e.value), str(e.value)


def test_config_mismatch_names_the_key(tmp_path):
    _, d = _exported(tmp_path)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["hidden_size"] = 48
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    _rejects(d, "hidden_size", "flags give 32", "has 48")


def test_export_only_config_keys_may_differ(tmp_path):
    model, d = _exported(tmp_path, "BF16")   # torch_dtype bfloat16 while the model is float32
    init_from.init_from(_model(2), d, FIXTURE_TOKENIZER)


def test_other_tokenizer_is_rejected(tmp_path):
    _, d = _exported(tmp_path)
    shutil.copyfile(OTHER_TOKENIZER, os.path.join(d, "tokenizer.model"))
    _rejects(d, "tokenizer.model differs")


def test_missing_tensor_is_named(tmp_path):
    _, d = _exported(tmp_path)
    _rewrite(d, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    _rejects(d, "missing tensors ['model.layers.1.mlp.up_proj.weight']")


def test_unused_tensor_is_named(tmp_path):
    _, d = _exported(tmp_path)
    _rewrite(d, lambda t: t.__setitem__("lm_head.weight", st.make_tensor(np.zeros((320, 32)), "F32")))
    _rejects(d, "unused tensors ['lm_head.weight']")


def test_wrong_shape_is_named(tmp_path):
    _, d = _exported(tmp_path)
    _rewrite(d, lambda t: t.__setitem__("model.layers.0.attn.A_log", st.make_tensor(np.zeros(3), "F32")))
    _rejects(d, "model.layers.0.attn.A_log has shape [3], the model needs [2]")


def test_truncated_file_is_rejected(tmp_path):
    _, d = _exported(tmp_path)
    path = os.path.join(d, "model.safetensors")
    with open(path, "rb") as f:
        raw = f.read()
    with open(path, "wb") as f:
        f.write(raw[:-100])
    _rejects(d, "cannot read model.safetensors", "bad offsets")


def test_missing_files_are_named(tmp_path):
    _rejects(str(tmp_path / "nowhere"), "not a directory")
    _, d = _exported(tmp_path)
    os.remove(os.path.join(d, "config.json"))
    _rejects(d, "cannot read config.json")
