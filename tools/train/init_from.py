"""--init-from DIR: start training from an exported model directory's weights (config.json,
model.safetensors, tokenizer.model as export_model.py writes them) instead of a random init.

Strict, like the reference's loader: the directory's config must describe the same architecture as
the model flags, its tokenizer must be byte-identical to the run's (else token ids would mean
other things), every parameter of the training model must be in model.safetensors with the same
shape, and every tensor of the file must be used. One exception: a model trained with Memory
Caching may start from one without it, so its MC gate weights (`*.attn.mc.u_proj.weight`) may be
absent from the file; they keep their init and the log names them. The file is read by mcserve_ref's safetensors
reader (which validates the header and offsets). Any problem → InitFromError naming it.
"""

import json
import os

import torch

import ref_path  # noqa: F401  (puts tests/reference on sys.path)
from mcserve_ref import safetensors_io as st

# Config keys that decide the parameter set and the computation; export-only keys (torch_dtype,
# use_cache, fuse_*, ...) may differ.
ARCHITECTURE_KEYS = ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_heads", "num_v_heads",
                     "head_dim", "expand_v", "hidden_ratio", "intermediate_size", "conv_size", "use_short_conv",
                     "use_gate", "allow_neg_eigval", "tie_word_embeddings", "norm_eps", "hidden_act")

MC_GATE_SUFFIX = ".attn.mc.u_proj.weight"


class InitFromError(ValueError):
    """An --init-from directory that cannot initialise the model (the message names the problem)."""


def _read_config(model_dir):
    """config.json of model_dir as a dict (InitFromError if missing or not JSON)."""
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise InitFromError("--init-from %s: cannot read config.json: %s" % (model_dir, e)) from e


def check_config(model_cfg, model_dir):
    """Raises InitFromError naming every architecture key where model_dir's config.json differs
    from model_cfg (the config built from the model flags)."""
    saved = _read_config(model_dir)
    diffs = ["%s: flags give %r, %s has %r" % (k, model_cfg.get(k), model_dir, saved.get(k))
             for k in ARCHITECTURE_KEYS if model_cfg.get(k) != saved.get(k)]
    if diffs:
        raise InitFromError("--init-from %s: config does not match the model flags (%s)" % (model_dir, "; ".join(diffs)))


def check_tokenizer(tokenizer_path, model_dir):
    """Raises InitFromError unless model_dir/tokenizer.model is byte-identical to tokenizer_path."""
    path = os.path.join(model_dir, "tokenizer.model")
    try:
        with open(path, "rb") as a, open(tokenizer_path, "rb") as b:
            same = a.read() == b.read()
    except OSError as e:
        raise InitFromError("--init-from %s: cannot read tokenizer.model: %s" % (model_dir, e)) from e
    if not same:
        raise InitFromError("--init-from %s: tokenizer.model differs from this run's tokenizer %s"
                            % (model_dir, tokenizer_path))


def load_weights(model, model_dir):
    """Copies model_dir/model.safetensors into `model`'s parameters (every parameter present with
    its shape, every stored tensor used; MC gate weights may be missing, see above); returns the
    sorted stored dtypes."""
    try:
        tensors = st.load_model_dir(model_dir)
    except (OSError, ValueError, KeyError) as e:
        raise InitFromError("--init-from %s: cannot read model.safetensors: %s" % (model_dir, e)) from e
    params = model.state_dict()
    new_mc = sorted(n for n in set(params) - set(tensors) if n.endswith(MC_GATE_SUFFIX))
    missing = sorted(set(params) - set(tensors) - set(new_mc))
    unused = sorted(set(tensors) - set(params))
    if missing or unused:
        raise InitFromError("--init-from %s: missing tensors %s, unused tensors %s" % (model_dir, missing, unused))
    for name, p in params.items():
        if name not in new_mc and tuple(tensors[name].shape) != tuple(p.shape):
            raise InitFromError("--init-from %s: tensor %s has shape %s, the model needs %s"
                                % (model_dir, name, list(tensors[name].shape), list(p.shape)))
    if new_mc:
        print("--init-from %s: %d MC gate weights not in the source, kept at their init: %s"
              % (model_dir, len(new_mc), ", ".join(new_mc)), flush=True)
    with torch.no_grad():
        for name, p in params.items():
            if name in new_mc:
                continue
            p.copy_(torch.from_numpy(tensors[name].to_numpy()).to(p.dtype))
    return sorted({t.dtype for t in tensors.values()})


def init_from(model, model_dir, tokenizer_path):
    """All checks, then the weights: model_dir's config and tokenizer must match, see above."""
    if not os.path.isdir(model_dir):
        raise InitFromError("--init-from %s: not a directory" % model_dir)
    check_config(model.cfg, model_dir)
    check_tokenizer(tokenizer_path, model_dir)
    return load_weights(model, model_dir)
