"""The deep (MLP) memory of `titans` (memory_depth 2) and `dla` (docs/model-format.md), all heads at once.

    z = W2 x,  h = GELU(z),  y = W1 h
    M(x) = x + y                       memory_layer_norm false
    M(x) = x + LN(y)                   memory_layer_norm true (specs/mc.md B.2.3 option (a))

Shapes: x [H, d]; W2 [H, E, d] (applied first); W1 [H, d, E]; E = memory_expansion * d.
GELU is the exact (erf) one.  LN is a plain LayerNorm over d (biased variance, eps inside the sqrt)
whose affine parameters ln_w, ln_b [d] are slow weights shared by every head and every memory of the
layer (never updated by the inner optimiser, never cached, never souped).

The inner gradients the reference uses are taken by autograd (`titans_grad`, `dla_grad`); the closed
forms the engine implements are in mlp_memory_closed_form.py (test-only, checked against these).
"""

import math

import torch


def gelu(z):
    """Exact GELU: z * Phi(z), Phi the standard normal CDF.  Any shape."""
    return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0)))


def gelu_prime(z):
    """d GELU / dz = Phi(z) + z * phi(z).  Any shape."""
    cdf = 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0)))
    pdf = torch.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return cdf + z * pdf


def layer_norm(y, w, b, eps):
    """(y - mean) / sqrt(var + eps) * w + b over the last dim (biased variance).  y [H, d], w, b [d]."""
    mu = y.mean(-1, keepdim=True)
    var = ((y - mu) ** 2).mean(-1, keepdim=True)
    return (y - mu) / torch.sqrt(var + eps) * w + b


class MLPMemory:
    """The memory function of one layer: sizes and the slow LN parameters (None when LN is off)."""

    def __init__(self, heads, d, expansion, ln_w=None, ln_b=None, eps=1e-6):
        self.H, self.d, self.E = heads, d, expansion * d
        self.ln_w, self.ln_b, self.eps = ln_w, ln_b, eps
        self.use_ln = ln_w is not None

    def parts(self, W1, W2, x):
        """The forward's intermediates: z = W2 x [H, E], h = GELU(z) [H, E], y = W1 h [H, d]."""
        z = torch.einsum("hed,hd->he", W2, x)
        h = gelu(z)
        y = torch.einsum("hde,he->hd", W1, h)
        return z, h, y

    def forward(self, W1, W2, x):
        """M(x) [H, d] for weights W1 [H, d, E], W2 [H, E, d] and inputs x [H, d] (one per head)."""
        _, _, y = self.parts(W1, W2, x)
        if self.use_ln:
            y = layer_norm(y, self.ln_w, self.ln_b, self.eps)
        return x + y

    def _grad(self, W1, W2, objective):
        """Autograd gradient of objective(w1, w2) (a scalar) w.r.t. the weights at (W1, W2)."""
        with torch.enable_grad():
            w1 = W1.detach().clone().requires_grad_(True)
            w2 = W2.detach().clone().requires_grad_(True)
            g1, g2 = torch.autograd.grad(objective(w1, w2), (w1, w2))
        return g1, g2

    def titans_grad(self, W1, W2, k, v):
        """(dL/dW1 [H, d, E], dL/dW2 [H, E, d]) of L = 1/2 sum_h ||M(k_h) - v_h||^2 at (W1, W2).
        Heads are independent, so the sum gives each head its own gradient.  k, v [H, d]."""
        return self._grad(W1, W2, lambda w1, w2: 0.5 * ((self.forward(w1, w2, k) - v) ** 2).sum())

    def dla_grad(self, W1, W2, k, v):
        """(d/dW1, d/dW2) of sum_h <M(k_h), v_h> at (W1, W2): the Hebbian direction DLA adds."""
        return self._grad(W1, W2, lambda w1, w2: (self.forward(w1, w2, k) * v).sum())
