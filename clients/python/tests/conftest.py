"""Shared by the mcserve_client tests: a real mcserve on loopback and certificates made with openssl.

Run by CTest (`python_client_test`), which sets $MCSERVE_SERVER (the server binary), $PYTHONPATH (the
package and its generated stubs in <build>/clients/python) and $MCSERVE_CLIENT (the launcher)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "data" / "models" / "gated_deltanet"
LIMIT = 200000  # --max-tokens-limit: long requests run for many seconds unless aborted
PROMPT = "The cat watched"
_LINE = re.compile(r"^mcserve listening grpc=(\S+):(\d+) http=(\S+):(\d+)$")


def _required_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"${name} is not set: run these tests with `ctest -R python_client_test`")
    return value


SERVER_BINARY = _required_env("MCSERVE_SERVER")
CLIENT_LAUNCHER = _required_env("MCSERVE_CLIENT")


def fixture_config() -> Dict[str, object]:
    """The fixture model's config.json."""
    return json.loads((FIXTURE / "config.json").read_text())


class Server:
    """One mcserve process on 127.0.0.1 with free ports; `address` is its gRPC HOST:PORT."""

    def __init__(self, *args: str, env: Optional[Dict[str, str]] = None) -> None:
        self.proc = subprocess.Popen(
            [SERVER_BINARY, "--model", str(FIXTURE), "--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0",
             "--threads", "1", "--max-tokens-limit", str(LIMIT), "--shutdown-grace-seconds", "0.5", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
        line = self.proc.stdout.readline().decode().rstrip("\n")
        match = _LINE.match(line)
        if match is None:
            self.proc.kill()
            raise RuntimeError(f"mcserve did not start: {line!r} {self.proc.stderr.read().decode()}")
        self.address = f"{match.group(1)}:{match.group(2)}"

    def stop(self) -> int:
        """SIGTERM, then the exit code (0 expected)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


@pytest.fixture(scope="module")
def server():
    """A plaintext server without an API key, one per test module."""
    s = Server()
    yield s
    assert s.stop() == 0


def run_cli(*args: str, env: Optional[Dict[str, str]] = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """Runs the mcserve-client launcher; stdout and stderr as text."""
    return subprocess.run([CLIENT_LAUNCHER, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(directory: Path, name: str) -> Dict[str, Path]:
    """A self-signed CA (EC P-256): {"cert", "key"}."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
             "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign", "-keyout", str(key), "-out", str(cert))
    return {"cert": cert, "key": key}


def make_signed(directory: Path, name: str, ca: Dict[str, Path], extensions: List[str]) -> Dict[str, Path]:
    """A certificate for CN=`name` signed by `ca`, with the given v3 extension lines: {"cert", "key"}."""
    cert, key, csr, ext = (directory / f"{name}.pem", directory / f"{name}.key", directory / f"{name}.csr",
                           directory / f"{name}.ext")
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr))
    ext.write_text("\n".join(extensions) + "\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca["cert"]), "-CAkey", str(ca["key"]), "-CAcreateserial",
             "-days", "1", "-extfile", str(ext), "-out", str(cert))
    return {"cert": cert, "key": key}
