"""GAM tensor names and shapes: the official state_dict of GAM_Model, loading with checks, random weights.

D = n_embed, Ms = num_memory_slots, k = conv_kernel_size, V = vocab_size, Np = block_size.
Canonical names (the first name of each tensor in the official state_dict order):
    token_embedding.weight              [V, D]      (LM head, tied)
    pos_embedding.weight                [Np, D]     learned absolute positions
    blocks.{i}.causal_conv.weight       [D, 1, k]   depthwise; [:, 0, k-1] multiplies the current token
    blocks.{i}.causal_conv.bias         [D]
    blocks.{i}.memory_bank              [Ms, D]
    blocks.{i}.gate.weight              [2D, D]     rows 0..D-1 local gate, D..2D-1 global gate
    blocks.{i}.gate.bias                [2D]
    blocks.{i}.ffn.0.weight             [4D, D]
    blocks.{i}.ffn.0.bias               [4D]
    blocks.{i}.ffn.2.weight             [D, 4D]
    blocks.{i}.ffn.2.bias               [D]
    blocks.{i}.ln1.{weight,bias}        [D]
    blocks.{i}.ln2.{weight,bias}        [D]
    ln_f.{weight,bias}                  [D]
Alias the official state_dict also holds (accepted, must equal token_embedding.weight): head.weight.
"""

import math

import numpy as np
import torch

from .gam_config import resolve_gam_config

HEAD = "head.weight"
EMB = "token_embedding.weight"


def tensor_shapes(cfg):
    """{canonical name: shape} in state_dict order, for a resolved (or raw) config."""
    c = resolve_gam_config(cfg)
    D, Ms, k = c["n_embed"], c["num_memory_slots"], c["conv_kernel_size"]
    s = {EMB: (c["vocab_size"], D), "pos_embedding.weight": (c["block_size"], D)}
    for i in range(c["n_layer"]):
        p = "blocks.%d." % i
        s.update({p + "causal_conv.weight": (D, 1, k), p + "causal_conv.bias": (D,), p + "memory_bank": (Ms, D),
                  p + "gate.weight": (2 * D, D), p + "gate.bias": (2 * D,),
                  p + "ffn.0.weight": (4 * D, D), p + "ffn.0.bias": (4 * D,),
                  p + "ffn.2.weight": (D, 4 * D), p + "ffn.2.bias": (D,),
                  p + "ln1.weight": (D,), p + "ln1.bias": (D,), p + "ln2.weight": (D,), p + "ln2.bias": (D,)})
    s.update({"ln_f.weight": (D,), "ln_f.bias": (D,)})
    return s


def parameter_count(cfg):
    """numel of the unique parameters (tied head counted once)."""
    return sum(math.prod(v) for v in tensor_shapes(resolve_gam_config(cfg)).values())


def _as_torch(v, dtype):
    if hasattr(v, "to_numpy"):
        v = v.to_numpy()
    return torch.as_tensor(np.asarray(v) if not torch.is_tensor(v) else v).to(dtype)


def load_weights(c, tensors, dtype, strict=True):
    """Checked {canonical name: tensor in dtype}.  c: a resolved config.  Missing tensors, wrong shapes,
    a head.weight that differs from token_embedding.weight and (strict) unused tensors raise ValueError.
    A checkpoint that holds only head.weight (the other tied name) is accepted."""
    out, used = {}, set()
    for name, shape in tensor_shapes(c).items():
        src = name if name in tensors or name != EMB or HEAD not in tensors else HEAD
        if src not in tensors:
            raise ValueError("gam: missing tensor %s" % name)
        v = _as_torch(tensors[src], dtype)
        if tuple(v.shape) != tuple(shape):
            raise ValueError("gam: tensor %s has shape %s, expected %s" % (src, tuple(v.shape), shape))
        out[name] = v
        used.add(src)
    if HEAD in tensors and HEAD not in used:
        if not torch.equal(_as_torch(tensors[HEAD], dtype), out[EMB]):
            raise ValueError("gam: %s must equal %s (tied)" % (HEAD, EMB))
        used.add(HEAD)
    unused = sorted(set(tensors) - used)
    if strict and unused:
        raise ValueError("gam: unused tensors in checkpoint: %s" % unused)
    return out


def random_weights(config, seed=0, dtype=torch.float32):
    """{canonical name: tensor} of a random GAM model (deterministic in seed): LayerNorm weights ~ 1,
    biases small, matrices ~ N(0, 1/fan_in), embeddings ~ N(0, 0.5^2), conv ~ N(0, 1/k), memory bank
    ~ N(0, 1/D) (rows of norm ~ 1, so the slot softmax is neither flat nor one-hot)."""
    c = resolve_gam_config(config)
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in tensor_shapes(c).items():
        n = torch.randn(shape, generator=g, dtype=torch.float64)
        if name.endswith(("ln1.weight", "ln2.weight", "ln_f.weight")):
            v = 1.0 + 0.1 * n
        elif name.endswith("bias"):
            v = 0.1 * n
        elif name.endswith("embedding.weight"):
            v = 0.5 * n
        else:                                   # [out, in] / [D, 1, k] / [Ms, D]
            v = n / shape[-1] ** 0.5
        out[name] = v.to(dtype)
    return out
