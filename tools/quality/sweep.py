"""What ppl_sweep.py and passkey_sweep.py share: the loop over variants and lengths, the results
file, and the markdown table of one value per (variant, length)."""

import json
import os
import sys

import eval_runner
import variants as V


def run(args, measure, describe):
    """measure(args, variant, length) → record for every variant (args.segment, args.only; or the
    models of args.compare) and every length in args.lengths; logs `describe(record)` per cell."""
    records = []
    chosen = V.model_variants(args.compare, args.only) if args.compare else V.variants(args.segment, args.only)
    for variant in chosen:
        for length in args.lengths:
            rec = measure(args, variant, length)
            print("%-28s %6d  %s  (%.1fs)" % (variant.label, length, describe(rec), rec["seconds"]),
                  file=sys.stderr, flush=True)
            records.append(rec)
    return records


def write_report(path, script, argv, args, settings, records):
    """Writes the results JSON: the command, model, segment and threads, `settings`, the records."""
    report = {"command": "/usr/bin/python3 tools/quality/%s %s" % (script, " ".join(argv or sys.argv[1:])),
              "model": eval_runner.repo_relative(args.model), "model_name": os.path.basename(args.model.rstrip("/")),
              **settings, "segment": args.segment, "threads": args.threads, "results": records}
    if args.compare:   # each model with its own config: no shared model or segment
        report.update(model=[eval_runner.repo_relative(v.model) for v in V.model_variants(args.compare)],
                      model_name=" vs ".join(v.name for v in V.model_variants(args.compare)), segment="own config")
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


def add_compare_flag(ap):
    """The --compare flag both sweeps take."""
    ap.add_argument("--compare", nargs="+", metavar="LABEL=DIR",
                    help="instead of the MC variants of --model: these models, each with its own config.json")


def model_of(args, variant):
    """The model directory a variant runs (its own with --compare, else --model)."""
    return variant.model or args.model


def markdown_table(records, value, fmt):
    """Rows: variants in first-seen order; columns: lengths ascending; cells: record[value]."""
    lengths = sorted({r["length"] for r in records})
    labels = list(dict.fromkeys(r["label"] for r in records))
    cell = {(r["label"], r["length"]): r[value] for r in records}
    lines = ["| variant | " + " | ".join(str(n) for n in lengths) + " |",
             "|---|" + "---:|" * len(lengths)]
    for label in labels:
        lines.append("| %s | " % label + " | ".join(fmt % cell[(label, n)] if (label, n) in cell else "–"
                                                    for n in lengths) + " |")
    return "\n".join(lines)


def by_depth(records):
    """Passkey records → {(label, depth, length): (correct, trials)} from their per-trial answers."""
    cells = {}
    for r in records:
        for a in r["answers"]:
            c, n = cells.get((r["label"], a["asked_depth"], r["length"]), (0, 0))
            cells[(r["label"], a["asked_depth"], r["length"])] = (c + int(a["correct"]), n + 1)
    return cells


def depth_table(records):
    """Markdown: a row per (variant, depth), a column per length, cells `correct/trials`."""
    cells = by_depth(records)
    lengths = sorted({k[2] for k in cells})
    rows = list(dict.fromkeys(k[:2] for k in cells))
    lines = ["| variant | depth | " + " | ".join(str(n) for n in lengths) + " |",
             "|---|---:|" + "---:|" * len(lengths)]
    for label, depth in rows:
        lines.append("| %s | %g | " % (label, depth) + " | ".join(
            "%d/%d" % cells[(label, depth, n)] if (label, depth, n) in cells else "–" for n in lengths) + " |")
    return "\n".join(lines)
