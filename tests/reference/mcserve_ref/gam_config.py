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
IGNORED = {"model_type", "architectures", "torch_dtype", "transformers_version"}


def _err(field, msg, value):
    raise ValueError("gam: %s %s, got %r" % (field, msg, value))


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def resolve_gam_config(cfg):
    """A new, checked dict (defaults for absent/null keys) with receptive_tokens = n_layer (k - 1)."""
    if cfg.get("model_type") != "gam":
        _err("model_type", "must be 'gam'", cfg.get("model_type"))
    unknown = sorted(set(cfg) - set(GAM_DEFAULTS) - IGNORED - set(DERIVED))
    if unknown:
        _err(unknown[0], "is not a gam config field", cfg[unknown[0]])
    r = dict(GAM_DEFAULTS)
    r.update({k: v for k, v in cfg.items() if v is not None and k not in IGNORED and k not in DERIVED})
    r["model_type"] = "gam"
    for k in POS_INTS:
        if not _is_int(r[k]) or r[k] < 1:
            _err(k, "must be an integer >= 1", r[k])
    for k, allowed in CHOICES.items():
        if r[k] not in allowed:
            _err(k, "must be one of %s (the reference implements these)" % (allowed,), r[k])
    for k, only in BOOLS.items():
        if not isinstance(r[k], bool):
            _err(k, "must be a bool", r[k])
        if only is not None and r[k] != only:
            _err(k, "is only supported as %s" % str(only).lower(), r[k])
    e = r["layer_norm_eps"]
    if isinstance(e, bool) or not isinstance(e, (int, float)) or e <= 0:
        _err("layer_norm_eps", "must be a number > 0", e)
    r["layer_norm_eps"] = float(e)
    d = r["dropout"]
    if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0.0 <= d < 1.0:
        _err("dropout", "must be a number in [0, 1) (training only, ignored)", d)
    # tokens t-R..t-1 determine the state at t (B.4): every conv window is "full" from t >= R
    r["receptive_tokens"] = r["n_layer"] * (r["conv_kernel_size"] - 1)
    p = r["overflow_position"]
    if p is None:
        p = r["block_size"] - 1
    if not _is_int(p) or not r["receptive_tokens"] <= p <= r["block_size"] - 1:
        _err("overflow_position", "must be an integer in [n_layer*(conv_kernel_size-1), block_size-1] = [%d, %d]"
             % (r["receptive_tokens"], r["block_size"] - 1), p)
    r["overflow_position"] = p
    for k in DERIVED:       # resolving a resolved config is the identity
        if cfg.get(k) is not None and cfg[k] != r[k]:
            _err(k, "is derived (%r here)" % r[k], cfg[k])
    return r
