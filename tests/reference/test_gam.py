"""GAM reference (mcserve_ref/gam*.py; docs/model-format.md (gam)).  float64 throughout.

Checks (validation checklist B.11 items 1-4 at the reference level): parameter counts; token-by-token
decode == the parallel forward (torch conv1d, as the official code) on 256 tokens; chunked prefill
with chunk sizes 1, 2, 3, 17, 256 == one prefill (logits and state); the state rebuilt from the last
n_layer (k-1) tokens == the carried state (and one token fewer is not enough); the position-table
limit and its clamp extension; config and checkpoint checks under the official state-dict names.
"""
import json

import pytest
import torch

import family_testing
from family_testing import RandomModels

from mcserve_ref import CausalLM
from mcserve_ref import safetensors_io as st
from mcserve_ref.gam import GamLM
from mcserve_ref.gam_config import resolve_gam_config
from mcserve_ref.gam_weights import EMB, HEAD, parameter_count, random_weights, tensor_shapes

D = torch.float64
BASE = dict(model_type="gam", vocab_size=40, block_size=256, n_embed=16, n_layer=3, num_memory_slots=8)
VARIANTS = {"default": {}, "k4_wide": dict(conv_kernel_size=4, n_embed=24, num_memory_slots=5, n_layer=2)}
IDS = [int(i) for i in torch.randint(0, 40, (256,), generator=torch.Generator().manual_seed(5))]

model = RandomModels(GamLM, random_weights, BASE, VARIANTS, D)


def close(a, b, tol=1e-12):
    family_testing.close(a, b, tol)


def run_chunks(m, ids, n, state=None):
    s = m.new_state() if state is None else state
    return torch.cat([m.step(ids[i:i + n], s) for i in range(0, len(ids), n)], 0), s


def same_state(a, b, tol=1e-13):
    assert a["t"] == b["t"]
    for x, y in zip(a["conv"], b["conv"]):
        close(x, y, tol)


# ------------------------------------------------------------------ B.11.1 parameter counts

def test_parameter_count_paper_config():
    """6 layers, d 512, 512 slots, k 3, vocab 10k, 256 positions, tied head: 22,599,680 (the paper's 22.6M);
    per layer 2,891,264."""
    assert parameter_count(dict(model_type="gam")) == 5120000 + 131072 + 6 * 2891264 + 1024 == 22599680
    one = parameter_count(dict(model_type="gam", n_layer=1)) - 5120000 - 131072 - 1024
    assert one == 2891264


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_parameter_count_small_configs(name):
    c = resolve_gam_config(dict(BASE, **VARIANTS[name]))
    Dm, k, Ms, L = c["n_embed"], c["conv_kernel_size"], c["num_memory_slots"], c["n_layer"]
    layer = Dm * k + Dm + Ms * Dm + 2 * Dm * Dm + 2 * Dm + 4 * Dm + 8 * Dm * Dm + 4 * Dm + Dm
    assert parameter_count(c) == (c["vocab_size"] + c["block_size"]) * Dm + L * layer + 2 * Dm
    assert sum(v.numel() for v in random_weights(c).values()) == parameter_count(c)


# ------------------------------------------------------------------ B.11.2 decode == parallel forward

@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_token_by_token_equals_parallel_forward(name):
    m = model(name)
    close(run_chunks(m, IDS, 1)[0], m.forward(IDS))


# ------------------------------------------------------------------ B.11.3 chunked prefill

@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("n", [1, 2, 3, 17, 256])
def test_chunk_sizes_give_the_same_logits_and_state(name, n):
    m = model(name)
    ref, s_ref = run_chunks(m, IDS, 256)
    got, s = run_chunks(m, IDS, n)
    close(got, ref)
    same_state(s, s_ref)
    assert s["t"] == 256 and s["conv"][0].shape == (m.k - 1, m.D)


# ------------------------------------------------------------------ B.11.4 state from the last tokens

