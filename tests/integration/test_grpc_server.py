"""mcserve (the gRPC server) end to end on a fixture model: the first line, greedy output equal to
mcserve-run's, 64 concurrent streams, Abort, client cancellation freeing the slot, bad requests →
INVALID_ARGUMENT naming the field, the API key, health, and SIGTERM → exit 0.

Run by CTest (`mcserve_grpc_integration`), which sets $MCSERVE_SERVER, $MCSERVE_RUN and
$MCSERVE_PROTO_DIR; Python stubs are generated into a temporary directory with protoc and
grpc_python_plugin. Skipped when $MCSERVE_SERVER is not set (e.g. by the mcserve-run suite)."""
import math
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request

import pytest

SERVER = os.environ.get("MCSERVE_SERVER")
if not SERVER:
    pytest.skip("MCSERVE_SERVER not set (run: ctest -R mcserve_grpc_integration)", allow_module_level=True)

import grpc  # noqa: E402  (Debian's python3-grpcio)
import grpc_stubs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.environ.get("MCSERVE_RUN", os.path.join(ROOT, "build", "tools", "mcserve-run"))
PROTO_DIR = os.environ.get("MCSERVE_PROTO_DIR", os.path.join(ROOT, "proto"))
FIXTURE = os.path.join(ROOT, "tests", "data", "models", "gated_deltanet")
LINE = re.compile(r"^mcserve listening grpc=(\S+):(\d+) http=(\S+):(\d+)$")
PROMPT = "The cat watched"
LIMIT = 20000  # long requests run for seconds unless aborted


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    return grpc_stubs.generate(tmp_path_factory.mktemp("stubs"), PROTO_DIR)


