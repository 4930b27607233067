"""Export a trained GatedDeltaNetLM as an mcserve / fla model directory (config.json,
model.safetensors written by mcserve_ref.safetensors_io, tokenizer.model), and load one back
through the reference (strict: every tensor must be used)."""

import json
import os
import shutil

import torch

import ref_path  # noqa: F401  (puts tests/reference on sys.path)
from mcserve_ref import CausalLM
from mcserve_ref import safetensors_io as st


def checkpoint_tensors(model, dtype="F32"):
    """name → safetensors Tensor for every parameter (fla names; a tied lm_head is not stored)."""
    out = {}
    for name, p in model.state_dict().items():
        out[name] = st.make_tensor(p.detach().to(torch.float64).cpu().numpy(), dtype)
    return out


def export(model, tokenizer_path, out_dir, dtype="F32"):
    """Writes config.json, model.safetensors and tokenizer.model into out_dir (created if needed).
    Returns the safetensors size in bytes."""
    os.makedirs(out_dir, exist_ok=True)
    cfg = dict(model.cfg)
    cfg["torch_dtype"] = "bfloat16" if dtype == "BF16" else "float32"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    path = os.path.join(out_dir, "model.safetensors")
    st.save_file(checkpoint_tensors(model, dtype), path)
    shutil.copyfile(tokenizer_path, os.path.join(out_dir, "tokenizer.model"))
    return os.path.getsize(path)


def load_reference(model_dir, dtype=torch.float32):
    """mcserve_ref's CausalLM for model_dir, loaded strictly (unknown or unused tensors → error)."""
    return CausalLM.from_dir(model_dir, dtype=dtype, strict=True)
