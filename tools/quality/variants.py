"""The post-training Memory Caching variants docs/quality.md measures (spec mc.md B.5.6), as
mcserve-eval flags: the base model, then each aggregation in each init mode, with constant
segments of the training length."""

TRAINING_CONTEXT = 256  # models/kjv-gdn's training window: the segment size (issue 7)

# (name, flags): the mean variant with both combinations, residual, GRM and SSC gated by q.
AGGREGATIONS = (
    ("mean-add", ["--mc-aggregation", "mean", "--mc-mean-combine", "add"]),
    ("mean-average", ["--mc-aggregation", "mean", "--mc-mean-combine", "average"]),
    ("residual", ["--mc-aggregation", "residual"]),
    ("grm", ["--mc-aggregation", "grm", "--mc-gate", "q"]),
    ("ssc-k2", ["--mc-aggregation", "ssc", "--mc-gate", "q", "--mc-top-k", "2"]),
)
INIT_MODES = ("independent", "checkpoint")


class Variant:
    """One measured configuration: a name, its init mode (None for the base model), its flags and,
    with --compare, its own model directory (None: the sweep's --model)."""

    def __init__(self, name, init_mode, flags, model=None):
        self.name, self.init_mode, self.flags, self.model = name, init_mode, flags, model

    @property
    def label(self):
        return self.name if self.init_mode is None else "%s (%s)" % (self.name, self.init_mode)


def variants(segment=TRAINING_CONTEXT, only=None):
    """The base model, then every aggregation in each init mode (names in `only`, if given)."""
    out = [Variant("base", None, [])]
    for mode in INIT_MODES:
        for name, flags in AGGREGATIONS:
            out.append(Variant(name, mode, flags + ["--mc-segmentation", "constant", "--mc-segment-size",
                                                    str(segment), "--mc-init-mode", mode]))
    return [v for v in out if only is None or v.name in only]


def model_variants(specs, only=None):
    """--compare LABEL=DIR ...: one variant per model, served with its own config.json (its own
    memory_caching, no MC flags); names in `only`, if given. A label `base` is drawn as the base."""
    out = []
    for spec in specs:
        label, sep, model = spec.partition("=")
        if not sep or not label or not model:
            raise ValueError("--compare wants LABEL=DIR, got %r" % spec)
        out.append(Variant(label, None, [], model))
    return [v for v in out if only is None or v.name in only]
