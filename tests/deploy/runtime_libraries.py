"""What the built mcserve needs at run time: the Debian packages that own the shared libraries it and its
tokenizer module link directly (as `objdump -p` lists them, resolved by `ldd` and `dpkg -S`), and the CUDA
libraries (outside dpkg, under /usr/local/cuda) it loads, with theirs."""
import functools
import os
import re
import subprocess


def binaries(server):
    """mcserve and the tokenizer module it loads, where the build put it (engine/model/sentencepiece_loader.h)."""
    build = os.path.dirname(os.path.dirname(os.path.abspath(server)))
    return [server, os.path.join(build, "engine", "libmcserve_sentencepiece.so")]


def needed(path):
    out = subprocess.run(["objdump", "-p", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"^\s+NEEDED\s+(\S+)$", out, re.M)


def resolved(path):
    """{soname: path} of everything `ldd` loads for `path`; fails on a library it cannot find."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    assert "not found" not in out, out
    return dict(re.findall(r"^\s+(\S+) => (\S+)", out, re.M))


def owners(paths):
    """{path: the Debian package that installed it} for the paths dpkg knows (one `dpkg -S` for all; a path
    counts as installed under its real path or under the path itself)."""
    queries = sorted({q for p in paths for q in (p, os.path.realpath(p))})
    out = subprocess.run(["dpkg", "-S", *queries], capture_output=True, text=True).stdout  # exit 1: some unknown
    installed = {}
    for line in out.splitlines():
        if ": " in line and not line.startswith("diversion"):
            package, path = line.split(": ", 1)
            installed[path] = package.split(":")[0]
    return {p: installed.get(os.path.realpath(p), installed.get(p)) for p in paths
            if installed.get(os.path.realpath(p), installed.get(p))}


@functools.lru_cache(maxsize=None)
def debian_packages(server):
    """The packages owning the libraries mcserve and its tokenizer module link directly."""
    paths = []
    for binary in binaries(server):
        resolved_paths = resolved(binary)
        paths += [resolved_paths[s] for s in needed(binary) if not s.startswith("ld-linux")]  # the loader: libc6's
    return frozenset(owners(paths).values())


def cuda_libraries(server):
    """The sonames of the CUDA libraries mcserve loads (directly or through one another)."""
    libs = resolved(server)
    known = owners(list(libs.values()))
    return sorted(s for s, p in libs.items() if "/cuda" in os.path.realpath(p) and p not in known)


@functools.lru_cache(maxsize=None)
def base_image_packages():
    """Packages every Debian image has: apt and everything it depends on (debian:bookworm-slim has apt)."""
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                          "--no-breaks", "--no-replaces", "--no-enhances", "apt"],
                         capture_output=True, text=True, check=True).stdout
    return frozenset(line.strip() for line in out.splitlines() if not line.startswith((" ", "<")))


@functools.lru_cache(maxsize=None)
def in_debian(packages):
    """The subset of `packages` (a tuple) that Debian (the configured apt sources, or dpkg's status) has."""
    r = subprocess.run(["apt-cache", "show", "--no-all-versions", *packages], capture_output=True, text=True)
    return set(re.findall(r"^Package: (\S+)$", r.stdout, re.M)) & set(packages)
