"""ARMT's per-layer associative memory (docs/model-format.md (armt); ARMT paper eq. 1-4 + the code's form).

Shapes: P = d_mem, F = 6P (DPFP-3 features), D = n_embd, M = memory tokens written at once.
State of one layer: A [F, D] (key-first, = the official code's W_mem without its batch dim; the
paper's A is its transpose) and z [F].  Both start at 0; the first write of a request is special.

    phi(x)[(j-1)*2P + i] = r[i] * r[(i - j) mod 2P],  r = [relu(x); relu(-x)],  j = 1..3     (DPFP-3)
    read(h):   f = phi(W_Q h);   h + (f A) / (f . z + eps)                                   (eq. 4)
    write(O):  Fk = phi(O W_K^T) [M, F],  Vn = O W_V^T [M, D],  beta = sigmoid(O w_b + b_b) [M]
       first write:  Vbar = 0, gamma = 1
       otherwise:    d = Fk z + eps;  Vbar = (Fk A) / d;  gamma = clip(1 - d / (|Fk|^2 + eps), 0, 1)
                     (gamma = 1 when correction is off)
       A += Fk^T diag(beta) (Vn - Vbar);   z += sum_i gamma_i Fk_i                      (parallel form)
eps = 1e-5, added after the dot products.
"""

import torch

from .armt_config import EPS, NU


def dpfp3(x):
    """DPFP-3 of x [..., P] -> [..., 6P], the official code's feature order (see module doc)."""
    r = torch.cat([torch.relu(x), torch.relu(-x)], -1)
    n = r.shape[-1]
    idx = torch.arange(n)
    return torch.cat([r * r[..., (idx - j) % n] for j in range(1, NU + 1)], -1)


def read(h, A, z, Wq):
    """The associative read added to the residual stream: h [n, D] -> [n, D] (the read only, not h + read)."""
    f = dpfp3(h @ Wq.T)
    return (f @ A) / ((f @ z) + EPS)[:, None]


def write_terms(O, A, z, Wk, Wv, wb, bb, first, correction=True):
    """(Fk [M, F], Vn [M, D], Vbar [M, D], beta [M], gamma [M]) of one parallel write of O [M, D]."""
    Fk = dpfp3(O @ Wk.T)
    Vn = O @ Wv.T
    beta = torch.sigmoid(O @ wb.reshape(-1) + bb.reshape(()))
    if first:
        return Fk, Vn, torch.zeros_like(Vn), beta, torch.ones_like(beta)
    d = Fk @ z + EPS
    Vbar = (Fk @ A) / d[:, None]
    gamma = torch.clamp(1.0 - d / ((Fk * Fk).sum(-1) + EPS), 0.0, 1.0) if correction else torch.ones_like(beta)
    return Fk, Vn, Vbar, beta, gamma


def write(O, A, z, Wk, Wv, wb, bb, first, correction=True):
    """New (A, z) after writing the memory-token outputs O [M, D] (all M at once, from the old A, z)."""
    Fk, Vn, Vbar, beta, gamma = write_terms(O, A, z, Wk, Wv, wb, bb, first, correction)
    return A + Fk.T @ (beta[:, None] * (Vn - Vbar)), z + (gamma[:, None] * Fk).sum(0)
