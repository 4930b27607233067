"""SIGTERM with both front ends busy: gRPC and HTTP streams in flight, connections that never speak,
one that sent half a header, an idle keep-alive connection, and a client that stopped reading.

- Both front ends stop admitting at once (HTTP completions 503, /ready 503, gRPC UNAVAILABLE and
  health NOT_SERVING; /health stays 200), streams in flight finish normally within the grace, and
  the process exits 0 as soon as they have, idle and silent connections holding nothing.
- A stream that cannot finish in the grace (its client stopped reading) is cancelled at its end and
  the process still exits 0.
- A second SIGTERM exits at once (status 128 + 15).

Run by CTest (`mcserve_shutdown_integration`), which sets $MCSERVE_SERVER and $MCSERVE_PROTO_DIR.
Time bounds below are liveness limits (generous multiples of what a healthy server needs), never
performance assertions."""
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

SERVER = os.environ.get("MCSERVE_SERVER")
if not SERVER:
    pytest.skip("MCSERVE_SERVER not set (run: ctest -R mcserve_shutdown_integration)", allow_module_level=True)

import grpc  # noqa: E402  (Debian's python3-grpcio)
import grpc_stubs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_DIR = os.environ.get("MCSERVE_PROTO_DIR", os.path.join(ROOT, "proto"))
FIXTURE = os.path.join(ROOT, "tests", "data", "models", "gated_deltanet")
LINE = re.compile(r"^mcserve listening grpc=(\S+):(\d+) http=(\S+):(\d+)$")
LIMIT = 100000


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    return grpc_stubs.generate(tmp_path_factory.mktemp("stubs"), PROTO_DIR)


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen(
            [SERVER, "--model", FIXTURE, "--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0",
             "--threads", "1", "--max-tokens-limit", str(LIMIT), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline().decode().rstrip("\n")
        m = LINE.match(line)
        assert m, (line, self.proc.stderr.read().decode() if self.proc.poll() is not None else "")
        self.grpc = f"{m.group(1)}:{m.group(2)}"
        self.http = (m.group(3), int(m.group(4)))
        self.channel = grpc.insecure_channel(self.grpc)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def http_request(addr, method, path, body=None, timeout=10):
    """One HTTP/1.1 request on a fresh connection: (status, body)."""
    with socket.create_connection(addr, timeout=timeout) as s:
        data = json.dumps(body).encode() if body is not None else b""
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(data)}\r\n"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        s.sendall(head.encode() + b"\r\n" + data)
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    raw = b"".join(chunks)
    status = int(raw.split(b" ", 2)[1])
    return status, raw.partition(b"\r\n\r\n")[2]


def open_sse(addr, max_tokens, rcvbuf=None):
    """Starts a streamed completion on a raw socket; returns the socket after the response head."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(30)
    s.connect(addr)
    body = json.dumps({"prompt": "The cat watched", "max_tokens": max_tokens, "ignore_eos": True,
                       "stream": True, "temperature": 0}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        assert b, head
        head += b
    assert head.startswith(b"HTTP/1.1 200"), head
    return s


def read_sse_to_end(s):
    """Reads a stream opened by open_sse to its end: (finish_reason of the last chunk, saw [DONE])."""
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
        if b"data: [DONE]" in data:
            break
    finish = None
    for m in re.finditer(rb'"finish_reason":\s*"(\w+)"', data):
        finish = m.group(1).decode()
    return finish, b"data: [DONE]" in data


def grpc_stream(pb, channel, max_tokens):
    stub = pb[1].GenerationStub(channel)
    req = pb[0].GenerateRequest(text="The cat watched", sampling=pb[0].SamplingParams(temperature=0),
                                stop=pb[0].StopParams(max_tokens=max_tokens, ignore_eos=True))
    return stub.Generate(req, timeout=120)


def health_status(channel):
    check = channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=lambda b: b,
                                response_deserializer=lambda b: b)
    return check(b"", timeout=5)  # b"\x08\x01" SERVING, b"\x08\x02" NOT_SERVING


def idle_sockets(addr):
    """A connection that never speaks, one that sent half a request head, and an idle keep-alive one."""
    silent = socket.create_connection(addr)
    partial = socket.create_connection(addr)
    partial.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    keepalive = socket.create_connection(addr)
    keepalive.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert keepalive.recv(4096).startswith(b"HTTP/1.1 200")
    return [silent, partial, keepalive]


def test_drain_refuses_new_work_finishes_streams_and_exits(pb):
    s = Server("--shutdown-grace-seconds", "60")
    try:
        idle = idle_sockets(s.http)
        tokens = 20000  # seconds of work on one thread
        g = grpc_stream(pb, s.channel, tokens)
        first = next(g)
        assert first.request_id
        sse = open_sse(s.http, tokens)
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert s.proc.poll() is None, "exited with streams in flight"
        # New work is refused by both front ends; liveness stays.
        status, body = http_request(s.http, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2})
        assert status == 503, body
        assert http_request(s.http, "GET", "/ready")[0] == 503
        assert http_request(s.http, "GET", "/health")[0] == 200
        with pytest.raises(grpc.RpcError) as refused:
            list(grpc_stream(pb, s.channel, 2))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert health_status(s.channel) == b"\x08\x02"
        # The streams in flight finish normally.
        generated, reason = 0, None
        for r in g:
            generated = r.generated_tokens or generated
            if r.HasField("complete"):
                reason = r.complete.finish_reason
        assert reason == pb[0].FINISH_REASON_LENGTH and generated == tokens
        assert read_sse_to_end(sse) == ("length", True)
        # Nothing in flight: the process exits well before the 60 s grace, despite the idle sockets.
        assert s.proc.wait(timeout=30) == 0
        for sock in idle + [sse]:
            sock.close()
    finally:
        s.kill()


def test_grace_expiry_cancels_a_stalled_stream_and_exits(pb):
    s = Server("--shutdown-grace-seconds", "2", "--write-timeout-seconds", "600")
    try:
        stalled = open_sse(s.http, LIMIT, rcvbuf=4096)  # never read again
        g = grpc_stream(pb, s.channel, LIMIT)
        next(g)
        time.sleep(1)
        s.proc.send_signal(signal.SIGTERM)
        reason = None
        for r in g:
            if r.HasField("complete"):
                reason = r.complete.finish_reason
        assert reason in (pb[0].FINISH_REASON_CANCELLED, pb[0].FINISH_REASON_LENGTH)
        assert s.proc.wait(timeout=30) == 0
        stalled.close()
    finally:
        s.kill()


def test_second_sigterm_exits_at_once(pb):
    s = Server("--shutdown-grace-seconds", "600")
    try:
        g = grpc_stream(pb, s.channel, LIMIT)
        next(g)
        stalled = open_sse(s.http, LIMIT, rcvbuf=4096)
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert s.proc.poll() is None
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=10) == 128 + signal.SIGTERM
        assert b"second signal" in s.proc.stderr.read()
        stalled.close()
    finally:
        s.kill()
