"""mcserve-cli (the C++ client) end to end against mcserve on loopback (fixture model, one thread):
stream output equal to generate output, --json, info / server-info / tokenize / health, repeated
--stop, abort by the server's request id from a second CLI process, Ctrl-C cancelling a stream, bad arguments
(client- and server-side) naming the field, the API key, TLS with a server name override and mutual
TLS, and serve_load (whose streams are GenerationClient::GenerateAsync's): a smoke run, many streams at
once, requests the server rejects, and a server killed mid-wave.

Run by CTest (`cpp_client_test`), which sets $MCSERVE_SERVER, $MCSERVE_CLI and $MCSERVE_SERVE_LOAD
(empty when the benchmarks are not built)."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

SERVER = os.environ["MCSERVE_SERVER"]
CLI = os.environ["MCSERVE_CLI"]
SERVE_LOAD = os.environ.get("MCSERVE_SERVE_LOAD", "")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIXTURE = os.path.join(ROOT, "tests", "data", "models", "gated_deltanet")
LINE = re.compile(r"^mcserve listening grpc=(\S+):(\d+) http=(\S+):(\d+)$")
PROMPT = "The cat watched"
LIMIT = 1000000  # long requests run for a minute unless aborted
GREEDY = ["--temperature", "0", "--max-tokens", "24"]


class Server:
    """mcserve on a free loopback port; `args` are extra flags."""

    def __init__(self, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCSERVE_")}
        self.proc = subprocess.Popen(
            [SERVER, "--model", FIXTURE, "--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0",
             "--threads", "1", "--max-tokens-limit", str(LIMIT), "--shutdown-grace-seconds", "0.5", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        line = self.proc.stdout.readline().decode().rstrip("\n")
        m = LINE.match(line)
        assert m, (line, self.proc.stderr.read().decode() if self.proc.poll() is not None else "")
        self.port = int(m.group(2))
        self.address = f"127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


def cli(*args, address=None, env=None, timeout=30):
    """Runs mcserve-cli (without MCSERVE_* from the caller's environment unless given in `env`)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("MCSERVE_")}
    e.update(env or {})
    cmd = [CLI] + (["--address", address] if address else []) + list(args)
    return subprocess.run(cmd, capture_output=True, timeout=timeout, env=e)


def ok(result):
    assert result.returncode == 0, (result.returncode, result.stderr.decode())
    return result.stdout.decode()


def summary(result):
    """The key=value pairs of the summary line on stderr."""
    line = result.stderr.decode().strip().splitlines()[-1]
    return dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line))


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    assert s.stop() == 0


def test_stream_equals_generate(server):
    streamed = cli(*GREEDY, "stream", PROMPT, address=server.address)
    whole = cli(*GREEDY, "generate", PROMPT, address=server.address)
    assert ok(streamed) == ok(whole) and len(whole.stdout) > 1 and whole.stdout.endswith(b"\n")
    s = summary(whole)
    assert s["finish_reason"] in ("length", "stop") and 1 <= int(s["generated_tokens"]) <= 24, s
    assert int(s["prompt_tokens"]) > 0 and s["request_id"]
    # Words after the verb are one prompt.
    assert ok(cli(*GREEDY, "generate", *PROMPT.split(), address=server.address)) == ok(whole)


def test_json_output(server):
    text = ok(cli(*GREEDY, "generate", PROMPT, address=server.address))[:-1]
    result = json.loads(ok(cli(*GREEDY, "--json", "--logprobs", "2", "generate", PROMPT, address=server.address)))
    assert result["text"] == text
    done = result["complete"]
    assert done["generated_tokens"] == len(result["token_ids"]) == result["generated_tokens"] >= 1
    assert len(result["logprobs"]) == len(result["token_ids"])
    assert all(len(lp["top"]) == 2 for lp in result["logprobs"])
    assert done["finish_reason"] in ("FINISH_REASON_LENGTH", "FINISH_REASON_STOP")
    lines = [json.loads(line) for line in ok(cli(*GREEDY, "--json", "stream", PROMPT, address=server.address)).splitlines()]
    assert lines[0]["request_id"] and not lines[0]["token_ids"] and "complete" not in lines[0]
    assert "complete" in lines[-1] and all("complete" not in r for r in lines[:-1])
    assert "".join(r["text"] for r in lines) == text


def test_repeated_stop_flags(server):
    text = ok(cli(*GREEDY, "generate", PROMPT, address=server.address))[:-1]
    # A stop string from the middle of the greedy text: generation stops at its first occurrence.
    stop = next(text[i:i + 3] for i in range(4, len(text) - 3) if text[i:i + 3].isascii() and text[i:i + 3].isalnum())
    result = cli(*GREEDY, "--stop", "\x01never", "--stop", stop, "generate", PROMPT, address=server.address)
    assert ok(result)[:-1] == text[:text.index(stop)]
    s = summary(result)
    assert s["finish_reason"] == "stop" and json.loads(s["stop_string"]) == stop, s


