"""deploy/grafana/mcserve-dashboard.json: a well-formed dashboard whose every query is valid PromQL (parsed
by promtool), that uses the ${datasource} variable, and that covers time to first token, inter-token
latency, throughput, queue, slot usage and the checkpoint tiers."""
import re
import subprocess

import pytest
import yaml

import deploy_paths
from deploy_paths import PROMTOOL
import metric_names

# Grafana's variables, replaced by values Prometheus accepts before promtool parses a query.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}


@pytest.fixture(scope="module")
def dashboard():
    return metric_names.load_dashboard(deploy_paths.DASHBOARD)


def panels(dashboard):
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def exprs(dashboard):
    return [t["expr"] for p in panels(dashboard) for t in p["targets"]]


def as_promql(query):
    for var, value in GRAFANA_VARIABLES.items():
        query = query.replace(var, value)
    query = re.sub(r"\$\{?(\w+)\}?", ".*", query)  # template variables ($job) sit inside =~ matchers
    m = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
    return m.group(1) if m else query


def promtool_parses(queries, tmp_path):
    """promtool's verdict on the queries as recording rules: (ok, output)."""
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query_{i}", "expr": as_promql(q)}
                                                        for i, q in enumerate(queries)]}]}
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    r = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    return r.returncode == 0, r.stdout + r.stderr


def test_panels_have_unique_ids_and_fit_the_grid(dashboard):
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in dashboard["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine


def test_every_target_uses_the_datasource_variable(dashboard):
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "job", "model_name", "instance"} <= names
    for p in panels(dashboard):
        assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}" and t["expr"], p["title"]


def test_every_query_is_valid_promql(dashboard, tmp_path):
    queries = exprs(dashboard) + [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    ok, out = promtool_parses(queries, tmp_path)
    assert ok, out


def test_promql_check_rejects_a_broken_query(tmp_path):
    ok, out = promtool_parses(['sum(rate(mcserve:generation_tokens_total{job=~"$job"}[$__rate_interval])'], tmp_path)
    assert not ok, out


def test_dashboard_covers_latency_throughput_queue_slots_and_tiers(dashboard):
    used = set().union(*(metric_names.in_promql(e) for e in exprs(dashboard)))
    for name in ("mcserve:time_to_first_token_seconds_bucket", "mcserve:inter_token_latency_seconds_bucket",
                 "mcserve:generation_tokens_total", "mcserve:num_requests_waiting",
                 "mcserve:state_slot_usage_perc", "mcserve:checkpoint_pages"):
        assert name in used, name
    tiers = [t for p in panels(dashboard) for t in p["targets"] if "mcserve:checkpoint_pages" in t["expr"]]
    assert any("by (tier)" in t["expr"] and "{{tier}}" in t["legendFormat"] for t in tiers)
