"""mcserve's gRPC front door against a hostile client, on loopback with the fixture model: request ids
that cannot be guessed or squatted, Abort only by the request's owner, reflection (v1 and v1alpha)
behind the API key and able to describe everything it lists, malformed bytes and oversized Tokenize
requests → INVALID_ARGUMENT, and a client that stops reading losing its slot (1,000 open streams:
test_open_streams.py).

Run by CTest (`mcserve_grpc_hardening`), which sets $MCSERVE_SERVER and $MCSERVE_PROTO_DIR; Python
stubs are generated into a temporary directory. Skipped when $MCSERVE_SERVER is not set."""
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest

SERVER = os.environ.get("MCSERVE_SERVER")
if not SERVER:
    pytest.skip("MCSERVE_SERVER not set (run: ctest -R mcserve_grpc_hardening)", allow_module_level=True)

import grpc  # noqa: E402  (Debian's python3-grpcio)
import grpc_stubs  # noqa: E402
from mcserve_process import ROOT, McserveProcess  # noqa: E402
from google.protobuf import descriptor_pb2  # noqa: E402

PROTO_DIR = os.environ.get("MCSERVE_PROTO_DIR", os.path.join(ROOT, "proto"))
SERVER_ID = re.compile(r"^req-[0-9a-f]{32}$")
LIMIT = 20000  # long requests run for seconds unless aborted
MAX_PROMPT_TOKENS = 256
KEY = "sekret"
AUTH = [("authorization", f"Bearer {KEY}")]
SERVED = {"mcserve.v1.Generation", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
          "grpc.reflection.v1alpha.ServerReflection"}
IDENTITY = {"request_serializer": lambda b: b, "response_deserializer": lambda b: b}




@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    """(generation_pb2, generation_pb2_grpc, reflection_pb2): the reflection messages from a copy of
    proto/grpc/reflection/v1/reflection.proto under another file name, so that no Python package
    named `grpc` shadows grpcio's (v1alpha is the same on the wire)."""
    out = tmp_path_factory.mktemp("stubs")
    shutil.copy(os.path.join(PROTO_DIR, "grpc", "reflection", "v1", "reflection.proto"), out / "mcserve_test_reflection.proto")
    generation_pb2, generation_pb2_grpc = grpc_stubs.generate(out, PROTO_DIR)
    subprocess.run(["protoc", f"-I{out}", f"--python_out={out}", str(out / "mcserve_test_reflection.proto")], check=True)
    import mcserve_test_reflection_pb2
    return generation_pb2, generation_pb2_grpc, mcserve_test_reflection_pb2


def connect(address, **options):
    """A channel on its own TCP connection (grpcio otherwise shares one between equal channels)."""
    return grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1), *options.items()])


class Server(McserveProcess):
    def __init__(self, *args, env=None):
        super().__init__(SERVER, "--max-tokens-limit", str(LIMIT), *args, env=env)
        self.address = self.grpc_address
        self.http = f"http://{self.http_addr[0]}:{self.http_addr[1]}"

    def metrics(self, key):
        req = urllib.request.Request(self.http + "/metrics", headers={"Authorization": f"Bearer {key}"})
        return urllib.request.urlopen(req, timeout=10).read().decode()


@pytest.fixture(scope="module")
def server():
    s = Server("--max-prompt-tokens", str(MAX_PROMPT_TOKENS))
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def keyed_server():
    s = Server("--api-key", KEY)
    yield s
    assert s.stop() == 0


def long_request(pb, **kwargs):
    return pb[0].GenerateRequest(text="The cat watched", sampling=pb[0].SamplingParams(temperature=0.8, seed=1),
                                 stop=pb[0].StopParams(max_tokens=LIMIT, ignore_eos=True), **kwargs)


def start(pb, channel, metadata=None, **kwargs):
    """A long stream on `channel` and its first response (the request id)."""
    stream = pb[1].GenerationStub(channel).Generate(long_request(pb, **kwargs), timeout=60, metadata=metadata)
    return stream, next(stream)


def abort(pb, channel, request_id, metadata=None):
    """Abort's status code and details."""
    try:
        pb[1].GenerationStub(channel).Abort(pb[0].AbortRequest(request_id=request_id), timeout=10, metadata=metadata)
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details()


def expect_cancelled(pb, stream):
    """The rest of an aborted stream ends with finish_reason CANCELLED."""
    rest = list(stream)
    assert rest[-1].complete.finish_reason == pb[0].FINISH_REASON_CANCELLED
    assert rest[-1].complete.generated_tokens < LIMIT


