#!/usr/bin/python3
"""Deterministic generator of the mcserve model fixtures (tests/data/models/<name>/).

    /usr/bin/python3 tests/reference/export_fixtures.py                  # regenerate all fixtures
    /usr/bin/python3 tests/reference/export_fixtures.py --only gla       # one fixture
    /usr/bin/python3 tests/reference/export_fixtures.py --out DIR        # write elsewhere
    /usr/bin/python3 tests/reference/export_fixtures.py --train-tokenizer  # retrain tests/data/tokenizer.model
    /usr/bin/python3 tests/reference/export_fixtures.py --bench-model DIR [--dtype bf16]
    /usr/bin/python3 tests/reference/export_fixtures.py --mc             # only the MC goldens (tests/data/mc)

Each fixture directory holds config.json, model.safetensors (or shards + index),
tokenizer.model, golden.safetensors {prompt_ids I32 [T], logits F32 [T, vocab], greedy_ids I32 [16]}
and golden.json (same, human readable, plus the prompt text).

Weights are drawn from numpy RandomState (a frozen stream; hope, gam: torch.Generator through their random_weights), the reference runs in float64
with torch using 1 thread, and the seed is searched deterministically until the greedy
continuation is non-degenerate and has a clear argmax margin at every step.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from mcserve_ref.model import CausalLM  # noqa: E402
from mcserve_ref import safetensors_io as st  # noqa: E402
from mcserve_ref.lattice import orthonormal_rows, param_specs as lattice_param_specs  # noqa: E402
from mcserve_ref.hope import HopeLM, random_weights as hope_random_weights  # noqa: E402
from mcserve_ref.armt import ArmtLM  # noqa: E402
from mcserve_ref.armt_weights import random_weights as armt_random_weights  # noqa: E402
from mcserve_ref.gam import GamLM  # noqa: E402
from mcserve_ref.gam_weights import random_weights as gam_random_weights  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(REPO, "tests", "data")
MODELS = os.path.join(DATA, "models")
MC_DATA = os.path.join(DATA, "mc")
TOKENIZER = os.path.join(DATA, "tokenizer.model")
CORPUS = "tokenizer_corpus.txt"

PROMPT = "The cat watched 3 gulls from the window sill."
N_GREEDY = 16
MIN_MARGIN = 2e-3      # top1 - top2 logit gap required at every greedy step
MIN_DISTINCT = 6       # distinct tokens required among the greedy ids
VOCAB = 320

SPM_ARGS = ["--input=" + CORPUS, "--model_prefix=tokenizer", "--model_type=bpe", "--vocab_size=%d" % VOCAB,
            "--byte_fallback=true", "--character_coverage=1.0", "--num_threads=1", "--random_seed=1234",
            "--shuffle_input_sentence=false", "--normalization_rule_name=identity",
            "--remove_extra_whitespaces=false", "--split_digits=true", "--minloglevel=2"]


def train_tokenizer():
    """Retrain tests/data/tokenizer.model from tests/data/tokenizer_corpus.txt (deterministic)."""
    subprocess.check_call(["/usr/bin/spm_train"] + SPM_ARGS, cwd=DATA)
    os.remove(os.path.join(DATA, "tokenizer.vocab"))


def encode_prompt(text=PROMPT):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=TOKENIZER)
    return [sp.bos_id()] + list(sp.encode(text))


# ------------------------------------------------------------------------------- configs

COMMON = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_heads=2, intermediate_size=64,
              hidden_ratio=4, hidden_act="swish", norm_eps=1e-6, bos_token_id=1, eos_token_id=2,
              tie_word_embeddings=False, max_position_embeddings=2048, use_cache=True,
              initializer_range=0.02, fuse_norm=True, fuse_swiglu=True, fuse_cross_entropy=True)

ARCH = {"linear_attn": "LinearAttentionForCausalLM", "gla": "GLAForCausalLM",
        "delta_net": "DeltaNetForCausalLM", "gated_deltanet": "GatedDeltaNetForCausalLM",
        "swla": "SWLAForCausalLM", "titans": "TitansForCausalLM", "dla": "DLAForCausalLM"}


def cfg(model_type, drop=(), **kw):
    c = dict(COMMON)
    c.update(kw)
    c["model_type"] = model_type
    c["architectures"] = [ARCH[model_type]]
    for k in drop:
        c.pop(k, None)
    return c


# Deep-memory fixtures: random gates put the MLP memory either at its dead point (retention ~0.5 decays
# the weights to ~0, where the gradients vanish) or into divergence (inner step ~0.5).  A constant on
# channel 0 of the embeddings is a bias feature of every layer input; adding to channel 0 of a_proj /
# b_proj sets retention ~0.99 and step ~0.07 as a trained model would (see _add_bias_channel).
BIAS_CHANNEL = {"emb": 2.0, "a_proj.weight": 1.5, "b_proj.weight": -0.8}
BENCH_BIAS_CHANNEL = {"emb": 2.0, "a_proj.weight": 1.5, "b_proj.weight": -2.0}  # export_bench_model (titans)

# name -> (config, options)
FIXTURES = {
    "linear_attn_identity": (cfg("linear_attn", attn_mode="fused_chunk", expand_k=1.0, expand_v=1.0,
                                 feature_map="identity", tie_feature_map_qk=False, norm_q=False, norm_k=False,
                                 norm_feature_map=False, num_kv_heads=None, elementwise_affine=True), {}),
    "linear_attn_elu_norm": (cfg("linear_attn", attn_mode="fused_chunk", expand_k=1.0, expand_v=1.0,
                                 feature_map="elu", tie_feature_map_qk=False, norm_q=True, norm_k=True,
                                 norm_feature_map=True, num_kv_heads=None), {}),
    "linear_attn_hadamard_gqa": (cfg("linear_attn", attn_mode="fused_chunk", expand_k=1.0, expand_v=1.0,
                                     feature_map="elementwise_product", tie_feature_map_qk=False,
                                     num_kv_heads=1, norm_q=False, norm_k=False, norm_feature_map=False), {}),
    "linear_attn_hedgehog": (cfg("linear_attn", attn_mode="fused_chunk", expand_k=1.0, expand_v=1.0,
                                 feature_map="hedgehog", tie_feature_map_qk=False, norm_feature_map=False), {}),
    "linear_attn_t2r_tied": (cfg("linear_attn", attn_mode="fused_chunk", expand_k=1.0, expand_v=1.0,
                                 feature_map="t2r", tie_feature_map_qk=True, norm_feature_map=False,
                                 tie_word_embeddings=True), {}),
    "linear_attn_dpfp": (cfg("linear_attn", attn_mode="fused_chunk", expand_k=0.5, expand_v=1.0,
                             feature_map="dpfp", norm_feature_map=True), {}),
    # gla with fla defaults: keys absent -> expand_k 0.5, expand_v 1, no conv, output gate, fuse_norm
    "gla": (cfg("gla", drop=("fuse_norm",)), {}),
    "gla_conv_tied": (cfg("gla", drop=("norm_eps",), rms_norm_eps=1e-5, attn_mode="chunk", expand_k=1.0,
                          expand_v=1.0, use_short_conv=True, conv_size=4, use_output_gate=True,
                          clamp_min=-0.06, tie_word_embeddings=True, feature_map=None), {"gk_bias": -1.5}),
    "gla_nogate": (cfg("gla", attn_mode="chunk", expand_k=1.0, expand_v=1.0, num_kv_heads=1,
                       use_short_conv=False, use_output_gate=False, feature_map="relu", clamp_min=None), {}),
    "delta_net": (cfg("delta_net", attn_mode="chunk", expand_k=1.0, expand_v=1.0), {}),
    "delta_net_variants": (cfg("delta_net", attn_mode="chunk", expand_k=1.0, expand_v=1.0, use_gate=True,
                               qk_activation="elu", qk_norm="sum", use_short_conv=False, allow_neg_eigval=True,
                               use_beta=False, conv_size=4), {}),
    "gated_deltanet": (cfg("gated_deltanet", attn_mode="chunk", head_dim=16, expand_v=1.0, num_v_heads=None,
                           use_gate=True, use_short_conv=True, conv_size=4, allow_neg_eigval=False),
                       {"legacy_D": True}),
    "gated_deltanet_gva_bf16": (cfg("gated_deltanet", drop=("intermediate_size",), hidden_ratio=2,
                                    attn_mode="chunk", head_dim=16, expand_v=1.0, num_v_heads=4, use_gate=False,
                                    use_short_conv=True, conv_size=4, allow_neg_eigval=True,
                                    torch_dtype="bfloat16"), {"dtype": "BF16"}),
    "gated_deltanet_sharded": (cfg("gated_deltanet", attn_mode="chunk", head_dim=16, expand_v=1.0,
                                   use_gate=True, use_short_conv=False, conv_size=4), {"shards": 2}),
    "swla": (cfg("swla", head_dim=16, expand_v=1.0, use_short_conv=True, conv_size=4, use_gate=True), {}),
    "titans": (cfg("titans", head_dim=16, expand_v=1.0, use_short_conv=True, conv_size=4, use_gate=False,
                   memory_depth=1), {}),
    # deep (MLP) memories, docs/model-format.md: titans memory_depth 2 with the memory_* / inner_chunk_size
    # keys absent (defaults: expansion 4, no LN, b = 1); dla with every key written, LN on, b = 4
    "titans_mlp": (cfg("titans", head_dim=16, expand_v=1.0, use_short_conv=True, conv_size=4, use_gate=False,
                       memory_depth=2, intermediate_size=32), {"deep": True, "bias_channel": BIAS_CHANNEL}),
    "dla": (cfg("dla", head_dim=16, expand_v=1.0, use_short_conv=True, conv_size=4, use_gate=True,
                memory_expansion=2, memory_layer_norm=True, inner_chunk_size=4, intermediate_size=32),
            {"deep": True, "bias_channel": BIAS_CHANNEL}),
    # Memory Caching with learned gate weights (attn.mc.u_proj); its golden is computed WITH MC
    "gated_deltanet_mc_uproj": (cfg("gated_deltanet", attn_mode="chunk", head_dim=16, expand_v=1.0, num_v_heads=None,
                                    use_gate=True, use_short_conv=True, conv_size=4, allow_neg_eigval=False,
                                    memory_caching=dict(aggregation="grm", segmentation="constant", segment_size=4,
                                                        init_mode="checkpoint", gate="u_proj")), {}),
}

# Lattice (docs/model-format.md `lattice`): DEC with every A.9 field at its default, m = 8 slots < d = 16
ARCH["lattice"] = "LatticeForCausalLM"
FIXTURES["lattice"] = (cfg("lattice", head_dim=16, num_slots=8, lattice_variant="dec", qk_projection="shared",
                           use_short_conv=True, conv_size=4, use_forget_gate=True, use_gate=True), {})
# ... and the other options end to end: SIM, separate q/k projections, SiLU convs, L2 q/k, no forget gate, the
# output RMSNorm, identity S_0 (no s0 tensor), analytic renormalisation. (The normalised read-out is covered by
# the kernel tests only, since Memory Caching rejects it and the MC invariant tests run every fixture.)
FIXTURES["lattice_sim_variants"] = (cfg("lattice", head_dim=16, lattice_variant="sim", qk_projection="separate",
                                        conv_activation="silu", qk_norm="l2", use_forget_gate=False,
                                        use_output_norm=True, initial_state="identity", state_renorm="analytic"),
                                    {})
# ... and ENC: the `lattice` settings with lattice_variant enc, plus a bias channel (as the deep fixtures') that
# puts its inner GD step in the range where it reduces its loss. ENC's write turns slot i's error
# e_i = φ_iᵀv − k_i into about e_i (1 − κ), with κ = (γ/μ)‖v^⊥s_i‖². Random gates (γ, μ ≈ 0.45, ‖v‖² ≈ d = 16)
# give κ ≈ 20: the step overshoots (the write grows |e_i|, median ×2.7) and the scan amplifies rounding, so
# float32 prefill vs decode is 1.2e-5, up to 2.2e-4 (16 draws). μ ≈ 0.98 and γ ≈ 0.05 ≈ 1/d (the normalised-LMS
# step for ‖v‖² ≈ d) give κ ≈ 0.9: the write shrinks |e_i| (median ×0.6), the slots still turn (median
# 1 − |cos(s_0, s_T)| 0.7 over the prompt), and float32 prefill vs decode is 7e-7 (1.3e-6 at most over 16
# draws), as for DEC. See tests/reference/README.md and test_lattice_enc.py.
LATTICE_ENC_BIAS_CHANNEL = {"emb": 2.0, "f_proj.weight": 1.5, "b_proj.weight": -1.2}
FIXTURES["lattice_enc"] = (dict(FIXTURES["lattice"][0], lattice_variant="enc"),
                           {"bias_channel": LATTICE_ENC_BIAS_CHANNEL})


# HOPE (docs/model-format.md `hope`): its own strict schema (no fla keys), weights from hope.random_weights.
# Chunk sizes far below the paper's 16 so that the 26-token prompt crosses many anchor refreshes.
HOPE_BASE = dict(model_type="hope", architectures=["HopeForCausalLM"], vocab_size=VOCAB, hidden_size=32,
                 num_hidden_layers=2, num_heads=2, head_dim=16, norm_eps=1e-6, bos_token_id=1, eos_token_id=2,
                 tie_word_embeddings=False, conv_size=4, memory_expansion=2, chunk_size_other=4, chunk_size_mem=3,
                 cms_levels=[dict(chunk_size=8, intermediate_size=32, activation="swiglu", lr=0.0),
                             dict(chunk_size=16, intermediate_size=16, activation="gelu", lr=0.0)])
FIXTURES["hope"] = (dict(HOPE_BASE, tie_word_embeddings=True), {"hope": True})
# ... every other choice the engine runs: in_proj input, M_q, data momentum, hidden-space DGD on W1, read after
# the write, linear skip of the scalar memories, softplus eta without clamp, GELU memories, no output gate,
# untied embeddings, a 2-tap conv ...
FIXTURES["hope_variants"] = (dict(HOPE_BASE, hidden_size=24, memory_input="proj", adaptive_q=True, momentum="data",
                                  w1_rule="dgd_hidden", read_index="after_write", scalar_memory_skip="linear",
                                  eta_activation="softplus", eta_scale=0.7, eta_clamp=False,
                                  memory_activation="gelu", output_gate="rmsnorm",
                                  conv_size=2, chunk_size_other=5, chunk_size_mem=2), {"hope": True})
# ... and the anchor read-out (mode A) with constant momentum, no conv (1 tap) and E = d.
FIXTURES["hope_anchor_momentum"] = (dict(HOPE_BASE, readout_mode="A", momentum="constant", momentum_beta=0.5,
                                         conv_size=1, memory_expansion=1, chunk_size_other=3, chunk_size_mem=7,
                                         tie_word_embeddings=True),
                                    {"hope": True})
# ... and the adaptive CMS (test-time training, cms_adaptive): two levels of different periods, both trained,
# the prompt's logits with every prompt token learned and greedy ids that never learn from generated tokens.
# Moderate lr: the training still moves the logits by more than their scale, while a float32 run stays within
# ~1e-5 of the float64 golden (at lr 0.2 / 0.1 float32 itself drifts by 3e-4: the updates amplify rounding).
FIXTURES["hope_adaptive"] = (dict(HOPE_BASE, cms_adaptive=True, tie_word_embeddings=True,
                                  cms_levels=[dict(chunk_size=3, intermediate_size=32, activation="swiglu", lr=0.1),
                                              dict(chunk_size=5, intermediate_size=16, activation="gelu", lr=0.05)]),
                             {"hope": True})
# ... with the other mixer choices on its gradient path: the anchor read-out (mode A), no conv (1 tap), GELU
# memories, no output gate and in_proj input; a static level between two trained ones.  (With M_q or constant
# momentum on top, this model's fast weights blow up within 70 tokens, in the reference too.)
FIXTURES["hope_adaptive_variants"] = (
    dict(HOPE_BASE, hidden_size=16, head_dim=8, cms_adaptive=True, tie_word_embeddings=True, readout_mode="A",
         conv_size=1, memory_activation="gelu", output_gate="rmsnorm", memory_input="proj",
         chunk_size_other=3, chunk_size_mem=5,
         cms_levels=[dict(chunk_size=4, intermediate_size=16, activation="gelu", lr=0.1),
                     dict(chunk_size=8, intermediate_size=16, activation="swiglu", lr=0.0),
                     dict(chunk_size=6, intermediate_size=24, activation="swiglu", lr=0.1)]),
    {"hope": True})
# ... and the read after the write (read_index after_write), a 2-tap conv, M_q on in_proj u.
FIXTURES["hope_adaptive_q_after_write"] = (
    dict(HOPE_BASE, hidden_size=16, head_dim=8, cms_adaptive=True, tie_word_embeddings=True,
         read_index="after_write", conv_size=2, adaptive_q=True, memory_input="proj", chunk_size_other=4,
         chunk_size_mem=2,  # lr 0.03: at 0.1 a float32 run drifts by 4e-3 from float64 within 70 tokens
         cms_levels=[dict(chunk_size=2, intermediate_size=16, activation="swiglu", lr=0.03)]),
    {"hope": True})

# GAM (docs/model-format.md `gam`): the official code's field and tensor names, weights from
# gam_weights.random_weights.  block_size 80 leaves room for test_models' 70-token chunking check.
GAM_BASE = dict(model_type="gam", vocab_size=VOCAB, block_size=80, n_embed=32, n_layer=2, num_memory_slots=16,
                conv_kernel_size=3)
FIXTURES["gam"] = (GAM_BASE, {"gam": True})
# ... and the clamp extension: a 40-row table that the prompt + greedy run passes (positions >= 40 read row
# 30), deeper (3 layers) with a 4-tap conv and 8 slots; the engine's long-sequence tests use it.
FIXTURES["gam_clamp"] = (dict(GAM_BASE, block_size=40, n_embed=16, n_layer=3, num_memory_slots=8, conv_kernel_size=4,
                              position_overflow="clamp", overflow_position=30), {"gam": True})

# ARMT (docs/model-format.md `armt`): HF GPT-2 + the official ARMT names, Conv1D weights stored [in, out]
# as HF stores them, weights from armt_weights.random_weights.  S = 6 so that the 35-token prompt covers
# S-1, S, S+1 and 3S+17 content tokens (5 closes); M = 2 memory tokens.
ARMT_BASE = dict(model_type="armt", vocab_size=VOCAB, n_positions=16, n_embd=24, n_layer=2, n_head=2,
                 num_mem_tokens=2, d_mem=4, segment_size=6)
FIXTURES["armt"] = (ARMT_BASE, {"armt": True})
# ... and wrap_pos: memory rows at wpe[n_positions..n_positions+M-1] (a wpe table of n_positions + M rows),
# without γ-correction (γ = 1), three heads of an odd width.
FIXTURES["armt_wrap"] = (dict(ARMT_BASE, wrap_pos=True, correction=False, n_embd=18, n_head=3, n_inner=40, d_mem=3,
                              segment_size=5, num_mem_tokens=3), {"armt": True})


# ------------------------------------------------------------------------------- MC variants

MC_BASES = ("gated_deltanet", "linear_attn_identity")


def mc_object(aggregation, init_mode="independent", segmentation="constant", segment_size=4, gate="q",
              pool="mean", top_k=2, mean_combine="add", layers="all", swla_cross_boundary=None):
    """A full `memory_caching` object (every field of the docs table written out)."""
    return dict(aggregation=aggregation, segmentation=segmentation,
                segment_size=segment_size if segmentation == "constant" else 256,
                init_mode=init_mode, gate=gate, pool=pool, top_k=top_k, mean_combine=mean_combine,
                layers=layers,
                swla_cross_boundary=(init_mode == "checkpoint") if swla_cross_boundary is None
                else swla_cross_boundary)


def mc_variants():
    """[(name, memory_caching object)], the golden variants for each base in MC_BASES."""
    out = []
    for agg in ("residual", "grm", "soup", "ssc"):
        for init in ("independent", "checkpoint"):
            for seg in ("constant", "logarithmic"):
                out.append(("%s_%s_%s" % (agg, init, "c4" if seg == "constant" else "log"),
                            mc_object(agg, init, seg)))
    for comb in ("add", "average"):
        for init in ("independent", "checkpoint"):
            out.append(("mean_%s_%s_c4" % (comb, init), mc_object("mean", init, mean_combine=comb)))
    out.append(("grm_independent_c4_poolsum", mc_object("grm", pool="sum")))
    out.append(("ssc_k64_independent_c4", mc_object("ssc", top_k=64)))
    out.append(("grm_independent_c4_layer1", mc_object("grm", layers=[1])))
    out.append(("grm_independent_c1", mc_object("grm", segment_size=1)))
    return out


DEEP_MC_BASES = ("titans_mlp", "dla")
ALL_MC_BASES = MC_BASES + DEEP_MC_BASES


def deep_mc_variants(base):
    """[(name, memory_caching object)], the golden variants of a deep-memory base (a smaller set: each
    variant file is 45 KB).  dla (inner_chunk_size 4) adds segments of 6, where the inner chunks
    restart at every segment start ([1-4] [5-6] | [7-10] [11-12] | ...); titans_mlp adds segment size 1."""
    out = []
    for agg in ("residual", "grm", "soup", "ssc"):
        for init in ("independent", "checkpoint"):
            out.append(("%s_%s_c4" % (agg, init), mc_object(agg, init)))
    out.append(("mean_add_independent_c4", mc_object("mean", "independent")))
    out.append(("mean_add_checkpoint_c4", mc_object("mean", "checkpoint")))
    out.append(("mean_average_independent_c4", mc_object("mean", "independent", mean_combine="average")))
    out.append(("grm_independent_log", mc_object("grm", "independent", "logarithmic")))
    out.append(("grm_checkpoint_log", mc_object("grm", "checkpoint", "logarithmic")))
    out.append(("residual_independent_log", mc_object("residual", "independent", "logarithmic")))
    out.append(("ssc_checkpoint_log", mc_object("ssc", "checkpoint", "logarithmic")))
    if base == "dla":
        out.append(("grm_checkpoint_c6", mc_object("grm", "checkpoint", segment_size=6)))
        out.append(("soup_independent_c6", mc_object("soup", "independent", segment_size=6)))
    else:
        out.append(("grm_independent_c1", mc_object("grm", segment_size=1)))
    return out


# Lattice: Memory Caching on its slot matrix (a page is M [H, m, d], read as Mᵀq; independent segments
# restart at S_0). A small set (each variant file is 45 KB); lattice_enc (ENC) only residual and GRM.
LATTICE_MC_BASES = ("lattice", "lattice_enc")
ALL_MC_BASES = ALL_MC_BASES + LATTICE_MC_BASES


def lattice_mc_variants(base="lattice"):
    """[(name, memory_caching object)], the golden variants of a lattice base."""
    if base == "lattice_enc":
        return [("residual_independent_c4", mc_object("residual", "independent")),
                ("grm_checkpoint_c4", mc_object("grm", "checkpoint"))]
    return [("residual_independent_c4", mc_object("residual", "independent")),
            ("grm_independent_c4", mc_object("grm", "independent")),
            ("grm_checkpoint_c4", mc_object("grm", "checkpoint")),
            ("soup_checkpoint_c4", mc_object("soup", "checkpoint")),
            ("ssc_independent_c4", mc_object("ssc", "independent")),
            ("mean_average_checkpoint_c4", mc_object("mean", "checkpoint", mean_combine="average")),
            ("grm_independent_log", mc_object("grm", "independent", "logarithmic"))]


# HOPE: Memory Caching of M_mem (mc_hope.py).  The fixture has no u_proj, so gate q only.  A small set
# (each variant file is 45 KB): every aggregation, both segmentations and init modes, soup before-write in
# both init modes (the engine refuses soup with logarithmic segments in independent mode).
HOPE_MC_BASES = ("hope",)


def hope_mc_variants():
    """[(name, memory_caching object)], the golden variants of the `hope` fixture (segments of 4 cross its
    M_mem chunks of 3)."""
    return [("grm_independent_c4", mc_object("grm", "independent")),
            ("grm_checkpoint_log", mc_object("grm", "checkpoint", "logarithmic")),
            ("residual_checkpoint_c4", mc_object("residual", "checkpoint")),
            ("ssc_independent_log", mc_object("ssc", "independent", "logarithmic")),
            ("soup_independent_c4", mc_object("soup", "independent")),
            ("soup_checkpoint_log", mc_object("soup", "checkpoint", "logarithmic")),
            ("mean_average_independent_c4", mc_object("mean", "independent", mean_combine="average"))]


ALL_MC_BASES = ALL_MC_BASES + HOPE_MC_BASES


def mc_variants_for(base):
    """The golden variants of any MC base: mc_variants() for the linear bases, deep_mc_variants(base) for
    the deep ones, lattice_mc_variants(base) for lattice and lattice_enc, hope_mc_variants() for hope."""
    if base == "hope":
        return hope_mc_variants()
    if base in LATTICE_MC_BASES:
        return lattice_mc_variants(base)
    return deep_mc_variants(base) if base in DEEP_MC_BASES else mc_variants()


# ------------------------------------------------------------------------------- parameters

def param_specs(c):
    """Ordered list of (name, shape, init-kind) for a resolved-enough config (fla names)."""
    from mcserve_ref.model import resolve_config
    r = resolve_config(c)
    H, V, I = r["hidden_size"], r["vocab_size"], r["intermediate_size"]
    mt = r["model_type"]
    specs = [("model.embeddings.weight", (V, H), "emb")]
    for i in range(r["num_hidden_layers"]):
        p = "model.layers.%d." % i
        a = p + "attn."
        specs.append((p + "attn_norm.weight", (H,), "norm"))
        if mt == "lattice":
            specs += lattice_param_specs(r, a)
        elif mt in ("linear_attn", "gla"):
            nh = r["num_heads"]
            g = nh // (r["num_kv_heads"] or nh)
            kd, vd = int(H * r["expand_k"]), int(H * r["expand_v"])
            dk, dv = kd // nh, vd // nh
            specs += [(a + "q_proj.weight", (kd, H), "lin"), (a + "k_proj.weight", (kd // g, H), "lin"),
                      (a + "v_proj.weight", (vd // g, H), "lin")]
            if mt == "linear_attn":
                fm = r["feature_map"]
                sides = ["q"] if r["tie_feature_map_qk"] else ["q", "k"]
                for s in sides:
                    f = a + "feature_map_%s." % s
                    if fm == "hedgehog":
                        specs += [(f + "layer.weight", (dk, dk), "hedgehog"), (f + "layer.bias", (dk,), "bias")]
                    elif fm == "t2r":
                        specs += [(f + "layer.weight", (dk, dk), "lin")]
                    elif fm == "elementwise_product":
                        specs += [(f + "layer1.weight", (dk, dk), "lin"), (f + "layer1.bias", (dk,), "bias"),
                                  (f + "layer2.weight", (dk, dk), "lin"), (f + "layer2.bias", (dk,), "bias")]
                specs += [(a + "norm.weight", (dv,), "norm"), (a + "o_proj.weight", (H, vd), "out")]
            else:
                if r["use_output_gate"]:
                    specs.append((a + "g_proj.weight", (vd, H), "lin"))
                if r["use_short_conv"]:
                    W = r["conv_size"]
                    specs += [(a + "q_conv1d.weight", (kd, 1, W), "conv"), (a + "k_conv1d.weight", (kd // g, 1, W), "conv"),
                              (a + "v_conv1d.weight", (vd // g, 1, W), "conv")]
                specs += [(a + "gk_proj.0.weight", (16, H), "lin"), (a + "gk_proj.1.weight", (kd // g, 16), "lin"),
                          (a + "gk_proj.1.bias", (kd // g,), "gk_bias")]
                fused = r["use_output_gate"] and r["hidden_act"] == "swish" and r["fuse_norm"]
                specs += [(a + ("g_norm_swish_gate.weight" if fused else "g_norm.weight"), (dv,), "norm"),
                          (a + "o_proj.weight", (H, vd), "out")]
        elif mt == "delta_net":
            nh = r["num_heads"]
            kd, vd = int(H * r["expand_k"]), int(H * r["expand_v"])
            dv = vd // nh
            specs += [(a + "q_proj.weight", (kd, H), "lin"), (a + "k_proj.weight", (kd, H), "lin"),
                      (a + "v_proj.weight", (vd, H), "lin")]
            if r["use_beta"]:
                specs.append((a + "b_proj.weight", (nh, H), "lin"))
            if r["use_short_conv"]:
                W = r["conv_size"]
                specs += [(a + "q_conv1d.weight", (kd, 1, W), "conv"), (a + "k_conv1d.weight", (kd, 1, W), "conv"),
                          (a + "v_conv1d.weight", (vd, 1, W), "conv")]
            if r["use_gate"]:
                specs.append((a + "g_proj.weight", (vd, H), "lin"))
            specs += [(a + "o_norm.weight", (dv,), "norm"), (a + "o_proj.weight", (H, vd), "out")]
        else:  # gated_deltanet, swla, titans, dla
            nh = r["num_heads"]
            nv = (r.get("num_v_heads") or nh) if mt == "gated_deltanet" else nh
            dk = r["head_dim"]
            dv = int(dk * r["expand_v"])
            kd, vd = nh * dk, nv * dv
            specs += [(a + "q_proj.weight", (kd, H), "lin"), (a + "k_proj.weight", (kd, H), "lin"),
                      (a + "v_proj.weight", (vd, H), "lin")]
            if mt == "gated_deltanet":
                specs += [(a + "a_proj.weight", (nv, H), "lin"), (a + "b_proj.weight", (nv, H), "lin"),
                          (a + "A_log", (nv,), "A_log"), (a + "dt_bias", (nv,), "dt_bias")]
            elif mt == "swla":
                specs += [(a + "a_proj.weight", (nh, H), "lin"), (a + "b_proj.weight", (nh, H), "lin"),
                          (a + "l_proj.weight", (nh, H), "lin"),
                          (a + "A_log", (nh,), "A_log"), (a + "dt_bias", (nh,), "dt_bias")]
            elif mt == "titans":
                specs += [(a + "a_proj.weight", (nh, H), "retain"), (a + "m_proj.weight", (nh, H), "lin"),
                          (a + "b_proj.weight", (nh, H), "lin")]
            else:  # dla
                specs += [(a + "b_proj.weight", (nh, H), "lin")]
            if r["use_short_conv"]:
                W = r["conv_size"]
                specs += [(a + "q_conv1d.weight", (kd, 1, W), "conv"), (a + "k_conv1d.weight", (kd, 1, W), "conv"),
                          (a + "v_conv1d.weight", (vd, 1, W), "conv")]
            if r["use_gate"]:
                specs.append((a + "g_proj.weight", (vd, H), "lin"))
            specs += [(a + "o_norm.weight", (dv,), "norm"), (a + "o_proj.weight", (H, vd), "out")]
            if mt == "dla" or (mt == "titans" and r["memory_depth"] == 2):
                # deep memory: initial weights per head (fan-in scaled: W2 x ~ N(0, 1/d) for unit-norm x)
                E = r["memory_expansion"] * dk
                specs += [(a + "memory.w1", (nh, dk, E), "lin"), (a + "memory.w2", (nh, E, dk), "lin")]
                if r["memory_layer_norm"]:
                    specs += [(a + "memory.ln.weight", (dk,), "norm"), (a + "memory.ln.bias", (dk,), "bias")]
        specs += [(p + "mlp_norm.weight", (H,), "norm"), (p + "mlp.gate_proj.weight", (I, H), "lin"),
                  (p + "mlp.up_proj.weight", (I, H), "lin"), (p + "mlp.down_proj.weight", (H, I), "out")]
    # tied heads: a random-sign final norm weight breaks the "repeat the input token" attractor
    mcc = r.get("memory_caching")
    if mcc and mcc.get("gate") == "u_proj" and mcc.get("aggregation") != "none":
        # MC gate projection [num_q_heads * K, hidden], K = head_k (generator: GDN-like families only)
        if mt not in ("gated_deltanet", "swla", "titans", "dla"):
            raise NotImplementedError("u_proj fixtures are generated for GDN-like families only")
        layers = mcc.get("layers", "all")
        for i in range(r["num_hidden_layers"]) if layers == "all" else layers:
            specs.append(("model.layers.%d.attn.mc.u_proj.weight" % i, (r["num_heads"] * r["head_dim"], H), "lin"))
    specs.append(("model.norm.weight", (H,), "signed_norm" if r["tie_word_embeddings"] else "norm"))
    if not r["tie_word_embeddings"]:
        specs.append(("lm_head.weight", (V, H), "head"))
    return specs


def init_params(specs, rng, opts):
    out = {}
    for name, shape, kind in specs:
        if kind == "emb" or kind == "head":
            a = rng.normal(0.0, 0.5, shape)
        elif kind == "norm":
            a = 1.0 + 0.1 * rng.normal(0.0, 1.0, shape)
        elif kind == "signed_norm":
            a = rng.normal(0.0, 1.5, shape)
        elif kind in ("lin", "retain"):
            a = rng.normal(0.0, 1.0, shape) / np.sqrt(shape[-1])
            if kind == "retain":  # titans a_proj: keep retention sigmoid(a x) mostly close to 1
                a = a * 0.5
        elif kind == "out":
            a = rng.normal(0.0, 0.8, shape) / np.sqrt(shape[-1])
        elif kind == "conv":
            a = rng.normal(0.0, 0.5, shape)
        elif kind == "bias":
            a = rng.normal(0.0, 0.1, shape)
        elif kind == "gk_bias":
            a = opts.get("gk_bias", 0.0) + rng.normal(0.0, 1.0, shape)
        elif kind == "hedgehog":
            a = np.eye(shape[0]) + rng.normal(0.0, 0.3, shape) / np.sqrt(shape[-1])
        elif kind == "A_log":
            a = np.log(rng.uniform(0.5, 4.0, shape))
        elif kind == "dt_bias":
            a = rng.uniform(-2.0, 0.5, shape)
        elif kind == "orthonormal":   # lattice s0: orthonormal slots per head
            a = orthonormal_rows(rng.normal(0.0, 1.0, shape))
        else:
            raise ValueError(kind)
        out[name] = np.asarray(a, dtype=np.float32).reshape(shape)
    return out


def _add_bias_channel(params, spec):
    """Adds spec["emb"] to channel 0 of model.embeddings.weight and spec[suffix] to channel 0 (input
    column 0) of every `attn.<suffix>` present, in place (after the RNG draws: the stream is unchanged)."""
    params["model.embeddings.weight"][:, 0] += np.float32(spec["emb"])
    for name, a in params.items():
        for suffix, add in spec.items():
            if suffix != "emb" and name.endswith(".attn." + suffix):
                a[:, 0] += np.float32(add)


def _deep_memory_healthy(config, tensors):
    """Deep fixtures: on a 70-token sequence (the prompt + RandomState(123) ids, as test_models) every
    layer's MLP memory stays alive and bounded (0.05 <= max|W1| <= 30) and the float32 reference is
    within 2e-4 of the float64 logits (so an f32 engine can be held to the usual tolerance)."""
    ids = encode_prompt()
    rng = np.random.RandomState(123)
    ids = ids + [int(i) for i in rng.randint(3, config["vocab_size"], size=70 - len(ids))]
    m = CausalLM(config, tensors, dtype=torch.float64)
    state = m.new_state()
    ref = m.step(ids, state)
    if not all(0.05 <= float(s["W1"].abs().max()) <= 30 for s in state):
        return False
    f32 = CausalLM(config, tensors, dtype=torch.float32).forward(ids).double()
    return float((f32 - ref).abs().max()) <= 2e-4


def to_tensors(params, dtype):
    return {n: st.make_tensor(a, dtype) for n, a in params.items()}


# ------------------------------------------------------------------------------- export

def _evaluate(config, tensors, prompt_ids):
    m = CausalLM(config, tensors, dtype=torch.float64, strict=True)
    logits = m.forward(prompt_ids)
    greedy, steps = m.greedy(prompt_ids, N_GREEDY, return_logits=True)
    margins = []
    for lg in steps:
        top2 = torch.topk(lg, 2).values
        margins.append(float(top2[0] - top2[1]))
    return logits, greedy, margins


def _acceptable(logits, greedy, margins):
    if not torch.isfinite(logits).all() or float(logits.abs().max()) > 60:
        return False
    if len(set(greedy)) < MIN_DISTINCT or any(t in (0, 1, 2) for t in greedy):
        return False
    return min(margins) >= MIN_MARGIN


def _evaluate_hope(config, tensors, prompt_ids):
    """_evaluate for `hope` (HopeLM, float64): prompt logits, greedy ids and their top-2 margins."""
    m = HopeLM(config, tensors, dtype=torch.float64)
    state = m.new_state()
    logits = m.step(prompt_ids, state)
    last, greedy, margins = logits[-1], [], []
    for _ in range(N_GREEDY):
        top2 = torch.topk(last, 2).values
        margins.append(float(top2[0] - top2[1]))
        greedy.append(int(torch.argmax(last)))
        last = m.step([greedy[-1]], state, learn=False)[-1]
    return logits, greedy, margins


def _greedy_learning_generated(config, tensors, prompt_ids):
    """Adaptive CMS: greedy ids when the generated tokens, too, trained the CMS (learn=True), which the
    engine must not do; the engine's tests check that its generation differs from this one."""
    m = HopeLM(config, tensors, dtype=torch.float64)
    state = m.new_state()
    last, out = m.step(prompt_ids, state)[-1], []
    for _ in range(N_GREEDY):
        out.append(int(torch.argmax(last)))
        last = m.step([out[-1]], state, learn=True)[-1]
    return out


