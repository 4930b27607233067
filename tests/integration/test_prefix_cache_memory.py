"""The prefix cache's memory is visible and bounded: after a long prompt, /metrics reports the cache's
entries and bytes, the bytes never exceed --prefix-cache-mib, and a small budget evicts (least
recently used) instead of growing.

Run by CTest (`mcserve_prefix_cache_integration`), which sets $MCSERVE_SERVER."""
import json
import os
import re
import urllib.request

import pytest

SERVER = os.environ.get("MCSERVE_SERVER")
if not SERVER:
    pytest.skip("MCSERVE_SERVER not set (run: ctest -R mcserve_prefix_cache_integration)", allow_module_level=True)

from mcserve_process import McserveProcess  # noqa: E402


class Server(McserveProcess):
    def __init__(self, *args):
        super().__init__(SERVER, "--max-slots", "2", *args)

    def complete(self, prompt_ids):
        body = json.dumps({"prompt": prompt_ids, "max_tokens": 1}).encode()
        req = urllib.request.Request(self.url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def metric(self, name):
        text = urllib.request.urlopen(self.url + "/metrics", timeout=10).read().decode()
        m = re.search(r'^%s\{model_name="[^"]*"\} (\S+)$' % re.escape(name), text, re.M)
        assert m, name
        return float(m.group(1))

    def stop(self):
        assert super().stop() == 0


def long_prompt(n, salt):
    return [3 + (i * 31 + salt * 17) % 250 for i in range(n)]


def test_cache_size_is_reported_and_within_its_budget():
    s = Server()
    try:
        assert s.metric("mcserve:prefix_cache_budget_bytes") == 1024 * 2**20
        assert s.metric("mcserve:prefix_cache_entries") == 0
        assert s.metric("mcserve:prefix_cache_bytes") == 0
        s.complete(long_prompt(2048, 1))
        entries, size = s.metric("mcserve:prefix_cache_entries"), s.metric("mcserve:prefix_cache_bytes")
        assert entries in (31, 32), entries  # one per whole 64-token block of the prompt
        assert size > 0
        per_entry = size / entries
        # The same prompt again hits the cache and adds nothing.
        s.complete(long_prompt(2048, 1))
        assert s.metric("mcserve:prefix_cache_entries") == entries
        assert s.metric("mcserve:prefix_cache_hits_total") >= 1
    finally:
        s.stop()

    # A budget of about four entries: the cache evicts rather than grow past it.
    budget_mib = 4.5 * per_entry / 2**20
    s = Server("--prefix-cache-mib", f"{budget_mib:.9f}")
    try:
        budget = s.metric("mcserve:prefix_cache_budget_bytes")
        assert abs(budget - budget_mib * 2**20) <= 1
        for salt in range(3):
            s.complete(long_prompt(1024, 10 + salt))
            assert s.metric("mcserve:prefix_cache_bytes") <= budget
        assert 1 <= s.metric("mcserve:prefix_cache_entries") <= 4
        assert s.metric("mcserve:prefix_cache_evictions_total") > 0
    finally:
        s.stop()
