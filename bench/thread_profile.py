#!/usr/bin/python3
"""Where each thread of a command spends its time: `perf record -e cpu-clock` on the command, then its
samples summed by thread and symbol, one table per thread (the busiest first). The per-thread tables
of bench/README.md ("Where a BF16 batch-1 token goes") are read this way. Needs `perf` (Debian's
linux-perf); cpu-clock samples need no hardware counters, so it works in VMs that have none.

    /usr/bin/python3 bench/thread_profile.py [--freq 1999] [--top 25] [--min-share 5] \\
        [--group 'GEMV=FourParts|Range<' --group 'waiting=AwaitWork|ParallelFor|Claim'] [--json F] \\
        -- build/bench/decode_bench --model DIR --batch 1 --steps 8000 --threads 2

--group NAME=REGEX (repeatable) also sums, per thread, the samples whose symbol matches REGEX (first
matching group wins), with the rest under "other".
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SAMPLE_LINE = re.compile(r"^\s*(\d+)\s+([0-9a-fA-F]+)\s*(.*)$")  # `perf script -F tid,ip,sym`: tid ip [sym]


def parse_samples(text):
    """{tid: Counter(symbol -> samples)} from `perf script -F tid,ip,sym` output (no call graphs)."""
    threads = collections.defaultdict(collections.Counter)
    for line in text.splitlines():
        m = SAMPLE_LINE.match(line)
        if m is None:
            continue
        symbol = m.group(3).strip() or "[unknown]"
        threads[int(m.group(1))][symbol] += 1
    return threads


def parse_groups(specs):
    """[(name, compiled regex)] from NAME=REGEX strings, in order."""
    groups = []
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        if not sep or not name:
            raise ValueError(f"--group wants NAME=REGEX, got {spec!r}")
        groups.append((name, re.compile(pattern)))
    return groups


def group_shares(counter, groups):
    """{group name: samples} for one thread: each symbol counted in the first group it matches, else
    in "other"."""
    sums = collections.Counter({name: 0 for name, _ in groups})
    for symbol, n in counter.items():
        name = next((g for g, rx in groups if rx.search(symbol)), "other")
        sums[name] += n
    return sums


def summarize(threads, top, min_share, groups):
    """Per thread with at least min_share % of all samples, busiest first: its samples, its top symbols
    and its group sums, each with its share of that thread's samples (%)."""
    total = sum(sum(c.values()) for c in threads.values())
    out = []
    for tid, counter in sorted(threads.items(), key=lambda kv: -sum(kv[1].values())):
        n = sum(counter.values())
        if total == 0 or 100.0 * n / total < min_share:
            continue
        share = lambda k: round(100.0 * k / n, 2)
        out.append({"tid": tid, "samples": n, "share_of_all": round(100.0 * n / total, 2),
                    "symbols": [{"symbol": s, "share": share(k)} for s, k in counter.most_common(top)],
                    "groups": {g: share(k) for g, k in group_shares(counter, groups).items()} if groups else {}})
    return out


def print_summary(summary):
    for t in summary:
        print(f"\n## thread {t['tid']}: {t['samples']} samples ({t['share_of_all']}% of all)\n")
        if t["groups"]:
            print("| group | share |\n|---|---|")
            for g, s in t["groups"].items():
                print(f"| {g} | {s:.1f}% |")
            print()
        print("| symbol | share |\n|---|---|")
        for s in t["symbols"]:
            print(f"| `{s['symbol'][:100]}` | {s['share']:.2f}% |")


def record(command, freq):
    """`perf script -F tid,ip,sym` text of `command` sampled on cpu-clock at `freq` Hz."""
    if shutil.which("perf") is None:
        sys.exit("thread_profile: perf not found (Debian's linux-perf)")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(freq), "-o", data, "--"] + command,
                       check=True, stdout=sys.stderr)
        return subprocess.run(["perf", "script", "-i", data, "-F", "tid,ip,sym"], check=True,
                              capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--freq", type=int, default=1999, help="samples a second per CPU")
    ap.add_argument("--top", type=int, default=25, help="symbols listed per thread")
    ap.add_argument("--min-share", type=float, default=5.0, help="threads under this %% of all samples are left out")
    ap.add_argument("--group", action="append", default=[], help="NAME=REGEX, repeatable")
    ap.add_argument("--json", help="also write the summary here")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to profile")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command to profile (give it after --)")
    summary = summarize(parse_samples(record(command, args.freq)), args.top, args.min_share, parse_groups(args.group))
    print_summary(summary)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "freq": args.freq, "threads": summary}, f, indent=1)


if __name__ == "__main__":
    main()
