"""1,000 open streams on each front end do not take 1,000 server threads: the engine pushes output to
the gRPC reactors and the HTTP connections (RequestHandle::OnOutput), so an open stream costs a
callback and a buffer, never a thread or a polling loop. Each test opens 1,000 streams on the fixture
model (64 running, the rest queued), reads each one's first response, counts the server's threads
from /proc, then closes every stream and checks that the engine is idle again (nothing running,
waiting or holding a slot) and the thread count is back.

Run by CTest (`mcserve_open_streams_integration`), which sets $MCSERVE_SERVER and $MCSERVE_PROTO_DIR.
Thread counts are the measure (printed); there is no timing assertion."""
import asyncio
import json
import os
import re
import resource
import time
import urllib.request

import pytest

SERVER = os.environ.get("MCSERVE_SERVER")
if not SERVER:
    pytest.skip("MCSERVE_SERVER not set (run: ctest -R mcserve_open_streams_integration)", allow_module_level=True)

import grpc  # noqa: E402  (Debian's python3-grpcio)
import grpc_stubs  # noqa: E402
from mcserve_process import ROOT, McserveProcess  # noqa: E402

PROTO_DIR = os.environ.get("MCSERVE_PROTO_DIR", os.path.join(ROOT, "proto"))
STREAMS = 1000
PER_CHANNEL = 100  # streams per gRPC connection
THREAD_BOUND = 50  # more server threads with 1,000 open streams than idle: far below one per stream
LIMIT = 100000     # --max-tokens-limit: streams that would run far longer than the test


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    return grpc_stubs.generate(tmp_path_factory.mktemp("stubs"), PROTO_DIR)


@pytest.fixture
def server():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    s = McserveProcess(SERVER, "--max-slots", "64", "--max-waiting", str(STREAMS), "--max-tokens-limit", str(LIMIT))
    yield s
    assert s.stop() == 0
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def engine_gauges(server):
    """(running, waiting, fraction of slots used) from /metrics."""
    host, port = server.http_addr
    text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    def gauge(name):
        return float(re.search(rf"^mcserve:{name}\{{[^}}]*\}} (\S+)$", text, re.M).group(1))
    return gauge("num_requests_running"), gauge("num_requests_waiting"), gauge("state_slot_usage_perc")


def wait_until_idle(server, limit=60):
    deadline = time.monotonic() + limit
    while engine_gauges(server) != (0, 0, 0):
        assert time.monotonic() < deadline, engine_gauges(server)
        time.sleep(0.1)


def settle_threads(server, idle, limit=10):
    """The thread count once it is back within THREAD_BOUND of `idle` (or the last count seen)."""
    deadline = time.monotonic() + limit
    while server.threads() - idle >= THREAD_BOUND and time.monotonic() < deadline:
        time.sleep(0.1)
    return server.threads()


def test_a_thousand_grpc_streams_take_no_thread_each(pb, server):
    generation_pb2, generation_pb2_grpc = pb
    idle = server.threads()
    channels = [grpc.insecure_channel(server.grpc_address, options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(STREAMS // PER_CHANNEL)]
    request = generation_pb2.GenerateRequest(text="The cat watched",
                                             stop=generation_pb2.StopParams(max_tokens=LIMIT, ignore_eos=True))
    streams = []
    for i in range(STREAMS):
        stream = generation_pb2_grpc.GenerationStub(channels[i // PER_CHANNEL]).Generate(request, timeout=120)
        streams.append(stream)
    for stream in streams:
        assert next(stream).request_id  # every stream is open: its first response (the id) arrived
    running, waiting, _ = engine_gauges(server)
    busy = server.threads()
    print(f"\ngRPC: server threads {idle} idle, {busy} with {STREAMS} open streams "
          f"({running:.0f} running, {waiting:.0f} waiting)")
    assert running + waiting == STREAMS
    assert busy - idle < THREAD_BOUND, (idle, busy)
    for stream in streams:
        stream.cancel()
    for channel in channels:
        channel.close()
    wait_until_idle(server)
    assert settle_threads(server, idle) - idle < THREAD_BOUND


async def open_sse_stream(addr, index):
    """A streamed completion on its own connection, read up to its first token event."""
    reader, writer = await asyncio.open_connection(*addr)
    body = json.dumps({"prompt": f"The cat {index}", "max_tokens": LIMIT, "ignore_eos": True, "stream": True}).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=120)
    assert head.startswith(b"HTTP/1.1 200"), head
    return reader, writer


async def http_streams(server, idle):
    opened = await asyncio.gather(*(open_sse_stream(server.http_addr, i) for i in range(STREAMS)))
    running, waiting, _ = engine_gauges(server)
    busy = server.threads()
    for _, writer in opened:
        writer.close()
    return running, waiting, busy


def test_a_thousand_http_streams_take_no_thread_each(server):
    idle = server.threads()
    running, waiting, busy = asyncio.run(http_streams(server, idle))
    print(f"\nHTTP: server threads {idle} idle, {busy} with {STREAMS} open streams "
          f"({running:.0f} running, {waiting:.0f} waiting)")
    assert running + waiting == STREAMS
    assert busy - idle < THREAD_BOUND, (idle, busy)
    wait_until_idle(server)
    assert settle_threads(server, idle) - idle < THREAD_BOUND
