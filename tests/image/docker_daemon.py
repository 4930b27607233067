"""A Docker engine for the image test, and the Debian base image it builds on.

`daemon(work)` returns the DOCKER_HOST of a reachable engine: the caller's own (DOCKER_HOST or the
default socket) if `docker info` answers, else one it starts itself — Debian's docker.io `dockerd` with
the vfs storage driver, no iptables and no bridge (containers use the host's network), its data, exec
root and socket under `work`. None (with the reason) when neither works: the test then reports a skip.

`ensure_base_image(env, work)` makes `debian:bookworm` (tagged `bookworm-slim` too) from Debian's
packages when the engine lacks it: `debootstrap --variant=minbase bookworm` from the apt mirror this
machine already uses, imported with `docker import` (no image registry is reachable).
"""
import os
import re
import shutil
import subprocess
import time

DEFAULT_MIRROR = "http://deb.debian.org/debian"


def docker(env, *args, check=True, capture=True, timeout=None):
    """`docker args...` against env's DOCKER_HOST; the CompletedProcess."""
    return subprocess.run(["docker", *args], env=env, check=check, timeout=timeout,
                          stdout=subprocess.PIPE if capture else None, stderr=subprocess.STDOUT if capture else None)


def _answers(env):
    try:
        return docker(env, "info", check=False, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def daemon(work):
    """(env with DOCKER_HOST, stop function or None, reason when there is no engine)."""
    if shutil.which("docker") is None:
        return None, None, "no docker client on PATH (scripts/setup.sh installs docker.io)"
    env = dict(os.environ)
    if _answers(env):
        return env, None, ""
    if shutil.which("dockerd") is None:
        return None, None, "no Docker engine reachable and no dockerd to start (scripts/setup.sh installs docker.io)"
    root = os.path.join(work, "dockerd")
    os.makedirs(root, exist_ok=True)
    sock = os.path.join(root, "docker.sock")
    log = open(os.path.join(root, "dockerd.log"), "ab")
    proc = subprocess.Popen(["dockerd", "--storage-driver=vfs", "--iptables=false", "--bridge=none",
                             "--data-root", os.path.join(root, "data"), "--exec-root", os.path.join(root, "exec"),
                             "--pidfile", os.path.join(root, "dockerd.pid"), "-H", "unix://" + sock],
                            stdout=log, stderr=log, start_new_session=True)
    env["DOCKER_HOST"] = "unix://" + sock

    def stop():
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()

    for _ in range(60):
        if proc.poll() is not None:
            return None, None, "dockerd exited at start (%s): %s" % (proc.returncode, _tail(root))
        if _answers(env):
            return env, stop, ""
        time.sleep(1)
    stop()
    return None, None, "dockerd did not answer within 60 s: " + _tail(root)


def _tail(root):
    with open(os.path.join(root, "dockerd.log"), "rb") as f:
        return f.read()[-400:].decode(errors="replace").strip()


def apt_mirror():
    """The Debian mirror of this machine's apt sources (deb822 or one-line format)."""
    for path in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"):
        if os.path.exists(path):
            text = open(path).read()
            m = re.search(r"^URIs:\s*(\S+/debian)\s*$", text, re.M) or re.search(r"^deb\s+(\S+/debian)\s", text, re.M)
            if m:
                return m.group(1)
    return DEFAULT_MIRROR


def _debootstrap(rootfs, mirror, attempts=3):
    """debootstrap minbase bookworm into rootfs; a failed attempt (a mirror's transient error) is retried
    from scratch, and the last one's output ends the raised error."""
    for attempt in range(1, attempts + 1):
        shutil.rmtree(rootfs, ignore_errors=True)
        run = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", rootfs, mirror],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
        if run.returncode == 0:
            return
        tail = run.stdout.decode(errors="replace")[-1500:]
        print("debootstrap attempt %d of %d failed (%d):\n%s" % (attempt, attempts, run.returncode, tail))
        time.sleep(10 * attempt)
    raise RuntimeError("debootstrap failed %d times; the last output is above" % attempts)


def ensure_base_image(env, work):
    """Makes debian:bookworm and debian:bookworm-slim if the engine lacks them; returns what it did."""
    if docker(env, "image", "inspect", "debian:bookworm-slim", check=False).returncode == 0 and \
            docker(env, "image", "inspect", "debian:bookworm", check=False).returncode == 0:
        return "base image debian:bookworm already present"
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debian:bookworm is missing and debootstrap is not installed (scripts/setup.sh)")
    rootfs = os.path.join(work, "bookworm-rootfs")
    mirror = apt_mirror()
    _debootstrap(rootfs, mirror)
    tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(["docker", "import", "-", "debian:bookworm"], stdin=tar.stdout, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    tar.wait()
    docker(env, "tag", "debian:bookworm", "debian:bookworm-slim")
    shutil.rmtree(rootfs, ignore_errors=True)
    return "base image debian:bookworm made with debootstrap from " + mirror
