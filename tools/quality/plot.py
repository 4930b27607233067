#!/usr/bin/python3
"""Plots ppl_sweep.py / passkey_sweep.py results as PNG: one line per variant against length, one
panel per init mode (the base model drawn in both).

    /usr/bin/python3 tools/quality/plot.py docs/quality/perplexity.json docs/quality/perplexity.png
    /usr/bin/python3 tools/quality/plot.py docs/quality/passkey.json docs/quality/passkey.png
    /usr/bin/python3 tools/quality/plot.py --by-depth PASSKEY.json OUT.png   # a panel per needle depth
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

import sweep  # noqa: E402
import variants as V  # noqa: E402

METRICS = {"perplexity": ("perplexity", "held-out perplexity", True, "evaluation length (tokens)"),
           "accuracy": ("accuracy", "passkey accuracy", False, "prompt length: haystack + needle + question (tokens)")}


def metric_of(report):
    """(record key, y label, log y, x label) of a results file: perplexity or passkey accuracy."""
    first = report["results"][0]
    return METRICS["perplexity" if "perplexity" in first else "accuracy"]


def series(records, key, name, init_mode):
    """(lengths, values of `key`) of one variant, by length."""
    pts = sorted((r["length"], r[key]) for r in records if r["variant"] == name and r["init_mode"] == init_mode)
    return [p[0] for p in pts], [p[1] for p in pts]


def plot(report, out_png, title=None):
    """Writes the figure for `report` (a loaded results JSON) to out_png."""
    key, ylabel, log_y, xlabel = metric_of(report)
    records = report["results"]
    modes = [m for m in V.INIT_MODES if any(r["init_mode"] == m for r in records)] or [None]
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4.5), sharey=True, squeeze=False)
    names = list(dict.fromkeys(r["variant"] for r in records if r["variant"] != "base"))
    for ax, mode in zip(axes[0], modes):
        x, y = series(records, key, "base", None)
        if x:
            ax.plot(x, y, "k-o", linewidth=2.5, label="base (no MC)")
        for name in names:
            x, y = series(records, key, name, mode)
            if x:
                ax.plot(x, y, "-o", label=name)
        ax.set_xscale("log", base=2)
        lengths = sorted({r["length"] for r in records})
        ax.set_xticks(lengths, [str(n) if n < 1024 else "%dK" % (n // 1024) for n in lengths])
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        if log_y:
            ax.set_yscale("log")
            plain = ticker.FuncFormatter(lambda v, _: "%g" % v)
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
        ax.set_xlabel(xlabel)
        ax.set_title("init mode: %s" % mode if mode else "")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel(ylabel)
    fig.suptitle(title or "%s, segment %s, %s" % (report.get("model_name", "model"), report.get("segment", "?"),
                                                   ylabel))
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)


def _length_axis(ax, lengths, xlabel):
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) if n < 1024 else "%dK" % (n // 1024) for n in lengths])
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_xlabel(xlabel)
    ax.grid(True, which="both", alpha=0.3)


def plot_depths(report, out_png, title=None):
    """Passkey results: one panel per needle depth, one line per variant (accuracy against length)."""
    cells = sweep.by_depth(report["results"])
    depths = sorted({k[1] for k in cells})
    labels = list(dict.fromkeys(k[0] for k in cells))
    lengths = sorted({k[2] for k in cells})
    fig, axes = plt.subplots(1, len(depths), figsize=(4 * len(depths), 4), sharey=True, squeeze=False)
    for ax, depth in zip(axes[0], depths):
        for label in labels:
            pts = [(n, cells[(label, depth, n)]) for n in lengths if (label, depth, n) in cells]
            style = "k-o" if label == "base" else "-o"
            ax.plot([p[0] for p in pts], [c / t for _, (c, t) in pts], style, label=label)
        _length_axis(ax, lengths, "prompt length (tokens)")
        ax.set_title("needle depth %g" % depth)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("passkey accuracy")
    fig.suptitle(title or "%s: passkey accuracy by needle depth" % report.get("model_name", "model"))
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    by_depth = argv[:1] == ["--by-depth"]
    argv = argv[1:] if by_depth else argv
    if len(argv) != 2:
        sys.exit("usage: plot.py [--by-depth] RESULTS_JSON OUT_PNG")
    with open(argv[0]) as f:
        (plot_depths if by_depth else plot)(json.load(f), argv[1])


if __name__ == "__main__":
    main()
