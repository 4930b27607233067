"""--compare: the sweeps measure several models, each with its own config.json (a model whose config
holds memory_caching runs with it); parts run separately merge into one report; per-depth table
and plot."""
import json
import shutil

import pytest

import merge_reports
import passkey_sweep
import plot
import ppl_sweep
import sweep
from test_quality_tools import EVAL, FIXTURE, TEXT


@pytest.fixture(scope="module")
def mc_model(tmp_path_factory):
    """The fixture model with a memory_caching object in its config (GRM, segments of 16)."""
    d = tmp_path_factory.mktemp("mc") / "gdn-mc"
    shutil.copytree(FIXTURE, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["memory_caching"] = dict(aggregation="grm", segment_size=16, init_mode="checkpoint", gate="q")
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def test_ppl_compare_uses_each_models_own_config(tmp_path, mc_model):
    out = tmp_path / "ppl.json"
    ppl_sweep.main(["--eval", EVAL, "--text", TEXT, "--lengths", "16", "64", "--tokens", "64", "--bucket", "16",
                    "--compare", "base=" + FIXTURE, "mc=" + mc_model, "--out", str(out)])
    recs = json.loads(out.read_text())["results"]
    by = {(r["label"], r["length"]): r["perplexity"] for r in recs}
    assert [r["model"] for r in recs][::2] == ["tests/data/models/gated_deltanet", mc_model]
    assert by[("base", 16)] == by[("mc", 16)]      # one segment: nothing cached
    assert by[("base", 64)] != by[("mc", 64)]      # past it the MC config acts


def test_passkey_parts_merge_with_depth_table_and_plot(tmp_path, mc_model):
    parts = []
    for label, model in (("base", FIXTURE), ("mc", mc_model)):
        parts.append(tmp_path / ("%s.json" % label))
        passkey_sweep.main(["--eval", EVAL, "--haystack", TEXT, "--lengths", "96", "--depths", "0", "0.5",
                            "--trials", "2", "--compare", "base=" + FIXTURE, "mc=" + mc_model, "--only", label,
                            "--out", str(parts[-1])])
    merged = tmp_path / "pk.json"
    merge_reports.main([str(merged)] + [str(p) for p in parts])
    report = json.loads(merged.read_text())
    assert [r["label"] for r in report["results"]] == ["base", "mc"] and len(report["command"]) == 2
    table = sweep.depth_table(report["results"]).splitlines()
    assert table[0] == "| variant | depth | 96 |" and len(table) == 2 + 4
    assert table[2].startswith("| base | 0 | ") and table[2].endswith("/2 |")
    png = tmp_path / "pk.png"
    plot.plot_depths(report, str(png))
    assert png.read_bytes()[:4] == b"\x89PNG"
