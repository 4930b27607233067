"""What the built mcserve needs at run time: the Debian packages that own the shared libraries it and its
gRPC module link directly (as `objdump -p` lists them, resolved by `ldd` and `dpkg -S`), and the CUDA
libraries (outside dpkg, under /usr/local/cuda) it loads, with theirs."""
import functools
import os
import re
import subprocess


def binaries(server):
    """mcserve and the gRPC module it loads from its own directory (server/main.cc)."""
    return [server, os.path.join(os.path.dirname(server), "libmcserve_grpc_module.so")]


def needed(path):
    out = subprocess.run(["objdump", "-p", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"^\s+NEEDED\s+(\S+)$", out, re.M)


def resolved(path):
    """{soname: path} of everything `ldd` loads for `path`; fails on a library it cannot find."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    assert "not found" not in out, out
    return dict(re.findall(r"^\s+(\S+) => (\S+)", out, re.M))


def owner(path):
    """The Debian package that installed `path` (None if dpkg does not know it)."""
    r = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True, text=True)
    if r.returncode != 0:
        r = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
    return r.stdout.split(":")[0] if r.returncode == 0 else None


@functools.lru_cache(maxsize=None)
def debian_packages(server):
    """The packages owning the libraries mcserve and its module link directly."""
    packages = set()
    for binary in binaries(server):
        paths = resolved(binary)
        for soname in needed(binary):
            if soname.startswith("ld-linux"):
                continue  # the dynamic loader, libc6's
            pkg = owner(paths[soname])
            if pkg is not None:
                packages.add(pkg)
    return frozenset(packages)


def cuda_libraries(server):
    """The sonames of the CUDA libraries mcserve loads (directly or through one another)."""
    return sorted(s for s, p in resolved(server).items() if "/cuda" in os.path.realpath(p) and owner(p) is None)


@functools.lru_cache(maxsize=None)
def base_image_packages():
    """Packages every Debian image has: apt and everything it depends on (debian:bookworm-slim has apt)."""
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                          "--no-breaks", "--no-replaces", "--no-enhances", "apt"],
                         capture_output=True, text=True, check=True).stdout
    return frozenset(line.strip() for line in out.splitlines() if not line.startswith((" ", "<")))


def in_debian(packages):
    """The subset of `packages` that Debian (the configured apt sources, or dpkg's status) has."""
    r = subprocess.run(["apt-cache", "show", "--no-all-versions", *packages], capture_output=True, text=True)
    return set(re.findall(r"^Package: (\S+)$", r.stdout, re.M)) & set(packages)
