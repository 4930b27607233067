"""mcserve's OpenAI-compatible routes through an independent client: the `openai` npm package (pinned
by openai_node/package-lock.json, installed into the build tree at test time) runs
openai_node/client.cjs against a live mcserve serving a copy of the fixture model with a chat
template added (tokenizer_config.json): completions (n = 2, echo, streaming with include_usage),
chat completions (plain, streamed, n = 2), bad requests, and /tokenize, /detokenize, /version.

Run by CTest (`mcserve_openai_node_integration`), which sets $MCSERVE_SERVER and
$MCSERVE_OPENAI_NPM_DIR. Skipped when $MCSERVE_SERVER is not set; fails (never skips) when npm
cannot install the package."""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

import pytest

SERVER = os.environ.get("MCSERVE_SERVER")
if not SERVER:
    pytest.skip("MCSERVE_SERVER not set (run: ctest -R mcserve_openai_node_integration)", allow_module_level=True)

from mcserve_process import FIXTURE, McserveProcess  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openai_node")
NPM_DIR = os.environ.get("MCSERVE_OPENAI_NPM_DIR") or os.path.join(tempfile.gettempdir(), "mcserve-openai-npm")
# A chat template in the supported subset (docs/http_api.md), with the special tokens' text.
TOKENIZER_CONFIG = {
    "bos_token": "<s>",
    "eos_token": "</s>",
    "chat_template": "{{ bos_token }}{% for message in messages %}"
                     "{% if message['role'] == 'system' %}{{ message['content'] }}\n"
                     "{% elif message['role'] == 'user' %}{{ 'User: ' + message['content'] }}\n"
                     "{% else %}{{ 'Assistant: ' + message['content'] + eos_token }}\n{% endif %}"
                     "{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}",
}


def install_openai():
    """`npm ci` of the lockfile into NPM_DIR unless already there; returns its node_modules."""
    os.makedirs(NPM_DIR, exist_ok=True)
    files = ("package.json", "package-lock.json")
    digest = hashlib.sha256(b"".join(open(os.path.join(HERE, f), "rb").read() for f in files)).hexdigest()
    stamp, modules = os.path.join(NPM_DIR, ".installed"), os.path.join(NPM_DIR, "node_modules")
    with open(os.path.join(NPM_DIR, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isdir(modules) and os.path.exists(stamp) and open(stamp).read() == digest:
            return modules
        if shutil.which("npm") is None:
            pytest.fail("npm is not installed (scripts/setup.sh installs it): cannot install the openai package")
        for f in files:
            shutil.copyfile(os.path.join(HERE, f), os.path.join(NPM_DIR, f))
        r = subprocess.run(["npm", "ci", "--prefix", NPM_DIR, "--no-audit", "--no-fund", "--ignore-scripts",
                            "--loglevel=error"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            pytest.fail(f"npm could not install the openai package from the npm registry (unreachable?):\n{r.stderr}")
        with open(stamp, "w") as f:
            f.write(digest)
    return modules


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = str(tmp_path_factory.mktemp("model") / "gated_deltanet")
    shutil.copytree(FIXTURE, model)
    with open(os.path.join(model, "tokenizer_config.json"), "w") as f:
        json.dump(TOKENIZER_CONFIG, f)
    s = McserveProcess(SERVER, "--max-slots", "4", model=model)
    yield s
    assert s.stop() == 0


def test_openai_npm_client(server):
    modules = install_openai()
    env = dict(os.environ, MCSERVE_URL=server.url, MCSERVE_OPENAI_MODULES=modules)
    r = subprocess.run(["node", os.path.join(HERE, "client.cjs")], capture_output=True, text=True, env=env,
                       timeout=240)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["ok", "completions", "ok", "chat", "ok", "errors", "ok", "vllm", "routes"]
