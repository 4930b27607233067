"""Checks shared by the strict config resolvers of the families with their own schema (hope_config.py,
armt_config.py, gam_config.py): every error is a ValueError naming the family and the field.

    r = with_defaults("gam", cfg, GAM_DEFAULTS, DERIVED)         # defaults, unknown keys refused
    fail("gam", "n_layer", "must be an integer >= 1", 0)        # raises
    check_fields("gam", resolved, POS_INTS, CHOICES, BOOLS)      # the three common rules
"""


IGNORED = frozenset({"model_type", "architectures", "torch_dtype", "transformers_version"})


def with_defaults(family, cfg, defaults, derived=(), ignored=IGNORED):
    """A new dict: `defaults` overridden by cfg's non-null values. cfg must say model_type = family and
    hold only keys of `defaults`, `ignored` ones (dropped) or `derived` ones (dropped: recomputed)."""
    if cfg.get("model_type") != family:
        fail(family, "model_type", "must be '%s'" % family, cfg.get("model_type"))
    unknown = sorted(set(cfg) - set(defaults) - set(ignored) - set(derived))
    if unknown:
        fail(family, unknown[0], "is not a%s %s config field" % ("n" if family[0] in "aeiou" else "", family),
             cfg[unknown[0]])
    r = dict(defaults)
    r.update({k: v for k, v in cfg.items() if v is not None and k not in ignored and k not in derived})
    r["model_type"] = family
    return r


def fail(family, field, msg, value):
    raise ValueError("%s: %s %s, got %r" % (family, field, msg, value))


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_fields(family, r, pos_ints, choices, bools):
    """r[k] is an int >= 1 for k in pos_ints; one of choices[k]; a bool for k in bools (equal to bools[k]
    unless that is None, when both values are implemented)."""
    for k in pos_ints:
        if not is_int(r[k]) or r[k] < 1:
            fail(family, k, "must be an integer >= 1", r[k])
    for k, allowed in choices.items():
        if r[k] not in allowed:
            fail(family, k, "must be one of %s (the reference implements these)" % (allowed,), r[k])
    for k, only in bools.items():
        if not isinstance(r[k], bool):
            fail(family, k, "must be a bool", r[k])
        if only is not None and r[k] != only:
            fail(family, k, "is only supported as %s" % str(only).lower(), r[k])


def positive_number(family, r, key):
    """r[key] as a float > 0 (bools refused)."""
    v = r[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        fail(family, key, "must be a number > 0", v)
    return float(v)
