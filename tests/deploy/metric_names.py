"""The metric names that PromQL expressions, the Grafana dashboard, the prometheus-adapter rules and the
HorizontalPodAutoscaler use, and the check that the server exports each of them."""
import json
import re

import yaml

NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def in_promql(expr):
    """Metric names in a PromQL expression (or a Grafana query: label_values(...), $variables): every
    identifier containing ':' (mcserve's names and recorded ones) or starting with 'mcserve', after string
    literals and [range] / [range:step] brackets are removed."""
    expr = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"<<[^>]*>>", "", expr)  # prometheus-adapter's templates (<<.Series>>)
    return {n for n in NAME.findall(expr) if ":" in n or n.startswith("mcserve")}


def in_rules(path):
    """(names used in the expressions, names the recording rules define) of a Prometheus rules file."""
    used, recorded = set(), set()
    for group in yaml.safe_load(open(path))["groups"]:
        for rule in group["rules"]:
            used |= in_promql(rule["expr"])
            if "record" in rule:
                recorded.add(rule["record"])
    return used, recorded


def _strings(node, keys):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in keys and isinstance(v, str):
                yield v
            yield from _strings(v, keys)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v, keys)


def in_dashboard(dashboard):
    """Names in a Grafana dashboard's panel targets (expr) and template variables (query, definition)."""
    names = set()
    for text in _strings(dashboard, {"expr", "query", "definition"}):
        names |= in_promql(text)
    return names


def in_adapter_rules(path):
    """Names in prometheus-adapter rules: seriesQuery, metricsQuery and the exposed name."""
    names = set()
    for rule in yaml.safe_load(open(path))["rules"]:
        names |= in_promql(rule["seriesQuery"]) | in_promql(rule["metricsQuery"])
        names.add(rule.get("name", {}).get("as", ""))
    return names - {""}


def in_hpa(obj):
    """Names of the Pods / Object / External metrics a HorizontalPodAutoscaler scales on."""
    names = set()
    for metric in obj["spec"].get("metrics", []):
        spec = metric.get(metric["type"][0].lower() + metric["type"][1:], {})
        if "metric" in spec:
            names.add(spec["metric"]["name"])
    return names


def unknown(names, exported, recorded=frozenset()):
    """The names that are neither sample names of the live scrape nor recorded by our rules."""
    return sorted(n for n in names if n not in exported and n not in recorded)


def load_dashboard(path):
    with open(path) as f:
        return json.load(f)
