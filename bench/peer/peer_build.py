"""Builds rwkv.cpp (the peer) out of tree from a source checkout, and our decode driver against it."""
import glob
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def git_commit(path):
    """HEAD commit of the git checkout at `path`, or None if it is not one."""
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], check=True, capture_output=True,
                              text=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None


def peer_commits(peer_src):
    """The rwkv.cpp commit and its ggml submodule's commit (None where not a git checkout)."""
    return {"rwkv.cpp": git_commit(peer_src), "ggml": git_commit(os.path.join(peer_src, "ggml"))}


def build_peer_library(peer_src, build_dir, jobs=2):
    """cmake Release build of librwkv (shared; the library only, no tests or extras) into `build_dir`
    (reused if already built); returns its path."""
    subprocess.run(["cmake", "-S", peer_src, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                    "-DRWKV_BUILD_SHARED_LIBRARY=ON", "-DRWKV_STANDALONE=ON"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", build_dir, "--target", "rwkv", "-j", str(jobs)], check=True,
                   capture_output=True)
    found = sorted(glob.glob(os.path.join(build_dir, "**", "librwkv.so"), recursive=True))
    if not found:
        raise RuntimeError("no librwkv.so under " + build_dir)
    return found[0]


def compile_decode_driver(peer_src, library, out_path):
    """Compiles bench/peer/rwkv_decode_bench.c against `library`, with an rpath to every folder of the
    peer build holding a shared library (librwkv and, if built shared, ggml's), so it runs as is."""
    build_dir = os.path.dirname(library)
    while not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")) and build_dir != "/":
        build_dir = os.path.dirname(build_dir)
    lib_dirs = sorted({os.path.dirname(p) for p in glob.glob(os.path.join(build_dir, "**", "lib*.so"), recursive=True)})
    subprocess.run(["cc", "-O2", "-std=c11", "-D_POSIX_C_SOURCE=199309L", "-I", peer_src,
                    os.path.join(HERE, "rwkv_decode_bench.c"), "-L", os.path.dirname(library), "-lrwkv"]
                   + ["-Wl,-rpath," + d for d in lib_dirs] + ["-lm", "-o", out_path], check=True)
    return out_path
