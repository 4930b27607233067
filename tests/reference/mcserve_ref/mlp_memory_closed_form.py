"""Closed-form inner gradients of the MLP memory (specs/mc.md B.2.4, B.2.5), for the engine to follow.

Used only by tests (test_deep_memory.py checks them against autograd); the reference itself takes its
gradients by autograd (mlp_memory.MLPMemory.titans_grad / dla_grad).

Both objectives are <M(x), g> for some upstream vector g per head, so one vector-Jacobian product
does both:

    z = W2 x,  h = GELU(z),  y = W1 h
    dy  = g                                   (no LN)
    dy  = LN_backward(y, g)                   (LN on; see layer_norm_backward)
    dW1 = dy h^T                              [H, d, E]
    dz  = (W1^T dy) * GELU'(z)                [H, E]      (W1 before its own update)
    dW2 = dz x^T                              [H, E, d]

    Titans  L = 1/2 ||M(k) - v||^2 :  g = M(k) - v   (the error; factor 2 of ||.||^2 absorbed in theta)
    DLA     <M(k), v>              :  g = v
"""

import torch

from .mlp_memory import gelu_prime


def layer_norm_backward(y, g, w, eps):
    """d<LN(y), g>/dy for LN(y) = (y - mu)/sigma * w + b over the last dim.  y, g [H, d]; w [d].

        yhat = (y - mu) / sigma,  sigma = sqrt(var + eps),  gh = g * w
        dy   = (gh - mean(gh) - yhat * mean(gh * yhat)) / sigma
    """
    mu = y.mean(-1, keepdim=True)
    sigma = torch.sqrt(((y - mu) ** 2).mean(-1, keepdim=True) + eps)
    yhat = (y - mu) / sigma
    gh = g * w
    return (gh - gh.mean(-1, keepdim=True) - yhat * (gh * yhat).mean(-1, keepdim=True)) / sigma


def weights_vjp(mem, W1, W2, x, g):
    """(dW1 [H, d, E], dW2 [H, E, d]) of sum_h <M(x_h), g_h> for the MLPMemory `mem`.  x, g [H, d]."""
    z, h, y = mem.parts(W1, W2, x)
    dy = layer_norm_backward(y, g, mem.ln_w, mem.eps) if mem.use_ln else g
    dW1 = torch.einsum("hd,he->hde", dy, h)
    dz = torch.einsum("hde,hd->he", W1, dy) * gelu_prime(z)
    dW2 = torch.einsum("he,hd->hed", dz, x)
    return dW1, dW2


def titans_grad(mem, W1, W2, k, v):
    """Closed-form gradient of 1/2 ||M(k) - v||^2 per head: weights_vjp with g = M(k) - v."""
    return weights_vjp(mem, W1, W2, k, mem.forward(W1, W2, k) - v)


def dla_grad(mem, W1, W2, k, v):
    """Closed-form gradient of <M(k), v> per head: weights_vjp with g = v."""
    return weights_vjp(mem, W1, W2, k, v)
