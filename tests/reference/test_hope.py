"""HOPE reference (mcserve_ref/hope*.py; docs/model-format.md (hope); specs/hope.md).  float64 throughout.

Checks: per-token form == chunk-wise form; any split into calls (prefill + decode) == one prefill;
adaptive CMS trains only at its boundaries and only on user-provided tokens; bad configs are rejected
naming the field; a random model runs end to end, deterministically.
"""
import json

import pytest
import torch

import family_testing

from mcserve_ref import CausalLM
from mcserve_ref import safetensors_io as st
from mcserve_ref.hope import HopeLM, random_weights
from mcserve_ref.hope_config import resolve_hope_config
from mcserve_ref.hope_memory import HopeMemory

D = torch.float64
BASE = dict(model_type="hope", hidden_size=16, num_hidden_layers=2, num_heads=2, head_dim=8, vocab_size=40,
            chunk_size_other=4, chunk_size_mem=3,
            cms_levels=[dict(chunk_size=5, intermediate_size=24), dict(chunk_size=7, intermediate_size=16,
                                                                        activation="gelu")])
ADAPTIVE = dict(cms_adaptive=True, cms_levels=[dict(chunk_size=5, intermediate_size=24, lr=0.5),
                                               dict(chunk_size=7, intermediate_size=16, activation="gelu", lr=0.3)])
IDS = [int(i) for i in torch.randint(3, 40, (23,), generator=torch.Generator().manual_seed(5))]

VARIANTS = {
    "default": {},
    "per_token_chunks": dict(chunk_size_other=1, chunk_size_mem=1),
    "big_chunks": dict(chunk_size_other=8, chunk_size_mem=16),
    "mode_A": dict(readout_mode="A", chunk_size_other=5, chunk_size_mem=4),
    "after_write": dict(read_index="after_write"),
    "momentum_const": dict(momentum="constant", momentum_beta=0.5),
    "momentum_data_dgd_hidden": dict(momentum="data", w1_rule="dgd_hidden"),
    "adaptive_q_proj_input": dict(adaptive_q=True, memory_input="proj", hidden_size=12),
    "skip_softplus_gelu_nogate": dict(scalar_memory_skip="linear", eta_activation="softplus", eta_scale=0.7,
                                      memory_activation="gelu", output_gate="rmsnorm", eta_clamp=False),
    "tied": dict(tie_word_embeddings=True, memory_expansion=1),
}

_models = {}


def model(name="default", adaptive=False, **over):
    key = (name, adaptive, tuple(sorted(over.items())))
    if key not in _models:
        cfg = dict(BASE, **VARIANTS[name], **(ADAPTIVE if adaptive else {}), **over)
        _models[key] = HopeLM(cfg, random_weights(cfg, seed=3, dtype=D), dtype=D)
    return _models[key]


def close(a, b, tol=1e-10):
    family_testing.close(a, b, tol)


def run_split(m, ids, sizes, form="chunk", learn=True):
    """Logits of ids fed as consecutive calls of the given sizes (the rest in one last call)."""
    s, outs, i = m.new_state(), [], 0
    for n in list(sizes) + [len(ids)]:
        if i >= len(ids):
            break
        outs.append(m.step(ids[i:i + n], s, form=form, learn=learn))
        i += n
    return torch.cat(outs, 0), s


# ------------------------------------------------------------------ memory maths

