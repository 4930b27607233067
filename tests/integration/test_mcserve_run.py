"""mcserve-run end to end: streams text, matches the reference's greedy tokens, and turns every kind
of bad input into a clear error naming the file and the problem, a non-zero exit and no crash.

The binary comes from $MCSERVE_RUN (set by CTest)."""
import json
import os
import shutil
import struct
import subprocess
import sys

import pytest
import sentencepiece as spm
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("MCSERVE_RUN", os.path.join(ROOT, "build", "tools", "mcserve-run"))
FIXTURE = os.path.join(ROOT, "tests", "data", "models", "gated_deltanet")
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from mcserve_ref import CausalLM  # noqa: E402


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, timeout=120)


def copy_fixture(tmp_path):
    d = tmp_path / "model"
    shutil.copytree(FIXTURE, d)
    return d


def read_header(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_file(path, header, payload):
    raw = json.dumps(header).encode()
    raw += b" " * (-(8 + len(raw)) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + payload)


def expect_error(result, *fragments):
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 1, (result.returncode, stderr)  # an error exit, not a signal
    assert stderr.startswith("mcserve-run: "), stderr
    for f in fragments:
        assert f in stderr, (f, stderr)


def test_streams_text_from_the_bundled_model():
    r = run("--prompt", "The cat watched", "--max-tokens", "24", "--seed", "3")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("utf-8")  # valid UTF-8 throughout
    assert len(text.strip()) > 0


def test_greedy_output_is_the_reference_continuation():
    golden = json.load(open(os.path.join(FIXTURE, "golden.json")))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(FIXTURE, "tokenizer.model"))
    assert sp.encode(golden["prompt"], add_bos=True) == golden["prompt_ids"]
    r = run("--model", FIXTURE, "--prompt", golden["prompt"], "--temperature", "0",
            "--max-tokens", str(len(golden["greedy_ids"])))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode("utf-8").rstrip("\n") == sp.decode(golden["greedy_ids"])


