"""Weight helpers shared by the export tests: move a fresh model away from its init, and round its
weights to what an export stores."""

import numpy as np
import torch

from mcserve_ref import safetensors_io as st


def perturb_parameters(model):
    """Adds 0.3·N(0, 1) (seeded per tensor size) to every parameter, so every tensor matters (norms at 1, ...)."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel()), dtype=p.dtype))


def round_weights(model, dtype):
    """Replaces the weights by the values the export stores (F32 or BF16 rounding)."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(st.make_tensor(p.numpy(), dtype).to_numpy().astype(np.float64)))
