"""Helpers shared by the tests of the families with their own model class (test_hope.py, test_hope_mc.py,
test_armt.py, test_gam.py): a cache of random float64 models per variant, and a relative closeness check.
"""


class RandomModels:
    """model(name, **over) -> lm(cfg, random_weights(cfg, seed=3, dtype), dtype) for cfg = base + variants[name]
    + over, built once per (name, overrides)."""

    def __init__(self, lm, random_weights, base, variants, dtype):
        self.lm, self.random_weights, self.base, self.variants, self.dtype = lm, random_weights, base, variants, dtype
        self.cache = {}

    def __call__(self, name="default", **over):
        key = (name, tuple(sorted(over.items())))
        if key not in self.cache:
            cfg = dict(self.base, **self.variants[name], **over)
            self.cache[key] = self.lm(cfg, self.random_weights(cfg, seed=3, dtype=self.dtype), dtype=self.dtype)
        return self.cache[key]


def close(a, b, tol):
    """max |a - b| <= tol (1 + max |b|), same shapes."""
    assert a.shape == b.shape
    err = (a - b).abs().max().item()
    assert err <= tol * (1.0 + b.abs().max().item()), err
