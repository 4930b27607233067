"""ARMT tensor names and shapes: the official state_dict (AssociativeRecurrentWrapper around
AssociativeMemoryCell around HF GPT2LMHeadModel), loading with checks, random weights.

D = n_embd, I = n_inner, P = d_mem, M = num_mem_tokens, V = vocab_size, Np = wpe rows
(n_positions, or n_positions + M with wrap_pos).  HF GPT-2's Conv1D weights are stored [in, out]
(y = x W + b) and are kept so here; the model multiplies by them as stored.

Canonical names (the first name of each tensor in the official state_dict order):
    memory_cell.memory                                         [M, D]
    memory_cell.model.transformer.wte.weight                   [V, D]   (LM head, tied)
    memory_cell.model.transformer.wpe.weight                   [Np, D]
    memory_cell.model.transformer.h.{i}.W_mq.weight            [P, D]
    memory_cell.model.transformer.h.{i}.W_mk.weight            [P, D]
    memory_cell.model.transformer.h.{i}.W_mv.weight            [D, D]
    memory_cell.model.transformer.h.{i}.W_mb.weight            [1, D]
    memory_cell.model.transformer.h.{i}.W_mb.bias              [1]
    memory_cell.model.transformer.h.{i}.layer.ln_1.{weight,bias}          [D]
    memory_cell.model.transformer.h.{i}.layer.attn.c_attn.{weight,bias}   [D, 3D], [3D]
    memory_cell.model.transformer.h.{i}.layer.attn.c_proj.{weight,bias}   [D, D], [D]
    memory_cell.model.transformer.h.{i}.layer.ln_2.{weight,bias}          [D]
    memory_cell.model.transformer.h.{i}.layer.mlp.c_fc.{weight,bias}      [D, I], [I]
    memory_cell.model.transformer.h.{i}.layer.mlp.c_proj.{weight,bias}    [I, D], [D]
    memory_cell.model.transformer.ln_f.{weight,bias}           [D]
Aliases the official state_dict also holds (accepted, must equal their canonical tensor):
    memory_cell.model.lm_head.weight  (= wte; tied)
    memory_cell.layers.{i}.<rest>     (= memory_cell.model.transformer.h.{i}.<rest>; the cell registers
                                       the GPT-2 block list a second time as `layers`)
Ignored: `*.layer.attn.bias`, `*.layer.attn.masked_bias` (GPT-2's causal-mask buffers, in older
transformers' state_dicts).
"""

import math
import re

import numpy as np
import torch

from .armt_config import resolve_armt_config

PRE = "memory_cell.model.transformer."
LM_HEAD = "memory_cell.model.lm_head.weight"
_LAYER_ALIAS = re.compile(r"^memory_cell\.layers\.(\d+)\.(.*)$")
_IGNORED = re.compile(r"^memory_cell\.(model\.transformer\.h|layers)\.\d+\.layer\.attn\.(bias|masked_bias)$")


def tensor_shapes(cfg, wrap_pos=False):
    """{canonical name: shape} in state_dict order, for a resolved (or raw) config."""
    c = resolve_armt_config(cfg)
    D, I, P, M, V = c["n_embd"], c["n_inner"], c["d_mem"], c["num_mem_tokens"], c["vocab_size"]
    s = {"memory_cell.memory": (M, D), PRE + "wte.weight": (V, D),
         PRE + "wpe.weight": (c["n_positions"] + (M if wrap_pos else 0), D)}
    for i in range(c["n_layer"]):
        p = PRE + "h.%d." % i
        s.update({p + "W_mq.weight": (P, D), p + "W_mk.weight": (P, D), p + "W_mv.weight": (D, D),
                  p + "W_mb.weight": (1, D), p + "W_mb.bias": (1,)})
        q = p + "layer."
        s.update({q + "ln_1.weight": (D,), q + "ln_1.bias": (D,),
                  q + "attn.c_attn.weight": (D, 3 * D), q + "attn.c_attn.bias": (3 * D,),
                  q + "attn.c_proj.weight": (D, D), q + "attn.c_proj.bias": (D,),
                  q + "ln_2.weight": (D,), q + "ln_2.bias": (D,),
                  q + "mlp.c_fc.weight": (D, I), q + "mlp.c_fc.bias": (I,),
                  q + "mlp.c_proj.weight": (I, D), q + "mlp.c_proj.bias": (D,)})
    s.update({PRE + "ln_f.weight": (D,), PRE + "ln_f.bias": (D,)})
    return s


