"""Primitive numerics of the reference, written from specs/checkpoints.md §1.7 and §2.

Everything here works on one sequence (no batch).  Shapes:
  token-major inputs  q, k: [T, H, K]   v: [T, H, V]   per-head scalars: [T, H]
  recurrent state     S: [H, K, V]  (K-first, "HKV", fp32/fp64)
All recurrences are explicit token-by-token loops (the naive forms).
"""

import math

import torch
import torch.nn.functional as F

L2_EPS = 1e-6          # fla/modules/l2norm.py default, inside the sqrt
SUM_NORM_EPS = 1e-4    # linear_attn norm_q / norm_k:  x / (sum(x) + 1e-4)
LA_NORMALIZE_EPS = 1e-10  # linear_attn normalize: o / (q.z + 1e-10)


# ----------------------------------------------------------------------------- norms / acts

def rms_norm(x, weight, eps):
    """y = x * rsqrt(mean(x^2) + eps) * weight   (over the last dim)."""
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * weight if weight is not None else y


def gated_rms_norm(x, g, weight, eps, activation="swish"):
    """FusedRMSNormGated: rms_norm(x) * act(g), act = swish (g*sigmoid(g)) or sigmoid."""
    y = rms_norm(x, weight, eps)
    if activation in ("swish", "silu"):
        return y * (g * torch.sigmoid(g))
    if activation == "sigmoid":
        return y * torch.sigmoid(g)
    raise ValueError("unsupported gate activation %r" % activation)


def l2norm(x, eps=L2_EPS):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def silu(x):
    return x * torch.sigmoid(x)


def act_fn(name):
    """fla ACT2FN subset used by configs here (hidden_act, GLA feature_map / gate_fn)."""
    if name in ("swish", "silu"):
        return silu
    if name == "relu":
        return torch.relu
    if name == "sigmoid":
        return torch.sigmoid
    if name == "identity" or name is None:
        return lambda x: x
    raise ValueError("unsupported activation %r" % name)


