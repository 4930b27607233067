#!/usr/bin/python3
"""Merges results files of one sweep run in parts (e.g. one process per model with --compare and
--only, two at once on a 2-core machine) into one file: the first file's settings, every file's
records in the order given, and each part's command. Prints the tables of the merged records.

    /usr/bin/python3 tools/quality/merge_reports.py OUT.json PART1.json PART2.json ...
"""

import json
import sys

import sweep


def merge(parts):
    """One report from loaded reports: settings of the first, the records of all, the commands."""
    out = dict(parts[0])
    out["results"] = [r for p in parts for r in p["results"]]
    out["command"] = [p["command"] for p in parts]
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        sys.exit("usage: merge_reports.py OUT_JSON PART_JSON...")
    parts = []
    for path in argv[1:]:
        with open(path) as f:
            parts.append(json.load(f))
    report = merge(parts)
    with open(argv[0], "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    key = "perplexity" if "perplexity" in report["results"][0] else "accuracy"
    print(sweep.markdown_table(report["results"], key, "%.2f"))
    if key == "accuracy":
        print(sweep.depth_table(report["results"]))


if __name__ == "__main__":
    main()
