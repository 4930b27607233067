"""ARMT reference (mcserve_ref/armt*.py; docs/model-format.md (armt)).  float64 throughout.

Checks (validation checklist A.12 items 1-4 at the reference level): parameter counts; incremental
decode (open-segment KV, lazy close) == the official wrapper's segment-at-a-time forward, logits and
(A, z) after every close; any chunking of the ids gives the same logits and state; DPFP-3 and the
gamma-corrected delta rule as written in the paper/code; config and checkpoint checks under the
official state-dict names.
"""
import json

import pytest
import torch

import family_testing
from family_testing import RandomModels

from mcserve_ref import CausalLM
from mcserve_ref import armt_memory as am
from mcserve_ref import safetensors_io as st
from mcserve_ref.armt import ArmtLM
from mcserve_ref.armt_config import EPS, resolve_armt_config
from mcserve_ref.armt_weights import LM_HEAD, PRE, parameter_count, random_weights, tensor_shapes

D = torch.float64
S, M = 5, 3
BASE = dict(model_type="armt", vocab_size=40, n_positions=16, n_embd=16, n_layer=2, n_head=2,
            num_mem_tokens=M, d_mem=4, segment_size=S)
VARIANTS = {
    "default": {},
    "wrap_pos": dict(wrap_pos=True),                 # memory rows at positions n_positions..+M-1
    "no_correction": dict(correction=False),
    "inner_3_heads": dict(n_embd=12, n_head=3, n_inner=20, d_mem=3),
}
IDS = [int(i) for i in torch.randint(0, 40, (3 * S + 17,), generator=torch.Generator().manual_seed(5))]

model = RandomModels(ArmtLM, random_weights, BASE, VARIANTS, D)


def close(a, b, tol=1e-12):
    family_testing.close(a, b, tol)


def run_chunks(m, ids, n):
    s = m.new_state()
    return torch.cat([m.step(ids[i:i + n], s) for i in range(0, len(ids), n)], 0), s


# ------------------------------------------------------------------ A.12.1 parameter counts

def test_parameter_count_gpt2_small():
    """GPT-2 small + P=64, M=10: extras L(2PD + D^2 + D + 1) + MD = 8,274,444 on HF's 124,439,808; with
    GPT-2's twelve 1024x1024 mask buffers counted too, 145,297,164 (the paper's "ARMT (145M)")."""
    cfg = dict(model_type="armt", num_mem_tokens=10, d_mem=64, segment_size=512)
    total, extra = parameter_count(cfg)
    assert extra == 12 * (2 * 64 * 768 + 768 ** 2 + 768 + 1) + 10 * 768 == 8274444
    assert total - extra == 124439808 and total == 132714252
    assert total + 12 * 1024 * 1024 == 145297164
    assert parameter_count(cfg, wrap_pos=True) == (total + 10 * 768, extra + 10 * 768)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_parameter_count_small_configs(name):
    c = resolve_armt_config(dict(BASE, **VARIANTS[name]))
    L, Dm, P, I, V = c["n_layer"], c["n_embd"], c["d_mem"], c["n_inner"], c["vocab_size"]
    extra = L * (2 * P * Dm + Dm * Dm + Dm + 1) + M * Dm
    gpt2 = V * Dm + c["n_positions"] * Dm + L * (4 * Dm + 3 * Dm * Dm + 3 * Dm + Dm * Dm + Dm + 2 * Dm * I + I + Dm) \
        + 2 * Dm
    wrap = bool(c["wrap_pos"])
    assert parameter_count(c, wrap) == (gpt2 + extra + wrap * M * Dm, extra + wrap * M * Dm)
    W = random_weights(c, seed=0)
    assert sum(v.numel() for v in W.values()) == parameter_count(c, wrap)[0]


# ------------------------------------------------------------------ A.12.2 incremental == forward