@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("t", [0, 1, 4, 6, 7, 40, 200])
def test_state_rebuilt_from_the_last_tokens(name, t):
    """The state after t tokens depends only on the last R = n_layer (k-1) of them (their positions
    kept): rebuilt == carried, and the next tokens' logits agree."""
    m = model(name)
    R = m.cfg["receptive_tokens"]
    _, carried = run_chunks(m, IDS[:t], 7) if t else (None, m.new_state())
    rebuilt = m.rebuild_state(IDS[max(0, t - R):t], t)
    same_state(rebuilt, carried)
    close(m.step(IDS[t:t + 5], rebuilt), m.step(IDS[t:t + 5], carried))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_one_token_fewer_is_not_enough(name):
    m = model(name)
    R, t = m.cfg["receptive_tokens"], 40
    _, carried = run_chunks(m, IDS[:t], 5)
    short = m.new_state(t - R + 1)
    m.step(IDS[t - R + 1:t], short)
    assert (short["conv"][-1] - carried["conv"][-1]).abs().max() > 1e-6
    with pytest.raises(ValueError, match="last min"):
        m.rebuild_state(IDS[t - R + 1:t], t)


def test_receptive_field_is_n_layer_times_k_minus_1():
    """Logits at t change with token t-R (R = 6 here) and never with token t-R-1: the bank is static,
    the conv is the only token mixing (B.1)."""
    m = model()
    R, t = m.cfg["receptive_tokens"], 30
    base = m.forward(IDS[:t + 1])[t]
    for j, changes in ((t - R, True), (t - R - 1, False), (0, False)):
        ids = list(IDS[:t + 1])
        ids[j] = (ids[j] + 1) % 40
        assert ((m.forward(ids)[t] - base).abs().max() > 1e-9) == changes


def test_global_pathway_is_positionwise():
    """With the conv zeroed (weights and bias), each position's logits depend only on its own token
    and position: the memory bank carries nothing between tokens."""
    cfg = dict(BASE)
    W = random_weights(cfg, seed=3, dtype=D)
    for i in range(cfg["n_layer"]):
        for k in ("causal_conv.weight", "causal_conv.bias"):
            W["blocks.%d.%s" % (i, k)] = torch.zeros_like(W["blocks.%d.%s" % (i, k)])
    m = GamLM(cfg, W, dtype=D)
    other = [(i * 7 + 3) % 40 for i in range(20)]
    other[12] = IDS[12]
    close(m.forward(other)[12], m.forward(IDS[:20])[12], 0.0)


def test_gate_halves():
    """gate rows 0..D-1 gate the local (conv) pathway, rows D..2D-1 the global (bank) one (B.9.4): with
    the global gate shut (bias -80) the bank has no effect; with the local gate shut, the conv has none."""
    cfg = dict(BASE)
    W = random_weights(cfg, seed=3, dtype=D)
    Dm = cfg["n_embed"]

    def logits(shut, perturb=()):
        w = dict(W)
        for i in range(cfg["n_layer"]):
            b = w["blocks.%d.gate.bias" % i].clone()
            b[shut] = -80.0
            w["blocks.%d.gate.bias" % i] = b
            for k, v in dict(perturb).items():
                w["blocks.%d.%s" % (i, k)] = w["blocks.%d.%s" % (i, k)] + v
        return GamLM(cfg, w, dtype=D).forward(IDS[:12])

    glob, loc = slice(Dm, 2 * Dm), slice(0, Dm)
    bank = {"memory_bank": 0.5}
    close(logits(glob, bank), logits(glob), 1e-12)
    w_conv = {"causal_conv.weight": 0.5, "causal_conv.bias": 0.3}
    close(logits(loc, w_conv), logits(loc), 1e-12)
    assert (logits(glob, w_conv) - logits(glob)).abs().max() > 1e-3
    assert (logits(loc, bank) - logits(loc)).abs().max() > 1e-3


