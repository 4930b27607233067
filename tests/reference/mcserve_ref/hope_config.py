"""Config of the `hope` family (docs/model-format.md (hope); specs/hope.md §10 A1–A25).

`resolve_hope_config(cfg)` returns a new dict with every field filled (an absent or `null` key takes
the default, which is the spec's recommended resolution) and checked.  An unknown value, or one the
reference does not implement, raises ValueError naming the field.

`memory_caching` is resolved by mc.resolve_mc_config exactly as for the other families (None = off);
its errors name the field (`memory_caching.<key>`).
"""

from .config_schema import check_fields, fail, is_int, positive_number, with_defaults

from . import mc

HOPE_DEFAULTS = dict(
    # sizes
    hidden_size=None, num_hidden_layers=None, num_heads=None, head_dim=None, vocab_size=None,
    norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
    conv_size=4,                          # K_conv (§3.7)
    memory_expansion=2,                   # r: d_hid = r * head_dim (A1)
    chunk_size_other=16,                  # C_o: anchor period of M_k, M_v, M_eta, M_alpha (, M_q)  (§3.6)
    chunk_size_mem=16,                    # C_mem: anchor period of M_mem (§3.6)
    # ambiguities (A1..A25)
    memory_input="slice",                 # A1  slice | proj
    scalar_memory_skip="none",            # A2  none | linear
    eta_activation="sigmoid",             # A2  sigmoid (eta_max*sigmoid) | softplus (eta_scale*softplus)
    eta_max=1.0, eta_scale=1.0,           # A2
    alpha_activation="sigmoid",           # A2  sigmoid
    eta_clamp=True,                       # A2  eta <= 1 + alpha
    adaptive_q=False,                     # A3
    w1_rule="retention",                  # A4  retention | dgd_hidden
    read_index="before_write",            # A5  before_write (t-1) | after_write (t)
    chunk_anchor="previous_chunk_end",    # A6  previous_chunk_end
    readout_mode="R",                     # A7  R (running) | A (anchor)
    momentum="none",                      # A8  none | constant | data
    momentum_beta=0.9,                    # A8  beta for momentum "constant"
    grad_scale=2.0,                       # A9  factor of the L2 gradient (2 = literal d||.||^2)
    conv_placement="producers",           # A10 producers
    output_gate="rmsnorm_silu_gate",      # A11 rmsnorm_silu_gate | rmsnorm
    cms_norm="prenorm_residual",          # A12 prenorm_residual
    cms_adaptive=False,                   # A13 false: static CMS; true: test-time training on prompt tokens
    cms_teach_signal="per_layer_backward",  # A13 per_layer_backward
    cms_update_on_generated=False,        # A13 false
    cms_levels=None,                      # A14/A15 ordered list of levels (see _check_levels)
    cms_update_terms="chunk",             # A16 chunk: C terms, positions i-C+1..i
    flush_partial_chunks=False,           # A17 false
    multi_turn_positions="continue",      # A18 continue
    cms_state_scope="request",            # A19 request
    gate_granularity="token",             # A20 token
    memory_activation="silu",             # A21 silu | gelu  (sigma of every memory MLP)
    fast_weight_dtype="float32",          # A22 float32 (the reference computes in its own dtype)
    shared_values=False,                  # A23 false
    mixer="self_modifying_titans",        # A24 self_modifying_titans
    final_norm=True,                      # A25 true (tie_word_embeddings is the other half of A25)
    memory_caching=None,                  # Memory Caching of M_mem (mc_hope.py; reference only), as mc.py parses it
)

