"""mcserve-eval end to end on the fixture models.

Perplexity equals the PyTorch reference's (tests/reference/mcserve_ref: forward → log_softmax → NLL,
float64, with the reference's Memory Caching oracle for the MC cases) within 1e-3 relative, for the
totals and every position bucket; chunked feeding equals whole-window feeding; passkey runs are
seeded; bad input is a clear error and a non-zero exit. The binary comes from $MCSERVE_EVAL (CTest)."""
import json
import math
import os
import subprocess
import sys

import pytest
import sentencepiece as spm
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from mcserve_ref import CausalLM  # noqa: E402
from mcserve_ref.hope import HopeLM  # noqa: E402
from mcserve_ref.safetensors_io import load_model_dir  # noqa: E402

BIN = os.environ.get("MCSERVE_EVAL", "/tmp/build-eval/tools/eval/mcserve-eval")
MODELS = os.path.join(ROOT, "tests", "data", "models")
CORPUS = os.path.join(ROOT, "tests", "data", "tokenizer_corpus.txt")
BOS = 1
CONTEXT, BUCKET, WINDOWS = 40, 16, 3

torch.set_num_threads(1)


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, timeout=60)


def run_json(*args):
    r = run(*args, "--json", "-", "--threads", "1")
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def expect_error(r, *fragments):
    err = r.stderr.decode()
    assert r.returncode != 0, err
    assert "mcserve-eval: " in err
    for f in fragments:
        assert f in err, err


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    """A text of a few windows plus a partial one (dropped)."""
    path = tmp_path_factory.mktemp("text") / "text.txt"
    with open(CORPUS, encoding="utf-8") as f:
        path.write_text(f.read()[:700], encoding="utf-8")
    return str(path)


def reference_nll(model_name, mc, stream):
    """Per-position NLL [windows, CONTEXT] of the reference on the windows mcserve-eval scores."""
    d = os.path.join(MODELS, model_name)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    if mc is not None:
        cfg = dict(cfg, memory_caching=mc)
    lm = HopeLM if cfg["model_type"] == "hope" else CausalLM
    model = lm(cfg, load_model_dir(d), dtype=torch.float64)
    rows = []
    for w in range(WINDOWS):
        window = stream[w * CONTEXT:(w + 1) * CONTEXT]
        logits = model.forward([BOS] + window[:-1])
        logp = torch.log_softmax(logits, dim=-1)
        rows.append(-logp[torch.arange(CONTEXT), torch.tensor(window)])
    return torch.stack(rows)


CASES = [
    ("gated_deltanet", (), None),
    ("delta_net", (), None),
    ("gla", (), None),
    ("lattice", (), None),
    ("lattice", ("--mc-aggregation", "grm", "--mc-segment-size", "8"), {"aggregation": "grm", "segment_size": 8}),
    ("hope", (), None),
    ("hope_variants", (), None),
    # The fixture's own memory_caching: GRM, segments of 4, checkpoint mode, gate u_proj.
    ("gated_deltanet_mc_uproj", (), "config"),
    # Post-training MC (spec B.5.6): mean of the cached memories, independent segments.
    ("gated_deltanet", ("--mc-aggregation", "mean", "--mc-segment-size", "8", "--mc-init-mode", "independent"),
     {"aggregation": "mean", "segment_size": 8, "init_mode": "independent"}),
    ("gated_deltanet", ("--mc-aggregation", "ssc", "--mc-segment-size", "8", "--mc-top-k", "2", "--mc-gate", "q"),
     {"aggregation": "ssc", "segment_size": 8, "top_k": 2, "gate": "q"}),
]


@pytest.mark.parametrize("model_name,flags,mc", CASES, ids=lambda c: c if isinstance(c, str) else None)
def test_perplexity_equals_reference(text_file, model_name, flags, mc):
    out = run_json("perplexity", "--model", os.path.join(MODELS, model_name), "--text", text_file,
                   "--context", str(CONTEXT), "--bucket", str(BUCKET), "--max-windows", str(WINDOWS), "--chunk", "7",
                   *flags)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(MODELS, model_name, "tokenizer.model"))
    stream = sp.encode(open(text_file, encoding="utf-8").read())
    res = out["results"]
    assert res["text_tokens"] == len(stream)
    assert res["windows_available"] == len(stream) // CONTEXT and res["windows"] == WINDOWS
    assert res["scored_tokens"] == WINDOWS * CONTEXT
    nll = reference_nll(model_name, None if mc == "config" else mc, stream)
    ref_ppl = math.exp(float(nll.mean()))
    assert res["perplexity"] == pytest.approx(ref_ppl, rel=1e-3)
    assert res["mean_nll"] == pytest.approx(float(nll.mean()), rel=1e-3)
    assert [(b["begin"], b["end"]) for b in res["buckets"]] == [(0, 16), (16, 32), (32, 40)]
    for b in res["buckets"]:
        part = nll[:, b["begin"]:b["end"]]
        assert b["tokens"] == part.numel()
        assert b["perplexity"] == pytest.approx(math.exp(float(part.mean())), rel=1e-3)
    if mc is not None:
        assert out["settings"]["memory_caching"] is not None
    # Memory Caching must actually change the numbers against the plain model.
    if mc not in (None, "config"):
        plain = reference_nll(model_name, None, stream)
        assert abs(math.exp(float(plain.mean())) - ref_ppl) > 1e-3 * ref_ppl


