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
    """One measured configuration: a name, its init mode (None for the base model) and its flags."""

    def __init__(self, name, init_mode, flags):
        self.name, self.init_mode, self.flags = name, init_mode, flags

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
