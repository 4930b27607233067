"""One self-modifying memory of HOPE (specs/hope.md §3.1, §3.3, §3.5), all heads at once.

    M(x; W) = R(x) + W1 sigma(W2 x)        W2 [H, E, d] (applied first), W1 [H, o, E]
    R(x) = x (o = d);  for o = 1: 0 (scalar_memory_skip none) or <skip_h, x> (linear, skip [H, d])

Inner loss ||M(k; A) - v_hat||^2 at the anchor A; gradient in closed form (times grad_scale s, A9):
    z = A2 k, a = sigma(z), e = R(k) + A1 a - v_hat
    G1 = s e a^T                       [H, o, E]
    G2 = b k^T,  b = s (A1^T e) * sigma'(z)      [H, E, d]
Update of the running weights W by one token (alpha, eta [H], k [H, d]):
    W2 <- W2 (alpha I - eta k k^T) - eta G2                        (DGD + retention, A4)
    W1 <- alpha W1 - eta G1                                        (w1_rule retention)
    W1 <- W1 (alpha I - eta a^ a^T) - eta G1, a^ = a/||a||           (w1_rule dgd_hidden)
with momentum (A8): S <- beta S - eta G;  W2 <- W2 (alpha I - eta k k^T) + S2;  W1 <- (decay of W1) + S1.
Every function takes leading token dims `...` before H where it says so.
"""

import math

import torch


def act(name):
    """(sigma, sigma') for memory_activation silu | gelu (exact erf GELU)."""
    if name == "silu":
        def f(z):
            return z * torch.sigmoid(z)

        def fp(z):
            s = torch.sigmoid(z)
            return s * (1.0 + z * (1.0 - s))
        return f, fp

    def g(z):
        return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0)))

    def gp(z):
        return 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0))) + z * torch.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return g, gp


class HopeMemory:
    """Function, gradient factors and update of one memory kind (k, v, eta, alpha, mem or q).
    d: head_dim, o: output width (d or 1), skip: [H, d] static linear skip for o = 1 or None."""

    def __init__(self, d, o, activation, grad_scale, w1_rule, skip=None):
        self.d, self.o = d, o
        self.sig, self.sigp = act(activation)
        self.s, self.w1_rule, self.skip = grad_scale, w1_rule, skip

    def residual(self, x):
        """R(x) [..., H, o] for x [..., H, d]."""
        if self.o == self.d:
            return x
        if self.skip is None:
            return torch.zeros(x.shape[:-1] + (1,), dtype=x.dtype)
        return (x * self.skip).sum(-1, keepdim=True)

    def forward(self, W, x):
        """M(x; W) [..., H, o] for W = {"W1" [H, o, E], "W2" [H, E, d]} and x [..., H, d]."""
        a = self.sig(torch.einsum("hed,...hd->...he", W["W2"], x))
        return self.residual(x) + torch.einsum("hoe,...he->...ho", W["W1"], a)

    def factors(self, A, k, v_hat):
        """Gradient factors at the anchor A for keys k [..., H, d], targets v_hat [..., H, o]:
        e [..., H, o], a [..., H, E], b [..., H, E]  (G1 = e a^T, G2 = b k^T; s included)."""
        z = torch.einsum("hed,...hd->...he", A["W2"], k)
        a = self.sig(z)
        e = self.residual(k) + torch.einsum("hoe,...he->...ho", A["W1"], a) - v_hat
        b = self.s * torch.einsum("hoe,...ho->...he", A["W1"], e) * self.sigp(z)
        return self.s * e, a, b

    def update(self, W, f, k, alpha, eta, beta=None):
        """One token's write.  W: running {"W1", "W2"} (+ "S1", "S2" with momentum); f = (e, a, b) of
        this token [H, .]; k [H, d]; alpha, eta, beta [H].  Returns the new dict."""
        e, a, b = f
        c = lambda g: g.view(-1, 1, 1)  # noqa: E731
        G1 = e.unsqueeze(-1) * a.unsqueeze(-2)                 # [H, o, E]
        G2 = b.unsqueeze(-1) * k.unsqueeze(-2)                 # [H, E, d]
        W2k = torch.einsum("hed,hd->he", W["W2"], k)
        W2 = c(alpha) * W["W2"] - c(eta) * W2k.unsqueeze(-1) * k.unsqueeze(-2)
        if self.w1_rule == "retention":
            W1 = c(alpha) * W["W1"]
        else:
            ah = a / torch.sqrt((a * a).sum(-1, keepdim=True) + 1e-12)
            W1a = torch.einsum("hoe,he->ho", W["W1"], ah)
            W1 = c(alpha) * W["W1"] - c(eta) * W1a.unsqueeze(-1) * ah.unsqueeze(-2)
        out = {}
        if "S1" in W:
            out["S1"] = c(beta) * W["S1"] - c(eta) * G1
            out["S2"] = c(beta) * W["S2"] - c(eta) * G2
            out["W1"], out["W2"] = W1 + out["S1"], W2 + out["S2"]
        else:
            out["W1"], out["W2"] = W1 - c(eta) * G1, W2 - c(eta) * G2
        return out