@pytest.mark.parametrize("flags", [(), ("--mc-aggregation", "grm", "--mc-segment-size", "4")])
def test_chunked_equals_whole_window_feeding(text_file, flags):
    def ppl(chunk):
        out = run_json("perplexity", "--model", os.path.join(MODELS, "gated_deltanet"), "--text", text_file,
                       "--context", str(CONTEXT), "--chunk", str(chunk), *flags)
        return out["results"]

    whole, chunked, single = ppl(CONTEXT), ppl(3), ppl(1)
    for other in (chunked, single):
        assert other["perplexity"] == pytest.approx(whole["perplexity"], rel=1e-5)
        for a, b in zip(other["buckets"], whole["buckets"]):
            assert a["nll_sum"] == pytest.approx(b["nll_sum"], rel=1e-5)


def test_table_and_json_file(text_file, tmp_path):
    path = tmp_path / "out.json"
    r = run("perplexity", "--model", os.path.join(MODELS, "gated_deltanet"), "--text", text_file,
            "--context", "32", "--json", str(path))
    assert r.returncode == 0, r.stderr.decode()
    table = r.stdout.decode()
    data = json.loads(path.read_text())
    assert "perplexity %.4f" % data["results"]["perplexity"] in table
    assert "[0, 32)" in table
    assert data["settings"]["context"] == 32 and data["settings"]["subcommand"] == "perplexity"
    assert data["settings"]["memory_caching"] is None
    assert sum(b["nll_sum"] for b in data["results"]["buckets"]) == pytest.approx(data["results"]["nll_sum"])


def test_passkey_is_seeded_and_reports_every_trial(text_file):
    def passkey(seed, *extra):
        return run_json("passkey", "--model", os.path.join(MODELS, "gated_deltanet"), "--haystack", text_file,
                        "--length", "200", "--depth", "0.5", "--trials", "3", "--seed", str(seed), *extra)

    a, b, c = passkey(7), passkey(7), passkey(8)
    assert a == b
    assert [t["key"] for t in a["results"]["results"]] != [t["key"] for t in c["results"]["results"]]
    res = a["results"]
    assert res["trials"] == 3 and len(res["results"]) == 3
    assert res["accuracy"] == res["correct"] / 3
    for t in res["results"]:
        assert len(t["key"]) == 5 and t["key"].isdigit()
        assert 0.5 <= t["depth"] <= 0.6
        assert t["correct"] == t["generated"].lstrip().startswith(t["key"])
    assert a["settings"]["template"]["needle"] == "The pass key is {key}. Remember it. {key} is the pass key."
    trained = passkey(7, "--template", "trained")
    assert trained["settings"]["template"]["name"] == "trained"
    assert [t["key"] for t in trained["results"]["results"]] == [t["key"] for t in res["results"]]
    # Memory Caching flags apply to the passkey run too.
    mc = passkey(7, "--mc-aggregation", "mean", "--mc-segment-size", "16")
    assert mc["settings"]["memory_caching"].startswith("mean")


@pytest.mark.parametrize("args,fragments", [
    ((), ("expected one subcommand",)),
    (("evaluate",), ("unknown subcommand 'evaluate'",)),
    (("perplexity",), ("--text is required",)),
    (("perplexity", "--text", "/nonexistent/text.txt"), ("--text", "/nonexistent/text.txt", "No such file")),
    (("perplexity", "--text", "CORPUS", "--context", "1"), ("--context", "at least 2")),
    (("perplexity", "--text", "CORPUS", "--context", "100000"), ("fewer than one window",)),
    (("perplexity", "--text", "CORPUS", "--chunk", "0"), ("--chunk",)),
    (("perplexity", "--text", "CORPUS", "--mc-aggregation", "attention"), ("--mc-aggregation", "attention")),
    (("passkey",), ("--haystack is required",)),
    (("passkey", "--haystack", "CORPUS", "--length", "10"), ("shorter than the passkey template",)),
    (("passkey", "--haystack", "CORPUS", "--length", "100000"), ("haystack",)),
    (("passkey", "--haystack", "CORPUS", "--depth", "1.5"), ("--depth",)),
    (("passkey", "--haystack", "CORPUS", "--trials", "0"), ("trials",)),
    (("passkey", "--haystack", "CORPUS", "--template", "niah"), ("--template", "niah")),
])
def test_bad_input_is_a_clear_error(args, fragments):
    args = [CORPUS if a == "CORPUS" else a for a in args]
    expect_error(run(*args, "--model", os.path.join(MODELS, "gated_deltanet")), *fragments)


def test_empty_or_short_text_is_an_error(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    expect_error(run("perplexity", "--model", os.path.join(MODELS, "gated_deltanet"), "--text", str(path)),
                 "--text", str(path), "no text")
    path.write_bytes(b"  \n\n ")  # whitespace is text (tokens), but not a window's worth
    expect_error(run("perplexity", "--model", os.path.join(MODELS, "gated_deltanet"), "--text", str(path),
                     "--context", "16"), "--text", str(path), "fewer than one window of --context 16")


def test_invalid_utf8_text_is_an_error(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"The cat \xff\xfe watched")
    expect_error(run("perplexity", "--model", os.path.join(MODELS, "gated_deltanet"), "--text", str(path)),
                 "--text", str(path))
