"""A random RWKV-4 checkpoint in the BlinkDL PyTorch state-dict layout, sized like our bench model,
converted to rwkv.cpp's file format with rwkv.cpp's own converter (python/convert_pytorch_to_ggml.py)."""
import os
import subprocess
import sys

import torch

FFN_RATIO = 4  # RWKV-4's channel-mix width is 4 x n_embd


def rwkv4_shapes(n_embd, n_layer, vocab):
    """Name -> shape of every tensor of an RWKV-4 state dict (the names rwkv.cpp's loader asks for)."""
    c, f = n_embd, FFN_RATIO * n_embd
    shapes = {"emb.weight": (vocab, c), "blocks.0.ln0.weight": (c,), "blocks.0.ln0.bias": (c,)}
    for i in range(n_layer):
        p = "blocks.%d." % i
        shapes.update({p + "ln1.weight": (c,), p + "ln1.bias": (c,), p + "ln2.weight": (c,), p + "ln2.bias": (c,)})
        for name in ("time_decay", "time_first"):
            shapes[p + "att." + name] = (c,)
        for name in ("time_mix_k", "time_mix_v", "time_mix_r"):
            shapes[p + "att." + name] = (1, 1, c)
        for name in ("key", "value", "receptance", "output"):
            shapes[p + "att.%s.weight" % name] = (c, c)
        shapes.update({p + "ffn.time_mix_k": (1, 1, c), p + "ffn.time_mix_r": (1, 1, c), p + "ffn.key.weight": (f, c),
                       p + "ffn.value.weight": (c, f), p + "ffn.receptance.weight": (c, c)})
    shapes.update({"ln_out.weight": (c,), "ln_out.bias": (c,), "head.weight": (vocab, c)})
    return shapes


def rwkv4_param_count(n_embd, n_layer, vocab):
    """Parameters of an RWKV-4 model of this shape."""
    total = 0
    for shape in rwkv4_shapes(n_embd, n_layer, vocab).values():
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def closest_layer_count(target_params, n_embd, vocab):
    """The RWKV-4 layer count whose parameter count is closest to `target_params`."""
    return min(range(1, 64), key=lambda n: abs(rwkv4_param_count(n_embd, n, vocab) - target_params))


def random_rwkv4_state_dict(n_embd, n_layer, vocab, seed=20261125):
    """Random weights of plausible scale: unit layer norms, mixes in (0, 1), decays and bonuses as in
    trained RWKV-4 models, matrices N(0, 1/fan_in) so activations stay O(1) through the layers."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in rwkv4_shapes(n_embd, n_layer, vocab).items():
        if name.endswith((".ln0.weight", ".ln1.weight", ".ln2.weight")) or name == "ln_out.weight":
            t = torch.ones(shape)
        elif name.endswith(".bias"):
            t = torch.zeros(shape)
        elif ".time_mix_" in name:
            t = torch.rand(shape, generator=gen)
        elif name.endswith("time_decay"):
            t = torch.linspace(-5.0, 1.0, shape[0])  # the converter stores -exp(time_decay)
        elif name.endswith("time_first"):
            t = torch.full(shape, 0.3) + 0.1 * torch.randn(shape, generator=gen)
        elif name == "emb.weight":
            t = 1e-2 * torch.randn(shape, generator=gen)
        else:
            t = torch.randn(shape, generator=gen) / shape[1] ** 0.5
        out[name] = t.float()
    return out


def write_peer_models(peer_src, out_dir, n_embd, n_layer, vocab):
    """Saves a random RWKV-4 .pth and converts it with rwkv.cpp's converter to FP32 and FP16 files.
    Returns {"FP32": path, "FP16": path}."""
    os.makedirs(out_dir, exist_ok=True)
    pth = os.path.join(out_dir, "rwkv4-random.pth")
    torch.save(random_rwkv4_state_dict(n_embd, n_layer, vocab), pth)
    converter = os.path.join(peer_src, "python", "convert_pytorch_to_ggml.py")
    paths = {}
    for data_type in ("FP32", "FP16"):
        paths[data_type] = os.path.join(out_dir, "rwkv4-%s.bin" % data_type)
        subprocess.run([sys.executable, converter, pth, paths[data_type], data_type], check=True, capture_output=True)
    return paths


def rwkv4_bytes_read_per_token(n_embd, n_layer, vocab, data_type):
    """Weight bytes one decode step reads: every tensor but the embedding table (one row of it), with the
    converter's FP16 rule (matrices in FP16, vectors and time_* in FP32)."""
    total = 0
    for name, shape in rwkv4_shapes(n_embd, n_layer, vocab).items():
        if name == "emb.weight":
            continue
        n = 1
        for d in shape:
            n *= d
        half = data_type == "FP16" and len(shape) == 2 and ".time_" not in name
        total += n * (2 if half else 4)
    return total