def test_info_server_info_tokenize_health(server):
    info_text = ok(cli("info", address=server.address))
    assert 'family: "gated_deltanet"' in info_text
    info = json.loads(ok(cli("--json", "info", env={"MCSERVE_ADDRESS": server.address})))  # env → --address
    assert info["family"] == "gated_deltanet" and int(info["vocab_size"]) == 320 and info["num_slots"] == 16
    assert info["max_tokens_limit"] == LIMIT
    server_info = json.loads(ok(cli("--json", "server-info", address=server.address)))
    assert server_info["serving"] is True and server_info["slots_total"] == 16 and server_info["version"]
    assert "slots_total: 16" in ok(cli("server-info", address=server.address))
    ids = [int(t) for t in ok(cli("--add-bos", "tokenize", PROMPT, address=server.address)).split()]
    assert ids[0] == 1 and len(ids) > 2
    assert json.loads(ok(cli("--json", "tokenize", PROMPT, address=server.address)))["token_ids"] == ids[1:]
    prompt_tokens = int(summary(cli(*GREEDY, "generate", PROMPT, address=server.address))["prompt_tokens"])
    assert prompt_tokens == len(ids)
    assert ok(cli("health", address=server.address)) == "SERVING\n"
    assert json.loads(ok(cli("--json", "health", address=server.address))) == {"status": "SERVING"}