@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("T", [S - 1, S, S + 1, 3 * S + 17])
def test_token_by_token_equals_forward(name, T):
    """Decode token by token (lazy closes, the M-token pass against the open segment's KV) == the
    segment-at-a-time forward; after each close, every layer's (A, z) equals the forward's write."""
    m = model(name)
    snaps = []
    full = m.forward(IDS[:T], snapshots=snaps)
    s, outs = m.new_state(), []
    for t in IDS[:T]:
        w = s["w"]
        outs.append(m.step([t], s))
        if s["w"] != w:
            assert s["w"] == w + 1 and s["c"] == 1
            for l in range(len(m.layers)):
                close(s["A"][l], snaps[w][0][l], 1e-13)
                close(s["z"][l], snaps[w][1][l], 1e-13)
    close(torch.cat(outs), full)
    assert s["w"] == (T - 1) // S and s["c"] == T - S * s["w"]
    assert len(snaps) == -(-T // S)
    m.close_segment(s)   # the open (full or short) segment closed by hand == the forward's last write
    for l in range(len(m.layers)):
        close(s["A"][l], snaps[-1][0][l], 1e-13)
        close(s["z"][l], snaps[-1][1][l], 1e-13)


# ------------------------------------------------------------------ A.12.4 chunk invariance

@pytest.mark.parametrize("name", ["default", "wrap_pos"])
@pytest.mark.parametrize("n", [1, 7, S, 3 * S])
def test_chunk_sizes_give_the_same_logits_and_state(name, n):
    m = model(name)
    ref, s_ref = run_chunks(m, IDS, 1)
    got, s = run_chunks(m, IDS, n)
    close(got, ref)
    close(got, m.forward(IDS))
    assert (s["w"], s["c"]) == (s_ref["w"], s_ref["c"]) == (3 + 17 // S, 17 % S)
    for l in range(len(m.layers)):
        close(s["A"][l], s_ref["A"][l], 1e-13)
        close(s["z"][l], s_ref["z"][l], 1e-13)
        for a, b in zip(s["kv"][l], s_ref["kv"][l]):
            assert a.shape == (m.H, s["c"], m.dh)
            close(a, b, 1e-13)


def test_memory_is_the_only_path_between_segments():
    """Positions restart every segment and no attention crosses segments: with the read disabled
    (W_mq = 0 makes phi(q) = 0), segment 2 alone == segment 2 after segment 1; with it, they differ."""
    m = model()
    seg2 = IDS[S:2 * S]
    assert (m.forward(IDS[:2 * S])[S:] - m.forward(seg2)).abs().max() > 1e-2
    cfg = dict(BASE)
    W = random_weights(cfg, seed=3, dtype=D)
    for l in range(BASE["n_layer"]):
        W[PRE + "h.%d.W_mq.weight" % l] = torch.zeros_like(W[PRE + "h.%d.W_mq.weight" % l])
    m0 = ArmtLM(cfg, W, dtype=D)
    close(m0.forward(IDS[:2 * S])[S:], m0.forward(seg2), 1e-14)


@pytest.mark.parametrize("name", ["default", "wrap_pos"])
def test_position_rows_used(name):
    """Content positions restart at 0 each segment; memory rows take positions S_s..S_s+M-1
    (wrap_pos false: after the segment's own S_s content tokens) or n_positions..n_positions+M-1
    (wrap_pos true).  Perturbing a wpe row changes exactly the logits that row can reach."""
    m = model(name)
    cfg = dict(BASE, **VARIANTS[name])
    W = random_weights(cfg, seed=3, dtype=D)
    T = 2 * S + 2                                   # short last segment: S_s = 2

    def diff(rows):
        wpe = W[PRE + "wpe.weight"].clone()
        wpe[rows] += 1.0
        got = ArmtLM(cfg, dict(W, **{PRE + "wpe.weight": wpe}), dtype=D).forward(IDS[:T])
        return (got - m.forward(IDS[:T])).abs().amax(-1) > 1e-9

    Np = BASE["n_positions"]
    mem_rows = list(range(Np, Np + M)) if name == "wrap_pos" else list(range(S, S + M))
    d = diff(mem_rows)                              # full segments' memory rows: read by later segments
    assert not d[:S].any() and d[S:].all()
    unused = [r for r in range(S, Np + (M if name == "wrap_pos" else 0)) if r not in mem_rows]
    assert not diff(unused).any()


def test_content_never_sees_memory_tokens():
    """Content logits of a segment do not depend on the memory embedding until it is written."""
    cfg = dict(BASE)
    W = random_weights(cfg, seed=3, dtype=D)
    W2 = dict(W, **{"memory_cell.memory": W["memory_cell.memory"] + 1.0})
    a, b = ArmtLM(cfg, W, dtype=D).forward(IDS[:2 * S]), ArmtLM(cfg, W2, dtype=D).forward(IDS[:2 * S])
    close(a[:S], b[:S], 0.0)
    assert (a[S:] - b[S:]).abs().max() > 1e-3


def _gpt2_segment(W, cfg, h, reads=None):
    """HF GPT-2 blocks on rows h [n, D] written out densely (one [n, n] lower-triangular mask, torch's
    tanh GELU), Conv1D weights [in, out]; reads[l](h) is added before block l."""
    Dm, H = cfg["n_embd"], cfg["n_head"]
    F_ = torch.nn.functional
    for l in range(cfg["n_layer"]):
        p = lambda k: W[PRE + "h.%d.layer.%s" % (l, k)]                          # noqa: E731
        if reads is not None:
            h = h + reads[l](h)
        a = F_.layer_norm(h, (Dm,), p("ln_1.weight"), p("ln_1.bias"), 1e-5)
        q, k, v = F_.linear(a, p("attn.c_attn.weight").T, p("attn.c_attn.bias")).split(Dm, -1)
        q, k, v = (t.reshape(-1, H, Dm // H).transpose(0, 1) for t in (q, k, v))
        n = h.shape[0]
        sc = (q @ k.transpose(1, 2)) * (Dm // H) ** -0.5
        sc = sc.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), float("-inf"))
        o = (torch.softmax(sc, -1) @ v).transpose(0, 1).reshape(-1, Dm)
        h = h + F_.linear(o, p("attn.c_proj.weight").T, p("attn.c_proj.bias"))
        a = F_.layer_norm(h, (Dm,), p("ln_2.weight"), p("ln_2.bias"), 1e-5)
        a = F_.gelu(F_.linear(a, p("mlp.c_fc.weight").T, p("mlp.c_fc.bias")), approximate="tanh")
        h = h + F_.linear(a, p("mlp.c_proj.weight").T, p("mlp.c_proj.bias"))
    return h


def test_two_segments_written_out():
    """Segment 1 = plain GPT-2 on [X_1; memory]; its memory rows written per layer; segment 2 reads
    phi(W_Q h) A / (phi(W_Q h) . z + eps) before every block (A.3.3 restated densely in the test)."""
    cfg = resolve_armt_config(dict(BASE))
    W = random_weights(cfg, seed=3, dtype=D)
    wte, wpe, mem_e = W[PRE + "wte.weight"], W[PRE + "wpe.weight"], W["memory_cell.memory"]
    F_ = torch.nn.functional
    head = lambda h: F_.layer_norm(h, (16,), W[PRE + "ln_f.weight"], W[PRE + "ln_f.bias"], 1e-5) @ wte.T  # noqa
    x1, x2 = torch.tensor(IDS[:S]), torch.tensor(IDS[S:S + 3])
    # segment 1, layer by layer, to collect each layer's memory-row outputs
    h = torch.cat([wte[x1], mem_e]) + wpe[:S + M]
    outs = []
    for l in range(cfg["n_layer"]):
        c1 = dict(cfg, n_layer=1)
        Wl = {PRE + "h.0.layer." + k.split(".layer.", 1)[1]: v for k, v in W.items()
              if k.startswith(PRE + "h.%d.layer." % l)}
        h = _gpt2_segment(Wl, c1, h)
        outs.append(h[S:])
    logits1 = head(h[:S])
    reads = []
    for l in range(cfg["n_layer"]):
        g = lambda k: W[PRE + "h.%d.%s" % (l, k)]                                  # noqa: E731
        r = torch.cat([torch.relu(outs[l] @ g("W_mk.weight").T), torch.relu(-outs[l] @ g("W_mk.weight").T)], -1)
        fk = torch.cat([r * torch.roll(r, j, -1) for j in (1, 2, 3)], -1)
        beta = torch.sigmoid(outs[l] @ g("W_mb.weight")[0] + g("W_mb.bias")[0])
        A = sum(beta[i] * torch.outer(fk[i], outs[l][i] @ g("W_mv.weight").T) for i in range(M))
        z = fk.sum(0)

        def read(hh, A=A, z=z, Wq=g("W_mq.weight")):
            rq = torch.cat([torch.relu(hh @ Wq.T), torch.relu(-hh @ Wq.T)], -1)
            fq = torch.cat([rq * torch.roll(rq, j, -1) for j in (1, 2, 3)], -1)
            return (fq @ A) / (fq @ z + 1e-5)[:, None]
        reads.append(read)
    logits2 = head(_gpt2_segment(W, cfg, wte[x2] + wpe[:3], reads))
    close(model().forward(IDS[:S + 3]), torch.cat([logits1, logits2]), 1e-12)


# ------------------------------------------------------------------ DPFP-3

def test_dpfp3_is_the_code_feature_map():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 5, generator=g, dtype=D)
    f = am.dpfp3(x)
    assert f.shape == (7, 30)
    r = torch.cat([torch.relu(x), torch.relu(-x)], -1)
    # phi[(j-1)*2P + i] = r[i] * r[(i - j) mod 2P], j = 1..3: torch.roll(shifts=j) order
    close(f, torch.cat([r * torch.roll(r, shifts=j, dims=-1) for j in (1, 2, 3)], -1), 0.0)
    for j in (1, 2, 3):
        for i in range(10):
            close(f[:, (j - 1) * 10 + i], r[:, i] * r[:, (i - j) % 10], 0.0)
    assert (f >= 0).all() and not am.dpfp3(torch.zeros(3, 5, dtype=D)).any()
    close(am.dpfp3(2.5 * x), 6.25 * f, 1e-15)            # degree-2 positively homogeneous


def test_read_is_scale_invariant_in_q_up_to_eps():
    g = torch.Generator().manual_seed(1)
    A, z = torch.randn(12, 6, generator=g, dtype=D), torch.rand(12, generator=g, dtype=D) + 1.0
    Wq, h = torch.randn(2, 6, generator=g, dtype=D), torch.randn(4, 6, generator=g, dtype=D)
    y1, y2 = am.read(h, A, z, Wq), am.read(10.0 * h, A, z, Wq)
    f = am.dpfp3(h @ Wq.T)
    den = f @ z
    close(y2, y1, 2 * EPS / den.min().item())
    close(y1, (f @ A) / (den + EPS)[:, None], 1e-15)


# ------------------------------------------------------------------ gamma-corrected delta rule

P2 = torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0]], dtype=D)     # W_K: key = first two channels of O


