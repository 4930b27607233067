"""pytest setup for tools/train: its modules (and, through ref_path, mcserve_ref) importable;
one thread so the tests stay cheap on a shared machine."""

import os
import sys

import torch

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
import ref_path  # noqa: E402,F401

torch.set_num_threads(1)