def gated_mlp(x, w_gate, w_up, w_down, act="swish"):
    """SwiGLU: down(act(gate x) * up x).  x: [T, H]; weights [out, in]."""
    return (act_fn(act)(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


# ----------------------------------------------------------------------------- short conv

def short_conv_full(x, w, activation):
    """Causal depthwise conv over a whole sequence (nn.Conv1d(groups=D, padding=W-1), first T outputs).

    x: [T, D]; w: [D, 1, W] (checkpoint layout).  y_t = act(sum_j w[d, j] * x_{t-W+1+j})."""
    T, D = x.shape
    W = w.shape[-1]
    y = F.conv1d(x.T.unsqueeze(0), w, bias=None, padding=W - 1, groups=D)[0, :, :T].T
    return silu(y) if activation == "silu" else y


def short_conv_step(x, w, state, activation):
    """Incremental causal conv.  state: [D, W] = the last W pre-conv inputs (oldest first),
    zeros at sequence start (fla's conv cache layout).  Returns (y [T, D], new_state [D, W])."""
    T, D = x.shape
    W = w.shape[-1]
    ws = w[:, 0, :]                         # [D, W]
    ys = []
    for t in range(T):
        state = torch.cat([state[:, 1:], x[t].unsqueeze(1)], dim=1)   # shift in x_t
        ys.append((state * ws).sum(-1))
    y = torch.stack(ys, 0) if ys else x.new_zeros(0, D)
    return (silu(y) if activation == "silu" else y), state


# ----------------------------------------------------------------------------- feature maps

def dpfp(x, nu=4):
    """DPFP (fla DPFPFeatureMap, nu=4): out dim 2*nu*d.
    u = [relu(x), relu(-x)] (2d); out = cat_{j=1..nu}(u) * cat_{j=1..nu}(roll(u, j))."""
    u = torch.cat([torch.relu(x), torch.relu(-x)], dim=-1)
    rolled = torch.cat([torch.roll(u, shifts=j, dims=-1) for j in range(1, nu + 1)], dim=-1)
    rep = torch.cat([u] * nu, dim=-1)
    return rep * rolled


def hedgehog(x, w, b):
    """softmax([2(Wx+b), -2(Wx+b)]) over 2d features."""
    y = 2.0 * (x @ w.T + b)
    return torch.softmax(torch.cat([y, -y], dim=-1), dim=-1)


def t2r(x, w):
    return torch.relu(x @ w.T)


def hadamard(x, w1, b1, w2, b2):
    return (x @ w1.T + b1) * (x @ w2.T + b2)


def elu_p1(x):
    return F.elu(x) + 1.0


# ----------------------------------------------------------------------------- recurrences

def linear_attn_recurrent(q, k, v, scale, normalize, S, z):
    """specs §2.1.  S_t = S_{t-1} + k_t v_t^T ;  o_t = (scale q_t)^T S_t ;
    if normalize: z_t = z_{t-1} + k_t ;  o_t /= (scale q_t . z_t + 1e-10).
    S: [H, K, V], z: [H, K]."""
    T = q.shape[0]
    outs = []
    for t in range(T):
        qt = q[t] * scale
        S = S + k[t].unsqueeze(-1) * v[t].unsqueeze(-2)
        o = torch.einsum("hk,hkv->hv", qt, S)
        if normalize:
            z = z + k[t]
            o = o / ((qt * z).sum(-1, keepdim=True) + LA_NORMALIZE_EPS)
        outs.append(o)
    return torch.stack(outs, 0), S, z


def gla_recurrent(q, k, v, gk, scale, S):
    """specs §2.2.  S_t = diag(exp(gk_t)) S_{t-1} + k_t v_t^T ; o_t = (scale q_t)^T S_t.
    gk: [T, H, K] log-decay per key channel."""
    outs = []
    for t in range(q.shape[0]):
        S = S * torch.exp(gk[t]).unsqueeze(-1)
        S = S + k[t].unsqueeze(-1) * v[t].unsqueeze(-2)
        outs.append(torch.einsum("hk,hkv->hv", q[t] * scale, S))
    return torch.stack(outs, 0), S


def delta_rule_recurrent(q, k, v, beta, scale, S):
    """specs §2.3 (DeltaNet).  v' = beta (v - S^T k);  S += k v'^T;  o = S^T (scale q)."""
    outs = []
    for t in range(q.shape[0]):
        pred = torch.einsum("hkv,hk->hv", S, k[t])
        vn = (v[t] - pred) * beta[t].unsqueeze(-1)
        S = S + k[t].unsqueeze(-1) * vn.unsqueeze(-2)
        outs.append(torch.einsum("hkv,hk->hv", S, q[t] * scale))
    return torch.stack(outs, 0), S


def gated_delta_rule_recurrent(q, k, v, g, beta, scale, S):
    """specs §2.4.  S *= exp(g);  v' = beta (v - S^T k);  S += k v'^T;  o = S^T (scale q).
    g, beta: [T, H].  q/k must already be expanded to the value-head count (GVA)."""
    outs = []
    for t in range(q.shape[0]):
        S = S * torch.exp(g[t]).view(-1, 1, 1)
        pred = torch.einsum("hkv,hk->hv", S, k[t])
        vn = (v[t] - pred) * beta[t].unsqueeze(-1)
        S = S + k[t].unsqueeze(-1) * vn.unsqueeze(-2)
        outs.append(torch.einsum("hkv,hk->hv", S, q[t] * scale))
    return torch.stack(outs, 0), S


def swla_recurrent(q, k, v, alpha, beta, lam, scale, M, k_prev, v_prev):
    """docs/model-format.md swla:  M_t = a_t M_{t-1} + b_t k_{t-1} v_{t-1}^T + l_t k_t v_t^T;
    o_t = M_t^T (scale q_t).  k_prev [H, K], v_prev [H, V] (zeros at sequence start)."""
    outs = []
    for t in range(q.shape[0]):
        M = (alpha[t].view(-1, 1, 1) * M
             + beta[t].view(-1, 1, 1) * k_prev.unsqueeze(-1) * v_prev.unsqueeze(-2)
             + lam[t].view(-1, 1, 1) * k[t].unsqueeze(-1) * v[t].unsqueeze(-2))
        outs.append(torch.einsum("hkv,hk->hv", M, q[t] * scale))
        k_prev, v_prev = k[t], v[t]
    return torch.stack(outs, 0), M, k_prev, v_prev


def titans_step(M, S, k, v, alpha, eta, theta):
    """One Titans (linear memory, momentum) update for all heads.
    G = k (M^T k - v)^T ; S' = eta S - theta G ; M' = alpha M + S'.
    M, S: [H, K, V]; k [H, K]; v [H, V]; alpha/eta/theta [H]."""
    err = torch.einsum("hkv,hk->hv", M, k) - v
    G = k.unsqueeze(-1) * err.unsqueeze(-2)
    S = eta.view(-1, 1, 1) * S - theta.view(-1, 1, 1) * G
    M = alpha.view(-1, 1, 1) * M + S
    return M, S


def titans_recurrent(q, k, v, alpha, eta, theta, scale, M, S):
    outs = []
    for t in range(q.shape[0]):
        M, S = titans_step(M, S, k[t], v[t], alpha[t], eta[t], theta[t])
        outs.append(torch.einsum("hkv,hk->hv", M, q[t] * scale))
    return torch.stack(outs, 0), M, S


def softplus(x):
    return F.softplus(x)


def gdn_log_decay(a, A_log, dt_bias):
    """g = -exp(A_log) * softplus(a + dt_bias)   (log-decay, <= 0).  a: [T, H]."""
    return -torch.exp(A_log) * F.softplus(a + dt_bias)


def intermediate_size(hidden_size, hidden_ratio=None, intermediate=None):
    if intermediate is not None:
        return int(intermediate)
    hr = 4 if hidden_ratio is None else hidden_ratio
    i = int(hidden_size * hr * 2 / 3)
    return 256 * ((i + 256 - 1) // 256)


def default_scale(k_dim):
    return k_dim ** -0.5 if k_dim > 0 else 1.0


__all__ = [n for n in dir() if not n.startswith("_")] + ["math"]