class Server:
    def __init__(self, *args, env=None, model=FIXTURE):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen(
            [SERVER, "--model", model, "--host", "127.0.0.1", "--http-port", "0", "--threads", "1",
             "--max-tokens-limit", str(LIMIT), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        line = self.proc.stdout.readline().decode().rstrip("\n")
        m = LINE.match(line)
        assert m, (line, self.proc.stderr.read().decode() if self.proc.poll() is not None else "")
        self.address = f"{m.group(1)}:{m.group(2)}"
        self.http = f"http://{m.group(3)}:{m.group(4)}"
        self.channel = grpc.insecure_channel(self.address)

    def health(self, metadata=None):
        check = self.channel.unary_unary("/grpc.health.v1.Health/Check",
                                         request_serializer=lambda b: b, response_deserializer=lambda b: b)
        return check(b"", timeout=5, metadata=metadata)  # b"\x08\x01" = SERVING

    def gauge(self, name):
        """The value of a gauge labelled only by model in a /metrics scrape."""
        text = urllib.request.urlopen(self.http + "/metrics", timeout=5).read().decode()
        m = re.search(r'^%s\{model_name="[^"]*"\} (\S+)$' % re.escape(name), text, re.M)
        assert m, (name, text[:2000])
        return float(m.group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


@pytest.fixture(scope="module")
def server():
    s = Server("--grpc-port", "0", "--shutdown-grace-seconds", "1")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def stub(pb, server):
    return pb[1].GenerationStub(server.channel)


def generate(pb, stub, text=PROMPT, max_tokens=24, temperature=0.0, **kwargs):
    req = pb[0].GenerateRequest(text=text, sampling=pb[0].SamplingParams(temperature=temperature),
                                stop=pb[0].StopParams(max_tokens=max_tokens), **kwargs)
    return list(stub.Generate(req, timeout=30))


def test_first_line_and_model_info(pb, server, stub):
    info = stub.GetModelInfo(pb[0].GetModelInfoRequest(), timeout=5)
    assert info.family == "gated_deltanet" and info.vocab_size > 0 and info.num_layers > 0
    assert info.max_running_requests == info.num_slots == 16
    assert info.max_tokens_limit == LIMIT
    assert server.health() == b"\x08\x01"


def test_greedy_stream_equals_mcserve_run(pb, stub):
    responses = generate(pb, stub, max_tokens=24)
    assert responses[0].request_id and not responses[0].token_ids  # the id comes first
    assert all(r.request_id == responses[0].request_id for r in responses)
    done = responses[-1].complete
    assert done.finish_reason in (pb[0].FINISH_REASON_LENGTH, pb[0].FINISH_REASON_STOP)
    tokens = [t for r in responses for t in r.token_ids]
    assert done.generated_tokens == len(tokens) == responses[-1].generated_tokens
    assert done.prompt_tokens > 0 and done.time_to_first_token_seconds > 0
    text = "".join(r.text for r in responses)
    run = subprocess.run([RUN, "--model", FIXTURE, "--prompt", PROMPT, "--temperature", "0", "--max-tokens", "24"],
                         capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert text == run.stdout.decode("utf-8")[:-1]  # mcserve-run ends with a newline


def test_deep_memory_model_serves_with_ssc_staging(pb):
    """titans with an MLP memory, SSC with every checkpoint on the host tier: the stream stages pages
    and equals mcserve-run's all-resident greedy text."""
    deep = os.path.join(ROOT, "tests", "data", "models", "titans_mlp")
    mc = ["--mc-aggregation", "ssc", "--mc-segment-size", "4", "--mc-top-k", "2"]
    prompt = "The cat watched the gulls from the window sill, and the gulls"
    s = Server("--grpc-port", "0", *mc, "--checkpoint-device-mib", "0", "--ssc-hot-pages", "2", model=deep)
    try:
        stub = pb[1].GenerationStub(s.channel)
        info = stub.GetModelInfo(pb[0].GetModelInfoRequest(), timeout=5)
        assert info.family == "titans"
        responses = generate(pb, stub, text=prompt, max_tokens=16)
        done = responses[-1].complete
        assert done.checkpoints.stagings > 0, done.checkpoints
        run = subprocess.run([RUN, "--model", deep, "--prompt", prompt, "--temperature", "0", "--max-tokens", "16",
                              *mc], capture_output=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert "".join(r.text for r in responses) == run.stdout.decode("utf-8")[:-1]
    finally:
        assert s.stop() == 0


GRM = ["--mc-aggregation", "grm", "--mc-segment-size", "4"]


@pytest.mark.parametrize("fixture,family,mc", [("lattice", "lattice", []), ("lattice", "lattice", GRM),
                                               ("hope", "hope", []), ("hope_variants", "hope", []),
                                               ("armt", "armt", []), ("armt_wrap", "armt", [])],
                         ids=["lattice", "lattice-grm", "hope", "hope-variants", "armt", "armt-wrap"])
def test_family_streams_what_mcserve_run_writes(pb, fixture, family, mc):
    """The lattice (with and without Memory Caching on its slot matrix), hope and armt (segment closes
    scheduled by the engine) families over gRPC: the greedy stream equals mcserve-run's text."""
    model = os.path.join(ROOT, "tests", "data", "models", fixture)
    s = Server("--grpc-port", "0", *mc, model=model)
    try:
        stub = pb[1].GenerationStub(s.channel)
        assert stub.GetModelInfo(pb[0].GetModelInfoRequest(), timeout=5).family == family
        responses = generate(pb, stub, max_tokens=16)
        assert responses[-1].complete.generated_tokens > 0
        run = subprocess.run([RUN, "--model", model, "--prompt", PROMPT, "--temperature", "0", "--max-tokens", "16",
                              *mc], capture_output=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert "".join(r.text for r in responses) == run.stdout.decode("utf-8")[:-1]
    finally:
        assert s.stop() == 0


def test_armt_greedy_equals_the_official_generate(pb):
    """ARMT's validation item: the served greedy continuation of a BABILong-shaped prompt (whole segments,
    then a short last segment whose tokens plus the generated ones fit in one segment) equals the
    official wrapper's generate() (the reference's reference_generate policy, which never closes the
    last prompt segment); the engine serves the streaming policy, which agrees there."""
    import json
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
    from mcserve_ref.armt import ArmtLM
    from mcserve_ref.safetensors_io import load_model_dir
    model = os.path.join(ROOT, "tests", "data", "models", "armt")
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    seg, vocab = config["segment_size"], config["vocab_size"]
    tail = seg // 2
    prompt = [3 + (7 * i + 5) % (vocab - 3) for i in range(2 * seg + tail)]
    n = seg - tail
    official = ArmtLM(dict(config, generate_policy="reference_generate"), load_model_dir(model)).greedy(prompt, n)
    s = Server("--grpc-port", "0", model=model)
    try:
        stub = pb[1].GenerationStub(s.channel)
        req = pb[0].GenerateRequest(token_ids=pb[0].TokenIds(ids=prompt),
                                    sampling=pb[0].SamplingParams(temperature=0.0),
                                    stop=pb[0].StopParams(max_tokens=n, ignore_eos=True))
        served = [t for r in stub.Generate(req, timeout=30) for t in r.token_ids]
        assert served == [int(t) for t in official]
    finally:
        assert s.stop() == 0


def test_sixty_four_concurrent_streams(pb, stub):
    # 64 streams on 16 state slots: 48 of them wait in the queue first.
    n = 64
    results = [None] * n

    def one(i):
        results[i] = generate(pb, stub, max_tokens=20, temperature=0.8,
                              **{"request_id": f"concurrent-{i}"})

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for i, responses in enumerate(results):
        assert responses is not None, i
        assert responses[0].request_id == f"concurrent-{i}"
        done = responses[-1].complete
        assert done.finish_reason in (pb[0].FINISH_REASON_LENGTH, pb[0].FINISH_REASON_STOP)
        assert done.generated_tokens == sum(len(r.token_ids) for r in responses) >= 1


def long_request(pb, **kwargs):
    return pb[0].GenerateRequest(text=PROMPT, sampling=pb[0].SamplingParams(temperature=0.8, seed=1),
                                 stop=pb[0].StopParams(max_tokens=LIMIT, ignore_eos=True), **kwargs)


@pytest.mark.parametrize("client_id", ["", "my-request"])
def test_abort_stops_a_stream(pb, stub, client_id):
    stream = stub.Generate(long_request(pb, request_id=client_id), timeout=30)
    first = next(stream)
    if client_id:
        assert first.request_id == client_id
    stub.Abort(pb[0].AbortRequest(request_id=first.request_id), timeout=5)
    rest = list(stream)
    done = rest[-1].complete
    assert done.finish_reason == pb[0].FINISH_REASON_CANCELLED
    assert done.generated_tokens < LIMIT
    with pytest.raises(grpc.RpcError) as e:  # finished: no longer known
        stub.Abort(pb[0].AbortRequest(request_id=first.request_id), timeout=5)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("how", ["cancel", "deadline"])
def test_client_cancel_frees_the_slot(pb, server, stub, how):
    before = stub.GetServerInfo(pb[0].GetServerInfoRequest(), timeout=5).finished_cancelled
    stream = stub.Generate(long_request(pb), timeout=30 if how == "cancel" else 0.3)
    next(stream)
    next(stream)
    if how == "cancel":
        assert server.gauge("mcserve:num_requests_running") == 1  # the scrape sees the running stream
        stream.cancel()
    else:  # the deadline passes long before LIMIT tokens
        with pytest.raises(grpc.RpcError) as e:
            list(stream)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    deadline = time.time() + 15
    while True:
        info = stub.GetServerInfo(pb[0].GetServerInfoRequest(), timeout=5)
        if info.running == 0 and info.waiting == 0 and info.finished_cancelled > before:
            break
        assert time.time() < deadline, info
        time.sleep(0.05)
    assert info.slots_used == 0
    # What Prometheus sees: the running-requests gauge is back to 0.
    assert server.gauge("mcserve:num_requests_running") == 0
    assert server.gauge("mcserve:state_slot_usage_perc") == 0


def expect_invalid(pb, stub, field, **request):
    with pytest.raises(grpc.RpcError) as e:
        list(stub.Generate(pb[0].GenerateRequest(**request), timeout=10))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, e.value.code(), e.value.details())
    assert field in e.value.details(), (field, e.value.details())


def test_malformed_requests(pb, server, stub):
    S, P = pb[0].SamplingParams, pb[0].StopParams
    expect_invalid(pb, stub, "text", text="")
    expect_invalid(pb, stub, "prompt")
    expect_invalid(pb, stub, "token_ids", token_ids=pb[0].TokenIds(ids=[]))
    expect_invalid(pb, stub, "prompt token", token_ids=pb[0].TokenIds(ids=[1, 10**6]))
    expect_invalid(pb, stub, "temperature", text="a", sampling=S(temperature=math.nan))
    expect_invalid(pb, stub, "temperature", text="a", sampling=S(temperature=-1))
    expect_invalid(pb, stub, "top_p", text="a", sampling=S(top_p=0))
    expect_invalid(pb, stub, "top_p", text="a", sampling=S(top_p=1.5))
    expect_invalid(pb, stub, "max_tokens", text="a", stop=P(max_tokens=LIMIT + 1))
    expect_invalid(pb, stub, "max_tokens", text="a", stop=P(max_tokens=0))
    expect_invalid(pb, stub, "logprobs", text="a", logprobs=21)
    expect_invalid(pb, stub, "stop_strings[0]", text="a", stop=P(stop=[""]))
    # What protobuf itself would refuse, sent raw: invalid UTF-8 in a string field (the prompt, a stop
    # string), bytes that are no GenerateRequest, and a message over --max-request-bytes (4 MiB).
    raw = server.channel.unary_stream("/mcserve.v1.Generation/Generate",
                                      request_serializer=lambda b: b, response_deserializer=lambda b: b)
    for field, request in (("text", b"\x12\x02\xff\xfe"),
                           ("stop.stop", b"\x12\x01a" + b"\x2a\x04\x22\x02\xff\xfe"),
                           ("malformed protobuf", b"\x12\x05ab"),
                           ("--max-request-bytes", pb[0].GenerateRequest(text="a" * (5 << 20)).SerializeToString())):
        with pytest.raises(grpc.RpcError) as e:
            list(raw(request, timeout=30))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, e.value.code(), e.value.details())
        assert field in e.value.details(), (field, e.value.details())
    assert server.health() == b"\x08\x01"
    assert generate(pb, stub, max_tokens=4)[-1].complete.generated_tokens >= 1


def test_reflection_serves_what_grpcurl_asks(server):
    # grpcurl's `list` and `describe`: ServerReflectionInfo with list_services (field 7) and
    # file_containing_symbol (field 4), written raw (Debian has no reflection client module).
    info = server.channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                                        request_serializer=lambda b: b, response_deserializer=lambda b: b)
    symbol = b"mcserve.v1.Generation"
    listed, described = list(info(iter([b"\x3a\x00", b"\x22" + bytes([len(symbol)]) + symbol]), timeout=10))
    assert b"mcserve.v1.Generation" in listed and b"grpc.health.v1.Health" in listed, listed
    assert b"GenerateRequest" in described and b"generation.proto" in described, described[:200]


def test_tokenize(pb, stub):
    ids = stub.Tokenize(pb[0].TokenizeRequest(text=PROMPT, add_bos=True), timeout=5).token_ids
    done = generate(pb, stub, max_tokens=2)[-1].complete
    assert len(ids) == done.prompt_tokens and ids[0] == 1


def test_api_key(pb):
    s = Server("--grpc-port", "0", env={"MCSERVE_API_KEY": "sekret", "MCSERVE_SHUTDOWN_GRACE_SECONDS": "0"})
    try:
        stub = pb[1].GenerationStub(s.channel)
        for metadata in (None, [("authorization", "Bearer wrong")], [("authorization", "sekret")]):
            with pytest.raises(grpc.RpcError) as e:
                stub.GetServerInfo(pb[0].GetServerInfoRequest(), timeout=5, metadata=metadata)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as e:
                list(stub.Generate(pb[0].GenerateRequest(text="a"), timeout=5, metadata=metadata))
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert s.health() == b"\x08\x01"  # health needs no key
        good = [("authorization", "Bearer sekret")]
        assert stub.GetServerInfo(pb[0].GetServerInfoRequest(), timeout=5, metadata=good).slots_total == 16
        assert list(stub.Generate(pb[0].GenerateRequest(text="a"), timeout=10, metadata=good))[-1].HasField("complete")
    finally:
        assert s.stop() == 0


def test_command_line_beats_environment(pb):
    s = Server("--grpc-port", "0", "--max-slots", "3", env={"MCSERVE_MAX_SLOTS": "5"})
    try:
        info = pb[1].GenerationStub(s.channel).GetModelInfo(pb[0].GetModelInfoRequest(), timeout=5)
        assert info.num_slots == 3
    finally:
        assert s.stop() == 0


def test_sigterm_cancels_streams_and_exits_zero(pb):
    s = Server("--grpc-port", "0", "--shutdown-grace-seconds", "0.3")
    stub = pb[1].GenerationStub(s.channel)
    stream = stub.Generate(long_request(pb), timeout=30)
    next(stream)
    s.proc.send_signal(signal.SIGTERM)
    try:
        rest = list(stream)
        assert rest[-1].complete.finish_reason == pb[0].FINISH_REASON_CANCELLED
    except grpc.RpcError as e:  # the stream may be cut by the server's shutdown instead
        assert e.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE), e
    assert s.proc.wait(timeout=20) == 0
    assert b"shutting down" in s.proc.stderr.read()


def test_tls(pb, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    s = Server("--grpc-port", "0", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        secure = grpc.secure_channel(s.address, creds, options=[("grpc.ssl_target_name_override", "localhost")])
        info = pb[1].GenerationStub(secure).GetModelInfo(pb[0].GetModelInfoRequest(), timeout=10)
        assert info.vocab_size > 0
        with pytest.raises(grpc.RpcError):  # plaintext is refused
            pb[1].GenerationStub(s.channel).GetModelInfo(pb[0].GetModelInfoRequest(), timeout=3)
    finally:
        assert s.stop() == 0


def test_help_documents_every_flag():
    out = subprocess.run([SERVER, "--help"], capture_output=True, timeout=30)
    text = (out.stdout + out.stderr).decode()
    for flag in ("model", "host", "grpc_port", "http_port", "device", "max_slots", "max_batch_tokens", "max_waiting",
                 "max_prompt_tokens", "max_tokens_limit", "max_request_bytes", "checkpoint_device_mib", "checkpoint_host_mib",
                 "ssc_hot_pages", "prefix_caching", "prefix_block", "api_key", "tls_cert", "tls_key", "tls_client_ca",
                 "shutdown_grace_seconds"):
        assert f"--{flag} (" in text, flag
    assert "MCSERVE_" in text


def test_bad_flag_value_fails_cleanly():
    r = subprocess.run([SERVER, "--model", FIXTURE, "--device", "tpu", "--grpc-port", "0"], capture_output=True, timeout=30)
    assert r.returncode == 1 and b"--device" in r.stderr and r.stdout == b""
