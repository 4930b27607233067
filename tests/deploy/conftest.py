"""Fixtures shared by the deploy tests: the server binary, its flags, a live scrape, rendered overlays."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deploy_paths  # noqa: E402
import k8s_render  # noqa: E402
import live_server  # noqa: E402

# Each kustomization the tests render: the two overlays, and the cpu overlay with the model-volume component.
KUSTOMIZATIONS = {
    "cpu": "overlays/cpu",
    "gpu": "overlays/gpu",
    "cpu+model-volume": None,  # written into a temporary directory by `rendered`
}


@pytest.fixture(scope="session")
def server_binary():
    if not deploy_paths.SERVER:
        pytest.skip("MCSERVE_SERVER not set (run through ctest -R deploy_)")
    return deploy_paths.SERVER


@pytest.fixture(scope="session")
def flags(server_binary):
    """The flags `mcserve --help` documents."""
    return live_server.help_flags(server_binary)


@pytest.fixture(scope="session")
def scrape(server_binary):
    """({sample name: lines}, {family: type}) of /metrics of mcserve serving the bundled model."""
    with live_server.LiveServer(server_binary, "--model", os.path.join(deploy_paths.ROOT, "models", "kjv-gdn"),
                                "--threads", "1") as server:
        status, body = server.get("/metrics")
        assert status == 200
    return live_server.scrape_samples(body)


@pytest.fixture(scope="session")
def rendered(tmp_path_factory):
    """{name: rendered objects} of every kustomization in KUSTOMIZATIONS."""
    out = {}
    for name, rel in KUSTOMIZATIONS.items():
        if rel is None:
            d = tmp_path_factory.mktemp("model-volume")  # kustomize takes relative paths only
            (d / "kustomization.yaml").write_text(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                f"resources:\n  - {os.path.relpath(os.path.join(deploy_paths.K8S, 'overlays', 'cpu'), d)}\n"
                f"components:\n  - {os.path.relpath(os.path.join(deploy_paths.K8S, 'components', 'model-volume'), d)}\n")
            out[name] = k8s_render.render(str(d))
        else:
            out[name] = k8s_render.render(os.path.join(deploy_paths.K8S, rel))
    return out
