"""Runs mcserve-eval and returns its JSON (the `results` and `settings` it prints with --json -)."""

import json
import os
import subprocess
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_EVAL = os.path.join(ROOT, "build", "tools", "eval", "mcserve-eval")
DEFAULT_MODEL = os.path.join(ROOT, "models", "kjv-gdn")


def run_eval(binary, args, timeout=3600):
    """mcserve-eval `args` --json -: returns (parsed JSON, wall seconds). A failure raises
    RuntimeError with the tool's own message."""
    start = time.time()
    r = subprocess.run([binary, *args, "--json", "-"], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("mcserve-eval %s failed: %s" % (" ".join(args), r.stderr.strip()))
    return json.loads(r.stdout), time.time() - start


def repo_relative(path):
    """`path` relative to the repository when inside it (results files name no build machine)."""
    full = os.path.abspath(path)
    return os.path.relpath(full, ROOT) if full.startswith(ROOT + os.sep) else path
