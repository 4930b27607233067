"""deploy/k8s renders (cpu and gpu overlays, and cpu with the model-volume component), every object is
valid against the Kubernetes / Prometheus Operator schemas, and the objects agree with each other, the
image and the server: probe ports, Service ports, termination grace, user, image tag, GPU resources."""
import copy

import pytest

import deploy_paths
import dockerfile_parse as dp
import k8s_render
from conftest import KUSTOMIZATIONS

NAMES = list(KUSTOMIZATIONS)
EXPECTED_KINDS = {"ConfigMap", "Service", "Deployment", "PodDisruptionBudget", "ServiceMonitor",
                  "HorizontalPodAutoscaler"}
GRPC_SHUTDOWN_SECONDS = 5  # server/main.cc: grpc_server.Shutdown(absl::Seconds(5)) after the grace period


def container(objects):
    (c,) = k8s_render.find(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return c


def config(objects):
    """The MCSERVE_* variables the container gets from its ConfigMap."""
    c = container(objects)
    (ref,) = [e["configMapRef"]["name"] for e in c["envFrom"] if "configMapRef" in e]
    return k8s_render.find(objects, "ConfigMap", ref)["data"]


@pytest.mark.parametrize("name", NAMES)
def test_renders_every_kind(rendered, name):
    kinds = {o["kind"] for o in rendered[name]}
    want = EXPECTED_KINDS | ({"PersistentVolumeClaim"} if "model-volume" in name else set())
    assert kinds == want


@pytest.mark.parametrize("name", NAMES)
def test_every_object_is_valid(rendered, name):
    """No schema errors and no unknown fields in any object."""
    errors = k8s_render.validate(rendered[name], deploy_paths.NPM_DIR)
    assert len(errors) == len(rendered[name]) and all(v == [] for v in errors.values()), errors


def test_validation_rejects_wrong_types_and_unknown_fields(rendered):
    """The validator is not a no-op: a string replica count, a misspelt probe and a misspelt
    ServiceMonitor field are reported."""
    objects = copy.deepcopy(rendered["cpu"])
    k8s_render.find(objects, "Deployment")["spec"]["replicas"] = "two"
    container(objects)["livenessProbes"] = container(objects).pop("livenessProbe")
    k8s_render.find(objects, "ServiceMonitor")["spec"]["endpoints"][0]["intervall"] = "1s"
    errors = k8s_render.validate(objects, deploy_paths.NPM_DIR)
    assert any("replicas" in e for e in errors["Deployment/mcserve"]), errors
    container(objects)["livenessProbe"] = container(objects).pop("livenessProbes")
    k8s_render.find(objects, "Deployment")["spec"]["replicas"] = 2
    container(objects)["livenessProbes"] = {}
    errors = k8s_render.validate(objects, deploy_paths.NPM_DIR)
    assert any("livenessProbes is not a known field" in e for e in errors["Deployment/mcserve"]), errors
    assert any("intervall is not a known field" in e for e in errors["ServiceMonitor/mcserve"]), errors


@pytest.mark.parametrize("name", NAMES)
def test_probes_are_native_grpc_on_the_servers_grpc_port(rendered, name):
    """Startup, liveness and readiness probes are gRPC probes on the container port `grpc`, which is the
    port MCSERVE_GRPC_PORT makes the server listen on; `http` is MCSERVE_HTTP_PORT."""
    c = container(rendered[name])
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    env = config(rendered[name])
    assert ports == {"grpc": int(env["MCSERVE_GRPC_PORT"]), "http": int(env["MCSERVE_HTTP_PORT"])}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert set(c[probe]) & {"grpc", "httpGet", "tcpSocket", "exec"} == {"grpc"}, probe
        assert c[probe]["grpc"]["port"] == ports["grpc"] and "service" not in c[probe]["grpc"], probe


@pytest.mark.parametrize("name", NAMES)
def test_service_and_service_monitor_reach_the_container_ports(rendered, name):
    objects = rendered[name]
    pod_labels = k8s_render.find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    service = k8s_render.find(objects, "Service")
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {"grpc": "grpc", "http": "http"}
    assert service["spec"]["selector"].items() <= pod_labels.items()
    monitor = k8s_render.find(objects, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics", endpoint
    pdb = k8s_render.find(objects, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    hpa = k8s_render.find(objects, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "mcserve"}
    assert [m["type"] for m in hpa["spec"]["metrics"]] == ["Pods"]  # a per-pod custom metric (prometheus-adapter)


@pytest.mark.parametrize("name", NAMES)
def test_termination_grace_covers_the_servers_drain(rendered, name):
    """SIGKILL comes after the server's drain (MCSERVE_SHUTDOWN_GRACE_SECONDS, then 5 s to close gRPC),
    and not much later."""
    grace = float(config(rendered[name])["MCSERVE_SHUTDOWN_GRACE_SECONDS"])
    period = k8s_render.find(rendered[name], "Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace + GRPC_SHUTDOWN_SECONDS < period <= grace + GRPC_SHUTDOWN_SECONDS + 10, (grace, period)


@pytest.mark.parametrize("name", NAMES)
def test_runs_as_the_images_non_root_user(rendered, name):
    pod = k8s_render.find(rendered[name], "Deployment")["spec"]["template"]["spec"]
    with open(deploy_paths.DOCKERFILES[0]) as f:
        (user,) = {s.name: s for s in dp.stages(f.read())}["runtime"].all("USER")
    uid, gid = (int(x) for x in user.args.split(":"))
    ctx = pod["securityContext"]
    assert ctx["runAsNonRoot"] is True and (ctx["runAsUser"], ctx["runAsGroup"]) == (uid, gid)
    c = container(rendered[name])["securityContext"]
    assert c["allowPrivilegeEscalation"] is False and c["readOnlyRootFilesystem"] is True
    assert c["capabilities"]["drop"] == ["ALL"]


@pytest.mark.parametrize("name", NAMES)
def test_image_device_and_resources(rendered, name):
    """cpu: the CPU image, --device cpu, as many threads as CPU cores; gpu: the CUDA image, --device cuda,
    one nvidia.com/gpu; both tagged with the project version."""
    c = container(rendered[name])
    env = config(rendered[name])
    limits = c["resources"]["limits"]
    gpu = name.startswith("gpu")
    assert c["image"] == f"{'mcserve-cuda' if gpu else 'mcserve'}:{deploy_paths.project_version()}"
    assert env["MCSERVE_DEVICE"] == ("cuda" if gpu else "cpu")
    assert int(env["MCSERVE_THREADS"]) == int(limits["cpu"])
    assert ("nvidia.com/gpu" in limits) == gpu
    if gpu:
        assert limits["nvidia.com/gpu"] == 1 and c["resources"]["requests"]["nvidia.com/gpu"] == 1


def test_model_volume_component_serves_the_claims_directory(rendered):
    """With the component, MCSERVE_MODEL is a directory on the read-only PersistentVolumeClaim mount."""
    objects = rendered["cpu+model-volume"]
    pod = k8s_render.find(objects, "Deployment")["spec"]["template"]["spec"]
    claim = k8s_render.find(objects, "PersistentVolumeClaim")["metadata"]["name"]
    (volume,) = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert volume["persistentVolumeClaim"]["claimName"] == claim
    (mount,) = [m for m in container(objects)["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    assert config(objects)["MCSERVE_MODEL"].startswith(mount["mountPath"].rstrip("/") + "/")
    assert config(rendered["cpu"])["MCSERVE_MODEL"] == "/opt/mcserve/models/kjv-gdn"  # the image's