def _evaluate_stepped(lm_class, config, tensors, prompt_ids):
    """_evaluate for a model class with forward / new_state / step (float64): prompt logits, greedy ids
    and their margins. gam: GamLM (parallel form); armt: ArmtLM (the wrapper's segment-at-a-time
    forward, greedy ids streaming: segments close whenever full)."""
    m = lm_class(config, tensors, dtype=torch.float64)
    logits = m.forward(prompt_ids)
    state = m.new_state()
    last, greedy, margins = m.step(prompt_ids, state)[-1], [], []
    for _ in range(N_GREEDY):
        top2 = torch.topk(last, 2).values
        margins.append(float(top2[0] - top2[1]))
        greedy.append(int(torch.argmax(last)))
        last = m.step([greedy[-1]], state)[-1]
    return logits, greedy, margins


def _evaluate_gam(config, tensors, prompt_ids):
    return _evaluate_stepped(GamLM, config, tensors, prompt_ids)


def _evaluate_armt(config, tensors, prompt_ids):
    return _evaluate_stepped(ArmtLM, config, tensors, prompt_ids)


def _write_armt_state(config, tensors, prompt_ids, d):
    """golden_state.safetensors of an armt fixture: A [closes, L, F, D] and z [closes, L, F] after each of
    the (T - 1) // S segment closes the T-token prompt causes (lazy: a segment closes when the next token
    needs position S), from the wrapper's forward in float64, stored F32."""
    m = ArmtLM(config, tensors, dtype=torch.float64)
    snaps = []
    m.forward(prompt_ids, snapshots=snaps)
    closes = (len(prompt_ids) - 1) // m.S
    A = np.stack([np.stack([a.numpy() for a in snaps[k][0]]) for k in range(closes)]).astype(np.float32)
    z = np.stack([np.stack([v.numpy() for v in snaps[k][1]]) for k in range(closes)]).astype(np.float32)
    st.save_file({"A": st.make_tensor(A, "F32"), "z": st.make_tensor(z, "F32")},
                 os.path.join(d, "golden_state.safetensors"))