def _params(g, Dm=4):
    return torch.randn(Dm, Dm, generator=g, dtype=D), torch.randn(1, Dm, generator=g, dtype=D), \
        torch.randn(1, generator=g, dtype=D)


def test_first_write_is_plain_and_exact():
    """First write: gamma = 1 exactly and Vbar = 0 exactly (the code's flag, A.3.6), even though the
    generic formula on zero state would give gamma = 1 - eps/(|phi|^2 + eps)."""
    g = torch.Generator().manual_seed(2)
    Wv, wb, bb = _params(g)
    O = torch.randn(3, 4, generator=g, dtype=D)
    A0, z0 = torch.zeros(6 * 2, 4, dtype=D), torch.zeros(12, dtype=D)
    Fk, Vn, Vbar, beta, gamma = am.write_terms(O, A0, z0, P2, Wv, wb, bb, first=True)
    assert torch.equal(gamma, torch.ones(3, dtype=D)) and torch.equal(Vbar, torch.zeros_like(Vn))
    A, z = am.write(O, A0, z0, P2, Wv, wb, bb, first=True)
    close(z, Fk.sum(0), 0.0)
    close(A, sum(beta[i] * torch.outer(Fk[i], Vn[i]) for i in range(3)), 1e-15)
    *_, gamma_generic = am.write_terms(O, A0, z0, P2, Wv, wb, bb, first=False)
    close(gamma_generic, 1.0 - EPS / ((Fk * Fk).sum(-1) + EPS), 1e-15)