@pytest.mark.parametrize("act", ["silu", "gelu"])
@pytest.mark.parametrize("o", [8, 1])
def test_gradient_factors_match_autograd(act, o):
    """G1 = e a^T, G2 = b k^T (grad_scale 2) equal autograd of ||M(k; W) - v_hat||^2 per head."""
    g = torch.Generator().manual_seed(1)
    H, d, E = 3, 8, 12
    skip = torch.randn(H, d, generator=g, dtype=D) if o == 1 else None
    mem = HopeMemory(d, o, act, 2.0, "retention", skip)
    W = {"W1": torch.randn(H, o, E, generator=g, dtype=D), "W2": torch.randn(H, E, d, generator=g, dtype=D)}
    k, v = torch.randn(H, d, generator=g, dtype=D), torch.randn(H, o, generator=g, dtype=D)
    e, a, b = mem.factors(W, k, v)
    w1, w2 = W["W1"].clone().requires_grad_(True), W["W2"].clone().requires_grad_(True)
    loss = ((mem.forward({"W1": w1, "W2": w2}, k) - v) ** 2).sum()
    g1, g2 = torch.autograd.grad(loss, (w1, w2))
    close(e.unsqueeze(-1) * a.unsqueeze(-2), g1, 1e-12)
    close(b.unsqueeze(-1) * k.unsqueeze(-2), g2, 1e-12)


def test_dgd_update_is_the_printed_rule():
    """W2 <- W2 (alpha I - eta k k^T) - eta G2 and W1 <- alpha W1 - eta G1, explicit matrices."""
    g = torch.Generator().manual_seed(2)
    H, d, E = 2, 4, 6
    mem = HopeMemory(d, d, "silu", 2.0, "retention")
    W = {"W1": torch.randn(H, d, E, generator=g, dtype=D), "W2": torch.randn(H, E, d, generator=g, dtype=D)}
    f = (torch.randn(H, d, generator=g, dtype=D), torch.randn(H, E, generator=g, dtype=D),
         torch.randn(H, E, generator=g, dtype=D))
    k = torch.nn.functional.normalize(torch.randn(H, d, generator=g, dtype=D), dim=-1)
    al, et = torch.tensor([0.9, 0.7], dtype=D), torch.tensor([0.3, 0.6], dtype=D)
    out = mem.update(W, f, k, al, et)
    for h in range(H):
        P = al[h] * torch.eye(d, dtype=D) - et[h] * torch.outer(k[h], k[h])
        close(out["W2"][h], W["W2"][h] @ P - et[h] * torch.outer(f[2][h], k[h]), 1e-13)
        close(out["W1"][h], al[h] * W["W1"][h] - et[h] * torch.outer(f[0][h], f[1][h]), 1e-13)


# ------------------------------------------------------------------ forms and splits

@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_token_form_equals_chunk_form(name):
    m = model(name)
    close(m.forward(IDS, form="token"), m.forward(IDS, form="chunk"))


@pytest.mark.parametrize("name", ["default", "mode_A", "momentum_data_dgd_hidden", "adaptive_q_proj_input"])
@pytest.mark.parametrize("sizes", [[1], [2, 3], [3, 1, 1, 4], [5, 2], [7], [11, 1, 1, 1], [12]])
def test_split_calls_equal_one_prefill(name, sizes):
    """Splits that cut the inner chunks (4, 3) and the CMS periods (5, 7) anywhere."""
    m = model(name)
    full = m.forward(IDS)
    close(run_split(m, IDS, sizes)[0], full)
    close(run_split(m, IDS, sizes, form="token")[0], full)


@pytest.mark.parametrize("p", [3, 4, 5, 6, 11, 12, 13])
def test_prefill_then_decode_equals_longer_prefill(p):
    m = model()
    close(run_split(m, IDS, [p] + [1] * len(IDS))[0], m.forward(IDS))


def test_chunk_sizes_are_semantic():
    """Changing C_o or C_mem changes the function (specs §3.6): they are model fields, not knobs."""
    a = model().forward(IDS)
    assert (a - model(chunk_size_other=5).forward(IDS)).abs().max() > 1e-6
    assert (a - model(chunk_size_mem=4).forward(IDS)).abs().max() > 1e-6
    assert (a - model(readout_mode="A").forward(IDS)).abs().max() > 1e-6


# ------------------------------------------------------------------ adaptive CMS

def thetas(s):
    return [{(j, k): v.detach().clone() for j in c for k, v in c[j]["theta"].items()} for c in s["cms"]]


