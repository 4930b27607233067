"""A model trained with Memory Caching exports its `memory_caching` config and MC gate weights; the
export equals mcserve_ref's CausalLM (logits) and the engine (mcserve-eval perplexity, skipped only
when the binary is absent); --init-from a model without MC leaves exactly the gate weights new."""

import json
import os
import subprocess

import pytest
import torch

import export_model
import gdn_model
import weights_util
import init_from
import spm_tokenizer
import windows as win
from mcserve_ref import safetensors_io as st

ROOT = os.path.normpath(os.path.join(os.path.dirname(export_model.__file__), "..", ".."))
TOKENIZER = os.path.join(ROOT, "tests", "data", "tokenizer.model")
TEXT = os.path.join(ROOT, "tests", "data", "tokenizer_corpus.txt")
EVAL = os.environ.get("MCSERVE_EVAL", os.path.join(ROOT, "build", "tools", "eval", "mcserve-eval"))
MC = dict(aggregation="ssc", segmentation="constant", segment_size=8, init_mode="checkpoint", gate="u_proj",
          pool="mean", top_k=2)


def _model(mc=MC, dtype=torch.float64, seed=0):
    """A tiny training model (vocab 320, the fixture tokenizer's), weights moved off the init."""
    cfg = gdn_model.fla_config(vocab_size=320, hidden_size=32, num_hidden_layers=2, num_heads=2, head_dim=8,
                               hidden_ratio=2, expand_v=1.0, tie_word_embeddings=True)
    if mc is not None:
        cfg["memory_caching"] = dict(mc)
    model = gdn_model.GatedDeltaNetLM(cfg, chunk_size=4).to(dtype)
    model.init_weights(torch.Generator().manual_seed(seed))
    weights_util.perturb_parameters(model)  # away from the init, so every tensor matters
    return model


@pytest.mark.parametrize("aggregation", ["residual", "grm", "ssc"])
def test_mc_model_export_equals_reference(tmp_path, aggregation):
    model = _model(dict(MC, aggregation=aggregation))
    export_model.export(model, TOKENIZER, str(tmp_path), "BF16")
    weights_util.round_weights(model, "BF16")
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["memory_caching"]["aggregation"] == aggregation
    tensors, _ = st.load_file(str(tmp_path / "model.safetensors"))
    assert "model.layers.1.attn.mc.u_proj.weight" in tensors and tensors["model.layers.1.attn.mc.u_proj.weight"].shape == (16, 32)
    ref = export_model.load_reference(str(tmp_path), torch.float64)   # strict: the gate weights are used
    ids = torch.randint(0, 320, (2, 30), generator=torch.Generator().manual_seed(5))   # 3 segments + 6
    with torch.no_grad():
        logits = model(ids)
        plain = _model(None)(ids)
    for b in range(2):
        expected = ref.forward(ids[b].tolist())
        assert torch.allclose(logits[b], expected, rtol=0, atol=1e-10), (logits[b] - expected).abs().max()
    assert (logits[:, 8:] - plain[:, 8:]).abs().max() > 1e-2   # MC acts past the first segment


@pytest.mark.skipif(not os.path.exists(EVAL), reason="mcserve-eval not built")
def test_mc_model_export_equals_engine(tmp_path):
    model = _model(dtype=torch.float32)
    export_model.export(model, TOKENIZER, str(tmp_path), "F32")
    sp = spm_tokenizer.load(TOKENIZER)
    with open(TEXT, encoding="utf-8") as f:
        ids = torch.tensor(spm_tokenizer.encode_text(sp, f.read()), dtype=torch.long)
    context, n = 40, 4
    ref = export_model.load_reference(str(tmp_path), torch.float64)
    want, _, count = win.perplexity(lambda x: torch.stack([ref.forward(r.tolist()) for r in x]),
                                    win.tiled_windows(ids, context, n))
    out = subprocess.run([EVAL, "perplexity", "--model", str(tmp_path), "--text", TEXT, "--context", str(context),
                          "--max-windows", str(n), "--threads", "1", "--json", "-"],
                         capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["settings"]["memory_caching"] == "ssc top-2, constant segments of 8, checkpoint, gate u_proj, mean pool"
    got = report["results"]["perplexity"]
    assert report["results"]["scored_tokens"] == count
    assert abs(got - want) / want < 1e-5, (got, want)


def test_init_from_a_model_without_mc_adds_only_the_gate_weights(tmp_path, capsys):
    base = _model(None, torch.float32)
    export_model.export(base, TOKENIZER, str(tmp_path), "F32")
    mc = _model(dtype=torch.float32, seed=3)
    init_from.init_from(mc, str(tmp_path), TOKENIZER)
    for name, p in mc.state_dict().items():
        if name.endswith(".attn.mc.u_proj.weight"):
            assert not torch.equal(p, torch.zeros_like(p))   # kept (the test's perturbed init)
        else:
            assert torch.equal(p, base.state_dict()[name]), name
    assert "2 MC gate weights not in the source" in capsys.readouterr().out
