"""What ppl_sweep.py and passkey_sweep.py share: the loop over variants and lengths, the results
file, and the markdown table of one value per (variant, length)."""

import json
import os
import sys

import eval_runner
import variants as V


def run(args, measure, describe):
    """measure(args, variant, length) → record for every variant (args.segment, args.only) and
    every length in args.lengths; logs `describe(record)` per cell to stderr."""
    records = []
    for variant in V.variants(args.segment, args.only):
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
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


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
