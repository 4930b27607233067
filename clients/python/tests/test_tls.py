"""TLS: a server certificate signed by a test CA, mutual TLS with a client certificate (library and CLI)."""
from __future__ import annotations

import grpc
import pytest
from conftest import PROMPT, Server, make_ca, make_signed, run_cli

from mcserve_client import Client, FinishReason, McserveError


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    ca = make_ca(d, "test-ca")
    server = make_signed(d, "localhost", ca, ["subjectAltName=DNS:localhost,IP:127.0.0.1",
                                              "extendedKeyUsage=serverAuth"])
    client = make_signed(d, "test-client", ca, ["extendedKeyUsage=clientAuth"])
    other_ca = make_ca(d, "other-ca")
    return {"ca": ca, "server": server, "client": client, "other_ca": other_ca}


@pytest.fixture(scope="module")
def server(certs):
    s = Server("--tls-cert", str(certs["server"]["cert"]), "--tls-key", str(certs["server"]["key"]),
               "--tls-client-ca", str(certs["ca"]["cert"]))
    yield s
    assert s.stop() == 0


def mutual(server, certs, **kwargs) -> Client:
    return Client(server.address, root_certificates=certs["ca"]["cert"], client_cert=certs["client"]["cert"],
                  client_key=certs["client"]["key"], timeout=10, **kwargs)


def test_mutual_tls_verified_against_the_ca(server, certs):
    with mutual(server, certs) as client:
        assert client.model_info().family == "gated_deltanet"
        assert client.generate(PROMPT, max_tokens=3, ignore_eos=True).finish_reason == FinishReason.LENGTH
    with mutual(server, certs, server_name="localhost") as client:  # the certificate's DNS name
        assert client.tokenize("a")


@pytest.mark.parametrize("how", ["plaintext", "no client certificate", "server not trusted", "wrong name"])
def test_refused_connections_are_unavailable(server, certs, how):
    ca, client = certs["ca"]["cert"], certs["client"]
    options = {
        "plaintext": {},
        "no client certificate": dict(root_certificates=ca),
        "server not trusted": dict(root_certificates=certs["other_ca"]["cert"], client_cert=client["cert"],
                                   client_key=client["key"]),
        "wrong name": dict(root_certificates=ca, client_cert=client["cert"], client_key=client["key"],
                           server_name="not-the-server"),
    }[how]
    with Client(server.address, timeout=10, **options) as c:
        with pytest.raises(McserveError) as error:
            c.model_info()
    assert error.value.code == grpc.StatusCode.UNAVAILABLE, error.value


def test_inconsistent_tls_options_are_refused():
    with pytest.raises(ValueError, match="client_cert and client_key"):
        Client("localhost:1", root_certificates="ca.pem", client_cert="c.pem")
    with pytest.raises(ValueError, match="root_certificates"):
        Client("localhost:1", client_cert="c.pem", client_key="k.pem")


def test_cli_over_mutual_tls(server, certs):
    tls = ["--tls-ca", str(certs["ca"]["cert"]), "--tls-cert", str(certs["client"]["cert"]),
           "--tls-key", str(certs["client"]["key"])]
    out = run_cli("--address", server.address, *tls, "--json", "generate", PROMPT, "--max-tokens", "3",
                  "--ignore-eos")
    assert out.returncode == 0 and '"finish_reason": "length"' in out.stdout, out.stderr
    out = run_cli("--address", server.address, "--tls-ca", str(certs["ca"]["cert"]), "health")
    assert out.returncode == 5 and out.stderr.startswith("mcserve-client: UNAVAILABLE: "), out.stderr
