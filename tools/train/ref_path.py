"""Makes tests/reference (the mcserve_ref package) importable from tools/train."""

import os
import sys

REFERENCE_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                              "..", "..", "tests", "reference"))
if REFERENCE_DIR not in sys.path:
    sys.path.insert(0, REFERENCE_DIR)
