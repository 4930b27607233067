#!/usr/bin/python3
"""The CPU image (deploy/docker/Dockerfile) built and run for real (CTest label `image`; docs/deploy.md).

Starts its own Docker engine if none is reachable, makes the Debian base image from Debian's packages if
it is missing (docker_daemon.py), builds the image, runs it with the host's network, and checks from
outside: gRPC health SERVING, /ready, a streamed completion equal to mcserve-run's greedy text on the
bundled model, a /metrics scrape, a non-root user, and SIGTERM ending it with status 0 within the grace
period. Prints the image size and the build time. Exit 0: passed; 1: failed; 77: no Docker engine could
run here (CTest reports the test as skipped, with the reason on stdout).

    MCSERVE_RUN=build/tools/mcserve-run /usr/bin/python3 tests/image/run_image_test.py
"""
import collections
import json
import os
import socket
import subprocess
import sys
import time
import traceback
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docker_daemon  # noqa: E402
from docker_daemon import docker  # noqa: E402

import grpc  # noqa: E402  (Debian's python3-grpcio)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TAG = "mcserve-image-test"
PROMPT = "In the beginning"
MAX_TOKENS = 16
GRACE_SECONDS = 5
SKIP = 77


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url, container, env, timeout=180):
    """Polls GET /ready until 200; raises with the container's log if it never comes."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            if urllib.request.urlopen(url + "/ready", timeout=2).status == 200:
                return
        except OSError:
            pass
        time.sleep(1)
    logs = docker(env, "logs", container, check=False).stdout.decode(errors="replace")
    raise AssertionError("the container never became ready:\n" + logs[-2000:])


def grpc_health(address):
    channel = grpc.insecure_channel(address)
    check = channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=lambda b: b,
                                response_deserializer=lambda b: b)
    return check(b"", timeout=10)  # b"\x08\x01" = SERVING


def streamed_completion(url):
    """The text of a greedy streamed /v1/completions (SSE chunks joined)."""
    body = json.dumps({"prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    text = []
    with urllib.request.urlopen(req, timeout=120) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            text.append(json.loads(line[len("data: "):])["choices"][0]["text"])
    return "".join(text)


def mcserve_run_text():
    run = os.environ.get("MCSERVE_RUN", os.path.join(ROOT, "build", "tools", "mcserve-run"))
    out = subprocess.run([run, "--model", os.path.join(ROOT, "models", "kjv-gdn"), "--prompt", PROMPT,
                          "--temperature", "0", "--max-tokens", str(MAX_TOKENS)], capture_output=True, check=True,
                         timeout=300)
    return out.stdout.decode()[:-1]  # mcserve-run ends the text with a newline


def check_running(env, name, url, grpc_address):
    assert grpc_health(grpc_address) == b"\x08\x01", "gRPC health is not SERVING"
    print("gRPC health: SERVING")
    assert urllib.request.urlopen(url + "/ready", timeout=5).status == 200
    print("/ready: 200")
    got, want = streamed_completion(url), mcserve_run_text()
    assert got == want, "streamed %r != mcserve-run %r" % (got, want)
    print("streamed completion equals mcserve-run's greedy text: %r" % got)
    metrics = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    assert "mcserve:generation_tokens_total" in metrics and "mcserve:num_requests_running" in metrics, metrics[:500]
    print("/metrics scraped (%d lines)" % len(metrics.splitlines()))
    uid = docker(env, "exec", name, "id", "-u").stdout.decode().strip()
    assert uid != "0", "the container runs as root"
    print("runs as uid", uid)


def stop_with_sigterm(env, name):
    """SIGTERM, then the exit status, which must be 0 within the grace period (plus start-up slack)."""
    t0 = time.time()
    docker(env, "kill", "--signal", "TERM", name)
    status = int(docker(env, "wait", name, timeout=GRACE_SECONDS + 30).stdout.decode().strip())
    elapsed = time.time() - t0
    assert status == 0, "exit status %d after SIGTERM" % status
    assert elapsed <= GRACE_SECONDS + 10, "SIGTERM took %.1f s (grace %d s)" % (elapsed, GRACE_SECONDS)
    print("SIGTERM: exit 0 after %.1f s" % elapsed)


def build_image(env, attempts=2):
    """docker build, its output streamed; a failed build is retried once (its finished layers are cached, so a
    mirror's transient error costs only the failed step), and the last attempt's final lines end the error."""
    command = ["docker", "build", "--network", "host", "-f", os.path.join(ROOT, "deploy", "docker", "Dockerfile"),
               "-t", TAG, ROOT]
    for attempt in range(1, attempts + 1):
        tail = collections.deque(maxlen=30)
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            print(line, flush=True)
            tail.append(line)
        if proc.wait(timeout=3600) == 0:
            return
        print("docker build attempt %d of %d failed (%d)" % (attempt, attempts, proc.returncode), flush=True)
    raise AssertionError("docker build failed %d times; its last lines:\n%s" % (attempts, "\n".join(tail)))


def run_checks(env):
    t0 = time.time()
    build_image(env)
    size = int(docker(env, "image", "inspect", "-f", "{{.Size}}", TAG).stdout.decode().strip())
    print("built %s in %.0f s: %.0f MB" % (TAG, time.time() - t0, size / 1e6))
    grpc_port, http_port = free_port(), free_port()
    name = "mcserve-image-test-%d" % os.getpid()
    docker(env, "run", "-d", "--network", "host", "--name", name, "-e", "MCSERVE_HOST=127.0.0.1",
           "-e", "MCSERVE_GRPC_PORT=%d" % grpc_port, "-e", "MCSERVE_HTTP_PORT=%d" % http_port,
           "-e", "MCSERVE_SHUTDOWN_GRACE_SECONDS=%d" % GRACE_SECONDS, TAG)
    try:
        url = "http://127.0.0.1:%d" % http_port
        wait_ready(url, name, env)
        check_running(env, name, url, "127.0.0.1:%d" % grpc_port)
        stop_with_sigterm(env, name)
    finally:
        docker(env, "rm", "-f", name, check=False)


def main():
    work = os.environ.get("MCSERVE_IMAGE_WORK", "/tmp/mcserve-image-test")
    os.makedirs(work, exist_ok=True)
    env, stop, reason = docker_daemon.daemon(work)
    if env is None:
        print("image test SKIPPED: no Docker engine can run on this machine: " + reason)
        return SKIP
    try:
        print(docker_daemon.ensure_base_image(env, work))
        run_checks(env)
        print("image test PASSED")
        return 0
    except Exception as e:  # the reason, last, where a CI log's tail shows it (scripts/test.sh repeats it)
        traceback.print_exc(file=sys.stdout)
        print("image test FAILED: %s: %s" % (type(e).__name__, str(e)[-1500:]), flush=True)
        return 1
    finally:
        if stop is not None:
            stop()


if __name__ == "__main__":
    sys.exit(main())
