"""The mcserve-client launcher (mcserve_client.cli) against a real mcserve: output, --json, abort, exit codes."""
from __future__ import annotations

import json
import subprocess

import pytest
from conftest import CLIENT_LAUNCHER, LIMIT, PROMPT, fixture_config, run_cli

from mcserve_client import Client

GREEDY = ["--temperature", "0", "--max-tokens", "24"]


@pytest.fixture(scope="module")
def client(server):
    with Client(server.address, timeout=30) as c:
        yield c


def cli(server, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return run_cli("--address", server.address, *args, **kwargs)


def test_stream_prints_what_generate_prints(server, client):
    streamed = cli(server, "stream", PROMPT, *GREEDY)
    generated = cli(server, "generate", PROMPT, *GREEDY)
    assert streamed.returncode == generated.returncode == 0, (streamed.stderr, generated.stderr)
    expected = client.generate(PROMPT, temperature=0, max_tokens=24).text
    assert streamed.stdout == generated.stdout == expected + "\n"
    assert "finish_reason=length" in streamed.stderr and "generated_tokens=24" in generated.stderr


def test_stream_json_is_one_object_per_chunk(server):
    lines = cli(server, "--json", "stream", PROMPT, *GREEDY, "--logprobs", "2").stdout.splitlines()
    objects = [json.loads(line) for line in lines]
    first, chunks, last = objects[0], objects[:-1], objects[-1]
    assert first["request_id"] and first["token_ids"] == [] and first["text"] == ""
    done = last["complete"]
    assert done["finish_reason"] == "length" and done["request_id"] == first["request_id"]
    tokens = [t for c in chunks for t in c["token_ids"]]
    assert done["generated_tokens"] == len(tokens) == 24
    assert [lp["token_id"] for c in chunks for lp in c["logprobs"]] == tokens
    result = json.loads(cli(server, "generate", PROMPT, *GREEDY, "--json").stdout)  # --json after the verb
    assert result["text"] == "".join(c["text"] for c in chunks) and result["token_ids"] == tokens
    assert result["completion"]["finish_reason"] == "length"


def test_stop_options_reach_the_server(server, client):
    tokens = client.generate(PROMPT, temperature=0, max_tokens=24, ignore_eos=True).token_ids
    out = cli(server, "--json", "generate", PROMPT, *GREEDY, "--ignore-eos", "--stop-token-ids", f"{tokens[3]},999")
    assert out.returncode == 3 and "stop_token_ids[1]" in out.stderr  # 999 is outside the vocabulary
    out = cli(server, "--json", "generate", PROMPT, *GREEDY, "--ignore-eos", "--stop-token-ids", str(tokens[3]))
    done = json.loads(out.stdout)["completion"]
    assert done["finish_reason"] == "stop" and done["stop_token_id"] == tokens[3]


def test_info_server_info_tokenize_health(server, client):
    info = cli(server, "info")
    assert info.returncode == 0 and "family: gated_deltanet\n" in info.stdout
    assert f"vocab_size: {fixture_config()['vocab_size']}\n" in info.stdout
    assert json.loads(cli(server, "info", "--json").stdout)["max_tokens_limit"] == LIMIT
    server_info = json.loads(cli(server, "--json", "server-info").stdout)
    assert server_info["serving"] is True and "device_pages" in server_info["checkpoints"]
    ids = cli(server, "tokenize", PROMPT, "--add-bos").stdout.split()
    assert [int(i) for i in ids] == client.tokenize(PROMPT, add_bos=True)
    health = cli(server, "health")
    assert (health.returncode, health.stdout) == (0, "SERVING\n")


def test_address_from_the_environment(server):
    out = run_cli("health", env={"MCSERVE_ADDRESS": server.address})
    assert (out.returncode, out.stdout) == (0, "SERVING\n")


def test_abort_from_a_second_process_cancels_the_stream(server, client):
    # The server's request id is a capability: another process (another connection) holding it may
    # abort the request. A client-chosen --request-id belongs to the connection that chose it.
    with client.stream(PROMPT, temperature=0.8, seed=1, max_tokens=LIMIT, ignore_eos=True) as stream:
        next(stream)
        aborted = cli(server, "abort", stream.request_id)
        assert (aborted.returncode, aborted.stdout) == (0, f"aborted {stream.request_id}\n"), aborted.stderr
        done = list(stream)[-1]
    assert done.finish_reason == "cancelled" and done.generated_tokens < LIMIT


@pytest.mark.parametrize("args, code, expected", [
    (["generate", PROMPT, "--top-p", "2"], 3, "mcserve-client: INVALID_ARGUMENT: top_p"),
    (["generate", "1,x", "--token-ids"], 3, "mcserve-client: INVALID_ARGUMENT: prompt"),
    (["abort", "nobody"], 3, "mcserve-client: NOT_FOUND: "),
    (["--address", "127.0.0.1:1", "info"], 5, "mcserve-client: UNAVAILABLE: "),
    (["info", "--tls-ca", "/nonexistent/ca.pem"], 2, "mcserve-client: root_certificates: cannot read"),
    (["generate", PROMPT, "--max-tokens", "many"], 2, "--max-tokens"),
])
def test_errors_exit_non_zero_with_the_code(server, args, code, expected):
    out = cli(server, *args)
    assert out.returncode == code and out.stdout == "", (out.returncode, out.stdout, out.stderr)
    assert expected in out.stderr, out.stderr