def long_stream(server, *extra):
    return subprocess.Popen([CLI, "--address", server.address, "--max-tokens", str(LIMIT), "--ignore-eos",
                             "--temperature", "0.8", "--seed", "1", *extra, "stream", PROMPT],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_abort_by_request_id_from_another_process(server):
    # The server's request id (the first JSON line) is a capability: another process (another
    # connection) holding it may abort the request. A client-chosen --request-id belongs to the
    # connection that chose it.
    stream = long_stream(server, "--json")
    try:
        request_id = json.loads(stream.stdout.readline())["request_id"]
        aborted = cli("abort", request_id, address=server.address)
        assert aborted.returncode == 0, aborted.stderr
        out, err = stream.communicate(timeout=20)
    finally:
        stream.kill()
    assert stream.returncode == 0, err
    s = summary(subprocess.CompletedProcess([], 0, out, err))
    assert s["finish_reason"] == "cancelled" and s["request_id"] == request_id and int(s["generated_tokens"]) < LIMIT
    again = cli("abort", request_id, address=server.address)
    assert again.returncode == 1 and again.stderr.startswith(b"mcserve-cli: NOT_FOUND: "), again.stderr


def test_interrupt_cancels_the_request(server):
    before = json.loads(ok(cli("--json", "server-info", address=server.address)))
    stream = long_stream(server)
    try:
        assert stream.stdout.read(1)  # generating
        stream.send_signal(signal.SIGINT)
        _, err = stream.communicate(timeout=20)
    finally:
        stream.kill()
    assert stream.returncode == 1 and b"mcserve-cli: CANCELLED: " in err, err
    deadline = time.time() + 15
    while True:  # the server aborted it and freed the slot
        info = json.loads(ok(cli("--json", "server-info", address=server.address)))
        if int(info["finished_cancelled"]) > int(before["finished_cancelled"]) and info["running"] == "0":
            break
        assert time.time() < deadline, info
        time.sleep(0.05)


@pytest.mark.parametrize("args, field, code", [
    (["--temperature", "-1"], "temperature", "INVALID_ARGUMENT"),    # the server's checks
    (["--top-p", "1.5"], "top_p", "INVALID_ARGUMENT"),
    (["--max-tokens", str(LIMIT + 1)], "max_tokens", "INVALID_ARGUMENT"),
    (["--logprobs", "21"], "logprobs", "INVALID_ARGUMENT"),
    (["--stop-token-ids", "5,100000"], "stop_token_ids[1]", "INVALID_ARGUMENT"),
    (["--max-tokens=-1"], "--max_tokens", "INVALID_ARGUMENT"),       # the client's
    (["--logit-bias", "7=2"], "--logit_bias", "INVALID_ARGUMENT"),
    (["--token-ids", "1,x"], "--token_ids", "INVALID_ARGUMENT"),
    (["--token-ids", "1,2"], "prompt", "INVALID_ARGUMENT"),          # and PROMPT text as well
])
def test_invalid_arguments_name_the_field(server, args, field, code):
    result = cli(*args, "generate", PROMPT, address=server.address)
    assert result.returncode == 1 and result.stdout == b"", result
    err = result.stderr.decode()
    assert err.startswith(f"mcserve-cli: {code}: ") and field in err, err


def test_token_id_prompt_and_bad_command_lines(server):
    ids = ok(cli("--add-bos", "tokenize", PROMPT, address=server.address)).split()
    by_ids = cli(*GREEDY, "--token-ids", ",".join(ids), "generate", address=server.address)
    assert ok(by_ids) == ok(cli(*GREEDY, "generate", PROMPT, address=server.address))
    out_of_vocab = cli("--token-ids", "1,100000", "generate", address=server.address)
    assert out_of_vocab.returncode == 1 and b"INVALID_ARGUMENT" in out_of_vocab.stderr and b"prompt token" in out_of_vocab.stderr
    for args in (["frobnicate"], [], ["info", "extra"], ["abort"]):
        result = cli(*args, address=server.address)
        assert result.returncode == 2 and result.stderr.startswith(b"mcserve-cli: INVALID_ARGUMENT: "), (args, result)
    down = cli("--timeout", "5s", "info", address="127.0.0.1:1")
    assert down.returncode == 1 and down.stderr.startswith(b"mcserve-cli: UNAVAILABLE: "), down.stderr
    help_text = cli("--help").stdout.decode() + cli("--help").stderr.decode()
    for flag in ("address", "api_key", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "timeout", "json",
                 "request_id", "token_ids", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                 "presence_penalty", "frequency_penalty", "logit_bias", "seed", "max_tokens", "min_tokens", "stop",
                 "stop_token_ids", "ignore_eos", "include_stop_str_in_output", "logprobs"):
        assert f"--{flag} (" in help_text, flag
    for verb in ("stream", "generate", "abort", "tokenize", "info", "server-info", "health"):
        assert f"  {verb} " in help_text, verb


def test_api_key():
    s = Server("--api-key", "sekret")
    try:
        for args, env in (([], None), (["--api-key", "wrong"], None), ([], {"MCSERVE_API_KEY": "wrong"})):
            result = cli(*args, "server-info", address=s.address, env=env)
            assert result.returncode == 1 and result.stderr.startswith(b"mcserve-cli: UNAUTHENTICATED: "), result
            streamed = cli(*args, "stream", "a", address=s.address, env=env)
            assert streamed.returncode == 1 and b"UNAUTHENTICATED" in streamed.stderr
        assert ok(cli("health", address=s.address)) == "SERVING\n"  # health needs no key
        assert "slots_total: 16" in ok(cli("--api-key", "sekret", "server-info", address=s.address))
        env = {"MCSERVE_API_KEY": "sekret"}
        assert summary(cli("--max-tokens", "3", "generate", "a", address=s.address, env=env))["finish_reason"]
        # The command line wins over the environment.
        assert cli("--api-key", "wrong", "info", address=s.address, env=env).returncode == 1
    finally:
        assert s.stop() == 0


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server certificate for DNS:localhost only, and a client certificate, all signed by the CA."""
    d = tmp_path_factory.mktemp("pki")
    p = {name: str(d / name) for name in ("ca.pem", "ca.key", "server.pem", "server.key", "client.pem",
                                          "client.key", "other_ca.pem", "other_ca.key")}
    for ca in ("ca", "other_ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN=test {ca}",
                "-keyout", p[f"{ca}.key"], "-out", p[f"{ca}.pem"])
    for who, ext in (("server", "subjectAltName=DNS:localhost"), ("client", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who}", "-keyout", p[f"{who}.key"],
                "-out", str(d / f"{who}.csr"))
        ext_file = d / f"{who}.ext"
        ext_file.write_text(ext + "\n")
        openssl("x509", "-req", "-in", str(d / f"{who}.csr"), "-CA", p["ca.pem"], "-CAkey", p["ca.key"],
                "-CAcreateserial", "-days", "1", "-extfile", str(ext_file), "-out", p[f"{who}.pem"])
    return p


def test_tls_and_mutual_tls(pki):
    s = Server("--tls-cert", pki["server.pem"], "--tls-key", pki["server.key"], "--tls-client-ca", pki["ca.pem"])
    try:
        client_cert = ["--tls-cert", pki["client.pem"], "--tls-key", pki["client.key"]]
        trusted = ["--tls-ca", pki["ca.pem"], "--timeout", "10s"]
        # The certificate names localhost only: 127.0.0.1 needs --tls-server-name.
        good = cli(*trusted, *client_cert, "--tls-server-name", "localhost", "--json", "info", address=s.address)
        assert json.loads(ok(good))["family"] == "gated_deltanet"
        assert ok(cli(*trusted, *client_cert, "--max-tokens", "4", "stream", "a", address=f"localhost:{s.port}"))
        for args, address in (
                (trusted + client_cert, s.address),                                         # name mismatch
                (trusted + ["--tls-server-name", "localhost"], s.address),                  # no client cert
                (["--tls-ca", pki["other_ca.pem"], *client_cert], f"localhost:{s.port}"),   # untrusted server
                (["--timeout", "5s"], s.address)):                                          # plaintext
            result = cli(*args, "info", address=address)
            assert result.returncode == 1 and result.stderr.startswith(b"mcserve-cli: UNAVAILABLE: "), (args, result)
        half = cli("--tls-ca", pki["ca.pem"], "--tls-cert", pki["client.pem"], "info", address=s.address)
        assert half.returncode == 2 and b"tls_cert and tls_key" in half.stderr, half.stderr
    finally:
        assert s.stop() == 0


if SERVE_LOAD:
    def test_serve_load_smoke(server, tmp_path):
        out = tmp_path / "result.json"
        run = subprocess.run([SERVE_LOAD, "--address", server.address, "--num-prompts", "4", "--max-concurrency", "2",
                              "--input-len", "8", "--output-len", "5", "--seed", "3", "--json", str(out)],
                             capture_output=True, timeout=60)
        assert run.returncode == 0, run.stderr.decode()
        assert "Serving Benchmark Result" in run.stdout.decode()
        r = json.loads(out.read_text())
        assert r["completed"] == 4 and r["failed"] == 0 and r["num_prompts"] == 4 and r["max_concurrency"] == 2
        assert r["total_input_tokens"] == 32 and r["total_output_tokens"] == 20
        assert r["duration"] > 0 and r["output_throughput"] > 0 and r["request_throughput"] > 0
        for metric in ("ttft", "tpot", "itl", "e2el"):
            # ITL may be 0: tokens that arrive in one message (the server coalesces) are 0 apart.
            assert (0 <= r[f"median_{metric}_ms"] <= r[f"p99_{metric}_ms"]) and r[f"mean_{metric}_ms"] >= 0, (metric, r)
            assert metric == "itl" or r[f"median_{metric}_ms"] > 0, (metric, r)
        assert r["mean_ttft_ms"] < r["mean_e2el_ms"] and r["errors"] == []

    def serve_load(address, *args, timeout=60):
        return subprocess.run([SERVE_LOAD, "--address", address, *args], capture_output=True, timeout=timeout)

    def test_serve_load_many_streams_at_once(server, tmp_path):
        # Unlimited concurrency: every stream in flight together, read by gRPC's threads.
        out = tmp_path / "result.json"
        run = serve_load(server.address, "--num-prompts", "24", "--input-len", "3", "--output-len", "7",
                         "--seed", "5", "--json", str(out))
        assert run.returncode == 0, run.stderr.decode()
        r = json.loads(out.read_text())
        assert r["completed"] == 24 and r["failed"] == 0 and r["total_output_tokens"] == 24 * 7, r
        assert r["errors"] == [] and r["mean_ttft_ms"] > 0

    def test_serve_load_reports_rejected_requests(server, tmp_path):
        # max_tokens past the server's --max-tokens-limit: each stream ends with the server's
        # INVALID_ARGUMENT, counted as failed, and the run exits 1 (nothing completed).
        out = tmp_path / "result.json"
        run = serve_load(server.address, "--num-prompts", "3", "--max-concurrency", "2", "--input-len", "2",
                         "--output-len", str(LIMIT + 1), "--json", str(out))
        assert run.returncode == 1, run.stderr.decode()
        r = json.loads(out.read_text())
        assert r["completed"] == 0 and r["failed"] == 3, r
        assert all(e.startswith("INVALID_ARGUMENT: max_tokens") for e in r["errors"]), r["errors"]

    def test_serve_load_ends_when_the_server_is_killed(tmp_path):
        # Streams that will not finish by themselves; the server dies under them. Every stream must
        # end (UNAVAILABLE or similar), and serve_load exit with what it has, not hang.
        s = Server()
        out = tmp_path / "result.json"
        load = subprocess.Popen([SERVE_LOAD, "--address", s.address, "--num-prompts", "6", "--max-concurrency", "4",
                                 "--input-len", "2", "--output-len", str(LIMIT), "--json", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            time.sleep(1.5)
            assert load.poll() is None, load.stderr.read().decode()
            s.proc.kill()
            s.proc.wait(timeout=10)
            _, err = load.communicate(timeout=30)
        finally:
            if load.poll() is None:
                load.kill()
        r = json.loads(out.read_text())
        assert load.returncode == 1 and r["completed"] == 0 and r["failed"] == 6, (r, err.decode())
        assert r["errors"] and all(e.split(":")[0] in ("UNAVAILABLE", "INTERNAL", "UNKNOWN") for e in r["errors"]), r