def _candidate(config, opts, seed, dtype):
    """(file tensors, logits, greedy ids, margins) of the fixture drawn with `seed`."""
    if opts.get("armt"):
        weights = armt_random_weights(config, seed=seed, dtype=torch.float32)
        tensors = {n: st.make_tensor(t.numpy(), dtype) for n, t in weights.items()}
        return (tensors,) + _evaluate_armt(config, weights, prompt_ids=encode_prompt())
    if opts.get("gam"):
        weights = gam_random_weights(config, seed=seed, dtype=torch.float32)
        tensors = {n: st.make_tensor(t.numpy(), dtype) for n, t in weights.items()}
        return (tensors,) + _evaluate_gam(config, weights, prompt_ids=encode_prompt())
    if opts.get("hope"):
        weights = hope_random_weights(config, seed=seed, dtype=torch.float32)
        tensors = {n: st.make_tensor(t.numpy(), dtype) for n, t in weights.items()}
        return (tensors,) + _evaluate_hope(config, weights, prompt_ids=encode_prompt())
    rng = np.random.RandomState(seed)
    params = init_params(param_specs(config), rng, opts)
    if opts.get("bias_channel"):
        _add_bias_channel(params, opts["bias_channel"])
    tensors = to_tensors(params, dtype)
    if opts.get("legacy_D"):
        nh = config["num_heads"]
        for i in range(config["num_hidden_layers"]):
            tensors["model.layers.%d.attn.D" % i] = st.make_tensor(np.ones(nh, np.float32), dtype)
    return (tensors,) + _evaluate(config, tensors, encode_prompt())