CHOICES = dict(
    memory_input=("slice", "proj"), scalar_memory_skip=("none", "linear"),
    eta_activation=("sigmoid", "softplus"), alpha_activation=("sigmoid",),
    w1_rule=("retention", "dgd_hidden"), read_index=("before_write", "after_write"),
    chunk_anchor=("previous_chunk_end",), readout_mode=("R", "A"), momentum=("none", "constant", "data"),
    conv_placement=("producers",), output_gate=("rmsnorm_silu_gate", "rmsnorm"),
    cms_norm=("prenorm_residual",), cms_teach_signal=("per_layer_backward",),
    cms_update_terms=("chunk",), multi_turn_positions=("continue",), cms_state_scope=("request",),
    gate_granularity=("token",), memory_activation=("silu", "gelu"), fast_weight_dtype=("float32",),
    mixer=("self_modifying_titans",),
)
# bool fields and the only value the reference implements (None = both)
BOOLS = dict(tie_word_embeddings=None, eta_clamp=None, adaptive_q=None, cms_adaptive=None,
             cms_update_on_generated=False, flush_partial_chunks=False, shared_values=False, final_norm=True)
POS_INTS = ("hidden_size", "num_hidden_layers", "num_heads", "head_dim", "vocab_size", "conv_size",
            "memory_expansion", "chunk_size_other", "chunk_size_mem")
LEVEL_KEYS = ("chunk_size", "intermediate_size", "activation", "lr")
LEVEL_ACTS = ("swiglu", "gelu")


def _err(field, msg, value):
    fail("hope", field, msg, value)


def _check_levels(levels):
    """cms_levels: a non-empty list, applied in order (level 0 first, A15), of dicts
    {chunk_size C (int >= 1), intermediate_size d_ff (int >= 1), activation swiglu|gelu (A21),
     lr eta^(l) (number >= 0, A14; 0 = frozen)}.  Returns the normalised list."""
    if not isinstance(levels, list) or not levels:
        _err("cms_levels", "must be a non-empty list of levels", levels)
    out = []
    for j, lv in enumerate(levels):
        f = "cms_levels[%d]" % j
        if not isinstance(lv, dict):
            _err(f, "must be an object", lv)
        unknown = set(lv) - set(LEVEL_KEYS)
        if unknown:
            _err(f, "has unknown keys %s" % sorted(unknown), lv)
        lv = dict(dict(activation="swiglu", lr=0.0), **{k: v for k, v in lv.items() if v is not None})
        for k in ("chunk_size", "intermediate_size"):
            if not is_int(lv.get(k)) or lv[k] < 1:
                _err(f + "." + k, "must be an integer >= 1", lv.get(k))
        if lv["activation"] not in LEVEL_ACTS:
            _err(f + ".activation", "must be one of %s" % (LEVEL_ACTS,), lv["activation"])
        if isinstance(lv["lr"], bool) or not isinstance(lv["lr"], (int, float)) or lv["lr"] < 0:
            _err(f + ".lr", "must be a number >= 0", lv["lr"])
        lv["lr"] = float(lv["lr"])
        out.append(lv)
    return out


def resolve_hope_config(cfg):
    """A new, checked dict: defaults of HOPE_DEFAULTS for absent/null keys; unknown keys rejected."""
    r = with_defaults("hope", cfg, HOPE_DEFAULTS)
    check_fields("hope", r, POS_INTS, CHOICES, BOOLS)
    for k in ("norm_eps", "eta_max", "eta_scale", "grad_scale"):
        r[k] = positive_number("hope", r, k)
    b = r["momentum_beta"]
    if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0.0 <= b < 1.0:
        _err("momentum_beta", "must be a number in [0, 1)", b)
    r["momentum_beta"] = float(b)
    if r["memory_input"] == "slice" and r["hidden_size"] != r["num_heads"] * r["head_dim"]:
        _err("memory_input", "'slice' needs hidden_size == num_heads * head_dim (%d * %d); use 'proj'"
             % (r["num_heads"], r["head_dim"]), r["memory_input"])
    r["cms_levels"] = _check_levels(r["cms_levels"])
    r["memory_caching"] = mc.resolve_mc_config(r["memory_caching"], r["num_hidden_layers"])
    if r["memory_caching"] is not None and r["cms_adaptive"]:
        _err("memory_caching", "is not defined with cms_adaptive true (the reference leaves it out)",
             cfg.get("memory_caching"))
    r["d_hid"] = r["memory_expansion"] * r["head_dim"]
    return r
