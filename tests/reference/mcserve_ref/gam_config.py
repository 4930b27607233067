"""Config of the `gam` family (docs/model-format.md (gam); "Gated Associative Memory: A Parallel O(N)
Architecture for Efficient Sequence Modeling", Acharya).

`resolve_gam_config(cfg)` returns a new dict with every field filled and checked.  The size fields are
the official `ModelConfig` dataclass fields, lower-cased (VOCAB_SIZE -> vocab_size, BLOCK_SIZE ->
block_size, N_EMBED -> n_embed, N_LAYER -> n_layer, DROPOUT -> dropout, NUM_MEMORY_SLOTS ->
num_memory_slots, CONV_KERNEL_SIZE -> conv_kernel_size) with its defaults (= the paper's model).  The
other fields are mcserve's, for choices the code fixes or the paper leaves open (B.9 items of our
notes); their defaults are the recommended resolutions.  An unknown key, or a value the reference
does not implement, raises ValueError naming the field.
"""

from .config_schema import check_fields, fail, is_int, positive_number, with_defaults

GAM_DEFAULTS = dict(
    vocab_size=10000, block_size=256, n_embed=512, n_layer=6, dropout=0.1,
    num_memory_slots=512, conv_kernel_size=3,
    layer_norm_eps=1e-5,                  # nn.LayerNorm's default (ln1, ln2, ln_f)
    tie_word_embeddings=True,             # head.weight is token_embedding.weight
    fusion="gated",                       # B.3: sigmoid-gated local + global; the ablations are not public code
    position_overflow="error",            # B.9.1: error | clamp (untrained streaming extension)
    overflow_position=None,               # B.9.1: position of every t >= block_size under clamp (null: block_size-1)
)

CHOICES = dict(fusion=("gated",), position_overflow=("error", "clamp"))
BOOLS = dict(tie_word_embeddings=True)
POS_INTS = ("vocab_size", "block_size", "n_embed", "n_layer", "num_memory_slots", "conv_kernel_size")
# derived sizes a resolved config carries (accepted as input only with the derived value)
DERIVED = ("receptive_tokens",)


def _err(field, msg, value):
    fail("gam", field, msg, value)


def resolve_gam_config(cfg):
    """A new, checked dict (defaults for absent/null keys) with receptive_tokens = n_layer (k - 1)."""
    r = with_defaults("gam", cfg, GAM_DEFAULTS, DERIVED)
    check_fields("gam", r, POS_INTS, CHOICES, BOOLS)
    r["layer_norm_eps"] = positive_number("gam", r, "layer_norm_eps")
    d = r["dropout"]
    if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0.0 <= d < 1.0:
        _err("dropout", "must be a number in [0, 1) (training only, ignored)", d)
    # tokens t-R..t-1 determine the state at t (B.4): every conv window is "full" from t >= R
    r["receptive_tokens"] = r["n_layer"] * (r["conv_kernel_size"] - 1)
    p = r["overflow_position"]
    if p is None:
        p = r["block_size"] - 1
    if not is_int(p) or not r["receptive_tokens"] <= p <= r["block_size"] - 1:
        _err("overflow_position", "must be an integer in [n_layer*(conv_kernel_size-1), block_size-1] = [%d, %d]"
             % (r["receptive_tokens"], r["block_size"] - 1), p)
    r["overflow_position"] = p
    for k in DERIVED:       # resolving a resolved config is the identity
        if cfg.get(k) is not None and cfg[k] != r[k]:
            _err(k, "is derived (%r here)" % r[k], cfg[k])
    return r