def parameter_count(cfg, wrap_pos=False):
    """(total, armt_extra): numel of the unique parameters (tied head counted once), and ARMT's share
    L (2PD + D^2 + D + 1) + M D (+ the M extra wpe rows with wrap_pos)."""
    c = resolve_armt_config(cfg)
    shapes = tensor_shapes(c, wrap_pos)
    total = sum(math.prod(v) for v in shapes.values())
    extra = sum(math.prod(v) for k, v in shapes.items() if k == "memory_cell.memory" or ".W_m" in k)
    return total, extra + (c["num_mem_tokens"] * c["n_embd"] if wrap_pos else 0)


def _as_torch(v, dtype):
    if hasattr(v, "to_numpy"):
        v = v.to_numpy()
    return torch.as_tensor(np.asarray(v) if not torch.is_tensor(v) else v).to(dtype)


def load_weights(c, tensors, dtype, strict=True):
    """(checked {canonical name: tensor in dtype}, wrap_pos) from an official-named dict.
    c: a resolved config.  Missing tensors, wrong shapes, aliases that differ from their canonical
    tensor and (strict) unused tensors raise ValueError."""
    wpe = tensors.get(PRE + "wpe.weight")
    wrap = c["wrap_pos"]
    if wrap is None:      # A.10.3: tell wrap_pos by the wpe row count
        rows = tuple(wpe.shape)[0] if wpe is not None else c["n_positions"]
        wrap = rows == c["n_positions"] + c["num_mem_tokens"]
    shapes = tensor_shapes(c, wrap)
    out, used = {}, set()
    for name, shape in shapes.items():
        if name not in tensors:
            raise ValueError("armt: missing tensor %s" % name)
        v = _as_torch(tensors[name], dtype)
        if tuple(v.shape) != tuple(shape):
            hint = " (wrap_pos: %s)" % wrap if name == PRE + "wpe.weight" else ""
            raise ValueError("armt: tensor %s has shape %s, expected %s%s" % (name, tuple(v.shape), shape, hint))
        out[name] = v
        used.add(name)
    for name in tensors:
        m = _LAYER_ALIAS.match(name)
        canon = PRE + "h.%s.%s" % m.groups() if m else (PRE + "wte.weight" if name == LM_HEAD else None)
        if _IGNORED.match(name):
            used.add(name)
        elif canon in out:
            if not torch.equal(_as_torch(tensors[name], dtype), out[canon]):
                raise ValueError("armt: %s must equal %s (tied / aliased)" % (name, canon))
            used.add(name)
    unused = sorted(set(tensors) - used)
    if strict and unused:
        raise ValueError("armt: unused tensors in checkpoint: %s" % unused)
    return out, wrap


def random_weights(config, seed=0, dtype=torch.float32):
    """{canonical name: tensor} of a random ARMT model (deterministic in seed): LayerNorm weights ~ 1,
    biases small, matrices ~ N(0, 1/fan_in), embeddings ~ N(0, 0.5^2), memory ~ N(0, 0.5^2) (= the code's
    N(0, std(wte)^2)).  W_mv is random (the code starts it at 0; a trained model has it non-zero)."""
    c = resolve_armt_config(config)
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in tensor_shapes(c, bool(c["wrap_pos"])).items():
        n = torch.randn(shape, generator=g, dtype=torch.float64)
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            v = 1.0 + 0.1 * n
        elif name.endswith("bias"):
            v = 0.1 * n
        elif name.endswith(("wte.weight", "wpe.weight")):
            v = 0.5 * n
        elif name == "memory_cell.memory":  # N(0,1) * std(wte), the code's init; std(wte) = 0.5 here
            v = 0.5 * n
        elif ".layer." in name:         # Conv1D [in, out]
            v = n / shape[0] ** 0.5
        else:                           # nn.Linear [out, in]
            v = n / shape[1] ** 0.5
        out[name] = v.to(dtype)
    return out