@pytest.mark.parametrize("device", ["cpu", "cuda-emu"])
def test_lattice_is_served_with_the_reference_continuation(device):
    """model_type lattice (docs/model-format.md): the greedy text is the reference's, without MC and with
    the tests/data/mc/lattice grm_independent_c4 variant."""
    lattice = os.path.join(ROOT, "tests", "data", "models", "lattice")
    golden = json.load(open(os.path.join(lattice, "golden.json")))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(lattice, "tokenizer.model"))
    args = ("--model", lattice, "--prompt", golden["prompt"], "--temperature", "0", "--device", device,
            "--max-tokens", str(len(golden["greedy_ids"])))
    r = run(*args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode("utf-8").rstrip("\n") == sp.decode(golden["greedy_ids"])
    variants = json.load(open(os.path.join(ROOT, "tests", "data", "mc", "lattice", "variants.json")))
    grm = next(v for v in variants if v["name"] == "grm_independent_c4")
    r = run(*args, "--mc-aggregation", "grm", "--mc-segment-size", "4", "--mc-init-mode", "independent")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode("utf-8").rstrip("\n") == sp.decode(grm["greedy_ids"])


def test_cuda_emu_device_generates_the_same_greedy_text_as_cpu():
    args = ("--model", FIXTURE, "--prompt", "The cat watched", "--temperature", "0", "--max-tokens", "16")
    cpu = run(*args, "--device", "cpu")
    emu = run(*args, "--device", "cuda-emu")
    assert cpu.returncode == 0 and emu.returncode == 0, emu.stderr
    assert cpu.stdout == emu.stdout and cpu.stdout.strip()
    mc = ("--mc-aggregation", "ssc", "--mc-segment-size", "4", "--mc-top-k", "2")
    assert run(*args, *mc, "--device", "cpu").stdout == run(*args, *mc, "--device", "cuda-emu").stdout


def test_ssc_with_checkpoints_on_the_host_tier_stages_them_and_generates_the_same_text():
    args = ("--model", FIXTURE, "--prompt", "The cat watched the gulls from the window sill", "--temperature", "0",
            "--max-tokens", "16", "--mc-aggregation", "ssc", "--mc-segment-size", "4", "--mc-top-k", "2",
            "--device", "cuda-emu")
    resident = run(*args)
    staged = run(*args, "--checkpoint-device-mib", "0", "--ssc-hot-pages", "2")
    assert resident.returncode == 0 and staged.returncode == 0, staged.stderr
    assert staged.stdout == resident.stdout and staged.stdout.strip()
    assert " 0 on the host tier, 0 staged" in resident.stderr.decode()
    assert "0 on the device tier" in staged.stderr.decode()
    assert " 0 staged" not in staged.stderr.decode()


def test_full_checkpoint_store_is_a_clear_error():
    r = run("--model", FIXTURE, "--prompt", "The cat watched the gulls from the window sill", "--max-tokens", "4",
            "--mc-aggregation", "grm", "--mc-segment-size", "4", "--checkpoint-device-mib", "0",
            "--checkpoint-host-mib", "0")
    expect_error(r, "checkpoint store full", "device tier", "host tier")
    expect_error(run("--prompt", "hi", "--checkpoint-device-mib", "-3"), "--checkpoint-device-mib", "-3")
    expect_error(run("--prompt", "hi", "--ssc-hot-pages", "-1"), "--ssc-hot-pages")


def test_unknown_device():
    expect_error(run("--prompt", "hi", "--device", "tpu"), "--device", "tpu")


def test_same_seed_same_text():
    args = ("--prompt", "A window", "--max-tokens", "32", "--seed", "11", "--top-p", "0.9")
    assert run(*args).stdout == run(*args).stdout


def test_memory_caching_flags_apply_to_a_checkpoint_without_it():
    r = run("--model", FIXTURE, "--prompt", "The cat watched the gulls from the window sill, and the gulls",
            "--mc-aggregation", "ssc", "--mc-segment-size", "4", "--mc-top-k", "2", "--max-tokens", "24", "--seed", "5")
    assert r.returncode == 0, r.stderr
    assert "memory caching: ssc top-2, constant segments of 4" in r.stderr.decode()
    assert r.stdout.decode("utf-8").strip()
    # MC changes the output of a prompt longer than a segment, greedily.
    base = run("--model", FIXTURE, "--prompt", "The cat watched the gulls from the window sill", "--temperature", "0")
    mc = run("--model", FIXTURE, "--prompt", "The cat watched the gulls from the window sill", "--temperature", "0",
             "--mc-aggregation", "grm", "--mc-segment-size", "4")
    assert base.returncode == 0 and mc.returncode == 0
    assert base.stdout != mc.stdout


def test_bad_memory_caching_flag():
    expect_error(run("--prompt", "hi", "--mc-aggregation", "attention"), "--mc-aggregation", "attention")
    expect_error(run("--prompt", "hi", "--mc-segment-size", "0"), "--mc-segment-size")


def test_truncated_weights(tmp_path):
    d = copy_fixture(tmp_path)
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-100])
    expect_error(run("--model", str(d), "--prompt", "hi"), "model.safetensors")


def test_header_offsets_past_the_end(tmp_path):
    d = copy_fixture(tmp_path)
    f = d / "model.safetensors"
    header, payload = read_header(f)
    name = sorted(k for k in header if k != "__metadata__")[0]
    header[name]["data_offsets"][1] += 1 << 20
    write_file(f, header, payload)
    expect_error(run("--model", str(d), "--prompt", "hi"), "model.safetensors", name)