def same(a, b):
    return all(torch.equal(x[k], y[k]) for x, y in zip(a, b) for k in x)


@pytest.mark.parametrize("sizes", [[1], [4, 2], [5], [6, 1, 1], [9, 3], [23]])
def test_adaptive_forms_and_splits_agree(sizes):
    m = model(adaptive=True)
    full = m.forward(IDS)
    a, sa = run_split(m, IDS, sizes)
    b, sb = run_split(m, IDS, sizes, form="token")
    close(a, full)
    close(b, full)
    for x, y in zip(thetas(sa), thetas(sb)):
        for k in x:
            close(x[k], y[k])


def test_adaptive_updates_only_at_boundaries():
    """theta of a level with period C changes only when token C·j + 1 is fed (after boundary C·j), and
    positions up to the first boundary equal the static model."""
    m = model(adaptive=True)
    s = m.new_state()
    prev = thetas(s)
    for t, tok in enumerate(IDS, start=1):
        m.step([tok], s)
        now = thetas(s)
        for li in range(len(now)):
            for (j, k) in now[li]:
                C = m.layers[li]["cms"].levels[j]["chunk_size"]
                changed = not torch.equal(now[li][(j, k)], prev[li][(j, k)])
                assert changed == ((t - 1) > 0 and (t - 1) % C == 0), (t, li, j, k)
        prev = now
    static = model().forward(IDS)
    close(m.forward(IDS)[:5], static[:5])
    assert (m.forward(IDS)[5] - static[5]).abs().max() > 1e-6


def test_adaptive_never_learns_from_generated_tokens():
    m = model(adaptive=True)
    # nothing user-provided after the first token: no update ever, logits = the static model's
    close(m.forward(IDS, learn=[True] + [False] * (len(IDS) - 1)), model().forward(IDS))
    # prompt of 8 tokens, then 12 "generated" ones: their content cannot change theta
    s1, s2 = m.new_state(), m.new_state()
    m.step(IDS[:8], s1)
    m.step(IDS[:8], s2)
    m.step(IDS[8:20], s1, learn=False)
    m.step([(i * 7) % 37 + 3 for i in range(12)], s2, learn=False)
    assert same(thetas(s1), thetas(s2))
    # ...while the same tokens as prompt tokens do train it
    s3 = m.new_state()
    m.step(IDS[:20], s3)
    assert not same(thetas(s1), thetas(s3))


def test_adaptive_greedy_is_prompt_only():
    m = model(adaptive=True)
    toks = m.greedy(IDS[:9], 8)
    s = m.new_state()
    logits = m.step(IDS[:9], s)[-1]
    for t in toks:
        assert int(torch.argmax(logits)) == t
        logits = m.step([t], s, learn=False)[-1]


# ------------------------------------------------------------------ config

BAD = [
    (dict(readout_mode="B"), "readout_mode"), (dict(chunk_anchor="current_chunk_end"), "chunk_anchor"),
    (dict(momentum="adam"), "momentum"), (dict(w1_rule="dgd"), "w1_rule"), (dict(eta_max=0), "eta_max"),
    (dict(memory_activation="relu"), "memory_activation"), (dict(flush_partial_chunks=True), "flush_partial_chunks"),
    (dict(cms_update_on_generated=True), "cms_update_on_generated"), (dict(shared_values=True), "shared_values"),
    (dict(mixer="attention"), "mixer"), (dict(cms_teach_signal="global"), "cms_teach_signal"),
    (dict(chunk_size_other=0), "chunk_size_other"), (dict(chunk_size_mem=1.5), "chunk_size_mem"),
    (dict(hidden_size=12), "memory_input"), (dict(cms_levels=[]), "cms_levels"),
    (dict(cms_levels=[dict(chunk_size=4)]), r"cms_levels\[0\].intermediate_size"),
    (dict(cms_levels=[dict(chunk_size=4, intermediate_size=8, lr=-1)]), r"cms_levels\[0\].lr"),
    (dict(cms_levels=[dict(chunk_size=4, intermediate_size=8, activation="relu")]), r"cms_levels\[0\].activation"),
    (dict(cms_levels=[dict(chunk_size=4, intermediate_size=8, period=3)]), r"cms_levels\[0\]"),
    (dict(momentum_beta=1.0), "momentum_beta"), (dict(adaptive_q="yes"), "adaptive_q"),
    (dict(conv_placement="input"), "conv_placement"), (dict(memory_size=3), "memory_size"),
    (dict(num_heads=None), "num_heads"), (dict(model_type="titans"), "model_type"),
    (dict(memory_caching={"segment_size": 0}), r"memory_caching\.segment_size"),   # accepted key (test_hope_mc.py)
]


