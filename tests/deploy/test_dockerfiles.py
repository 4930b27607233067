"""The Dockerfiles' stages, packages, copies, user, health check and environment agree with the
repository and the built server."""
import os
import re

import pytest

import deploy_paths
import dockerfile_parse as dp
import dockerignore
import runtime_libraries as rl
from setup_packages import dev_dependency_closure, setup_packages

CPU, CUDA = deploy_paths.DOCKERFILES
HEALTHCHECK_TOOLS = {"curl"}  # the runtime packages that are not libraries: HEALTHCHECK's client
IDS = ["Dockerfile", "Dockerfile.cuda"]


def stages(path):
    with open(path) as f:
        return {s.name: s for s in dp.stages(f.read())}


@pytest.fixture(scope="module", params=deploy_paths.DOCKERFILES, ids=IDS)
def dockerfile(request):
    return request.param, stages(request.param)


def runtime_packages(stage):
    return set(dp.apt_installs(stage)) - HEALTHCHECK_TOOLS


def test_build_and_runtime_stages_are_debian_12(dockerfile):
    """Both stages are Debian 12 (setup.sh's package names are Debian 12's); the runtime stage is slim."""
    _, s = dockerfile
    assert s["build"].image == "debian:bookworm", s["build"].image
    assert s["runtime"].image == "debian:bookworm-slim", s["runtime"].image
    assert list(s)[-1] == "runtime", "the last stage is the image"


def test_build_stage_installs_exactly_setup_sh(dockerfile):
    """The build stage installs packages only by running the repository's scripts/setup.sh, copied unchanged."""
    _, s = dockerfile
    build = s["build"]
    assert dp.apt_installs(build) == []
    runs = [words for r in build.all("RUN") for words in dp.commands(r.args)]
    assert ["bash", "scripts/setup.sh"] in runs, runs
    copies = dp.copies(build)
    assert any(c.sources == ["scripts/setup.sh"] and c.dest == "scripts/setup.sh" and not c.from_stage
               for c in copies), copies
    assert not any("apt" in w for words in runs for w in words[:1]), runs


def build_args(build_stage):
    """MCSERVE_CMAKE_ARGS of the one `bash scripts/build.sh mcserve` in the build stage."""
    runs = [words for r in build_stage.all("RUN") for words in dp.commands(r.args)]
    build = [w for w in runs if "scripts/build.sh" in w]
    assert len(build) == 1 and build[0][-1] == "mcserve", build
    return dict(w.split("=", 1) for w in build[0] if re.match(r"^[A-Z_]+=", w))["MCSERVE_CMAKE_ARGS"].split()


def test_build_stage_runs_build_sh_without_tests_or_benchmarks(dockerfile):
    path, s = dockerfile
    args = build_args(s["build"])
    assert {"-DMCSERVE_BUILD_TESTS=OFF", "-DMCSERVE_BUILD_BENCH=OFF"} <= set(args), args
    cuda = "-DMCSERVE_CUDA=ON" if path == CUDA else "-DMCSERVE_CUDA=OFF"
    assert cuda in args, args
    if path == CUDA:
        assert "-DMCSERVE_CUDA_ARCHS=80;90" in args, args  # sm_80 (A100) and sm_90 (H100)


def test_every_copied_path_exists(dockerfile, server_binary):
    """Context sources exist and .dockerignore keeps them; --from=build sources are what the build
    produces (the same paths in this build tree) or the sources; stage names exist."""
    _, s = dockerfile
    rules = dockerignore.load(deploy_paths.ROOT)
    build_dir = os.path.dirname(os.path.dirname(server_binary))
    for stage in s.values():
        for c in dp.copies(stage):
            for src in c.sources:
                if not c.from_stage:
                    path = os.path.normpath(os.path.join(deploy_paths.ROOT, src))
                    assert os.path.exists(path), src
                    if src != ".":
                        assert not dockerignore.excluded(rules, os.path.relpath(path, deploy_paths.ROOT)), src
                elif c.from_stage == "build":
                    assert src.startswith("/src/build/"), src
                    built = os.path.join(build_dir, src[len("/src/build/"):])
                    assert os.path.exists(built), (src, built)
                else:
                    assert c.from_stage in s and s[c.from_stage].image.startswith("nvidia/cuda:"), c.from_stage