def test_gamma_correction_identities():
    """gamma = clip(1 - (z.phi + eps)/(|phi|^2 + eps), 0, 1): a key already stored n >= 1 times adds
    nothing to z; a key orthogonal to everything stored adds (1 - eps/(|phi|^2+eps)) phi; half-stored
    keys add the missing half; without correction z += phi every time."""
    g = torch.Generator().manual_seed(3)
    Wv, wb, bb = _params(g)
    a = torch.tensor([[1.5, 0.7, 0.3, -0.2]], dtype=D)           # key (1.5, 0.7)
    b = torch.tensor([[-1.1, 0.9, 0.1, 0.4]], dtype=D)           # key (-1.1, 0.9): disjoint DPFP support
    fa, fb = am.dpfp3(a @ P2.T)[0], am.dpfp3(b @ P2.T)[0]
    assert (fa * fb).sum() == 0 and (fa > 0).sum() == 2
    A, z = am.write(a, torch.zeros(12, 4, dtype=D), torch.zeros(12, dtype=D), P2, Wv, wb, bb, first=True)
    for n in (1, 2):                                             # z = n * fa
        zn = n * z
        A2, z2 = am.write(a, A, zn, P2, Wv, wb, bb, first=False)
        close(z2, zn, 0.0)
    *_, gb = am.write_terms(b, A, z, P2, Wv, wb, bb, first=False)
    close(gb, torch.tensor([1.0 - EPS / ((fb * fb).sum() + EPS)], dtype=D), 1e-15)
    _, zb = am.write(b, A, z, P2, Wv, wb, bb, first=False)
    close(zb, z + gb * fb, 1e-15)
    *_, gh = am.write_terms(a, A, 0.5 * z, P2, Wv, wb, bb, first=False)
    close(gh[0], 1.0 - (0.5 * (fa * fa).sum() + EPS) / ((fa * fa).sum() + EPS), 1e-15)
    _, znc = am.write(a, A, z, P2, Wv, wb, bb, first=False, correction=False)
    close(znc, 2 * z, 1e-15)


