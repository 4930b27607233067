"""The API key: right key accepted, wrong or missing key → UNAUTHENTICATED (library and CLI); health needs none."""
from __future__ import annotations

import grpc
import pytest
from conftest import PROMPT, Server, run_cli

from mcserve_client import Client, FinishReason, HealthStatus, McserveError

KEY = "sekret-key"


@pytest.fixture(scope="module")
def server():
    s = Server("--api-key", KEY)
    yield s
    assert s.stop() == 0


def test_right_key_is_accepted(server):
    with Client(server.address, api_key=KEY, timeout=30) as client:
        assert client.model_info().vocab_size > 0
        assert client.generate(PROMPT, max_tokens=3, ignore_eos=True).finish_reason == FinishReason.LENGTH


@pytest.mark.parametrize("key", [None, "wrong", ""])
def test_wrong_or_missing_key_is_unauthenticated(server, key):
    with Client(server.address, api_key=key, timeout=10) as client:
        for call in (client.model_info, client.server_info, lambda: client.tokenize("a"),
                     lambda: client.abort("x"), lambda: client.generate(PROMPT, max_tokens=2)):
            with pytest.raises(McserveError) as error:
                call()
            assert error.value.code == grpc.StatusCode.UNAUTHENTICATED, error.value
        assert client.health() == HealthStatus.SERVING  # health needs no key


def test_cli_key_from_flag_and_environment(server):
    ok = run_cli("--address", server.address, "info", "--api-key", KEY)
    assert ok.returncode == 0 and "family: gated_deltanet" in ok.stdout, ok.stderr
    ok = run_cli("--address", server.address, "tokenize", "a", env={"MCSERVE_API_KEY": KEY})
    assert ok.returncode == 0 and ok.stdout.strip(), ok.stderr
    wrong = run_cli("--address", server.address, "--api-key", "wrong", "generate", PROMPT,
                    env={"MCSERVE_API_KEY": KEY})  # the flag beats the environment
    assert wrong.returncode == 4 and wrong.stderr.startswith("mcserve-client: UNAUTHENTICATED: "), wrong.stderr
    missing = run_cli("--address", server.address, "server-info", env={"MCSERVE_API_KEY": ""})
    assert missing.returncode == 4 and "UNAUTHENTICATED" in missing.stderr