@pytest.mark.parametrize("over,field", BAD)
def test_bad_config_rejected_naming_the_field(over, field):
    with pytest.raises(ValueError, match=field):
        resolve_hope_config(dict(BASE, **over))


def test_defaults_are_the_spec_resolutions():
    r = resolve_hope_config(dict(BASE, chunk_size_other=None))
    assert r["chunk_size_other"] == 16 and r["readout_mode"] == "R" and r["read_index"] == "before_write"
    assert r["cms_adaptive"] is False and r["adaptive_q"] is False and r["momentum"] == "none"
    assert r["cms_levels"][0]["lr"] == 0.0 and r["cms_levels"][0]["activation"] == "swiglu"


def test_checkpoint_tensors_checked():
    cfg = dict(BASE)
    W = random_weights(cfg, seed=1, dtype=D)
    with pytest.raises(ValueError, match="unused"):
        HopeLM(cfg, dict(W, extra=torch.zeros(1)))
    with pytest.raises(KeyError, match="memory.mem.w1"):
        HopeLM(cfg, {k: v for k, v in W.items() if "layers.1.attn.memory.mem.w1" not in k})
    with pytest.raises(ValueError, match="shape"):
        HopeLM(cfg, dict(W, **{"model.norm.weight": torch.zeros(3)}))


# ------------------------------------------------------------------ end to end