def test_first_tokens_by_the_formulas():
    """A 1-layer model's first two tokens computed from B.3 written out in the test: the conv sees
    w[:, 0, k-1] u_t + w[:, 0, k-2] u_(t-1), scores Mb u with no 1/sqrt(D), the exact erf GELU."""
    cfg = dict(BASE, n_layer=1, n_embed=4, num_memory_slots=3, vocab_size=7, block_size=8)
    W = random_weights(cfg, seed=11, dtype=D)
    p = lambda k: W["blocks.0." + k]                                            # noqa: E731
    ids = [5, 2]
    ln = lambda x, w, b: (x - x.mean()) / torch.sqrt(((x - x.mean()) ** 2).mean() + 1e-5) * w + b  # noqa: E731
    gelu = lambda x: 0.5 * x * (1.0 + torch.erf(x / 2 ** 0.5))                    # noqa: E731
    us, want = [], []
    for t, i in enumerate(ids):
        x = W["token_embedding.weight"][i] + W["pos_embedding.weight"][t]
        u = ln(x, p("ln1.weight"), p("ln1.bias"))
        us.append(u)
        c = p("causal_conv.bias") + sum(p("causal_conv.weight")[:, 0, 2 - j] * us[t - j] for j in range(t + 1))
        a = torch.exp(p("memory_bank") @ u)
        g = (a / a.sum()) @ p("memory_bank")
        gate = p("gate.weight") @ u + p("gate.bias")
        x = x + torch.sigmoid(gate[:4]) * c + torch.sigmoid(gate[4:]) * g
        hid = p("ffn.0.weight") @ ln(x, p("ln2.weight"), p("ln2.bias")) + p("ffn.0.bias")
        x = x + p("ffn.2.weight") @ gelu(hid) + p("ffn.2.bias")
        want.append(W["token_embedding.weight"] @ ln(x, W["ln_f.weight"], W["ln_f.bias"]))
    close(GamLM(cfg, W, dtype=D).forward(ids), torch.stack(want), 1e-13)


# ------------------------------------------------------------------ positions (B.9.1)

def test_position_table_limit_is_an_error_by_default():
    m = model()
    with pytest.raises(ValueError, match=r"block_size = 256"):
        m.forward(IDS + [1])
    s = m.new_state()
    m.step(IDS[:250], s)
    with pytest.raises(ValueError, match=r"position 256 is past the learned position table \(block_size = 256"):
        m.step(IDS[:7], s)
    small = model(block_size=20)
    with pytest.raises(ValueError, match="block_size = 20"):
        small.greedy(IDS[:15], 6)
    assert len(small.greedy(IDS[:15], 5)) == 5


def test_clamp_extension():
    """position_overflow: clamp uses overflow_position for every t >= block_size (default block_size-1);
    step == forward, and the tokens before block_size are unchanged."""
    m = model(block_size=20, position_overflow="clamp")
    ids = IDS[:45]
    full = m.forward(ids)
    close(run_chunks(m, ids, 3)[0], full)
    close(full[:20], model(block_size=20).forward(ids[:20]), 0.0)
    assert m.positions(18, 4).tolist() == [18, 19, 19, 19]
    m6 = model(block_size=20, position_overflow="clamp", overflow_position=6)
    assert m6.positions(19, 3).tolist() == [19, 6, 6]


# ------------------------------------------------------------------ config

BAD = [
    (dict(model_type="gpt2"), "model_type"), (dict(n_embed=0), "n_embed"), (dict(block_size=2.5), "block_size"),
    (dict(conv_kernel_size=0), "conv_kernel_size"), (dict(num_memory_slots=-1), "num_memory_slots"),
    (dict(fusion="sum"), "fusion"), (dict(position_overflow="wrap"), "position_overflow"),
    (dict(tie_word_embeddings=False), "tie_word_embeddings"), (dict(layer_norm_eps=0), "layer_norm_eps"),
    (dict(dropout=1.0), "dropout"), (dict(overflow_position=5), "overflow_position"),
    (dict(overflow_position=256), "overflow_position"), (dict(N_EMBED=16), "N_EMBED"),
    (dict(receptive_tokens=4), "receptive_tokens"),
]


@pytest.mark.parametrize("over,field", BAD)
def test_bad_config_rejected_naming_the_field(over, field):
    with pytest.raises(ValueError, match=field):
        resolve_gam_config(dict(BASE, **over))


