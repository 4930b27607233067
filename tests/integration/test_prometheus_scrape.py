"""A real Prometheus server (Debian's `prometheus`) scrapes mcserve on loopback; the test reads the
metrics back through Prometheus's HTTP query API: the target is up, the generated-token counter and
the latency histograms carry what a completed request put there.

Run by CTest (`mcserve_prometheus_integration`), which sets $MCSERVE_SERVER. Skipped when it is not
set (e.g. by the mcserve-run suite, which collects this directory)."""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

SERVER = os.environ.get("MCSERVE_SERVER")
if not SERVER:
    pytest.skip("MCSERVE_SERVER not set (run: ctest -R mcserve_prometheus_integration)", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "tests", "data", "models", "gated_deltanet")
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
MAX_TOKENS = 12


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, body=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def mcserve():
    proc = subprocess.Popen([SERVER, "--model", FIXTURE, "--host", "127.0.0.1", "--grpc-port", "0",
                             "--http-port", "0", "--threads", "1", "--max-slots", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    assert line.startswith("mcserve listening grpc="), (line, proc.stderr.read())
    yield line.split("http=")[1]
    proc.terminate()
    assert proc.wait(timeout=30) == 0


@pytest.fixture(scope="module")
def prometheus(mcserve, tmp_path_factory):
    d = tmp_path_factory.mktemp("prometheus")
    config = d / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: mcserve\n    static_configs:\n"
        f"      - targets: ['{mcserve}']\n")
    port = free_port()
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={d / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.1)
    else:
        pytest.fail("prometheus did not become ready")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def query(prom, expr):
    """The instant vector of `expr` as {metric labels → float value}."""
    r = get_json(prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert r["status"] == "success", r
    return {json.dumps(s["metric"], sort_keys=True): float(s["value"][1]) for s in r["data"]["result"]}


def wait_for(prom, expr, want, timeout=30):
    """Polls until `expr` has one sample satisfying want(value); returns the last result."""
    result = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = query(prom, expr)
        if len(result) == 1 and want(next(iter(result.values()))):
            return result
        time.sleep(0.25)
    pytest.fail(f"{expr}: {result}")


def test_prometheus_scrapes_mcserve(mcserve, prometheus):
    wait_for(prometheus, 'up{job="mcserve"}', lambda v: v == 1)
    before = query(prometheus, "mcserve:generation_tokens_total")
    assert list(before.values()) == [0.0], before
    body = {"model": "gated_deltanet", "prompt": "The cat watched", "max_tokens": MAX_TOKENS,
            "temperature": 0, "ignore_eos": True}
    r = get_json(f"http://{mcserve}/v1/completions", body)
    assert r["usage"]["completion_tokens"] == MAX_TOKENS
    got = wait_for(prometheus, "mcserve:generation_tokens_total", lambda v: v == MAX_TOKENS)
    labels = json.loads(next(iter(got)))
    assert labels["job"] == "mcserve" and labels["model_name"] == "gated_deltanet", labels
    wait_for(prometheus, "mcserve:time_to_first_token_seconds_count", lambda v: v == 1)
    wait_for(prometheus, "mcserve:inter_token_latency_seconds_count", lambda v: v == MAX_TOKENS - 1)
    wait_for(prometheus, "mcserve:e2e_request_latency_seconds_count", lambda v: v == 1)
    wait_for(prometheus, 'mcserve:request_success_total{finished_reason="length"}', lambda v: v == 1)
    # A histogram works with PromQL's quantile estimate.
    p99 = query(prometheus, "histogram_quantile(0.99, mcserve:e2e_request_latency_seconds_bucket)")
    assert len(p99) == 1 and next(iter(p99.values())) > 0, p99