def expect_still_running(stream):
    """A stream that was not aborted keeps producing tokens."""
    for _ in range(3):
        response = next(stream)
        assert not response.HasField("complete"), response
    stream.cancel()


def expect_refused_like_unknown(code, details, request_id, unknown_details, unknown_id):
    assert code == grpc.StatusCode.NOT_FOUND, (code, details)
    assert details.replace(request_id, "ID") == unknown_details.replace(unknown_id, "ID"), (details, unknown_details)


def test_server_ids_are_random_and_distinct(pb, server):
    channel = connect(server.address)
    ids = []
    for _ in range(3):
        stream, first = start(pb, channel)
        stream.cancel()
        ids.append(first.request_id)
    assert all(SERVER_ID.match(i) for i in ids), ids
    assert len(set(ids)) == len(ids), ids


def test_without_keys_a_client_id_is_abortable_from_its_connection_only(pb, server):
    owner, other = connect(server.address), connect(server.address)
    stream, first = start(pb, owner, request_id="job-1")
    assert first.request_id == "job-1"
    _, unknown = abort(pb, other, "job-404")
    code, details = abort(pb, other, "job-1")
    expect_refused_like_unknown(code, details, "job-1", unknown, "job-404")
    assert abort(pb, owner, "job-1")[0] == grpc.StatusCode.OK
    expect_cancelled(pb, stream)


def test_without_keys_a_server_id_is_a_capability(pb, server):
    # What the Python client's `abort ID` command relies on: another connection holding the id.
    owner, other = connect(server.address), connect(server.address)
    stream, first = start(pb, owner)
    assert abort(pb, other, first.request_id)[0] == grpc.StatusCode.OK
    expect_cancelled(pb, stream)


def test_with_a_key_a_connection_without_it_can_abort_nothing(pb, keyed_server):
    owner, other = connect(keyed_server.address), connect(keyed_server.address)
    anonymous, first = start(pb, owner, metadata=AUTH)
    named, _ = start(pb, owner, metadata=AUTH, request_id="job-1")
    assert SERVER_ID.match(first.request_id)
    for request_id in (first.request_id, "job-1"):
        assert abort(pb, other, request_id)[0] == grpc.StatusCode.UNAUTHENTICATED
        assert abort(pb, other, request_id, [("authorization", "Bearer wrong")])[0] == grpc.StatusCode.UNAUTHENTICATED
    # The caller is the key, not the connection: the same key on another connection owns both.
    assert abort(pb, other, "job-1", AUTH)[0] == grpc.StatusCode.OK
    assert abort(pb, other, first.request_id, AUTH)[0] == grpc.StatusCode.OK
    expect_cancelled(pb, named)
    expect_cancelled(pb, anonymous)