def test_delta_rule_replaces_the_value():
    """One key written with v1 then v2 (beta from W_mb): the recall after the second write is
    (beta1 v1 r + beta2 (v2 - beta1 v1 r)) r' with r = |phi|^2/(|phi|^2 + eps) (z = phi unchanged by
    gamma = 0), i.e. -> v2 as beta -> 1, eps -> 0: the old value is erased, not accumulated."""
    g = torch.Generator().manual_seed(4)
    _, wb, bb = _params(g)
    Wv = torch.eye(4, dtype=D)                                     # value = O itself
    o1 = torch.tensor([[1.5, 0.7, 0.3, -0.2]], dtype=D)
    o2 = torch.tensor([[1.5, 0.7, -0.8, 0.6]], dtype=D)           # same key, new value channels
    A, z = am.write(o1, torch.zeros(12, 4, dtype=D), torch.zeros(12, dtype=D), P2, Wv, wb, bb, first=True)
    A, z = am.write(o2, A, z, P2, Wv, wb, bb, first=False)
    f = am.dpfp3(o1 @ P2.T)[0]
    n2 = (f * f).sum()
    r = n2 / (n2 + EPS)
    b1, b2 = torch.sigmoid(o1 @ wb[0] + bb), torch.sigmoid(o2 @ wb[0] + bb)
    close(z, f, 0.0)
    recall = (f @ A) / (f @ z + EPS)
    close(recall, (b1 * o1[0] * n2 + b2 * (o2[0] - b1 * o1[0] * r) * n2) / (n2 + EPS), 1e-14)
    Wbig = torch.full_like(wb, 0.0)
    A, z = am.write(o1, torch.zeros(12, 4, dtype=D), torch.zeros(12, dtype=D), P2, Wv, Wbig, bb + 40, True)
    A, z = am.write(o2, A, z, P2, Wv, Wbig, bb + 40, False)
    close((f @ A) / (f @ z + EPS), o2[0], 1e-5)


