"""The Docker build context (the repository less .dockerignore) holds everything the image's build needs:
CMake configures it with the Dockerfile's MCSERVE_CMAKE_ARGS (as scripts/build.sh does), and every source
of the target `mcserve`, with the headers it includes from the repository, is in it. CMake configures
only: nothing is compiled."""
import os
import re
import shutil
import subprocess

import pytest

import deploy_paths
import dockerfile_parse as dp
import dockerignore

CPU, CUDA = deploy_paths.DOCKERFILES
NVCC = "/usr/local/cuda/bin/nvcc"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def cmake_args(path):
    with open(path) as f:
        build = {s.name: s for s in dp.stages(f.read())}["build"]
    for run in build.all("RUN"):
        for words in dp.commands(run.args):
            env = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
            if "MCSERVE_CMAKE_ARGS" in env:
                return env["MCSERVE_CMAKE_ARGS"].split()
    raise AssertionError(f"{path}: no MCSERVE_CMAKE_ARGS")


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    """A copy of the build context."""
    ctx = tmp_path_factory.mktemp("context")
    for rel in dockerignore.context_files(deploy_paths.ROOT):
        dest = ctx / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(deploy_paths.ROOT, rel), dest, follow_symlinks=False)
    return ctx


def configure(context, build, args):
    r = subprocess.run(["cmake", "-S", str(context), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def ninja(build, *tool):
    return subprocess.run(["ninja", "-C", str(build), *tool], capture_output=True, text=True, check=True,
                          timeout=60).stdout


def missing_includes(context, sources):
    """Quoted includes of the sources (recursively) that are repository files missing from the context."""
    missing, seen, todo = set(), set(), list(sources)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        with open(path, errors="replace") as f:
            for inc in INCLUDE.findall(f.read()):
                for cand in (os.path.join(context, inc), os.path.join(os.path.dirname(path), inc)):
                    if os.path.exists(cand):
                        todo.append(os.path.normpath(cand))
                        break
                else:
                    if os.path.exists(os.path.join(deploy_paths.ROOT, inc)):  # else a system or generated header
                        missing.add(f"{os.path.relpath(path, context)}: {inc}")
    return sorted(missing)


@pytest.mark.parametrize("dockerfile", [CPU, CUDA], ids=["Dockerfile", "Dockerfile.cuda"])
def test_context_configures_and_holds_every_source(dockerfile, context, tmp_path):
    args = cmake_args(dockerfile)
    if "-DMCSERVE_CUDA=ON" in args and not os.path.exists(NVCC):
        pytest.skip(f"{NVCC} not here (NVIDIA's image provides it)")
    configure(context, tmp_path / "build", args)
    inputs = ninja(tmp_path / "build", "-t", "inputs", "mcserve").split()
    sources = [p for p in inputs if p.startswith(str(context) + os.sep)]
    assert any(p.endswith("server/main.cc") for p in sources), sources
    assert [p for p in sources if not os.path.exists(p)] == []
    code = [p for p in sources if p.endswith((".cc", ".cu", ".h"))]
    assert missing_includes(str(context), code) == []
    if "-DMCSERVE_CUDA=ON" in args:
        # The kernels are compiled for exactly sm_80 and sm_90.
        commands = ninja(tmp_path / "build", "-t", "commands", "mcserve")
        nvcc = [c for c in commands.splitlines() if c.startswith(NVCC)]
        assert nvcc, "no CUDA sources compiled"
        archs = {tuple(re.findall(r"code=\[?compute_\d+,sm_(\d+)", c)) for c in nvcc}
        assert archs == {("80", "90")}, archs


def test_dockerignore_keeps_out_what_is_built():
    """The build tree, git metadata, node_modules and Python caches stay out of the context."""
    rules = dockerignore.load(deploy_paths.ROOT)
    for path in ("build/server/mcserve", ".git/HEAD", "tools/x/node_modules/y.js", "tools/x/__pycache__/y.pyc"):
        assert dockerignore.excluded(rules, path), path
    for path in ("scripts/setup.sh", "server/main.cc", "models/kjv-gdn/config.json", "tools/eval/tests/x.cc"):
        assert not dockerignore.excluded(rules, path), path
