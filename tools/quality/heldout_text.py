#!/usr/bin/python3
"""Writes the held-out books of models/kjv-gdn's training split (Joshua, Ecclesiastes, Daniel, Mark,
Romans; one chapter per line, as tools/train writes kjv_heldout.txt) to a file: the text every
measurement in docs/quality.md reads.

    /usr/bin/python3 tools/quality/heldout_text.py /tmp/mcq/kjv_heldout.txt
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import kjv_data  # noqa: E402


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.exit("usage: heldout_text.py OUT_FILE")
    _, held_out = kjv_data.split_books(kjv_data.parse_bible(kjv_data.read_bible_output()))
    os.makedirs(os.path.dirname(os.path.abspath(argv[0])), exist_ok=True)
    with open(argv[0], "w", encoding="utf-8", newline="\n") as f:
        f.write(kjv_data.split_text(held_out))


if __name__ == "__main__":
    main()
