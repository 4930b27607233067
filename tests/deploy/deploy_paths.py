"""Where the deploy tests find the repository, the built server and the npm tools."""
import os
import shutil
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")
DOCKERFILES = [os.path.join(DEPLOY, "docker", "Dockerfile"), os.path.join(DEPLOY, "docker", "Dockerfile.cuda")]
K8S = os.path.join(DEPLOY, "k8s")
RULES = os.path.join(DEPLOY, "prometheus", "mcserve-rules.yaml")
RULES_TEST = os.path.join(DEPLOY, "prometheus", "mcserve-rules.test.yaml")
ADAPTER_RULES = os.path.join(DEPLOY, "prometheus", "adapter-rules.yaml")
DASHBOARD = os.path.join(DEPLOY, "grafana", "mcserve-dashboard.json")
DOCS = os.path.join(ROOT, "docs", "deploy.md")

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"  # Debian's prometheus package

# Set by CTest (tests/CMakeLists.txt): the mcserve binary, and where npm installs the test tools.
SERVER = os.environ.get("MCSERVE_SERVER")
NPM_DIR = os.environ.get("MCSERVE_DEPLOY_NPM_DIR") or os.path.join(tempfile.gettempdir(), "mcserve-deploy-npm")


def project_version():
    """The project's version from the top-level CMakeLists.txt (`project(mcserve VERSION x.y.z ...)`)."""
    import re
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(mcserve VERSION (\S+)", f.read()).group(1)
