"""tools/quality end to end on a small fixture: the sweeps run every variant through mcserve-eval,
record what it measured, compare like with like, and plot; bad input fails with a clear message.
The binary comes from $MCSERVE_EVAL (set by CTest)."""
import json
import os

import pytest

import eval_runner
import passkey_sweep
import plot
import ppl_sweep
import sweep
import variants as V

EVAL = os.environ.get("MCSERVE_EVAL", eval_runner.DEFAULT_EVAL)
FIXTURE = os.path.join(eval_runner.ROOT, "tests", "data", "models", "gated_deltanet")
TEXT = os.path.join(eval_runner.ROOT, "tests", "data", "tokenizer_corpus.txt")


def test_variant_table():
    vs = V.variants()
    assert [v.label for v in vs][:2] == ["base", "mean-add (independent)"]
    assert len(vs) == 1 + len(V.AGGREGATIONS) * len(V.INIT_MODES) == 11
    assert len({v.label for v in vs}) == len(vs)
    grm = [v for v in vs if v.name == "grm" and v.init_mode == "checkpoint"][0]
    assert grm.flags[grm.flags.index("--mc-segment-size") + 1] == "256"
    assert grm.flags[grm.flags.index("--mc-gate") + 1] == "q"
    assert [v.name for v in V.variants(only=["base", "ssc-k2"])] == ["base", "ssc-k2", "ssc-k2"]


@pytest.fixture(scope="module")
def ppl_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("ppl") / "ppl.json"
    ppl_sweep.main(["--eval", EVAL, "--model", FIXTURE, "--text", TEXT, "--lengths", "4", "16",
                    "--tokens", "64", "--segment", "4", "--bucket", "4", "--out", str(out)])
    return json.loads(out.read_text())


def test_ppl_sweep_measures_every_variant_on_the_same_tokens(ppl_report):
    recs = ppl_report["results"]
    assert len(recs) == 11 * 2
    assert all(r["scored_tokens"] == 64 for r in recs)
    assert {r["windows"] for r in recs if r["length"] == 4} == {16}
    by = {(r["label"], r["length"]): r["perplexity"] for r in recs}
    # Windows of one segment cache nothing: every variant is exactly the base model there.
    assert {by[(v.label, 4)] for v in V.variants()} == {by[("base", 4)]}
    # Across segments the variants act (each differs from the base model).
    assert all(by[(v.label, 16)] != by[("base", 16)] for v in V.variants()[1:])
    assert ppl_report["model"] == "tests/data/models/gated_deltanet" and ppl_report["model_name"] == "gated_deltanet"


def test_markdown_table_has_a_row_per_variant(ppl_report):
    table = sweep.markdown_table(ppl_report["results"], "perplexity", "%.2f").splitlines()
    assert table[0] == "| variant | 4 | 16 |" and len(table) == 2 + 11
    assert table[2].startswith("| base | ")


def test_plot_writes_png(ppl_report, tmp_path):
    png = tmp_path / "ppl.png"
    plot.plot(ppl_report, str(png))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000


def test_passkey_sweep_pools_depths_and_plots(tmp_path):
    out = tmp_path / "pk.json"
    passkey_sweep.main(["--eval", EVAL, "--model", FIXTURE, "--haystack", TEXT, "--lengths", "96", "128",
                        "--depths", "0", "0.5", "--trials", "2", "--segment", "16", "--only", "base", "grm",
                        "--out", str(out)])
    report = json.loads(out.read_text())
    recs = report["results"]
    assert [(r["label"], r["length"]) for r in recs] == [
        ("base", 96), ("base", 128), ("grm (independent)", 96), ("grm (independent)", 128),
        ("grm (checkpoint)", 96), ("grm (checkpoint)", 128)]
    for r in recs:
        assert r["trials"] == 4 and [a["asked_depth"] for a in r["answers"]] == [0.0, 0.0, 0.5, 0.5]
        assert r["correct"] == sum(a["correct"] for a in r["answers"]) and r["accuracy"] == r["correct"] / 4
    # Same seeds for every variant: the same keys in the same order.
    assert len({tuple(a["key"] for a in r["answers"]) for r in recs if r["length"] == 96}) == 1
    png = tmp_path / "pk.png"
    plot.plot(report, str(png))
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_bad_input_names_the_problem(tmp_path, capsys):
    with pytest.raises(SystemExit):
        ppl_sweep.main(["--text", TEXT, "--lengths", "3", "--tokens", "64", "--out", str(tmp_path / "x.json")])
    assert "--tokens 64 must be a multiple" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="mcserve-eval.*nowhere"):
        ppl_sweep.main(["--eval", EVAL, "--model", FIXTURE, "--text", str(tmp_path / "nowhere.txt"),
                        "--lengths", "4", "--tokens", "4", "--only", "base", "--out", str(tmp_path / "x.json")])
    with pytest.raises(RuntimeError, match="scored 60 tokens, not 64|text too short"):
        short = tmp_path / "short.txt"
        short.write_text("The cat watched the gulls. " * 3)
        ppl_sweep.main(["--eval", EVAL, "--model", FIXTURE, "--text", str(short), "--lengths", "4",
                        "--tokens", "64", "--only", "base", "--out", str(tmp_path / "x.json")])
