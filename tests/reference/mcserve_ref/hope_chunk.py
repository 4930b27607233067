"""Parallel (chunk-wise) solution of one memory's running-weight recurrence over an anchor piece
(specs/hope.md §3.5 "gated delta rule" mapping, §7), no momentum, w1_rule retention.

Inside a piece of n tokens every gradient factor (e, a, b) is known in advance (taken at the anchor),
so the running weights follow a *linear* recurrence from W_0 (the running weights at the piece start):
    W2_t = W2_{t-1} (alpha_t I - eta_t k_t k_t^T) - eta_t b_t k_t^T          (gated delta rule)
    W1_t = alpha_t W1_{t-1} - eta_t e_t a_t^T                                 (gated linear attention)
With Gamma_t = prod_{r<=t} alpha_r, the UT/WY form is (S = W2^T, [d, E]):
    S_t = Gamma_t S_0 + sum_{s<=t} (Gamma_t / Gamma_s) k_s x_s^T
    (I + L) X = -eta (Gamma_{t-1} S_0^T k_t + b_t)_t ,  L[t, s] = eta_t (Gamma_{t-1}/Gamma_s) k_t.k_s  (s < t)
so the end state and the read-outs W_{t-1} q (read_index before_write) or W_t q (after_write) are
masked matrix products plus one unit-lower-triangular solve per head.
"""

import torch


def _decay(logG, upto, inclusive):
    """exp(upto_t - logG_s) on s < t (s <= t if inclusive), else 0.  logG, upto [n, H] -> [H, n, n]."""
    n = logG.shape[0]
    ex = upto.T.unsqueeze(-1) - logG.T.unsqueeze(-2)                     # [H, t, s]
    mask = torch.ones(n, n, dtype=torch.bool).tril(0 if inclusive else -1)
    return torch.exp(ex.masked_fill(~mask, float("-inf")))


def parallel_piece(mem, W0, fac, k, alpha, eta, q=None, after=False):
    """Running weights of one memory after the piece and (if q [n, H, d] is given) the read-outs
    M(q_t; W_{t-1} or W_t) [n, H, o].  W0 {"W1" [H, o, E], "W2" [H, E, d]}; fac = (e [n, H, o],
    a [n, H, E], b [n, H, E]); k [n, H, d]; alpha, eta [n, H].  Returns ({"W1", "W2"}, y or None)."""
    e, a, b = fac
    n = k.shape[0]
    logG = torch.cumsum(torch.log(alpha), 0)                               # log Gamma_t  [n, H]
    prev = logG - torch.log(alpha)                                         # log Gamma_{t-1}
    last = logG[-1]                                                        # [H]
    # W2: the UT transform
    L = eta.T.unsqueeze(-1) * _decay(logG, prev, False) * torch.einsum("thd,shd->hts", k, k)
    rhs = -eta.T.unsqueeze(-1) * (torch.exp(prev).T.unsqueeze(-1) * torch.einsum("hed,thd->hte", W0["W2"], k)
                                  + b.transpose(0, 1))                    # [H, n, E]
    I = torch.eye(n, dtype=k.dtype).expand_as(L)
    X = torch.linalg.solve_triangular(I + L, rhs, upper=False, unitriangular=True)   # [H, n, E]
    c = torch.exp(last.unsqueeze(0) - logG).T                              # Gamma_n / Gamma_s  [H, n]
    W2 = torch.exp(last).view(-1, 1, 1) * W0["W2"] + torch.einsum("hs,hse,shd->hed", c, X, k)
    # W1: decayed sum
    u = -eta.unsqueeze(-1) * e                                             # [n, H, o]
    W1 = torch.exp(last).view(-1, 1, 1) * W0["W1"] + torch.einsum("hs,sho,she->hoe", c, u, a)
    if q is None:
        return {"W1": W1, "W2": W2}, None
    upto = logG if after else prev
    Dm = _decay(logG, upto, after)                                         # [H, t, s]
    z = (torch.exp(upto).T.unsqueeze(-1) * torch.einsum("hed,thd->hte", W0["W2"], q)
         + torch.einsum("hts,hse->hte", Dm * torch.einsum("thd,shd->hts", q, k), X))   # W2_t' q_t  [H, n, E]
    ap = mem.sig(z)
    y1 = (torch.exp(upto).T.unsqueeze(-1) * torch.einsum("hoe,hte->hto", W0["W1"], ap)
          + torch.einsum("hts,sho->hto", Dm * torch.einsum("hte,she->hts", ap, a), u))  # W1_t' a'_t  [H, n, o]
    return {"W1": W1, "W2": W2}, mem.residual(q) + y1.transpose(0, 1)
