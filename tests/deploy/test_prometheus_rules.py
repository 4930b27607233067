"""deploy/prometheus/mcserve-rules.yaml passes `promtool check rules` and its unit tests
(`promtool test rules mcserve-rules.test.yaml`); the alerts carry a severity and a summary."""
import os
import shutil
import subprocess

import yaml

import deploy_paths
from deploy_paths import PROMTOOL


def promtool(*args, cwd=None):
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_promtool_check_rules():
    r = promtool("check", "rules", deploy_paths.RULES)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_promtool_unit_tests_pass():
    r = promtool("test", "rules", os.path.basename(deploy_paths.RULES_TEST), cwd=os.path.dirname(deploy_paths.RULES_TEST))
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_promtool_unit_tests_can_fail(tmp_path):
    """A wrong expectation in the unit tests makes promtool fail (the tests compare values)."""
    text = open(deploy_paths.RULES_TEST).read()
    assert "value: 7.475" in text
    shutil.copy(deploy_paths.RULES, tmp_path / os.path.basename(deploy_paths.RULES))
    (tmp_path / "bad.test.yaml").write_text(text.replace("value: 7.475", "value: 7.4"))
    r = promtool("test", "rules", "bad.test.yaml", cwd=tmp_path)
    assert r.returncode != 0 and "7.475" in r.stdout + r.stderr, r.stdout + r.stderr


def test_every_alert_is_unit_tested_and_described():
    rules = [r for g in yaml.safe_load(open(deploy_paths.RULES))["groups"] for r in g["rules"]]
    tested = {t["alertname"] for group in yaml.safe_load(open(deploy_paths.RULES_TEST))["tests"]
              for t in group.get("alert_rule_test", [])}
    alerts = [r for r in rules if "alert" in r]
    assert alerts
    for a in alerts:
        assert a["labels"]["severity"] in ("critical", "warning", "info"), a["alert"]
        assert a["annotations"]["summary"] and a["annotations"]["description"], a["alert"]
    assert {a["alert"] for a in alerts} - tested == set()
