"""Every metric name the rules, the dashboard, the HorizontalPodAutoscaler, the prometheus-adapter rules and
the docs use is exported by the real mcserve (a live scrape of /metrics); histograms appear as
_bucket/_sum/_count; recorded names do not shadow exported ones. The checker itself rejects made-up names."""
import re

import pytest

import deploy_paths
import k8s_render
import metric_names

HISTOGRAMS = ("mcserve:time_to_first_token_seconds", "mcserve:inter_token_latency_seconds",
              "mcserve:e2e_request_latency_seconds")


@pytest.fixture(scope="module")
def exported(scrape):
    samples, _ = scrape
    return set(samples)


@pytest.fixture(scope="module")
def recorded():
    return metric_names.in_rules(deploy_paths.RULES)[1]


def test_histograms_are_exported_as_buckets_sum_and_count(scrape):
    samples, types = scrape
    for family in HISTOGRAMS:
        assert types.get(family) == "histogram", family
        for suffix in ("_bucket", "_sum", "_count"):
            assert family + suffix in samples, family + suffix
        assert any('le="+Inf"' in line for line in samples[family + "_bucket"]), family
        assert family not in samples  # only the suffixed series exist


def test_rule_names_are_exported_or_recorded(exported, recorded):
    used, _ = metric_names.in_rules(deploy_paths.RULES)
    assert used
    assert metric_names.unknown(used, exported, recorded) == []
    assert recorded.isdisjoint(exported), "a recording rule reuses an exported name"


def test_dashboard_names_are_exported(exported):
    used = metric_names.in_dashboard(metric_names.load_dashboard(deploy_paths.DASHBOARD))
    assert len(used) >= 10
    assert metric_names.unknown(used, exported) == []


def test_autoscaler_and_adapter_names_are_exported(exported, rendered):
    for name in ("cpu", "gpu"):
        hpa = metric_names.in_hpa(k8s_render.find(rendered[name], "HorizontalPodAutoscaler"))
        assert hpa == {"mcserve:num_requests_waiting"}
        assert metric_names.unknown(hpa, exported) == []
    adapter = metric_names.in_adapter_rules(deploy_paths.ADAPTER_RULES)
    assert "mcserve:num_requests_waiting" in adapter
    assert metric_names.unknown(adapter, exported) == []


def test_service_monitor_path_serves_the_metrics(scrape, rendered):
    """The ServiceMonitor scrapes the path the live scrape came from (/metrics)."""
    (endpoint,) = k8s_render.find(rendered["cpu"], "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics" and scrape[0]


def test_docs_name_only_exported_or_recorded_metrics(scrape, recorded):
    """docs/deploy.md names exported series, histogram families (documented with their suffixes) or
    recorded series."""
    samples, types = scrape
    with open(deploy_paths.DOCS) as f:
        names = set(re.findall(r"mcserve:[A-Za-z_][A-Za-z0-9_:]*", f.read()))  # not image tags (mcserve:0.1.0)
    assert len(names) >= 15
    histograms = {f for f, t in types.items() if t == "histogram"}
    assert metric_names.unknown(names, set(samples) | histograms, recorded) == []


def test_checker_rejects_names_the_server_does_not_export(exported, recorded):
    """A dashboard or rule naming a made-up metric, vLLM's underscore spelling, or a histogram without its
    suffix is reported; names inside strings, label matchers and ranges are not metric names."""
    dashboard = {"panels": [{"targets": [
        {"expr": 'sum(rate(mcserve:bogus_total{job=~"$job"}[$__rate_interval]))'},
        {"expr": "mcserve_num_requests_waiting > 0"},
        {"expr": "histogram_quantile(0.9, rate(mcserve:time_to_first_token_seconds[5m]))"},
        {"expr": 'mcserve:num_requests_running{model_name="mcserve:not_a_metric"}[5m:30s]'}]}]}
    used = metric_names.in_dashboard(dashboard)
    assert metric_names.unknown(used, exported, recorded) == [
        "mcserve:bogus_total", "mcserve:time_to_first_token_seconds", "mcserve_num_requests_waiting"]
    assert metric_names.unknown({"mcserve:num_requests_waiting:sum"}, exported) == [
        "mcserve:num_requests_waiting:sum"]  # recorded names only count where the rules are loaded