def test_runtime_packages_are_the_libraries_mcserve_links(dockerfile, server_binary):
    """The runtime stage installs exactly the packages owning the libraries the built mcserve and its tokenizer
    module link (less those in every Debian image), plus curl for HEALTHCHECK."""
    _, s = dockerfile
    want = rl.debian_packages(server_binary) - rl.base_image_packages()
    assert runtime_packages(s["runtime"]) == want
    assert set(dp.apt_installs(s["runtime"])) & HEALTHCHECK_TOOLS == HEALTHCHECK_TOOLS


def test_runtime_packages_are_debian_counterparts_of_setup_sh(dockerfile):
    """Every runtime package exists in Debian and comes with setup.sh's -dev packages."""
    _, s = dockerfile
    packages = tuple(dp.apt_installs(s["runtime"]))
    assert rl.in_debian(packages) == set(packages)
    stray = runtime_packages(s["runtime"]) - dev_dependency_closure()
    assert not stray, f"{stray}: no -dev package of setup.sh {setup_packages()} depends on them"


def test_cuda_image_copies_the_cuda_libraries_mcserve_loads(server_binary):
    """Dockerfile.cuda copies every CUDA library the (CUDA-enabled) mcserve loads from NVIDIA's runtime image."""
    libs = rl.cuda_libraries(server_binary)
    if not libs:
        pytest.skip("this mcserve was built without CUDA")
    copied = {os.path.basename(src) for c in dp.copies(stages(CUDA)["runtime"]) if c.from_stage == "cuda-runtime"
              for src in c.sources}
    assert copied == set(libs)
    cpu_copied = [c for c in dp.copies(stages(CPU)["runtime"]) if c.from_stage not in ("", "build")]
    assert cpu_copied == []


def test_runtime_user_is_not_root(dockerfile):
    """USER is a numeric non-root uid:gid (so Kubernetes' runAsNonRoot can verify it) created in the image."""
    _, s = dockerfile
    (user,) = s["runtime"].all("USER")
    uid, gid = user.args.split(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) > 0 and int(gid) > 0, user.args
    runs = " ".join(r.args for r in s["runtime"].all("RUN"))
    assert f"--uid {uid}" in runs and f"--gid {gid}" in runs, runs
    assert s["runtime"].instructions.index(user) > max(s["runtime"].instructions.index(c)
                                                        for c in s["runtime"].all("COPY")), "USER after the copies"


def test_healthcheck_asks_the_http_port_for_health(dockerfile):
    _, s = dockerfile
    (hc,) = s["runtime"].all("HEALTHCHECK")
    assert "CMD curl" in hc.args and "127.0.0.1:${MCSERVE_HTTP_PORT}/health" in hc.args, hc.args


def test_environment_ports_model_and_entrypoint(dockerfile):
    """EXPOSE lists the MCSERVE_*_PORT values, MCSERVE_MODEL is where the bundled model is copied, and the
    entry point is the copied binary next to ../lib/mcserve/libmcserve_sentencepiece.so (its tokenizer module)."""
    path, s = dockerfile
    runtime = s["runtime"]
    env = dp.env(runtime)
    (expose,) = runtime.all("EXPOSE")
    assert set(expose.args.split()) == {env["MCSERVE_GRPC_PORT"], env["MCSERVE_HTTP_PORT"]}
    copies = {c.dest: c for c in dp.copies(runtime)}
    assert copies[env["MCSERVE_MODEL"]].sources == ["models/kjv-gdn"]
    assert f"-DMCSERVE_DEFAULT_MODEL_DIR={env['MCSERVE_MODEL']}" in build_args(s["build"])  # mcserve's default
    assert env["MCSERVE_DEVICE"] == ("cuda" if path == CUDA else "cpu")
    (entry,) = runtime.all("ENTRYPOINT")
    binary = eval(entry.args)[0]  # exec form: a JSON list
    assert copies[binary].sources == ["/src/build/server/mcserve"]
    module = os.path.normpath(os.path.join(os.path.dirname(binary), "..", "lib", "mcserve",
                                           "libmcserve_sentencepiece.so"))
    assert copies[module].sources == ["/src/build/engine/libmcserve_sentencepiece.so"]


def test_environment_names_are_server_flags(dockerfile, flags):
    """Every MCSERVE_* variable the image sets is MCSERVE_<flag> of a flag `mcserve --help` lists."""
    _, s = dockerfile
    names = [k for k in dp.env(s["runtime"]) if k.startswith("MCSERVE_")]
    assert names
    assert [n for n in names if n[len("MCSERVE_"):].lower() not in flags] == []
