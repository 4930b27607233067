"""Every MCSERVE_* variable the Dockerfiles, the rendered ConfigMaps and docs/deploy.md set is MCSERVE_<flag>
of a flag `mcserve --help` lists, and the server really takes it (absl shows it as the flag's value);
the cpu overlay's ConfigMap, as the pod gets it, starts a server whose gRPC health (what the probes ask)
says SERVING."""
import os
import re

import pytest

import deploy_paths
import dockerfile_parse as dp
import k8s_render
import live_server
from conftest import KUSTOMIZATIONS

IMAGE_MODEL = "/opt/mcserve/models/kjv-gdn"  # where the Dockerfiles copy models/kjv-gdn


def build_script_variables():
    """scripts/build.sh's own variables (MCSERVE_BUILD_DIR, MCSERVE_CMAKE_ARGS, ...), which are not flags."""
    with open(os.path.join(deploy_paths.ROOT, "scripts", "build.sh")) as f:
        return set(re.findall(r"\bMCSERVE_[A-Z_]+", f.read()))


def not_flags(names, flags):
    return sorted(n for n in names if n[len("MCSERVE_"):].lower() not in flags)


def mismatches(env, shown):
    """The variables whose value is not the value `mcserve --help` shows for their flag."""
    def same(a, b):
        try:
            return float(a) == float(b)
        except ValueError:
            return a == b
    return sorted(k for k, v in env.items() if not same(v, shown.get(k[len("MCSERVE_"):].lower())))


def configmap(objects):
    deployment = k8s_render.find(objects, "Deployment")
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    (ref,) = [e["configMapRef"]["name"] for e in c["envFrom"] if "configMapRef" in e]
    env = dict(k8s_render.find(objects, "ConfigMap", ref)["data"])
    env.update({e["name"]: e["value"] for e in c.get("env", []) if "value" in e})
    return env


def dockerfile_env(path):
    with open(path) as f:
        env = dp.env({s.name: s for s in dp.stages(f.read())}["runtime"])
    return {k: v for k, v in env.items() if k.startswith("MCSERVE_")}


def docs_variables():
    with open(deploy_paths.DOCS) as f:
        return set(re.findall(r"(?<!-D)\bMCSERVE_[A-Z_]+", f.read())) - build_script_variables()


def test_every_variable_is_a_flag(flags, rendered):
    names = set(docs_variables())
    for path in deploy_paths.DOCKERFILES:
        names |= set(dockerfile_env(path))
    for objects in rendered.values():
        names |= set(configmap(objects))
    assert len(names) >= 10
    assert not_flags(names, flags) == []


def test_checks_reject_unknown_or_ignored_variables(flags, server_binary):
    """A misspelt variable is no flag; a variable the server ignored shows the flag's default."""
    assert not_flags({"MCSERVE_MAX_SLOT", "MCSERVE_MAX_SLOTS"}, flags) == ["MCSERVE_MAX_SLOT"]
    shown_without_env = live_server.help_values(server_binary, {})
    assert mismatches({"MCSERVE_MAX_SLOTS": "7"}, shown_without_env) == ["MCSERVE_MAX_SLOTS"]


@pytest.mark.parametrize("name", list(KUSTOMIZATIONS))
def test_configmap_values_become_the_flags(server_binary, rendered, name):
    env = configmap(rendered[name])
    assert mismatches(env, live_server.help_values(server_binary, env)) == []


@pytest.mark.parametrize("path", deploy_paths.DOCKERFILES, ids=["Dockerfile", "Dockerfile.cuda"])
def test_image_environment_becomes_the_flags(server_binary, path):
    env = dockerfile_env(path)
    assert env["MCSERVE_MODEL"] == IMAGE_MODEL
    assert mismatches(env, live_server.help_values(server_binary, env)) == []


def test_pod_environment_serves_grpc_health_and_metrics(server_binary, rendered):
    """mcserve with the cpu pod's variables (the model at its image path mapped to models/kjv-gdn; host and
    ports from the command line, which wins) answers the probes' gRPC health check with SERVING and
    exports the configured slot count."""
    env = configmap(rendered["cpu"])
    env["MCSERVE_MODEL"] = env["MCSERVE_MODEL"].replace(IMAGE_MODEL, os.path.join(deploy_paths.ROOT, "models", "kjv-gdn"))
    with live_server.LiveServer(server_binary, env=env) as server:
        assert server.grpc_health() == b"\x08\x01"  # SERVING
        assert server.get("/ready")[0] == 200
        samples, _ = live_server.scrape_samples(server.get("/metrics")[1])
        (line,) = samples["mcserve:max_running_requests"]
        assert 'model_name="kjv-gdn"' in line and float(line.split()[-1]) == float(env["MCSERVE_MAX_SLOTS"]), line
        assert server.stop() == 0