def test_memory_tokens_are_written_in_parallel():
    """Two identical memory tokens in one (non-first) write both see the old state: z gains 2 gamma phi
    (a sequential insertion would give the second one gamma = 0)."""
    g = torch.Generator().manual_seed(5)
    Wv, wb, bb = _params(g)
    a = torch.tensor([[1.5, 0.7, 0.3, -0.2]], dtype=D)
    b = torch.tensor([[-1.1, 0.9, 0.1, 0.4]], dtype=D)
    A, z = am.write(a, torch.zeros(12, 4, dtype=D), torch.zeros(12, dtype=D), P2, Wv, wb, bb, first=True)
    Fk, Vn, Vbar, beta, gamma = am.write_terms(torch.cat([b, b]), A, z, P2, Wv, wb, bb, first=False)
    A2, z2 = am.write(torch.cat([b, b]), A, z, P2, Wv, wb, bb, first=False)
    close(z2, z + 2 * gamma[0] * Fk[0], 1e-15)
    assert gamma[0] > 0.99 and torch.equal(gamma[0], gamma[1])
    close(A2, A + 2 * beta[0] * torch.outer(Fk[0], Vn[0] - Vbar[0]), 1e-14)


def test_z_stays_nonnegative_over_many_segments():
    m = model()
    s = m.new_state()
    ids = [int(i) for i in torch.randint(0, 40, (12 * S,), generator=torch.Generator().manual_seed(8))]
    m.step(ids, s)
    assert s["w"] == 11 and all((z >= 0).all() for z in s["z"])


# ------------------------------------------------------------------ generate policies (A.5 / A.10.10)

def test_generate_policies():
    """streaming and reference_generate agree while the last prompt segment + generated tokens fit in
    S; reference_generate never closes the last prompt segment, so it stops at n_positions."""
    st_ = model()
    rg = model(generate_policy="reference_generate")
    prompt = IDS[:S + 2]
    assert st_.greedy(prompt, S - 2) == rg.greedy(prompt, S - 2)
    assert len(st_.greedy(prompt, 20)) == 20
    with pytest.raises(ValueError, match="n_positions = 16"):
        rg.greedy(prompt, 16)
    s = rg.new_state()
    rg.step(IDS[:2 * S], s)
    s["frozen"] = True
    rg.step(IDS[:6], s)
    assert s["w"] == 1 and s["c"] == S + 6


# ------------------------------------------------------------------ config

