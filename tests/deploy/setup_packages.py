"""The Debian packages scripts/setup.sh installs (its `packages=( ... )` list)."""
import functools
import os
import re
import subprocess

import deploy_paths


def setup_packages():
    with open(os.path.join(deploy_paths.ROOT, "scripts", "setup.sh")) as f:
        body = re.search(r"^packages=\((.*?)^\)", f.read(), re.S | re.M).group(1)
    return [w for line in body.splitlines() for w in line.split("#")[0].split()]


@functools.lru_cache(maxsize=None)
def dev_dependency_closure():
    """Every package that setup.sh's -dev packages depend on, directly or not."""
    dev = [p for p in setup_packages() if p.endswith("-dev")]
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                          "--no-breaks", "--no-replaces", "--no-enhances", *dev],
                         capture_output=True, text=True, check=True).stdout
    return frozenset(line.strip() for line in out.splitlines() if not line.startswith((" ", "<")))