def build_fixture(name, out_root=MODELS):
    config, opts = FIXTURES[name]
    config = dict(config)
    dtype = opts.get("dtype", "F32")
    prompt_ids = encode_prompt()
    base = zlib.crc32(name.encode())
    for attempt in range(200):
        seed = (base + 7919 * attempt) % (2 ** 31)
        tensors, logits, greedy, margins = _candidate(config, opts, seed, dtype)
        if _acceptable(logits, greedy, margins) and (not opts.get("deep") or _deep_memory_healthy(config, tensors)):
            break
    else:
        raise RuntimeError("%s: no acceptable seed found" % name)

    d = os.path.join(out_root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    if opts.get("shards"):
        st.save_sharded(tensors, d, opts["shards"])
    else:
        st.save_file(tensors, os.path.join(d, "model.safetensors"))
    shutil.copyfile(TOKENIZER, os.path.join(d, "tokenizer.model"))
    goldens = {
        "prompt_ids": st.make_tensor(np.array(prompt_ids, np.int32), "I32"),
        "logits": st.make_tensor(logits.numpy().astype(np.float32), "F32"),
        "greedy_ids": st.make_tensor(np.array(greedy, np.int32), "I32"),
    }
    if config.get("cms_adaptive"):
        learning = _greedy_learning_generated(config, tensors, prompt_ids)
        goldens["greedy_ids_learning_generated"] = st.make_tensor(np.array(learning, np.int32), "I32")
    st.save_file(goldens, os.path.join(d, "golden.safetensors"))
    golden = {
        "fixture": name,
        "model_type": config["model_type"],
        "prompt": PROMPT,
        "prompt_ids": prompt_ids,
        "greedy_ids": greedy,
        "n_greedy": N_GREEDY,
        "greedy_rule": "argmax of the last logits, fed back one token at a time; no EOS stop",
        "weights_dtype": dtype,
        "reference_dtype": "float64 (weights as stored, upcast exactly); logits stored as F32",
        "seed": seed,
        "min_greedy_margin": round(min(margins), 6),
    }
    if opts.get("armt"):
        _write_armt_state(config, tensors, prompt_ids, d)
        golden["armt_state"] = "golden_state.safetensors: every layer's (A, z) after each segment close the prompt causes"
    if config.get("cms_adaptive"):
        golden["greedy_ids_learning_generated"] = learning
        golden["cms_adaptive"] = ("prompt logits with every prompt token learned; greedy ids never learn from "
                                  "generated tokens (greedy_ids_learning_generated: as if they did)")
    if config.get("memory_caching") is not None:
        golden["memory_caching"] = "on (config.json memory_caching); logits and greedy ids are computed with MC"
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(golden, f, indent=2)
        f.write("\n")
    return d


def _write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def build_mc_goldens(base, out_root=MC_DATA, variants=None):
    """tests/data/mc/<base>/: variants.json + <variant>.safetensors {logits F32 [T, vocab], greedy_ids I32 [16]}
    for the base fixture's golden prompt, computed from the committed base fixture's weights.
    variants: a subset of the names (default all)."""
    src = os.path.join(MODELS, base)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    tensors = st.load_model_dir(src)
    g, _ = st.load_file(os.path.join(src, "golden.safetensors"))
    prompt_ids = [int(i) for i in g["prompt_ids"].to_numpy()]
    d = os.path.join(out_root, base)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    listing = []
    evaluate = _evaluate_hope if config.get("model_type") == "hope" else _evaluate
    for name, obj in mc_variants_for(base):
        if variants is not None and name not in variants:
            continue
        c = dict(config, memory_caching=obj)
        logits, greedy, margins = evaluate(c, tensors, prompt_ids)
        st.save_file({
            "logits": st.make_tensor(logits.numpy().astype(np.float32), "F32"),
            "greedy_ids": st.make_tensor(np.array(greedy, np.int32), "I32"),
        }, os.path.join(d, name + ".safetensors"))
        listing.append({"name": name, "memory_caching": obj, "greedy_ids": greedy,
                        "min_greedy_margin": round(min(margins), 6)})
    _write_json(os.path.join(d, "variants.json"), listing)
    return d


def export_bench_model(d, dtype="f32", seed=20240601, model_type="gated_deltanet", **extra):
    """~10M-parameter gated_deltanet (hidden 256, 9 layers, 4 heads x 64, expand_v 1, vocab 4096); or
    another head-dim family of that shape (`model_type`, e.g. titans with `memory_depth=2`)."""
    dtype = {"f32": "F32", "F32": "F32", "bf16": "BF16", "BF16": "BF16"}[dtype]
    if model_type == "hope":
        return _export_bench_hope(d, dtype, seed, **extra)
    shape = dict(drop=("intermediate_size",), vocab_size=4096, hidden_size=256, num_hidden_layers=9, num_heads=4,
                 head_dim=64, expand_v=1.0, use_gate=True, use_short_conv=True, conv_size=4,
                 torch_dtype="bfloat16" if dtype == "BF16" else "float32")
    if model_type == "gated_deltanet":
        shape.update(num_v_heads=None, allow_neg_eigval=False, attn_mode="chunk")
    config = cfg(model_type, **shape, **extra)
    rng = np.random.RandomState(seed)
    params = init_params(param_specs(config), rng, {})
    if model_type == "titans":
        # Random gates decay the memory to denormals or make the MLP memory diverge to NaN within a
        # prefill (slow arithmetic, SSC keeping every NaN-scored page: meaningless timings). A bias
        # channel as the deep fixtures', with a smaller step at this width, keeps 4K tokens finite.
        _add_bias_channel(params, BENCH_BIAS_CHANNEL)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    st.save_file(to_tensors(params, dtype), os.path.join(d, "model.safetensors"))
    shutil.copyfile(TOKENIZER, os.path.join(d, "tokenizer.model"))
    n = sum(int(np.prod(a.shape)) for a in params.values())
    return d, n


def _export_bench_hope(d, dtype, seed, **extra):
    """export_bench_model's shape for `hope`: the paper's chunk sizes (16), E = 2d, and one SwiGLU CMS level
    as wide as the gated DeltaNet's MLP (768), so that the two differ in the mixer only."""
    config = dict(HOPE_BASE, vocab_size=4096, hidden_size=256, num_hidden_layers=9, num_heads=4, head_dim=64,
                  chunk_size_other=16, chunk_size_mem=16,
                  cms_levels=[dict(chunk_size=2048, intermediate_size=768, activation="swiglu", lr=0.0)],
                  torch_dtype="bfloat16" if dtype == "BF16" else "float32", **extra)
    weights = hope_random_weights(config, seed=seed, dtype=torch.float32)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    st.save_file({n: st.make_tensor(t.numpy(), dtype) for n, t in weights.items()}, os.path.join(d, "model.safetensors"))
    shutil.copyfile(TOKENIZER, os.path.join(d, "tokenizer.model"))
    return d, sum(int(t.numel()) for t in weights.values())


def export_tiny_model(d, seed=20261122):
    """The bundled default model (models/mcserve-tiny): a random gated_deltanet with the fixture
    tokenizer, hidden 64, 4 layers. Its text is gibberish until a trained model replaces it."""
    config = cfg("gated_deltanet", drop=("intermediate_size",), vocab_size=320, hidden_size=64,
                 num_hidden_layers=4, num_heads=2, head_dim=32, expand_v=1.0, num_v_heads=None,
                 use_gate=True, use_short_conv=True, conv_size=4, allow_neg_eigval=False, hidden_ratio=2)
    rng = np.random.RandomState(seed)
    params = init_params(param_specs(config), rng, {})
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    st.save_file(to_tensors(params, "F32"), os.path.join(d, "model.safetensors"))
    shutil.copyfile(TOKENIZER, os.path.join(d, "tokenizer.model"))
    return d


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help="fixture names (default: all)")
    ap.add_argument("--out", default=MODELS, help="output root (default tests/data/models)")
    ap.add_argument("--train-tokenizer", action="store_true")
    ap.add_argument("--bench-model", metavar="DIR")
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--tiny-model", metavar="DIR", help="write the bundled default model to DIR")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--mc", action="store_true", help="only regenerate the MC goldens (tests/data/mc)")
    ap.add_argument("--mc-out", help="output root of the MC goldens (default tests/data/mc; with a non-default "
                                     "--out, MC goldens are only written when --mc-out is given)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.list:
        print("\n".join(FIXTURES))
        return
    if a.train_tokenizer:
        train_tokenizer()
        print("tokenizer.model", _sha(TOKENIZER))
        return
    if a.tiny_model:
        print(export_tiny_model(a.tiny_model))
        return
    if a.bench_model:
        d, n = export_bench_model(a.bench_model, a.dtype)
        print("%s: %d parameters (%s)" % (d, n, a.dtype))
        return
    if not a.mc:
        names = a.only or list(FIXTURES)
        for n in names:
            d = build_fixture(n, a.out)
            size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
            print("%-26s %7d bytes  seed-search ok" % (n, size))
    mc_out = a.mc_out or (MC_DATA if os.path.abspath(a.out) == os.path.abspath(MODELS) else None)
    if (a.mc or not a.only) and mc_out:
        for b in ALL_MC_BASES:
            d = build_mc_goldens(b, mc_out)
            size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
            print("mc/%-23s %7d bytes  %d variants" % (b, size, len(mc_variants_for(b))))


if __name__ == "__main__":
    main()