def test_defaults_are_the_official_config_and_the_recommended_resolutions():
    r = resolve_gam_config(dict(model_type="gam"))
    assert (r["vocab_size"], r["block_size"], r["n_embed"], r["n_layer"], r["num_memory_slots"],
            r["conv_kernel_size"], r["dropout"]) == (10000, 256, 512, 6, 512, 3, 0.1)
    assert r["position_overflow"] == "error" and r["overflow_position"] == 255 and r["receptive_tokens"] == 12
    assert r["fusion"] == "gated" and r["layer_norm_eps"] == 1e-5
    assert resolve_gam_config(r) == r


# ------------------------------------------------------------------ names, shapes, loading

def test_random_weights_use_the_official_names():
    """The names of GAM_Model's state_dict (gam_model.py), canonical name of the tied embedding only."""
    cfg = dict(BASE, n_layer=1)
    W = random_weights(cfg, seed=0)
    want = {"token_embedding.weight": (40, 16), "pos_embedding.weight": (256, 16),
            "blocks.0.causal_conv.weight": (16, 1, 3), "blocks.0.causal_conv.bias": (16,),
            "blocks.0.memory_bank": (8, 16), "blocks.0.gate.weight": (32, 16), "blocks.0.gate.bias": (32,),
            "blocks.0.ffn.0.weight": (64, 16), "blocks.0.ffn.0.bias": (64,),
            "blocks.0.ffn.2.weight": (16, 64), "blocks.0.ffn.2.bias": (16,),
            "blocks.0.ln1.weight": (16,), "blocks.0.ln1.bias": (16,),
            "blocks.0.ln2.weight": (16,), "blocks.0.ln2.bias": (16,),
            "ln_f.weight": (16,), "ln_f.bias": (16,)}
    assert {k: tuple(v.shape) for k, v in W.items()} == want
    assert list(W) == list(tensor_shapes(cfg))
    assert all(torch.equal(W[k], v) for k, v in random_weights(cfg, seed=0).items())


def test_checkpoint_tensors_checked():
    cfg = dict(BASE)
    W = random_weights(cfg, seed=1, dtype=D)
    ref = GamLM(cfg, W).forward(IDS[:9])
    with pytest.raises(ValueError, match="unused.*extra"):
        GamLM(cfg, dict(W, extra=torch.zeros(1)))
    with pytest.raises(ValueError, match="missing tensor blocks.2.memory_bank"):
        GamLM(cfg, {k: v for k, v in W.items() if k != "blocks.2.memory_bank"})
    with pytest.raises(ValueError, match="causal_conv.weight has shape"):
        GamLM(cfg, dict(W, **{"blocks.0.causal_conv.weight": torch.zeros(16, 3, dtype=D)}))
    close(GamLM(cfg, dict(W, **{HEAD: W[EMB].clone()})).forward(IDS[:9]), ref, 0.0)   # both tied names
    only_head = {k: v for k, v in W.items() if k != EMB}
    only_head[HEAD] = W[EMB]
    close(GamLM(cfg, only_head).forward(IDS[:9]), ref, 0.0)                            # the other tied name
    with pytest.raises(ValueError, match="head.weight must equal"):
        GamLM(cfg, dict(W, **{HEAD: 2 * W[EMB]}))


def test_from_dir_end_to_end(tmp_path):
    cfg = dict(BASE)
    W = random_weights(cfg, seed=9, dtype=torch.float32)
    st.save_file({k: v.numpy() for k, v in W.items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = CausalLM.from_dir(str(tmp_path), dtype=D)
    assert isinstance(m, GamLM)
    a = m.forward(IDS[:40])
    assert torch.isfinite(a).all() and torch.equal(a, m.forward(IDS[:40]))
    g = m.greedy(IDS[:7], 12)
    assert g == m.greedy(IDS[:7], 12) and len(g) == 12
    close(GamLM(cfg, W, dtype=torch.float32).forward(IDS[:40]).double(), a, 1e-5)
