"""Installs tests/deploy/package.json's npm packages (exactly package-lock.json's versions) into a
directory of the build tree, once per lockfile; node_modules never enters the repository."""
import fcntl
import hashlib
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ("package.json", "package-lock.json")


def ensure(prefix):
    """`npm ci` into `prefix` unless it already holds this lockfile's packages; returns prefix/node_modules."""
    os.makedirs(prefix, exist_ok=True)
    digest = hashlib.sha256(b"".join(open(os.path.join(HERE, f), "rb").read() for f in FILES)).hexdigest()
    stamp = os.path.join(prefix, ".installed")
    modules = os.path.join(prefix, "node_modules")
    with open(os.path.join(prefix, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent CTest runs share one install
        if os.path.isdir(modules) and os.path.exists(stamp) and open(stamp).read() == digest:
            return modules
        for f in FILES:
            shutil.copyfile(os.path.join(HERE, f), os.path.join(prefix, f))
        subprocess.run(["npm", "ci", "--prefix", prefix, "--no-audit", "--no-fund", "--ignore-scripts",
                        "--loglevel=error"], check=True, timeout=300)
        with open(stamp, "w") as f:
            f.write(digest)
    return modules


def bin_path(prefix, name):
    """An installed package's command (node_modules/.bin/NAME)."""
    return os.path.join(ensure(prefix), ".bin", name)