BAD = [
    (dict(model_type="gpt2"), "model_type"), (dict(num_mem_tokens=None), "num_mem_tokens"),
    (dict(d_mem=0), "d_mem"), (dict(segment_size=2.5), "segment_size"), (dict(segment_size=14), "segment_size"),
    (dict(n_head=3), "n_head"), (dict(segment_alignment="right"), "segment_alignment"),
    (dict(activation_function="relu"), "activation_function"),
    (dict(memory_insertion="sequential"), "memory_insertion"),
    (dict(generate_policy="eager"), "generate_policy"), (dict(tie_word_embeddings=False), "tie_word_embeddings"),
    (dict(use_denom=False), "use_denom"), (dict(gating=True), "gating"), (dict(use_sink=True), "use_sink"),
    (dict(sliding_window=True), "sliding_window"), (dict(correction="yes"), "correction"),
    (dict(wrap_pos=1), "wrap_pos"), (dict(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx"),
    (dict(layer_norm_epsilon=0), "layer_norm_epsilon"), (dict(n_heads=2), "n_heads"),
    (dict(layers_attr="model.layers"), "layers_attr"),
]


@pytest.mark.parametrize("over,field", BAD)
def test_bad_config_rejected_naming_the_field(over, field):
    with pytest.raises(ValueError, match=field):
        resolve_armt_config(dict(BASE, **over))


def test_defaults_are_the_recommended_resolutions():
    r = resolve_armt_config(dict(BASE, n_inner=None, segment_alignment=None, n_ctx=1024, resid_pdrop=0.1))
    assert r["n_inner"] == 64 and r["segment_alignment"] == "left" and r["wrap_pos"] is None
    assert r["correction"] is True and r["memory_insertion"] == "parallel" and r["generate_policy"] == "streaming"
    assert r["layer_norm_epsilon"] == 1e-5 and r["feat_dim"] == 24 and r["head_dim"] == 8
    gpt2 = resolve_armt_config(dict(model_type="armt", num_mem_tokens=10, d_mem=64, segment_size=512))
    assert (gpt2["n_layer"], gpt2["n_embd"], gpt2["n_head"], gpt2["vocab_size"]) == (12, 768, 12, 50257)


# ------------------------------------------------------------------ names, shapes, loading

def test_random_weights_use_the_official_names():
    """The names of the official state_dict (AssociativeRecurrentWrapper -> memory_cell ->
    AssociativeMemoryCell -> model (HF GPT2LMHeadModel); layers wrapped by AssociativeLayerWrapper,
    the GPT-2 block under .layer), canonical (first) name of each tied/aliased tensor only."""
    cfg = dict(BASE, n_layer=1)
    W = random_weights(cfg, seed=0)
    h = "memory_cell.model.transformer.h.0."
    want = {
        "memory_cell.memory": (3, 16), "memory_cell.model.transformer.wte.weight": (40, 16),
        "memory_cell.model.transformer.wpe.weight": (16, 16),
        h + "W_mq.weight": (4, 16), h + "W_mk.weight": (4, 16), h + "W_mv.weight": (16, 16),
        h + "W_mb.weight": (1, 16), h + "W_mb.bias": (1,),
        h + "layer.ln_1.weight": (16,), h + "layer.ln_1.bias": (16,),
        h + "layer.attn.c_attn.weight": (16, 48), h + "layer.attn.c_attn.bias": (48,),
        h + "layer.attn.c_proj.weight": (16, 16), h + "layer.attn.c_proj.bias": (16,),
        h + "layer.ln_2.weight": (16,), h + "layer.ln_2.bias": (16,),
        h + "layer.mlp.c_fc.weight": (16, 64), h + "layer.mlp.c_fc.bias": (64,),
        h + "layer.mlp.c_proj.weight": (64, 16), h + "layer.mlp.c_proj.bias": (16,),
        "memory_cell.model.transformer.ln_f.weight": (16,), "memory_cell.model.transformer.ln_f.bias": (16,),
    }
    assert {k: tuple(v.shape) for k, v in W.items()} == want
    assert list(W) == list(tensor_shapes(cfg))
    assert tuple(random_weights(dict(cfg, wrap_pos=True))[PRE + "wpe.weight"].shape) == (19, 16)
    assert all(torch.equal(W[k], v) for k, v in random_weights(cfg, seed=0).items())


def test_checkpoint_tensors_checked():
    cfg = dict(BASE)
    W = random_weights(cfg, seed=1, dtype=D)
    with pytest.raises(ValueError, match="unused.*extra"):
        ArmtLM(cfg, dict(W, extra=torch.zeros(1)))
    with pytest.raises(ValueError, match="missing tensor .*h.1.W_mb.bias"):
        ArmtLM(cfg, {k: v for k, v in W.items() if k != PRE + "h.1.W_mb.bias"})
    name = PRE + "h.0.layer.attn.c_attn.weight"
    with pytest.raises(ValueError, match="c_attn.weight has shape"):   # HF Conv1D is [in, out]
        ArmtLM(cfg, dict(W, **{name: W[name].T}))
    with pytest.raises(ValueError, match="wpe.weight has shape"):
        ArmtLM(dict(cfg, wrap_pos=True), W)
    # the official state_dict's aliases and mask buffers are accepted (equal copies) ...
    full = dict(W, **{LM_HEAD: W[PRE + "wte.weight"].clone()})
    for k, v in W.items():
        if k.startswith(PRE + "h."):
            full["memory_cell.layers." + k[len(PRE + "h."):]] = v.clone()
    full[PRE + "h.0.layer.attn.bias"] = torch.ones(1, 1, 16, 16)
    full["memory_cell.layers.1.layer.attn.masked_bias"] = torch.tensor(-1e4)
    close(ArmtLM(cfg, full).forward(IDS[:8]), ArmtLM(cfg, W).forward(IDS[:8]), 0.0)
    # ... but must equal their canonical tensor
    with pytest.raises(ValueError, match="lm_head.weight must equal"):
        ArmtLM(cfg, dict(full, **{LM_HEAD: 2 * W[PRE + "wte.weight"]}))
    with pytest.raises(ValueError, match="memory_cell.layers.0.W_mv.weight must equal"):
        ArmtLM(cfg, dict(full, **{"memory_cell.layers.0.W_mv.weight": torch.zeros(16, 16, dtype=D)}))
    with pytest.raises(ValueError, match="unused.*memory_cell.layers.2"):
        ArmtLM(cfg, dict(W, **{"memory_cell.layers.2.W_mv.weight": torch.zeros(16, 16, dtype=D)}))


def test_wrap_pos_is_told_by_the_wpe_rows():
    """wrap_pos null: a wpe of n_positions + M rows means the memory rows sit at positions
    n_positions.. (A.10.3); the model then equals one configured with wrap_pos: true."""
    W = random_weights(dict(BASE, wrap_pos=True), seed=3, dtype=D)
    auto = ArmtLM(dict(BASE), W, dtype=D)
    assert auto.wrap_pos is True
    close(auto.forward(IDS), model("wrap_pos").forward(IDS), 0.0)
    assert ArmtLM(dict(BASE), random_weights(BASE, seed=3, dtype=D)).wrap_pos is False
    assert (auto.forward(IDS) - model().forward(IDS)).abs().max() > 1e-3


def test_from_dir_end_to_end(tmp_path):
    cfg = dict(BASE)
    W = random_weights(cfg, seed=9, dtype=torch.float32)
    st.save_file({k: v.numpy() for k, v in W.items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = CausalLM.from_dir(str(tmp_path), dtype=D)
    assert isinstance(m, ArmtLM)
    a = m.forward(IDS)
    assert torch.isfinite(a).all() and torch.equal(a, m.forward(IDS))
    g = m.greedy(IDS[:7], 12)
    assert g == m.greedy(IDS[:7], 12) and len(g) == 12
    close(ArmtLM(cfg, W, dtype=torch.float32).forward(IDS).double(), a, 1e-5)
