"""An mcserve process on loopback for the integration tests: started with the fixture model and free
ports, its addresses parsed from the first line it prints, its threads and memory read from /proc,
and stopped with SIGTERM (one recipe for the tests that need nothing more special)."""
import os
import re
import signal
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "tests", "data", "models", "gated_deltanet")
LINE = re.compile(r"^mcserve listening grpc=(\S+):(\d+) http=(\S+):(\d+)$")


class McserveProcess:
    """`server` started on `model` (the fixture model unless given) with both ports free, one CPU thread
    and `args` after."""

    def __init__(self, server, *args, env=None, model=FIXTURE):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen(
            [server, "--model", model, "--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0",
             "--threads", "1", "--shutdown-grace-seconds", "0.5", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        line = self.proc.stdout.readline().decode().rstrip("\n")
        m = LINE.match(line)
        assert m, (line, self.proc.stderr.read().decode() if self.proc.poll() is not None else "")
        self.grpc_address = f"{m.group(1)}:{m.group(2)}"
        self.http_addr = (m.group(3), int(m.group(4)))
        self.url = f"http://{m.group(3)}:{m.group(4)}"

    def status_field(self, name):
        """An integer field of /proc/<pid>/status (e.g. "Threads", "VmRSS" in kB)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith(name + ":")).split()[1])

    def threads(self):
        return self.status_field("Threads")

    def stop(self, timeout=30):
        """SIGTERM, then the exit code (killed and raised after `timeout` seconds)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