def caller_count(text, family, **labels):
    """The value of `family`'s sample whose labels include `labels` (0 if there is none)."""
    for line in text.splitlines():
        if line.startswith(family + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_two_named_keys_cannot_abort_each_others_requests(pb, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("alice key-a\nbob key-b\n")
    s = Server("--api-key-file", str(keys))
    try:
        alice, bob = [("authorization", "Bearer key-a")], [("authorization", "Bearer key-b")]
        channel = connect(s.address)
        anonymous, first = start(pb, channel, metadata=alice)
        named, _ = start(pb, channel, metadata=alice, request_id="job-1")
        bobs, bobs_first = start(pb, connect(s.address), metadata=bob, request_id="job-1")  # his own job-1
        assert bobs_first.request_id == "job-1"
        _, unknown = abort(pb, channel, "job-404", bob)
        code, details = abort(pb, channel, first.request_id, bob)  # alice's server id
        expect_refused_like_unknown(code, details, first.request_id, unknown, "job-404")
        assert abort(pb, channel, "job-1", bob)[0] == grpc.StatusCode.OK  # bob's own job-1, not alice's
        expect_cancelled(pb, bobs)
        code, details = abort(pb, channel, "job-1", bob)  # bob has none left; alice's stays hers
        expect_refused_like_unknown(code, details, "job-1", unknown, "job-404")
        expect_still_running(named)
        assert abort(pb, channel, first.request_id, alice)[0] == grpc.StatusCode.OK
        expect_cancelled(pb, anonymous)
        # The per-key metrics: each key's aborts and finished requests under its own name, a
        # refused key counted apart.
        with pytest.raises(urllib.error.HTTPError) as refused:
            s.metrics("key-wrong")
        assert refused.value.code == 401
        text = s.metrics("key-b")
        assert caller_count(text, "mcserve:caller_aborts_total", api_key_name="alice") == 1
        assert caller_count(text, "mcserve:caller_aborts_total", api_key_name="bob") == 1
        assert caller_count(text, "mcserve:caller_requests_total", api_key_name="alice",
                            finished_reason="cancelled") == 2  # one aborted, one cancelled by its client
        assert caller_count(text, "mcserve:caller_requests_total", api_key_name="bob",
                            finished_reason="cancelled") == 1
        assert caller_count(text, "mcserve:caller_prompt_tokens_total", api_key_name="bob") > 0  # aborted maybe before a token
        assert caller_count(text, "mcserve:unauthenticated_requests_total") == 1
    finally:
        assert s.stop() == 0


def test_squatting_names_does_not_affect_other_callers(pb, server):
    squatter, victim = connect(server.address), connect(server.address)
    # The old server ids (req-N) are ordinary client ids now; server-shaped ids are refused.
    held = [start(pb, squatter, request_id=f"req-{n}")[0] for n in range(1, 6)]
    _, first = start(pb, victim)
    with pytest.raises(grpc.RpcError) as e:
        start(pb, squatter, request_id=first.request_id)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
    # Anonymous requests of another caller are not disturbed.
    for _ in range(5):
        stream, response = start(pb, victim)
        assert SERVER_ID.match(response.request_id)
        stream.cancel()
    # Two callers may use the same client id; the same caller may not reuse a live one.
    mine, _ = start(pb, victim, request_id="req-1")
    with pytest.raises(grpc.RpcError) as e:
        start(pb, victim, request_id="req-1")
    assert e.value.code() == grpc.StatusCode.ALREADY_EXISTS, e.value
    for stream in held + [mine]:
        stream.cancel()


def reflect(channel, version, requests, metadata=None):
    info = channel.stream_stream(f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo", **IDENTITY)
    return list(info(iter(requests), timeout=10, metadata=metadata))


def test_reflection_needs_the_key(pb, keyed_server):
    channel = connect(keyed_server.address)
    list_services = pb[2].ServerReflectionRequest(list_services="").SerializeToString()
    for version in ("v1", "v1alpha"):
        for metadata in (None, [("authorization", "Bearer wrong")]):
            with pytest.raises(grpc.RpcError) as e:
                reflect(channel, version, [list_services], metadata)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, (version, e.value)
        assert reflect(channel, version, [list_services], AUTH)
    check = channel.unary_unary("/grpc.health.v1.Health/Check", **IDENTITY)
    assert check(b"", timeout=5) == b"\x08\x01"  # health needs no key


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_reflection_lists_and_describes_every_service(pb, keyed_server, version):
    R = pb[2]
    channel = connect(keyed_server.address)
    listed, = reflect(channel, version, [R.ServerReflectionRequest(list_services="*").SerializeToString()], AUTH)
    names = {s.name for s in R.ServerReflectionResponse.FromString(listed).list_services_response.service}
    assert names == SERVED, names
    requests = [R.ServerReflectionRequest(file_containing_symbol=name).SerializeToString() for name in sorted(names)]
    requests.append(R.ServerReflectionRequest(file_containing_symbol="mcserve.v1.Generation.Generate").SerializeToString())
    requests.append(R.ServerReflectionRequest(file_by_filename="mcserve/v1/generation.proto").SerializeToString())
    answers = [R.ServerReflectionResponse.FromString(a) for a in reflect(channel, version, requests, AUTH)]
    assert len(answers) == len(requests)
    for name, answer in zip(sorted(names) + ["mcserve.v1.Generation", "mcserve.v1.Generation"], answers):
        assert answer.HasField("file_descriptor_response"), (name, answer.error_response)
        files = [descriptor_pb2.FileDescriptorProto.FromString(b)
                 for b in answer.file_descriptor_response.file_descriptor_proto]
        package, service = name.rsplit(".", 1)
        assert files[0].package == package, (name, files[0].name)
        assert service in [s.name for s in files[0].service], (name, files[0].service)
        present = {f.name for f in files}
        assert all(d in present for f in files for d in f.dependency), (name, present)


def test_reflection_errors_are_error_responses(pb, keyed_server):
    R = pb[2]
    channel = connect(keyed_server.address)
    requests = [R.ServerReflectionRequest(file_containing_symbol="no.such.Service"),
                R.ServerReflectionRequest(file_by_filename="no/such.proto"),
                R.ServerReflectionRequest(all_extension_numbers_of_type="no.such.Message"),
                R.ServerReflectionRequest(file_containing_extension=R.ExtensionRequest(
                    containing_type="mcserve.v1.GenerateRequest", extension_number=100))]
    answers = reflect(channel, "v1", [r.SerializeToString() for r in requests], AUTH)
    for request, raw in zip(requests, answers):
        answer = R.ServerReflectionResponse.FromString(raw)
        assert answer.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0], (request, answer)
        assert answer.original_request == request
    numbers, = reflect(channel, "v1", [R.ServerReflectionRequest(
        all_extension_numbers_of_type="mcserve.v1.GenerateRequest").SerializeToString()], AUTH)
    answer = R.ServerReflectionResponse.FromString(numbers).all_extension_numbers_response
    assert answer.base_type_name == "mcserve.v1.GenerateRequest" and not answer.extension_number


@pytest.mark.parametrize("method", ["Abort", "Tokenize", "GetModelInfo", "GetServerInfo", "Generate"])
def test_malformed_bytes_are_invalid_argument(server, method):
    channel = connect(server.address)
    path = f"/mcserve.v1.Generation/{method}"
    call = channel.unary_stream(path, **IDENTITY) if method == "Generate" else channel.unary_unary(path, **IDENTITY)
    with pytest.raises(grpc.RpcError) as e:
        result = call(b"\xff\xff\xff", timeout=10)
        if method == "Generate":
            list(result)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, e.value.code(), e.value.details())
    assert "malformed protobuf" in e.value.details(), e.value.details()


def test_malformed_reflection_request_is_invalid_argument(keyed_server):
    with pytest.raises(grpc.RpcError) as e:
        reflect(connect(keyed_server.address), "v1", [b"\xff\xff\xff"], AUTH)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value


def tokenize_error(pb, server, text):
    with pytest.raises(grpc.RpcError) as e:
        pb[1].GenerationStub(connect(server.address)).Tokenize(pb[0].TokenizeRequest(text=text), timeout=20)
    return e.value


def test_oversized_tokenize_is_refused(pb, server):
    stub = pb[1].GenerationStub(connect(server.address))
    assert len(stub.Tokenize(pb[0].TokenizeRequest(text="The cat watched"), timeout=10).token_ids) > 0
    # Over --max-request-bytes (4 MiB): refused before it is parsed.
    e = tokenize_error(pb, server, "a" * (5 << 20))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "--max-request-bytes" in e.details(), e
    # Too long for --max-prompt-tokens by its size alone (3 MB): refused before it is tokenized.
    e = tokenize_error(pb, server, "the cat " * 400000)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "--max-prompt-tokens" in e.details(), e
    assert "bytes" in e.details(), e.details()
    # Short enough to try, but more tokens than the limit once tokenized.
    words = " ".join(f"w{i}" for i in range(MAX_PROMPT_TOKENS))
    e = tokenize_error(pb, server, words)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "--max-prompt-tokens" in e.details(), e
    assert "tokens" in e.details(), e.details()


def wait_idle(pb, address, before_cancelled=None, timeout=60):
    """GetServerInfo once nothing runs or waits (and more requests were cancelled than `before_cancelled`)."""
    stub = pb[1].GenerationStub(connect(address))
    deadline = time.time() + timeout
    while True:
        info = stub.GetServerInfo(pb[0].GetServerInfoRequest(), timeout=10)
        cancelled = before_cancelled is None or info.finished_cancelled > before_cancelled
        if info.running == 0 and info.waiting == 0 and info.slots_used == 0 and cancelled:
            return info
        assert time.time() < deadline, info
        time.sleep(0.1)


def test_a_client_that_stops_reading_loses_its_slot(pb):
    # With BDP probing off the client's HTTP/2 stream window stays at 64 KiB and grows only as the
    # application reads: a client that stops calling next() stops the server's writes.
    s = Server("--write-timeout-seconds", "2")
    try:
        stub = pb[1].GenerationStub(connect(s.address))
        before = stub.GetServerInfo(pb[0].GetServerInfoRequest(), timeout=10).finished_cancelled
        stream, _ = start(pb, connect(s.address, **{"grpc.http2.bdp_probe": 0}))
        info = wait_idle(pb, s.address, before_cancelled=before)
        assert info.tokens_generated < LIMIT, info  # it stalled, it did not run to max_tokens
        # The server cancelled the call as well (nothing is held): once the client reads again it
        # gets what was buffered, then CANCELLED. Had the call stayed open, the server would resume
        # writing and end it with the engine's DEADLINE_EXCEEDED instead.
        with pytest.raises(grpc.RpcError) as e:
            for response in stream:
                assert not response.HasField("complete"), response
        assert e.value.code() == grpc.StatusCode.CANCELLED, e.value
    finally:
        assert s.stop() == 0
