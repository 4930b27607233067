"""The real mcserve binary on loopback (ports picked by the server, read from its first line), its
/metrics, its gRPC health check, and `mcserve --help`'s flags."""
import os
import re
import selectors
import signal
import subprocess
import time
import urllib.request

LINE = re.compile(r"^mcserve listening grpc=(\S+):(\d+) http=(\S+):(\d+)$")


class LiveServer:
    """`mcserve --host 127.0.0.1 --grpc-port 0 --http-port 0 ARGS` with extra environment `env`."""

    def __init__(self, binary, *args, env=None, timeout=60):
        e = {k: v for k, v in os.environ.items() if not k.startswith("MCSERVE_")}
        e.update(env or {})
        self.proc = subprocess.Popen([binary, "--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, text=True)
        line = self._first_line(timeout)
        m = LINE.match(line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"first line {line!r}; stderr: {self.proc.stderr.read()}")
        self.grpc = f"{m.group(1)}:{m.group(2)}"
        self.http = f"{m.group(3)}:{m.group(4)}"

    def _first_line(self, timeout):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            self.proc.kill()
            raise AssertionError(f"no first line within {timeout} s")
        return self.proc.stdout.readline().rstrip("\n")

    def get(self, path, timeout=10):
        """(status, body) of GET http://HOST:PORT/path."""
        with urllib.request.urlopen(f"http://{self.http}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()

    def grpc_health(self):
        """grpc.health.v1.Health/Check for the whole server, as a kubelet gRPC probe sends it."""
        import grpc  # Debian's python3-grpcio
        with grpc.insecure_channel(self.grpc) as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                        request_serializer=lambda b: b, response_deserializer=lambda b: b)
            return check(b"", timeout=5)  # b"\x08\x01" = SERVING

    def stop(self):
        """SIGTERM, then the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _help(binary, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("MCSERVE_")}
    e.update(env or {})
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30, env=e)
    return r.stdout + r.stderr


def help_flags(binary):
    """The flag names `mcserve --help` documents (underscore spelling: grpc_port)."""
    flags = re.findall(r"^\s+--(\w+) \(", _help(binary), re.M)
    assert flags
    return set(flags)


def help_values(binary, env):
    """{flag: value} as `mcserve --help` shows them with environment `env`: absl prints `currently: V`
    for a flag set away from its default, else the flag has its `default: V`."""
    text = _help(binary, env)
    text = text[:text.find("Try --helpfull")] if "Try --helpfull" in text else text
    text = re.sub(r"^\s*Flags from .*:$", "", text, flags=re.M)  # one header per defining file
    out = {}
    blocks = re.split(r"^\s+--(?=\w+ \()", text, flags=re.M)[1:]
    for block in blocks:
        block = " ".join(block.split())
        name = block.split(" ", 1)[0]
        m = re.search(r"\); default: (.*?);(?: currently: (.*?);)?$", block)
        assert m, block
        out[name] = (m.group(2) if m.group(2) is not None else m.group(1)).strip('"')
    return out


def scrape_samples(text):
    """{sample name: [label strings]} of a Prometheus text exposition, and {family: type}."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ", 3)
            types[family] = kind
        elif line and not line.startswith("#"):
            name = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0)
            samples.setdefault(name, []).append(line)
    return samples, types


def wait_until(predicate, timeout=10, step=0.05):
    """Polls predicate() until it is true (returns True) or the timeout passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False