def test_random_model_end_to_end_deterministic(tmp_path):
    cfg = dict(BASE)
    W = random_weights(cfg, seed=9, dtype=torch.float32)
    assert all(torch.equal(W[k], v) for k, v in random_weights(cfg, seed=9, dtype=torch.float32).items())
    st.save_file({k: v.numpy() for k, v in W.items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = CausalLM.from_dir(str(tmp_path), dtype=D)
    assert isinstance(m, HopeLM)
    a, b = m.forward(IDS), m.forward(IDS)
    assert torch.isfinite(a).all() and torch.equal(a, b)
    g = m.greedy(IDS[:10], 12)
    assert g == m.greedy(IDS[:10], 12) and len(g) == 12
    m32 = HopeLM(cfg, W, dtype=torch.float32)
    close(m32.forward(IDS).double(), a, 1e-4)


@pytest.mark.parametrize("after", [False, True])
@pytest.mark.parametrize("o", [8, 1])
def test_parallel_piece_equals_the_scan(after, o):
    """hope_chunk.parallel_piece (UT transform + decayed sums) == the token-by-token update."""
    from mcserve_ref.hope_chunk import parallel_piece
    g = torch.Generator().manual_seed(4)
    H, d, E, n = 2, 8, 12, 9
    mem = HopeMemory(d, o, "silu", 2.0, "retention")
    W0 = {"W1": torch.randn(H, o, E, generator=g, dtype=D), "W2": torch.randn(H, E, d, generator=g, dtype=D) / 3}
    k = torch.nn.functional.normalize(torch.randn(n, H, d, generator=g, dtype=D), dim=-1)
    q = torch.nn.functional.normalize(torch.randn(n, H, d, generator=g, dtype=D), dim=-1)
    v = torch.randn(n, H, d, generator=g, dtype=D)
    alpha = torch.sigmoid(torch.randn(n, H, generator=g, dtype=D) + 1)
    eta = torch.sigmoid(torch.randn(n, H, generator=g, dtype=D))
    fac = mem.factors(W0, k, mem.forward(W0, v))
    Wp, yp = parallel_piece(mem, W0, fac, k, alpha, eta, q, after)
    W, ys = dict(W0), []
    for t in range(n):
        if not after:
            ys.append(mem.forward(W, q[t]))
        W = mem.update(W, tuple(x[t] for x in fac), k[t], alpha[t], eta[t])
        if after:
            ys.append(mem.forward(W, q[t]))
    close(Wp["W1"], W["W1"], 1e-12)
    close(Wp["W2"], W["W2"], 1e-12)
    close(yp, torch.stack(ys, 0), 1e-12)


def test_chunk_form_uses_the_parallel_solution(monkeypatch):
    from mcserve_ref import hope_titans
    calls = []
    orig = hope_titans.parallel_piece
    monkeypatch.setattr(hope_titans, "parallel_piece", lambda *a, **k: calls.append(1) or orig(*a, **k))
    model().forward(IDS, form="chunk")
    assert calls
    calls.clear()
    model().forward(IDS, form="token")
    assert not calls


def naive_layer(mx, u, Co, Cm):
    """An independent, literal §3.2/§3.6 oracle for one mixer with the default options: per head
    loops, explicit transition matrices, inner gradients by autograd.  u [T, D] -> o [T, D]."""
    H, d = mx.H, mx.d
    silu = lambda z: z * torch.sigmoid(z)  # noqa: E731

    def M(W1, W2, x):
        return (x if W1.shape[0] == d else 0.0) + W1 @ silu(W2 @ x)

    run = {n: [(mx.init[n]["W1"][h].clone(), mx.init[n]["W2"][h].clone()) for h in range(H)] for n in mx.names}
    anch = {}
    hist = {c: [] for c in "qkv"}
    K = mx.convs["q"].shape[1]

    def conv(c, z):
        hist[c].append(z)
        return silu(sum(mx.convs[c][:, K - 1 - j] * hist[c][-1 - j] for j in range(min(K, len(hist[c])))))

    outs = []
    for t in range(1, u.shape[0] + 1):
        for n in mx.names:
            if (t - 1) % (Cm if n == "mem" else Co) == 0:
                anch[n] = [(a.clone(), b.clone()) for a, b in run[n]]
        x = u[t - 1].view(H, d)
        pre = {n: torch.stack([M(*anch[n][h], x[h]) for h in range(H)]) for n in ("k", "v", "eta", "alpha")}
        qt = conv("q", u[t - 1] @ mx.wq.T).view(H, d)
        kt = conv("k", pre["k"].reshape(-1)).view(H, d)
        vt = conv("v", pre["v"].reshape(-1)).view(H, d)
        q = qt / torch.sqrt((qt * qt).sum(-1, keepdim=True) + 1e-6)
        k = kt / torch.sqrt((kt * kt).sum(-1, keepdim=True) + 1e-6)
        alpha = torch.sigmoid(pre["alpha"][:, 0])
        eta = torch.minimum(torch.sigmoid(pre["eta"][:, 0]), 1 + alpha)
        y = torch.stack([M(*run["mem"][h], q[h]) for h in range(H)])
        for n in mx.names:
            for h in range(H):
                A1, A2 = anch[n][h]
                vhat = M(A1, A2, vt[h]).detach()
                a1, a2 = A1.clone().requires_grad_(True), A2.clone().requires_grad_(True)
                with torch.enable_grad():
                    G1, G2 = torch.autograd.grad(((M(a1, a2, k[h]) - vhat) ** 2).sum(), (a1, a2))
                W1, W2 = run[n][h]
                P = alpha[h] * torch.eye(d, dtype=u.dtype) - eta[h] * torch.outer(k[h], k[h])
                run[n][h] = (alpha[h] * W1 - eta[h] * G1, W2 @ P - eta[h] * G2)
        yn = y * torch.rsqrt((y * y).mean(-1, keepdim=True) + mx.eps) * mx.onorm
        g = (u[t - 1] @ mx.wg.T).view(H, d)
        outs.append((yn * silu(g)).reshape(-1) @ mx.wo.T)
    return torch.stack(outs)


@pytest.mark.parametrize("co,cm", [(1, 1), (4, 3), (2, 5)])
def test_mixer_matches_the_naive_oracle(co, cm):
    m = model(chunk_size_other=co, chunk_size_mem=cm)
    mx = m.layers[0]["attn"]
    u = torch.randn(11, 16, generator=torch.Generator().manual_seed(8), dtype=D)
    ref = naive_layer(mx, u, co, cm)
    close(mx.run_chunks(u, mx.new_state()), ref, 1e-11)
    s = mx.new_state()
    close(torch.stack([mx.step_token(u[i], s) for i in range(11)]), ref, 1e-11)


@pytest.mark.parametrize("p", [4, 12, 7])
def test_state_snapshot_round_trip(p):
    """A copy of the state after p tokens, continued elsewhere, equals the uninterrupted run
    (specs §11.4/11.5; p = 12 = lcm(C_o, C_mem) is the aligned case, 7 a misaligned one)."""
    import copy
    m = model()
    full = m.forward(IDS)
    s = m.new_state()
    m.step(IDS[:p], s)
    snap = copy.deepcopy(s)
    close(m.step(IDS[p:], snap), full[p:], 1e-13)
    close(m.step(IDS[p:], s), full[p:], 1e-13)


@pytest.mark.parametrize("form", ["chunk", "token"])
def test_adaptive_update_equals_replayed_gradient(form):
    """The first update of every period-5 level equals theta - lr sum_{t=1..5} grad L_t where each L_t
    is replayed alone from a frozen copy of the state before token t (so fast weights and conv
    history are constants by construction)."""
    import copy
    m = model(adaptive=True)
    s = m.new_state()
    snaps = []
    for t in range(5):
        s["pending"] = None
        snaps.append(copy.deepcopy({k: v for k, v in s.items() if k != "cms"}))
        m.step([IDS[t]], s, learn=False)
    s = m.new_state()
    m.step(IDS[:6], s, form=form)
    for li, L in enumerate(m.layers):
        lv = L["cms"].levels[0]
        assert lv["chunk_size"] == 5
        th0 = {k: v.clone().requires_grad_(True) for k, v in lv["theta"].items()}
        G = {k: torch.zeros_like(v) for k, v in th0.items()}
        for t in range(5):
            rs = copy.deepcopy(snaps[t])
            rs["cms"] = [c.new_state() for c in (X["cms"] for X in m.layers)]
            rs["cms"][li][0]["theta"] = th0
            with torch.enable_grad():
                logit = m._layers([IDS[t]], rs, "token")[0]
                loss = -torch.log_softmax(logit, -1)[IDS[t + 1]]
                gs = torch.autograd.grad(loss, list(th0.values()))
            for k, g in zip(th0, gs):
                G[k] = G[k] + g
        for k in th0:
            close(s["cms"][li][0]["theta"][k].detach(), lv["theta"][k] - lv["lr"] * G[k], 1e-11)


def test_long_stream_stays_bounded():
    """specs §11.8 in small: 300 tokens, fast weights stay finite and bounded, logits finite."""
    m = model()
    ids = [int(i) for i in torch.randint(3, 40, (300,), generator=torch.Generator().manual_seed(6))]
    s = m.new_state()
    logits = m.step(ids, s)
    assert torch.isfinite(logits).all()
    for ms in s["mix"]:
        for w in ms["run"].values():
            assert torch.isfinite(w["W1"]).all() and w["W2"].abs().max() < 1e3


def test_learn_flags_must_match_tokens():
    m = model(adaptive=True)
    with pytest.raises(ValueError, match="learn"):
        m.step(IDS[:3], m.new_state(), learn=[True, False])
