"""Config of the `armt` family (docs/model-format.md (armt)): an HF GPT-2 config plus ARMT's fields.

`resolve_armt_config(cfg)` returns a new dict with every field filled and checked.  The GPT-2 fields
keep Hugging Face's `GPT2Config` names and defaults (an HF `gpt2` config.json plus the ARMT fields
resolves); the ARMT fields keep the names of the official training script's arguments
(`num_mem_tokens`, `d_mem`, `segment_size`, `segment_alignment`, `wrap_pos`) and of the memory
wrapper (`correction`).  An absent or `null` key takes the default, which for every ambiguity is the
recommended resolution (A.10 items of our notes, cited per field below).  An unknown key, or a value
the reference does not implement, raises ValueError naming the field.
"""

from .config_schema import check_fields, fail, is_int, positive_number, with_defaults

ARMT_DEFAULTS = dict(
    # GPT-2 backbone (HF GPT2Config names and defaults)
    vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
    n_inner=None,                         # null -> 4 * n_embd
    activation_function="gelu_new",       # tanh GELU
    layer_norm_epsilon=1e-5,
    tie_word_embeddings=True,             # GPT-2's LM head is the token embedding
    scale_attn_weights=True,              # scores / sqrt(head_dim)
    scale_attn_by_inverse_layer_idx=False,
    reorder_and_upcast_attn=False,        # numerics only; the reference computes in its own dtype
    # ARMT
    num_mem_tokens=None,                  # M, required (BABILong: 10)
    d_mem=None,                           # P, required (BABILong: 64); feature dim F = 6P (DPFP-3)
    segment_size=None,                    # S, required (BABILong: 512)
    segment_alignment="left",             # A.3.2: null == left in the code
    wrap_pos=None,                        # A.10.3: null = tell by the wpe row count; false | true
    correction=True,                      # A.3.4: gamma-correction (false: gamma = 1)
    memory_insertion="parallel",          # A.10.5: all M memory tokens of a segment written at once
    generate_policy="streaming",          # A.10.10 / A.5: streaming | reference_generate (greedy only)
    # later-code variants (A.10.9), only the paper-era value
    use_denom=True, gating=False, use_sink=False, sliding_window=False,
)

CHOICES = dict(activation_function=("gelu_new",), segment_alignment=("left",),
               memory_insertion=("parallel",), generate_policy=("streaming", "reference_generate"))
# bool fields and the only value the reference implements (None = both)
BOOLS = dict(tie_word_embeddings=True, scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
             reorder_and_upcast_attn=None, correction=None, use_denom=True, gating=False, use_sink=False,
             sliding_window=False)
POS_INTS = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "num_mem_tokens",
            "d_mem", "segment_size")
# HF GPT-2 config keys that do not change inference
# derived sizes a resolved config carries (accepted as input only with the derived value)
DERIVED = ("head_dim", "feat_dim")
IGNORED = {"model_type", "architectures", "torch_dtype", "transformers_version", "_name_or_path", "n_ctx",
           "resid_pdrop", "embd_pdrop", "attn_pdrop", "initializer_range", "use_cache", "bos_token_id",
           "eos_token_id", "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
           "summary_first_dropout", "task_specific_params"}

EPS = 1e-5       # the memory's eps: read/recall denominators and the gamma denominator (A.10.6)
NU = 3           # DPFP order (A.3.1)


def _err(field, msg, value):
    fail("armt", field, msg, value)


def resolve_armt_config(cfg):
    """A new, checked dict (defaults for absent/null keys) with derived sizes head_dim, inner, feat_dim."""
    r = with_defaults("armt", cfg, ARMT_DEFAULTS, DERIVED, IGNORED)
    if r["n_inner"] is None and is_int(r["n_embd"]):
        r["n_inner"] = 4 * r["n_embd"]
    check_fields("armt", r, POS_INTS, CHOICES, BOOLS)
    if r["wrap_pos"] is not None and not isinstance(r["wrap_pos"], bool):
        _err("wrap_pos", "must be a bool or null (null: decided by the wpe row count)", r["wrap_pos"])
    r["layer_norm_epsilon"] = positive_number("armt", r, "layer_norm_epsilon")
    if r["n_embd"] % r["n_head"]:
        _err("n_head", "must divide n_embd (%d)" % r["n_embd"], r["n_head"])
    # content positions 0..S-1, memory positions S_s..S_s+M-1 (wrap_pos false) must fit the table
    need = r["segment_size"] + (0 if r["wrap_pos"] else r["num_mem_tokens"])
    if need > r["n_positions"]:
        _err("segment_size", "+ num_mem_tokens must be <= n_positions (%d) (positions restart every segment)"
             % r["n_positions"], r["segment_size"])
    r["head_dim"] = r["n_embd"] // r["n_head"]
    r["feat_dim"] = 2 * NU * r["d_mem"]
    for k in DERIVED:       # resolving a resolved config is the identity
        if cfg.get(k) is not None and cfg[k] != r[k]:
            _err(k, "is derived (%r here)" % r[k], cfg[k])
    return r