def test_overlapping_tensors(tmp_path):
    d = copy_fixture(tmp_path)
    f = d / "model.safetensors"
    header, payload = read_header(f)
    names = [k for k in header if k != "__metadata__"]
    a, b = sorted(names, key=lambda k: header[k]["data_offsets"][0])[:2]
    header[b]["data_offsets"] = list(header[a]["data_offsets"])
    header[b]["shape"] = list(header[a]["shape"])
    header[b]["dtype"] = header[a]["dtype"]
    write_file(f, header, payload)
    expect_error(run("--model", str(d), "--prompt", "hi"), "model.safetensors")


def test_wrong_dtype(tmp_path):
    d = copy_fixture(tmp_path)
    f = d / "model.safetensors"
    header, payload = read_header(f)
    header["model.norm.weight"]["dtype"] = "F64"
    write_file(f, header, payload)
    expect_error(run("--model", str(d), "--prompt", "hi"), "model.norm.weight", "F64")


def test_wrong_shape(tmp_path):
    d = copy_fixture(tmp_path)
    cfg = json.load(open(d / "config.json"))
    cfg["hidden_size"] = 48
    json.dump(cfg, open(d / "config.json", "w"))
    expect_error(run("--model", str(d), "--prompt", "hi"), "model.safetensors", "shape")


def test_missing_tensor(tmp_path):
    d = copy_fixture(tmp_path)
    f = d / "model.safetensors"
    header, payload = read_header(f)
    # Rename rather than drop, so the file stays well-formed and only the name is missing.
    header["model.layers.1.attn.o_proj.weight.renamed"] = header.pop("model.layers.1.attn.o_proj.weight")
    write_file(f, header, payload)
    expect_error(run("--model", str(d), "--prompt", "hi"), "model.layers.1.attn.o_proj.weight")


def test_unknown_model_type(tmp_path):
    d = copy_fixture(tmp_path)
    cfg = json.load(open(d / "config.json"))
    cfg["model_type"] = "mamba9"
    json.dump(cfg, open(d / "config.json", "w"))
    expect_error(run("--model", str(d), "--prompt", "hi"), "mamba9", "config.json")


def test_unreadable_tokenizer(tmp_path):
    d = copy_fixture(tmp_path)
    (d / "tokenizer.model").write_bytes(b"this is not a sentencepiece model")
    expect_error(run("--model", str(d), "--prompt", "hi"), "tokenizer.model")


def test_prompt_not_utf8():
    r = subprocess.run([BIN.encode(), b"--prompt", b"caf\xc3 \xff"], capture_output=True, timeout=60)
    expect_error(r, "--prompt", "UTF-8")


def test_missing_model_directory(tmp_path):
    expect_error(run("--model", str(tmp_path / "nowhere"), "--prompt", "hi"), "nowhere")


# The trained default model (models/kjv-gdn) and what it says, greedily, after two prompts.
DEFAULT_MODEL = os.path.join(ROOT, "models", "kjv-gdn")
DEFAULT_MODEL_GREEDY = {
    "In the beginning God":
        ", and said, I am the LORD God of Israel. And he said, I will not be a prophet, but",
    "And Jesus said unto them,":
        " Behold, I am against thee, and I will be with thee, and I will be with thee, and I will",
}


@pytest.mark.parametrize("prompt", sorted(DEFAULT_MODEL_GREEDY))
def test_default_model_is_the_trained_kjv_model(prompt):
    """No --model: the bundled trained model; its greedy text is pinned and is the reference's."""
    r = run("--prompt", prompt, "--temperature", "0", "--max-tokens", "24")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("utf-8").rstrip("\n")
    assert text == DEFAULT_MODEL_GREEDY[prompt]
    sp = spm.SentencePieceProcessor(model_file=os.path.join(DEFAULT_MODEL, "tokenizer.model"))
    prompt_ids = sp.encode(prompt, add_bos=True)
    greedy = CausalLM.from_dir(DEFAULT_MODEL, dtype=torch.float64).greedy(prompt_ids, 24)
    whole = sp.decode(prompt_ids[1:] + greedy)
    assert whole.startswith(prompt) and whole[len(prompt):] == text
